"""Bus segmentation: which PEs of a row or column bus see each other's values.

A micro-op's ``seg`` field ``g`` cuts each bus into segments of ``2**g`` PEs (``g = 0``:
the whole bus); ``docs/core.md`` ("Buses") specifies it, :mod:`noc.broadcast_bus` builds
it, and the compiler, golden models and simulators use these definitions.
"""

from __future__ import annotations

__all__ = ["segment_of", "segment_len"]


def segment_of(i: int, g: int, n: int) -> range:
    """PE positions sharing position ``i``'s segment when the bus is cut into segments
    of ``2**g`` PEs (``g = 0``: the whole bus)."""
    if g == 0 or (1 << g) >= n:
        return range(n)
    start = (i >> g) << g
    return range(start, min(start + (1 << g), n))


def segment_len(i: int, g: int, n: int) -> int:
    return len(segment_of(i, g, n))
