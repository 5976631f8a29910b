"""The processing element (PE): FP MAC, register file, two SRAM banks, address registers.

Implements ``docs/architecture.md`` (sections "The PE", "The PE micro-operation",
"Pipeline timing and hazards", "Events"); :class:`pe.pe_model.PEModel` is the
cycle-accurate executable reference that the cocotb tests compare this RTL with, cycle
by cycle. The PE's sub-components (submodules) are :class:`pe.pe_sram.SramBanks` (the SRAM
banks, ``sram``), :class:`pe.pe_regfile.RegFile` (the register file, ``rf``),
:class:`pe.pe_move.MoveFn` (the move unit's datapath, ``mv``) and the FMA's
:class:`pe.fp_mul.FPMul` / :class:`pe.fp_add.FPAdd` (``mul`` / ``add``); the logic
between them is built into the PE's module by :mod:`pe.pe_issue` (issue stage, address
registers), :mod:`pe.pe_operands` (source operands, bus drivers and receivers),
:class:`pe.pe_sram.SramPaths` (SRAM bypass, operand writes, write selects),
:class:`pe.pe_regfile.RfReads` (register-file reads, bypass state), :mod:`pe.pe_move`
(the move's operands) and :mod:`pe.pe_fma` (the FMA's shift registers, late ``c`` read
and write-back decode).
"""

from __future__ import annotations

from functools import reduce

from amaranth.hdl import DomainRenamer, EnableInserter, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.microop import MvOp
from pe.fp_common import CLASS_BITS
from pe.layouts import EVENT_LAYOUT, uop_layout
from pe.pe_fma import fma_unit
from pe.pe_issue import AR_SLOTS, AddressRegs, issue_decode, issue_layout, issue_nop, issue_stage
from pe.pe_move import move_unit
from pe.pe_operands import Operands, names_reg
from pe.pe_regfile import RfReads, rf_bypass
from pe.pe_sram import SramBanks, SramPaths

__all__ = ["PE", "EVENT_LAYOUT", "issue_decode", "issue_layout", "issue_nop", "AR_SLOTS"]


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
    uop : In(uop_layout(*cfg.uop_key))
        Micro-op issued this cycle (all-zero = NOP).
    issue : In(issue_layout(cfg.uop_key[2]))
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
            **({"issue": In(issue_layout(cfg.uop_key[2]))} if issue_in else {}),
            "uop": In(uop_layout(*cfg.uop_key)),
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
        (``tests/rtl/test_core.py::test_core_freeze_holds_units_in_flight`` fails then).
        """
        ei = EnableInserter(enable)(self)
        if not self.cfg.exec_stage:
            return ei
        self._rf_m_domain = self.UNFROZEN
        return DomainRenamer({self.UNFROZEN: "sync"})(ei)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        # ---- state: register file, address registers, SRAM banks ------------------------
        rf = RfReads(cfg.fmt.width)         # the register file's reads (RegFile: rf.write)
        ars = AddressRegs(cfg)
        m.submodules.sram = banks = SramBanks(cfg)
        sram = SramPaths(cfg, banks)
        # ---- issue stage (cycle t) and the operand-stage register ------------------------
        st = issue_stage(m, cfg, self, ars, sram)
        # ---- operand stage (cycle t+1): read data, bypasses, sources, bus drivers --------
        sram.seen(m)
        sram.bypass(m)
        sram.read_stage(m)
        byp = rf_bypass(m, cfg, st)
        ops = Operands(m, cfg, self, st, sram, rf, byp)
        ops.drive_buses()
        # ---- execute stage (the operand stage without cfg.exec_stage) ----------------------
        # With cfg.exec_stage, everything the micro-op read (bus values included) and
        # everything decided at its issue is registered here, and the move unit, the SRAM
        # writes and the multiplier act one cycle later, so no path runs from a source
        # through a bus or the move unit into a register file, SRAM or the multiplier in
        # one cycle.
        ops.receive_buses()
        # the move's enable and destination, one register per stage (the move bypass
        # points of xsrc and the RF bypass read them)
        ops.mv_go_st = ops.pipe(byp.mv_rd, "mv_go")
        ops.mv_dst_st = ops.pipe(st.s1.mv.dst, "mv_dst")
        sram.operand_writes(ops, st)
        mv_go, mv_dst = move_unit(m, cfg, self, ops, byp)
        fma = fma_unit(m, cfg, platform, self, ops, sram, rf, byp)
        # ---- write-back: SRAM write ports, register file, events -------------------------
        sram.connect_writes(m, fma, byp.fma_out)
        # (bank M's domain: see frozen())
        rf_conflict = rf.write(m, cfg, self._rf_m_domain, byp, mv_go, mv_dst, fma.fma_wb, fma.fma_wb_dst)
        self._events(m, st, sram, byp, fma, mv_go, rf_conflict)
        return m

    def _events(self, m, st, sram, byp, fma, mv_go, rf_conflict):
        """Drive ``ev``, this cycle's event strobes (combinational): register-file reads
        are counted in the operand stage (and the late ``c`` read when the product
        reaches the adder), FMAs, moves and SRAM writes in the execute stage, SRAM reads
        at issue."""
        s1 = st.s1
        rf_reads = [     # operand stage, and the late `c` read
            fma.fma_rd & names_reg(s1.fpu.a),
            fma.fma_rd & names_reg(s1.fpu.b),
            fma.mp_valid[-1] & fma.mp_crf[-1],
            byp.mv_rd & names_reg(s1.mv.src),
            byp.mv_rd & (s1.mv.op == MvOp.MASK) & names_reg(s1.mv.msk),
            st.s1_rsel & names_reg(s1.rdrv.src),
            st.s1_csel & names_reg(s1.cdrv.src),
            sram.wa_rd & names_reg(s1.wa.src),
            sram.wb_rd & names_reg(s1.wb.src),
        ]
        ev = self.ev
        wa_go, wb_go = sram.wa_go, sram.wb_go
        fma_wb_mema, fma_wb_memb = fma.fma_wb_mema, fma.fma_wb_memb
        m.d.comb += [
            ev.fma.eq(fma.fma_go),
            ev.mv.eq(mv_go),
            ev.mem_a_rd.eq(sram.rd_a.en),
            ev.mem_b_rd.eq(sram.rd_b.en),
            ev.mem_a_wr.eq(wa_go | fma_wb_mema),
            ev.mem_b_wr.eq(wb_go | fma_wb_memb),
            ev.mem_conflict.eq((wa_go & fma_wb_mema) | (wb_go & fma_wb_memb)),
            ev.rf_rd.eq(reduce(lambda x, y: x + y, [r.as_unsigned() for r in rf_reads])),
            ev.rf_wr.eq(mv_go.as_unsigned() + fma.fma_wb.as_unsigned()),
            ev.row_drv.eq(st.s1_rsel),
            ev.col_drv.eq(st.s1_csel),
            ev.rf_conflict.eq(rf_conflict),
        ]
