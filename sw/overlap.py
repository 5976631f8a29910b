"""Overlapping a ring collective with an independent kernel.

A ring collective (:mod:`sw.ring`) is straight-line code whose instructions use few of
the micro-op's units: a reduce-scatter step sends (a bus driver and ``rout``) in some
slots and adds (the FMA, under ``@diag=0``) in others, and waits in the rest. An
independent kernel written as straight-line rows (:func:`sw.kernels.rank1_lines`) can
run in the slots the collective leaves free: :func:`merge_rows` places each kernel
instruction, in program order, into the next collective instruction it can share
(:func:`can_merge`), and appends what is left after the collective's last instruction.

The collective keeps every instruction in its slot, so its timing (and the other cores',
which it is aligned with) is unchanged. The kernel's instructions only move later, so
every distance between them grows: a kernel whose correctness needs minimum issue
distances (FMA results read ``fpu_latency - 1`` slots after issue, moves readable by
the next instruction) stays correct, and the kernel computes the same operations in
the same order (the same bits). The two streams must use disjoint registers, address
registers and SRAM regions; the caller chooses them so (the kernel's registers above
the collective's) and the assembler rejects any unit both claim.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["slot_units", "can_merge", "merge_rows"]

_FIRST = {
    "fma": "fpu", "mac": "fpu", "mul": "fpu", "add": "fpu",
    "mov": "mv", "relu": "mv", "mask": "mv",
    "rdrv": "rdrv", "cdrv": "cdrv",
    "rda": "ra", "rdb": "rb", "wra": "wa", "wrb": "wb",
    "stride": "ar",
    "hin": "in", "rin": "in", "sin": "in", "hout": "out", "rout": "out", "sout": "out",
}
#: slots never shared: control (loops, AGUs, jumps, scratchpad pointers) and raw fields
_NEVER = ("loop", "agu", "jump", "halt", "spad", "raw", "}", "last")


@lru_cache(maxsize=1 << 14)
def slot_units(line: str) -> frozenset:
    """The units an instruction's text uses (``pred`` for a predicate, ``rowbus`` /
    ``colbus`` when it drives or reads a bus, ``ctl`` for anything never shared).
    Raises ValueError on a slot it does not know (so a new slot form is never shared
    by mistake)."""
    units = set()
    for slot in line.split("|"):
        s = slot.strip()
        if not s or s == "nop":
            continue
        if s.startswith("@"):
            s = s.split(None, 1)[1] if " " in s else ""
            if s == "writes" or s.startswith("writes "):
                # a write predicate gates both SRAM write ports, nothing else
                units.update(("wpred", "wa", "wb"))
                s = s[len("writes"):].strip()
            else:
                units.add("pred")
            if not s:
                continue
        words = s.replace("=", " ").replace("[", " ").replace("]", " ").split()
        head = words[0]
        if head in _NEVER or any(w in _NEVER for w in words):
            units.add("ctl")
            continue
        if head in _FIRST:
            units.add(_FIRST[head])
        elif head.startswith("ar") and head[2:].isdigit():
            units.add("ar")
        else:
            raise ValueError(f"unknown slot {s!r} in {line!r}")
        if "row" in words:
            units.add("rowbus")
        if "col" in words:
            units.add("colbus")
        if "gate" in s and "pred" in s:
            units.add("pred")
    return frozenset(units)


def can_merge(a: str, b: str) -> bool:
    """Whether instructions ``a`` and ``b`` can be one instruction doing both: no unit in
    common (a bus counts as a unit: one driver and its readers per instruction), no
    control slot, and no predicate (it would apply to the other's work too). A write
    predicate (``@row=k writes``) claims both SRAM write ports, so it merges with work
    that writes no SRAM operand (an FMA's write-back to SRAM is not gated by it, but it
    would land in a later instruction's write port: callers merge such lines only with
    kernels without SRAM write-backs)."""
    ua, ub = slot_units(a), slot_units(b)
    if "ctl" in ua or "ctl" in ub or "pred" in ua or "pred" in ub:
        return False
    return not (ua & ub)


def merge_rows(primary: list, rows: list) -> tuple:
    """Place the instructions of ``rows`` (lists of instruction texts, in order) into
    ``primary``'s: each into the first instruction at or after the previous one's that
    :func:`can_merge` with it, past ``primary``'s end as instructions of their own.
    Returns ``(lines, ends)``: the merged instruction texts and, per row, the length the
    merged code would have if it stopped after that row."""
    out = list(primary)
    used = [False] * len(out)
    p, ends = 0, []
    for row in rows:
        for s in row:
            while p < len(primary) and (used[p] or not can_merge(primary[p], s)):
                p += 1
            if p < len(primary):
                if s not in ("", "nop"):
                    out[p] = s if primary[p] in ("", "nop") else f"{primary[p]} | {s}"
                used[p] = True
                p += 1
            else:
                out.append(s)
                p = len(out)
                used.append(True)
        ends.append(max(len(primary), p))
    return out, ends
