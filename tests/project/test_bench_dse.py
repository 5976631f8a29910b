"""benchmarks/bench_dse.py's report of the large-network search: a point's brief (its
phases, power by block), the reason the winner beats S, the parts run on their own, and
the SUMMARY note built from whatever parts the JSON holds."""

import json

import pytest

from benchmarks import bench_dse


def _result(point, cycles, phases, watts, pj, area, thr):
    return {"point": point, "status": "ok", "throughput_per_tdp": thr / watts, "throughput": thr, "tdp_w": watts,
            "area_mm2": area, "gflops_per_w": 1.0,
            "workloads": [{"cycles": cycles, "mac_utilization": 0.5, "phases": phases, "watts": watts,
                           "pj_per_flop": {**pj, "total": sum(pj.values())}, "weights": {"W0": "DRAM"},
                           "dram_beats": 10, "dma_stall_cycles_per_core": 3}]}


S = _result({"nr": 4, "cores": 32, "spad_kib": 512, "method": "mbgd:16"}, 100,
            {"compute": 60, "collectives": 10, "memory": 30, "overhead": 0, "host": 0}, 10.0,
            {"leakage": 6.0, "fpu": 2.0, "dram": 2.0}, 117.6, 5000.0)
B = _result({"nr": 8, "cores": 8, "spad_kib": 2048, "method": "mbgd:16"}, 80,
            {"compute": 70, "collectives": 5, "memory": 5, "overhead": 0, "host": 0}, 5.0,
            {"leakage": 2.0, "fpu": 2.0, "dram": 1.0}, 106.9, 6000.0)


def test_brief_splits_the_power_by_block_and_the_step_by_phase():
    b = bench_dse._brief(S)
    assert b["watts_by_block"] == {"leakage": 6.0, "fpu": 2.0, "dram": 2.0}
    assert b["phases"]["memory"] == pytest.approx(0.3) and b["weights"] == {"W0": "DRAM"}


def test_why_names_the_phases_and_the_blocks_that_changed():
    why = bench_dse._why(bench_dse._brief(B), bench_dse._brief(S))
    assert why.startswith("8 cores of 8x8 with 2048 KiB")
    assert "memory 6% vs 30%" in why and "leakage 2.00 vs 6.00 W" in why and "106.9 mm^2 against 117.6" in why
    assert "is S itself" in bench_dse._why(bench_dse._brief(S), bench_dse._brief(S))


def test_parts_and_note(monkeypatch, tmp_path):
    monkeypatch.setenv("DSE_PARTS", "bogus")
    with pytest.raises(ValueError, match="DSE_PARTS"):
        bench_dse.run()
    d = json.loads((bench_dse.RESULTS / "dse.json").read_text())
    d.pop("large_net_within_S_area", None)
    d.pop("clock_latency_sweep", None)
    assert "Large network" not in bench_dse._note(d)
    d["large_net_within_S_area"] = {
        "space": bench_dse.L_SPACE, "base": "S with 64 MiB of DRAM per core", "limits": {"area_mm2": 117.6,
                                                                                         "power_w": 20.0},
        "budget": 5, "heuristic_evaluations": 5, "screened_over_area": 3, "run_s": 1.0,
        "points": [{"status": "ok", "wall_s": 600.0}, {"status": "ok", "wall_s": 1200.0}],
        "S": bench_dse._brief(S), "S_other_methods_from_paper_json": {"sgd": {"throughput_per_w": 65.0},
                                                                     "cp": {"throughput_per_w": 75.0},
                                                                     "mbgd": {"throughput_per_w": 524.0}},
        "gain_over_S_best_method": 2.4, "why": "because"}
    note = bench_dse._note(d)
    assert "30 min of measurement (10-20 min a point)" in note and "reach 65 and 75)" in note and "2.40x S's throughput per TDP: because." in note


def _fake(base, point, workloads, key, golden=False):
    """A stand-in measurement: larger cores do better (fewer cores' leakage)."""
    r = B if point["nr"] == 8 else S
    thr = 6000.0 * (1 + point["spad_kib"] / 4096) if point["nr"] == 8 else 5000.0 * 32 / point["cores"] ** 0.5 / 5.66
    return {**r, "key": key, "point": dict(point), "throughput": thr, "throughput_per_tdp": thr / r["tdp_w"],
            "wall_s": 60.0}


def test_large_search_beside_S_and_resumed_from_its_cache(monkeypatch, tmp_path):
    from dse.engine import LocalEngine

    monkeypatch.setattr(bench_dse, "ROOT", tmp_path)
    (tmp_path / "build" / "dse").mkdir(parents=True)
    cut = bench_dse.large_search(LocalEngine(_fake), search=False)          # nothing measured yet
    assert cut["measured_points"] == 0 and cut["best"] is None and cut["screened_over_area"] == 3
    d = bench_dse.large_search(LocalEngine(_fake))
    assert d["S"]["point"] == bench_dse.L_START and d["heuristic_evaluations"] <= 5 and d["screened_over_area"] >= 2
    assert d["best"]["point"] == {"nr": 8, "cores": 8, "spad_kib": 2048, "method": "mbgd:16"}
    assert d["gain_over_S_best_method"] == pytest.approx(d["best"]["throughput_per_tdp"] / d["S"]["throughput_per_tdp"])
    again = bench_dse.large_search(LocalEngine(_fake), search=False)        # the cache: the same points
    assert again["measured_points"] == d["measured_points"] and again["best"]["point"] == d["best"]["point"]
    assert again["measured_this_run"] == 0
