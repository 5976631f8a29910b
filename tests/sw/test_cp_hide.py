"""The pages of a CP panel paged beside resident rows, moved inside the resident rows'
forward GEMV (sw/train_cp_hide.py, ``SpadPanel.hide``): bit for bit against the golden on
both chip engines with equal counters, shorter than the unhidden schedule; the golden
follows the new order of the ``W^T d`` sums; the move lines and their merging rules."""

from __future__ import annotations

import numpy as np
import pytest

from sw.collectives import Region
from sw.golden_train_cp import GoldenChipCP
from sw.mlp import MLP
from sw.overlap import can_merge, slot_units
from sw.train import init_weights
from sw.train_cp import compile_chip_cp
from sw.train_cp_hide import move_lines
from tests.rtl.test_chip_cp_banks import CFG_HIDE as CFG2
from tests.sw.test_train import _seed
from tests.sw.test_train_cp import run_cp

#: CFG2: 2 cores of 2 x 2 PEs, 128 + 256 words per PE, a small scratchpad and no DRAM: the
#: planner keeps rows resident in both banks, the input history in the scratchpad and
#: pages the rest; CFG4: 4 cores, 128 + 128 words
CFG4 = CFG2.replace(cores=4, mem_b_words=128)

CASES = {
    "l0": (CFG2, (40, 24, 6)),                 # layer 0 paged: 2 + 8 rows resident, 2 pages
    "l1-fused": (CFG4, (6, 24, 48, 6)),        # layer 1 (fused backward): its W^T d sums pages first
    "l1-separate": (CFG4, (6, 32, 40, 6)),     # layer 1, separate W^T d and rank-1 update
}


@pytest.mark.parametrize("case", list(CASES))
def test_hidden_pages_match_golden_on_both_engines(case):
    """Every step's output, loss and weight bits equal to the golden's on the fast and
    the per-cycle engine, counter for counter; the moves sit inside the forward GEMV,
    and the step is shorter than with the pages visited after the resident rows and
    moved by their own loops (``page_swap=False``). By default the compiler keeps the
    shorter of this schedule and the updates' swaps (layer 0 and separate updates)."""
    cfg, sizes = CASES[case]
    mlp = MLP(sizes, "mse", 0.125)
    seed = _seed()
    on, _, _, fast = run_cp(cfg, mlp, 2, "fast", seed, hide_pages=True)
    _, _, _, model = run_cp(cfg, mlp, 2, "model", seed, hide_pages=True)
    for a, b in zip(fast, model):
        assert a.core_counters == b.core_counters
    (l, sp), = on.spad.items()
    assert sp.hide and sp.res and sp.pages and on.meta["hide_pages"]
    hosted = [op for ops in on.head for op in ops if op.kind == "spad+gemv"]
    assert len(hosted) >= on.groups[l] and all(op.info["hosted"] > 0 for op in hosted)
    assert "inside straight-line blocks of the resident rows' forward GEMV" in on.describe()
    off, *_ = run_cp(cfg, mlp, 2, "fast", seed, chain_overlap=False, page_swap=False)
    assert not off.spad[l].hide and off.spad[l].order == "rows"
    assert on.step_cycles() < off.step_cycles()
    best = compile_chip_cp(cfg, mlp)
    choice = best.meta["hide_or_swap"]
    assert choice["hide"] == on.step_cycles() and best.step_cycles() == min(choice.values())
    assert best.spad[l].hide == (choice["hide"] <= choice["swap"]) == best.meta["hide_pages"]


def test_golden_follows_the_page_order():
    """With layer 1 paged, the pages' partial ``W^T d`` sums come first: the golden of
    the other order disagrees with the hidden schedule's within a few steps."""
    cfg, sizes = CASES["l1-fused"]
    mlp = MLP(sizes, "mse", 0.125)
    tp = compile_chip_cp(cfg, mlp, backward="fused", hide_pages=True)
    W0 = init_weights(mlp, cfg.fmt, 11)
    right = GoldenChipCP.for_program(tp, W0)
    wrong = GoldenChipCP(cfg, mlp, W0, groups=tp.groups, fused=tp.fused, hide=False)
    assert right.pages[1][0][0] > wrong.pages[1][0][0]     # the pages (after the resident rows) first
    rng = np.random.default_rng(4)
    differ = False
    for _ in range(6):
        x, t = rng.normal(size=mlp.n_in), rng.normal(size=mlp.n_out) * 0.5
        right.step(x, t)
        wrong.step(x, t)
        differ |= any(not np.array_equal(a, b) for a, b in zip(right.weights(padded=True), wrong.weights(padded=True)))
    assert differ


def test_move_lines_and_their_merging():
    """A load writes PE row k's word under a write predicate from the column buses, a
    store reads it onto them, in emit_load / emit_unload's beat order; a load merges with
    a MAC but not with a predicated instruction or one that writes SRAM."""
    cfg = CFG2
    WP = Region("a", 40)
    ld, st = move_lines(cfg, WP, 3, False), move_lines(cfg, WP, 3, True)
    assert len(ld) == len(st) == cfg.nr * 3
    assert ld[4] == "sin col | @row=1 writes | wra [ar0 + 41] = col"
    assert st[4] == "rda [ar0 + 41] gate=cdrv | cdrv mema @row=1 | sout col"
    assert slot_units(ld[0]) == {"in", "colbus", "wpred", "wa", "wb"}
    mac_line = "rdb [ar0 + 7] | mac r0 += memb * r3"
    assert can_merge(ld[0], mac_line) and can_merge(st[0], mac_line)
    assert not can_merge(ld[0], "@row=1 | mov r1 = r2")
    assert not can_merge(ld[0], "rdrv r1 @col=0 | wrb [ar0 + 2] = row")
    assert not can_merge(st[0], "rda [ar0 + 3] | mac r0 += mema * r3")
