"""Floating-point test vectors: a biased random operand generator and TestFloat files.

:func:`gen_operands` returns operand pairs for ``mul`` or ``add`` in any
:class:`~arch.fpformat.FPFormat`. About half are uniformly random bit patterns; the rest
are biased on purpose toward the hard cases of an IEEE datapath:

* subnormal operands and subnormal / underflowing results (down to below half the
  minimum subnormal, so results round to zero or to the minimum subnormal);
* exact ties, built so that the exact result lies halfway between two representable
  values (normal and subnormal results, for mul and for add);
* overflow and results near the maximum finite value, including rounding carries into
  infinity;
* catastrophic cancellation ``a ~ -b``, also across an exponent boundary;
* exponent differences around and beyond the significand width (add);
* zeros of both signs, infinities, quiet and signaling NaNs with random payloads and
  signs, the minimum subnormal, the maximum subnormal, the minimum normal, max finite.

Randomness comes from one integer seed (``seed=None`` draws one from ``FP_SEED`` or the
OS); callers log it so that a failure can be replayed.

TestFloat files (Berkeley ``testfloat_gen`` output, one case a line: hex operand A, hex
operand B, hex result, hex exception flags) are read by :func:`read_testfloat` and
written by :func:`write_testfloat`. :func:`write_samples` regenerates the small sample
files in ``tests/data/`` with softfloatpy (``python -m tests.fp_vectors``).
"""

from __future__ import annotations

import os
import random
import secrets
from pathlib import Path

import numpy as np

from pe.fp_golden import round_to_format
from arch.fpformat import FPFormat, get_format

__all__ = [
    "new_seed", "gen_operands", "special_values", "read_testfloat", "write_testfloat",
    "softfloat_reference", "write_samples", "classify", "save_vectors", "DATA_DIR", "SAMPLE_FORMATS",
]

DATA_DIR = Path(__file__).resolve().parent / "data"
SAMPLE_FORMATS = ("binary16", "bfloat16", "binary32")
OPS = ("mul", "add")


def new_seed() -> int:
    """A seed from ``FP_SEED`` if set, else a fresh random one."""
    env = os.environ.get("FP_SEED", "").strip()
    return int(env, 0) if env else secrets.randbits(32)


def save_vectors(tag: str, arrays: dict) -> Path:
    """Write ``arrays`` atomically to an ``.npz`` in the build dir (unique per process),
    for a simulator process to read; returns its path."""
    from sim.harness import BUILD

    d = BUILD / "fp_vectors"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{tag}-{os.getpid()}.npz"
    tmp = d / f".{tag}-{os.getpid()}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return path


# -- helpers --------------------------------------------------------------------------------
def _pack(fmt: FPFormat, s, e, f) -> np.ndarray:
    s = np.asarray(s, dtype=np.uint64) & np.uint64(1)
    e = np.asarray(e, dtype=np.uint64) & np.uint64(fmt.exp_max)
    f = np.asarray(f, dtype=np.uint64) & np.uint64((1 << fmt.frac_bits) - 1)
    bits = (s << np.uint64(fmt.width - 1)) | (e << np.uint64(fmt.frac_bits)) | f
    return bits.astype(fmt.np_uint)


def _rand_frac(rng: np.random.Generator, fmt: FPFormat, n: int) -> np.ndarray:
    """Random fractions, a quarter of them with long runs of ones or zeros."""
    F = fmt.frac_bits
    f = rng.integers(0, 1 << F, n, dtype=np.uint64, endpoint=False)
    kind = rng.integers(0, 8, n)
    k = rng.integers(0, F + 1, n).astype(np.uint64)
    full = np.uint64((1 << F) - 1)
    low_ones = (np.uint64(1) << k) - np.uint64(1)               # 0..0 1..1
    f = np.where(kind == 0, low_ones, f)
    f = np.where(kind == 1, full ^ low_ones, f)                   # 1..1 0..0
    f = np.where(kind == 2, f & low_ones, f)                      # leading zeros
    f = np.where(kind == 3, f | (full ^ low_ones), f)             # leading ones
    return f


def _rand_sign(rng, n):
    return rng.integers(0, 2, n, dtype=np.uint64)


def _rand_bits(rng, fmt, n):
    return rng.integers(0, 1 << fmt.width, n, dtype=np.uint64).astype(fmt.np_uint)


def _finite(rng, fmt, n, exp):
    exp = np.clip(np.asarray(exp, dtype=np.int64), 0, fmt.exp_max - 1)
    return _pack(fmt, _rand_sign(rng, n), exp, _rand_frac(rng, fmt, n))


def special_values(fmt: FPFormat, rng: np.random.Generator | None = None, n_nan: int = 4) -> np.ndarray:
    """Zeros, infinities, extremes, +-1 and quiet / signaling NaNs (random payloads)."""
    rng = rng or np.random.default_rng(0)
    F = fmt.frac_bits
    vals = [0, fmt.neg_zero, fmt.inf, fmt.inf | fmt.sign_mask, fmt.qnan, fmt.qnan | fmt.sign_mask,
            1, fmt.sign_mask | 1,                                  # min subnormal
            (1 << F) - 1, fmt.sign_mask | ((1 << F) - 1),          # max subnormal
            1 << F, fmt.sign_mask | (1 << F),                      # min normal
            fmt.max_finite, fmt.sign_mask | fmt.max_finite, fmt.one, fmt.sign_mask | fmt.one]
    for _ in range(n_nan):
        s = int(rng.integers(0, 2))
        quiet = 1 << (F - 1)
        payload = int(rng.integers(0, 1 << F)) if F > 1 else 0
        vals.append(fmt.pack(s, fmt.exp_max, quiet | payload))     # quiet NaN
        snan = payload & (quiet - 1)
        if snan == 0 and F > 1:
            snan = 1
        if F > 1:
            vals.append(fmt.pack(s, fmt.exp_max, snan))            # signaling NaN
    return np.array(sorted(set(vals)), dtype=fmt.np_uint)


def _representable(fmt: FPFormat, m: int, e: int) -> bool:
    """``m * 2**e`` (``m`` odd) is exactly representable and finite."""
    return (m.bit_length() <= fmt.precision and e >= 1 - fmt.bias - fmt.frac_bits
            and e + m.bit_length() - 1 <= fmt.bias)


def _odd(r: random.Random, bits: int) -> int:
    if bits <= 1:
        return 1
    return r.getrandbits(bits - 1) | (1 << (bits - 1)) | 1


def _mul_ties(fmt: FPFormat, r: random.Random, n: int):
    """Operand pairs whose exact product is halfway between two representable values."""
    P, B, F = fmt.precision, fmt.bias, fmt.frac_bits
    lo_q = 1 - B - F
    out = []
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        subnormal = r.random() < 0.3
        if subnormal:
            u = _odd(r, r.randint(1, P))
            v = _odd(r, r.randint(1, P))
            if (u * v).bit_length() > P:
                continue
            s = -B - F                       # product LSB = half the subnormal quantum
        else:
            ru = r.randint(1, P)
            u = _odd(r, ru)
            v = _odd(r, min(P, max(1, P + 1 - ru + r.randint(0, 1))))
            if (u * v).bit_length() != P + 1:
                continue
            s = r.randint(1 - B, B) - P       # product MSB lands in a random normal binade
        # split exponent s between the operands
        lo_a, hi_a = lo_q, B - u.bit_length() + 1
        lo_b, hi_b = lo_q, B - v.bit_length() + 1
        lo, hi = max(lo_a, s - hi_b), min(hi_a, s - lo_b)
        if lo > hi:
            continue
        ea = r.randint(lo, hi)
        eb = s - ea
        if not (_representable(fmt, u, ea) and _representable(fmt, v, eb)):
            continue
        sa, sb = r.getrandbits(1), r.getrandbits(1)
        out.append((round_to_format(fmt, sa, u, ea), round_to_format(fmt, sb, v, eb)))
    return out


def _add_ties(fmt: FPFormat, r: random.Random, n: int):
    """Operand pairs whose exact sum is (mostly) halfway between representable values."""
    P, B, F = fmt.precision, fmt.bias, fmt.frac_bits
    out = []
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        ea_field = r.randint(2, fmt.exp_max - 1) if fmt.exp_max > 2 else 1
        frac = r.getrandbits(F)
        if r.random() < 0.15:
            frac = (1 << F) - 1               # all ones: rounding carries into the next binade
            if r.random() < 0.5:
                ea_field = fmt.exp_max - 1    # ... and into infinity
        qa = ea_field - B - F                 # quantum (ulp) exponent of a
        k = r.choice([1, 1, 2, 3, r.randint(1, P)])
        m = _odd(r, k)
        eb = qa - 1                           # b = odd * ulp(a) / 2
        if not _representable(fmt, m, eb):
            continue
        sa = r.getrandbits(1)
        sb = sa if r.random() < 0.6 else 1 - sa
        a = fmt.pack(sa, ea_field, frac)
        b = round_to_format(fmt, sb, m, eb)
        out.append((a, b) if r.random() < 0.5 else (b, a))
    return out


# -- the generator -------------------------------------------------------------------------------
def gen_operands(fmt: FPFormat | str, op: str, n: int, seed: int, biased_fraction: float = 0.5):
    """Operand arrays ``(a, b)`` (dtype ``fmt.np_uint``) for ``op`` in ``{"mul", "add"}``.

    ``biased_fraction`` of the ``n`` pairs come from the special categories (module
    docstring), the rest are uniformly random bit patterns; the result is shuffled.
    The same ``(fmt, op, n, seed)`` always gives the same vectors.
    """
    fmt = get_format(fmt) if not isinstance(fmt, FPFormat) else fmt
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    rng = np.random.default_rng([seed, OPS.index(op), fmt.exp_bits, fmt.frac_bits])
    r = random.Random(f"{seed}-{op}-{fmt.exp_bits}-{fmt.frac_bits}")
    n_biased = int(round(n * biased_fraction))
    emax, B, P = fmt.exp_max, fmt.bias, fmt.precision
    cats = ["special", "subnormal", "tiny", "tie", "huge", "ones"]
    if op == "add":
        cats += ["cancel", "expdiff"]
    per = [n_biased // len(cats)] * len(cats)
    per[0] += n_biased - sum(per)
    A, Bv = [], []

    def add(a, b):
        A.append(np.asarray(a, dtype=fmt.np_uint))
        Bv.append(np.asarray(b, dtype=fmt.np_uint))

    for cat, k in zip(cats, per):
        if k == 0:
            continue
        if cat == "special":
            sv = special_values(fmt, rng, n_nan=8)
            a = sv[rng.integers(0, len(sv), k)]
            b = np.where(rng.random(k) < 0.5, sv[rng.integers(0, len(sv), k)], _rand_bits(rng, fmt, k))
            swap = rng.random(k) < 0.5
            add(np.where(swap, b, a), np.where(swap, a, b))
        elif cat == "subnormal":           # subnormal operands (one or both)
            a = _pack(fmt, _rand_sign(rng, k), 0, _rand_frac(rng, fmt, k))
            other = np.where(rng.random(k) < 0.5, _pack(fmt, _rand_sign(rng, k), 0, _rand_frac(rng, fmt, k)),
                             _finite(rng, fmt, k, rng.integers(0, emax, k)))
            if op == "mul":                # keep some products around the subnormal range
                near = _finite(rng, fmt, k, B + rng.integers(-2, P + 3, k))
                other = np.where(rng.random(k) < 0.5, near, other)
            swap = rng.random(k) < 0.5
            add(np.where(swap, other, a), np.where(swap, a, other))
        elif cat == "tiny":                # subnormal / underflowing results
            if op == "mul":
                xa = rng.integers(1, emax, k)
                t = rng.integers(-(P + 3), 3, k)   # xa + xb - bias: product binade near emin
                xb = t + B - xa
                ok = (xb >= 0) & (xb < emax)
                xb = np.where(ok, xb, rng.integers(0, 3, k))
                xa = np.where(ok, xa, rng.integers(0, 3, k))
                add(_finite(rng, fmt, k, xa), _finite(rng, fmt, k, xb))
            else:                          # small operands, often of opposite signs
                xa = rng.integers(0, min(4, emax), k)
                xb = np.clip(xa + rng.integers(-1, 2, k), 0, emax - 1)
                add(_finite(rng, fmt, k, xa), _finite(rng, fmt, k, xb))
        elif cat == "tie":
            pairs = (_mul_ties if op == "mul" else _add_ties)(fmt, r, k)
            if len(pairs) < k:             # tiny formats: not enough ties exist
                pairs += [(int(x), int(y)) for x, y in zip(_rand_bits(rng, fmt, k - len(pairs)),
                                                           _rand_bits(rng, fmt, k - len(pairs)))]
            add([p[0] for p in pairs], [p[1] for p in pairs])
        elif cat == "huge":                # overflow and results near max finite
            if op == "mul":
                xa = rng.integers(1, emax, k)
                t = rng.integers(emax - 4 - B, emax + 1 - B, k) + B   # target biased result exponent
                xb = np.clip(t + B - xa, 1, emax - 1)
                a = _finite(rng, fmt, k, xa)
                b = _finite(rng, fmt, k, xb)
            else:
                xa = rng.integers(max(1, emax - 3), emax, k)
                xb = rng.integers(max(1, emax - 3 - P), emax, k)
                a = _finite(rng, fmt, k, xa)
                b = _finite(rng, fmt, k, xb)
                same = rng.random(k) < 0.8
                b = np.where(same, (b & fmt.np_uint.type(fmt.sign_mask - 1)) | (a & fmt.np_uint.type(fmt.sign_mask)), b)
            mx = np.full(k, fmt.max_finite, dtype=fmt.np_uint) | (_rand_sign(rng, k).astype(fmt.np_uint) << fmt.np_uint.type(fmt.width - 1))
            a = np.where(rng.random(k) < 0.25, mx, a)
            add(a, b)
        elif cat == "ones":                # significands full of ones / near powers of two
            F = fmt.frac_bits
            full = np.uint64((1 << F) - 1)
            small = rng.integers(0, 4, k).astype(np.uint64)
            kind = rng.integers(0, 4, k)
            fa = np.where(kind < 2, full, small)
            fb = np.where(kind % 2 == 0, full ^ small, rng.integers(0, 1 << F, k, dtype=np.uint64))
            xa = rng.integers(1, emax, k)
            if op == "mul":                # product in a random normal binade
                xb = np.clip(rng.integers(1, emax, k) + B - xa, 1, emax - 1)
            else:
                xb = np.clip(xa + rng.integers(-2, 3, k), 1, emax - 1)
            add(_pack(fmt, _rand_sign(rng, k), xa, fa), _pack(fmt, _rand_sign(rng, k), xb, fb))
        elif cat == "cancel":              # a ~ -b, also across an exponent boundary
            xa = rng.integers(1, emax, k)
            fa = np.where(rng.random(k) < 0.4, rng.integers(0, 4, k).astype(np.uint64), _rand_frac(rng, fmt, k))
            a = _pack(fmt, _rand_sign(rng, k), xa, fa)
            delta = rng.integers(-8, 9, k)
            mag = (a & fmt.np_uint.type(fmt.sign_mask - 1)).astype(np.int64) + delta
            mag = np.clip(mag, 0, fmt.max_finite).astype(np.uint64)
            b = (mag | ((~a.astype(np.uint64)) & np.uint64(fmt.sign_mask))).astype(fmt.np_uint)
            add(a, b)
        elif cat == "expdiff":             # exponent difference around / beyond the width
            xa = rng.integers(1, emax, k)
            d = np.where(rng.random(k) < 0.7, rng.integers(max(0, P - 3), P + 5, k), rng.integers(0, emax, k))
            xb = xa - d
            ok = xb >= 0
            xb = np.where(ok, xb, 0)
            a = _finite(rng, fmt, k, xa)
            b = _finite(rng, fmt, k, xb)
            swap = rng.random(k) < 0.5
            add(np.where(swap, b, a), np.where(swap, a, b))
    n_uniform = n - sum(len(x) for x in A)
    add(_rand_bits(rng, fmt, n_uniform), _rand_bits(rng, fmt, n_uniform))
    a = np.concatenate(A)[:n]
    b = np.concatenate(Bv)[:n]
    perm = rng.permutation(len(a))
    return a[perm], b[perm]


# -- classification (test statistics) ------------------------------------------------------------
def _round_kind(fmt: FPFormat, m: int, e: int) -> str:
    """'exact', 'tie' or 'inexact' for rounding ``m * 2**e`` (``m > 0``) to ``fmt``."""
    q = max(e + m.bit_length() - 1 - fmt.frac_bits, 1 - fmt.bias - fmt.frac_bits)
    if q <= e:
        return "exact"
    k = q - e
    rem = m & ((1 << k) - 1)
    return "exact" if rem == 0 else "tie" if rem == 1 << (k - 1) else "inexact"


def classify(fmt: FPFormat, op: str, a: int, b: int) -> set[str]:
    """Tags of one case: operand kinds (``nan``, ``snan``, ``inf``, ``zero``, ``sub_in``) and
    result kinds (``tie``, ``sub_out``, ``zero_out``, ``overflow``, ``cancel``, ``bigdiff``)."""
    from pe.fp_golden import decode, exact_add, exact_mul

    tags: set[str] = set()
    da, db = decode(fmt, a), decode(fmt, b)
    for bits, d in ((a, da), (b, db)):
        if d[0] == "nan":
            tags.add("nan")
            if not (bits >> (fmt.frac_bits - 1)) & 1:
                tags.add("snan")
        elif d[0] == "inf":
            tags.add("inf")
        elif d[2] == 0:
            tags.add("zero")
        elif d[2] < (1 << fmt.frac_bits):
            tags.add("sub_in")
    res = (exact_mul if op == "mul" else exact_add)(fmt, a, b)
    if da[0] != "fin" or db[0] != "fin":
        return tags
    _, sa, ma, ea = da
    _, sb, mb, eb = db
    if op == "mul":
        m, e = ma * mb, ea + eb
    else:
        e = min(ea, eb)
        t = (-1) ** sa * (ma << (ea - e)) + (-1) ** sb * (mb << (eb - e))
        m = abs(t)
        if ma and mb and sa != sb and m and m.bit_length() + e < max(ma.bit_length() + ea, mb.bit_length() + eb) - 2:
            tags.add("cancel")
        if ma and mb and abs((ma.bit_length() + ea) - (mb.bit_length() + eb)) > fmt.precision:
            tags.add("bigdiff")
    if m == 0:
        return tags
    if _round_kind(fmt, m, e) == "tie":
        tags.add("tie")
    _, ef, _ = fmt.fields(res)
    if ef == fmt.exp_max:
        tags.add("overflow")
    elif ef == 0:
        tags.add("zero_out" if res & (fmt.sign_mask - 1) == 0 else "sub_out")
    return tags


# -- TestFloat files ------------------------------------------------------------------------------
def read_testfloat(path, fmt: FPFormat | str):
    """Read ``testfloat_gen`` output for a two-operand op.

    Returns ``(a, b, result, flags)`` numpy arrays (bit patterns in ``fmt.np_uint``,
    flags ``uint8``). Blank lines and lines starting with ``#`` are skipped.
    """
    fmt = get_format(fmt) if not isinstance(fmt, FPFormat) else fmt
    cols: list[list[int]] = [[], [], [], []]
    with open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 4:
                raise ValueError(f"{path}:{lineno}: expected 4 hex fields (A B result flags), got {line!r}")
            try:
                vals = [int(p, 16) for p in parts]
            except ValueError:
                raise ValueError(f"{path}:{lineno}: not hexadecimal: {line!r}") from None
            for v in vals[:3]:
                if v >> fmt.width:
                    raise ValueError(f"{path}:{lineno}: value {v:#x} wider than {fmt.width} bits ({fmt.name})")
            for c, v in zip(cols, vals):
                c.append(v)
    u = fmt.np_uint
    return (np.array(cols[0], dtype=u), np.array(cols[1], dtype=u), np.array(cols[2], dtype=u),
            np.array(cols[3], dtype=np.uint8))


def write_testfloat(path, fmt: FPFormat | str, a, b, result, flags, header: str | None = None) -> Path:
    """Write vectors in ``testfloat_gen`` format (upper-case hex, flags 2 digits), atomically."""
    fmt = get_format(fmt) if not isinstance(fmt, FPFormat) else fmt
    nd = (fmt.width + 3) // 4
    lines = [] if header is None else [f"# {h}" for h in header.splitlines()]
    lines += [f"{int(x):0{nd}X} {int(y):0{nd}X} {int(z):0{nd}X} {int(f):02X}"
              for x, y, z, f in zip(a, b, result, flags)]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def softfloat_reference(fmt: FPFormat | str, op: str, a, b):
    """Results and exception flags from Berkeley SoftFloat (softfloatpy), RNE.

    binary16 and binary32 use SoftFloat's own ``f16_*`` / ``f32_*`` operations.
    SoftFloat has no bfloat16 arithmetic: bfloat16 operands are widened exactly to
    binary32, the binary32 op rounds once, and ``f32_to_bf16`` rounds to bfloat16. The
    double rounding is innocuous (binary32 has p' = 24 >= 2p + 2 = 18 bits and the same
    exponent range; see :mod:`pe.fp_golden`), so the results are the correctly rounded
    bfloat16 results; the flags are those of the binary32 op and the conversion (they can
    differ from a native bfloat16 op, e.g. inexact/underflow, and are only informative).
    Returns ``(result, flags)`` arrays; NaN results are SoftFloat's default NaN.
    """
    import softfloatpy as sf

    fmt = get_format(fmt) if not isinstance(fmt, FPFormat) else fmt
    nb = fmt.width // 8
    if fmt.name == "binary16":
        cls, fn = sf.Float16, (sf.f16_mul if op == "mul" else sf.f16_add)

        def run(x, y):
            return fn(cls.from_bytes(x), cls.from_bytes(y)).to_bytes()
    elif fmt.name == "binary32":
        cls, fn = sf.Float32, (sf.f32_mul if op == "mul" else sf.f32_add)

        def run(x, y):
            return fn(cls.from_bytes(x), cls.from_bytes(y)).to_bytes()
    elif fmt.name == "bfloat16":
        fn = sf.f32_mul if op == "mul" else sf.f32_add

        def run(x, y):
            xa = sf.bf16_to_f32(sf.BFloat16.from_bytes(x))
            ya = sf.bf16_to_f32(sf.BFloat16.from_bytes(y))
            return sf.f32_to_bf16(fn(xa, ya)).to_bytes()
    else:
        raise ValueError(f"softfloat_reference supports binary16, bfloat16, binary32, not {fmt.name}")
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    res = np.empty(len(a), dtype=fmt.np_uint)
    flags = np.empty(len(a), dtype=np.uint8)
    for i, (x, y) in enumerate(zip(a, b)):
        sf.set_exception_flags(sf.ExceptionFlag(0))
        out = run(int(x).to_bytes(nb, "big"), int(y).to_bytes(nb, "big"))
        res[i] = int.from_bytes(out, "big")
        flags[i] = int(sf.get_exception_flags())
    return res, flags


def sample_path(fmt_name: str, op: str) -> Path:
    return DATA_DIR / f"testfloat_sample_{fmt_name}_{op}.txt"


def write_samples(n: int = 2000, seed: int = 20240601, outdir: Path | None = None) -> list[Path]:
    """Regenerate ``tests/data/testfloat_sample_<fmt>_<op>.txt`` (results from SoftFloat)."""
    paths = []
    for name in SAMPLE_FORMATS:
        fmt = get_format(name)
        for op in OPS:
            a, b = gen_operands(fmt, op, n, seed)
            res, flags = softfloat_reference(fmt, op, a, b)
            p = (outdir / sample_path(name, op).name) if outdir else sample_path(name, op)
            # no header: exactly the testfloat_gen line format (provenance: docs/fp_datapath.md)
            paths.append(write_testfloat(p, fmt, a, b, res, flags))
    return paths


if __name__ == "__main__":
    for p in write_samples():
        print(p)
