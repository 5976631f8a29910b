"""The PE's register file: two LUT-RAM banks with a live-value table, its writes, and the
register-file bypass state of the execute stage (``docs/architecture.md``, "The execute
stage")."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Mux, Signal, unsigned
from amaranth.lib.memory import Memory

from arch.microop import MvOp

__all__ = ["RegFile", "RfBypass", "rf_bypass"]


class RegFile:
    """Register file: two 16-word banks in LUT RAM, one per write port (M: move unit,
    F: FMA write-back), each replicated per read port by the synthesis tool, and a
    live-value table saying which bank holds each register's latest value, plus a
    written bit per register so that reads return +0 until the first write after reset
    (flip-flops, reset to 0). Same behaviour as n_regs flip-flop words with nine read
    ports, at a fraction of the area (docs/fpga.md).

    Parameters
    ----------
    m : Module
        The PE's module: the banks are its submodules ``rf_m`` and ``rf_f``.
    w : int
        Word width.
    m_domain : str
        The domain of bank M's write port (:meth:`pe.pe.PE.frozen`).
    """

    def __init__(self, m, w, m_domain):
        self.w = w
        m.submodules.rf_m = rf_m = Memory(shape=unsigned(w), depth=16, init=[])
        m.submodules.rf_f = rf_f = Memory(shape=unsigned(w), depth=16, init=[])
        self.rf_m, self.rf_f = rf_m, rf_f
        self.rf_wm = rf_m.write_port(domain=m_domain)
        self.rf_wf = rf_f.write_port()
        self.rf_lvt = rf_lvt = Signal(16, name="rf_lvt")      # 1: bank F holds RF[i]
        self.rf_written = rf_written = Signal(16, name="rf_written")
        self.rf_tags = Cat(*(Cat(rf_written[i], rf_lvt[i]) for i in range(16)))

    def read(self, m, idx, name, tag=None):
        """RF[idx] (idx: 4 bits) read asynchronously; +0 for unwritten/absent registers.
        ``tag``: the word's (written, in bank F) bits, if given (else read here)."""
        pm = self.rf_m.read_port(domain="comb")
        pf = self.rf_f.read_port(domain="comb")
        if tag is None:
            tag = Signal(2, name=f"{name}_tag")
            m.d.comb += tag.eq(self.rf_tags.word_select(idx, 2))
        v = Signal(self.w, name=f"{name}_rf")
        m.d.comb += [pm.addr.eq(idx), pf.addr.eq(idx),
                     v.eq(Mux(tag[0], Mux(tag[1], pf.data, pm.data), 0))]
        return v

    def write(self, m, cfg, byp, mv_go, mv_dst, fma_wb, fma_wb_dst):
        """The register-file writes of this cycle: the move unit's (``mv_go``, ``mv_dst``,
        ``byp.mv_val``; with ``cfg.exec_stage`` into bank M a cycle late, from the
        ``mvq_*`` registers of ``byp``) and the FMA write-back's (``fma_wb``, ``fma_wb_dst``,
        ``byp.fma_out``), which wins, with the live-value table and written bits updated
        at the end of the cycle (registers >= n_regs are never marked written, so they
        read +0).

        Returns
        -------
        Signal
            ``rf_conflict``: the FMA write-back overrides this cycle's move.
        """
        rf_conflict = Signal(name="rf_conflict")
        m.d.comb += rf_conflict.eq(mv_go & fma_wb & (mv_dst == fma_wb_dst))
        rf_wm, rf_wf = self.rf_wm, self.rf_wf
        if cfg.exec_stage:     # bank M a cycle late, from the mvq registers
            m.d.comb += [byp.cur_mv_dst.eq(mv_dst),     # cur_mv: a register (rf_bypass)
                         rf_wm.addr.eq(byp.mvq_dst), rf_wm.data.eq(byp.mvq_val), rf_wm.en.eq(byp.mvq_go)]
        else:
            m.d.comb += [rf_wm.addr.eq(mv_dst), rf_wm.data.eq(byp.mv_val), rf_wm.en.eq(mv_go)]
        m.d.comb += [rf_wf.addr.eq(fma_wb_dst), rf_wf.data.eq(byp.fma_out), rf_wf.en.eq(fma_wb)]
        for i in range(cfg.n_regs):
            with m.If(fma_wb & (fma_wb_dst == i)):
                m.d.sync += [self.rf_lvt[i].eq(1), self.rf_written[i].eq(1)]
            with m.Elif(mv_go & (mv_dst == i)):
                m.d.sync += [self.rf_lvt[i].eq(0), self.rf_written[i].eq(1)]
        return rf_conflict


@dataclass
class RfBypass:
    """The results and register-file writes that the bypasses and the late ``c`` read
    look at (see :func:`rf_bypass`)."""

    mv_val: Signal          #: the move unit's result (execute stage)
    fma_out: Signal         #: the adder's result (FMA write-back)
    fma_out_next: Signal    #: ... and its value in the next cycle (add.o_next)
    fma_next_pos: Signal    #: ... which is > 0 (add.o_next_pos)
    fma_next_nan: Signal    #: ... which is a NaN (add.o_next_nan)
    mv_rd: Signal           #: the operand-stage micro-op moves
    nxt_mv: Signal          #: a move executes next cycle ...
    nxt_mv_dst: Signal      #: ... into this register
    nxt_wb: Signal          #: an FMA writes the RF next cycle ...
    nxt_wb_dst: Signal
    byp_val: Signal         #: the value a bypassed read returns
    cur_mv: Signal          #: a move executes now, its write not overridden ...
    cur_mv_dst: Signal      #: ... into this register
    cur_wb: Signal          #: the FMA writes the RF now ...
    cur_wb_dst: Signal      #: ... into this register
    mvq_go: Signal          #: ... registered: bank M's write this cycle
    mvq_dst: Signal
    mvq_val: Signal
    byp_fma_next: object = None     #: exec_stage: next cycle's bypass takes the FMA's result
    byp_fma: Signal = None          #: exec_stage: this cycle's bypass takes the FMA's result


def rf_bypass(m, cfg, st):
    """Build the register-file bypass state (execute stage only; the signals exist, idle,
    without it).

    An operand-stage read of a register that the move unit (micro-op in its execute
    stage) writes in the same cycle returns the move's result (the FMA's, if the FMA
    write-back writes the register in that cycle too: what the register holds
    afterwards), so a move result is read by the next micro-op as without the stage. FMA
    results are not bypassed (their distance is fpu_latency). Decided at issue from the
    micro-op now in its operand stage (next cycle's move) and the adder's second-to-last
    stage. The move unit's result reaches bank M one cycle late, from the ``mvq_*``
    registers; ``cur_mv`` and ``byp_fma`` are flip-flops loaded with next cycle's value.

    Returns
    -------
    RfBypass
        ``nxt_*`` / ``cur_*`` / ``fma_*`` / ``mv_val`` are driven by their users
        (:mod:`pe.pe_fma`, :mod:`pe.pe_move`, :meth:`RegFile.write`).
    """
    w = cfg.fmt.width
    s1, s1_pred = st.s1, st.s1_pred
    mv_val = Signal(w, name="mv_val")
    fma_out = Signal(w, name="fma_out")
    fma_out_next = Signal(w, name="fma_out_next")
    fma_next_pos = Signal(name="fma_next_pos")
    fma_next_nan = Signal(name="fma_next_nan")
    mv_rd = Signal(name="mv_rd")
    m.d.comb += mv_rd.eq((s1.mv.op != MvOp.NOP) & s1_pred)
    nxt_mv = Signal(name="nxt_mv")
    nxt_mv_dst = Signal(4, name="nxt_mv_dst")
    nxt_wb = Signal(name="nxt_wb")
    nxt_wb_dst = Signal(4, name="nxt_wb_dst")
    # The value a bypassed read returns, one per PE (not per source): the move's
    # result, or the FMA's when the FMA write-back writes the move's register in the
    # same cycle (a hit means the register read is the move's destination, so the
    # conflict does not depend on the source; decided at issue like the selects).
    byp_val = Signal(w, name="byp_val")
    # FPGA timing: the move unit's result reaches the register file a cycle late, from
    # a register (``mvq_*``), so the move unit's logic does not end in the LUT RAMs'
    # write data. The live-value table and the written bits are updated in the move's
    # cycle as before, and a read in the next cycle of the register it writes takes the
    # registered word (a third bypass term, decided at issue from the move executing
    # then), so every read returns what it did with the write in the move's cycle.
    # A move whose register the FMA write-back writes in the same cycle (the FMA wins)
    # is not registered: bank F holds that register's value.
    cur_mv = Signal(name="cur_mv")
    cur_mv_dst = Signal(4, name="cur_mv_dst")
    cur_wb = Signal(name="cur_wb")
    cur_wb_dst = Signal(4, name="cur_wb_dst")
    mvq_go = Signal(name="mvq_go")
    mvq_dst = Signal(4, name="mvq_dst")
    mvq_val = Signal(w, name="mvq_val")
    byp = RfBypass(mv_val, fma_out, fma_out_next, fma_next_pos, fma_next_nan, mv_rd, nxt_mv, nxt_mv_dst,
                   nxt_wb, nxt_wb_dst, byp_val, cur_mv, cur_mv_dst, cur_wb, cur_wb_dst, mvq_go, mvq_dst,
                   mvq_val)
    if cfg.exec_stage:
        m.d.sync += [mvq_go.eq(cur_mv), mvq_dst.eq(cur_mv_dst), mvq_val.eq(mv_val)]
        # next cycle's FMA write-back writes next cycle's move's register (the FMA wins)
        byp.byp_fma_next = byp_fma_next = nxt_mv & nxt_wb & (nxt_wb_dst == nxt_mv_dst)
        byp.byp_fma = byp_fma = Signal(name="byp_fma")
        m.d.sync += byp_fma.eq(byp_fma_next)
        m.d.comb += byp_val.eq(Mux(byp_fma, fma_out, mv_val))
        # FPGA timing: ``cur_mv`` (the move's write not overridden by the FMA's) is a
        # flip-flop loaded with next cycle's value, as byp_fma is: the move and the
        # FMA write-back of next cycle are known now (their stages advance together,
        # under the PE's one enable), so the register-file selects decided at issue
        # start at flip-flops, not at the adder's write-back decode and the conflict
        # compare (8 connections deep on the 4 x 4 core).
        m.d.sync += cur_mv.eq(nxt_mv & ~byp_fma_next)
    return byp
