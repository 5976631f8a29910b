"""Pipelined IEEE-754 multiplier (round to nearest even, subnormals, canonical NaN).

Pipeline (``docs/fp_datapath.md`` has the details); each ``|`` is a register, ``[n]``
marks a register that exists only for ``latency >= n``:

    unpack, specials, exponent sum, leading zeros of both significands  [4]  significand
    multiply || normalize shift amount  |  normalize shift (left, or right with
    sticky into the subnormal range) + 1-bit fix-up  [3]  round to nearest even + pack
    + special-case mux  |  (extra delay registers) -> o

The multiply is a plain ``*`` of the two ``precision``-bit significands between
registers, so Yosys maps it onto ECP5 MULT18X18D DSP blocks. The shift amount is
worked out beside the multiplier (the product of significands with ``za`` and ``zb``
leading zeros has ``za + zb`` or ``za + zb + 1``), so no leading-zero count sits
behind the multiplier.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.fp_common import (check_latency, clamp, delay, lzc, round_pack, select_result, shift_right_sticky,
                          stage, unpack, wire)
from pe.fpformat import FPFormat, get_format
from rtl.config import MIN_MUL_LATENCY

__all__ = ["FPMul"]


class FPMul(wiring.Component):
    """Floating-point multiplier ``o = a * b``, free-running pipeline.

    Parameters
    ----------
    fmt : FPFormat or str
        Number format: any ``FPFormat`` (tested: binary16, bfloat16, binary32, and custom
        formats e2m1 .. e11m52).
    latency : int
        Pipeline depth, ``>= rtl.config.MIN_MUL_LATENCY`` (2); the third stage splits
        normalize from round, the fourth registers the multiplier inputs, any more are
        plain delay registers at the output.

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
        E, P, B = fmt.exp_bits, fmt.precision, fmt.bias
        extra = self.latency - MIN_MUL_LATENCY
        split_round = extra >= 1       # register between normalize and round
        split_in = extra >= 2          # register the unpacked operands (multiplier inputs)
        n_delay = max(0, extra - 2)

        # ---- stage 0 (own register only for latency >= 4): unpack ---------------------------------
        ua = unpack(m, fmt, self.a, "ua")
        ub = unpack(m, fmt, self.b, "ub")
        s0 = stage(
            m, split_in, "m0",
            sig_a=ua.sig, sig_b=ub.sig,
            # leading zeros of both significands (for the normalize shift amount), here
            # beside the exponent sum rather than behind the stage-0 register
            lz_a=lzc(m, ua.sig, "m_lza"), lz_b=lzc(m, ub.sig, "m_lzb"),
            # t = xa + xb - bias: biased exponent of the result if the product's MSB sits
            # at bit 2P-2 (the product of two significands in [1, 2)); the MSB of the
            # 2P-bit product window stands for exponent t + 1
            t=Cat(ua.xe + ub.xe, Const(0, 1)).as_signed() - B,
            sign=ua.sign ^ ub.sign,
            nan=ua.nan | ub.nan | (ua.inf & ub.zero) | (ua.zero & ub.inf),
            inf=ua.inf | ub.inf,
            zero=ua.zero | ub.zero,
        )

        # ---- stage 1: significand multiply || normalize shift amount ------------------------------
        prod = s0.sig_a * s0.sig_b                                   # 2P bits -> DSP
        lz = wire(m, s0.lz_a + s0.lz_b, "m_lz")   # lzc(prod) - {0,1}
        t = s0.t
        neg = wire(m, t < 0, "m_neg")
        # t >= 0: shift left by min(lz, t) (not below exponent 1); one more bit later if
        # the product had lz + 1 leading zeros and the exponent allows it (t > lz)
        # t < 0: the result is subnormal; shift right by -t (beyond P + 1 only the sticky
        # bit is left, so clamp there)
        d = wire(m, t - lz, "m_d")        # one subtractor: t >= lz, t > lz and the exponent
        d_neg = d < 0
        sh_l = wire(m, Mux(neg, 0, Mux(d_neg, t[:len(lz)], lz)), "m_shl")   # t < lz: t fits lz's width
        fix_ok = ~neg & ~d_neg & d.any()
        neg_t = (-t).as_unsigned()[:E + 1]
        sh_r = Mux(neg, clamp(neg_t, P + 1), 0)
        base = Mux(neg | d_neg, 0, d.as_unsigned()[:E + 1])       # biased exponent - 1
        r1 = stage(m, True, "m1", prod=prod, sh_l=sh_l, sh_r=sh_r, neg=neg, fix_ok=fix_ok, base=base,
                   sign=s0.sign, nan=s0.nan, inf=s0.inf, zero=s0.zero)

        # ---- stage 2: normalize ------------------------------------------------------------------------
        left = (r1.prod << r1.sh_l)[:2 * P]
        right, rsticky = shift_right_sticky(m, r1.prod, r1.sh_r, None, "m_shr")
        x = wire(m, Mux(r1.neg, right, left), "m_norm")
        fix = wire(m, r1.fix_ok & ~x[2 * P - 1], "m_fix")
        shifted = Mux(fix, Cat(Const(0, 1), x[:2 * P - 1]), x)
        r2 = stage(m, split_round, "m2", shifted=shifted, rsticky=r1.neg & rsticky,
                   base=(r1.base - fix)[:E + 1],
                   sign=r1.sign, nan=r1.nan, inf=r1.inf, zero=r1.zero)

        # ---- stage 2b: round, pack, special cases ------------------------------------------------------
        sh = wire(m, r2.shifted, "m_shifted")
        mant = sh[P:]                 # P bits, hidden bit on top
        rnd = sh[P - 1]
        sticky = sh[:P - 1].any() | r2.rsticky
        mag, overflow = round_pack(m, fmt, r2.base, mant, rnd, sticky)
        mag = wire(m, mag, "m_mag")
        res = select_result(fmt, nan=r2.nan, inf=r2.inf, inf_sign=r2.sign, zero=r2.zero,
                            zero_sign=r2.sign, overflow=overflow, sign=r2.sign, mag=mag)
        out = stage(m, True, "m3", res=res).res
        m.d.comb += self.o.eq(delay(m, out, n_delay, "m_dly"))
        return m
