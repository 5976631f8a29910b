"""A CATERPILLAR core: nr x nr PEs, row/column broadcast buses, sequencer, host stream,
performance counters.

Specified in ``docs/core.md``; :class:`sim.core_model.CoreModel` is the cycle-accurate
reference the RTL tests compare against.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.hdl import EnableInserter
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from noc.broadcast_bus import BroadcastBus, visibility, vis_port_bits
from pe.fp_common import CLASS_BITS, class_bits
from pe.pe import PE, issue_decode, issue_layout, issue_nop
from rtl.host_interface import OUT_FIFO_DEPTH, HostInterface
from rtl.perf_counters import PerfCounters
from arch.counters import counter_names
from rtl.scratchpad import Scratchpad
from rtl.dma import DmaEngine, axi_master_members
from rtl.sequencer import Sequencer
from rtl.streams import host_stream, ring_link
from arch.isa import HostDir, instr_layout

__all__ = ["Core"]


class Core(wiring.Component):
    """One core with its AXI4-Stream host ports.

    Parameters
    ----------
    cfg : ArchConfig

    Ports
    -----
    s_axis : In(:func:`rtl.streams.host_stream` (``cfg.host_width``))
        Host -> core stream (AXI4-Stream): ``payload.data`` / ``payload.last`` /
        ``valid`` / ``ready`` are ``tdata`` / ``tlast`` / ``tvalid`` / ``tready``.
    m_axis : Out(:func:`rtl.streams.host_stream` (``cfg.host_width``))
        Core -> host stream, from the host interface's output FIFO.
    ring_in : In(:class:`rtl.streams.RingLink` (``nr * width``, ``cfg.ring_fifo_depth``))
        Ring link from the previous core: ``data`` / ``en`` a beat pushed into this
        core's receive FIFO (``cfg.ring_fifo_depth`` beats) at the end of the cycle (the
        sender never pushes into a full FIFO, so there is no ready); ``level`` (driven
        here) the beats in the receive FIFO, which the previous core's credit check reads
        (with ``cfg.dist_stage``, net of this cycle's pop).
    ring_out : Out(:class:`rtl.streams.RingLink` (``nr * width``, ``cfg.ring_fifo_depth``))
        Ring link to the next core (joined to its ``ring_in``): ``data`` / ``en`` the bus
        values of a ``rout`` instruction's operand stage, lane ``i`` = row / column bus
        ``i``; ``level`` the next core's receive FIFO level. A ``rout`` issues only when
        ``ring_out.level + rout pushes in flight < depth``.
    cmd_ready : Out(1)
        The host interface takes every beat this cycle (IDLE or LOAD state), whatever
        ``s_axis.valid`` does: the chip's broadcast condition.

    A lone core (``cfg.cores == 1``) is on no ring: it has no receive FIFO (``ring_in``
    unused, ``ring_in.level`` 0), a ``rin`` waits forever for a beat and a ``rout`` never
    waits for room (its beat appears on ``ring_out``), as in the core model without a
    ring. As a Verilog top level (:class:`rtl.streams.AxisTop`, applied by
    :func:`rtl.verilog.write_verilog`) the ports are named ``s_axis_tdata``,
    ``s_axis_tvalid``, ``s_axis_tready``, ``s_axis_tlast``, ``m_axis_t*``,
    ``ring_in_data``, ``ring_in_en``, ``ring_in_level``, ``ring_out_*``.

    Cycle behaviour
    ---------------
    The sequencer issues one instruction per cycle. When the instruction at its head
    needs a host input beat that is not there, or room in the output FIFO that is not
    there, it stalls: the next cycle carries no instruction and the PEs (FP pipelines,
    SRAMs, registers) and the host-lane pipeline registers are clock-enabled off for that
    cycle, so a stall is invisible to the program (``docs/core.md``, "Issue, stalls,
    HALT"). Host input beats of ``hin`` instructions are consumed when the instruction
    leaves the head and drive the buses in the instruction's operand stage; ``hout``
    samples the resolved buses in the operand stage and pushes one beat.
    ``rin`` / ``rout`` (the ``hin`` / ``hout`` forms with the ring flag) behave the same
    with the ring receive FIFO / the next core's FIFO in place of the host streams: a
    ``rout`` issued in cycle t pushes in cycle t+2 (its operand stage) and the beat can
    be taken by a ``rin`` issuing in cycle t+3 or later on the next core.
    With ``cfg.spad_kib > 0`` the core has a scratchpad (:class:`rtl.scratchpad.Scratchpad`)
    as a third stream endpoint: ``sin`` reads a beat at the sequencer's read pointer in the
    instruction's issue stage (onto the buses in its operand stage, as ``hin``), ``sout``
    writes the beat ``hout`` would push at the write pointer in the operand stage; neither
    ever stalls. A ``sout`` issued in cycle t is seen by a ``sin`` issued in t+2 or later.

    With ``cfg.dist_stage`` a distribution register (one copy per PE, one for the lanes)
    sits between the sequencer and the PE side, which then runs one cycle later: the
    freeze after a stall, the lanes, the scratchpad and the pushes all move by a cycle, a
    ``rin`` pops its beat in its issue cycle (the head's check counts a beat arriving in
    the decision cycle) and ``ring_in.level`` is the level net of that pop, so the ring
    timing above holds as seen from the sequencers (``docs/core.md``, "The distribution
    stage"). The HALT's drain is one cycle longer. With ``cfg.fan_stage`` (a lone core)
    the distribution is two register levels and the PE side runs two cycles later.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.counter_names = counter_names(cfg)
        hw = cfg.host_width
        super().__init__({
            "s_axis": In(host_stream(hw)), "m_axis": Out(host_stream(hw)),
            "ring_in": In(ring_link(cfg)), "ring_out": Out(ring_link(cfg)),
            "cmd_ready": Out(1),
            **(axi_master_members(cfg) if cfg.dram_mib else {}),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg

        m.submodules.seq = seq = Sequencer(cfg)
        m.submodules.hif = hif = HostInterface(cfg, instr_layout(cfg).size, len(self.counter_names),
                                               drain_cycles=cfg.fpu_latency + cfg.dist_delay)
        m.submodules.counters = ctr = PerfCounters(cfg)

        # --- host streams -----------------------------------------------------------
        wiring.connect(m, wiring.flipped(self.s_axis), hif.s_axis)
        wiring.connect(m, hif.m_axis, wiring.flipped(self.m_axis))
        m.d.comb += [
            seq.load_addr.eq(hif.load_addr), seq.load_data.eq(hif.load_data), seq.load_en.eq(hif.load_en),
            seq.start.eq(hif.start), seq.start_pc.eq(hif.start_pc),
            hif.halted.eq(seq.halted), hif.halt_pc.eq(seq.pc),
            self.cmd_ready.eq(hif.cmd_ready),
        ]

        s = SimpleNamespace(seq=seq, hif=hif, ctr=ctr, dma=None)
        self._issue_view(m, s)
        if cfg.dram_mib:
            self._dma(m, s)
        self._stall(m, s)
        self._lanes(m, s)
        self._bus_lanes(m, s)
        self._bus_vis(m, s)
        s.row_bus, s.col_bus = self._make_buses(m, "", s.bus_lanes, s.vis, cls=cfg.rx_stage)
        if cfg.bus_stage:
            s.hout_row_bus, s.hout_col_bus = self._make_buses(m, "hout_", s.op_lanes)
        else:
            s.hout_row_bus, s.hout_col_bus = s.row_bus, s.col_bus
        self._uop_fans(m, s)
        self._pes(m, s)
        self._pushes(m, s)
        self._counters(m, s)
        return m

    # --- distribution stage (cfg.dist_stage) ----------------------------------------
    # With it, every sequencer output that the PE side uses passes through one more
    # register, loaded every cycle (never frozen): the PE side (PEs, buses, stream
    # lanes, scratchpad) runs one cycle behind the sequencer. Each PE gets its own
    # copy of the micro-op and of the freeze (below), so no sequencer flip-flop fans
    # out over the die into the PEs' issue-stage logic.
    # With cfg.fan_stage too, a second level: the PE side runs two cycles behind.
    def _dly_chain(self, m, sig, name, first=None):
        """``[sig, sig one register later, ...]``: ``sig`` through each distribution
        level (``cfg.dist_delay`` registers ``d_<name>``, ``d2_<name>``, ...; ``first``:
        what the first level loads instead)."""
        chain = [sig]
        for k in range(self.cfg.dist_delay):
            r = Signal.like(sig, name=f"d{k + 1 if k else ''}_{name}")
            m.d.sync += r.eq(first if k == 0 and first is not None else chain[-1])
            chain.append(r)
        return chain

    def _dly(self, m, sig, name):
        """``sig`` as the PE side sees it (``cfg.dist_delay`` registers later)."""
        return self._dly_chain(m, sig, name)[-1]

    def _issue_view(self, m, s):
        """Build the operand-stage lane signals, the ring receive FIFO (submodule
        ``ring_rx``, not on a lone core) and the sequencer's issue outputs as the PE side
        sees them (through the distribution registers); all added to ``s``."""
        cfg = self.cfg
        nr, w, hw = cfg.nr, cfg.fmt.width, cfg.host_width
        seq = s.seq
        # --- stall decision at the sequencer head -------------------------------------
        hout_op = Signal(2)      # hout of the instruction in its operand stage
        hout_last_op = Signal()
        rout_op = Signal()       # ... and its beat goes to the ring
        rin_depth = cfg.ring_fifo_depth
        # A lone core (cfg.cores == 1) is on no ring: no receive FIFO, a rin never finds a
        # beat (it stalls, as on a ring that never sends) and a rout never waits for room
        # (its beat leaves on ring_out, which nothing reads), as in the core model; so
        # no ring logic sits in the stall decision of the core a board carries.
        lone = cfg.cores == 1
        if lone:
            rx = None
        else:
            m.submodules.ring_rx = rx = fifo.SyncFIFO(width=nr * w, depth=rin_depth)
        hin_op = Signal(2)
        hin_data_issue = Signal(hw)   # beat of the instruction being issued this cycle
        hin_data_op = Signal(hw)      # beat of the instruction in its operand stage
        spad = bool(cfg.spad_kib)
        sin_op = Signal()        # the operand-stage instruction's input beat is the scratchpad's
        sout_op = Signal()       # ... and its output beat goes to the scratchpad
        seq_sout = seq.sout if spad else Const(0)
        seq_sin = seq.sin if spad else Const(0)
        # the issued instruction (sequencer output register) as the PE side sees it
        issue_c = self._dly_chain(m, seq.issue, "issue")
        hout_c = self._dly_chain(m, seq.hout, "hout")
        rout_c = self._dly_chain(m, seq.rout, "rout")
        sout_c = self._dly_chain(m, seq_sout, "sout")
        issue_d, hout_d, rout_d, sout_d = issue_c[-1], hout_c[-1], rout_c[-1], sout_c[-1]
        hin_d = self._dly(m, seq.hin, "hin")
        hlast_d = self._dly(m, seq.hlast, "hlast")
        sin_d = self._dly(m, seq_sin, "sin")
        rseg_d = self._dly(m, seq.uop.rdrv.seg, "rseg")
        cseg_d = self._dly(m, seq.uop.cdrv.seg, "cseg")
        vars(s).update(
            hout_op=hout_op, hout_last_op=hout_last_op, rout_op=rout_op, rin_depth=rin_depth, lone=lone, rx=rx,
            hin_op=hin_op, hin_data_issue=hin_data_issue, hin_data_op=hin_data_op, spad=spad, sin_op=sin_op,
            sout_op=sout_op, seq_sout=seq_sout, issue_c=issue_c, hout_c=hout_c, rout_c=rout_c, sout_c=sout_c,
            issue_d=issue_d, hout_d=hout_d, rout_d=rout_d, sout_d=sout_d, hin_d=hin_d, hlast_d=hlast_d,
            sin_d=sin_d, rseg_d=rseg_d, cseg_d=cseg_d)

    def _stall(self, m, s):
        """Build the stall decision at the sequencer head (``seq.stall``, comb): host
        output room (the ``credits`` register), ring room, ring input (the ``ring_rx``
        pops), and the issued instruction's input beat (``hin_data_issue``); adds
        ``to_host``, ``hpush_bus``, ``hpush_rx``, ``push``, ``ring_pop``, ``stall``,
        ``rin_pop`` and ``hin_data_d`` (the input beat as the PE side sees it) to ``s``."""
        cfg = self.cfg
        seq, hif, rx, lone = s.seq, s.hif, s.rx, s.lone
        rin_depth, hin_data_issue = s.rin_depth, s.hin_data_issue
        dist = cfg.dist_stage
        # output-FIFO and ring credits: pushes decided and not yet made (the sequencer's
        # issue register, the distribution registers, the operand stage)
        stages = [(seq.issue, seq.hout, seq.rout, s.seq_sout), (1, s.hout_op, s.rout_op, s.sout_op)]
        stages += list(zip(s.issue_c[1:], s.hout_c[1:], s.rout_c[1:], s.sout_c[1:]))
        to_host = [iss & (ho != 0) & ~ro & ~so for iss, ho, ro, so in stages]
        to_ring = [iss & (ho != 0) & ro for iss, ho, ro, so in stages]
        # with the bus stage a host-bound beat is pushed one cycle later, from the bus
        # stage (the ring and scratchpad beats keep the operand stage)
        hpush_bus = Signal()     # the bus stage holds a host-bound push
        if cfg.bus_stage:
            to_host.append(hpush_bus)
        # with the receive stage the beat sampled off the buses is registered (as the PEs
        # register their buses) and enters the FIFO one cycle later again
        hpush_rx = Signal()      # the receive register holds a host-bound push
        if cfg.rx_stage:
            to_host.append(hpush_rx)
        # Host room: a register holding the output FIFO's level plus the host-bound pushes
        # in flight, so the check at the head is one compare of a register with a constant
        # (no adder between the issue registers and the decision). In-flight pushes are
        # conserved (a frozen operand stage is always fed a NOP), so the count moves by
        # the pushes the head issues, the FIFO writes that are not in-flight pushes (the
        # done beat, counter and error replies) and the beats the host takes.
        credits = Signal(range(OUT_FIFO_DEPTH + len(to_host) + 2))
        room = Signal()
        m.d.comb += room.eq(credits < OUT_FIFO_DEPTH)
        self._credit_probe = (credits, hif.out_level, to_host)   # tests: credits == level + in flight
        self._seq = seq                                          # tests: seq._ucode_probe
        push = Signal()          # an in-flight push enters the FIFO (operand or bus stage, below)
        # Ring room: the level (the next core's, net of its pop) compared with each
        # possible number of pushes in flight, then picked by the in-flight flags: no adder
        # or carry chain after the issue registers.
        def fits(flags, k=0):
            if not flags:
                return self.ring_out.level < rin_depth - k
            return Mux(flags[0], fits(flags[1:], k + 1), fits(flags[1:], k))
        ring_room = Signal()
        m.d.comb += ring_room.eq(1 if lone else fits(to_ring))
        # ring input: without the stage a rin pops its beat when it leaves the head;
        # with it, in its issue cycle (the sequencer's output register), and the head's
        # check counts the beat arriving this cycle and the pop of the rin issued now
        ring_ok = Signal()
        ring_pop = Signal()      # a beat leaves the ring receive FIFO (counted)
        rin_pop = None
        if lone:
            m.d.comb += [ring_ok.eq(0), self.ring_in.level.eq(0)]
        elif dist:
            rin_pop = Signal()
            m.d.comb += [
                rin_pop.eq(seq.issue & (seq.hin != 0) & seq.rin),
                rx.r_en.eq(rin_pop),
                ring_pop.eq(rin_pop),
                # level + arriving > popping, as bit tests of the level (no adder)
                ring_ok.eq(Mux(rin_pop, rx.level[1:].any() | (rx.level.any() & self.ring_in.en),
                               rx.level.any() | self.ring_in.en)),
                self.ring_in.level.eq(rx.level - rin_pop),
            ]
        else:
            m.d.comb += [ring_ok.eq(rx.r_rdy), self.ring_in.level.eq(rx.level)]
        if not lone:
            m.d.comb += [rx.w_data.eq(self.ring_in.data), rx.w_en.eq(self.ring_in.en)]
        stall = Signal()
        dma_wait = s.dma_hold if s.dma is not None else Const(0)
        m.d.comb += stall.eq(seq.running & ((seq.need_hin & ~hif.hin_valid) | (seq.need_hout & ~room)
                                            | (seq.need_rin & ~ring_ok) | (seq.need_rout & ~ring_room)
                                            | dma_wait))
        m.d.comb += seq.stall.eq(stall)
        head_issues = Signal()
        m.d.comb += head_issues.eq(seq.running & ~stall)
        m.d.sync += credits.eq(credits + (head_issues & seq.need_hout) + hif.out_push - push - hif.out_pop)
        m.d.comb += hif.hin_take.eq(head_issues & seq.need_hin)
        with m.If(head_issues & seq.need_hin):
            m.d.sync += hin_data_issue.eq(hif.hin_data)
        if dist:
            hin_data_d = self._dly_chain(m, hin_data_issue, "hin_data",
                                         first=None if lone else Mux(rin_pop, rx.r_data, hin_data_issue))[-1]
        else:
            if not lone:
                m.d.comb += [rx.r_en.eq(head_issues & seq.need_rin), ring_pop.eq(rx.r_en)]
                with m.If(head_issues & seq.need_rin):
                    m.d.sync += hin_data_issue.eq(rx.r_data)
            hin_data_d = hin_data_issue
        vars(s).update(hpush_bus=hpush_bus, hpush_rx=hpush_rx, push=push, ring_pop=ring_pop, stall=stall,
                       hin_data_d=hin_data_d)

    def _lanes(self, m, s):
        """Build the bubble (``pe_en``: the PE side's freeze in the cycle after a stall),
        the operand-stage registers of the host lanes (submodule ``lanes``, frozen with
        the PEs), the scratchpad (submodule ``spad``, with ``cfg.spad_kib``) and
        ``lane_data``, the input beat on the buses in the operand stage; added to ``s``."""
        cfg = self.cfg
        seq = s.seq
        hw = cfg.host_width
        spad = s.spad
        # bubble: the cycle after a stall carries no instruction; freeze the PE side
        # (with the distribution stage: one cycle later, from the distribution register)
        bubble = Signal()
        m.d.sync += bubble.eq(s.stall)
        bubble_c = self._dly_chain(m, bubble, "bubble")
        bubble_d = bubble_c[-1]
        # (With the distribution stage every PE has its own copy of the freeze, below:
        # over seeds the copies give a better clock than the freeze on an ECP5 global
        # network, 2 x 2 and 4 x 4: docs/fpga.md, "Timing".)
        pe_en = Signal()
        m.d.comb += pe_en.eq(~bubble_d)

        # --- operand-stage registers of the host lanes (frozen with the PEs) ---------
        rseg_op = Signal.like(seq.uop.rdrv.seg)   # bus segmentation of the operand stage
        cseg_op = Signal.like(seq.uop.cdrv.seg)
        lanes = Module()
        lanes.d.sync += [
            s.hin_op.eq(Mux(s.issue_d, s.hin_d, 0)),
            s.hin_data_op.eq(s.hin_data_d),
            s.hout_op.eq(Mux(s.issue_d, s.hout_d, 0)),
            s.hout_last_op.eq(s.hlast_d),
            s.rout_op.eq(s.rout_d),
            rseg_op.eq(s.rseg_d),
            cseg_op.eq(s.cseg_d),
        ]
        sp = spad_waddr_op = None
        if spad:
            # the scratchpad: read in the issue stage, written in the operand stage, frozen
            # with the PEs (its read data holds through a bubble like the SRAM read ports)
            spad_waddr_op = Signal(cfg.spad_addr_bits)
            lanes.d.sync += [s.sin_op.eq(s.sin_d), s.sout_op.eq(s.sout_d),
                             spad_waddr_op.eq(self._dly(m, seq.spad_waddr, "spad_waddr"))]
            sp = Scratchpad(cfg)
            if s.dma is None:
                m.submodules.spad = EnableInserter(pe_en)(sp)
                ren = s.issue_d & s.sin_d
            else:
                # the DMA engine's ports are never frozen: the sequencer's are gated instead
                # (its write path already carries pe_en)
                m.submodules.spad = sp
                ren = s.issue_d & s.sin_d & pe_en
                self._dma_spad(m, s.dma, sp)
            m.d.comb += [sp.raddr.eq(self._dly(m, seq.spad_raddr, "spad_raddr")), sp.ren.eq(ren)]
        m.submodules.lanes = EnableInserter(pe_en)(lanes)
        lane_data = Signal(hw)    # the input beat on the buses in the operand stage
        if spad:
            m.d.comb += lane_data.eq(Mux(s.sin_op, sp.rdata, s.hin_data_op))
        else:
            m.d.comb += lane_data.eq(s.hin_data_op)
        vars(s).update(bubble=bubble, bubble_c=bubble_c, pe_en=pe_en, rseg_op=rseg_op, cseg_op=cseg_op,
                       spad_waddr_op=spad_waddr_op, sp=sp, lane_data=lane_data)

    def _dma(self, m, s):
        """(``cfg.dram_mib > 0``) The DMA engine (submodule ``dma``): started by the
        sequencer's issue register, its AXI4 master port on the core's ``m_axi_*``, the
        host interface's drain held while it is busy; ``s.dma``, and ``s.dma_hold``: the
        head is a DMA start while its queue is full, or a ``dma wait K`` while more than
        ``K`` transfers are outstanding."""
        seq = s.seq
        m.submodules.dma = dma = DmaEngine(self.cfg)
        s.dma_hold = Signal()
        m.d.comb += s.dma_hold.eq(seq.need_dma & Mux(seq.dma_waits, dma.count > seq.dma_keep, dma.full))
        m.d.comb += [
            dma.start.eq(seq.dma_start), dma.store.eq(seq.dma_store), dma.n.eq(seq.dma_n),
            dma.dram.eq(seq.dma_dram), dma.spad.eq(seq.dma_spad), s.hif.hold.eq(dma.busy),
        ]
        for name, port in axi_master_members(self.cfg).items():
            if port.flow == Out:
                m.d.comb += getattr(self, name).eq(getattr(dma, name))
            else:
                m.d.comb += getattr(dma, name).eq(getattr(self, name))
        s.dma = dma

    @staticmethod
    def _dma_spad(m, dma, sp):
        """Wire the DMA engine to the scratchpad's ``dma_*`` ports."""
        for x in ("raddr", "ren", "waddr", "wdata", "wen"):
            m.d.comb += getattr(sp, f"dma_{x}").eq(getattr(dma, f"spad_{x}"))
        m.d.comb += dma.spad_rdata.eq(sp.dma_rdata)

    def _bus_lanes(self, m, s):
        """Build the host lanes the buses carry (``s.op_lanes``: the operand stage's;
        ``s.bus_lanes``: with ``cfg.bus_stage`` the bus stage's registers, submodule
        ``bus_lanes``, frozen with the PEs, and the host lane's bus enables as flip-flops,
        ``s.nxt_hen`` their next values)."""
        cfg = self.cfg
        pe_en, hin_op = s.pe_en, s.hin_op
        # --- PEs and buses -----------------------------------------------------------
        # Without the bus stage the buses carry the operand stage's transfers. With it
        # (cfg.bus_stage) they carry them one cycle later, from the drivers' registers
        # (PE.row_out) and the host lane's, with the segmentation registered alike;
        # hout samples the operand stage's drive (PE.row_op) through a second set of
        # bus resolvers of which only position 0 is used, so stream timing is unchanged
        # (only the ring and scratchpad lanes use that sample: cfg.drive_op_sampled).
        op_lanes = {"hin": hin_op, "data": s.lane_data, "rseg": s.rseg_op, "cseg": s.cseg_op,
                    "hout": s.hout_op, "hlast": s.hout_last_op,
                    "host_row_en": pe_en & (hin_op == HostDir.ROW), "host_col_en": pe_en & (hin_op == HostDir.COL)}
        bus_lanes = dict(op_lanes)
        nxt_hen = None
        if cfg.bus_stage:
            blanes = Module()
            for k, v in list(bus_lanes.items()):
                if k.startswith("host_"):
                    continue                    # the enables follow, from next cycle's values
                r = Signal.like(v, name=f"bus_{k}")
                blanes.d.sync += r.eq(v)
                bus_lanes[k] = r
            blanes.d.sync += s.hpush_bus.eq((s.hout_op != 0) & ~s.rout_op & ~s.sout_op)
            m.submodules.bus_lanes = EnableInserter(pe_en)(blanes)
            # the host lane's bus enables as flip-flops: pe_en & (bus_hin == ROW / COL),
            # loaded with the values both will have in the next cycle (pe_en is ~bubble_d,
            # whose next value is the level before it, or stall without the distribution
            # stage), so no path runs from the freeze flip-flop through this AND onto
            # every bus
            nxt_pe_en = ~(s.bubble_c[-2] if cfg.dist_stage else s.stall)
            nxt_hin = Mux(pe_en, hin_op, bus_lanes["hin"])
            nxt_hen = {k: nxt_pe_en & (nxt_hin == d)
                       for k, d in (("host_row_en", HostDir.ROW), ("host_col_en", HostDir.COL))}
            for k, v in nxt_hen.items():
                bus_lanes[k] = Signal(name=f"bus_{k}")
                m.d.sync += bus_lanes[k].eq(v)
        vars(s).update(op_lanes=op_lanes, bus_lanes=bus_lanes, nxt_hen=nxt_hen)

    def _bus_vis(self, m, s):
        """Build, with ``cfg.bus_stage``, each receiving PE's copies of the buses'
        visibility flags (submodules ``pe_<r>_<c>_vis``) and of the host lane's bus
        enables (``pe_<r>_<c>_hen``); ``s.vis[r, c]`` is ``(row_vis, col_vis,
        row_host_en, col_host_en)`` (``s.vis`` is None without the bus stage)."""
        cfg = self.cfg
        nr = cfg.nr
        # The bus-stage buses take their visibility flags (the decode of the segmentation)
        # from registers, one copy per receiving PE (module ``pe_<r>_<c>_vis``, kept
        # apart by the FPGA build like the distribution copies): the segmentation
        # register then drives no die-wide decode in front of every bus's AND-OR (the
        # 4 x 4 core's critical path, docs/fpga.md, "Timing"). Loaded beside ``bus_rseg`` /
        # ``bus_cseg`` with the decode of the same value, so they equal its decode.
        # Likewise the host lane's bus enables, one copy per receiving PE (module
        # ``pe_<r>_<c>_hen``, loaded in every cycle with the value ``bus_host_*_en``
        # loads), so no flip-flop drives the host multiplexer of every receiver of every
        # bus (a 4 x 4 build's critical path, docs/fpga.md, "Timing").
        vis = None
        if cfg.bus_stage:
            vis = {}
            for r in range(nr):
                for c in range(nr):
                    # flags 1.. only: flag 0 is always set (vis_port_bits)
                    rv = cv = None
                    if vis_port_bits(nr):
                        vm = Module()
                        rv = Signal(vis_port_bits(nr), name="row_vis")
                        cv = Signal(vis_port_bits(nr), name="col_vis")
                        vm.d.sync += [rv.eq(visibility(s.rseg_op, nr)[1:]), cv.eq(visibility(s.cseg_op, nr)[1:])]
                        m.submodules[f"pe_{r}_{c}_vis"] = EnableInserter(s.pe_en)(vm)
                    hm = Module()
                    # no reset (as the distribution copies): their next value is 0
                    # while the core is in reset (hin_op and bus_hin reset to NONE)
                    rh = Signal(name="row_host_en", reset_less=True)
                    ch = Signal(name="col_host_en", reset_less=True)
                    hm.d.sync += [rh.eq(s.nxt_hen["host_row_en"]), ch.eq(s.nxt_hen["host_col_en"])]
                    m.submodules[f"pe_{r}_{c}_hen"] = hm
                    vis[r, c] = (rv, cv, rh, ch)
        s.vis = vis

    # With the receive stage the buses the PEs receive carry each value's class bits
    # (class_bits: > 0, NaN) above its data bits, resolved like them: the drivers
    # drive them (PE.row_out_cls) and the host lane's are the test of its register,
    # so the receivers' move-unit class flip-flops load a bus bit, not a 16-bit test
    # after the bus (9 connections deep on the 4 x 4 core, docs/fpga.md, "Timing").
    # Same classes: at most one value on a segment is nonzero.
    def _make_buses(self, m, prefix, lanes_, vis=None, cls=False):
        """Build the ``nr`` row and ``nr`` column buses (submodules ``<prefix>row_bus<i>``
        / ``<prefix>col_bus<i>``) carrying the host lanes ``lanes_``; ``vis``: the
        receivers' visibility and host-enable copies (:meth:`_bus_vis`); ``cls``: with
        the class bits. Returns ``(row_buses, col_buses)``."""
        cfg = self.cfg
        nr, w = cfg.nr, cfg.fmt.width
        bw = w + CLASS_BITS if cls else w
        rb = [BroadcastBus(bw, nr, vis_in=vis is not None) for _ in range(nr)]
        cb = [BroadcastBus(bw, nr, vis_in=vis is not None) for _ in range(nr)]
        for i in range(nr):
            host = lanes_["data"][i * w:(i + 1) * w]
            if cls:
                host_cls = Signal(CLASS_BITS, name=f"{prefix}host_cls{i}")
                m.d.comb += host_cls.eq(class_bits(cfg.fmt, host))
                host = Cat(host, host_cls)
            if vis is not None:
                for j in range(nr):
                    if vis_port_bits(nr):
                        m.d.comb += [getattr(rb[i], f"vis{j}").eq(vis[i, j][0]),
                                     getattr(cb[i], f"vis{j}").eq(vis[j, i][1])]
                    m.d.comb += [getattr(rb[i], f"host_en{j}").eq(vis[i, j][2]),
                                 getattr(cb[i], f"host_en{j}").eq(vis[j, i][3])]
            m.submodules[f"{prefix}row_bus{i}"] = rb[i]
            m.submodules[f"{prefix}col_bus{i}"] = cb[i]
            m.d.comb += [
                rb[i].seg.eq(lanes_["rseg"]),
                cb[i].seg.eq(lanes_["cseg"]),
                rb[i].host_en.eq(lanes_["host_row_en"]),
                rb[i].host_data.eq(host),
                cb[i].host_en.eq(lanes_["host_col_en"]),
                cb[i].host_data.eq(host),
            ]
        return rb, cb

    def _uop_fans(self, m, s):
        """Build, with ``cfg.dist_stage``, the micro-op and bubble copies per pair of PEs
        in a row (submodules ``uop_fan_<r>_<k>``); ``s.fans[r, k]`` is ``(uop, bubble)``."""
        cfg = self.cfg
        nr = cfg.nr
        seq = s.seq
        # With the distribution stage the sequencer's micro-op register and the bubble
        # flip-flop are replicated once per pair of PEs in a row (module
        # ``uop_fan_<r>_<k>``: PEs (r, 2k) and (r, 2k + 1)): each copy is loaded with the
        # same value as the original (``seq.uop_next``, ``stall``) and holds the same
        # value in every cycle, so nothing changes but the wires: the distribution
        # copies load from a copy placed between the sequencer and their pair, instead of
        # all 16 from one register (one wire across the die is a 4 x 4 build's critical
        # path, docs/fpga.md, "Timing"). The build keeps the copies apart (rtl.fpga.keep_pe_ffs).
        # With cfg.fan_stage the copies load the sequencer's micro-op register and the
        # bubble flip-flop themselves (a second distribution level, one cycle later): no
        # path then runs from the sequencer's issue logic across the die into a copy
        # (the 4 x 4 build's distribution path, docs/fpga.md, "Timing").
        fan_src = (seq.uop, s.bubble) if cfg.fan_stage else (seq.uop_next, s.stall)
        fans = {}
        for r in range(nr if cfg.dist_stage else 0):
            for k in range((nr + 1) // 2):
                fm = Module()
                # no reset (see the distribution copies below): uop_next and stall are 0
                # while the sequencer is in reset, so a copy is 0 after the reset too
                uop_f = Signal.like(seq.uop, name="uop", reset_less=True)
                bubble_f = Signal(name="bubble", reset_less=True)
                fm.d.sync += [uop_f.eq(fan_src[0]), bubble_f.eq(fan_src[1])]
                m.submodules[f"uop_fan_{r}_{k}"] = fm
                fans[r, k] = (uop_f, bubble_f)
        s.fans = fans

    def _pes(self, m, s):
        """Build the ``nr x nr`` PEs (submodules ``pe_<r>_<c>``, frozen by the bubble),
        with ``cfg.dist_stage`` each with its distribution copy (``pe_<r>_<c>_dist``:
        micro-op, freeze, issue decode), wired to the buses; ``s.pes`` lists them in
        row-major order."""
        cfg = self.cfg
        nr, w = cfg.nr, cfg.fmt.width
        dist = cfg.dist_stage
        seq, pe_en, fans = s.seq, s.pe_en, s.fans
        row_bus, col_bus, hout_row_bus, hout_col_bus = s.row_bus, s.col_bus, s.hout_row_bus, s.hout_col_bus
        pes = []
        for r in range(nr):
            for c in range(nr):
                pe = PE(cfg, row=r, col=c, issue_in=dist)
                pes.append(pe)
                if dist:
                    # this PE's own copy of the distribution register (micro-op, freeze)
                    # No reset on the copies: they are loaded every cycle (NOP and no
                    # bubble after the sequencer's reset, which lasts more than one
                    # cycle), and a reset would put a "rst ? 0 : x" LUT in front of each
                    # bit, identical for every PE, which Yosys then shares: one LUT
                    # driving all copies across the die (a 4 x 4 build's critical path,
                    # docs/fpga.md, "Timing")
                    pd = Module()
                    uop_pe = Signal.like(seq.uop, name="uop", reset_less=True)
                    bubble_pe = Signal(name="bubble", reset_less=True)
                    uop_f, bubble_f = fans[r, c // 2]
                    pd.d.sync += [uop_pe.eq(uop_f), bubble_pe.eq(bubble_f)]
                    # the PE's issue-stage decisions (predicate, driver selects, SRAM read
                    # enables, AR update selects) decoded from the micro-op the copy loads,
                    # so that they come from flip-flops (the read enables drive the block
                    # RAMs' and the bypass registers' clock enables); loaded every cycle
                    # like the copy, so they are always issue_decode(uop_pe) (issue_nop
                    # at power-up, as for uop 0)
                    wp = cfg.uop_key[2]
                    issue_pe = Signal(issue_layout(wp), name="issue", reset_less=True, init=issue_nop(wp))
                    pd.d.sync += issue_pe.eq(issue_decode(pd, cfg, r, c, uop_f))
                    m.d.comb += pe.issue.eq(issue_pe)
                    m.submodules[f"pe_{r}_{c}_dist"] = pd
                    m.submodules[f"pe_{r}_{c}"] = pe.frozen(~bubble_pe)
                    m.d.comb += pe.dsp_ce.eq(~bubble_pe)   # the same enable, for its DSP's registers
                else:
                    uop_pe = seq.uop
                    m.submodules[f"pe_{r}_{c}"] = pe.frozen(pe_en)
                    m.d.comb += pe.dsp_ce.eq(pe_en)
                rd_data, rd_oe = row_bus[r].drivers()[c]
                cd_data, cd_oe = col_bus[c].drivers()[r]
                row_v, col_v = row_bus[r].values()[c], col_bus[c].values()[r]
                m.d.comb += [
                    pe.uop.eq(uop_pe),
                    pe.row_in.eq(row_v[:w]),
                    pe.col_in.eq(col_v[:w]),
                    rd_oe.eq(pe.row_oe & pe_en),
                    cd_oe.eq(pe.col_oe & pe_en),
                ]
                if cfg.rx_stage:
                    m.d.comb += [pe.row_in_cls.eq(row_v[w:]), pe.col_in_cls.eq(col_v[w:]),
                                 rd_data.eq(Cat(pe.row_out, pe.row_out_cls)),
                                 cd_data.eq(Cat(pe.col_out, pe.col_out_cls))]
                else:
                    m.d.comb += [rd_data.eq(pe.row_out), cd_data.eq(pe.col_out)]
                if cfg.bus_stage:
                    hrd_data, hrd_oe = hout_row_bus[r].drivers()[c]
                    hcd_data, hcd_oe = hout_col_bus[c].drivers()[r]
                    m.d.comb += [hrd_data.eq(pe.row_op), hrd_oe.eq(0),
                                 hcd_data.eq(pe.col_op), hcd_oe.eq(0)]
        s.pes = pes

    def _pushes(self, m, s):
        """Build the output pushes: the host FIFO's (``hif.push_*``; in the operand
        stage, or with ``cfg.bus_stage`` / ``cfg.rx_stage`` one / two cycles later), the
        ring's (``ring_out``) and the scratchpad's write; adds ``ring_push`` to ``s``."""
        cfg = self.cfg
        nr, w = cfg.nr, cfg.fmt.width
        hif, pe_en, hout_op, rout_op, bus_lanes = s.hif, s.pe_en, s.hout_op, s.rout_op, s.bus_lanes
        push, pes = s.push, s.pes
        # --- output pushes: ring and scratchpad in the operand stage, the host FIFO there
        # too or, with the bus stage, in the bus stage (from flip-flops over the bus, not
        # from an SRAM read over it; the credits count it in flight a cycle longer) -----
        ring_push = Signal()
        m.d.comb += ring_push.eq(pe_en & (hout_op != 0) & rout_op)
        # hout samples each bus at position 0 (its first segment when segmented)
        def sample(direction, rb, cb):
            return Mux(direction == HostDir.ROW, Cat(*(b.values()[0][:w] for b in rb)),
                       Cat(*(b.values()[0][:w] for b in cb)))
        op_data = Signal(nr * w)     # the beat hout samples in the operand stage
        m.d.comb += op_data.eq(sample(hout_op, s.hout_row_bus, s.hout_col_bus))
        push_last = bus_lanes["hlast"]
        if cfg.rx_stage:
            # No path from a bus into the FIFO's write data: the beat is the receive
            # registers of the PEs at position 0 (PE (r, 0)'s row_rx holds row bus r's
            # value there, PE (0, c)'s col_rx column bus c's), which hold the bus-stage
            # values whenever a push is made (both load under pe_en). A register of the
            # host interface loading the same values across the die from the buses'
            # drivers would be the 4 x 4 build's critical path (docs/fpga.md, "Timing").
            push_last = Signal(name="hout_rx_last")
            rx_row_dir = Signal(name="hout_rx_row")      # the beat is the row buses'
            m.d.sync += [s.hpush_rx.eq(pe_en & s.hpush_bus), push_last.eq(bus_lanes["hlast"]),
                         rx_row_dir.eq(bus_lanes["hout"] == HostDir.ROW)]
            rx_rows = Cat(*(pes[r * nr].row_rx for r in range(nr)))
            rx_cols = Cat(*(pes[c].col_rx for c in range(nr)))
            m.d.comb += [push.eq(s.hpush_rx), hif.push_data.eq(Mux(rx_row_dir, rx_rows, rx_cols))]
        elif cfg.bus_stage:
            m.d.comb += [push.eq(pe_en & s.hpush_bus),
                         hif.push_data.eq(sample(bus_lanes["hout"], s.row_bus, s.col_bus))]
        else:
            m.d.comb += [push.eq(pe_en & (hout_op != 0) & ~rout_op & ~s.sout_op), hif.push_data.eq(op_data)]
        m.d.comb += [
            hif.push_en.eq(push),
            hif.push_last.eq(push_last),
            self.ring_out.en.eq(ring_push),
            self.ring_out.data.eq(op_data),
        ]
        if s.spad:
            sp = s.sp
            spad_wr = Signal()
            m.d.comb += [
                spad_wr.eq(pe_en & (hout_op != 0) & s.sout_op),
                sp.waddr.eq(s.spad_waddr_op), sp.wdata.eq(op_data[:nr * w]), sp.wen.eq(spad_wr),
                s.ctr.spad_rd.eq(s.issue_d & s.sin_d), s.ctr.spad_wr.eq(spad_wr),
            ]
        s.ring_push = ring_push

    def _counters(self, m, s):
        """Wire the performance counters' events (stalls, issues, bus hops, stream beats,
        PE events; all masked while the PE side is frozen) and their readout."""
        nr = self.cfg.nr
        ctr, hif, pe_en = s.ctr, s.hif, s.pe_en
        # --- counters -------------------------------------------------------------------
        m.d.comb += [
            ctr.count_en.eq(hif.running),
            ctr.stall.eq(s.stall),
            ctr.issue.eq(s.seq.issue),
            *(getattr(ctr, f"row_hops{i}").eq(Mux(pe_en, s.row_bus[i].hops, 0)) for i in range(nr)),
            *(getattr(ctr, f"col_hops{i}").eq(Mux(pe_en, s.col_bus[i].hops, 0)) for i in range(nr)),
            ctr.host_in.eq(hif.host_in_beat),
            ctr.host_out.eq(hif.host_out_beat),
            ctr.ring_in.eq(s.ring_pop),
            ctr.ring_out.eq(s.ring_push),
            ctr.clear.eq(hif.cnt_clear),
            ctr.sel.eq(hif.cnt_sel),
            hif.cnt_value.eq(ctr.value),
            hif.cnt_ready.eq(ctr.ready),
        ]
        if s.dma is not None:
            m.d.comb += [ctr.dram_rd.eq(s.dma.rd_beat), ctr.dram_wr.eq(s.dma.wr_beat), ctr.dma_busy.eq(s.dma.busy),
                         ctr.dma_stall.eq(s.dma_hold)]
        for p, pe in enumerate(s.pes):
            m.d.comb += ctr.pe_events()[p].eq(Mux(pe_en, pe.ev.as_value(), 0))
