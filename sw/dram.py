"""DRAM <-> scratchpad copies as microprogram fragments (cores with DRAM,
``cfg.dram_mib > 0``; the DMA engine of ``docs/core.md``).

:func:`dma_chunks` splits a block of beats into transfers the engine takes (at most 256
beats, inside one 4 KiB DRAM page); :func:`emit_dma_copy` emits the starts (a loop for
a run of equal transfers: each start waits for the one before it) and, unless the caller
overlaps the copy with work, a ``dma wait``. :func:`dma_copy_cycles` is the copy's time
on an idle engine.
"""

from __future__ import annotations

from arch.errors import InputError
from arch.isa import DMA_N_BITS
from sw.asm import Builder, dma

__all__ = ["DramLayoutError", "dma_chunks", "emit_dma_copy", "dma_copy_cycles"]

MAX_BEATS = 1 << DMA_N_BITS


class DramLayoutError(InputError):
    """A DRAM copy outside the DRAM or the scratchpad, or on a core without DRAM."""


def dma_chunks(cfg, dram: int, n: int) -> list[int]:
    """The beats of each transfer copying ``n`` beats from DRAM beat ``dram`` on: as long
    as possible, at most 256 and none crossing a 4 KiB DRAM page."""
    out, a, end = [], dram, dram + n
    pg = cfg.dram_page_beats
    while a < end:
        m = min(MAX_BEATS, end - a, pg - a % pg)
        out.append(m)
        a += m
    return out


def _check(cfg, dram, spad, n):
    if not cfg.dram_mib:
        raise DramLayoutError("a DRAM copy needs DRAM: this configuration has none (cfg.dram_mib = 0)")
    if n < 1 or not 0 <= dram <= cfg.dram_depth - n or not 0 <= spad <= cfg.spad_depth - n:
        raise DramLayoutError(f"DRAM copy of {n} beats (DRAM {dram}.., scratchpad {spad}..) does not fit the "
                              f"{cfg.dram_depth}-beat DRAM and the {cfg.spad_depth}-beat scratchpad")


def emit_dma_copy(b: Builder, cfg, kind: str, dram: int, spad: int, n: int, *, wait: bool = True,
                  loop: str = "dmac") -> None:
    """Emit a copy of ``n`` beats DRAM -> scratchpad (``kind="load"``) or scratchpad ->
    DRAM (``"store"``) between DRAM beats ``dram ..`` and scratchpad beats ``spad ..``;
    ``wait``: end with a ``dma wait`` (else the last transfer is still running and the
    program must not touch its scratchpad words until a wait). Two instructions set the
    addresses, one per run of equal transfers (a loop) follows."""
    if kind not in ("load", "store"):
        raise DramLayoutError(f"DRAM copy kind must be load or store, got {kind!r}")
    _check(cfg, dram, spad, n)
    b.dma_ptr("dram", dram)
    b.dma_ptr("spad", spad)
    chunks = dma_chunks(cfg, dram, n)
    i = 0
    k = 0
    while i < len(chunks):
        j = i
        while j < len(chunks) and chunks[j] == chunks[i]:
            j += 1
        if j - i == 1:
            b.emit(dma(kind, chunks[i]))
        else:
            with b.loop(f"{loop}{k}", j - i):
                b.emit(dma(kind, chunks[i]))
            k += 1
        i = j
    if wait:
        b.emit(dma("wait"))


def dma_copy_cycles(cfg, kind: str, dram: int, n: int) -> int:
    """Cycles from the first start to the engine's idle for :func:`emit_dma_copy` on an
    idle engine: the transfers back to back (each start waits for the one before)."""
    return sum(cfg.dma_cycles(m, kind == "store") + 1 for m in dma_chunks(cfg, dram, n)) - 1
