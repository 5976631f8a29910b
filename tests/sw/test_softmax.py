"""The softmax gradient kernel (sw/softmax.py): accuracy of its golden model against
float64, the kernel against the golden bit for bit on the per-cycle core model and the RTL,
corner cases (ties, underflow, huge logits, padding, several passes), errors and the
compiler's choice between the array and the host. Seeds are printed."""

import random

import numpy as np
import pytest

from tests.simulators import REPLAY_SIM_PARAMS
from sw.collectives import Frag, Region
from arch.config import ArchConfig
from sw.kernels import KernelError
from sim.core_run import run_kernel
from sw.layout import pack_vector
from sw.mlp import MLP
from sw.softmax import (_bus_max_order, emit_softmax_grad, golden_exp, golden_softmax_grad, softmax_pen,
                        softmax_plan, softmax_size, softmax_supported, softmax_table, softmax_words)
from sw.train import TrainCompileError, compile_sgd, resolve_softmax

FMTS = ["binary16", "bfloat16", "binary32"]


def _seed():
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    return seed


def _ulps(fmt, got, x):
    """|got - exp(x)| in ulps of the correctly rounded exp(x) (float64 reference)."""
    ref = np.exp(fmt.to_float(x).astype(np.float64))
    ulp = np.spacing(ref.astype(fmt.np_dtype)).astype(np.float64)
    return np.abs(fmt.to_float(got).astype(np.float64) - ref) / ulp


# ======================================================================================
# the exponential
# ======================================================================================
@pytest.mark.parametrize("fmt,bound", [("binary16", 1.0), ("bfloat16", 7.0), ("binary32", 1.5)])
def test_exp_accuracy(fmt, bound):
    """Every representable x in [x_min, 0] of binary16 / bfloat16 (a dense sample for
    binary32): within ``bound`` ulps of exp(x); exp(0) == 1 exactly; 0 below x_min."""
    cfg = ArchConfig(nr=4, fmt=fmt)
    f = cfg.fmt
    plan, tab = softmax_plan(cfg, 10), softmax_table(cfg, 10)
    xmin = -float(f.to_float(tab[plan.index("nxmin")]))
    if f.width == 16:
        allx = np.arange(1 << 16, dtype=np.uint32).astype(f.np_uint)
        with np.errstate(invalid="ignore"):          # the NaN patterns
            xf = f.to_float(allx)
        x = allx[np.isfinite(xf) & (xf <= 0) & (xf > xmin)]
    else:
        x = f.from_float(-np.geomspace(1e-30, -xmin * 0.9999, 200001)).astype(f.np_uint)
    err = _ulps(f, golden_exp(f, plan, tab, x), x)
    print(f"{fmt}: {len(x)} points, max {err.max():.3f} ulp at x = {f.to_float(x[err.argmax()])}")
    assert err.max() <= bound
    one = golden_exp(f, plan, tab, np.array([0, f.neg_zero], dtype=f.np_uint))
    assert list(one) == [f.one, f.one]
    below = f.from_float(np.array([xmin, xmin * 1.5, -1e4 if f.width == 16 else -1e30])).astype(f.np_uint)
    below = np.append(below, f.np_uint.type(f.inf | f.sign_mask))
    assert not golden_exp(f, plan, tab, below).any()


# ======================================================================================
# the golden softmax gradient against float64
# ======================================================================================
def _case(f, rng, n, kind):
    if kind == "normal":
        z = rng.normal(0, 4, n)
    elif kind == "ties":
        z = np.full(n, 3.25)
        z[rng.integers(n)] = 5.5
        z[rng.integers(n)] = 5.5
    elif kind == "equal":
        z = np.full(n, -7.0)
    elif kind == "underflow":                 # most elements far below the maximum
        z = rng.normal(-60, 10, n)
        z[rng.integers(n)] = 2.0
    elif kind == "huge":                      # near the format's largest finite values
        big = float(f.to_float(np.array([f.max_finite], dtype=f.np_uint))[0])
        z = rng.uniform(-big, big, n)
    else:  # "negative"
        z = rng.uniform(-200, -150, n)
    t = np.zeros(n)
    t[rng.integers(n)] = 1.0
    return f.from_float(z).astype(f.np_uint), f.from_float(t).astype(f.np_uint)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("kind", ["normal", "ties", "equal", "underflow", "huge", "negative"])
def test_golden_matches_float64(fmt, kind):
    """softmax(z) - t to within a few ulps of 1 (absolute), for the shapes that exercise
    one and several passes and padding."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    for nr, n in [(4, 10), (4, 3), (2, 10), (4, 17), (4, 40), (2, 2)]:
        cfg = ArchConfig(nr=nr, fmt=fmt)
        f = cfg.fmt
        z, t = _case(f, rng, n, kind)
        g = f.to_float(golden_softmax_grad(cfg, z, t)).astype(np.float64)
        zf = f.to_float(z).astype(np.float64)
        p = np.exp(zf - zf.max())
        p /= p.sum()
        want = p - f.to_float(t)
        err = np.abs(g - want).max()
        tol = 8 * 2.0 ** -f.frac_bits
        assert np.isfinite(g).all() and err <= tol, (nr, n, err, tol)


# ======================================================================================
# the kernel against the golden, bit for bit
# ======================================================================================
def _run(cfg, n, z, t, backend="model", sim=None):
    nr = cfg.nr
    plan = softmax_plan(cfg, n)
    w, tw = plan.words, plan.table_words
    Z, T, G = Region("a", 0), Region("a", w), Region("b", 0)
    KA, KB, PEN = Region("a", 2 * w), Region("b", w), Region("b", w + tw)
    tab = np.ascontiguousarray(np.broadcast_to(softmax_table(cfg, n), (nr, nr, tw)))
    loads = [(Z, pack_vector(z, nr, "rows")), (T, pack_vector(t, nr, "rows")), (KA, tab), (KB, tab),
             (PEN, softmax_pen(cfg, n))]
    info = {}

    def kern(b):
        info["k"] = emit_softmax_grad(b, cfg, n, Z, T, G, KA, KB, PEN)

    outs, res = run_kernel(cfg, loads, kern, [(G, w)], backend=backend, sim=sim, name=f"softmax-{n}")
    assert np.array_equal(outs[0], pack_vector(golden_softmax_grad(cfg, z, t), nr, "rows"))
    c = res[0].counters
    assert c["cycles"] == info["k"].cycles_standalone(cfg)
    assert c["rf_conflict"] == 0 and c["mem_conflict"] == 0
    return info["k"]


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("nr,n", [(4, 10), (4, 3), (2, 10), (4, 17), (4, 40), (2, 2), (3, 7)])
def test_kernel_core_model(fmt, nr, n):
    """The per-cycle core model runs the kernel to the golden's bits, in the predicted
    cycles, with no write conflict (so the scheduler honours the pipeline's distances)."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=256, mem_b_words=256)
    for kind in ("normal", "underflow"):
        z, t = _case(cfg.fmt, rng, n, kind)
        k = _run(cfg, n, z, t)
    plan = softmax_plan(cfg, n)
    assert k.params["passes"] == plan.passes == -(-(-(-n // nr)) // nr)


@pytest.mark.parametrize("fmt", FMTS)
def test_reciprocal_seed(fmt):
    """The reciprocal's linear seed ``y0 = b s + a`` (rounded constants, the product
    rounded, then the sum, as the kernel's FMA): its relative error ``1 - s y0`` over
    every representable ``s`` in ``[1, n]`` (binary32: 20,000 of them) stays within
    :func:`sw.softmax._seed_error`'s bound, below 1 (bfloat16 at ``n = 1000`` keeps the
    constant seed, its line's rounded constants cancelling); Newton's iterations follow
    from the bound: at ``n = 10`` five in binary16 where the constant seed ``2 / (n + 1)``
    took seven."""
    from pe.fp_golden import mac_bits
    from sw.softmax import _newton_iters, _round_bits, _seed_error, _seed_line

    f = ArchConfig(fmt=fmt).fmt
    for n in (1, 2, 3, 10, 37, 256, 1000):
        a, b = (f.np_uint.type(_round_bits(f, v)) for v in _seed_line(f, n))
        grid = np.unique(f.from_float(np.linspace(1.0, n, 20000)).astype(f.np_uint))
        s = f.to_float(grid).astype(np.float64)
        grid, s = grid[(s >= 1) & (s <= n)], s[(s >= 1) & (s <= n)]
        y0 = f.to_float(mac_bits(f, np.full_like(grid, b), grid, np.full_like(grid, a))).astype(np.float64)
        err = np.max(np.abs(1 - s * y0))
        assert err <= _seed_error(f, n) < 1, (n, err, _seed_error(f, n))
    if fmt == "bfloat16":
        assert _seed_line(f, 1000)[1] == 0 and _seed_line(f, 10)[1] < 0
    if fmt == "binary16":
        e0 = 9 / 11                                          # the constant seed's error at n = 10
        assert _newton_iters(f, 10) == 5 and e0 ** (2 ** 5) > 2.0 ** -(f.precision + 1)


def test_maximum_chains():
    """Two interleaved maximum chains along a bus of four or more PEs where the registers
    allow (shorter than one chain), one otherwise; the golden follows the plan's order,
    and the kernel matches it on the core model with signed zeros and ties as the
    largest logits (the two orders could differ only in such bits)."""
    assert _bus_max_order(3, 2) == ((0, 1, 2), ())
    assert _bus_max_order(5, 2) == ((0, 2, 4), (1, 3)) and _bus_max_order(5, 1) == ((0, 1, 2, 3, 4), ())
    cfg = ArchConfig(nr=4, mem_a_words=256, mem_b_words=256)
    one = ArchConfig(nr=4, mem_a_words=256, mem_b_words=256, n_regs=12)
    assert softmax_plan(cfg, 10).max_chains == 2 and softmax_plan(one, 10).max_chains == 1
    assert softmax_plan(ArchConfig(nr=4, n_regs=12), 40).max_chains == 1       # 3 passes leave 7 free
    wide = ArchConfig(nr=16)
    assert softmax_size(wide, 10)[1] + 60 < softmax_size(wide.replace(n_regs=11), 10)[1]      # 10 rows: 376 < 441
    f = cfg.fmt
    for c in (cfg, one):
        for zs in ([0.0, -0.0, -1.0, -0.0, 0.0, -3.0, -0.0, -2.0, 0.0, -0.0], [2.0] * 5 + [-0.0] * 5):
            z = f.from_float(np.array(zs)).astype(f.np_uint)
            t = f.from_float(np.eye(10)[3]).astype(f.np_uint)
            _run(c, 10, z, t)


def test_kernel_slow_fpu():
    """Other FPU latencies: the schedule follows the configuration."""
    cfg = ArchConfig(nr=3, mem_a_words=256, mem_b_words=256, mul_latency=4, add_latency=5)
    rng = np.random.default_rng(_seed())
    z, t = _case(cfg.fmt, rng, 11, "normal")
    _run(cfg, 11, z, t)


#: tests/sw/test_kernels.py's nr4_fp16 configuration (the simulator build is shared)
RTL_CFG4 = ArchConfig(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=256)


@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_kernel_rtl(sim):
    rng = np.random.default_rng(_seed())
    for n, kind in [(10, "ties"), (7, "underflow")]:
        z, t = _case(RTL_CFG4.fmt, rng, n, kind)
        _run(RTL_CFG4, n, z, t, backend="rtl", sim=sim)


# ======================================================================================
# errors and the compiler's choice
# ======================================================================================
def test_errors_and_choice():
    cfg = ArchConfig(nr=4)
    z, t, g, a, b_ = Region("a", 0), Region("b", 0), Region("b", 8), Region("a", 100), Region("b", 100)
    with pytest.raises(KernelError, match="g must not be in t's bank"):
        emit_softmax_grad(Frag(), cfg, 10, z, t, t, a, b_, a)
    with pytest.raises(KernelError, match="one copy in bank A"):
        emit_softmax_grad(Frag(), cfg, 10, z, t, g, b_, a, a)
    few = ArchConfig(nr=4, n_regs=8)
    assert "needs 10 registers" in softmax_supported(few, 40)
    with pytest.raises(KernelError, match="n_regs = 8"):
        softmax_plan(few, 40)
    tiny = ArchConfig(nr=2, ucode_depth=128)
    assert "microcode words" in softmax_supported(tiny, 3) and softmax_words(tiny, 3) > 127
    mlp = MLP((6, 5, 3), "softmax_ce", 0.125)
    assert resolve_softmax(tiny, mlp) == "host" and resolve_softmax(cfg, mlp) == "array"
    assert resolve_softmax(cfg, mlp, "host") == "host"
    assert resolve_softmax(cfg, MLP((6, 5, 3), "mse", 0.125)) is None
    with pytest.raises(TrainCompileError, match="not possible here: .*microcode words"):
        compile_sgd(tiny, mlp, softmax="array")
    with pytest.raises(TrainCompileError, match="softmax must be one of auto, array, host"):
        compile_sgd(cfg, mlp, softmax="gpu")
