"""Partitions of a chip's ring into core groups (spatial sharing, ``docs/chip.md``,
"Partitions").

A group is an aligned power-of-two segment of the ring: ``2**j`` consecutive cores
starting at a multiple of ``2**j`` (buddy style). Each group closes into its own ring: its
first core takes its ring input from the group's last core instead of its predecessor.
The whole ring (the default, no partition) is the group ``(0, cores)``, whatever
``cores`` is.

Each core holds a group register, ``level``: the log2 of its group's size (the whole
ring: :func:`whole_level`). A core's ring input comes from :func:`pred` of its level, its
credit check reads the FIFO of :func:`succ`; a link carries beats only between two cores
whose levels are equal (so both see the same aligned group), which makes a delivery
into another group impossible whatever the host writes.

>>> p = Partition.of(8, [(0, 4), (4, 2), (6, 2)])
>>> [p.pred(k) for k in range(8)]
[3, 0, 1, 2, 5, 4, 7, 6]
"""

from __future__ import annotations

from dataclasses import dataclass

from arch.errors import InputError

__all__ = ["Partition", "PartitionError", "whole_level", "group_of_level", "pred_of_level", "succ_of_level",
           "mux_sources"]


class PartitionError(InputError):
    """A list of groups that is not a partition of aligned power-of-two segments."""


def whole_level(cores: int) -> int:
    """The group register value of a core in the whole ring: ``ceil(log2(cores))``."""
    return max(0, (cores - 1).bit_length())


def group_of_level(k: int, level: int, cores: int) -> tuple[int, int]:
    """``(first, size)`` of core ``k``'s group when its register holds ``level`` (a group
    reaching past the last core is cut there: the whole ring of a chip whose core count
    is not a power of two)."""
    size = 1 << level
    base = k & ~(size - 1)
    return base, min(base + size, cores) - base


def pred_of_level(k: int, level: int, cores: int) -> int:
    """The core whose ring output core ``k`` takes with ``level``."""
    base, size = group_of_level(k, level, cores)
    return base + size - 1 if k == base else k - 1


def succ_of_level(k: int, level: int, cores: int) -> int:
    """The core whose receive FIFO core ``k``'s ring output feeds with ``level``."""
    base, size = group_of_level(k, level, cores)
    return base if k == base + size - 1 else k + 1


def mux_sources(k: int, cores: int) -> list[int]:
    """The distinct cores core ``k``'s ring input mux can select, over every level
    ``0 .. whole_level(cores)``: its predecessor and the last cores of the groups it
    starts (at most ``log2(cores) + 1`` inputs)."""
    out = []
    for lv in range(whole_level(cores) + 1):
        p = pred_of_level(k, lv, cores)
        if p not in out:
            out.append(p)
    return out


@dataclass(frozen=True)
class Partition:
    """Disjoint groups ``(first, size)`` of a chip's ``cores`` cores, each an aligned
    power-of-two segment (or the whole ring). Cores in no group are idle (their
    register keeps them in a group of one)."""

    cores: int
    groups: tuple

    @classmethod
    def of(cls, cores: int, groups) -> "Partition":
        """Check and build; ``groups``: ``(first, size)`` pairs. Raises
        :class:`PartitionError` naming the offending group."""
        gs = tuple((int(a), int(s)) for a, s in groups)
        used = [False] * cores
        for a, s in gs:
            whole = (a, s) == (0, cores)
            if s < 1 or a < 0 or a + s > cores:
                raise PartitionError(f"group of {s} core(s) at core {a} does not fit the chip's {cores} cores")
            if not whole and (s & (s - 1) or a % s):
                raise PartitionError(f"group of {s} core(s) at core {a}: a group is a power of two of cores "
                                     f"starting at a multiple of its size")
            for k in range(a, a + s):
                if used[k]:
                    raise PartitionError(f"core {k} is in two groups")
                used[k] = True
        return cls(cores, gs)

    @classmethod
    def whole(cls, cores: int) -> "Partition":
        return cls(cores, ((0, cores),))

    def level(self, k: int) -> int:
        """Core ``k``'s group register value (0, a ring of itself, for an idle core)."""
        for a, s in self.groups:
            if a <= k < a + s:
                return whole_level(self.cores) if (a, s) == (0, self.cores) else s.bit_length() - 1
        return 0

    def levels(self) -> list[int]:
        return [self.level(k) for k in range(self.cores)]

    def members(self, g: int) -> list[int]:
        a, s = self.groups[g]
        return list(range(a, a + s))

    def pred(self, k: int) -> int:
        return pred_of_level(k, self.level(k), self.cores)

    def succ(self, k: int) -> int:
        return succ_of_level(k, self.level(k), self.cores)
