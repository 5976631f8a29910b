"""Pipelined IEEE-754 adder (round to nearest even, subnormals, canonical NaN).

Pipeline (``docs/fp_datapath.md`` has the details); each ``|`` is a register, ``[n]``
marks a register that exists only for ``latency >= n``:

    unpack, order by exponent, exponent difference (|| magnitude compare)  [4]  align
    the smaller significand (guard, round, sticky)  |  add / subtract  [6]
    leading-zero count (limited to the exponent)  |  normalize shift  [5]  round to
    nearest even + pack + special-case mux  |  (extra delay registers) -> o

One datapath serves all cases: with three extra bits below the significand (guard,
round and a sticky bit ORed into the LSB) the result is correctly rounded both when the
alignment shift is <= 1 (exact, any cancellation) and when it is >= 2 (at most one bit
of normalization, the sticky bit cannot move a value across a rounding boundary).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.fp_common import (check_latency, clamp, delay, lzc, round_pack, select_result, shift_right_sticky,
                          stage, unpack, wire)
from arch.fpformat import FPFormat, get_format
from arch.config import MIN_ADD_LATENCY

__all__ = ["FPAdd"]

GRS = 3   # guard, round, sticky bits below the significand


class FPAdd(wiring.Component):
    """Floating-point adder ``o = a + b``, free-running pipeline.

    Parameters
    ----------
    fmt : FPFormat or str
        Number format: any ``FPFormat`` (tested: binary16, bfloat16, binary32, and custom
        formats e2m1 .. e11m52).
    latency : int
        Pipeline depth, ``>= arch.config.MIN_ADD_LATENCY`` (3); extra stages split
        swap/align first, then normalize/round, then add/leading-zero count, then add
        plain delay registers at the output.

    Ports
    -----
    a, b : In(fmt.width)
        Operands, sampled at every clock edge of the ``sync`` domain (one op per cycle,
        no enable or valid).
    o : Out(fmt.width)
        Result of the operands sampled ``latency`` cycles earlier: ``o`` during cycle
        ``t + latency`` is ``a + b`` of cycle ``t``. Read combinationally from the last
        pipeline register. Rounding to nearest even, subnormals in and out,
        ``(+0) + (-0) = +0``, ``(-0) + (-0) = -0``, ``x + (-x) = +0``, ``inf - inf`` and
        every NaN result is ``fmt.qnan``.
    o_next : Out(fmt.width)
        The value ``o`` takes at the next clock edge (the D input of the register ``o``
        is read from), for a copy of the output register outside the unit: a register
        loading ``o_next`` holds ``o``. (FPGA timing: the PE's move unit has its own copy,
        placed beside it; docs/fpga.md, "Timing".)
    o_next_nan, o_next_pos : Out(1)
        ``o_next`` is a NaN / is greater than zero (not a NaN, not a zero, sign clear),
        from the special-case flags and the sign, not from ``o_next``'s bits: registered
        beside a copy of ``o``, they give its class without a 16-bit reduction after the
        rounding (the PE's move unit, docs/fpga.md, "Timing"). A nonzero exact
        sum of two floats is a multiple of the smallest subnormal, so it never rounds to
        zero, and rounding never makes a NaN.
    """

    def __init__(self, fmt: FPFormat | str, latency: int = MIN_ADD_LATENCY):
        self.fmt = get_format(fmt) if not isinstance(fmt, FPFormat) else fmt
        self.latency = check_latency(latency, MIN_ADD_LATENCY, "FPAdd")
        super().__init__({"a": In(self.fmt.width), "b": In(self.fmt.width), "o": Out(self.fmt.width),
                          "o_next": Out(self.fmt.width), "o_next_nan": Out(1), "o_next_pos": Out(1)})

    def elaborate(self, platform):
        m = Module()
        fmt = self.fmt
        E, P = fmt.exp_bits, fmt.precision
        W = P + GRS + 1            # sum width: carry, hidden bit, fraction, guard, round, sticky
        extra = self.latency - MIN_ADD_LATENCY
        split_align = extra >= 1   # register between swap and alignment shift
        split_round = extra >= 2   # register between normalize shift and round
        split_lzc = extra >= 3     # register between add and leading-zero count
        n_delay = max(0, extra - 3)

        # ---- stage 1: unpack, order by exponent, align; compare magnitudes ------------------------
        ua = unpack(m, fmt, self.a, "ua")
        ub = unpack(m, fmt, self.b, "ub")
        # The alignment path only needs the operand with the larger exponent ("hi"); the
        # full magnitude compare (a carry chain over exponent and fraction) runs beside
        # it and only decides, at equal exponents, which way round to subtract (stage 2).
        a_hi = wire(m, ua.xe >= ub.xe, "a_hi")
        a_big = ua.mag >= ub.mag   # finite magnitudes order like their bit patterns
        # exponent difference: both orders in parallel with the compare, clamped at
        # P + GRS (larger shifts leave only the sticky bit)
        diff = Mux(a_hi, clamp((ua.xe - ub.xe)[:E], P + GRS), clamp((ub.xe - ua.xe)[:E], P + GRS))
        s0 = stage(
            m, split_align, "a0",
            hi_sig=Mux(a_hi, ua.sig, ub.sig), lo_sig=Mux(a_hi, ub.sig, ua.sig),
            hi_xe=Mux(a_hi, ua.xe, ub.xe),
            diff=diff,
            flip=a_hi & ~a_big,                    # equal exponents, |b| > |a|: lo - hi
            sign=Mux(a_big, ua.sign, ub.sign),     # sign of the larger magnitude
            sub=ua.sign ^ ub.sign,
            nan=ua.nan | ub.nan | (ua.inf & ub.inf & (ua.sign ^ ub.sign)),
            inf=ua.inf | ub.inf,
            inf_sign=Mux(ua.inf, ua.sign, ub.sign),
            zero_sign=ua.sign & ub.sign,           # sign of an exact zero sum (RNE)
        )
        aligned, sticky = shift_right_sticky(m, Cat(Const(0, GRS), s0.lo_sig), s0.diff, None, "a_align")
        r1 = stage(m, True, "a1", hi_sig=s0.hi_sig, lo=aligned | sticky, hi_xe=s0.hi_xe, flip=s0.flip,
                   sign=s0.sign, sub=s0.sub, nan=s0.nan, inf=s0.inf, inf_sign=s0.inf_sign,
                   zero_sign=s0.zero_sign)

        # ---- stage 2: add / subtract, leading-zero count ------------------------------------------
        hi = Cat(Const(0, GRS), r1.hi_sig)
        x = wire(m, Mux(r1.flip, r1.lo, hi), "a_x")            # the larger magnitude
        y = wire(m, Mux(r1.flip, hi, r1.lo), "a_y")
        total = Mux(r1.sub, x - y, x + y)[:W]                  # never negative: x >= y
        r2a = stage(m, split_lzc, "a2", total=total, big_xe=r1.hi_xe, sign=r1.sign,
                    nan=r1.nan, inf=r1.inf, inf_sign=r1.inf_sign, zero_sign=r1.zero_sign)
        # leading zeros, but not more than big_xe: a stop bit at position W-1-big_xe (the
        # MSB position of exponent 1) limits the count, so the normalize shift never goes
        # below exponent 1 (subnormal result)
        stop = (Const(1 << (W - 1), W) >> r2a.big_xe)[:W]
        r2 = stage(m, True, "a3", total=r2a.total, lz=lzc(m, r2a.total | stop, "a_lzc"),
                   is_zero=~r2a.total.any(),
                   big_xe=r2a.big_xe, sign=r2a.sign, nan=r2a.nan, inf=r2a.inf,
                   inf_sign=r2a.inf_sign, zero_sign=r2a.zero_sign)

        # ---- stage 3: normalize ----------------------------------------------------------------------
        # The sum's MSB position W-1 stands for biased exponent big_xe + 1: shift left by
        # lz = min(leading zeros, big_xe); no bit is lost.
        shifted = (r2.total << r2.lz)[:W]
        base = (r2.big_xe - r2.lz)[:E]            # biased exponent - 1, >= 0
        r3 = stage(m, split_round, "a4", shifted=shifted, base=base, is_zero=r2.is_zero,
                   sign=r2.sign, nan=r2.nan, inf=r2.inf, inf_sign=r2.inf_sign, zero_sign=r2.zero_sign)

        # ---- stage 3b: round, pack, special cases ------------------------------------------------
        shifted = wire(m, r3.shifted, "a_shifted")
        mant = shifted[GRS + 1:]               # P bits, hidden bit on top
        rnd = shifted[GRS]
        sticky = shifted[:GRS].any()
        mag, overflow = round_pack(m, fmt, r3.base, mant, rnd, sticky)
        mag = wire(m, mag, "a_mag")
        res = select_result(fmt, nan=r3.nan, inf=r3.inf, inf_sign=r3.inf_sign, zero=r3.is_zero,
                            zero_sign=r3.zero_sign, overflow=overflow, sign=r3.sign, mag=mag)
        # the result's class (o_next_nan / o_next_pos): NaN, else the sign of an infinity
        # (an overflow is one too), else a nonzero value's sign
        pos = ~r3.nan & Mux(r3.inf, ~r3.inf_sign, ~r3.is_zero & ~r3.sign)
        # registers a5, then a_dly0 .. a_dly{n_delay-1}: o is the last one, o_next its input
        if n_delay:
            r5 = stage(m, True, "a5", res=res, nan=r3.nan, pos=pos)
            m.d.comb += [self.o_next.eq(delay(m, r5.res, n_delay - 1, "a_dly")),
                         self.o_next_nan.eq(delay(m, r5.nan, n_delay - 1, "a_dly_nan")),
                         self.o_next_pos.eq(delay(m, r5.pos, n_delay - 1, "a_dly_pos"))]
        else:
            m.d.comb += [self.o_next.eq(res), self.o_next_nan.eq(r3.nan), self.o_next_pos.eq(pos)]
        last = f"a_dly{n_delay - 1}" if n_delay else "a5"
        m.d.comb += self.o.eq(stage(m, True, last, v=self.o_next).v)
        return m
