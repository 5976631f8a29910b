"""Weight panels streamed from DRAM (sw/train_dram.py): SGD and minibatch GD across the
cores of a small chip with panels forced into DRAM, weights bit for bit against the
golden trainers after several steps on both chip engines, DRAM counters equal to the
compiler's prediction, the describe() text, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from arch.config import PRESETS
from sim.sessions import ChipSession
from sw.golden_train_chip import GoldenChipSGD
from sw.golden_train_chip_mb import GoldenChipMBGD
from sw.mlp import MLP
from sw.train import TrainCompileError, init_weights
from sw.train_chip import compile_chip_sgd
from sw.train_chip_mb import compile_chip_mbgd
from sw.train_dram import DramPanel

#: chip-small (4 cores of 4x4) with 1 MiB of DRAM per core, the default DRAM timing
CFG = PRESETS["chip-small"].replace(dram_mib=1)
NET = (16, 48, 32, 8)
PAGED = dict(spad=[0, 1], page_rows=4)


#: minibatch GD's batches: 4 (2 local columns: the pages in row order), 12 (3: each page's
#: forward GEMM loads the next, page_overlap)
MB_BATCH = {"mbgd": 4, "mbgd12": 12}


def _compile(method, dram, cfg=CFG, **kw):
    if method == "sgd":
        return compile_chip_sgd(cfg, MLP(NET, "softmax_ce", 0.05), dram=dram, **{**PAGED, **kw})
    return compile_chip_mbgd(cfg, MLP(NET, "softmax_ce", 0.05, batch=MB_BATCH[method]), dram=dram,
                             **{**PAGED, **kw})


def _run(method, dram, engine, steps):
    tp = _compile(method, dram)
    mlp, cfg = tp.mlp, tp.cfg
    sess = ChipSession(cfg, engine)
    W0 = init_weights(mlp, cfg.fmt, 0)
    tp.init(sess, W0)
    gold = (GoldenChipSGD(cfg, mlp, W0, **PAGED) if method == "sgd" else GoldenChipMBGD(cfg, mlp, W0, **PAGED))
    rng = np.random.default_rng(1)
    b = mlp.batch
    for s in range(steps):
        x, t = ((rng.uniform(0, 1, (NET[0], b)), rng.integers(0, NET[-1], b)) if b > 1
                else (rng.uniform(0, 1, NET[0]), int(rng.integers(NET[-1]))))
        r = tp.run_step(sess, x, t)
        gold.step(x, t)
        got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
        assert all(np.array_equal(a, w) for a, w in zip(got, want)), f"step {s + 1}: weights differ"
    return tp, r


@pytest.mark.parametrize("method,dram", [(m, d) for m in ("sgd", "mbgd") for d in ([1], [0, 1])]
                         + [("mbgd12", [1]), ("mbgd12", [0, 1])])
def test_dram_stream_fast_bit_exact_counters(method, dram):
    """Fast chip engine, three steps: weights = golden bit for bit; every core's DRAM
    beats, DMA busy and stall cycles equal the compiler's prediction (the run's cycles
    are checked against the prediction inside run_step). ``mbgd12``: the DRAM pages
    loaded inside the forward GEMMs."""
    tp, r = _run(method, dram, "fast", 3)
    if method.startswith("mbgd"):
        assert tp.meta["page_overlap"] == ([0, 1] if method == "mbgd12" else [])
        assert any("+ld" in n for n, _, _ in tp.breakdown()) == (method == "mbgd12")
    assert {l for l, sp in tp.spad.items() if isinstance(sp, DramPanel)} == set(dram)
    d = tp.dram_per_step()
    assert d["rd"] > 0 and d["wr"] > 0
    for c in r.core_counters:
        assert (c["dram_rd_beats"], c["dram_wr_beats"], c["dma_busy_cycles"], c["dma_stall_cycles"]) == (
            d["rd"], d["wr"], d["busy"], d["stall"])


@pytest.mark.parametrize("engine", ["fast", pytest.param("model", marks=pytest.mark.slow)])
def test_dram_stream_multi_burst_pages_split_programs(engine):
    """Pages of several bursts (runs of equal bursts in a loop, split at 4 KiB DRAM
    pages) and a part split into several programs with a transfer still running at a
    program's end: bit for bit, cycles and DMA counters as predicted, on both engines."""
    cfg = PRESETS["chip-small"].replace(dram_mib=1, spad_kib=16)
    mlp = MLP((32, 160, 96, 8), "softmax_ce", 0.05, batch=4)
    kw = dict(spad=[0, 1], page_rows=8)
    tp = compile_chip_mbgd(cfg, mlp, dram=[0, 1], **kw)
    assert len(tp.parts["backward"]) > 1
    sess = ChipSession(cfg, engine)
    W0 = init_weights(mlp, cfg.fmt, 0)
    tp.init(sess, W0)
    gold = GoldenChipMBGD(cfg, mlp, W0, **kw)
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, t = rng.uniform(0, 1, (32, 4)), rng.integers(0, 8, 4)
        r = tp.run_step(sess, x, t)
        gold.step(x, t)
    got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
    assert all(np.array_equal(a, w) for a, w in zip(got, want))
    d = tp.dram_per_step()
    assert d["tail"] > 0
    for c in r.core_counters:
        assert (c["dram_rd_beats"], c["dram_wr_beats"], c["dma_stall_cycles"]) == (d["rd"], d["wr"], d["stall"])


@pytest.mark.parametrize("method", ["sgd", "mbgd", "mbgd12"])
def test_dram_stream_cycle_engine_bit_exact(method):
    """The per-cycle chip model, two steps, both paged panels in DRAM: weights = golden,
    counters as predicted."""
    tp, r = _run(method, [0, 1], "model", 2)
    d = tp.dram_per_step()
    for c in r.core_counters:
        assert (c["dram_rd_beats"], c["dram_wr_beats"], c["dma_stall_cycles"]) == (d["rd"], d["wr"], d["stall"])


def test_dram_traffic_is_the_pages():
    """Per step each DRAM page is read in the forward and the backward pass (but the
    last paged layer's last page, still in WP) and written once."""
    tp = _compile("sgd", [0, 1])
    nr = tp.cfg.nr
    d = tp.dram_per_step()
    beats = sum(sp.beats(nr) for sp in tp.spad.values())
    last = tp.spad[1]
    assert d["wr"] == beats
    assert d["rd"] == 2 * beats - nr * last.page_words(len(last.pages) - 1)
    assert d["busy"] == d["hidden"] + d["stall"] + d["tail"] and d["hidden"] > 0


def test_dram_describe():
    tp = _compile("mbgd", [1])
    text = tp.describe()
    assert "W1 panel: streamed from DRAM beats 0.." in text
    k = len(tp.spad[1].stage)          # staging slots: the scratchpad's room after its panels
    assert k >= 2 and ("double-buffered" if k == 2 else f"{k - 1} pages ahead") in text
    assert "scratchpad beats" in text and "W0 panel, 3 page(s)" in text
    assert "W2 panel: resident in the PE memories" in text
    assert "DRAM per step and core:" in text and "hidden under compute" in text and "exposed" in text


def test_dram_without_dram_or_too_small():
    with pytest.raises(TrainCompileError, match="this configuration has none"):
        _compile("sgd", [1], cfg=PRESETS["chip-small"])
    with pytest.raises(TrainCompileError, match=r"dram layers must be a non-empty subset"):
        _compile("sgd", [2])
    # a scratchpad too small for the staging slots
    with pytest.raises(TrainCompileError, match=r"two staging slots of \d+ beats need \d+ beats, the scratchpad "
                                                r"has \d+"):
        _compile("sgd", [1], cfg=PRESETS["chip-small"].replace(spad_kib=1, dram_mib=1), page_rows=None)


def test_dram_too_small_one_line():
    """The DRAM panels exceed the DRAM: one line with the sizes."""
    from sw.train_dram import place_dram
    from sw.train_paging import SpadPanel

    cfg = PRESETS["chip-small"].replace(dram_mib=1)
    big = SpadPanel(0, 4096, 16, tuple((r, 1) for r in range(4096)))
    with pytest.raises(TrainCompileError) as e:
        place_dram(cfg, {0: big}, force=[0])
    msg = str(e.value)
    assert "\n" not in msg and f"{big.beats(cfg.nr)} beats per core, the DRAM has {cfg.dram_depth}" in msg


@pytest.mark.parametrize("method", ["sgd", "mbgd"])
def test_dram_staging_slots_ahead(method, monkeypatch):
    """Where the scratchpad has room after its panels, the DRAM pages get more than two
    staging slots (``sw.train_paging.DRAM_SLOTS``), so each page's transfer starts up to
    ``slots - 1`` pages ahead; the compiler keeps them when the step is shorter than
    through two (``meta["dram_slots"]``), and either way moves every page once each way
    (the same DRAM traffic as with two slots planned). Bit for bit on the fast engine
    (``_run``); here SGD keeps four slots and minibatch GD two."""
    import sw.train_paging as tpg

    tp = _compile(method, [0, 1])
    slots = tp.meta["dram_slots"]
    assert sorted(slots) == [2, tpg.DRAM_SLOTS] and tp.step_cycles() == min(slots.values())
    k = min(slots, key=lambda n: (slots[n], n))
    assert all(len(sp.stage) == k and len(set(sp.stage)) == k for sp in tp.spad.values())
    assert k == (tpg.DRAM_SLOTS if method == "sgd" else 2)
    monkeypatch.setattr(tpg, "DRAM_SLOTS", 2)
    two = _compile(method, [0, 1])
    assert "dram_slots" not in two.meta and two.step_cycles() == slots[2]
    d, d2 = tp.dram_per_step(), two.dram_per_step()
    assert (d["rd"], d["wr"]) == (d2["rd"], d2["wr"])
    monkeypatch.undo()
    _run(method, [0, 1], "fast", 2)
