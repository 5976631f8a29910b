"""The scheduler (perf/schedule.py) and its check by running (perf/hybrid_run.py) on
hetero-tiny: the chosen placement meets its constraint, the model's error against the
fast engine, both objectives, the greedy search, and the errors."""

from __future__ import annotations

import pytest

from arch.hetero import HETERO_PRESETS
from perf import schedule as sched
from perf.hybrid_run import run_placement
from perf.schedule import ScheduleError, same_area_chips, schedule
from perf.schedule_split import predict_split, split_options
from sw.train_hetero_place import placement_from_arg
from sw.mlp import MLP

TINY = HETERO_PRESETS["hetero-tiny"]
MLP4 = MLP([12, 10, 9, 5], "mse", 0.05)


@pytest.fixture(scope="module")
def model():
    m, kinds = sched.model_for(TINY)
    return m


def test_energy_schedule_meets_the_same_area_throughput_and_runs(model):
    s = schedule(TINY, MLP4, model)
    assert s.search.startswith("exhaustive over 8")
    assert len(s.candidates) == 8 + sum(len(split_options(TINY, MLP4, [p.forward for p in c.placement.layers]))
                                        for c in s.candidates[:8])
    assert s.chosen.samples_per_s >= s.target["min_samples_per_s"] * (1 - 1e-9)
    feas = [p for p in s.candidates if p.fits and s._meets(p)]
    assert s.chosen.energy_pj == min(p.energy_pj for p in feas)
    text = s.describe(TINY, MLP4)
    assert "layer 2 (5 x 9)" in text and "why:" in text
    r = run_placement(TINY, MLP4, s.chosen.placement, steps=2, predicted=s.chosen.to_dict())
    assert all(st["golden_bit_exact"] for st in r["steps"])
    assert abs(r["model_cycles_err"]) < 0.08          # vector ops predicted as the relu class
    assert abs(r["model_energy_err"]) < 0.10          # and the transfers' relay slots under-priced


def test_every_placement_predicted_close_to_measured(model):
    s = schedule(TINY, MLP4, model, objective="throughput", energy_budget=1.0)
    for p in s.candidates[::3]:
        r = run_placement(TINY, MLP4, p.placement, steps=1, predicted=p.to_dict())
        assert abs(r["model_cycles_err"]) < 0.08, p.placement.short()
        assert abs(r["model_energy_err"]) < 0.10, p.placement.short()


def test_throughput_under_a_budget(model):
    s0 = schedule(TINY, MLP4, model, objective="throughput", energy_budget=1.0)
    assert s0.chosen.samples_per_s == max(p.samples_per_s for p in s0.candidates)
    lo = min(p.energy_pj for p in s0.candidates) * 1e-12
    s1 = schedule(TINY, MLP4, model, objective="throughput", energy_budget=lo * 1.000001)
    assert s1.chosen.energy_pj * 1e-12 <= lo * 1.000001
    with pytest.raises(ScheduleError, match="no placement meets"):
        schedule(TINY, MLP4, model, objective="throughput", energy_budget=lo * 0.5)


def test_greedy_search_when_large(model, monkeypatch):
    monkeypatch.setattr(sched, "EXHAUSTIVE_MAX", 4)
    s = schedule(TINY, MLP4, model, objective="throughput", energy_budget=1.0)
    assert s.search.startswith("greedy") and len(s.candidates) == 1 + len(split_options(
        TINY, MLP4, [p.forward for p in s.candidates[0].placement.layers]))
    best = [min(range(2), key=lambda g: s.costs[(l, g)].cycles) for l in range(3)]
    assert [p.forward for p in s.candidates[0].placement.layers] == best


def test_same_area_chips_and_errors(model):
    rows = same_area_chips(HETERO_PRESETS["hetero-S"])
    assert [(g, n) for g, n, _ in rows] == [(0, 30), (1, 4)]
    assert all(abs(r) < 0.15 for _, _, r in rows)
    with pytest.raises(ScheduleError, match="needs an energy budget"):
        schedule(TINY, MLP4, model, objective="throughput")
    with pytest.raises(ScheduleError, match="unknown objective"):
        schedule(TINY, MLP4, model, objective="speed")
    with pytest.raises(ScheduleError, match="positive number"):
        schedule(TINY, MLP4, model, objective="throughput", energy_budget=-1)
    with pytest.raises(ScheduleError, match="no placement meets"):
        schedule(TINY, MLP4, model, min_throughput=1e12)


def test_reference_network_on_hetero_s_uses_the_stored_model():
    h = HETERO_PRESETS["hetero-S"]
    s = schedule(h, MLP([784, 500, 500, 500, 10], "mse", 0.01))
    assert s.kinds == ["S", "L"]                       # benchmarks/results/characterize.json
    assert s.chosen.placement.short() == "1:2,1:2,1:2,1"      # the hidden layers on both L cores
    assert [p.placement.short() for p in s.candidates if p.fits][:2] == ["1,1,1,0", "1,1,1,1"]
    fit = {p.placement.short() for p in s.candidates if p.fits}
    assert "0:16,1:2,1:2,1" in fit                         # the first layer in panels on the 16 S cores


def test_weight_copy_is_priced_and_never_pays(model):
    s = schedule(TINY, MLP4, model)
    notes = [x for x in s.notes if "weight copy" in x]
    assert len(notes) == 3 and all(x.endswith("never pays") for x in notes)
    assert "layer 0: backward and update on group 0" in notes[0] and "(240 words" in notes[0]
    assert "note: layer 2" in s.describe(TINY, MLP4)


@pytest.mark.parametrize("place", ["1:2,0:2,1", "0:2,1:2,0", "1:2,1:2,1", "0,1:2,1"])
def test_split_placements_predicted_close_to_measured(model, place):
    _, kinds = sched.model_for(TINY)
    p = predict_split(TINY, MLP4, placement_from_arg(place), model, kinds)
    assert p.fits and p.placement.short() == place
    r = run_placement(TINY, MLP4, p.placement, steps=1, predicted=p.to_dict())
    assert all(st["golden_bit_exact"] for st in r["steps"])
    assert abs(r["model_cycles_err"]) < 0.08, r["model_cycles_err"]
    assert abs(r["model_energy_err"]) < 0.10, r["model_energy_err"]


def test_split_options_and_misfits(model):
    opts = [p.short() for p in split_options(TINY, MLP4, [1, 0, 1])]
    assert sorted(opts) == ["1,0:2,1", "1:2,0,1", "1:2,0:2,1"]
    _, kinds = sched.model_for(TINY)
    p = predict_split(TINY, MLP4, placement_from_arg("1,1,1:2"), model, kinds)
    assert not p.fits and "output layer runs on one core" in p.reason


def test_split_on_hetero_s_runs_bit_exact_and_as_predicted():
    """The reference network's first layer in panels on hetero-S's 16 S cores (its
    vectors through both crossings), the other hidden layers on both L cores."""
    h = HETERO_PRESETS["hetero-S"]
    mlp = MLP([784, 500, 500, 500, 10], "mse", 0.01)
    m, kinds = sched.model_for(h)
    p = predict_split(h, mlp, placement_from_arg("0:16,1:2,1:2,1"), m, kinds)
    r = run_placement(h, mlp, p.placement, steps=1, predicted=p.to_dict())
    assert r["steps"][0]["golden_bit_exact"] and r["cycles"] == r["steps"][0]["compiler_predicted_cycles"]
    assert abs(r["model_cycles_err"]) < 0.08 and abs(r["model_energy_err"]) < 0.10
