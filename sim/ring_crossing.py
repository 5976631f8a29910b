"""The ring crossing between two core kinds of a heterogeneous chip, for both chip engines
(:class:`sim.chip_model.ChipModel`); the RTL is :class:`rtl.ring_crossing.RingCrossing`.

Specified in ``docs/chip.md``, "Heterogeneous chips". The sender (kind ``a``, ``nr_a``
lanes of ``fmt_a``) pushes its ``rout`` beats into the crossing instead of the receiver's
FIFO. Every lane is converted to ``fmt_b`` (:func:`pe.fp_convert.convert_bits`) as it
arrives; then

* collecting (``nr_b = k nr_a``): ``k`` sender beats fill one receiver beat, the first in
  the low lanes; the beat completed in cycle ``c`` (the sender's push cycle) is pushed
  into the receiver's FIFO in ``c + 1``;
* splitting (``nr_a = k nr_b``): a sender beat becomes ``k`` receiver beats, the low lanes
  first, queued in the crossing and pushed one per cycle from ``c + 1`` on.

The sender's credit check (``level + rout pushes in flight < depth``, unchanged in the
core) reads a level in its own beats: collecting, ``level_b + pending + (1 if a beat is
partly collected)``; splitting, ``depth - (depth - level_b - pending) // k`` (room for
``k`` receiver beats per sender beat). ``pending``: receiver beats in the crossing not yet
pushed. Both rules are conservative, so the receiver's FIFO never overflows.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from arch.config import RING_HOP_CYCLES
from arch.hetero import CROSSING_LATENCY, Crossing
from pe.fp_convert import convert_bits

__all__ = ["CrossingModel", "convert_beat", "beats_through", "check_crossing", "CrossingBeats"]


def convert_beat(x: Crossing, beat: int) -> list:
    """The lanes of a sender beat (``nr_a`` ints), each converted to the receiver's
    format."""
    wa, fa, fb = x.a.fmt.width, x.a.fmt, x.b.fmt
    lanes = [(beat >> (i * wa)) & ((1 << wa) - 1) for i in range(x.a.nr)]
    if fa == fb:
        return lanes
    return [convert_bits(fa, fb, v) for v in lanes]


def _pack(lanes, w) -> int:
    return sum(int(v) << (i * w) for i, v in enumerate(lanes))


def beats_through(x: Crossing, beats) -> list:
    """The receiver beats (ints) of a sequence of sender beats: complete ones only."""
    wb, k = x.b.fmt.width, x.ratio
    out = []
    if x.widen:
        for j in range(len(beats) // k):
            lanes = []
            for b in beats[j * k:(j + 1) * k]:
                lanes += convert_beat(x, b)
            out.append(_pack(lanes, wb))
    else:
        for b in beats:
            lanes = convert_beat(x, b)
            out += [_pack(lanes[j * x.b.nr:(j + 1) * x.b.nr], wb) for j in range(k)]
    return out


class CrossingBeats:
    """:func:`beats_through` of a growing (and, after a restore, shrinking) sender list,
    converting only beats not seen before."""

    def __init__(self, x: Crossing):
        self.x = x
        self.src: list = []
        self.out: list = []

    def __call__(self, beats: list) -> list:
        x, k = self.x, self.x.ratio
        n = len(self.src)
        if beats[:n] != self.src:                     # a re-run changed earlier beats
            self.src, self.out = [], []
            n = 0
        per_in = k if x.widen else 1                  # sender beats per conversion step
        n -= n % per_in
        self.src = self.src[:n]
        self.out = self.out[:n // k if x.widen else n * k]
        m = len(beats) - (len(beats) - n) % per_in
        self.out += beats_through(x, beats[n:m])
        self.src += beats[n:m]
        return self.out


class CrossingModel:
    """The crossing's state in the per-cycle engine: converted lanes of a partly
    collected beat and receiver beats waiting to be pushed."""

    def __init__(self, x: Crossing):
        self.x = x
        self.depth = x.a.ring_fifo_depth
        self.partial: list = []
        self.pending: deque = deque()

    def level(self, level_b: int) -> int:
        """The level the sender's credit check reads (receiver FIFO level ``level_b`` at
        the start of the cycle)."""
        if self.x.widen:
            return level_b + len(self.pending) + int(bool(self.partial))
        free = self.depth - level_b - len(self.pending)
        return self.depth - free // self.x.ratio

    def step(self, arrived) -> list:
        """End of a cycle: the receiver beat pushed this cycle (a list of at most one),
        then the sender's beats pushed this cycle enter the crossing."""
        out = [self.pending.popleft()] if self.pending else []
        x = self.x
        for b in arrived:
            lanes = convert_beat(x, b)
            if x.widen:
                self.partial += lanes
                if len(self.partial) == x.b.nr:
                    self.pending.append(_pack(self.partial, x.b.fmt.width))
                    self.partial = []
            else:
                nb = x.b.nr
                self.pending.extend(_pack(lanes[j * nb:(j + 1) * nb], x.b.fmt.width) for j in range(x.ratio))
        return out

    @property
    def busy(self) -> bool:
        return bool(self.pending)

    def leftover(self) -> str | None:
        """Why the crossing is not empty at the end of a run (``None``: it is)."""
        if self.partial:
            return (f"the crossing core {self.x.src} -> core {self.x.dst} holds {len(self.partial) // self.x.a.nr} "
                    f"of the {self.x.ratio} beats of a receiver beat (a sender's beats must fill whole receiver beats)")
        if self.pending:
            return f"the crossing core {self.x.src} -> core {self.x.dst} still holds {len(self.pending)} beat(s)"
        return None


def check_crossing(x: Crossing, s, r, depth: int) -> str | None:
    """The fast engine's stall-free check of a link through crossing ``x``: sender ``rout``
    issue cycles ``s``, receiver ``rin`` issue cycles ``r`` (sorted numpy arrays). Returns
    why the link would stall (``None``: it never does)."""
    k = x.ratio
    s, r = np.asarray(s, dtype=np.int64), np.asarray(r, dtype=np.int64)
    link = f"ring link core {x.src} -> core {x.dst} (crossing {x.a.nr}x{x.a.fmt.name} -> {x.b.nr}x{x.b.fmt.name})"
    want = len(s) // k if x.widen else len(s) * k
    if (x.widen and len(s) % k) or len(r) != want:
        return f"{link}: core {x.src} sends {len(s)} beat(s), core {x.dst} takes {len(r)} (ratio {k})"
    hop = RING_HOP_CYCLES + CROSSING_LATENCY
    if x.widen:
        vis = s[k - 1::k] + hop
    else:
        vis = np.empty(len(r), dtype=np.int64)
        last = -(1 << 62)
        for i, t in enumerate(s.tolist()):
            for j in range(k):
                last = max(t + hop - 1, last + 1)      # pushed in `last`, visible a cycle later
                vis[i * k + j] = last + 1
    late = np.nonzero(r < vis)[0]
    if len(late):
        m = int(late[0])
        return (f"{link}: receiver beat {m} is visible from cycle {int(vis[m])} but taken in cycle {int(r[m])}: "
                f"core {x.dst} would stall (the fast engine needs stall-free ring schedules; use engine='cycle')")
    idx = np.arange(len(s))
    arrived = np.minimum(np.searchsorted(s, s - RING_HOP_CYCLES, side="right"), idx)
    inflight = idx - arrived
    popped = np.searchsorted(r, s, side="left")
    if x.widen:
        full = arrived // k + (arrived % k > 0) - popped + inflight >= depth
    else:
        full = inflight >= (depth - k * arrived + popped) // k
    bad = np.nonzero(full)[0]
    if len(bad):
        m = int(bad[0])
        return (f"{link}: beat {m} is sent in cycle {int(s[m])} without credit: core {x.src} would stall "
                f"(the fast engine needs stall-free ring schedules; use engine='cycle')")
    return None
