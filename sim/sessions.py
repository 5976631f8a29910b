"""Host sessions on the simulators: a core or a chip the host talks to, phase by phase.

The training compilers (``sw``) produce programs whose ``init`` / ``run_step`` /
``predict`` methods drive a session: :class:`CoreSession` (one core, on the fast model or
the reference core model) or :class:`ChipSession` (a chip, on the fast chip engine or the
per-cycle chip model). Recorded phases replay on the RTL (:func:`sim.core_run.run_session`,
:func:`sim.chip_run.run_chip_session`).
"""

from __future__ import annotations

import numpy as np

from arch.lanes import pack_beats
from sim.chip_model import ChipModel
from sim.chip_run import ChipPhase
from sim.core_model import CoreModel
from sim.core_run import Phase, split_job
from sim.fast_model import FastModel, core_state
from sw.host_protocol import clear_beats, counters_beats, load_beats, load_plan, load_plan_cycles, load_plan_writes, \
    run_beats

__all__ = ["CoreSession", "ChipSession", "SharedChip", "GroupSession"]


class _Loads:
    """The microcode LOADs of a chip session (:func:`sw.host_protocol.load_plan`): what
    each core holds, and per phase and in total the host stream cycles and the
    microcode words written (summed over the cores). The LOAD beats go on the host
    stream before the phase's RUN, one per cycle, so a phase's cycles include them."""

    def __init__(self, n: int):
        self.loaded = [None] * n
        self.last_cycles = self.last_words = 0
        self.last_per_core = [0] * n       #: words the last LOADs wrote into each core
        self.last_plan: list = []          #: the last LOADs (:func:`sw.host_protocol.load_plan`)
        self.cycles = self.words = 0

    def apply(self, cfg, images, load_core) -> int:
        """LOAD what changed (``load_core(k, words)`` writes core ``k``); returns the cycles."""
        plan = self.last_plan = load_plan(cfg, images, self.loaded)
        for k in range(len(images)):
            if self.loaded[k] is not images[k] and self.loaded[k] != images[k]:
                load_core(k, images[k])
            self.loaded[k] = images[k]
        self.last_cycles = load_plan_cycles(cfg, plan)
        self.last_words = load_plan_writes(plan, len(images))
        self.last_per_core = [0] * len(images)
        for dest, _, w in plan:
            for k in (range(len(images)) if dest is None else (dest,)):
                self.last_per_core[k] += len(w)
        self.cycles += self.last_cycles
        self.words += self.last_words
        return self.last_cycles


class CoreSession:
    """A core the host talks to, phase by phase: the fast model (``backend="fast"``) or
    the reference core model (``"model"``). PE memories persist between phases. Every
    phase is recorded (:attr:`phases`, :class:`sim.core_run.Phase`) so the whole host
    stream can be replayed on the RTL with :func:`sim.core_run.run_session`, which
    checks every output beat and counter against the model."""

    def __init__(self, cfg, backend: str = "fast", record: bool = False):
        if backend == "fast":
            self.model = FastModel(cfg)
        elif backend == "model":
            self.model = CoreModel(cfg)
        else:
            raise ValueError(f"unknown backend {backend!r}; allowed: fast, model (replay the recorded "
                             f"phases with sim.core_run.run_session for the RTL)")
        self.cfg, self.backend, self.record = cfg, backend, record
        self.loads = _Loads(1)
        self.last_load_cycles = 0      #: host stream cycles of the last run's LOADs
        self._replayed = None          #: the image a replay of the recorded phases holds
        self.phases: list = []

    @property
    def loaded(self):
        """The microcode image the core holds (None: none yet)."""
        return self.loads.loaded[0]

    def _load_beats(self, words) -> list:
        """The LOADs taking the core to ``words`` (:func:`sw.host_protocol.load_plan`:
        the words that differ), counted in :attr:`loads`; their beats."""
        self.last_load_cycles = self.loads.apply(self.cfg, [words], lambda k, w: None)
        return [b for _, addr, w in self.loads.last_plan for b in load_beats(self.cfg, w, addr)]

    def load(self, words) -> int:
        """LOAD the image ``words`` when it changed, without a RUN: the host stream cycles."""
        words = list(words)
        beats = self._load_beats(words)
        if beats:
            self.model.process(beats)
        return self.last_load_cycles

    def run(self, words, data=(), name: str = "", start: int = 0):
        """LOAD the microcode image ``words`` (the words that differ from the one the
        core holds: :attr:`last_load_cycles` host stream cycles), CLEAR the counters, RUN
        from ``start`` with the input beats ``data``, read the counters: a
        :class:`sim.core_run.JobResult`."""
        words = list(words)
        load = self._replayed != words        # the replay LOADs the whole image
        self._replayed = words
        beats = self._load_beats(words)
        beats += clear_beats() + run_beats(start, list(data)) + counters_beats()
        out = self.model.process(beats)
        if self.record:
            self.phases.append(Phase(words, list(data), name, start, load))
        return split_job(self.cfg, out, self.backend)

    def memory(self, bank: str) -> np.ndarray:
        if self.backend == "fast":
            return self.model.memory(bank)
        return core_state(self.model)["mem_a" if bank == "a" else "mem_b"]


class ChipSession:
    """A chip the host talks to, phase by phase, on the fast chip engine (``"fast"``) or
    the per-cycle chip model (``"model"``). Memories persist between phases; with
    ``record=True`` every phase is kept (:class:`sim.chip_run.ChipPhase`) for a replay on
    the RTL with :func:`sim.chip_run.run_chip_session` (which checks every beat and
    counter against the per-cycle model)."""

    def __init__(self, cfg, backend: str = "fast", record: bool = False):
        if backend not in ("fast", "model"):
            raise ValueError(f"unknown backend {backend!r}; allowed: fast, model (replay the recorded phases "
                             f"with sim.chip_run.run_chip_session for the RTL)")
        self.cfg, self.backend, self.record = cfg, backend, record
        self.model = ChipModel(cfg, "fast" if backend == "fast" else "cycle")
        self.loads = _Loads(cfg.cores)
        self._replayed = [None] * cfg.cores       # what a replay of the recorded phases has loaded
        self.phases: list = []

    @property
    def loaded(self) -> list:
        """Per core the microcode image it holds (None: none yet)."""
        return self.loads.loaded

    def load(self, images) -> int:
        """LOAD each core's image when it changed, without a RUN: the host stream cycles
        (:func:`sw.host_protocol.load_plan`; :attr:`loads` keeps the totals)."""
        return self.loads.apply(self.cfg, images, lambda k, w: self.model.load(w, 0, core=k))

    def _load_for_run(self, images) -> tuple[int, bool]:
        cyc = self.load(images)
        load = any(self._replayed[k] is not images[k] and self._replayed[k] != images[k]
                   for k in range(len(images)))
        self._replayed = list(images)
        return cyc, load

    def run(self, images, data=None, name: str = "", start: int = 0, active=None, run_data=None):
        """LOAD each core's image (when it changed), CLEAR, RUN from ``start``. ``data``
        (per core host beats) or ``active`` (the cores with host traffic) make it a host
        phase: the cores run one after another (only ``active`` ones count), else a chip
        phase (one broadcast RUN; ``run_data``: per core the host beats its ``hin``
        instructions consume, :class:`sim.chip_run.ChipPhase`). Returns ``(per-core RunResults, cycles counted)``: the
        RUN's cycles plus the LOAD beats before it (``loads.last_cycles``; the microcode
        words they write: ``loads.last_words``)."""
        n = self.cfg.cores
        load_cyc, load = self._load_for_run(images)
        self.model.clear_counters()
        host = data is not None or active is not None
        if host:
            data = data or [[] for _ in range(n)]
            res = [self.model.cores[k].run(start, data[k], ring_in=()) for k in range(n)]
            act = range(n) if active is None else active
            cycles = sum(res[k].cycles for k in act)
        else:
            rr = self.model.run(start, host_in=run_data)
            res, cycles = rr.cores, rr.cycles
        if self.record:
            self.phases.append(ChipPhase([list(w) for w in images], [list(d) for d in data] if host else None,
                                         name, start, load,
                                         None if host or run_data is None else [list(d) for d in run_data]))
        return res, cycles + load_cyc

    def memory(self, k: int, bank: str) -> np.ndarray:
        m = self.model.cores[k]
        if self.backend == "fast":
            return m.memory(bank)
        return core_state(m)["mem_a" if bank == "a" else "mem_b"]

    def scratchpad(self, k: int, base: int, n: int) -> list:
        """Beats ``base .. base + n - 1`` of core ``k``'s scratchpad as integers (lane
        ``i`` in bits ``i*w ..``)."""
        m = self.model.cores[k]
        if self.backend == "model":
            return list(m.spad[base:base + n])
        w = self.cfg.fmt.width
        return pack_beats(m.state.spad[base:base + n], w)


class GroupSession:
    """One group of a partitioned chip (:class:`SharedChip`) as the chip a job was compiled
    for: ``cfg.replace(cores=len(members))``, its core ``i`` the chip's core
    ``members[i]``, its ring closed on the group (``docs/chip.md``, "Partitions"). The
    same ``run`` / ``memory`` / ``scratchpad`` as :class:`ChipSession`, so a training
    program compiled for that many cores drives it unchanged. :attr:`cycles` adds up the
    cycles of its phases: the group's own timeline (groups share no link and no state,
    so each runs its host sequence as if alone)."""

    def __init__(self, chip: "SharedChip", members):
        self.chip, self.members = chip, list(members)
        self.cfg = chip.cfg.replace(cores=len(self.members))
        self.loads = _Loads(len(self.members))
        self.cycles = 0
        self.phases = 0

    @property
    def loaded(self) -> list:
        return self.loads.loaded

    def load(self, images) -> int:
        """As :meth:`ChipSession.load`, on the group's cores (a broadcast reaches the
        group's cores only: ``SELECT``, ``docs/chip.md``); the cycles count in
        :attr:`cycles`."""
        model, ks = self.chip.model, self.members
        cyc = self.loads.apply(self.cfg, images, lambda i, w: model.load(w, 0, core=ks[i]))
        self.cycles += cyc
        return cyc

    def run(self, images, data=None, name: str = "", start: int = 0, active=None, run_data=None):
        """As :meth:`ChipSession.run`, on the group's cores only."""
        model, ks = self.chip.model, self.members
        load_cyc = self.load(images)
        for c in ks:
            model.cores[c].clear_counters()
        if data is not None or active is not None:
            data = data or [[] for _ in ks]
            res = [model.cores[c].run(start, data[i], ring_in=()) for i, c in enumerate(ks)]
            act = range(len(ks)) if active is None else active
            cycles = sum(res[i].cycles for i in act)
        else:
            pcs = [start] * model.n
            hin = [()] * model.n
            for i, c in enumerate(ks):
                hin[c] = list(run_data[i]) if run_data is not None else ()
            rr = model.run_ring(ks, pcs, hin)
            res, cycles = rr.cores, rr.cycles
        self.cycles += cycles
        self.phases += 1
        return res, cycles + load_cyc

    def memory(self, k: int, bank: str) -> np.ndarray:
        return self.chip.memory(self.members[k], bank)

    def scratchpad(self, k: int, base: int, n: int) -> list:
        return self.chip.scratchpad(self.members[k], base, n)


class SharedChip(ChipSession):
    """A chip partitioned into core groups (:class:`arch.partition.Partition`), one job per
    group: :meth:`group` gives the :class:`GroupSession` a job's program drives."""

    def __init__(self, cfg, partition, backend: str = "fast"):
        super().__init__(cfg, backend)
        self.partition = partition
        self.model.partition = partition
        self.sessions = [GroupSession(self, partition.members(g)) for g in range(len(partition.groups))]

    def group(self, g: int) -> GroupSession:
        return self.sessions[g]
