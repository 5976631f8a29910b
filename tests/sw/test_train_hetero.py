"""SGD on a heterogeneous chip with a placement (sw/train_hetero.py, sw/train_hetero_place.py):
weights bit for bit against GoldenHetero on hetero-tiny on both chip engines, cycles as
predicted, and the placement errors (one line each)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from arch.hetero import HETERO_PRESETS, CoreGroup, HeteroConfig
from arch.config import PRESETS
from perf.hybrid_run import memory_of
from sim.chip_model import ChipModel
from sw.golden_train_hetero import GoldenHetero
from sw.mlp import MLP
from sw.train_hetero import check_fit, compile_hetero
from sw.train_hetero_place import Placement, PlacementError, placement_from_arg, weight_copy_words
from sw.train_host import TrainCompileError, init_weights

TINY = HETERO_PRESETS["hetero-tiny"]


def _seed():
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    return seed


def _train(hcfg, mlp, placement, engine, steps, seed, transfers="ring"):
    rng = np.random.default_rng(seed)
    prog = compile_hetero(hcfg, mlp, placement, transfers=transfers)
    fmt = hcfg.core_cfg(prog.cores[0]).fmt
    W0 = init_weights(mlp, fmt, seed)
    if len({c.fmt for c in hcfg.group_cfgs}) > 1:       # several formats: give the values
        W0 = [fmt.to_float(W) for W in W0]
    model = ChipModel(hcfg, engine)
    prog.init(model, W0)
    gold = GoldenHetero(hcfg, mlp, prog.cores, W0, transfers=transfers)
    losses, ctrs = _steps(prog, gold, model, mlp, rng, steps)
    return prog, losses, ctrs


def _steps(prog, gold, model, mlp, rng, steps):
    """``steps`` steps of ``prog`` on ``model`` and ``gold`` on the same random samples:
    losses and weights equal after every step, cycles as compiled (``run_step`` checks
    each phase's). Returns (losses, counters per step)."""
    losses, ctrs = [], []
    for s in range(steps):
        x, t = rng.normal(size=mlp.n_in), rng.normal(size=mlp.n_out) * 0.5
        r = prog.run_step(model, x, t)
        g = gold.step(x, t)
        assert r.loss == g["loss"], f"step {s}"
        for l, (a, b) in enumerate(zip(prog.weights(model, padded=True, memory=memory_of(model)),
                                       gold.weights(padded=True))):
            assert np.array_equal(a, b), f"step {s}: layer {l} differs"
        assert r.cycles == prog.step_cycles()
        losses.append(r.loss)
        ctrs.append(r.counters)
    return losses, ctrs


@pytest.mark.parametrize("transfers", ["ring", "host"])
@pytest.mark.parametrize("groups", [[0, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0]])
def test_bit_exact_on_hetero_tiny(groups, transfers):
    mlp = MLP([12, 10, 9, 5], "mse", 0.05)
    prog, losses, _ = _train(TINY, mlp, Placement.uniform(groups), "fast", 3, _seed(), transfers)
    assert [TINY.group_of(k) for k in prog.cores] == groups
    assert all(np.isfinite(losses))
    # consecutive layers of one group share a core when they fit (no transfer between them)
    assert all(a == b for a, b, ga, gb in zip(prog.cores, prog.cores[1:], groups, groups[1:]) if ga == gb)
    rings = [ph for ph in prog.order if ph.startswith("T")]
    assert len(rings) == (2 * sum(a != b for a, b in zip(prog.cores, prog.cores[1:])) if transfers == "ring" else 0)


def test_microcode_reloads_counted_on_hetero_tiny():
    """With a 128-word microcode the 4 x 4 core's programs need several images: the
    host LOADs them (one core's beats, :func:`sw.host_protocol.load_beat_count`) between
    its RUNs every step, in the phases' cycles, predicted equal to every step's (the
    first too: ``init`` leaves the images a step ends with)."""
    h = HeteroConfig(tuple(CoreGroup(g.count, g.cfg.replace(ucode_depth=128)) for g in TINY.groups))
    mlp = MLP([12, 10, 9, 5], "mse", 0.05)
    prog, losses, _ = _train(h, mlp, Placement.uniform([0, 1, 1]), "fast", 3, _seed(), "host")
    loads = prog.load_cycles()
    assert prog.reloads() > 0 and sum(loads.values()) > 0 and loads["F0"] == 0
    assert prog.step_cycles() == sum(prog.phase_cycles().values())
    plain = compile_hetero(TINY, mlp, Placement.uniform([0, 1, 1]), transfers="host")
    assert sum(plain.load_cycles().values()) == 0


def test_ring_transfers_through_both_crossings():
    """Layers on cores 0, 2, 1: a_1 crosses 2x2 -> 4x4 (collecting), a_2 goes 2 -> 3 -> 0 -> 1
    (splitting at 3 -> 0), the deltas go back the long way round."""
    mlp = MLP([10, 9, 7, 6], "mse", 0.05)
    pl = Placement.from_dict({"layers": [{"group": 0, "core": 0}, {"group": 1, "core": 0}, {"group": 0, "core": 1}]})
    prog, _, _ = _train(TINY, mlp, pl, "fast", 2, _seed())
    assert prog.cores == [0, 2, 1]
    paths = {ph: prog.rings[ph]["path"] for ph in prog.rings}
    assert paths == {"Ta1": [0, 1, 2], "Ta2": [2, 3, 0, 1], "Tg1": [1, 2], "Tg0": [2, 3, 0]}
    assert "ring  2 ->  1 (3 hops)" in prog.describe()


SAME_NR = {"groups": [{"count": 2, "preset": "small"}, {"count": 2, "preset": "small", "fmt": "binary32"}]}


@pytest.mark.parametrize("chip", ["hetero-tiny-fmt", "same-nr"])
@pytest.mark.parametrize("engine", ["fast", "cycle"])
def test_formats_converted_by_the_crossings(engine, chip):
    """hetero-tiny-fmt (2x2 binary16, 4x4 binary32) and a chip whose crossings change the
    format only (4x4 binary16, 4x4 binary32: one cycle more per crossing): the vectors
    between layers are converted at every crossing they pass (binary16 -> binary32
    exactly, binary32 -> binary16 rounded), each layer computes in its kind's format,
    bit for bit."""
    h = HETERO_PRESETS[chip] if chip in HETERO_PRESETS else HeteroConfig.from_dict(SAME_NR)
    mlp = MLP([10, 9, 7, 6], "mse", 0.05)
    pl = Placement.from_dict({"layers": [{"group": 0, "core": 0}, {"group": 1, "core": 0}, {"group": 0, "core": 1}]})
    prog, _, _ = _train(h, mlp, pl, engine, 2, _seed())
    assert [str(h.core_cfg(k).fmt) for k in prog.cores] == ["binary16", "binary32", "binary16"]
    assert len(prog.rings) == 4


@pytest.mark.parametrize("transfers", ["ring", "host"])
def test_layers_sharing_a_core_and_an_explicit_core(transfers):
    mlp = MLP([6, 7, 5, 3], "mse", 0.1)
    pl = Placement.from_dict({"layers": [{"group": 1, "core": 1}, {"group": 1, "core": 1}, {"group": 0, "core": 0}]})
    prog, _, _ = _train(TINY, mlp, pl, "fast", 2, _seed(), transfers)
    assert prog.cores == [3, 3, 0]


@pytest.mark.parametrize("transfers", ["ring", "host"])
def test_both_engines_agree_counter_for_counter(transfers):
    mlp = MLP([6, 5, 4, 3], "mse", 0.1)
    seed = _seed()
    pl = Placement.uniform([0, 1, 0])
    _, lf, cf = _train(TINY, mlp, pl, "fast", 2, seed, transfers)
    _, lc, cc = _train(TINY, mlp, pl, "cycle", 2, seed, transfers)
    assert lf == lc
    assert cf == cc
    if transfers == "ring":
        assert sum(c["ring_out_beats"] for c in cf[-1]) > 0


def test_learns_a_regression_task():
    rng = np.random.default_rng(0)
    mlp = MLP([4, 8, 2], "mse", 0.05)
    prog = compile_hetero(TINY, mlp, Placement.uniform([1, 0]))
    model = ChipModel(TINY, "fast")
    prog.init(model, init_weights(mlp, TINY.group_cfgs[0].fmt, 0))
    A = rng.normal(size=(2, 4)) * 0.5
    losses = []
    for _ in range(60):
        x = rng.normal(size=4)
        losses.append(prog.run_step(model, x, A @ x).loss)
    assert np.mean(losses[-15:]) < 0.5 * np.mean(losses[:15])


def test_placement_forms_and_errors(tmp_path):
    assert placement_from_arg("1,0,1") == Placement.uniform([1, 0, 1])
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"layers": [{"forward": 0, "backward": 1, "update": 1}, 1]}))
    pl = placement_from_arg(str(p))
    assert pl.layers[0].backward == 1 and pl.short().startswith("{")
    assert placement_from_arg(pl.short()) == pl
    mlp = MLP([6, 5, 3], "mse", 0.1)
    assert weight_copy_words(mlp, pl, 0) == 2 * 5 * 6 and weight_copy_words(mlp, pl, 1) == 0
    bad = [
        ("0,1,1", "placement has 3 layers, the network 2"),
        ("0,2", "group 2 does not exist"),
        ('{"layers": [{"group": 0, "core": 5}, 1]}', "core 5 of group 0"),
        ('{"layers": [{"forward": 0, "backward": 1, "update": 0}, 1]}', "copied between the groups every step"),
    ]
    for arg, msg in bad:
        with pytest.raises(PlacementError, match=msg) as e:
            compile_hetero(TINY, mlp, placement_from_arg(arg))
        assert "\n" not in str(e.value)
    for arg, msg in [("x,y", "group numbers"), ("{bad", "bad placement JSON"), ('{"layers": []}', "a placement is"),
                     ('{"layers": [{"forward": "a"}]}', "must be a group number"),
                     ('{"layers": [{"what": 1}]}', "unknown field")]:
        with pytest.raises(PlacementError, match=msg):
            placement_from_arg(arg)


def test_compile_errors():
    with pytest.raises(PlacementError, match="different number formats .* with host transfers"):
        compile_hetero(HETERO_PRESETS["hetero-tiny-fmt"], MLP([6, 5, 3], "mse", 0.1), Placement.uniform([0, 1]),
                       transfers="host")
    with pytest.raises(TrainCompileError, match="transfers 'bus'"):
        compile_hetero(TINY, MLP([6, 5, 3], "mse", 0.1), Placement.uniform([0, 1]), transfers="bus")
    with pytest.raises(TrainCompileError, match="MSE only"):
        compile_hetero(TINY, MLP([6, 5, 3], "softmax_ce", 0.1), Placement.uniform([0, 1]))
    with pytest.raises(TrainCompileError, match="need .* words per PE"):
        check_fit(TINY, MLP([200, 200, 3], "mse", 0.1), Placement.uniform([0, 0]))
    one = HeteroConfig((CoreGroup(2, PRESETS["small"]),))
    assert check_fit(one, MLP([6, 5, 3], "mse", 0.1), Placement.uniform([0, 0])) == [0, 0]


# -- layers split across a group's cores (sw/train_hetero_split.py) ------------------------
def _train_split(hcfg, mlp, placement, engine, steps, seed):
    from sw.golden_train_hetero import GoldenHeteroSplit
    from sw.train_hetero_split import compile_split

    rng = np.random.default_rng(seed)
    prog = compile_split(hcfg, mlp, placement)
    fmt = hcfg.core_cfg(prog.parts[0][0][0]).fmt
    W0 = init_weights(mlp, fmt, seed)
    if len({c.fmt for c in hcfg.group_cfgs}) > 1:
        W0 = [fmt.to_float(W) for W in W0]
    model = ChipModel(hcfg, engine)
    prog.init(model, W0)
    gold = GoldenHeteroSplit(hcfg, mlp, prog.parts, W0)
    _, ctrs = _steps(prog, gold, model, mlp, rng, steps)
    return prog, ctrs


SPLITS = [
    '[{"group": 1, "cores": 2}, {"group": 0, "cores": 2}, 1]',     # panels through both crossings
    '[{"group": 0, "cores": 2}, {"group": 1, "cores": 2}, 0]',
    '[{"group": 1, "cores": 2}, {"group": 1, "cores": 2}, 1]',     # a group's cores, the long way round
    '[1, {"group": 0, "cores": 2}, 1]',
    '[0, 0, 0]',
]


@pytest.mark.parametrize("place", SPLITS)
@pytest.mark.parametrize("preset", ["hetero-tiny", "hetero-tiny-fmt"])
def test_split_bit_exact_fast(preset, place):
    mlp = MLP([12, 10, 9, 5], "mse", 0.05)
    prog, _ = _train_split(HETERO_PRESETS[preset], mlp, Placement.from_dict(json.loads(place)), "fast", 2, _seed())
    assert [len(p) for p in prog.parts][:2] == [json.loads(place)[i].get("cores", 1) if isinstance(
        json.loads(place)[i], dict) else 1 for i in range(2)]


def test_split_engines_agree():
    mlp = MLP([12, 10, 9, 5], "mse", 0.05)
    pl = Placement.from_dict(json.loads(SPLITS[0]))
    seed = _seed()
    _, fast = _train_split(HETERO_PRESETS["hetero-tiny-fmt"], mlp, pl, "fast", 1, seed)
    _, cyc = _train_split(HETERO_PRESETS["hetero-tiny-fmt"], mlp, pl, "cycle", 1, seed)
    assert fast == cyc


def test_split_errors():
    from sw.train_hetero_split import compile_split, layer_parts

    mlp = MLP([12, 10, 9, 5], "mse", 0.05)
    with pytest.raises(PlacementError, match="output layer runs on one core"):
        compile_split(TINY, mlp, Placement.from_dict([1, 1, {"group": 1, "cores": 2}]))
    with pytest.raises(PlacementError, match="which has 2 cores"):
        compile_split(TINY, mlp, Placement.from_dict([{"group": 1, "core": 1, "cores": 2}, 1, 1]))
    with pytest.raises(PlacementError, match="do not fill 2 cores"):
        compile_split(TINY, MLP([12, 3, 9, 5], "mse", 0.05), Placement.from_dict([{"group": 1, "cores": 2}, 1, 1]))
    with pytest.raises(PlacementError, match="cores must be a count"):
        Placement.from_dict([{"group": 1, "cores": 0}, 1, 1])
    with pytest.raises(PlacementError, match="needs ring transfers"):
        layer_parts(TINY, mlp, Placement.from_dict([1, 1, 1]), transfers="host")
    assert Placement.from_dict([{"group": 1, "cores": 2}, 1, 1]).to_dict()["layers"][0]["cores"] == 2
