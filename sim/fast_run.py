"""One ``RUN`` of a :class:`sim.fast_model.FastModel`, executed window by window:
:class:`FastRun`.

``FastModel.run`` is ``FastRun(...)``, :meth:`FastRun.advance` to the end, then
:meth:`FastRun.finish`. The chip's fast engine (:meth:`sim.chip_model.ChipModel._run_fast`)
drives the runs of all its cores together, window of cycles by window: the ring input
beats of a window are filled in when the previous core has produced them
(:meth:`FastRun.fill_ring`, :meth:`FastRun.ring_out_now`), and a window is run again from
a :meth:`FastRun.snapshot` when the beats it consumed change. A window boundary is only a
cut between regions of the loop-level engine (which are exact at any cycle), so the
results are those of one run from start to end.
"""

from __future__ import annotations

import copy

import numpy as np

from arch.lanes import LaneBeats, unpack_beats
from sim.core_model import Beat, RunResult
from sim.fast_common import Counters, gc_paused

__all__ = ["FastRun", "copy_state", "copy_counters"]


def copy_state(st):
    """A copy of a :class:`sim.fast_common.VecState` that later cycles cannot modify
    (arrays and lists copied; micro-op templates and pipeline entries are never
    modified in place, so they are shared)."""
    s = copy.copy(st)
    for name, v in vars(st).items():
        if isinstance(v, np.ndarray):
            setattr(s, name, v.copy())
        elif isinstance(v, list):
            setattr(s, name, list(v))
    return s


def copy_counters(ctr):
    """A copy of a :class:`sim.fast_common.Counters` (its arrays are added to in place)."""
    c = copy.copy(ctr)
    c.fma, c.row_hops, c.col_hops = ctr.fma.copy(), ctr.row_hops.copy(), ctr.col_hops.copy()
    c.ev = dict(ctr.ev)
    return c


class FastRun:
    """A run of ``model`` from ``start_pc`` (the arguments of :meth:`FastModel.run`).
    ``ring_in=None``: the ring input beats are given later, per window
    (:meth:`fill_ring`; zeros until then)."""

    @gc_paused
    def __init__(self, model, start_pc: int = 0, host_in=(), max_instructions: int = 1_000_000, ring_in=()):
        m = self.m = model
        cfg = m.cfg
        trace, allpcs, offs = m._trace(start_pc, max_instructions)
        tm, static, sel, hin = m._pc_tables(trace.pcs)
        rin_f, hout_f, rout_f = m.ring_flags(trace.pcs)
        hsteps = np.nonzero(hin[allpcs])[0]
        from_ring = rin_f[allpcs[hsteps]]
        n_ring = int(np.count_nonzero(from_ring))
        spad = None
        if cfg.spad_kib:
            spad = m._spad_plan(trace, allpcs, hsteps, hout_f)
        from_spad = spad.from_spad if spad is not None else np.zeros(len(hsteps), bool)
        n_spad = int(np.count_nonzero(from_spad))
        from_host = ~from_ring & ~from_spad
        n_host = len(hsteps) - n_ring - n_spad
        lanes_in = None
        if isinstance(host_in, LaneBeats) and not (n_ring or n_spad) and host_in.lanes.shape[1] == m.nr:
            lanes_in = host_in.exact_lanes(cfg.fmt.np_uint)     # the lanes themselves: no ints needed
        host_in = host_in if lanes_in is not None else list(host_in)
        ring_in = [0] * n_ring if ring_in is None else list(ring_in)
        for name, given, need, which in (("host", host_in, n_host, from_host), ("ring", ring_in, n_ring, from_ring)):
            if need > len(given):
                pc = int(allpcs[hsteps[np.nonzero(which)[0][len(given)]]])
                raise ValueError(f"program consumed more {name} input beats than the {len(given)} given "
                                 f"(at pc {pc})")
        if n_ring or n_spad:      # one beat list in issue order: host, ring (and scratchpad) beats
            merged, hi, ri = [], 0, 0
            for f, g in zip(from_ring.tolist(), from_spad.tolist()):
                if g:
                    merged.append(0)          # filled from the scratchpad when the run gets there
                elif f:
                    merged.append(ring_in[ri])
                    ri += 1
                else:
                    merged.append(host_in[hi])
                    hi += 1
            host_in = merged
        if lanes_in is not None:
            self.lanes = np.array(lanes_in[:len(hsteps)])
        else:
            self.lanes = unpack_beats(host_in[:len(hsteps)], m.nr, m.w, cfg.fmt.np_uint)
        self.lane_of = np.full(len(allpcs), -1, np.int64)
        self.lane_of[hsteps] = np.arange(len(hsteps))
        #: the lanes holding ring beats, and the RUN cycle each is consumed in
        self.ring_rows = np.nonzero(from_ring)[0]
        self.ring_cyc = hsteps[self.ring_rows]
        self.trace, self.allpcs, self.offs = trace, allpcs, offs
        self.hout_f, self.rout_f, self.spad = hout_f, rout_f, spad
        self.n_host, self.n_ring, self.n_spad = n_host, n_ring, n_spad
        # the output beats (in the order the engines produce them, scratchpad beats
        # included) that go to the ring
        osteps = np.nonzero(hout_f[allpcs])[0]
        to_ring = rout_f[allpcs[osteps]]
        if spad is not None:
            to_ring = to_ring & ~spad.out_is_spad
        self.out_ring = np.nonzero(to_ring)[0]
        #: the RUN cycle of each ring output beat's instruction
        self.out_ring_cyc = osteps[self.out_ring]
        self.ring_out: list = []
        self.ctr = Counters(cfg)
        self.out: list = []
        self.t, self.T = 0, len(allpcs)
        self.cycle_engine = m.engine == "cycle" or cfg.exec_stage
        if spad is not None:
            spad.bind(m.state, self.lanes, self.out)
            m._spad_run = spad
        if not self.cycle_engine:
            from sim.fast_flow import FlowRunner

            if m._flow is None:
                m._flow = FlowRunner(m, max_elems=m.max_region_elems, verify=m.verify)
            m._flow.begin(trace, allpcs, offs, self.lanes, self.lane_of, self.ctr, self.out)

    # -- windows ---------------------------------------------------------------------------
    @gc_paused
    def advance(self, b: int) -> None:
        """Execute the run's cycles up to ``b`` (at most its end)."""
        a, b = self.t, min(b, self.T)
        if b <= a:
            return
        m = self.m
        with np.errstate(all="ignore"):
            if self.cycle_engine:
                # the loop-level engine models the default PE timing only (no execute
                # stage; the distribution stage only shifts the PE side's cycles)
                m._run_cycles(a, b, self.allpcs, self.offs, self.lanes, self.lane_of, self.ctr, self.out)
            else:
                m._flow.advance(a, b)
        self.t = b

    def ring_range(self, a: int, b: int) -> tuple:
        """``(i, j)``: the ring input beats ``i .. j - 1`` are consumed in cycles ``[a, b)``."""
        i, j = np.searchsorted(self.ring_cyc, [a, b])
        return int(i), int(j)

    def fill_ring(self, i: int, beats) -> None:
        """Ring input beats ``i, i + 1, ...`` (ints)."""
        if len(beats):
            self.lanes[self.ring_rows[i:i + len(beats)]] = unpack_beats(beats, self.m.nr, self.m.w,
                                                                         self.lanes.dtype)

    def ring_out_now(self) -> list:
        """The ring output beats produced so far (ints; the list grows as the run advances)."""
        k = int(np.searchsorted(self.out_ring, len(self.out)))
        if k > len(self.ring_out):
            self.ring_out += [int(self.out[i][0]) for i in self.out_ring[len(self.ring_out):k].tolist()]
        elif k < len(self.ring_out):
            del self.ring_out[k:]
        return self.ring_out

    def snapshot(self):
        """The run's progress and the model's state (for :meth:`restore`)."""
        sp = self.spad
        m = self.m
        stats = dict(m._flow.stats) if not self.cycle_engine else None
        dma = (sp.dma.pos, dict(m.dram.beats)) if sp is not None and sp.dma is not None else None
        return (self.t, copy_state(m.state), copy_counters(self.ctr), len(self.out),
                (sp.applied, sp.w_pos) if sp is not None else None, stats, dma)

    def restore(self, snap) -> None:
        """Back to a :meth:`snapshot` (the snapshot stays usable)."""
        t, st, ctr, n_out, sp_pos, stats, dma = snap
        m = self.m
        self.t = t
        m.state = copy_state(st)
        c = copy_counters(ctr)
        self.ctr.__dict__.update(c.__dict__)          # the engines hold this object
        del self.out[n_out:]
        del self.ring_out[int(np.searchsorted(self.out_ring, n_out)):]
        if self.spad is not None:
            self.spad.st = m.state
            self.spad.applied, self.spad.w_pos = sp_pos
        if dma is not None:        # the DMA transfers moved since, and the DRAM they wrote
            self.spad.dma.pos = dma[0]
            m.dram.beats = dict(dma[1])
        if stats is not None:
            m._flow.stats.clear()
            m._flow.stats.update(stats)

    # -- the end ---------------------------------------------------------------------------
    @gc_paused
    def finish(self) -> RunResult:
        """The run's result (after :meth:`advance` to its end), as :meth:`FastModel.run`."""
        m, cfg = self.m, self.m.cfg
        assert self.t == self.T, (self.t, self.T)
        trace, allpcs, spad, ctr = self.trace, self.allpcs, self.spad, self.ctr
        hout_f, rout_f = self.hout_f, self.rout_f
        out = self.out
        if self.cycle_engine:
            m.stats = {"cycle_engine_cycles": len(allpcs), "flow_cycles": 0, "regions": 0}
        else:
            m.stats = m._flow.stats
        if spad is not None:
            spad.st = m.state
            spad.apply()
            m._spad_run = None
            ctr.spad_rd, ctr.spad_wr = self.n_spad, len(spad.w_addr)
            if spad.dma is not None:
                spad.dma.move(m)
                ctr.dma = spad.dma.counters()
            if len(spad.w_addr):
                keep = ~spad.out_is_spad
                out = [b for b, k in zip(out, keep.tolist()) if k]
        for k in ("flow_cycles", "cycle_engine_cycles", "regions"):
            m.total_stats[k] += m.stats.get(k, 0)
        m.total_stats["runs"] += 1
        n = int(np.count_nonzero(trace.pcs != cfg.ucode_depth))   # JUMP refills are no instructions
        cycles = spad.dma.cycles if spad is not None and spad.dma is not None else len(allpcs)
        ctr.cycles = cycles
        ctr.instructions = n
        ring_out = []
        osteps = np.nonzero(hout_f[allpcs])[0]
        if spad is not None and len(spad.w_addr):
            osteps = osteps[~spad.out_is_spad]
        if len(osteps) and rout_f[allpcs[osteps]].any():
            to_ring = rout_f[allpcs[osteps]].tolist()
            assert len(to_ring) == len(out)
            ring_out = [int(b[0]) for b, r in zip(out, to_ring) if r]
            out = [b for b, r in zip(out, to_ring) if not r]
        ctr.host_in = self.n_host
        ctr.host_out = len(out)
        ctr.ring_in = self.n_ring
        ctr.ring_out = len(ring_out)
        m._last_pc = trace.last_pc
        delta = ctr.as_dict()
        for k in m.counters:
            m.counters[k] = (m.counters[k] + delta[k]) & m.cmask
        delta = {k: v & m.cmask for k, v in delta.items()}
        if getattr(m, "probe", None) is not None:       # sim.movement: the run's cycles classified
            m.probe.fast_run(self, cycles)
        beats = [Beat(d, last) for d, last in out]
        return RunResult(out=beats, cycles=cycles, instructions=n, counters=delta, ring_out=ring_out)
