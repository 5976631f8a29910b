"""Continuous propagation with a panel resident in both PE memory banks (``SpadPanel.res``
and ``resb``, regions ``WR`` and ``WB``: the rows in bank B read copies of the vectors in
bank A) beside its input history in the scratchpad (one beat per word, stored from PE row
0 and loaded into every row, :func:`sw.transfer.emit_spad_vector`) on the chip RTL: two
samples through the pipeline and out, recorded on the per-cycle model against the golden
trainer, replayed on the RTL (Icarus); every beat and counter equal to the per-cycle
model's, the weights unloaded from the RTL (the scratchpad pages, the rows in bank A,
then those in bank B) equal to the golden's. The panel's other rows are paged from the
scratchpad, their loads and stores inside the resident rows' forward GEMV
(:mod:`sw.train_cp_hide`, the loads under a write predicate). The same with every row
resident, and with the layer paged by request (its history in the PE memories, one page
from the scratchpad), in make test-all."""

from __future__ import annotations

import numpy as np
import pytest

from sim.chip_run import ChipPhase, run_chip_session
from sim.sessions import ChipSession
from sw.golden_train_cp import GoldenChipCP
from sw.mlp import MLP
from sw.train import init_weights
from sw.train_cp import compile_chip_cp
from tests.rtl.test_chip_dram import CFG_CP

#: 2 cores of 2 x 2 PEs (test_chip_dram's CP chip) with a larger bank B, so that layer
#: 0's panel fits both banks once its input history is in the scratchpad
CFG = CFG_CP.replace(mem_b_words=256)


#: 128 + 256 words per PE and no DRAM: layer 0 of a 40-24-6 network keeps 2 + 8 local rows
#: resident and its history in the scratchpad, and pages the other 2 rows
CFG_HIDE = CFG.replace(dram_mib=0, ucode_depth=1024)


@pytest.mark.parametrize("cfg,sizes,forced", [
    # the pages' moves inside the resident rows' forward GEMV (sw/train_cp_hide.py: loads
    # under a write predicate), rows resident in both banks, the history in the scratchpad
    (CFG_HIDE, (40, 24, 6), {"hide_pages": True}),
    # every row resident (make test-all: the case above has rows in both banks and the
    # history in the scratchpad)
    pytest.param(CFG, (24, 24, 6), {}, marks=pytest.mark.slow),
    # layer 0 paged by request: the history stays in the PE memories, rows resident in both
    # banks and one page from the scratchpad (make test-all: the first case moves pages)
    pytest.param(CFG, (24, 24, 6), {"spad": [0]}, marks=pytest.mark.slow),
], ids=["hidden", "resident", "paged"])
def test_cp_resident_rows_in_both_banks_rtl(require_simulator, cfg, sizes, forced):
    require_simulator("icarus")
    mlp = MLP(sizes, "mse", 0.125)
    tp = compile_chip_cp(cfg, mlp, **forced)
    forced = {k: v for k, v in forced.items() if k != "hide_pages"}   # the compiler's choice against the updates' swaps
    sp = tp.spad[0]
    assert sp.res > 0 and sp.resb > 0
    if forced:
        assert len(sp.pages) >= 1 and sp.hist < 0
    else:
        assert sp.hist >= 0 and bool(sp.pages) == sp.hide
    W0 = init_weights(mlp, cfg.fmt, 3)
    sess = ChipSession(cfg, "model", record=True)
    tp.init(sess, W0)
    gold = GoldenChipCP(cfg, mlp, W0, groups=tp.groups, fused=tp.fused, **forced)
    rng = np.random.default_rng(5)
    n, L = 2, tp.latency_steps()
    X, T = rng.normal(size=(n, mlp.n_in)), rng.normal(size=(n, mlp.n_out)) * 0.5
    for s in range(n + 2 * L):
        x, t = (X[s] if s < n else None), (T[s - L] if 0 <= s - L < n else None)
        r = tp.run_step(sess, x, t)
        g = gold.step(x, t)
        assert np.array_equal(r.raw["out"], g["raw"]) and r.loss == g["loss"], s
        assert r.cycles == tp.step_cycles()
    want = gold.weights(padded=True)
    phases = list(sess.phases)
    unload = tp.unload_weights_phases()
    assert [name for _, name in unload] == ["cp-unload-W", "cp-unload-WR", "cp-unload-WB"]
    phases += [ChipPhase(imgs, None, name) for imgs, name in unload]
    rtl = run_chip_session(cfg, phases, backend="rtl", sim="icarus",
                           name="chip-cp-banks-" + ("paged" if forced else "hidden" if sp.pages else "resident"))
    model = run_chip_session(cfg, phases, backend="model")
    for p, (pr, pm) in enumerate(zip(rtl, model)):
        for k, (a, b) in enumerate(zip(pr, pm)):
            assert a.data == b.data and a.counters == b.counters, (phases[p].name, k)
    got = tp.decode_weights(rtl[-len(unload):], padded=True)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
