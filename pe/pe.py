"""The processing element (PE): FP MAC, register file, two SRAM banks, address registers.

Implements ``docs/architecture.md`` (sections "The PE", "The PE micro-operation",
"Pipeline timing and hazards", "Events"); :class:`pe.pe_model.PEModel` is the
cycle-accurate executable reference that the cocotb tests compare this RTL with, cycle
by cycle.
"""

from __future__ import annotations

from functools import partial, reduce

from amaranth.hdl import Array, Cat, Const, DomainRenamer, EnableInserter, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from pe.fp_add import FPAdd
from pe.fp_common import CLASS_BITS, CLS_NAN, CLS_POS, class_bits, is_nan, is_positive
from pe.fp_mul import FPMul, mul_dsp
from arch.microop import SEG_BITS, ArOp, FmaWb, Gate, MvOp, PredMode, Src
from pe.layouts import EVENT_LAYOUT, uop_layout

__all__ = ["PE", "EVENT_LAYOUT", "ISSUE_LAYOUT", "ISSUE_NOP", "issue_decode"]

#: Per-cycle event strobes of a PE (:data:`arch.counters.EVENT_FIELDS`).

#: Address registers a micro-op can name (its 2-bit AR indices).
AR_SLOTS = 4

#: A PE's issue-stage decisions about the micro-op it issues: ``pred``, its predicate;
#: ``rsel`` / ``csel``, it drives its row / column bus; ``ra_en`` / ``rb_en``, it reads SRAM
#: bank A / B (the read's enable and its gate); per address register ``i`` (bit ``i``,
#: applied only under the predicate): ``ar_inc``, a port post-increments it by its stride;
#: ``ar_add``, ``AR += imm``; ``ar_set``, ``AR = imm``; ``ar_stride``, ``STRIDE = imm``.
#: Each is a function of the micro-op and of the PE's coordinates only
#: (:func:`issue_decode`).
ISSUE_LAYOUT = data.StructLayout({"pred": 1, "rsel": 1, "csel": 1, "ra_en": 1, "rb_en": 1,
                                  "ar_inc": AR_SLOTS, "ar_add": AR_SLOTS, "ar_set": AR_SLOTS,
                                  "ar_stride": AR_SLOTS})

#: :func:`issue_decode` of the all-zero micro-op (a NOP: every PE's predicate holds,
#: nothing is driven, read or updated), for registers that hold a decoded NOP after reset.
ISSUE_NOP = {"pred": 1, "rsel": 0, "csel": 0, "ra_en": 0, "rb_en": 0,
             "ar_inc": 0, "ar_add": 0, "ar_set": 0, "ar_stride": 0}


def issue_decode(m, cfg, row: int, col: int, u):
    """The issue-stage decisions (:data:`ISSUE_LAYOUT`) of PE ``(row, col)`` about
    micro-op ``u``: combinational logic added to module ``m``; returns a value of
    :data:`ISSUE_LAYOUT`'s shape. The predicate selects by column, row or diagonal
    offset, modulo ``2**seg`` when segmented; a bus driver is the PE at offset ``k`` of
    its (segment of the) row / column, or on diagonal ``k``; an SRAM read is made if
    enabled and its gate (:class:`~arch.microop.Gate`) holds; an AR is post-incremented
    when any port with ``inc`` names it."""
    diag = (col - row) % cfg.nr

    def seg_index(index: int, seg):
        """``index`` (an elaboration constant) modulo 2**seg; seg = 0: unchanged."""
        return Array([Const(index if g == 0 else index % (1 << g), 8)
                      for g in range(1 << SEG_BITS)])[seg]

    pred = Signal(name="dec_pred")
    with m.Switch(u.pred.mode):
        with m.Case(PredMode.ALL):
            m.d.comb += pred.eq(1)
        with m.Case(PredMode.COL):
            m.d.comb += pred.eq(u.pred.k == seg_index(col, u.pred.seg))
        with m.Case(PredMode.ROW):
            m.d.comb += pred.eq(u.pred.k == seg_index(row, u.pred.seg))
        with m.Case(PredMode.DIAG):
            m.d.comb += pred.eq(u.pred.k == seg_index(diag, u.pred.seg))

    rsel = u.rdrv.en & Mux(u.rdrv.seg != 0, u.rdrv.k == seg_index(col, u.rdrv.seg),
                           Mux(u.rdrv.diag, u.rdrv.k == diag, u.rdrv.k == col))
    csel = u.cdrv.en & Mux(u.cdrv.seg != 0, u.cdrv.k == seg_index(row, u.cdrv.seg),
                           Mux(u.cdrv.diag, u.cdrv.k == diag, u.cdrv.k == row))

    gates = {Gate.ALL: Const(1, 1), Gate.PRED: pred, Gate.RDRV: rsel, Gate.CDRV: csel}

    def gate_ok(gate):
        return Array([gates[g] for g in sorted(Gate)])[gate]

    def per_ar(f):
        return Cat(*(f(i) for i in range(AR_SLOTS)))

    ports = (u.ra, u.rb, u.wa, u.wb)
    dec = {"pred": pred, "rsel": rsel, "csel": csel,
           "ra_en": u.ra.en & gate_ok(u.ra.gate), "rb_en": u.rb.en & gate_ok(u.rb.gate),
           "ar_inc": per_ar(lambda i: reduce(lambda x, y: x | y, [p.inc & (p.ar == i) for p in ports])),
           "ar_add": per_ar(lambda i: (u.ar.op == ArOp.ADD) & (u.ar.idx == i)),
           "ar_set": per_ar(lambda i: (u.ar.op == ArOp.SET) & (u.ar.idx == i)),
           "ar_stride": per_ar(lambda i: (u.ar.op == ArOp.STRIDE) & (u.ar.idx == i))}
    return Cat(*(dec[name] for name, _ in ISSUE_LAYOUT))


class PE(wiring.Component):
    """One PE of an ``nr x nr`` core, executing the broadcast micro-op every cycle.

    Parameters
    ----------
    cfg : arch.config.ArchConfig
        Format, register-file size, number of address registers, SRAM depths and FP
        pipeline latencies.
    row, col : int
        Coordinates of this PE in the core (elaboration constants used by predicates,
        bus-driver selection and read gating).
    issue_in : bool
        Take the issue-stage decisions from the ``issue`` port instead of decoding them
        from ``uop`` (a core with :attr:`~arch.config.ArchConfig.dist_stage` decodes them
        beside the distribution register, so they come from flip-flops). Same cycle
        behaviour when ``issue`` is :func:`issue_decode` of ``uop``.

    Attributes
    ----------
    uop : In(uop_layout(cfg.addr_bits, cfg.sel_bits))
        Micro-op issued this cycle (all-zero = NOP).
    issue : In(ISSUE_LAYOUT)
        With ``issue_in`` only: :func:`issue_decode` of ``uop`` for this PE, this cycle.
    row_in, col_in : In(fmt.width)
        Resolved value of this PE's row / column bus this cycle (the core muxes the single
        driver's ``row_out`` / ``col_out``; a PE reads its own drive back).
    row_out, col_out : Out(fmt.width)
        Value this PE drives (0 when it does not drive). Combinational from the operand
        stage register, the SRAM read-port registers and the register file only, never
        from ``row_in``/``col_in``: a driver source ``ROW``/``COL`` drives +0, so buses
        cannot form combinational loops.
    row_oe, col_oe : Out(1)
        This PE drives its row / column bus this cycle.
    row_op, col_op : Out(fmt.width)
        The value this PE drives, as of the operand stage of the driving micro-op (the
        core samples ``hout`` beats from it). Without ``cfg.bus_stage`` it is ``row_out`` /
        ``col_out``; with it, ``row_out`` / ``row_oe`` are these registered: the value
        crosses the bus in the next cycle (the bus stage), and the receivers read
        ``row_in`` / ``col_in`` then, into their execute stage. (With ``cfg.read_stage``
        ``row_out`` is a register ORed with the registered RAM data it selects.)
    row_rx, col_rx : Out(fmt.width)
        Only with ``cfg.rx_stage``: the receive registers (``row_in`` / ``col_in`` of
        the previous cycle, held while the PE is frozen); the core's ``hout`` beat is
        those of the PEs at position 0.
    row_out_cls, col_out_cls : Out(2)
        Only with ``cfg.rx_stage``: :func:`~pe.fp_common.class_bits` of ``row_out`` /
        ``col_out`` (> 0, NaN; 0 when the PE does not drive), from the driver register's
        test and the read-stage RAM data's classes, registered beside them
        (``rd_*_q_cls``). The core resolves them with the data bits.
    row_in_cls, col_in_cls : In(2)
        Only with ``cfg.rx_stage``: :func:`~pe.fp_common.class_bits` of ``row_in`` /
        ``col_in`` (the bus's resolved class bits): the move unit's bus classes load them,
        so no 16-bit test follows a bus.
    ev : Out(EVENT_LAYOUT)
        Event strobes of this cycle.
    dsp_ce : In(1), init 1
        The enable this PE runs under (the core wraps it in ``EnableInserter``; 1 if it
        always runs), for the registers inside vendor blocks, which ``EnableInserter``
        does not reach: elaborated for an ECP5 platform, the multiplier is a MULT18X18D
        with its own registers (:func:`~pe.fp_mul.mul_dsp`), clock-enabled by this.

    Notes
    -----
    Cycle behaviour of a micro-op on ``uop`` at cycle ``t``:

    * ``t`` (issue): predicate evaluated; SRAM read addresses ``AR[ar] + off`` presented
      to the synchronous read ports (``en`` = ``ra.en`` and the read gate); write
      addresses computed and registered; AR/stride updates at the end of ``t``.
    * ``t+1`` (operand stage, a register holds the micro-op): sources are read (RF, read
      data of ``t``, buses, constants); bus drivers drive; the move unit writes
      ``RF[mv.dst]``, SRAM writes of ``src`` happen at the end of ``t+1``; FMA ``a``,
      ``b`` enter the multiplier; a non-RF ``c`` is captured.
    * ``t+1+mul_latency``: the product reaches the adder; an RF ``c`` is read now.
    * ``t+1+mul_latency+add_latency``: the sum is written to ``RF[fpu.dst]`` (the FMA
      wins over a move-unit write to the same register, raising ``ev.rf_conflict``).

    Latency: an FMA result is in the RF from cycle ``t + fpu_latency``
    (``fpu_latency = 2 + mul_latency + add_latency``), so micro-ops issued at
    ``t + fpu_latency - 1`` or later read it (they read sources in their operand stage);
    an accumulation ``c`` is read late, so a MAC chain needs an issue distance of only
    ``add_latency + 1``. A move result is read by the micro-op issued at ``t+1``, an SRAM
    write by a read issued at ``t+2``. Nothing stalls.

    With ``cfg.exec_stage`` every value read in the operand stage (bus values included) is
    registered, and the move unit, the SRAM writes and the multiplier act at ``t+2``
    (FMA write-back one cycle later, ``fpu_latency`` one larger). A move bypass (the move
    result, or the FMA's in a conflict, to the next micro-op's RF reads; selects decided at
    issue) and an SRAM bypass (an operand write's word to a read of its address issued in
    its landing cycle; compared at issue) keep the move and SRAM distances above
    (``docs/architecture.md``, "The execute stage").

    With ``cfg.bus_stage`` as well, a bus stage sits between the operand and execute
    stages: driven values are registered at the driver and cross the bus at ``t+2`` into
    the receivers' execute-stage registers, every other source value waits a cycle in a
    register, and the move unit, SRAM writes and the multiplier act at ``t+3``
    (``fpu_latency`` one larger again). The move bypass then has two points (the move
    executing in the reader's operand stage, and the one executing in its bus stage), as
    has the SRAM bypass (the operand writes landing in the read's cycle and in the next);
    a driven value sees only the first move (``cfg.mv_drive_distance`` = 2).

    With ``cfg.read_stage`` as well, each bank's read data are registered after the block
    RAM (``rd_*_q``) and join the sources in the bus stage (the bypass decided in the
    operand stage, its word there); a bus driver's bypass word is folded into its
    register, and its RAM data are ORed onto ``row_out`` / ``col_out`` from ``rd_*_q``
    unless the bypass hit. Same cycle behaviour; only ``row_op`` / ``col_op``
    still take the RAM data in the operand stage.

    With ``cfg.rx_stage`` as well, ``row_in`` / ``col_in`` are registered as they come off
    the buses (``rx_row`` / ``rx_col``) and join the sources in a receive stage at ``t+3``;
    every other source value is registered once more, the move bypass has a third point
    (the move executing in the reader's receive stage), and the move unit, SRAM writes and
    the multiplier act at ``t+4`` (``fpu_latency`` one larger again). The move unit
    computes its result in the receive stage, into a register (``mv_val``); the classes of
    its operands (> 0, NaN) come from flip-flops loaded with the class of each value an
    operand is selected from (the bus-stage value, the buses, the adder's result, its own
    result), not from a reduction after the select; the buses' classes come with them
    (``row_in_cls`` / ``col_in_cls``), from the drivers (``row_out_cls`` /
    ``col_out_cls``). A driven value sees only the first move point
    (``cfg.mv_drive_distance`` = 3) and the SRAM bypass keeps its two points, the writes
    landing in the read's cycle and the next (``cfg.sram_read_distance`` = 3).

    Implementation: SRAM banks are :class:`~amaranth.lib.memory.Memory` with one
    non-transparent synchronous read port with enable and one write port (block RAM);
    the register file is two 16-word LUT-RAM banks (one per write port: move unit, FMA
    write-back) with asynchronous read ports, a live-value table and a written bit per
    register in flip-flops (reset to 0, so unwritten registers read +0); ARs and strides
    are flip-flops (an AR's update, ``AR + imm + stride`` as the micro-op selects, is one
    carry-save step and one carry chain); each source operand is an AND-OR of the live
    values under one-hot selects decoded at issue (flip-flops beside the operand-stage
    register); the FMA is a :class:`~pe.fp_mul.FPMul` feeding a
    :class:`~pe.fp_add.FPAdd`, with shift registers carrying ``valid``/``dst``/``c``
    alongside the multiplier and ``valid``/``dst``
    alongside the adder. With ``cfg.exec_stage`` the late ``c`` is read one cycle early
    into a register, that cycle's RF writes bypassed in (same value, same cycle), so the
    adder's inputs all come from flip-flops, and the move unit writes bank M a cycle
    late from registers, a read in between taking the registered word (same values);
    each operand's register-file term is then one select per bank, decided at issue from
    the tags as that cycle's FMA write-back leaves them. A core freezes a PE through
    :meth:`frozen`.
    """

    def __init__(self, cfg, row: int, col: int, *, issue_in: bool = False):
        if not (0 <= row < cfg.nr and 0 <= col < cfg.nr):
            raise ValueError(f"PE coordinates ({row}, {col}) outside a {cfg.nr}x{cfg.nr} core")
        self.cfg = cfg
        self.row = row
        self.col = col
        self.issue_in = issue_in
        self._rf_m_domain = "sync"      # bank M's write port (see frozen())
        w = cfg.fmt.width
        super().__init__({
            **({"issue": In(ISSUE_LAYOUT)} if issue_in else {}),
            "uop": In(uop_layout(cfg.addr_bits, cfg.sel_bits)),
            "row_in": In(w),
            "col_in": In(w),
            "row_out": Out(w),
            "col_out": Out(w),
            "row_oe": Out(1),
            "col_oe": Out(1),
            "row_op": Out(w),
            "col_op": Out(w),
            **({"row_rx": Out(w), "col_rx": Out(w),
                "row_in_cls": In(CLASS_BITS), "col_in_cls": In(CLASS_BITS),
                "row_out_cls": Out(CLASS_BITS), "col_out_cls": Out(CLASS_BITS)} if cfg.rx_stage else {}),
            "ev": Out(EVENT_LAYOUT),
            "dsp_ce": In(1, init=1),
        })

    #: The domain of bank M's write port while :meth:`frozen` applies the enable.
    UNFROZEN = "pe_unfrozen"

    def frozen(self, enable):
        """This PE under the clock enable ``enable`` (low: the PE holds its state, as
        in the bubble after a stall); add what this returns instead of the PE.

        ``EnableInserter(enable)`` over the whole PE, except that with
        ``cfg.exec_stage`` the register file's bank M (the move unit's, written a
        cycle late from the ``mvq_*`` registers) is written in every cycle, frozen or
        not. Same values, same reads: its write port's address, data and enable are
        flip-flops, which hold through the freeze, so a frozen cycle writes the word
        that the next cycle writes again; and a read of that register in the next
        cycle takes ``mvq_val`` through the bypass (``hitq``, ``c_pre_wq``), never the
        bank. So the freeze (one flip-flop, the clock enable of every PE register) is
        not a gate in front of the LUT RAMs' write enables (such a gate is a 4 x 4
        build's critical path on some seeds, docs/fpga.md, "Timing"). Bank F stays
        frozen: a read of an FMA write-back's register in its write cycle has no bypass
        (it returns the old word), so an early write would change it
        (``tests/test_core.py::test_core_freeze_holds_units_in_flight`` fails then).
        """
        ei = EnableInserter(enable)(self)
        if not self.cfg.exec_stage:
            return ei
        self._rf_m_domain = self.UNFROZEN
        return DomainRenamer({self.UNFROZEN: "sync"})(ei)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        fmt = cfg.fmt
        w = fmt.width
        ab = cfg.addr_bits
        n_regs = cfg.n_regs
        n_ar = cfg.n_ar
        u = self.uop

        # ---- state ------------------------------------------------------------------
        # Register file: two 16-word banks in LUT RAM, one per write port (M: move unit,
        # F: FMA write-back), each replicated per read port by the synthesis tool, and a
        # live-value table saying which bank holds each register's latest value, plus a
        # written bit per register so that reads return +0 until the first write after
        # reset (flip-flops, reset to 0). Same behaviour as n_regs flip-flop words with
        # nine read ports, at a fraction of the area (docs/fpga.md).
        m.submodules.rf_m = rf_m = Memory(shape=unsigned(w), depth=16, init=[])
        m.submodules.rf_f = rf_f = Memory(shape=unsigned(w), depth=16, init=[])
        rf_wm = rf_m.write_port(domain=self._rf_m_domain)    # (see frozen())
        rf_wf = rf_f.write_port()
        rf_lvt = Signal(16, name="rf_lvt")      # 1: bank F holds RF[i]
        rf_written = Signal(16, name="rf_written")
        rf_tags = Cat(*(Cat(rf_written[i], rf_lvt[i]) for i in range(16)))

        def rf_read(idx, name, tag=None):
            """RF[idx] (idx: 4 bits) read asynchronously; +0 for unwritten/absent registers.
            ``tag``: the word's (written, in bank F) bits, if given (else read here)."""
            pm = rf_m.read_port(domain="comb")
            pf = rf_f.read_port(domain="comb")
            if tag is None:
                tag = Signal(2, name=f"{name}_tag")
                m.d.comb += tag.eq(rf_tags.word_select(idx, 2))
            v = Signal(w, name=f"{name}_rf")
            m.d.comb += [pm.addr.eq(idx), pf.addr.eq(idx),
                         v.eq(Mux(tag[0], Mux(tag[1], pf.data, pm.data), 0))]
            return v
        ar = [Signal(ab, name=f"ar{i}") for i in range(n_ar)]
        stride = [Signal(ab, name=f"stride{i}") for i in range(n_ar)]

        m.submodules.mem_a = mem_a = Memory(shape=unsigned(w), depth=cfg.mem_a_words, init=[])
        m.submodules.mem_b = mem_b = Memory(shape=unsigned(w), depth=cfg.mem_b_words, init=[])
        rd_a = mem_a.read_port(transparent_for=())
        rd_b = mem_b.read_port(transparent_for=())
        wr_a = mem_a.write_port()
        wr_b = mem_b.write_port()

        # ---- issue stage (cycle t) ------------------------------------------------------
        # The predicate, the bus-driver selection, the SRAM read enables and the AR
        # update selects: decoded here from the micro-op, or (``issue_in``) decoded by the
        # core one cycle earlier, from the micro-op the distribution register loads, into
        # flip-flops beside it.
        if self.issue_in:
            dec = self.issue
        else:
            dec = Signal(ISSUE_LAYOUT, name="issue_dec")
            m.d.comb += dec.eq(issue_decode(m, cfg, self.row, self.col, u))
        pred, rsel, csel = dec.pred, dec.rsel, dec.csel

        def ar_value(idx):
            """AR[idx] before this micro-op's updates; nonexistent ARs read 0."""
            v = Signal(ab)
            with m.Switch(idx):
                for i in range(n_ar):
                    with m.Case(i):
                        m.d.comb += v.eq(ar[i])
            return v

        # synchronous reads: address = (AR + off) mod depth (assignment truncates)
        m.d.comb += [
            rd_a.addr.eq(ar_value(u.ra.ar) + u.ra.off),
            rd_a.en.eq(dec.ra_en),
            rd_b.addr.eq(ar_value(u.rb.ar) + u.rb.off),
            rd_b.en.eq(dec.rb_en),
        ]

        # AR / stride updates at the end of t (predicated): AR + (imm if ADD) + (stride if
        # a port increments it), modulo 2**addr_bits, as one carry-save step (sum and
        # carry bits, one LUT level) and one carry chain instead of two chained adders
        with m.If(pred):
            for i in range(n_ar):
                x = ar[i]
                y = Mux(dec.ar_add[i], u.ar.imm, 0)[:ab]
                z = Mux(dec.ar_inc[i], stride[i], 0)
                cs_sum = x ^ y ^ z
                cs_carry = Cat(Const(0, 1), ((x & y) | (x & z) | (y & z))[:ab - 1])
                with m.If(dec.ar_set[i]):
                    m.d.sync += ar[i].eq(u.ar.imm)
                with m.Else():
                    m.d.sync += ar[i].eq(cs_sum + cs_carry)
                with m.If(dec.ar_stride[i]):
                    m.d.sync += stride[i].eq(u.ar.imm)

        # ---- operand stage register ------------------------------------------------------
        s1 = Signal(uop_layout(cfg.addr_bits, cfg.sel_bits))
        s1_pred = Signal()
        s1_rsel = Signal()
        s1_csel = Signal()
        s1_wa_addr = Signal.like(wr_a.addr)
        s1_wb_addr = Signal.like(wr_b.addr)
        s1_ra_addr = Signal.like(rd_a.addr)   # FMA write-back address (fpu.wb = MEMA)
        s1_rb_addr = Signal.like(rd_b.addr)
        m.d.sync += [
            s1_ra_addr.eq(rd_a.addr),
            s1_rb_addr.eq(rd_b.addr),
            s1.eq(u),
            s1_pred.eq(pred),
            s1_rsel.eq(rsel),
            s1_csel.eq(csel),
            s1_wa_addr.eq(ar_value(u.wa.ar) + u.wa.off),
            s1_wb_addr.eq(ar_value(u.wb.ar) + u.wb.off),
        ]

        # ---- operand stage (cycle t+1) -----------------------------------------------------
        consts = {Src.NZERO: fmt.neg_zero, Src.ONE: fmt.one}   # (+0 is the OR of nothing)
        # A block-RAM read port's output register has no reset value; until its first read
        # after reset it reads as 0, as the spec (and the model) say.
        rd_a_seen = Signal()
        rd_b_seen = Signal()
        with m.If(rd_a.en):
            m.d.sync += rd_a_seen.eq(1)
        with m.If(rd_b.en):
            m.d.sync += rd_b_seen.eq(1)

        # Source operands: the kind of each source is decoded at issue into one-hot select
        # flip-flops (beside s1), so in the operand stage a source is an AND-OR of the few
        # live values: SRAM read data (if read since reset), buses, the RF read (async
        # LUT RAM at the s1 code) and constants. This keeps the operand stage, whose paths
        # run SRAM read -> row/column bus -> other PEs -> RF / SRAM / multiplier, two to
        # three LUT levels shorter than a mux tree on the s1 code (docs/fpga.md, "Timing").
        # The selects of gated readers (bus drivers) fold in the driver select. The
        # flip-flops hold f(s1, rd_*_seen) at all times (same enable, reset to f(NOP, 0)),
        # so the cycle behaviour is that of the mux on s1.
        rd_a_seen_op = rd_a_seen | rd_a.en     # rd_*_seen as it is in the operand stage
        rd_b_seen_op = rd_b_seen | rd_b.en

        # SRAM bypass (execute stage only): a read issued in the cycle in which the
        # operand-stage write of the micro-op in its execute stage lands on the same
        # address returns the written word (not an FMA write-back's), so an SRAM write is
        # seen by the read issued 2 later as without the stage. The writes in flight at
        # the read's issue are compared with it at issue, and the hits registered with it
        # and selected in the operand stage; held with the read port when no read is made.
        # With the bus stage a second write is in flight: the one landing in the cycle
        # after the read's (in its bus stage at the read's issue), younger, so it wins.
        rd_a_data = Signal(w)
        rd_b_data = Signal(w)
        byp_hit = {nm: Signal(name=f"byp_{nm}_hit") for nm in "ab"}     # a write bypasses the RAM
        byp_word = {nm: Signal(w, name=f"byp_{nm}_word") for nm in "ab"}  # ... with this word

        def byp_entry(wr):
            return {"go": Signal(), "addr": Signal.like(wr.addr), "wbk": Signal()}
        # the execute-stage write words ("val") are those of the first entries
        byp_a, byp_b = ({**byp_entry(wr), "val": Signal(w), "wbk_addr": Signal.like(wr.addr)} for wr in (wr_a, wr_b))
        byp_a2, byp_b2 = byp_entry(wr_a), byp_entry(wr_b)   # bus stage only
        # FPGA timing: the read address is compared with the write addresses in flight at
        # issue (the write addresses come from registers; the read address from the AR
        # and the offset, as for the block RAM) two bits at a time, one LUT after the
        # address adder, and those pair compares are registered with the read; their AND
        # in the operand stage (two LUT levels, beside the block RAM's clock-to-output)
        # is the hit. Comparing whole addresses at issue would put the adder and the
        # compare's three levels in one cycle (a 4 x 4 core's critical path, docs/fpga.md,
        # "Timing"); comparing in the operand stage would put them all beside the RAM's
        # output. The bus-stage write's word is
        # taken in the operand stage, from the execute-stage write word (the same word,
        # one cycle later), and kept in the bypass register after that cycle.
        if cfg.exec_stage:
            for rd, byps, data, nm in ((rd_a, (byp_a, byp_a2), rd_a_data, "a"),
                                       (rd_b, (byp_b, byp_b2), rd_b_data, "b")):
                byps = byps[:1 + cfg.bus_stage]
                hits = [Signal(name=f"byp_{nm}_hit{k}") for k in range(len(byps))]
                val = Signal(w, name=f"byp_{nm}_val")

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
                hit, word = byp_hit[nm], byp_word[nm]
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
        else:
            m.d.comb += [rd_a_data.eq(rd_a.data), rd_b_data.eq(rd_b.data)]
        # With the read stage the block RAM's data are registered as they are (next to
        # the RAM: rd_q) and join a source in the bus stage. The bypass is decided in the
        # operand stage from flip-flops (byp_hit / byp_word) and registered beside rd_q
        # (byp_*_hit_q / byp_*_word_q), so in the bus stage each bank has one value,
        # ``rd_eff`` = the bypass word on a hit, else the RAM data, shared by every source
        # that reads the bank: the hit reaches no source's operand-stage AND-OR, and each
        # source has one term per bank, not two. The bus-stage value is the
        # operand-stage value registered (a pure retiming).
        # With the receive stage the RAM data's classes (class_bits) are registered beside
        # rd_q (rd_*_q_cls), for the bus drivers' class bits (row_out_cls / col_out_cls).
        rd_q = {}
        rd_q_cls = {}
        rd_eff = {}
        if cfg.read_stage:
            for rd, nm in ((rd_a, "a"), (rd_b, "b")):
                rd_q[nm] = Signal(w, name=f"rd_{nm}_q")
                hit_q = Signal(name=f"byp_{nm}_hit_q")
                word_q = Signal(w, name=f"byp_{nm}_word_q")
                rd_eff[nm] = Signal(w, name=f"rd_{nm}_eff")
                m.d.sync += [rd_q[nm].eq(rd.data), hit_q.eq(byp_hit[nm]), word_q.eq(byp_word[nm])]
                m.d.comb += rd_eff[nm].eq(Mux(hit_q, word_q, rd_q[nm]))
                if cfg.rx_stage:
                    rd_q_cls[nm] = Signal(CLASS_BITS, name=f"rd_{nm}_q_cls")
                    m.d.sync += rd_q_cls[nm].eq(class_bits(fmt, rd.data))

        # Register-file bypass (execute stage only): an operand-stage read of a register
        # that the move unit (micro-op in its execute stage) writes in the same cycle
        # returns the move's result (the FMA's, if the FMA write-back writes the register
        # in that cycle too: what the register holds afterwards), so a move result is
        # read by the next micro-op as without the stage. FMA results are not bypassed
        # (their distance is fpu_latency). Decided at issue from the micro-op now in its
        # operand stage (next cycle's move) and the adder's second-to-last stage.
        mv_val = Signal(w)              # the move unit's result (execute stage)
        fma_out = Signal(w)             # the adder's result (FMA write-back)
        fma_out_next = Signal(w)        # ... and its value in the next cycle (add.o_next)
        fma_next_pos = Signal()         # ... which is > 0 (add.o_next_pos)
        fma_next_nan = Signal()         # ... which is a NaN (add.o_next_nan)
        mv_rd = Signal()                # the operand-stage micro-op moves
        m.d.comb += mv_rd.eq((s1.mv.op != MvOp.NOP) & s1_pred)
        nxt_mv = Signal()               # a move executes next cycle ...
        nxt_mv_dst = Signal(4)          # ... into this register
        nxt_wb = Signal()               # an FMA writes the RF next cycle ...
        nxt_wb_dst = Signal(4)
        # The value a bypassed read returns, one per PE (not per source): the move's
        # result, or the FMA's when the FMA write-back writes the move's register in the
        # same cycle (a hit means the register read is the move's destination, so the
        # conflict does not depend on the source; decided at issue like the selects).
        byp_val = Signal(w)
        # FPGA timing: the move unit's result reaches the register file a cycle late, from
        # a register (``mvq_*``), so the move unit's logic does not end in the LUT RAMs'
        # write data. The live-value table and the written bits are updated in the move's
        # cycle as before, and a read in the next cycle of the register it writes takes the
        # registered word (a third bypass term, decided at issue from the move executing
        # then), so every read returns what it did with the write in the move's cycle.
        # A move whose register the FMA write-back writes in the same cycle (the FMA wins)
        # is not registered: bank F holds that register's value.
        cur_mv = Signal(name="cur_mv")  # a move executes now, its write not overridden ...
        cur_mv_dst = Signal(4)          # ... into this register
        cur_wb = Signal()               # the FMA writes the RF now ...
        cur_wb_dst = Signal(4)          # ... into this register
        mvq_go = Signal(name="mvq_go")  # ... registered: bank M's write this cycle
        mvq_dst = Signal(4, name="mvq_dst")
        mvq_val = Signal(w, name="mvq_val")
        if cfg.exec_stage:
            m.d.sync += [mvq_go.eq(cur_mv), mvq_dst.eq(cur_mv_dst), mvq_val.eq(mv_val)]
            # next cycle's FMA write-back writes next cycle's move's register (the FMA wins)
            byp_fma_next = nxt_mv & nxt_wb & (nxt_wb_dst == nxt_mv_dst)
            byp_fma = Signal(name="byp_fma")
            m.d.sync += byp_fma.eq(byp_fma_next)
            m.d.comb += byp_val.eq(Mux(byp_fma, fma_out, mv_val))
            # FPGA timing: ``cur_mv`` (the move's write not overridden by the FMA's) is a
            # flip-flop loaded with next cycle's value, as byp_fma is: the move and the
            # FMA write-back of next cycle are known now (their stages advance together,
            # under the PE's one enable), so the register-file selects decided at issue
            # start at flip-flops, not at the adder's write-back decode and the conflict
            # compare (8 connections deep on the 4 x 4 core).
            m.d.sync += cur_mv.eq(nxt_mv & ~byp_fma_next)

        def source(field, *, regs=True, buses=True, gate=None, name, late=None):
            """Value of source ``field(uop)`` in the operand stage; unlisted codes read +0.

            ``gate`` (issue-stage signal): the value is +0 unless it was high at issue.
            ``late`` (a list; ``cfg.read_stage``): the SRAM banks are left out of the
            value and ``(select, bank)`` is appended for each bank instead, ``select`` an
            operand-stage signal: the source reads that bank (its bypass word on a hit,
            else its RAM data). The value ORed with the selected bank is the source's
            value."""
            code_i, code_o = field(u), field(s1)
            mems = (("a", Src.MEMA, rd_a_seen_op, rd_a_data), ("b", Src.MEMB, rd_b_seen_op, rd_b_data))
            live = []
            for nm, code_, seen, data_ in mems:
                live += [(code_i == code_) & seen, nm if late is not None else data_]
            if buses:
                live += [code_i == Src.ROW, self.row_in, code_i == Src.COL, self.col_in]
            for code_, value in consts.items():
                live += [code_i == code_, Const(value, w)]
            if regs and cfg.exec_stage:
                idx = code_i[:4]
                reg = ~code_i[4] & (idx < n_regs)
                hit = reg & nxt_mv & (nxt_mv_dst == idx)
                # the move executing now writes bank M at the end of the operand stage
                hitq = reg & ~hit & cur_mv & (cur_mv_dst == idx)
                # The register file, one select per bank: the word's tags as this cycle's
                # writes leave them, which is what they are in the read's cycle (a frozen
                # cycle holds both). A move into the register now is read through hitq,
                # so only the FMA write-back's tags count. After the LUT RAM only an AND
                # with a flip-flop is left, no tag select (a 16:1 multiplexer of the
                # written bits and the live-value table in front of every read would be
                # among the 4 x 4 build's critical paths, docs/fpga.md, "Timing").
                rf = reg & ~hit & ~hitq
                tag = Mux(cur_wb & (cur_wb_dst == idx), 0b11, rf_tags.word_select(idx, 2))
                live += [hit, byp_val, hitq, mvq_val,
                         rf & tag[0] & tag[1], rf_f, rf & tag[0] & ~tag[1], rf_m]
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
                    value = rf_read(code_o[:4], name)
                elif isinstance(value, Memory):  # a register-file bank: its word
                    port = value.read_port(domain="comb")
                    m.d.comb += port.addr.eq(code_o[:4])
                    value = port.data
                terms.append(Mux(sel, value, 0))
            v = Signal(w, name=name)
            m.d.comb += v.eq(reduce(lambda x, y: x | y, terms))
            return v

        def late_regs(late, name, values=rd_eff, tag="bus", classes=None):
            """The read-stage selects of ``late`` (from :func:`source`) registered into the
            bus stage: the SRAM term there, an OR of each bank's ``values`` (``rd_eff``, or
            a bus driver's ``rd_q``) under them. With ``classes`` (each bank's class
            bits, ``rd_q_cls``): ``(term, the OR of the classes under the same selects)``."""
            out, out_cls = [], []
            for sel, nm in late:
                r = Signal(name=f"{name}_mem{nm}_{tag}")
                m.d.sync += r.eq(sel)
                out.append(Mux(r, values[nm], 0))
                if classes is not None:
                    out_cls.append(Mux(r, classes[nm], 0))
            term = reduce(lambda x, y: x | y, out, Const(0, w))
            if classes is None:
                return term
            return term, reduce(lambda x, y: x | y, out_cls, Const(0, CLASS_BITS))

        def names_reg(code):
            return ~code[4]  # codes 0..15 name RF[code]

        # bus drivers (independent of the predicate); no bus forwarding. With the bus
        # stage the driven value and the enable are registered here, at the driver, and
        # the bus carries them in the next cycle (flip-flop -> bus -> receiver register).
        # With the read stage a driver's registered RAM data are ORed in after its
        # register (in the bus stage; a bypass word is in the register); row_op / col_op,
        # the operand-stage value, take them from the RAM's output and the bypass (a
        # chip's ring and scratchpad lanes sample it).
        # With the receive stage each driver also drives its value's class bits
        # (row_out_cls / col_out_cls): the test of its register, ORed with the registered
        # RAM data's classes under the same selects as the data (one of the two is +0,
        # whose classes are 0), so a receiver's bus classes need no test after the bus.
        drive = m.d.sync if cfg.bus_stage else m.d.comb
        drive += [self.row_oe.eq(s1_rsel), self.col_oe.eq(s1_csel)]
        out_cls = {"rdrv": self.row_out_cls, "cdrv": self.col_out_cls} if cfg.rx_stage else {}
        for fld, gate, op, out, nm in (("rdrv", rsel, self.row_op, self.row_out, "rdrv_val"),
                                       ("cdrv", csel, self.col_op, self.col_out, "cdrv_val")):
            if cfg.read_stage:
                # The bypass word (from flip-flops, operand stage) is folded into the
                # driver register; after it only the registered RAM data are ORed in,
                # under a select that is off on a bypass hit, so the bus starts two LUT
                # inputs per bank after the flip-flops, not through rd_eff's mux.
                late = []
                val = source(lambda x: x[fld].src, buses=False, gate=gate, name=nm, late=late)
                reg = Signal(w, name=f"{nm}_reg")
                m.d.sync += reg.eq(reduce(lambda x, y: x | y,
                                          [Mux(sel & byp_hit[b], byp_word[b], 0) for sel, b in late], val))
                ram_sel = [(sel & ~byp_hit[b], b) for sel, b in late]
                if fld in out_cls:
                    ram, ram_cls = late_regs(ram_sel, nm, rd_q, "ram", classes=rd_q_cls)
                    m.d.comb += out_cls[fld].eq(class_bits(fmt, reg) | ram_cls)
                else:
                    ram = late_regs(ram_sel, nm, rd_q, "ram")
                raw = {"a": rd_a_data, "b": rd_b_data}     # the bypass word on a hit
                m.d.comb += [
                    op.eq(reduce(lambda x, y: x | y, [Mux(sel, raw[b], 0) for sel, b in late], val)),
                    out.eq(reg | ram),
                ]
            else:
                val = source(lambda x: x[fld].src, buses=False, gate=gate, name=nm)
                m.d.comb += op.eq(val)
                drive += out.eq(val)
                if fld in out_cls:      # out is a register (the bus stage)
                    m.d.comb += out_cls[fld].eq(class_bits(fmt, out))

        # ---- execute stage ------------------------------------------------------------
        # Without cfg.exec_stage it is the operand stage itself. With it, everything the
        # micro-op read (bus values included) and everything decided at its issue is
        # registered here, and the move unit, the SRAM writes and the multiplier act one
        # cycle later, so no path runs from a source through a bus or the move unit into
        # a register file, SRAM or the multiplier in one cycle.
        stage_tags = {0: (), 1: ("x",), 2: ("b", "x"), 3: ("b", "r", "x")}[cfg.exec_delay]

        def pipe(v, name):
            """``v`` registered once per stage between the operand and execute stages:
            ``[bus-stage value, execute-stage value]`` with the bus stage (and the
            receive-stage value between them with the receive stage), ``[execute-stage
            value]`` with the execute stage alone, ``[]`` without."""
            out = []
            for k in range(cfg.exec_delay):
                r = Signal(v.shape(), name=f"{stage_tags[k]}_{name}")
                m.d.sync += r.eq(v)
                out.append(r)
                v = r
            return out

        def ex(v, name):
            """``v`` as the execute stage sees it (registered with an execute stage)."""
            return pipe(v, name)[-1] if cfg.exec_delay else v

        # With the receive stage each PE registers its row and column buses as they come
        # off them, and those flip-flops join the source values one cycle later.
        if cfg.rx_stage:
            rx_row = Signal(w, name="rx_row")
            rx_col = Signal(w, name="rx_col")
            m.d.sync += [rx_row.eq(self.row_in), rx_col.eq(self.col_in)]
            m.d.comb += [self.row_rx.eq(rx_row), self.col_rx.eq(rx_col)]
            bus_vals = {"row": rx_row, "col": rx_col}
        else:
            bus_vals = {"row": self.row_in, "col": self.col_in}

        def xsrc(field, *, regs=True, name, pre=False, byp_rx=None, buses=None, parts=None):
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
            if not cfg.bus_stage:
                return ex(source(field, regs=regs, name=name), name)
            code_i = field(u)
            late = [] if cfg.read_stage else None
            v = source(field, regs=regs, buses=False, name=name, late=late)
            conds = {"row": code_i == Src.ROW, "col": code_i == Src.COL}
            if regs:
                def moves_into(go, dst):
                    """The source is the register the move (``go``, ``dst``) writes."""
                    return ~code_i[4] & (code_i[:4] < n_regs) & go & (dst == code_i[:4])
                # the move issued just before the reader (in its operand stage now); with
                # the receive stage that is the receive stage's point, and the bus
                # stage's is the move issued two before (in its bus stage now)
                conds["hit_rx" if cfg.rx_stage else "hit"] = moves_into(mv_rd, s1.mv.dst)
                if cfg.rx_stage:
                    conds["hit"] = moves_into(mv_go_st[0], mv_dst_st[0])
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
            b = Signal(w, name=f"b_{name}")
            m.d.sync += b.eq(v)
            bv = Signal(w, name=f"bus_{name}")
            held = Mux(sel["hit"], byp_val, b) if regs else b
            mem = late_regs(late, name) if cfg.read_stage else 0
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
            bus = bus_vals if buses is None else buses
            x_in = bv | Mux(sel["row"], bus["row"], 0) | Mux(sel["col"], bus["col"], 0)
            x = Signal(w, name=f"{'xin' if pre else 'x'}_{name}")
            if pre:
                m.d.comb += x.eq(x_in)
            else:
                m.d.sync += x.eq(x_in)
            return x

        # the move's enable and destination, one register per stage (the move bypass
        # points of xsrc and the RF bypass read them)
        mv_go_st = pipe(mv_rd, "mv_go")
        mv_dst_st = pipe(s1.mv.dst, "mv_dst")

        # SRAM writes at the end of the execute stage (read-during-write: the read port
        # sees old data)
        wa_rd = s1.wa.en & s1_pred      # the write's source is read (operand stage)
        wb_rd = s1.wb.en & s1_pred
        wa_val = xsrc(lambda x: x.wa.src, name="wa_val")
        wb_val = xsrc(lambda x: x.wb.src, name="wb_val")
        wa_st = pipe(wa_rd, "wa_go")
        wb_st = pipe(wb_rd, "wb_go")
        wa_ast = pipe(s1_wa_addr, "wa_addr")
        wb_ast = pipe(s1_wb_addr, "wb_addr")
        wa_go, wb_go = (wa_st[-1], wb_st[-1]) if cfg.exec_delay else (wa_rd, wb_rd)
        wa_addr, wb_addr = (wa_ast[-1], wb_ast[-1]) if cfg.exec_delay else (s1_wa_addr, s1_wb_addr)
        # (the FMA write-back into SRAM, below, overrides these in its cycle)

        # move unit (execute stage)
        nan_of, positive = partial(is_nan, fmt), partial(is_positive, fmt)

        mv_go = mv_go_st[-1] if cfg.exec_delay else mv_rd
        mv_dst = mv_dst_st[-1] if cfg.exec_delay else s1.mv.dst
        def move_fn(op, src, msk, out, classes=None):
            """``out`` = the move unit's result of ``op`` on ``src`` / ``msk`` (+0 for NOP);
            ``classes``: ``(positive(src), nan_of(src), positive(msk))`` if computed apart."""
            if classes is not None:
                # from the classes: keep the source, or make a quiet NaN (two flags, then
                # one LUT per bit with the source's bit)
                src_pos, src_nan, msk_pos = classes
                is_mov, is_relu, is_mask = op == MvOp.MOV, op == MvOp.RELU, op == MvOp.MASK
                keep, qnan = Signal(name="mv_keep", attrs={"keep": 1}), Signal(name="mv_qnan", attrs={"keep": 1})
                m.d.comb += [keep.eq(is_mov | (is_relu & src_pos) | (is_mask & msk_pos & ~src_nan)),
                             qnan.eq((is_relu | (is_mask & msk_pos)) & src_nan)]
                m.d.comb += out.eq(Mux(keep, src, 0) | Mux(qnan, fmt.qnan, 0))
                return
            src_pos, src_nan, msk_pos = positive(src), nan_of(src), positive(msk)
            with m.Switch(op):
                with m.Case(MvOp.MOV):
                    m.d.comb += out.eq(src)
                with m.Case(MvOp.RELU):
                    m.d.comb += out.eq(Mux(src_pos, src, Mux(src_nan, fmt.qnan, 0)))
                with m.Case(MvOp.MASK):
                    m.d.comb += out.eq(Mux(msk_pos, Mux(src_nan, fmt.qnan, src), 0))

        if cfg.rx_stage:
            # FPGA timing: the move unit works in the receive stage, on the values its
            # execute-stage registers would load, and its result is registered, so in the
            # execute stage mv_val (the move bypass's value at all three points, the
            # register-file write, the early `c` read) comes from flip-flops instead of the
            # move unit's logic. Same value in the same cycle.
            # The move unit's operands take the bypass of the receive stage's point (the
            # move issued just before) from a private copy of the bypass select, so the
            # move unit's loop (mv_val -> the bypass -> the operand -> the move -> mv_val)
            # does not run through the shared bypass net, which reaches every operand's
            # bypass points across the PE (docs/fpga.md, "Timing"). Same value:
            # the copy's select register loads what byp_fma loads (the build keeps the PE's
            # flip-flops apart, rtl.fpga.keep_pe_ffs).
            # The loop's other registers are private copies too: of the receive registers
            # (mv_rx_row / mv_rx_col), the adder's output register (mv_fma_out, loading
            # the adder's o_next) and mv_val itself (mv_val_loop). Each original drives
            # operands, bypass points and register-file banks across the PE, and its long
            # route to the move unit would set the clock. The copies load the same
            # values, so the move unit sees the same operands in the same cycles.
            byp_fma_mv = Signal(name="byp_fma_mv")
            m.d.sync += byp_fma_mv.eq(byp_fma_next)
            mv_fma_out = Signal(w, name="mv_fma_out")
            mv_val_loop = Signal(w, name="mv_val_loop")
            mv_buses = {"row": Signal(w, name="mv_rx_row"), "col": Signal(w, name="mv_rx_col")}
            m.d.sync += [mv_fma_out.eq(fma_out_next), mv_buses["row"].eq(self.row_in),
                         mv_buses["col"].eq(self.col_in)]
            byp_mv = Signal(w, name="byp_mv")
            m.d.comb += byp_mv.eq(Mux(byp_fma_mv, mv_fma_out, mv_val_loop))
            mv_fn = Signal(w, name="mv_fn")
            # FPGA timing: the move unit's operand classes (> 0, NaN) come from flip-flops
            # loaded beside each value the operand is selected from, with that value's
            # class: the bus-stage value (r_*), the receive registers (the buses' values
            # as they arrive), the adder's output copy (FPAdd's o_next class) and the move
            # unit's own result (its class from the operands' classes and the op). At most
            # one of the values ORed into an operand is nonzero (the source reads one of
            # them), so the operand's class is the same select of their classes, and no
            # 16-bit reduction (8 connections deep) follows the select.
            # The buses' classes come with them (row_in_cls / col_in_cls, from the
            # drivers), so these flip-flops load a bus bit each.
            fns = {"pos": positive, "nan": nan_of}
            bit = {"pos": CLS_POS, "nan": CLS_NAN}
            cls = {}
            for k in fns:
                for src_nm, val in (("row", self.row_in_cls), ("col", self.col_in_cls), ("fma", None), ("loop", None)):
                    cls[src_nm, k] = Signal(name=f"mv_{src_nm}_{k}")
                    if val is not None:
                        m.d.sync += cls[src_nm, k].eq(val[bit[k]])
                m.d.sync += cls["fma", k].eq(fma_next_pos if k == "pos" else fma_next_nan)
            # the class of the shared bypass value byp_val (the bus stage's point)
            byp_cls = {k: Mux(byp_fma, cls["fma", k], cls["loop", k]) for k in fns}
            src_p = {"fns": fns, "byp_cls": byp_cls}
            msk_p = {"fns": {"pos": positive}, "byp_cls": byp_cls}
            src_x = xsrc(lambda x: x.mv.src, name="mv_src", pre=True, byp_rx=byp_mv, buses=mv_buses, parts=src_p)
            msk_x = xsrc(lambda x: x.mv.msk, name="mv_msk", pre=True, byp_rx=byp_mv, buses=mv_buses, parts=msk_p)

            def cls_of(parts, k, name):
                c = Signal(name=f"{name}_{k}", attrs={"keep": 1})
                byp_c = Mux(byp_fma_mv, cls["fma", k], cls["loop", k])
                m.d.comb += c.eq(Mux(parts["hit_rx"], byp_c, parts["r_cls"][k])
                                 | (parts["row"] & cls["row", k]) | (parts["col"] & cls["col", k]))
                return c
            classes = (cls_of(src_p, "pos", "mv_src"), cls_of(src_p, "nan", "mv_src"), cls_of(msk_p, "pos", "mv_msk"))
            mv_op = pipe(s1.mv.op, "mv_op")[-2]
            move_fn(mv_op, src_x, msk_x, mv_fn, classes=classes)
            # the result's class: MOV and RELU keep the source's (a RELU of a NaN is a
            # NaN, of anything else not > 0 a zero), MASK the source's under a mask > 0
            res_on = Signal(name="mv_res_on")
            m.d.comb += res_on.eq((mv_op == MvOp.MOV) | (mv_op == MvOp.RELU) | ((mv_op == MvOp.MASK) & classes[2]))
            m.d.sync += [cls["loop", "pos"].eq(res_on & classes[0]), cls["loop", "nan"].eq(res_on & classes[1])]
            m.d.sync += [mv_val.eq(mv_fn), mv_val_loop.eq(mv_fn)]
        else:
            move_fn(ex(s1.mv.op, "mv_op"), xsrc(lambda x: x.mv.src, name="mv_src"),
                    xsrc(lambda x: x.mv.msk, name="mv_msk"), mv_val)

        # ---- FMA: multiplier with valid/dst/c shift registers, then the adder --------------
        m.submodules.mul = mul = FPMul(fmt, latency=cfg.mul_latency, dsp=mul_dsp(platform, fmt))
        if mul.dsp:
            m.d.comb += mul.ce.eq(self.dsp_ce)
        m.submodules.add = add = FPAdd(fmt, latency=cfg.add_latency)
        # the adder's output register in this module (add.o's value; add.o is unused and
        # synthesis drops its register), so that with the receive stage the move unit's
        # copy of it (mv_fma_out) stays apart: the build keeps a PE's flip-flops apart
        # but not its FP units', and merged a copy of add.o's own register back into it
        m.d.comb += [fma_out_next.eq(add.o_next), fma_next_pos.eq(add.o_next_pos),
                     fma_next_nan.eq(add.o_next_nan)]
        m.d.sync += fma_out.eq(fma_out_next)
        fma_rd = Signal()
        m.d.comb += fma_rd.eq(s1.fpu.en & s1_pred)
        fma_go = ex(fma_rd, "fma_go")
        m.d.comb += [
            mul.a.eq(xsrc(lambda x: x.fpu.a, name="fma_a")),
            mul.b.eq(xsrc(lambda x: x.fpu.b, name="fma_b")),
        ]
        L = cfg.mul_latency
        mp_valid = [Signal(name=f"mul_valid{i}") for i in range(L)]
        mp_dst = [Signal(4, name=f"mul_dst{i}") for i in range(L)]
        mp_crf = [Signal(name=f"mul_c_rf{i}") for i in range(L)]   # late-c select
        mp_c = [Signal(w, name=f"mul_c{i}") for i in range(L)]     # RF index or captured value
        mp_wb = [Signal(2, name=f"mul_wb{i}") for i in range(L)]   # FmaWb destination kind
        waddr_bits = max(len(s1_ra_addr), len(s1_rb_addr))
        mp_wa = [Signal(waddr_bits, name=f"mul_waddr{i}") for i in range(L)]
        if cfg.bus_stage:
            c_x = Mux(ex(names_reg(s1.fpu.c), "fma_c_isrf"), ex(s1.fpu.c, "fma_c_idx"),
                      xsrc(lambda x: x.fpu.c, regs=False, name="fma_c"))
        else:
            c_now = source(lambda x: x.fpu.c, regs=False, name="fma_c")
            c_x = ex(Mux(names_reg(s1.fpu.c), s1.fpu.c, c_now), "fma_c")
        m.d.sync += [
            mp_valid[0].eq(fma_go),
            mp_dst[0].eq(ex(s1.fpu.dst, "fma_dst")),
            mp_crf[0].eq(ex(names_reg(s1.fpu.c), "fma_c_rf")),
            mp_c[0].eq(c_x),
            mp_wb[0].eq(ex(s1.fpu.wb, "fma_wb")),
            mp_wa[0].eq(ex(Mux(s1.fpu.wb == FmaWb.MEMB, s1_rb_addr, s1_ra_addr), "fma_waddr")),
        ]
        for i in range(1, L):
            m.d.sync += [mp_valid[i].eq(mp_valid[i - 1]), mp_dst[i].eq(mp_dst[i - 1]),
                         mp_crf[i].eq(mp_crf[i - 1]), mp_c[i].eq(mp_c[i - 1]),
                         mp_wb[i].eq(mp_wb[i - 1]), mp_wa[i].eq(mp_wa[i - 1])]

        # late read of an RF `c` when the product reaches the adder
        c_late = Signal(w)
        m.d.comb += [add.a.eq(mul.o), add.b.eq(c_late)]

        A = cfg.add_latency
        ad_valid = [Signal(name=f"add_valid{j}") for j in range(A)]
        ad_dst = [Signal(4, name=f"add_dst{j}") for j in range(A)]
        ad_wb = [Signal(2, name=f"add_wb{j}") for j in range(A)]
        ad_wa = [Signal(waddr_bits, name=f"add_waddr{j}") for j in range(A)]
        m.d.sync += [ad_valid[0].eq(mp_valid[-1]), ad_dst[0].eq(mp_dst[-1]),
                     ad_wb[0].eq(mp_wb[-1]), ad_wa[0].eq(mp_wa[-1])]
        for j in range(1, A):
            m.d.sync += [ad_valid[j].eq(ad_valid[j - 1]), ad_dst[j].eq(ad_dst[j - 1]),
                         ad_wb[j].eq(ad_wb[j - 1]), ad_wa[j].eq(ad_wa[j - 1])]
        # FmaWb codes other than MEMA/MEMB write the register file
        fma_wb_mema = ad_valid[-1] & (ad_wb[-1] == FmaWb.MEMA)
        fma_wb_memb = ad_valid[-1] & (ad_wb[-1] == FmaWb.MEMB)
        fma_wb = ad_valid[-1] & ~fma_wb_mema & ~fma_wb_memb
        fma_wb_dst = ad_dst[-1]
        if cfg.exec_stage:
            assert A >= 2, "the RF bypass looks at the adder's second-to-last stage"
            m.d.comb += [
                # the write landing this cycle: its word is the bank's write data
                byp_a["go"].eq(wa_go), byp_a["addr"].eq(wa_addr), byp_a["val"].eq(wr_a.data),
                byp_a["wbk"].eq(fma_wb_mema), byp_a["wbk_addr"].eq(ad_wa[-1]),
                byp_b["go"].eq(wb_go), byp_b["addr"].eq(wb_addr), byp_b["val"].eq(wr_b.data),
                byp_b["wbk"].eq(fma_wb_memb), byp_b["wbk_addr"].eq(ad_wa[-1]),
                # the move executing next cycle: in the operand stage now, or with the bus
                # stage in the bus stage
                nxt_mv.eq(mv_go_st[-2] if cfg.exec_delay >= 2 else mv_rd),
                nxt_mv_dst.eq(mv_dst_st[-2] if cfg.exec_delay >= 2 else s1.mv.dst),
                nxt_wb.eq(ad_valid[-2] & (ad_wb[-2] != FmaWb.MEMA) & (ad_wb[-2] != FmaWb.MEMB)),
                nxt_wb_dst.eq(ad_dst[-2]),
                cur_wb.eq(fma_wb), cur_wb_dst.eq(fma_wb_dst),
            ]
        if cfg.bus_stage:
            # the operand writes in their bus stage land next cycle, unless the FMA
            # write-back into the same bank displaces them then; their word is the
            # execute-stage write word in the read's operand stage (above)
            m.d.comb += [
                byp_a2["go"].eq(wa_st[-2]), byp_a2["addr"].eq(wa_ast[-2]),
                byp_a2["wbk"].eq(ad_valid[-2] & (ad_wb[-2] == FmaWb.MEMA)),
                byp_b2["go"].eq(wb_st[-2]), byp_b2["addr"].eq(wb_ast[-2]),
                byp_b2["wbk"].eq(ad_valid[-2] & (ad_wb[-2] == FmaWb.MEMB)),
            ]

        if cfg.exec_stage:
            # FPGA timing: the late read is made one cycle early, from the stage before
            # the adder's, into a register, with this cycle's RF writes bypassed in (the
            # FMA write-back wins over the move, as in the register file), so the adder's
            # `c` comes from a flip-flop, not through the LUT RAM and the live-value table.
            # Same value in the same cycle as the read below.
            pre_crf, pre_c = mp_crf[-2], mp_c[-2]    # mul_latency >= 2
            idx = pre_c[:4]
            # The read's selects are flip-flops, decided a cycle earlier from the index
            # mp_c[-2] loads next (nxt_idx) and the writes of that cycle, each known a
            # cycle ahead (nxt_wb, nxt_mv, cur_mv); and the word's tags, as this cycle's
            # writes leave them. Only the RAMs' read and the value select are left after
            # the index register (the compares and the tags' 16:1 select there would be
            # a 4 x 4 build's critical path, docs/fpga.md, "Timing"). A
            # frozen cycle holds these with the registers they are decided from. They
            # are the selects the register file would give in that cycle:
            # * wf: the FMA write-back lands this cycle (it wins, as in the file);
            # * wm: the move executing this cycle (bank M a cycle late, mvq);
            # * wq: last cycle's move, written into bank M at this cycle's end;
            # registers >= n_regs are never written: +0.
            nxt_idx = (mp_c[-3] if L >= 3 else c_x)[:4]
            nxt_in = nxt_idx < n_regs
            sel_f, sel_m, sel_q = (Signal(name=f"c_pre_{k}") for k in ("wf", "wm", "wq"))
            tag_n = Signal(2, name="c_pre_tag")
            # (the tags after this cycle's FMA write-back; a move executing now is read
            # through sel_q next cycle, before the tag counts)
            w_f = fma_wb & (fma_wb_dst == nxt_idx) & nxt_in
            m.d.sync += [
                sel_f.eq(nxt_wb & (nxt_wb_dst == nxt_idx) & nxt_in),
                sel_m.eq(nxt_mv & (nxt_mv_dst == nxt_idx) & nxt_in),
                sel_q.eq(cur_mv & (cur_mv_dst == nxt_idx) & nxt_in),
                tag_n.eq(Mux(w_f, 0b11, rf_tags.word_select(nxt_idx, 2))),
            ]
            c_pre = Mux(sel_f, fma_out, Mux(sel_m, mv_val, Mux(sel_q, mvq_val, rf_read(idx, "c_pre", tag_n))))
            c_reg = Signal(w, name="c_late_reg")
            m.d.sync += c_reg.eq(Mux(pre_crf, c_pre, pre_c))
            m.d.comb += c_late.eq(c_reg)
        else:
            m.d.comb += c_late.eq(Mux(mp_crf[-1], rf_read(mp_c[-1][:4], "c_late"), mp_c[-1]))

        # ---- SRAM write ports: the FMA write-back wins over the operand-stage write ----
        m.d.comb += [
            wr_a.addr.eq(Mux(fma_wb_mema, ad_wa[-1], wa_addr)),
            wr_a.data.eq(Mux(fma_wb_mema, fma_out, wa_val)),
            wr_a.en.eq(wa_go | fma_wb_mema),
            wr_b.addr.eq(Mux(fma_wb_memb, ad_wa[-1], wb_addr)),
            wr_b.data.eq(Mux(fma_wb_memb, fma_out, wb_val)),
            wr_b.en.eq(wb_go | fma_wb_memb),
        ]

        # ---- register file writes: move unit first, the FMA write-back wins -------------------
        # (registers >= n_regs are never marked written, so they read +0)
        rf_conflict = Signal()      # the FMA write-back overrides this cycle's move
        m.d.comb += rf_conflict.eq(mv_go & fma_wb & (mv_dst == fma_wb_dst))
        if cfg.exec_stage:     # bank M a cycle late, from the mvq registers (above)
            m.d.comb += [cur_mv_dst.eq(mv_dst),     # cur_mv: a register (above)
                         rf_wm.addr.eq(mvq_dst), rf_wm.data.eq(mvq_val), rf_wm.en.eq(mvq_go)]
        else:
            m.d.comb += [rf_wm.addr.eq(mv_dst), rf_wm.data.eq(mv_val), rf_wm.en.eq(mv_go)]
        m.d.comb += [rf_wf.addr.eq(fma_wb_dst), rf_wf.data.eq(fma_out), rf_wf.en.eq(fma_wb)]
        for i in range(n_regs):
            with m.If(fma_wb & (fma_wb_dst == i)):
                m.d.sync += [rf_lvt[i].eq(1), rf_written[i].eq(1)]
            with m.Elif(mv_go & (mv_dst == i)):
                m.d.sync += [rf_lvt[i].eq(0), rf_written[i].eq(1)]

        # ---- events ------------------------------------------------------------------
        rf_reads = [     # operand stage, and the late `c` read
            fma_rd & names_reg(s1.fpu.a),
            fma_rd & names_reg(s1.fpu.b),
            mp_valid[-1] & mp_crf[-1],
            mv_rd & names_reg(s1.mv.src),
            mv_rd & (s1.mv.op == MvOp.MASK) & names_reg(s1.mv.msk),
            s1_rsel & names_reg(s1.rdrv.src),
            s1_csel & names_reg(s1.cdrv.src),
            wa_rd & names_reg(s1.wa.src),
            wb_rd & names_reg(s1.wb.src),
        ]
        ev = self.ev
        m.d.comb += [
            ev.fma.eq(fma_go),
            ev.mv.eq(mv_go),
            ev.mem_a_rd.eq(rd_a.en),
            ev.mem_b_rd.eq(rd_b.en),
            ev.mem_a_wr.eq(wa_go | fma_wb_mema),
            ev.mem_b_wr.eq(wb_go | fma_wb_memb),
            ev.mem_conflict.eq((wa_go & fma_wb_mema) | (wb_go & fma_wb_memb)),
            ev.rf_rd.eq(reduce(lambda x, y: x + y, [r.as_unsigned() for r in rf_reads])),
            ev.rf_wr.eq(mv_go.as_unsigned() + fma_wb.as_unsigned()),
            ev.row_drv.eq(s1_rsel),
            ev.col_drv.eq(s1_csel),
            ev.rf_conflict.eq(rf_conflict),
        ]
        return m
