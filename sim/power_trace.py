"""Per-window power of a training step: the counters of every RUN sampled at window
boundaries on the fast chip engine, and the modelled power of each window.

:func:`fast_window_counters` runs one chip ``RUN`` on the fast engine exactly as
:meth:`sim.chip_model.ChipModel.run` does (the ring windows of
:func:`sim.chip_model.ring_windows`, each run to its ring-data fixed point), with every
window also cut at the sampling boundaries, and reads the cores' cumulative counters at
each boundary. A cut is only a cut between loop-level regions (exact at any cycle), so
the run's results are unchanged; the normal path (:meth:`ChipModel.run`) is not touched.
:func:`cycle_window_counters` samples the per-cycle chip model (``engine="cycle"``) at the
same boundaries: the reference the tests hold the fast sampling equal to.

What a sample at boundary ``b`` holds, in both engines: the events of the RUN's clocks
``0 .. b - 1`` (the PE events in the cycle they happen, FMA write-backs included; an
instruction, a host or ring input beat in its issue cycle; an output, ring output or
scratchpad beat when the stream takes it), and ``cycles = b``.

:class:`TracingSession` is a :class:`sim.sessions.ChipSession` that keeps a timeline:
chip phases (all cores from the same cycle), host phases (the active cores one after
another, the others' RUNs, a HALT each, at the phase's start), and idle stretches
(:meth:`TracingSession.idle`: the chip halted, leaking). It accumulates the counters of
every window of ``window`` cycles of that timeline, and of every RUN in bins of ``bin``
cycles from its start (the profile the power-cap planner reads, :mod:`sim.power_cap`).
Windows are turned into watts by :func:`window_watts`: every energy of
:func:`sim.power.report_from_counters` in the *everything* scope (leakage of every core
over the window included).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from arch.counters import SUMMED_EVENTS, counter_names
from sim.chip_model import ChipModel
from sim.sessions import ChipSession

__all__ = ["fast_window_counters", "cycle_window_counters", "TracingSession", "window_watts", "dynamic_pj",
           "leakage_watts", "add_counters"]


def add_counters(a: dict, b: dict, sign: int = 1) -> dict:
    """``a + sign * b`` key by key (``a`` updated and returned)."""
    for k, v in b.items():
        a[k] = a.get(k, 0) + sign * int(v)
    return a


def _diff(b: dict, a: dict) -> dict:
    return {k: int(v) - int(a.get(k, 0)) for k, v in b.items()}


class _FastSampler:
    """Cumulative counters of a :class:`sim.fast_run.FastRun` at its current cycle."""

    def __init__(self, run):
        m, cfg = run.m, run.m.cfg
        self.run, self.cfg = run, cfg
        depth = cfg.ucode_depth
        lag = 1 + cfg.dist_delay          # the PEs see in cycle t what issued in t - lag
        ap = run.allpcs
        # issue clock of each RUN-state step: instructions (JUMP refills and NOPs excluded)
        self.ins_clk = np.nonzero(ap != depth)[0] - lag
        hsteps = np.nonzero(run.lane_of >= 0)[0]
        rin_f = m.ring_flags(run.trace.pcs)[0]
        from_ring = rin_f[ap[hsteps]]
        spad = run.spad
        from_spad = spad.from_spad if spad is not None else np.zeros(len(hsteps), bool)
        self.ring_clk = hsteps[from_ring] - lag
        self.host_clk = hsteps[~from_ring & ~from_spad] - lag
        self.spad_clk = hsteps[from_spad] - lag + 1       # read in the PEs' first stage
        self.out_ring = np.zeros(0, bool)
        osteps = np.nonzero(run.hout_f[ap])[0]
        self.is_ring = run.rout_f[ap[osteps]].astype(bool)
        self.is_spad = spad.out_is_spad if spad is not None else np.zeros(len(osteps), bool)
        if spad is not None:
            self.is_ring = self.is_ring & ~self.is_spad

    def sample(self) -> dict:
        r, cfg = self.run, self.cfg
        t = r.t
        c = r.ctr
        d = dict.fromkeys(counter_names(cfg), 0)
        d["cycles"] = t
        for p in range(cfg.nr * cfg.nr):
            d[f"fma[{p}]"] = int(c.fma[p])
        for k in SUMMED_EVENTS:
            d[k] = int(c.ev[k])
        for i in range(cfg.nr):
            d[f"row_hops[{i}]"] = int(c.row_hops[i])
            d[f"col_hops[{i}]"] = int(c.col_hops[i])
        d["instructions"] = int(np.count_nonzero(self.ins_clk < t))
        d["host_in_beats"] = int(np.count_nonzero(self.host_clk < t))
        d["ring_in_beats"] = int(np.count_nonzero(self.ring_clk < t))
        n_out = len(r.out)
        ring = int(np.count_nonzero(self.is_ring[:n_out]))
        spad = int(np.count_nonzero(self.is_spad[:n_out]))
        d["ring_out_beats"] = ring
        d["host_out_beats"] = n_out - ring - spad
        if cfg.spad_kib:
            d["spad_rd_beats"] = int(np.count_nonzero(self.spad_clk < t))
            d["spad_wr_beats"] = spad
        return d


def _cuts(T: int, points) -> list:
    """The sampling points inside a run of ``T`` cycles (``points``: cycles, or a
    function of ``T`` giving them)."""
    if callable(points):
        points = points(T)
    return sorted({int(p) for p in points if 0 < p < T})


class _Hook:
    """:attr:`sim.chip_model.ChipModel.window_hook`: the fast engine's windows cut at
    ``points`` too, the cores' counters summed at each point and at the run's end."""

    def __init__(self, points):
        self.points = points
        self.samples, self.cuts = [], []

    def split(self, windows, runs):
        if any(r.spad is not None and r.spad.dma is not None and r.spad.dma.stalls for r in runs):
            raise NotImplementedError("per-window counters of runs with DMA stalls (cores with DRAM)")
        T = max(r.T for r in runs)
        self.want = set(_cuts(T, self.points) + [T])
        self.samplers = [_FastSampler(r) for r in runs]
        out = []
        for a, b in windows:
            pts = [a] + [x for x in sorted(self.want) if a < x < b] + [b]
            out += list(zip(pts[:-1], pts[1:]))
        return out

    def after(self, b, runs):
        if b in self.want:
            tot: dict = {}
            for s in self.samplers:
                add_counters(tot, s.sample())
            tot["cycles"] = b
            self.samples.append(tot)
            self.cuts.append(b)


def fast_window_counters(chip: ChipModel, pcs, hin, points, ks=None, max_instructions: int = 1_000_000):
    """Run one chip RUN of ``chip`` (fast engine; ``pcs``, ``hin``: one entry per core;
    ``ks``: the cores on the ring, default all) and sample it at the RUN cycles
    ``points``. Returns ``(ChipRunResult, samples, cuts)``: ``samples[j]`` the counters
    summed over the cores at ``cuts[j]`` (every point inside the run, in order, then the
    run's end)."""
    assert chip.engine == "fast"
    ks = list(range(chip.n)) if ks is None else list(ks)
    hook = _Hook(points)
    chip.window_hook = hook
    try:
        rr = chip.run_ring(ks, pcs, hin, max_instructions)
    finally:
        chip.window_hook = None
    return rr, hook.samples, hook.cuts


def fast_core_counters(model, start, data, points, max_instructions: int = 1_000_000):
    """One core's RUN on its :class:`sim.fast_model.FastModel` (a host phase), sampled as
    :func:`fast_window_counters`: ``(RunResult, samples, cuts)``."""
    run = model.start_run(start, data, max_instructions, ring_in=())
    s = _FastSampler(run)
    cuts = _cuts(run.T, points) + [run.T]
    samples = []
    for b in cuts:
        run.advance(b)
        samples.append(s.sample())
    return run.finish(), samples, cuts


def cycle_window_counters(chip: ChipModel, pcs, hin, points, max_instructions: int = 1_000_000, ks=None):
    """The reference: one chip RUN on the per-cycle chip model (``engine="cycle"``; the
    cores ``ks`` on their own ring, default all), every core's counters read after each
    clock in ``points`` and at the end (the :class:`sim.core_model.CoreRun` state: PE
    events as they happen, instructions and beats so far). Returns ``(samples, cuts,
    results)``: as :func:`fast_window_counters`, and the cores' ``RunResult``."""
    assert chip.engine == "cycle"
    from sim.core_model import CoreRun
    from sim.chip_model import _RingFifo

    ks = list(range(chip.n)) if ks is None else list(ks)
    n, depth = len(ks), chip.cfg.ring_fifo_depth
    fifos = [_RingFifo() for _ in range(n)]

    def room(i):
        nxt = fifos[(i + 1) % n]
        return lambda run: nxt.level0 + run.rout_pending < depth

    runs = [CoreRun(chip.cores[c], pcs[c], hin[c], fifos[i], max_instructions, room(i)) for i, c in enumerate(ks)]
    base = [dict(chip.cores[c].counters) for c in ks]
    pts = set(int(p) for p in points)
    samples, cuts = [], []

    def sample(t):
        tot: dict = {}
        for i, r in enumerate(runs):
            d = _diff(chip.cores[ks[i]].counters, base[i])
            d["instructions"] = r.n
            d["host_in_beats"], d["ring_in_beats"] = r.hin_pos, r.rin_pos
            d["host_out_beats"], d["ring_out_beats"] = len(r.out), len(r.ring_out)
            if chip.cfg.spad_kib:
                d["spad_rd_beats"], d["spad_wr_beats"] = r.spad_rd, r.spad_wr
            add_counters(tot, d)
        tot["cycles"] = t
        samples.append(tot)
        cuts.append(t)

    t = 0
    while not all(r.done for r in runs):
        for f in fifos:
            f.level0 = len(f.q)
        live = [r for r in runs if not r.done]
        for r in live:
            r.cycle_pe()
        if chip.cfg.dist_stage:
            _push(runs, fifos)
        for r in live:
            r.cycle_head()
        if not chip.cfg.dist_stage:
            _push(runs, fifos)
        t += 1
        if t in pts:
            sample(t)
        if t > 50 * max_instructions:          # pragma: no cover
            raise RuntimeError("the run does not end")
    if not cuts or cuts[-1] != t:
        sample(t)
    return samples, cuts, [r.finish() for r in runs]


def _push(runs, fifos) -> None:
    n = len(runs)
    for k, r in enumerate(runs):
        if r.pushed:
            fifos[(k + 1) % n].q.extend(r.pushed)


# -- energy of a window ---------------------------------------------------------------------
def dynamic_pj(cfg, counters: dict, n_cores: int, ucode_words=None) -> float:
    """Every energy of :func:`sim.power.report_from_counters` but leakage (pJ) of ``counters``."""
    from sim.power import report_from_counters

    c = dict.fromkeys(counter_names(cfg), 0)
    c.update(counters)
    c["cycles"] = 0
    rep = report_from_counters(cfg, c, n_cores=n_cores, ucode_words=ucode_words)
    return float(sum(v for k, v in rep.energy_pj.items() if k != "leakage"))


def leakage_watts(cfg, n_cores: int, ucode_words=None) -> float:
    """The chip's leakage power (W): the floor no schedule goes below."""
    from sim.power import report_from_counters

    z = dict.fromkeys(counter_names(cfg), 0)
    z["cycles"] = 1_000_000
    rep = report_from_counters(cfg, z, n_cores=n_cores, ucode_words=ucode_words)
    return rep.energy_pj["leakage"] * 1e-12 / rep.seconds


def window_watts(cfg, windows: list, lengths: list, n_cores: int, ucode_words=None) -> np.ndarray:
    """The modelled power (W, *everything* scope) of each window: its counters' dynamic
    energy plus the chip's leakage over its length, over its length."""
    leak = leakage_watts(cfg, n_cores, ucode_words)
    sec = np.asarray(lengths, np.float64) / (cfg.clock_mhz * 1e6)
    dyn = np.array([dynamic_pj(cfg, w, n_cores, ucode_words) for w in windows]) * 1e-12
    return dyn / sec + leak


class TracingSession(ChipSession):
    """A :class:`ChipSession` (fast engine) on a timeline, its counters sampled per
    window of ``window`` cycles (:attr:`windows`, from :attr:`start` on) and per RUN in
    bins of ``bin`` cycles from the RUN's start (:attr:`runs`: ``(name, kind, start,
    cycles, [bin counters])``; ``bin=None``: none). :meth:`idle` halts the chip for some
    cycles (the host waits). :attr:`tracing` off (the default until :meth:`begin`) runs
    phases as a :class:`ChipSession` does, off the timeline. ``backend="model"``: the
    per-cycle chip model, sampled by :func:`cycle_window_counters` (the reference)."""

    #: the per-cycle reference (``backend="model"``) samples RUNs of at most this many cycles
    MODEL_HORIZON = 1_000_000

    def __init__(self, cfg, window: int, bin: int | None = None, backend: str = "fast"):
        super().__init__(cfg, backend)
        self.window, self.bin = int(window), bin
        self.tracing = False
        self.t = 0
        self.windows: dict = defaultdict(dict)
        self.runs: list = []

    def begin(self) -> None:
        """Start the timeline at cycle 0 (after the weights' loading)."""
        self.tracing, self.t = True, 0
        self.windows = defaultdict(dict)
        self.runs = []

    def idle(self, cycles: int) -> None:
        if self.tracing and cycles > 0:
            self.runs.append(("idle", "idle", self.t, int(cycles), []))
            self.t += int(cycles)

    def _points(self, t0, T):
        """RUN cycles at which a RUN starting at ``t0`` is sampled (up to ``T``)."""
        N = self.window
        pts = list(range(N - t0 % N, T, N))
        if self.bin:
            pts += list(range(self.bin, T, self.bin))
        return pts

    def _book(self, name, kind, t0, samples, cuts) -> None:
        """Spread a RUN's samples over the windows and its bins."""
        N = self.window
        prev, pc = {}, 0
        bins = defaultdict(dict)
        for s, c in zip(samples, cuts):
            d = _diff(s, prev)
            d.pop("cycles", None)
            add_counters(self.windows[(t0 + pc) // N], d)
            if self.bin:
                add_counters(bins[pc // self.bin], d)
            prev, pc = s, c
        T = cuts[-1]
        self.runs.append((name, kind, t0, T, [bins[j] for j in range(-(-T // self.bin))] if self.bin else []))

    def run(self, images, data=None, name: str = "", start: int = 0, active=None, run_data=None):
        if not self.tracing:
            return super().run(images, data, name, start, active, run_data)
        n = self.cfg.cores
        load_cyc = self.load(images)
        if load_cyc:            # the chip halted while the host streams the LOADs (no RUN counters)
            self.runs.append(("load", "idle", self.t, load_cyc, []))
            self.t += load_cyc
        self.model.clear_counters()
        if data is not None or active is not None:
            data = data or [[] for _ in range(n)]
            act = list(range(n)) if active is None else list(active)
            res = [None] * n
            t0 = self.t
            for k in [k for k in range(n) if k not in act] + act:
                start_t = self.t if k in act else t0
                if self.backend == "model":
                    samples, cuts, rs = cycle_window_counters(self.model, [start] * n, data,
                                                              self._points(start_t, self.MODEL_HORIZON), ks=[k])
                    r = rs[0]
                else:
                    r, samples, cuts = fast_core_counters(self.model.cores[k], start, data[k],
                                                          lambda T, t0=start_t: self._points(t0, T))
                self._book(name, "host" if k in act else "host-side", start_t, samples, cuts)
                res[k] = r
                if k in act:
                    self.t += r.cycles
            return res, sum(res[k].cycles for k in act) + load_cyc
        pcs = [start] * n
        hin = [()] * n if run_data is None else [list(d) for d in run_data]
        if self.backend == "model":
            samples, cuts, res = cycle_window_counters(self.model, pcs, hin,
                                                       self._points(self.t, self.MODEL_HORIZON))
            cycles = max(r.cycles for r in res)
        else:
            rr, samples, cuts = fast_window_counters(self.model, pcs, hin, lambda T: self._points(self.t, T))
            res, cycles = rr.cores, rr.cycles
        self._book(name, "chip", self.t, samples, cuts)
        self.t += cycles
        return res, cycles + load_cyc

    def window_list(self) -> tuple:
        """``(counters per window, lengths)`` of the timeline so far (the last window
        partial)."""
        n = -(-self.t // self.window)
        lens = [min(self.window, self.t - i * self.window) for i in range(n)]
        return [dict(self.windows.get(i, {})) for i in range(n)], lens
