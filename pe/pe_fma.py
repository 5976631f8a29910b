"""The PE's FMA: a multiplier with ``valid`` / ``dst`` / ``c`` shift registers beside it,
the adder with the late read of an accumulator ``c``, and the write-back decode
(``docs/architecture.md``, "The PE micro-operation", "Pipeline timing and hazards")."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Mux, Signal

from arch.microop import FmaWb
from pe.fp_add import FPAdd
from pe.fp_mul import FPMul, mul_dsp
from pe.pe_operands import names_reg

__all__ = ["FmaWriteBack", "fma_unit"]


@dataclass
class FmaWriteBack:
    """What the rest of the PE sees of the FMA (see :func:`fma_unit`)."""

    fma_rd: Signal          #: the operand-stage micro-op issues an FMA (reads its sources)
    fma_go: object          #: ... in its execute stage
    mp_valid: list          #: the multiplier's valid shift register
    mp_crf: list            #: ... its late-c-from-the-RF flags
    ad_wa: list             #: the adder's SRAM write-back address shift register
    fma_wb: object          #: the write-back writes the register file this cycle ...
    fma_wb_dst: Signal      #: ... this register
    fma_wb_mema: object     #: the write-back writes SRAM bank A / B this cycle
    fma_wb_memb: object


def fma_unit(m, cfg, platform, pe, ops, sram, rf, byp):
    """Build the FMA of the micro-op in the execute stage, driving ``byp.fma_out`` /
    ``fma_out_next`` / ``fma_next_*``, the SRAM bypass entries of ``sram`` and the
    register-file bypass's ``nxt_*`` / ``cur_wb*``.

    Latency: ``a`` and ``b`` enter the multiplier (submodule ``mul``, ``cfg.mul_latency``
    cycles) in the execute stage; the product enters the adder (submodule ``add``,
    ``cfg.add_latency`` cycles) with ``c``, read from the register file late, when the
    product reaches the adder; the sum is written back ``mul_latency + add_latency``
    cycles after the execute stage, into the register file or an SRAM bank
    (:class:`~arch.microop.FmaWb`).

    Returns
    -------
    FmaWriteBack
    """
    m.submodules.mul = mul = FPMul(cfg.fmt, latency=cfg.mul_latency, dsp=mul_dsp(platform, cfg.fmt))
    if mul.dsp:
        m.d.comb += mul.ce.eq(pe.dsp_ce)
    m.submodules.add = add = FPAdd(cfg.fmt, latency=cfg.add_latency)
    # the adder's output register in this module (add.o's value; add.o is unused and
    # synthesis drops its register), so that with the receive stage the move unit's
    # copy of it (mv_fma_out) stays apart: the build keeps a PE's flip-flops apart
    # but not its FP units', and merged a copy of add.o's own register back into it
    m.d.comb += [byp.fma_out_next.eq(add.o_next), byp.fma_next_pos.eq(add.o_next_pos),
                 byp.fma_next_nan.eq(add.o_next_nan)]
    m.d.sync += byp.fma_out.eq(byp.fma_out_next)
    mp, fma_rd, fma_go, c_x = _mul_stage(m, cfg, mul, ops)
    ad, fma = _add_stage(m, cfg, add, mul, mp, fma_rd, fma_go)
    if cfg.exec_stage:
        _bypass_links(m, cfg, ops, sram, byp, mp, ad, fma)
        _late_c_early(m, cfg, rf, byp, mp, ad, fma, c_x)
    else:
        m.d.comb += ad["c_late"].eq(Mux(mp["crf"][-1], rf.read(m, mp["c"][-1][:4], "c_late"), mp["c"][-1]))
    return fma


def _mul_stage(m, cfg, mul, ops):
    """The multiplier's operands (``x_fma_a`` / ``x_fma_b``, execute stage) and the shift
    registers beside it (``mul_valid*``, ``mul_dst*``, ``mul_c_rf*``, ``mul_c*``,
    ``mul_wb*``, ``mul_waddr*``: one per multiplier stage, the first loaded at the end of
    the execute stage). ``mul_c*`` carries ``c``'s RF index, or its value captured in the
    execute stage when ``c`` is not a register.

    Returns
    -------
    (mp, fma_rd, fma_go, c_x)
        ``mp``: the shift registers by kind; ``c_x``: the value ``mul_c0`` loads.
    """
    w = cfg.fmt.width
    st, ex = ops.st, ops.ex
    s1, s1_pred = st.s1, st.s1_pred
    fma_rd = Signal(name="fma_rd")
    m.d.comb += fma_rd.eq(s1.fpu.en & s1_pred)
    fma_go = ex(fma_rd, "fma_go")
    m.d.comb += [
        mul.a.eq(ops.xsrc(lambda x: x.fpu.a, name="fma_a")),
        mul.b.eq(ops.xsrc(lambda x: x.fpu.b, name="fma_b")),
    ]
    L = cfg.mul_latency
    mp_valid = [Signal(name=f"mul_valid{i}") for i in range(L)]
    mp_dst = [Signal(4, name=f"mul_dst{i}") for i in range(L)]
    mp_crf = [Signal(name=f"mul_c_rf{i}") for i in range(L)]   # late-c select
    mp_c = [Signal(w, name=f"mul_c{i}") for i in range(L)]     # RF index or captured value
    mp_wb = [Signal(2, name=f"mul_wb{i}") for i in range(L)]   # FmaWb destination kind
    waddr_bits = max(len(st.s1_ra_addr), len(st.s1_rb_addr))
    mp_wa = [Signal(waddr_bits, name=f"mul_waddr{i}") for i in range(L)]
    if cfg.bus_stage:
        c_x = Mux(ex(names_reg(s1.fpu.c), "fma_c_isrf"), ex(s1.fpu.c, "fma_c_idx"),
                  ops.xsrc(lambda x: x.fpu.c, regs=False, name="fma_c"))
    else:
        c_now = ops.source(lambda x: x.fpu.c, regs=False, name="fma_c")
        c_x = ex(Mux(names_reg(s1.fpu.c), s1.fpu.c, c_now), "fma_c")
    m.d.sync += [
        mp_valid[0].eq(fma_go),
        mp_dst[0].eq(ex(s1.fpu.dst, "fma_dst")),
        mp_crf[0].eq(ex(names_reg(s1.fpu.c), "fma_c_rf")),
        mp_c[0].eq(c_x),
        mp_wb[0].eq(ex(s1.fpu.wb, "fma_wb")),
        mp_wa[0].eq(ex(Mux(s1.fpu.wb == FmaWb.MEMB, st.s1_rb_addr, st.s1_ra_addr), "fma_waddr")),
    ]
    for i in range(1, L):
        m.d.sync += [mp_valid[i].eq(mp_valid[i - 1]), mp_dst[i].eq(mp_dst[i - 1]),
                     mp_crf[i].eq(mp_crf[i - 1]), mp_c[i].eq(mp_c[i - 1]),
                     mp_wb[i].eq(mp_wb[i - 1]), mp_wa[i].eq(mp_wa[i - 1])]
    mp = {"valid": mp_valid, "dst": mp_dst, "crf": mp_crf, "c": mp_c, "wb": mp_wb, "wa": mp_wa,
          "waddr_bits": waddr_bits}
    return mp, fma_rd, fma_go, c_x


def _add_stage(m, cfg, add, mul, mp, fma_rd, fma_go):
    """The adder's inputs (the product and ``c_late``, driven by the late ``c`` read) and
    the shift registers beside it (``add_valid*``, ``add_dst*``, ``add_wb*``,
    ``add_waddr*``), whose last stage is the write-back decode of this cycle.

    Returns
    -------
    (ad, FmaWriteBack)
        ``ad``: the shift registers by kind, and ``c_late``.
    """
    # late read of an RF `c` when the product reaches the adder
    c_late = Signal(cfg.fmt.width, name="c_late")
    m.d.comb += [add.a.eq(mul.o), add.b.eq(c_late)]

    A = cfg.add_latency
    waddr_bits = mp["waddr_bits"]
    ad_valid = [Signal(name=f"add_valid{j}") for j in range(A)]
    ad_dst = [Signal(4, name=f"add_dst{j}") for j in range(A)]
    ad_wb = [Signal(2, name=f"add_wb{j}") for j in range(A)]
    ad_wa = [Signal(waddr_bits, name=f"add_waddr{j}") for j in range(A)]
    m.d.sync += [ad_valid[0].eq(mp["valid"][-1]), ad_dst[0].eq(mp["dst"][-1]),
                 ad_wb[0].eq(mp["wb"][-1]), ad_wa[0].eq(mp["wa"][-1])]
    for j in range(1, A):
        m.d.sync += [ad_valid[j].eq(ad_valid[j - 1]), ad_dst[j].eq(ad_dst[j - 1]),
                     ad_wb[j].eq(ad_wb[j - 1]), ad_wa[j].eq(ad_wa[j - 1])]
    # FmaWb codes other than MEMA/MEMB write the register file
    fma_wb_mema = ad_valid[-1] & (ad_wb[-1] == FmaWb.MEMA)
    fma_wb_memb = ad_valid[-1] & (ad_wb[-1] == FmaWb.MEMB)
    fma_wb = ad_valid[-1] & ~fma_wb_mema & ~fma_wb_memb
    fma_wb_dst = ad_dst[-1]
    ad = {"valid": ad_valid, "dst": ad_dst, "wb": ad_wb, "wa": ad_wa, "c_late": c_late}
    fma = FmaWriteBack(fma_rd, fma_go, mp["valid"], mp["crf"], ad_wa, fma_wb, fma_wb_dst, fma_wb_mema, fma_wb_memb)
    return ad, fma


def _bypass_links(m, cfg, ops, sram, byp, mp, ad, fma):
    """With the execute stage: the writes the bypasses look at, a cycle ahead where they
    are decided at issue. The SRAM bypass's entries (``sram.byp_*``): the write landing
    this cycle (its word is the bank's write data) and, with the bus stage, the operand
    writes in their bus stage, which land next cycle unless the FMA write-back into the
    same bank displaces them then. The register-file bypass's ``nxt_*`` (the move and
    the FMA write-back executing next cycle) and ``cur_wb*`` (the write-back now)."""
    assert cfg.add_latency >= 2, "the RF bypass looks at the adder's second-to-last stage"
    ad_valid, ad_wb, ad_dst, ad_wa = ad["valid"], ad["wb"], ad["dst"], ad["wa"]
    byp_a, byp_b = sram.byp_a, sram.byp_b
    m.d.comb += [
        # the write landing this cycle: its word is the bank's write data
        byp_a["go"].eq(sram.wa_go), byp_a["addr"].eq(sram.wa_addr), byp_a["val"].eq(sram.wr_a.data),
        byp_a["wbk"].eq(fma.fma_wb_mema), byp_a["wbk_addr"].eq(ad_wa[-1]),
        byp_b["go"].eq(sram.wb_go), byp_b["addr"].eq(sram.wb_addr), byp_b["val"].eq(sram.wr_b.data),
        byp_b["wbk"].eq(fma.fma_wb_memb), byp_b["wbk_addr"].eq(ad_wa[-1]),
        # the move executing next cycle: in the operand stage now, or with the bus
        # stage in the bus stage
        byp.nxt_mv.eq(ops.mv_go_st[-2] if cfg.exec_delay >= 2 else byp.mv_rd),
        byp.nxt_mv_dst.eq(ops.mv_dst_st[-2] if cfg.exec_delay >= 2 else ops.st.s1.mv.dst),
        byp.nxt_wb.eq(ad_valid[-2] & (ad_wb[-2] != FmaWb.MEMA) & (ad_wb[-2] != FmaWb.MEMB)),
        byp.nxt_wb_dst.eq(ad_dst[-2]),
        byp.cur_wb.eq(fma.fma_wb), byp.cur_wb_dst.eq(fma.fma_wb_dst),
    ]
    if cfg.bus_stage:
        # the operand writes in their bus stage land next cycle, unless the FMA
        # write-back into the same bank displaces them then; their word is the
        # execute-stage write word in the read's operand stage
        m.d.comb += [
            sram.byp_a2["go"].eq(sram.wa_st[-2]), sram.byp_a2["addr"].eq(sram.wa_ast[-2]),
            sram.byp_a2["wbk"].eq(ad_valid[-2] & (ad_wb[-2] == FmaWb.MEMA)),
            sram.byp_b2["go"].eq(sram.wb_st[-2]), sram.byp_b2["addr"].eq(sram.wb_ast[-2]),
            sram.byp_b2["wbk"].eq(ad_valid[-2] & (ad_wb[-2] == FmaWb.MEMB)),
        ]


def _late_c_early(m, cfg, rf, byp, mp, ad, fma, c_x):
    """The late ``c`` read with the execute stage: made one cycle early, from the stage
    before the adder's, into the register ``c_late_reg``, with this cycle's RF writes
    bypassed in (the FMA write-back wins over the move, as in the register file), so the
    adder's ``c`` comes from a flip-flop, not through the LUT RAM and the live-value
    table. Same value in the same cycle as the read without the execute stage.

    The read's selects (``c_pre_wf`` / ``c_pre_wm`` / ``c_pre_wq``) are flip-flops,
    decided a cycle earlier from the index ``mul_c`` loads next and the writes of that
    cycle, each known a cycle ahead (nxt_wb, nxt_mv, cur_mv); and the word's tags
    (``c_pre_tag``), as this cycle's writes leave them. Only the RAMs' read and the value
    select are left after the index register (the compares and the tags' 16:1 select
    there would be a 4 x 4 build's critical path, docs/fpga.md, "Timing"). A frozen
    cycle holds these with the registers they are decided from. They are the selects the
    register file would give in that cycle:

    * wf: the FMA write-back lands this cycle (it wins, as in the file);
    * wm: the move executing this cycle (bank M a cycle late, mvq);
    * wq: last cycle's move, written into bank M at this cycle's end;

    registers >= n_regs are never written: +0.
    """
    mp_crf, mp_c = mp["crf"], mp["c"]
    pre_crf, pre_c = mp_crf[-2], mp_c[-2]    # mul_latency >= 2
    idx = pre_c[:4]
    nxt_idx = (mp_c[-3] if cfg.mul_latency >= 3 else c_x)[:4]
    nxt_in = nxt_idx < cfg.n_regs
    sel_f, sel_m, sel_q = (Signal(name=f"c_pre_{k}") for k in ("wf", "wm", "wq"))
    tag_n = Signal(2, name="c_pre_tag")
    # (the tags after this cycle's FMA write-back; a move executing now is read
    # through sel_q next cycle, before the tag counts)
    w_f = fma.fma_wb & (fma.fma_wb_dst == nxt_idx) & nxt_in
    m.d.sync += [
        sel_f.eq(byp.nxt_wb & (byp.nxt_wb_dst == nxt_idx) & nxt_in),
        sel_m.eq(byp.nxt_mv & (byp.nxt_mv_dst == nxt_idx) & nxt_in),
        sel_q.eq(byp.cur_mv & (byp.cur_mv_dst == nxt_idx) & nxt_in),
        tag_n.eq(Mux(w_f, 0b11, rf.rf_tags.word_select(nxt_idx, 2))),
    ]
    c_pre = Mux(sel_f, byp.fma_out, Mux(sel_m, byp.mv_val, Mux(sel_q, byp.mvq_val, rf.read(m, idx, "c_pre", tag_n))))
    c_reg = Signal(cfg.fmt.width, name="c_late_reg")
    m.d.sync += c_reg.eq(Mux(pre_crf, c_pre, pre_c))
    m.d.comb += ad["c_late"].eq(c_reg)
