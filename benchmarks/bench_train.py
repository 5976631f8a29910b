"""SGD training step on one 4x4 binary16 core: cycles, MAC utilization, GFLOPS/W.

Each network is compiled with :func:`sw.train.compile_sgd`, its initial weights loaded,
and three SGD steps run on the cycle-exact fast model (whose counters equal the RTL's,
see docs/simulators.md); the figures are those of the last step, from its counters
(:func:`sim.power.report_from_counters`, FLOPs = 2 x the step's multiply-adds: forward
``W x``, backward ``W^T d`` for every layer but the first, rank-1 updates). Measured
cycles are checked against the compiler's prediction.

``softmax_ce`` steps are two RUNs with the host's softmax in between; the table gives
the RUN cycles and, separately, the utilization with the assumed host turnaround
(:data:`sw.train.HOST_LATENCY_CYCLES`) counted as idle cycles.

256-256-10 has 4288 weight words per PE, but its first matrix alone fills a 4096-word
bank, and the kernels' bank rules (layer 1's input activations and copies not in W1's
bank) leave the rest no room: it does not fit the default 4096 + 4096-word banks (16 KB
per PE, as the reference design) and is run with 8192-word banks (the power model
scales the SRAM access energy with the bank size, capacity^0.5).

The backward column gives the per-layer choice (layers 1.. ; F: the fused backward step
``emit_gemv_t_rank1``, S: transposed GEMV + rank-1): ``auto`` is the compiler's default
(:func:`sw.train.backward_plan`); the forced rows measure the alternatives.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from arch.config import ArchConfig
from sim.power import scope_note
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, TrainCompileError, compile_sgd, init_weights
from sim.sessions import CoreSession
from sim.train_driver import step_report

#: (sizes, loss, bank words or None for the default, backward): "auto" is the compiler's
#: default per-layer choice; the forced rows show what it chose between
CASES = [
    ((64, 64, 10), "softmax_ce", None, "auto"),
    ((64, 64, 10), "mse", None, "auto"),
    ((256, 256, 10), "mse", 8192, "auto"),
    ((256, 256, 10), "softmax_ce", 8192, "auto"),
    ((64, 128, 128, 10), "softmax_ce", None, "auto"),
    ((64, 128, 128, 10), "softmax_ce", None, "separate"),
    ((64, 128, 128, 10), "softmax_ce", None, "fused"),
    ((64, 64, 64, 10), "mse", None, "auto"),
    ((64, 64, 64, 10), "mse", None, "separate"),
    ((64, 64, 10), "mse", None, "fused"),
]


def measure(cfg, mlp, steps: int = 3, seed: int = 0, backward: str = "auto"):
    tp = compile_sgd(cfg, mlp, backward=backward)
    s = CoreSession(cfg, "fast")
    tp.init(s, init_weights(mlp, cfg.fmt, seed))
    rng = np.random.default_rng(seed)
    r = None
    for _ in range(steps):
        t = int(rng.integers(mlp.n_out)) if mlp.loss == "softmax_ce" else rng.uniform(-1, 1, mlp.n_out)
        r = tp.run_step(s, rng.uniform(0, 1, mlp.n_in), t)
    return tp, r


def run() -> dict:
    base = ArchConfig()
    rows, notes = [], []
    try:
        compile_sgd(base, MLP((256, 256, 10), "mse", 0.01))
    except TrainCompileError as e:
        notes.append(str(e))
    for sizes, loss, words, backward in CASES:
        cfg = base if words is None else replace(base, mem_a_words=words, mem_b_words=words)
        mlp = MLP(sizes, loss, 0.01)
        tp, r = measure(cfg, mlp, backward=backward)
        assert r.cycles == sum(tp.predicted_cycles()), (r.cycles, tp.predicted_cycles())
        rep, rep_h = step_report(tp, r.counters, HOST_LATENCY_CYCLES)
        kinds = {}
        for name, kind, ins in tp.breakdown():
            kinds[kind] = kinds.get(kind, 0) + ins
        main = kinds.get("gemv", 0) + kinds.get("gemv_t", 0) + kinds.get("rank1", 0) + kinds.get("gemv_t_rank1", 0)
        rows.append({
            "network": "-".join(map(str, sizes)), "loss": loss,
            "backward (layers 1..)": f"{backward}: " + "/".join("F" if f else "S" for f in tp.fused[1:]),
            "banks (words)": f"{cfg.mem_a_words}+{cfg.mem_b_words}",
            "RUN cycles (measured = predicted)": r.cycles, "host cycles": r.host_cycles,
            "FLOPs": mlp.flops_per_step(),
            "MAC util. %": round(rep.mac_utilization * 100, 2),
            "MAC util. with host %": round(rep_h.mac_utilization * 100, 2),
            "FPU issue %": round(rep.utilization * 100, 2),
            "GFLOPS": round(rep.gflops, 1),
            "GFLOPS/W everything": round(rep.gflops_per_w_all, 1),
            "GFLOPS/W compared scope": round(rep.gflops_per_w_compared, 1),
            "cycles gemv/gemv_t/rank1/fused/other": f"{kinds.get('gemv', 0)}/{kinds.get('gemv_t', 0)}/"
                                                    f"{kinds.get('rank1', 0)}/{kinds.get('gemv_t_rank1', 0)}/"
                                                    f"{r.cycles - main}",
        })
    return {"title": "SGD training step on one 4x4 binary16 core (fast model)",
            "note": "One batch-1 SGD step compiled by sw/train.py, measured on the fast model (counters = RTL's). "
                    "Backward per layer 1..: F fused GEMV^T + rank-1 (emit_gemv_t_rank1), S separate. "
                    "MAC utilization = step FLOPs / 2 / (cycles x 16); 'with host' adds the assumed "
                    f"{HOST_LATENCY_CYCLES}-cycle host turnaround of the softmax as idle cycles. "
                    + scope_note() + "."
                    + (" Default config: " + notes[0] if notes else ""),
            "rows": rows}
