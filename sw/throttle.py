"""Pauses in a compiled chip training step: the program transform behind power caps.

A paused step runs the same ops as the compiled one, in the same order, with the chip
halted between some of them while the host waits:

* a chip phase (:class:`sw.train_chip_place.ChipPart`) is cut into more RUNs at op
  boundaries (each piece ends with a HALT; :func:`sw.train_chip_place._place_parts`
  assembles the pieces, as it does when a phase does not fit the microcode), and
* before a RUN the host waits some cycles (:meth:`Paused.pause_of`, :meth:`Paused.host_pause`)
  before sending it. A halted core issues nothing: the wait costs leakage only.

Every op boundary of a chip phase is a RUN boundary the compilers already use (a phase
that does not fit the microcode is split at any of them): a HALT drains the PE pipelines
and the ring carries no beat across an op boundary, so the results are those of the
unpaused program, bit for bit (the tests check the weights against the golden trainer).
The RUN state a HALT ends (loop counters, AGU offsets, scratchpad pointers) is set up
again by each op, which is why an op is the unit: a RUN cannot stop inside one.

:func:`pause` builds the paused program from a compiled one (SGD or minibatch GD across
a chip, :func:`sw.train_chip.compile_chip_sgd`, :func:`sw.train_chip_mb.compile_chip_mbgd`,
or a CP pipeline step, :func:`sw.train_cp.compile_chip_cp`, batch 1 or a minibatch);
``session.idle(cycles)`` is called for every wait when the session has it
(:class:`sim.power_trace.TracingSession`), and the step's cycles include the waits.
Which pauses a power cap needs is decided by :mod:`sim.power_cap`.

**CP.** A CP step (:class:`sw.train_cp_program.ChipCPProgram`) is the host's input phase,
the ``head`` and ``tail`` chip RUNs (and ``chains`` when split), and the output phase.
Its pause points are those RUNs: the host waits, the chip halted, before any of them.
The RUNs are not cut further: the cores of a CP step run different layers, each its own
op sequence, so the cores share no op boundary, and the head and tail each sit at one
origin of a single microcode image. The head (a layer's forward GEMV, ``W^T d`` and the
output core's update) is the longest RUN, and it sets the shortest window a CP cap can
be met in. Waits change only when a RUN starts: the weights equal the golden CP
trainer's bit for bit (the tests check them).
"""

from __future__ import annotations

import copy

from sw.train_chip_place import _place_parts

__all__ = ["pause", "Paused", "PausedCP", "segments", "STEP_GROUPS", "HOST_RUNS"]

#: the host phases' RUN names in a step (:meth:`run_step`) -> their pause point
HOST_RUNS = {"step-in": "in", "logits": "unload", "step-out": "unload", "g": "g"}

#: the chip phases of a step, by the loss's compilation (``predict`` is never paused)
STEP_GROUPS = ("step", "forward", "backward")


def _is_cp(tp) -> bool:
    return hasattr(tp, "chip_runs") and hasattr(tp, "tails")


def _cp_order(tp) -> list:
    """A CP step's RUNs (the ``what`` of RUN ``cp-<what>``) as ``(kind, what)`` in the
    order the step runs them: the host's input phase, the chip RUNs, the output phase;
    a minibatch-CP step with the softmax on the host runs the head, the logits out, the
    gradient in and the output core's ``head2`` before the tail."""
    host = [n for n, _ in tp.host_phase_cycles()]
    chip = [("chip", w) for w in tp.chip_runs()]
    if "head2" in host:
        return [("host", "in"), chip[0], ("host", "logits"), ("host", "g"), ("host", "head2"), *chip[1:]]
    return [("host", "in"), *chip, *(("host", h) for h in host if h != "in")]


def segments(tp) -> list:
    """The pausable points of ``tp``'s step, in order: ``("host", what)`` for a host phase
    and ``(group, i)`` for op ``i`` of chip phase group ``group`` (ops counted over the
    group's parts); for a CP step, each of its RUNs: ``("host", what)`` for a host phase
    and ``("chip", what)`` for a chip RUN (:meth:`sw.train_cp_program.ChipCPProgram.chip_runs`)."""
    if _is_cp(tp):
        return _cp_order(tp)
    out = []
    one_run = "step" in tp.parts
    io = not getattr(tp, "host_in", False)          # else the chip programs take and send the host data
    if io:
        out.append(("host", "in"))
    groups = ["step"] if one_run else ["forward"]
    for g in groups:
        out += [(g, i) for i in _cut_points(_group_ops(tp, g)[0])]
    if io:
        out.append(("host", "unload"))
    if not one_run:
        out.append(("host", "g"))
        out += [("backward", i) for i in _cut_points(_group_ops(tp, "backward")[0])]
    return out


#: ops that run skewed over the cores with the op after (``bcast_x``: core ``k`` waits
#: ``3 k`` slots before the first GEMV) or before them (``bcast_x_sync``: the rest of the
#: wait, after it): a RUN cut next to them would leave the cores' instruction counts unequal
_SKEW_HEAD, _SKEW_TAIL = ("bcast_x",), ("bcast_x_sync",)


def _cut_points(ops) -> list:
    """The op indices of one core's phase ``ops`` before which a RUN may start: every
    op but the one after a skewed head and the skewed tail itself."""
    return [i for i, op in enumerate(ops)
            if i == 0 or (op.name not in _SKEW_TAIL and ops[i - 1].name not in _SKEW_HEAD)]


def _group_ops(tp, g) -> list:
    """Per core the ops of chip phase group ``g`` (its parts' ops, in order)."""
    parts = tp.parts[g]
    if any(p.core_ops is None for p in parts):
        raise ValueError(f"phase {g}: its parts do not keep their per-core ops (compiled before ChipPart.core_ops)")
    n = len(parts[0].core_ops)
    return [[op for p in parts for op in p.core_ops[k]] for k in range(n)]


class Paused:
    """Mixin of a paused chip program (:func:`pause`): waits before RUNs, counted into
    the step's cycles."""

    #: part name -> cycles the host waits before that RUN
    pause_of: dict = {}
    #: host phase (``in``, ``unload``, ``g``) -> cycles the host waits before it
    host_pause: dict = {}

    def _wait(self, session, n: int) -> None:
        if n:
            self._waited = getattr(self, "_waited", 0) + n
            idle = getattr(session, "idle", None)
            if idle is not None:
                idle(n)

    def _run_part(self, session, part, name, data=None):
        self._wait(session, self.pause_of.get(part.name, 0))
        return super()._run_part(session, part, name, data)

    def _run_host(self, session, what, *args, **kw):
        self._wait(session, self.host_pause.get(what, 0))
        if what == "g" and self.host_cycles() and hasattr(session, "idle"):
            session.idle(self.host_cycles())          # the host's turnaround before the gradient
        return super()._run_host(session, what, *args, **kw)

    def run_step(self, session, *args, **kw):
        self._waited = 0
        r = super().run_step(session, *args, **kw)
        if self._waited:
            r.phases.append(("pause", "idle", self._waited))
            r.cycles += self._waited
            for pc in r.core_counters:
                pc["cycles"] = r.cycles
        return r

    def pause_cycles(self) -> int:
        """Cycles the host waits per step."""
        return sum(self.pause_of.values()) + sum(self.host_pause.values())

    def step_cycles(self, *args, **kw) -> int:
        return super().step_cycles(*args, **kw) + self.pause_cycles()


class _WaitingSession:
    """A session whose :meth:`run` first has the program wait its pause before that RUN
    (by the RUN's name); everything else is the session's."""

    def __init__(self, session, prog):
        self._session, self._prog = session, prog

    def run(self, images, data=None, name: str = "", *args, **kw):
        prog = self._prog
        prog._wait(self._session, prog.pause_of.get(name, 0))
        if name == "cp-g" and prog.host_cycles() and hasattr(self._session, "idle"):
            self._session.idle(prog.host_cycles())          # the host's softmax turnaround
        return self._session.run(images, data, name, *args, **kw)

    def __getattr__(self, attr):
        return getattr(self._session, attr)


class PausedCP(Paused):
    """Mixin of a paused CP step (:func:`pause`): :attr:`pause_of` maps a RUN's name
    (``cp-in``, ``cp-head``, ``cp-tail``, ...) to the cycles the host waits before it;
    :attr:`part_seg` maps every RUN's name to its pause point."""

    def run_step(self, session, *args, **kw):
        return super().run_step(_WaitingSession(session, self), *args, **kw)


_CLASSES: dict = {}


def _paused_class(cls, mixin=Paused):
    if issubclass(cls, Paused):
        return cls
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Paused{cls.__name__}", (mixin, cls), {})
    return _CLASSES[cls]


def _base(tp):
    """The compiled program's class of ``tp`` (paused or not)."""
    return next(c for c in type(tp).__mro__ if not issubclass(c, Paused))


def _pause_cp(tp, waits: dict, cut_all: bool):
    """:func:`pause` of a CP step: waits before its RUNs, which stay as compiled."""
    base = _base(tp)
    new = copy.copy(tp)
    new.__class__ = _paused_class(base, PausedCP)
    new.pause_of = {f"cp-{what}": v for (_, what), v in waits.items()}
    new.host_pause = {}
    new.part_seg = {f"cp-{what}": (kind, what) for kind, what in _cp_order(tp)}
    new.waits, new.cut_all = dict(waits), cut_all
    return new


def pause(tp, waits: dict | None = None, cut_all: bool = False):
    """``tp`` with the host waiting ``waits[seg]`` cycles before segment ``seg``
    (:func:`segments`; a wait before op ``i > 0`` of a chip phase cuts the phase into
    another RUN there; ``waits`` may hold zeros, which cut nothing). Returns a new
    program; ``tp`` is unchanged. ``cut_all``: every op its own RUN, waits or not. The program's host phases and the prediction's
    programs are placed as the compiler places them. A CP step's pause points are its
    RUNs, which are never cut (``cut_all`` changes nothing there)."""
    waits = {k: int(v) for k, v in (waits or {}).items() if v}
    bad = [k for k, v in waits.items() if v < 0]
    if bad:
        raise ValueError(f"negative waits at {bad[:3]}")
    known = set(segments(tp))
    unknown = [k for k in waits if k not in known]
    if unknown:
        raise ValueError(f"no such pause point(s) {unknown[:3]}; see sw.throttle.segments")
    if _is_cp(tp):
        return _pause_cp(tp, waits, cut_all)
    base = _base(tp)
    per_core, starts = {}, {}
    for g, parts in tp.parts.items():
        ops = _group_ops(tp, g)
        cuts = sorted({0, len(ops[0])} | ({i for (gg, i) in waits if gg == g and i > 0}
                                          if not cut_all or g not in STEP_GROUPS else set(_cut_points(ops[0]))))
        for j, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            per_core[f"{g}#{j}"] = [o[a:b] for o in ops]
            starts[f"{g}#{j}"] = (g, a)
    placed, images = _place_parts(tp.cfg, per_core)
    new = copy.copy(tp)
    new.__dict__.pop("_dma_cache", None)
    new.parts = {g: [] for g in tp.parts}
    pause_of, part_seg = {}, {}
    for key, plist in placed.items():
        g, a = starts[key]
        i = a
        for p in plist:
            p.name = key if len(plist) == 1 else f"{key}.{len(new.parts[g])}"
            part_seg[p.name] = (g, i)
            if waits.get((g, i)):
                pause_of[p.name] = waits[(g, i)]
            new.parts[g].append(p)
            i += len(p.ops)
    new.images = images
    new._place_host()
    new.__class__ = _paused_class(base)
    new.pause_of = pause_of
    new.host_pause = {what: v for (h, what), v in waits.items() if h == "host"}
    new.waits, new.cut_all, new.part_seg = dict(waits), cut_all, part_seg
    return new
