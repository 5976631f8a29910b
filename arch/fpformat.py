"""IEEE-754 binary interchange formats, parameterized by exponent and fraction width.

One :class:`FPFormat` object describes a format for every layer of the project: the
RTL datapath (:mod:`pe.fp_mul`, :mod:`pe.fp_add`), the numpy golden models
(:mod:`pe.fp_golden`), the compiler and the power model.

Numeric semantics shared by all of them (see ``docs/architecture.md``):

* round to nearest, ties to even, on every operation;
* full subnormal support on inputs and outputs (no flush-to-zero, no DAZ);
* signed zeros and infinities as in IEEE 754-2019;
* every NaN *result* is the canonical quiet NaN :attr:`FPFormat.qnan` (sign 0,
  exponent all ones, fraction MSB set, the rest zero); exception flags are not kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FPFormat", "BINARY16", "BINARY32", "BFLOAT16", "FORMATS", "get_format"]


@dataclass(frozen=True)
class FPFormat:
    """An IEEE-754 style binary floating-point format.

    Parameters
    ----------
    name : str
        Short name (``"binary16"``, ``"bfloat16"``, ``"binary32"``, or any for custom).
    exp_bits : int
        Exponent field width, 2..11.
    frac_bits : int
        Fraction (trailing significand) field width, 1..52.
    """

    name: str
    exp_bits: int
    frac_bits: int

    def __post_init__(self):
        if not isinstance(self.exp_bits, int) or not 2 <= self.exp_bits <= 11:
            raise ValueError(f"FPFormat.exp_bits must be an integer in 2..11, got {self.exp_bits!r}")
        if not isinstance(self.frac_bits, int) or not 1 <= self.frac_bits <= 52:
            raise ValueError(f"FPFormat.frac_bits must be an integer in 1..52, got {self.frac_bits!r}")

    # -- derived constants -------------------------------------------------------------
    @property
    def width(self) -> int:
        """Total width in bits (sign + exponent + fraction)."""
        return 1 + self.exp_bits + self.frac_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def precision(self) -> int:
        """Significand precision p in bits, hidden bit included."""
        return self.frac_bits + 1

    @property
    def exp_max(self) -> int:
        """All-ones exponent field value (infinity / NaN)."""
        return (1 << self.exp_bits) - 1

    @property
    def sign_mask(self) -> int:
        return 1 << (self.width - 1)

    @property
    def qnan(self) -> int:
        """Bit pattern of the canonical quiet NaN."""
        return (self.exp_max << self.frac_bits) | (1 << (self.frac_bits - 1))

    @property
    def inf(self) -> int:
        """Bit pattern of +infinity."""
        return self.exp_max << self.frac_bits

    @property
    def one(self) -> int:
        """Bit pattern of +1.0."""
        return self.bias << self.frac_bits

    @property
    def neg_zero(self) -> int:
        return self.sign_mask

    @property
    def max_finite(self) -> int:
        return ((self.exp_max - 1) << self.frac_bits) | ((1 << self.frac_bits) - 1)

    # -- field access on integer bit patterns --------------------------------------------
    def fields(self, bits: int) -> tuple[int, int, int]:
        """Split a bit pattern into (sign, biased exponent, fraction)."""
        return (
            (bits >> (self.width - 1)) & 1,
            (bits >> self.frac_bits) & self.exp_max,
            bits & ((1 << self.frac_bits) - 1),
        )

    def pack(self, sign: int, exp: int, frac: int) -> int:
        return (sign << (self.width - 1)) | (exp << self.frac_bits) | frac

    def is_nan(self, bits: int) -> bool:
        _, e, f = self.fields(bits)
        return e == self.exp_max and f != 0

    # -- numpy interop ----------------------------------------------------------------
    @property
    def np_dtype(self):
        """numpy dtype that computes in this format, or None for custom formats."""
        if (self.exp_bits, self.frac_bits) == (5, 10):
            return np.dtype(np.float16)
        if (self.exp_bits, self.frac_bits) == (8, 23):
            return np.dtype(np.float32)
        if (self.exp_bits, self.frac_bits) == (8, 7):
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return None

    @property
    def np_uint(self):
        """Unsigned integer dtype wide enough for one bit pattern."""
        return np.dtype(np.uint16) if self.width <= 16 else np.dtype(np.uint32) if self.width <= 32 else np.dtype(np.uint64)

    def from_float(self, x) -> np.ndarray:
        """Round float64 values (scalar or array) to this format; returns bit patterns."""
        dt = self._require_dtype()
        return np.asarray(x, dtype=np.float64).astype(dt).view(self.np_uint)

    def to_float(self, bits) -> np.ndarray:
        """Bit patterns (scalar or array) to float64 values (exact)."""
        dt = self._require_dtype()
        return np.asarray(bits, dtype=self.np_uint).view(dt).astype(np.float64)

    def _require_dtype(self):
        dt = self.np_dtype
        if dt is None:
            raise ValueError(f"format {self.name!r} has no numpy dtype; use pe.fp_golden's exact model")
        return dt

    def __str__(self):
        return self.name


BINARY16 = FPFormat("binary16", 5, 10)
BFLOAT16 = FPFormat("bfloat16", 8, 7)
BINARY32 = FPFormat("binary32", 8, 23)

FORMATS = {f.name: f for f in (BINARY16, BFLOAT16, BINARY32)}
_ALIASES = {"fp16": "binary16", "half": "binary16", "bf16": "bfloat16", "fp32": "binary32", "single": "binary32"}


def get_format(name: str | FPFormat) -> FPFormat:
    """Look a format up by name (``binary16``, ``bfloat16``, ``binary32`` or alias)."""
    if isinstance(name, FPFormat):
        return name
    key = _ALIASES.get(str(name).lower(), str(name).lower())
    try:
        return FORMATS[key]
    except KeyError:
        raise ValueError(
            f"unknown floating-point format {name!r}; allowed: {', '.join(FORMATS)} "
            f"(aliases: {', '.join(_ALIASES)})"
        ) from None
