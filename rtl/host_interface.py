"""The core's host interface: AXI4-Stream command protocol, microcode loading, run
control, counter readout and the output FIFO.

Protocol (``docs/core.md``, "Host interface"): in command mode each input beat is a
header: ``tdata[3:0]`` command, ``tdata[19:4]`` ``arg0``, ``tdata[31:20]`` ``arg1``.
``LOAD`` (1), ``RUN`` (2), ``COUNTERS`` (3), ``CLEAR`` (4); anything else answers an
error beat.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from arch.host import Cmd
from rtl.perf_counters import PerfCounters
from rtl.streams import host_stream

__all__ = ["HostInterface", "Cmd", "OUT_FIFO_DEPTH"]

OUT_FIFO_DEPTH = 16


class HostInterface(wiring.Component):
    """AXI4-Stream host side of a core.

    Parameters
    ----------
    cfg : ArchConfig
    instr_bits : int
        Microcode word width.
    n_counters : int
        Number of performance counters (read out in index order).
    drain_cycles : int
        Cycles to wait after the HALT instruction issued before the done beat, so that
        every operation in flight has completed.

    Ports
    -----
    s_axis : In(:func:`rtl.streams.host_stream` (``cfg.host_width``)), m_axis : Out(...)
        The two AXI4-Stream streams (``payload.data`` is ``tdata``, ``cfg.host_width``
        bits; ``payload.last`` ``tlast``, which the input side ignores). ``m_axis`` is
        the output FIFO's read side (no register after it).
    load_addr, load_data, load_en : Out
        Microcode write port (one word per cycle at most).
    start : Out(1), start_pc : Out(pc_bits)
        Pulse that starts the sequencer, from flip-flops: the cycle after the RUN
        header (state START, which takes no input beat).
    halted : In(1), halt_pc : In(pc_bits)
        The sequencer issued its HALT instruction (at ``halt_pc``) this cycle.
    hold : In(1)
        (``cfg.dram_mib > 0`` only) The DMA engine is busy: the DRAIN state lasts until
        it is idle (and the drain count is over).
    running : Out(1)
        RUN and DRAIN states, from the cycle after the start pulse to the done beat
        (counters count), from a flip-flop.
    hin_valid : Out(1), hin_data : Out(host_width), hin_take : In(1)
        During RUN, the input stream as seen by ``hin`` instructions: the core sets
        ``hin_take`` in the cycle it consumes the beat (only while ``hin_valid``).
    push_en : In(1), push_data : In(host_width), push_last : In(1)
        During RUN, ``hout`` pushes into the output FIFO (the core guarantees room).
    out_level : Out(range(OUT_FIFO_DEPTH + 1))
        Output FIFO occupancy, for the core's room check.
    cmd_ready : Out(1)
        In a state that takes every input beat (IDLE, LOAD): ``s_axis.ready`` is 1
        whatever ``s_axis.valid`` does (a chip broadcasts beats only then).
    out_push, out_pop : Out(1)
        A beat enters / leaves the output FIFO this cycle (any state: RUN pushes, the done
        beat, counter and error replies; the host taking one). The core's credit counter
        follows the FIFO level with them.
    host_in_beat, host_out_beat : Out(1)
        A RUN data beat was consumed / pushed this cycle (counter events).
    cnt_sel : Out, cnt_value : In(counter_bits), cnt_clear : Out(1), cnt_ready : In(1)
        Counter readout and clear (``cnt_clear``: a flip-flop, high in the cycle after a
        ``CLEAR`` header); ``COUNTERS`` reads only while ``cnt_ready``
        (:attr:`rtl.perf_counters.PerfCounters.ready`: the bank has settled after the
        last RUN or CLEAR).
    """

    def __init__(self, cfg, instr_bits: int, n_counters: int, drain_cycles: int):
        self.cfg = cfg
        self.instr_bits = instr_bits
        self.n_counters = n_counters
        self.drain_cycles = drain_cycles
        hw = cfg.host_width
        self.beats_per_word = -(-instr_bits // hw)
        self.beats_per_counter = -(-64 // hw)
        super().__init__({
            "s_axis": In(host_stream(hw)), "m_axis": Out(host_stream(hw)),
            "load_addr": Out(cfg.pc_bits), "load_data": Out(instr_bits), "load_en": Out(1),
            "start": Out(1), "start_pc": Out(cfg.pc_bits), "halted": In(1), "halt_pc": In(cfg.pc_bits),
            "running": Out(1),
            "hin_valid": Out(1), "hin_data": Out(hw), "hin_take": In(1),
            "push_en": In(1), "push_data": In(hw), "push_last": In(1),
            "out_level": Out(range(OUT_FIFO_DEPTH + 1)), "cmd_ready": Out(1),
            "host_in_beat": Out(1), "host_out_beat": Out(1), "out_push": Out(1), "out_pop": Out(1),
            "cnt_sel": Out(range(max(2, n_counters))), "cnt_value": In(cfg.counter_bits), "cnt_clear": Out(1),
            "cnt_ready": In(1),
            **({"hold": In(1)} if cfg.dram_mib else {}),
        })

    def elaborate(self, platform):
        m = Module()
        r = self._output_fifo(m)
        self._registers(m, r)
        with m.FSM(name="host"):
            with m.State("IDLE"):
                self._state_idle(m, r)
            with m.State("LOAD"):
                self._state_load(m, r)
            with m.State("START"):
                # the start pulse, from flip-flops (start, start_pc); no input beat is taken
                m.d.sync += [r.run.eq(1), r.running.eq(1)]
                m.next = "RUN"
            with m.State("RUN"):
                self._state_run(m, r)
            with m.State("DRAIN"):
                self._state_drain(m, r)
            with m.State("DONE"):
                m.d.comb += [r.w_data.eq(Cat(Const(Cmd.RUN, 4), r.last_pc)), r.w_last.eq(1)]
                with m.If(r.ofifo.w_rdy):
                    m.d.comb += r.w_en.eq(1)
                    m.next = "IDLE"
            with m.State("COUNTERS"):
                self._state_counters(m, r)
            with m.State("ERROR"):
                m.d.comb += [r.w_data.eq(Cat(Const(Cmd.ERROR, 4), r.bad_cmd)), r.w_last.eq(1)]
                with m.If(r.ofifo.w_rdy):
                    m.d.comb += r.w_en.eq(1)
                    m.next = "IDLE"
        return m

    def _output_fifo(self, m):
        """Build the output FIFO (submodule ``ofifo``, ``OUT_FIFO_DEPTH`` beats of
        ``host_width`` bits and ``tlast``), wired to the ``m_axis`` stream, ``out_level``,
        ``out_push`` and ``out_pop``.

        Returns
        -------
        SimpleNamespace
            ``ofifo`` and its write side ``w_data``, ``w_last``, ``w_en`` (comb, default
            0: one writer per FSM state).
        """
        hw = self.cfg.host_width
        m.submodules.ofifo = ofifo = fifo.SyncFIFOBuffered(width=hw + 1, depth=OUT_FIFO_DEPTH)
        m.d.comb += [
            self.m_axis.payload.data.eq(ofifo.r_data[:hw]),
            self.m_axis.payload.last.eq(ofifo.r_data[hw]),
            self.m_axis.valid.eq(ofifo.r_rdy),
            ofifo.r_en.eq(self.m_axis.ready),
            self.out_level.eq(ofifo.level),
            self.out_push.eq(ofifo.w_en & ofifo.w_rdy),
            self.out_pop.eq(ofifo.r_en & ofifo.r_rdy),
        ]
        # one writer of the FIFO per state; defaults: none
        w_data = Signal(hw)
        w_last = Signal()
        w_en = Signal()
        m.d.comb += [ofifo.w_data.eq(Cat(w_data, w_last)), ofifo.w_en.eq(w_en)]
        return SimpleNamespace(ofifo=ofifo, w_data=w_data, w_last=w_last, w_en=w_en)

    def _registers(self, m, r):
        """Build the command FSM's registers (added to ``r``): the load address and word
        shifter, drain and counter-readout counters, the flip-flop outputs ``start`` /
        ``start_pc``, ``run``, ``running`` and ``cnt_clear``, and the RUN state's view of
        the input stream (``hin_valid`` / ``hin_data`` / ``s_axis.ready``, comb)."""
        cfg = self.cfg
        hdr = self.s_axis.payload.data
        r.cmd = hdr[0:4]
        r.arg0 = hdr[4:20]
        r.arg1 = hdr[20:32]

        addr = Signal(cfg.pc_bits)
        remaining = Signal(13)          # words left to load (1..4096)
        chunk = Signal(range(max(2, self.beats_per_word)))
        word = Signal(self.beats_per_word * cfg.host_width)
        drain = Signal(range(self.drain_cycles + 2))
        cidx = Signal(range(max(2, self.n_counters)))
        cpart = Signal(range(max(2, self.beats_per_counter)))
        # cycles until cnt_value holds counter cidx (the counters' pipelined readout)
        cwait = Signal(range(PerfCounters.READOUT_LATENCY + 1))
        bad_cmd = Signal(4)
        last_pc = Signal(cfg.pc_bits)

        m.d.comb += [self.cnt_sel.eq(cidx), self.load_addr.eq(addr), self.load_data.eq(word[:self.instr_bits])]
        # The start pulse and the RUN state's input stream come from flip-flops of their
        # own, not from a decode of the state register: ``start`` selects the sequencer's
        # microcode address and ``hin_valid`` enters the stall decision, and the state
        # decode in front of them would be on the 4 x 4 core's critical path (docs/fpga.md, "Timing").
        start = Signal()                # the START state (one cycle after the RUN header)
        start_pc = Signal(cfg.pc_bits)
        run = Signal()                  # the RUN state
        m.d.sync += start.eq(0)
        m.d.comb += [self.start.eq(start), self.start_pc.eq(start_pc)]
        # The counters' controls are flip-flops too: ``running`` (the RUN and DRAIN
        # states) and ``cnt_clear`` (the cycle after a CLEAR header; nothing counts in
        # IDLE, so the cycle's delay changes no count). A decode of the state register
        # in front of them would be on the 4 x 4 core's critical path (docs/fpga.md,
        # "Timing").
        running = Signal()
        clear = Signal()
        m.d.sync += clear.eq(0)
        m.d.comb += [self.running.eq(running), self.cnt_clear.eq(clear)]
        with m.If(run):
            m.d.comb += [
                self.hin_valid.eq(self.s_axis.valid),
                self.hin_data.eq(self.s_axis.payload.data),
                self.s_axis.ready.eq(self.hin_take),
                self.host_in_beat.eq(self.hin_take & self.s_axis.valid),
            ]
        vars(r).update(addr=addr, remaining=remaining, chunk=chunk, word=word, drain=drain, cidx=cidx,
                       cpart=cpart, cwait=cwait, bad_cmd=bad_cmd, last_pc=last_pc, start=start,
                       start_pc=start_pc, run=run, running=running, clear=clear)

    def _state_idle(self, m, r):
        """The IDLE state's logic: take a command header and go to its state."""
        cmd, arg0, arg1 = r.cmd, r.arg0, r.arg1
        m.d.comb += [self.s_axis.ready.eq(1), self.cmd_ready.eq(1)]
        with m.If(self.s_axis.valid):
            with m.Switch(cmd):
                with m.Case(Cmd.LOAD):
                    m.d.sync += [r.addr.eq(arg0), r.remaining.eq(Cat(arg1, arg1 == 0)), r.chunk.eq(0)]
                    m.next = "LOAD"
                with m.Case(Cmd.RUN):
                    m.d.sync += [r.start.eq(1), r.start_pc.eq(arg0)]
                    m.next = "START"
                with m.Case(Cmd.COUNTERS):
                    m.d.sync += [r.cidx.eq(0), r.cpart.eq(0), r.cwait.eq(PerfCounters.READOUT_LATENCY)]
                    m.next = "COUNTERS"
                with m.Case(Cmd.CLEAR):
                    m.d.sync += r.clear.eq(1)
                with m.Default():
                    m.d.sync += r.bad_cmd.eq(cmd)
                    m.next = "ERROR"

    def _state_load(self, m, r):
        """The LOAD state's logic: shift microcode words in (``beats_per_word`` beats each,
        least-significant first) and write each completed word (``load_en``, comb)."""
        hw = self.cfg.host_width
        word, chunk, addr, remaining = r.word, r.chunk, r.addr, r.remaining
        m.d.comb += [self.s_axis.ready.eq(1), self.cmd_ready.eq(1)]
        with m.If(self.s_axis.valid):
            # shift chunks in least-significant first
            if self.beats_per_word == 1:
                m.d.comb += self.load_data.eq(self.s_axis.payload.data[:self.instr_bits])
                complete = Const(1)
            else:
                full = Signal.like(word)
                m.d.comb += full.eq(Cat(word[hw:], self.s_axis.payload.data))
                m.d.sync += word.eq(full)
                m.d.comb += self.load_data.eq(full[:self.instr_bits])
                complete = chunk == self.beats_per_word - 1
                m.d.sync += chunk.eq(chunk + 1)
            with m.If(complete):
                m.d.comb += self.load_en.eq(1)
                m.d.sync += [addr.eq(addr + 1), remaining.eq(remaining - 1), chunk.eq(0)]
                with m.If(remaining == 1):
                    m.next = "IDLE"

    def _state_run(self, m, r):
        """The RUN state's logic: ``hout`` pushes into the output FIFO until the HALT."""
        m.d.comb += [
            r.w_en.eq(self.push_en), r.w_data.eq(self.push_data), r.w_last.eq(self.push_last),
            self.host_out_beat.eq(self.push_en),
        ]
        with m.If(self.halted):
            m.d.sync += [r.drain.eq(self.drain_cycles), r.last_pc.eq(self.halt_pc), r.run.eq(0)]
            m.next = "DRAIN"

    def _state_drain(self, m, r):
        """The DRAIN state's logic: ``drain_cycles`` cycles of pushes after the HALT."""
        # operations in flight complete; hout pushes of the last instructions land
        m.d.comb += [
            r.w_en.eq(self.push_en), r.w_data.eq(self.push_data), r.w_last.eq(self.push_last),
            self.host_out_beat.eq(self.push_en),
        ]
        done = r.drain == 0
        if self.cfg.dram_mib:      # the RUN also waits for the DMA engine to finish
            done = done & ~self.hold
        with m.If(done):
            m.d.sync += r.running.eq(0)
            m.next = "DONE"
        with m.Elif(r.drain != 0):
            m.d.sync += r.drain.eq(r.drain - 1)

    def _state_counters(self, m, r):
        """The COUNTERS state's logic: read every counter out, ``beats_per_counter``
        beats each, waiting ``READOUT_LATENCY`` cycles after each counter select."""
        hw = self.cfg.host_width
        cidx, cpart, cwait, w_en = r.cidx, r.cpart, r.cwait, r.w_en
        part = Signal(hw)
        val64 = Signal(64)
        m.d.comb += val64.eq(self.cnt_value)
        if self.beats_per_counter == 1:
            m.d.comb += part.eq(val64)
            last_part = Const(1)
        else:
            m.d.comb += part.eq(val64.word_select(cpart, hw))
            last_part = cpart == self.beats_per_counter - 1
        m.d.comb += [r.w_data.eq(part), r.w_last.eq(last_part & (cidx == self.n_counters - 1))]
        # cnt_value is counter cidx READOUT_LATENCY cycles after cidx is set (a
        # pipelined readout): each counter waits that long before its first beat,
        # counted from when the bank is ready (it settles after a RUN or CLEAR;
        # nothing counts or clears in this state, so it stays ready)
        with m.If(cwait != 0):
            with m.If(self.cnt_ready):
                m.d.sync += cwait.eq(cwait - 1)
        with m.Elif(r.ofifo.w_rdy):
            m.d.comb += w_en.eq(1)
            with m.If(last_part):
                m.d.sync += [cpart.eq(0), cidx.eq(cidx + 1), cwait.eq(PerfCounters.READOUT_LATENCY)]
                with m.If(cidx == self.n_counters - 1):
                    m.next = "IDLE"
            with m.Else():
                m.d.sync += cpart.eq(cpart + 1)
