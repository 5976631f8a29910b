"""A search's outputs: the table of the best designs, the JSON document, the Pareto plot,
and the explanation of one point (``caterpillar dse --describe``)."""

from __future__ import annotations

from dse.evaluate import OBJECTIVES
from dse.search import Goal, bottleneck, pareto_front

__all__ = ["best_table", "search_document", "plot_pareto", "describe_point"]


def _fmt_point(p: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in p.items())


def best_table(results, goal: Goal, n: int = 10, refs: dict | None = None) -> str:
    """The ``n`` best feasible designs (and the reference configurations) as text."""
    key, _ = OBJECTIVES[goal.objective]
    ranked = sorted((r for r in results if goal.feasible(r)), key=goal.score, reverse=True)[:n]
    lines = [f"{'#':>3} {goal.objective:>20} {'samples/s':>11} {'TDP W':>8} {'GFLOPS/W':>9} {'mm^2':>7} "
             f"{'bound by':<12} point (key)"]
    rows = [(str(i + 1), r) for i, r in enumerate(ranked)] + [(name, r) for name, r in (refs or {}).items()]
    for tag, r in rows:
        if r.get("status") != "ok":
            lines.append(f"{tag:>3} {'-':>20} {r.get('status', '')}")
            continue
        lines.append(f"{tag:>3} {r[key]:>20.4g} {r['throughput']:>11.4g} {r['tdp_w']:>8.2f} "
                     f"{r['gflops_per_w']:>9.1f} {r['area_mm2']:>7.1f} {bottleneck(r):<12} "
                     f"{_fmt_point(r['point'])} ({r['key']})")
    return "\n".join(lines)


def search_document(space, workloads, goal: Goal, results, *, search: str, seed: int, evaluations: int,
                    cached: int, refs: dict | None = None, engine: str = "") -> dict:
    """The JSON of a search: every evaluated point, the Pareto front, the winner."""
    best = goal.best(results)
    return {
        "space": space.to_dict(), "space_size": space.size,
        "workloads": [{"name": w.name, "sizes": list(w.sizes), "weight": w.weight} for w in workloads],
        "objective": goal.objective, "constraints": goal.constraints.to_dict(), "search": search, "seed": seed,
        "engine": engine, "evaluations": evaluations, "cached_results_used": cached,
        "best": best, "pareto": [r["key"] for r in pareto_front(results, goal)],
        "references": refs or {},
        "points": sorted(results, key=lambda r: r["key"]),
        "convention": "every point: a real compile and one training step on the fast chip engine per workload, "
                      "its counters through sim/power.py (everything counted: FPU, SRAM, scratchpad, buses, "
                      "register files, ring, control, leakage); TDP = the largest average power over the "
                      "workloads; objectives over several workloads are weighted geometric means",
    }


def plot_pareto(results, goal: Goal, path, refs: dict | None = None) -> None:
    """PNG: GFLOPS/W against throughput for every evaluated point (feasible ones solid),
    the Pareto front joined, the limits noted, the reference configurations marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from arch.files import atomic_savefig

    ok = [r for r in results if r.get("status") == "ok"]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    feas = [r for r in ok if goal.feasible(r)]
    over = [r for r in ok if not goal.feasible(r)]
    if over:
        ax.scatter([r["throughput"] for r in over], [r["gflops_per_w"] for r in over], s=14, c="0.75",
                   label="over the area / power limit")
    if feas:
        ax.scatter([r["throughput"] for r in feas], [r["gflops_per_w"] for r in feas], s=16, c="tab:blue",
                   label="within the limits")
    front = pareto_front(results, goal)
    if front:
        ax.plot([r["throughput"] for r in front], [r["gflops_per_w"] for r in front], "-o", c="tab:red", ms=4,
                label="Pareto front")
    best = goal.best(results)
    if best:
        ax.scatter([best["throughput"]], [best["gflops_per_w"]], marker="*", s=220, c="gold", edgecolors="k",
                   zorder=5, label=f"best {goal.objective}")
    for name, r in (refs or {}).items():
        if r.get("status") == "ok":
            ax.scatter([r["throughput"]], [r["gflops_per_w"]], marker="D", s=60, c="k", zorder=6)
            ax.annotate(f"configuration {name}", (r["throughput"], r["gflops_per_w"]), textcoords="offset points",
                        xytext=(6, 6))
    c = goal.constraints
    limits = ", ".join(x for x in (f"area <= {c.area_mm2:g} mm^2" if c.area_mm2 else "",
                                   f"TDP <= {c.power_w:g} W" if c.power_w else "") if x)
    ax.set_xscale("log")
    ax.set_xlabel("training throughput (samples/s)")
    ax.set_ylabel("GFLOPS/W (everything counted)")
    ax.set_title(f"design space: {len(ok)} points measured" + (f"; limits: {limits}" if limits else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_savefig(fig, path)


def describe_point(r: dict, goal: Goal) -> str:
    """Why a point scores as it does: its limits, objective, and each workload's phases."""
    lines = [f"point {r['key']}: {_fmt_point(r['point'])}", f"  status {r['status']}"]
    if r.get("status") != "ok":
        return "\n".join(lines)
    v = goal.constraints.violations(r)
    lines.append(f"  area {r['area_mm2']:.1f} mm^2, TDP {r['tdp_w']:.2f} W, throughput {r['throughput']:.4g} "
                 f"samples/s, {r['throughput_per_tdp']:.4g} samples/s/W, {r['gflops_per_w']:.1f} GFLOPS/W; "
                 + ("within the limits" if not v else "breaks: " + "; ".join(v)))
    for w in r["workloads"]:
        tot = max(1, sum(w["phases"].values()))
        ph = ", ".join(f"{k} {c / tot * 100:.0f}%" for k, c in sorted(w["phases"].items(), key=lambda kv: -kv[1])
                       if c)
        lines.append(f"  {w['workload']} ({w['method']}, batch {w['batch']}): {w['cycles']} cycles per step, "
                     f"MAC utilization {w['mac_utilization'] * 100:.1f}%, {w['watts']:.2f} W; step by phase: {ph}")
    lines.append(f"  bound by {bottleneck(r)}: the search gives this phase resources first")
    return "\n".join(lines)
