"""Ring collectives on matrices in the 2D round-robin layout (:mod:`sw.layout`), as
program fragments for training programs (``docs/chip.md``, "Collectives on 2D-layout
matrices").

A matrix region lives in one SRAM bank of every PE: element ``(i, j)`` in PE
``(i mod nr, j mod nr)`` at local word ``base + (i // nr) * ld + j // nr``. A
:class:`MatBlock` is a rectangle of local words of such a region. It travels over the ring
as *beats* of ``nr`` lanes, word by word (row-major over the block), and within a word PE
column by PE column: beat ``q`` of a word carries the values of the PEs ``(i, q)``, lane
``i`` from PE ``(i, q)``. Such a beat is on the *row* buses (row bus ``i`` joins the PEs
``(i, *)``): ``rdrv ... @col=q`` puts it there and ``rin row`` takes it there, so every
transfer here is a chain on the row buses that keeps the beat's orientation.

* originator: ``@col=q | rd [ar1]++ gate=rdrv | rdrv mem @col=q | rout row``
* forwarder: ``rin row | rout row | @col=q | wr [ar1]++ = row`` (last receiver: no
  ``rout``)
* reduce, intermediate core: ``rin row | rd [ar1]++ gate=pred | @col=q | add r = row +
  mem`` and, ``d`` slots later, ``rdrv r @col=q | rout row``; final core: ``rin row | rd
  [ar1]++ gate=pred | @col=q | add mem = row + mem`` (FMA write-back in place).

Addresses: one address register, ``ar1`` (stride 1), in every PE. Every instruction that
addresses SRAM is predicated on ``@col=q``, so only the PEs of column ``q`` step their
``ar1``: each PE column walks the block's words once, one word per ``nr`` beats. The last
word of every row of a strided block adds the jump to the next row (``ar1 += ld - ncols``
with the post-increment, in the same instruction); the last word of a block adds the jump
to the first word of the core's next block (so blocks at equally spaced addresses give
identical instruction texts, and the folder below turns a run of them into one loop).
``ar1`` is set once, in the fragment's two setup slots.

Fragments are per core (roles and timing differ) and issue the same number of slots on
every core; the caller starts every core's fragment in the same cycle. They are stall-free:
every beat is taken exactly ``RING_HOP_CYCLES = 3`` slots after it is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arch.config import RING_HOP_CYCLES
from sw.ring import RingError, golden_reduce

__all__ = ["MatBlock", "RingFrag", "mat_broadcast", "mat_all_gather", "mat_reduce_scatter", "mat_reduce",
           "mat_broadcast_slots", "mat_all_gather_slots", "mat_reduce_scatter_slots", "mat_reduce_slots",
           "golden_mat_broadcast", "golden_mat_all_gather", "golden_mat_reduce_scatter", "golden_mat_reduce",
           "rs_delay", "rs_hop", "rs_buses", "SETUP_SLOTS"]

#: slots of every fragment's setup (``ar1 = start``, ``stride ar1 = 1``)
SETUP_SLOTS = 2
HOP = RING_HOP_CYCLES


# -- blocks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatBlock:
    """A sub-block of a 2D round-robin matrix region in one SRAM bank, moved over the ring as beats."""

    bank: str     # "a" or "b"
    base: int     # address of local word (0, 0) of the region
    ld: int       # local words per local row of the region
    r0: int
    nrows: int    # local rows of the block: r0 .. r0+nrows-1
    c0: int
    ncols: int    # local columns of the block: c0 .. c0+ncols-1

    # Beat order: for r in range(nrows): for cc in range(ncols): for q in range(nr):
    #   beat = the values of the PEs of PE column q at word base + (r0+r)*ld + c0+cc; lane i = PE (i, q).
    def beats(self, nr) -> int:
        return self.nrows * self.ncols * nr

    def words(self) -> list[int]:
        """Addresses of the block's words in beat-word order (one per word, ``nr`` beats each)."""
        return [self.base + (self.r0 + r) * self.ld + self.c0 + cc
                for r in range(self.nrows) for cc in range(self.ncols)]

    @property
    def shape(self) -> tuple[int, int]:
        return self.nrows, self.ncols

    @property
    def first(self) -> int:
        return self.base + self.r0 * self.ld + self.c0

    @property
    def last(self) -> int:
        return self.base + (self.r0 + self.nrows - 1) * self.ld + self.c0 + self.ncols - 1

    def check(self, cfg, what: str = "block") -> None:
        """Raise :class:`RingError` unless the block is well formed and inside its bank."""
        if self.bank not in ("a", "b"):
            raise RingError(f"{what}: bank must be 'a' or 'b', got {self.bank!r}")
        for f in ("base", "ld", "r0", "nrows", "c0", "ncols"):
            if not isinstance(getattr(self, f), (int, np.integer)):
                raise RingError(f"{what}: {f} must be an integer, got {getattr(self, f)!r}")
        if self.nrows < 1 or self.ncols < 1:
            raise RingError(f"{what}: needs at least one local row and column, got {self.nrows} x {self.ncols}")
        if self.r0 < 0 or self.c0 < 0 or self.base < 0:
            raise RingError(f"{what}: negative base, r0 or c0 ({self.base}, {self.r0}, {self.c0})")
        if self.c0 + self.ncols > self.ld:
            raise RingError(f"{what}: columns {self.c0}..{self.c0 + self.ncols - 1} exceed the region's "
                            f"ld={self.ld} local words per row")
        depth = cfg.mem_a_words if self.bank == "a" else cfg.mem_b_words
        if self.last >= depth:
            raise RingError(f"{what}: words {self.first}..{self.last} do not fit SRAM {self.bank.upper()} "
                            f"({depth} words)")

    def get(self, local: np.ndarray) -> np.ndarray:
        """The block's values from a bank's ``[nr, nr, words]`` array: ``[nr, nr, nrows * ncols]``."""
        return np.asarray(local)[:, :, self.words()]

    def put(self, local: np.ndarray, values: np.ndarray) -> None:
        """Store ``[nr, nr, nrows * ncols]`` values into a bank's ``[nr, nr, words]`` array."""
        local[:, :, self.words()] = values


@dataclass
class RingFrag:
    """A core's part of a ring collective: assembly text (zero-overhead loops, no HALT) for
    :meth:`sw.asm.Builder.text`, issuing ``slots`` instructions (the same on every core)."""

    text: str
    slots: int

    @property
    def words(self) -> int:
        """Microcode words of the text."""
        return sum(1 for ln in self.text.splitlines() if ln.strip() and ln.strip() != "}")


# -- checks -------------------------------------------------------------------------------
def _need(cfg, k: int) -> int:
    c = cfg.cores
    if c < 2:
        raise RingError(f"ring collectives need a chip (cfg.cores >= 2), got cores={c}")
    if cfg.n_ar < 2:
        raise RingError(f"the matrix collectives use address register ar1: n_ar={cfg.n_ar} is too few")
    if not 0 <= k < c:
        raise RingError(f"core {k} is not a core of the chip (cores={c})")
    return c


def _segments(cfg, seg, what: str) -> list[MatBlock]:
    c = cfg.cores
    try:
        blks = [seg(s) for s in range(c)]
    except RingError:
        raise
    except Exception as e:   # noqa: BLE001 - report the caller's callable failing clearly
        raise RingError(f"{what}: seg(s) failed: {e}") from e
    for s, b in enumerate(blks):
        if not isinstance(b, MatBlock):
            raise RingError(f"{what}: seg({s}) is not a MatBlock: {b!r}")
        b.check(cfg, f"{what} segment {s}")
        if b.shape != blks[0].shape:
            raise RingError(f"{what}: segments must have equal shapes: segment 0 is {blks[0].shape[0]} x "
                            f"{blks[0].shape[1]} local words, segment {s} {b.shape[0]} x {b.shape[1]}")
    seen: dict = {}
    for s, b in enumerate(blks):
        for w in b.words():
            o = seen.setdefault((b.bank, w), s)
            if o != s:
                raise RingError(f"{what}: segments {o} and {s} overlap (SRAM {b.bank.upper()} word {w})")
    return blks


def rs_delay(cfg) -> int:
    """Slots from a reduce-scatter add to the send of its sum: ``fpu_latency - 1`` (when the
    FMA result is a source), rounded up to odd (adds on even slots, sends on odd ones)."""
    d = cfg.fpu_latency - 1
    return d if d % 2 else d + 1


# -- slot formulas ------------------------------------------------------------------------
def mat_broadcast_slots(cfg, m: int) -> int:
    """``2 + 3 (c - 1) + m``: setup, the chain's latency, ``m`` beats."""
    return SETUP_SLOTS + HOP * (cfg.cores - 1) + m


def _ag_period(m: int) -> int:
    return m + HOP


def mat_all_gather_slots(cfg, m: int) -> int:
    """``2 + c m + 6 (c - 1)``: segment ``s`` starts at ``s (m + 3)``, the last one crosses
    ``c - 1`` hops of 3 slots."""
    c = cfg.cores
    return SETUP_SLOTS + (c - 1) * _ag_period(m) + HOP * (c - 1) + m


def rs_hop(cfg) -> int:
    """``D = nr + L + 1``: slots from a reduce-scatter core's first take of a segment to
    the next core's (a whole local word arrives before its first transposed beat leaves,
    ``nr - 1`` slots, its last sum is readable ``L - 1`` slots after its add, then the
    3-slot hop)."""
    return cfg.nr + cfg.fpu_latency + 1


def _rs_period(cfg, m: int) -> int:
    return m + rs_hop(cfg)


def mat_reduce_scatter_slots(cfg, m: int) -> int:
    """``2 + (c - 1)(m + D) + 3 + (c - 2) D + m - 1 + L = 4 + L + c m + (2 c - 3) D``
    with ``D`` = :func:`rs_hop`: segment ``s`` starts at ``2 + s (m + D)``; the last
    one's chain ends with its last add, then ``L`` slots until its sum is in SRAM;
    ``= c m + 24 c - 25`` for ``nr = 4``, ``L = 7``."""
    c, D = cfg.cores, rs_hop(cfg)
    return 4 + cfg.fpu_latency + c * m + (2 * c - 3) * D


def mat_reduce_slots(cfg, m: int) -> int:
    """``2 + 3 + (c - 2)(d + 3) + 2 (m - 1) + L``: one chain of :func:`mat_reduce_scatter`
    (its last segment's, without the earlier segments' periods); ``= 2 m + 10 c - 10`` by
    default (``d = L = 7``)."""
    c, d = cfg.cores, rs_delay(cfg)
    return SETUP_SLOTS + HOP + (c - 2) * (d + HOP) + 2 * (m - 1) + cfg.fpu_latency


# -- schedule -> text ---------------------------------------------------------------------
@dataclass
class _Window:
    """One address stream of a core: beat ``j`` of ``blk`` at slot ``start + step * j``."""

    start: int
    step: int
    blk: MatBlock
    kind: str                 # orig | fwd | store | add | fin
    send_delay: int = 0       # add: the sum of beat j is sent at start + step j + send_delay


def _beat_text(kind: str, b: str, q: int, reg: int, extra: str) -> str:
    if kind == "orig":
        t = f"@col={q} | rd{b} [ar1]++ gate=rdrv | rdrv mem{b} @col={q} | rout row"
    elif kind == "fwd":
        t = f"rin row | rout row | @col={q} | wr{b} [ar1]++ = row"
    elif kind == "store":
        t = f"rin row | @col={q} | wr{b} [ar1]++ = row"
    elif kind == "add":
        t = f"rin row | rd{b} [ar1]++ gate=pred | @col={q} | add r{reg} = row + mem{b}"
    elif kind == "fin":
        t = f"rin row | rd{b} [ar1]++ gate=pred | @col={q} | add mem{b} = row + mem{b}"
    else:                                        # pragma: no cover
        raise AssertionError(kind)
    return f"{t} | {extra}" if extra else t


def _render(cfg, windows: list[_Window], total: int, reg: int, name: str) -> RingFrag:
    nr = cfg.nr
    windows = sorted(windows, key=lambda w: w.start)
    lines: list = ["nop"] * total
    mask = (1 << cfg.addr_bits) - 1

    def place(slot, text):
        if not SETUP_SLOTS <= slot < total:
            raise AssertionError(f"slot {slot} outside the fragment ({total} slots)")
        if lines[slot] != "nop":
            raise AssertionError(f"two ring instructions in slot {slot}: {lines[slot]!r} and {text!r}")
        lines[slot] = text

    lines[0] = f"ar1 = {windows[0].blk.first}"
    lines[1] = "stride ar1 = 1"
    for n, w in enumerate(windows):
        blk = w.blk
        nw = blk.nrows * blk.ncols
        nxt = windows[n + 1].blk.first - (blk.last + 1) if n + 1 < len(windows) else 0
        jump = blk.ld - blk.ncols
        for j in range(nw * nr):
            wi, q = divmod(j, nr)
            if wi == nw - 1:
                delta = nxt
            elif wi % blk.ncols == blk.ncols - 1:
                delta = jump
            else:
                delta = 0
            extra = f"ar1 += {delta & mask}" if delta & mask else ""
            place(w.start + w.step * j, _beat_text(w.kind, blk.bank, q, reg, extra))
            if w.kind == "add":
                place(w.start + w.step * j + w.send_delay, f"rdrv r{reg} @col={q} | rout row")
    return RingFrag(_fold_text(cfg, lines, _periods(nr, windows[0].blk), name), total)


def _periods(nr: int, blk: MatBlock) -> list[int]:
    m = blk.beats(nr)
    ps = {1, nr, 2 * nr, blk.ncols * nr, 2 * blk.ncols * nr, m, 2 * m}
    return sorted(ps)


def _fold_text(cfg, lines: list[str], periods: list[int], name: str) -> str:
    """Per-slot instruction texts -> assembly with zero-overhead loops over the repeats
    (period candidates ``periods``), nested up to ``cfg.n_loops`` levels; checked by
    expanding the result again."""
    limit = (1 << cfg.loop_bits) - 1
    counter = [0]

    def loopname():
        counter[0] += 1
        return f"{name}_{counter[0]}"

    def fold(seq: list[str], depth: int) -> list[str]:
        out: list[str] = []
        i, n = 0, len(seq)
        while i < n:
            best = None
            if depth < cfg.n_loops:
                for p in periods:
                    if i + 2 * p > n:
                        break
                    k = 0
                    while i + p + k < n and seq[i + k] == seq[i + p + k]:
                        k += 1
                    N = min((k + p) // p, limit)
                    if N >= 2 and (best is None or N * p > best[0] * best[1]):
                        best = (N, p)
            attach = bool(out) and out[-1] != "}" and "{" not in out[-1]
            if best is not None and (attach or best[0] >= 3):
                N, p = best
                block = seq[i:i + p]
                # a run of one repeated instruction leaves its last copy outside the loop,
                # so that a loop right after it can use that copy as its arming instruction
                tail = p == 1 and N >= 3 and (attach or N >= 4)
                if tail:
                    N -= 1
                if attach:
                    out[-1] = f"{out[-1]} | loop {loopname()} {N} {{"
                else:
                    out += fold(block[:-1], depth)
                    out.append(f"{block[-1]} | loop {loopname()} {N - 1} {{")
                out += fold(block, depth + 1)
                out.append("}")
                i += N * p
                if tail:
                    out.append(seq[i])
                    i += 1
            else:
                out.append(seq[i])
                i += 1
        return out

    out = fold(lines, 0)
    if _unfold(out) != lines:                 # pragma: no cover - a folder bug
        raise AssertionError("loop folding changed the instruction sequence")
    words = sum(1 for x in out if x != "}")
    if words > cfg.ucode_depth:
        raise RingError(f"the fragment needs {words} microcode words, more than ucode_depth={cfg.ucode_depth}")
    return "\n".join(out)


def _unfold(out: list[str]) -> list[str]:
    """Expand folded text (as produced by :func:`_fold_text`) back into per-slot texts."""
    import re

    pat = re.compile(r"^(.*) \| loop \S+ (\d+) \{$")

    def expand(i: int) -> tuple[list[str], int]:
        res: list[str] = []
        while i < len(out):
            ln = out[i]
            if ln == "}":
                return res, i + 1
            mt = pat.match(ln)
            if mt:
                res.append(mt.group(1))
                body, i = expand(i + 1)
                res += body * int(mt.group(2))
            else:
                res.append(ln)
                i += 1
        return res, i

    return expand(0)[0]


# -- collectives --------------------------------------------------------------------------
def mat_broadcast(cfg, k: int, src: MatBlock, dst: MatBlock, root: int = 0, name: str = "mb") -> RingFrag:
    """Core ``k``'s part of a broadcast: core ``root`` sends ``src``; every other core stores
    the beats into ``dst`` (same shape) and, except the last in ring order (``root - 1``),
    forwards them. The core ``h`` hops after the root takes beat ``j`` in slot
    ``2 + 3 h + j``. :func:`mat_broadcast_slots` slots."""
    c = _need(cfg, k)
    if not 0 <= root < c:
        raise RingError(f"broadcast root {root} is not a core (cores={c})")
    src.check(cfg, "broadcast source")
    dst.check(cfg, "broadcast destination")
    if src.shape != dst.shape:
        raise RingError(f"broadcast: source {src.shape[0]} x {src.shape[1]} and destination "
                        f"{dst.shape[0]} x {dst.shape[1]} local words differ in shape")
    m = src.beats(cfg.nr)
    h = (k - root) % c
    if h == 0:
        w = _Window(SETUP_SLOTS, 1, src, "orig")
    else:
        w = _Window(SETUP_SLOTS + HOP * h, 1, dst, "fwd" if h < c - 1 else "store")
    return _render(cfg, [w], mat_broadcast_slots(cfg, m), 0, name)


def mat_all_gather(cfg, k: int, seg, name: str = "mg") -> RingFrag:
    """Core ``k``'s part of an all-gather: core ``s`` holds segment ``s`` at ``seg(s)``
    (``c`` equally shaped, disjoint :class:`MatBlock`); after it every core holds every
    segment at ``seg(s)``. Segments go one after another as chains: core ``s`` sends beat
    ``j`` of segment ``s`` in slot ``T_s + j``, ``T_s = 2 + s (m + 3)``; the core ``h``
    hops on takes it in ``T_s + 3 h + j`` and forwards it in the same instruction (``h <
    c - 1``). :func:`mat_all_gather_slots` slots."""
    c = _need(cfg, k)
    blks = _segments(cfg, seg, "all-gather")
    m = blks[0].beats(cfg.nr)
    P = _ag_period(m)
    wins = []
    for s in range(c):
        h = (k - s) % c
        T = SETUP_SLOTS + s * P
        if h == 0:
            wins.append(_Window(T, 1, blks[s], "orig"))
        else:
            wins.append(_Window(T + HOP * h, 1, blks[s], "fwd" if h < c - 1 else "store"))
    return _render(cfg, wins, mat_all_gather_slots(cfg, m), 0, name)


def rs_buses(k: int) -> tuple[str, str]:
    """``(receive, send)`` buses of core ``k`` in a reduce-scatter: even cores take beats
    on the row buses and send on the column buses, odd cores the other way round (``c``
    is even, so every link joins a sender and a receiver on the same bus)."""
    return ("row", "col") if k % 2 == 0 else ("col", "row")


def _sel(bus: str) -> str:
    """The index a beat on ``bus`` selects PEs by: a row-bus beat is a PE column."""
    return "col" if bus == "row" else "row"


def mat_reduce_scatter(cfg, k: int, seg, name: str = "mr", reg: int = 0) -> RingFrag:
    """Core ``k``'s part of a reduce-scatter: every core holds a partial of every segment
    ``s`` at ``seg(s)``; after it core ``s`` holds at ``seg(s)`` the sum over the cores,
    added in ring order from core ``s + 1`` (:func:`golden_mat_reduce_scatter`). Other
    memory is unchanged (only the final core of a segment writes).

    **One slot per beat**: core ``k`` always takes beats on one bus and sends on the
    other (:func:`rs_buses`), so an add and a send share an instruction. A beat on the row
    buses is one PE column of a local word (lane ``i`` = PE ``(i, q)``), on the column
    buses one PE row (lane ``j`` = PE ``(q, j)``): a core transposes every word it passes
    on, sending its ``nr`` beats once the whole word has been added (``nr - 1`` slots
    after its first beat, plus ``L - 1`` until the last sum is readable). Segment ``s`` is
    a chain from core ``s + 1``, started at ``T_s = 2 + s (m + D)`` (``D`` =
    :func:`rs_hop`): the originator sends beat ``j`` of its partial in ``T_s + j``; the
    core ``h`` hops on takes it in ``R_h + j`` (``R_1 = T_s + 3``, ``R_{h+1} = R_h +
    D``), adds its partial into ``r{reg + w mod 2}`` (``w`` counts the words the core has
    taken in this collective: two registers, as a word's sums are sent while the next
    word's adds land) and sends
    the transposed beats ``j`` in ``R_h + nr + L - 2 + j``; core ``s`` adds with an FMA
    writing back in place. :func:`mat_reduce_scatter_slots` slots (the last sum is in SRAM
    when the fragment ends); registers ``r{reg}``, ``r{reg + 1}``."""
    c = _need(cfg, k)
    if not 0 <= reg < cfg.n_regs - 1:
        raise RingError(f"reduce-scatter registers r{reg}, r{reg + 1} do not exist (n_regs={cfg.n_regs})")
    blks = _segments(cfg, seg, "reduce-scatter")
    nr = cfg.nr
    m = blks[0].beats(nr)
    D, lat = rs_hop(cfg), cfg.fpu_latency - 1
    P = _rs_period(cfg, m)
    rx, tx = rs_buses(k)
    total = mat_reduce_scatter_slots(cfg, m)
    slots: list = [[] for _ in range(total)]
    mask = (1 << cfg.addr_bits) - 1
    wins = []                                   # (first slot of the block's ar1 walk, block, kind)
    for s in range(c):
        h = (k - s - 1) % c
        T = SETUP_SLOTS + s * P
        if h == 0:
            wins.append((T, blks[s], "orig"))
        else:
            R = T + HOP + (h - 1) * D
            wins.append((R, blks[s], "add" if h < c - 1 else "fin"))
    wins.sort(key=lambda w: w[0])
    words = 0                                   # words this core has passed on: register parity
    for n, (start, blk, kind) in enumerate(wins):
        b = blk.bank
        nw = blk.nrows * blk.ncols
        nxt = wins[n + 1][1].first - (blk.last + 1) if n + 1 < len(wins) else 0
        jump = blk.ld - blk.ncols
        for j in range(nw * nr):
            wi, q = divmod(j, nr)
            delta = nxt if wi == nw - 1 else (jump if wi % blk.ncols == blk.ncols - 1 else 0)
            extra = f" | ar1 += {delta & mask}" if delta & mask else ""
            r = f"r{reg + (words + wi) % 2}"
            if kind == "orig":
                sel = _sel(tx)
                gate = "rdrv" if tx == "row" else "cdrv"
                slots[start + j].append(f"@{sel}={q} | rd{b} [ar1]++ gate={gate} | {gate} mem{b} @{sel}={q} | "
                                        f"rout {tx}{extra}")
            else:
                dst = r if kind == "add" else f"mem{b}"
                slots[start + j].append(f"rin {rx} | rd{b} [ar1]++ gate=pred | @{_sel(rx)}={q} | "
                                        f"add {dst} = {rx} + mem{b}{extra}")
                if kind == "add":
                    drv = "rdrv" if tx == "row" else "cdrv"
                    slots[start + nr - 1 + lat + j].append(f"{drv} {r} @{_sel(tx)}={q} | rout {tx}")
        words += nw
    lines = ["nop"] * total
    lines[0] = f"ar1 = {wins[0][1].first}"
    lines[1] = "stride ar1 = 1"
    for t, parts in enumerate(slots):
        if not parts:
            continue
        if t < SETUP_SLOTS or len(parts) > 2 or sum("rin " in x for x in parts) > 1 or \
                sum("rout " in x for x in parts) > 1:
            raise AssertionError(f"reduce-scatter slot {t} of core {k}: {parts}")   # pragma: no cover
        lines[t] = " | ".join(parts)
    return RingFrag(_fold_text(cfg, lines, sorted(set(_periods(nr, blks[0])) | {P}), name), total)


def mat_reduce(cfg, k: int, blk: MatBlock, root: int = 0, name: str = "mq", reg: int = 0) -> RingFrag:
    """Core ``k``'s part of a reduce to ``root``: every core holds a partial at ``blk``;
    after it ``root`` holds at ``blk`` the sum over the cores, added in ring order from
    core ``root + 1`` (:func:`golden_mat_reduce`); the other cores' memories are unchanged.
    One chain of :func:`mat_reduce_scatter` (the same per-beat instructions and timing):
    core ``root + 1`` sends beat ``j`` in ``2 + 2 j``, the core ``h`` hops on takes it in
    ``R_h + 2 j`` (``R_1 = 5``, ``R_{h+1} = R_h + d + 3``), adds its partial in register
    ``r{reg}`` and sends the sum ``d`` slots later; ``root`` adds with an FMA writing back
    in place. :func:`mat_reduce_slots` slots (the sum is in SRAM when the fragment ends)."""
    c = _need(cfg, k)
    if not 0 <= root < c:
        raise RingError(f"reduce root {root} is not a core (cores={c})")
    if not 0 <= reg < cfg.n_regs:
        raise RingError(f"reduce register r{reg} does not exist (n_regs={cfg.n_regs})")
    blk.check(cfg, "reduce block")
    m = blk.beats(cfg.nr)
    d = rs_delay(cfg)
    h = (k - root - 1) % c
    if h == 0:
        w = _Window(SETUP_SLOTS, 2, blk, "orig")
    else:
        w = _Window(SETUP_SLOTS + HOP + (h - 1) * (d + HOP), 2, blk, "add" if h < c - 1 else "fin", d)
    return _render(cfg, [w], mat_reduce_slots(cfg, m), reg, name)


# -- goldens ------------------------------------------------------------------------------
# ``mems``: per core, ``{"a": [nr, nr, words], "b": [nr, nr, words]}`` bit patterns (the
# models' ``memory(bank)``); each golden returns new arrays, the inputs are not changed.
def _copy(mems):
    return [{b: np.array(m[b], copy=True) for b in m} for m in mems]


def golden_mat_broadcast(cfg, mems, src: MatBlock, dst: MatBlock, root: int = 0):
    out = _copy(mems)
    vals = src.get(mems[root][src.bank])
    for k in range(len(mems)):
        if k != root:
            dst.put(out[k][dst.bank], vals)
    return out


def golden_mat_all_gather(cfg, mems, seg):
    """Every core gets core ``s``'s block ``seg(s)``, for every ``s``."""
    c = len(mems)
    out = _copy(mems)
    for s in range(c):
        b = seg(s)
        vals = b.get(mems[s][b.bank])
        for k in range(c):
            b.put(out[k][b.bank], vals)
    return out


def golden_mat_reduce_scatter(cfg, mems, seg):
    """Core ``s``'s block ``seg(s)`` becomes ``acc = p[s+1]``, ``acc = fmt(acc * 1 +
    p[s+h])`` for ``h = 2 .. c`` (mod ``c``), ``p[k]`` core ``k``'s partial (as
    :func:`sw.ring.golden_reduce_scatter`)."""
    c = len(mems)
    out = _copy(mems)
    for s in range(c):
        b = seg(s)
        b.put(out[s][b.bank], golden_reduce(cfg, [b.get(mems[k][b.bank]) for k in range(c)], s))
    return out


def golden_mat_reduce(cfg, mems, blk: MatBlock, root: int = 0):
    """``root``'s block becomes ``acc = p[root+1]``, ``acc = fmt(acc * 1 + p[root+h])`` for
    ``h = 2 .. c`` (mod ``c``), ``p[k]`` core ``k``'s partial; the other cores keep theirs."""
    out = _copy(mems)
    blk.put(out[root][blk.bank], golden_reduce(cfg, [blk.get(m[blk.bank]) for m in mems], root))
    return out
