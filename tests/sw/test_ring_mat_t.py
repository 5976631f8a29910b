"""The transposed broadcast (sw/ring_mat_t.py): every core, the root included, ends with
the transpose of the root's block, bit-exact against the golden on both chip engines,
stall-free, in the formula's slots; folded into loops; errors."""

import numpy as np
import pytest

from arch.config import PRESETS, ArchConfig
from sw.ring import RingError
from sw.ring_mat import MatBlock
from sw.ring_mat_t import golden_mat_broadcast_t, mat_broadcast_t, mat_broadcast_t_slots
from tests.sw.test_ring_mat import check, rand_mems
from tests.sw.test_train import _seed

TINY, SMALL = PRESETS["chip-tiny"], PRESETS["chip-small"]
# 6 cores: the root takes its own beats back 18 slots after sending them, beats of
# another PE column than the one it sends in that instruction (at nr = 4 and 8)
SIX = ArchConfig(nr=4, cores=6, mem_a_words=256, mem_b_words=256, spad_kib=1)
SIX8 = ArchConfig(nr=8, cores=6, mem_a_words=256, mem_b_words=256, spad_kib=1)
CFGS = [TINY, SMALL, SIX, SIX8]
CFG_IDS = ["tiny", "small", "six", "six-nr8"]


def _cases(cfg):
    """(root, src, dst): a whole region into another bank, strided blocks (row jumps on
    both sides) in one bank, a single word."""
    c = cfg.cores
    return [(0, MatBlock("b", 0, 4, 0, 7, 0, 4), MatBlock("a", 10, 7, 0, 4, 0, 7)),
            (c - 1, MatBlock("a", 3, 6, 1, 3, 2, 2), MatBlock("a", 60, 9, 2, 2, 4, 3)),
            (c // 2, MatBlock("b", 9, 1, 0, 1, 0, 1), MatBlock("b", 20, 1, 0, 1, 0, 1))]


@pytest.mark.parametrize("cfg", CFGS, ids=CFG_IDS)
def test_broadcast_t(cfg):
    seed = _seed()
    rng = np.random.default_rng(seed)
    mems = rand_mems(cfg, rng)
    for root, src, dst in _cases(cfg):
        m = src.beats(cfg.nr)
        frags = [mat_broadcast_t(cfg, k, src, dst, root) for k in range(cfg.cores)]
        want = golden_mat_broadcast_t(cfg, mems, src, dst, root)
        r = check(cfg, frags, mems, want, mat_broadcast_t_slots(cfg, m))
        for k in range(cfg.cores):
            assert r.cores[k].counters["ring_out_beats"] == m
        mems = want


def test_golden_is_the_transpose():
    """The golden, read back as matrices: dst = src^T on every core."""
    from sw.layout import pack_matrix, unpack_matrix
    cfg = SMALL
    nr = cfg.nr
    rng = np.random.default_rng(_seed())
    mems = rand_mems(cfg, rng)
    X = rng.integers(0, 1 << 16, (28, 8)).astype(cfg.fmt.np_uint)         # 7 x 2 local words
    mems[0]["b"][:, :, 0:14] = pack_matrix(X, nr)
    src, dst = MatBlock("b", 0, 2, 0, 7, 0, 2), MatBlock("a", 5, 7, 0, 2, 0, 7)
    out = golden_mat_broadcast_t(cfg, mems, src, dst, 0)
    for k in range(cfg.cores):
        assert np.array_equal(unpack_matrix(out[k]["a"][:, :, 5:19], 8, 28), X.T)


def test_folded_at_s():
    """At S a minibatch's X (196 x 4 local words) folds into a few loop words per core."""
    cfg = PRESETS["S"]
    src, dst = MatBlock("b", 0, 4, 0, 196, 0, 4), MatBlock("a", 1000, 196, 0, 4, 0, 196)
    for k in (0, 1, cfg.cores - 1):
        f = mat_broadcast_t(cfg, k, src, dst)
        assert f.slots == 4 + 3 * 32 + 784 * 4
        assert f.words < 80, (k, f.words)


def test_errors():
    ok_s, ok_d = MatBlock("a", 0, 2, 0, 3, 0, 2), MatBlock("b", 0, 3, 0, 2, 0, 3)
    with pytest.raises(RingError, match="not the transpose"):
        mat_broadcast_t(SMALL, 0, ok_s, MatBlock("b", 0, 2, 0, 3, 0, 2))
    with pytest.raises(RingError, match="overlaps the source"):
        mat_broadcast_t(SMALL, 0, ok_s, MatBlock("a", 4, 3, 0, 2, 0, 3))
    with pytest.raises(RingError, match="scratchpad"):
        mat_broadcast_t(ArchConfig(nr=2, cores=2, mem_a_words=256, mem_b_words=256), 0, ok_s, ok_d)
    with pytest.raises(RingError, match="ar1 and ar2"):
        mat_broadcast_t(ArchConfig(nr=2, cores=2, spad_kib=1, n_ar=2), 0, ok_s, ok_d)
    with pytest.raises(RingError, match="core 4 is not a core"):
        mat_broadcast_t(SMALL, 4, ok_s, ok_d)
    with pytest.raises(RingError, match="root 5"):
        mat_broadcast_t(SMALL, 0, ok_s, ok_d, root=5)
