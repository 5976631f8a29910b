"""A stream replay harness around a core: host beats from a memory, output beats into one.

Simulation-only test harness (never synthesized): a testbench writes a session's input
beats into :class:`CoreReplay`'s input memory, raises ``go``, waits for ``done`` and reads
the captured output beats back, so the simulator runs the whole session without waking
the testbench once per cycle (``sim/tb_replay.py``).
"""

from __future__ import annotations

from amaranth import Cat, ClockDomain, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.core import Core

__all__ = ["CoreReplay", "LFSR_TAPS", "RESET_CYCLES", "lfsr_pauses"]

#: cycles of reset at the start of simulation (the harness has no reset input)
RESET_CYCLES = 3

#: taps of the 16-bit Galois LFSR of the pause generators (x^16 + x^14 + x^13 + x^11 + 1)
LFSR_TAPS = 0xB400


def lfsr_pauses(seed: int, threshold: int, n: int) -> list[bool]:
    """The first ``n`` pause decisions of a pause generator (the RTL's, in Python): cycle
    ``k`` pauses when the low byte of the LFSR state is below ``threshold``."""
    s = (seed & 0xFFFF) or 1
    out = []
    for _ in range(n):
        out.append((s & 0xFF) < threshold)
        s = (s >> 1) ^ (LFSR_TAPS if s & 1 else 0)
    return out


class _Pauses(wiring.Component):
    """A deterministic pause generator: a 16-bit Galois LFSR stepping every cycle.

    Ports
    -----
    seed : In(16), threshold : In(9)
        Loaded / compared while ``load``; a zero seed counts as 1 (an LFSR never leaves 0).
    load : In(1)
        Load the seed this cycle (the state does not step).
    pause : Out(1)
        Combinational: the low byte of the state is below ``threshold`` (probability
        ``threshold / 256``; 0 never pauses, 256 always).
    """

    def __init__(self):
        super().__init__({"seed": In(16), "threshold": In(9), "load": In(1), "pause": Out(1)})

    def elaborate(self, platform):
        m = Module()
        state = Signal(16, init=1)
        m.d.comb += self.pause.eq(state[:8] < self.threshold)
        with m.If(self.load):
            m.d.sync += state.eq(Cat(self.seed[0] | (self.seed == 0), self.seed[1:]))
        with m.Else():
            m.d.sync += state.eq((state >> 1) ^ (state[0].replicate(16) & LFSR_TAPS))
        return m


class CoreReplay(wiring.Component):
    """A :class:`rtl.core.Core` whose host streams are driven from and captured into memories.

    Parameters
    ----------
    cfg : ArchConfig
        The core's configuration (``cfg.host_width`` bits per beat).
    in_depth, out_depth : int
        Beats the input memory holds / the capture memory keeps.

    Ports
    -----
    clk : In(1)
        The clock. There is no reset input: the design is in reset for the first
        ``RESET_CYCLES + 1`` cycles of the simulation (``go`` low until then).
    go : In(1)
        Low: the harness is idle (no beat offered or taken, pause generators load their
        seeds, counters at 0). High: the session streams. Held high until ``done``.
    n_in : In(range(in_depth + 1)), n_out : In(32), max_cycles : In(32)
        Input beats to send (``tlast`` on the last one), output beats expected, the cycle
        limit. Set before ``go``, held constant.
    pause_in, pause_out : In(9), seed_in, seed_out : In(16)
        Pause generators (:func:`lfsr_pauses`) gating the core's ``s_axis.valid`` and
        ``m_axis.ready``: probability ``pause / 256`` per cycle, 0 = none.
    done : Out(1)
        From a flip-flop: ``n_out`` beats were taken, or the cycle limit was hit
        (``timeout``). Stays high; the capture keeps taking beats (``n_got`` counts on).
    timeout : Out(1)
        ``cycles`` reached ``max_cycles`` before ``n_out`` beats were taken.
    cycles : Out(32)
        Cycles from the first one with ``go`` (as sampled, below) up to the one that took
        the last expected beat (or the limit).
    n_sent, n_got : Out(32)
        Input beats the core took; output beats taken (beyond ``out_depth`` counted, not kept).
    rd_addr : In(range(out_depth)), rd_data : Out(host_width + 1)
        Combinational read of the capture memory: beat ``rd_addr`` as ``Cat(tdata, tlast)``.

    The memories are ``in_mem`` (``host_width`` bits per beat) and ``out_mem``
    (``host_width + 1``: data, then ``tlast`` at the top), zero at the start of
    simulation and never reset; a testbench fills ``in_mem`` and reads ``out_mem``
    through the simulator (:mod:`sim.vpi_mem`).

    Cycle behaviour
    ---------------
    The inputs act through flip-flops, one cycle late (no logic depends on a top-level
    input combinationally): the first beat is offered in the cycle after the first clock
    edge that sees ``go`` high. Input beat ``k`` (``in_mem[k]``, read in the cycle
    before) is offered from the cycle after beat ``k - 1`` was taken; output beat ``k``
    is written to ``out_mem[k]`` at the end of the cycle its handshake completes. The
    core sees an AXI4-Stream source and sink whose ``tvalid`` / ``tready`` drop in the
    cycles the pause generators say.
    """

    def __init__(self, cfg, in_depth: int, out_depth: int):
        self.cfg = cfg
        self.in_depth, self.out_depth = in_depth, out_depth
        hw = cfg.host_width
        super().__init__({
            "clk": In(1), "go": In(1), "n_in": In(range(in_depth + 1)), "n_out": In(32), "max_cycles": In(32),
            "pause_in": In(9), "pause_out": In(9), "seed_in": In(16), "seed_out": In(16),
            "done": Out(1), "timeout": Out(1), "cycles": Out(32), "n_sent": Out(32), "n_got": Out(32),
            "rd_addr": In(range(out_depth)), "rd_data": Out(hw + 1),
        })

    def elaborate(self, platform):
        m = Module()
        hw = self.cfg.host_width
        self._clock_and_reset(m)
        m.submodules.core = core = Core(self.cfg)
        m.submodules.in_mem = in_mem = Memory(shape=unsigned(hw), depth=self.in_depth, init=[])
        m.submodules.out_mem = out_mem = Memory(shape=unsigned(hw + 1), depth=self.out_depth, init=[])
        # the settings through flip-flops: no logic of the core depends on a top-level
        # input combinationally (Verilator re-evaluates such logic at every clock edge)
        go, n_in, n_out, max_cycles = (Signal.like(p, name=f"{p.name}_q") for p in
                                       (self.go, self.n_in, self.n_out, self.max_cycles))
        m.d.sync += [go.eq(self.go), n_in.eq(self.n_in), n_out.eq(self.n_out), max_cycles.eq(self.max_cycles)]
        m.submodules.p_in = p_in = _Pauses()
        m.submodules.p_out = p_out = _Pauses()
        for p, thr, seed in ((p_in, self.pause_in, self.seed_in), (p_out, self.pause_out, self.seed_out)):
            thr_q, seed_q = Signal.like(thr, name=f"{thr.name}_q"), Signal.like(seed, name=f"{seed.name}_q")
            m.d.sync += [thr_q.eq(thr), seed_q.eq(seed)]
            m.d.comb += [p.load.eq(~go), p.threshold.eq(thr_q), p.seed.eq(seed_q)]

        # synchronous read of the beat at the next value of ptr (nothing reads in_mem
        # combinationally: the testbench writes it through the simulator)
        ptr = Signal(range(self.in_depth + 1))
        rd = in_mem.read_port(transparent_for=())
        s_fire = core.s_axis.valid & core.s_axis.ready
        m.d.comb += [
            rd.addr.eq(Mux(go & s_fire, ptr + 1, Mux(go, ptr, 0))),
            core.s_axis.payload.data.eq(rd.data),
            core.s_axis.valid.eq(go & (ptr < n_in) & ~p_in.pause),
            core.s_axis.payload.last.eq(ptr == n_in - 1),
            self.n_sent.eq(ptr),
        ]
        with m.If(~go):
            m.d.sync += ptr.eq(0)
        with m.Elif(s_fire):
            m.d.sync += ptr.eq(ptr + 1)

        wr = out_mem.write_port()
        m_fire = core.m_axis.valid & core.m_axis.ready
        m.d.comb += [
            core.m_axis.ready.eq(go & ~p_out.pause),
            wr.addr.eq(self.n_got), wr.data.eq(Cat(core.m_axis.payload.data, core.m_axis.payload.last)),
            wr.en.eq(m_fire & (self.n_got < self.out_depth)),
        ]
        rb = out_mem.read_port(domain="comb")
        m.d.comb += [rb.addr.eq(self.rd_addr), self.rd_data.eq(rb.data)]

        got_all = m_fire & (self.n_got + 1 >= n_out)
        limit = self.cycles + 1 >= max_cycles
        with m.If(~go):
            m.d.sync += [self.n_got.eq(0), self.cycles.eq(0), self.done.eq(0), self.timeout.eq(0)]
        with m.Else():
            with m.If(m_fire):
                m.d.sync += self.n_got.eq(self.n_got + 1)
            with m.If(~self.done):
                m.d.sync += self.cycles.eq(self.cycles + 1)
                with m.If(got_all | (n_out == 0)):
                    m.d.sync += self.done.eq(1)
                with m.Elif(limit):
                    m.d.sync += [self.done.eq(1), self.timeout.eq(1)]
        return m

    def _clock_and_reset(self, m):
        """The ``sync`` domain on ``clk``, its reset from a power-on counter: high for
        the first ``RESET_CYCLES + 1`` cycles of the simulation. No logic depends on a
        reset input (Verilator would re-evaluate every flip-flop's next-state logic,
        which reads the reset, at every evaluation of the model)."""
        m.domains.sync = sync = ClockDomain("sync")
        m.domains.por = por = ClockDomain("por", reset_less=True)
        cnt = Signal(range(RESET_CYCLES + 1))
        rst = Signal(init=1)
        m.d.comb += [sync.clk.eq(self.clk), por.clk.eq(self.clk), sync.rst.eq(rst)]
        m.d.por += [cnt.eq(Mux(cnt == RESET_CYCLES, cnt, cnt + 1)), rst.eq(cnt != RESET_CYCLES)]
