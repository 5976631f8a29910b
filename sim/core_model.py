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

from noc.broadcast_bus import segment_len, segment_of
from pe.microop import uop_fields
from pe.pe_model import PEModel
from rtl.host_interface import Cmd
from rtl.perf_counters import SUMMED_EVENTS, counter_names
from sim.seq_model import SequencerModel
from sw.isa import HostDir, SeqOp, instr_layout

__all__ = ["CoreModel", "RunResult", "Beat", "START_LATENCY_CYCLES"]

#: RUN-state cycles before the first instruction issues (sequencer start latency - 1)
START_LATENCY_CYCLES = 1


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
        for n, off, width in uop_fields(self.cfg.addr_bits, self.cfg.sel_bits):
            if n == name:
                return lambda word, off=off, mask=(1 << width) - 1: (int(word) >> off) & mask
        raise KeyError(name)

    # -- RUN ----------------------------------------------------------------------------
    def run(self, start_pc: int = 0, host_in=(), max_instructions: int = 1_000_000) -> RunResult:
        """Execute from ``start_pc`` to HALT plus the drain, as the RTL's RUN command.

        ``host_in`` supplies the data beats consumed by ``hin`` instructions (ints).
        Returns the ``hout`` beats, the cycle count and the counters of this run (the
        model's cumulative :attr:`counters` are updated as the RTL's are).
        """
        before = dict(self.counters)
        host_in = list(host_in)
        hin_pos = 0
        out: list[Beat] = []
        cycles = 0
        nop = 0
        # the start-latency cycle: PEs clocked with a NOP
        op_hin, op_hin_data, op_hout, op_hlast, op_rseg, op_cseg = 0, 0, 0, 0, 0, 0
        rseg_of = self._field("rdrv_seg")
        cseg_of = self._field("cdrv_seg")

        def tick(uop, hin, hin_data, hout, hlast):
            nonlocal op_hin, op_hin_data, op_hout, op_hlast, op_rseg, op_cseg, cycles
            rows, cols = self._cycle(uop, op_hin, op_hin_data, op_rseg, op_cseg)
            if op_hout:
                vals = rows if op_hout == HostDir.ROW else cols
                data = 0
                for i, v in enumerate(vals):
                    data |= v[0] << (i * self.w)   # each bus sampled at position 0
                out.append(Beat(data, bool(op_hlast)))
            op_hin, op_hin_data, op_hout, op_hlast = hin, hin_data, hout, hlast
            op_rseg, op_cseg = rseg_of(uop), cseg_of(uop)
            cycles += 1

        for _ in range(START_LATENCY_CYCLES):
            tick(nop, 0, 0, 0, 0)
        n = 0
        for issued in self.seq.iter_run(start_pc, max_instructions):
            data = 0
            if issued.hin:
                if hin_pos >= len(host_in):
                    raise ValueError(f"program consumed more host input beats than the {len(host_in)} given "
                                     f"(at pc {issued.pc})")
                data = host_in[hin_pos]
                hin_pos += 1
            tick(issued.uop, issued.hin, data, issued.hout, issued.hlast)
            n += 1
        # drain: DRAIN state lasts fpu_latency + 1 cycles after the HALT's issue cycle
        for _ in range(self.cfg.fpu_latency + 1):
            tick(nop, 0, 0, 0, 0)
        self.counters["cycles"] += cycles
        self.counters["instructions"] += n
        self.counters["host_in_beats"] += hin_pos
        self.counters["host_out_beats"] += len(out)
        for k in self.counters:
            self.counters[k] &= self.cmask
        delta = {k: (self.counters[k] - before[k]) & self.cmask for k in self.names}
        return RunResult(out=out, cycles=cycles, instructions=n, counters=delta)

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
                need = self._count_hin(arg0)
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

    def _count_hin(self, start_pc: int) -> int:
        """Host input beats the program consumes (a dry run of the sequencer)."""
        n = 0
        last = None
        for issued in self.seq.iter_run(start_pc):
            n += bool(issued.hin)
            last = issued.pc
        self._last_pc = last
        return n
