"""Pipelined IEEE-754 multiplier (round to nearest even, subnormals, canonical NaN).

Pipeline (``docs/fp_datapath.md`` has the details); each ``|`` is a register, ``[n]``
marks a register that exists only for ``latency >= n``:

    unpack, specials, exponent sum  [5]  significand multiply  |  leading-zero count
    [4]  normalize shift (left, or right with sticky for subnormal results)  [3]
    round to nearest even + pack + special-case mux  |  (extra delay registers) -> o

The multiply is a plain ``*`` of the two ``precision``-bit significands between
registers, so Yosys maps it onto ECP5 MULT18X18D DSP blocks.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.fp_common import (check_latency, delay, lzc, round_pack, select_result, shift_right_sticky, stage,
                          unpack, wire)
from pe.fpformat import FPFormat, get_format
from rtl.config import MIN_MUL_LATENCY

__all__ = ["FPMul"]


class FPMul(wiring.Component):
    """Floating-point multiplier ``o = a * b``, free-running pipeline.

    Parameters
    ----------
    fmt : FPFormat or str
        Number format (any ``FPFormat``; binary16, bfloat16, binary32 are the tested ones).
    latency : int
        Pipeline depth, ``>= rtl.config.MIN_MUL_LATENCY`` (2); extra stages split the
        normalize/round path first, then register the multiplier inputs, then add plain
        delay registers at the output.

    Ports
    -----
    a, b : In(fmt.width)
        Operands, sampled at every clock edge of the ``sync`` domain (one op per cycle,
        no enable or valid).
    o : Out(fmt.width)
        Result of the operands sampled ``latency`` cycles earlier: ``o`` during cycle
        ``t + latency`` is ``a * b`` of cycle ``t``. Read combinationally from the last
        pipeline register. Rounding to nearest even, subnormals in and out, signed zeros,
        overflow to infinity, every NaN result is ``fmt.qnan``.
    """

    def __init__(self, fmt: FPFormat | str, latency: int = MIN_MUL_LATENCY):
        self.fmt = get_format(fmt) if not isinstance(fmt, FPFormat) else fmt
        self.latency = check_latency(latency, MIN_MUL_LATENCY, "FPMul")
        super().__init__({"a": In(self.fmt.width), "b": In(self.fmt.width), "o": Out(self.fmt.width)})

    def elaborate(self, platform):
        m = Module()
        fmt = self.fmt
        E, F, P, B = fmt.exp_bits, fmt.frac_bits, fmt.precision, fmt.bias
        extra = self.latency - MIN_MUL_LATENCY
        split_round = extra >= 1       # register between normalize shift and round
        split_lzc = extra >= 2         # register between leading-zero count and shift
        split_mul_in = extra >= 3      # register the multiplier inputs
        n_delay = max(0, extra - 3)

        # ---- stage 1: unpack, special cases, exponent sum, significand multiply ----------
        ua = unpack(m, fmt, self.a, "ua")
        ub = unpack(m, fmt, self.b, "ub")
        s1 = stage(
            m, split_mul_in, "m0",
            sig_a=ua.sig, sig_b=ub.sig,
            # t = xa + xb - bias: biased exponent of the result if the product's MSB sits
            # at bit 2P-2 (the product of two normal significands in [1, 2))
            t=Cat(ua.xe + ub.xe, Const(0, 1)).as_signed() - B,
            sign=ua.sign ^ ub.sign,
            nan=ua.nan | ub.nan | (ua.inf & ub.zero) | (ua.zero & ub.inf),
            inf=ua.inf | ub.inf,
            zero=ua.zero | ub.zero,
        )
        prod = s1.sig_a * s1.sig_b                                  # 2P bits -> DSP
        r1 = stage(m, True, "m1", prod=prod, t=s1.t, sign=s1.sign, nan=s1.nan, inf=s1.inf, zero=s1.zero)

        # ---- stage 2a: leading-zero count -----------------------------------------------
        r2 = stage(m, split_lzc, "m2", prod=r1.prod, lz=lzc(m, r1.prod, "m_lzc"), t=r1.t,
                   sign=r1.sign, nan=r1.nan, inf=r1.inf, zero=r1.zero)

        # ---- stage 2b: normalize ------------------------------------------------------------
        # The MSB of the 2P-bit window stands for biased exponent t + 1. Shift left by
        # lz, but not below exponent 1 (subnormal result); if t < 0 shift right by -t
        # (into the subnormal range), collecting the lost bits into a sticky bit.
        t = r2.t
        neg = wire(m, t < 0, "m_neg")
        lz = r2.lz
        t_lo = t[:len(lz)]          # only used when 0 <= t < lz, which fits lz's width
        sh_l = wire(m, Mux(t >= lz, lz, t_lo), "m_shl")
        left = (r2.prod << sh_l)[:2 * P]
        # right shifts beyond P + 1 leave mantissa and round bit 0: clamp there
        right, rsticky = shift_right_sticky(m, r2.prod, (-t).as_unsigned()[:E + 2], P + 1, "m_shr")
        shifted = Mux(neg, right, left)
        base = Mux(neg, 0, (t - sh_l).as_unsigned()[:E + 1])     # biased exponent - 1
        r3 = stage(m, split_round, "m3", shifted=shifted, rsticky=neg & rsticky, base=base,
                   sign=r2.sign, nan=r2.nan, inf=r2.inf, zero=r2.zero)

        # ---- stage 2c: round, pack, special cases --------------------------------------------
        sh = wire(m, r3.shifted, "m_shifted")
        mant = sh[P:]                 # P bits, hidden bit on top
        rnd = sh[P - 1]
        sticky = sh[:P - 1].any() | r3.rsticky
        mag, overflow = round_pack(m, fmt, r3.base, mant, rnd, sticky)
        mag = wire(m, mag, "m_mag")
        res = select_result(fmt, nan=r3.nan, inf=r3.inf, inf_sign=r3.sign, zero=r3.zero,
                            zero_sign=r3.sign, overflow=overflow, sign=r3.sign, mag=mag)
        out = stage(m, True, "m4", res=res).res
        m.d.comb += self.o.eq(delay(m, out, n_delay, "m_dly"))
        return m
