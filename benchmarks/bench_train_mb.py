"""Minibatch GD on one 4x4 binary16 core beside batch-1 SGD: cycles, MAC utilization,
GFLOPS/W, and digits training to a test accuracy beside float64 minibatch GD.

Step figures: each network is compiled (:func:`sw.train_mb.compile_mbgd` for ``b > 1``,
:func:`sw.train.compile_sgd` for ``b = 1``), its initial weights loaded, and three steps
run on the cycle-exact fast model (counters equal to the RTL's, docs/simulators.md);
the figures are the last step's counters through :func:`sim.power.report_from_counters`
with FLOPs = 2 x useful MACs = 2 b (3 sum of the layers' m n - the first layer's m n,
whose dX is not computed). Measured cycles are checked against the compiler's
prediction. ``softmax_ce`` steps are two RUNs with the host's softmax in between
(:data:`sw.train.HOST_LATENCY_CYCLES` counted once per step, as idle cycles, in the
"with host" column).

Digits: 64-64-10 ``softmax_ce`` on scikit-learn's digits, minibatch ``b`` on the fast
model, the first steps checked bit for bit against :class:`sw.golden_train_mb.GoldenMBGD`,
beside :class:`sw.golden_train_mb.Float64MBGD` on the same batches; test accuracy with
the array's own forward program after every epoch.
"""

from __future__ import annotations


import numpy as np

from arch.config import ArchConfig
from sim.power import scope_note
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, compile_sgd, init_weights
from sim.sessions import CoreSession
from sim.train_driver import step_report, train_minibatch
from sw.train_mb import compile_mbgd

SIZES = (64, 64, 10)
BATCHES = (1, 4, 16, 32)
LOSSES = ("softmax_ce", "mse")


def measure(cfg, mlp, steps: int = 3, seed: int = 0):
    """Compile and run ``steps`` steps on the fast model; returns (program, last StepResult)."""
    rng = np.random.default_rng(seed)
    s = CoreSession(cfg, "fast")
    b = mlp.batch
    tp = compile_sgd(cfg, mlp) if b == 1 else compile_mbgd(cfg, mlp)
    tp.init(s, init_weights(mlp, cfg.fmt, seed))
    r = None
    for _ in range(steps):
        if b == 1:
            t = int(rng.integers(mlp.n_out)) if mlp.loss == "softmax_ce" else rng.uniform(-1, 1, mlp.n_out)
            r = tp.run_step(s, rng.uniform(0, 1, mlp.n_in), t)
        else:
            t = rng.integers(0, mlp.n_out, b) if mlp.loss == "softmax_ce" else rng.uniform(-1, 1, (mlp.n_out, b))
            r = tp.run_step(s, rng.uniform(0, 1, (mlp.n_in, b)), t)
    assert r.cycles == sum(tp.predicted_cycles()) + tp.reload_cycles(), (r.cycles, tp.predicted_cycles())
    return tp, r


def step_rows(cfg) -> list:
    rows = []
    for loss in LOSSES:
        for b in BATCHES:
            mlp = MLP(SIZES, loss, 0.01, batch=b)
            tp, r = measure(cfg, mlp)
            rep, rep_h = step_report(tp, r.counters, HOST_LATENCY_CYCLES)
            kinds: dict = {}
            for _, kind, ins in tp.breakdown():
                kinds[kind] = kinds.get(kind, 0) + ins
            rows.append({
                "network": "-".join(map(str, SIZES)), "loss": loss, "batch": b,
                "method": "SGD (sw/train.py)" if b == 1 else "minibatch GD (sw/train_mb.py)",
                "RUN cycles/step (measured = predicted)": r.cycles, "host cycles/step": r.host_cycles,
                "cycles/sample": round((r.cycles + r.host_cycles) / b, 1),
                "FLOPs/step": mlp.flops_per_step(),
                "MAC util. %": round(rep.mac_utilization * 100, 2),
                "MAC util. with host %": round(rep_h.mac_utilization * 100, 2),
                "GFLOPS/W everything": round(rep.gflops_per_w_all, 1),
                "GFLOPS/W compared scope": round(rep.gflops_per_w_compared, 1),
                "cycles gemm/transpose/load+unload/other": (
                    f"{kinds.get('gemm', 0) + kinds.get('gemm_acc', 0)}/{kinds.get('transpose', 0)}/"
                    f"{kinds.get('load', 0) + kinds.get('unload', 0)}/"
                    f"{r.cycles - sum(kinds.get(k, 0) for k in ('gemm', 'gemm_acc', 'transpose', 'load', 'unload'))}")
                if b > 1 else "-",
            })
    return rows


def run() -> dict:
    cfg = ArchConfig()
    rows = step_rows(cfg)
    digits = [train_minibatch(cfg, SIZES, b=b, lr=lr, epochs=10) for b, lr in ((16, 0.1), (32, 0.2))]
    return {"title": "Minibatch GD step on one 4x4 binary16 core beside batch-1 SGD (fast model)",
            "note": "64-64-10, one step compiled by sw/train_mb.py (b > 1) or sw/train.py (b = 1), measured on the "
                    "fast model (counters = RTL's). MAC utilization = step FLOPs / 2 / (cycles x 16); 'with host' "
                    f"adds the assumed {HOST_LATENCY_CYCLES}-cycle softmax turnaround once per step. " + scope_note() + ". Digits "
                    "(softmax_ce, 10 epochs): " + "; ".join(
                        f"b={d['batch']} lr={d['lr']}: test accuracy {d['final_test_accuracy'] * 100:.2f}% "
                        f"(float64 minibatch GD {d['final_test_accuracy_float64'] * 100:.2f}%)" for d in digits),
            "rows": rows, "digits": digits}


if __name__ == "__main__":
    import json

    res = run()
    print(json.dumps(res["rows"], indent=1))
