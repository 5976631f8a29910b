"""Power caps at configuration S (32 cores of 4 x 4 PEs): the reference design's small
network 784-500-500-500-10, SGD, minibatch GD (b = 16) and CP, under a cap of half its
uncapped mean power, in every window of N cycles (:mod:`sim.power_cap`).

Three schedules of the same compiled step, each run on the fast chip engine with the
weights checked against the golden trainer after every step and the counters sampled
per window: uncapped; the capped schedule (waits between RUNs where the windows need
them); naive duty cycling (every op and host phase stretched by one factor). Power is
the model's *everything* scope (leakage included). Also writes
``benchmarks/results/power_cap_<method>_<window>.png`` (per-window power of the three
runs with the cap line).
"""

from __future__ import annotations

from pathlib import Path

from arch.config import PRESETS
from sim.power_cap import DEFAULT_WINDOW, plot_trace, power_cap
from sim.paper import LOSS, LR, NETS
from sw.mlp import MLP

RESULTS = Path(__file__).resolve().parent / "results"

#: (method, batch, window): minibatch GD at the default window; SGD, whose step is 15 times
#: shorter and whose longest op is 803 cycles, at 10,000 cycles (at the default window its
#: capped and naive schedules both come down to the mean power, and the uncapped trace
#: alone would take some 140 steps)
#: CP: its head RUN (5,573 cycles at 9.5 W dynamic) cannot be cut, and at half power it
#: needs a window of some 31,000 cycles; at 50,000 a window holds about one step
CASES = (("sgd", 1, 10_000), ("mbgd", 16, DEFAULT_WINDOW), ("cp", 1, 50_000))
LABEL = {"sgd": "SGD", "cp": "CP"}


def run() -> dict:
    cfg = PRESETS["S"]
    rows, cases = [], []
    for method, b, N in CASES:
        mlp = MLP(NETS["small"], LOSS, LR, batch=b)
        res = power_cap(cfg, mlp, method, window=N, cap_fraction=0.5)
        png = f"power_cap_{method}_{N}.png"
        label = LABEL.get(method) or f"minibatch GD (b = {b})"
        plot_trace(res, RESULTS / png, title=f"small net at S, {label}, "
                   f"cap {res['cap_watts']:.2f} W in windows of {N:,} cycles: capped / naive "
                   f"{res['throughput_ratio']:.2f}x")
        u, c, n = (res["runs"][k] for k in ("uncapped", "capped", "naive"))
        rows.append({"method": label, "window (cycles)": N,
                     "cap (W)": round(res["cap_watts"], 3),
                     "uncapped: W mean / largest window": f"{u['mean_watts']:.2f} / {u['max_window_watts']:.2f}",
                     "uncapped samples/s": round(u["samples_per_s"]),
                     "capped: cycles/step": c["step_cycles"], "capped: largest window (W)": round(c["max_window_watts"], 3),
                     "capped samples/s": round(c["samples_per_s"]),
                     "naive: cycles/step": n["step_cycles"], "naive: largest window (W)": round(n["max_window_watts"], 3),
                     "naive samples/s": round(n["samples_per_s"]),
                     "capped / naive": round(res["throughput_ratio"], 3),
                     "bound samples/s": round(res["bound_samples_per_s"]), "plot": png})
        cases.append(res)
    return {"title": "Power caps at configuration S: half the uncapped power in every window, capped schedule vs "
                     "naive duty cycling (fast chip engine)",
            "note": ("small net 784-500-500-500-10 at S; power = the model's everything scope (dynamic energy of "
                     "every counter and the leakage of all 32 cores, microcode store of ArchConfig.ucode_depth); "
                     "cap = half the uncapped mean power; windows aligned from the first traced step, each "
                     "checked from its counters (the last, partial window left out); every step's weights equal "
                     "the golden trainer's. Capped: the host waits between RUNs (one RUN per op) where the windows "
                     "need it (CP: between its RUNs, which are not cut); naive: every op (CP: RUN) and host phase "
                     "followed by a wait of (s - 1) times its length. Bound: the step's dynamic energy over the cap "
                     "less the leakage (the cap met on average only; no schedule of pauses is faster). "
                     "Throughput: samples per second at the 1 GHz clock."),
            "rows": rows, "cases": cases}
