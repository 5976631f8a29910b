"""Design-space search (``caterpillar dse``): the space, a point's measurement, the cache,
the searches, the Ray engine (a worker killed mid-search loses nothing) and the command
line's errors."""

from __future__ import annotations

import json
import math
import os
import random
import signal

import pytest

from arch.config import PRESETS
from arch.errors import InputError, UsageError
from cli.main import main
from dse.engine import Evaluator, LocalEngine, RayEngine, check_reachable
from dse.evaluate import Workload, evaluate_point, parse_workloads
from dse.search import Constraints, Goal, critical_path_search, exhaustive, pareto_front, random_search
from dse.space import Space, parse_space, point_key

TINY = [Workload("tiny", (64, 32, 10), lr=0.03)]
BASE = PRESETS["chip-small"]


def test_space_syntax():
    s = parse_space(["nr=2,4", "cores=2..16:x2", "mem_a_words=256..1024:x2", "fmt=fp16,bf16", "method=sgd,cp:8"],
                    BASE)
    assert s.axes == {"nr": (2, 4), "cores": (2, 4, 8, 16), "mem_a_words": (256, 512, 1024),
                      "fmt": ("binary16", "bfloat16"), "method": ("sgd", "cp:8")}
    assert s.size == 96 and len(list(s.points())) == 96
    p = {"nr": 2, "cores": 4, "mem_a_words": 256, "fmt": "binary16", "method": "sgd"}
    moves = {(a, d) for a, d, _ in s.neighbours(p)}
    assert moves == {("nr", 1), ("cores", -1), ("cores", 1), ("mem_a_words", 1), ("fmt", 1), ("method", 1)}


@pytest.mark.parametrize("items,words", [
    (["bogus=1,2"], "unknown field 'bogus'"), (["nr=4..2"], "empty or invalid range"), (["nr="], "empty range"),
    (["fmt=binary8"], "unknown number format"), (["method=adam"], "not a method"), (["nr=a,b"], "not an integer"),
    (["nr"], "--space 'nr'"), (["nr=2,2"], "repeated"), ([], "give field=values")])
def test_space_errors_name_the_field(items, words):
    with pytest.raises(UsageError, match=words):
        parse_space(items, BASE)


def test_mapping_axes_apply_only_where_the_compiler_takes_them():
    """``out_map`` and ``backward`` are categorical axes; a choice that does not apply to
    the point's method is not part of its key, so the cache measures it once."""
    s = parse_space(["method=sgd,mbgd:4,cp:4", "out_map=rows,cols", "backward=fused,separate"], BASE)
    key = {(p["method"], p["out_map"], p["backward"]): point_key(s, p, TINY) for p in s.points()}
    assert key[("cp:4", "rows", "fused")] == key[("cp:4", "cols", "separate")]           # neither applies
    assert key[("mbgd:4", "rows", "fused")] == key[("mbgd:4", "rows", "separate")]       # backward does not
    assert key[("mbgd:4", "rows", "fused")] != key[("mbgd:4", "cols", "fused")]
    assert len({key[("sgd", o, b)] for o in ("rows", "cols") for b in ("fused", "separate")}) == 4
    with pytest.raises(UsageError, match="out_map: 'diagonal'"):
        parse_space(["out_map=diagonal"], BASE)
    rows = evaluate_point(BASE.to_dict(), {"method": "sgd", "out_map": "rows"}, TINY, "k")
    cols = evaluate_point(BASE.to_dict(), {"method": "sgd", "out_map": "cols"}, TINY, "k")
    assert rows["status"] == cols["status"] == "ok"
    assert rows["workloads"][0]["cycles"] != cols["workloads"][0]["cycles"]


def test_softmax_and_overlap_axes():
    """``softmax`` (SGD and batch-1 CP) and ``overlap`` (every method but minibatch CP)
    reach the compilers as the values they take; minibatch GD takes no softmax."""
    from dse.space import point_mapping

    s = parse_space(["method=sgd,cp,mbgd:4", "softmax=array,host", "overlap=on,off"], BASE)
    assert point_mapping({"method": "sgd", "softmax": "host", "overlap": "off"}) == {"softmax": "host",
                                                                                    "overlap": False}
    assert point_mapping({"method": "cp", "softmax": "array", "overlap": "off"}) == {"softmax": "array",
                                                                                   "overlap": False}
    assert point_mapping({"method": "mbgd:4", "softmax": "array", "overlap": "on"}) == {"overlap": True}
    assert point_mapping({"method": "cp:4", "softmax": "array", "overlap": "on"}) == {}
    keys = {(p["method"], p["softmax"], p["overlap"]): point_key(s, p, TINY) for p in s.points()}
    assert len({k for (m, _, _), k in keys.items() if m == "sgd"}) == 4
    assert len({k for (m, _, _), k in keys.items() if m == "cp"}) == 4
    assert len({k for (m, _, _), k in keys.items() if m == "mbgd:4"}) == 2
    with pytest.raises(UsageError, match="overlap: 'maybe'"):
        parse_space(["overlap=maybe"], BASE)
    res = {sm: evaluate_point(BASE.to_dict(), {"method": "sgd", "softmax": sm, "out_map": "cols"}, TINY, "k")
           for sm in ("array", "host")}
    assert res["array"]["status"] == res["host"]["status"] == "ok"
    assert res["array"]["workloads"][0]["cycles"] != res["host"]["workloads"][0]["cycles"]


def test_dram_axes():
    """The DRAM fields are axes: a point's configuration carries them, and an invalid
    value (not a power of two) is recorded as an invalid point naming the field."""
    from dse.space import point_config

    s = parse_space(["dram_mib=0,64", "dram_gbps=12.8,25.6", "dram_latency=40..80:x2"], BASE)
    assert s.axes == {"dram_mib": (0, 64), "dram_gbps": (12.8, 25.6), "dram_latency": (40, 80)}
    cfg = point_config(s, {"dram_mib": 64, "dram_gbps": 12.8, "dram_latency": 40})
    assert (cfg.dram_mib, cfg.dram_gbps, cfg.dram_latency) == (64, 12.8, 40)
    keys = {point_key(s, p, TINY) for p in s.points()}
    assert len(keys) == s.size == 8
    bad = evaluate_point(BASE.to_dict(), {"method": "sgd", "dram_mib": 3}, TINY, "k")
    assert bad["status"].startswith("invalid") and "dram_mib" in bad["status"]


def test_workloads():
    w = parse_workloads("small*2,784-100-10")
    assert [x.sizes for x in w] == [(784, 500, 500, 500, 10), (784, 100, 10)] and w[0].weight == 2
    for bad in ("", "784", "a-b", "small*0", "small*x"):
        with pytest.raises(UsageError):
            parse_workloads(bad)


def test_a_point_is_measured_or_its_reason_recorded():
    """A real compile and fast-engine step: the metrics follow from the counters; an
    invalid configuration and a network that does not fit are recorded, not raised."""
    space = Space({"nr": (2,)}, BASE)
    r = evaluate_point(BASE.to_dict(), {"nr": 2, "method": "sgd"}, TINY, "k", golden=True)
    assert r["status"] == "ok" and r["workloads"][0]["golden"] == "1 step(s) bit-exact"
    w = r["workloads"][0]
    assert w["samples_per_s"] == pytest.approx(BASE.clock_mhz * 1e6 / w["cycles"])
    assert r["throughput_per_tdp"] == pytest.approx(r["throughput"] / r["tdp_w"])
    assert sum(w["phases"].values()) > 0 and r["area_mm2"] > 0
    assert evaluate_point(BASE.to_dict(), {"nr": 99}, TINY, "k")["status"].startswith("invalid: ArchConfig.nr")
    big = [Workload("big", (784, 2000, 10))]
    assert evaluate_point(BASE.to_dict(), {"nr": 2}, big, "k")["status"].startswith("does not fit: MLP 784-2000-10")
    assert point_key(space, {"nr": 2}, TINY) != point_key(space, {"nr": 2}, big)


def test_point_key_changes_with_the_measurement_version(monkeypatch):
    """A cache written before a change of what a measurement counts is not read after it."""
    import dse.space

    space = parse_space(["nr=2,4"], BASE)
    before = point_key(space, {"nr": 2}, TINY)
    monkeypatch.setattr(dse.space, "MEASUREMENT_VERSION", dse.space.MEASUREMENT_VERSION + 1)
    assert point_key(space, {"nr": 2}, TINY) != before


# --- searches on a synthetic landscape (fast) ---------------------------------------------

def _landscape(base, point, workloads, key, golden=False):
    """A smooth, deterministic stand-in for a measurement: throughput grows with PEs and
    memory with diminishing returns, power with PEs, area with PEs and memory."""
    nr, cores, mem, clk = point["nr"], point["cores"], point["mem_a_words"], point["clock_mhz"]
    pes = nr * nr * cores
    thr = clk * pes ** 0.8 * (1 - math.exp(-mem / 700)) / (1 + 0.02 * cores)
    watts = 0.02 * pes * (clk / 1000) ** 1.5 + 0.001 * mem * cores / 256 + 1
    area = pes * (0.05 + mem / 40000)
    phases = {"compute": 100, "collectives": 10 * cores, "memory": 3e5 / mem, "overhead": 5, "host": 0}
    return {"key": key, "point": dict(point), "status": "ok", "area_mm2": area, "tdp_w": watts,
            "throughput": thr, "throughput_per_tdp": thr / watts, "gflops_per_w": thr / watts / 10,
            "energy_per_sample_j": watts / thr, "workloads": [{"phases": phases}]}


SYNTH = Space({"nr": (2, 4, 8), "cores": (2, 4, 8, 16, 32), "mem_a_words": (256, 512, 1024, 2048, 4096),
               "clock_mhz": (500.0, 750.0, 1000.0, 1250.0)}, BASE)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_heuristic_finds_the_optimum_with_fewer_evaluations(seed):
    print(f"seed {seed}")
    goal = Goal("throughput_per_tdp", Constraints(area_mm2=60.0, power_w=40.0))
    full = Evaluator(SYNTH, TINY, LocalEngine(_landscape))
    best = goal.best(exhaustive(full, goal))
    ev = Evaluator(SYNTH, TINY, LocalEngine(_landscape))
    found = goal.best(critical_path_search(ev, goal, seed=seed))
    assert goal.score(found) >= 0.98 * goal.score(best)
    assert ev.evaluations * 5 <= SYNTH.size, (ev.evaluations, SYNTH.size)
    rnd = Evaluator(SYNTH, TINY, LocalEngine(_landscape))
    random_search(rnd, goal, budget=ev.evaluations, seed=seed)
    assert rnd.evaluations == ev.evaluations


def test_microcode_loads_are_a_phase_the_heuristic_moves_against():
    """A step whose programs LOAD microcode between RUNs: the LOADs are its ``microcode``
    phase (measured), and when they bound the step the heuristic first tries a larger
    microcode, then fewer cores (fewer images on the host stream)."""
    from dse.search import _ranked_moves, bottleneck
    from sim.step_measure import measure_step, phase_cycles
    from sw.mlp import MLP

    cfg = PRESETS["chip-small"].replace(ucode_depth=128)
    m = measure_step(cfg, MLP((64, 32, 10), "softmax_ce", 0.03, batch=4), "mbgd", golden=False)
    ph = phase_cycles(m.tp, m.result.host_cycles, m.result.load_cycles)
    assert ph["microcode"] == m.result.load_cycles > 0
    assert sum(ph.values()) <= m.counters["cycles"]
    r = {"status": "ok", "workloads": [{"phases": {"compute": 10, "microcode": 90}}]}
    assert bottleneck(r) == "microcode"
    space = parse_space(["ucode_depth=128,256", "cores=2,4", "nr=2,4"], BASE)
    goal = Goal("throughput_per_tdp", Constraints())
    moves = _ranked_moves(space, {"ucode_depth": 128, "cores": 4, "nr": 2}, r, goal)
    assert moves[0]["ucode_depth"] == 256 and moves[1]["cores"] == 2


def test_pareto_front_is_not_dominated():
    goal = Goal("throughput", Constraints())
    res = exhaustive(Evaluator(SYNTH, TINY, LocalEngine(_landscape)), goal)
    front = pareto_front(res, goal)
    for f in front:
        assert not any(r["throughput"] > f["throughput"] and r["gflops_per_w"] > f["gflops_per_w"] for r in res)


def test_cache_resumes_and_ignores_a_torn_line(tmp_path):
    cache = tmp_path / "c.jsonl"
    goal = Goal()
    ev = Evaluator(SYNTH, TINY, LocalEngine(_landscape), cache=cache)
    pts = list(SYNTH.points())[:10]
    ev.evaluate(pts)
    with open(cache, "a") as fh:
        fh.write('{"key": "torn')                         # a run killed while writing
    again = Evaluator(SYNTH, TINY, LocalEngine(_landscape), cache=cache)
    assert again.cached_at_start == 10
    again.evaluate(pts + list(SYNTH.points())[10:12])
    assert again.evaluations == 2


def test_real_heuristic_on_a_small_space_matches_exhaustive(tmp_path):
    """Real measurements: on a 12-point space the heuristic's best is the optimum."""
    space = parse_space(["nr=2,4", "cores=2,4,8", "method=sgd,cp"], BASE)
    goal = Goal("throughput_per_tdp")
    cache = tmp_path / "c.jsonl"
    best = goal.best(exhaustive(Evaluator(space, TINY, LocalEngine(), cache=cache), goal))
    ev = Evaluator(space, TINY, LocalEngine(), cache=cache)
    assert ev.cached_at_start == 12
    found = goal.best(critical_path_search(ev, goal, seed=0))
    assert found["key"] == best["key"] and ev.evaluations == 0


def test_area_limit_screens_points_without_measuring(tmp_path):
    """With ``area_limit``, a point over it (by the power model's area of its
    configuration, the area a measurement reports) is not measured, not cached and not
    counted; the search never climbs to it."""
    from dse.evaluate import config_area
    from dse.space import point_config

    r = evaluate_point(BASE.to_dict(), {"nr": 2, "method": "sgd"}, TINY, "k")
    assert r["area_mm2"] == pytest.approx(config_area(BASE.replace(nr=2)))
    limit = 5.0
    over = [p for p in SYNTH.points() if config_area(point_config(SYNTH, p)) > limit]
    assert 0 < len(over) < SYNTH.size
    cache = tmp_path / "c.jsonl"
    ev = Evaluator(SYNTH, TINY, LocalEngine(_landscape), cache=cache, area_limit=limit)
    res = ev.evaluate(list(SYNTH.points()))
    assert ev.screened == len(over) and ev.evaluations == ev.spent == SYNTH.size - len(over)
    assert all(r["status"].startswith("over area") for r, p in zip(res, SYNTH.points()) if p in over)
    assert len(cache.read_text().splitlines()) == ev.evaluations
    goal = Goal("throughput", Constraints(area_mm2=limit))
    ev2 = Evaluator(SYNTH, TINY, LocalEngine(_landscape), area_limit=limit)
    found = goal.best(critical_path_search(ev2, goal, seed=0))
    assert found is not None and config_area(point_config(SYNTH, found["point"])) <= limit


def test_heuristic_from_a_given_start_and_resumed_within_its_budget(tmp_path):
    """``start`` is the first point measured; ``budget`` counts the points measured,
    cached ones included, so a search resumed from its cache takes the same path."""
    goal = Goal("throughput_per_tdp", Constraints(area_mm2=60.0, power_w=40.0))
    start = {"nr": 2, "cores": 2, "mem_a_words": 256, "clock_mhz": 500.0}
    seen = []
    ev = Evaluator(SYNTH, TINY, LocalEngine(_landscape), on_result=seen.append)
    critical_path_search(ev, goal, budget=8, start=start)
    assert seen[0]["point"] == start and 8 <= ev.spent <= 8 + 2 * 4
    cache = tmp_path / "c.jsonl"
    part = Evaluator(SYNTH, TINY, LocalEngine(_landscape), cache=cache)
    part.evaluate([r["point"] for r in seen[:5]])             # a run interrupted after 5 points
    again = Evaluator(SYNTH, TINY, LocalEngine(_landscape), cache=cache)
    critical_path_search(again, goal, budget=8, start=start)
    assert again.asked == ev.asked and again.evaluations == ev.evaluations - 5
    with pytest.raises(UsageError, match="not a point of the space"):
        critical_path_search(ev, goal, start={**start, "nr": 3})


def test_a_measurement_says_where_the_weights_live_and_its_power_by_block():
    r = evaluate_point(BASE.replace(dram_mib=64).to_dict(), {"method": "mbgd:4"}, TINY, "k")
    w = r["workloads"][0]
    assert r["status"] == "ok" and w["weights"] == {"W0": "PE memory", "W1": "PE memory"}
    assert w["pj_per_flop"]["total"] == pytest.approx(sum(v for k, v in w["pj_per_flop"].items() if k != "total"))
    assert w["dram_beats"] == 0 and w["dma_stall_cycles_per_core"] == 0


def test_a_shared_cache_gives_each_search_its_own_points(tmp_path):
    """A cache holding another workload's and another space's results: the heuristic
    returns only the points it asked for, each as a point of its own space."""
    cache = tmp_path / "c.jsonl"
    other = [Workload("other", (64, 16, 10))]
    Evaluator(SYNTH, other, LocalEngine(_landscape), cache=cache).evaluate(list(SYNTH.points())[:20])
    Evaluator(SYNTH, TINY, LocalEngine(_landscape), cache=cache).evaluate(list(SYNTH.points())[:20])
    sub = Space({"nr": (2, 4), "cores": (2, 4)}, BASE.replace(mem_a_words=256, clock_mhz=500.0))
    def sub_landscape(base, point, workloads, key, golden=False):
        full = {"mem_a_words": base["mem_a_words"], "clock_mhz": base["clock_mhz"], **point}
        return {**_landscape(base, full, workloads, key), "point": dict(point)}
    ev = Evaluator(sub, TINY, LocalEngine(sub_landscape), cache=cache)
    assert ev.cached_at_start == 40
    res = critical_path_search(ev, Goal("throughput"), seed=0)
    assert {r["key"] for r in res} == ev.asked and all(set(r["point"]) == {"nr", "cores"} for r in res)


# --- the Ray engine --------------------------------------------------------------------------

def test_ray_search_survives_a_killed_worker(tmp_path):
    """A local Ray cluster with 2 workers: a worker killed mid-search loses no result
    (Ray retries its task), and a rerun evaluates nothing twice."""
    pytest.importorskip("ray")
    space = parse_space(["nr=2,4", "cores=2,4", "method=sgd,cp"], BASE)
    cache = tmp_path / "c.jsonl"
    killed = []

    def kill_first_worker(r):
        if not killed:
            killed.append(r["worker_pid"])
            os.kill(r["worker_pid"], signal.SIGKILL)      # its next task, in flight, dies with it

    engine = RayEngine(workers=2)
    try:
        ev = Evaluator(space, TINY, engine, cache=cache, on_result=kill_first_worker)
        res = exhaustive(ev, Goal())
        assert killed and len(res) == 8 and all(r["status"] == "ok" for r in res), [r["status"] for r in res]
        assert ev.evaluations == 8 and len({r["worker_pid"] for r in res}) >= 2
    finally:
        engine.close()
    again = Evaluator(space, TINY, LocalEngine(), cache=cache)
    exhaustive(again, Goal())
    assert again.cached_at_start == 8 and again.evaluations == 0


def test_unreachable_cluster_fails_fast():
    with pytest.raises(Exception, match="no Ray cluster answers there"):
        check_reachable("127.0.0.1:1", timeout=1)
    with pytest.raises(UsageError, match="host:port"):
        check_reachable("nowhere")


# --- the command line ------------------------------------------------------------------------

def test_cli_search_json_png_and_describe(tmp_path, capsys):
    cache, js, png = tmp_path / "c.jsonl", tmp_path / "d.json", tmp_path / "d.png"
    args = ["dse", "--base", "chip-small", "--workloads", "64-32-10", "--space", "nr=2,4", "cores=2,4",
            "--engine", "local", "--cache", str(cache), "--references", "chip-small", "--progress", "off"]
    assert main(args + ["--json", str(js), "--png", str(png), "--area", "2.0"]) == 0
    d = json.loads(js.read_text())
    assert d["space_size"] == 4 and d["best"]["area_mm2"] <= 2.0 and png.read_bytes()[:4] == b"\x89PNG"
    assert d["references"]["chip-small"]["status"] == "ok" and d["pareto"]
    key = d["best"]["key"]
    capsys.readouterr()
    assert main(["dse", "--describe", key, "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert f"point {key}" in out and "step by phase" in out and "bound by" in out
    # an unreachable limit: one line, no outputs
    js.unlink()
    png.unlink()
    assert main(args + ["--json", str(js), "--png", str(png), "--area", "0.01"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("caterpillar: error: no design of the 4 evaluated meets the limits")
    assert not js.exists() and not png.exists()
