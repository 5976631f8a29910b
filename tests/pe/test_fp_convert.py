"""Format conversion of the ring crossing: the golden function's corner cases (NaN,
infinities, signed zeros, subnormals, ties to even, overflow) and the RTL unit against
it, bit for bit."""

import random

import numpy as np
import pytest

from arch.fpformat import get_format
from pe.fp_convert import FPConvert, convert_bits

H, B, S = get_format("binary16"), get_format("bfloat16"), get_format("binary32")


def test_widening_is_exact_through_numpy():
    bits = np.arange(1 << 16, dtype=np.uint16)
    f = bits.view(np.float16)
    ok = ~np.isnan(f)
    got = np.array([convert_bits(H, S, int(b)) for b in bits[ok]], dtype=np.uint32).view(np.float32)
    assert np.array_equal(got, f[ok].astype(np.float32))          # every binary16 value, subnormals too
    assert all(convert_bits(H, S, int(b)) == S.qnan for b in bits[~ok][:50])
    # bfloat16 -> binary32 is a shift
    for b in (0x0001, 0x8001, 0x3F80, 0x7F7F, 0xFF80):
        assert convert_bits(B, S, b) == b << 16


def test_narrowing_corner_cases():
    # binary32 -> binary16 against numpy's float32 -> float16 (round to nearest even)
    rng = np.random.default_rng(0)
    print("seed", 0)
    x = np.concatenate([rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32),
                        np.array([0x33000000, 0x33000001, 0x337FFFFF, 0x38800000, 0x387FE000, 0x387FF000,
                                  0x477FEFFF, 0x477FF000, 0x7F800000, 0xFF800000, 0x80000000, 0x00000001,
                                  0x3F801000, 0x3F803000, 0x3F802000], dtype=np.uint32)])
    f = x.view(np.float32)
    ok = ~np.isnan(f)
    with np.errstate(over="ignore"):
        ref = f[ok].astype(np.float16).view(np.uint16)
    got = np.array([convert_bits(S, H, int(b)) for b in x[ok]], dtype=np.uint16)
    assert np.array_equal(got, ref)
    assert convert_bits(S, H, 0x7FC00001) == H.qnan and convert_bits(S, H, 0xFF800001) == H.qnan
    # ties to even: 1 + 2^-11 (halfway between 1 and 1 + 2^-10) -> 1; 1 + 3 * 2^-11 -> 1 + 2^-9
    assert convert_bits(S, H, 0x3F801000) == 0x3C00 and convert_bits(S, H, 0x3F803000) == 0x3C02
    # half the smallest binary16 subnormal rounds to +-0 (tie, even), above it to the subnormal
    assert convert_bits(S, H, 0x33000000) == 0 and convert_bits(S, H, 0xB3000000) == 0x8000
    assert convert_bits(S, H, 0x33000001) == 1
    # binary16 <-> bfloat16: fewer fraction bits one way, fewer exponent bits the other
    assert convert_bits(H, B, 0x0001) == 0x3380          # 2^-24 is a bfloat16 normal
    assert convert_bits(B, H, 0x4780) == 0x7C00          # 65536 overflows binary16
    assert convert_bits(B, H, 0x3380) == 0x0001 and convert_bits(B, H, 0x3300) == 0   # 2^-25: tie to 0
    assert convert_bits(H, B, 0x3C01) == 0x3F80          # 1 + 2^-10 rounds to 1 in bfloat16


@pytest.mark.parametrize("src,dst", [(H, B), (B, H), (H, S), (S, H), (S, B), (B, S)],
                         ids=lambda f: f.name)
def test_rtl_converter_bit_for_bit(src, dst):
    """:class:`pe.fp_convert.FPConvert` equals :func:`convert_bits` on every 16-bit
    source pattern (a stride) or random binary32 patterns plus the corner cases."""
    from amaranth.sim import Simulator

    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    if src.width == 16:
        vals = list(range(0, 1 << 16, 5)) + [0x7C01, 0xFC00, 0x8000, 0x0001, 0x03FF, 0x7BFF]
    else:
        vals = [rng.getrandbits(32) for _ in range(2000)] + [0x33000000, 0x33000001, 0x477FF000, 0x7F800001,
                                                             0x80000000, 0x00000001, 0x3F801000, 0x7F7FFFFF]
    dut = FPConvert(src, dst)
    sim = Simulator(dut)
    bad = []

    async def tb(ctx):
        for v in vals:
            ctx.set(dut.a, v)
            if ctx.get(dut.o) != convert_bits(src, dst, v):
                bad.append(hex(v))

    sim.add_testbench(tb)
    sim.run()
    assert not bad, bad[:8]
