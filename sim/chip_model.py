"""Models of a chip: ``cfg.cores`` cores on a unidirectional ring (:class:`rtl.chip.Chip`).

Core ``k`` sends its ``rout`` beats to core ``(k + 1) mod cores`` and receives its ``rin``
beats from core ``(k - 1) mod cores``. Every link is a push into the receiver's FIFO of
``cfg.ring_fifo_depth`` beats, guarded by a credit check at the sender (``docs/chip.md``):

* a ``rout`` issuing in cycle ``t`` pushes in ``t + 2`` (its operand stage); the beat can
  be taken by a ``rin`` issuing in ``t + 3`` or later on the next core. With
  ``cfg.dist_stage`` the push is in ``t + 3`` and the ``rin`` pops in the cycle after it
  issues, its check counting a beat that arrives in its decision cycle, so the same
  ``t + 3`` holds; the credit check below is unchanged too, as the receiver reports its
  FIFO level net of the pop of a ``rin`` in its issue cycle;
* a ``rin`` with an empty FIFO stalls its core; so does a ``rout`` when
  ``level(next FIFO) + rout pushes in flight >= depth``. A stall freezes only that core.

All cores start in the same cycle (the chip's broadcast ``RUN``) and the host streams
always serve (as :class:`sim.core_model.CoreModel` assumes).

Two engines give the same results (data, cycles, counters of every core):

``"cycle"``
    One :class:`sim.core_model.CoreRun` per core, stepped in lockstep, one cycle at a
    time, with the ring FIFOs between them: exact for any program, stalls included, and
    slow (the per-cycle core model).
``"fast"``
    One :class:`sim.fast_model.FastModel` per core. Ring timing needs no data: from each
    core's issue trace it checks that the ring never stalls (every ``rin`` finds its
    beat, every ``rout`` finds room) and raises :class:`RingStallError` naming the link
    and beat otherwise (the compilers emit stall-free schedules; use ``"cycle"`` for the
    others). Then every core runs independently with its ring input beats; since those
    are the previous core's outputs, the data are found by iterating to a fixed point
    (only cores whose input changed are re-run, from a snapshot of their state). A round
    sweeps the cores in ring order and hands each core's new output to its successor at
    once, so a chain of dependent transfers advances up to a full turn of the ring per
    round: the rounds are about the number of turns of the longest chain plus one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from arch.config import RING_HOP_CYCLES
from arch.hetero import HeteroConfig
from sim.core_model import CoreModel, CoreRun, RunResult
from sim.ring_crossing import CrossingBeats, CrossingModel, check_crossing
from arch.errors import CaterpillarError
from arch.partition import Partition

__all__ = ["ChipModel", "ChipRunResult", "GroupResult", "RingStallError", "RingDeadlock", "ENGINES",
           "RING_HOP_CYCLES", "ring_windows"]

ENGINES = ("cycle", "fast")



class RingStallError(CaterpillarError, RuntimeError):
    """The run would stall on the ring, which the fast engine does not model."""


class RingDeadlock(CaterpillarError, RuntimeError):
    """Every running core waits on the ring and nothing is in flight."""


@dataclass
class ChipRunResult:
    """Per-core results of one chip ``RUN`` (all cores started in the same cycle)."""

    cores: list[RunResult]
    #: cycles until the last core finished its drain
    cycles: int
    #: counters of the run summed over the cores (``cycles``: the chip's, the maximum)
    counters: dict = field(default_factory=dict)
    #: fast engine: rounds of the ring-data fixed point
    rounds: int = 1
    #: with a partition: one :class:`GroupResult` per group (``cores[k]`` is ``None`` for a
    #: core of a failed group or in no group)
    groups: list = field(default_factory=list)


@dataclass
class GroupResult:
    """One group's part of a partitioned ``RUN``: its cores (ring order), their results,
    its cycles (its last core's drain), counters summed over its cores, and the error that
    stopped it (``None``: it finished)."""

    members: list
    cores: list | None
    cycles: int
    counters: dict
    error: str | None = None
    rounds: int = 1


class _RingFifo:
    """A core's ring receive FIFO for :class:`CoreRun` (``ready``/``pop``)."""

    def __init__(self):
        self.q: deque = deque()
        self.level0 = 0      # level at the start of the current cycle (what credit checks read)

    def ready(self) -> bool:
        return bool(self.q)

    def pop(self) -> int:
        return self.q.popleft()


#: ring activity closer than this many cycles falls into one window of the fast engine
RING_WINDOW_GAP = 32


def ring_windows(runs, gap: int = RING_WINDOW_GAP) -> list:
    """Consecutive windows ``[a, b)`` covering the cycles of the fast engine's runs
    (:class:`sim.fast_run.FastRun`): one around each cluster of ring activity (the
    cycles of the ``rin`` and ``rout`` instructions of every core, clusters apart by more
    than ``gap`` cycles) and one for each stretch between them."""
    T = max(r.T for r in runs)
    ev = np.unique(np.concatenate([np.concatenate([r.ring_cyc, r.out_ring_cyc]) for r in runs]))
    if not len(ev):
        return [(0, T)]
    cut = np.nonzero(np.diff(ev) > gap)[0]
    starts = np.concatenate([ev[:1], ev[cut + 1]]) - 4
    ends = np.concatenate([ev[cut], ev[-1:]]) + 5
    pts = sorted({0, T} | {int(x) for x in np.clip(np.concatenate([starts, ends]), 0, T)})
    return list(zip(pts[:-1], pts[1:]))


def _dma_plan(run):
    """The :class:`sim.fast_dma.DmaPlan` of a :class:`sim.fast_run.FastRun` (``None``
    without DMA instructions)."""
    return run.spad.dma if run.spad is not None else None


def _sum_counters(results: list[RunResult], cycles: int) -> dict:
    tot: dict = {}
    for r in results:
        for k, v in r.counters.items():
            tot[k] = tot.get(k, 0) + v
    tot["cycles"] = cycles
    return tot


class ChipModel:
    """Reference / fast model of a chip of ``cfg.cores`` cores on a ring.

    Parameters
    ----------
    cfg : ArchConfig
        ``cfg.cores`` cores of ``cfg.nr x cfg.nr`` PEs.
    engine : ``"cycle"`` or ``"fast"`` (see the module docstring).
        Or a :class:`arch.hetero.HeteroConfig`: groups of cores of different kinds, each
        core modelled with its group's configuration, and the ring links between kinds
        through crossings (:mod:`sim.ring_crossing`; ``docs/chip.md``, "Heterogeneous
        chips"), with the same cycle costs as the RTL in both engines.
    partition : :class:`arch.partition.Partition`, optional
        Core groups, each closed into its own ring (``docs/chip.md``, "Partitions"):
        :meth:`run` runs one program per group, all groups started in the same cycle, and
        reports each group apart (:attr:`ChipRunResult.groups`); a group whose program
        deadlocks, stalls where the fast engine cannot, or is malformed is stopped and
        reported while the others finish. Default: the whole ring, errors raised.
    """

    def __init__(self, cfg, engine: str = "cycle", partition: Partition | None = None):
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        self.cfg = cfg
        self.engine = engine
        self.n = cfg.cores
        self.hetero = cfg if isinstance(cfg, HeteroConfig) else None
        self.core_cfgs = cfg.core_cfgs if self.hetero else [cfg] * self.n
        if partition is not None and self.hetero is not None:
            raise ValueError("partitions of a heterogeneous chip are not supported")
        if partition is not None and partition.cores != cfg.cores:
            raise ValueError(f"a partition of {partition.cores} cores for a chip of {cfg.cores}")
        self.partition = partition
        if engine == "fast":
            from sim.fast_model import FastModel

            self.cores = [FastModel(c) for c in self.core_cfgs]
        else:
            self.cores = [CoreModel(c) for c in self.core_cfgs]

    # -- microcode --------------------------------------------------------------------
    def load(self, words, addr: int = 0, core: int | None = None) -> None:
        """Load microcode into one core, or into every core (``core=None``)."""
        for k in self._which(core):
            self.cores[k].load(words, addr)

    def _which(self, core):
        if core is None:
            return range(self.n)
        if not 0 <= core < self.n:
            raise ValueError(f"core {core} does not exist (cfg.cores={self.n})")
        return [core]

    def clear_counters(self) -> None:
        for c in self.cores:
            c.clear_counters()

    @property
    def counters(self) -> list[dict]:
        """Cumulative counters of every core."""
        return [dict(c.counters) for c in self.cores]

    # -- RUN ----------------------------------------------------------------------------
    def run(self, start_pc=0, host_in=None, max_instructions: int = 1_000_000) -> ChipRunResult:
        """Start every core in the same cycle (``start_pc``: one pc or one per core) and
        run until every core has halted and drained.

        ``host_in``: per core, the host beats its ``hin`` instructions consume (``None``:
        none). Returns a :class:`ChipRunResult` whose ``cores[k].ring_out`` are the beats
        core ``k`` sent on the ring.
        """
        pcs = [start_pc] * self.n if isinstance(start_pc, int) else list(start_pc)
        hin = [()] * self.n if host_in is None else [list(h) for h in host_in]
        if len(pcs) != self.n or len(hin) != self.n:
            raise ValueError(f"start_pc and host_in need one entry per core ({self.n})")
        if self.partition is None:
            return self.run_ring(list(range(self.n)), pcs, hin, max_instructions)
        return self._run_partition(pcs, hin, max_instructions)

    def run_ring(self, ks, pcs, hin, max_instructions: int = 1_000_000) -> ChipRunResult:
        """Run the cores ``ks`` (ring order: ``ks[i]`` feeds ``ks[i + 1]``, the last one
        ``ks[0]``) as a ring of their own; ``pcs``, ``hin``: one entry per core of the
        chip. The result's ``cores`` follow ``ks``. Raises on a deadlock, a stall the
        fast engine cannot model, or a malformed program."""
        if self.engine == "fast":
            return self._run_fast(ks, pcs, hin, max_instructions)
        return self._run_cycle(ks, pcs, hin, max_instructions)

    def _run_partition(self, pcs, hin, max_instructions) -> ChipRunResult:
        """Every group of :attr:`partition` as its own ring. The groups share no link and
        no state (the host streams always serve), so running them one after another gives
        what running them in the same cycles gives."""
        res: list = [None] * self.n
        groups = []
        for g in range(len(self.partition.groups)):
            ks = self.partition.members(g)
            try:
                rr = self.run_ring(ks, pcs, hin, max_instructions)
            except Exception as e:           # noqa: BLE001 - any fault of a group's program stops that group
                groups.append(GroupResult(ks, None, 0, {}, f"{type(e).__name__}: {e}"))
                continue
            for k, r in zip(ks, rr.cores):
                res[k] = r
            groups.append(GroupResult(ks, rr.cores, rr.cycles, rr.counters, None, rr.rounds))
        ok = [g for g in groups if g.error is None]
        cycles = max((g.cycles for g in ok), default=0)
        tot = _sum_counters([r for r in res if r is not None], cycles)
        return ChipRunResult(res, cycles, tot, max((g.rounds for g in ok), default=1), groups)

    def _run_cycle(self, ks, pcs, hin, max_instructions) -> ChipRunResult:
        n, depth = len(ks), self.cfg.ring_fifo_depth
        fifos = [_RingFifo() for _ in range(n)]
        xings = self._crossings(ks, "cycle")

        def room(k):
            nxt, x = fifos[(k + 1) % n], xings[k]
            if x is not None:
                return lambda run: x.level(nxt.level0) + run.rout_pending < depth
            return lambda run: nxt.level0 + run.rout_pending < depth

        runs = [CoreRun(self.cores[c], pcs[c], hin[c], fifos[k], max_instructions, room(k))
                for k, c in enumerate(ks)]
        dist = self.core_cfgs[0].dist_stage

        def push():
            """This cycle's ring pushes into the receivers' FIFOs (through the
            crossings); True if any."""
            any_ = False
            for k, r in enumerate(runs):
                x = xings[k]
                if x is not None:
                    any_ |= x.busy or bool(r.pushed)
                    fifos[(k + 1) % n].q.extend(x.step(r.pushed))
                elif r.pushed:
                    fifos[(k + 1) % n].q.extend(r.pushed)
                    any_ = True
            return any_

        idle = 0
        t = 0
        while not all(r.done for r in runs):
            for f in fifos:
                f.level0 = len(f.q)
            progress = False
            live = [r for r in runs if not r.done]
            for r in live:
                r.cycle_pe()
            if dist:                 # a rin's check counts the beat arriving this cycle
                progress |= push()
            for r in live:
                before = r.n
                r.cycle_head()
                progress |= r.n != before or r.done
            if not dist:
                progress |= push()
            # a DMA transfer in flight will end a DMA stall: not a deadlock
            progress |= any(r.dma is not None and r.dma.end > r.cycles for r in live)
            t += 1
            idle = 0 if progress else idle + 1
            if idle > 4 * depth + max(c.fpu_latency for c in self.core_cfgs) + 8:
                waits = []
                for k, r in enumerate(runs):
                    if not r.done and r.head is not None:
                        what = "rin (empty FIFO)" if r.head.rin and r.head.hin else "rout (next FIFO full)"
                        waits.append(f"core {ks[k]} at pc {r.head.pc} waits on {what}")
                raise RingDeadlock(f"ring deadlock at cycle {t}: " + "; ".join(waits))
        for x in xings:
            why = x.leftover() if x is not None else None
            if why:
                raise RingStallError(f"end of the run: {why}")
        for k, f in enumerate(fifos):
            if f.q:
                raise RingStallError(f"core {ks[k]}'s ring FIFO still holds {len(f.q)} beat(s) at the end of the "
                                     f"run (core {ks[(k - 1) % n]} sent more beats than core {ks[k]} took)")
        res = [r.finish() for r in runs]
        cycles = max(r.cycles for r in res)
        return ChipRunResult(res, cycles, _sum_counters(res, cycles))

    # -- fast engine ------------------------------------------------------------------
    def ring_schedule(self, pcs, max_instructions: int = 1_000_000, runs=None, ks=None):
        """Per core (of ``ks``, default every core; ``pcs`` one per core of the chip, ``runs``
        one per core of ``ks``): issue cycles of its ``rin`` and of its ``rout`` instructions in a run
        without ring stalls (numpy arrays), from the issue traces alone; with ``runs``
        (the cores' :class:`sim.fast_run.FastRun`) each shifted by the DMA stalls before it
        (cores with DRAM: a stall freezes only its core)."""
        sched = []
        ks = list(range(self.n)) if ks is None else ks
        for k, c in enumerate(ks):
            m = self.cores[c]
            trace, allpcs, _ = m._trace(pcs[c], max_instructions)
            rin_f, hout_f, rout_f = m.ring_flags(trace.pcs)
            # the instruction clocked into the PEs at RUN cycle t issued (left the head) at
            # t - 1 (t - 2 with the distribution stage)
            lag = 1 + self.core_cfgs[c].dist_delay
            i_in, i_out = np.nonzero(rin_f[allpcs])[0], np.nonzero(rout_f[allpcs])[0]
            t_in, t_out = i_in - lag, i_out - lag
            dma = _dma_plan(runs[k]) if runs is not None else None
            if dma is not None:
                t_in, t_out = t_in + dma.shift(i_in), t_out + dma.shift(i_out)
            sched.append((t_in, t_out))
        return sched

    def check_stall_free(self, pcs, max_instructions: int = 1_000_000, runs=None, ks=None):
        """Raise :class:`RingStallError` unless every ``rin`` finds its beat and every
        ``rout`` finds room without waiting (the fast engine's precondition; ``runs``,
        ``ks``: as :meth:`ring_schedule`)."""
        ks = list(range(self.n)) if ks is None else ks
        n, depth = len(ks), self.cfg.ring_fifo_depth
        sched = self.ring_schedule(pcs, max_instructions, runs, ks)
        xings = self._crossings(ks, "link")
        for i in range(n):
            s = sched[i][1]                    # core k's routs
            r = sched[(i + 1) % n][0]          # core j's rins
            k, j = ks[i], ks[(i + 1) % n]
            if xings[i] is not None:
                why = check_crossing(xings[i], s, r, depth)
                if why:
                    raise RingStallError(why)
                continue
            if len(s) != len(r):
                raise RingStallError(f"ring link core {k} -> core {j}: core {k} sends {len(s)} beat(s), "
                                     f"core {j} takes {len(r)}")
            late = np.nonzero(r < s + RING_HOP_CYCLES)[0]
            if len(late):
                m = int(late[0])
                raise RingStallError(
                    f"ring link core {k} -> core {j}: beat {m} is sent in cycle {int(s[m])} (visible from "
                    f"cycle {int(s[m]) + RING_HOP_CYCLES}) but taken in cycle {int(r[m])}: core {j} would stall "
                    f"(the fast engine needs stall-free ring schedules; use engine='cycle')")
            if len(s) > depth:
                full = np.nonzero(r[:-depth] >= s[depth:])[0]
                if len(full):
                    m = int(full[0]) + depth
                    raise RingStallError(
                        f"ring link core {k} -> core {j}: beat {m} is sent in cycle {int(s[m])} while core {j}'s "
                        f"FIFO ({depth} beats) is full: core {k} would stall (the fast engine needs stall-free "
                        f"ring schedules; use engine='cycle')")
        return sched

    #: an object with ``split(windows, runs)`` and ``after(cycle, runs)``: extra cuts of
    #: the fast engine's windows and a call after each (:mod:`sim.power_trace`)
    window_hook = None

    def _run_fast(self, ks, pcs, hin, max_instructions) -> ChipRunResult:
        runs = [self.cores[c].start_run(pcs[c], hin[c], max_instructions, ring_in=None) for c in ks]
        try:
            sched = self.check_stall_free(pcs, max_instructions, runs, ks)
        except RingStallError:
            for c in ks:      # these runs do not go on: nor do their scratchpad plans
                self.cores[c]._spad_run = None
            raise
        limit = sum(len(s[0]) for s in sched) + 2
        # receiver k's view of its predecessor's beats (through a crossing: converted)
        xb = self._crossings(ks, "beats")
        self._src = [(lambda runs, k, x=x: x(runs[k - 1].ring_out_now())) if x is not None
                     else (lambda runs, k: runs[k - 1].ring_out_now()) for x in xb]
        rounds = 1
        windows = ring_windows(runs)
        if any(d is not None and d.stalls for d in map(_dma_plan, runs)):
            # DMA stalls move the cores' clocks apart: the windows (in each core's unstalled
            # cycles) would no longer hold the producers of the beats consumed in them
            windows = [(0, max(r.T for r in runs))]
        hook = self.window_hook          # sim.power_trace: counters sampled at its cycles
        if hook is not None:
            windows = hook.split(windows, runs)
        for a, b in windows:
            rounds = max(rounds, self._window(runs, a, b, limit))
            if hook is not None:
                hook.after(b, runs)
        results = [r.finish() for r in runs]
        cycles = max(r.cycles for r in results)
        return ChipRunResult(results, cycles, _sum_counters(results, cycles), rounds)

    def _window(self, runs, a, b, limit) -> int:
        """Run cycles ``[a, b)`` of every core to the ring data's fixed point; returns the
        sweeps it took. A sweep runs the cores in ring order, each with the beats its
        predecessor has produced so far (Gauss-Seidel: a chain of transfers advances round
        the ring in one sweep); a core whose consumed beats then differ from its
        predecessor's is run again from its state at ``a``. Only core 0 can consume a beat
        before its producer (core ``n - 1``) has run the window: the states at ``a`` are
        kept only when it does."""
        n = len(runs)
        need = [r.ring_range(a, b) for r in runs]
        snaps = None
        if need[0][1] > len(self._src[0](runs, 0)):
            snaps = [r.snapshot() for r in runs]
        used = [None] * n
        dirty = set(range(n))
        sweeps = 0
        while dirty:
            sweeps += 1
            if sweeps > limit:
                raise RuntimeError("ring data did not reach a fixed point (a bug: every beat depends on "
                                   "finitely many earlier beats)")
            if snaps is None and sweeps > 1:     # pragma: no cover - a beat consumed before it is produced
                raise AssertionError(f"cycles [{a}, {b}): core {min(dirty)} consumed a ring beat its "
                                     f"predecessor had not produced yet")
            for k in range(n):
                if k not in dirty:
                    continue
                dirty.discard(k)
                r = runs[k]
                if used[k] is not None:
                    r.restore(snaps[k])
                i, j = need[k]
                src = self._src[k](runs, k)
                used[k] = [src[x] if x < len(src) else None for x in range(i, j)]
                r.fill_ring(i, [0 if v is None else v for v in used[k]])
                r.advance(b)
                nxt = (k + 1) % n
                if used[nxt] is not None and not self._consumed_ok(runs, nxt, need, used, self._src[nxt]):
                    dirty.add(nxt)
        return sweeps

    @staticmethod
    def _consumed_ok(runs, k, need, used, source) -> bool:
        """Whether core ``k``'s ring beats of the window are its predecessor's (all produced)."""
        i, j = need[k]
        if i == j:
            return True
        src = source(runs, k)
        return j <= len(src) and used[k] == src[i:j]

    def _crossings(self, ks, what: str) -> list:
        """Per position ``i`` of ``ks``: the crossing on the link ``ks[i] -> ks[i + 1]``
        (``what``: ``"cycle"`` a :class:`CrossingModel`, ``"beats"`` a :class:`CrossingBeats`
        for the receiver at ``i``, so the link *into* ``ks[i]``, ``"link"`` the
        :class:`arch.hetero.Crossing`), ``None`` for a plain link."""
        n = len(ks)
        if self.hetero is None:
            return [None] * n
        if n != self.n:
            raise ValueError("a heterogeneous chip runs as one ring")
        if what == "beats":
            return [None if (x := self.hetero.crossing(ks[i - 1])) is None else CrossingBeats(x) for i in range(n)]
        links = [self.hetero.crossing(k) for k in ks]
        return links if what == "link" else [None if x is None else CrossingModel(x) for x in links]

    # -- state ------------------------------------------------------------------------
    def core(self, k: int):
        """The model of core ``k`` (its memories, registers and counters)."""
        return self.cores[self._which(k)[0]]

