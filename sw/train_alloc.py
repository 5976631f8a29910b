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
        #: why no placement exists (a region whose rules exclude both banks), else None
        self.broken: str | None = None
        #: what the compiler records with the allocation (e.g. how activations are kept)
        self.meta: dict = {}

    def depth(self, bank):
        return self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words

    def alloc(self, name: str, words: int, what: str, *, bank: str | None = None, forbid=(), prefer=None):
        """Allocate ``words`` words for ``name``: in ``bank``, or in an allowed bank
        (not in ``forbid``), ``prefer`` first when allowed, else the one with more room."""
        if bank is None:
            allowed = [b for b in ("a", "b") if b not in forbid]
            if not allowed:
                self.broken = self.broken or f"{name}: no bank allowed"
                allowed = ["a"]
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

    def alias(self, name: str, of: str, words: int, what: str):
        """``name`` at ``of``'s address (a region dead while ``of`` is live, or the
        same data); ``of`` grows to ``words`` if smaller (only for the last region
        allocated in its bank)."""
        it = self.items[of]
        if words > it.words:
            r = it.region
            if self.next[r.bank] != r.base + it.words:
                raise ValueError(f"alias {name}: {of} is not the last region of bank {r.bank.upper()}")
            self.next[r.bank] = r.base + words
            it.words = words
        self.items[name] = Alloc(name, it.region, words, what)
        return it.region

    def arenas(self):
        """Start regions whose lifetimes do not overlap: ``with al.arenas() as ar:``
        allocate the first arena, ``ar.next()`` rewinds both banks to the start for the
        next one; at the end both banks continue after the largest."""
        return _Arenas(self)

    def fits(self):
        if self.broken:
            return False
        return all(self.next[b] <= self.depth(b) for b in ("a", "b"))

    def table(self) -> str:
        lines = [f"{'name':<10} {'bank':<4} {'base':>6} {'words':>6}  what"]
        uniq = {id(i): i for i in self.items.values()}.values()      # (aliases once)
        for it in sorted(uniq, key=lambda i: (i.region.bank, i.region.base)):
            lines.append(f"{it.name:<10} {it.region.bank.upper():<4} {it.region.base:>6} {it.words:>6}  {it.what}")
        for b in ("a", "b"):
            lines.append(f"MEM {b.upper()}: {self.next[b]} of {self.depth(b)} words used")
        return "\n".join(lines)


class _Arenas:
    def __init__(self, al: Allocator):
        self.al = al
        self.start = dict(al.next)
        self.end = dict(al.next)

    def __enter__(self):
        return self

    def next(self):
        self.end = {b: max(self.end[b], self.al.next[b]) for b in self.end}
        self.al.next = dict(self.start)

    def __exit__(self, *exc):
        self.next()
        self.al.next = dict(self.end)
        return False
