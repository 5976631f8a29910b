"""SGD training compiled for one core (sw/train.py) against the golden trainer, bit for bit.

The golden trainer (sw/golden_train.py) composes the per-kernel golden models in the
array's order; after every step the weights in the PE memories (padding included) must
equal its weights, on the core model and on the fast model, for nr 2 and 4, binary16 and
binary32, both losses and layer sizes that nr does not divide. Every RUN's cycles must
equal the compiler's prediction with no SRAM/register write conflict. The binary32 run
is compared with float64 textbook SGD (the golden trainer is the right algorithm, not
only self-consistent). Two tiny sessions run on the RTL (Icarus and Verilator): the host
stream recorded on the model is replayed, every output beat and counter is compared with
the model, the weights unloaded after the last step with the golden trainer's.
Seeds are printed.
"""

import os
import random
from dataclasses import replace

import numpy as np
import pytest

from arch.errors import InputError

from tests.simulators import REPLAY_SIM_PARAMS
from arch.config import ArchConfig
from sw.golden_train import Float64SGD, GoldenSGD
from sw.host_protocol import load_beat_count
from sw.mlp import MLP, MLPError
from sw.train import TrainCompileError, backward_costs, backward_plan, compile_sgd, init_weights, kernel_gap
from sim.sessions import CoreSession
from tests.sw.divergence import mismatches


def _seed():
    """A fresh random seed, printed; ``TEST_SEED=<n>`` replays a failing run."""
    seed = int(os.environ["TEST_SEED"]) if "TEST_SEED" in os.environ else random.randrange(1 << 30)
    print(f"seed {seed}")
    return seed


def _eq_weights(got, want, step):
    for l, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (l, g.shape, w.shape)
        bad = np.argwhere(g != w)
        assert bad.size == 0, f"step {step}, W{l}: {len(bad)} mismatches, first at {bad[0].tolist()}: " \
                              f"got {g[tuple(bad[0])]:#x} want {w[tuple(bad[0])]:#x}"


def _sample(rng, mlp):
    x = rng.uniform(-1, 1, mlp.n_in)
    if mlp.loss == "mse":
        return x, rng.uniform(-1, 1, mlp.n_out)
    return x, int(rng.integers(mlp.n_out))


def train_and_check(cfg, mlp, steps, backend, seed, **kw):
    """``steps`` SGD steps on ``backend`` and the golden trainer; weights compared after
    every step. Returns (program, session, golden, losses)."""
    rng = np.random.default_rng(seed)
    tp = compile_sgd(cfg, mlp, **kw)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = CoreSession(cfg, backend)
    tp.init(sess, W0)
    gold = GoldenSGD(cfg, mlp, W0, fused=tp.fused)
    _eq_weights(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), "init")
    losses = []
    for k in range(steps):
        x, t = _sample(rng, mlp)
        r = tp.run_step(sess, x, t)          # checks cycles == prediction and no write conflicts
        g = gold.step(x, t)
        assert r.loss == g["loss"] and np.array_equal(r.output, g["output"]), (k, r.loss, g["loss"])
        _eq_weights(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), k)
        assert r.cycles == tp.step_cycles() - tp.host_cycles()     # RUNs + the LOADs between them
        losses.append(r.loss)
    return tp, sess, gold, losses


# ======================================================================================
# core model and fast model vs the golden trainer
# ======================================================================================
@pytest.mark.parametrize("fmt", ["binary16", "binary32"])
@pytest.mark.parametrize("nr", [2, 4])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_sgd_core_model(loss, nr, fmt):
    seed = _seed()
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=256, mem_b_words=256)
    sizes = (5, 7, 3) if nr == 4 else (6, 5, 3, 3)        # nr does not divide these
    train_and_check(cfg, MLP(sizes, loss, 0.125), 2, "model", seed)


@pytest.mark.parametrize("backward", ["fused", "separate"])
@pytest.mark.parametrize("fmt", ["binary16", "binary32"])
@pytest.mark.parametrize("nr", [2, 4])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_sgd_fast_model(loss, nr, fmt, backward):
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=1024, mem_b_words=1024)
    sizes = (int(rng.integers(9, 30)), int(rng.integers(5, 19)), int(rng.integers(3, 13)), int(rng.integers(2, 7)))
    print(f"sizes {sizes}")
    tp, *_ = train_and_check(cfg, MLP(sizes, loss, 0.0625), 6, "fast", seed, backward=backward)
    assert tp.fused == [False] + [backward == "fused"] * 2


@pytest.mark.parametrize("fmt", ["binary16", "binary32"])
@pytest.mark.parametrize("nr", [2, 4])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_sgd_fused_core_model(loss, nr, fmt):
    """Every backward step fused (emit_gemv_t_rank1; golden rank1_scaled_v), on the core model."""
    seed = _seed()
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=256, mem_b_words=256)
    sizes = (5, 7, 3) if nr == 4 else (6, 5, 3, 3)
    tp, *_ = train_and_check(cfg, MLP(sizes, loss, 0.125), 2, "model", seed, backward="fused")
    assert tp.fused[1:] == [True] * (len(sizes) - 2)
    assert not any(k.startswith("dc") for k in tp.alloc.items)        # no rows copy of d for a GEMV^T
    for l in range(1, len(sizes) - 1):                                  # e not in W's bank
        assert tp.regions[f"e{l}"].bank != tp.wbanks[l]


def test_backward_choice_auto():
    """The automatic per-layer choice: fused where its cycles (with the one-bank ReLU mask)
    are within FUSED_TOLERANCE of the separate kernels' (large square layers), separate for
    the few-row output layers; GoldenSGD's default follows the compiler's; a mixed step
    (one layer fused, one not) is bit-exact."""
    import sw.train as T

    cfg = ArchConfig()
    mlp = MLP((64, 128, 128, 10), "softmax_ce", 0.01)
    plan = backward_plan(cfg, mlp)
    assert plan == [False, True, False]
    c1, c2 = backward_costs(cfg, mlp, 1), backward_costs(cfg, mlp, 2)
    assert c1["separate"] < c1["fused"] <= (1 + T.FUSED_TOLERANCE) * c1["separate"]
    assert c2["fused"] > (1 + T.FUSED_TOLERANCE) * c2["separate"]
    assert compile_sgd(cfg, mlp).fused == plan
    assert GoldenSGD(cfg, mlp, init_weights(mlp, cfg.fmt, 0)).fused == plan
    assert backward_plan(cfg, mlp, "fused") == [False, True, True]
    assert backward_plan(cfg, mlp, "separate") == [False, False, False]
    assert backward_plan(cfg, mlp, tolerance=1.0) == [False, True, True]
    assert backward_plan(cfg, MLP((64, 64, 10), "mse", 0.01)) == [False, False]
    with pytest.raises(TrainCompileError, match="unknown backward 'both'"):
        compile_sgd(cfg, mlp, backward="both")
    # a mixed step on the fast model (default tolerance): layer 1 (16 x 16) fused, layer 2 (3 x 16) not
    seed = _seed()
    cfg = ArchConfig(nr=2, mem_a_words=1024, mem_b_words=1024)
    mlp = MLP((12, 16, 16, 3), "mse", 0.0625)
    tp, *_ = train_and_check(cfg, mlp, 3, "fast", seed)
    assert tp.fused == [False, True, False]
    tp, *_ = train_and_check(cfg, replace(mlp, loss="softmax_ce"), 2, "fast", seed, tolerance=10.0)
    assert tp.fused == [False, True, True]


def test_fast_model_counters_equal_core_model():
    """Every counter of every RUN of a step is the same on the fast and the core model."""
    seed = _seed()
    cfg = ArchConfig(nr=3, mem_a_words=256, mem_b_words=256)
    mlp = MLP((7, 8, 4), "softmax_ce", 0.25)
    tp = compile_sgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, seed)
    rng = np.random.default_rng(seed)
    res = {}
    for be in ("model", "fast"):
        s = CoreSession(cfg, be)
        tp.init(s, W0)
        r = np.random.default_rng(seed)
        res[be] = [tp.run_step(s, *_sample(r, mlp)).counters for _ in range(2)]
    assert res["model"] == res["fast"]
    assert rng is not None


def test_predict_matches_golden_forward():
    seed = _seed()
    cfg = ArchConfig(nr=4, mem_a_words=512, mem_b_words=512)
    mlp = MLP((13, 10, 6), "softmax_ce", 0.125)
    tp, sess, gold, _ = train_and_check(cfg, mlp, 2, "fast", seed)
    rng = np.random.default_rng(seed + 1)
    for _ in range(3):
        x = rng.uniform(-1, 1, mlp.n_in)
        assert np.array_equal(tp.predict(sess, x), gold.predict(x))
    # the forward-only program leaves the weights alone
    _eq_weights(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), "after predict")


def test_binary32_tracks_float64_sgd():
    """The array's step is textbook SGD: in binary32 its weights stay within rounding
    distance of float64 SGD from the same start (both losses, two hidden layers)."""
    seed = _seed()
    cfg = ArchConfig(nr=2, fmt="binary32", mem_a_words=512, mem_b_words=512)
    for loss in ("mse", "softmax_ce"):
        mlp = MLP((9, 7, 5, 4), loss, 0.05)
        tp, sess, gold, _ = train_and_check(cfg, mlp, 5, "fast", seed)
        ref = Float64SGD(mlp, [cfg.fmt.to_float(W) for W in init_weights(mlp, cfg.fmt, seed)])
        rng = np.random.default_rng(seed)
        for _ in range(5):
            ref.step(*_sample(rng, mlp))
        for got, want in zip(tp.weights_from_session(sess), ref.W):
            np.testing.assert_allclose(cfg.fmt.to_float(got), want, rtol=1e-4, atol=1e-5)


def test_training_reduces_loss():
    """binary16 SGD on one repeated sample drives its MSE loss down (array = golden)."""
    cfg = ArchConfig(nr=4, mem_a_words=512, mem_b_words=512)
    mlp = MLP((10, 12, 4), "mse", 0.05)
    tp = compile_sgd(cfg, mlp)
    s = CoreSession(cfg, "fast")
    tp.init(s, init_weights(mlp, cfg.fmt, 7))
    rng = np.random.default_rng(7)
    x, t = rng.uniform(0, 1, 10), rng.uniform(-0.5, 0.5, 4)
    losses = [tp.run_step(s, x, t).loss for _ in range(15)]
    assert losses[-1] < 0.1 * losses[0], losses


def test_balanced_banks_and_split_microcode():
    """Weights that do not fit MEM A alone go to both banks (the vectors then follow
    the kernels' bank rules); a small microcode splits the step into several programs
    and images, and every step LOADs the images between its RUNs (counted in its cycles,
    as :meth:`reload_cycles` predicts: only the words that differ). Both still bit-exact."""
    seed = _seed()
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)
    mlp = MLP((15, 11, 6), "mse", 0.125)              # W0 48 + W1 18 words > 64
    tp, sess, *_ = train_and_check(cfg, mlp, 3, "fast", seed)
    assert set(tp.wbanks) == {"a", "b"}
    assert len(tp.programs) >= 2 and len(tp.images) >= 2
    whole = sum(load_beat_count(cfg, len(tp.images[p.image])) for p in tp.programs)
    assert 0 < tp.reload_cycles() <= whole and sess.loads.cycles > 3 * tp.reload_cycles()
    tp2, *_ = train_and_check(replace(cfg, mem_a_words=128, ucode_depth=32), MLP((6, 5, 3), "softmax_ce", 0.125),
                              2, "fast", seed)
    assert len(tp2.programs) >= 3


def test_gaps_are_needed(monkeypatch):
    """Without the inter-kernel NOPs of kernel_gap the step is wrong (the hazards are real)."""
    import sw.train as T

    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)
    mlp = MLP((6, 5, 3), "mse", 0.125)
    tp = compile_sgd(cfg, mlp)
    assert sum(sum(p.gaps) for p in tp.programs) > 0
    monkeypatch.setattr(T, "kernel_gap", lambda cfg, a, b: 0)
    bad = compile_sgd(cfg, mlp)
    monkeypatch.undo()
    rng = np.random.default_rng(1)
    gold = GoldenSGD(cfg, mlp, init_weights(mlp, cfg.fmt, 1))
    assert mismatches(bad, gold, mlp, cfg, [_sample(rng, mlp) for _ in range(3)], 1) > 0
    assert kernel_gap(cfg, tp.ops[0], tp.ops[1]) == 0     # two loads into different regions


def test_store_read_gap_only_on_the_stored_word():
    """A GEMV after a GEMV that wrote its input: no NOP when the first GEMV's last
    instruction stores an output word the second's first instruction does not read (its
    last of two local rows, the other reads word 0), one when it is that word (one local
    row), one when an op's code differs between cores (``per_core``: conservative), and
    one when the read's address is not fixed (an AGU). The chip trainers' bit-exact tests
    run the steps these gaps give on both engines and the RTL."""
    from sw.asm import mov
    from sw.collectives import Region
    from sw.kernels import emit_gemv, emit_relu
    from sw.train_ops import Op, _edge_words

    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64)
    x, xc, y, yc, z = (Region("b", 10 * i) for i in range(5))

    def gemv(name, m, n, W, xin, xcopy, out):
        return Op(name, "gemv", lambda b: emit_gemv(b, cfg, m, n, W, xin, out, x_layout="diag",
                                                    x_copy=xcopy).instructions,
                  reads=[(W, 8), (xin, 2)], writes=[(out, 2), (xcopy, 3)])

    two = gemv("g1", 4, 2, Region("a", 0), x, xc, y)          # 2 local rows: stores y[1] last
    one = gemv("g1", 2, 2, Region("a", 0), x, xc, y)          # 1 local row: stores y[0] last
    nxt = gemv("g2", 2, 4, Region("a", 20), y, yc, z)         # reads y[0] first
    assert _edge_words(cfg, two, last=True)[1] == {("b", y.base + 1)}
    assert ("b", y.base) in _edge_words(cfg, nxt, last=False)[0]
    assert kernel_gap(cfg, two, nxt) == 0 and kernel_gap(cfg, one, nxt) == 1
    assert kernel_gap(cfg, Op("g1", "gemv", two.emit, two.reads, two.writes, per_core=True), nxt) == 1
    relu = Op("re", "relu", lambda b: emit_relu(b, cfg, 2, y, y).instructions, reads=[(y, 2)], writes=[(y, 2)])
    assert kernel_gap(cfg, two, relu) == 0 and kernel_gap(cfg, one, relu) == 1     # it reads y[0] first
    yb = y.bind(cfg)

    def agu_read(b):                                   # y[1] through an AGU: its address is not fixed
        b.emit(yb.rd(1, agu="g0"), mov("r1", yb.src))
        return 1
    assert _edge_words(cfg, Op("a", "x", agu_read), last=False) is None
    assert kernel_gap(cfg, two, Op("a", "x", agu_read, reads=[(y, 2)])) == 1


def test_fused_gaps_are_needed(monkeypatch):
    """Fused backward steps: the NOPs before the fused kernel (it reads d) are needed
    after an FMA writing d; none after it (its last instruction stores y's last word, which the ReLU mask's first does
    not read) nor for its W write-backs (its reduction and moves follow the last
    update)."""
    import sw.train as T
    from sw.train_ops import _edge_words

    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64)
    mlp = MLP((6, 5, 4, 3), "mse", 0.125)
    tp = compile_sgd(cfg, mlp, backward="fused")
    assert len(tp.programs) == 1
    ops = [o for p in tp.programs for o in p.ops]
    gaps = [g for p in tp.programs for g in p.gaps]
    for i, o in enumerate(ops):
        if o.kind == "gemv_t_rank1":
            # the mask's first instruction reads a, the kernel's last stores y's last word
            assert ops[i + 1].kind == "relu_mask" and gaps[i + 1] == 0
            assert not _edge_words(cfg, o, last=True)[1] & _edge_words(cfg, ops[i + 1], last=False)[0]
            # before it: after the loss gradient's FMA write-backs of d, their latency; after
            # a mask storing d none (its last store is d's last word, the kernel first reads -lr)
            assert gaps[i] == (cfg.fpu_latency - 1 if ops[i - 1].fma_wb else 0)
            assert o.wb_tail >= cfg.fpu_latency - 1
            W = o.wb[0]
            reader = T.Op("r", "gemv", reads=[W])
            storer = T.Op("s", "relu", writes=[(T.Region(W[0].bank, 60), 1)])
            assert kernel_gap(cfg, o, reader) == 0 and kernel_gap(cfg, o, storer) == 0
            r1 = T.Op("r1", "rank1", writes=[W], fma_wb=True, stores=False)
            assert kernel_gap(cfg, r1, reader) == cfg.fpu_latency - 1 == kernel_gap(cfg, r1, storer)
    for lim in (0, None):       # no gap at all; only the gaps around the fused kernels removed
        orig = T.kernel_gap

        def gap(cfg, a, b, lim=lim, orig=orig):
            if lim == 0 or "gemv_t_rank1" in (a.kind, b.kind):
                return 0
            return orig(cfg, a, b)

        monkeypatch.setattr(T, "kernel_gap", gap)
        bad = compile_sgd(cfg, mlp, backward="fused")
        monkeypatch.undo()
        rng = np.random.default_rng(2)
        gold = GoldenSGD(cfg, mlp, init_weights(mlp, cfg.fmt, 2), fused=bad.fused)
        assert mismatches(bad, gold, mlp, cfg, [_sample(rng, mlp) for _ in range(3)], 2) > 0, lim


@pytest.mark.parametrize("nr", [2, 4])
def test_no_gap_after_fused_weight_update(nr):
    """kernel_gap gives no NOPs after the fused kernel for a kernel reading W or storing
    into W's bank (its last W write-back lands before its reduction and moves end): run
    back to back with no NOP, a GEMV reading the updated W and a ReLU storing into W's
    bank are right (golden, no write conflict), on the core model; the same ReLU right
    after a rank-1 update, with no NOP, loses stores to the update's write-backs."""
    from sw import golden
    from sw.kernels import Scalar, emit_gemv, emit_gemv_t_rank1, emit_rank1, emit_relu
    from sim.core_run import run_kernel
    from sw.layout import local_len, pack_matrix, pack_vector, unpack_vector
    from sw.collectives import Region

    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=nr, mem_a_words=256, mem_b_words=256)
    fmt = cfg.fmt
    m, n = 5, 7
    L = lambda k: local_len(k, nr)             # noqa: E731
    bits = lambda *sh: fmt.from_float(rng.uniform(-1, 1, sh)).astype(fmt.np_uint)   # noqa: E731
    Wg, dg, ag, xg, zg, z3g = bits(m, n), bits(m), bits(n), bits(n), bits(nr, nr, 3), bits(nr, nr, 3)
    al = fmt.from_float(np.array([-0.375]))[0]
    W1, W2, W3, z, z3 = (Region("a", o) for o in (0, 64, 128, 200, 220))
    d, a, y, x, y2, sc = (Region("b", o) for o in (0, 16, 32, 48, 64, 96))
    loads = [(W, pack_matrix(Wg, nr)) for W in (W1, W2, W3)] + [
        (d, pack_vector(dg, nr, "diag")), (a, pack_vector(ag, nr, "cols")), (x, pack_vector(xg, nr, "cols")),
        (z, zg), (z3, z3g), (sc, np.full((nr, nr, 1), al, dtype=fmt.np_uint))]
    fz = lambda W, y: emit_gemv_t_rank1(b_[0], cfg, m, n, W, d, a, y, alpha=Scalar("b", 96))  # noqa: E731
    b_ = [None]

    def k_read(b):
        b_[0] = b
        fz(W1, y)
        emit_gemv(b, cfg, m, n, W1, x, y2, name="g2")

    def k_store(b):
        b_[0] = b
        fz(W2, y)
        emit_relu(b, cfg, 3, z, z)

    def k_rank1(b):
        emit_rank1(b, cfg, m, n, W3, d, a, alpha=Scalar("b", 96), u_layout="diag")
        emit_relu(b, cfg, 3, z3, z3)

    outs, res = run_kernel(cfg, loads, [k_read, k_store, k_rank1],
                           [(W1, L(m) * L(n)), (y2, L(m)), (W2, L(m) * L(n)), (z, 3), (z3, 3)])
    Wn = golden.rank1_scaled_v(fmt, nr, Wg, dg, ag, al)
    assert np.array_equal(outs[0], pack_matrix(Wn[:m, :n], nr))
    assert np.array_equal(unpack_vector(outs[1], m, "rows"), golden.gemv(fmt, nr, Wn[:m, :n], xg))
    assert np.array_equal(outs[2], pack_matrix(Wn[:m, :n], nr))
    assert np.array_equal(outs[3], golden.relu(fmt, zg))
    assert res[0].counters["mem_conflict"] == 0 == res[1].counters["mem_conflict"]
    assert res[2].counters["mem_conflict"] > 0 and not np.array_equal(outs[4], golden.relu(fmt, z3g))


def test_cycle_formula_is_the_sum_of_kernel_costs():
    from sw.collectives import Frag, Region
    from sw.softmax import emit_softmax_grad
    from sw.kernels import elementwise_cost, gemv_cost, gemv_t_rank1_cost, rank1_cost

    cfg = ArchConfig(nr=4)
    mlp = MLP((64, 64, 10), "mse", 0.01)
    tp = compile_sgd(cfg, mlp)
    L = lambda n: -(-n // 4)                    # noqa: E731
    want = (L(64) + L(10)                                          # loads x, t (one beat per word)
            + gemv_cost(cfg, 64, 64)["instructions"] + elementwise_cost("relu", L(64))
            + gemv_cost(cfg, 10, 64)["instructions"] + elementwise_cost("axpy", L(10))
            + gemv_cost(cfg, 10, 64, trans=True)["instructions"] + elementwise_cost("relu_mask", L(64))
            + rank1_cost(cfg, 10, 64)["instructions"] + rank1_cost(cfg, 64, 64)["instructions"]
            + L(10)                                                  # unload d
            + sum(tp.programs[0].gaps) + cfg.run_overhead)
    assert tp.predicted_cycles() == [want]
    assert tp.step_cycles() == want
    ce = compile_sgd(cfg, replace(mlp, loss="softmax_ce"), softmax="host")
    assert ce.softmax == "host"
    assert ce.host_cycles(500) == 500 and ce.step_cycles(500) == sum(ce.predicted_cycles()) + 500
    # softmax on the array: one RUN, the kernel instead of the axpy, no host turnaround
    ca = compile_sgd(cfg, replace(mlp, loss="softmax_ce"))
    smx = emit_softmax_grad(Frag(), cfg, 10, Region("a", 0), Region("a", 0), Region("b", 0), Region("a", 0),
                            Region("b", 0), Region("a", 0)).instructions
    assert ca.softmax == "array" and ca.host_cycles(500) == 0 and len(ca.programs) == 1
    assert ca.predicted_cycles() == [want - elementwise_cost("axpy", L(10)) + smx - sum(tp.programs[0].gaps)
                                     + sum(ca.programs[0].gaps)]
    # fused: W1^T d and its update in one kernel; the mask's operands then share a bank
    fu = compile_sgd(cfg, mlp, backward="fused")
    want_f = (want - gemv_cost(cfg, 10, 64, trans=True)["instructions"] - rank1_cost(cfg, 10, 64)["instructions"]
              - elementwise_cost("relu_mask", L(64)) - sum(tp.programs[0].gaps)
              + gemv_t_rank1_cost(cfg, 10, 64)["instructions"] + elementwise_cost("relu_mask", L(64), two_banks=False)
              + sum(fu.programs[0].gaps))
    assert fu.predicted_cycles() == [want_f]


# ======================================================================================
# errors
# ======================================================================================
def test_does_not_fit():
    cfg = ArchConfig(nr=4)
    with pytest.raises(TrainCompileError) as e:
        compile_sgd(cfg, MLP((256, 256, 10), "mse", 0.01))
    msg = str(e.value)
    assert "does not fit one 4x4 core" in msg and "MEM A 4096 + MEM B 4096" in msg and "W0 256x256: 4096" in msg
    # with 8192-word banks it fits
    tp = compile_sgd(replace(cfg, mem_a_words=8192, mem_b_words=8192), MLP((256, 256, 10), "mse", 0.01))
    assert tp.wbanks == ["a", "a"]
    with pytest.raises(TrainCompileError, match="ucode_depth"):
        compile_sgd(ArchConfig(nr=4, ucode_depth=16), MLP((64, 64, 10), "mse", 0.01))


def test_bad_mlp_and_options():
    for kw, pat in [(dict(sizes=(4,)), "at least an input and an output"),
                    (dict(sizes=(4, 0, 2)), r"sizes\[1\] must be an integer in 1..65535"),
                    (dict(sizes=(4, 2.5)), r"sizes\[1\]"),
                    (dict(sizes=5), "sequence"),
                    (dict(sizes=(4, 3), loss="hinge"), "loss must be one of mse, softmax_ce"),
                    (dict(sizes=(4, 1), loss="softmax_ce"), "at least 2 outputs"),
                    (dict(sizes=(4, 3), lr=0), "lr must be a finite number > 0"),
                    (dict(sizes=(4, 3), lr=float("nan")), "lr must be"),
                    (dict(sizes=(4, 3), batch=0), "batch must be an integer >= 1")]:
        with pytest.raises(MLPError, match=pat):
            MLP(**kw)
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64)
    with pytest.raises(TrainCompileError, match="only batch 1"):
        compile_sgd(cfg, MLP((4, 3), batch=4))
    with pytest.raises(TrainCompileError, match="learning rate 1e-10 is zero in binary16"):
        compile_sgd(cfg, MLP((4, 3), lr=1e-10))
    with pytest.raises(TrainCompileError, match="nr >= 2"):
        compile_sgd(ArchConfig(nr=1), MLP((4, 3)))
    tp = compile_sgd(cfg, MLP((4, 3)))
    s = CoreSession(cfg, "fast")
    with pytest.raises(ValueError, match="expected a vector of 4 values"):
        tp.run_step(s, np.zeros(5), np.zeros(3))
    with pytest.raises(ValueError, match="W0 must be"):
        tp.init(s, [np.zeros((4, 3))])


# ======================================================================================
# RTL: a recorded host stream replayed on Icarus and Verilator
# ======================================================================================
#: tests/sw/test_kernels.py's nr2_fp16 configuration (the simulator build is shared)
RTL_CFG = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)


@pytest.mark.parametrize("loss,backward", [("mse", "auto"), ("softmax_ce", "auto"), ("mse", "separate")])
@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_sgd_rtl(sim, loss, backward):
    """``auto`` fuses layer 1 (3 x 5 on 2 x 2: the fused kernel is the faster there);
    ``separate``: GEMV^T, mask, rank-1."""
    tp = _sgd_rtl(sim, RTL_CFG, MLP((6, 5, 3), loss, 0.125), backward=backward)
    assert tp.fused == [False, backward == "auto"]
    assert tp.softmax == (None if loss == "mse" else "host")     # the kernel does not fit 128 words


#: tests/sw/test_kernels.py's nr4_fp16 configuration: room for the softmax kernel
RTL_CFG4 = ArchConfig(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=256)


@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_sgd_rtl_softmax_on_array(sim):
    """The softmax gradient computed on the array (sw/softmax.py) inside the step, on the RTL."""
    tp = _sgd_rtl(sim, RTL_CFG4, MLP((6, 5, 7), "softmax_ce", 0.125))
    assert tp.softmax == "array" and tp.host_cycles() == 0
    assert "softmax" in [op.name for p in tp.programs for op in p.ops]


def _sgd_rtl(sim, cfg, mlp, **kw):
    """Two SGD steps recorded on the core model, replayed on the RTL (beats and counters
    compared), the weights unloaded and compared with the golden trainer's."""
    from sim.core_run import Phase, run_session

    seed = _seed()
    loss, backward = mlp.loss, kw.get("backward", "auto")
    rng = np.random.default_rng(seed)
    tp = compile_sgd(cfg, mlp, **kw)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = CoreSession(cfg, "model", record=True)
    tp.init(sess, W0)
    gold = GoldenSGD(cfg, mlp, W0, fused=tp.fused)
    steps = []
    for _ in range(2):
        x, t = _sample(rng, mlp)
        steps.append(tp.run_step(sess, x, t))
        gold.step(x, t)
    phases = sess.phases + [Phase(w, d, n) for w, d, n in tp.unload_weights_phases()]
    res = run_session(cfg, phases, backend="rtl", sim=sim, name=f"train-{loss}-{backward}-nr{cfg.nr}")   # beats == model's
    n_init = len(sess.phases) - 2 * len(tp.programs)
    runs = res[n_init:n_init + 2 * len(tp.programs)]
    for i, st in enumerate(steps):
        rtl_ctr = runs[i * len(tp.programs):(i + 1) * len(tp.programs)]
        assert [r.counters for r in rtl_ctr] == st.counters
    got = tp.decode_weights(res[-mlp.n_layers:], padded=True)
    _eq_weights(got, gold.weights(padded=True), "rtl")
    print(f"{sim}: {res[-1].info}")
    return tp


# ======================================================================================
# data sets and the command line
# ======================================================================================
def test_idx_reader_and_mnist_loader(tmp_path):
    import gzip
    import struct

    from sw.datasets import load_mnist_idx, read_idx

    rng = np.random.default_rng(0)
    imgs = {"train": rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8),
            "t10k": rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)}
    for split, im in imgs.items():
        raw = struct.pack(">BBBBIII", 0, 0, 8, 3, *im.shape) + im.tobytes()
        (tmp_path / f"{split}-images-idx3-ubyte").write_bytes(raw)
        lab = (np.arange(len(im)) % 10).astype(np.uint8)
        with gzip.open(tmp_path / f"{split}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(struct.pack(">BBBBI", 0, 0, 8, 1, len(lab)) + lab.tobytes())
    assert np.array_equal(read_idx(tmp_path / "train-images-idx3-ubyte"), imgs["train"])
    d = load_mnist_idx(tmp_path)
    assert d.x_train.shape == (5, 784) and d.x_test.shape == (3, 784) and d.n_classes == 10
    assert np.array_equal(d.x_train, imgs["train"].reshape(5, -1) / 255.0)
    assert list(d.y_test) == [0, 1, 2]
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(struct.pack(">BBBBI", 0, 0, 8, 1, 10) + b"\x00")
    with pytest.raises(ValueError, match="need 10"):
        read_idx(tmp_path / "short")
    with pytest.raises(InputError, match="not downloaded"):
        load_mnist_idx(tmp_path / "nowhere")


def test_digits_loader():
    pytest.importorskip("sklearn")
    from sw.datasets import load_digits

    d = load_digits()
    assert d.n_in == 64 and d.n_classes == 10 and len(d.x_train) + len(d.x_test) == 1797
    assert d.x_train.min() >= 0 and d.x_train.max() <= 1


def test_cli_train(tmp_path):
    """``caterpillar train`` end to end on a small synthetic set: golden-checked steps,
    JSON and PNG written, the step figures equal the compiler's prediction."""
    import json

    from cli.main import main

    js, png = tmp_path / "t.json", tmp_path / "t.png"
    rc = main(["train", "--data", "synthetic", "--hidden", "6", "--epochs", "2", "--lr", "0.1",
               "--config", '{"nr": 2, "mem_a_words": 256, "mem_b_words": 256}', "--golden-steps", "20",
               "--max-train", "60", "--json", str(js), "--png", str(png)])
    assert rc == 0 and png.stat().st_size > 1000
    res = json.loads(js.read_text())
    tp = compile_sgd(ArchConfig(nr=2, mem_a_words=256, mem_b_words=256), MLP((16, 6, 4), "softmax_ce", 0.1))
    assert res["step"]["run_cycles"] == sum(tp.predicted_cycles()) and res["golden_checked_steps"] == 20
    assert res["steps"] == 120 and res["epochs"][-1]["test_accuracy"] > 0.5
    assert tp.softmax == "array" and res["step"]["host_cycles"] == 0
    # --softmax host: two RUNs per step and the turnaround
    rc = main(["train", "--data", "synthetic", "--hidden", "6", "--epochs", "1", "--lr", "0.1",
               "--config", '{"nr": 2, "mem_a_words": 256, "mem_b_words": 256}', "--golden-steps", "5",
               "--max-train", "20", "--max-test", "10", "--json", str(js), "--softmax", "host"])
    res = json.loads(js.read_text())
    assert rc == 0 and res["step"]["host_cycles"] == 1000 and res["golden_checked_steps"] == 5
    assert main(["train", "--data", "mnist"]) == 2        # no --mnist-dir: a usage error, exit 2


def test_sgd_bfloat16_nr3():
    """Any format and core size the kernels support: bfloat16 on a 3x3 core."""
    seed = _seed()
    cfg = ArchConfig(nr=3, fmt="bfloat16", mem_a_words=256, mem_b_words=256)
    for loss in ("mse", "softmax_ce"):
        train_and_check(cfg, MLP((8, 7, 5), loss, 0.125), 3, "fast", seed)


@pytest.mark.parametrize("backward", ["fused", "separate"])
@pytest.mark.parametrize("nr", [2, 4])
def test_sgd_exec_stage(nr, backward):
    """The FPGA timing (execute stage with its bypass, distribution stage, FP 4 / 5): the same compiler, the
    golden trainer bit for bit, on the fast model (its per-cycle engine)."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=nr, mem_a_words=1024, mem_b_words=1024, exec_stage=True, bus_stage=True, rx_stage=True,
                     dist_stage=True, fetch_stage=True, read_stage=True, mul_latency=4, add_latency=5)
    sizes = (int(rng.integers(9, 20)), int(rng.integers(5, 13)), int(rng.integers(2, 7)))
    print(f"sizes {sizes}")
    train_and_check(cfg, MLP(sizes, "softmax_ce", 0.0625), 3, "fast", seed, backward=backward)
