"""GFLOPS/W, utilization and energy breakdown of the core kernels on one 4 x 4 core,
binary16, 45 nm (sim/tech/45nm.json), from the counters of their runs.

The counters come from the cycle-exact fast model, which the test suite proves equal to
the RTL's counters (tests/sim/test_fast_model.py, tests/sw/test_kernels.py); FLOPs are the
kernels' mathematics (2 per useful MAC), so reduction adds are not counted as work.
Also writes ``benchmarks/results/power_kernels.png`` (pJ/FLOP by category).
"""

from __future__ import annotations

import numpy as np

from sw.collectives import Region
from arch.config import ArchConfig
from sim.fast_model import FastModel
from sim.power import plot_breakdown, report_from_counters, scope_note
from sw.asm import Builder
from sw.kernels import Scalar, emit_gemm, emit_gemv, emit_gemv_t_rank1, emit_rank1

from benchmarks.run import RESULTS


def _counters(cfg, emit, rng):
    b = Builder(cfg)
    emit(b)
    b.halt()
    f = FastModel(cfg)
    f.load(b.build().words())
    fmt = cfg.fmt
    f.state.mem_a[:] = fmt.from_float(rng.uniform(-1, 1, (cfg.n_pes, cfg.mem_a_words)))
    f.state.mem_b[:] = fmt.from_float(rng.uniform(-1, 1, (cfg.n_pes, cfg.mem_b_words)))
    return f.run(0).counters


def run() -> dict:
    cfg = ArchConfig()   # 4x4, binary16, 16 KB per PE
    rng = np.random.default_rng(3)
    m = n = 256
    W, x, y = Region("a", 0), Region("b", 0), Region("b", 2048)
    u, v, al = Region("b", 0), Region("b", 100), Region("b", 300)
    cases = [
        ("GEMV 256x256", m * n, lambda b: emit_gemv(b, cfg, m, n, W, x, y)),
        ("GEMV^T 256x256", m * n, lambda b: emit_gemv(b, cfg, m, n, W, x, y, trans=True)),
        ("rank-1 256x256", m * n, lambda b: emit_rank1(b, cfg, m, n, W, u, v, alpha=Scalar("b", al.base))),
        ("fused GEMV^T + rank-1 256x256", 2 * m * n,
         lambda b: emit_gemv_t_rank1(b, cfg, m, n, W, Region("b", 0), Region("b", 100), Region("b", 400),
                                     alpha=Scalar("b", al.base))),
        ("GEMM 128x128, b=16", 128 * 128 * 16,
         lambda b: emit_gemm(b, cfg, 128, 128, 16, Region("a", 0), Region("b", 0), Region("a", 1024))),
    ]
    from benchmarks.bench_kernels import MB_BATCH, MB_M, MB_N, minibatch_layer

    mb_items = minibatch_layer(cfg, rng)[0]
    cases.append((f"minibatch layer {MB_M}x{MB_N}, b={MB_BATCH} (fwd+bwd+update)", 3 * MB_M * MB_N * MB_BATCH,
                  lambda b: [it[1](b) for it in mb_items]))
    rows, reps = [], {}
    for name, macs, emit in cases:
        rep = report_from_counters(cfg, _counters(cfg, emit, rng), flops=2 * macs)
        reps[name] = rep
        p = rep.pj_per_flop
        rows.append({
            "kernel": name, "cycles": rep.cycles, "MAC util.": f"{rep.mac_utilization * 100:.1f}%",
            "GFLOPS": round(rep.gflops, 1),
            "GFLOPS/W compared scope": round(rep.gflops_per_w_compared),
            "GFLOPS/W everything": round(rep.gflops_per_w_all),
            "pJ/FLOP fpu": round(p["fpu"], 3), "sram": round(p["sram"], 3), "rf": round(p["rf"], 3),
            "bus": round(p["bus"], 3), "control": round(p["control"], 3),
        })
    plot_breakdown(reps, RESULTS / "power_kernels.png")
    return {"title": "Kernels on one 4x4 core, binary16, 45 nm: GFLOPS/W and energy breakdown",
            "note": scope_note() + ". One core's leakage and microcode store (its 1024-word default) are "
                    "counted for the kernel's cycles. Plot: power_kernels.png.",
            "rows": rows}
