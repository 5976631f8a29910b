"""Logic-building helpers shared by :mod:`pe.fp_mul` and :mod:`pe.fp_add`.

Plain Python functions that return Amaranth values (no components): operand unpacking,
a tree leading-zero counter, a right shift that keeps a sticky bit, the
round-to-nearest-even-and-pack step, :func:`stage` which places (or not) a pipeline
register between two parts of a datapath, and the value classes the move unit uses
(:func:`is_nan`, :func:`is_positive`, :func:`class_bits`).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Mux, Signal, Value

from arch.fpformat import FPFormat

__all__ = ["unpack", "lzc", "shift_right_sticky", "round_pack", "stage", "select_result",
           "check_latency", "wire", "delay", "clamp", "is_nan", "is_positive", "class_bits",
           "CLASS_BITS", "CLS_POS", "CLS_NAN"]

#: Width of :func:`class_bits`, and the positions of its two flags.
CLASS_BITS, CLS_POS, CLS_NAN = 2, 0, 1

# Every intermediate value used more than once goes through a named comb Signal
# (:func:`wire`): Amaranth emits an expression again at each use, which would duplicate
# logic in the generated Verilog (and slow simulators down), e.g. inside the LZC tree.


def wire(m, value, name: str) -> Signal:
    """A comb ``Signal`` driven by ``value`` (shares the logic between its uses)."""
    value = Value.cast(value)
    s = Signal(value.shape(), name=name)
    m.d.comb += s.eq(value)
    return s


def check_latency(latency, minimum: int, what: str) -> int:
    if isinstance(latency, bool) or not isinstance(latency, int) or latency < minimum:
        raise ValueError(f"{what} latency must be an integer >= {minimum}, got {latency!r}")
    return latency


def unpack(m, fmt: FPFormat, x: Value, name: str) -> SimpleNamespace:
    """Fields and classification of the operand ``x`` (``fmt.width`` bits).

    ``sig`` is the significand with the hidden bit (``fmt.precision`` bits, hidden bit 0
    for subnormals and zeros); ``xe`` the effective biased exponent ``max(exp, 1)``, so the
    value of a finite operand is ``sig * 2**(xe - bias - frac_bits)``.
    """
    F, E = fmt.frac_bits, fmt.exp_bits
    frac = x[:F]
    exp = x[F:F + E]
    sign = x[F + E]
    exp_nz = wire(m, exp.any(), f"{name}_exp_nz")
    exp_ones = wire(m, exp.all(), f"{name}_exp_ones")
    frac_nz = wire(m, frac.any(), f"{name}_frac_nz")
    return SimpleNamespace(
        sign=sign, exp=exp, frac=frac,
        sig=wire(m, Cat(frac, exp_nz), f"{name}_sig"),
        xe=wire(m, Cat(exp[0] | ~exp_nz, exp[1:]), f"{name}_xe"),
        zero=wire(m, ~exp_nz & ~frac_nz, f"{name}_zero"),
        inf=wire(m, exp_ones & ~frac_nz, f"{name}_inf"),
        nan=wire(m, exp_ones & frac_nz, f"{name}_nan"),
        mag=x[:F + E],
    )


def _lzc_pow2(m, x: Value, name: str):
    """(all_zero, count) for a power-of-two width >= 2; count has log2(width) bits."""
    n = len(x)
    if n == 2:
        return wire(m, ~x[1] & ~x[0], f"{name}_z"), ~x[1]
    zh, ch = _lzc_pow2(m, x[n // 2:], f"{name}h")
    zl, cl = _lzc_pow2(m, x[:n // 2], f"{name}l")
    cnt = wire(m, Mux(zh, Cat(cl, Const(1, 1)), Cat(ch, Const(0, 1))), f"{name}_c")
    return wire(m, zh & zl, f"{name}_z"), cnt


def lzc(m, x: Value, name: str) -> Value:
    """Leading-zero count of ``x`` (``len(x)`` for zero), as a log-depth tree."""
    x = Value.cast(x)
    w = len(x)
    n = 2
    while n < w:
        n *= 2
    if n > w:   # pad with ones below the LSB: the count stops at w for x == 0
        x = Cat(Const((1 << (n - w)) - 1, n - w), x)
        _, cnt = _lzc_pow2(m, x, name)
        return cnt
    zero, cnt = _lzc_pow2(m, x, name)
    return wire(m, Mux(zero, Const(n, n.bit_length()), cnt), f"{name}_cnt")


def clamp(value: Value, limit: int) -> Value:
    """``min(value, limit)`` for unsigned ``value``, as ``limit.bit_length()`` bits."""
    value = Value.cast(value)
    w = max(1, limit.bit_length())
    if len(value) <= w and (1 << len(value)) - 1 <= limit:
        return value
    return Mux(value > limit, Const(limit, w), value[:w])


def shift_right_sticky(m, x: Value, amount: Value, max_shift: int | None, name: str):
    """``(x >> min(amount, max_shift), sticky)``; ``sticky`` ORs every bit shifted out.

    Choose ``max_shift >= len(x)`` unless the caller knows larger shifts do not matter;
    ``None`` when ``amount`` is already limited.
    """
    x = wire(m, x, f"{name}_in")
    w = len(x)
    amt = wire(m, amount if max_shift is None else clamp(amount, max_shift), f"{name}_amt")
    shifted = (x >> amt)[:w]
    ones = Const((1 << w) - 1, w)
    kept_mask = (ones << amt)[:w]             # bits of x that survive the shift
    sticky = (x & ~kept_mask).any()
    return shifted, sticky


def round_pack(m, fmt: FPFormat, base: Value, mant: Value, rnd: Value, sticky: Value):
    """Round to nearest even and pack exponent and fraction.

    ``mant`` holds ``precision`` bits (hidden bit at the top, 0 for a subnormal result),
    ``base`` is the biased exponent minus one of the binade the MSB position stands for,
    ``rnd`` the first discarded bit and ``sticky`` the OR of the rest. Returns
    ``(magnitude, overflow)``: the ``exp_bits + frac_bits`` magnitude field (a rounding
    carry moves into the exponent, up to the infinity encoding) and ``overflow``, set when
    the exponent before rounding is already ``>= exp_max`` (the caller selects infinity).
    """
    F, E = fmt.frac_bits, fmt.exp_bits
    base = wire(m, base, "rp_base")
    mant = wire(m, mant, "rp_mant")
    hidden = mant[F]
    overflow = (base + hidden) >= fmt.exp_max
    inc = rnd & (sticky | mant[0])
    mag = ((base << F) + mant + inc)[:E + F]
    return mag, overflow


def select_result(fmt: FPFormat, *, nan, inf, inf_sign, zero, zero_sign, overflow, sign, mag) -> Value:
    """Final result mux: canonical NaN, signed infinity, signed zero or the rounded value."""
    E, F = fmt.exp_bits, fmt.frac_bits
    return Mux(nan, Const(fmt.qnan, fmt.width),
               Mux(inf, Cat(Const(fmt.inf, E + F), inf_sign),
                   Mux(zero, Cat(Const(0, E + F), zero_sign),
                       Mux(overflow, Cat(Const(fmt.inf, E + F), sign),
                           Cat(mag, sign)))))


def stage(m, enabled: bool, prefix: str, **values) -> SimpleNamespace:
    """Pipeline boundary: registered copies of ``values`` if ``enabled``, else the values.

    Registers are named ``<prefix>_<key>`` and live in the ``sync`` domain.
    """
    out = {}
    for key, v in values.items():
        v = Value.cast(v)
        if enabled:
            r = Signal(v.shape(), name=f"{prefix}_{key}")
            m.d.sync += r.eq(v)
            out[key] = r
        else:
            out[key] = wire(m, v, f"{prefix}_{key}")
    return SimpleNamespace(**out)


def delay(m, value: Value, cycles: int, prefix: str) -> Value:
    """``value`` delayed by ``cycles`` extra registers."""
    for i in range(cycles):
        value = stage(m, True, f"{prefix}{i}", v=value).v
    return value


def is_nan(fmt: FPFormat, x: Value) -> Value:
    """``x`` (a ``fmt`` word) is a NaN: exponent all ones, fraction nonzero."""
    w, F = fmt.width, fmt.frac_bits
    return (x[F:w - 1] == fmt.exp_max) & (x[:F] != 0)


def is_positive(fmt: FPFormat, x: Value) -> Value:
    """``x`` is > 0: sign clear, not +0, not a NaN."""
    return ~x[fmt.width - 1] & (x != 0) & ~is_nan(fmt, x)


def class_bits(fmt: FPFormat, x: Value) -> Value:
    """The move unit's classes of ``x``: bit :data:`CLS_POS` ``is_positive``, bit
    :data:`CLS_NAN` ``is_nan``. Both are 0 for +0, so the classes of an OR of words of
    which at most one is nonzero are the OR of their classes (how a bus resolves them)."""
    return Cat(is_positive(fmt, x), is_nan(fmt, x))
