"""Hidden and exposed data movement (``sim/movement.py``): hand-checked programs whose
split is known, and training steps (SGD, CP, minibatch GD; DRAM streaming and
scratchpad paging) on which the fast chip engine and the per-cycle chip engine give the
same histograms, per core and along the critical path, equal to the step's cycles and
consistent with the counters."""

from __future__ import annotations

import numpy as np
import pytest

from arch.config import ArchConfig
from sim.dma_model import transfer_cycles
from sim.movement import BITS, KINDS, MovementSession, figures
from sw.asm import assemble
from sw.mlp import MLP
from sw.train import init_weights
from sw.train_chip import compile_chip_sgd
from sw.train_chip_mb import compile_chip_mbgd
from sw.train_cp import compile_chip_cp

#: 2 cores of 2 x 2 PEs, a 1 KiB scratchpad and 1 MiB of DRAM each
CFG = ArchConfig(nr=2, mem_a_words=128, mem_b_words=128, ucode_depth=256, cores=2, spad_kib=1, dram_mib=1,
                 dram_latency=9, dram_gbps=4.0)
NET = (5, 9, 6)

#: 4 FMAs beside ring sends (hidden ring), 4 ring receives alone (exposed ring), 3 FMAs alone
RING = """
        loop i 4 {
            rdrv r1 @col=0 | rout row | fma r0 = r1 * r2 + r0
        }
        loop j 4 {
            rin row | mov r3 = row
        }
        loop k 3 {
            fma r0 = r1 * r2 + r0
        }
        halt
"""

#: a transfer behind a loop of 40 FMAs (hidden but in the cycle of the loop instruction),
#: then one waited for (exposed)
DMA = """
        dma load 8
        loop i 40 {
            fma r0 = r1 * r2 + r0
        }
        dma wait
        dma spad = 8
        dma load 8
        dma wait
        halt
"""

#: two host beats in, one FMA
HOST = """
        hin row | mov r1 = row
        hin row | mov r2 = row
        fma r0 = r1 * r2 + r0
        halt
"""


def _program(backend, text, data=None, cfg=CFG):
    sess = MovementSession(cfg, backend)
    words = assemble(text, cfg).words()
    sess.load([words] * cfg.cores)            # the LOADs before the step: not counted
    sess.begin_step()
    res, cyc = sess.run([words] * cfg.cores, data)
    return sess, res, cyc


#: pipeline options that move the PE side's events away from the issue cycle
PIPES = [{}, dict(dist_stage=True, dram_mib=0), dict(fetch_stage=True), dict(exec_stage=True, bus_stage=True)]


@pytest.mark.parametrize("backend", ["fast", "model"])
@pytest.mark.parametrize("pipe", PIPES, ids=lambda p: "+".join(p) or "default")
def test_ring_split_is_known(backend, pipe):
    sess, res, cyc = _program(backend, RING, cfg=CFG.replace(**pipe))
    mv = sess.movement()
    for f in mv["cores"] + [mv["critical"]]:
        assert f["ring"] == {"cycles": 8, "hidden": 4, "exposed": 4}
        assert (f["compute"], f["compute_only"], f["hidden"], f["exposed"]) == (7, 3, 4, 4)
        assert all(f[k]["cycles"] == 0 for k in KINDS if k != "ring")
        assert f["cycles"] == cyc == res[0].cycles
        assert f["other"] == cyc - 11


@pytest.mark.parametrize("backend", ["fast", "model"])
def test_dma_split_is_known(backend):
    sess, res, cyc = _program(backend, DMA)
    b = transfer_cycles(CFG, 8)
    assert b < 40
    for k, f in enumerate(sess.movement()["cores"]):
        assert f["dma"] == {"cycles": 2 * b, "hidden": b - 1, "exposed": b + 1}
        assert f["compute"] == 40 and f["exposed"] == b + 1
        assert f["dma"]["cycles"] == res[k].counters["dma_busy_cycles"]
    assert sess.movement()["critical"]["cycles"] == cyc


@pytest.mark.parametrize("backend", ["fast", "model"])
def test_host_phase_is_the_cores_one_after_another(backend):
    beats = [[1, 2], [3, 4]]
    sess, res, cyc = _program(backend, HOST, beats)
    mv = sess.movement()
    assert cyc == res[0].cycles + res[1].cycles
    assert mv["critical"]["host"] == {"cycles": 4, "hidden": 0, "exposed": 4}
    assert mv["critical"]["cycles"] == cyc and mv["critical"]["compute"] == 2
    for f in mv["cores"]:             # each core: its own RUN, idle while the other runs
        assert f["host"] == {"cycles": 2, "hidden": 0, "exposed": 2} and f["cycles"] == cyc
    assert mv["mean"]["host"]["exposed"] == 2.0


def test_figures_of_a_histogram():
    h = np.zeros(128, np.int64)
    h[0] = 5
    h[BITS["compute"] | BITS["issue"]] = 3
    h[BITS["compute"] | BITS["issue"] | BITS["ring"] | BITS["dma"]] = 2      # one cycle, two kinds
    h[BITS["ucode"]] = 7
    f = figures(h)
    assert (f["cycles"], f["compute"], f["hidden"], f["exposed"], f["other"]) == (17, 5, 2, 7, 5)
    assert f["ring"] == f["dma"] == {"cycles": 2, "hidden": 2, "exposed": 0}
    assert f["ucode"] == {"cycles": 7, "hidden": 0, "exposed": 7}


def _compile(method):
    cfg = CFG
    if method == "sgd-dram":
        mlp = MLP(NET, "mse", 0.125)
        tp = compile_chip_sgd(cfg, mlp, out_map="rows", spad=[0, 1], page_rows=2, dram=[0, 1])
    elif method == "sgd-paged":
        cfg = CFG.replace(dram_mib=0, ucode_depth=512)
        mlp = MLP(NET, "softmax_ce", 0.125)
        tp = compile_chip_sgd(cfg, mlp, spad=[0, 1], page_rows=2)
    elif method == "mbgd-dram":
        mlp = MLP(NET, "mse", 0.125, batch=4)
        tp = compile_chip_mbgd(cfg, mlp, out_map="rows", spad=[0, 1], page_rows=2, dram=[0, 1])
    else:
        cfg = CFG.replace(ucode_depth=512)
        mlp = MLP(NET, "mse", 0.125)
        tp = compile_chip_cp(cfg, mlp, spad=[0], page_rows=2, dram=[0])
    return cfg, mlp, tp


def _steps(backend, method, steps=3):
    cfg, mlp, tp = _compile(method)
    sess = MovementSession(cfg, backend)
    tp.init(sess, init_weights(mlp, cfg.fmt, 3))
    rng = np.random.default_rng(1)
    out = []
    for _ in range(steps):
        sess.begin_step()
        b = (mlp.batch,) if mlp.batch > 1 else ()
        t = rng.integers(mlp.n_out) if mlp.loss == "softmax_ce" else rng.normal(size=(mlp.n_out, *b)) * 0.5
        r = tp.run_step(sess, rng.uniform(0, 1, (mlp.n_in, *b)), t)
        mv = sess.movement(r.host_cycles)
        assert mv["critical"]["cycles"] == r.cycles + r.host_cycles
        for k, c in enumerate(r.core_counters):
            f = mv["cores"][k]
            assert f["cycles"] == r.cycles + r.host_cycles
            assert int(sess.hist[k][(np.arange(128) & BITS["issue"]) != 0].sum()) == c["instructions"]
            assert f["dma"]["cycles"] == c.get("dma_busy_cycles", 0)
            assert f["ring"]["cycles"] <= c["ring_in_beats"] + c["ring_out_beats"]
            assert f["spad"]["cycles"] <= c.get("spad_rd_beats", 0) + c.get("spad_wr_beats", 0)
        out.append((sess.hist.copy(), sess.crit.copy(), mv))
    return out


@pytest.mark.parametrize("method", ["sgd-dram", "sgd-paged", "mbgd-dram", "cp-dram"])
def test_engines_agree_on_training_steps(method):
    fast, ref = _steps("fast", method), _steps("model", method)
    for (h1, c1, m1), (h2, c2, m2) in zip(fast, ref):
        assert np.array_equal(h1, h2) and np.array_equal(c1, c2)
        assert m1 == m2
    kinds = {k for _, _, m in fast for k in KINDS if m["critical"][k]["cycles"]}
    assert {"ring", "host", "spad"} <= kinds
    assert ("dma" in kinds) == method.endswith("dram")


def test_critical_core_is_the_one_the_others_wait_for():
    """A chip phase's critical core is the one with the most compute or data movement,
    not the one whose RUN ends last nor the one that stalls least: core 0 runs longest
    but mostly issues NOPs (aligning itself with the others), core 1 moves or computes in
    every cycle of its shorter RUN; among equals the longest RUN, then the lowest number."""
    from sim.movement import BITS, _busiest

    nops = np.array([BITS["issue"]] * 8 + [BITS["compute"] | BITS["issue"]] * 2, np.uint8)   # 10 cycles
    busy = np.array([BITS["dma"]] * 4 + [BITS["compute"] | BITS["issue"]] * 4, np.uint8)     # 8 cycles
    assert _busiest([nops, busy], [10, 8], 10) == 1                           # 2 against 8 busy cycles
    assert _busiest([busy[:6], busy], [6, 8], 10) == 1                        # 6 against 8
    assert _busiest([busy[:6], np.concatenate([busy[:6], [0, 0]])], [6, 8], 10) == 1   # equal: the longer RUN
    assert _busiest([busy[:6], busy[:6]], [6, 6], 10) == 0                    # equal: the lowest number
