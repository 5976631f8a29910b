"""The PE's SRAM banks A and B: block RAMs with one synchronous read port and one write
port each (the component :class:`SramBanks`), and around them the SRAM bypass of the
execute stage, the operand-stage writes and the write-port selects (the builder
:class:`SramPaths`; ``docs/architecture.md``, "The execute stage", "The read stage")."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from pe.fp_common import CLASS_BITS, class_bits

__all__ = ["SramBanks", "SramPaths"]


def _read_sig(addr_bits, w):
    return wiring.Signature({"en": In(1, init=1), "addr": In(addr_bits), "data": Out(w)})


def _write_sig(addr_bits, w):
    return wiring.Signature({"en": In(1), "addr": In(addr_bits), "data": In(w)})


class SramBanks(wiring.Component):
    """SRAM banks A and B: two :class:`~amaranth.lib.memory.Memory` (submodules ``mem_a``
    / ``mem_b``, block RAM), each with one non-transparent synchronous read port with
    enable and one write port, the read-since-reset flags and, with ``cfg.read_stage``,
    the read data registered next to the RAM.

    Parameters
    ----------
    cfg : arch.config.ArchConfig
        Word format, ``mem_a_words`` / ``mem_b_words``, ``read_stage`` / ``rx_stage``.

    Attributes
    ----------
    rd_a, rd_b : Out(Signature(en: In(1, init=1), addr: In(abits), data: Out(w)))
        The read ports: ``data`` is the word at ``addr`` in the cycle after a cycle with
        ``en`` high (held otherwise); a write to ``addr`` in the read's cycle is not seen
        (the old word).
    wr_a, wr_b : Out(Signature(en: In(1), addr: In(abits), data: In(w)))
        The write ports: ``data`` written at ``addr`` at the end of a cycle with ``en``.
    rd_a_seen, rd_b_seen : Out(1)
        Flip-flops: the bank has been read since reset (set at the end of a cycle with
        ``en``). A block-RAM read port's output register has no reset value: until its
        first read after reset the data read as 0 (``rd_*_seen`` | ``en`` of the read's
        cycle gates them).
    rd_a_q, rd_b_q : Out(w)
        Only with ``cfg.read_stage``: ``data`` registered (one cycle later).
    rd_a_q_cls, rd_b_q_cls : Out(CLASS_BITS)
        Only with ``cfg.rx_stage``: :func:`~pe.fp_common.class_bits` of ``data``,
        registered beside ``rd_*_q``.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        w = cfg.fmt.width
        ports = {}
        for nm, depth in (("a", cfg.mem_a_words), ("b", cfg.mem_b_words)):
            abits = ceil_log2(depth)
            ports[f"rd_{nm}"] = Out(_read_sig(abits, w))
            ports[f"wr_{nm}"] = Out(_write_sig(abits, w))
            ports[f"rd_{nm}_seen"] = Out(1)
            if cfg.read_stage:
                ports[f"rd_{nm}_q"] = Out(w)
            if cfg.rx_stage:
                ports[f"rd_{nm}_q_cls"] = Out(CLASS_BITS)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        for nm, depth in (("a", cfg.mem_a_words), ("b", cfg.mem_b_words)):
            m.submodules[f"mem_{nm}"] = mem = Memory(shape=unsigned(cfg.fmt.width), depth=depth, init=[])
            rd, wr = mem.read_port(transparent_for=()), mem.write_port()
            rd_i, wr_i = getattr(self, f"rd_{nm}"), getattr(self, f"wr_{nm}")
            m.d.comb += [rd.en.eq(rd_i.en), rd.addr.eq(rd_i.addr), rd_i.data.eq(rd.data),
                         wr.en.eq(wr_i.en), wr.addr.eq(wr_i.addr), wr.data.eq(wr_i.data)]
            with m.If(rd_i.en):
                m.d.sync += getattr(self, f"rd_{nm}_seen").eq(1)
            if cfg.read_stage:
                m.d.sync += getattr(self, f"rd_{nm}_q").eq(rd.data)
            if cfg.rx_stage:
                m.d.sync += getattr(self, f"rd_{nm}_q_cls").eq(class_bits(cfg.fmt, rd.data))
        return m


class SramPaths:
    """The logic around the SRAM banks (``banks``, a :class:`SramBanks`, whose ports it
    drives and reads): the methods build, in this order, the read-since-reset flags as
    they are in the operand stage (:meth:`seen`), the bypass (:meth:`bypass`), the read
    stage (:meth:`read_stage`), the operand-stage writes (:meth:`operand_writes`) and the
    write-port selects (:meth:`connect_writes`).
    """

    def __init__(self, cfg, banks):
        self.cfg = cfg
        self.w = cfg.fmt.width
        self.banks = banks
        self.rd_a, self.rd_b = banks.rd_a, banks.rd_b
        self.wr_a, self.wr_b = banks.wr_a, banks.wr_b

    def seen(self, m):
        """``rd_*_seen_op``: the bank has been read since reset, as it is in the operand
        stage (the banks' ``rd_*_seen`` or the read port's enable now)."""
        b = self.banks
        self.rd_a_seen_op = b.rd_a_seen | self.rd_a.en
        self.rd_b_seen_op = b.rd_b_seen | self.rd_b.en

    def bypass(self, m):
        """The operand-stage read data ``rd_*_data``: the RAM's, or with
        ``cfg.exec_stage`` the SRAM bypass's word on a hit.

        A read issued in the cycle in which the operand-stage write of the micro-op in
        its execute stage lands on the same address returns the written word (not an FMA
        write-back's), so an SRAM write is seen by the read issued 2 later as without the
        stage. The writes in flight at the read's issue (``byp_*``, driven by
        :mod:`pe.pe_fma`) are compared with it at issue, and the hits registered with it
        and selected in the operand stage; held with the read port when no read is made.
        With the bus stage a second write is in flight (``byp_*2``): the one landing in
        the cycle after the read's (in its bus stage at the read's issue), younger, so it
        wins.
        """
        cfg, w = self.cfg, self.w
        rd_a, rd_b, wr_a, wr_b = self.rd_a, self.rd_b, self.wr_a, self.wr_b
        self.rd_a_data = rd_a_data = Signal(w, name="rd_a_data")
        self.rd_b_data = rd_b_data = Signal(w, name="rd_b_data")
        self.byp_hit = {nm: Signal(name=f"byp_{nm}_hit") for nm in "ab"}     # a write bypasses the RAM
        self.byp_word = {nm: Signal(w, name=f"byp_{nm}_word") for nm in "ab"}  # ... with this word

        def byp_entry(wr):
            return {"go": Signal(), "addr": Signal.like(wr.addr), "wbk": Signal()}
        # the execute-stage write words ("val") are those of the first entries
        byp_a, byp_b = ({**byp_entry(wr), "val": Signal(w), "wbk_addr": Signal.like(wr.addr)} for wr in (wr_a, wr_b))
        byp_a2, byp_b2 = byp_entry(wr_a), byp_entry(wr_b)   # bus stage only
        self.byp_a, self.byp_b, self.byp_a2, self.byp_b2 = byp_a, byp_b, byp_a2, byp_b2
        if cfg.exec_stage:
            for rd, byps, data, nm in ((rd_a, (byp_a, byp_a2), rd_a_data, "a"),
                                       (rd_b, (byp_b, byp_b2), rd_b_data, "b")):
                self._bypass_bank(m, rd, byps[:1 + cfg.bus_stage], data, nm)
        else:
            m.d.comb += [rd_a_data.eq(rd_a.data), rd_b_data.eq(rd_b.data)]

    def _bypass_bank(self, m, rd, byps, data, nm):
        """The SRAM bypass of bank ``nm`` (read port ``rd``, writes in flight ``byps``):
        drives ``data``, ``byp_hit[nm]`` and ``byp_word[nm]`` in the operand stage.

        FPGA timing: the read address is compared with the write addresses in flight at
        issue (the write addresses come from registers; the read address from the AR and
        the offset, as for the block RAM) two bits at a time, one LUT after the address
        adder, and those pair compares are registered with the read; their AND in the
        operand stage (two LUT levels, beside the block RAM's clock-to-output) is the hit.
        Comparing whole addresses at issue would put the adder and the compare's three
        levels in one cycle (a 4 x 4 core's critical path, docs/fpga.md, "Timing");
        comparing in the operand stage would put them all beside the RAM's output. The
        bus-stage write's word is taken in the operand stage, from the execute-stage write
        word (the same word, one cycle later), and kept in the bypass register after that
        cycle.
        """
        cfg = self.cfg
        hits = [Signal(name=f"byp_{nm}_hit{k}") for k in range(len(byps))]
        val = Signal(self.w, name=f"byp_{nm}_val")

        def eq_groups(addr, tag):
            """``rd.addr == addr`` as registered pair compares (one LUT4 per two
            address bits at issue, right after the address adder); their AND in
            the operand stage is the compare as it was at the read's issue."""
            g = Signal((len(addr) + 1) // 2, name=f"byp_{nm}_{tag}_eq")
            m.d.sync += g.eq(Cat(rd.addr[i:i + 2] == addr[i:i + 2] for i in range(0, len(addr), 2)))
            return g.all()

        def flag(v, tag):
            r = Signal(name=f"byp_{nm}_{tag}")
            m.d.sync += r.eq(v)
            return r

        # the write landing in the read's cycle: the FMA write-back into the bank
        # if there is one (it displaces the operand write), else the operand
        # write; the one landing next cycle: the operand write unless a
        # write-back displaces it then. Registered with the read (held when no
        # read is made), and finished in the operand stage.
        with m.If(rd.en):
            m.d.sync += val.eq(byps[0]["val"])
            hit_now = [Mux(flag(byps[0]["wbk"], "wbk0"), eq_groups(byps[0]["wbk_addr"], "wbk0"),
                           flag(byps[0]["go"], "go0") & eq_groups(byps[0]["addr"], "w0"))]
            hit_now += [flag(byp["go"] & ~byp["wbk"], f"go{k}") & eq_groups(byp["addr"], f"w{k}")
                        for k, byp in enumerate(byps[1:], 1)]
        m.d.comb += [h.eq(x) for h, x in zip(hits, hit_now)]
        hit, word = self.byp_hit[nm], self.byp_word[nm]
        if cfg.bus_stage:
            fresh = Signal(name=f"byp_{nm}_fresh")    # the read was issued last cycle
            m.d.sync += fresh.eq(rd.en)
            with m.If(~rd.en & fresh & hits[1]):
                m.d.sync += val.eq(byps[0]["val"])
            # the younger write (landing a cycle after the read's issue) wins
            m.d.comb += [hit.eq(hits[0] | hits[1]),
                         word.eq(Mux(hits[1] & fresh, byps[0]["val"], val))]
        else:
            m.d.comb += [hit.eq(hits[0]), word.eq(val)]
        m.d.comb += data.eq(Mux(hit, word, rd.data))

    def read_stage(self, m):
        """With ``cfg.read_stage``: each bank's RAM data registered as they are (next to
        the RAM: the banks' ``rd_*_q``), joining a source in the bus stage.

        The bypass is decided in the operand stage from flip-flops (byp_hit / byp_word)
        and registered beside rd_q (byp_*_hit_q / byp_*_word_q), so in the bus stage each
        bank has one value, ``rd_eff`` = the bypass word on a hit, else the RAM data,
        shared by every source that reads the bank: the hit reaches no source's
        operand-stage AND-OR, and each source has one term per bank, not two. The
        bus-stage value is the operand-stage value registered (a pure retiming). With the
        receive stage the RAM data's classes (class_bits) are registered beside rd_q
        (``rd_*_q_cls``), for the bus drivers' class bits (row_out_cls / col_out_cls).
        """
        cfg, w = self.cfg, self.w
        self.rd_q = rd_q = {}
        self.rd_q_cls = rd_q_cls = {}
        self.rd_eff = rd_eff = {}
        if not cfg.read_stage:
            return
        for nm in "ab":
            rd_q[nm] = getattr(self.banks, f"rd_{nm}_q")
            hit_q = Signal(name=f"byp_{nm}_hit_q")
            word_q = Signal(w, name=f"byp_{nm}_word_q")
            rd_eff[nm] = Signal(w, name=f"rd_{nm}_eff")
            m.d.sync += [hit_q.eq(self.byp_hit[nm]), word_q.eq(self.byp_word[nm])]
            m.d.comb += rd_eff[nm].eq(Mux(hit_q, word_q, rd_q[nm]))
            if cfg.rx_stage:
                rd_q_cls[nm] = getattr(self.banks, f"rd_{nm}_q_cls")

    def operand_writes(self, ops, st):
        """The operand-stage SRAM writes (``wa`` / ``wb`` ports of the micro-op): their
        source is read in the operand stage (``wa_rd`` / ``wb_rd``), their value, enable
        and address reach the execute stage through ``ops`` (``wa_val``, ``wa_go``,
        ``wa_addr`` ...; the per-stage copies in ``wa_st`` / ``wa_ast`` ...), and they are
        written at the end of the execute stage unless the FMA write-back displaces them
        (:meth:`connect_writes`)."""
        s1, s1_wpred = st.s1, st.s1_wpred
        self.wa_rd = wa_rd = s1.wa.en & s1_wpred     # the write's source is read (operand stage)
        self.wb_rd = wb_rd = s1.wb.en & s1_wpred
        self.wa_val = ops.xsrc(lambda x: x.wa.src, name="wa_val")
        self.wb_val = ops.xsrc(lambda x: x.wb.src, name="wb_val")
        self.wa_st = wa_st = ops.pipe(wa_rd, "wa_go")
        self.wb_st = wb_st = ops.pipe(wb_rd, "wb_go")
        self.wa_ast = wa_ast = ops.pipe(st.s1_wa_addr, "wa_addr")
        self.wb_ast = wb_ast = ops.pipe(st.s1_wb_addr, "wb_addr")
        delayed = bool(self.cfg.exec_delay)
        self.wa_go, self.wb_go = (wa_st[-1], wb_st[-1]) if delayed else (wa_rd, wb_rd)
        self.wa_addr, self.wb_addr = (wa_ast[-1], wb_ast[-1]) if delayed else (st.s1_wa_addr, st.s1_wb_addr)

    def connect_writes(self, m, fma, fma_out):
        """The write ports: the FMA write-back (``fma``, :class:`pe.pe_fma.FmaWriteBack`,
        word ``fma_out``) wins over the operand-stage write in its cycle."""
        wr_a, wr_b = self.wr_a, self.wr_b
        m.d.comb += [
            wr_a.addr.eq(Mux(fma.fma_wb_mema, fma.ad_wa[-1], self.wa_addr)),
            wr_a.data.eq(Mux(fma.fma_wb_mema, fma_out, self.wa_val)),
            wr_a.en.eq(self.wa_go | fma.fma_wb_mema),
            wr_b.addr.eq(Mux(fma.fma_wb_memb, fma.ad_wa[-1], self.wb_addr)),
            wr_b.data.eq(Mux(fma.fma_wb_memb, fma_out, self.wb_val)),
            wr_b.en.eq(self.wb_go | fma.fma_wb_memb),
        ]
