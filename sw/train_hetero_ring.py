"""Vectors between the layers of a heterogeneous step over the ring, through the
crossings (``docs/hybrid.md``, "Transfers over the ring"; the crossing's semantics in
``docs/chip.md``, "The crossing").

A transfer sends a vector from core ``s`` to core ``r`` along the unidirectional ring
(``s, s + 1, ..., r`` mod the core count): ``s`` sends its diag-layout segment, every
core between relays (``rin row | rout row``, its own kind's beats), ``r`` stores the
beats in the diag layout. The vector is padded to ``P`` elements, a multiple of the
widest kind's ``nr`` (so every link carries whole beats: ``P / nr`` of its sender's
kind); the elements past the sender's segment are zeros (words no kernel writes).

The schedule is static and stall-free: the sender sends a beat every ``p = nr_s /
nr_min`` cycles (the narrowest kind on the path takes one beat per cycle); every other
core takes each beat in the first cycle it is visible (3 cycles after the send on a
plain link, 4 through a crossing; collecting, when its last sender beat is in;
splitting, one slice per cycle), and a relay passes it on in the same instruction. The
transfer is one RUN started on every core together, each core's program at the same
microcode address (cores off the path: a HALT).
"""

from __future__ import annotations

from arch.hetero import CROSSING_LATENCY
from sw.asm import Builder, assemble
from sw.ring import _fold, _recv, _send, _setup

__all__ = ["ring_path", "transfer_slots", "transfer_lines", "transfer_words", "padded_len", "farthest"]

RELAY = "rin row | rout row"


def padded_len(hcfg, n: int) -> int:
    """``n`` rounded up to a multiple of the widest kind's ``nr``."""
    w = max(c.nr for c in hcfg.group_cfgs)
    return -(-n // w) * w


def ring_path(hcfg, s: int, r: int) -> list:
    """The cores from ``s`` to ``r`` (both included) in ring order."""
    n = hcfg.cores
    return [(s + i) % n for i in range((r - s) % n + 1)]


def transfer_slots(hcfg, s: int, r: int, P: int) -> dict:
    """Per core of the path, the slots of its ring instructions, one per beat of its
    kind: the sender's sends, a relay's take-and-send, the receiver's takes."""
    path = ring_path(hcfg, s, r)
    nrs = [hcfg.core_cfg(k).nr for k in path]
    p = nrs[0] // min(nrs)
    slots = {path[0]: [2 + j * p for j in range(P // nrs[0])]}
    for h in range(1, len(path)):
        a, b, prev = nrs[h - 1], nrs[h], slots[path[h - 1]]
        if a == b:                                   # a plain link, or a format change only
            lat = 3 + (CROSSING_LATENCY if hcfg.crossing(path[h - 1]) is not None else 0)
            avail = [t + lat for t in prev]
        elif b > a:                                  # collecting k sender beats into one
            k = b // a
            avail = [prev[(j + 1) * k - 1] + 3 + CROSSING_LATENCY for j in range(P // b)]
        else:                                        # splitting one sender beat into k
            k = a // b
            avail = []
            for j in range(P // b):
                t = prev[j // k] + 3 + CROSSING_LATENCY + j % k
                avail.append(max(t, avail[-1] + 1) if avail else t)
        out = []
        for t in avail:
            out.append(max(t, out[-1] + 1) if out else t)
        slots[path[h]] = out
    return slots


def farthest(hcfg, s: int, receivers) -> int:
    """The receiver farthest from ``s`` along the ring."""
    return max(receivers, key=lambda r: (r - s) % hcfg.cores)


def transfer_lines(hcfg, s: int, r, P: int, src: tuple, dst) -> dict:
    """Per core of the path, its instruction texts (one per slot): ``src`` / ``dst`` the
    sender's and the receiver's ``(bank, base)``. A broadcast: ``r`` a list of receivers
    and ``dst`` their ``(bank, base)`` in the same order; the path goes to the farthest,
    and every other receiver on it stores each beat and passes it on in the same
    instruction (``rin col | wr | rout col``), so the slots are those of the path."""
    dsts = dict(zip(r, dst)) if isinstance(r, (list, tuple)) else {r: dst}
    last = farthest(hcfg, s, dsts)
    slots = transfer_slots(hcfg, s, last, P)
    out = {}
    for k, ts in slots.items():
        lines = ["nop"] * (ts[-1] + 1)
        if k == s:
            lines[0:2] = _setup([(1, src[1])])
            text = _send(src[0], 1)
        elif k in dsts:
            lines[0:2] = _setup([(2, dsts[k][1])])
            text = _recv(dsts[k][0], 2, fwd=k != last)
        else:
            text = RELAY
        for t in ts:
            lines[t] = text
        out[k] = lines
    return out


def transfer_words(hcfg, lines: dict, origin: int) -> tuple:
    """Per core, the microcode of its part of a transfer at ``origin`` (a HALT for the
    cores off the path), and the RUN's cycles: its longest program plus the RUN
    overhead."""
    words = []
    for k in range(hcfg.cores):
        cfg = hcfg.core_cfg(k)
        if k in lines:
            words.append(assemble("\n".join(_fold(cfg, lines[k]) + ["halt"]), cfg, origin=origin).words())
        else:
            b = Builder(cfg, origin=origin)
            b.halt()
            words.append(b.build().words())
    cyc = max(len(v) for v in lines.values()) + max(c.run_overhead for c in hcfg.group_cfgs)
    return words, cyc
