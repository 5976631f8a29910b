"""Host <-> PE memory transfers as microprogram fragments.

Loading streams beats from the host into PE SRAM: one ``hin row`` beat carries one word
for each PE row (lane ``r`` on row bus ``r``) and is written by the PEs of one column
(predicate ``col = k``), so a core of ``nr x nr`` PEs takes ``nr`` beats per local word
address. Unloading drives one PE per column onto the column buses (``cdrv row = k``) and
pushes the column buses to the host (``hout col``): ``nr`` beats per local word address.
Both are zero-overhead hardware loops over the words (one AGU walks the addresses).

Cycle cost of each: ``nr * L`` instructions for ``L`` words per PE (plus one setup
instruction per column for the loop and AGU).
"""

from __future__ import annotations

import numpy as np

from sw.asm import Builder, cdrv, hin, hout, pred, rda, rdb, wra, wrb

__all__ = ["emit_load", "emit_unload", "load_beats_for", "decode_unload", "TransferError"]


class TransferError(ValueError):
    """A transfer does not fit the PE memories."""


def _bank_words(cfg, bank: str) -> int:
    if bank not in ("a", "b"):
        raise TransferError(f"unknown SRAM bank {bank!r}; allowed: 'a', 'b'")
    return cfg.mem_a_words if bank == "a" else cfg.mem_b_words


def _check(cfg, bank, base, n):
    depth = _bank_words(cfg, bank)
    if n < 1 or base < 0 or base + n > depth:
        raise TransferError(f"{n} words at address {base} do not fit SRAM bank {bank.upper()} "
                            f"({depth} words)")
    if n >= (1 << cfg.loop_bits):
        raise TransferError(f"{n} words exceed the loop trip-count range ({(1 << cfg.loop_bits) - 1})")


def emit_load(b: Builder, cfg, bank: str, base: int, n: int, agu: str = "g0", loop: str = "xfer") -> None:
    """Emit a loop nest that writes ``n`` host words per PE into ``bank[base:base+n]``.

    Consumes ``nr * n`` input beats in the order produced by :func:`load_beats_for`.
    Uses AGU ``agu`` (base and stride are set here) and AR 0 (must be 0).
    """
    _check(cfg, bank, base, n)
    wr = wra if bank == "a" else wrb
    b.agu_base(agu, base)
    for k in range(cfg.nr):
        b.agu_stride(agu, f"{loop}{k}", 1)
        with b.loop(f"{loop}{k}", n):
            b.emit(hin("row"), pred("col", k), wr("row", 0, 0, agu=agu))


def load_beats_for(cfg, local: np.ndarray) -> list[int]:
    """Host beats for :func:`emit_load` of ``local`` (``(nr, nr, n)`` bit patterns)."""
    nr, w = cfg.nr, cfg.fmt.width
    local = np.asarray(local, dtype=np.uint64)
    if local.shape[:2] != (nr, nr):
        raise TransferError(f"local array must be (nr, nr, n) = ({nr}, {nr}, n), got {local.shape}")
    beats = []
    for k in range(nr):
        for a in range(local.shape[2]):
            beat = 0
            for r in range(nr):
                beat |= int(local[r, k, a]) << (r * w)
            beats.append(beat)
    return beats


def emit_unload(b: Builder, cfg, bank: str, base: int, n: int, agu: str = "g1", loop: str = "yfer",
                last: bool = True) -> None:
    """Emit a loop nest that sends ``bank[base:base+n]`` of every PE to the host
    (``nr * n`` beats, decoded by :func:`decode_unload`). Only the driving PE reads."""
    _check(cfg, bank, base, n)
    rd = rda if bank == "a" else rdb
    src = "mema" if bank == "a" else "memb"
    b.agu_base(agu, base)
    for k in range(cfg.nr):
        b.agu_stride(agu, f"{loop}{k}", 1)
        if last and k == cfg.nr - 1 and n > 1:
            with b.loop(f"{loop}{k}", n - 1):
                b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv(src, row=k), hout("col"))
            # the final beat carries tlast: one more instruction at the last address
            b.agu_base(agu, base + n - 1)
            b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv(src, row=k), hout("col", last=True))
        else:
            with b.loop(f"{loop}{k}", n):
                b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv(src, row=k),
                       hout("col", last=last and k == cfg.nr - 1))


def decode_unload(cfg, beats, n: int) -> np.ndarray:
    """``nr * n`` beats of :func:`emit_unload` -> ``(nr, nr, n)`` bit patterns."""
    nr, w = cfg.nr, cfg.fmt.width
    data = [b.data if hasattr(b, "data") else (b[0] if isinstance(b, (tuple, list)) else int(b)) for b in beats]
    if len(data) != nr * n:
        raise TransferError(f"expected {nr * n} beats, got {len(data)}")
    out = np.zeros((nr, nr, n), dtype=cfg.fmt.np_uint)
    m = (1 << w) - 1
    for k in range(nr):
        for a in range(n):
            beat = data[k * n + a]
            for c in range(nr):
                out[k, c, a] = (beat >> (c * w)) & m
    return out
