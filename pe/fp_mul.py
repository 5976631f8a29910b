"""Pipelined IEEE-754 multiplier (round to nearest even, subnormals, canonical NaN).

Pipeline (``docs/fp_datapath.md`` has the details); each ``|`` is a register, ``[n]``
marks a register that exists only for ``latency >= n``:

    unpack, specials, exponent sum, leading zeros of both significands  [4]  significand
    multiply || normalize shift amount  |  normalize shift (left, or right with
    sticky into the subnormal range) + 1-bit fix-up  [3]  round to nearest even + pack
    + special-case mux  |  (extra delay registers) -> o

The multiply is a plain ``*`` of the two ``precision``-bit significands between
registers, so Yosys maps it onto ECP5 MULT18X18D DSP blocks. With ``dsp="ecp5"`` (formats
of up to 18 significand bits) it is a MULT18X18D instance instead, whose own input
registers are the significand registers of stage 0 (``latency >= 4``; the product
register is then a fabric flip-flop behind the block) or, without stage 0, whose output
register is the product register: synth_ecp5 does not move fabric flip-flops into the
block, and nextpnr-ecp5 times a MULT18X18D by its register settings, so the
fabric-to-DSP-to-fabric path of a plain ``*`` (a critical path of the 4 x 4 core on the
FPGA, docs/fpga.md, "Timing") loses the route into the block.
The shift amount is
worked out beside the multiplier (the product of significands with ``za`` and ``zb``
leading zeros has ``za + zb`` or ``za + zb + 1``), so no leading-zero count sits
behind the multiplier.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.fp_common import (check_latency, clamp, delay, lzc, round_pack, select_result, shift_right_sticky,
                          stage, unpack, wire)
from arch.fpformat import FPFormat, get_format
from arch.config import MIN_MUL_LATENCY

__all__ = ["FPMul", "DSP_KINDS", "ECP5_DSP_BITS", "mul_dsp"]

#: Values of :class:`FPMul`'s ``dsp`` parameter: ``None`` (a plain ``*``) or ``"ecp5"``.
DSP_KINDS = (None, "ecp5")
#: Operand width of one ECP5 MULT18X18D (unsigned operands of up to this many bits).
ECP5_DSP_BITS = 18


def mul_dsp(platform, fmt: FPFormat) -> str | None:
    """The ``dsp`` an :class:`FPMul` of ``fmt`` elaborated for ``platform`` uses:
    ``"ecp5"`` on a Lattice ECP5 platform when the significand fits one MULT18X18D,
    ``None`` otherwise (simulation, other targets, binary32's 24-bit significands)."""
    from amaranth.vendor import LatticeECP5Platform

    if isinstance(platform, LatticeECP5Platform) and fmt.precision <= ECP5_DSP_BITS:
        return "ecp5"
    return None


class FPMul(wiring.Component):
    """Floating-point multiplier ``o = a * b``, free-running pipeline.

    Parameters
    ----------
    fmt : FPFormat or str
        Number format: any ``FPFormat`` (tested: binary16, bfloat16, binary32, and custom
        formats e2m1 .. e11m52).
    latency : int
        Pipeline depth, ``>= arch.config.MIN_MUL_LATENCY`` (2); the third stage splits
        normalize from round, the fourth registers the multiplier inputs, any more are
        plain delay registers at the output.
    dsp : None or "ecp5"
        ``None``: the significand product is a ``*`` (any target, simulation).
        ``"ecp5"``: a Lattice MULT18X18D instance holding the significand registers
        (``latency >= 4``: its input registers) or else the product register (its output
        register), on clock ``CLK0`` with enable ``CE0`` = ``ce`` and synchronous reset
        ``RST0`` = the ``sync`` reset; only for formats of up to 18 significand bits.
        Same results and timing as ``None``; simulating it needs a MULT18X18D model
        (``sim/models/MULT18X18D.v``).

    Ports
    -----
    a, b : In(fmt.width)
        Operands, sampled at every clock edge of the ``sync`` domain (one op per cycle,
        no enable or valid).
    ce : In(1), init 1
        Only with ``dsp="ecp5"``: the enable of the registers inside the DSP block.
        ``EnableInserter`` does not reach an instance's ports, so a multiplier run under
        an enable must get the same enable here; otherwise leave it at 1.
    o : Out(fmt.width)
        Result of the operands sampled ``latency`` cycles earlier: ``o`` during cycle
        ``t + latency`` is ``a * b`` of cycle ``t``. Read combinationally from the last
        pipeline register. Rounding to nearest even, subnormals in and out, signed zeros,
        overflow to infinity, every NaN result is ``fmt.qnan``.
    """

    def __init__(self, fmt: FPFormat | str, latency: int = MIN_MUL_LATENCY, dsp: str | None = None):
        self.fmt = get_format(fmt) if not isinstance(fmt, FPFormat) else fmt
        self.latency = check_latency(latency, MIN_MUL_LATENCY, "FPMul")
        if dsp not in DSP_KINDS:
            raise ValueError(f"FPMul dsp must be one of {DSP_KINDS}, got {dsp!r}")
        if dsp == "ecp5" and self.fmt.precision > ECP5_DSP_BITS:
            raise ValueError(f"FPMul dsp='ecp5' needs a significand of at most {ECP5_DSP_BITS} bits "
                             f"(one MULT18X18D); {self.fmt.name} has {self.fmt.precision}")
        self.dsp = dsp
        sig = {"a": In(self.fmt.width), "b": In(self.fmt.width), "o": Out(self.fmt.width)}
        if dsp is not None:
            sig["ce"] = In(1, init=1)
        super().__init__(sig)

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
        # with a DSP instance the significands' registers are the block's input registers
        sigs = {} if self.dsp else {"sig_a": ua.sig, "sig_b": ub.sig}
        s0 = stage(
            m, split_in, "m0", **sigs,
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
        # (with a DSP instance its input registers are stage 0's significand registers if
        # there is one, and the product register is a fabric flip-flop behind the block;
        # without stage 0 the product register is the block's output register)
        if self.dsp:
            prod = self._ecp5_product(m, ua.sig, ub.sig, in_regs=split_in, out_reg=not split_in)
        else:
            prod = s0.sig_a * s0.sig_b                               # 2P bits -> DSP
        prod_in_block = bool(self.dsp) and not split_in
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
        r1 = stage(m, True, "m1", **({} if prod_in_block else {"prod": prod}),
                   sh_l=sh_l, sh_r=sh_r, neg=neg, fix_ok=fix_ok, base=base,
                   sign=s0.sign, nan=s0.nan, inf=s0.inf, zero=s0.zero)
        if prod_in_block:
            r1.prod = prod

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

    def _ecp5_product(self, m, sig_a, sig_b, in_regs: bool, out_reg: bool):
        """``sig_a * sig_b`` (2P bits) from a MULT18X18D, registered at the block's inputs
        with ``in_regs`` (the stage-0 register of the fabric version) and at its output
        with ``out_reg``; unsigned operands zero-extended to 18 bits; the registers run
        on the ``sync`` clock with ``CE0 = ce`` and the ``sync`` reset (synchronous; 0 in a
        reset-less domain, as the fabric's registers have none there)."""
        P = self.fmt.precision
        prod = Signal(2 * ECP5_DSP_BITS, name="m_prod_dsp")
        reg = lambda on: "CLK0" if on else "NONE"      # noqa: E731
        ports = {
            "p_REG_INPUTA_CLK": reg(in_regs), "p_REG_INPUTA_CE": "CE0", "p_REG_INPUTA_RST": "RST0",
            "p_REG_INPUTB_CLK": reg(in_regs), "p_REG_INPUTB_CE": "CE0", "p_REG_INPUTB_RST": "RST0",
            "p_REG_INPUTC_CLK": "NONE", "p_REG_PIPELINE_CLK": "NONE",
            "p_REG_OUTPUT_CLK": reg(out_reg), "p_REG_OUTPUT_CE": "CE0", "p_REG_OUTPUT_RST": "RST0",
            "p_RESETMODE": "SYNC", "p_MULT_BYPASS": "DISABLED", "p_SOURCEB_MODE": "B_SHIFT",
            "i_SIGNEDA": 0, "i_SIGNEDB": 0, "i_SOURCEA": 0, "i_SOURCEB": 0,
            "i_CLK0": ClockSignal("sync"), "i_CE0": self.ce, "i_RST0": ResetSignal("sync", allow_reset_less=True),
        }
        for k in range(1, 4):
            ports.update({f"i_CLK{k}": 0, f"i_CE{k}": 0, f"i_RST{k}": 0})
        a = Cat(sig_a, Const(0, ECP5_DSP_BITS - P))
        b = Cat(sig_b, Const(0, ECP5_DSP_BITS - P))
        for i in range(ECP5_DSP_BITS):
            ports[f"i_A{i}"], ports[f"i_B{i}"], ports[f"i_C{i}"] = a[i], b[i], 0
        for i in range(2 * ECP5_DSP_BITS):
            ports[f"o_P{i}"] = prod[i]
        m.submodules.dsp = Instance("MULT18X18D", **ports)
        return prod[:2 * P]
