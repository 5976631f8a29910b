"""Continuous propagation across the cores of a chip: cycles per pipeline step, MAC
utilization and GFLOPS/W in the steady state, at the reference design's configuration S
(32 cores of 4 x 4 binary16 PEs) for its small network, and on a 4-core chip.

Each case is compiled with :func:`sw.train_cp.compile_chip_cp` (layers on groups of
cores, the compiler's balance; the backward step of each layer ``l >= 1`` as the compiler
chooses it, or separate for comparison: the fused kernel reads and writes each weight
once for ``W^T d`` and the update, the separate kernels read it twice), its He-uniform initial weights
(:func:`sw.train.init_weights`, seed :data:`WEIGHT_SEED`) loaded, and ``2 L + STEPS``
pipeline steps run on the fast chip engine with inputs ``x ~ U(0, 1)`` and targets (a
random class for ``softmax_ce``, ``U(-1, 1)`` for ``mse``) from
``numpy.random.default_rng(INPUT_SEED)``: the pipeline fills during the first ``2 L - 1``
steps; the figures are those of the last :data:`STEPS` steps, in which every group works
on a real sample. After every step the weights read back from the cores are compared
bit for bit with :class:`sw.golden_train_cp.GoldenChipCP` (an AssertionError on any
difference), and the cycles with :meth:`ChipCPProgram.step_cycles`.

Per step one sample (minibatch CP: one minibatch of ``b``) completes (its forward and
backward passes and all its updates are spread over ``2 L - 1`` steps, overlapped with
other samples'), so FLOPs per step are the network's per sample times ``b``
(:meth:`sw.mlp.MLP.flops_per_step`), and cycles per step are the chip RUNs (head, tail;
the chains a third RUN when the tails with a copy each do not fit the microcode) plus
the host phases (x to core 0, the target to the output core, the output unloaded for
the loss). MAC utilization = useful MACs / (cycles
x PEs of the chip). Power: :func:`sim.power.report_from_counters` on the step's counters
summed over the cores.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.bench_train_chip import KERNEL_CATEGORIES, _check_weights, _report_dict, _sum_cores
from arch.config import PRESETS
from sim.power import report_from_counters
from sw.golden_train_cp import GoldenChipCP
from sw.golden_train_cp_mb import GoldenChipMBCP
from sw.mlp import MLP
from sw.train import init_weights
from sim.sessions import ChipSession
from sw.train_cp import compile_chip_cp

WEIGHT_SEED = 0
INPUT_SEED = 1
STEPS = 2
LR = 0.01

#: (preset, sizes, loss, backward, batch[, page swaps]): the compiler's choice, the separate backward
#: step (transposed GEMV + rank-1, each reading W) for comparison, and minibatch CP
#: (MSE; b = 8 is the largest minibatch whose input history fits layer 0's PE memories at S)
CASES = [
    ("S", (784, 500, 500, 500, 10), "softmax_ce", "auto", 1),
    ("S", (784, 500, 500, 500, 10), "softmax_ce", "separate", 1),
    ("S", (784, 500, 500, 500, 10), "mse", "auto", 1),
    ("S", (784, 500, 500, 500, 10), "mse", "auto", 4),
    ("S", (784, 500, 500, 500, 10), "mse", "auto", 8),
    ("chip-small", (64, 64, 64, 10), "softmax_ce", "auto", 1),
    ("chip-small", (64, 64, 64, 10), "mse", "auto", 8),
    # weights that do not fit the PE memories at S: every hidden layer's panels paged from the
    # scratchpads (bench_train_chip and bench_train_chip_mb run the same network), with the
    # updates' page swaps and without (each page's moves in their own loops)
    ("S", (784, 1500, 1500, 1500, 10), "softmax_ce", "auto", 1),
    ("S", (784, 1500, 1500, 1500, 10), "softmax_ce", "auto", 1, False),
]

#: the reference design's CP figure for its small network on config S
REFERENCE = {"case": "small net (784-)500-500-500-10, config S, CP", "gflops_per_w": 204,
             "energy_scope": "FPU + SRAM (broadcast energy left out)",
             "source": "../shared/reference/caterpillar.md, Table 2"}


def _category(name: str, kind: str) -> str:
    if kind == "axpy" and name.startswith("acc"):
        return "W^T d page accumulation (axpy)"
    return {**KERNEL_CATEGORIES, "gemm": "GEMM (forward W A; backward D^T W)", "gemm_acc": "GEMM update W += D A^T",
            "transpose": "transposes (history, D)", "ring": "chains (ring)", "ring+gemv": "delta chains with forward GEMV rows (ring)", "copy": "history copies", "relu": "elementwise", "relu_mask": "elementwise",
            "axpy": "elementwise", "softmax": "softmax kernel", "spad": "scratchpad page load/store",
            "spad+rank1": "page swap: update, store and the next page's load (scratchpad)", "halt": "HALT + start latency + drain"}.get(
        kind, "NOPs (gaps, alignment)" if kind == "nop" else f"other ({kind})")


def measure(preset: str, sizes, loss: str, backward: str = "auto", batch: int = 1, page_swap: bool = True,
            steps: int = STEPS, log=print) -> dict:
    cfg = PRESETS[preset]
    mlp = MLP(sizes, loss, LR, batch=batch)
    label = (f"{preset} {mlp.describe()} ({'minibatch ' if batch > 1 else ''}CP, backward {backward}"
             + ("" if page_swap else ", no page swaps") + ")")
    t0 = time.perf_counter()
    tp = compile_chip_cp(cfg, mlp, backward=backward, page_swap=page_swap)
    t_compile = time.perf_counter() - t0
    sess = ChipSession(cfg, "fast")
    W0 = init_weights(mlp, cfg.fmt, WEIGHT_SEED)
    tp.init(sess, W0)
    gold = (GoldenChipMBCP(cfg, mlp, W0, groups=tp.groups) if batch > 1
            else GoldenChipCP.for_program(tp, W0))
    rng = np.random.default_rng(INPUT_SEED)
    L = tp.latency_steps()
    n = 2 * L + steps
    if batch > 1:
        X = rng.uniform(0, 1, (n, mlp.n_in, batch))
        T = rng.uniform(-1, 1, (n, mlp.n_out, batch))
    else:
        X = rng.uniform(0, 1, (n, mlp.n_in))
        T = [int(rng.integers(mlp.n_out)) if loss == "softmax_ce" else rng.uniform(-1, 1, mlp.n_out)
             for _ in range(n)]
    flops = mlp.flops_per_step()
    macs = flops // 2
    pes = cfg.nr * cfg.nr * cfg.cores
    log(f"{label}: groups {tp.groups}, fused {tp.fused}, {tp.step_cycles()} cycles per step; compile "
        f"{t_compile:.1f} s")
    out_steps = []
    for s in range(n):
        ts = time.perf_counter()
        r = tp.run_step(sess, X[s], T[s - L] if s >= L else None)
        wall = time.perf_counter() - ts
        gold.step(X[s], T[s - L] if s >= L else None)
        _check_weights(tp, sess, gold, s + 1, label)
        if r.cycles != tp.step_cycles():
            raise AssertionError(f"{label}, step {s + 1}: {r.cycles} cycles measured, {tp.step_cycles()} predicted")
        if s < n - steps:
            continue
        ctr = _sum_cores(r.core_counters, r.cycles)
        rep = report_from_counters(cfg, ctr, flops=flops, n_cores=cfg.cores)
        st = {"step": s + 1, "loss": r.loss, "golden_bit_exact": True, "cycles": r.cycles,
              "phases": [{"name": a, "kind": k, "cycles": c} for a, k, c in r.phases],
              "flops": flops, "useful_macs": macs, "mac_utilization": macs / (r.cycles * pes),
              "power": _report_dict(rep), "counters_sum_over_cores": ctr, "wall_s": round(wall, 2)}
        out_steps.append(st)
        log(f"  step {s + 1}: loss {r.loss:.4f}, {r.cycles} cycles, MAC util. {st['mac_utilization'] * 100:.1f}%, "
            f"{rep.gflops_per_w_all:.1f} GFLOPS/W ({rep.gflops_per_w_compared:.1f} compared scope); weights = "
            f"golden bit for bit; {wall:.1f} s")
    crit = tp.meta["critical_core"]
    bd: dict = {}
    for a, kind, c in tp.breakdown():
        cat = _category(a, kind)
        bd[cat] = bd.get(cat, 0) + c
    host = sum(c for _, c in tp.host_phase_cycles())
    bd["host phases (x, t in; output out)"] = host
    total = tp.step_cycles()
    return {
        "preset": preset, "config": cfg.to_dict(), "network": mlp.describe(), "sizes": list(sizes), "loss": loss,
        "lr": LR, "batch": batch, "backward": backward, "page_swap": page_swap,
        "page_swap_layers": tp.meta.get("page_swap", []), "fused": tp.fused, "split_chains": tp.split_chains, "weight_seed": WEIGHT_SEED, "input_seed": INPUT_SEED, "cores": cfg.cores, "pes": pes,
        "groups": tp.groups, "panel_rows": tp.P, "panel_cols": tp.N, "tail_variants": tp.V,
        "spad_layers": tp.meta.get("spad_layers", []),
        "spad_pages": {str(k): v for k, v in tp.meta.get("pages", {}).items()},
        "microcode_words_per_core": max(len(w) for w in tp.image),
        "runs": {"head": tp.run_cycles("head"), "tail": tp.run_cycles("tail"), "chains": tp.chains.slots,
                 "chains_run": tp.run_cycles("chains") if tp.split_chains else None, "host": host,
                 "head_chains": tp.meta["head_chains"].slots if tp.meta.get("head_chains") else None},
        "critical_core": crit, "critical_core_layer": tp.stages[crit][0],
        "cycle_breakdown_critical_core": {k: {"cycles": v, "share": round(v / total, 4)} for k, v in bd.items()},
        "compile_s": round(t_compile, 2), "steps": out_steps,
    }


def run() -> dict:
    cases = [measure(*c) for c in CASES]
    rows = []
    for c in cases:
        last = c["steps"][-1]
        p = last["power"]
        rows.append({
            "chip": f"{c['preset']}: {c['cores']} x 4x4", "network": "-".join(map(str, c["sizes"])),
            "loss": c["loss"], "batch": c["batch"], "cores per layer": "/".join(map(str, c["groups"])),
            "backward (layers 1..)": "/".join("fused" if f else "sep." for f in c["fused"][1:]),
            "step cycles (= predicted)": last["cycles"],
            "head/tail(chains)/host": (f"{c['runs']['head']}/{c['runs']['tail']}+{c['runs']['chains_run']}/"
                                       if c["split_chains"] else
                                       f"{c['runs']['head']}/{c['runs']['tail']}({c['runs']['chains']})/")
                                      + f"{c['runs']['host']}",
            "FLOPs/step": last["flops"], "MAC util. %": round(last["mac_utilization"] * 100, 2),
            "GFLOPS": round(p["gflops"], 1), "W": round(p["watts"], 2), "GFLOPS/W everything": round(p["gflops_per_w_all"], 1),
            "area mm^2": round(p["area_mm2"]["total"], 1), "GFLOPS/mm^2": round(p["gflops_per_mm2"], 2),
            "GFLOPS/W compared scope": round(p["gflops_per_w_compared"], 1),
            "weights in scratchpad (pages)": ", ".join(f"W{k} ({v})" for k, v in c["spad_pages"].items()) or "-",
            "page swaps": ", ".join(f"W{k}" for k in c["page_swap_layers"]) or ("-" if c["page_swap"] else "off"),
        })
    return {"title": "Continuous propagation across the cores (steady state, fast chip engine, weights = golden "
                     "bit for bit)", "rows": rows, "cases": cases, "reference": REFERENCE}
