"""Bit-exact numpy golden models of the collectives and kernels.

Each function performs the same floating-point operations, on the same operands, in the
same order as the program that :mod:`sw.collectives` / :mod:`sw.kernels` generates runs
on the array (``pe.fp_golden``: multiply, round, add, round), so the array's results
must equal these bit for bit. The operation order is that of the mapping documented in
``docs/kernels.md``; in short:

* a dot product inside one PE is a chain ``acc = mul(a0, b0)``, then
  ``acc = add(mul(ai, bi), acc)`` in the order of the local index (padded elements
  included: they are +0 and add ``+0 * x``);
* partial sums of a row (column) of PEs are combined by the tree
  (:func:`tree_combine`) or the sequential chain (:func:`seq_combine`);
* elementwise operations act on the local words, padding included.

Arrays are bit patterns (``fmt.np_uint``). Matrix arguments are global (``m x n``);
results are global too unless stated.
"""

from __future__ import annotations

import functools

import numpy as np

from arch.buses import segment_of
from sw.collectives import tree_steps
from pe import fp_golden
from pe.fp_golden import add_bits, canonicalize_nan, mac_bits, mul_bits
from sw.layout import local_len

__all__ = [
    "bits", "tree_combine", "seq_combine", "reduce_partials", "broadcast",
    "dot_chain", "gemv", "gemv_t", "gemv_partials", "rank1", "gemm", "relu", "mask", "axpy", "scale",
]


def bits(fmt, a) -> np.ndarray:
    return np.asarray(a).astype(fmt.np_uint)


def _zero(fmt, shape=()):
    return np.zeros(shape, dtype=fmt.np_uint)


# ======================================================================================
# combining the partial sums of one bus
# ======================================================================================
def tree_combine(fmt, parts) -> np.ndarray:
    """Tree reduction of ``parts[i, ...]`` (``i`` = position along the bus, ``nr`` of them).

    Step ``s`` (segments of ``2^(s+1)`` positions): every position ``i`` adds the value
    its segment carries (the position ``j`` of its segment with ``j mod 2^(s+1) == 2^s``,
    or +0 when the segment has none) to its own: ``v[i] = add(bus_i, v[i])``. The result
    is position 0's value. (All positions of a step are added in one array operation:
    the same additions, element by element.)
    """
    v = np.stack(np.broadcast_arrays(*[bits(fmt, p) for p in parts]))
    for drv, none in _tree_drivers(len(v)):
        bus = v[drv]
        bus[none] = 0
        v = add_bits(fmt, bus, v)
    return v[0]


@functools.lru_cache(maxsize=None)
def _tree_drivers(nr: int) -> tuple:
    """Per step of :func:`tree_combine` on ``nr`` positions: the position whose value
    each position's bus carries (0 where none) and the mask of positions with none."""
    out = []
    for s in range(tree_steps(nr)):
        mod, idx, g = 1 << (s + 1), 1 << s, s + 1
        drv = np.array([next((j for j in segment_of(i, g, nr) if j % mod == idx), -1) for i in range(nr)])
        out.append((np.maximum(drv, 0), drv < 0))
    return tuple(out)


def seq_combine(fmt, parts, first: int, order) -> np.ndarray:
    """Sequential reduction: ``acc = parts[first]``, then ``acc = add(parts[j], acc)`` for
    ``j`` in ``order`` (the drivers at diagonal offsets 1, 2, ..., nr-1)."""
    acc = bits(fmt, parts[first])
    for j in order:
        acc = add_bits(fmt, bits(fmt, parts[j]), acc)
    return acc


def reduce_partials(fmt, Z, mode: str = "tree", direction: str = "row") -> np.ndarray:
    """Golden of :func:`sw.collectives.emit_reduce` and of the kernels' reductions.

    ``Z``: ``(nr, nr, ...)`` partial sums, ``Z[r, c]`` on PE ``(r, c)``. Returns
    ``(nr, ...)``: for ``"row"`` entry ``r`` is row ``r``'s sum, for ``"col"`` entry ``c``
    is column ``c``'s sum. (Every row / column is reduced at once: the same additions in
    the same order as :func:`tree_combine` / :func:`seq_combine` of each.)
    """
    Z = bits(fmt, Z)
    nr = Z.shape[0]
    q = np.arange(nr)
    if mode == "tree":
        # position i along the bus of row / column q: Z[q, i] / Z[i, q]
        return tree_combine(fmt, Z.swapaxes(0, 1) if direction == "row" else Z)
    acc = Z[q, q]
    for d in range(1, nr):
        # diagonal offset d in row q: column (q + d) mod nr; in column q: row (q - d) mod nr
        acc = add_bits(fmt, Z[q, (q + d) % nr] if direction == "row" else Z[(q - d) % nr, q], acc)
    return acc


def broadcast(local_diag, direction: str = "row") -> np.ndarray:
    """``(nr, nr, L)`` diag-layout words -> the rows (``"row"``) / cols layout."""
    loc = np.asarray(local_diag)
    nr = loc.shape[0]
    out = np.zeros_like(loc)
    for q in range(nr):
        if direction == "row":
            out[q, :] = loc[q, q]
        else:
            out[:, q] = loc[q, q]
    return out


# ======================================================================================
# dot-product chains and GEMV
# ======================================================================================
def _pad2(fmt, A, nr):
    A = bits(fmt, A)
    m, n = A.shape
    out = _zero(fmt, (local_len(m, nr) * nr, local_len(n, nr) * nr))
    out[:m, :n] = A
    return out


def _pad1(fmt, v, nr):
    v = bits(fmt, v)
    out = _zero(fmt, (local_len(v.shape[0], nr) * nr,))
    out[:v.shape[0]] = v
    return out


def dot_chain(fmt, a, b) -> np.ndarray:
    """``acc = mul(a[0], b[0])``, then ``acc = add(mul(a[i], b[i]), acc)`` along axis 0
    (broadcasting over the other axes). The products are formed at once, then added in
    the chain's order, each sum rounded (NaNs canonicalized at the end: an addition with
    a NaN operand gives a NaN, so the bits are those of canonicalizing every step)."""
    a, b = np.asarray(a), np.asarray(b)
    k = max(a.ndim, b.ndim) - 1          # the per-step operands broadcast from their last axes
    a = a.reshape(a.shape[:1] + (1,) * (k + 1 - a.ndim) + a.shape[1:])
    b = b.reshape(b.shape[:1] + (1,) * (k + 1 - b.ndim) + b.shape[1:])
    prods = mul_bits(fmt, a, b)
    dt = fmt.np_dtype
    if dt is None:
        acc = prods[0]
        for i in range(1, prods.shape[0]):
            acc = add_bits(fmt, prods[i], acc)
        return acc
    if dt == np.float16:
        return fp_golden.f16_accumulate_rows(prods[0], prods[1:])[-1]
    p = prods.view(dt)
    acc = np.array(p[0], copy=True)
    with np.errstate(all="ignore"):
        for i in range(1, p.shape[0]):
            np.add(p[i], acc, out=acc)
    return canonicalize_nan(fmt, acc.view(fmt.np_uint))


def gemv_partials(fmt, nr, W, x, trans=False) -> np.ndarray:
    """Per-PE partial sums ``(nr, nr, nchain)`` of the GEMV (before the reduction)."""
    Wp = _pad2(fmt, W, nr)
    mp, np_ = Wp.shape[0] // nr, Wp.shape[1] // nr
    W4 = Wp.reshape(mp, nr, np_, nr)                    # [li, r, lj, c]
    xp = _pad1(fmt, x, nr)
    if not trans:
        x2 = xp.reshape(np_, nr)                        # [lj, c]
        a = W4.transpose(2, 1, 3, 0)                    # [lj, r, c, li]
        acc = dot_chain(fmt, a, x2[:, None, :, None])   # [r, c, li]
    else:
        x2 = xp.reshape(mp, nr)                         # [li, r]
        a = W4.transpose(0, 1, 3, 2)                    # [li, r, c, lj]
        acc = dot_chain(fmt, a, x2[:, :, None, None])   # [r, c, lj]
    return acc


def gemv(fmt, nr, W, x, reduce="tree") -> np.ndarray:
    """``y = W x`` as :func:`sw.kernels.emit_gemv` computes it (length ``m``)."""
    m = np.asarray(W).shape[0]
    Z = gemv_partials(fmt, nr, W, x)
    out = reduce_partials(fmt, Z, reduce, "row")        # [r, li]
    return out.T.reshape(-1)[:m]


def gemv_t(fmt, nr, W, x, reduce="tree") -> np.ndarray:
    """``y = W^T x`` as :func:`sw.kernels.emit_gemv` (``trans=True``) computes it."""
    n = np.asarray(W).shape[1]
    Z = gemv_partials(fmt, nr, W, x, trans=True)
    out = reduce_partials(fmt, Z, reduce, "col")        # [c, lj]
    return out.T.reshape(-1)[:n]


def gemv_t_reversed(fmt, nr, W, x, reduce="tree") -> np.ndarray:
    """``W^T x`` with each PE's chain over its local rows last to first, then the
    reduction down the PE columns: :func:`gemv_t` of ``W`` (padded) with its local rows
    in reverse order (SGD's paged backward with pages of one local row, last page
    first: ``ep = x_r W_r``, then ``ep = x_r W_r + ep``, then the reduction)."""
    Wp, xp = _pad2(fmt, W, nr), _pad1(fmt, x, nr)
    mp = Wp.shape[0] // nr
    Wr = Wp.reshape(mp, nr, -1)[::-1].reshape(mp * nr, -1)
    return gemv_t(fmt, nr, Wr, xp.reshape(mp, nr)[::-1].reshape(-1), reduce)[:np.asarray(W).shape[1]]


def gemv_t_paged(fmt, nr, W, x, pages, reduce="tree") -> np.ndarray:
    """``W^T x`` of a panel paged through a buffer, as the training compilers compute it:
    :func:`gemv_t` of each page of rows (``pages``: ``(first row, rows)`` in the order the
    pages are visited), the first page's result, then ``axpy(1, partial, acc)`` (one
    rounding) of each further page."""
    one = fmt.from_float(np.array([1.0]))[0]
    acc = None
    for r0, n in pages:
        part = gemv_t(fmt, nr, W[r0:r0 + n], x[r0:r0 + n], reduce)
        acc = part if acc is None else axpy(fmt, one, part, acc)
    return acc


# ======================================================================================
# rank-1 update and GEMM
# ======================================================================================
def rank1(fmt, nr, W, u, v, alpha=None) -> np.ndarray:
    """``W += alpha u v^T`` as :func:`sw.kernels.emit_rank1` computes it, on the padded
    matrix: returns the ``(mp * nr, np * nr)`` padded result (its ``[:m, :n]`` is ``W``'s
    new value, the rest the padding after the update).

    ``au[i] = mul(u[i], alpha)`` (or ``u[i]``), then ``W[i, j] = add(mul(au[i], v[j]), W[i, j])``.
    """
    Wp = _pad2(fmt, W, nr)
    up = _pad1(fmt, u, nr)
    vp = _pad1(fmt, v, nr)
    au = up if alpha is None else mul_bits(fmt, up, bits(fmt, alpha))
    return mac_bits(fmt, au[:, None], vp[None, :], Wp)


def rank1_scaled_v(fmt, nr, W, u, v, alpha) -> np.ndarray:
    """``W += u (alpha v)^T`` as :func:`sw.kernels.emit_gemv_t_rank1` updates it:
    ``av[j] = mul(v[j], alpha)``, then ``W[i, j] = add(mul(u[i], av[j]), W[i, j])``.
    Padded result, as :func:`rank1`."""
    Wp = _pad2(fmt, W, nr)
    up = _pad1(fmt, u, nr)
    vp = _pad1(fmt, v, nr)
    av = mul_bits(fmt, vp, bits(fmt, alpha))
    return mac_bits(fmt, up[:, None], av[None, :], Wp)


def gemm(fmt, nr, W, X) -> np.ndarray:
    """``Y = W X`` as :func:`sw.kernels.emit_gemm` computes it: for every output a chain
    over ``j = 0 .. np*nr - 1`` (padding included) starting with ``mul``. Returns the
    padded ``(mp * nr, bp * nr)`` result (padding rows / columns hold signed zeros)."""
    Wp = _pad2(fmt, W, nr)
    Xp = _pad2(fmt, X, nr)
    Xp = np.concatenate([Xp, _zero(fmt, (Wp.shape[1] - Xp.shape[0], Xp.shape[1]))]) \
        if Xp.shape[0] < Wp.shape[1] else Xp
    return dot_chain(fmt, Wp.T[:, :, None], Xp[:, None, :])


def gemm_acc(fmt, nr, W, X, Y, alpha=None) -> np.ndarray:
    """``Y += alpha * (W X)`` as :func:`sw.kernels.emit_gemm` (``accumulate=True``)
    computes it: the chain of :func:`gemm`, then ``add(mul(alpha, chain), Y)`` per output
    (``alpha`` None: ``mul(chain, 1)``, exact). Returns the padded result."""
    G = gemm(fmt, nr, W, X)
    Yp = _pad2(fmt, Y, nr)
    a = fmt.np_uint.type(fmt.from_float(np.array([1.0]))[0]) if alpha is None else bits(fmt, alpha)
    return mac_bits(fmt, np.full(G.shape, a, dtype=fmt.np_uint), G, Yp)


def transpose(fmt, nr, M) -> np.ndarray:
    """:func:`sw.collectives.emit_transpose`: the padded transpose (pure data movement)."""
    return _pad2(fmt, M, nr).T.copy()


# ======================================================================================
# elementwise
# ======================================================================================
def _positive(fmt, x):
    x = bits(fmt, x)
    nan = (x & fmt.np_uint.type(fmt.sign_mask - 1)) > fmt.np_uint.type(fmt.inf)
    return ((x & fmt.np_uint.type(fmt.sign_mask)) == 0) & (x != 0) & ~nan, nan


def _only(fmt, new, old, diag):
    """Keep ``old`` outside the diagonal PEs when ``diag`` (local arrays ``(nr, nr, L)``)."""
    if not diag:
        return new
    out = bits(fmt, old).copy()
    for q in range(out.shape[0]):
        out[q, q] = new[q, q]
    return out


def relu(fmt, x, diag=False) -> np.ndarray:
    """``relu(x) = x if x > 0 else +0``, NaN -> the canonical NaN (on local arrays when
    ``diag``: only the diagonal PEs change)."""
    x = bits(fmt, x)
    pos, nan = _positive(fmt, x)
    r = np.where(pos, x, np.where(nan, fmt.np_uint.type(fmt.qnan), fmt.np_uint.type(0))).astype(fmt.np_uint)
    return _only(fmt, r, x, diag)


def mask(fmt, v, m, old=None, diag=False) -> np.ndarray:
    """``v if m > 0 else +0``; a kept NaN ``v`` becomes the canonical NaN."""
    v = bits(fmt, v)
    pos, _ = _positive(fmt, m)
    _, vnan = _positive(fmt, v)
    r = np.where(pos, np.where(vnan, fmt.np_uint.type(fmt.qnan), v), fmt.np_uint.type(0)).astype(fmt.np_uint)
    return _only(fmt, r, v if old is None else old, diag)


def axpy(fmt, alpha, x, y, diag=False) -> np.ndarray:
    """``y = add(mul(alpha, x), y)``."""
    return _only(fmt, mac_bits(fmt, bits(fmt, alpha), bits(fmt, x), bits(fmt, y)), y, diag)


def scale(fmt, alpha, x, old=None, diag=False) -> np.ndarray:
    """``mul(x, alpha)``."""
    return _only(fmt, mul_bits(fmt, bits(fmt, x), bits(fmt, alpha)), x if old is None else old, diag)
