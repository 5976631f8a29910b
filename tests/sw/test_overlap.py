"""Overlapping a collective with an independent kernel (sw/overlap.py) and the
straight-line rank-1 update it places (sw.kernels.rank1_lines): bit-exact against the
golden rank-1 update alone and stretched into a busy instruction stream, on the core
model and the RTL."""

import random

import numpy as np
import pytest

from sw.collectives import Region
from arch.config import ArchConfig
from sw import golden
from sw.kernels import KernelError, Scalar, rank1_lines
from sim.core_run import run_kernel
from sw.layout import local_len, pack_matrix, pack_vector
from sw.overlap import can_merge, merge_rows, slot_units
from tests.sw.test_collectives import rand_bits
from tests.sw.test_kernels import RTL_CONFIGS, _eq

SEND = "rdrv r4 @diag=0 | rout row"
ADD = "rin col | rda [ar2]++ gate=pred | @diag=0 | add r1 = col + mema"
MAC = "rda [ar0 + 7] | rdb [ar0 + 3] | mac mema += r14 * memb"
XLINE = "rdb [ar0 + 2] gate=rdrv | rdrv memb @diag=0 | mul r15 = row * r13"


def test_slot_units():
    assert slot_units(SEND) == {"rdrv", "out", "rowbus"}
    assert slot_units(ADD) == {"in", "ra", "pred", "fpu", "colbus"}
    assert slot_units(MAC) == {"ra", "rb", "fpu"}
    assert slot_units("ar2 = 17") == {"ar"} and slot_units("stride ar1 = 1") == {"ar"}
    assert slot_units("nop") == set() and slot_units("") == set()
    assert "ctl" in slot_units("mov r1 = r2 | loop i 3 {")
    with pytest.raises(ValueError, match="unknown slot"):
        slot_units("frobnicate r1")


def test_can_merge():
    assert can_merge(SEND, MAC) and can_merge("nop", MAC) and can_merge("ar2 = 5", MAC)
    assert not can_merge(ADD, MAC)            # the FMA, and the predicate
    assert not can_merge(SEND, XLINE)         # both drive the row bus
    assert not can_merge("@row=0 | wrb [ar0 + 9] = r1", MAC)     # no unit in common: only the predicate
    assert not can_merge("halt", "nop")


def test_merge_rows_keeps_the_primary_in_place():
    primary = [ADD, SEND, "nop", ADD, SEND]
    rows = [[MAC, XLINE], [MAC]]
    out, ends = merge_rows(primary, rows)
    assert out[0] == ADD and out[3] == ADD
    assert out[1] == f"{SEND} | {MAC}" and out[2] == XLINE and out[4] == f"{SEND} | {MAC}"
    assert ends == [5, 5]
    out, ends = merge_rows([ADD], rows)       # everything after the primary's end
    assert out == [ADD, MAC, XLINE, MAC] and ends == [3, 4]


CFGS = {"nr2_fp16": RTL_CONFIGS["nr2_fp16"], "nr4_fp32": RTL_CONFIGS["nr4_fp32"],
        "nr3_bf16": ArchConfig(nr=3, fmt="bfloat16", mem_a_words=64, mem_b_words=64, ucode_depth=512)}


def _case(cfg, rng, m, n, u_layout, busy: bool):
    """(loads, kernel, unloads, want, instructions) of rank1_lines on an ``m x n`` W,
    optionally stretched into a stream that keeps the FMA, the move unit and the column
    bus busy (predicated adds on r0..r2, moves from the column bus)."""
    fmt, nr = cfg.fmt, cfg.nr
    mp, np_ = local_len(m, nr), local_len(n, nr)
    Wg, ug, vg = rand_bits(fmt, rng, (m, n)), rand_bits(fmt, rng, (m,)), rand_bits(fmt, rng, (n,))
    al = fmt.from_float(np.array([-0.375]))[0]
    W, u, v, s = Region("a", 0), Region("b", 0), Region("b", mp + 1), Region("b", mp + 1 + np_)
    loads = [(W, pack_matrix(Wg, nr)), (u, pack_vector(ug, nr, u_layout)), (v, pack_vector(vg, nr, "cols")),
             (s, np.full((nr, nr, 1), al, dtype=fmt.np_uint))]
    rows = rank1_lines(cfg, m, n, W, u, v, Scalar("b", s.base), u_layout=u_layout)
    if busy:
        kinds = ["@diag=0 | add r0 = r1 + r2", "cdrv r1 @row=0 | mov r2 = col", "nop", "@all | mul r1 = r1 * 1"]
        primary = [kinds[int(k)] for k in rng.integers(0, len(kinds), 3 * sum(map(len, rows)) // 2)]
        lines, _ = merge_rows(primary, rows)
    else:
        lines = [x for r in rows for x in r]

    def kernel(b, lines=lines):
        b.text("\n".join(lines))
        return len(lines)

    want = pack_matrix(golden.rank1(fmt, nr, Wg, ug, vg, al), nr)
    return loads, kernel, [(W, mp * np_)], want, len(lines)


@pytest.mark.parametrize("busy", [False, True], ids=["alone", "stretched"])
@pytest.mark.parametrize("u_layout", ["rows", "diag"])
@pytest.mark.parametrize("cname", list(CFGS))
def test_rank1_lines_match_golden(cname, u_layout, busy):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = CFGS[cname]
    for m, n in ((1, 1), (5, 3), (7, 9), (2 * cfg.nr, 1)):
        loads, kernel, unloads, want, n_ins = _case(cfg, rng, m, n, u_layout, busy)
        outs, res = run_kernel(cfg, loads, kernel, unloads)
        _eq(outs[0], want, f"W {m}x{n}")
        ctr = res[0].counters
        assert ctr["rf_conflict"] == 0 and ctr["mem_conflict"] == 0
        assert ctr["cycles"] == n_ins + cfg.run_overhead


def test_rank1_lines_checks():
    cfg = CFGS["nr2_fp16"]
    with pytest.raises(KernelError, match="bank"):
        rank1_lines(cfg, 3, 3, Region("a", 0), Region("b", 0), Region("a", 20), Scalar("b", 9))
    with pytest.raises(KernelError, match="layout"):
        rank1_lines(cfg, 3, 3, Region("a", 0), Region("b", 0), Region("b", 20), Scalar("b", 9), u_layout="cols")


@pytest.mark.parametrize("sim", ["icarus"])
def test_rank1_lines_stretched_rtl(sim):
    """The stretched update on the RTL (every beat and counter against the model)."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    cfg = RTL_CONFIGS["nr2_fp16"]
    loads, kernel, unloads, want, _ = _case(cfg, np.random.default_rng(seed), 5, 3, "diag", True)
    outs, _ = run_kernel(cfg, loads, kernel, unloads, backend="rtl", sim=sim, name="overlap-nr2_fp16")
    _eq(outs[0], want, "W")
