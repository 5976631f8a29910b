"""The PE's register file: two LUT-RAM banks with a live-value table and their writes
(the component :class:`RegFile`), the reads the rest of the PE makes of it (the builder
:class:`RfReads`), and the register-file bypass state of the execute stage
(``docs/architecture.md``, "The execute stage")."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from arch.microop import MvOp

__all__ = ["RegFile", "RfReads", "RfBypass", "rf_bypass"]


class RegFile(wiring.Component):
    """Register file: two 16-word banks in LUT RAM (submodules ``rf_m`` / ``rf_f``), one
    per write port (M: move unit, F: FMA write-back), with asynchronous read ports, and
    a live-value table saying which bank holds each register's latest value, plus a
    written bit per register so that reads return +0 until the first write after reset
    (flip-flops ``rf_lvt`` / ``rf_written``, reset to 0). Same behaviour as ``n_regs``
    flip-flop words with nine read ports, at a fraction of the area (docs/fpga.md).

    Parameters
    ----------
    w : int
        Word width.
    n_regs : int
        Registers that can be written (the others read +0).
    n_rd_m, n_rd_f : int
        Read ports of bank M / bank F.
    m_domain : str
        The domain of bank M's write port (:meth:`pe.pe.PE.frozen`).

    Attributes
    ----------
    wm : Out(Signature(en: In(1), addr: In(4), data: In(w)))
        Bank M's write port (written at the end of the cycle, in ``m_domain``).
    wf : Out(Signature(en: In(1), addr: In(4), data: In(w)))
        Bank F's write port: the FMA write-back (written at the end of the cycle); it
        also sets the register's live-value bit and written bit.
    mv_go, mv_dst : In(1), In(4)
        The move unit writes register ``mv_dst`` this cycle: clears its live-value bit
        (bank M holds it) and sets its written bit at the end of the cycle, unless ``wf``
        writes the same register (the FMA wins). Bank M's word may be written through
        ``wm`` in this cycle or later (``cfg.exec_stage``: a cycle late).
    conflict : Out(1)
        Combinational: ``wf`` and the move write the same register this cycle.
    tags : Out(32)
        The flip-flops: bits ``2 i`` / ``2 i + 1`` are register ``i``'s written bit and
        live-value bit (1: bank F holds it).
    rd_m, rd_f : Out(Signature(addr: In(4), data: Out(w))).array(n)
        Asynchronous read ports of bank M / F (the bank's word, whatever the tags say).
    """

    def __init__(self, w, n_regs, n_rd_m, n_rd_f, m_domain):
        self.w, self.n_regs, self.m_domain = w, n_regs, m_domain
        wr = wiring.Signature({"en": In(1), "addr": In(4), "data": In(w)})
        rd = wiring.Signature({"addr": In(4), "data": Out(w)})
        super().__init__({
            "wm": Out(wr), "wf": Out(wr), "mv_go": In(1), "mv_dst": In(4),
            "conflict": Out(1), "tags": Out(32),
            **({"rd_m": Out(rd).array(n_rd_m)} if n_rd_m else {}),
            **({"rd_f": Out(rd).array(n_rd_f)} if n_rd_f else {}),
        })
        self.n_rd = {"m": n_rd_m, "f": n_rd_f}

    def elaborate(self, platform):
        m = Module()
        w = self.w
        for nm, wp, domain in (("m", self.wm, self.m_domain), ("f", self.wf, "sync")):
            m.submodules[f"rf_{nm}"] = mem = Memory(shape=unsigned(w), depth=16, init=[])
            port = mem.write_port(domain=domain)
            m.d.comb += [port.en.eq(wp.en), port.addr.eq(wp.addr), port.data.eq(wp.data)]
            for r in (getattr(self, f"rd_{nm}") if self.n_rd[nm] else ()):
                p = mem.read_port(domain="comb")
                m.d.comb += [p.addr.eq(r.addr), r.data.eq(p.data)]
        rf_lvt = Signal(16, name="rf_lvt")      # 1: bank F holds RF[i]
        rf_written = Signal(16, name="rf_written")
        m.d.comb += self.tags.eq(Cat(*(Cat(rf_written[i], rf_lvt[i]) for i in range(16))))
        mv_go, mv_dst, fma_wb, fma_wb_dst = self.mv_go, self.mv_dst, self.wf.en, self.wf.addr
        m.d.comb += self.conflict.eq(mv_go & fma_wb & (mv_dst == fma_wb_dst))
        for i in range(self.n_regs):
            with m.If(fma_wb & (fma_wb_dst == i)):
                m.d.sync += [rf_lvt[i].eq(1), rf_written[i].eq(1)]
            with m.Elif(mv_go & (mv_dst == i)):
                m.d.sync += [rf_lvt[i].eq(0), rf_written[i].eq(1)]
        return m


class RfReads:
    """The register-file reads of the PE, collected while the PE is built and connected
    to a :class:`RegFile` made with as many read ports (:meth:`write`)."""

    def __init__(self, w):
        self.w = w
        self.rf_tags = Signal(32, name="rf_tags")    # the RegFile's tags
        self._reads = {"m": [], "f": []}            # (addr, data) per bank

    def bank(self, nm, addr, name):
        """Bank ``nm``'s (``"m"`` / ``"f"``) word at ``addr``, read asynchronously."""
        data = Signal(self.w, name=f"{name}_rf{nm}")
        self._reads[nm].append((addr, data))
        return data

    def read(self, m, idx, name, tag=None):
        """RF[idx] (idx: 4 bits) read asynchronously; +0 for unwritten/absent registers.
        ``tag``: the word's (written, in bank F) bits, if given (else read here)."""
        if tag is None:
            tag = Signal(2, name=f"{name}_tag")
            m.d.comb += tag.eq(self.rf_tags.word_select(idx, 2))
        v = Signal(self.w, name=f"{name}_rf")
        m.d.comb += v.eq(Mux(tag[0], Mux(tag[1], self.bank("f", idx, name), self.bank("m", idx, name)), 0))
        return v

    def write(self, m, cfg, domain, byp, mv_go, mv_dst, fma_wb, fma_wb_dst):
        """The register file (submodule ``rf``, bank M's write port in ``domain``) with
        this cycle's writes: the move unit's (``mv_go``, ``mv_dst``, ``byp.mv_val``; with
        ``cfg.exec_stage`` into bank M a cycle late, from the ``mvq_*`` registers of
        ``byp``) and the FMA write-back's (``fma_wb``, ``fma_wb_dst``, ``byp.fma_out``),
        which wins; and the reads made so far.

        Returns
        -------
        Signal
            ``rf_conflict``: the FMA write-back overrides this cycle's move.
        """
        reads = self._reads
        m.submodules.rf = rf = RegFile(self.w, cfg.n_regs, len(reads["m"]), len(reads["f"]), domain)
        for nm in "mf":
            for port, (addr, data) in zip(getattr(rf, f"rd_{nm}", ()), reads[nm]):
                m.d.comb += [port.addr.eq(addr), data.eq(port.data)]
        m.d.comb += self.rf_tags.eq(rf.tags)
        rf_conflict = Signal(name="rf_conflict")
        m.d.comb += rf_conflict.eq(rf.conflict)
        if cfg.exec_stage:     # bank M a cycle late, from the mvq registers
            m.d.comb += [byp.cur_mv_dst.eq(mv_dst),     # cur_mv: a register (rf_bypass)
                         rf.wm.addr.eq(byp.mvq_dst), rf.wm.data.eq(byp.mvq_val), rf.wm.en.eq(byp.mvq_go)]
        else:
            m.d.comb += [rf.wm.addr.eq(mv_dst), rf.wm.data.eq(byp.mv_val), rf.wm.en.eq(mv_go)]
        m.d.comb += [rf.wf.addr.eq(fma_wb_dst), rf.wf.data.eq(byp.fma_out), rf.wf.en.eq(fma_wb),
                     rf.mv_go.eq(mv_go), rf.mv_dst.eq(mv_dst)]
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
        (:mod:`pe.pe_fma`, :mod:`pe.pe_move`, :meth:`RfReads.write`).
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
