"""Design-space search: the critical-path heuristic against exhaustive enumeration and
random search, on a space small enough to enumerate (288 points), over several seeds;
the reference design's small and large networks searched within configuration S's area;
and the clock and FP latencies swept on the small network.

Every point is measured for real (a compile and a fast-engine training step of the
workload, counters through the power model) on a local Ray cluster, and cached by
configuration hash (``build/dse/bench.jsonl``), so a rerun measures only what changed.
The searches then run against those measurements: an evaluation is one distinct point a
search asks for, the unit the issue's "fewer evaluations" counts.

The parts (``DSE_PARTS``, comma separated; default ``small,sweep``):

- ``small``: the 288-point comparison and the small network within S's area;
- ``sweep``: the clock and FP-latency sweep;
- ``large``: the large network within S's area (about an hour on two cores when nothing
  is cached: every point streams weights from DRAM, about 10 CPU-minutes and 8 GB each;
  ``build/dse/s-large.jsonl``).

A part not run is carried over from the results JSON as it was, with its own run time.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time

from arch.config import PRESETS
from arch.files import ROOT
from dse.engine import Evaluator, LocalEngine, RayEngine
from dse.evaluate import config_area, parse_workloads
from dse.search import Constraints, Goal, critical_path_search, exhaustive
from dse.space import parse_space
from sim.paper import dram_config

SPACE = ["nr=2,4,8", "cores=2,4,8,16", "mem_a_words=512,1024,2048,4096", "method=sgd,cp,mbgd:16",
         "fmt=binary16,bfloat16"]
BASE = "chip-small"
WORKLOADS = "196-64-10"
#: the limits: an area and a TDP that bind (about half the space's points break one)
AREA_MM2, POWER_W = 12.0, 1.0
SEEDS = range(8)
WITHIN = 0.02
RESULTS = ROOT / "benchmarks" / "results"


def _oracle(results: dict):
    def measured(base, point, workloads, key, golden=False):
        return results[key]
    return LocalEngine(measured)


#: the reference design's small network under configuration S's area (116.7 mm^2 in this model: the
#: paper's 103.2 of PE arrays and scratchpads plus S's 4096-word microcode stores) and a 15 W TDP
S_SPACE = ["nr=4,8", "cores=8,16,32", "method=sgd,cp,mbgd:16"]
S_AREA_MM2, S_POWER_W = 116.8, 15.0


def s_area_search(engine) -> dict:
    """The heuristic on the small network within S's area, beside S with each method."""
    space = parse_space(S_SPACE, PRESETS["S"])
    workloads = parse_workloads("small")
    goal = Goal("throughput_per_tdp", Constraints(area_mm2=S_AREA_MM2, power_w=S_POWER_W))
    cache = ROOT / "build" / "dse" / "s-small.jsonl"
    ev = Evaluator(space, workloads, engine, cache=cache)
    found = goal.best(critical_path_search(ev, goal, seed=0))
    ref_space = parse_space(["method=sgd,cp,mbgd:16"], PRESETS["S"])
    refs = Evaluator(ref_space, workloads, engine, cache=cache).evaluate(list(ref_space.points()))
    best_ref = max(refs, key=lambda r: r["throughput_per_tdp"])
    w, s = found["workloads"][0], best_ref["workloads"][0]
    return {"space": S_SPACE, "limits": goal.constraints.to_dict(), "heuristic_evaluations": len(ev.asked),
            "space_size": space.size,
            "best": {k: found[k] for k in ("point", "throughput_per_tdp", "throughput", "tdp_w", "area_mm2",
                                           "gflops_per_w")},
            "S": {r["point"]["method"]: {k: r[k] for k in ("throughput_per_tdp", "throughput", "tdp_w", "area_mm2",
                                                            "gflops_per_w")} for r in refs},
            "gain_over_S_best_method": found["throughput_per_tdp"] / best_ref["throughput_per_tdp"],
            "why": (f"{w['method']} on {found['point']['cores']} cores of {found['point']['nr']}x{found['point']['nr']}: "
                    f"MAC utilization {w['mac_utilization'] * 100:.1f}% (S {best_ref['point']['method']}: "
                    f"{s['mac_utilization'] * 100:.1f}%), {found['area_mm2']:.1f} mm^2 leaking against S's "
                    f"{best_ref['area_mm2']:.1f}, TDP {found['tdp_w']:.2f} W against {best_ref['tdp_w']:.2f} W")}


#: the large network within S's area. It does not fit S on chip: S trains it with a DRAM
#: channel per core and the DMA queue of Table 2's off-chip cells (sim/paper.py,
#: dram_config), so every point has them, and the area limit is S's with its DMA engines
#: (the DRAM is off chip). Minibatch GD of 16 only:
#: with batch 1 (SGD, CP) the weights page through the scratchpads and DRAM for every
#: sample, and S's SGD and CP cells of Table 2 (benchmarks/results/paper.json) reach a
#: seventh of its minibatch GD's throughput per W.
L_SPACE = ["nr=4,8", "cores=8,32", "spad_kib=512,2048", "method=mbgd:16"]
L_START = {"nr": 4, "cores": 32, "spad_kib": 512, "method": "mbgd:16"}     # configuration S, the baseline
L_POWER_W = 20.0
#: the most points the search measures: each takes about 15 CPU-minutes and 8 GB, so the
#: space is cut to 8 points, 5 of them within the area (S, and 8 cores of 4 x 4 or 8 x 8
#: PEs with 512 or 2048 KiB of scratchpad each)
L_BUDGET = 5


def _brief(r: dict) -> dict:
    """A measured point's figures and, per workload, the phase breakdown, utilization,
    power by block and where the weights live (what `caterpillar dse --describe` shows)."""
    out = {k: r[k] for k in ("point", "throughput_per_tdp", "throughput", "tdp_w", "area_mm2", "gflops_per_w")}
    w = r["workloads"][0]
    tot = max(1, sum(w["phases"].values()))
    out.update(cycles=w["cycles"], mac_utilization=w["mac_utilization"],
               phases={k: round(v / tot, 4) for k, v in w["phases"].items()},
               watts_by_block={k: round(w["watts"] * v / w["pj_per_flop"]["total"], 3)
                               for k, v in w.get("pj_per_flop", {}).items() if k != "total"},
               **{k: w[k] for k in ("weights", "dram_beats", "dma_stall_cycles_per_core") if k in w})
    return out


def large_search(engine, budget: int = L_BUDGET, search: bool = True, seed: int = 0) -> dict:
    """The heuristic on the large network within S's area and :data:`L_POWER_W`, from a
    random feasible start (``seed``), beside S (:data:`L_START`, a point of the space,
    measured as the baseline). Climbing from S itself finds nothing: each one-axis move
    from S is over the area or does not fit (4 x 4 PEs on 8 cores lack PE memory).
    ``search=False`` (``DSE_LARGE_SEARCH=0``): no search, the points of the space measured
    so far (the cache) compared with S."""
    t0 = time.perf_counter()
    base = dram_config("S")
    area = config_area(base)
    space = parse_space(L_SPACE, base)
    workloads = parse_workloads("large")
    goal = Goal("throughput_per_tdp", Constraints(area_mm2=area, power_w=L_POWER_W))
    new: list[dict] = []
    ev = Evaluator(space, workloads, engine, cache=ROOT / "build" / "dse" / "s-large.jsonl", area_limit=area,
                   on_result=new.append)
    if search:
        results = critical_path_search(ev, goal, budget=budget, seed=seed)
        asked = ev.spent
    else:
        results = ev.evaluate([p for p in space.points() if ev.key(p) in ev.results or ev.over_area(p)])
    found = goal.best(results)
    if search or ev.key(L_START) in ev.results:          # S, the baseline (measured unless search=False)
        results += [r for r in ev.evaluate([L_START]) if r not in results]
    s_ref = ev.known(L_START)
    measured = [r for r in results if not str(r.get("status", "")).startswith("over area")]
    out = {"space": L_SPACE, "base": f"S with {base.dram_mib} MiB of DRAM per core and a {base.dma_queue}-transfer DMA queue", "space_size": space.size,
           "limits": goal.constraints.to_dict(), "budget": budget,
           "search": f"heuristic, seed {seed}" if search else "none: the points measured so far",
           "heuristic_evaluations": asked if search else None, "measured_points": ev.spent,
           "screened_over_area": ev.screened,
           "points": [{"point": r["point"], "status": r["status"],
                       **({k: r[k] for k in ("throughput_per_tdp", "tdp_w", "area_mm2")} if r["status"] == "ok"
                          else {}), "wall_s": r.get("wall_s")} for r in measured],
           "S": _brief(s_ref) if s_ref and s_ref["status"] == "ok" else {"status": s_ref and s_ref["status"]},
           "S_other_methods_from_paper_json": _paper_s_large()}
    if found is None or s_ref is None or s_ref["status"] != "ok":
        out.update(best=None, gain_over_S_best_method=None,
                   why="no measured design meets the limits" if found is None else "S was not measured")
    else:
        out.update(best=_brief(found), gain_over_S_best_method=found["throughput_per_tdp"] / s_ref["throughput_per_tdp"])
        out["why"] = _why(out["best"], out["S"])
        others = [r for r in results if goal.feasible(r) and r["point"] != L_START]
        if found["point"] == L_START and others:      # S wins: why the next best does not beat it
            nxt = _brief(goal.best(others))
            out["runner_up"] = nxt
            out["why"] = (f"no design found beats S; the next best reaches "
                          f"{nxt['throughput_per_tdp'] / out['S']['throughput_per_tdp']:.3f}x: " + _why(nxt, out["S"]))
    out["run_s"] = round(time.perf_counter() - t0, 1)
    out["measured_this_run"] = len(new)           # the rest came from the cache
    out["measure_s"] = round(sum(float(r.get("wall_s") or 0) for r in measured), 1)   # every point's own time
    return out


def _why(b: dict, s: dict) -> str:
    """A design against S, from their phase breakdowns, utilization, power and area."""
    if b["point"] == s["point"]:
        return "the best design found is S itself"
    pb, ps = b["phases"], s["phases"]
    wb, ws = b["watts_by_block"], s["watts_by_block"]
    big = sorted(ws, key=lambda k: -abs(ws.get(k, 0) - wb.get(k, 0)))[:3]     # the blocks that changed most
    return (f"{b['point']['cores']} cores of {b['point']['nr']}x{b['point']['nr']} with {b['point']['spad_kib']} KiB "
            f"of scratchpad each: step {b['cycles']} cycles against S's {s['cycles']} (phases "
            + ", ".join(f"{k} {pb.get(k, 0) * 100:.0f}% vs {ps.get(k, 0) * 100:.0f}%" for k in ("compute", "collectives", "memory",
                                                                                   "host", "microcode")
                 if pb.get(k) or ps.get(k))
            + f"; DMA stalls {b.get('dma_stall_cycles_per_core', 0)} against {s.get('dma_stall_cycles_per_core', 0)} "
              f"cycles a core; weights in DRAM: {_in_dram(b)} against {_in_dram(s)}"
            + f"), MAC utilization {b['mac_utilization'] * 100:.1f}% against {s['mac_utilization'] * 100:.1f}%, "
            f"throughput {b['throughput']:.0f} against {s['throughput']:.0f} samples/s, "
            f"{b['area_mm2']:.1f} mm^2 against {s['area_mm2']:.1f}, TDP {b['tdp_w']:.2f} W against {s['tdp_w']:.2f} W "
            "(" + ", ".join(f"{k} {wb.get(k, 0):.2f} vs {ws.get(k, 0):.2f} W" for k in big) + ")")


def _in_dram(b: dict) -> str:
    return ", ".join(k for k, v in b.get("weights", {}).items() if "DRAM" in v) or "none"


def _paper_s_large() -> dict:
    """S's large-network cells of Table 2 (benchmarks/results/paper.json, same DRAM
    channel): throughput per W of everything, for each method."""
    try:
        cells = json.loads((RESULTS / "paper.json").read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    clock = PRESETS["S"].clock_mhz * 1e6
    return {c["method"]: {"throughput_per_w": round(c["batch"] / (c["cycles"] / clock) / c["watts_all"], 1),
                          "mac_util": round(c["mac_util"], 4), "watts": round(c["watts_all"], 2)}
            for c in cells if c["net"] == "large" and c["config"] == "S" and c.get("status") == "ok"}


#: the clock and FP-latency sweep: the small network on the design the small-network search
#: finds (8 cores of 8 x 8 PEs, minibatch GD of 16), one axis at a time from its defaults
SW_BASE = {"nr": 8, "cores": 8, "method": "mbgd:16"}
SW_AXES = {"clock_mhz": [500.0, 1000.0, 2000.0], "mul_latency": [2, 4, 6], "add_latency": [3, 5, 7]}


def clock_latency_sweep(engine) -> dict:
    """Each of :data:`SW_AXES` swept alone on the small network (the others at S's values)."""
    t0 = time.perf_counter()
    workloads = parse_workloads("small")
    cache = ROOT / "build" / "dse" / "s-small.jsonl"
    rows = []
    for axis, values in SW_AXES.items():
        space = parse_space([f"{k}={v}" for k, v in SW_BASE.items()] + [f"{axis}={','.join(map(str, values))}"],
                            PRESETS["S"])
        ev = Evaluator(space, workloads, engine, cache=cache)
        pts = list(space.points())
        for p, r in zip(pts, ev.evaluate(pts)):         # (a cached result may carry another space's point)
            row = {"axis": axis, "value": p[axis], "status": r["status"], "wall_s": r.get("wall_s")}
            if r["status"] == "ok":
                w = r["workloads"][0]
                row.update(throughput=r["throughput"], tdp_w=r["tdp_w"], throughput_per_tdp=r["throughput_per_tdp"],
                           area_mm2=r["area_mm2"], gflops_per_w=r["gflops_per_w"], cycles=w["cycles"],
                           mac_utilization=w["mac_utilization"])
            rows.append(row)
    return {"design": SW_BASE, "base": "S", "workload": "small", "axes": SW_AXES, "rows": rows,
            "run_s": round(time.perf_counter() - t0, 1),
            # each point's own measuring time, the design at its defaults (1000 MHz, 2 and 3 cycles) once
            "measure_s": round(sum(r["wall_s"] or 0 for r in rows
                                   if r["axis"] == "clock_mhz" or r["value"] != SW_AXES[r["axis"]][0]), 1)}


def run() -> dict:
    parts = [p.strip() for p in os.environ.get("DSE_PARTS", "small,sweep").split(",") if p.strip()]
    bad = [p for p in parts if p not in ("small", "sweep", "large")]
    if bad:
        raise ValueError(f"DSE_PARTS: unknown part(s) {bad}; small, sweep, large")
    try:
        prev = json.loads((RESULTS / "dse.json").read_text())
    except (OSError, ValueError):
        prev = {}
    out = dict(prev)
    engine = RayEngine(workers=2)
    try:
        if "small" in parts:
            out.update(_small(engine))
        if "sweep" in parts:
            out["clock_latency_sweep"] = clock_latency_sweep(engine)
        if "large" in parts:
            out["large_net_within_S_area"] = large_search(engine, search=os.environ.get("DSE_LARGE_SEARCH") != "0")
    finally:
        engine.close()
    out["parts_run"] = parts
    out["note"] = _note(out)
    for k in ("benchmark", "seconds", "peak_rss_mb_process_so_far", "machine", "date"):
        out.pop(k, None)
    return out


def _small(engine) -> dict:
    t_start = time.perf_counter()
    space = parse_space(SPACE, PRESETS[BASE])
    workloads = parse_workloads(WORKLOADS)
    goal = Goal("throughput_per_tdp", Constraints(area_mm2=AREA_MM2, power_w=POWER_W))
    cache = ROOT / "build" / "dse" / "bench.jsonl"
    cache.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    full = Evaluator(space, workloads, engine, cache=cache)
    every = exhaustive(full, goal)
    s_search = s_area_search(engine)
    measure_s = time.perf_counter() - t0          # the points not in the caches yet, both searches
    table = {r["key"]: r for r in every}
    best = goal.best(every)
    target = goal.score(best) * (1 - WITHIN)
    feasible = sum(goal.feasible(r) for r in every)
    rows, heur_evals = [], []
    for seed in SEEDS:
        ev = Evaluator(space, workloads, _oracle(table))
        found = goal.best(critical_path_search(ev, goal, seed=seed))
        order = list(space.points())
        random.Random(seed).shuffle(order)
        rnd_best, rnd_to_target = float("-inf"), None
        for i, p in enumerate(order, 1):
            s = goal.score(table[full.key(p)])
            rnd_best = max(rnd_best, s) if i <= ev.evaluations else rnd_best
            if rnd_to_target is None and s >= target:
                rnd_to_target = i
        heur_evals.append(ev.evaluations)
        rows.append({"seed": seed, "heuristic evaluations": ev.evaluations,
                     "heuristic / optimum": round(goal.score(found) / goal.score(best), 4),
                     "fewer than exhaustive": f"{space.size / ev.evaluations:.1f}x",
                     "random, same evaluations / optimum": round(rnd_best / goal.score(best), 4),
                     "random evaluations to reach 2 %": rnd_to_target,
                     "heuristic best": " ".join(f"{k}={v}" for k, v in found["point"].items())})
    ratios = [r["heuristic / optimum"] for r in rows]
    return {
        "title": "Design-space search: critical-path heuristic vs exhaustive and random (real measurements)",
        "rows": rows,
        "space": {"axes": SPACE, "base": BASE, "size": space.size, "measured_ok": sum(r["status"] == "ok"
                                                                                      for r in every),
                  "within_limits": feasible},
        "workloads": WORKLOADS, "objective": goal.objective, "limits": goal.constraints.to_dict(),
        "optimum": {"point": best["point"], "throughput_per_tdp": best["throughput_per_tdp"],
                    "area_mm2": best["area_mm2"], "tdp_w": best["tdp_w"]},
        "heuristic_min_ratio": min(ratios), "heuristic_mean_evaluations": statistics.mean(heur_evals),
        "heuristic_max_evaluations": max(heur_evals),
        "measure_new_points_s": round(measure_s, 1), "new_evaluations": full.evaluations,
        "small_net_within_S_area": s_search, "small_run_s": round(time.perf_counter() - t_start, 1),
    }


def _minutes(lg: dict) -> str:
    """How long the large network's points took to measure (each point's own wall time,
    on two cores shared with other work)."""
    ws = [p["wall_s"] / 60 for p in lg.get("points", []) if p.get("wall_s") and p["status"] == "ok"]
    return (f"{sum(ws):.0f} min of measurement ({min(ws):.0f}-{max(ws):.0f} min a point)" if ws
            else "no point measured")


def _note(d: dict) -> str:
    """The SUMMARY text: every part present in ``d``."""
    sp, opt = d["space"], " ".join(f"{k}={v}" for k, v in d["optimum"]["point"].items())
    s_search = d["small_net_within_S_area"]
    out = (f"{sp['size']} points ({', '.join(sp['axes'])}) over {sp['base']}, workload {d['workloads']}; objective "
           f"throughput per TDP (samples/s/W, everything counted) with area <= {d['limits']['area_mm2']:g} mm^2 and "
           f"TDP <= {d['limits']['power_w']:g} W ({sp['within_limits']} points within the limits; optimum {opt}). "
           f"Each point measured once, for real, on a local Ray cluster (2 workers), cached by configuration hash; "
           f"the searches ask those measurements, an evaluation being a distinct point. 'random evaluations to reach "
           f"2 %': points a seeded random search draws before one within {WITHIN:.0%} of the optimum. "
           f"Small network 784-500-500-500-10 within S's area ({S_AREA_MM2:g} mm^2 here) and {S_POWER_W:g} W: "
           f"the heuristic ({s_search['heuristic_evaluations']} of {s_search['space_size']} points) finds a "
           f"design with {s_search['gain_over_S_best_method']:.2f}x the throughput per TDP "
           f"of configuration S with its best method ({s_search['why']}).")
    lg = d.get("large_net_within_S_area")
    if lg:
        lim = lg["limits"]
        out += (f" Large network 784-2500-2000-1500-1000-500-10 ({lg['base']}, as S trains it) within S's area "
                f"({lim['area_mm2']:.1f} mm^2 with its DMA engines) and {lim['power_w']:g} W, space "
                f"{', '.join(lg['space'])}: "
                + (f"the heuristic (seed 0, budget {lg['budget']}) measures {lg['heuristic_evaluations']} points "
                   f"(climbing from S finds nothing: each one-axis move from S is over the area or does not fit)"
                   if lg.get("heuristic_evaluations") is not None else
                   f"the search not run (a point takes about 15 CPU-minutes); {lg['measured_points']} points "
                   f"measured: " + "; ".join(" ".join(f"{k}={v}" for k, v in q["point"].items()) for q in
                                            lg["points"] if q["status"] == "ok"))
                + f" ({lg['screened_over_area']} more over the area limit, not measured), {_minutes(lg)}. ")
        if lg["gain_over_S_best_method"] is not None:
            s, other = lg["S"], lg["S_other_methods_from_paper_json"]
            out += (f"S with its best method (minibatch GD of 16: {s['throughput_per_tdp']:.0f} samples/s/W; its SGD "
                    f"and CP cells of Table 2 reach "
                    + " and ".join(f"{other[m]['throughput_per_w']:.0f}" for m in ("sgd", "cp") if m in other)
                    + f"). The best design {'found' if lg.get('heuristic_evaluations') is not None else 'measured'}"
                      f" has {lg['gain_over_S_best_method']:.2f}x S's throughput per TDP: "
                      f"{lg['why']}.")
        else:
            out += f"No design found: {lg['why']}."
    sw = d.get("clock_latency_sweep")
    if sw:
        out += (f" Clock and FP latencies, one at a time on the small network at "
                f"{' '.join(f'{k}={v}' for k, v in sw['design'].items())} ({sw['measure_s'] / 60:.0f} min of "
                f"measurement): "
                + "; ".join(f"{ax} " + ", ".join(f"{r['value']:g}: {r['throughput_per_tdp']:.0f}/W "
                                                 f"({r['tdp_w']:.1f} W, {r['area_mm2']:.1f} mm^2)"
                                                 if r["status"] == "ok" else f"{r['value']:g}: {r['status']}"
                                                 for r in sw["rows"] if r["axis"] == ax)
                            for ax in sw["axes"])
                + ".")
    return out
