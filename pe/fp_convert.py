"""Number-format conversion between two :class:`~arch.fpformat.FPFormat` s: the golden
function and the combinational RTL unit of the ring crossing (``docs/chip.md``,
"Heterogeneous chips").

Semantics (those of the datapath, ``docs/fp_datapath.md``): a conversion to a format
that holds every value of the source (wider exponent and fraction) is exact; otherwise
it rounds to nearest, ties to even, into the destination's subnormals or to a signed
zero, and overflows to a signed infinity. Infinities and signed zeros keep their sign;
every NaN becomes the destination's canonical quiet NaN.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.fpformat import FPFormat
from pe.fp_golden import convert_bits

__all__ = ["convert_bits", "FPConvert"]


class FPConvert(wiring.Component):
    """Combinational conversion of one value from ``src`` to ``dst`` (:func:`convert_bits`,
    bit for bit).

    Ports
    -----
    a : In(src.width)
        The source pattern.
    o : Out(dst.width)
        The converted pattern, in the same cycle (no register: the ring crossing
        registers it).

    The datapath: unpack (``sig``, effective exponent ``max(exp, 1)``), normalize by the
    significand's leading zeros (a source subnormal), rebias, right-shift into the
    destination's subnormals with a sticky bit, round to nearest even on the dropped
    bits and pack as ``((E - 1) << F) + mantissa + increment`` (a rounding carry moves into
    the exponent, up to infinity); then the special cases (NaN, infinity, zero,
    overflow).
    """

    def __init__(self, src: FPFormat, dst: FPFormat):
        self.src, self.dst = src, dst
        super().__init__({"a": In(src.width), "o": Out(dst.width)})

    def elaborate(self, platform):
        m = Module()
        s, d = self.src, self.dst
        Fa, Fb, Pa = s.frac_bits, d.frac_bits, s.frac_bits + 1
        sign = self.a[-1]
        ef = self.a[Fa:Fa + s.exp_bits]
        frac = self.a[:Fa]
        sig = Signal(Pa)
        m.d.comb += sig.eq(Mux(ef == 0, frac, Cat(frac, Const(1, 1))))
        # leading zeros of the significand (0 for a normal source)
        lz = Signal(range(Pa + 1))
        for i in range(Pa):        # the highest set bit wins (last assignment)
            with m.If(sig[i]):
                m.d.comb += lz.eq(Pa - 1 - i)
        norm = Signal(Pa)
        m.d.comb += norm.eq(sig << lz)
        # destination biased exponent of the normalized value (signed)
        ebits = max(s.exp_bits, d.exp_bits) + 3
        eb = Signal(range(-(1 << ebits), 1 << ebits))
        efs, lzs = Signal(signed(ebits)), Signal(signed(ebits))
        m.d.comb += [efs.eq(Mux(ef == 0, 1, ef)), lzs.eq(lz)]
        m.d.comb += eb.eq(efs - lzs + (d.bias - s.bias))
        # significand with G = Fb + 3 fraction bits below its leading one: Fb kept, then
        # the guard, round and a sticky position (wide enough for the source's bits)
        W = max(Pa, Fb + 3) + 1
        wide = Signal(W)
        m.d.comb += wide.eq(norm << (W - Pa))             # leading one at bit W - 1
        # right shift for a destination subnormal: 1 - eb places (clamped)
        sh_max = W + 1
        sh = Signal(range(sh_max + 1))
        m.d.comb += sh.eq(Mux(eb >= 1, 0, Mux(1 - eb > sh_max, sh_max, 1 - eb)))
        shifted = Signal(W)
        m.d.comb += shifted.eq(wide >> sh)
        lost = Signal()
        m.d.comb += lost.eq((wide & ~(Const((1 << W) - 1, W) << sh)[:W]).any())
        # keep Fb + 1 bits (the significand, hidden bit included); below them the rest
        drop = W - (Fb + 1)
        mant = Signal(Fb + 1)
        m.d.comb += mant.eq(shifted[drop:])
        rnd = shifted[drop - 1]
        sticky = Signal()
        m.d.comb += sticky.eq(lost | (shifted[:drop - 1].any() if drop > 1 else 0))
        inc = Signal()
        m.d.comb += inc.eq(rnd & (sticky | mant[0]))
        e1 = Signal(range(-(1 << ebits), 1 << ebits))
        m.d.comb += e1.eq(Mux(eb >= 1, eb, 1))
        packed = Signal(d.width + 2)
        m.d.comb += packed.eq(((e1 - 1) << Fb) + mant + inc)
        inf = Const(d.exp_max << Fb, d.width - 1)
        mag = Signal(d.width - 1)
        with m.If(ef == s.exp_max):
            m.d.comb += mag.eq(Mux(frac.any(), d.qnan, inf))
        with m.Elif(sig == 0):
            m.d.comb += mag.eq(0)
        with m.Elif((eb >= d.exp_max) | (packed >= (d.exp_max << Fb))):
            m.d.comb += mag.eq(inf)
        with m.Else():
            m.d.comb += mag.eq(packed)
        nan = (ef == s.exp_max) & frac.any()
        m.d.comb += self.o.eq(Mux(nan, d.qnan, Cat(mag, sign)))
        return m
