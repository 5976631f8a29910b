"""The PE's source operands: the operand-stage AND-OR of the live values, the stages
between the operand and execute stages with their move-bypass points, and the bus drivers
and receivers (``docs/architecture.md``, "The PE", "The execute stage", "The bus stage",
"The read stage", "The receive stage")."""

from __future__ import annotations

from functools import reduce

from amaranth.hdl import Const, Mux, Signal

from arch.microop import Src
from pe.fp_common import CLASS_BITS, class_bits

__all__ = ["Operands", "names_reg"]


def names_reg(code):
    """The source code names a register (codes 0..15 name RF[code])."""
    return ~code[4]


class Operands:
    """Source operands of the micro-op in the operand stage, and their way to the execute
    stage.

    Parameters
    ----------
    m : Module
    cfg : arch.config.ArchConfig
    pe : pe.pe.PE
        The PE (its ``uop`` and bus ports).
    st : pe.pe_issue.OperandStage
    sram : pe.pe_sram.SramPaths
        After :meth:`~pe.pe_sram.SramPaths.read_stage`.
    rf : pe.pe_regfile.RfReads
    byp : pe.pe_regfile.RfBypass

    Notes
    -----
    The kind of each source is decoded at issue into one-hot select flip-flops (beside
    the operand-stage register), so in the operand stage a source is an AND-OR of the
    few live values: SRAM read data (if read since reset), buses, the RF read (async LUT
    RAM at the operand-stage code) and constants. This keeps the operand stage, whose
    paths run SRAM read -> row/column bus -> other PEs -> RF / SRAM / multiplier, two to
    three LUT levels shorter than a mux tree on the code (docs/fpga.md, "Timing"). The
    selects of gated readers (bus drivers) fold in the driver select. The flip-flops hold
    f(s1, rd_*_seen) at all times (same enable, reset to f(NOP, 0)), so the cycle
    behaviour is that of the mux on the operand-stage code.

    ``mv_go_st`` / ``mv_dst_st`` (the move's enable and destination, one register per
    stage, :meth:`pipe`) are set by the PE before the first :meth:`xsrc`; the move
    bypass points, the move unit and the FMA's bypass links read them.
    """

    def __init__(self, m, cfg, pe, st, sram, rf, byp):
        self.m, self.cfg, self.pe, self.st = m, cfg, pe, st
        self.sram, self.rf, self.byp = sram, rf, byp
        self.w = cfg.fmt.width
        self.consts = {Src.NZERO: cfg.fmt.neg_zero, Src.ONE: cfg.fmt.one}   # (+0 is the OR of nothing)
        self.stage_tags = {0: (), 1: ("x",), 2: ("b", "x"), 3: ("b", "r", "x")}[cfg.exec_delay]
        self.bus_vals = {"row": pe.row_in, "col": pe.col_in}
        self.mv_go_st = self.mv_dst_st = None

    def source(self, field, *, regs=True, buses=True, gate=None, name, late=None):
        """Value of source ``field(uop)`` in the operand stage; unlisted codes read +0.

        ``gate`` (issue-stage signal): the value is +0 unless it was high at issue.
        ``late`` (a list; ``cfg.read_stage``): the SRAM banks are left out of the
        value and ``(select, bank)`` is appended for each bank instead, ``select`` an
        operand-stage signal: the source reads that bank (its bypass word on a hit,
        else its RAM data). The value ORed with the selected bank is the source's
        value. Select flip-flops ``{name}_sel*`` load at issue; the value ``{name}`` is
        combinational in the operand stage."""
        m, cfg, w, sram, rf, byp = self.m, self.cfg, self.w, self.sram, self.rf, self.byp
        code_i, code_o = field(self.pe.uop), field(self.st.s1)
        mems = (("a", Src.MEMA, sram.rd_a_seen_op, sram.rd_a_data), ("b", Src.MEMB, sram.rd_b_seen_op, sram.rd_b_data))
        live = []
        for nm, code_, seen, data_ in mems:
            live += [(code_i == code_) & seen, nm if late is not None else data_]
        if buses:
            live += [code_i == Src.ROW, self.pe.row_in, code_i == Src.COL, self.pe.col_in]
        for code_, value in self.consts.items():
            live += [code_i == code_, Const(value, w)]
        if regs and cfg.exec_stage:
            idx = code_i[:4]
            reg = ~code_i[4] & (idx < cfg.n_regs)
            hit = reg & byp.nxt_mv & (byp.nxt_mv_dst == idx)
            # the move executing now writes bank M at the end of the operand stage
            hitq = reg & ~hit & byp.cur_mv & (byp.cur_mv_dst == idx)
            # The register file, one select per bank: the word's tags as this cycle's
            # writes leave them, which is what they are in the read's cycle (a frozen
            # cycle holds both). A move into the register now is read through hitq,
            # so only the FMA write-back's tags count. After the LUT RAM only an AND
            # with a flip-flop is left, no tag select (a 16:1 multiplexer of the
            # written bits and the live-value table in front of every read would be
            # among the 4 x 4 build's critical paths, docs/fpga.md, "Timing").
            rf_sel = reg & ~hit & ~hitq
            tag = Mux(byp.cur_wb & (byp.cur_wb_dst == idx), 0b11, rf.rf_tags.word_select(idx, 2))
            live += [hit, byp.byp_val, hitq, byp.mvq_val,
                     rf_sel & tag[0] & tag[1], ("rf", "f"), rf_sel & tag[0] & ~tag[1], ("rf", "m")]
        elif regs:
            live += [~code_i[4], None]
        terms = []
        for k in range(0, len(live), 2):
            cond, value = live[k], live[k + 1]
            # f(NOP, 0): code 0 names RF[0] (per bank: off, nothing is written after
            # reset); gated readers are off after reset
            init = int(value is None and gate is None)
            sel = Signal(name=f"{name}_sel{k // 2}", init=init)
            m.d.sync += sel.eq(cond if gate is None else cond & gate)
            if isinstance(value, str):      # a bank, read stage: joins in the bus stage
                late.append((sel, value))
                continue
            if value is None:
                value = rf.read(m, code_o[:4], name)
            elif isinstance(value, tuple):   # a register-file bank: its word
                value = rf.bank(value[1], code_o[:4], name)
            terms.append(Mux(sel, value, 0))
        v = Signal(w, name=name)
        m.d.comb += v.eq(reduce(lambda x, y: x | y, terms))
        return v

    def late_regs(self, late, name, values=None, tag="bus", classes=None):
        """The read-stage selects of ``late`` (from :meth:`source`) registered into the
        bus stage: the SRAM term there, an OR of each bank's ``values`` (default
        ``sram.rd_eff``, or a bus driver's ``rd_q``) under them. With ``classes`` (each
        bank's class bits, ``rd_q_cls``): ``(term, the OR of the classes under the same
        selects)``."""
        m = self.m
        if values is None:
            values = self.sram.rd_eff
        out, out_cls = [], []
        for sel, nm in late:
            r = Signal(name=f"{name}_mem{nm}_{tag}")
            m.d.sync += r.eq(sel)
            out.append(Mux(r, values[nm], 0))
            if classes is not None:
                out_cls.append(Mux(r, classes[nm], 0))
        term = reduce(lambda x, y: x | y, out, Const(0, self.w))
        if classes is None:
            return term
        return term, reduce(lambda x, y: x | y, out_cls, Const(0, CLASS_BITS))

    def drive_buses(self):
        """The bus drivers (independent of the predicate; no bus forwarding): ``row_oe`` /
        ``col_oe``, ``row_out`` / ``col_out`` and ``row_op`` / ``col_op`` of the PE.

        Combinational in the operand stage; with the bus stage the driven value and the
        enable are registered here, at the driver, and the bus carries them in the next
        cycle (flip-flop -> bus -> receiver register). With the read stage a driver's
        registered RAM data are ORed in after its register (in the bus stage; a bypass
        word is in the register); row_op / col_op, the operand-stage value, take them
        from the RAM's output and the bypass (a chip's ring and scratchpad lanes sample
        it). With the receive stage each driver also drives its value's class bits
        (row_out_cls / col_out_cls): the test of its register, ORed with the registered
        RAM data's classes under the same selects as the data (one of the two is +0,
        whose classes are 0), so a receiver's bus classes need no test after the bus.
        """
        m, cfg, pe, w, sram, st = self.m, self.cfg, self.pe, self.w, self.sram, self.st
        fmt = cfg.fmt
        drive = m.d.sync if cfg.bus_stage else m.d.comb
        drive += [pe.row_oe.eq(st.s1_rsel), pe.col_oe.eq(st.s1_csel)]
        out_cls = {"rdrv": pe.row_out_cls, "cdrv": pe.col_out_cls} if cfg.rx_stage else {}
        for fld, gate, op, out, nm in (("rdrv", st.dec.rsel, pe.row_op, pe.row_out, "rdrv_val"),
                                       ("cdrv", st.dec.csel, pe.col_op, pe.col_out, "cdrv_val")):
            if cfg.read_stage:
                # The bypass word (from flip-flops, operand stage) is folded into the
                # driver register; after it only the registered RAM data are ORed in,
                # under a select that is off on a bypass hit, so the bus starts two LUT
                # inputs per bank after the flip-flops, not through rd_eff's mux.
                late = []
                val = self.source(lambda x: x[fld].src, buses=False, gate=gate, name=nm, late=late)
                reg = Signal(w, name=f"{nm}_reg")
                m.d.sync += reg.eq(reduce(lambda x, y: x | y,
                                          [Mux(sel & sram.byp_hit[b], sram.byp_word[b], 0) for sel, b in late], val))
                ram_sel = [(sel & ~sram.byp_hit[b], b) for sel, b in late]
                if fld in out_cls:
                    ram, ram_cls = self.late_regs(ram_sel, nm, sram.rd_q, "ram", classes=sram.rd_q_cls)
                    m.d.comb += out_cls[fld].eq(class_bits(fmt, reg) | ram_cls)
                else:
                    ram = self.late_regs(ram_sel, nm, sram.rd_q, "ram")
                raw = {"a": sram.rd_a_data, "b": sram.rd_b_data}     # the bypass word on a hit
                m.d.comb += [
                    op.eq(reduce(lambda x, y: x | y, [Mux(sel, raw[b], 0) for sel, b in late], val)),
                    out.eq(reg | ram),
                ]
            else:
                val = self.source(lambda x: x[fld].src, buses=False, gate=gate, name=nm)
                m.d.comb += op.eq(val)
                drive += out.eq(val)
                if fld in out_cls:      # out is a register (the bus stage)
                    m.d.comb += out_cls[fld].eq(class_bits(fmt, out))

    def pipe(self, v, name):
        """``v`` registered once per stage between the operand and execute stages:
        ``[bus-stage value, execute-stage value]`` with the bus stage (and the
        receive-stage value between them with the receive stage), ``[execute-stage
        value]`` with the execute stage alone, ``[]`` without."""
        out = []
        for k in range(self.cfg.exec_delay):
            r = Signal(v.shape(), name=f"{self.stage_tags[k]}_{name}")
            self.m.d.sync += r.eq(v)
            out.append(r)
            v = r
        return out

    def ex(self, v, name):
        """``v`` as the execute stage sees it (registered with an execute stage)."""
        return self.pipe(v, name)[-1] if self.cfg.exec_delay else v

    def receive_buses(self):
        """With the receive stage: the PE registers its row and column buses as they come
        off them (``rx_row`` / ``rx_col``, also the ``row_rx`` / ``col_rx`` outputs), and
        those flip-flops join the source values one cycle later (``bus_vals``)."""
        m, pe = self.m, self.pe
        if not self.cfg.rx_stage:
            return
        rx_row = Signal(self.w, name="rx_row")
        rx_col = Signal(self.w, name="rx_col")
        m.d.sync += [rx_row.eq(pe.row_in), rx_col.eq(pe.col_in)]
        m.d.comb += [pe.row_rx.eq(rx_row), pe.col_rx.eq(rx_col)]
        self.bus_vals = {"row": rx_row, "col": rx_col}

    def xsrc(self, field, *, regs=True, name, pre=False, byp_rx=None, buses=None, parts=None):
        """Value of source ``field(uop)`` as the execute stage sees it. With the bus
        stage: the operand-stage value without the buses, registered; in the bus
        stage the move bypass's second point (the move executing in this cycle:
        issued just before the reader, or two before it with the receive stage;
        decided at the reader's issue) and, with the read stage, the SRAM data join
        it; with the receive stage it is registered again, and in the receive stage
        the move bypass's third point (the move issued just before the reader) joins
        it. The bus values (``row_in`` / ``col_in`` carrying, in the bus stage, what
        was driven in the operand stage; with the receive stage their registers)
        join it last, then the execute-stage register. ``pre`` (bus stage only):
        return the value the execute-stage register would load, unregistered.
        ``byp_rx``: the bypass value of the receive stage's point (default the
        shared ``byp_val``); ``buses``: the bus values (default ``bus_vals``).
        ``parts`` (receive stage; a dict with ``fns``, class name -> test, and
        ``byp_cls``, the bypass value's class flags): filled with the receive-stage
        register ``r``, its class flip-flops ``r_cls`` and the selects ``hit_rx`` /
        ``row`` / ``col`` (the move unit's operand classes)."""
        m, cfg, w = self.m, self.cfg, self.w
        byp_val = self.byp.byp_val
        if not cfg.bus_stage:
            return self.ex(self.source(field, regs=regs, name=name), name)
        code_i = field(self.pe.uop)
        late = [] if cfg.read_stage else None
        v = self.source(field, regs=regs, buses=False, name=name, late=late)
        sel = self._xsrc_selects(code_i, regs, name)
        b = Signal(w, name=f"b_{name}")
        m.d.sync += b.eq(v)
        bv = Signal(w, name=f"bus_{name}")
        held = Mux(sel["hit"], byp_val, b) if regs else b
        mem = self.late_regs(late, name) if cfg.read_stage else 0
        m.d.comb += bv.eq(held | mem)
        if cfg.rx_stage:
            r = Signal(w, name=f"r_{name}")
            m.d.sync += r.eq(bv)
            if parts is not None:
                # the classes of the bus-stage value, registered beside it: the
                # held value's or the bypass's (its class from flip-flops,
                # parts["byp_cls"]), ORed with the SRAM data's (one of them is nonzero)
                r_cls = {}
                for k, f in parts["fns"].items():
                    r_cls[k] = Signal(name=f"r_{name}_{k}")
                    mem_cls = f(mem) if cfg.read_stage else 0
                    m.d.sync += r_cls[k].eq(Mux(sel["hit"], parts["byp_cls"][k], f(b)) | mem_cls)
                parts.update(r=r, r_cls=r_cls, hit_rx=sel["hit_rx"], row=sel["row"], col=sel["col"])
            bv = Signal(w, name=f"rx_{name}")
            m.d.comb += bv.eq(Mux(sel["hit_rx"], byp_val if byp_rx is None else byp_rx, r) if regs else r)
        bus = self.bus_vals if buses is None else buses
        x_in = bv | Mux(sel["row"], bus["row"], 0) | Mux(sel["col"], bus["col"], 0)
        x = Signal(w, name=f"{'xin' if pre else 'x'}_{name}")
        if pre:
            m.d.comb += x.eq(x_in)
        else:
            m.d.sync += x.eq(x_in)
        return x

    def _xsrc_selects(self, code_i, regs, name):
        """The selects of :meth:`xsrc` (bus stage): ``row`` / ``col`` (the source is a
        bus) and, for register sources, the move-bypass points ``hit`` (bus stage) and,
        with the receive stage, ``hit_rx``; each decided at issue from ``code_i`` and
        registered once per stage up to the one that uses it."""
        m, cfg, byp = self.m, self.cfg, self.byp
        s1 = self.st.s1
        conds = {"row": code_i == Src.ROW, "col": code_i == Src.COL}
        if regs:
            def moves_into(go, dst):
                """The source is the register the move (``go``, ``dst``) writes."""
                return ~code_i[4] & (code_i[:4] < cfg.n_regs) & go & (dst == code_i[:4])
            # the move issued just before the reader (in its operand stage now); with
            # the receive stage that is the receive stage's point, and the bus
            # stage's is the move issued two before (in its bus stage now)
            conds["hit_rx" if cfg.rx_stage else "hit"] = moves_into(byp.mv_rd, s1.mv.dst)
            if cfg.rx_stage:
                conds["hit"] = moves_into(self.mv_go_st[0], self.mv_dst_st[0])
        sel = {}
        for k, cond in conds.items():
            # registered at issue, then once per stage up to the one that uses it:
            # the bus stage for the bus stage's move point, else the stage before the
            # execute stage (where the buses and the receive stage's point join)
            rs = [Signal(name=f"{name}_{k}_{tag}") for tag in ("op", "bus", "rx")[:cfg.exec_delay]]
            if k == "hit":
                rs = rs[:2]
            m.d.sync += [r.eq(x) for r, x in zip(rs, [cond] + rs[:-1])]
            sel[k] = rs[-1]
        return sel
