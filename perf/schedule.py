"""The scheduler of heterogeneous training: it chooses a :class:`sw.train_hetero_place.Placement`
of an MLP's layers on the core groups of a :class:`arch.hetero.HeteroConfig` with the
performance model (:class:`perf.model.PerfModel`), ``docs/hybrid.md``.

Per layer and core kind the model predicts each phase of :mod:`sw.train_hetero`:

* forward: ``gemv`` (``m x n``), ``relu`` (hidden layers), the load of ``x`` (layer 0),
  the output layer's target load, loss gradient and unload;
* backward (``l >= 1``): ``gemv_t``, the ReLU mask;
* update: ``rank1``;
* with host transfers, also the unloads and loads of the vectors between layers.

Classes without a characterization of their own (the host loads and unloads, the mask,
the loss gradient's axpy) are predicted as the ``relu`` class at the same words per PE
(one instruction per word, an SRAM read or write per PE): a stated approximation whose
error the check reports (:mod:`perf.hybrid_run`). With ring transfers, each placement's
transfers are priced on the cores the compiler would choose (:func:`transfer_costs`:
their static schedule's exact cycles; ``ring_pass_along`` per hop and the crossings'
energy per beat). A step's cycles are the sum of its RUNs' (one core at a time) plus
each RUN's overhead; its energy is the dynamic energy (the model's total less the one
core's leakage it includes) plus the whole chip's leakage over the step (every core of
every group leaks all along).

Objectives: ``"energy"`` minimizes the energy per sample among the placements whose
throughput is at least ``min_throughput`` (default: the best single-kind chip of the same
area, :func:`same_area_chips`, predicted by the same model); ``"throughput"`` maximizes
samples/s among those within ``energy_budget`` joules per sample. Placements whose
forward, backward and update differ are not candidates (the compiler rejects them);
:func:`weight_copy_notes` prices their weight copy (``2 m n`` words per step) against
what moving the backward and update would save, in the schedule's notes. Search:
exhaustive over ``groups ** layers`` placements when that is at most
:data:`EXHAUSTIVE_MAX`, else greedy layer by layer (each layer on the kind with the
least energy per sample, or the least cycles, for its objective; transfers ignored in
the choice, priced in the result).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from arch.errors import InputError
from perf.model import PerfModel
from sim.power import DEFAULT_TECH, core_area, report_from_counters
from sim.power_hetero import crossing_pj_per_beat, crossings_area_mm2
from sw.layout import local_len
from sw.train_hetero import check_fit
from sw.train_hetero_ring import padded_len, ring_path, transfer_slots
from sw.train_hetero_place import Placement, PlacementError
from sw.train_host import TrainCompileError

__all__ = ["ScheduleError", "Schedule", "layer_costs", "predict_placement", "schedule", "same_area_chips",
           "model_for", "EXHAUSTIVE_MAX", "core_area_mm2", "leak_pj_per_cycle"]

EXHAUSTIVE_MAX = 4096
STORED_MODEL = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "characterize.json"
_ZERO = ("instructions", "mv", "mem_a_rd", "mem_a_wr", "mem_b_rd", "mem_b_wr", "rf_rd", "rf_wr")


class ScheduleError(InputError):
    """No placement meets the objective's constraint, or bad scheduler input (one line)."""


def core_area_mm2(cfg) -> float:
    return core_area(cfg)


def leak_pj_per_cycle(cfg) -> float:
    r = report_from_counters(cfg, dict({k: 0 for k in _ZERO}, cycles=1_000_000), n_cores=1)
    return r.energy_pj["leakage"] / 1_000_000


def _same_kind(a, b) -> bool:
    da, db = a.to_dict(), b.to_dict()
    da.pop("cores", None)
    db.pop("cores", None)
    return da == db


def model_for(hcfg, model: PerfModel | None = None, grid: str = "quick") -> tuple:
    """``(PerfModel, kind names per group)``: the given model, else the stored one
    (``benchmarks/results/characterize.json``) when it has every group's kind, else a
    characterization of the kinds (``grid``) on the fast engine."""
    if model is None and STORED_MODEL.exists():
        stored = PerfModel.from_dict(json.loads(STORED_MODEL.read_text())["model"])
        if all(any(_same_kind(c, k) for k in stored.kinds.values()) for c in hcfg.group_cfgs):
            model = stored
    if model is not None:
        names = []
        for c in hcfg.group_cfgs:
            hit = [n for n, k in model.kinds.items() if _same_kind(c, k) and "gemv" in model.fits[n]
                   and "ring_pass_along" in model.fits[n]]
            if not hit:
                raise ScheduleError(f"the performance model has no kind like group kind {c.nr}x{c.nr} {c.fmt}")
            names.append(hit[0])
        return model, names
    from perf.characterize import characterize

    kinds = {f"g{i}": c.replace(cores=1) for i, c in enumerate(hcfg.group_cfgs)}
    spad = ["spad_load", "spad_store"] if all(c.spad_kib for c in hcfg.group_cfgs) else []   # paged panels
    doc = characterize(kinds, ["gemv", "gemv_t", "rank1", "relu", "ring_pass_along"] + spad, grid=grid,
                       held_out=False)
    return PerfModel.fit(doc), list(kinds)


@dataclass
class LayerCost:
    """Predicted cycles and dynamic energy (pJ) of one layer's phases on one kind."""

    kind: str
    fits: bool
    phases: dict          #: phase -> {"cycles", "dyn_pj"}

    @property
    def cycles(self) -> float:
        return sum(p["cycles"] for p in self.phases.values())

    @property
    def dyn_pj(self) -> float:
        return sum(p["dyn_pj"] for p in self.phases.values())


def layer_costs(model: PerfModel, kind: str, cfg, mlp, l: int, transfers: str = "ring",
                rows: int | None = None) -> LayerCost:
    """Per phase (``forward``, ``backward``, ``update``) of layer ``l`` on ``kind``; with
    ring transfers, the vectors between layers are not loaded or unloaded by the host
    (the transfers are priced per placement, :func:`transfer_costs`). ``rows``: a row
    panel of the layer (:mod:`perf.schedule_split`)."""
    host = transfers == "host"
    nl = mlp.n_layers
    m, n = mlp.shape(l)
    m = rows or m
    L = lambda k: local_len(k, cfg.nr)                     # noqa: E731

    def op(cls, **shape):
        q = model.predict(kind, cls, shape)       # one RUN: less its overhead (HALT, start, drain)
        return q["cycles"] - cfg.run_overhead, q["energy_total_pj"] - q["energy_pj"].get("leakage", 0.0)

    def vec(words):
        return op("relu", n=words)

    ph = {"forward": [op("gemv", m=m, n=n)], "backward": [], "update": [op("rank1", m=m, n=n)]}
    if l == 0 or host:
        ph["forward"].append(vec(L(n)))                                   # load a
    if l < nl - 1:
        ph["forward"].append(vec(L(m)))                                   # relu
        if host:
            ph["forward"].append(vec(L(m)))                               # unload z
            ph["update"].append(vec(L(m)))                                # load g
    else:
        ph["forward"] += [vec(L(m)), vec(L(m)), vec(L(m))]                # load t, axpy, unload d
    if l >= 1:
        ph["backward"] = [op("gemv_t", m=m, n=n), vec(L(n))] + ([vec(L(n))] if host else [])  # gemv_t, mask, unload
    runs = {"forward": 1, "backward": 0, "update": 1 if l < nl - 1 else 0}     # RUNs per phase
    out = {}
    for name, ops in ph.items():
        cyc = sum(c for c, _ in ops) + runs[name] * cfg.run_overhead
        out[name] = {"cycles": cyc, "dyn_pj": sum(e for _, e in ops)}
    fits = L(m) * L(n) <= max(cfg.mem_a_words, cfg.mem_b_words)
    return LayerCost(kind, fits, out)


@dataclass
class Prediction:
    placement: Placement
    cycles: float
    energy_pj: float              #: per sample, everything (dynamic + the chip's leakage)
    dyn_pj: float
    leak_pj: float
    samples_per_s: float
    fits: bool
    reason: str = ""
    transfers: list = field(default_factory=list)     #: ring transfers (:func:`transfer_costs`)

    @property
    def j_per_sample(self) -> float:
        return self.energy_pj * 1e-12

    def to_dict(self) -> dict:
        return {"placement": self.placement.short(), "cycles": round(self.cycles, 1),
                "energy_uj_per_sample": round(self.energy_pj * 1e-6, 4), "dynamic_uj": round(self.dyn_pj * 1e-6, 4),
                "leakage_uj": round(self.leak_pj * 1e-6, 4), "samples_per_s": round(self.samples_per_s, 1),
                "fits": self.fits, "reason": self.reason,
                "transfers": [dict(x, dyn_pj=round(x["dyn_pj"], 1)) for x in self.transfers]}


def _chip_leak(hcfg) -> float:
    """Leakage in pJ per cycle of every core and crossing of ``hcfg`` (a crossing's area
    leaks at the logic density, as in :func:`sim.power_hetero.hetero_report`)."""
    x_mw = crossings_area_mm2(hcfg) * DEFAULT_TECH.leakage_mw_per_mm2_logic
    return (sum(g.count * leak_pj_per_cycle(c) for g, c in zip(hcfg.groups, hcfg.group_cfgs))
            + x_mw * 1e-3 / (hcfg.group_cfgs[0].clock_mhz * 1e6) * 1e12)


def transfer_costs(hcfg, mlp, cores: list, model: PerfModel, kinds: list) -> list:
    """The ring transfers of a step whose layers are on ``cores``: per transfer its name,
    path, cycles (the static schedule of :mod:`sw.train_hetero_ring`, exact) and dynamic
    energy: per hop, half the ``ring_pass_along`` class of the sending kind on 2 cores
    (a send and a receive of its beats; a relay's take-and-send is priced alike) plus
    the crossing's energy per sender beat (:func:`sim.power_hetero.crossing_pj_per_beat`)."""
    xing = {x.src: x for x in hcfg.crossings}
    out = []
    nl = mlp.n_layers
    todo = [(f"Ta{l}", cores[l - 1], cores[l], mlp.sizes[l]) for l in range(1, nl) if cores[l] != cores[l - 1]]
    todo += [(f"Tg{l}", cores[l + 1], cores[l], mlp.sizes[l + 1]) for l in range(nl - 2, -1, -1)
             if cores[l] != cores[l + 1]]
    for name, s, r, size in todo:
        out.append(dict(name=name, **_transfer(hcfg, s, r, size, model, kinds, xing)))
    return out


def _transfer(hcfg, s: int, r: int, size: int, model, kinds, xing) -> dict:
    """One transfer of ``size`` elements from core ``s`` to core ``r`` (see
    :func:`transfer_costs`)."""
    P = padded_len(hcfg, size)
    slots = transfer_slots(hcfg, s, r, P)
    path = ring_path(hcfg, s, r)
    cyc = max(ts[-1] + 1 for ts in slots.values()) + max(c.run_overhead for c in hcfg.group_cfgs)
    dyn = 0.0
    for k in path[:-1]:
        cfg = hcfg.core_cfg(k)
        beats = P // cfg.nr
        q = model.predict(kinds[hcfg.group_of(k)], "ring_pass_along", {"cores": 2, "m": beats})
        dyn += (q["energy_total_pj"] - q["energy_pj"].get("leakage", 0.0)) / 2
        if k in xing:
            dyn += beats * crossing_pj_per_beat(xing[k])
    return {"path": [path[0], path[-1]], "hops": len(path) - 1, "cycles": cyc, "dyn_pj": dyn}


def weight_copy_notes(hcfg, mlp, chosen: Prediction, costs: dict, model: PerfModel, kinds: list) -> list:
    """Per layer and other group: what running its backward and update there would save
    in phase cost against what the weight copy (``2 m n`` words per step over the ring,
    there and back, :func:`sw.train_hetero_place.weight_copy_words`) costs, in energy per
    sample (dynamic plus the chip's leakage over the cycles). One line each."""
    if not chosen.fits:
        return []
    if any(p.cores > 1 for p in chosen.placement.layers):       # a split: the layer's first panel's core
        from sw.train_hetero_split import layer_parts

        cores = [ps[0][0] for ps in layer_parts(hcfg, mlp, chosen.placement)]
    else:
        cores = check_fit(hcfg, mlp, chosen.placement)
    starts = [sum(g.count for g in hcfg.groups[:i]) for i in range(len(hcfg.groups))]
    xing = {x.src: x for x in hcfg.crossings}
    leak = _chip_leak(hcfg)
    out = []
    for l, p in enumerate(chosen.placement.layers):
        m, n = mlp.shape(l)
        here = costs[(l, p.forward)].phases
        for g in range(len(hcfg.groups)):
            if g == p.forward or not costs[(l, g)].fits:
                continue
            there = costs[(l, g)].phases

            def cost(ph):
                return sum(ph[k]["dyn_pj"] + leak * ph[k]["cycles"] for k in ("backward", "update"))

            saved = cost(here) - cost(there)
            go = _transfer(hcfg, cores[l], starts[g], m * n, model, kinds, xing)
            back = _transfer(hcfg, starts[g], cores[l], m * n, model, kinds, xing)
            copy = sum(x["dyn_pj"] + leak * x["cycles"] for x in (go, back))
            verdict = "never pays" if saved < copy else "would pay (not compiled)"
            out.append(f"layer {l}: backward and update on group {g} would save {saved * 1e-6:.3f} uJ per sample "
                       f"of phase cost; its weight copy ({2 * m * n} words, {go['cycles'] + back['cycles']} cycles) "
                       f"costs {copy * 1e-6:.3f} uJ: {verdict}")
    return out


def predict_placement(hcfg, mlp, groups: list, costs: dict, model: PerfModel | None = None,
                      kinds: list | None = None, transfers: str = "ring") -> Prediction:
    """The model's step of the uniform placement ``groups`` (a group per layer);
    ``costs[(l, g)]``: :func:`layer_costs`; with ring transfers, ``model`` and ``kinds``
    price them (:func:`transfer_costs`) on the cores the compiler would choose."""
    cyc = sum(costs[(l, g)].cycles for l, g in enumerate(groups))
    dyn = sum(costs[(l, g)].dyn_pj for l, g in enumerate(groups))
    clock = hcfg.group_cfgs[0].clock_mhz * 1e6
    pl = Placement.uniform(groups)
    reason, xfers = "", []
    try:
        cores = check_fit(hcfg, mlp, pl, transfers)
        if transfers == "ring":
            xfers = transfer_costs(hcfg, mlp, cores, model, kinds)
    except (PlacementError, TrainCompileError) as e:
        reason = str(e)
    cyc += sum(x["cycles"] for x in xfers)
    dyn += sum(x["dyn_pj"] for x in xfers)
    leak = _chip_leak(hcfg) * cyc
    return Prediction(pl, cyc, dyn + leak, dyn, leak, clock / cyc, not reason, reason, xfers)


def same_area_chips(hcfg) -> list:
    """Per group kind, the single-kind chip of (nearly) the hetero chip's area: ``(kind
    index, cores, residual fraction)``, cores even (the ring's rule) and at least 2. The
    hetero chip's area includes its crossings (:func:`sim.power_hetero.crossings_area_mm2`)."""
    total = (sum(g.count * core_area_mm2(c) for g, c in zip(hcfg.groups, hcfg.group_cfgs))
             + crossings_area_mm2(hcfg))
    out = []
    for i, c in enumerate(hcfg.group_cfgs):
        a = core_area_mm2(c)
        n = max(2, 2 * round(total / a / 2))
        out.append((i, n, (n * a - total) / total))
    return out


@dataclass
class Schedule:
    objective: str
    chosen: Prediction
    candidates: list                 #: every Prediction considered
    target: dict                     #: the constraint (min samples/s or energy budget) and where it came from
    costs: dict                      #: (layer, group) -> LayerCost
    kinds: list                      #: model kind per group
    search: str
    notes: list = field(default_factory=list)

    def describe(self, hcfg, mlp) -> str:
        lines = [f"schedule ({self.objective}) of {mlp.describe()} on {hcfg.cores} cores: placement "
                 f"{self.chosen.placement.short()} ({self.search})"]
        t = self.target
        lines.append("  constraint: " + (f">= {t['min_samples_per_s']:.1f} samples/s ({t['source']})"
                                         if "min_samples_per_s" in t else
                                         f"<= {t['energy_budget_j']:.3e} J per sample"))
        lines.append(f"  predicted: {self.chosen.cycles:.0f} cycles per step, {self.chosen.samples_per_s:.1f} "
                     f"samples/s, {self.chosen.energy_pj * 1e-6:.3f} uJ per sample (everything: "
                     f"dynamic {self.chosen.dyn_pj * 1e-6:.3f} + leakage of every core {self.chosen.leak_pj * 1e-6:.3f})")
        lines.append("  per layer and phase, predicted cycles / dynamic uJ on each group's kind:")
        ng = len(hcfg.groups)
        for l in range(mlp.n_layers):
            m, n = mlp.shape(l)
            cells = []
            for g in range(ng):
                c = self.costs[(l, g)]
                ph = " ".join(f"{k[0]} {v['cycles']:.0f}/{v['dyn_pj'] * 1e-6:.3f}" for k, v in c.phases.items()
                              if v["cycles"])
                mark = "*" if self.chosen.placement.layers[l].forward == g else " "
                cells.append(f"{mark}g{g} ({hcfg.group_cfgs[g].nr}x{hcfg.group_cfgs[g].nr}"
                             f"{'' if c.fits else ', no fit'}): {ph}")
            lines.append(f"    layer {l} ({m} x {n}): " + " | ".join(cells))
        for x in self.chosen.transfers:
            lines.append(f"    ring transfer {x['name']}: core {x['path'][0]} -> {x['path'][1]} ({x['hops']} hops): "
                         f"{x['cycles']} cycles / {x['dyn_pj'] * 1e-6:.3f}")
        lines.append("  why: " + self.why())
        lines += [f"  note: {x}" for x in self.notes]
        return "\n".join(lines)

    def why(self) -> str:
        ok = [p for p in self.candidates if p.fits]
        if self.objective == "energy":
            key = "least energy per sample"
        else:
            key = "most samples/s"
        feas = [p for p in ok if self._meets(p)]
        return (f"{key} among {len(feas)} placements meeting the constraint ({len(ok)} fit, "
                f"{len(self.candidates)} considered)")

    def _meets(self, p) -> bool:
        t = self.target
        if "min_samples_per_s" in t:
            return p.samples_per_s >= t["min_samples_per_s"] * (1 - 1e-9)
        return p.energy_pj * 1e-12 <= t["energy_budget_j"]

    def to_dict(self) -> dict:
        return {"objective": self.objective, "placement": self.chosen.placement.to_dict(),
                "predicted": self.chosen.to_dict(), "target": self.target, "search": self.search,
                "kinds": self.kinds, "candidates": [p.to_dict() for p in self.candidates], "notes": self.notes}


def schedule(hcfg, mlp, model: PerfModel | None = None, *, objective: str = "energy",
             energy_budget: float | None = None, min_throughput: float | None = None,
             grid: str = "quick", transfers: str = "ring", splits: bool = True) -> Schedule:
    """Choose the placement (see the module docstring). ``energy_budget`` in joules per
    sample (objective ``throughput``); ``min_throughput`` in samples/s (objective
    ``energy``; default the best single-kind chip of the same area); ``splits``: also
    the placements with hidden layers split across their group's cores
    (:mod:`perf.schedule_split`; ring transfers only)."""
    if objective not in ("energy", "throughput"):
        raise ScheduleError(f"unknown objective {objective!r}: energy or throughput")
    if objective == "throughput" and energy_budget is None:
        raise ScheduleError("objective throughput needs an energy budget (joules per sample)")
    if energy_budget is not None and not (energy_budget > 0 and math.isfinite(energy_budget)):
        raise ScheduleError(f"energy budget must be a positive number of joules, got {energy_budget}")
    if mlp.n_layers < 2 or mlp.loss != "mse":
        raise ScheduleError("the heterogeneous compiler needs a hidden layer and the MSE loss")
    model, kinds = model_for(hcfg, model, grid)
    ng, nl = len(hcfg.groups), mlp.n_layers
    costs = {(l, g): layer_costs(model, kinds[g], hcfg.group_cfgs[g], mlp, l, transfers)
             for l in range(nl) for g in range(ng)}
    pp = lambda gs: predict_placement(hcfg, mlp, list(gs), costs, model, kinds, transfers)   # noqa: E731
    notes = []
    if objective == "energy":
        if min_throughput is None:
            best, src = 0.0, "no single-kind chip fits"
            for g, cores, res in same_area_chips(hcfg):
                p = pp([g] * nl)
                if p.fits and p.samples_per_s > best:
                    best = p.samples_per_s
                    src = (f"the best single-kind chip of the same area: {cores} cores of group {g}'s kind "
                           f"({res:+.1%} area), all layers on it")
            target = {"min_samples_per_s": best, "source": src}
        else:
            target = {"min_samples_per_s": float(min_throughput), "source": "given"}
    else:
        target = {"energy_budget_j": float(energy_budget)}
    if ng ** nl <= EXHAUSTIVE_MAX:
        search = f"exhaustive over {ng ** nl} placements"
        cands = [pp(gs) for gs in itertools.product(range(ng), repeat=nl)]
    else:
        search = f"greedy layer by layer ({ng ** nl} placements)"
        pick = (lambda c: c.dyn_pj + _chip_leak(hcfg) * c.cycles) if objective == "energy" else (lambda c: c.cycles)
        gs = [min((g for g in range(ng) if costs[(l, g)].fits), key=lambda g: pick(costs[(l, g)]), default=0)
              for l in range(nl)]
        cands = [pp(gs)]
    if splits and transfers == "ring":
        from perf.schedule_split import predict_split, split_options

        for gs in [[x.forward for x in p.placement.layers] for p in list(cands)]:
            cands += [predict_split(hcfg, mlp, pl, model, kinds) for pl in split_options(hcfg, mlp, gs)]
        search += f", {len(cands)} with the hidden layers' core counts"
    s = Schedule(objective, None, cands, target, costs, kinds, search, notes)
    feas = [p for p in cands if p.fits and s._meets(p)]
    if not any(p.fits for p in cands):
        most = max(cands, key=lambda p: sum(x.cores for x in p.placement.layers))    # the most cores
        raise ScheduleError(f"no placement of {'-'.join(map(str, mlp.sizes))} fits the chip's memories and "
                            f"scratchpads ({len(cands)} considered); with the most cores, {most.placement.short()}: "
                            f"{most.reason}")
    if not feas:
        raise ScheduleError("no placement meets the constraint: " + (
            f"the fastest that fits makes {max((p.samples_per_s for p in cands if p.fits), default=0):.1f} samples/s"
            if "min_samples_per_s" in target else
            f"the least energy that fits is {min((p.energy_pj for p in cands if p.fits), default=0) * 1e-12:.3e} J"))
    s.chosen = (min(feas, key=lambda p: (p.energy_pj, -p.samples_per_s)) if objective == "energy"
                else max(feas, key=lambda p: (p.samples_per_s, -p.energy_pj)))
    if transfers == "ring":
        notes += weight_copy_notes(hcfg, mlp, s.chosen, costs, model, kinds)
    return s

