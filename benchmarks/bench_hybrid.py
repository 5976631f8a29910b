"""Heterogeneous chips with their schedule against single-kind chips of the same area:
energy per sample and throughput of batch-1 SGD (MSE) of the reference design's small
network, 784-500-500-500-10, and of its large one, 784-2500-2000-1500-1000-500-10
(:func:`large_network`: the mixes of :data:`LARGE_MIXES`, panels paged from the
scratchpad where they do not fit), all measured on the fast chip engine
(``docs/hybrid.md``).

* **Hybrid**: each candidate mix of S's 4 x 4 and L's 16 x 16 binary16 cores (the presets
  hetero-S and hetero-L and smaller mixes, :data:`MIXES`) is scheduled by
  :func:`perf.schedule.schedule` (objective ``energy``: least energy per sample at the
  throughput of the best single-kind chip of the same area, predicted by the same model);
  the best mix's schedule is compiled (:func:`sw.train_hetero.compile_hetero`, or
  :func:`sw.train_hetero_split.compile_split` when it splits layers across a group's
  cores) and run (:func:`perf.hybrid_run.run_placement`): :data:`STEPS` steps, the weights
  after every step bit for bit against the golden trainer; the placements of that mix
  that fit without a split, and the :data:`NOT_CHOSEN_SPLITS` next best split ones, are
  measured beside it (rows "not chosen"). A small
  case (hetero-tiny) also runs on the per-cycle chip engine, equal to the fast one, and
  both objectives are exercised on it (``objectives_on_hetero_tiny``).
* **Single-kind chips of the same area**: ``n`` cores of S's kind and of L's kind, ``n``
  even and as close to the hybrid chip's area as it gets (``sim.power.area_of_core``; the
  residual is stated), each measured two ways: with the same compiler (every layer on
  one core of the kind, a one-group chip; where the layers fit a core) and with the best
  existing single-kind compiler for batch-1 SGD, SGD across all the cores
  (:func:`sw.train_chip.compile_chip_sgd`, weights bit for bit against
  :class:`sw.golden_train_chip.GoldenChipSGD`).

Energy: ``everything`` scope (every category of the power model, the leakage of every
core all along and the crossings) per sample; the ``compared`` scope (FPU + SRAM +
scratchpad + buses) beside it (``docs/power.md``, "The convention"). Throughput:
samples/s at the clock, one sample per step. Weights seed 0, inputs seed 1
(``x ~ U(0, 1)``, ``t ~ U(-1, 1)``).
"""

from __future__ import annotations

import time

import numpy as np

from arch.config import PRESETS
from arch.hetero import CoreGroup, HeteroConfig, mix_kind
from perf.hybrid_run import energy_entry, run_placement
from perf.schedule import ScheduleError, core_area_mm2, same_area_chips, schedule
from sim.power import report_from_counters
from sim.power_hetero import crossings_area_mm2
from sim.sessions import ChipSession
from sw.golden_train_chip import GoldenChipSGD
from sw.mlp import MLP
from sw.train import init_weights
from sw.train_chip import compile_chip_sgd
from sw.train_hetero_place import Placement

SIZES = (784, 500, 500, 500, 10)
LARGE = (784, 2500, 2000, 1500, 1000, 500, 10)
LR = 0.01
STEPS = 2
#: candidate mixes: (cores of S's kind, cores of L's kind)
MIXES = [(16, 2), (32, 4), (4, 2), (2, 2), (8, 2)]
#: split placements measured beside the chosen one (the next best by predicted energy)
NOT_CHOSEN_SPLITS = 2
#: candidate mixes for the large network: hetero-L, mixes of L's 8 cores (the single-kind
#: L chip's count) with a few S cores, and smaller ones where no placement fits
LARGE_MIXES = [(32, 4), (8, 8), (4, 8), (2, 8), (2, 4), (2, 6), (4, 6)]


def _label(pl) -> str:
    return "layers split across cores" if any(x.cores > 1 for x in pl.layers) else "layers on cores"


def mix(ns: int, nl: int) -> HeteroConfig:
    return HeteroConfig((CoreGroup(ns, mix_kind("S")), CoreGroup(nl, mix_kind("L"))))


def mix_area(h: HeteroConfig) -> float:
    """A mix's area: its cores (each kind with the chip's ring FIFO) and crossings."""
    return sum(g.count * core_area_mm2(c) for g, c in zip(h.groups, h.group_cfgs)) + crossings_area_mm2(h)


def _chip_sgd(preset: str, cores: int, mlp: MLP, log) -> dict:
    """SGD across ``cores`` cores of ``preset``'s kind, on the fast chip engine."""
    cfg = PRESETS[preset].replace(cores=cores)
    try:
        tp = compile_chip_sgd(cfg, mlp)
    except Exception as e:                      # noqa: BLE001  (reported, not hidden)
        return {"compiler": "SGD across cores (sw.train_chip)", "error": f"{type(e).__name__}: {e}"}
    sess = ChipSession(cfg, "fast")
    W0 = init_weights(mlp, cfg.fmt, 0)
    tp.init(sess, W0)
    gold = GoldenChipSGD(cfg, mlp, W0, fused=tp.fused)
    rng = np.random.default_rng(1)
    for i in range(STEPS):
        x, t = rng.uniform(0, 1, mlp.n_in), rng.uniform(-1, 1, mlp.n_out)
        r = tp.run_step(sess, x, t)
        gold.step(x, t)
        got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
        if not all(np.array_equal(a, b) for a, b in zip(got, want)):
            raise AssertionError(f"{preset} x {cores}: weights differ from GoldenChipSGD's at step {i + 1}")
    ctr: dict = {}
    for c in r.core_counters:
        for k, v in c.items():
            ctr[k] = ctr.get(k, 0) + int(v)
    ctr["cycles"] = r.cycles
    rep = report_from_counters(cfg, ctr, flops=mlp.flops_per_step(), n_cores=cores)
    log(f"  SGD across {cores} {preset} cores: {r.cycles} cycles, "
        f"{sum(rep.energy_pj.values()) * 1e-6:.2f} uJ per sample (everything)")
    return {"compiler": "SGD across cores (sw.train_chip)", "cycles": r.cycles,
            "samples_per_s": cfg.clock_mhz * 1e6 / r.cycles, "golden_bit_exact": True, **energy_entry(rep)}


def _row(chip, compiler, placement, r, area=None) -> dict:
    """A table row of a measured run (``r``: :func:`run_placement`'s or :func:`_chip_sgd`'s
    result, or one with ``error``)."""
    row = {"chip": chip, "compiler": compiler, "placement": placement,
           "area mm2": round(area if area is not None else r["area_mm2"], 2)}
    if "error" in r:
        return {**row, "cycles": "does not compile", "samples/s": "", "uJ/sample everything": "",
                "uJ/sample compared": "", "model cycles err": "", "model energy err": ""}
    return {**row, "cycles": r["cycles"], "samples/s": round(r["samples_per_s"]),
            "uJ/sample everything": round(r["energy_uj_per_sample_everything"], 2),
            "uJ/sample compared": round(r["energy_uj_per_sample_compared"], 2),
            "model cycles err": f"{r['model_cycles_err']:+.1%}" if "model_cycles_err" in r else "",
            "model energy err": f"{r['model_energy_err']:+.1%}" if "model_energy_err" in r else ""}


def _savings(hyb, singles) -> tuple:
    """Against each single-kind measurement: the saving of the hybrid's energy per sample,
    split into the chips at most as fast as the hybrid (saving at no loss of throughput)
    and the faster ones (the hybrid loses throughput against them)."""
    eh, equal, faster = hyb["energy_uj_per_sample_everything"], [], []
    for sc in singles:
        for key in ("same_compiler", "sgd_across_cores"):
            m = sc[key]
            if "error" in m:
                continue
            e = m["energy_uj_per_sample_everything"]
            x = {"against": f"{sc['cores']} x {sc['kind']}, {key}", "their_samples_per_s": m["samples_per_s"],
                 "saving": (e - eh) / e, "throughput_ratio": hyb["samples_per_s"] / m["samples_per_s"]}
            (equal if m["samples_per_s"] <= hyb["samples_per_s"] * 1.000001 else faster).append(x)
    return equal, faster


def large_network(log) -> dict:
    """The large network on the :data:`LARGE_MIXES`: each scheduled (objective energy; no
    single-kind chip of the same area fits it with every layer on one core, so the
    constraint is any throughput); the mix with the least predicted energy per sample
    run with its schedule, and hetero-L's schedule beside it; the single-kind chips of
    the best mix's area with SGD across cores."""
    mlp = MLP(LARGE, "mse", LR)
    cands = []
    for ns, nl in LARGE_MIXES:
        h = mix(ns, nl)
        t0 = time.perf_counter()
        try:
            s = schedule(h, mlp)
        except ScheduleError as e:
            cands.append({"mix": f"{ns} S + {nl} L", "error": str(e)})
            log(f"large, {ns} S + {nl} L: {e}")
            continue
        area = mix_area(h)
        cands.append({"mix": f"{ns} S + {nl} L", "area_mm2": round(area, 2), "placement": s.chosen.placement.short(),
                      "predicted": s.chosen.to_dict(), "search": s.search,
                      "placements_that_fit": sum(p.fits for p in s.candidates),
                      "schedule_s": round(time.perf_counter() - t0, 1), "_s": s, "_h": h})
        log(f"large, {ns} S + {nl} L: {s.chosen.placement.short()}, predicted {s.chosen.energy_pj * 1e-6:.1f} uJ, "
            f"{s.chosen.samples_per_s:.0f} samples/s ({s.search})")
    ok = [c for c in cands if "_s" in c]
    best = min(ok, key=lambda c: c["_s"].chosen.energy_pj)
    h, s = best["_h"], best["_s"]
    log(f"large, best mix {best['mix']}: {s.chosen.placement.short()}")
    hyb = run_placement(h, mlp, s.chosen.placement, steps=STEPS, predicted=s.chosen.to_dict(), log=log)
    rows = [_row(f"hybrid {best['mix']}", _label(s.chosen.placement) + ", scheduled", s.chosen.placement.short(), hyb)]
    others = []
    for c in ok:
        if c is not best and c["mix"] == "32 S + 4 L":          # hetero-L: its S cores work in its schedule
            log(f"large, hetero-L's schedule {c['placement']}")
            o = run_placement(c["_h"], mlp, c["_s"].chosen.placement, steps=STEPS, predicted=c["predicted"], log=log)
            others.append(o)
            rows.append(_row(f"hybrid {c['mix']} (hetero-L)", _label(c["_s"].chosen.placement) + ", scheduled",
                             c["placement"], o))
    singles = _single_kind_chips(h, mlp, log)
    for sc in singles:
        for key, label in (("same_compiler", "layers on cores"), ("sgd_across_cores", "SGD across cores")):
            rows.append(_row(f"{sc['cores']} x {sc['kind']} ({sc['area_residual']:+.1%} area)", label,
                             "all on the kind" if key == "same_compiler" else "row panels on every core",
                             sc[key], sc["area_mm2"]))
    equal, faster = _savings(hyb, singles)
    for c in cands:
        c.pop("_s", None)
        c.pop("_h", None)
    return slim_large({"sizes": list(LARGE), "run": True, "best_mix": best["mix"],
                       "placement": s.chosen.placement.short(), "rows": rows, "candidates": cands, "hybrid": hyb,
                       "others": others, "single_kind": singles, "equal_throughput_saving": equal,
                       "faster_single_kind": faster, "schedule": s.to_dict()})


def slim_large(d: dict) -> dict:
    """The large network's record without its bulk (hundreds of sections and candidates):
    the runs without their per-section lists and counters, the predictions without their
    transfers, the schedule's candidates only those that fit."""
    def run(r):
        return {**{k: v for k, v in r.items() if k not in ("step_counters", "ring_transfers")},
                "steps": [{k: v for k, v in st.items() if k != "runs"} for st in r["steps"]]}

    def pred(p):
        return {k: v for k, v in p.items() if k != "transfers"}
    sch = {k: v for k, v in d["schedule"].items() if k != "candidates"}
    sch["candidates_that_fit"] = [pred(p) for p in d["schedule"]["candidates"] if p["fits"]]
    sch["predicted"] = pred(sch["predicted"])
    return {**d, "hybrid": run(d["hybrid"]), "others": [run(o) for o in d["others"]], "schedule": sch,
            "candidates": [{**c, "predicted": pred(c["predicted"])} if "predicted" in c else c
                           for c in d["candidates"]]}


def _large_note(large: dict) -> str:
    """The note's sentences on the large network."""
    hyb, sk = large["hybrid"], {f"{x['cores']} x {x['kind']}": x for x in large["single_kind"]}
    tried = "; ".join(f"{c['mix']}: " + (f"{c['placement']} ({c['placements_that_fit']} placements fit, "
                                         f"{c['search']}, {c['schedule_s']} s)" if "error" not in c else
                                         "no placement fits") for c in large["candidates"])
    paged = ", ".join(f"layer {p['layer']} on core {p['core']} ({p['pages']} pages)" for p in hyb["paged_panels"])
    return (f"Large network {'-'.join(map(str, LARGE))}, scheduled on the mixes {tried}. Best: "
            f"{large['best_mix']} with {large['placement']}: {hyb['cycles']} cycles, "
            f"{hyb['samples_per_s']:.0f} samples/s, {hyb['energy_uj_per_sample_everything']:.1f} uJ per sample "
            f"(model {hyb['model_cycles_err']:+.1%} cycles, {hyb['model_energy_err']:+.1%} energy); panels paged "
            f"from the scratchpad: {paged or 'none'}. Single-kind chips of its area, SGD across cores: "
            + "; ".join(f"{k}: " + (f"{v['sgd_across_cores']['cycles']} cycles, "
                                    f"{v['sgd_across_cores']['energy_uj_per_sample_everything']:.1f} uJ"
                                    if "error" not in v['sgd_across_cores'] else "does not compile")
                        for k, v in sk.items())
            + " (the layers-on-cores compiler compiles it on neither). Energy saving at no loss of "
            "throughput: " + ("; ".join(f"{x['saving']:+.1%} against {x['against']}"
                                        for x in large["equal_throughput_saving"]) or "none measured")
            + "; against the faster chips (the hybrid loses throughput): "
            + ("; ".join(f"{x['saving']:+.1%} against {x['against']} at {x['throughput_ratio']:.2f}x its samples/s"
                         for x in large["faster_single_kind"]) or "none") + ".")


def _single_kind_chips(h, mlp, log) -> list:
    """The S-like and L-like chips of ``h``'s area (:func:`same_area_chips`), each measured
    with the layers-on-cores compiler and with SGD across its cores."""
    singles = []
    for g, n, res in same_area_chips(h):
        kind = "S" if g == 0 else "L"
        cfg = PRESETS[kind]
        one = HeteroConfig((CoreGroup(n, cfg),))
        singles.append({"kind": kind, "cores": n, "area_mm2": round(n * core_area_mm2(cfg), 2),
                        "area_residual": res, "same_compiler": _same_compiler(one, mlp, log),
                        "sgd_across_cores": _chip_sgd(kind, n, mlp, log)})
    return singles


def _same_compiler(hcfg, mlp, log) -> dict:
    try:
        r = run_placement(hcfg, mlp, Placement.uniform([0] * mlp.n_layers), steps=STEPS)
    except Exception as e:                      # noqa: BLE001
        return {"compiler": "layers on cores (sw.train_hetero)", "error": f"{type(e).__name__}: {e}"}
    log(f"  same compiler on {hcfg.cores} cores: {r['cycles']} cycles")
    return {"compiler": "layers on cores (sw.train_hetero)", **{k: r[k] for k in (
        "cycles", "samples_per_s", "energy_uj_per_sample_everything", "energy_uj_per_sample_compared")},
        "golden_bit_exact": True}


def cycle_engine_check(log) -> list:
    """A small case on the per-cycle chip engine beside the fast one: hetero-tiny,
    12-10-9-5, the scheduled placement and one whose vectors cross both crossings."""
    from arch.hetero import HETERO_PRESETS

    h, mlp = HETERO_PRESETS["hetero-tiny"], MLP((12, 10, 9, 5), "mse", 0.05)
    out = []
    for pl in (schedule(h, mlp).chosen.placement, Placement.uniform([0, 1, 0])):
        f, c = (run_placement(h, mlp, pl, steps=STEPS, engine=e) for e in ("fast", "cycle"))
        same = f["step_counters"] == c["step_counters"] and f["cycles"] == c["cycles"]
        if not same:
            raise AssertionError(f"hetero-tiny {pl.short()}: the engines differ")
        log(f"hetero-tiny {pl.short()}: {c['cycles']} cycles on both engines, counters equal, golden bit for bit")
        out.append({"chip": "hetero-tiny", "network": mlp.describe(), "placement": pl.short(), "cycles": c["cycles"],
                    "ring_transfers": c["ring_transfers"], "engines_equal": True, "golden_bit_exact": True})
    return out


def objectives_on_tiny(log) -> list:
    """Both objectives on hetero-tiny (12-10-9-5), each choice run on the fast engine:
    least energy at the same-area throughput and at 80 % of it; most throughput under
    budgets between the least and the most energy of the candidates."""
    from arch.hetero import HETERO_PRESETS

    h, mlp = HETERO_PRESETS["hetero-tiny"], MLP((12, 10, 9, 5), "mse", 0.05)
    s0 = schedule(h, mlp)
    es = sorted(p.energy_pj for p in s0.candidates if p.fits)
    cases = [("energy", {}), ("energy", {"min_throughput": 0.8 * s0.target["min_samples_per_s"]}),
             ("throughput", {"energy_budget": es[0] * 1e-12 * 1.000001}),
             ("throughput", {"energy_budget": es[len(es) // 2] * 1e-12})]
    out = []
    for obj, kw in cases:
        s = schedule(h, mlp, objective=obj, **kw)
        r = run_placement(h, mlp, s.chosen.placement, steps=STEPS, predicted=s.chosen.to_dict())
        out.append({"objective": obj, "constraint": s.target, "placement": s.chosen.placement.short(),
                    "predicted": s.chosen.to_dict(), "cycles": r["cycles"], "samples_per_s": r["samples_per_s"],
                    "energy_uj_per_sample_everything": r["energy_uj_per_sample_everything"],
                    "model_cycles_err": r["model_cycles_err"], "model_energy_err": r["model_energy_err"],
                    "golden_bit_exact": True})
        log(f"hetero-tiny, {obj} {kw}: {s.chosen.placement.short()}, {r['cycles']} cycles, "
            f"{r['energy_uj_per_sample_everything']:.4f} uJ")
    return out


def run(log=print) -> dict:
    t0 = time.perf_counter()
    mlp = MLP(SIZES, "mse", LR)
    cands = []
    for ns, nl in MIXES:
        h = mix(ns, nl)
        try:
            s = schedule(h, mlp)
        except ScheduleError as e:
            cands.append({"mix": f"{ns} S + {nl} L", "error": str(e)})
            continue
        area = mix_area(h)
        cands.append({"mix": f"{ns} S + {nl} L", "area_mm2": round(area, 2), "placement": s.chosen.placement.short(),
                      "predicted": s.chosen.to_dict(), "target": s.target, "_s": s, "_h": h})
        log(f"{ns} S + {nl} L: {s.chosen.placement.short()}, predicted {s.chosen.energy_pj * 1e-6:.2f} uJ, "
            f"{s.chosen.samples_per_s:.0f} samples/s")
    ok = [c for c in cands if "_s" in c]
    best = min(ok, key=lambda c: c["_s"].chosen.energy_pj)
    h, s = best["_h"], best["_s"]
    log(f"best mix {best['mix']}:\n" + s.describe(h, mlp))
    hyb = run_placement(h, mlp, s.chosen.placement, steps=STEPS, predicted=s.chosen.to_dict(), log=log)
    singles = _single_kind_chips(h, mlp, log)
    rows = [_row(f"hybrid {best['mix']}", _label(s.chosen.placement) + ", scheduled", s.chosen.placement.short(),
                 hyb)]
    others = []
    split = lambda p: any(x.cores > 1 for x in p.placement.layers)       # noqa: E731
    fit = sorted((p for p in s.candidates if p.fits and p.placement != s.chosen.placement), key=lambda p: p.energy_pj)
    for p in [p for p in fit if not split(p)] + [p for p in fit if split(p)][:NOT_CHOSEN_SPLITS]:
        log(f"not chosen, measured: {p.placement.short()}")
        o = run_placement(h, mlp, p.placement, steps=STEPS, predicted=p.to_dict(), log=log)
        others.append(o)
        rows.append(_row(f"hybrid {best['mix']}", _label(p.placement) + ", not chosen", p.placement.short(), o))
    for sc in singles:
        for key, label in (("same_compiler", "layers on cores"), ("sgd_across_cores", "SGD across cores")):
            rows.append(_row(f"{sc['cores']} x {sc['kind']} ({sc['area_residual']:+.1%} area)", label,
                             "all on the kind" if key == "same_compiler" else "row panels on every core",
                             sc[key], sc["area_mm2"]))
    # the saving at equal throughput: against the single-kind chips the hybrid's throughput matches
    eh = hyb["energy_uj_per_sample_everything"]
    equal, faster = _savings(hyb, singles)
    leak = hyb["steps"][-1]["energy_pj_by_category"].get("leakage", 0.0) * 1e-6
    large = large_network(log)
    rows += [{**r, "chip": f"large net: {r['chip']}"} for r in large["rows"]]
    note = (f"Batch-1 SGD (MSE) of {mlp.describe()}, {STEPS} steps per chip on the fast chip engine, weights bit "
            f"for bit against the golden trainers; energy per sample in the 'everything' scope (all categories, "
            f"every core's leakage all along, crossings), 'compared' (FPU + SRAM + scratchpad + buses) beside it. "
            f"Best hybrid: {best['mix']} ({s.search}); its placement {s.chosen.placement.short()} "
            f"(g:k = a layer's row panels on k cores of group g), leakage {leak:.1f} of {eh:.1f} uJ per sample: "
            "one layer's phase at a time, on the cores of one group, while the other group leaks. "
            "Energy saving at no loss of throughput (against the single-kind chips at most as fast as the hybrid): "
            + ("; ".join(f"{x['saving']:+.1%} against {x['against']}" for x in equal) if equal else "none measured")
            + ". Single-kind chips faster than the hybrid (the hybrid loses throughput against them): "
            + ("; ".join(f"{x['against']}: {x['their_samples_per_s']:.0f} samples/s" for x in faster) if faster
               else "none") + ". " + _large_note(large))
    cyc_check = cycle_engine_check(log)
    objectives = objectives_on_tiny(log)
    note += (" Per-cycle engine: hetero-tiny 12-10-9-5, placements "
             + ", ".join(f"{x['placement']} ({x['cycles']} cycles, {len(x['ring_transfers'])} ring transfers)"
                         for x in cyc_check) + ", counters and cycles equal to the fast engine's, weights bit for bit.")
    for c in cands:
        c.pop("_s", None)
        c.pop("_h", None)
    return {"title": "Heterogeneous chip with its schedule vs single-kind chips of the same area "
                     "(784-500-500-500-10 and 784-2500-2000-1500-1000-500-10, fast chip engine)",
            "note": note, "rows": rows, "candidates": cands, "hybrid": hyb, "not_chosen": others,
            "cycle_engine_check": cyc_check, "objectives_on_hetero_tiny": objectives,
            "single_kind": singles,
            "equal_throughput_saving": equal, "schedule": s.to_dict(), "large_network": large,
            "energy_convention": "everything (docs/power.md), compared beside it", "wall_s": round(time.perf_counter() - t0, 1)}
