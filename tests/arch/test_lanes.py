"""Beats <-> lanes (arch.lanes): whole-array conversions equal to the shifts and masks
written out, LaneBeats equal to the list of its ints, and host phases fed with lanes
recording the same beats."""

import numpy as np
import pytest

from arch.config import PRESETS
from arch.lanes import LaneBeats, pack_beats, unpack_beats
from sim.sessions import ChipSession
from sw.layout import pack_matrix
from sw.mlp import MLP
from sw.train import init_weights
from sw.train_chip import compile_chip_sgd
from sw.transfer import load_beats_for, load_lanes_for


def _pack_ref(a, w):
    return [sum(int(v) << (i * w) for i, v in enumerate(row)) for row in a]


@pytest.mark.parametrize("w,dt", [(16, np.uint16), (32, np.uint32), (8, np.uint8), (12, np.uint16), (64, np.uint64)])
@pytest.mark.parametrize("n", [1, 4, 16])
def test_pack_unpack_equal_the_shifts(w, dt, n):
    rng = np.random.default_rng(w * n)
    a = rng.integers(0, 1 << min(w, 63), size=(37, n), dtype=np.uint64).astype(dt)
    ref = _pack_ref(a, w)
    for src in (a, a.astype(np.uint64), a.astype(np.int64)):
        assert pack_beats(src, w) == ref
    assert np.array_equal(unpack_beats(ref, n, w, dt), a)
    assert np.array_equal(unpack_beats([b | (5 << (n * w)) for b in ref], n, w, dt), a)   # higher bits ignored
    assert pack_beats(np.zeros((0, n), dt), w) == [] and unpack_beats([], n, w, dt).shape == (0, n)


def test_wide_values_are_ored_unmasked():
    assert pack_beats(np.array([[0x1FFFF, 3]], np.uint64), 16) == [0x1FFFF | (3 << 16)]


def test_lane_beats_is_its_ints():
    a = np.arange(12, dtype=np.uint16).reshape(4, 3)
    lb = LaneBeats(a, 16)
    ints = _pack_ref(a, 16)
    assert len(lb) == 4 and list(lb) == ints and lb == ints and lb[2] == ints[2] and lb[1:3] == ints[1:3]
    both = LaneBeats.concat([lb, LaneBeats(a[:2], 16)])
    assert isinstance(both, LaneBeats) and both == ints + ints[:2]
    assert LaneBeats.concat([lb, [7]]) == ints + [7]
    assert np.array_equal(lb.exact_lanes(np.uint16), a)
    assert LaneBeats(np.array([[1 << 17]], np.uint64), 16).exact_lanes(np.uint16) is None


def test_load_lanes_are_load_beats():
    cfg = PRESETS["chip-small"]
    rng = np.random.default_rng(1)
    local = rng.integers(0, 1 << 16, size=(cfg.nr, cfg.nr, 5)).astype(np.uint16)
    assert load_lanes_for(cfg, local) == load_beats_for(cfg, local) == \
        [sum(int(local[r, k, a]) << (r * 16) for r in range(cfg.nr)) for k in range(cfg.nr) for a in range(5)]


def test_weight_load_records_int_beats():
    """The weight load hands lanes to the fast model; a recording session keeps the ints."""
    cfg = PRESETS["chip-small"]
    mlp = MLP((64, 64, 64, 10), "softmax_ce", 0.01)
    tp = compile_chip_sgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, 0)
    rec, plain = ChipSession(cfg, "fast", record=True), ChipSession(cfg, "fast")
    tp.init(rec, W0)
    tp.init(plain, W0)
    per = tp.core_weights(W0)
    for k in range(cfg.cores):
        data = rec.phases[0].data[k]
        assert all(type(b) is int for b in data)
        want = []
        for l in range(mlp.n_layers):
            want += load_beats_for(cfg, pack_matrix(per[k][l], cfg.nr))
        assert data[:len(want)] == want
        for bank in ("a", "b"):
            assert np.array_equal(rec.memory(k, bank), plain.memory(k, bank))
