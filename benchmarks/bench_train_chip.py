"""Batch-1 SGD across the cores of a chip: cycles, MAC utilization, GFLOPS/W, and where
the cycles go, at the reference design's configuration S (32 cores of 4 x 4 binary16 PEs)
for its small network, and on a 4-core chip for the scaling.

Each case is compiled with :func:`sw.train_chip.compile_chip_sgd` (row panels of every
layer per core, joined by ring collectives), its He-uniform initial weights
(:func:`sw.train.init_weights`, seed :data:`WEIGHT_SEED`) loaded, and :data:`STEPS` SGD
steps run on the fast chip engine (:class:`sw.train_chip.ChipSession` ``"fast"``, equal to
the per-cycle chip model, see docs/simulators.md) with random inputs ``x ~ U(0, 1)`` and
targets (a random class for ``softmax_ce``, ``U(-1, 1)`` for ``mse``) from
``numpy.random.default_rng(INPUT_SEED)``. After every step the weights read back from the
cores are compared bit for bit with :class:`sw.golden_train_chip.GoldenChipSGD` (an
AssertionError on any difference), and the measured cycles with the compiler's
prediction (:meth:`ChipSGDProgram.step_cycles`).

Figures per step: ``cycles`` = the chip phases (all cores together) plus the host phases
(x / t load, logits / d unload, g load; the host serves one core at a time); the
softmax host turnaround (:data:`sw.train.HOST_LATENCY_CYCLES`) separately. FLOPs =
2 x useful multiply-adds: forward ``W x`` (m n per layer), backward ``W^T d`` (m n per
layer >= 1), rank-1 update (m n per layer); ReLU, masks, loss gradient, padding rows and
collectives are not counted. MAC utilization = useful MACs / (cycles x PEs of the chip).
Power: :func:`sim.power.report_from_counters` on the step's counters summed over the
cores (``n_cores = cfg.cores``, ``cycles`` = the step's), with the host turnaround
added as idle cycles in the "with host" figures.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from arch.config import PRESETS
from sim.power import report_from_counters, scope_note
from sw.golden_train_chip import GoldenChipSGD
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, init_weights
from sw.train_chip import compile_chip_sgd
from sim.sessions import ChipSession

WEIGHT_SEED = 0
INPUT_SEED = 1
STEPS = 2
LR = 0.01

#: (preset, sizes, loss, backward): the compiler's choice of backward step (per layer:
#: fused when its kernels are at most sw.train.FUSED_TOLERANCE slower on the panel), and
#: the fused step on every layer >= 1 for comparison
CASES = [
    ("S", (784, 500, 500, 500, 10), "softmax_ce", "auto"),
    ("S", (784, 500, 500, 500, 10), "softmax_ce", "fused"),
    ("S", (784, 500, 500, 500, 10), "mse", "auto"),
    ("chip-small", (64, 64, 64, 10), "softmax_ce", "auto"),
    ("chip-small", (64, 64, 64, 10), "mse", "auto"),
    # a network whose weights do not fit the PE memories at S: the largest panels paged from
    # the scratchpad (bench_train_chip_mb has the same network with minibatch GD)
    ("S", (784, 1500, 1500, 1500, 10), "softmax_ce", "auto"),
]

#: the reference design's SGD figure for its small network on config S
#: (../shared/reference/caterpillar.md, Table 2): energy scope FPU + SRAM
REFERENCE = {"case": "small net (784-)500-500-500-10, config S, SGD batch 1", "gflops_per_w": 177,
             "mac_utilization": "> 0.80", "energy_scope": "FPU + SRAM (broadcast energy left out)",
             "memory_over_fpu_energy": 1.5, "source": "../shared/reference/caterpillar.md, Table 2"}

FLOPS_COUNTED = ("2 x useful multiply-adds of the network: forward W x (m n per layer), backward W^T d "
                 "(m n per layer >= 1; not for the first layer), rank-1 update (m n per layer); not counted: "
                 "ReLU, ReLU masks, loss gradient, host softmax, padding rows, ring collectives")


#: the cycle-breakdown labels of the training kernels (this benchmark's and bench_train_cp's)
KERNEL_CATEGORIES = {"gemv": "GEMV W x (forward)", "gemv_t": "GEMV^T W^T d (backward)", "rank1": "rank-1 update",
                     "gemv_t_rank1": "W^T d + update, fused (backward)"}


#: the category of a page's update that stores it and loads the next page
#: (:func:`sw.train_paging.rank1_swap_op`), counted with the scratchpad moves
SWAP = "page swap: update, store and the next page's load (scratchpad)"


def _category(name: str, kind: str) -> str:
    if kind == "ring+rank1":
        return "reduce-scatter with rank-1 rows in its free slots"
    if kind == "ring":
        if name.startswith("bcast_x"):
            return "broadcast x (ring)"
        if name.startswith("bcast"):
            return "broadcast of the output gradient (ring)"
        if name.startswith("reduce"):
            return "reduce of the output layer's partials (ring)"
        if name.startswith("ag"):
            return "all-gather activations (ring)"
        if name.startswith("rs"):
            return "reduce-scatter W^T d (ring)"
        return "other ring"
    if kind == "spad":
        return "scratchpad page load/store"
    if kind == "spad+rank1":
        return SWAP
    if kind in ("load", "unload"):
        return "host I/O inside the step (target in, outputs out)"
    if kind == "axpy" and name.startswith("acc"):
        return "W^T d page accumulation (axpy)"
    ew = "elementwise (ReLU, mask, loss grad)"
    return {**KERNEL_CATEGORIES, "relu": ew, "relu_mask": ew, "axpy": ew, "nop": "gaps (NOPs between ops)",
            "halt": "HALT + start latency + drain (per chip RUN)"}.get(kind, f"other ({kind})")


def cycle_breakdown(tp, r, category=None) -> dict:
    """Cycles of one step by category (``category(op name, kind)``, default this
    benchmark's): the chip phases' ops (core 0's program, the same instruction count on
    every core), the host phases, the host turnaround."""
    category = category or _category
    cats: dict = {}
    chip = 0
    for name, kind, ins in tp.breakdown():
        c = category(name, kind)
        cats[c] = cats.get(c, 0) + ins
        chip += ins
    chip_measured = sum(c for _, kind, c in r.phases if kind == "chip")
    assert chip == chip_measured, (chip, chip_measured)
    for name, kind, c in r.phases:
        if kind in ("host", "load"):
            key = f"host phase {name}" if kind == "host" else "microcode LOADs"
            cats[key] = cats.get(key, 0) + c
    if r.host_cycles:
        cats["host softmax turnaround (assumed)"] = r.host_cycles
    total = r.cycles + r.host_cycles
    return {k: {"cycles": v, "share": round(v / total, 4)} for k, v in cats.items()}


def _sum_cores(core_counters, cycles):
    out: dict = {}
    for c in core_counters:
        for k, v in c.items():
            out[k] = out.get(k, 0) + int(v)
    out["cycles"] = int(cycles)
    return out


def _report_dict(rep) -> dict:
    return {"cycles": rep.cycles, "seconds": rep.seconds, "pes": rep.pes, "flops": rep.flops,
            "fma_issues": rep.fma, "mac_utilization": rep.mac_utilization, "fpu_issue_utilization": rep.utilization,
            "gflops": rep.gflops, "watts": rep.watts, "gflops_per_w_all": rep.gflops_per_w_all,
            "gflops_per_w_compared": rep.gflops_per_w_compared,
            "energy_pj": rep.energy_pj, "energy_share": {k: v / sum(rep.energy_pj.values())
                                                         for k, v in rep.energy_pj.items()},
            "pj_per_flop": rep.pj_per_flop,
            "memory_over_fpu_energy": rep.memory_over_fpu, "area_mm2": rep.area_mm2,
            "gflops_per_mm2": rep.gflops_per_mm2, "convention": rep.convention}


def _check_weights(tp, sess, gold, step, label):
    got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
    bad = [(l, int(np.sum(a != w)), a.size) for l, (a, w) in enumerate(zip(got, want)) if not np.array_equal(a, w)]
    if bad:
        raise AssertionError(f"{label}, step {step}: the chip's weights differ from {type(gold).__name__}'s: "
                             + "; ".join(f"W{l}: {n} of {s} words" for l, n, s in bad))


def setup(cfg, mlp, compile, golden, seed: int = WEIGHT_SEED) -> tuple:
    """``(tp, session, golden trainer, compile s, weight load s)``: ``compile(cfg, mlp)``
    on a fast chip session with the weights of ``seed`` loaded, beside ``golden(cfg,
    mlp, W0)``."""
    t0 = time.perf_counter()
    tp = compile(cfg, mlp)
    t_compile = time.perf_counter() - t0
    sess = ChipSession(cfg, "fast")
    W0 = init_weights(mlp, cfg.fmt, seed)
    t0 = time.perf_counter()
    tp.init(sess, W0)
    kw = {"fused": tp.fused} if getattr(tp, "fused", None) else {}
    if getattr(tp, "meta", {}).get("out_reduce"):          # the order of the output layer's reduce
        kw["out_reduce"] = tp.meta["out_reduce"]
    return tp, sess, golden(cfg, mlp, W0, **kw), t_compile, time.perf_counter() - t0


def measure(preset: str, sizes, loss: str, backward: str = "auto", steps: int = STEPS, log=print,
            compile_kw: dict | None = None) -> dict:
    """One case (``compile_kw``: more :func:`compile_chip_sgd` arguments)."""
    cfg = PRESETS[preset]
    mlp = MLP(sizes, loss, LR)
    label = f"{preset} {mlp.describe()} (backward {backward}{''.join(f', {k}={v}' for k, v in (compile_kw or {}).items())})"
    tp, sess, gold, t_compile, t_init = setup(cfg, mlp, partial(compile_chip_sgd, backward=backward,
                                                                **(compile_kw or {})), GoldenChipSGD)
    rng = np.random.default_rng(INPUT_SEED)
    flops = mlp.flops_per_step()
    macs = flops // 2
    log(f"{label}: {cfg.cores} cores of {cfg.nr}x{cfg.nr} {cfg.fmt} PEs, weight seed {WEIGHT_SEED}, input seed "
        f"{INPUT_SEED}; compile {t_compile:.1f} s, weight load {t_init:.1f} s")
    out_steps = []
    for i in range(steps):
        x = rng.uniform(0, 1, mlp.n_in)
        t = int(rng.integers(mlp.n_out)) if loss == "softmax_ce" else rng.uniform(-1, 1, mlp.n_out)
        ts = time.perf_counter()
        r = tp.run_step(sess, x, t)
        wall = time.perf_counter() - ts
        tg = time.perf_counter()
        gold.step(x, t)
        _check_weights(tp, sess, gold, i + 1, label)
        wall_gold = time.perf_counter() - tg
        predicted = tp.step_cycles() - tp.host_cycles()
        if r.cycles != predicted or r.host_cycles != tp.host_cycles():
            raise AssertionError(f"{label}, step {i + 1}: {r.cycles} + {r.host_cycles} cycles measured, "
                                 f"{predicted} + {tp.host_cycles()} predicted")
        ctr = _sum_cores(r.core_counters, r.cycles)
        rep = report_from_counters(cfg, ctr, flops=flops, n_cores=cfg.cores)
        ctr_h = dict(ctr, cycles=r.cycles + r.host_cycles)
        rep_h = report_from_counters(cfg, ctr_h, flops=flops, n_cores=cfg.cores)
        pes = cfg.nr * cfg.nr * cfg.cores
        st = {
            "step": i + 1, "loss": r.loss, "golden_bit_exact": True,
            "cycles": r.cycles, "host_cycles": r.host_cycles, "cycles_with_host": r.cycles + r.host_cycles,
            "predicted_cycles": predicted,
            "phases": [{"name": n, "kind": k, "cycles": c} for n, k, c in r.phases],
            "flops": flops, "useful_macs": macs,
            "mac_utilization": macs / (r.cycles * pes),
            "mac_utilization_with_host": macs / ((r.cycles + r.host_cycles) * pes),
            "power": _report_dict(rep), "power_with_host": _report_dict(rep_h),
            "counters_sum_over_cores": ctr,
            "cycle_breakdown": cycle_breakdown(tp, r),
            "wall_s": round(wall, 2), "golden_wall_s": round(wall_gold, 2),
        }
        out_steps.append(st)
        log(f"  step {i + 1}: loss {r.loss:.4f}, {r.cycles} cycles + {r.host_cycles} host turnaround, MAC util. "
            f"{st['mac_utilization'] * 100:.1f}% ({st['mac_utilization_with_host'] * 100:.1f}% with host), "
            f"{rep.gflops_per_w_all:.1f} GFLOPS/W ({rep.gflops_per_w_compared:.1f} compared scope); weights = "
            f"golden bit for bit; {wall:.1f} s (golden {wall_gold:.1f} s)")
    # MAC utilization inside each kind of compute op (useful MACs / (its cycles x PEs))
    kinds: dict = {}
    for _, kind, ins in tp.breakdown():
        kinds[kind] = kinds.get(kind, 0) + ins
    mn = [m * n for m, n in (mlp.shape(l) for l in range(mlp.n_layers))]
    # rank-1 rows merged into a reduce-scatter: their share of the layer's MACs goes with it
    merged = sum(mn[o["layer"]] * o["rows_merged"] / o["rows"] for o in tp.meta.get("overlap", []))
    useful = {"gemv": sum(mn), "gemv_t": sum(mn[1:]), "rank1": sum(mn) - merged, "ring+rank1": merged}
    pes = cfg.nr * cfg.nr * cfg.cores
    kernel_util = {k: {"useful_macs": u, "cycles": kinds.get(k, 0),
                       "mac_utilization": u / (kinds[k] * pes) if kinds.get(k) else None}
                   for k, u in useful.items()}
    layers = [{"layer": l, "shape": list(mlp.shape(l)), "panel_rows_per_core": tp.P[l], "panel_cols": tp.N[l],
               "weight_bank": tp.wbanks[l]} for l in range(mlp.n_layers)]
    return {
        "preset": preset, "config": cfg.to_dict(), "network": mlp.describe(), "sizes": list(sizes), "loss": loss,
        "backward": backward, "fused": tp.fused, "lr": LR, "lr_stored": tp.meta["lr_stored"], "weight_seed": WEIGHT_SEED, "input_seed": INPUT_SEED,
        "inputs": "x ~ U(0, 1); target: random class (softmax_ce) or U(-1, 1) per output (mse), "
                  "numpy.random.default_rng(input_seed)",
        "cores": cfg.cores, "pes": cfg.nr * cfg.nr * cfg.cores, "layers": layers,
        "chip_runs_per_step": [{"name": p.name, "cycles": tp.part_cycles(p), "instructions": p.instructions}
                               for p in tp.chip_parts()],
        "spad_layers": tp.meta["spad_layers"], "spad_pages": {str(k): v for k, v in tp.meta["pages"].items()},
        "microcode_images": len(tp.images), "microcode_reload_words_per_step": tp.reload_words_per_step(),
        "host_phases_predicted": [{"name": n, "cycles": c} for n, c in tp.host_phase_cycles()],
        "breakdown_per_op": [{"op": n, "kind": k, "cycles": c} for n, k, c in tp.breakdown()],
        "mac_utilization_within_kernels": kernel_util,
        "flops_counted": FLOPS_COUNTED, "compile_s": round(t_compile, 2), "weight_load_s": round(t_init, 2),
        "steps": out_steps,
    }


def _split(bd: dict) -> str:
    """GEMV / GEMV^T / rank-1 / fused backward / ring / ring + rank-1 / scratchpad / host
    I/O / other cycles (turnaround excluded)."""
    g = lambda k: bd.get(k, {}).get("cycles", 0)          # noqa: E731
    ring = sum(v["cycles"] for k, v in bd.items() if "(ring)" in k)
    host = sum(v["cycles"] for k, v in bd.items() if k.startswith("host phase"))
    fw, bw, up, fu, ov, sp = (g("GEMV W x (forward)"), g("GEMV^T W^T d (backward)"), g("rank-1 update"),
                              g("W^T d + update, fused (backward)"),
                              g("reduce-scatter with rank-1 rows in its free slots"),
                              g("scratchpad page load/store") + g(SWAP))
    total = sum(v["cycles"] for k, v in bd.items() if not k.startswith("host softmax"))
    return f"{fw}/{bw}/{up}/{fu}/{ring}/{ov}/{sp}/{host}/{total - fw - bw - up - fu - ring - ov - sp - host}"


#: the collectives of the forward pass on their own (the broadcast of x and the all-gathers
#: before the GEMVs, not inside them; the output layer's partials reduced by the chain),
#: measured beside the default step at S
APART = {"ag_overlap": False, "bcast_overlap": False, "out_reduce": "chain"}


def _apart(case: dict) -> dict:
    """The step of ``case`` compiled with :data:`APART`: its cycles, MAC utilization and
    the collectives' cycles (the weights checked against the golden as in every case)."""
    c = measure(case["preset"], tuple(case["sizes"]), case["loss"], case["backward"], compile_kw=APART)
    last = c["steps"][-1]
    return {"compile": APART, "cycles": last["cycles"], "predicted_cycles": last["predicted_cycles"],
            "mac_utilization": last["mac_utilization"],
            "collectives": {o["op"]: o["cycles"] for o in c["breakdown_per_op"] if o["kind"] == "ring"}}


def run() -> dict:
    cases = [measure(*c) for c in CASES]
    for c in cases:
        if c["preset"] == "S" and c["sizes"][1] == 500 and c["backward"] == "auto":
            c["collectives_apart"] = _apart(c)
    rows = []
    for c in cases:
        last = c["steps"][-1]
        p = last["power"]
        cyc = sorted({s["cycles"] for s in c["steps"]})
        rows.append({
            "chip": f"{c['preset']}: {c['cores']} x 4x4", "network": "-".join(map(str, c["sizes"])),
            "loss": c["loss"],
            "backward (layers 1..)": "/".join("fused" if f else "sep." for f in c["fused"][1:]),
            "step cycles (= predicted, both steps)": "/".join(map(str, cyc)),
            "host turnaround": last["host_cycles"], "FLOPs/step": last["flops"],
            "MAC util. %": round(last["mac_utilization"] * 100, 2),
            "MAC util. with host %": round(last["mac_utilization_with_host"] * 100, 2),
            "GFLOPS": round(p["gflops"], 1), "W": round(p["watts"], 2),
            "area mm^2": round(p["area_mm2"]["total"], 1), "GFLOPS/mm^2": round(p["gflops_per_mm2"], 2),
            "GFLOPS/W everything": round(p["gflops_per_w_all"], 1),
            "GFLOPS/W compared scope": round(p["gflops_per_w_compared"], 1),
            "mem/FPU energy": round(p["memory_over_fpu_energy"], 2),
            "weights in scratchpad (pages)": ", ".join(f"W{k} ({v})" for k, v in c["spad_pages"].items()) or "-",
            "cycles gemv/gemv_t/rank1/fused/ring/ring+rank1/spad/host I/O/other": _split(last["cycle_breakdown"]),
            "golden": f"{len(c['steps'])} steps bit-exact",
        })
    rows.append({
        "chip": "reference design, config S: 32 x 4x4", "network": "784-500-500-500-10", "loss": "(MNIST)",
        "backward (layers 1..)": "",
        "step cycles (= predicted, both steps)": "", "host turnaround": "", "FLOPs/step": "",
        "MAC util. %": "> 80", "MAC util. with host %": "", "GFLOPS": "", "W": "", "GFLOPS/W everything": "", "GFLOPS/W compared scope": REFERENCE["gflops_per_w"],
        "mem/FPU energy": "~1.5", "weights in scratchpad (pages)": "", "cycles gemv/gemv_t/rank1/fused/ring/ring+rank1/spad/host I/O/other": "", "golden": "",
    })
    s_rows = [c for c in cases if c["preset"] == "S" and c["backward"] == "auto" and c["sizes"][1] == 500]
    cmp = []
    for c in s_rows:
        last = c["steps"][-1]
        u, uh = last["mac_utilization"], last["mac_utilization_with_host"]
        gw, ga = last["power"]["gflops_per_w_compared"], last["power"]["gflops_per_w_all"]
        ref = REFERENCE["gflops_per_w"]
        cmp.append(f"{c['loss']}: MAC util. {u * 100:.1f}% ({uh * 100:.1f}% with the host turnaround) against "
                   f"> 80% ({'worse' if u < 0.8 else 'better'}); {gw:.0f} GFLOPS/W in the compared scope "
                   f"against 177 ({gw / ref:.2f}x, {'worse' if gw < ref else 'better'}), {ga:.0f} GFLOPS/W with "
                   f"every category ({ga / ref:.2f}x); memory/FPU energy {last['power']['memory_over_fpu_energy']:.2f} "
                   f"against ~1.5")
    s_pes, s_ghz = PRESETS["S"].nr ** 2 * PRESETS["S"].cores, PRESETS["S"].clock_mhz / 1e3
    note = ("Batch-1 SGD across the cores of a chip (sw/train_chip.py), fast chip engine, "
            f"{STEPS} steps per case with random inputs (weight seed {WEIGHT_SEED}, input seed {INPUT_SEED}), "
            "weights checked bit for bit against GoldenChipSGD after every step; figures of the last step. "
            "Step cycles = chip phases + host I/O phases (one core at a time); 'with host' adds the assumed "
            f"{HOST_LATENCY_CYCLES}-cycle softmax turnaround as idle cycles. FLOPs = 2 x useful MACs (forward "
            "W x, backward W^T d for layers >= 1, rank-1 updates); MAC util. = useful MACs / (cycles x PEs). "
            + scope_note() + ". Against the reference design (config S, small net): "
            + "; ".join(cmp) + f". Peak 2 FLOP x {s_pes} PEs x {s_ghz:g} GHz = {2 * s_pes * s_ghz:.0f} GFLOPS on config S.")
    return {"title": "SGD step across the cores of a chip (fast chip engine; config S = 32 cores of 4 x 4 "
                     "binary16 PEs, chip-small = 4 cores)",
            "note": note, "reference": REFERENCE, "flops_counted": FLOPS_COUNTED, "rows": rows, "cases": cases}


if __name__ == "__main__":
    import json

    res = run()
    print(json.dumps(res["rows"], indent=1))
