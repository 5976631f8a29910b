"""Minibatch GD compiled for one core (sw/train_mb.py) against the golden trainer, bit for bit.

The golden trainer (sw/golden_train_mb.py) composes sw/golden.py's gemm, relu, axpy,
transpose, mask and gemm_acc in the array's order; after every step the weights in the
PE memories (padding included) must equal its weights, on the core model and on the fast
model, for nr 2 and 4, binary16 and binary32, both losses, layer sizes and batch sizes
that nr does not divide. Every RUN's cycles must equal the compiler's prediction with no
SRAM/register write conflict. The binary32 run is compared with float64 textbook
minibatch GD. One tiny session runs on the RTL (the host stream recorded on the core
model is replayed; every output beat and counter compared; the weights unloaded at the
end equal the golden trainer's). Seeds are printed.
"""

import random

import numpy as np
import pytest

from tests.simulators import REPLAY_SIM_PARAMS
from arch.config import ArchConfig
from sw.golden_train_mb import Float64MBGD, GoldenMBGD
from sw.kernels import gemm_cost
from sw.mlp import MLP
from sw.train import TrainCompileError, init_weights
from sim.sessions import CoreSession
from tests.sw.divergence import mismatches
from sw.train_mb import compile_mbgd, load_cost, unload_cost

RTL_CFG = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)


def _seed():
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    return seed


def _eq_weights(got, want, step):
    for l, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (l, g.shape, w.shape)
        bad = np.argwhere(g != w)
        assert bad.size == 0, f"step {step}, W{l}: {len(bad)} mismatches, first at {bad[0].tolist()}: " \
                              f"got {g[tuple(bad[0])]:#x} want {w[tuple(bad[0])]:#x}"


def _batch(rng, mlp):
    X = rng.uniform(-1, 1, (mlp.n_in, mlp.batch))
    if mlp.loss == "mse":
        return X, rng.uniform(-1, 1, (mlp.n_out, mlp.batch))
    return X, rng.integers(0, mlp.n_out, mlp.batch)


def train_and_check(cfg, mlp, steps, backend, seed, **kw):
    """``steps`` minibatch steps on ``backend`` and the golden trainer; weights compared
    after every step. Returns (program, session, golden, results)."""
    rng = np.random.default_rng(seed)
    tp = compile_mbgd(cfg, mlp, **kw)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = CoreSession(cfg, backend)
    tp.init(sess, W0)
    gold = GoldenMBGD(cfg, mlp, W0)
    _eq_weights(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), "init")
    out = []
    for k in range(steps):
        X, T = _batch(rng, mlp)
        r = tp.run_step(sess, X, T)            # checks cycles == prediction and no write conflicts
        g = gold.step(X, T)
        assert r.loss == g["loss"] and np.array_equal(r.output, g["output"]), (k, r.loss, g["loss"])
        _eq_weights(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), k)
        assert r.cycles == tp.step_cycles() - tp.host_cycles()     # RUNs + the LOADs between them
        out.append(r)
    return tp, sess, gold, out


# ======================================================================================
# core model and fast model vs the golden trainer
# ======================================================================================
@pytest.mark.parametrize("fmt", ["binary16", "binary32"])
@pytest.mark.parametrize("nr", [2, 4])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_mbgd_core_model(loss, nr, fmt):
    seed = _seed()
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=256, mem_b_words=256)
    sizes, b = ((5, 7, 3), 6) if nr == 4 else ((6, 5, 3, 3), 3)        # nr divides none of these
    train_and_check(cfg, MLP(sizes, loss, 0.125, batch=b), 2, "model", seed)


@pytest.mark.parametrize("fmt", ["binary16", "binary32"])
@pytest.mark.parametrize("nr", [2, 4])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_mbgd_fast_model(loss, nr, fmt):
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=1024, mem_b_words=1024)
    sizes = (int(rng.integers(9, 30)), int(rng.integers(5, 19)), int(rng.integers(3, 13)), int(rng.integers(2, 7)))
    b = int(rng.integers(2, 12))
    print(f"sizes {sizes}, batch {b}")
    train_and_check(cfg, MLP(sizes, loss, 0.0625, batch=b), 5, "fast", seed)


def test_counters_fast_equal_core_model():
    """Every counter of every RUN is the same on the fast model and the core model."""
    seed = _seed()
    cfg = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, ucode_depth=256)
    for loss in ("mse", "softmax_ce"):
        mlp = MLP((7, 5, 3), loss, 0.125, batch=5)
        res = {be: train_and_check(cfg, mlp, 2, be, seed)[3] for be in ("fast", "model")}
        assert len(res["fast"][0].counters) == len(compile_mbgd(cfg, mlp).programs) > 1
        for rf, rm in zip(res["fast"], res["model"]):
            assert rf.counters == rm.counters


def test_predict_and_batch_one():
    """The forward-only program equals GoldenMBGD.predict; batch 1 compiles and trains too."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=4, mem_a_words=512, mem_b_words=512)
    for b in (1, 5):
        mlp = MLP((9, 6, 4), "softmax_ce", 0.125, batch=b)
        tp, sess, gold, _ = train_and_check(cfg, mlp, 2, "fast", seed)
        X = rng.uniform(-1, 1, (9, b))
        assert np.array_equal(tp.predict(sess, X), gold.predict(X))


@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_binary32_close_to_float64(loss):
    """binary32 minibatch training follows float64 textbook minibatch GD (the golden
    trainer is the right algorithm, not only self-consistent)."""
    seed = _seed()
    cfg = ArchConfig(nr=2, fmt="binary32", mem_a_words=1024, mem_b_words=1024)
    mlp = MLP((12, 10, 8, 5), loss, 0.125, batch=7)
    tp, sess, gold, res = train_and_check(cfg, mlp, 5, "fast", seed)
    rng = np.random.default_rng(seed)
    W0 = init_weights(mlp, cfg.fmt, seed)
    ref = Float64MBGD(mlp, [cfg.fmt.to_float(W) for W in W0])
    for k in range(5):
        X, T = _batch(rng, mlp)
        lf = ref.step(X, T)["loss"]
        assert abs(res[k].loss - lf) <= 1e-4 * abs(lf), (k, res[k].loss, lf)
    for W, Wf in zip(tp.weights_from_session(sess), ref.W):
        w = cfg.fmt.to_float(W)
        assert np.max(np.abs(w - Wf)) <= 1e-4 * np.max(np.abs(Wf))


# ======================================================================================
# mapping, allocation, microcode, hazards, cycles
# ======================================================================================
def test_bank_rules_and_both_banks():
    """With small banks the weights go to both banks; every GEMM's two operands are in
    different banks, the axpy's and the mask's streamed operands too; bit-exact."""
    seed = _seed()
    cfg = ArchConfig(nr=2, mem_a_words=128, mem_b_words=128)
    mlp = MLP((14, 14, 10, 4), "mse", 0.125, batch=3)
    tp, *_ = train_and_check(cfg, mlp, 2, "fast", seed)
    assert set(tp.wbanks) == {"a", "b"}
    R = tp.regions
    for l in range(mlp.n_layers):
        a_in = R["X"] if l == 0 else R[f"Z{l}"]
        assert a_in.bank != tp.wbanks[l]
        if l >= 1:
            assert R[f"DT_{'b' if tp.wbanks[l] == 'a' else 'a'}"].bank != tp.wbanks[l]
            assert R[f"E{l}"].bank != R[f"Z{l}"].bank
    assert R["T"].bank != R[f"Z{mlp.n_layers}"].bank


def test_microcode_split():
    """A microcode too small for the step: several programs in several images, still exact."""
    seed = _seed()
    cfg = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, ucode_depth=128)
    tp, *_ = train_and_check(cfg, MLP((6, 5, 4, 3), "softmax_ce", 0.125, batch=3), 2, "fast", seed)
    assert len(tp.programs) > 2 and len(tp.images) > 1
    assert all(len(p.words) <= 128 for p in tp.programs + tp.predict_programs)


def test_gaps_are_needed(monkeypatch):
    """Without the inter-kernel NOPs of kernel_gap the step is wrong (the hazards are real:
    with one local word per matrix the next kernel reads what the previous one has just
    written)."""
    import sw.train as T

    cfg = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256)
    mlp = MLP((3, 2, 2), "mse", 0.125, batch=2)
    tp = compile_mbgd(cfg, mlp)
    assert sum(sum(p.gaps) for p in tp.programs) > 0
    monkeypatch.setattr(T, "kernel_gap", lambda cfg, a, b: 0)
    bad = compile_mbgd(cfg, mlp)
    monkeypatch.undo()
    assert sum(sum(p.gaps) for p in bad.programs) == 0
    rng = np.random.default_rng(1)
    gold = GoldenMBGD(cfg, mlp, init_weights(mlp, cfg.fmt, 1))
    assert mismatches(bad, gold, mlp, cfg, [_batch(rng, mlp) for _ in range(3)], 1) > 0


def test_cycle_formula():
    """RUN cycles of a 64-64-10 MSE step at b = 16 on a 4x4 core are the sum of the
    kernels' exact costs, the loads/unloads, the gaps and the HALT/drain."""
    from sw.collectives import cost_transpose
    from sw.kernels import elementwise_cost

    cfg = ArchConfig()
    b = 16
    mlp = MLP((64, 64, 10), "mse", 0.05, batch=b)
    tp = compile_mbgd(cfg, mlp)
    L = lambda n: -(-n // cfg.nr)                         # noqa: E731
    ins = (load_cost(cfg, L(64) * L(b)) + load_cost(cfg, L(10) * L(b))
           + gemm_cost(cfg, 64, 64, b)["instructions"] + elementwise_cost("relu", L(64) * L(b))
           + gemm_cost(cfg, 10, 64, b)["instructions"] + elementwise_cost("axpy", L(10) * L(b))
           + cost_transpose(cfg, 10, b).instructions + gemm_cost(cfg, b, 10, 64)["instructions"]
           + cost_transpose(cfg, b, 64).instructions + elementwise_cost("relu_mask", L(64) * L(b))
           + cost_transpose(cfg, 64, b).instructions
           + gemm_cost(cfg, 10, b, 64, alpha=True)["instructions"]
           + cost_transpose(cfg, 64, b).instructions
           + gemm_cost(cfg, 64, b, 64, alpha=True)["instructions"]
           + unload_cost(cfg, L(10) * L(b)))
    gaps = sum(tp.programs[0].gaps)
    assert len(tp.programs) == 1
    assert tp.predicted_cycles() == [ins + gaps + cfg.run_overhead]
    s = CoreSession(cfg, "fast")
    tp.init(s, init_weights(mlp, cfg.fmt, 0))
    rng = np.random.default_rng(0)
    r = tp.run_step(s, rng.uniform(0, 1, (64, b)), rng.uniform(-1, 1, (10, b)))
    assert r.cycles == tp.predicted_cycles()[0]
    assert mlp.flops_per_step() == 2 * b * (3 * (64 * 64 + 10 * 64) - 64 * 64)


# ======================================================================================
# errors
# ======================================================================================
def test_errors():
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)
    with pytest.raises(TrainCompileError, match=r"does not fit one 2x2 core: it needs \d+ words per PE .*"
                                                r"MEM A 64 \+ MEM B 64 words"):
        compile_mbgd(cfg, MLP((16, 16, 4), "mse", 0.1, batch=8))
    with pytest.raises(TrainCompileError, match="is zero in binary16"):
        compile_mbgd(ArchConfig(nr=2), MLP((4, 3, 2), "mse", 1e-7, batch=4))
    with pytest.raises(TypeError, match="sw.mlp.MLP"):
        compile_mbgd(cfg, (4, 3, 2))
    with pytest.raises(TrainCompileError, match="loop trip-count"):
        compile_mbgd(ArchConfig(nr=2, loop_bits=8, mem_a_words=256, mem_b_words=256),
                     MLP((600, 3, 2), "mse", 0.1, batch=2))
    mlp = MLP((5, 4, 3), "mse", 0.125, batch=3)
    tp = compile_mbgd(cfg, mlp)
    s = CoreSession(cfg, "fast")
    tp.init(s, init_weights(mlp, cfg.fmt, 0))
    with pytest.raises(ValueError, match="X must be a 5 x 3 matrix"):
        tp.run_step(s, np.zeros((3, 5)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="targets must be a 3 x 3 matrix"):
        tp.run_step(s, np.zeros((5, 3)), np.zeros(3))
    tps = compile_mbgd(cfg, MLP((5, 4, 3), "softmax_ce", 0.125, batch=3))
    with pytest.raises(ValueError, match="expected 3 class indices"):
        tps.run_step(s, np.zeros((5, 3)), np.zeros(4, dtype=int))


# ======================================================================================
# RTL
# ======================================================================================
@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_mbgd_rtl(sim):
    """Two minibatch steps (5-4-3, batch 3, softmax_ce: two RUNs each, programs in
    several microcode images) on a 2x2 binary16 core: the host stream recorded on the
    core model replayed on the RTL, every beat and counter compared, weights unloaded."""
    from sim.core_run import Phase, run_session

    seed = _seed()
    cfg, mlp = RTL_CFG, MLP((5, 4, 3), "softmax_ce", 0.125, batch=3)
    rng = np.random.default_rng(seed)
    tp = compile_mbgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = CoreSession(cfg, "model", record=True)
    tp.init(sess, W0)
    gold = GoldenMBGD(cfg, mlp, W0)
    steps = []
    for _ in range(2):
        X, T = _batch(rng, mlp)
        steps.append(tp.run_step(sess, X, T))
        gold.step(X, T)
    _eq_weights(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), "model")
    phases = sess.phases + [Phase(w, d, n) for w, d, n in tp.unload_weights_phases()]
    res = run_session(cfg, phases, backend="rtl", sim=sim, name="train-mb")     # beats == model's
    n_init = len(sess.phases) - 2 * len(tp.programs)
    runs = res[n_init:n_init + 2 * len(tp.programs)]
    for i, st in enumerate(steps):
        assert [r.counters for r in runs[i * len(tp.programs):(i + 1) * len(tp.programs)]] == st.counters
    _eq_weights(tp.decode_weights(res[-mlp.n_layers:], padded=True), gold.weights(padded=True), "rtl")
    print(f"{sim}: {res[-1].info}")


@pytest.mark.parametrize("nr", [2, 4])
def test_mbgd_exec_stage(nr):
    """Minibatch GD with the execute, distribution and fetch stages (FPGA timing), bit for bit on
    the fast model."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=nr, mem_a_words=1024, mem_b_words=1024, exec_stage=True, bus_stage=True, dist_stage=True, fetch_stage=True, read_stage=True, mul_latency=4,
                     add_latency=5)
    sizes = (int(rng.integers(9, 20)), int(rng.integers(5, 13)), int(rng.integers(2, 7)))
    b = int(rng.integers(2, 6))
    print(f"sizes {sizes}, batch {b}")
    train_and_check(cfg, MLP(sizes, "softmax_ce", 0.0625, batch=b), 3, "fast", seed)
