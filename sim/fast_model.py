"""Cycle-exact fast model of a core: :class:`FastModel`.

Same interface and results as :class:`sim.core_model.CoreModel` (``load``, ``run``,
``process`` of a host beat stream, ``counters``, state accessors) - the same output
beats, the same counter values, the same PE memories and registers bit for bit - but
vectorized over the PEs and executed at the level of the program's loops:

1. :func:`sim.fast_trace.issue_trace` turns the microcode into the issue trace (pc and
   AGU values of every issued instruction; structured loop nests are expanded with
   numpy, not stepped).
2. The trace, framed by the start-latency cycle and the HALT drain exactly as the
   RTL's RUN state, is cut into regions along its loop structure
   (:mod:`sim.fast_flow`). A region is executed by the loop-level dataflow engine
   (layer 2: every operand of every instruction occurrence resolved to the write that
   produced it, all occurrences of an instruction computed at once, accumulation
   chains with ``np.add.accumulate`` in their exact order), or, when its dependency
   graph has a cycle other than an accumulation chain, by the per-cycle engine
   (layer 1, :mod:`sim.fast_cycle`), which is exact for any program.

See ``docs/simulators.md`` for what each layer accepts, the host-side assumptions and
the measured speed.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from arch.microop import uop_fields
from arch.host import Cmd
from arch.lanes import unpack_beats
from arch.counters import counter_names
from sim.core_model import Beat, RunResult, pe_start_cycles
from sim.fast_common import OFF_FIELDS, Arith, Geometry, Tmpl, VecState, offset_mask
from sim.fast_cycle import CycleEngine
from sim.fast_trace import issue_trace
from sim.seq_model import SequencerModel, spad_pointer_trace
from sim.dma_model import Dram
from sim.fast_dma import dma_plan
from arch.isa import instr_layout

__all__ = ["FastModel", "ENGINES"]

#: ``engine`` argument of :class:`FastModel`
ENGINES = ("auto", "cycle")

#: process-wide caches: PE geometry per nr, micro-op templates per (nr, field layout)
_GEOMETRY: dict = {}
_TEMPLATES: dict = {}


#: per (configuration, microcode image, trace mode): decoded tables and issue traces
#: (FastModel._shared; LRU)
_SHARED: OrderedDict = OrderedDict()


class _ProgramKey:
    """A microcode image as a dictionary key (hash computed once, equality exact)."""

    __slots__ = ("words", "h")

    def __init__(self, words):
        self.words = tuple(words)
        self.h = hash(self.words)

    def __hash__(self):
        return self.h

    def __eq__(self, other):
        return isinstance(other, _ProgramKey) and self.h == other.h and self.words == other.words


class FastModel:
    """Cycle-exact fast model of one core (drop-in for :class:`~sim.core_model.CoreModel`).

    Parameters
    ----------
    cfg : ArchConfig
    engine : ``"auto"`` (loop-level dataflow engine with per-cycle fallback, the default)
        or ``"cycle"`` (per-cycle engine only). With ``cfg.exec_stage`` the per-cycle
        engine runs every cycle: the loop-level engine models the default timing only.
    structured_trace : bool
        Expand structured loops with numpy when building the issue trace (default);
        ``False`` steps the sequencer model for every instruction (tests use it to check
        the expansion).
    verify : bool
        Diagnosis: after every loop-level region, re-run its cycles on the per-cycle
        engine from the same entry state and raise
        :class:`sim.fast_flow.RegionMismatch` naming the region's cycles and the first
        difference (state element, counter or output beat).
    max_region_elems : int
        Upper bound on occurrence x PE elements of one region (memory use).
    max_instructions : int
        Instructions a ``RUN`` of :meth:`process` may issue before it is declared a
        runaway (``sim.seq_model.RunawayError``, as the core model; default 1 M).

    After a run, :attr:`stats` tells how many cycles each engine executed (and
    :attr:`total_stats` over all runs of the model).
    """

    def __init__(self, cfg, engine: str = "auto", structured_trace: bool = True, verify: bool = False,
                 max_region_elems: int = 1 << 22, max_instructions: int = 1_000_000):
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        self.cfg = cfg
        self.engine = engine
        self.structured_trace = structured_trace
        self.nr = cfg.nr
        self.P = cfg.nr * cfg.nr
        self.w = cfg.fmt.width
        self.wmask = (1 << self.w) - 1
        self.seq = SequencerModel(cfg)
        self.names = counter_names(cfg)
        self.counters = dict.fromkeys(self.names, 0)
        self.cmask = (1 << cfg.counter_bits) - 1
        self.instr_bits = instr_layout(cfg).size
        self.geo = _GEOMETRY.setdefault(cfg.nr, Geometry(cfg.nr)) if cfg.nr not in _GEOMETRY else _GEOMETRY[cfg.nr]
        self.arith = Arith(cfg.fmt)
        self._fields = uop_fields(*cfg.uop_key)
        self._offmask = offset_mask(cfg)
        self._off_pos = {n: (o, w) for n, o, w in self._fields if n in OFF_FIELDS}
        self._tmpl_cache: dict = _TEMPLATES.setdefault((cfg.nr,) + cfg.uop_key, {})
        self.nop = self.tmpl_of(0)
        self.state = VecState(cfg, self.nop)
        self.cycle_engine = CycleEngine(cfg, self.arith, self.geo)
        self._flow = None
        self.verify = verify
        self.max_region_elems = max_region_elems
        self.max_instructions = max_instructions
        self._prog = None
        self.stats: dict = {}
        #: engine statistics summed over every run of this model
        self.total_stats: dict = {"flow_cycles": 0, "cycle_engine_cycles": 0, "regions": 0, "runs": 0}
        self._pc_info = None
        self._ring_tab = None
        self._spad_tab = None
        self._info = None         # the tables shared with the models holding the same image (_shared)
        self._spad_run = None     # the scratchpad traffic of the run in progress (_SpadRun)
        #: the external DRAM behind the DMA engine (``cfg.dram_mib > 0``), else ``None``
        self.dram = Dram(cfg) if cfg.dram_mib else None

    # -- templates ----------------------------------------------------------------------
    def tmpl_of(self, uop_word: int, ctl=(0, 0, 0)) -> Tmpl:
        """The :class:`Tmpl` of a micro-op word (offset fields ignored) with host fields."""
        key = (uop_word & ~self._offmask, tuple(ctl))
        t = self._tmpl_cache.get(key)
        if t is None:
            w = key[0]
            fields = {n: (w >> o) & ((1 << wd) - 1) for n, o, wd in self._fields}
            t = Tmpl(self.geo, fields, key, ctl)
            self._tmpl_cache[key] = t
        return t

    # -- microcode --------------------------------------------------------------------------
    def load(self, words, addr: int = 0) -> None:
        self.seq.load(list(words), addr)
        self._pc_info = None
        self._ring_tab = None
        self._spad_tab = None
        self._prog = None
        self._info = None

    @property
    def program_key(self) -> "_ProgramKey":
        """The whole microcode memory (part of every compiled plan's cache key)."""
        if self._prog is None:
            self._prog = _ProgramKey(self.seq.mem)
        return self._prog

    def _shared(self) -> dict:
        """The decoded tables and issue traces of the loaded image, shared by every model
        of the configuration holding the same image (the cores of a chip running one
        program decode and trace it once): a function of the image alone."""
        if self._info is None:
            key = (self.cfg, self.program_key, self.structured_trace)
            info = _SHARED.get(key)
            if info is None:
                info = _SHARED[key] = {"traces": {}}
                while len(_SHARED) > 16:
                    _SHARED.popitem(last=False)
            else:
                _SHARED.move_to_end(key)
            self._info = info
        return self._info

    def clear_counters(self) -> None:
        self.counters = dict.fromkeys(self.names, 0)

    def _pc_tables(self, pcs=None):
        """Per microcode address: template, static offsets, AGU selectors, host fields.

        Filled lazily for the addresses in ``pcs`` (the run's trace)."""
        depth = self.cfg.ucode_depth
        if self._pc_info is None:
            info = self._shared()
            if "pc" not in info:
                tm = [None] * (depth + 1)
                tm[depth] = self.nop      # the virtual NOP "pc" of start-latency and drain cycles
                done = np.zeros(depth + 1, bool)
                done[depth] = True
                info["pc"] = ((tm, np.zeros((depth + 1, 4), np.int64), np.full((depth + 1, 4), -1, np.int64),
                               np.zeros(depth + 1, np.int64)), done)
            self._pc_info, self._pc_done = info["pc"]
        if pcs is not None:
            todo = np.unique(pcs)
            todo = todo[~self._pc_done[todo]]
            if len(todo):
                tm, static, sel, hin = self._pc_info
                am = (1 << self.cfg.addr_bits) - 1
                fpos = {self._off_pos[f][0]: i for i, f in enumerate(OFF_FIELDS)}
                mem, by_word, rows = self.seq.mem, {}, []
                for pc in todo.tolist():
                    w = mem[pc]
                    r = by_word.get(w)          # the same word at several addresses: decoded once
                    if r is None:
                        d = self.seq._decode(pc)
                        sr = [-1] * len(OFF_FIELDS)
                        for off, a in d.sels:
                            sr[fpos[off]] = a
                        r = by_word[w] = (self.tmpl_of(d.uop, (d.hin, d.hout, d.hlast)),
                                          [(d.uop >> self._off_pos[f][0]) & am for f in OFF_FIELDS], sr, d.hin)
                    tm[pc] = r[0]
                    rows.append(r)
                static[todo] = [r[1] for r in rows]
                sel[todo] = [r[2] for r in rows]
                hin[todo] = [r[3] for r in rows]
                self._pc_done[todo] = True
        return self._pc_info

    # -- RUN ----------------------------------------------------------------------------
    def _trace(self, start_pc, max_instructions):
        """(issue trace, pc per RUN cycle, offsets per RUN cycle) of a run from
        ``start_pc``: a function of the microcode and the start pc only, so cached."""
        traces = self._shared()["traces"]
        key = (start_pc, max_instructions)
        hit = traces.get(key)
        if hit is None:
            trace = issue_trace(self.seq, start_pc, max_instructions, self.structured_trace)
            hit = (trace, *self._steps(trace))
            if len(traces) >= 8:
                traces.pop(next(iter(traces)))
            traces[key] = hit
        return hit

    def _steps(self, trace):
        """Per cycle of the RUN state: pc (``ucode_depth`` = NOP) and SRAM offsets [T, 4]."""
        tm, static, sel, hin = self._pc_tables(trace.pcs)
        depth = self.cfg.ucode_depth
        am = (1 << self.cfg.addr_bits) - 1
        pcs = trace.pcs
        n_pre, n_post = pe_start_cycles(self.cfg), self.cfg.fpu_latency + 1
        T = n_pre + len(pcs) + n_post
        allpcs = np.full(T, depth, np.int64)
        allpcs[n_pre:n_pre + len(pcs)] = pcs
        offs = static[allpcs].copy()
        if len(pcs):
            s = sel[pcs]
            aguz = np.concatenate([trace.agu, np.zeros((len(pcs), 1), np.int64)], axis=1)
            add = np.take_along_axis(aguz, np.where(s >= 0, s, aguz.shape[1] - 1), axis=1)
            offs[n_pre:n_pre + len(pcs)] = (offs[n_pre:n_pre + len(pcs)] + add) & am
        return allpcs, offs

    def ring_flags(self, pcs=None):
        """Per microcode address (``ucode_depth`` = the virtual NOP): ``(rin, hout, rout)``
        flag arrays (``rin``: the ``hin`` beat comes from the ring; ``hout``: any stream
        output; ``rout``: it goes to the ring)."""
        depth = self.cfg.ucode_depth
        if getattr(self, "_ring_tab", None) is None:     # reset by every microcode load
            info = self._shared()
            if "ring" not in info:
                info["ring"] = (np.zeros(depth + 1, bool), np.zeros(depth + 1, bool),
                                np.zeros(depth + 1, bool), np.zeros(depth + 1, bool))
                info["ring"][3][depth] = True            # the virtual NOP has no flags
            self._ring_tab = info["ring"]
        rin, hout, rout, done = self._ring_tab
        if pcs is not None and len(pcs):
            todo = np.unique(pcs)
            todo = todo[~done[todo]]
            for pc in todo.tolist():
                d = self.seq._decode(pc)
                rin[pc], hout[pc], rout[pc] = bool(d.hin and d.rin), bool(d.hout), bool(d.hout and d.rout)
            done[todo] = True
        return rin, hout, rout

    def spad_flags(self, pcs=None):
        """Per microcode address (``ucode_depth`` = the virtual NOP): ``(sin, sout, sel,
        val)``: the stream input comes from / the output goes to the scratchpad; a
        ``SPAD_PTR``'s pointer selection (bit 0 read, bit 1 write) and value."""
        depth = self.cfg.ucode_depth
        if self._spad_tab is None:     # reset by every microcode load
            info = self._shared()
            if "spad" not in info:
                info["spad"] = (np.zeros(depth + 1, bool), np.zeros(depth + 1, bool), np.zeros(depth + 1, np.int64),
                                np.zeros(depth + 1, np.int64), np.zeros(depth + 1, bool))
                info["spad"][4][depth] = True            # the virtual NOP has no flags
            self._spad_tab = info["spad"]
        sin, sout, sel, val, done = self._spad_tab
        if pcs is not None and len(pcs):
            todo = np.unique(pcs)
            todo = todo[~done[todo]]
            for pc in todo.tolist():
                d = self.seq._decode(pc)
                sin[pc], sout[pc], sel[pc], val[pc] = bool(d.sin), bool(d.sout), d.spad_sel, d.spad_val
            done[todo] = True
        return sin, sout, sel, val

    def run(self, start_pc: int = 0, host_in=(), max_instructions: int = 1_000_000, ring_in=()) -> RunResult:
        """Execute from ``start_pc`` to HALT plus the drain, as the RTL's RUN command
        (same arguments and result as :meth:`sim.core_model.CoreModel.run`: ``ring_in``
        feeds the ``rin`` instructions, the result's ``ring_out`` holds the ``rout``
        beats)."""
        r = self.start_run(start_pc, host_in, max_instructions, ring_in)
        r.advance(r.T)
        return r.finish()

    def start_run(self, start_pc: int = 0, host_in=(), max_instructions: int = 1_000_000, ring_in=()):
        """A :class:`sim.fast_run.FastRun` of :meth:`run`'s arguments, to execute window by
        window (``ring_in=None``: its ring input beats given later, per window)."""
        from sim.fast_run import FastRun

        return FastRun(self, start_pc, host_in, max_instructions, ring_in)

    def _spad_plan(self, trace, allpcs, hsteps, hout_f):
        """The scratchpad traffic of a run (``None`` without any): addresses from the
        pointer traces, and which reads depend on writes of the same run."""
        sin_f, sout_f, sel, val = self.spad_flags(trace.pcs)
        pcs = trace.pcs
        dram = bool(self.cfg.dram_mib and len(pcs))
        if not len(pcs) or not (dram or sin_f[pcs].any() or sout_f[pcs].any()):
            return None
        mask = self.cfg.spad_depth - 1
        rd = spad_pointer_trace(sin_f[pcs], (sel[pcs] & 1) != 0, val[pcs], mask)
        wr = spad_pointer_trace(sout_f[pcs], (sel[pcs] & 2) != 0, val[pcs], mask)
        dma = dma_plan(self, trace, rd, wr, sin_f[pcs], sout_f[pcs], len(allpcs)) if dram else None
        if dma is None and not (sin_f[pcs].any() or sout_f[pcs].any()):
            return None
        return _SpadRun(self, allpcs, hsteps, hout_f, sin_f, sout_f, rd, wr, dma)

    def _run_cycles(self, t0, t1, allpcs, offs, lanes, lane_of, ctr, out, sync=True):
        """Per-cycle engine over cycles ``[t0, t1)`` of the RUN state."""
        sp = self._spad_run
        if sync and sp is not None:
            for a, b in sp.pieces(t0, t1):
                sp.sync(a, b)
                self._run_cycles(a, b, allpcs, offs, lanes, lane_of, ctr, out, sync=False)
            return
        tm = self._pc_tables()[0]
        eng = self.cycle_engine
        st = self.state
        for t in range(t0, t1):
            u = tm[allpcs[t]]
            k = lane_of[t]
            eng.tick(st, u, offs[t], lanes[k] if k >= 0 else None, ctr, out)

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
        """Consume a host input stream (ints or :class:`Beat`), return the output beats
        (the same protocol handling as :meth:`sim.core_model.CoreModel.process`)."""
        hw = self.cfg.host_width
        bpw = -(-self.instr_bits // hw)
        data = [b.data if isinstance(b, Beat) else int(b) for b in beats]
        out: list[Beat] = []
        self.run_data_beats: list[int] = []
        self.run_results: list[RunResult] = []
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
                self._pc_info = None
                self._ring_tab = None
                self._spad_tab = None
                self._prog = None
                self._info = None
            elif cmd == Cmd.RUN:
                trace = self._trace(arg0, self.max_instructions)[0]
                tm, static, sel, hin = self._pc_tables(trace.pcs)
                rin_f = self.ring_flags(trace.pcs)[0]
                sin_f = self.spad_flags(trace.pcs)[0]
                need = int(np.count_nonzero((hin[trace.pcs] != 0) & ~rin_f[trace.pcs] & ~sin_f[trace.pcs])) \
                    if len(trace.pcs) else 0
                res = self.run(arg0, data[i:i + need], self.max_instructions)
                i += need
                out += res.out
                self.run_data_beats.append(len(res.out))
                self.run_results.append(res)
                out.append(Beat(Cmd.RUN | (trace.last_pc << 4), True))
            elif cmd == Cmd.COUNTERS:
                out += self.counter_beats()
            elif cmd == Cmd.CLEAR:
                self.clear_counters()
            else:
                out.append(Beat(Cmd.ERROR | (cmd << 4), True))
        return out

    # -- state accessors --------------------------------------------------------------------
    def regs(self) -> np.ndarray:
        """Register files, ``[nr, nr, n_regs]`` bit patterns."""
        return self.state.rf.reshape(self.nr, self.nr, -1).copy()

    def memory(self, bank: str) -> np.ndarray:
        """SRAM bank ``"a"`` or ``"b"`` of every PE, ``[nr, nr, words]`` bit patterns."""
        m = self.state.mem_a if bank.lower() == "a" else self.state.mem_b
        return m.reshape(self.nr, self.nr, -1).copy()

    def ars(self) -> np.ndarray:
        return self.state.ar.reshape(self.nr, self.nr, -1).copy()

    def strides(self) -> np.ndarray:
        return self.state.stride.reshape(self.nr, self.nr, -1).copy()

    def read_ports(self) -> tuple[np.ndarray, np.ndarray]:
        """SRAM read-port output registers (A, B), ``[nr, nr]`` each."""
        return self.state.rd_a.reshape(self.nr, self.nr).copy(), self.state.rd_b.reshape(self.nr, self.nr).copy()

    def scratchpad(self) -> np.ndarray:
        """The scratchpad, ``[spad_depth, nr]`` lanes of each beat."""
        return self.state.spad.copy()

    def set_memory(self, bank: str, data) -> None:
        """Preload SRAM bank ``"a"``/``"b"`` of every PE from ``[nr, nr, n]`` bit patterns
        (words ``0..n-1``; a test and benchmark convenience, the host path is a program)."""
        m = self.state.mem_a if bank.lower() == "a" else self.state.mem_b
        data = np.asarray(data).reshape(self.P, -1)
        m[:, :data.shape[1]] = data


class _SpadRun:
    """Scratchpad reads and writes of one RUN of a :class:`FastModel`.

    Every access is known from the issue trace (address from the pointer traces, cycle).
    A ``sin`` issued in RUN cycle ``t`` (clocked into the PEs at ``t``) samples the
    scratchpad before the writes of cycle ``t``; a ``sout`` clocked in at ``u`` writes in
    its operand stage ``u + 1``. So the ``sin`` sees the ``sout`` iff ``u + 1 < t``. A
    ``sin`` that sees a write of the same run is *dependent*: the engines never execute
    a window of cycles with a dependent ``sin`` strictly inside (:meth:`pieces`), and
    before each window :meth:`sync` writes the beats the run has produced so far into
    the scratchpad and fills the window's ``sin`` lanes from it. At the end of the run
    :meth:`apply` writes the rest.
    """

    def __init__(self, model, allpcs, hsteps, hout_f, sin_f, sout_f, rd, wr, dma=None):
        pre = pe_start_cycles(model.cfg)
        self.m = model
        #: the run's DMA transfers (sim.fast_dma.DmaPlan), moved at their cuts
        self.dma = dma
        self.from_spad = sin_f[allpcs[hsteps]]
        r_idx = np.nonzero(self.from_spad)[0]                 # index into hsteps / lanes
        self.r_cyc = hsteps[r_idx]
        self.r_lane = r_idx
        self.r_addr = rd[self.r_cyc - pre]
        osteps = np.nonzero(hout_f[allpcs])[0]
        self.out_is_spad = sout_f[allpcs[osteps]]
        w_steps = osteps[self.out_is_spad]
        self.w_out = np.nonzero(self.out_is_spad)[0]          # index into the run's output beats
        self.w_cyc = w_steps
        self.w_addr = wr[w_steps - pre]
        # dependent reads: the latest write of the address with u + 1 < t
        last: dict = {}
        dep = []
        wi, nw = 0, len(self.w_cyc)
        wc, wa = self.w_cyc.tolist(), self.w_addr.tolist()
        for t, a in zip(self.r_cyc.tolist(), self.r_addr.tolist()):
            while wi < nw and wc[wi] + 1 < t:
                last[wa[wi]] = wi
                wi += 1
            if a in last:
                dep.append(t)
        if dma is not None:
            dep += dma.cuts
        self.cuts = np.unique(np.array(dep, np.int64))

    def bind(self, st, lanes, out):
        self.st, self.lanes, self.out = st, lanes, out
        self.applied = 0          # output beats of the run written to the scratchpad
        self.w_pos = 0            # scratchpad writes done

    def pieces(self, a, b):
        """``[a, b)`` cut at the dependent reads inside it."""
        c = self.cuts[(self.cuts > a) & (self.cuts < b)].tolist()
        pts = [a] + c + [b]
        return list(zip(pts[:-1], pts[1:]))

    def cut_points(self, a, b):
        return self.cuts[(self.cuts > a) & (self.cuts < b)].tolist()

    def apply(self):
        """Write the scratchpad beats among the output beats produced so far."""
        out, w = self.out, self.w_pos
        e = w + int(np.searchsorted(self.w_out[w:], len(out)))     # w_out ascends
        if e > w:
            spad = self.st.spad
            addr = self.w_addr[w:e]
            # in write order: of several writes to one address the last one stays
            last = len(addr) - 1 - np.unique(addr[::-1], return_index=True)[1]
            beats = [out[i][0] for i in self.w_out[w:e][last].tolist()]
            spad[addr[last]] = unpack_beats(beats, self.m.nr, self.m.w, spad.dtype)
        self.w_pos = e

    def sync(self, a, b):
        """Before the engines execute cycles ``[a, b)``: the scratchpad as the reads of
        the window see it, and their lanes."""
        self.st = self.m.state
        self.apply()
        if self.dma is not None:
            self.dma.move(self.m, a)
        i, j = np.searchsorted(self.r_cyc, [a, b])
        if j > i:
            self.lanes[self.r_lane[i:j]] = self.st.spad[self.r_addr[i:j]]


def core_state(model) -> dict:
    """Architectural state of every PE of a :class:`FastModel` or a CoreModel as arrays
    ``[nr, nr, ...]``: ``rf``, ``mem_a``, ``mem_b``, ``ar``, ``stride``, ``rd_a``, ``rd_b``."""
    if isinstance(model, FastModel):
        ra, rb = model.read_ports()
        return {"rf": model.regs(), "mem_a": model.memory("a"), "mem_b": model.memory("b"),
                "ar": model.ars(), "stride": model.strides(), "rd_a": ra, "rd_b": rb}
    cfg = model.cfg
    nr = cfg.nr
    ut = cfg.fmt.np_uint
    pes = [pe for row in model.pes for pe in row]

    def stack(f, dt):
        return np.array([f(pe) for pe in pes], dtype=dt).reshape(nr, nr, -1)

    return {"rf": stack(lambda pe: pe.regs(), ut), "mem_a": stack(lambda pe: pe.memory("a"), ut),
            "mem_b": stack(lambda pe: pe.memory("b"), ut), "ar": stack(lambda pe: pe.ars(), np.int64),
            "stride": stack(lambda pe: pe.strides(), np.int64),
            "rd_a": np.array([pe.rd_a for pe in pes], ut).reshape(nr, nr),
            "rd_b": np.array([pe.rd_b for pe in pes], ut).reshape(nr, nr)}
