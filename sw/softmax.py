"""Softmax cross-entropy gradient on the array: ``g = softmax(z) - t`` on one core.

:func:`emit_softmax_grad` computes the loss gradient of a softmax output layer from the
logits ``z`` and the target ``t`` (both ``n`` long, ``rows`` layout) into ``g`` (``rows``
layout), with the PE's FMA and move units only, so a training step needs no host
turnaround between its forward and backward passes. :func:`golden_softmax_grad` is its
bit-exact numpy model (the same operations in the same order); :func:`golden_exp` is the
exponential alone, for accuracy tests.

Mapping. Word ``k`` of the rows layout (``z[k nr + r]`` on every PE of row ``r``) is
worked on by the PEs of column ``k mod nr`` in *pass* ``k // nr`` (a register each), so
a vector of up to ``nr^2`` elements takes one pass: every PE computes one element. A
penalty word per PE and pass (``0`` for a real element, ``-max_finite`` for padding,
loaded once with the weights: :func:`softmax_pen`) is added to ``z`` so padding never
wins the maximum and its exponential is flushed to zero.

Numerics (every operation is a PE FMA ``fmt(fmt(a * b) + c)``, an exact select ``mask``
or a move; constants come from a table in both SRAM banks, :func:`softmax_table`):

1. ``m = max z`` exactly: per pair ``d = b - a``, ``max = mask(b if d) + (a - mask(a if
   d))``; over the passes, then along the row bus (the columns), then along the column
   bus (the rows); along a bus of four or more PEs as two interleaved chains (even and
   odd positions, then the two combined) when the registers allow, so their latencies
   overlap.
2. ``x = z - m``; ``exp(x)`` by Cody-Waite range reduction: ``n = (x log2e + M) - M``
   (``M = 1.5 * 2^(p-1)`` rounds to an integer), ``r = (x - n ln2_hi) - n ln2_lo``
   (``ln2_hi`` short enough that ``n ln2_hi`` is exact; bfloat16 splits ``ln2`` in three
   parts), a Taylor polynomial of degree
   ``d`` in Horner form for ``exp(r)`` (``d`` from the precision: 3 for bfloat16, 4 for
   binary16, 7 for binary32), then ``2^n`` applied bit by bit, greatest first: if ``n <=
   -2^i`` the value is multiplied by ``2^(-2^i)`` (an exact select of the scaled or the
   unscaled value) and ``n += 2^i``. ``K`` bits cover ``n`` down to ``-(2^K - 1)``;
   ``x <= x_min = -(2^K - 1.5) ln2`` (and padding) gives exactly 0: for binary16 and
   binary32 every such exponential rounds to 0 anyway, for bfloat16 (``K = 6``,
   ``x_min = -43.3``) exponentials below ``1.6e-19`` are flushed.
3. ``s = sum exp(x)`` (over the passes, then the row bus, then the column bus), so
   ``1 <= s <= n``; ``y = 1 / s`` by Newton's iteration ``y += y (1 - s y)`` from the
   linear seed ``y0 = a + b s`` (``b = -8 / (n^2 + 6 n + 1)``, ``a = -(n + 1) b``: the
   line whose relative error ``1 - s y0`` equioscillates on ``[1, n]``, at most
   ``1 - 8 n / (n^2 + 6 n + 1)``, about half for ``n = 10``; the constant ``2 / (n + 1)``,
   ``b = 0``, where its rounded constants do better), with as many iterations as take
   that error (of the rounded constants, plus a few ulps) below half an ulp, plus one.
4. ``g = exp(x) y - t``, written to ``g`` by FMA write-backs through the row bus.

Every PE of a row computes the same values (SIMD), so ``g`` lands in the rows layout.
The kernel is straight-line code scheduled by a small in-order list scheduler that
honours the pipeline's read-after-write, write-after-read and write-after-write distances
(``docs/architecture.md``); runs of NOPs become one-instruction loops.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from sw.collectives import Frag, Region
from pe.fp_golden import add_bits, mac_bits, mul_bits
from sw.asm import add, cdrv, fma, mask, mov, mul, pred, rdrv
from sw.golden import mask as g_mask
from sw.kernels import KernelError, KernelInfo, _finish
from sw.layout import local_len

__all__ = ["SoftmaxPlan", "softmax_plan", "softmax_table", "softmax_pen", "emit_softmax_grad",
           "golden_softmax_grad", "golden_exp", "softmax_supported", "softmax_words", "softmax_size"]


# ======================================================================================
# the plan: passes, registers, constants
# ======================================================================================
@dataclass(frozen=True)
class SoftmaxPlan:
    """How :func:`emit_softmax_grad` computes a softmax of ``n`` elements.

    ``passes``: registers per PE holding elements (``ceil(ceil(n / nr) / nr)``);
    ``group``: passes whose exponentials run interleaved; ``K``: bits of ``2^n``;
    ``degree``: of the exponential's polynomial; ``newton``: reciprocal iterations;
    ``names``: constant name -> word of the table; ``max_chains``: the maximum along a
    bus of four or more PEs runs as two interleaved chains (2, when the registers allow:
    :func:`_bus_max_order`) or one.
    """

    n: int
    nr: int
    words: int
    passes: int
    group: int
    K: int
    degree: int
    newton: int
    names: tuple
    ln2_parts: int = 2
    max_chains: int = 1

    def index(self, name: str) -> int:
        return self.names.index(name)

    @property
    def table_words(self) -> int:
        return len(self.names)


#: registers besides the passes' elements: -1 and the running maximum / sum / reciprocal
_FIXED_REGS = 2
#: extra registers per pass while its exponential runs
_EXP_REGS = 5
#: free registers two interleaved maximum chains take (two sets of three temporaries, a
#: bus value and a running maximum each, the row maximum)
_TWO_CHAIN_REGS = 10


def _bus_max_order(count: int, chains: int) -> tuple:
    """How the maximum of ``count`` values along a bus (indices in bus order) is formed:
    ``(chain 0, chain 1)``, each a running maximum over its indices in order, then the
    two combined; one chain (``chain 1`` empty) below four values or with ``chains ==
    1``. The maximum is exact, so the order changes only its latency: the two chains'
    FMA latencies overlap."""
    if chains < 2 or count < 4:
        return tuple(range(count)), ()
    return tuple(range(0, count, 2)), tuple(range(1, count, 2))


def _exp_bits(fmt) -> int:
    """Bits ``K`` of the ``2^n`` scaling: enough for the smallest subnormal, at most
    ``p - 2`` (the magic-number rounding needs ``|n| < 2^(p-2)``)."""
    need = (fmt.bias + fmt.frac_bits + 1).bit_length()
    return min(need, fmt.precision - 2)


def _degree(fmt) -> int:
    r = math.log(2) / 2 * 1.01
    d = 3                                    # the first Horner step uses c_d and c_(d-1) >= c2
    while r ** (d + 1) / math.factorial(d + 1) * math.exp(r) > 2.0 ** -(fmt.precision + 1):
        d += 1
    return d


def _line_error(fmt, a: float, b: float, n: int) -> float:
    """The largest relative error ``1 - s (a + b s)`` on ``[1, n]`` of the seed line with
    its constants rounded to ``fmt`` (at the ends and the vertex), plus, for a line
    (``b != 0``), two ulps of ``s y0`` for the rounding of ``b s`` and of the sum (a
    constant seed is exact)."""
    a, b = (float(fmt.to_float(np.array([_round_bits(fmt, v)], dtype=fmt.np_uint))[0]) for v in (a, b))
    pts = [1.0, float(n)] + ([-a / (2 * b)] if b and 1 <= -a / (2 * b) <= n else [])
    e = max(abs(1 - s * (a + b * s)) for s in pts)
    return e + (2 * 2.0 ** -(fmt.precision - 1) * (1 + e) if b else 0.0)


def _seed_line(fmt, n: int) -> tuple:
    """``(a, b)`` of the reciprocal's seed ``y0 = a + b s`` for ``s`` in ``[1, n]``: the
    line whose relative error ``1 - s y0`` takes its extremes, equal in size, at ``s = 1``,
    ``(n + 1) / 2`` and ``n``, or the constant ``2 / (n + 1)`` (``b = 0``) where that
    one's rounded constants do worse (large ``n`` in a short format)."""
    b = -8.0 / (n * n + 6 * n + 1)
    line, const = (-(n + 1) * b, b), (2.0 / (n + 1), 0.0)
    return min(line, const, key=lambda ab: _line_error(fmt, *ab, n))


def _seed_error(fmt, n: int) -> float:
    """The error bound of :func:`_seed_line`'s seed (:func:`_line_error`)."""
    return _line_error(fmt, *_seed_line(fmt, n), n)


def _newton_iters(fmt, n: int) -> int:
    e0 = _seed_error(fmt, n)
    if not e0 < 1:
        raise KernelError(f"internal: the reciprocal's seed for {n} elements does not converge in {fmt}")
    k = 0
    while e0 ** (2 ** k) > 2.0 ** -(fmt.precision + 1):
        k += 1
    return k + 1


def _plan_problem(cfg, n: int) -> str | None:
    if cfg.nr < 2:
        return "the softmax kernel needs nr >= 2"
    if n < 1:
        return f"bad length {n}"
    passes = local_len(local_len(n, cfg.nr), cfg.nr)
    if passes + _FIXED_REGS + _EXP_REGS > cfg.n_regs:
        return (f"softmax of {n} outputs on the array needs {passes + _FIXED_REGS + _EXP_REGS} registers "
                f"({passes} element passes + {_FIXED_REGS + _EXP_REGS}); n_regs = {cfg.n_regs}")
    if cfg.fmt.np_dtype is None:
        return f"the softmax kernel's constants need a numpy-backed format, not {cfg.fmt.name}"
    return None


def softmax_supported(cfg, n: int) -> str | None:
    """None when :func:`emit_softmax_grad` can run ``n`` elements on ``cfg`` (registers,
    format, microcode), else why not."""
    why = _plan_problem(cfg, n)
    if why:
        return why
    w = softmax_words(cfg, n)
    if w + 1 > cfg.ucode_depth:
        return f"the softmax kernel for {n} outputs needs {w} microcode words, ucode_depth is {cfg.ucode_depth}"
    return None


@functools.lru_cache(maxsize=64)
def softmax_size(cfg, n: int) -> tuple:
    """``(microcode words, instructions issued)`` of the kernel for ``n`` elements (its
    memory map and ``z_layout`` change neither)."""
    f = Frag()
    info = emit_softmax_grad(f, cfg, n, Region("a", 0), Region("a", 0), Region("b", 0), Region("a", 0),
                             Region("b", 0), Region("a", 0))
    return len(f), info.instructions


def softmax_words(cfg, n: int) -> int:
    """Microcode words of the kernel for ``n`` elements."""
    return softmax_size(cfg, n)[0]


def softmax_plan(cfg, n: int) -> SoftmaxPlan:
    """The plan for ``n`` elements (raises :class:`sw.kernels.KernelError` naming the
    register need when they do not fit)."""
    why = _plan_problem(cfg, n)
    if why:
        raise KernelError(why)
    fmt = cfg.fmt
    words = local_len(n, cfg.nr)
    passes = local_len(words, cfg.nr)
    group = max(1, min(passes, (cfg.n_regs - _FIXED_REGS - passes) // _EXP_REGS))
    K, d = _exp_bits(fmt), _degree(fmt)
    parts = len(_ln2_split(fmt, K))
    names = ["m1", "log2e", "magic", "nmagic", "nxmin", "sa", "sb"] + [f"nln2_{j}" for j in range(parts)]
    names += [f"c{k}" for k in range(2, d + 1)]
    for i in range(K):
        names += [f"th{i}", f"nth{i}", f"f{i}", f"p2{i}"]
    chains = 2 if cfg.n_regs - _FIXED_REGS - passes >= _TWO_CHAIN_REGS else 1
    return SoftmaxPlan(n, cfg.nr, words, passes, group, K, d, _newton_iters(fmt, n), tuple(names), parts, chains)


def _round_bits(fmt, x: float, mode: str = "nearest") -> int:
    """``x`` in the format (nearest, or toward zero) as a bit pattern."""
    dt = fmt.np_dtype
    if dt is None:  # pragma: no cover - custom formats have no numpy dtype
        raise KernelError(f"the softmax kernel needs a numpy-backed format, not {fmt.name}")
    v = np.array([x], dtype=np.float64).astype(dt)
    if mode == "zero" and abs(float(v[0])) > abs(x):
        v = np.nextafter(v, np.zeros(1, dtype=dt))
    return int(v.view(fmt.np_uint)[0])


def _ln2_split(fmt, K: int) -> tuple:
    """``ln2`` as a sum of parts, all but the last with ``p - K - 1`` significant bits (so
    ``n`` times them is exact for ``|n| < 2^K``), the last the rest, rounded: two parts,
    three when ``p - K - 1 < 5`` (bfloat16), which keeps ``n ln2_lo``'s rounding below an
    ulp of the result."""
    bits = fmt.precision - K - 1
    parts, rest = [], math.log(2)
    for _ in range(1 if bits >= 5 else 2):
        e = math.floor(math.log2(rest)) + 1              # rest < 2^e
        q = 2.0 ** (e - bits)
        hi = math.floor(rest / q) * q
        parts.append(hi)
        rest -= hi
    return tuple(parts) + (rest,)


def softmax_table(cfg, n: int) -> np.ndarray:
    """The constant table (bit patterns, ``plan.table_words`` words), the same in every PE
    and in both banks."""
    fmt = cfg.fmt
    p = softmax_plan(cfg, n)
    magic = 1.5 * 2.0 ** (fmt.precision - 1)
    sa, sb = _seed_line(fmt, n)
    vals = {"m1": -1.0, "log2e": 1 / math.log(2), "magic": magic, "nmagic": -magic, "sa": sa, "sb": sb}
    for j, v in enumerate(_ln2_split(fmt, p.K)):
        vals[f"nln2_{j}"] = -v
    for k in range(2, p.degree + 1):
        vals[f"c{k}"] = 1.0 / math.factorial(k)
    for i in range(p.K):
        vals[f"th{i}"] = -(2.0 ** i - 0.5)
        vals[f"nth{i}"] = 2.0 ** i - 0.5
        vals[f"f{i}"] = 2.0 ** -(2 ** i)
        vals[f"p2{i}"] = 2.0 ** i
    out = [_round_bits(fmt, vals[k]) for k in p.names if k != "nxmin"]
    xmin = _round_bits(fmt, -(2.0 ** p.K - 1.5) * math.log(2), "zero")
    out.insert(p.index("nxmin"), xmin ^ fmt.sign_mask)
    return np.array(out, dtype=fmt.np_uint)


def _valid(nr: int, n: int, words: int, passes: int) -> np.ndarray:
    """``(nr, nr, passes)`` booleans: PE ``(r, c)``'s pass ``q`` holds a real element."""
    v = np.zeros((nr, nr, passes), dtype=bool)
    for r in range(nr):
        for c in range(nr):
            for q in range(passes):
                k = q * nr + c
                v[r, c, q] = k < words and k * nr + r < n
    return v


def softmax_pen(cfg, n: int) -> np.ndarray:
    """The penalty words, local ``(nr, nr, passes)`` bit patterns: +0 where PE ``(r, c)``'s
    pass holds a real element, ``-max_finite`` where it holds padding."""
    fmt = cfg.fmt
    p = softmax_plan(cfg, n)
    v = _valid(cfg.nr, n, p.words, p.passes)
    big = fmt.np_uint.type(fmt.max_finite | fmt.sign_mask)
    return np.where(v, fmt.np_uint.type(0), big).astype(fmt.np_uint)


# ======================================================================================
# a small in-order list scheduler for straight-line code
# ======================================================================================
class _Sched:
    """Places operations into instructions in program order, each at the first cycle
    where its operands are readable, its destination's previous value is no longer read
    or written, its units are free and its predicate matches the instruction's."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.ins: list = []            # [ {"slots": [...], "units": set(), "pred": key} ]
        self.W: dict = {}              # register -> cycle at whose end its last write lands
        self.Wd: dict = {}             # ... as a bus driver's source sees it (a move's result
                                       # cfg.mv_drive_distance - 1 cycles later)
        self.R: dict = {}              # register -> last cycle it is read
        self.cur = 0

    def _slot(self, t):
        while len(self.ins) <= t:
            self.ins.append({"slots": [], "units": set(), "pred": None})
        return self.ins[t]

    def op(self, slots, *, units, reads=(), drv=(), late=None, dst=None, unit="fma", pred_=None):
        """``reads``: registers read in the operand stage; ``drv``: registers driven onto a
        bus (read in the operand stage, a move's result one micro-op later with the bus
        stage, ``cfg.mv_drive_distance``); ``late``: a register read as the
        FMA's ``c`` (late read); ``dst``: the register written (by the FMA after
        ``fpu_latency - 1`` cycles, by the move unit at the end of the next cycle);
        ``units``: unit names taken (``fma``, ``mov``, ``ra``, ``rb``, ``rdrv``, ``cdrv``,
        ``wa``, ``wb``)."""
        cfg = self.cfg
        t = self.cur
        for r in reads:
            t = max(t, self.W.get(r, -10))          # read at t + 1 > W
        for r in drv:
            t = max(t, self.Wd.get(r, -10))
        if late is not None:
            t = max(t, self.W.get(late, -10) - cfg.mul_latency)
        wlat = cfg.fpu_latency - 1 if unit == "fma" else 1
        if dst is not None:
            t = max(t, self.W.get(dst, -10) + 1 - wlat, self.R.get(dst, -10) - wlat)
        key = pred_ or ("all",)
        while True:
            s = self._slot(t)
            if not (s["units"] & set(units)) and (s["pred"] in (None, key)):
                break
            t += 1
        s["slots"] += list(slots)
        s["units"] |= set(units)
        s["pred"] = key
        for r in (*reads, *drv):
            self.R[r] = max(self.R.get(r, -10), t + 1)
        if late is not None:
            self.R[late] = max(self.R.get(late, -10), t + 1 + cfg.mul_latency)
        if dst is not None:
            self.W[dst] = t + wlat
            self.Wd[dst] = t + wlat + (cfg.mv_drive_distance - 1 if unit == "mov" else 0)
        self.cur = t
        return t

    def frag(self, name: str) -> Frag:
        """The instructions, NOP runs of three or more as a loop of one NOP."""
        f = Frag()
        t, n = 0, len(self.ins)
        while t < n:
            s = self.ins[t]
            if s["slots"]:
                pr = [] if s["pred"] == ("all",) else [pred(*s["pred"])]
                f.ins(*s["slots"], *pr)
                t += 1
                continue
            u = t
            while u < n and not self.ins[u]["slots"]:
                u += 1
            k = u - t
            if k >= 3:
                it = f.ins()
                f.open_loop(it, f"{name}w", k - 1, 0)
                f.ins()
                f.close_loop()
            else:
                f.nops(k)
            t = u
        return f


# ======================================================================================
# the kernel's operations on the scheduler
# ======================================================================================
def _rd_unit(reg_):
    return "ra" if reg_.bank == "a" else "rb"


class _Ops:
    """The kernel's operations, placed in order by a :class:`_Sched`: FMAs with table
    constants, moves, the exact maximum of two registers, reductions along a bus.

    Registers: :attr:`M1` holds ``-1``, :attr:`ACC` the maximum and then the sum,
    ``Z[q]`` the element of pass ``q``, ``free`` the others (temporaries).
    """

    M1, ACC = "r0", "r1"

    def __init__(self, cfg, plan: SoftmaxPlan, ka: Region, kb: Region):
        self.plan = plan
        self.S = _Sched(cfg)
        self.K = {"a": ka, "b": kb}
        self.Z = [f"r{2 + q}" for q in range(plan.passes)]
        self.free = [f"r{i}" for i in range(2 + plan.passes, cfg.n_regs)]

    def const(self, name_, bank="a"):
        """(slot reading constant ``name_`` from ``bank``, its operand, its unit)."""
        reg_ = self.K[bank]
        return reg_.rd(self.plan.index(name_)), reg_.src, "ra" if bank == "a" else "rb"

    def c1(self, fn, dst, a_, b_, c_, reads, late=None, cname=None, bank="a", cname2=None):
        """One FMA with up to two constants (``cname`` from ``bank``, ``cname2`` from the
        other bank) substituted for the operands named ``"K"`` / ``"K2"``."""
        slots, units = [], {"fma"}
        ops = [a_, b_, c_]
        if cname:
            sl, src, u = self.const(cname, bank)
            slots.append(sl)
            units.add(u)
            ops = [src if o == "K" else o for o in ops]
        if cname2:
            sl, src, u = self.const(cname2, "b" if bank == "a" else "a")
            slots.append(sl)
            units.add(u)
            ops = [src if o == "K2" else o for o in ops]
        if fn == "fma":
            slots.append(fma(dst, *ops))
        elif fn == "mul":
            slots.append(mul(dst, ops[0], ops[1]))
        else:
            slots.append(add(dst, ops[0], ops[2]))
        return self.S.op(slots, units=units, reads=reads, late=late, dst=dst)

    def mv(self, dst, src_slot, reads, extra=(), units=(), pred_=None, drv=()):
        return self.S.op([src_slot, *extra], units={"mov", *units}, reads=reads, drv=drv, dst=dst, unit="mov",
                         pred_=pred_)

    def vmax(self, a_, b_):
        """a_ = max(a_, b_) exactly (registers)."""
        self.vmax_pairs([(a_, b_, self.free[:3])])

    def vmax_pairs(self, pairs):
        """``a = max(a, b)`` exactly for each ``(a, b, (T1, T2, T3))`` of ``pairs`` (its own
        temporaries), their operations interleaved so their latencies overlap."""
        M1 = self.M1
        steps = (lambda a_, b_, T: self.c1("fma", T[0], a_, M1, b_, [a_, M1], late=b_),      # d = b - a
                 lambda a_, b_, T: self.mv(T[1], mask(T[1], b_, T[0]), [b_, T[0]]),         # b if d
                 lambda a_, b_, T: self.mv(T[2], mask(T[2], a_, T[0]), [a_, T[0]]),         # a if d
                 lambda a_, b_, T: self.c1("fma", T[2], T[2], M1, a_, [T[2], M1], late=a_),  # a - (a if d)
                 lambda a_, b_, T: self.c1("add", a_, T[1], None, T[2], [T[1]], late=T[2]))
        for st in steps:
            for a_, b_, T in pairs:
                st(a_, b_, T)

    def bus_reduce(self, src_reg, acc, direction, count, combine):
        """acc = combine over the ``count`` first PEs of the row (column) bus of their
        ``src_reg``: a sum in bus order, a maximum in :func:`_bus_max_order`'s (the second
        chain in ``free[5:10]``)."""
        B = self.free[3]
        drv = (lambda k: rdrv(src_reg, col=k)) if direction == "row" else (lambda k: cdrv(src_reg, row=k))
        unit = "rdrv" if direction == "row" else "cdrv"

        def take(dst, k):
            self.mv(dst, mov(dst, direction), [], [drv(k)], [unit], drv=[src_reg])
        if combine == "max":
            c0, c1 = _bus_max_order(count, self.plan.max_chains)
            chains = [(acc, B, self.free[:3], c0)] + ([(self.free[9], self.free[8], self.free[5:8], c1)] if c1 else [])
            for a_, b_, _, idx in chains:
                take(b_, idx[0])
                self.mv(a_, mov(a_, b_), [b_])
            for j in range(1, len(c0)):
                live = [ch for ch in chains if j < len(ch[3])]
                for a_, b_, _, idx in live:
                    take(b_, idx[j])
                self.vmax_pairs([(a_, b_, T) for a_, b_, T, _ in live])
            if c1:
                self.vmax(acc, self.free[9])
            return
        take(B, 0)
        self.mv(acc, mov(acc, B), [B])
        for k in range(1, count):
            self.S.op([drv(k), add(acc, direction, acc)], units={"fma", unit}, drv=[src_reg], late=acc, dst=acc)


# ======================================================================================
# the kernel's stages
# ======================================================================================
def _load_elements(o: _Ops, nr: int, words: int, z: Region, pen: Region, z_layout: str) -> None:
    """-1 into ``M1``; word ``k`` of ``z`` into ``Z[k // nr]`` of the PEs of column
    ``k mod nr`` (+0 past the end), plus the penalty word of its pass."""
    M1, Z = o.M1, o.Z
    sl, src, u = o.const("m1")
    o.mv(M1, mov(M1, src), [], [sl], [u])
    for q in range(o.plan.passes):
        for c in range(nr):
            k = q * nr + c
            if k < words and z_layout == "diag":
                o.mv(Z[q], mov(Z[q], "row"), [], [z.rd(k, gate="rdrv"), rdrv(z.src, diag=0)],
                     [_rd_unit(z), "rdrv"], pred_=("col", c))
            elif k < words:
                o.mv(Z[q], mov(Z[q], z.src), [], [z.rd(k, gate="pred")], [_rd_unit(z)], pred_=("col", c))
            else:
                o.mv(Z[q], mov(Z[q], "0"), [], pred_=("col", c))
        o.S.op([pen.rd(q), add(Z[q], Z[q], pen.src)], units={"fma", _rd_unit(pen)}, reads=[Z[q]], dst=Z[q])


def _maximum(o: _Ops, ncols: int, nrows: int) -> None:
    """``ACC = m = max z`` in every PE: over the passes, then along the row bus (the
    ``ncols`` first columns), then along the column bus (the ``nrows`` first rows)."""
    ACC, Z = o.ACC, o.Z
    o.mv(ACC, mov(ACC, Z[0]), [Z[0]])
    for q in range(1, o.plan.passes):
        o.vmax(ACC, Z[q])
    M_row = o.free[4]
    o.bus_reduce(ACC, M_row, "row", ncols, "max")
    o.bus_reduce(M_row, ACC, "col", nrows, "max")            # ACC = m in every PE


def _exp_group(o: _Ops, qs: list) -> None:
    """``Z[q] = exp(Z[q] - m)`` for the passes ``qs`` together (interleaved for the FMA
    latency): range reduction, the Taylor polynomial, ``2^n`` bit by bit, 0 below
    ``x_min``."""
    plan, c1, mv, M1, ACC = o.plan, o.c1, o.mv, o.M1, o.ACC
    regs = {q: dict(zip(("DM", "N", "R", "P", "ND"), o.free[j * _EXP_REGS:(j + 1) * _EXP_REGS]))
            for j, q in enumerate(qs)}
    X = {q: o.Z[q] for q in qs}
    for q in qs:
        c1("fma", X[q], ACC, M1, X[q], [ACC, M1], late=X[q])                          # x = z - m
    for q in qs:
        r_ = regs[q]
        c1("add", r_["DM"], X[q], None, "K", [X[q]], cname="nxmin")                   # x - xmin
    for q in qs:
        c1("fma", regs[q]["N"], X[q], "K", "K2", [X[q]], cname="log2e", cname2="magic")
    for q in qs:
        c1("add", regs[q]["N"], regs[q]["N"], None, "K", [regs[q]["N"]], cname="nmagic")
    for j in range(plan.ln2_parts):
        for q in qs:
            r_ = regs[q]
            c_ = X[q] if j == 0 else r_["R"]
            c1("fma", r_["R"], r_["N"], "K", c_, [r_["N"]], late=c_, cname=f"nln2_{j}")
    d = plan.degree
    for q in qs:
        r_ = regs[q]
        c1("fma", r_["P"], r_["R"], "K", "K2", [r_["R"]], cname=f"c{d}", cname2=f"c{d - 1}")
    for k in range(d - 2, -1, -1):
        for q in qs:
            r_ = regs[q]
            if k >= 2:
                c1("fma", r_["P"], r_["P"], r_["R"], "K", [r_["P"], r_["R"]], cname=f"c{k}")
            else:
                c1("fma", r_["P"], r_["P"], r_["R"], "1", [r_["P"], r_["R"]])
    for i in range(plan.K - 1, -1, -1):
        for q in qs:
            r_, D = regs[q], X[q]
            c1("fma", D, r_["N"], M1, "K", [r_["N"], M1], cname=f"th{i}")            # -n - (2^i - .5)
        for q in qs:
            r_ = regs[q]
            c1("add", r_["ND"], r_["N"], None, "K", [r_["N"]], cname=f"nth{i}")       # n + 2^i - .5
        for q in qs:
            r_ = regs[q]
            c1("mul", r_["R"], r_["P"], "K", None, [r_["P"]], cname=f"f{i}")           # e 2^-2^i
        for q in qs:
            r_, D = regs[q], X[q]
            mv(r_["R"], mask(r_["R"], r_["R"], D), [r_["R"], D])
            mv(r_["ND"], mask(r_["ND"], r_["P"], r_["ND"]), [r_["P"], r_["ND"]])
            if i > 0:
                sl_, src_, u_ = o.const(f"p2{i}")
                mv(D, mask(D, src_, D), [D], [sl_], [u_])
        for q in qs:
            r_, D = regs[q], X[q]
            c1("add", r_["P"], r_["R"], None, r_["ND"], [r_["R"]], late=r_["ND"])
            if i > 0:
                c1("add", r_["N"], D, None, r_["N"], [D], late=r_["N"])
    for q in qs:
        r_ = regs[q]
        mv(o.Z[q], mask(o.Z[q], r_["P"], r_["DM"]), [r_["P"], r_["DM"]])             # e (0 below x_min)


def _reciprocal_of_sum(o: _Ops, ncols: int, nrows: int) -> str:
    """``s = sum exp(x)`` into ``ACC`` in every PE (passes, row bus, column bus), then
    ``y = 1 / s`` by Newton's iteration; returns the register holding ``y``."""
    ACC, M1, Z, free = o.ACC, o.M1, o.Z, o.free
    SUM = free[0]
    o.mv(SUM, mov(SUM, Z[0]), [Z[0]])
    for q in range(1, o.plan.passes):
        o.S.op([add(SUM, Z[q], SUM)], units={"fma"}, reads=[Z[q]], late=SUM, dst=SUM)
    S_row = free[1]
    o.bus_reduce(SUM, S_row, "row", ncols, "sum")
    o.bus_reduce(S_row, ACC, "col", nrows, "sum")            # ACC = s in every PE
    NS, Y, TT = free[2], free[3], free[4]
    o.c1("mul", NS, ACC, M1, None, [ACC, M1])                 # -s
    o.c1("fma", Y, "K", ACC, "K2", [ACC], cname="sb", cname2="sa")      # y0 = b s + a
    for _ in range(o.plan.newton):
        o.c1("fma", TT, NS, Y, "1", [NS, Y])                  # 1 - s y
        o.c1("fma", Y, Y, TT, Y, [Y, TT], late=Y)             # y + y (1 - s y)
    return Y


def _write_grad(o: _Ops, nr: int, words: int, t: Region, g: Region, Y: str) -> None:
    """``g = e y - t``: word ``k`` by an FMA write-back of the PEs of column ``k mod nr``
    through the row bus."""
    Z, M1 = o.Z, o.M1
    for q in range(o.plan.passes):
        o.c1("mul", Z[q], Z[q], Y, None, [Z[q], Y])
    for q in range(o.plan.passes):
        for c in range(nr):
            k = q * nr + c
            if k >= words:
                continue
            slots = [rdrv(Z[q], col=c), t.rd(k), g.rd(k, read=False), fma(g.src, t.src, M1, "row")]
            o.S.op(slots, units={"fma", "rdrv", _rd_unit(t), _rd_unit(g)}, reads=[M1], drv=[Z[q]])


# ======================================================================================
# the kernel
# ======================================================================================
def emit_softmax_grad(b, cfg, n: int, z: Region, t: Region, g: Region, ka: Region, kb: Region, pen: Region,
                      *, z_layout: str = "rows", name: str = "smx") -> KernelInfo:
    """``g = softmax(z) - t`` for ``n`` elements in the ``rows`` layout.

    ``z``, ``t``: ``ceil(n / nr)`` words per PE (``rows`` layout, padding +0; ``z`` may be
    in the ``diag`` layout, ``z_layout="diag"``: the diagonal PEs drive the row buses
    while the elements are loaded, at no extra cost); ``g``: the
    same, in the other bank than ``t``; ``ka`` / ``kb``: the constant table
    (:func:`softmax_table`) in bank A / B; ``pen``: the penalty words
    (:func:`softmax_pen`, ``passes`` words per PE). Latency-bound straight-line code (its
    instruction count is :attr:`KernelInfo.instructions`); its last instruction is the
    FMA writing the last word of ``g``. Uses every register.
    """
    plan = softmax_plan(cfg, n)
    nr, P, words = cfg.nr, plan.passes, plan.words
    if z_layout not in ("rows", "diag"):
        raise KernelError(f"z_layout must be 'rows' or 'diag', got {z_layout!r}")
    if ka.bank != "a" or kb.bank != "b":
        raise KernelError("the constant table needs one copy in bank A (ka) and one in bank B (kb)")
    if g.bank == t.bank:
        raise KernelError("g must not be in t's bank (one FMA reads t and writes g)")
    for reg_, w, what in ((z, words, "z"), (t, words, "t"), (g, words, "g"), (ka, plan.table_words, "ka"),
                          (kb, plan.table_words, "kb"), (pen, P, "pen")):
        reg_.check(cfg, w, what)
    z, t, g, ka, kb, pen = (r.bind(cfg) for r in (z, t, g, ka, kb, pen))
    o = _Ops(cfg, plan, ka, kb)
    _load_elements(o, nr, words, z, pen, z_layout)
    ncols = nr if P > 1 else min(nr, words)
    nrows = min(nr, n)
    _maximum(o, ncols, nrows)
    for j in range(0, P, plan.group):
        _exp_group(o, list(range(j, min(P, j + plan.group))))
    Y = _reciprocal_of_sum(o, ncols, nrows)
    _write_grad(o, nr, words, t, g, Y)
    f = o.S.frag(name)
    _finish(b, f)
    return KernelInfo("softmax_grad", f.count(), 0, {"passes": P, "group": plan.group, "K": plan.K,
                                                      "degree": plan.degree, "newton": plan.newton})


# ======================================================================================
# golden models
# ======================================================================================
def _c(fmt, table, plan, name):
    return fmt.np_uint.type(table[plan.index(name)])


def _vmax(fmt, m1, a, b):
    d = mac_bits(fmt, a, m1, b)
    keep = mac_bits(fmt, g_mask(fmt, a, d), m1, a)
    return add_bits(fmt, g_mask(fmt, b, d), keep)


def _golden_bus_max(fmt, m1, vals: list, chains: int):
    """The maximum of ``vals`` (in bus order) as :meth:`_Ops.bus_reduce` forms it."""
    c0, c1 = _bus_max_order(len(vals), chains)
    out = []
    for idx in (c0, c1):
        if idx:
            m = vals[idx[0]]
            for k in idx[1:]:
                m = _vmax(fmt, m1, m, vals[k])
            out.append(m)
    return out[0] if len(out) == 1 else _vmax(fmt, m1, out[0], out[1])


def golden_exp(fmt, plan: SoftmaxPlan, table, x) -> np.ndarray:
    """The kernel's ``exp(x)`` (bit patterns in, bit patterns out), the same operations."""
    C = lambda nm: _c(fmt, table, plan, nm)  # noqa: E731
    one = fmt.np_uint.type(fmt.one)
    m1 = C("m1")
    x = np.asarray(x).astype(fmt.np_uint)
    dm = add_bits(fmt, x, C("nxmin"))
    nn = mac_bits(fmt, x, C("log2e"), C("magic"))
    nn = add_bits(fmt, nn, C("nmagic"))
    r = x
    for j in range(plan.ln2_parts):
        r = mac_bits(fmt, nn, C(f"nln2_{j}"), r)
    d = plan.degree
    p = mac_bits(fmt, r, C(f"c{d}"), C(f"c{d - 1}"))
    for k in range(d - 2, -1, -1):
        p = mac_bits(fmt, p, r, C(f"c{k}") if k >= 2 else one)
    for i in range(plan.K - 1, -1, -1):
        dd = mac_bits(fmt, nn, m1, C(f"th{i}"))
        nd = add_bits(fmt, nn, C(f"nth{i}"))
        es = mul_bits(fmt, p, C(f"f{i}"))
        p = add_bits(fmt, g_mask(fmt, es, dd), g_mask(fmt, p, nd))
        if i > 0:
            nn = add_bits(fmt, g_mask(fmt, C(f"p2{i}"), dd), nn)
    return g_mask(fmt, p, dm)


def golden_softmax_grad(cfg, z, t) -> np.ndarray:
    """Bit-exact model of :func:`emit_softmax_grad`: ``z``, ``t`` global bit-pattern
    vectors of length ``n``; returns ``g`` (global, length ``n``)."""
    fmt, nr = cfg.fmt, cfg.nr
    z = np.asarray(z).astype(fmt.np_uint)
    t = np.asarray(t).astype(fmt.np_uint)
    n = z.shape[0]
    plan = softmax_plan(cfg, n)
    table = softmax_table(cfg, n)
    P, words = plan.passes, plan.words
    m1 = _c(fmt, table, plan, "m1")
    zp = np.zeros(words * nr, dtype=fmt.np_uint)
    zp[:n] = z
    # element of PE (r, c), pass q: word k = q nr + c of row r (0 where no word is loaded)
    E = np.zeros((nr, nr, P), dtype=fmt.np_uint)
    for r in range(nr):
        for c in range(nr):
            for q in range(P):
                k = q * nr + c
                if k < words:
                    E[r, c, q] = zp[k * nr + r]
    E = add_bits(fmt, E, softmax_pen(cfg, n))
    ncols = nr if P > 1 else min(nr, words)
    nrows = min(nr, n)
    acc = E[:, :, 0]
    for q in range(1, P):
        acc = _vmax(fmt, m1, acc, E[:, :, q])
    mrow = _golden_bus_max(fmt, m1, [acc[:, k] for k in range(ncols)], plan.max_chains)
    m = _golden_bus_max(fmt, m1, [mrow[k] for k in range(nrows)], plan.max_chains)
    X = mac_bits(fmt, m, m1, E)
    e = golden_exp(fmt, plan, table, X)
    s = e[:, :, 0]
    for q in range(1, P):
        s = add_bits(fmt, e[:, :, q], s)
    srow = s[:, 0]
    for k in range(1, ncols):
        srow = add_bits(fmt, s[:, k], srow)
    tot = srow[0]
    for k in range(1, nrows):
        tot = add_bits(fmt, srow[k], tot)
    ns = mul_bits(fmt, tot, m1)
    y = mac_bits(fmt, _c(fmt, table, plan, "sb"), tot, _c(fmt, table, plan, "sa"))
    one = fmt.np_uint.type(fmt.one)
    for _ in range(plan.newton):
        tt = mac_bits(fmt, ns, y, one)
        y = mac_bits(fmt, y, tt, y)
    pr = mul_bits(fmt, e, y)
    tp = np.zeros(words * nr, dtype=fmt.np_uint)
    tp[:n] = t
    out = np.zeros(words * nr, dtype=fmt.np_uint)
    for r in range(nr):
        for k in range(words):
            q, c = divmod(k, nr)
            out[k * nr + r] = mac_bits(fmt, tp[k * nr + r], m1, pr[r, c, q])
    return out[:n]
