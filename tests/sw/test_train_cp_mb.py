"""Minibatch continuous propagation (sw/train_cp_mb.py, the matrix chains of
sw/chain.py): the pipeline bit for bit against its golden model
(sw/golden_train_cp_mb.py) on both chip engines and the RTL, through filling, steady
state and draining; cycles as predicted; learning; errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.simulators import engine_matrix
from tests.sw.test_train import _seed
from tests.sw.test_train_cp import CHIP4, rtl_replay, run_cp
from sw.chain import Hop, Stream, schedule
from sw.ring import RingError
from arch.config import ArchConfig, PRESETS
from sw.mlp import MLP
from sw.train import TrainCompileError, init_weights
from sim.sessions import ChipSession
from sw.train_cp import compile_chip_cp

TINY, SMALL = PRESETS["chip-tiny"], PRESETS["chip-small"]
SIX = ArchConfig(nr=2, cores=6, mem_a_words=256, mem_b_words=256)


def run_mbcp(cfg, mlp, n, backend, seed, groups=None, record=False, spad=None, page_rows=None):
    """tests/sw/test_train_cp.py's ``run_cp`` with ``n`` minibatches (golden: GoldenChipMBCP)."""
    assert mlp.batch > 1
    return run_cp(cfg, mlp, n, backend, seed, groups, record, spad=spad, page_rows=page_rows)


@pytest.mark.parametrize("backend", ["fast", pytest.param("model", marks=pytest.mark.slow)])
@pytest.mark.parametrize("cfg,sizes,b,groups", [
    (TINY, (6, 5, 3), 3, None),              # one core per layer; b not a multiple of nr (padding columns)
    (SMALL, (9, 14, 7, 4), 5, None),         # a 2-core group: matrix gather, reduce, scatter; 4x4 PEs
    (SIX, (7, 9, 6, 3), 3, None),            # groups [2, 3, 1]: the x chain and a 3-core reduce
    (SIX, (5, 6, 3), 2, [1, 1]),             # four idle cores relaying the matrix deltas
    (replace(SIX, ucode_depth=512), (9, 14, 7, 4), 5, None),   # the chains as a RUN of their own (microcode)
], ids=["tiny", "small", "six", "six-idle", "six-split"])
def test_mbcp_matches_golden(cfg, sizes, b, groups, backend):
    """Bit for bit through filling, steady state and draining (the per-cycle engine: slow;
    test_mbcp_engines_agree_counter_for_counter and the RTL test run it in the suite)."""
    mlp = MLP(sizes, "mse", 0.1, batch=b)
    tp, *_ = run_mbcp(cfg, mlp, 4, backend, _seed(), groups)
    assert tp.fused == [False] * mlp.n_layers and abs(tp.meta["lr_stored"] - 0.1 / b) < 1e-3
    if groups:
        assert tp.groups == groups and tp.stages[2:] == [None] * 4
    if cfg is SIX and not groups:
        assert tp.groups == [2, 3, 1]
    if tp.split_chains:
        assert "chains" in tp.origins and sum(w == "chains" for w in tp.chip_runs()) == 1
    assert tp.split_chains == (cfg.ucode_depth == 512) and tp.chip_runs()[-1] == ("chains" if tp.split_chains
                                                                                 else "tail")
    kinds = {op.kind for ops in tp.head for op in ops}
    assert {"gemm", "gemm_acc", "transpose"} <= kinds and "gemv" not in kinds


def test_mbcp_engines_agree_counter_for_counter():
    mlp = MLP((7, 9, 6, 3), "mse", 0.1, batch=3)
    seed = _seed()
    _, _, _, fast = run_mbcp(SIX, mlp, 2, "fast", seed)
    _, _, _, model = run_mbcp(SIX, mlp, 2, "model", seed)
    for a, b in zip(fast, model):
        assert a.core_counters == b.core_counters


def test_mbcp_learns_like_float64_minibatch_gd():
    """A regression task: the binary16 minibatch pipeline's loss falls like float64
    minibatch GD's over the same minibatches (CP's stale weights cost little here)."""
    from sw.golden_train_mb import Float64MBGD

    b = 4
    mlp = MLP((8, 12, 4), "mse", 0.1, batch=b)
    cfg = replace(TINY, mem_a_words=512, mem_b_words=512)
    rng = np.random.default_rng(7)
    A = rng.normal(size=(4, 8)) * 0.4
    X = rng.normal(size=(60, 8, b))
    T = np.tanh(np.einsum("ij,njb->nib", A, X))
    W0 = init_weights(mlp, cfg.fmt, 3)
    tp = compile_chip_cp(cfg, mlp)
    sess = ChipSession(cfg, "fast")
    tp.init(sess, W0)
    ref = Float64MBGD(mlp, [cfg.fmt.to_float(w) for w in W0])
    L = tp.latency_steps()
    cp_loss = []
    for s in range(len(X) + L):
        r = tp.run_step(sess, X[s] if s < len(X) else None, T[s - L] if s >= L else None)
        if r.loss is not None:
            cp_loss.append(r.loss)
    f64 = [ref.step(x, t)["loss"] for x, t in zip(X, T)]
    first, last = np.mean(cp_loss[:10]), np.mean(cp_loss[-10:])
    assert last < 0.5 * first, (first, last)
    assert last < 1.5 * np.mean(f64[-10:]) + 1e-3, (last, np.mean(f64[-10:]))


#: the per-cycle engine on the small chip in make test-all (its counters against the fast
#: engine's: test_mbcp_engines_agree_counter_for_counter; on the tiny and six-core chips
#: in make test)
@pytest.mark.parametrize("cfg,sizes,b,backend", engine_matrix(
    {"cfg0-sizes0-3": (TINY, (6, 5, 3), 3), "cfg1-sizes1-5": (SMALL, (9, 14, 7, 4), 5),
     "cfg2-sizes2-3": (SIX, (7, 9, 6, 3), 3)}, slow_model={"cfg1-sizes1-5"}))
def test_mbcp_softmax_on_host(cfg, sizes, b, backend):
    """Minibatch CP with the softmax loss: the head RUN, the output core's logits out,
    the host's ``G = fmt(softmax(z) - t)`` per column in, the output core's ``head2`` RUN
    (its backward pass and update), the tail; bit for bit against the golden through
    filling, steady state and draining, the turnaround counted apart."""
    from sw.train import HOST_LATENCY_CYCLES

    tp, sess, gold, res = run_mbcp(cfg, MLP(sizes, "softmax_ce", 0.3, batch=b), 3, backend, _seed())
    assert tp.softmax == "host" and tp.host_cycles() == HOST_LATENCY_CYCLES
    assert [n for n, _ in tp.host_phase_cycles()] == ["in", "logits", "g", "head2"]
    assert all(r.host_cycles == HOST_LATENCY_CYCLES for r in res)
    assert [n for n, _, _ in res[0].phases] == ["in", "head", "logits", "g", "head2"] + tp.chip_runs()[1:]


def test_mbcp_errors():
    with pytest.raises(TrainCompileError, match="computes the softmax on the host"):
        compile_chip_cp(TINY, MLP((4, 5, 3), "softmax_ce", 0.1, batch=2), softmax="array")
    with pytest.raises(TrainCompileError, match="no fused backward"):
        compile_chip_cp(TINY, MLP((4, 5, 3), "mse", 0.1, batch=2), backward="fused")
    with pytest.raises(TrainCompileError, match="does not fit the CP mapping"):
        compile_chip_cp(TINY, MLP((40, 40, 3), "mse", 0.1, batch=8))
    with pytest.raises(TrainCompileError, match="batch 4 is zero"):
        compile_chip_cp(TINY, MLP((6, 5, 3), "mse", 1e-7, batch=4))
    tp = compile_chip_cp(TINY, MLP((6, 5, 3), "mse", 0.1, batch=3))
    sess = ChipSession(TINY, "fast")
    tp.init(sess, init_weights(tp.mlp, TINY.fmt, 0))
    with pytest.raises(ValueError, match="6 x 3"):
        tp.run_step(sess, np.zeros((6, 2)), None)


def test_matrix_chain_errors():
    cfg = SMALL
    mat = dict(layout="mat")
    ok = Stream("g", 8, (Hop(0, ("send",) * 8, src=("a", 0), **mat), Hop(1, ("keep",) * 8, dst=("b", 0), **mat)))
    assert schedule(cfg, [ok]).slots > 8
    bad = [
        (Stream("mix", 4, (Hop(0, ("send",) * 4, src=("a", 0), **mat), Hop(1, ("keep",) * 4, dst=("b", 0)))),
         "mixes"),
        (Stream("part", 6, (Hop(0, ("send",) * 6, src=("a", 0), **mat), Hop(1, ("keep",) * 6, dst=("b", 0), **mat))),
         "whole words"),
    ]
    for st, msg in bad:
        with pytest.raises(RingError, match=msg):
            schedule(cfg, [st])


@pytest.mark.parametrize("spad,page_rows", [([0, 1], 4), ([1], 8), ([0], None)],
                         ids=["both-4-row-pages", "layer1-8-row-pages", "layer0-whole"])
def test_mbcp_spad_matches_golden(spad, page_rows):
    """Minibatch CP with hidden layers' panels paged from the scratchpads (a 2-core group
    too): the head transposes ``Din`` first, then per page loads it, computes its rows of
    ``Z``, its ``D^T`` rows and its part of ``E = D^T W`` (``gemm`` then ``gemm_acc``:
    the page-by-page rounding shows), its update, and stores it; bit for bit against
    the golden after every step, each paged panel loaded and stored once per step."""
    cfg = replace(SMALL, spad_kib=4, ucode_depth=2048)
    mlp = MLP((9, 30, 24, 4), "mse", 0.3, batch=3)
    tp, sess, gold, res = run_mbcp(cfg, mlp, 3, "fast", _seed(), spad=spad, page_rows=page_rows)
    assert sorted(tp.spad) == spad and gold.pages.keys() == tp.spad.keys()
    for r in res:
        for k, ctr in enumerate(r.core_counters):
            sp = tp._paged(k)
            beats = sp.beats(cfg.nr) if sp else 0
            assert (ctr["spad_rd_beats"], ctr["spad_wr_beats"]) == (beats, beats), k


#: make test-all, with the other minibatch CP replays below: make test runs CP's paged
#: panels and chains on the chip RTL (tests/sw/test_train_cp.py::test_cp_spad_rtl,
#: test_cp_rtl_groups) and the matrix collectives minibatch CP's chains are made of
#: (tests/sw/test_ring_mat.py::test_mat_collectives_rtl); minibatch CP's programs run
#: counter for counter on both engines (test_mbcp_engines_agree_counter_for_counter) and
#: its paged ones bit-exact against the golden (test_mbcp_spad_matches_golden)
@pytest.mark.slow
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)])
def test_mbcp_spad_rtl(sim):
    """Minibatch CP with both hidden layers paged in 2-row pages on the chip RTL
    (``CHIP4``: one simulator build with the tests above; the chains run as a RUN of
    their own), the weights read back from the RTL's scratchpads equal to the golden's."""
    run = run_mbcp(CHIP4, MLP((5, 6, 8, 3), "mse", 0.125, batch=3), 1, "model", _seed(), groups=[1, 2, 1],
                   record=True, spad=[0, 1], page_rows=2)
    assert all(len(sp.pages) > 1 for sp in run[0].spad.values()) and run[0].split_chains
    rtl_replay(CHIP4, *run, sim, "chip-mbcp4")


#: make test-all (see test_mbcp_spad_rtl); the host's softmax phases are bit-exact on both
#: engines in make test (test_mbcp_softmax_on_host)
@pytest.mark.slow
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)])
def test_mbcp_softmax_rtl(sim):
    """Minibatch CP with the host's softmax on the chip RTL (``CHIP4``): every phase of a
    minibatch through the pipeline and out replayed (the logits out, ``G`` in, the
    output core's ``head2`` RUN), the weights read back equal to the golden's."""
    run = run_mbcp(CHIP4, MLP((5, 6, 4, 3), "softmax_ce", 0.125, batch=3), 1, "model", _seed(), groups=[1, 2, 1],
                   record=True)
    assert run[0].softmax == "host"
    assert any("add r" in ln and "rin row" in ln for ln in run[0].chains.lines[2])      # core 2 adds core 1's partial
    rtl_replay(CHIP4, *run, sim, "chip-mbcp4")


#: make test-all (see test_mbcp_spad_rtl): test_mbcp_softmax_rtl replays the same chains
#: (the same groups and sizes) and the host's softmax
@pytest.mark.slow
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)])
def test_mbcp_rtl(sim):
    """Groups [1, 2, 1] on 4 cores of 2 x 2: a matrix gather into two cores, the deltas
    reduced over them (a transposing matrix add, one beat per slot), the scatter; a
    minibatch of 3 (a padding column) through the pipeline and out (7 steps) recorded on
    the per-cycle chip model and replayed on the chip RTL (every beat and counter
    compared per core), the weights read back equal to the golden's."""
    mlp = MLP((5, 6, 4, 3), "mse", 0.125, batch=3)
    run = run_mbcp(CHIP4, mlp, 1, "model", _seed(), groups=[1, 2, 1], record=True)
    assert any("add r" in ln and "rin row" in ln for ln in run[0].chains.lines[2])      # core 2 adds core 1's partial
    rtl_replay(CHIP4, *run, sim, "chip-mbcp4")
