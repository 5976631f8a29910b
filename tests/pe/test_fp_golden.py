"""The FP golden models against each other and against Berkeley SoftFloat (no simulator).

* numpy models (:func:`pe.fp_golden.mul_bits` ...) == exact integer reference
  (:func:`pe.fp_golden.exact_mul` ...) == SoftFloat (softfloatpy) on biased random
  vectors of ``tests/fp_vectors.py`` (ties, subnormals, overflow, cancellation, NaNs) for
  binary16, bfloat16 and binary32; every NaN result must be the canonical ``fmt.qnan``
  (SoftFloat's own NaN encoding is only required to be a NaN);
* directed cases of the numeric semantics (signed zeros, specials, ties to even);
* hypothesis property tests (commutativity, identities, sign rules, monotonicity);
* the vector generator (reproducible, biased as promised) and TestFloat file I/O.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fp_vectors import (classify, gen_operands, new_seed, read_testfloat, sample_path,
                        softfloat_reference, special_values, write_testfloat)
from pe import fp_golden as G
from arch.fpformat import BFLOAT16, BINARY16, BINARY32, FORMATS, FPFormat

FMTS = [BINARY16, BFLOAT16, BINARY32]
FMT_IDS = [f.name for f in FMTS]
OPS = ("mul", "add")
NUMPY = {"mul": G.mul_bits, "add": G.add_bits}
EXACT = {"mul": G.exact_mul, "add": G.exact_add}


def _exact(fmt, op, a, b):
    f = EXACT[op]
    return np.array([f(fmt, int(x), int(y)) for x, y in zip(a, b)], dtype=fmt.np_uint)


def _report(fmt, op, a, b, got, exp, seed, what):
    bad = np.flatnonzero(got != exp)
    nd = (fmt.width + 3) // 4
    lines = [f"{fmt.name} {op}: {len(bad)} of {len(a)} differ ({what}), seed {seed}"]
    lines += [f"  a={int(a[i]):0{nd}x} b={int(b[i]):0{nd}x} got={int(got[i]):0{nd}x} "
              f"expected={int(exp[i]):0{nd}x}" for i in bad[:20]]
    return "\n".join(lines)


@pytest.fixture
def seed():
    s = new_seed()
    print(f"seed {s} (replay with FP_SEED={s})")
    return s


# -- numpy vs exact vs SoftFloat -------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("fmt", FMTS, ids=FMT_IDS)
def test_numpy_matches_exact(fmt, op, seed):
    a, b = gen_operands(fmt, op, 40000, seed)
    got = NUMPY[op](fmt, a, b)
    exp = _exact(fmt, op, a, b)
    assert got.dtype == fmt.np_uint
    assert np.array_equal(got, exp), _report(fmt, op, a, b, got, exp, seed, "numpy vs exact")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("fmt", FMTS, ids=FMT_IDS)
def test_numpy_matches_softfloat(fmt, op, seed):
    a, b = gen_operands(fmt, op, 60000, seed)
    got = NUMPY[op](fmt, a, b)
    sf, _flags = softfloat_reference(fmt, op, a, b)
    sf_nan = G.is_nan_bits(fmt, sf)
    # any SoftFloat NaN must be matched by the canonical quiet NaN, everything else exactly
    exp = np.where(sf_nan, fmt.np_uint.type(fmt.qnan), sf).astype(fmt.np_uint)
    assert np.array_equal(got, exp), _report(fmt, op, a, b, got, exp, seed, "numpy vs SoftFloat")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("fmt", [BINARY16, BFLOAT16], ids=["binary16", "bfloat16"])
def test_every_operand_against_exact(fmt, op):
    """Every 16-bit pattern as ``a`` against a few chosen ``b`` (numpy vs exact)."""
    a = np.arange(1 << 16, dtype=np.uint16)
    bs = [fmt.one | fmt.sign_mask, 1, (1 << fmt.frac_bits) | 0x5, fmt.max_finite, 0x1234 & ~fmt.sign_mask,
          fmt.pack(0, fmt.bias - 1, (1 << fmt.frac_bits) - 1)]
    for bv in bs:
        b = np.full_like(a, bv)
        got = NUMPY[op](fmt, a, b)
        exp = _exact(fmt, op, a, b)
        assert np.array_equal(got, exp), _report(fmt, op, a, b, got, exp, None, f"b={bv:#x}")


@pytest.mark.parametrize("fmt", FMTS, ids=FMT_IDS)
def test_mac_is_mul_then_add(fmt, seed):
    rng = np.random.default_rng(seed)
    a, b = gen_operands(fmt, "mul", 5000, seed)
    c = gen_operands(fmt, "add", 5000, seed + 1)[0][rng.permutation(5000)]
    got = G.mac_bits(fmt, a, b, c)
    exp = np.array([G.exact_mac(fmt, int(x), int(y), int(z)) for x, y, z in zip(a, b, c)], dtype=fmt.np_uint)
    assert np.array_equal(got, exp)
    assert np.array_equal(got, G.add_bits(fmt, G.mul_bits(fmt, a, b), c))


def test_custom_format_uses_exact_reference():
    fmt = FPFormat("e4m3", 4, 3)
    x = np.arange(256, dtype=np.uint16)
    a, b = (v.reshape(-1) for v in np.meshgrid(x, x))
    for op in OPS:
        got = NUMPY[op](fmt, a, b)
        assert got.dtype == np.uint16
        assert np.array_equal(got, _exact(fmt, op, a, b))
    assert G.mac_bits(fmt, 0x38, 0x38, 0x38) == G.exact_mac(fmt, 0x38, 0x38, 0x38)


def test_no_flush_to_zero():
    G.check_subnormals()
    for fmt in FMTS:
        assert G.mul_bits(fmt, 1, fmt.one) == 1                       # min subnormal survives
        assert G.add_bits(fmt, 1, 1) == 2


def test_rejects_float_input():
    with pytest.raises(TypeError):
        G.mul_bits(BINARY16, np.array([1.0]), np.array([2.0]))


# -- directed semantics ----------------------------------------------------------------------------------
def _cases(fmt):
    F, S = fmt.frac_bits, fmt.sign_mask
    one, inf, qnan, mx = fmt.one, fmt.inf, fmt.qnan, fmt.max_finite
    half = fmt.pack(0, fmt.bias - 1, 0)
    two = fmt.pack(0, fmt.bias + 1, 0)
    snan = fmt.pack(1, fmt.exp_max, 1)                   # signaling, negative, payload 1
    qnan_payload = fmt.pack(1, fmt.exp_max, (1 << (F - 1)) | 3)
    min_norm = 1 << F
    ulp1 = fmt.pack(0, fmt.bias - F, 0)                  # ulp of 1.0
    return [
        # op, a, b, expected
        ("add", 0, S, 0), ("add", S, 0, 0), ("add", S, S, S), ("add", 0, 0, 0),
        ("add", one, one | S, 0), ("add", one | S, one, 0), ("add", 1, S | 1, 0),
        ("add", one, S, one), ("add", S | one, S, S | one), ("add", S | 1, 0, S | 1),
        ("add", inf, inf | S, qnan), ("add", inf, inf, inf), ("add", inf | S, mx, inf | S),
        ("add", inf, S | inf | 0, qnan), ("add", snan, one, qnan), ("add", one, qnan_payload, qnan),
        ("add", mx, mx, inf), ("add", mx | S, mx | S, inf | S),
        ("add", 1, 1, 2), ("add", min_norm - 1, 1, min_norm),
        ("add", one, fmt.pack(0, fmt.bias - F - 1, 0), one),                  # 1 + ulp/2: tie -> even (1)
        ("add", one | 1, fmt.pack(0, fmt.bias - F - 1, 0), one | 2),          # tie -> even (up)
        ("add", one, ulp1 | 0, one | 1),
        ("mul", 0, S, S), ("mul", S, S, 0), ("mul", one | S, 0, S), ("mul", S | mx, S, 0),
        ("mul", inf, 0, qnan), ("mul", S, inf | S, qnan), ("mul", inf, S | two, inf | S),
        ("mul", inf | S, inf | S, inf), ("mul", snan, 0, qnan), ("mul", qnan_payload, inf, qnan),
        ("mul", mx, two, inf), ("mul", mx | S, two, inf | S), ("mul", mx, one, mx),
        ("mul", 1, half, 0),                              # min_sub / 2: tie -> even (0)
        ("mul", 3, half, 2),                              # 1.5 min_sub -> 2 min_sub (even)
        ("mul", 1 | S, half, S),                          # -0 result keeps the sign
        ("mul", min_norm, half, 1 << (F - 1)),            # exact subnormal
        ("mul", 1, two, 2), ("mul", one, 1, 1), ("mul", min_norm - 1, two, 2 * min_norm - 2),
    ]


@pytest.mark.parametrize("fmt", FMTS, ids=FMT_IDS)
def test_directed_semantics(fmt):
    nd = (fmt.width + 3) // 4
    for op, a, b, exp in _cases(fmt):
        for name, f in (("numpy", lambda x, y: int(NUMPY[op](fmt, x, y))), ("exact", lambda x, y: EXACT[op](fmt, x, y))):
            got = f(a, b)
            assert got == exp, f"{fmt.name} {name} {op}({a:0{nd}x}, {b:0{nd}x}) = {got:0{nd}x}, expected {exp:0{nd}x}"


@pytest.mark.parametrize("fmt", FMTS, ids=FMT_IDS)
def test_specials_table(fmt):
    """All pairs of special values: numpy == exact, and NaN results are canonical."""
    sv = special_values(fmt, np.random.default_rng(3), n_nan=6)
    a, b = (v.reshape(-1) for v in np.meshgrid(sv, sv))
    for op in OPS:
        got = NUMPY[op](fmt, a, b)
        assert np.array_equal(got, _exact(fmt, op, a, b))
        nan = G.is_nan_bits(fmt, got)
        assert np.all(got[nan] == fmt.qnan)
        assert np.all(nan[G.is_nan_bits(fmt, a) | G.is_nan_bits(fmt, b)])


def test_round_to_format():
    f = BINARY16
    assert G.round_to_format(f, 0, 0, 5) == 0 and G.round_to_format(f, 1, 0, 5) == f.neg_zero
    assert G.round_to_format(f, 0, 1, 0) == f.one
    assert G.round_to_format(f, 0, (1 << 12) - 1, -11) == f.pack(0, 16, 0)   # rounds up to 2.0
    assert G.round_to_format(f, 0, 1, 16) == f.inf
    assert G.round_to_format(f, 0, 1, -24) == 1 and G.round_to_format(f, 0, 1, -25) == 0
    assert G.round_to_format(f, 0, 3, -26) == 1                                # 0.75 min_sub -> 1
    assert G.decode(f, f.qnan) == ("nan",) and G.decode(f, f.inf | f.sign_mask) == ("inf", 1)
    assert G.decode(f, 1) == ("fin", 0, 1, -24) and G.decode(f, f.one) == ("fin", 0, 1 << 10, -10)


# -- hypothesis properties ----------------------------------------------------------------------------------
def _bits(fmt):
    return st.integers(0, (1 << fmt.width) - 1)


def _is_nan(fmt, x):
    return fmt.is_nan(x)


fmt_st = st.sampled_from(FMTS)


@st.composite
def fmt_and_bits(draw, n=2):
    fmt = draw(fmt_st)
    return (fmt, *[draw(_bits(fmt)) for _ in range(n)])


@settings(max_examples=400, deadline=None)
@given(fmt_and_bits())
def test_prop_commutative(t):
    fmt, a, b = t
    for f in NUMPY.values():
        assert int(f(fmt, a, b)) == int(f(fmt, b, a))
    assert G.exact_mul(fmt, a, b) == G.exact_mul(fmt, b, a)
    assert G.exact_add(fmt, a, b) == G.exact_add(fmt, b, a)


@settings(max_examples=400, deadline=None)
@given(fmt_and_bits(1))
def test_prop_identities(t):
    fmt, x = t
    if _is_nan(fmt, x):
        for v in (G.mul_bits(fmt, x, fmt.one), G.add_bits(fmt, x, fmt.neg_zero), G.add_bits(fmt, x, 0)):
            assert int(v) == fmt.qnan
        return
    assert int(G.mul_bits(fmt, x, fmt.one)) == x                       # x * 1 == x
    assert int(G.add_bits(fmt, x, fmt.neg_zero)) == x                  # x + -0 == x (bitwise)
    assert int(G.add_bits(fmt, x, 0)) == (0 if x == fmt.neg_zero else x)   # -0 + +0 = +0
    assert int(G.mul_bits(fmt, x, fmt.one | fmt.sign_mask)) == x ^ fmt.sign_mask   # x * -1 == -x
    _, e, _ = fmt.fields(x)
    if e != fmt.exp_max:                                                 # finite: x - x == +0
        assert int(G.add_bits(fmt, x, x ^ fmt.sign_mask)) == 0
    for v in (G.exact_mul(fmt, x, fmt.one), G.exact_add(fmt, x, fmt.neg_zero)):
        assert v == x


@settings(max_examples=400, deadline=None)
@given(fmt_and_bits())
def test_prop_sign_rules_and_exact_agreement(t):
    fmt, a, b = t
    p = int(G.mul_bits(fmt, a, b))
    s = int(G.add_bits(fmt, a, b))
    assert p == G.exact_mul(fmt, a, b) and s == G.exact_add(fmt, a, b)
    sa, sb = a >> (fmt.width - 1), b >> (fmt.width - 1)
    if not _is_nan(fmt, p):
        assert p >> (fmt.width - 1) == sa ^ sb                         # sign of a product
    else:
        assert p == fmt.qnan
    # negation symmetry: (-a) * b == -(a * b), (-a) + (-b) == -(a + b) unless the sum is zero
    pn = int(G.mul_bits(fmt, a ^ fmt.sign_mask, b))
    assert pn == (p if _is_nan(fmt, p) else p ^ fmt.sign_mask)
    sn = int(G.add_bits(fmt, a ^ fmt.sign_mask, b ^ fmt.sign_mask))
    if _is_nan(fmt, s):
        assert sn == fmt.qnan
    elif s & (fmt.sign_mask - 1):
        assert sn == s ^ fmt.sign_mask


@settings(max_examples=300, deadline=None)
@given(fmt_and_bits(3))
def test_prop_add_monotonic(t):
    fmt, a, b, c = t
    vals = [a, b, c]
    if any(_is_nan(fmt, v) for v in vals):
        return
    fa, fb = (float(fmt.to_float(v)) for v in (a, b))
    lo, hi = (a, b) if fa <= fb else (b, a)
    r_lo, r_hi = (float(fmt.to_float(int(G.add_bits(fmt, x, c)))) for x in (lo, hi))
    if not (np.isnan(r_lo) or np.isnan(r_hi)):
        assert r_lo <= r_hi


# -- the generator and TestFloat files ----------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("fmt", FMTS + [FPFormat("e3m2", 3, 2), FPFormat("e11m52", 11, 52)],
                         ids=FMT_IDS + ["e3m2", "e11m52"])
def test_generator_biases(fmt, op):
    n = 8000
    a, b = gen_operands(fmt, op, n, 1234)
    a2, b2 = gen_operands(fmt, op, n, 1234)
    assert np.array_equal(a, a2) and np.array_equal(b, b2), "not reproducible"
    assert a.dtype == fmt.np_uint and len(a) == len(b) == n
    counts = {}
    for x, y in zip(a, b):
        for tag in classify(fmt, op, int(x), int(y)):
            counts[tag] = counts.get(tag, 0) + 1
    need = {"tie": 0.04, "sub_in": 0.05, "sub_out": 0.02, "overflow": 0.01, "nan": 0.03, "inf": 0.004,
            "zero": 0.004}
    if fmt.width >= 16:
        need["snan"] = 0.01
    if op == "mul":
        need["zero_out"] = 0.01
    else:
        need.update(cancel=0.02 if fmt.precision >= 8 else 0.004, bigdiff=0.03)
    low = {k: counts.get(k, 0) / n for k, v in need.items() if counts.get(k, 0) / n < v}
    assert not low, f"{fmt.name} {op}: too few {low} (counts {counts})"


def test_generator_seeds_differ():
    a1, _ = gen_operands(BINARY16, "mul", 1000, 1)
    a2, _ = gen_operands(BINARY16, "mul", 1000, 2)
    assert not np.array_equal(a1, a2)
    with pytest.raises(ValueError):
        gen_operands(BINARY16, "div", 10, 1)


def test_testfloat_roundtrip(tmp_path):
    fmt = BINARY32
    a, b = gen_operands(fmt, "add", 100, 5)
    r, flags = softfloat_reference(fmt, "add", a, b)
    p = write_testfloat(tmp_path / "v.txt", fmt, a, b, r, flags)
    line = p.read_text().splitlines()[0].split()
    assert [len(x) for x in line] == [8, 8, 8, 2] and all(x == x.upper() for x in line)
    a2, b2, r2, f2 = read_testfloat(p, fmt)
    assert np.array_equal(a, a2) and np.array_equal(b, b2) and np.array_equal(r, r2) and np.array_equal(flags, f2)
    (tmp_path / "bad.txt").write_text("3C00 3C00\n")
    with pytest.raises(ValueError, match="4 hex fields"):
        read_testfloat(tmp_path / "bad.txt", BINARY16)
    (tmp_path / "wide.txt").write_text("13C00 3C00 3C00 00\n")
    with pytest.raises(ValueError, match="wider"):
        read_testfloat(tmp_path / "wide.txt", BINARY16)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", FORMATS)
def test_sample_files_match_golden(name, op):
    """The committed TestFloat-format samples agree with the golden model (NaN: any NaN)."""
    fmt = FORMATS[name]
    a, b, r, flags = read_testfloat(sample_path(name, op), fmt)
    assert 1000 <= len(a) <= 5000
    got = NUMPY[op](fmt, a, b)
    same = (got == r) | (G.is_nan_bits(fmt, got) & G.is_nan_bits(fmt, r))
    assert same.all()
    assert (flags & ~np.uint8(0x1F)).sum() == 0 and flags.any()        # SoftFloat flag bits only


# -- binary16 through float32 (pe.fp_golden.f16_op) ----------------------------------------
def _np_f16(op, a, b):
    with np.errstate(all="ignore"):
        r = op(a.view(np.float16), b.view(np.float16)).view(np.uint16).copy()
    r[(r & 0x7FFF) > 0x7C00] = 0x7E00
    return r


@pytest.mark.parametrize("op", [np.multiply, np.add])
def test_f16_op_equals_numpy_float16(op):
    """Every binary16 pattern against 192 others (specials, subnormals, ties, random),
    both operand orders, equal shapes and broadcasting: the compiled float32 route equals
    numpy's float16 ufunc with canonical NaNs."""
    rng = np.random.default_rng(7)
    special = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
                        0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x3C01, 0x1400, 0x0200], np.uint16)
    bs = np.concatenate([special, rng.integers(0, 1 << 16, 174, dtype=np.uint16)])
    a = np.arange(1 << 16, dtype=np.uint16)
    for b in bs:
        bb = np.full(a.shape, b, np.uint16)
        want = _np_f16(op, a, bb)
        assert np.array_equal(G.f16_op(a, bb, op), want)
        assert np.array_equal(G.f16_op(bb, a, op), _np_f16(op, bb, a))
    got = G.f16_op(a[:, None], bs[None, :], op)
    assert np.array_equal(got, _np_f16(op, a[:, None], bs[None, :]))


@pytest.mark.parametrize("width", [300, 5000])
def test_f16_accumulate_rows_is_sequential(width):
    """Chains of binary16 sums side by side, narrow and wide: each step equals add_bits of
    the previous value and the next row."""
    rng = np.random.default_rng(width)
    rows = np.concatenate([rng.normal(0, 1e-5, (20, width)), rng.normal(0, 1e4, (3, width))])
    rows = BINARY16.from_float(rows).astype(np.uint16)
    rows[5, :7] = [0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8000, 0x7BFF, 0xFBFF]
    first = BINARY16.from_float(rng.normal(0, 1, width)).astype(np.uint16)
    got = G.f16_accumulate_rows(first, rows)
    acc = first
    assert np.array_equal(got[0], first)
    for i in range(len(rows)):
        acc = G.add_bits(BINARY16, acc, rows[i])
        assert np.array_equal(got[i + 1], acc), i


def test_f16_mac_is_mul_then_add():
    """The binary16 MAC (broadcast like the rank-1 update) equals add(mul(a, b), c) with
    numpy's float16 rounding after each step."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1 << 16, (300, 1), dtype=np.uint16)
    b = rng.integers(0, 1 << 16, (1, 257), dtype=np.uint16)
    b[0, :50] = BINARY16.from_float(rng.normal(0, 1e-4, 50)).astype(np.uint16)
    c = rng.integers(0, 1 << 16, (300, 257), dtype=np.uint16)
    want = _np_f16(np.add, _np_f16(np.multiply, np.broadcast_to(a, c.shape).copy(),
                                   np.broadcast_to(b, c.shape).copy()), c)
    assert np.array_equal(G.f16_mac(a, b, c), want)
    assert np.array_equal(G.mac_bits(BINARY16, a, b, c), want)
