"""``caterpillar dse``: design-space search under area and power limits (:mod:`dse`)."""

from __future__ import annotations

import json
import sys

from arch.errors import InputError, UsageError
from arch.files import ROOT
from cli.common import check_outputs, count, nonneg_int, positive_float, write_json_png

__all__ = ["add_dse_arguments", "cmd_dse"]

#: the default results cache, under the project's build directory
DEFAULT_CACHE = "build/dse/cache.jsonl"


def add_dse_arguments(p, cfg_help: str) -> None:
    from dse.evaluate import OBJECTIVES

    p.add_argument("--space", nargs="+", metavar="FIELD=VALUES",
                   help="the axes: field=v1,v2 / field=lo..hi / field=lo..hi:x2 (ArchConfig fields nr, cores, "
                        "mem_a_words, mem_b_words, spad_kib, n_regs, fmt, mul_latency, add_latency, clock_mhz, "
                        "ucode_depth; and method=sgd,cp,mbgd:16,cp:8), or one JSON file {field: [values]}")
    p.add_argument("--base", default="S", help=f"the configuration the other fields come from ({cfg_help}; "
                                               f"default S)")
    p.add_argument("--workloads", default="small",
                   help="networks, comma separated: small, large (the reference design's) or sizes like 784-100-10, "
                        "each with an optional *weight (default small)")
    p.add_argument("--objective", default="throughput_per_tdp", choices=sorted(OBJECTIVES))
    p.add_argument("--area", type=positive_float, help="area limit in mm^2")
    p.add_argument("--power", type=positive_float, help="average power limit (TDP) in W")
    p.add_argument("--min-throughput", type=positive_float, help="minimum training throughput, samples/s")
    p.add_argument("--search", default="heuristic", choices=("heuristic", "random", "exhaustive"))
    p.add_argument("--budget", type=count, help="at most this many points measured, the cached ones included (random: the sample size)")
    p.add_argument("--seed", type=nonneg_int, default=0)
    p.add_argument("--engine", default="ray", choices=("ray", "local"),
                   help="ray (default): tasks on a Ray cluster, a local one unless --address; local: in this process")
    p.add_argument("--address", help="join this Ray cluster (host:port or ray://host:port)")
    p.add_argument("--workers", type=count, default=2, help="worker processes of the local Ray cluster (default 2)")
    p.add_argument("--cache", default=DEFAULT_CACHE,
                   help=f"results cache (JSON lines, by configuration hash; default {DEFAULT_CACHE}): a rerun or an "
                        f"interrupted search resumes from it")
    p.add_argument("--golden", action="store_true", help="check every step's weights against the golden trainer")
    p.add_argument("--references", default="S",
                   help="configurations measured beside the search (presets, comma separated, or none; default S)")
    p.add_argument("--describe", metavar="KEY", help="explain one point of the cache (a key printed by a search)")
    p.add_argument("--json", help="save every point, the Pareto front and the best design as JSON")
    p.add_argument("--png", help="save the Pareto front (GFLOPS/W against throughput) as a PNG")
    p.add_argument("--progress", default="auto", choices=("auto", "on", "off"))
    from cli.power_cap import add_power_cap_arguments

    add_power_cap_arguments(p, "the best design's step (its first workload)")


def _goal(args):
    from dse.search import Constraints, Goal

    return Goal(args.objective, Constraints(args.area, args.power, args.min_throughput))


def _describe(args) -> int:
    from pathlib import Path

    from arch.files import read_text
    from dse.report import describe_point

    path = ROOT / DEFAULT_CACHE if args.cache == DEFAULT_CACHE else Path(args.cache)
    if not path.exists():
        raise InputError(f"--cache {path}: no such file (run a search first)")
    for line in read_text(path, "--cache").splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(r, dict) and r.get("key") == args.describe:
            print(describe_point(r, _goal(args)))
            return 0
    raise InputError(f"--describe {args.describe}: no such point in {path}")


def _references(args, workloads, engine) -> dict:
    from arch.config import PRESETS

    names = [] if args.references.strip() in ("", "none") else [n.strip() for n in args.references.split(",")]
    bad = [n for n in names if n not in PRESETS]
    if bad:
        raise UsageError(f"--references {bad[0]!r}: not a preset ({', '.join(PRESETS)})")
    tasks = [(n, (PRESETS[n].to_dict(), {"method": "sgd"}, workloads, f"preset-{n}", False)) for n in names]
    return dict(engine.run(tasks)) if tasks else {}


def _power_cap(args, best: dict, wl) -> dict:
    """The best design's step of ``wl`` under ``--power-cap`` (:func:`sim.power_cap.power_cap`)."""
    from arch.config import ArchConfig
    from cli.power_cap import check_power_cap_args, power_cap_lines, run_power_cap
    from dse.space import point_mapping, point_method
    from sw.mlp import MLP

    cfg = ArchConfig.from_dict(best["config"])
    method, batch = point_method(best["point"])
    check_power_cap_args(args, cfg, method)
    mlp = MLP(wl.sizes, wl.loss, wl.lr, batch=batch)
    res = run_power_cap(args, cfg, mlp, method, log=lambda m: print(m, file=sys.stderr, flush=True),
                        options=point_mapping(best["point"]))
    res["design"], res["workload"] = best["key"], wl.name
    print("\n".join([f"best design {best['key']}, {wl.name}:"] + power_cap_lines(res)))
    return res


def cmd_dse(args) -> int:
    from arch.config import config_from_arg
    from arch.files import check_output
    from cli.common import Progress
    from dse.engine import Evaluator, make_engine
    from dse.evaluate import parse_workloads
    from dse.report import best_table, plot_pareto, search_document
    from dse.search import SEARCHES
    from dse.space import parse_space

    goal = _goal(args)
    if args.describe:
        return _describe(args)
    from cli.power_cap import check_power_cap_args

    check_power_cap_args(args)
    base = config_from_arg(args.base)
    space = parse_space(args.space, base)
    workloads = parse_workloads(args.workloads)
    check_outputs(args, "json", "png")
    if args.cache == DEFAULT_CACHE:
        (ROOT / DEFAULT_CACHE).parent.mkdir(parents=True, exist_ok=True)
        cache = ROOT / DEFAULT_CACHE
    else:
        cache = check_output(args.cache, "--cache")
    if args.address and args.engine != "ray":
        raise UsageError("--address applies to --engine ray")
    if args.search == "exhaustive" and args.budget and args.budget < space.size:
        raise UsageError(f"--budget {args.budget}: an exhaustive search of this space needs {space.size} evaluations")
    engine = make_engine(args.engine, args.address, args.workers)
    print(f"searching {space.size} points ({', '.join(f'{k} {len(v)}' for k, v in space.axes.items())}) for "
          f"{args.objective} on {', '.join(w.name for w in workloads)}; each point compiles and runs one training "
          f"step per workload on the fast chip engine", file=sys.stderr, flush=True)
    try:
        with Progress("evaluations", unit="point", mode=args.progress) as bar:
            best = {"v": None}

            def seen(r):
                if goal.feasible(r) and (best["v"] is None or goal.score(r) > goal.score(best["v"])):
                    best["v"] = r
                pending = getattr(engine, "pending", 0)
                bar.advance(f"in flight {pending}, best {goal.objective} {goal.score(best['v']):.4g}" if best["v"]
                            else f"in flight {pending}, none within the limits yet")

            ev = Evaluator(space, workloads, engine, cache=cache, golden=args.golden, on_result=seen)
            results = SEARCHES[args.search](ev, goal, budget=args.budget, seed=args.seed)
        refs = _references(args, workloads, engine)
    finally:
        engine.close()
    best = goal.best(results)
    if best is None:
        c = goal.constraints
        fits = [r for r in results if r.get("status") == "ok"]
        near = sorted(fits, key=lambda r: len(goal.constraints.violations(r)))[:3]
        why = "; ".join(goal.constraints.violations(r)[0] for r in near) if near else \
            f"none of them runs ({results[0]['status'] if results else 'no points'})"
        raise InputError(f"no design of the {len(results)} evaluated meets the limits (area {c.area_mm2}, power "
                         f"{c.power_w}, throughput {c.min_throughput}); for example: {why}")
    print(best_table(results, goal, refs=refs))
    print(f"{ev.evaluations} evaluations ({ev.cached_at_start} results in the cache at the start), "
          f"search {args.search}, engine {engine.name}")
    cap = _power_cap(args, best, workloads[0]) if args.power_cap is not None else None

    def doc() -> str:
        d = search_document(space, workloads, goal, results, search=args.search, seed=args.seed,
                            evaluations=ev.evaluations, cached=ev.cached_at_start, refs=refs, engine=engine.name)
        if cap is not None:
            d["power_cap"] = cap
        return json.dumps(d, indent=1, default=float) + "\n"

    write_json_png(args, doc, lambda path: plot_pareto(results, goal, path, refs=refs))
    return 0
