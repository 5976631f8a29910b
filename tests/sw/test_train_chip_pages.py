"""Paged SGD across the cores: each page's forward GEMV loading the next page in place
(``page_overlap``) and the backward updates swapping the pages (``page_swap``), bit for
bit against the golden trainer on both chip engines."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from sw.golden_train_chip import GoldenChipSGD
from sw.mlp import MLP
from sw.train_chip import compile_chip_sgd
from tests.sw.test_train import _seed
from tests.sw.test_train_chip import SMALL, run_and_check

PAGE_OVERLAP = {
    # the compiler pages W1 (4 pages): its first page takes x in the diagonal layout,
    # whose copy the step's last instruction writes: the second page loads apart
    "nr4": (replace(SMALL, mem_a_words=128, mem_b_words=128, spad_kib=4), (16, 128, 64, 4), {},
            ["lf1_0", "lf1_1"], ["gemv1_1+lf2", "gemv1_2+lf3"]),
    # nr = 2: a stream step has room for x's copy too, but W0's first page takes the
    # broadcast of x from the ring
    "nr2": (replace(SMALL, nr=2, spad_kib=4), (16, 64, 32, 4), dict(spad=[0, 1], page_rows=2),
            ["lf0_0", "lf0_1", "lf1_0"], [f"gemv0_{p}+lf{p + 1}" for p in range(1, 7)]
            + [f"gemv1_{p}+lf{p + 1}" for p in range(3)]),
}


@pytest.mark.parametrize("case", sorted(PAGE_OVERLAP))
def test_chip_sgd_page_overlap(case):
    """``page_overlap``: pages of one local row per PE are stored in word order and each
    page's forward GEMV but the last loads the next page in place as it streams (not a
    first page whose input comes from the ring, or whose diagonal input's copy shares
    the stream step's last instruction). Bit for bit against the golden trainer, the
    same scratchpad traffic and FMAs, fewer cycles by the hidden loads, on both chip
    engines counter for counter."""
    from functools import partial

    cfg, sizes, kw, apart, merged = PAGE_OVERLAP[case]
    seed = _seed()
    mlp = MLP(sizes, "mse", 0.05)
    runs = {on: run_and_check(cfg, mlp, 2, "fast", seed, compile=partial(compile_chip_sgd, page_overlap=on,
                                                                         page_swap=False, **kw),
                              golden=partial(GoldenChipSGD, **kw))
            for on in (True, False)}
    (tp, _, _, res), (tp0, _, _, res0) = runs[True], runs[False]
    assert tp.meta["page_overlap"] == sorted(tp.spad) and tp0.meta["page_overlap"] == []
    assert {sp.order for sp in tp.spad.values()} == {"words"} and {sp.order for sp in tp0.spad.values()} == {"rows"}
    names = [n for n, _, _ in tp.breakdown()]
    assert [n for n in names if n.startswith("lf")] == apart
    assert [n for n in names if "+lf" in n] == merged
    for key in ("spad_rd_beats", "spad_wr_beats", "fma[0]", "mem_a_rd", "mem_b_rd"):
        assert sum(c[key] for c in res[-1].core_counters) == sum(c[key] for c in res0[-1].core_counters), key
    loads = dict((n, c) for n, _, c in tp0.breakdown())
    hidden = sum(loads[f"lf{n.split('_')[0][4:]}_{n.split('+lf')[1]}"] - 1 - cfg.nr for n in merged)
    # (without the microcode LOADs: the longer programs may not fit the microcode together)
    assert (res0[-1].cycles - res0[-1].load_cycles) - (res[-1].cycles - res[-1].load_cycles) >= hidden
    b = run_and_check(cfg, mlp, 2, "model", seed, compile=partial(compile_chip_sgd, page_swap=False, **kw),
                      golden=partial(GoldenChipSGD, **kw))[3]
    for ra, rb in zip(res, b):
        assert ra.core_counters == rb.core_counters


@pytest.mark.parametrize("case", list(PAGE_OVERLAP))
def test_chip_sgd_page_swap(case):
    """``page_swap``: the word-order panels alternate the two bus orders page by page, and
    each backward update stores its page as it computes it while the page visited next
    loads in its place (no store or load op of their own). Bit for bit against the
    golden trainer, the same scratchpad traffic and FMAs, a shorter step than the same
    program without swaps (``meta["swap_or_not"]``), on both chip engines counter for
    counter."""
    from functools import partial

    cfg, sizes, kw, _, _ = PAGE_OVERLAP[case]
    seed = _seed()
    mlp = MLP(sizes, "mse", 0.05)
    on, _, _, res = run_and_check(cfg, mlp, 2, "fast", seed, compile=partial(compile_chip_sgd, **kw),
                                  golden=partial(GoldenChipSGD, **kw))
    off, _, _, res0 = run_and_check(cfg, mlp, 2, "fast", seed, compile=partial(compile_chip_sgd, page_swap=False,
                                                                              **kw),
                                    golden=partial(GoldenChipSGD, **kw))
    assert on.meta["page_swap"] == sorted(on.spad) == on.meta["page_overlap"] and off.meta["page_swap"] == []
    assert {sp.order for sp in on.spad.values()} == {"alt"}
    names = [n for n, _, _ in on.breakdown()]
    for l, sp in on.spad.items():
        assert sum(re.fullmatch(rf"rs{l}_\d+", n) is not None for n in names) == len(sp.pages)
        assert not any(n.startswith(f"sb{l}_") for n in names)
    for key in ("spad_rd_beats", "spad_wr_beats"):
        assert sum(c[key] for c in res[-1].core_counters) == sum(c[key] for c in res0[-1].core_counters), key
    # emit_rank1 scales one element of u more than a page has rows (the last row's, unused)
    swaps = sum(re.fullmatch(r"rs\d+_\d+", n) is not None for n in names)
    assert res[-1].core_counters[0]["fma[0]"] == res0[-1].core_counters[0]["fma[0]"] - swaps
    assert on.meta["swap_or_not"] == {"swap": on.step_cycles(), "not": off.step_cycles()}
    assert on.step_cycles() < off.step_cycles()
    b = run_and_check(cfg, mlp, 2, "model", seed, compile=partial(compile_chip_sgd, **kw),
                      golden=partial(GoldenChipSGD, **kw))[3]
    for ra, rb in zip(res, b):
        assert ra.core_counters == rb.core_counters
