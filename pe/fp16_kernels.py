"""Compiled binary16 kernels (numba) on arrays of bit patterns: multiply, add, the PE's
MAC and accumulation chains, each operation correctly rounded (nearest even, full
subnormals, overflow to infinity, every NaN result the canonical ``0x7E00``).

numba has no ``float16`` arithmetic on the CPU, so each kernel widens the operands to
float32 (exact), does the float32 operation and rounds the result to binary16 with
integer operations (:func:`_f2h`): the computation numpy's ``float16`` ufuncs do, which
:mod:`pe.fp_golden` explains is correctly rounded (products of two 11-bit significands
are exact in float32; sums are rounded twice, harmlessly by Figueroa's theorem since
24 >= 2 * 11 + 2). Both conversions are branch-free (selects), so LLVM vectorizes the
loops over contiguous arrays. ``tests/pe/test_fp16_kernels.py`` checks every kernel
against numpy's ``float16`` ufuncs and the exact integer reference.

The kernels take C-contiguous one-dimensional arrays and are compiled for fixed
signatures with ``cache=True``: the machine code is kept in ``__pycache__`` beside this
file and loaded, not compiled, by later processes. The wrappers (:func:`mul`,
:func:`add`, :func:`mac`, :func:`accumulate_rows`) handle shapes and broadcasting.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["mul", "add", "mac", "accumulate_rows"]

_U = np.uint32
_F = np.float32


@intrinsic
def _f32_bits(typingctx, x):
    """The bit pattern of a float32 (a register bitcast)."""
    if x != types.float32:
        return None
    return types.uint32(types.float32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(32))


@intrinsic
def _bits_f32(typingctx, x):
    """The float32 of a bit pattern (a register bitcast)."""
    if x != types.uint32:
        return None
    return types.float32(types.uint32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())


@njit(cache=True, inline="always")
def _h2f(h):
    """binary16 bits -> float32, exact (NaN payloads kept): normals and specials by
    moving the fields (the exponent rebiased by 112, by 224 for all ones), subnormals
    as ``fraction * 2**-24`` (an exact integer-to-float conversion and scaling)."""
    h = _U(h)
    s = _U((h & _U(0x8000)) << _U(16))
    em = _U(h & _U(0x7FFF))
    e = _U(em >> _U(10))
    sub = _f32_bits(_F(_F(h & _U(0x3FF)) * _F(5.9604644775390625e-08)))
    nb = _U((em << _U(13)) + (_U(224 << 23) if e == _U(31) else _U(112 << 23)))
    return _bits_f32(_U((sub if e == _U(0) else nb) | s))


@njit(cache=True, inline="always")
def _f2h(f):
    """float32 -> binary16 bits, round to nearest even; NaN -> ``0x7E00``, overflow ->
    infinity. Normal results: the pattern rebiased and rounded at bit 13 (a carry moves
    into the exponent, up to infinity). Subnormal results (``|f| < 2**-14``): ``|f| + 0.5``
    in float32 quantizes to multiples of ``2**-24`` with nearest even, and its low bits
    are the binary16 pattern (``0x400`` when it rounds up to the smallest normal)."""
    u = _f32_bits(f)
    a = _U(u & _U(0x7FFFFFFF))
    s = _U((u >> _U(16)) & _U(0x8000))
    sub = _U(_f32_bits(_F(_bits_f32(a) + _F(0.5))) - _U(0x3F000000))
    nrm = _U(_U(a + ((a >> _U(13)) & _U(1)) + _U(0xFFF) - _U(112 << 23)) >> _U(13))
    big = _U(0x7E00) if a > _U(0x7F800000) else _U(s | _U(0x7C00))
    r = _U(sub | s) if a < _U(113 << 23) else _U(nrm | s)
    return np.uint16(big if a >= _U(143 << 23) else r)


@njit(cache=True, inline="always")
def _op(x, y, op):
    """``op`` 0: ``x * y``, 1: ``x + y`` on binary16 bits, rounded."""
    fx, fy = _h2f(x), _h2f(y)
    return _f2h(_F(fx * fy) if op == 0 else _F(fx + fy))


_RO1 = types.Array(types.uint16, 1, "C", readonly=True)
_W1 = types.Array(types.uint16, 1, "C")
_I = types.intp


@njit([types.void(_RO1, _RO1, _W1, _I)], cache=True)
def _vv(a, b, out, op):
    for i in range(out.size):
        out[i] = _op(a[i], b[i], op)


@njit([types.void(types.uint16, _RO1, _W1, _I)], cache=True)
def _sv(s, b, out, op):
    for i in range(out.size):
        out[i] = _op(s, b[i], op)


@njit([types.void(_RO1, _RO1, _W1, _I)], cache=True)
def _outer(u, v, out, op):
    m = v.size
    for i in range(u.size):
        ui = u[i]
        o = out[i * m:(i + 1) * m]
        for j in range(m):
            o[j] = _op(ui, v[j], op)


@njit([types.void(_RO1, _RO1, _RO1, _W1)], cache=True)
def _mac_vvv(a, b, c, out):
    for i in range(out.size):
        out[i] = _op(_op(a[i], b[i], 0), c[i], 1)


@njit([types.void(_RO1, _RO1, _RO1, _W1)], cache=True)
def _mac_outer(u, v, c, out):
    m = v.size
    for i in range(u.size):
        ui = u[i]
        o = out[i * m:(i + 1) * m]
        ci = c[i * m:(i + 1) * m]
        for j in range(m):
            o[j] = _op(_op(ui, v[j], 0), ci[j], 1)


@njit([types.void(_RO1, _W1, types.intp)], cache=True)
def _acc(rows, out, m):
    """``out[0:m]`` holds the first values; row ``k`` of ``out`` = row ``k - 1`` + row
    ``k - 1`` of ``rows`` (rows of ``m`` values, flat)."""
    for k in range(1, out.size // m):
        prev = out[(k - 1) * m:k * m]
        r = rows[(k - 1) * m:k * m]
        o = out[k * m:(k + 1) * m]
        for j in range(m):
            o[j] = _op(prev[j], r[j], 1)


# -- wrappers --------------------------------------------------------------------------------
def _flat(x: np.ndarray, shape) -> np.ndarray:
    """``x`` broadcast to ``shape``, C-contiguous, flat (a copy only when needed)."""
    if x.shape != shape:
        x = np.broadcast_to(x, shape)
    return np.ascontiguousarray(x, dtype=np.uint16).reshape(-1)


def _u16(x) -> np.ndarray:
    x = np.asarray(x)
    return x if x.dtype == np.uint16 else x.astype(np.uint16)


def _binary(a, b, op: int) -> np.ndarray:
    a, b = _u16(a), _u16(b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty(shape, np.uint16)
    if out.size == 0:
        return out
    if a.size == 1 and b.size > 1 or b.size == 1 and a.size > 1:    # mul and add commute
        s, v = (a, b) if a.size == 1 else (b, a)
        _sv(s.reshape(-1)[0], _flat(v, shape), out.reshape(-1), op)
    elif a.ndim == b.ndim == 2 and a.shape[1] == 1 < out.shape[1] and b.shape[0] == 1 < out.shape[0]:
        _outer(_flat(a, a.shape), _flat(b, b.shape), out.reshape(-1), op)
    else:
        _vv(_flat(a, shape), _flat(b, shape), out.reshape(-1), op)
    return out


def mul(a, b) -> np.ndarray:
    """``a * b`` on binary16 bit patterns (broadcasting), rounded, NaNs canonical."""
    return _binary(a, b, 0)


def add(a, b) -> np.ndarray:
    """``a + b`` on binary16 bit patterns (broadcasting), rounded, NaNs canonical."""
    return _binary(a, b, 1)


def mac(a, b, c) -> np.ndarray:
    """The PE's MAC ``add(mul(a, b), c)`` (broadcasting), each step rounded: one pass
    when the three have the result's shape, or ``a`` is a column and ``b`` a row of a
    matrix ``c`` (the rank-1 update); otherwise :func:`mul`, then :func:`add`."""
    a, b, c = _u16(a), _u16(b), _u16(c)
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    if a.shape == b.shape == c.shape:
        out = np.empty(shape, np.uint16)
        if out.size:
            _mac_vvv(_flat(a, shape), _flat(b, shape), _flat(c, shape), out.reshape(-1))
        return out
    if (c.shape == shape and len(shape) == 2 and a.shape == (shape[0], 1) and b.shape == (1, shape[1])
            and c.size):
        out = np.empty(shape, np.uint16)
        _mac_outer(_flat(a, a.shape), _flat(b, b.shape), _flat(c, shape), out.reshape(-1))
        return out
    return add(mul(a, b), c)


def accumulate_rows(first, rows, out: np.ndarray | None = None) -> np.ndarray:
    """The chains ``acc = first``, then ``acc = add(acc, rows[i])`` for each ``i`` in order,
    side by side over the other axes: the ``len(rows) + 1`` successive values
    ``[first, first + rows[0], ...]`` (``first`` as given), into ``out`` when given (a
    C-contiguous uint16 array)."""
    first, rows = _u16(first), _u16(rows)
    n = len(rows) + 1
    if out is None:
        out = np.empty((n,) + first.shape, np.uint16)
    elif out.dtype != np.uint16 or not out.flags.c_contiguous or out.size != n * first.size:
        raise ValueError(f"accumulate_rows: out must be a C-contiguous uint16 array of {n} x {first.size} values")
    flat = out.reshape(-1)
    m = first.size
    flat[:m] = first.reshape(-1)
    if n > 1 and m:
        _acc(_flat(rows, rows.shape), flat, m)
    return out
