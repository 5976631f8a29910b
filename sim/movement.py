"""Hidden and exposed data movement of a training step, cycle by cycle, on both chip
engines (``docs/simulators.md``, "Data movement: hidden and exposed").

Every cycle of a step is classified, per core, by a set of bits (:data:`BITS`):
``compute`` (the instruction the core issues in that cycle starts an FMA in at least one
PE; on the per-cycle engine, the PEs' ``fma`` events in its operand stage, attributed back),
``issue`` (it issues an instruction), and one bit per kind of data movement in progress
(:data:`KINDS`): ``ring`` (the issued instruction takes a ring beat in or sends one out),
``host`` (a host stream beat in or out), ``spad`` (a scratchpad beat read by ``sin`` or
written by ``sout``), ``dma`` (the core's DMA engine is busy with a DRAM transfer),
``ucode`` (the host streams a microcode LOAD into the core, between RUNs). A cycle with a
movement bit is *hidden* when it also has ``compute``, else *exposed*.

:class:`MovementSession` is a :class:`sim.sessions.ChipSession` that keeps, per core, the
histogram of these bit sets over the current step (:meth:`MovementSession.begin_step`):
the fast chip engine classifies each RUN from its issue trace, the DMA plan's stalls and
busy spans (:func:`fast_masks`); the per-cycle engine (``backend="model"``) records each
clock of its :class:`sim.core_model.CoreRun` (:class:`_CycleProbe`). The tests hold both
equal. :meth:`MovementSession.movement` gives the figures (:func:`figures`) of the step's
critical path and of every core, and their mean.
"""

from __future__ import annotations

import numpy as np

from sim.sessions import ChipSession
from sw.host_protocol import load_beat_count

__all__ = ["BITS", "KINDS", "MovementSession", "fast_masks", "figures", "summarize"]

#: the bit of each class of a cycle
BITS = {"compute": 1, "issue": 2, "ring": 4, "host": 8, "spad": 16, "dma": 32, "ucode": 64}
#: the kinds of data movement, in report order
KINDS = ("ring", "host", "spad", "dma", "ucode")
_NB = 128
_MOVE = sum(BITS[k] for k in KINDS)


def _pc_bits(m, ap) -> np.ndarray:
    """Per microcode address of :class:`sim.fast_model.FastModel` ``m`` (``ucode_depth``:
    no instruction) the bits its issue sets, filled for the addresses in ``ap`` (kept
    with the image's decoded tables)."""
    cfg = m.cfg
    depth = cfg.ucode_depth
    info = m._shared()
    if "movement" not in info:
        done = np.zeros(depth + 1, bool)
        done[depth] = True
        info["movement"] = (np.zeros(depth + 1, np.uint8), done)
    tab, done = info["movement"]
    todo = np.unique(ap[~done[ap]])
    if not len(todo):
        return tab
    tm, _, _, hin = m._pc_tables(todo)
    rin, hout, rout = m.ring_flags(todo)
    sin, sout = m.spad_flags(todo)[:2] if cfg.spad_kib else (np.zeros(depth + 1, bool),) * 2
    for pc in todo.tolist():
        b = BITS["issue"] | (BITS["compute"] if tm[pc].fma_on else 0)
        hi, si, so, ri, ro = bool(hin[pc]), bool(sin[pc]), bool(sout[pc]), bool(rin[pc]), bool(rout[pc])
        ho = bool(hout[pc])
        if (ri and not si) or (ro and not so):
            b |= BITS["ring"]
        if (hi and not ri and not si) or (ho and not ro and not so):
            b |= BITS["host"]
        if (hi and si) or (ho and so):
            b |= BITS["spad"]
        tab[pc] = b
    done[todo] = True
    return tab


def fast_masks(run, cycles: int) -> np.ndarray:
    """The bits of every cycle of a finished :class:`sim.fast_run.FastRun` of ``cycles``
    cycles (uint8 array): each instruction in its issue cycle (the trace step's RUN cycle
    less the PE lag, moved by the DMA stalls before it), the DMA engine's busy spans."""
    m, cfg = run.m, run.m.cfg
    ap = run.allpcs
    lag = 1 + cfg.dist_delay
    bits = _pc_bits(m, ap)[ap]
    idx = np.nonzero(bits)[0]
    clk = idx - lag
    dma = run.spad.dma if run.spad is not None else None
    if dma is not None and dma.stalls:
        clk = clk + dma.shift(idx)
    masks = np.zeros(cycles, np.uint8)
    masks[clk] = bits[idx]
    if dma is not None and dma.spans:
        d = np.zeros(cycles + 1, np.int64)
        for s, b in dma.spans:            # busy in 1-based cycles s + 1 .. s + b
            d[s] += 1
            d[min(s + b, cycles)] -= 1
        masks[np.cumsum(d[:cycles]) > 0] |= BITS["dma"]
    return masks


class _CycleProbe:
    """``CoreModel.probe`` of the per-cycle engine: each clock of a :class:`sim.core_model.CoreRun`
    classified from what the run did in it (the instruction it issued, the beats it took,
    the PEs' ``fma`` events of its operand stage, the DMA engine's busy counter); the bits
    of the finished run go to ``done(masks)``."""

    def __init__(self, cfg, done):
        self.lag = 1 + cfg.dist_delay
        self.exec_delay = cfg.exec_delay
        self.fma_keys = [f"fma[{p}]" for p in range(cfg.nr * cfg.nr)]
        self.done = done
        self.run = None

    def _fma(self, run) -> int:
        c = run.m.counters
        return sum(c[k] for k in self.fma_keys)

    def clock(self, run) -> None:
        if run is not self.run:          # a new RUN: its first clock
            self.run, self.masks, self.fma, self.dma_until = run, [], [], []
            self.n = self.hin = self.rin = self.busy = 0
            self.f0 = sum(run.before[k] for k in self.fma_keys)
        b = 0
        if run.n != self.n:
            b |= BITS["issue"]
            self.n = run.n
            _, hin, _, hout, _, rout = run.iss
            if run.rin_pos != self.rin:
                b |= BITS["ring"]
            if run.hin_pos != self.hin:
                b |= BITS["host"]
            if run.iss_sra is not None and hin:
                b |= BITS["spad"]
            if hout:
                b |= BITS["spad"] if run.iss_swa is not None else BITS["ring"] if rout else BITS["host"]
            self.rin, self.hin = run.rin_pos, run.hin_pos
        t = len(self.masks)
        self.masks.append(b)
        f = self._fma(run)
        self.fma.append(f - self.f0)
        self.f0 = f
        if run.dma is not None and run.dma.busy != self.busy:
            self.dma_until.append((t + 1, run.dma.busy - self.busy))   # busy in the next b clocks
            self.busy = run.dma.busy
        if run.done:
            self._finish()

    def _finish(self) -> None:
        T = len(self.masks)
        masks = np.array(self.masks, np.uint8)
        fma = np.array(self.fma, np.int64)
        comp = np.zeros(T, bool)
        d = self.lag + 1 + self.exec_delay     # the FMA enters the multiplier in the operand stage (+ execute stages)
        comp[:T - d] = fma[d:] > 0
        masks[comp] |= BITS["compute"]
        for s, b in self.dma_until:
            masks[s:s + b] |= BITS["dma"]
        self.run = None
        self.done(masks)


def figures(h) -> dict:
    """The figures of a histogram ``h`` of cycles by bit set: ``cycles``, ``compute``
    (cycles with an FMA issue), ``hidden`` / ``exposed`` (cycles with any data movement,
    with / without compute), ``compute_only``, ``other`` (neither), and per kind of
    :data:`KINDS` its ``cycles``, ``hidden`` and ``exposed``."""
    h = np.asarray(h)
    m = np.arange(len(h))
    comp, mov = (m & BITS["compute"]) != 0, (m & _MOVE) != 0
    f = {"cycles": h.sum(), "compute": h[comp].sum(), "hidden": h[comp & mov].sum(),
         "exposed": h[~comp & mov].sum(), "compute_only": h[comp & ~mov].sum(), "other": h[~comp & ~mov].sum()}
    f = {k: v.item() for k, v in f.items()}
    for kind in KINDS:
        s = (m & BITS[kind]) != 0
        f[kind] = {"cycles": h[s].sum().item(), "hidden": h[s & comp].sum().item(),
                   "exposed": h[s & ~comp].sum().item()}
    return f


def _mean(figs: list) -> dict:
    out = {}
    for k, v in figs[0].items():
        out[k] = _mean([f[k] for f in figs]) if isinstance(v, dict) else round(sum(f[k] for f in figs) / len(figs), 1)
    return out


def summarize(critical, per_core) -> dict:
    """``{"critical": figures, "mean": figures averaged over the cores, "cores": [figures]}``
    of the critical path's histogram and every core's."""
    cores = [figures(h) for h in per_core]
    return {"critical": figures(critical), "mean": _mean(cores), "cores": cores}


class _FastProbe:
    """``FastModel.probe``: a finished RUN's bits (:func:`fast_masks`) go to ``done(masks)``."""

    def __init__(self, done):
        self.done = done

    def fast_run(self, run, cycles: int) -> None:
        self.done(fast_masks(run, cycles))


def _busiest(masks, cycles, length: int) -> int:
    """The core that bounds a chip phase: the most cycles of compute or data movement
    (then the longest RUN, then the lowest number). A core that waits for another,
    stalled on a ring receive or issuing the NOPs that align it, does neither, so the
    longest RUN alone (or the fewest stalls) would name a waiting core rather than the
    one the others wait for."""
    work = BITS["compute"] | _MOVE
    busy = [int(np.count_nonzero(m[:length] & work)) for m in masks]
    return min(range(len(masks)), key=lambda k: (-busy[k], -cycles[k], k))


class MovementSession(ChipSession):
    """A :class:`sim.sessions.ChipSession` (``backend`` ``"fast"`` or ``"model"``) that
    classifies every cycle of the current step (since :meth:`begin_step`), per core and
    along the step's critical path: in a chip phase the core with the most cycles of
    compute or data movement (:func:`_busiest`), in a host phase the active cores' RUNs one after
    another, the LOADs' cycles before a phase, and :meth:`add_idle` cycles."""

    def __init__(self, cfg, backend: str = "fast", record: bool = False):
        super().__init__(cfg, backend, record)
        n = cfg.cores
        self._masks: list = [None] * n
        for k, core in enumerate(self.model.cores):
            def done(masks, k=k):
                self._masks[k] = masks
            core.probe = _CycleProbe(core.cfg, done) if backend == "model" else _FastProbe(done)
        self.begin_step()

    def begin_step(self) -> None:
        """Start a step: the histograms (:attr:`hist` per core, :attr:`crit`) cleared."""
        self.hist = np.zeros((self.cfg.cores, _NB), np.int64)
        self.crit = np.zeros(_NB, np.int64)
        self.cycles = 0

    def add_idle(self, cycles: int) -> None:
        """``cycles`` in which no core does anything (the host's turnaround)."""
        self.hist[:, 0] += cycles
        self.crit[0] += cycles
        self.cycles += cycles

    def _book_loads(self) -> None:
        for dest, _, w in self.loads.last_plan:
            c = load_beat_count(self.cfg, len(w))
            for k in range(self.cfg.cores):
                self.hist[k, BITS["ucode"] if dest is None or dest == k else 0] += c
            self.crit[BITS["ucode"]] += c
        self.cycles += self.loads.last_cycles

    def _book(self, k: int, masks, length: int, crit: bool) -> None:
        h = np.bincount(masks[:length], minlength=_NB)
        h[0] += length - min(length, len(masks))
        self.hist[k] += h
        if crit:
            self.crit += h

    def run(self, images, data=None, name: str = "", start: int = 0, active=None, run_data=None):
        n = self.cfg.cores
        self._masks = [None] * n
        res, cyc = super().run(images, data, name, start, active, run_data)
        lc = self.loads.last_cycles
        if lc:
            self._book_loads()
        for k in range(n):
            if self._masks[k] is None or len(self._masks[k]) != res[k].cycles:
                raise AssertionError(f"{name}: core {k}: the classified cycles do not match its RUN's "
                                     f"{res[k].cycles}")
        if data is not None or active is not None:
            act = list(range(n)) if active is None else list(active)
            length = sum(res[k].cycles for k in act)
            for k in range(n):
                self._book(k, self._masks[k], length, False)
            for k in act:
                self.crit += np.bincount(self._masks[k], minlength=_NB)
        else:
            length = cyc - lc
            c = _busiest(self._masks, [r.cycles for r in res], length)
            for k in range(n):
                self._book(k, self._masks[k], length, k == c)
        self.cycles += length
        return res, cyc

    def movement(self, host_cycles: int = 0) -> dict:
        """The step's figures (:func:`summarize`), ``host_cycles`` of host turnaround added
        as idle cycles."""
        crit, hist = self.crit.copy(), self.hist.copy()
        crit[0] += host_cycles
        hist[:, 0] += host_cycles
        return summarize(crit, hist)
