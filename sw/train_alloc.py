"""Memory allocation of a training step: named regions bump-allocated in banks A and B,
at the same address in every PE (:class:`Allocator`)."""

from __future__ import annotations

from dataclasses import dataclass

from sw.collectives import Region

__all__ = ["Allocator", "Alloc"]


def _other(bank):
    return "b" if bank == "a" else "a"


@dataclass
class Alloc:
    name: str
    region: Region
    words: int
    what: str


class Allocator:
    """Bump allocation of named regions in banks A and B (the same addresses on every
    PE). Allocation never fails; :meth:`fits` tells whether both banks hold what was
    allocated (the compiler then tries another mapping or reports the sizes)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.next = {"a": 0, "b": 0}
        self.items: dict = {}

    def depth(self, bank):
        return self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words

    def alloc(self, name: str, words: int, what: str, *, bank: str | None = None, forbid=(), prefer=None):
        """Allocate ``words`` words for ``name``: in ``bank``, or in an allowed bank
        (not in ``forbid``), ``prefer`` first when allowed, else the one with more room."""
        if bank is None:
            allowed = [b for b in ("a", "b") if b not in forbid]
            if prefer in allowed and self.next[prefer] + words <= self.depth(prefer):
                bank = prefer
            else:
                bank = max(allowed, key=lambda b: (self.depth(b) - self.next[b], b == "a"))
        r = Region(bank, self.next[bank])
        self.next[bank] += words
        self.items[name] = Alloc(name, r, words, what)
        return r

    def used(self, bank):
        return self.next[bank]

    def fits(self):
        return all(self.next[b] <= self.depth(b) for b in ("a", "b"))

    def table(self) -> str:
        lines = [f"{'name':<10} {'bank':<4} {'base':>6} {'words':>6}  what"]
        uniq = {id(i): i for i in self.items.values()}.values()      # (aliases once)
        for it in sorted(uniq, key=lambda i: (i.region.bank, i.region.base)):
            lines.append(f"{it.name:<10} {it.region.bank.upper():<4} {it.region.base:>6} {it.words:>6}  {it.what}")
        for b in ("a", "b"):
            lines.append(f"MEM {b.upper()}: {self.next[b]} of {self.depth(b)} words used")
        return "\n".join(lines)
