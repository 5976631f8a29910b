"""Data layout: 2D round-robin distribution of matrices and vectors over an nr x nr core.

As in the reference design (and the LAC before it), element ``(i, j)`` of an ``m x n``
matrix lives in PE ``(i mod nr, j mod nr)`` at local position ``(i // nr, j // nr)``; each
PE holds a local ``mp x np`` block (``mp = ceil(m / nr)``, ``np = ceil(n / nr)``), stored
row-major at a base address of one SRAM bank. Positions past the matrix edge are padding
and hold +0, which makes every kernel correct for shapes that ``nr`` does not divide (a
padded row or column contributes exact zeros: ``+0 * x + acc`` leaves ``acc`` unchanged
unless ``acc`` is ``-0``, and kernels start accumulators at +0).

Vector layouts (``x`` of length ``n``, local position ``j // nr``):

``diag``  ``x[j]`` on the diagonal PE ``(j mod nr, j mod nr)`` only (where reductions to
          the diagonal leave results)
``cols``  ``x[j]`` on every PE of column ``j mod nr`` (after a column broadcast; what a
          GEMV ``y = W x`` consumes)
``rows``  ``x[i]`` on every PE of row ``i mod nr`` (what a transposed GEMV ``W^T x``
          and a rank-1 update's left vector consume)

All arrays here are bit patterns (``fmt.np_uint``); ``local`` arrays have shape
``(nr, nr, L)`` (PE row, PE column, local words).
"""

from __future__ import annotations

import numpy as np

__all__ = ["local_len", "pack_matrix", "unpack_matrix", "pack_vector", "unpack_vector", "VECTOR_LAYOUTS"]

VECTOR_LAYOUTS = ("diag", "cols", "rows")


def local_len(n: int, nr: int) -> int:
    """Local length of a dimension of size ``n`` distributed round-robin over ``nr``."""
    if n < 0 or nr < 1:
        raise ValueError(f"bad dimension {n} or nr {nr}")
    return -(-n // nr)


def pack_matrix(a: np.ndarray, nr: int) -> np.ndarray:
    """``m x n`` bit patterns -> ``(nr, nr, mp * np)`` local row-major blocks (zero padded)."""
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"pack_matrix needs a 2-D array, got shape {a.shape}")
    m, n = a.shape
    mp, np_ = local_len(m, nr), local_len(n, nr)
    pad = np.zeros((mp * nr, np_ * nr), dtype=a.dtype)
    pad[:m, :n] = a
    # pad[li*nr + r, lj*nr + c] -> out[r, c, li, lj]
    out = pad.reshape(mp, nr, np_, nr).transpose(1, 3, 0, 2)
    return np.ascontiguousarray(out).reshape(nr, nr, mp * np_)


def unpack_matrix(local: np.ndarray, m: int, n: int) -> np.ndarray:
    """Inverse of :func:`pack_matrix` (padding dropped)."""
    nr = local.shape[0]
    mp, np_ = local_len(m, nr), local_len(n, nr)
    blk = np.asarray(local)[:, :, :mp * np_].reshape(nr, nr, mp, np_).transpose(2, 0, 3, 1)
    return blk.reshape(mp * nr, np_ * nr)[:m, :n]


def pack_vector(x: np.ndarray, nr: int, layout: str = "diag") -> np.ndarray:
    """Length-``n`` bit patterns -> ``(nr, nr, ceil(n / nr))`` in ``layout`` (zeros elsewhere)."""
    if layout not in VECTOR_LAYOUTS:
        raise ValueError(f"unknown vector layout {layout!r}; allowed: {', '.join(VECTOR_LAYOUTS)}")
    x = np.asarray(x)
    n = x.shape[0]
    L = local_len(n, nr)
    pad = np.zeros(L * nr, dtype=x.dtype)
    pad[:n] = x
    per = pad.reshape(L, nr).T            # per[q, l] = x[l * nr + q]
    out = np.zeros((nr, nr, L), dtype=x.dtype)
    for q in range(nr):
        if layout == "diag":
            out[q, q] = per[q]
        elif layout == "cols":
            out[:, q] = per[q]
        else:
            out[q, :] = per[q]
    return out


def unpack_vector(local: np.ndarray, n: int, layout: str = "diag", *, which: int = 0) -> np.ndarray:
    """Read a vector back from ``local`` (``(nr, nr, L)``).

    For ``cols`` / ``rows`` the copy in PE row / column ``which`` is read.
    """
    if layout not in VECTOR_LAYOUTS:
        raise ValueError(f"unknown vector layout {layout!r}; allowed: {', '.join(VECTOR_LAYOUTS)}")
    nr, _, L = local.shape
    per = np.zeros((nr, L), dtype=local.dtype)
    for q in range(nr):
        per[q] = local[q, q] if layout == "diag" else local[which, q] if layout == "cols" else local[q, which]
    return per.T.reshape(L * nr)[:n]
