"""The compiled binary16 kernels (:mod:`pe.fp16_kernels`) against numpy's ``float16``
ufuncs (NaNs canonicalized) and the exact integer reference of :mod:`pe.fp_golden`:
random operands biased to subnormals, ties, NaNs, infinities and overflow, every shape
path of the wrappers (equal shapes, a scalar on either side, the rank-1 outer product,
general broadcasting, non-contiguous views), the MAC and the accumulation chains.
Random tests print their seed; ``TEST_SEED=<n>`` replays one."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from arch.fpformat import BINARY16
from pe import fp16_kernels as K
from pe import fp_golden as G


def _seed():
    """A fresh random seed, printed; ``TEST_SEED=<n>`` replays a failing run."""
    seed = int(os.environ["TEST_SEED"]) if "TEST_SEED" in os.environ else random.randrange(1 << 30)
    print(f"seed {seed} (replay with TEST_SEED={seed})")
    return seed


def _ref(op, a, b):
    """numpy's float16 ufunc on bit patterns, NaNs canonical."""
    with np.errstate(all="ignore"):
        r = np.asarray(op(np.asarray(a, np.uint16).view(np.float16),
                          np.asarray(b, np.uint16).view(np.float16))).view(np.uint16).copy()
    r[(r & 0x7FFF) > 0x7C00] = 0x7E00
    return r


def _ref_mac(a, b, c):
    return _ref(np.add, _ref(np.multiply, a, b), c)


_SPECIAL = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x0002, 0x01FF, 0x0200, 0x03FF, 0x83FF, 0x0400, 0x8400,
                     0x0401, 0x3800, 0x3BFF, 0x3C00, 0xBC00, 0x3C01, 0x4000, 0x7800, 0x7BFF, 0xFBFF, 0x7C00,
                     0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7FFF, 0x1400, 0x2000, 0x5BFF, 0x5C00], np.uint16)


def _operands(rng, n):
    """``n`` binary16 patterns: a quarter each uniform over all patterns, subnormals
    (and the smallest normals), values near 1 whose products and sums round at ties,
    and large values (overflow) with the specials (NaN payloads, infinities, zeros)."""
    n0, n = n, max(n, 4 * len(_SPECIAL))
    q = n // 4
    uni = rng.integers(0, 1 << 16, q, dtype=np.uint32)
    sub = rng.integers(0, 0x0800, q, dtype=np.uint32) | (rng.integers(0, 2, q, dtype=np.uint32) << 15)
    near = (0x3C00 + rng.integers(-8, 8, q)).astype(np.uint32) ^ (rng.integers(0, 2, q, dtype=np.uint32) << 15)
    big = np.concatenate([rng.integers(0x7000, 0x8000, n - 3 * q - len(_SPECIAL), dtype=np.uint32), _SPECIAL])
    x = np.concatenate([uni, sub, near, big]).astype(np.uint16)
    return x[rng.permutation(n)[:n0]]


def _ties(rng, n):
    """Pairs ``(a, b)`` whose exact sum lies halfway between two binary16 values (even and
    odd neighbours alike), in every normal binade."""
    e = rng.integers(1, 30, n)
    m = rng.integers(0, 1 << 10, n)
    a = ((e << 10) | m).astype(np.uint16)
    # b = half an ulp of a, as a binary16 value (exact): ulp(a) = 2**(e - 25), halved 2**(e - 26)
    half = np.where(e - 26 >= -24, e - 26, -24)
    b = BINARY16.from_float(np.ldexp(1.0, half)).astype(np.uint16)
    sign = (rng.integers(0, 2, n) << 15).astype(np.uint16)
    return a | sign, b | sign


@pytest.mark.parametrize("op, kern", [(np.multiply, K.mul), (np.add, K.add)], ids=["mul", "add"])
def test_binary_equals_numpy_float16(op, kern):
    seed = _seed()
    rng = np.random.default_rng(seed)
    a, b = _operands(rng, 40000), _operands(rng, 40000)
    assert np.array_equal(kern(a, b), _ref(op, a, b))
    ta, tb = _ties(rng, 20000)
    assert np.array_equal(kern(ta, tb), _ref(op, ta, tb))
    # the special values against every pattern, on both sides
    every = np.arange(1 << 16, dtype=np.uint16)
    for s in _SPECIAL:
        col = np.full(every.shape, s, np.uint16)
        assert np.array_equal(kern(every, col), _ref(op, every, col)), hex(s)
        assert np.array_equal(kern(col, every), _ref(op, col, every)), hex(s)


def test_binary_against_exact_reference():
    """An independent check of the float32 route: the exact integer reference on biased
    random pairs and ties."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    a, b = _operands(rng, 3000), _operands(rng, 3000)
    ta, tb = _ties(rng, 1000)
    a, b = np.concatenate([a, ta]), np.concatenate([b, tb])
    for kern, ex in ((K.mul, G.exact_mul), (K.add, G.exact_add)):
        want = np.array([ex(BINARY16, int(x), int(y)) for x, y in zip(a, b)], np.uint16)
        assert np.array_equal(kern(a, b), want), ex.__name__


@pytest.mark.parametrize("op, kern", [(np.multiply, K.mul), (np.add, K.add)], ids=["mul", "add"])
def test_binary_shapes(op, kern):
    """Every path of the wrapper: scalar on either side (0-d and size-1 arrays), the
    outer product, general broadcasting, non-contiguous views, other integer dtypes,
    empty arrays."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    M = _operands(rng, 60 * 70).reshape(60, 70)
    u, v = _operands(rng, 60), _operands(rng, 70)
    s = np.uint16(_operands(rng, 4)[0])
    cases = [(M, s), (s, M), (M, np.array([s])), (np.array([[s]]), M), (u[:, None], v[None, :]),
             (v[None, :], u[:, None]), (M, v), (u[:, None], M), (M[:, :60].T, M[:, 10:]), (M[::2, ::3], M[1::2, ::3]),
             (M.reshape(3, 20, 70), v[None, None, :]), (u.reshape(3, 20, 1), M.reshape(3, 20, 70)),
             (np.uint16(s), np.uint16(s)), (M.astype(np.int64), M), (M[:0], M[:0])]
    for i, (a, b) in enumerate(cases):
        got = kern(a, b)
        assert got.dtype == np.uint16 and np.array_equal(got, _ref(op, a, b)), i


def test_mac_equals_mul_then_add():
    seed = _seed()
    rng = np.random.default_rng(seed)
    n, m = 97, 131
    a, b, c = (_operands(rng, n * m).reshape(n, m) for _ in range(3))
    u, v = _operands(rng, n)[:, None], _operands(rng, m)[None, :]
    s = _operands(rng, 4)[:1]
    for i, args in enumerate([(a, b, c), (u, v, c), (s, b, c), (a, s, c), (u, b, c), (v, u, c), (u, v, s),
                              (a.T, b.T, c.T), (a[:0], b[:0], c[:0])]):
        got = K.mac(*args)
        assert np.array_equal(got, _ref_mac(*args)), i
    assert np.array_equal(G.mac_bits(BINARY16, u, v, c), _ref_mac(u, v, c))


def test_accumulate_rows_is_sequential():
    seed = _seed()
    rng = np.random.default_rng(seed)
    for shape in [(1, 7), (2, 1), (40, 3, 5), (9, 300), (3, 5000)]:
        x = _operands(rng, int(np.prod(shape))).reshape(shape)
        want = x.copy()
        for k in range(1, shape[0]):
            want[k] = _ref(np.add, want[k - 1], x[k])
        assert np.array_equal(K.accumulate_rows(x[0], x[1:]), want), shape
        out = np.empty_like(x)
        assert K.accumulate_rows(x[0], x[1:], out) is out and np.array_equal(out, want), shape
        xt = np.ascontiguousarray(np.moveaxis(x, 0, -1))           # rows as a non-contiguous view
        got = K.accumulate_rows(np.moveaxis(xt, -1, 0)[0], np.moveaxis(xt, -1, 0)[1:])
        assert np.array_equal(got, want), shape


def test_accumulate_rows_bad_out():
    x = np.zeros((4, 6), np.uint16)
    for out in (np.empty((4, 5), np.uint16), np.empty((4, 6), np.int16), np.empty((6, 4), np.uint16).T):
        with pytest.raises(ValueError, match="C-contiguous uint16"):
            K.accumulate_rows(x[0], x[1:], out)


def test_f16_op_rejects_other_ops():
    with pytest.raises(ValueError, match="np.multiply or np.add"):
        G.f16_op(np.zeros(3, np.uint16), np.zeros(3, np.uint16), np.subtract)


@pytest.mark.slow
@pytest.mark.parametrize("op, kern", [(np.multiply, K.mul), (np.add, K.add)], ids=["mul", "add"])
def test_binary_all_pairs(op, kern):
    """All 2**32 operand pairs, 256 first operands at a time (about a minute each)."""
    every = np.arange(1 << 16, dtype=np.uint16)
    for hi in range(0, 1 << 16, 256):
        a = np.arange(hi, hi + 256, dtype=np.uint16)[:, None]
        assert np.array_equal(kern(a, every[None, :]), _ref(op, a, every[None, :])), hi


def test_fast_engine_accumulate_edges():
    """The fast engine's chains (:meth:`sim.fast_common.Arith.accumulate`) through the
    kernels: no step, one step (its NaN canonical, as every chain value), both axes."""
    from sim.fast_common import Arith

    A = Arith(BINARY16)
    assert A.accumulate(np.zeros((0, 3), np.uint16), 0).shape == (0, 3)
    assert np.array_equal(A.accumulate(np.array([[0x7C01, 0x0001]], np.uint16), 0), [[0x7E00, 0x0001]])
    seed = _seed()
    x = _operands(np.random.default_rng(seed), 5 * 7).reshape(5, 7)
    want = x.copy()
    want[0] = np.where((want[0] & 0x7FFF) > 0x7C00, 0x7E00, want[0])
    for k in range(1, 5):
        want[k] = _ref(np.add, want[k - 1], x[k])
    assert np.array_equal(A.accumulate(x, 0), want)
    assert np.array_equal(A.accumulate(np.ascontiguousarray(x.T), 1), want.T)
