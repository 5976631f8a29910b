"""Checking a schedule by running it: the placement compiled (:func:`sw.train_hetero.compile_hetero`),
steps run on a chip engine, the weights after every step compared bit for bit with
:class:`sw.golden_train_hetero.GoldenHetero`, the measured cycles with the compiler's and
the scheduler's predictions, and the energy (:func:`sim.power_hetero.hetero_report`)
with the scheduler's (``docs/hybrid.md``)."""

from __future__ import annotations

import time

import numpy as np

from sim.chip_model import ChipModel
from sim.power_hetero import hetero_report
from sw.golden_train_hetero import GoldenHetero, GoldenHeteroSplit
from sw.train_hetero import compile_hetero
from sw.train_hetero_split import compile_split
from sw.train_host import init_weights

__all__ = ["run_placement", "energy_entry", "memory_of", "scratchpad_of"]


def memory_of(model):
    """``memory(k, bank)`` of a chip model on either engine."""
    if model.engine == "fast":
        return lambda k, b: model.cores[k].memory(b)
    from sim.fast_model import core_state

    def mem(k, b):
        cfg = model.core_cfgs[k]
        return core_state(model.cores[k])["mem_a" if b == "a" else "mem_b"].reshape(cfg.nr, cfg.nr, -1)
    return mem


def scratchpad_of(model):
    """``scratchpad(k, base, n)`` of a chip model on either engine: core ``k``'s beats
    ``base ..`` as integers."""
    if model.engine == "fast":
        from arch.lanes import pack_beats

        return lambda k, base, n: pack_beats(model.cores[k].state.spad[base:base + n], model.core_cfgs[k].fmt.width)
    return lambda k, base, n: list(model.cores[k].spad[base:base + n])


def energy_entry(rep, samples: int = 1) -> dict:
    """Energy per sample in both scopes of ``docs/power.md`` (everything: every category,
    leakage and the crossings included; compared: FPU + SRAM + scratchpad + buses)."""
    from sim.power import COMPARED

    tot = sum(rep.energy_pj.values())
    cmp_ = sum(v for k, v in rep.energy_pj.items() if k in COMPARED)
    return {"energy_uj_per_sample_everything": tot * 1e-6 / samples,
            "energy_uj_per_sample_compared": cmp_ * 1e-6 / samples,
            "energy_pj_by_category": {k: round(v / samples, 1) for k, v in rep.energy_pj.items()}}


def run_placement(hcfg, mlp, placement, *, steps: int = 2, engine: str = "fast", weight_seed: int = 0,
                  input_seed: int = 1, predicted: dict | None = None, log=None, transfers: str = "ring") -> dict:
    """Run ``steps`` SGD steps of ``placement`` on ``engine``; raises AssertionError when
    a weight differs from the golden's or the cycles from the compiler's prediction.
    ``predicted``: the scheduler's prediction (:meth:`perf.schedule.Prediction.to_dict`)
    to report the model's errors against."""
    t0 = time.perf_counter()
    split = any(p.cores > 1 for p in placement.layers)
    if split:
        prog = compile_split(hcfg, mlp, placement)
    else:
        prog = compile_hetero(hcfg, mlp, placement, transfers=transfers)
    t_compile = time.perf_counter() - t0
    fmt = hcfg.core_cfg(prog.parts[0][0][0] if split else prog.cores[0]).fmt
    W0 = init_weights(mlp, fmt, weight_seed)
    if len({c.fmt for c in hcfg.group_cfgs}) > 1:      # kinds of several formats: the values, not the bits
        W0 = [fmt.to_float(W) for W in W0]
    model = ChipModel(hcfg, engine)
    prog.init(model, W0)
    gold = (GoldenHeteroSplit(hcfg, mlp, prog.parts, W0, prog.page_rows()) if split else
            GoldenHetero(hcfg, mlp, prog.cores, W0, transfers=transfers))
    rng = np.random.default_rng(input_seed)
    out = []
    for i in range(steps):
        x, t = rng.uniform(0, 1, mlp.n_in), rng.uniform(-1, 1, mlp.n_out)
        ts = time.perf_counter()
        r = prog.run_step(model, x, t)
        wall = time.perf_counter() - ts
        g = gold.step(x, t)
        got = (prog.weights(model, padded=True, memory=memory_of(model), scratchpad=scratchpad_of(model)) if split
               else prog.weights(model, padded=True, memory=memory_of(model)))
        want = gold.weights(padded=True)
        bad = [l for l, (a, b) in enumerate(zip(got, want)) if not np.array_equal(a, b)]
        if bad or r.loss != g["loss"]:
            raise AssertionError(f"step {i + 1}: weights of layers {bad} (loss {r.loss} vs {g['loss']}) differ "
                                 f"from GoldenHetero's")
        rep = hetero_report(hcfg, r.counters, r.cycles, flops=mlp.flops_per_step())
        st = {"step": i + 1, "loss": r.loss, "golden_bit_exact": True, "cycles": r.cycles,
              "compiler_predicted_cycles": prog.step_cycles(),
              "runs": [{"phase": p, "core": k, "cycles": c} for p, k, c in r.runs], "wall_s": round(wall, 2),
              "gflops_per_w_everything": rep.gflops_per_w_all, "gflops_per_w_compared": rep.gflops_per_w_compared,
              "area_mm2": rep.area_mm2, **energy_entry(rep)}
        if log:
            log(f"  step {i + 1}: loss {r.loss:.4f}, {r.cycles} cycles, "
                f"{st['energy_uj_per_sample_everything']:.3f} uJ (everything), weights = golden bit for bit")
        out.append(st)
    last = out[-1]
    clock = hcfg.group_cfgs[0].clock_mhz * 1e6
    res = {"placement": placement.to_dict(), "cores": prog.cores, "engine": engine, "transfers": transfers,
           "ring_transfers": ({x.name: {"path": sorted(x.pcs), "cycles": x.cycles} for x in prog.sections
                               if x.kind == "ring"} if split else
                              {k: {"path": v["path"], "cycles": v["cycles"]} for k, v in prog.rings.items()}),
           "steps": out, "step_counters": r.counters,
           "cycles": last["cycles"], "samples_per_s": clock / last["cycles"],
           "energy_uj_per_sample_everything": last["energy_uj_per_sample_everything"],
           "energy_uj_per_sample_compared": last["energy_uj_per_sample_compared"],
           "area_mm2": last["area_mm2"]["total"], "compile_s": round(t_compile, 2),
           "paged_panels": [{"layer": l, "core": c, "pages": len(sp.pages), "words_per_pe": sp.words}
                            for c, d in sorted(getattr(prog, "spad", {}).items()) for l, sp in sorted(d.items())],
           "weight_seed": weight_seed, "input_seed": input_seed}
    if predicted:
        res["model_cycles"] = predicted["cycles"]
        res["model_energy_uj"] = predicted["energy_uj_per_sample"]
        res["model_cycles_err"] = (predicted["cycles"] - last["cycles"]) / last["cycles"]
        e = last["energy_uj_per_sample_everything"]
        res["model_energy_err"] = (predicted["energy_uj_per_sample"] - e) / e
    return res
