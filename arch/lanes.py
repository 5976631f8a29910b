"""Stream beats <-> lanes: a beat carries ``n`` words of ``w`` bits, lane ``i`` in bits
``i*w .. i*w + w - 1`` (the host, ring and scratchpad beats of a core).

:func:`pack_beats` and :func:`unpack_beats` convert whole arrays at once (through the
little-endian bytes of the lanes when ``w`` is a whole unsigned numpy type, 8 / 16 / 32
/ 64 bits; lane by lane with Python integers otherwise). Both are exact: the same
integers / bit patterns as the per-bit shifts and masks.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pack_beats", "unpack_beats"]

_UINT = {8: np.dtype("<u1"), 16: np.dtype("<u2"), 32: np.dtype("<u4"), 64: np.dtype("<u8")}


def pack_beats(lanes, w: int) -> list[int]:
    """Beats (Python ints) of ``lanes`` (``[k, n]`` integer bit patterns of ``w`` bits
    each): beat ``j`` = the OR of ``lanes[j, i] << (i * w)`` (wider values are not
    masked, as with the shifts written out)."""
    a = np.asarray(lanes)
    if a.ndim != 2:
        raise ValueError(f"lanes must be [beats, lanes], got shape {a.shape}")
    k, n = a.shape
    if not k:
        return []
    dt = _UINT.get(w)
    if dt is not None and a.dtype.kind in "ui" and (a.dtype.kind == "u" or a.min() >= 0) and \
            (a.dtype.itemsize <= dt.itemsize or a.max() <= (1 << w) - 1):
        raw = np.ascontiguousarray(a, dtype=dt).tobytes()
        step = n * dt.itemsize
        fb = int.from_bytes
        return [fb(raw[i:i + step], "little") for i in range(0, k * step, step)]
    acc = np.zeros(k, dtype=object)
    for i in range(n):
        acc |= np.array([int(v) << (i * w) for v in a[:, i].tolist()], dtype=object)
    return [int(v) for v in acc]


def unpack_beats(beats, n: int, w: int, dtype) -> np.ndarray:
    """``[len(beats), n]`` array of ``dtype``: lane ``i`` of each beat (an int), bits
    ``i*w ..`` (bits above lane ``n - 1`` are ignored)."""
    beats = [int(b) for b in beats]
    out_dt = np.dtype(dtype)
    if not beats:
        return np.zeros((0, n), out_dt)
    dt = _UINT.get(w)
    if dt is not None:
        nb = n * dt.itemsize
        mask = (1 << (n * w)) - 1
        raw = b"".join((b & mask).to_bytes(nb, "little") for b in beats)
        return np.frombuffer(raw, dtype=dt).reshape(len(beats), n).astype(out_dt)
    m = (1 << w) - 1
    obj = np.array(beats, dtype=object)
    out = np.empty((len(beats), n), out_dt)
    for i in range(n):
        out[:, i] = ((obj >> (i * w)) & m).astype(np.uint64)
    return out
