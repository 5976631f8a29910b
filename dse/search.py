"""Searches over a :class:`dse.space.Space`: exhaustive enumeration, random sampling, and
a critical-path-driven local search with a final global step over the best designs.

The critical-path search starts from a feasible design (a random one, by its seed), reads which phase bounds its
training step (from the counters and the compiler's breakdown: compute, collectives,
memory traffic, host), and tries first the moves that give resources to that phase (more
PEs for compute; fewer, larger cores for collectives; more memory for paging; larger
minibatches or CP for the host's turnaround), shrinking resources when the design breaks
the area or power limit. It climbs while a move improves the objective, keeps the top
``k`` designs, and ends with a global step: the whole neighbourhood of each of the top
``k`` (climbing again from any better point), until none improves.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from arch.errors import UsageError
from dse.evaluate import OBJECTIVES
from dse.space import METHOD_AXIS

__all__ = ["Constraints", "Goal", "exhaustive", "random_search", "critical_path_search", "pareto_front", "SEARCHES"]


@dataclass(frozen=True)
class Constraints:
    """Area (mm^2), average power (W, the TDP: the largest over the workloads) and an
    optional minimum throughput (samples/s)."""

    area_mm2: float | None = None
    power_w: float | None = None
    min_throughput: float | None = None

    def violations(self, r: dict) -> list[str]:
        if r.get("status") != "ok":
            return [r.get("status", "not evaluated")]
        out = []
        if self.area_mm2 is not None and r["area_mm2"] > self.area_mm2:
            out.append(f"area {r['area_mm2']:.1f} > {self.area_mm2:g} mm^2")
        if self.power_w is not None and r["tdp_w"] > self.power_w:
            out.append(f"power {r['tdp_w']:.2f} > {self.power_w:g} W")
        if self.min_throughput is not None and r["throughput"] < self.min_throughput:
            out.append(f"throughput {r['throughput']:.3g} < {self.min_throughput:g} samples/s")
        return out

    def to_dict(self) -> dict:
        return {"area_mm2": self.area_mm2, "power_w": self.power_w, "min_throughput": self.min_throughput}


@dataclass(frozen=True)
class Goal:
    """An objective (:data:`dse.evaluate.OBJECTIVES`) under :class:`Constraints`."""

    objective: str = "throughput_per_tdp"
    constraints: Constraints = Constraints()

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise UsageError(f"--objective {self.objective!r}: one of {', '.join(OBJECTIVES)}")

    def feasible(self, r: dict) -> bool:
        return not self.constraints.violations(r)

    def score(self, r: dict) -> float:
        """Higher is better; ``-inf`` for an infeasible point."""
        if not self.feasible(r):
            return float("-inf")
        key, up = OBJECTIVES[self.objective]
        return r[key] if up else -r[key]

    def best(self, results) -> dict | None:
        ok = [r for r in results if self.feasible(r)]
        return max(ok, key=self.score) if ok else None


def exhaustive(ev, goal: Goal, budget: int | None = None, seed: int = 0) -> list[dict]:
    """Every point of the space."""
    pts = list(ev.space.points())
    if budget is not None and budget < len(pts):
        raise UsageError(f"--budget {budget}: exhaustive search needs all {len(pts)} points")
    return ev.evaluate(pts)


def random_search(ev, goal: Goal, budget: int | None = None, seed: int = 0) -> list[dict]:
    """``budget`` points drawn without replacement (all of them without a budget)."""
    pts = list(ev.space.points())
    random.Random(seed).shuffle(pts)
    return ev.evaluate(pts[:budget] if budget else pts)


#: per bottleneck phase: (axis, direction) moves that give it resources, in order of preference
_GUIDE = {
    "compute": [("cores", 1), ("nr", 1), ("clock_mhz", 1), ("mul_latency", -1), ("add_latency", -1),
                (METHOD_AXIS, 1)],
    "collectives": [("cores", -1), ("nr", 1), (METHOD_AXIS, 1), ("clock_mhz", 1)],
    "memory": [("mem_a_words", 1), ("mem_b_words", 1), ("spad_kib", 1), ("cores", 1), ("nr", 1)],
    "host": [(METHOD_AXIS, 1), ("cores", -1), ("clock_mhz", 1)],
    "overhead": [("nr", -1), ("cores", -1), ("ucode_depth", 1), (METHOD_AXIS, 1)],
    # microcode LOADs between RUNs: a microcode that holds the step, fewer images to load
    "microcode": [("ucode_depth", 1), ("cores", -1), (METHOD_AXIS, 1)],
}
#: moves that shrink area and power, for a design over its limits
_SHRINK = [("mem_a_words", -1), ("mem_b_words", -1), ("spad_kib", -1), ("cores", -1), ("nr", -1),
           ("clock_mhz", -1), ("n_regs", -1), ("ucode_depth", -1)]


def bottleneck(r: dict) -> str:
    """The phase with the most cycles, summed over the workloads (weighted equally)."""
    tot: dict = {}
    for w in r.get("workloads", []):
        cyc = max(1, sum(w["phases"].values()))
        for k, v in w["phases"].items():
            tot[k] = tot.get(k, 0.0) + v / cyc
    return max(tot, key=tot.get) if tot else "compute"


def _ranked_moves(space, point: dict, r: dict, goal: Goal) -> list[dict]:
    """The neighbours of ``point``, the critical path's moves first."""
    moves = space.neighbours(point)
    guide = _SHRINK if r.get("status") == "ok" and not goal.feasible(r) else _GUIDE[bottleneck(r)]
    rank = {m: i for i, m in enumerate(guide)}
    return [p for _, _, p in sorted(moves, key=lambda m: rank.get((m[0], m[1]), len(rank)))]


def _climb(ev, goal: Goal, start: dict, first: int, budget) -> dict:
    cur = start
    cur_r = ev.evaluate([cur])[0]
    while True:
        moves = _ranked_moves(ev.space, cur, cur_r, goal)
        better = None
        for chunk in (moves[:first], moves[first:]):       # the guided moves, then the rest
            if not chunk or (budget and ev.spent >= budget):
                continue
            res = ev.evaluate(chunk)
            cand = max(zip(chunk, res), key=lambda pr: goal.score(pr[1]))
            if goal.score(cand[1]) > goal.score(cur_r):
                better = cand
                break
        if better is None:
            return cur
        cur, cur_r = better


def _start(ev, goal: Goal, rng: random.Random) -> dict:
    """A feasible starting design: a random point (``rng``), else more random points,
    four at a time (the best feasible one of the first group that has one)."""
    pts = list(ev.space.points())
    rng.shuffle(pts)
    for chunk in [pts[:1]] + [pts[i:i + 4] for i in range(1, min(len(pts), 65), 4)]:
        res = ev.evaluate(chunk)
        ok = [(p, r) for p, r in zip(chunk, res) if goal.feasible(r)]
        if ok:
            return max(ok, key=lambda pr: goal.score(pr[1]))[0]
    return pts[0]


def critical_path_search(ev, goal: Goal, budget: int | None = None, seed: int = 0, top_k: int = 3,
                         first: int = 3, start: dict | None = None) -> list[dict]:
    """The critical-path local search with a global step over the top ``top_k``.
    ``start``: the design to climb from (a point of the space, e.g. a reference design;
    default a random feasible one, by ``seed``). ``budget``: the most points measured
    (:attr:`dse.engine.Evaluator.spent`: cached ones count, so that a search resumed
    from its cache takes the same path as one never interrupted)."""
    rng = random.Random(seed)
    if start is not None:
        try:
            ev.space.index(start)
        except (KeyError, ValueError):
            raise UsageError(f"start {start}: not a point of the space") from None
    else:
        start = _start(ev, goal, rng)
    _climb(ev, goal, start, first, budget)
    done: set = set()
    while not (budget and ev.spent >= budget):
        ranked = sorted((r for r in ev.asked_results() if goal.feasible(r)), key=goal.score, reverse=True)
        top = [r["point"] for r in ranked[:top_k]]
        todo = [p for p in top if ev.key(p) not in done]
        if not todo:
            break
        best_before = goal.score(ranked[0]) if ranked else float("-inf")
        for p in todo:
            done.add(ev.key(p))
            nb = [q for _, _, q in ev.space.neighbours(p)]
            res = ev.evaluate(nb)
            for q, r in zip(nb, res):
                if goal.score(r) > best_before:
                    _climb(ev, goal, q, first, budget)
    return ev.asked_results()


SEARCHES = {"heuristic": critical_path_search, "random": random_search, "exhaustive": exhaustive}


def pareto_front(results, goal: Goal) -> list[dict]:
    """Feasible points not dominated in (throughput, GFLOPS/W), by throughput."""
    ok = sorted((r for r in results if goal.feasible(r)), key=lambda r: (-r["throughput"], -r["gflops_per_w"]))
    front, best_eff = [], float("-inf")
    for r in ok:
        if r["gflops_per_w"] > best_eff:
            front.append(r)
            best_eff = r["gflops_per_w"]
    return front
