"""Chains: point-to-point streams along the ring with per-core roles, scheduled together.

The collectives of :mod:`sw.ring` involve every core with the same timing. Layer
pipelining (:mod:`sw.train_cp`) needs streams between *groups* of cores: a stream leaves
one core, passes hop by hop along the unidirectional ring and, on each core of its
path, every beat has one role:

====================  ==============================================================
role                  instruction(s) on that core (vectors in the diag / cols layouts)
====================  ==============================================================
``send``              ``rd [ar1]++ gate=rdrv | rdrv mem @diag=0 | rout row``: a beat of
                      this core's own segment (diag layout), read in order from
                      :attr:`Hop.src`
``send_keep``         ``rd [ar1]++ gate=cdrv | cdrv mem @diag=0 | rout col | wr [ar2]++ =
                      col``: as ``send`` and stored on this core too (cols layout, at
                      :attr:`Hop.dst`)
``relay``             ``rin row | rout row``: taken and passed on unchanged
``keep``              ``rin col | wr [ar2]++ = col`` (cols layout; ``@diag=0`` for the
                      diag layout): taken and stored at :attr:`Hop.dst`, not passed on
``keep_relay``        ``rin col | rout col | wr [ar2]++ = col``: stored and passed on
``add``               ``rin col | rd [ar1]++ gate=pred | @diag=0 | add r0 = col + mem``,
                      then ``L - 1`` slots later ``rdrv r0 @diag=0 | rout row``: this
                      core's partial (diag, at :attr:`Hop.src`) added to the incoming
                      sum, the sum passed on (a reduce chain; every beat of the hop)
====================  ==============================================================

**Matrices** (``layout="mat"`` on every hop of a stream): the words at ``src`` / ``dst``
are local words of 2D round-robin matrices (:mod:`sw.layout`), each travelling as ``nr``
beats, as in :mod:`sw.ring_mat`. A *row-oriented* beat ``q`` of a word carries PE column
``q`` (lane ``i`` = PE ``(i, q)``) on the row buses, a *column-oriented* one PE row ``q``
(lane ``j`` = PE ``(q, j)``) on the column buses; beat ``j`` of the stream is beat ``j mod
nr`` of word ``j // nr``, and every instruction that steps an address register is
predicated on the beat's PE column (row), so each PE walks the words once. The first hop
sends row-oriented beats (``@col=q | rd [ar1]++ gate=rdrv | rdrv mem @col=q | rout
row``); ``relay``, ``keep`` and ``keep_relay`` keep the orientation (``rin row | @col=q |
wr [ar2]++ = row``, or ``rin col | @row=q | wr [ar2]++ = col``). An ``add`` hop takes on
one bus and sends on the other, transposing every word (as the reduce-scatter of
:mod:`sw.ring_mat`): it adds each beat of word ``w`` into register ``r{w mod 2}``
(``rin row | rd [ar1]++ gate=pred | @col=q | add r0 = row + mem``) and, once the word's
last sum is readable, sends it as ``nr`` beats of the other orientation (``cdrv r0 @row=q
| rout col``): beat ``j`` leaves ``nr + L - 2`` slots after it arrived, so a matrix reduce
runs at one beat per slot. A core that keeps only some words (the scatter of minibatch
CP: each core of a group keeps its columns of every row) stores them in order.

**Timing.** Beats are numbered ``0 .. m-1`` along the stream. A stream starting at slot
``T`` sends beat ``j`` from its first hop in slot ``T + j``; every other hop takes beat
``j`` exactly 3 slots after the previous hop sent it (``RING_HOP_CYCLES``: no slack, so
the receive FIFOs hold at most 3 beats and nothing stalls) and passes it on in the same
slot, or ``L - 1`` slots later on an ``add`` hop (the sum is a driver source then; one
register ``r0`` suffices, as in :func:`sw.ring.reduce_lines`). A hop that *originates*
beats (``send``) in the middle of a stream sends them in the slots the formula gives, so
a gather (each core appends its segment after relaying its predecessors') is one
continuous stream.

**Scheduling.** :func:`schedule` places the streams one by one (in the order given) at
the earliest start for which, on every core of the path, the stream's *window* (its
address-register setup slots, then its first to its last event on that core) overlaps
no window already placed there; so streams on disjoint cores, or passing a core at
different times, overlap in time, and one core never interleaves two streams (their
address registers and ``r0`` would collide). The result is a per-core list of slot
texts of equal length, to be folded into loops by :func:`sw.ring.ring_text`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from sw.ring import RingError, _join
from arch.config import RING_HOP_CYCLES as RING_HOP

__all__ = ["Hop", "Stream", "ChainSchedule", "schedule", "ROLES"]

ROLES = ("send", "send_keep", "relay", "keep", "keep_relay", "add")


@dataclass(frozen=True)
class Hop:
    """One core of a stream's path: ``roles[j]`` is beat ``j``'s role there (None: the
    beat does not pass this core; it must then not pass any later hop). ``src``:
    ``(bank, base)`` read in order by ``send``/``send_keep``/``add`` beats; ``dst``:
    ``(bank, base)`` written in order by ``keep``/``keep_relay``/``send_keep`` beats;
    ``layout``: of the stored words, ``"cols"`` (every PE) or ``"diag"`` (vectors), or
    ``"mat"`` (2D-layout matrix words, ``nr`` beats each; see the module docstring).
    ``dst2``: vectors: a second ``(bank, base)`` in the other bank than ``dst``, written
    with the same beats in the same instructions (``wr [ar3]++``; two write ports)."""

    core: int
    roles: tuple
    src: tuple | None = None
    dst: tuple | None = None
    layout: str = "cols"
    dst2: tuple | None = None


@dataclass(frozen=True)
class Stream:
    """A stream of ``m`` beats along ``hops`` (consecutive cores on the ring)."""

    name: str
    m: int
    hops: tuple


@dataclass
class ChainSchedule:
    """The per-core slot texts (all of length :attr:`slots`) and each stream's start."""

    lines: list
    slots: int
    starts: dict = field(default_factory=dict)


def _check(cfg, st: Stream) -> None:
    c = cfg.cores
    if st.m < 1:
        raise RingError(f"stream {st.name}: needs at least one beat")
    if not st.hops:
        raise RingError(f"stream {st.name}: no hops")
    for i, h in enumerate(st.hops):
        if not 0 <= h.core < c:
            raise RingError(f"stream {st.name}: core {h.core} is not a core of the chip (cores={c})")
        if i and h.core != (st.hops[i - 1].core + 1) % c:
            raise RingError(f"stream {st.name}: hop {i} (core {h.core}) does not follow core "
                            f"{st.hops[i - 1].core} on the ring")
        if len(h.roles) != st.m:
            raise RingError(f"stream {st.name}: hop {i} has {len(h.roles)} roles for {st.m} beats")
        for j, r in enumerate(h.roles):
            if r is not None and r not in ROLES:
                raise RingError(f"stream {st.name}: unknown role {r!r} (allowed: {', '.join(ROLES)})")
            prev = st.hops[i - 1].roles[j] if i else None
            arrives = prev in ("send", "send_keep", "relay", "keep_relay", "add")
            takes = r in ("relay", "keep", "keep_relay", "add")
            if takes and not arrives:
                raise RingError(f"stream {st.name}: beat {j} is taken on core {h.core} but not sent to it")
            if arrives and not takes:
                raise RingError(f"stream {st.name}: beat {j} is sent to core {h.core}, which does not take it")
        if i == len(st.hops) - 1:
            for j, r in enumerate(h.roles):
                if r in ("send", "send_keep", "relay", "keep_relay", "add"):
                    raise RingError(f"stream {st.name}: beat {j} is sent on from core {h.core}, the last hop: "
                                    f"no core takes it")
        adds = {r == "add" for r in h.roles if r is not None}
        if len(adds) > 1:
            raise RingError(f"stream {st.name}: an add hop must add every beat it takes (core {h.core})")
        if any(r in ("send", "send_keep", "add") for r in h.roles) and h.src is None:
            raise RingError(f"stream {st.name}: core {h.core} reads beats but has no src")
        if any(r in ("keep", "keep_relay", "send_keep") for r in h.roles) and h.dst is None:
            raise RingError(f"stream {st.name}: core {h.core} stores beats but has no dst")
        if h.layout not in ("cols", "diag", "mat"):
            raise RingError(f"stream {st.name}: layout must be 'cols', 'diag' or 'mat', got {h.layout!r}")
        if h.dst2 is not None:
            if h.layout == "mat" or h.dst is None or h.dst2[0] == h.dst[0]:
                raise RingError(f"stream {st.name}: core {h.core}'s second store needs a vector hop with a dst "
                                f"and the other bank")
    mats = {h.layout == "mat" for h in st.hops}
    if len(mats) > 1:
        raise RingError(f"stream {st.name}: mixes matrix ('mat') and vector hops")
    if mats == {True} and st.m % cfg.nr:
        raise RingError(f"stream {st.name}: a matrix stream carries whole words ({cfg.nr} beats each), "
                        f"got {st.m} beats")


def _mat_text(r: str, q: int, sb, db, o: str, reg: int) -> tuple:
    """A matrix beat's ``(take-slot text, send-slot text)`` for role ``r``: beat ``q`` of
    its word, arriving in orientation ``o`` (``"row"`` or ``"col"``: the bus it is on);
    an ``add`` sends the sum in the other orientation from register ``r{reg}``."""
    sel = "col" if o == "row" else "row"               # a row-bus beat is a PE column
    if r == "send":
        return None, f"@col={q} | rd{sb} [ar1]++ gate=rdrv | rdrv mem{sb} @col={q} | rout row"
    if r == "send_keep":
        return None, f"@col={q} | rd{sb} [ar1]++ gate=rdrv | rdrv mem{sb} @col={q} | rout row | wr{db} [ar2]++ = row"
    if r == "relay":
        return f"rin {o} | rout {o}", None
    if r == "keep":
        return f"rin {o} | @{sel}={q} | wr{db} [ar2]++ = {o}", None
    if r == "keep_relay":
        return f"rin {o} | rout {o} | @{sel}={q} | wr{db} [ar2]++ = {o}", None
    o2, drv = ("col", "cdrv") if o == "row" else ("row", "rdrv")
    return (f"rin {o} | rd{sb} [ar1]++ gate=pred | @{sel}={q} | add r{reg} = {o} + mem{sb}",
            f"{drv} r{reg} @{o}={q} | rout {o2}")


def _vec_text(r: str, pr: str, sb, db, db2=None) -> tuple:
    """A vector beat's ``(take-slot text, send-slot text)`` for role ``r`` (``db2``: the
    bank of a second store)."""
    w2 = f" | wr{db2} [ar3]++ = col" if db2 else ""
    if r == "send":
        return None, f"rd{sb} [ar1]++ gate=rdrv | rdrv mem{sb} @diag=0 | rout row"
    if r == "send_keep":
        return None, f"rd{sb} [ar1]++ gate=cdrv | cdrv mem{sb} @diag=0 | rout col | wr{db} [ar2]++ = col{w2}"
    if r == "relay":
        return "rin row | rout row", None
    if r == "keep":
        return f"rin col{pr} | wr{db} [ar2]++ = col{w2}", None
    if r == "keep_relay":
        return f"rin col | rout col{pr} | wr{db} [ar2]++ = col{w2}", None
    return f"rin col | rd{sb} [ar1]++ gate=pred | @diag=0 | add r0 = col + mem{sb}", "rdrv r0 @diag=0 | rout row"


@lru_cache(maxsize=256)
def _hop_texts(cfg, st: Stream) -> list:
    """Per hop: ``(take offset, send offset, {slot offset: text}, setup texts)`` (cached:
    the compiler schedules the same streams in several orders; callers do not modify it)."""
    mat = st.hops[0].layout == "mat"
    nr = cfg.nr
    # an add's sum is sent L - 1 slots after the add; a matrix add sends a word once all
    # of its beats are added, transposed: beat j leaves nr - 1 + L - 1 slots after it came
    lat = cfg.fpu_latency - 1 + (nr - 1 if mat else 0)
    out, send_prev, o = [], 0, "row"
    for i, h in enumerate(st.hops):
        take = send_prev + RING_HOP if i else 0
        is_add = any(r == "add" for r in h.roles)
        send = take + lat if is_add else take
        ev: dict = {}
        sb = h.src[0] if h.src else None
        db = h.dst[0] if h.dst else None
        pr = " | @diag=0" if h.layout == "diag" else ""
        for j, r in enumerate(h.roles):
            if r is None:
                continue
            tk, sd = (_mat_text(r, j % nr, sb, db, o, (j // nr) % 2) if mat
                      else _vec_text(r, pr, sb, db, h.dst2[0] if h.dst2 else None))
            if tk:
                ev.setdefault(take + j, []).append(tk)
            if sd:
                ev.setdefault(send + j, []).append(sd)
        texts = {}
        for t, parts in ev.items():
            if len(parts) > 2 or (len(parts) == 2 and not is_add):    # pragma: no cover - by construction
                raise AssertionError(f"stream {st.name}: two events in one slot on core {h.core}")
            texts[t] = _join(*parts)
        setup = []
        if any(r in ("send", "send_keep", "add") for r in h.roles):
            setup.append(f"ar1 = {h.src[1]}")
        if any(r in ("keep", "keep_relay", "send_keep") for r in h.roles):
            setup.append(f"ar2 = {h.dst[1]}")
            if h.dst2 is not None:
                setup.append(f"ar3 = {h.dst2[1]}")
        out.append((take, send, texts, setup))
        send_prev = send
        if mat and is_add:
            o = "col" if o == "row" else "row"
    return out


def schedule(cfg, streams: list) -> ChainSchedule:
    """Place ``streams`` (in order, each at its earliest start, see the module
    docstring) and return every core's slot texts. The first two slots of every core
    set the strides of ``ar1`` and ``ar2`` to 1 (three, with ``ar3``, when a hop stores
    twice); the texts use ``ar1``, ``ar2`` (``ar3``), ``r0`` and (matrix adds) ``r1``.
    Raises :class:`sw.ring.RingError` for malformed streams."""
    c = cfg.cores
    if c < 2:
        raise RingError(f"chains need a chip (cfg.cores >= 2), got cores={c}")
    busy: list = [[] for _ in range(c)]                 # per core: placed windows (lo, hi) inclusive
    placed = []
    dual = any(h.dst2 is not None for st in streams for h in st.hops)
    base = 3 if dual else 2                             # the stride setup slots
    starts = {}
    for st in streams:
        _check(cfg, st)
        hops = _hop_texts(cfg, st)
        wins = []
        for h, (take, send, texts, setup) in zip(st.hops, hops):
            lo, hi = min(texts), max(texts)
            wins.append((h.core, lo - len(setup), hi))
        T = max(base, base - min(w[1] for w in wins))
        while True:
            clash = None
            for core, lo, hi in wins:
                for blo, bhi in busy[core]:
                    if T + lo <= bhi and blo <= T + hi:
                        clash = max(clash or 0, bhi + 1 - lo)
            if clash is None:
                break
            T = max(T + 1, clash)
        for core, lo, hi in wins:
            busy[core].append((T + lo, T + hi))
        placed.append((st, hops, T))
        starts[st.name] = T
    slots = max([hi + 1 for b in busy for _, hi in b] + [base])
    lines = [["stride ar1 = 1", "stride ar2 = 1"] + (["stride ar3 = 1"] if dual else []) + ["nop"] * (slots - base)
             for _ in range(c)]
    for st, hops, T in placed:
        for h, (take, send, texts, setup) in zip(st.hops, hops):
            first = T + min(texts)
            for i, s in enumerate(setup):
                lines[h.core][first - len(setup) + i] = s
            for t, txt in texts.items():
                lines[h.core][T + t] = txt
    return ChainSchedule(lines, slots, starts)
