"""Logic-building helpers shared by :mod:`pe.fp_mul` and :mod:`pe.fp_add`.

Plain Python functions that return Amaranth values (no components): operand unpacking,
a tree leading-zero counter, a right shift that keeps a sticky bit, the
round-to-nearest-even-and-pack step, and :func:`stage` which places (or not) a pipeline
register between two parts of a datapath.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Mux, Signal, Value

from pe.fpformat import FPFormat

__all__ = ["unpack", "lzc", "shift_right_sticky", "round_pack", "stage", "select_result",
           "check_latency"]


def check_latency(latency, minimum: int, what: str) -> int:
    if isinstance(latency, bool) or not isinstance(latency, int) or latency < minimum:
        raise ValueError(f"{what} latency must be an integer >= {minimum}, got {latency!r}")
    return latency


def unpack(fmt: FPFormat, x: Value) -> SimpleNamespace:
    """Fields and classification of the operand ``x`` (``fmt.width`` bits).

    ``sig`` is the significand with the hidden bit (``fmt.precision`` bits, hidden bit 0
    for subnormals and zeros); ``xe`` the effective biased exponent ``max(exp, 1)``, so the
    value of a finite operand is ``sig * 2**(xe - bias - frac_bits)``.
    """
    F, E = fmt.frac_bits, fmt.exp_bits
    frac = x[:F]
    exp = x[F:F + E]
    sign = x[F + E]
    exp_nz = exp.any()
    exp_ones = exp.all()
    frac_nz = frac.any()
    return SimpleNamespace(
        sign=sign, exp=exp, frac=frac,
        sig=Cat(frac, exp_nz),
        xe=Cat(exp[0] | ~exp_nz, exp[1:]),
        zero=~exp_nz & ~frac_nz,
        inf=exp_ones & ~frac_nz,
        nan=exp_ones & frac_nz,
        mag=x[:F + E],
    )


def _lzc_pow2(x: Value):
    """(all_zero, count) for a power-of-two width >= 2; count has log2(width) bits."""
    n = len(x)
    if n == 2:
        return ~x[1] & ~x[0], ~x[1]
    zh, ch = _lzc_pow2(x[n // 2:])
    zl, cl = _lzc_pow2(x[:n // 2])
    return zh & zl, Mux(zh, Cat(cl, Const(1, 1)), Cat(ch, Const(0, 1)))


def lzc(x: Value) -> Value:
    """Leading-zero count of ``x`` (``len(x)`` for zero), as a log-depth tree."""
    x = Value.cast(x)
    w = len(x)
    n = 2
    while n < w:
        n *= 2
    if n > w:   # pad with ones below the LSB: the count stops at w for x == 0
        x = Cat(Const((1 << (n - w)) - 1, n - w), x)
        _, cnt = _lzc_pow2(x)
        return cnt
    zero, cnt = _lzc_pow2(x)
    return Mux(zero, Const(n, n.bit_length()), cnt)


def clamp(value: Value, limit: int) -> Value:
    """``min(value, limit)`` for unsigned ``value``, as ``limit.bit_length()`` bits."""
    value = Value.cast(value)
    w = max(1, limit.bit_length())
    if len(value) <= w and (1 << len(value)) - 1 <= limit:
        return value
    return Mux(value > limit, Const(limit, w), value[:w])


def shift_right_sticky(x: Value, amount: Value, max_shift: int):
    """``(x >> min(amount, max_shift), sticky)``; ``sticky`` ORs every bit shifted out.

    Choose ``max_shift >= len(x)`` unless the caller knows larger shifts do not matter.
    """
    x = Value.cast(x)
    w = len(x)
    amt = clamp(amount, max_shift)
    shifted = (x >> amt)[:w]
    ones = Const((1 << w) - 1, w)
    kept_mask = (ones << amt)[:w]             # bits of x that survive the shift
    sticky = (x & ~kept_mask).any()
    return shifted, sticky


def round_pack(fmt: FPFormat, base: Value, mant: Value, rnd: Value, sticky: Value):
    """Round to nearest even and pack exponent and fraction.

    ``mant`` holds ``precision`` bits (hidden bit at the top, 0 for a subnormal result),
    ``base`` is the biased exponent minus one of the binade the MSB position stands for,
    ``rnd`` the first discarded bit and ``sticky`` the OR of the rest. Returns
    ``(magnitude, overflow)``: the ``exp_bits + frac_bits`` magnitude field (a rounding
    carry moves into the exponent, up to the infinity encoding) and ``overflow``, set when
    the exponent before rounding is already ``>= exp_max`` (the caller selects infinity).
    """
    F, E = fmt.frac_bits, fmt.exp_bits
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
            out[key] = v
    return SimpleNamespace(**out)


def delay(m, value: Value, cycles: int, prefix: str) -> Value:
    """``value`` delayed by ``cycles`` extra registers."""
    for i in range(cycles):
        value = stage(m, True, f"{prefix}{i}", v=value).v
    return value
