"""Golden models of the PE's floating-point multiply and add.

Two independent models of the same semantics (see :mod:`arch.fpformat` and
``docs/fp_datapath.md``: round to nearest even, full subnormals, IEEE signed zeros,
every NaN result is the canonical quiet NaN ``fmt.qnan``):

* **numpy models** :func:`mul_bits`, :func:`add_bits`, :func:`mac_bits`: vectorized,
  on arrays of unsigned bit patterns, computed in ``fmt.np_dtype`` (numpy ``float16``,
  ``float32``, ``ml_dtypes.bfloat16``) and NaN-canonicalized. These are the models the
  PE reference model and the fast simulator use.
* **exact reference** :func:`exact_mul`, :func:`exact_add`, :func:`exact_mac`: scalar
  Python integers, any :class:`~arch.fpformat.FPFormat`; the operands are decoded to
  ``m * 2**e`` with integer ``m``, the exact result is formed with integer arithmetic and
  rounded once by :func:`round_to_format` (explicit round-to-nearest-even). It is the
  independent check of the numpy models and the model for custom formats (formats with
  no numpy dtype fall back to it, element by element).

Why the numpy models are correctly rounded
------------------------------------------
numpy computes ``float16`` arithmetic in ``float32`` and rounds the result to
``float16``; ``ml_dtypes.bfloat16`` does the same through ``float32``. Rounding twice
(first to the wider format, then to the narrow one) gives the correctly rounded result
of ``+ - * /`` whenever the wider precision ``p'`` satisfies ``p' >= 2p + 2`` and its
exponent range covers the narrow format's (Figueroa's double-rounding theorem): float32
has ``p' = 24`` and float16 ``p = 11`` (24 >= 24), bfloat16 ``p = 8`` (24 >= 18).
For bfloat16 the subnormal range is shared with float32; there the products of two
8-bit significands span at most 16 bits, too few to place a set bit both at the
bfloat16 half-ulp and below the float32 quantum, so no double-rounding error is possible
either, and sums with subnormal results are exact. The test suite checks all of this
empirically against the exact reference and SoftFloat (``tests/pe/test_fp_golden.py``),
including on purpose-built ties and subnormal results.

binary16 takes the same route in compiled code (:func:`f16_op`, :func:`f16_mac`,
:func:`f16_accumulate_rows`, kernels of :mod:`pe.fp16_kernels`): the float32 operation,
then the rounding to binary16 by integer operations instead of numpy's scalar
conversion, which is slow on subnormal results. The results are numpy's ``float16``
results on all 2**32 operand pairs of each operation.

The numpy models need the FPU not to flush subnormals (FTZ/DAZ, which some libraries
switch on process-wide); :func:`check_subnormals` verifies it once, on first use.
"""

from __future__ import annotations

import numpy as np

from arch.fpformat import FPFormat

__all__ = [
    "mul_bits", "add_bits", "mac_bits", "canonicalize_nan", "is_nan_bits",
    "exact_mul", "exact_add", "exact_mac", "decode", "round_to_format",
    "check_subnormals", "f16_op", "f16_mac", "f16_accumulate_rows", "convert_bits",
]

_subnormals_checked = False


def check_subnormals() -> None:
    """Raise ``RuntimeError`` if the FPU flushes subnormals (FTZ/DAZ) in this process."""
    global _subnormals_checked
    if _subnormals_checked:
        return
    tiny = np.array([1.0e-45], dtype=np.float32)  # min float32 subnormal
    with np.errstate(all="ignore"):
        prod = tiny * np.float32(1.0)
        half = (np.array([1.0e-38], dtype=np.float32) * np.float32(0.5))
    if prod[0] == 0 or half[0] == 0 or tiny[0] == 0:
        raise RuntimeError("the FPU flushes float32 subnormals to zero (FTZ/DAZ is on); "
                           "the numpy golden models would be wrong")
    _subnormals_checked = True


# -- numpy models --------------------------------------------------------------------------
def _as_bits(fmt: FPFormat, x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"expected integer bit patterns, got dtype {arr.dtype}")
    if arr.dtype != fmt.np_uint:
        arr = arr.astype(fmt.np_uint)
    return arr


def is_nan_bits(fmt: FPFormat, bits) -> np.ndarray:
    """Boolean array: which bit patterns encode a NaN."""
    b = _as_bits(fmt, bits)
    mag = b & fmt.np_uint.type(fmt.sign_mask - 1)
    return mag > fmt.np_uint.type(fmt.inf)


def canonicalize_nan(fmt: FPFormat, bits) -> np.ndarray:
    """Replace every NaN bit pattern by ``fmt.qnan``."""
    b = _as_bits(fmt, bits)
    return np.where(is_nan_bits(fmt, b), fmt.np_uint.type(fmt.qnan), b).astype(fmt.np_uint)


# -- binary16: the compiled kernels of pe.fp16_kernels ---------------------------------------
def _kernels():
    """:mod:`pe.fp16_kernels`, imported on first use (numba's start-up is paid only by
    processes that compute in binary16)."""
    from pe import fp16_kernels

    return fp16_kernels


def f16_op(a: np.ndarray, b: np.ndarray, op) -> np.ndarray:
    """``op`` (``np.multiply`` or ``np.add``) on binary16 bit-pattern arrays (broadcasting),
    correctly rounded, NaNs canonical: the float32 operation, then one rounding to
    binary16 (:mod:`pe.fp16_kernels`). Equal to numpy's ``float16`` ufunc
    (``tests/pe/test_fp_golden.py``)."""
    k = _kernels()
    if op is np.multiply:
        return k.mul(a, b)
    if op is np.add:
        return k.add(a, b)
    raise ValueError(f"f16_op: op must be np.multiply or np.add, got {op!r}")


def f16_mac(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``add(mul(a, b), c)`` on binary16 bit patterns (broadcasting), each step rounded."""
    return _kernels().mac(a, b, c)


def f16_accumulate_rows(first: np.ndarray, rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The binary16 chains ``acc = first``, then ``acc = acc + rows[i]`` for each ``i`` in
    order, each sum rounded (NaNs canonical), side by side over the other axes; returns
    the ``len(rows) + 1`` successive values ``[first, first + rows[0], ...]`` (into ``out``
    when given)."""
    return _kernels().accumulate_rows(first, rows, out)


def _binop(fmt: FPFormat, a, b, op: str) -> np.ndarray:
    a = _as_bits(fmt, a)
    b = _as_bits(fmt, b)
    dt = fmt.np_dtype
    if dt is None:
        ex = exact_mul if op == "mul" else exact_add
        f = np.frompyfunc(lambda x, y: ex(fmt, int(x), int(y)), 2, 1)
        return np.asarray(f(a, b), dtype=object).astype(fmt.np_uint)
    check_subnormals()
    if dt == np.float16:
        return f16_op(a, b, np.multiply if op == "mul" else np.add)
    x = a.view(dt)
    y = b.view(dt)
    with np.errstate(all="ignore"):
        r = (x * y) if op == "mul" else (x + y)
    r = np.array(r, dtype=dt, copy=None).view(fmt.np_uint)
    # NaNs canonicalized in place (the result is a new array): canonicalize_nan's bits
    ut = r.dtype.type
    nan = (r & ut(fmt.sign_mask - 1)) > ut(fmt.inf)
    if nan.any():
        r[nan] = ut(fmt.qnan)
    return r


def mul_bits(fmt: FPFormat, a, b) -> np.ndarray:
    """``a * b`` on bit-pattern arrays (broadcasting), RNE, NaN canonicalized."""
    return _binop(fmt, a, b, "mul")


def add_bits(fmt: FPFormat, a, b) -> np.ndarray:
    """``a + b`` on bit-pattern arrays (broadcasting), RNE, NaN canonicalized."""
    return _binop(fmt, a, b, "add")


def mac_bits(fmt: FPFormat, a, b, c) -> np.ndarray:
    """The PE's MAC: ``add(mul(a, b), c)``, each step rounded (not fused)."""
    if fmt.np_dtype == np.float16:
        check_subnormals()
        return f16_mac(_as_bits(fmt, a), _as_bits(fmt, b), _as_bits(fmt, c))
    return add_bits(fmt, mul_bits(fmt, a, b), c)


# -- exact integer reference -----------------------------------------------------------------
def decode(fmt: FPFormat, bits: int):
    """Decode a bit pattern.

    Returns ``("nan",)``, ``("inf", sign)`` or ``("fin", sign, m, e)`` with the exact
    value ``(-1)**sign * m * 2**e`` (``m`` an integer, 0 for zeros).
    """
    s, ef, f = fmt.fields(bits)
    if ef == fmt.exp_max:
        return ("nan",) if f else ("inf", s)
    m = f | (1 << fmt.frac_bits) if ef else f
    return ("fin", s, m, max(ef, 1) - fmt.bias - fmt.frac_bits)


def round_to_format(fmt: FPFormat, sign: int, m: int, e: int) -> int:
    """Round ``(-1)**sign * m * 2**e`` (``m >= 0`` integer) to ``fmt``, nearest even.

    Handles subnormal results, overflow to infinity and zero (keeps ``sign``).
    """
    F = fmt.frac_bits
    if m == 0:
        return fmt.pack(sign, 0, 0)
    emin_q = 1 - fmt.bias - F                       # quantum of subnormals / smallest binade
    q = max(e + m.bit_length() - 1 - F, emin_q)    # quantum of the result's binade
    if q <= e:
        mq = m << (e - q)                           # exact
    else:
        k = q - e
        mq = m >> k
        rem = m & ((1 << k) - 1)
        half = 1 << (k - 1)
        if rem > half or (rem == half and (mq & 1)):
            mq += 1
        if mq >> (F + 1):                           # carried into the next binade
            mq >>= 1
            q += 1
    if mq < (1 << F):                               # subnormal (q == emin_q)
        return fmt.pack(sign, 0, mq)
    biased = q + F + fmt.bias
    if biased >= fmt.exp_max:
        return fmt.pack(sign, fmt.exp_max, 0)       # overflow: RNE -> infinity
    return fmt.pack(sign, biased, mq - (1 << F))


def exact_mul(fmt: FPFormat, a: int, b: int) -> int:
    """Exact-then-rounded ``a * b`` on scalar bit patterns (any format)."""
    da, db = decode(fmt, a), decode(fmt, b)
    if da[0] == "nan" or db[0] == "nan":
        return fmt.qnan
    s = da[1] ^ db[1]
    if da[0] == "inf" or db[0] == "inf":
        other = db if da[0] == "inf" else da
        if other[0] == "fin" and other[2] == 0:
            return fmt.qnan                          # inf * 0
        return fmt.pack(s, fmt.exp_max, 0)
    return round_to_format(fmt, s, da[2] * db[2], da[3] + db[3])


def exact_add(fmt: FPFormat, a: int, b: int) -> int:
    """Exact-then-rounded ``a + b`` on scalar bit patterns (any format)."""
    da, db = decode(fmt, a), decode(fmt, b)
    if da[0] == "nan" or db[0] == "nan":
        return fmt.qnan
    if da[0] == "inf" and db[0] == "inf":
        return fmt.qnan if da[1] != db[1] else fmt.pack(da[1], fmt.exp_max, 0)
    if da[0] == "inf" or db[0] == "inf":
        return fmt.pack((da if da[0] == "inf" else db)[1], fmt.exp_max, 0)
    _, sa, ma, ea = da
    _, sb, mb, eb = db
    e = min(ea, eb)
    total = (-1) ** sa * (ma << (ea - e)) + (-1) ** sb * (mb << (eb - e))
    if total == 0:
        # exact zero: -0 only for (-0) + (-0); x + (-x) = +0 under round-to-nearest
        return fmt.pack(sa & sb, 0, 0)
    return round_to_format(fmt, int(total < 0), abs(total), e)


def exact_mac(fmt: FPFormat, a: int, b: int, c: int) -> int:
    """``exact_add(exact_mul(a, b), c)``: the PE's MAC (two roundings)."""
    return exact_add(fmt, exact_mul(fmt, a, b), c)


def convert_bits(src: FPFormat, dst: FPFormat, bits: int) -> int:
    """``bits`` (a ``src`` pattern) as the nearest ``dst`` value (ties to even; NaN to
    ``dst``'s quiet NaN; infinities keep their sign): a ring crossing's conversion
    (``pe.fp_convert.FPConvert`` is its hardware)."""
    d = decode(src, int(bits))
    if d[0] == "nan":
        return dst.qnan
    if d[0] == "inf":
        return dst.pack(d[1], dst.exp_max, 0)
    _, s, m, e = d
    return round_to_format(dst, s, m, e)
