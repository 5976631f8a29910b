"""Issue trace of a program: which instruction issues in which cycle, with its AGU values.

:func:`issue_trace` produces the same sequence as stepping
:class:`sim.seq_model.SequencerModel` (``pc`` and the address generators' values of
every issued instruction) but expands *structured* hardware loops with numpy instead
of one Python step per instruction: a loop whose body holds only plain instructions
and properly nested inner loops (levels increasing inwards, bodies inside their
parent's, no ``JUMP``/``HALT``/``AGU_*`` inside, no other armed level ending inside
the body) repeats the same pc sequence every iteration, and its AGU values are
``body values + i * stride[level]``. Everything else (jumps, AGU changes inside loops,
the words the assembler rejects, and with ``cfg.addr_stage`` a body holding a ``LOOP``
placement the address stage does not define) is stepped with the sequencer model itself. Each
expansion ends by restoring the model's exact state before the loop's last issued
instruction and stepping that instruction with the model, so the loop exit (re-arming,
lower levels ending on the same pc) is the model's own code.

The trace also records each expanded loop as a :class:`Span` (iterations of equal
length, nested spans for inner loops); the loop-level engine uses spans to cut the
trace into regions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.seq_model import ProgramError, RunawayError
from arch.isa import SeqOp

__all__ = ["Trace", "Span", "issue_trace"]

_PLAIN = (SeqOp.NEXT, 6, 7)


@dataclass
class Span:
    """An expanded loop: steps ``[start, start + n_iter * iter_len)`` of the trace, ``n_iter``
    iterations of ``iter_len`` steps with the same pcs; ``children`` are the inner loops of
    one iteration, with ``start`` relative to the iteration's first step."""

    start: int
    n_iter: int
    iter_len: int
    level: int
    children: list = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.start + self.n_iter * self.iter_len


@dataclass
class Trace:
    pcs: np.ndarray          #: [T] pc of each issued instruction (``ucode_depth``: a cycle without
                             #: one, after a ``JUMP`` with ``cfg.fetch_stage``)
    agu: np.ndarray          #: [T, n_agus] AGU values at its issue (before its own updates)
    spans: list              #: top-level :class:`Span` s (absolute starts)
    last_pc: int             #: pc of the HALT

    def __len__(self):
        return len(self.pcs)


class _Builder:
    def __init__(self, n_agus):
        self.pcs = []
        self.agu = []
        self.n = 0
        self.n_agus = n_agus
        self._step_pcs = []
        self._step_agu = []

    def step(self, pc, agu):
        self._step_pcs.append(pc)
        self._step_agu.append(agu)
        self.n += 1

    def _flush(self):
        if self._step_pcs:
            self.pcs.append(np.array(self._step_pcs, np.int64))
            self.agu.append(np.array(self._step_agu, np.int64).reshape(-1, self.n_agus))
            self._step_pcs, self._step_agu = [], []

    def block(self, pcs, agu):
        self._flush()
        self.pcs.append(pcs)
        self.agu.append(agu)
        self.n += len(pcs)

    def result(self):
        self._flush()
        if not self.pcs:
            return np.zeros(0, np.int64), np.zeros((0, self.n_agus), np.int64)
        return np.concatenate(self.pcs), np.concatenate(self.agu)


def _plan(seq, lvl, start, end, armed_stale):
    """Static structure of the loop body ``[start, end]`` at level ``lvl``, or None.

    Returns a nested list: items are ``("run", a, b)`` (plain pcs a..b) and
    ``("loop", q, level, trip, e, subplan)``; also the list of (level, q) arming order.
    """
    n_loops = seq.n_loops
    arms = []

    def walk(l, s, e):
        items = []
        x = s
        run0 = None
        while x <= e:
            d = seq._decode(x)
            op = d.op
            if op == SeqOp.LOOP and x == e:
                # a LOOP ending a (nested) body, even one with an out-of-range level: not
                # planned, so stepping it raises sim.seq_model.ProgramError as the model does
                return None
            if op == SeqOp.LOOP and d.lvl < n_loops:
                m, tgt = d.lvl, d.target
                if m <= l or tgt <= x or tgt > e:
                    return None
                if run0 is not None:
                    items.append(("run", run0, x - 1))
                    run0 = None
                arms.append((m, x))
                sub = walk(m, x + 1, tgt)
                if sub is None:
                    return None
                items.append(("loop", x, m, max(1, d.imm), tgt, sub))
                x = tgt + 1
                continue
            if op not in _PLAIN and op != SeqOp.LOOP:
                return None    # JUMP, HALT, AGU_*
            if run0 is None:
                run0 = x
            x += 1
        if run0 is not None:
            items.append(("run", run0, e))
        return items

    plan = walk(lvl, start, end)
    walk = None     # the recursive closure refers to itself: freed now, not by the cyclic collector
    if plan is None:
        return None, None
    # stale armed levels ending inside the body must be re-armed before their end
    first_arm = {}
    for m, q in arms:
        first_arm.setdefault(m, q)
    for k, kend in armed_stale:
        if not start <= kend <= end:
            continue
        if k < lvl:
            if kend != end:
                return None, None
        elif k > lvl:
            q = first_arm.get(k)
            if q is None or q >= kend:
                return None, None
    return plan, arms


def _expand(plan, agu0, strides, am, n_agus):
    """pcs and AGU values of one execution of a body ``plan`` (AGU values ``agu0`` at
    its start), and its spans (relative)."""
    pcs_parts, agu_parts, spans = [], [], []
    pos = 0
    for it in plan:
        if it[0] == "run":
            _, a, b = it
            n = b - a + 1
            pcs_parts.append(np.arange(a, b + 1, dtype=np.int64))
            agu_parts.append(np.broadcast_to(agu0, (n, n_agus)))
            pos += n
        else:
            _, q, m, trip, e, sub = it
            pcs_parts.append(np.array([q], np.int64))
            agu_parts.append(agu0.reshape(1, n_agus))
            pos += 1
            bp, ba, bs = _expand(sub, agu0, strides, am, n_agus)
            L = len(bp)
            pcs_parts.append(np.tile(bp, trip))
            inc = (np.arange(trip, dtype=np.int64)[:, None] * strides[:, m][None, :])  # [trip, n_agus]
            agu_parts.append(((ba[None, :, :] + inc[:, None, :]) & am).reshape(trip * L, n_agus))
            spans.append(Span(pos, trip, L, m, bs))
            pos += trip * L
    return np.concatenate(pcs_parts), np.concatenate(agu_parts), spans


def _loop_len(plan):
    n = 0
    for it in plan:
        if it[0] == "run":
            n += it[2] - it[1] + 1
        else:
            n += 1 + it[3] * _loop_len(it[5])
    return n


def _last_chain(plan, end):
    """Levels and trips of the inner loops that end on ``end`` (outermost first)."""
    out = []
    for it in plan:
        if it[0] == "loop" and it[4] == end:
            out.append((it[2], it[3]))
            out += _last_chain(it[5], end)
    return out


def _addr_stage_undefined(seq, arms, armed) -> bool:
    """Whether a planned body holds a ``LOOP`` placement the address stage does not define
    (:meth:`sim.seq_model.SequencerModel._check_addr_stage_loop`), so that the body is
    stepped with the model, which raises there.

    ``arms``: the body's ``(level, pc)`` arming order; ``armed``: ``(level, end)`` of the
    levels armed when the body starts. A rule can only fire at a level's first ``LOOP``
    in the body, while the levels ending at its ``pc + 1`` are ones armed before the body
    (those not re-armed before that ``LOOP``) and the counts are still the model's: every
    later ``LOOP`` of a properly nested plan sees its own level ending at its target, and
    its count back at its trip (``docs/core.md``, "The address stage")."""
    first = {}
    for m, q in arms:
        first.setdefault(m, q)
    for m, q in first.items():
        ends = sorted((k for k, kend in armed if kend == q + 1 and first.get(k, q) >= q), reverse=True)
        if not ends:
            continue
        try:
            seq._check_addr_stage_loop(q, seq._decode(q), ends)
        except ProgramError:
            return True
    return False


def issue_trace(seq, start_pc: int, max_instructions: int = 1_000_000, structured: bool = True) -> Trace:
    """Run the sequencer model ``seq`` from ``start_pc`` to HALT; the issue trace.

    Raises :class:`~sim.seq_model.RunawayError` like ``SequencerModel.run`` when no
    HALT issues within ``max_instructions``.
    """
    seq.start(start_pc)
    n_agus, n_loops, depth = seq.n_agus, seq.n_loops, seq.depth
    jump_delay = seq.cfg.jump_delay
    am = seq.amask
    b = _Builder(n_agus)
    spans = []
    last_pc = start_pc
    bubbles = 0                             # the JUMPs' bubble steps (not instructions)
    while seq.running:
        if b.n - bubbles >= max_instructions:
            raise RunawayError(f"no HALT within {max_instructions} instructions (started at pc {start_pc}, "
                               f"now at pc {seq.pc}): runaway program?")
        pc = seq.pc
        d = seq._decode(pc)
        if d.op in _PLAIN and not seq._ends.get(pc):
            # straight code: the plain instructions from pc on that no armed loop ends at
            # fall through with the AGUs unchanged (SequencerModel.step), issued at once
            q, lim = pc + 1, min(depth, pc + max_instructions - (b.n - bubbles))
            dec, ends = seq._dec, seq._ends
            while q < lim and (dec[q] or seq._decode(q)).op in _PLAIN and not ends.get(q):
                q += 1
            b.block(np.arange(pc, q, dtype=np.int64), np.broadcast_to(np.array(seq.agu, np.int64), (q - pc, n_agus)))
            seq.pc = q % depth
            last_pc = q - 1
            continue
        b.step(pc, list(seq.agu))
        seq.step()
        last_pc = pc
        if d.op == SeqOp.JUMP:
            for _ in range(jump_delay):     # cfg.fetch_stage: the head refills, no issue
                b.step(depth, list(seq.agu))
            bubbles += jump_delay
        if not (structured and d.op == SeqOp.LOOP and d.lvl < n_loops):
            continue
        lvl, end, start = d.lvl, d.target, (pc + 1) % depth
        if seq.pc != start or start > end or not seq.running:
            continue
        trip = max(1, d.imm)
        stale = [(k, seq.lend[k]) for k in range(n_loops) if seq.armed[k] and k != lvl]
        plan, arms = _plan(seq, lvl, start, end, stale)
        if plan is None or (seq._addr_stage and _addr_stage_undefined(seq, arms, stale + [(lvl, end)])):
            continue
        rearmed = {m for m, _ in arms}
        if any(seq.off[a][m] for m in rearmed for a in range(n_agus)):
            continue
        body_len = _loop_len(plan)
        total = body_len * trip
        if b.n - bubbles + total > max_instructions:
            raise RunawayError(f"no HALT within {max_instructions} instructions (started at pc {start_pc}): "
                               f"a loop at pc {pc} alone issues {total}")
        strides = np.array(seq.stride, np.int64).reshape(n_agus, n_loops)
        agu0 = np.array(seq.agu, np.int64)
        bp, ba, bs = _expand(plan, agu0, strides, am, n_agus)
        inc = np.arange(trip, dtype=np.int64)[:, None] * strides[:, lvl][None, :]
        pcs = np.tile(bp, trip)
        agu = ((ba[None, :, :] + inc[:, None, :]) & am).reshape(trip * body_len, n_agus)
        spans.append(Span(b.n, trip, body_len, lvl, bs))
        b.block(pcs, agu)
        # restore the model's state just before the last issued instruction, step it
        for m, q in arms:               # arming order: the last sibling of a level wins
            dq = seq._decode(q)
            seq.lstart[m] = (q + 1) % depth
            seq.lend[m] = dq.target
            seq.trip[m] = seq.cnt[m] = dq.imm
            seq.armed[m] = True
            for a in range(n_agus):
                seq.off[a][m] = 0
        for m, tr in [(lvl, trip)] + _last_chain(plan, end):
            seq.cnt[m] = 1
            for a in range(n_agus):
                seq.off[a][m] = ((tr - 1) * seq.stride[a][m]) & am
        for a in range(n_agus):
            seq.agu[a] = (seq.base[a] + sum(seq.off[a])) & am
        seq._reindex_ends()
        seq.pc = end
        assert [int(x) for x in agu[-1]] == seq.agu, "trace expansion out of step with the sequencer"
        seq.step()
        last_pc = end
    pcs, agu = b.result()
    return Trace(pcs, agu, spans, last_pc)
