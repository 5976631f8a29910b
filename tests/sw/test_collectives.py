"""In-core collectives (sw/collectives.py) against their golden models (sw/golden.py),
bit for bit, and their cost functions against the core's counters.

Model runs use the cycle-accurate CoreModel for nr in {2, 3, 4} and three formats;
RTL runs (all collectives in one session per simulator and configuration) are in
tests/sw/test_kernels.py's RTL session tests.
"""

import random

import numpy as np
import pytest

from sw.collectives import (CollectiveError, Cost, Frag, Region, cost_broadcast, cost_reduce, emit_broadcast,
                             emit_reduce, group_size, reduce_plan, step_hops)
from arch.config import ArchConfig
from sw import golden
from sw.asm import Builder
from sim.core_run import run_kernel

FORMATS = ["binary16", "binary32", "bfloat16"]


def rand_bits(fmt, rng, shape, special=0.05):
    """Random values over a few binades, with some signed zeros and subnormals."""
    x = rng.uniform(-2, 2, size=shape) * 2.0 ** rng.integers(-3, 2, size=shape)
    b = fmt.from_float(x).astype(fmt.np_uint)
    if special:
        pick = rng.random(shape) < special
        choices = np.array([0, fmt.neg_zero, 1, fmt.sign_mask | 3], dtype=fmt.np_uint)
        b = np.where(pick, rng.choice(choices, size=shape), b).astype(fmt.np_uint)
    return b


def _seed():
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    return seed


def check_counters(cfg, ctr, cost: Cost):
    """The run's counters equal the fragment's cost (plus the HALT and drain)."""
    nr = cfg.nr
    assert ctr["cycles"] == cost.cycles_standalone(cfg)
    assert ctr["instructions"] == cost.instructions + 1
    for r in range(nr):
        for c in range(nr):
            assert ctr[f"fma[{r * nr + c}]"] == cost.fma.get((r, c), 0), (r, c)
    for d in ("row", "col"):
        assert [ctr[f"{d}_hops[{i}]"] for i in range(nr)] == cost.hops[d], d
    assert ctr["mem_conflict"] == 0 and ctr["rf_conflict"] == 0


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("nr", [2, 3, 4])
@pytest.mark.parametrize("direction", ["row", "col"])
@pytest.mark.parametrize("mode", ["seq", "tree"])
def test_reduce_model(mode, direction, nr, fmt):
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=256, mem_b_words=256)
    n = int(rng.integers(1, 3 * group_size(cfg) + 2))
    layouts = ["diag"] + (["rows" if direction == "row" else "cols"] if mode == "tree" else [])
    dst_layout = layouts[int(rng.integers(len(layouts)))]
    print(f"n {n} dst_layout {dst_layout}")
    Z = rand_bits(cfg.fmt, rng, (nr, nr, n))
    old = rand_bits(cfg.fmt, rng, (nr, nr, n))
    src, dst = Region("a", int(rng.integers(0, 40))), Region("b", int(rng.integers(0, 40)))
    outs, res = run_kernel(cfg, [(src, Z), (dst, old)],
                           lambda b: emit_reduce(b, cfg, direction, n, src, dst, mode=mode, dst_layout=dst_layout),
                           [(dst, n), (src, n)])
    sums = golden.reduce_partials(cfg.fmt, Z, mode, direction)
    want = old.copy()
    for q in range(nr):
        if dst_layout == "diag":
            want[q, q] = sums[q]
        elif direction == "row":
            want[q, :] = sums[q]
        else:
            want[:, q] = sums[q]
    np.testing.assert_array_equal(outs[0], want)
    np.testing.assert_array_equal(outs[1], Z)            # sources unchanged
    check_counters(cfg, res[0].counters, cost_reduce(cfg, n, mode, direction))


@pytest.mark.parametrize("nr", [2, 3, 4])
@pytest.mark.parametrize("direction", ["row", "col"])
def test_broadcast_model(direction, nr):
    seed = _seed()
    rng = np.random.default_rng(seed)
    fmt = FORMATS[int(rng.integers(3))]
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=256, mem_b_words=256)
    n = int(rng.integers(1, 12))
    print(f"n {n} fmt {fmt}")
    X = rand_bits(cfg.fmt, rng, (nr, nr, n))
    old = rand_bits(cfg.fmt, rng, (nr, nr, n))
    bank_s, bank_d = rng.choice(["a", "b"], size=2)
    src, dst = Region(str(bank_s), 0), Region(str(bank_d), 100)
    outs, res = run_kernel(cfg, [(src, X), (dst, old)],
                           lambda b: emit_broadcast(b, cfg, direction, n, src, dst), [(dst, n)])
    np.testing.assert_array_equal(outs[0], golden.broadcast(X, direction))
    check_counters(cfg, res[0].counters, cost_broadcast(cfg, n, direction))


@pytest.mark.parametrize("direction", ["row", "col"])
def test_broadcast_into_registers(direction):
    cfg = ArchConfig(nr=3, mem_a_words=64, mem_b_words=64)
    rng = np.random.default_rng(3)
    X = rand_bits(cfg.fmt, rng, (3, 3, 3))
    src, dst = Region("b", 5), Region("a", 10)

    def kern(b):
        emit_broadcast(b, cfg, direction, 3, src, ["r1", "r7", "r12"])
        for i, r in enumerate(["r1", "r7", "r12"]):
            b.emit(dst.wr(r, i))

    outs, res = run_kernel(cfg, [(src, X)], kern, [(dst, 3)])
    np.testing.assert_array_equal(outs[0], golden.broadcast(X, direction))
    assert res[0].counters["cycles"] == 3 + 3 + cfg.run_overhead


def test_tree_plan_and_hops():
    """Tree steps: log2(nr) steps; hops per step = nr for powers of two."""
    for nr, want in [(2, 1), (3, 2), (4, 2), (8, 3), (16, 4)]:
        cfg = ArchConfig(nr=nr)
        steps, root = reduce_plan(cfg, "tree")
        assert len(steps) == want
        if nr & (nr - 1) == 0:
            assert all(step_hops(nr, s) == nr for s in steps)
        assert step_hops(nr, root) == nr
    # nr = 3: step 0 drives col 1 on segment {0, 1} (2 hops), step 1 col 2 on the whole bus (3)
    steps, _ = reduce_plan(ArchConfig(nr=3), "tree")
    assert [step_hops(3, s) for s in steps] == [2, 3]
    assert len(reduce_plan(ArchConfig(nr=4), "seq")[0]) == 3


def test_cost_formulas_match_emitted_fragments():
    """The closed-form costs equal the fragments' issued-instruction counts."""
    for nr in (2, 3, 4, 5, 8):
        cfg = ArchConfig(nr=nr)
        for n in (1, 2, 5, 6, 7, 12, 13, 40):
            for mode in ("seq", "tree"):
                f = emit_reduce(Frag(), cfg, "row", n, Region("a", 0), Region("b", 0), mode=mode)
                assert f.count() == cost_reduce(cfg, n, mode).instructions, (nr, n, mode)
            f = emit_broadcast(Frag(), cfg, "col", n, Region("a", 0), Region("b", 0))
            assert f.count() == cost_broadcast(cfg, n, "col").instructions


def test_collective_errors():
    cfg = ArchConfig(nr=4, mem_a_words=64, mem_b_words=64)
    with pytest.raises(CollectiveError, match="do not fit"):
        emit_reduce(Frag(), cfg, "row", 30, Region("a", 40), Region("b", 0))
    with pytest.raises(CollectiveError, match="unknown bus direction"):
        emit_broadcast(Frag(), cfg, "diag", 3, Region("a", 0), Region("b", 0))
    with pytest.raises(CollectiveError, match="diagonal only"):
        emit_reduce(Frag(), cfg, "row", 3, Region("a", 0), Region("b", 0), mode="seq", dst_layout="rows")
    with pytest.raises(CollectiveError, match="unknown SRAM bank"):
        Region("c", 0)
    with pytest.raises(CollectiveError, match="nr >= 2"):
        emit_reduce(Frag(), ArchConfig(nr=1), "row", 3, Region("a", 0), Region("b", 0))


def test_fragment_emits_into_builder_and_counts_loops():
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64)
    b = Builder(cfg)
    f = emit_broadcast(b, cfg, "row", 10, Region("a", 0), Region("b", 0))
    b.halt()
    prog = b.build()
    assert len(prog) == 5            # 3 straight elements (2 carry the AGU setup, 1 is the loop) + body + halt
    assert f.count() == 10
