"""Cycle-accurate reference model of a core (:class:`rtl.core.Core`).

Built from the executable specs of its parts: :class:`sim.seq_model.SequencerModel`
(which instructions issue) and one :class:`pe.pe_model.PEModel` per PE (what each PE
does each cycle), with the buses and the host stream protocol of ``docs/core.md``.

Host assumptions: during ``RUN`` the input stream always holds the next beat and the
output stream is always ready, so no stall happens (``stall_cycles = 0``); the RTL's
counters then equal the model's exactly. With stalls the RTL's ``cycles`` exceed the
model's by exactly ``stall_cycles`` and every other counter and every output beat is the
same (stalls freeze the core).

It steps every PE every cycle in Python: exact, and slow (a few thousand core-cycles per
second for a 4x4 core). It is the reference for RTL tests and for the fast model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arch.buses import segment_len, segment_of
from arch.microop import uop_fields
from pe.pe_model import PEModel
from arch.host import Cmd
from arch.counters import SUMMED_EVENTS, counter_names
from sim.seq_model import SequencerModel, SpadPointers
from sim.dma_model import DmaEngine, Dram
from arch.isa import HostDir, SeqOp, instr_layout

__all__ = ["CoreModel", "CoreRun", "RunResult", "Beat", "pe_start_cycles"]

def pe_start_cycles(cfg) -> int:
    """RUN-state cycles before the first instruction reaches the PEs' issue stage: the
    sequencer's start latency less the start cycle itself (``cfg.start_latency - 1``, its
    fetch stage included), plus the distribution stages' cycles (``cfg.dist_delay``: 1 with
    ``cfg.dist_stage``, 2 with ``cfg.fan_stage`` too)."""
    return cfg.start_latency - 1 + cfg.dist_delay


@dataclass(frozen=True)
class Beat:
    data: int
    last: bool = False


@dataclass
class RunResult:
    out: list[Beat]
    cycles: int
    instructions: int
    counters: dict = field(default_factory=dict)
    #: beats sent to the next core on the ring (``rout``), ints, in order
    ring_out: list = field(default_factory=list)


class CoreModel:
    """Reference model of one core.

    Use :meth:`load` and :meth:`run` directly, or :meth:`process` to feed the same beat
    stream the RTL's ``s_axis`` receives and get the ``m_axis`` beats it must send.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.nr = cfg.nr
        self.w = cfg.fmt.width
        self.wmask = (1 << self.w) - 1
        self.seq = SequencerModel(cfg)
        self.pes = [[PEModel(cfg, r, c) for c in range(cfg.nr)] for r in range(cfg.nr)]
        self.names = counter_names(cfg)
        self.counters = dict.fromkeys(self.names, 0)
        self.cmask = (1 << cfg.counter_bits) - 1
        self.instr_bits = instr_layout(cfg).size
        #: the scratchpad (``cfg.spad_kib > 0``): ``spad_depth`` beats as ints (lane ``i``
        #: at bits ``i*width``), persistent across RUNs, 0 at reset
        self.spad = [0] * cfg.spad_depth
        #: the external DRAM behind the DMA engine (``cfg.dram_mib > 0``), else ``None``
        self.dram = Dram(cfg) if cfg.dram_mib else None

    # -- microcode -------------------------------------------------------------------
    def load(self, words, addr: int = 0) -> None:
        self.seq.load(list(words), addr)

    def clear_counters(self) -> None:
        self.counters = dict.fromkeys(self.names, 0)

    # -- one cycle of the PE array ------------------------------------------------------
    def _resolve(self, vals, oes, seg: int, host: bool, host_val: int):
        """Values seen by each PE on one bus, and the bus's hops (see BroadcastBus)."""
        n = self.nr
        if host:
            return [host_val] * n, n
        seen = [0] * n
        hops = 0
        for i in range(n):
            for j in segment_of(i, seg, n):
                if oes[j]:
                    seen[i] = vals[j]
            if oes[i]:
                hops += segment_len(i, seg, n)
        return seen, hops

    def _cycle(self, uop: int, hin: int, hin_data: int, rseg: int, cseg: int):
        """Clock every PE once with ``uop`` issued; the buses carry the operand stage of
        the previous instruction (segmentation ``rseg``/``cseg``), with host lanes
        ``hin``/``hin_data``. Returns what each PE saw on its row / column bus
        (``rows[r][c]``, ``cols[c][r]``) and counts events."""
        nr, w, m = self.nr, self.w, self.wmask
        ctr = self.counters
        drives = [[pe.drive() for pe in row] for row in self.pes]
        rows, cols = [], []
        for r in range(nr):
            seen, hops = self._resolve([drives[r][c][0] for c in range(nr)], [drives[r][c][1] for c in range(nr)],
                                       rseg, hin == HostDir.ROW, (hin_data >> (r * w)) & m)
            rows.append(seen)
            ctr[f"row_hops[{r}]"] += hops
        for c in range(nr):
            seen, hops = self._resolve([drives[r][c][2] for r in range(nr)], [drives[r][c][3] for r in range(nr)],
                                       cseg, hin == HostDir.COL, (hin_data >> (c * w)) & m)
            cols.append(seen)
            ctr[f"col_hops[{c}]"] += hops
        for r in range(nr):
            for c in range(nr):
                ev = self.pes[r][c].clock(uop, rows[r][c], cols[c][r])
                ctr[f"fma[{r * nr + c}]"] += ev.fma
                for name in SUMMED_EVENTS:
                    ctr[name] += getattr(ev, name)
        return rows, cols

    def _field(self, name):
        for n, off, width in uop_fields(*self.cfg.uop_key):
            if n == name:
                return lambda word, off=off, mask=(1 << width) - 1: (int(word) >> off) & mask
        raise KeyError(name)

    # -- RUN ----------------------------------------------------------------------------
    def run(self, start_pc: int = 0, host_in=(), max_instructions: int = 1_000_000,
            ring_in=()) -> RunResult:
        """Execute from ``start_pc`` to HALT plus the drain, as the RTL's RUN command.

        ``host_in`` supplies the data beats consumed by ``hin`` instructions (ints),
        ``ring_in`` those of ``rin`` instructions (a lone core: the ring input always
        holds the next beat and the next core always has room, so no stall).
        Returns the ``hout`` beats (``out``), the ``rout`` beats (``ring_out``), the
        cycle count and the counters of this run (the model's cumulative
        :attr:`counters` are updated as the RTL's are).
        """
        r = CoreRun(self, start_pc, host_in, ring_in, max_instructions)
        while not r.done:
            r.cycle()
        return r.finish()

    def _end_run(self, before, cycles, n, stalls, host_in, out, ring_in, ring_out, spad=(0, 0),
                 dma=None) -> RunResult:
        self.counters["cycles"] += cycles
        self.counters["stall_cycles"] += stalls
        self.counters["instructions"] += n
        self.counters["host_in_beats"] += host_in
        self.counters["host_out_beats"] += len(out)
        self.counters["ring_in_beats"] += ring_in
        self.counters["ring_out_beats"] += len(ring_out)
        if self.cfg.spad_kib:
            self.counters["spad_rd_beats"] += spad[0]
            self.counters["spad_wr_beats"] += spad[1]
        if dma is not None:
            self.counters["dram_rd_beats"] += dma.rd_beats
            self.counters["dram_wr_beats"] += dma.wr_beats
            self.counters["dma_busy_cycles"] += dma.busy
            self.counters["dma_stall_cycles"] += dma.stalls
        for k in self.counters:
            self.counters[k] &= self.cmask
        delta = {k: (self.counters[k] - before[k]) & self.cmask for k in self.names}
        return RunResult(out=out, cycles=cycles, instructions=n, counters=delta, ring_out=ring_out)

    # -- the stream protocol ------------------------------------------------------------
    def counter_beats(self) -> list[Beat]:
        hw = self.cfg.host_width
        per = -(-64 // hw)
        beats = []
        for i, name in enumerate(self.names):
            v = self.counters[name]
            for part in range(per):
                beats.append(Beat((v >> (part * hw)) & ((1 << hw) - 1),
                                  i == len(self.names) - 1 and part == per - 1))
        return beats

    def process(self, beats) -> list[Beat]:
        """Consume a host input stream (ints or :class:`Beat`), return the output beats."""
        hw = self.cfg.host_width
        bpw = -(-self.instr_bits // hw)
        data = [b.data if isinstance(b, Beat) else int(b) for b in beats]
        out: list[Beat] = []
        #: per RUN command processed: number of hout data beats it produced
        self.run_data_beats: list[int] = []
        i = 0
        while i < len(data):
            hdr = data[i]
            i += 1
            cmd, arg0, arg1 = hdr & 0xF, (hdr >> 4) & 0xFFFF, (hdr >> 20) & 0xFFF
            if cmd == Cmd.LOAD:
                count = arg1 or 4096
                words = []
                for _ in range(count):
                    wd = 0
                    for k in range(bpw):
                        wd |= data[i] << (k * hw)
                        i += 1
                    words.append(wd & ((1 << self.instr_bits) - 1))
                for k, wd in enumerate(words):
                    self.seq.load([wd], (arg0 + k) % self.cfg.ucode_depth)
            elif cmd == Cmd.RUN:
                # the program consumes its data beats from the rest of the stream
                need = self.hin_beats(arg0)
                res = self.run(arg0, data[i:i + need])
                i += need
                out += res.out
                self.run_data_beats.append(len(res.out))
                out.append(Beat(Cmd.RUN | (self._last_pc << 4), True))
            elif cmd == Cmd.COUNTERS:
                out += self.counter_beats()
            elif cmd == Cmd.CLEAR:
                self.clear_counters()
            else:
                out.append(Beat(Cmd.ERROR | (cmd << 4), True))
        return out

    def hin_beats(self, start_pc: int) -> int:
        """Host input beats the program consumes (a dry run of the sequencer)."""
        n = 0
        last = None
        for issued in self.seq.iter_run(start_pc):
            n += bool(issued.hin and not issued.rin and not issued.sin)
            last = issued.pc
        self._last_pc = last
        return n


class CoreRun:
    """One RUN of a :class:`CoreModel`, stepped cycle by cycle as the RTL's core.

    Each :meth:`cycle` is one clock of the RUN state: the PEs are clocked unless the
    previous cycle stalled (the bubble), then the head instruction either issues or
    stalls. ``ring_in`` is a list of beats (always available) or an object with
    ``ready() -> bool`` and ``pop() -> int`` (a ring receive FIFO); ``ring_room()``, when
    given, answers the ``rout`` credit check (``True`` if the next core's FIFO has room
    for one more beat given the pushes in flight, :attr:`rout_pending`). Host streams
    always serve (see the module docstring). :class:`sim.chip_model.ChipModel` steps one
    of these per core in lockstep.
    """

    def __init__(self, model: CoreModel, start_pc, host_in=(), ring_in=(), max_instructions=1_000_000,
                 ring_room=None):
        self.m = model
        self.before = dict(model.counters)
        self.host_in = list(host_in)
        self.ring_src = ring_in if hasattr(ring_in, "ready") else None
        self.ring_list = None if self.ring_src is not None else list(ring_in)
        self.ring_room = ring_room
        self.hin_pos = self.rin_pos = 0
        self.out: list[Beat] = []
        self.ring_out: list[int] = []
        #: ring beats pushed in the current cycle (the chip moves them to the next FIFO)
        self.pushed: list[int] = []
        self.cycles = self.n = self.stalls = 0
        self.rseg_of = model._field("rdrv_seg")
        self.cseg_of = model._field("cdrv_seg")
        # operand-stage registers: the instruction ticked last, not yet acted
        self.op = (0, 0, 0, 0, 0, 0, 0)      # hin, hin_data, hout, hlast, rout, rseg, cseg
        self.iss = (0, 0, 0, 0, 0, 0)        # the issue register: uop, hin, data, hout, hlast, rout
        # scratchpad: pointers, the issue stage's read address (None: no sin), the operand
        # stage's write address (None: no sout), beats read / written
        self.spad_ptr = SpadPointers(model.cfg)
        self.iss_sra = None
        self.iss_swa = self.op_swa = None
        self.spad_rd = self.spad_wr = 0
        #: the DMA engine (cfg.dram_mib > 0)
        self.dma = DmaEngine(model.cfg, model.spad, model.dram) if model.cfg.dram_mib else None
        self.stalled = False                 # the previous cycle stalled (this one is a bubble)
        # the PE side's issue register: the instruction the PEs see issued this cycle and
        # its scratchpad read address, and whether the PE side is frozen (a bubble). It is
        # the sequencer's issue register, or with cfg.dist_stage the last distribution
        # register, cfg.dist_delay cycles behind it; self.dq holds the distribution
        # registers' (iss, sra, swa, bubble), newest first (the PE side's is the last).
        self.dist = model.cfg.dist_stage
        self.dq = [((0, 0, 0, 0, 0, 0), None, None, False)] * model.cfg.dist_delay
        self.pe_iss = self.iss
        self.pe_sra = None
        self.pe_swa = None
        self.pe_bubble = False
        self.gen = model.seq.iter_run(start_pc, max_instructions)
        self.head = next(self.gen, None)
        # the HALT's own tick, then the DRAIN state
        self.drain = model.cfg.fpu_latency + 2 + model.cfg.dist_delay
        self.done = False
        self.started = False
        # cfg.fetch_stage: the cycle that fills the sequencer's head register (no decision),
        # after the start and after each JUMP
        self.fill = model.cfg.fetch_delay
        self.jump_delay = model.cfg.jump_delay
        #: an object whose ``clock(run)`` is called after every clock (:mod:`sim.movement`)
        self.probe = getattr(model, "probe", None)

    @property
    def rout_pending(self) -> int:
        """``rout`` pushes decided but not yet in the next core's FIFO, at this cycle's
        decision: the one pushed this cycle, the one in the operand-stage registers and
        (``cfg.dist_stage``) those in the distribution registers (the RTL's issue,
        distribution and operand stages)."""
        n = len(self.pushed) + int(bool(self.op[4] and self.op[2]))
        for iss, _, _, _ in self.dq:
            n += int(bool(iss[5] and iss[3]))
        return n

    def _tick(self):
        m = self.m
        op_hin, op_data, op_hout, op_hlast, op_rout, rseg, cseg = self.op
        sra = self.pe_sra
        if sra is not None:      # sin: the read is sampled in the issue stage (before this
            self.spad_rd += 1    # cycle's operand-stage write: not transparent)
            rd = m.spad[sra]
        rows, cols = m._cycle(self.pe_iss[0], op_hin, op_data, rseg, cseg)
        if op_hout:
            vals = rows if op_hout == HostDir.ROW else cols
            data = 0
            for i, v in enumerate(vals):
                data |= v[0] << (i * m.w)   # each bus sampled at position 0
            if self.op_swa is not None:
                m.spad[self.op_swa] = data
                self.spad_wr += 1
            elif op_rout:
                self.ring_out.append(data)
                self.pushed.append(data)
            else:
                self.out.append(Beat(data, bool(op_hlast)))
        uop, hin, data, hout, hlast, rout = self.pe_iss
        if sra is not None:
            data = rd
        self.op = (hin, data, hout, hlast, rout, self.rseg_of(uop), self.cseg_of(uop))
        self.op_swa = self.pe_swa

    def cycle(self) -> None:
        """One clock."""
        self.cycle_pe()
        self.cycle_head()

    def cycle_pe(self) -> None:
        """The PE side's part of a clock: the PEs and stream lanes are clocked (unless
        frozen by a bubble), pushing this cycle's ``rout`` beats into :attr:`pushed`; with
        the distribution stage the sequencer's issue register moves on to the PE side.
        Depends on nothing this cycle's head decides (:class:`sim.chip_model.ChipModel`
        runs it for every core before any head decision)."""
        self.pushed = []
        if not self.started:             # the start-latency cycle: NOP into the PEs
            self.started = True
            self.iss = (0, 0, 0, 0, 0, 0)
            if not self.dist:
                self.pe_iss = self.iss
        if not self.pe_bubble:
            self._tick()
        if self.dist:
            self.dq = [(self.iss, self.iss_sra, self.iss_swa, self.stalled)] + self.dq[:-1]
            self.pe_iss, self.pe_sra, self.pe_swa, self.pe_bubble = self.dq[-1]

    def cycle_head(self) -> None:
        """The sequencer's part of a clock: the head instruction issues or stalls."""
        self.cycles += 1
        h = self.head
        self.iss_sra = self.iss_swa = None
        try:
            if self.fill:                    # the fetch stage fills: no head yet
                self.fill -= 1
                self.iss = (0, 0, 0, 0, 0, 0)
                self.stalled = False
                return
            if h is None:                    # HALT issued: drain
                self.iss = (0, 0, 0, 0, 0, 0)
                self.drain = max(0, self.drain - 1)
                self.stalled = False
                if self.drain == 0 and (self.dma is None or self.dma.idle(self.cycles)):
                    self.done = True     # the drain is over and no DMA transfer is outstanding
                return
            stall = False
            if h.hin and h.rin and self.ring_src is not None and not self.ring_src.ready():
                stall = True
            if h.hout and h.rout and self.ring_room is not None and not self.ring_room(self):
                stall = True
            if h.dma and self.dma is not None and not self.dma.can_issue(h, self.cycles):
                stall = True                 # a dma wait while a transfer is outstanding, a start on a full queue
                self.dma.stalls += 1
            self.stalled = stall
            if stall:
                self.stalls += 1
                self.iss = (0, 0, 0, 0, 0, 0)
                return
            data = 0
            self.iss_sra, self.iss_swa = self.spad_ptr.step(h)
            if self.dma is not None:
                self.dma.issue(h, self.cycles, self.iss_sra, self.iss_swa)
            if h.sin:
                pass                         # the beat is read from the scratchpad at the tick
            elif h.hin and h.rin:
                if self.ring_src is not None:
                    data = self.ring_src.pop()
                else:
                    if self.rin_pos >= len(self.ring_list):
                        raise ValueError(f"program consumed more ring input beats than the {len(self.ring_list)} "
                                         f"given (at pc {h.pc})")
                    data = self.ring_list[self.rin_pos]
                self.rin_pos += 1
            elif h.hin:
                if self.hin_pos >= len(self.host_in):
                    raise ValueError(f"program consumed more host input beats than the {len(self.host_in)} "
                                     f"given (at pc {h.pc})")
                data = self.host_in[self.hin_pos]
                self.hin_pos += 1
            self.iss = (h.uop, h.hin, data, h.hout, h.hlast, h.rout)
            self.n += 1
            self.last_pc = h.pc
            if h.op == SeqOp.JUMP:           # cfg.fetch_stage: the head refills from the target
                self.fill = self.jump_delay
            self.head = next(self.gen, None)
        finally:
            if not self.dist:            # the PEs see the sequencer's issue register itself
                self.pe_iss, self.pe_sra, self.pe_swa = self.iss, self.iss_sra, self.iss_swa
                self.pe_bubble = self.stalled
            if self.probe is not None:
                self.probe.clock(self)

    def finish(self) -> RunResult:
        """Count the run into the model's counters; the :class:`RunResult`."""
        assert self.done
        m = self.m
        m._last_pc = self.last_pc
        return m._end_run(self.before, self.cycles, self.n, self.stalls, self.hin_pos, self.out,
                          self.rin_pos, self.ring_out, (self.spad_rd, self.spad_wr), self.dma)
