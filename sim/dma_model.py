"""The DMA engine and external DRAM of a core (``cfg.dram_mib > 0``), as the models see it.

Specified in ``docs/core.md`` ("The DMA engine"). In short: ``DMA_PTR`` sets the engine's
DRAM and scratchpad beat addresses; ``dma load N`` / ``dma store N`` start a copy of ``N``
beats (1..256, inside one 4 KiB DRAM page) DRAM -> scratchpad / scratchpad -> DRAM, after
which both addresses have advanced by ``N``; ``dma wait`` issues only when the engine is
idle, ``dma wait K`` once at most the ``K`` latest transfers are outstanding. The engine holds ``Q = cfg.dma_queue`` transfers (the one it moves and those queued
behind it) and does them one after another: a start while ``Q`` are outstanding stalls
until the oldest is done (``Q = 1``: one transfer at a time, a start while the engine is
busy stalls like a wait). A start issued in cycle ``t`` keeps the engine busy in cycles
``u + 1 .. u + B`` with ``u = max(t, the end of the transfer before it)`` and ``B =
transfer_cycles(cfg, N, store)``; a RUN ends only when its drain is over and the engine
is idle.

The scratchpad region of a transfer is *open* from its start to the next ``dma wait`` that
does not keep it outstanding, or
to the start ``Q`` starts after it (which issues only once the transfer is done), or the
RUN's end: a ``sin`` or ``sout`` of the region of an open load, or a ``sout`` of the
region of an open store, raises :class:`DramError` (the RTL's result
would depend on the DRAM's timing). So the data a transfer moves does not depend on when
its beats move, and the models may copy a transfer's beats at any time in its window.

Users: :class:`sim.core_model.CoreRun` (:class:`DmaEngine`), :class:`sim.fast_model.FastModel`
(:func:`dma_schedule`, :class:`DmaPointers`), the RTL tests (:class:`Dram`).
"""

from __future__ import annotations

from dataclasses import dataclass

from arch.errors import InputError
from arch.isa import DMA_DRAM, DMA_SPAD, DmaOp

__all__ = ["DramError", "Dram", "Transfer", "DmaPointers", "DmaEngine", "RegionCheck", "transfer_cycles",
           "dma_schedule"]


class DramError(InputError):
    """A DMA transfer the core does not define: outside the DRAM or the scratchpad,
    across a 4 KiB DRAM page, or racing with the program's own scratchpad accesses."""


def transfer_cycles(cfg, n: int, store: bool = False) -> int:
    """Cycles the DMA engine is busy with an ``n``-beat transfer: ``cfg.dram_latency``
    plus the beats at the DRAM bandwidth, at most one beat per cycle
    (``ceil(n * max(1, beat bytes / bytes per cycle))``), plus one for a store (it reads
    its first beat from the scratchpad, a synchronous SRAM, before sending it);
    :meth:`arch.config.ArchConfig.dma_cycles`."""
    return cfg.dma_cycles(n, store)


class Dram:
    """External DRAM of ``cfg.dram_depth`` beats (ints, lane ``i`` at bits ``i * width``),
    0 until written; stored sparsely."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.depth = cfg.dram_depth
        self.beats: dict[int, int] = {}

    def _check(self, addr: int, n: int) -> None:
        if addr < 0 or n < 0 or addr + n > self.depth:
            raise DramError(f"DRAM beats {addr}..{addr + n - 1} are outside the {self.depth}-beat DRAM "
                            f"(dram_mib={self.cfg.dram_mib})")

    def read(self, addr: int, n: int) -> list[int]:
        """``n`` beats from beat address ``addr``."""
        self._check(addr, n)
        g = self.beats.get
        return [g(a, 0) for a in range(addr, addr + n)]

    def write(self, addr: int, beats) -> None:
        """Write ``beats`` (ints) from beat address ``addr``."""
        beats = [int(b) for b in beats]
        self._check(addr, len(beats))
        for i, b in enumerate(beats):
            self.beats[addr + i] = b

    def to_bytes(self, addr: int, n: int) -> bytes:
        """``n`` beats as the bytes an AXI memory holds from byte ``addr * beat bytes``
        (little endian: lane 0 first)."""
        bb = self.cfg.spad_beat_bytes
        return b"".join(b.to_bytes(bb, "little") for b in self.read(addr, n))


@dataclass(frozen=True)
class Transfer:
    """One DMA transfer: ``kind`` (:class:`~arch.isa.DmaOp` LOAD / STORE), the DRAM and
    scratchpad beat addresses, ``n`` beats, the microcode address of its start."""

    kind: int
    dram: int
    spad: int
    n: int
    pc: int

    def overlaps(self, spad_addr: int) -> bool:
        return self.spad <= spad_addr < self.spad + self.n


class DmaPointers:
    """The DMA engine's DRAM and scratchpad addresses over a RUN (0 at every RUN start).

    :meth:`step` takes the issued instructions in order and returns the
    :class:`Transfer` an instruction starts (``None`` otherwise), checked against the
    DRAM, the scratchpad and the page rule; a start advances both addresses by its
    beats, a ``DMA_PTR`` sets the selected ones (winning over its own start's advance)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.dram = self.spad = 0

    def step(self, h) -> Transfer | None:
        t = None
        if h.dma in (DmaOp.LOAD, DmaOp.STORE):
            t = Transfer(h.dma, self.dram, self.spad, h.dma_n + 1, h.pc)
            check_transfer(self.cfg, t)
            self.dram = (self.dram + t.n) % self.cfg.dram_depth
            self.spad = (self.spad + t.n) % self.cfg.spad_depth
        if h.dma_sel & DMA_DRAM:
            self.dram = h.dma_val % self.cfg.dram_depth
        if h.dma_sel & DMA_SPAD:
            self.spad = h.dma_val % self.cfg.spad_depth
        return t


def check_transfer(cfg, t: Transfer) -> None:
    """Raise :class:`DramError` for a transfer outside the DRAM or the scratchpad or
    across a 4 KiB DRAM page."""
    what = f"dma {'load' if t.kind == DmaOp.LOAD else 'store'} {t.n} at pc {t.pc}"
    if t.dram + t.n > cfg.dram_depth:
        raise DramError(f"{what}: DRAM beats {t.dram}..{t.dram + t.n - 1} overrun the {cfg.dram_depth}-beat DRAM")
    if t.spad + t.n > cfg.spad_depth:
        raise DramError(f"{what}: scratchpad beats {t.spad}..{t.spad + t.n - 1} overrun the "
                        f"{cfg.spad_depth}-beat scratchpad")
    pg = cfg.dram_page_beats
    if t.dram // pg != (t.dram + t.n - 1) // pg:
        raise DramError(f"{what}: DRAM beats {t.dram}..{t.dram + t.n - 1} cross a 4 KiB page ({pg} beats): "
                        f"split the transfer")


class RegionCheck:
    """The open transfers' scratchpad regions (module docstring) and the race check: a
    wait closes the regions of all but the transfers it keeps outstanding, a start the
    region of the transfer ``queue`` starts before it (it issues only once that one is
    done)."""

    def __init__(self, queue: int = 1):
        self.queue = queue
        self.opened: list[Transfer] = []

    def issue(self, dma: int, keep: int = 0) -> None:
        """A DMA instruction (``dma``: the :class:`~arch.isa.DmaOp`; a wait keeping the
        ``keep`` latest transfers outstanding) issues."""
        if dma == DmaOp.WAIT:
            self.opened = self.opened[len(self.opened) - keep:] if keep else []
        elif dma in (DmaOp.LOAD, DmaOp.STORE):
            self.opened = self.opened[len(self.opened) - self.queue + 1:] if self.queue > 1 else []

    def check(self, pc: int, rd, wr) -> None:
        """An instruction at ``pc`` reads scratchpad beat ``rd`` / writes ``wr`` (``None``:
        no access)."""
        for t in self.opened:
            self._check(t, pc, rd, wr)

    @staticmethod
    def _check(t: Transfer, pc: int, rd, wr) -> None:
        if wr is not None and t.overlaps(wr):
            raise DramError(f"sout at pc {pc} writes scratchpad beat {wr} of the dma "
                            f"{'load' if t.kind == DmaOp.LOAD else 'store'} started at pc {t.pc} "
                            f"before a dma wait")
        if rd is not None and t.kind == DmaOp.LOAD and t.overlaps(rd):
            raise DramError(f"sin at pc {pc} reads scratchpad beat {rd} of the dma load started at pc {t.pc} "
                            f"before a dma wait")


def copy_transfer(t: Transfer, spad, dram: Dram) -> None:
    """Move the beats of ``t`` between ``spad`` (a list of ints) and ``dram``."""
    if t.kind == DmaOp.LOAD:
        spad[t.spad:t.spad + t.n] = dram.read(t.dram, t.n)
    else:
        dram.write(t.dram, spad[t.spad:t.spad + t.n])


class DmaEngine:
    """The DMA engine in :class:`sim.core_model.CoreRun`: its outstanding transfers
    (at most ``cfg.dma_queue``, done one after another), each busy until its end cycle
    (1-based RUN cycles), their beats moved when they finish."""

    def __init__(self, cfg, spad, dram: Dram):
        self.cfg, self.spad, self.dram = cfg, spad, dram
        self.ptrs = DmaPointers(cfg)
        self.region = RegionCheck(cfg.dma_queue)
        self.queue: list = []                #: (Transfer, end cycle), oldest first
        self.end = 0                         #: the last transfer's end cycle
        self.rd_beats = self.wr_beats = self.busy = self.stalls = 0

    def _retire(self, cycle: int) -> None:
        while self.queue and cycle > self.queue[0][1]:
            copy_transfer(self.queue.pop(0)[0], self.spad, self.dram)

    def idle(self, cycle: int) -> bool:
        """Whether no transfer is outstanding in ``cycle`` (moving the beats of those
        that have finished)."""
        self._retire(cycle)
        return not self.queue

    def can_issue(self, h, cycle: int) -> bool:
        """Whether the head ``h``'s DMA start or wait issues in ``cycle``: a wait once at
        most ``h.dma_n`` transfers are outstanding, a start while fewer than
        ``cfg.dma_queue`` are."""
        self._retire(cycle)
        if h.dma == DmaOp.WAIT:
            return len(self.queue) <= h.dma_n
        return len(self.queue) < self.cfg.dma_queue

    def issue(self, h, cycle: int, rd, wr) -> None:
        """The head ``h`` issues in ``cycle`` (reading scratchpad beat ``rd``, writing ``wr``)."""
        if h.dma:
            self.region.issue(h.dma, h.dma_n)
        t = self.ptrs.step(h)
        self.region.check(h.pc, rd, None)    # a sin on the start itself reads the old beat
        if t is not None:
            self.region.opened.append(t)
            b = transfer_cycles(self.cfg, t.n, t.kind == DmaOp.STORE)
            # the engine takes it when the transfers before it are done
            self.end = max(cycle, self.end) + b
            self.busy += b
            self.queue.append((t, self.end))
            if t.kind == DmaOp.LOAD:
                self.rd_beats += t.n
            else:
                self.wr_beats += t.n
        self.region.check(h.pc, None, wr)    # a sout on a store's start races with it


def dma_schedule(cfg, cycles, transfers, end_cycle: int, spans: list | None = None, keeps=None):
    """The DMA timing of a RUN without any other stall: ``cycles`` the nominal (unstalled)
    1-based issue cycles of the instructions with a ``dma`` field, ``transfers`` their
    :class:`Transfer` (``None`` for a wait), ``end_cycle`` the RUN's nominal length.
    Returns ``(stall cycles, busy cycles, RUN cycles, the stall of each instruction)``;
    ``spans`` (a list) gets ``(u, b)`` per transfer: started in (stalled, 1-based) cycle
    ``u``, the engine busy in cycles ``u + 1 .. u + b``; ``keeps``: per instruction the
    transfers a wait keeps outstanding (``dma wait N``; None: 0 for every wait)."""
    s = busy = 0
    q = cfg.dma_queue
    ends = [0]                              # end cycle of every transfer so far (after a 0)
    each = []
    for i, (c, t) in enumerate(zip(cycles, transfers)):
        u = c + s
        # a wait issues once all but the ``keep`` latest transfers are done, a start once
        # the one dma_queue transfers before it is
        if t is None:
            keep = keeps[i] if keeps is not None else 0
            need = ends[-1 - keep] if len(ends) > 1 + keep else 0
        else:
            need = ends[-q] if len(ends) > q else 0
        each.append(max(0, need + 1 - u))
        if u <= need:
            s += need + 1 - u
            u = need + 1
        if t is not None:
            b = transfer_cycles(cfg, t.n, t.kind == DmaOp.STORE)
            u = max(u, ends[-1])            # the engine takes it once the one before is done
            ends.append(u + b)
            busy += b
            if spans is not None:
                spans.append((u, b))
    return s, busy, max(end_cycle + s, ends[-1] + 1), each
