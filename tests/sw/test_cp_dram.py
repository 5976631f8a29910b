"""Continuous propagation with weight panels streamed from DRAM (sw/train_cp_dram.py):
hidden layers' panels forced into each core's DRAM on a small chip, and chosen by the
compiler when the scratchpad does not hold them; every step's output, loss and weights
bit for bit against GoldenChipCP through filling, steady state and draining on both chip
engines, cycles and every core's DRAM counters as predicted, describe() and errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from arch.config import PRESETS
from sim.sessions import ChipSession
from sw.golden_train_cp import GoldenChipCP
from sw.mlp import MLP
from sw.train import TrainCompileError, init_weights
from sw.train_cp import compile_chip_cp
from sw.train_dram import DramPanel, panel_tier
from sw.train_paging import SpadPanel

#: chip-small (4 cores of 4x4) with a 4 KiB scratchpad and 1 MiB of DRAM per core
CFG = replace(PRESETS["chip-small"], spad_kib=4, dram_mib=1)
NET = (9, 30, 24, 4)


def _run(cfg, mlp, engine, n, kw, backward="auto", stop=None):
    """``n`` samples through the pipeline and out (``n + 2L`` steps; ``stop``: only the
    first ``stop`` steps), everything checked after every step. Each layer on its own
    cores unless ``kw`` says otherwise (sharing a core would relieve the memories these
    tests fill)."""
    tp = compile_chip_cp(cfg, mlp, backward=backward, **{"shared": (), **kw})
    W0 = init_weights(mlp, cfg.fmt, 3)
    sess = ChipSession(cfg, engine)
    tp.init(sess, W0)
    gold = GoldenChipCP(cfg, mlp, W0, groups=tp.groups, fused=tp.fused,
                        **{k: v for k, v in kw.items() if k in ("spad", "page_rows", "dram")})
    rng = np.random.default_rng(5)
    X = rng.normal(size=(n, mlp.n_in))
    T = rng.integers(0, mlp.n_out, n) if mlp.loss == "softmax_ce" else rng.normal(size=(n, mlp.n_out)) * 0.5
    L = tp.latency_steps()
    for s in range(n + 2 * L if stop is None else stop):
        x = X[s] if s < n else None
        t = T[s - L] if 0 <= s - L < n else None
        r = tp.run_step(sess, x, t)
        g = gold.step(x, t)
        assert np.array_equal(r.raw["out"], g["raw"]) and r.loss == g["loss"], s
        got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), f"step {s}: weights differ"
        assert r.cycles == tp.step_cycles()
        for k, c in enumerate(r.core_counters if cfg.dram_mib else []):
            d = tp.dram_per_step(k)
            assert (c["dram_rd_beats"], c["dram_wr_beats"], c["dma_busy_cycles"], c["dma_stall_cycles"]) == (
                d["rd"], d["wr"], d["busy"], d["stall"]), (s, k)
    return tp, sess, gold


@pytest.mark.parametrize("backward", ["fused", "separate"])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
@pytest.mark.parametrize("dram", [[1], [0, 1]])
def test_cp_dram_fast_bit_exact(dram, loss, backward):
    mlp = MLP(NET, loss, 0.3)
    tp, *_ = _run(CFG, mlp, "fast", 3, dict(spad=[0, 1], page_rows=4, dram=dram), backward)
    assert {l for l, sp in tp.spad.items() if isinstance(sp, DramPanel)} == set(dram) == set(tp.meta["dram_layers"])
    k = tp.cores_of(dram[0])[0]
    d = tp.dram_per_step(k)
    sp = tp.spad[dram[0]]
    assert d["rd"] == d["wr"] == sp.beats(CFG.nr)         # each page loaded and stored once per step
    assert d["busy"] == d["hidden"] + d["stall"] + d["tail"] and d["hidden"] > 0
    assert "streamed from each core's DRAM" in tp.describe()


def test_cp_dram_cycle_engine_bit_exact():
    mlp = MLP(NET, "softmax_ce", 0.3)
    _run(CFG, mlp, "model", 1, dict(spad=[0, 1], page_rows=4, dram=[0, 1]), stop=3)


def test_cp_dram_chosen_when_spad_is_short():
    """A panel larger than the scratchpad: streamed from DRAM by the compiler's choice
    (without DRAM it does not fit, by any placement)."""
    mlp = MLP((96, 64, 8, 4), "mse", 0.05)
    cfg = replace(PRESETS["chip-small"], mem_a_words=128, mem_b_words=128, spad_kib=2, dram_mib=1)
    with pytest.raises(TrainCompileError, match="does not fit the CP mapping"):
        compile_chip_cp(replace(cfg, dram_mib=0), mlp, shared=())
    with pytest.raises(TrainCompileError, match="does not fit the CP mapping"):
        compile_chip_cp(replace(cfg, dram_mib=0), mlp)
    tp, *_ = _run(cfg, mlp, "fast", 2, {})
    assert tp.meta["dram_layers"] == [0]
    text = tp.describe()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("W0 panels:"))
    assert "streamed from each core's DRAM" in line and "exceeds the 256-beat scratchpad" in line


def test_cp_dram_errors():
    mlp = MLP(NET, "mse", 0.3)
    with pytest.raises(TrainCompileError, match="this configuration has none"):
        compile_chip_cp(replace(CFG, dram_mib=0), mlp, spad=[1], dram=[1])
    with pytest.raises(TrainCompileError, match="dram layers must be a non-empty subset of the paged layers"):
        compile_chip_cp(CFG, mlp, spad=[1], dram=[0])


@pytest.mark.parametrize("mem,net,layer,tier,engine,kw", [
    ((64, 128), (64, 80, 8, 4), 0, DramPanel, "fast", {}),    # history and DRAM staging slots in the scratchpad
    # history beside the scratchpad panel (the cost model's own choice pages layer 0, on one core)
    ((32, 128), (32, 64, 16, 4), 1, SpadPanel, "fast", {"groups": [2, 1, 1], "backward": "fused"}),
    ((32, 128), (32, 64, 16, 4), 0, None, "fast", {"groups": [2, 1, 1]}),   # history in the scratchpad, every row resident
], ids=["dram", "spad", "resident"])
def test_cp_history_in_scratchpad(mem, net, layer, tier, engine, kw):
    """A layer whose cores do not hold its panel beside the input history: the history
    goes to the scratchpad's top (one beat per word, a store and a load per step in the
    tail, zeros at init) when that moves fewer words than paging the rows it frees,
    bit for bit through filling and draining, cycles as predicted. With the history
    there, the panel may fit both banks whole (no page: ``tier`` None)."""
    cfg = replace(PRESETS["chip-small"], mem_a_words=mem[0], mem_b_words=mem[1], spad_kib=4, dram_mib=1,
                  ucode_depth=2048)
    mlp = MLP(net, "mse", 0.05)
    kw = dict(kw)
    tp, *_ = _run(cfg, mlp, engine, 1 if engine == "model" else 3, kw, kw.pop("backward", "auto"))
    sp = tp.spad[layer]
    assert sp.hist == cfg.spad_depth - 2 * (mlp.n_layers - 1) * (-(-tp.N[layer] // cfg.nr))
    assert isinstance(sp, DramPanel) == (tier is DramPanel)
    assert bool(sp.pages) == (tier is not None)
    label = panel_tier(sp)                  # Table 2's "weights" column
    if tier is None:
        assert label == "PE memory"
    else:
        assert label.endswith("DRAM" if tier is DramPanel else "scratchpad")
        assert label.startswith("PE memory + ") == bool(sp.lead)
    if tier is None:                     # the whole panel in WR and WB: nothing of it in the scratchpad
        assert sp.lead == -(-tp.P[layer] // cfg.nr) and sp.res and sp.resb
        assert "WP" not in tp.allocs[tp.cores_of(layer)[0]].items
        assert "resident in the PE memories, the first" in tp.describe()
    assert "hist_spad" in tp.allocs[tp.cores_of(layer)[0]].meta
    assert "the input history" in tp.describe()


def test_cp_resident_rows_without_dram():
    """A panel larger than the scratchpad on a chip without DRAM: the rows the PE memories
    hold stay resident and only the rest is paged, from the scratchpad; bit for bit, each
    paged word loaded and stored once per step, and no DRAM asked for."""
    cfg = replace(PRESETS["chip-small"], mem_a_words=128, mem_b_words=128, spad_kib=2, dram_mib=0)
    mlp = MLP((72, 64, 8, 4), "mse", 0.05)
    tp, sess, gold = _run(cfg, mlp, "fast", 2, {})
    sp = tp.spad[0]
    lp, ln = -(-tp.P[0] // cfg.nr), -(-tp.N[0] // cfg.nr)
    assert cfg.nr * lp * ln > cfg.spad_depth                  # the whole panel does not fit the scratchpad
    assert not isinstance(sp, DramPanel) and sp.lead > 0 and sp.pages and sp.lead + sp.lrows == lp
    assert tp.meta["dram_layers"] == [] and panel_tier(sp) == "PE memory + scratchpad"
    k = tp.cores_of(0)[0]
    ctr = tp.run_step(sess, None, None).core_counters[k]
    hist = 2 * ln if sp.hist >= 0 else 0                      # the history's store and load, a beat per word
    assert ctr["spad_rd_beats"] == ctr["spad_wr_beats"] == sp.beats(cfg.nr) + hist // 2


@pytest.mark.parametrize("engine", ["fast"])        # the per-cycle model: as above, 2 minutes here
def test_cp_mixed_panel(engine):
    """A panel larger than the scratchpad: its leading pages stay in the scratchpad after
    the staging slots, only the others are streamed from DRAM (MixedPanel); bit for
    bit, DRAM counters = the DRAM pages only, on both engines."""
    from sw.train_dram import MixedPanel

    cfg = replace(PRESETS["chip-small"], mem_a_words=128, mem_b_words=128, spad_kib=4, dram_mib=1,
                  ucode_depth=2048)
    mlp = MLP((128, 96, 8, 4), "mse", 0.05)
    tp, *_ = _run(cfg, mlp, engine, 2 if engine == "fast" else 1, {})
    sp = tp.spad[0]
    assert isinstance(sp, MixedPanel) and 0 < sp.split < len(sp.pages)
    d = tp.dram_per_step(tp.cores_of(0)[0])
    assert d["rd"] == d["wr"] == sp.dram_beats(cfg.nr) < sp.beats(cfg.nr)
    assert f"the first {sp.split} in scratchpad beats" in tp.describe()


def test_cp_resident_rows_of_a_streamed_panel():
    """A streamed panel keeps the leading rows its cores' PE memories hold beside the page
    buffer resident (SpadPanel.res), pages the rest (scratchpad, then DRAM); bit for bit,
    DRAM counters as predicted, and the weights read back by the unload phases."""
    cfg = replace(PRESETS["chip-small"], mem_a_words=128, mem_b_words=128, spad_kib=4, dram_mib=1,
                  ucode_depth=8192)
    mlp = MLP((64, 96, 64, 4), "mse", 0.05)
    tp, sess, gold = _run(cfg, mlp, "fast", 2, {})
    sp = tp.spad[0]
    assert sp.res > 0 and sp.res + sp.lrows == -(-tp.P[0] // cfg.nr)
    assert gold.pages[0][0] == (0, sp.res * cfg.nr)
    from types import SimpleNamespace

    results = [[SimpleNamespace(data=r.out) for r in sess.run(imgs, None, name, active=range(cfg.cores))[0]]
               for imgs, name in tp.unload_weights_phases()]
    got = tp.decode_weights(results, padded=True)
    assert all(np.array_equal(a, b) for a, b in zip(got, gold.weights(padded=True)))
    assert f"the first {sp.res * cfg.nr} rows resident in the PE memories (WR)" in tp.describe()


@pytest.mark.parametrize("mem,net,backward,layers,engine", [
    ((128, 256), (64, 64, 128, 4), "fused", (0, 1), "fast"),      # layer 0's rank-1, layer 1's fused step
    ((256, 512), (32, 64, 160, 4), "separate", (1,), "fast"),     # the transposed GEMV and the rank-1 update
    # make test-all: tests/rtl/test_chip_cp_banks.py runs the per-cycle engine on the same
    # placement and compares it with the RTL beat for beat in make test
    pytest.param((128, 256), (64, 64, 128, 4), "fused", (0, 1), "model", marks=pytest.mark.slow),
], ids=["fused", "separate", "model"])
def test_cp_resident_rows_in_both_banks(mem, net, backward, layers, engine):
    """A streamed panel's resident rows continue in bank B (SpadPanel.resb, region WB)
    when bank A is full: their kernels read copies of ain, vnext and din in bank A and
    sum their part of W^T din through epA; bit for bit (the golden's pages: WR's rows,
    WB's, then the paged ones; the paged ones first when their moves are hidden), cycles
    and DRAM counters as predicted, the weights read back by the unload phases (the
    per-cycle model: the first three steps)."""
    from types import SimpleNamespace

    cfg = replace(PRESETS["chip-small"], mem_a_words=mem[0], mem_b_words=mem[1], spad_kib=4, dram_mib=1,
                  ucode_depth=8192)
    mlp = MLP(net, "softmax_ce" if engine == "model" else "mse", 0.05)
    tp, sess, gold = _run(cfg, mlp, engine, 2 if engine == "fast" else 1, {}, backward,
                          stop=None if engine == "fast" else 3)
    for l in layers:
        sp = tp.spad[l]
        assert sp.res > 0 and sp.resb > 0 and sp.lead + sp.lrows == -(-tp.P[l] // cfg.nr)
        res = ((0, sp.res * cfg.nr), (sp.res * cfg.nr, sp.resb * cfg.nr))
        assert (gold.pages[l][-2:] if sp.hide else gold.pages[l][:2]) == res
        k = tp.cores_of(l)[0]
        assert tp.allocs[k].items["WB"].region.bank == "b" and tp.allocs[k].items["ainA"].region.bank == "a"
        assert ("vnA" in tp.allocs[k].items) == (l == 0 or not tp.fused[l])   # the fused kernel reads v anywhere
        line = next(ln for ln in tp.describe().splitlines() if ln.strip().startswith(f"W{l} panels:"))
        assert ("in bank B: WB" if sp.pages else "in bank B (WB)") in line
    if engine == "fast":
        results = [[SimpleNamespace(data=r.out) for r in sess.run(imgs, None, name, active=range(cfg.cores))[0]]
                   for imgs, name in tp.unload_weights_phases()]
        got = tp.decode_weights(results, padded=True)
        assert all(np.array_equal(a, b) for a, b in zip(got, gold.weights(padded=True)))
