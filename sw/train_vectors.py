"""Vectors between the host and a core, one beat per local word: loaded in the ``cols``
or ``rows`` layout (:func:`emit_load_vector`, :func:`vector_beats`), unloaded from the
diagonal PEs (:func:`emit_unload_diag`, :func:`decode_diag_beats`)."""

from __future__ import annotations

import numpy as np

from arch.lanes import pack_beats, unpack_beats
from sw.asm import cdrv, hin, hout
from sw.collectives import Region

__all__ = ["emit_load_vector", "vector_beats", "emit_unload_diag", "decode_diag_beats", "vector_bits"]


def _elements(b, n, elem, name, agu="g0"):
    """``n`` one-instruction elements, exactly ``n`` instructions: the first three carry
    the AGU setup and the loop instruction (immediate addresses), the rest run in a
    zero-overhead loop (``elem(i, agu)`` -> slots, ``agu`` None for immediates)."""
    if n < 4:
        for i in range(n):
            b.emit(*elem(i, None))
        return n
    b.agu_base(agu, 0, *elem(0, None))
    b.agu_stride(agu, name, 1, *elem(1, None))
    with b.loop(name, n - 3, *elem(2, None)):
        b.emit(*elem(3, agu))
    return n


def emit_load_vector(b, cfg, reg: Region, n: int, layout: str, name: str) -> int:
    """Load a vector of ``n`` local words per PE in the ``cols`` layout (``hin col``:
    lane ``c`` on column bus ``c``, written by every PE) or the ``rows`` layout (``hin
    row``): one beat and one instruction per local word (``nr`` times fewer than
    :func:`sw.transfer.emit_load`, which writes one PE column per beat). Beats:
    :func:`vector_beats`. Returns the instruction count (``n``)."""
    reg = reg.bind(cfg)
    bus = "col" if layout == "cols" else "row"
    return _elements(b, n, lambda i, agu: [hin(bus), reg.wr(bus, i, agu=agu)], name)


def vector_beats(cfg, v_bits, n_words: int) -> list:
    """Host beats of :func:`emit_load_vector` for the (global) vector ``v_bits``: beat
    ``k`` lane ``q`` = ``v[k * nr + q]`` (zero padding)."""
    nr, w = cfg.nr, cfg.fmt.width
    pad = np.zeros(n_words * nr, dtype=np.uint64)
    pad[:len(v_bits)] = np.asarray(v_bits, dtype=np.uint64)
    return pack_beats(pad.reshape(n_words, nr), w)


def emit_unload_diag(b, cfg, reg: Region, n: int, name: str) -> int:
    """Send a diag-layout vector (``n`` local words) to the host: the diagonal PE of each
    column drives its column bus (``cdrv @diag=0``, only it reads), ``hout col``: one beat
    per local word, the last with ``tlast``. ``n`` instructions."""
    reg = reg.bind(cfg)

    def elem(i, agu, last=False):
        return [reg.rd(i, agu=agu, gate="cdrv"), cdrv(reg.src, diag=0), hout("col", last=last)]

    if n > 1:
        _elements(b, n - 1, elem, name)
    b.emit(*elem(n - 1, None, True))
    return n


def decode_diag_beats(cfg, beats, n: int) -> np.ndarray:
    """Beats of :func:`emit_unload_diag` -> the global vector (length ``n``, bit patterns)."""
    nr, w = cfg.nr, cfg.fmt.width
    return unpack_beats([bt.data for bt in beats], nr, w, cfg.fmt.np_uint).reshape(-1)[:n].copy()


def vector_bits(fmt, x, n: int) -> np.ndarray:
    """A host vector of ``n`` values (floats, or bit patterns of ``fmt``) as bit patterns."""
    x = np.asarray(x)
    if x.shape != (n,):
        raise ValueError(f"expected a vector of {n} values, got shape {x.shape}")
    if x.dtype == fmt.np_uint:
        return x
    return fmt.from_float(x.astype(np.float64)).astype(fmt.np_uint)
