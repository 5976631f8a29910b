"""Minibatch GD across cores with the activations reused (sw/train_chip_mb_acts.py): two
activation buffers, the own segments kept, the backward scratch at the forward buffers'
addresses, X^T in the scratchpad; weights bit for bit against GoldenChipMBGD on both chip
engines with panels paged from the scratchpad and streamed from DRAM, DRAM counters and
cycles as predicted, the automatic choice when the activations do not fit resident, the
describe() text and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from arch.config import PRESETS
from sim.sessions import ChipSession
from sw.golden_train_chip_mb import GoldenChipMBGD
from sw.mlp import MLP
from sw.train import TrainCompileError, init_weights
from sw.train_chip_mb import compile_chip_mbgd

#: chip-small (4 cores of 4x4) with 1 MiB of DRAM per core
CFG = PRESETS["chip-small"].replace(dram_mib=1)
NET = (16, 48, 32, 8)
PAGED = dict(spad=[0, 1], page_rows=4)
#: PE memories too small for the activations resident (forces the reuse plan)
SHORT = CFG.replace(mem_a_words=128, mem_b_words=128)


def _run(cfg, mlp, engine, steps, kw, gkw):
    tp = compile_chip_mbgd(cfg, mlp, **kw)
    sess = ChipSession(cfg, engine)
    W0 = init_weights(mlp, cfg.fmt, 0)
    tp.init(sess, W0)
    gold = GoldenChipMBGD(cfg, mlp, W0, **gkw)
    rng = np.random.default_rng(1)
    b = mlp.batch
    for s in range(steps):
        x = rng.uniform(0, 1, (mlp.n_in, b))
        t = rng.integers(0, mlp.n_out, b) if mlp.loss == "softmax_ce" else rng.uniform(0, 1, (mlp.n_out, b))
        r = tp.run_step(sess, x, t)
        g = gold.step(x, t)
        got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
        assert all(np.array_equal(a, w) for a, w in zip(got, want)), f"step {s + 1}: weights differ"
    d = tp.dram_per_step()
    for c in r.core_counters:
        assert (c["dram_rd_beats"], c["dram_wr_beats"], c["dma_busy_cycles"], c["dma_stall_cycles"]) == (
            d["rd"], d["wr"], d["busy"], d["stall"])
    return tp, r


@pytest.mark.parametrize("loss", ["softmax_ce", "mse"])
@pytest.mark.parametrize("dram", [None, [1], [0, 1]])
def test_mb_reuse_fast_bit_exact(loss, dram):
    """Fast chip engine, three steps, forced reuse plan: weights = golden bit for bit,
    DRAM counters equal to the prediction (cycles are checked inside run_step)."""
    mlp = MLP(NET, loss, 0.05, batch=4)
    tp, _ = _run(CFG, mlp, "fast", 3, dict(acts="reuse", dram=dram, **PAGED), dict(acts="reuse", **PAGED))
    assert tp.meta["acts"] == "reuse" and "XTb" in tp.alloc.items


#: make test-all: make test runs the same reuse programs bit-exact on the fast engine
#: (test_mb_reuse_fast_bit_exact) and the per-cycle engine on minibatch GD's DRAM paging
#: (tests/sw/test_dram_train.py::test_dram_stream_cycle_engine_bit_exact[mbgd])
@pytest.mark.slow
def test_mb_reuse_cycle_engine_bit_exact():
    """The per-cycle chip model, two steps, both paged panels in DRAM."""
    mlp = MLP(NET, "softmax_ce", 0.05, batch=4)
    _run(CFG, mlp, "model", 2, dict(acts="reuse", dram=[0, 1], **PAGED), dict(acts="reuse", **PAGED))


def test_mb_reuse_chosen_when_short():
    """PE memories too small for the activations resident: the compiler reuses them,
    pages the panels (one page buffer per bank) and says so in describe()."""
    mlp = MLP((32, 96, 64, 8), "softmax_ce", 0.05, batch=8)
    with pytest.raises(TrainCompileError):
        compile_chip_mbgd(SHORT, mlp, acts="resident")
    tp, _ = _run(SHORT, mlp, "fast", 2, {}, {})
    assert tp.meta["acts"] == "reuse" and tp.spad
    text = tp.describe()
    assert "activations: they do not fit resident" in text and "ACT0" in text and "ACT1" in text
    assert "X^T (16 words per PE) in scratchpad beats" in text


def test_mb_resident_describe_and_errors():
    mlp = MLP(NET, "softmax_ce", 0.05, batch=4)
    tp = compile_chip_mbgd(CFG, mlp)
    assert tp.meta["acts"] == "resident"
    assert "activations: every gathered A_l resident in the PE memories" in tp.describe()
    with pytest.raises(TrainCompileError, match="acts must be"):
        compile_chip_mbgd(CFG, mlp, acts="spad")
    with pytest.raises(TrainCompileError) as e:
        compile_chip_mbgd(CFG.replace(mem_a_words=32, mem_b_words=32), mlp)
    assert "\n" not in str(e.value) and "with the activations reused" in str(e.value)
