"""Stream beats <-> lanes: a beat carries ``n`` words of ``w`` bits, lane ``i`` in bits
``i*w .. i*w + w - 1`` (the host, ring and scratchpad beats of a core).

:func:`pack_beats` and :func:`unpack_beats` convert whole arrays at once (through the
little-endian bytes of the lanes when ``w`` is a whole unsigned numpy type, 8 / 16 / 32
/ 64 bits; lane by lane with Python integers otherwise). Both are exact: the same
integers / bit patterns as the per-bit shifts and masks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pack_beats", "unpack_beats", "LaneBeats"]

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


class LaneBeats(Sequence):
    """A sequence of beats (ints) kept as their lanes (``[k, n]``, ``w`` bits each): the
    ints are made when first asked for (:func:`pack_beats`), so a consumer that takes the
    lanes (the fast model's host input) needs none. Equal to a list of the same ints."""

    def __init__(self, lanes, w: int):
        self.lanes = np.asarray(lanes)
        if self.lanes.ndim != 2:
            raise ValueError(f"lanes must be [beats, lanes], got shape {self.lanes.shape}")
        self.w = w
        self._ints = None

    def ints(self) -> list:
        if self._ints is None:
            self._ints = pack_beats(self.lanes, self.w)
        return self._ints

    def exact_lanes(self, dtype):
        """The lanes as ``dtype``, or None unless they are what :func:`unpack_beats` of
        the ints gives (values of ``w`` bits, which ``dtype`` holds)."""
        a, dt = self.lanes, np.dtype(dtype)
        if a.dtype.kind not in "ui" or dt.kind != "u" or dt.itemsize * 8 < self.w:
            return None
        if a.size and (a.min() < 0 or a.max() >> self.w):
            return None
        return a.astype(dt, copy=False)

    def __len__(self):
        return len(self.lanes)

    def __getitem__(self, i):
        return self.ints()[i]

    def __iter__(self):
        return iter(self.ints())

    def __eq__(self, other):
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self):
        return f"LaneBeats({len(self)} beats of {self.lanes.shape[1]} x {self.w} bits)"

    @staticmethod
    def concat(parts):
        """The beats of ``parts`` one after the other: a LaneBeats when they all are, of
        the same lanes and widths, else a list of ints."""
        parts = list(parts)
        if parts and all(isinstance(p, LaneBeats) and p.w == parts[0].w and p.lanes.shape[1] ==
                         parts[0].lanes.shape[1] for p in parts):
            dt = np.result_type(*[p.lanes for p in parts])
            return LaneBeats(np.concatenate([p.lanes.astype(dt, copy=False) for p in parts]), parts[0].w)
        return [b for p in parts for b in p]
