"""Minibatch GD across the cores of a chip: cycles, MAC utilization, GFLOPS/W and where
the cycles go, at the reference design's configuration S (32 cores of 4 x 4 binary16
PEs) for its small network 784-500-500-500-10 at several batch sizes, beside its
published minibatch figure (195 GFLOPS/W).

Each case is compiled with :func:`sw.train_chip_mb.compile_chip_mbgd` (row panels of
every layer per core; GEMMs on the panels joined by the matrix collectives of
:mod:`sw.ring_mat`), its He-uniform initial weights (:func:`sw.train.init_weights`,
seed :data:`WEIGHT_SEED`) loaded, and :data:`STEPS` minibatch steps run on the fast chip
engine (:class:`sw.train_chip.ChipSession` ``"fast"``, equal to the per-cycle chip model:
``tests/sw/test_train_chip_mb.py``) with random inputs ``X ~ U(0, 1)`` and random classes
from ``numpy.random.default_rng(INPUT_SEED)``. After every step the weights read back
from the cores are compared bit for bit with
:class:`sw.golden_train_chip_mb.GoldenChipMBGD` (an AssertionError on any difference)
and the measured cycles with the compiler's prediction.

Figures per step: ``cycles`` = the chip RUNs (all cores together) plus the host phases
(X and X^T into core 0, logits out of and G into the output cores; the host serves one
core at a time), the softmax host turnaround (:data:`sw.train.HOST_LATENCY_CYCLES`, once
per minibatch) separately. FLOPs = 2 x useful multiply-adds of the network for the ``b``
samples (forward, backward for layers >= 1, update); MAC utilization = useful MACs /
(cycles x PEs). Power: :func:`sim.power.report_from_counters` on the step's counters
summed over the cores.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.bench_train_chip import _check_weights, _report_dict, _sum_cores, cycle_breakdown, setup
from arch.config import PRESETS
from sim.power import report_from_counters, scope_note
from sw.golden_train_chip_mb import GoldenChipMBGD
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES
from sw.train_chip_mb import compile_chip_mbgd

WEIGHT_SEED = 0
INPUT_SEED = 1
STEPS = 2
LR = 0.01

#: (preset, sizes, loss, batch)
CASES = [
    ("S", (784, 500, 500, 500, 10), "softmax_ce", 4),
    ("S", (784, 500, 500, 500, 10), "softmax_ce", 8),
    ("S", (784, 500, 500, 500, 10), "softmax_ce", 16),
    ("chip-small", (64, 64, 64, 10), "softmax_ce", 16),
    # hidden panels larger than the PE memories: kept in the scratchpad, paged
    ("S", (784, 1500, 1500, 1500, 10), "softmax_ce", 8),
]

#: the reference design's minibatch figure for its small network on config S
REFERENCE = {"case": "small net (784-)500-500-500-10, config S, minibatch GD", "gflops_per_w": 195,
             "energy_scope": "FPU + SRAM (broadcast energy left out)",
             "source": "../shared/reference/caterpillar.md, Table 2"}

FLOPS_COUNTED = ("2 x useful multiply-adds of the network for the b samples: forward W A (m n b per layer), "
                 "backward W^T D (m n b per layer >= 1), update D A^T (m n b per layer); not counted: ReLU, "
                 "masks, loss gradient, host softmax, transposes, padding, ring collectives")


def _category(name: str, kind: str) -> str:
    if kind == "ring":
        return {"bc": "broadcast X, X^T (ring)", "ag": "all-gather activations (ring)",
                "rs": "reduce-scatter dX^T (ring)"}.get(name[:2], "other ring")
    if kind == "gemm":
        return "GEMM backward D^T W" if name.startswith("gemm_bw") else "GEMM forward W A"
    return {"gemm_acc": "GEMM update D A^T", "transpose": "transposes",
            "relu": "elementwise (ReLU, mask, loss grad)", "relu_mask": "elementwise (ReLU, mask, loss grad)",
            "axpy": "elementwise (ReLU, mask, loss grad)", "nop": "gaps (NOPs between ops)",
            "halt": "HALT + start latency + drain (per chip RUN)",
            "spad": "scratchpad pages (weight panels in and out)"}.get(kind, f"other ({kind})")


def measure(preset: str, sizes, loss: str, batch: int, steps: int = STEPS, log=print) -> dict:
    cfg = PRESETS[preset]
    mlp = MLP(sizes, loss, LR, batch=batch)
    label = f"{preset} {mlp.describe()}"
    tp, sess, gold, t_compile, _ = setup(cfg, mlp, compile_chip_mbgd, GoldenChipMBGD, WEIGHT_SEED)
    rng = np.random.default_rng(INPUT_SEED)
    flops = mlp.flops_per_step()
    macs = flops // 2
    pes = cfg.nr * cfg.nr * cfg.cores
    log(f"{label}: {cfg.cores} cores of {cfg.nr}x{cfg.nr} {cfg.fmt} PEs; compile {t_compile:.1f} s")
    out = []
    for i in range(steps):
        X = rng.uniform(0, 1, (mlp.n_in, batch))
        T = rng.integers(0, mlp.n_out, batch) if loss == "softmax_ce" else rng.uniform(-1, 1, (mlp.n_out, batch))
        ts = time.perf_counter()
        r = tp.run_step(sess, X, T)
        wall = time.perf_counter() - ts
        gold.step(X, T)
        _check_weights(tp, sess, gold, i + 1, label)
        if r.cycles + r.host_cycles != tp.step_cycles():
            raise AssertionError(f"{label}: {r.cycles} + {r.host_cycles} cycles, predicted {tp.step_cycles()}")
        ctr = _sum_cores(r.core_counters, r.cycles)
        rep = report_from_counters(cfg, ctr, flops=flops, n_cores=cfg.cores)
        rep_h = report_from_counters(cfg, dict(ctr, cycles=r.cycles + r.host_cycles), flops=flops, n_cores=cfg.cores)
        st = {"step": i + 1, "loss": r.loss, "golden_bit_exact": True, "cycles": r.cycles,
              "host_cycles": r.host_cycles, "cycles_per_sample": (r.cycles + r.host_cycles) / batch,
              "phases": [{"name": n, "kind": k, "cycles": c} for n, k, c in r.phases],
              "flops": flops, "useful_macs": macs, "mac_utilization": macs / (r.cycles * pes),
              "mac_utilization_with_host": macs / ((r.cycles + r.host_cycles) * pes),
              "power": _report_dict(rep), "power_with_host": _report_dict(rep_h),
              "counters_sum_over_cores": ctr, "cycle_breakdown": cycle_breakdown(tp, r, _category), "wall_s": round(wall, 2)}
        out.append(st)
        log(f"  step {i + 1}: loss {r.loss:.4f}, {r.cycles} cycles + {r.host_cycles} host turnaround, MAC util. "
            f"{st['mac_utilization'] * 100:.1f}% ({st['mac_utilization_with_host'] * 100:.1f}% with host), "
            f"{rep.gflops_per_w_all:.1f} GFLOPS/W ({rep.gflops_per_w_compared:.1f} compared scope); weights = "
            f"golden bit for bit; {wall:.1f} s")
    return {"preset": preset, "config": cfg.to_dict(), "network": mlp.describe(), "sizes": list(sizes),
            "loss": loss, "batch": batch, "lr": LR, "lr_stored": tp.meta["lr_stored"], "weight_seed": WEIGHT_SEED,
            "input_seed": INPUT_SEED, "cores": cfg.cores, "pes": pes, "panel_rows": tp.P, "panel_cols": tp.N,
            "memory_words_per_pe": {"a": tp.alloc.used("a"), "b": tp.alloc.used("b")},
            "chip_runs_per_step": [{"name": p.name, "cycles": tp.part_cycles(p), "instructions": p.instructions}
                                   for p in tp.chip_parts()],
            "microcode_images": len(tp.images), "microcode_reload_words_per_step": tp.reload_words_per_step(),
            "spad_layers": tp.meta["spad_layers"], "spad_pages": {str(k): v for k, v in tp.meta["pages"].items()},
            "host_phases_predicted": [{"name": n, "cycles": c} for n, c in tp.host_phase_cycles()],
            "breakdown_per_op": [{"op": n, "kind": k, "cycles": c} for n, k, c in tp.breakdown()],
            "flops_counted": FLOPS_COUNTED, "compile_s": round(t_compile, 2), "steps": out}


def case_row(c: dict) -> dict:
    """The summary-table row of a :func:`measure` result (its last step)."""
    last = c["steps"][-1]
    p = last["power"]
    bd = last["cycle_breakdown"]
    g = lambda pre: sum(v["cycles"] for k, v in bd.items() if k.startswith(pre))      # noqa: E731
    ring = sum(v["cycles"] for k, v in bd.items() if "(ring)" in k)
    nr = c["config"]["nr"]
    return {
        "chip": f"{c['preset']}: {c['cores']} x {nr}x{nr}", "network": "-".join(map(str, c["sizes"])),
        "batch": c["batch"], "step cycles (= predicted)": last["cycles"], "host turnaround": last["host_cycles"],
        "cycles/sample": round(last["cycles_per_sample"], 1),
        "MAC util. %": round(last["mac_utilization"] * 100, 2),
        "MAC util. with host %": round(last["mac_utilization_with_host"] * 100, 2),
        "GFLOPS": round(p["gflops"], 1), "GFLOPS/W everything": round(p["gflops_per_w_all"], 1),
        "area mm^2": round(p["area_mm2"]["total"], 1), "GFLOPS/mm^2": round(p["gflops_per_mm2"], 2),
        "GFLOPS/W compared scope": round(p["gflops_per_w_compared"], 1),
        "mem/FPU energy": round(p["memory_over_fpu_energy"], 2),
        "weights in scratchpad (pages)": ", ".join(f"W{k} ({v})" for k, v in c["spad_pages"].items()) or "-",
        "cycles GEMM/transpose/ring/scratchpad/host I/O/other":
            f"{g('GEMM')}/{g('transposes')}/{ring}/{g('scratchpad')}/{g('host phase')}/"
            f"{last['cycles'] - g('GEMM') - g('transposes') - g('host phase') - g('scratchpad') - ring}",
        "golden": f"{len(c['steps'])} steps bit-exact",
    }


def run() -> dict:
    cases = [measure(*c) for c in CASES]
    rows = [case_row(c) for c in cases]
    rows.append({"chip": "reference design, config S: 32 x 4x4", "network": "784-500-500-500-10", "batch": "2..100",
                 "step cycles (= predicted)": "", "host turnaround": "", "cycles/sample": "", "MAC util. %": "(94 large net)",
                 "MAC util. with host %": "", "GFLOPS": "", "GFLOPS/W everything": "",
                 "GFLOPS/W compared scope": REFERENCE["gflops_per_w"], "mem/FPU energy": "FPU-dominated",
                 "weights in scratchpad (pages)": "", "cycles GEMM/transpose/ring/scratchpad/host I/O/other": "",
                 "golden": ""})
    best = max((c for c in cases if c["preset"] == "S"),
               key=lambda c: c["steps"][-1]["power"]["gflops_per_w_compared"])
    bp = best["steps"][-1]["power"]
    note = ("Minibatch GD across the cores of a chip (sw/train_chip_mb.py), fast chip engine, "
            f"{STEPS} steps per case (weight seed {WEIGHT_SEED}, input seed {INPUT_SEED}), weights checked bit for "
            "bit against GoldenChipMBGD after every step; figures of the last step. Step cycles = chip RUNs + host "
            "I/O phases (one core at a time) + the host's microcode LOADs between RUNs when a step's programs need "
            "several images (in 'other' of the cycle split; 'microcode LOADs' in the case's cycle_breakdown); "
            "'with host' adds the assumed "
            f"{HOST_LATENCY_CYCLES}-cycle softmax turnaround (once per minibatch). " + scope_note() + ". Best at config S: b = "
            f"{best['batch']}: {bp['gflops_per_w_compared']:.0f} GFLOPS/W in the compared scope against its "
            f"195 ({bp['gflops_per_w_compared'] / 195:.2f}x), {bp['gflops_per_w_all']:.0f} with every category, "
            f"MAC utilization {best['steps'][-1]['mac_utilization'] * 100:.1f}%.")
    return {"title": "Minibatch GD step across the cores of a chip (fast chip engine; config S = 32 cores of "
                     "4 x 4 binary16 PEs, chip-small = 4 cores)",
            "note": note, "reference": REFERENCE, "flops_counted": FLOPS_COUNTED, "rows": rows, "cases": cases}


if __name__ == "__main__":
    import json

    print(json.dumps(run()["rows"], indent=1))
