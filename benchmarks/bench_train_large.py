"""The reference design's large network (784-2500-2000-1500-1000-500-10) on its
configurations: what fits where, and minibatch GD, SGD and CP on configuration L (8 cores
of 16 x 16 binary16 PEs) beside the published figures (large net, config L: SGD 185, CP
211, minibatch 195 GFLOPS/W; config S, where it does not fit on chip: 98 / 127 / 187).

The cases at L are :func:`benchmarks.bench_train_chip_mb.measure`,
:func:`benchmarks.bench_train_chip.measure` and :func:`benchmarks.bench_train_cp.measure`
(compile, load the He-uniform weights, run steps on the fast chip engine, weights checked
bit for bit against the golden trainers after every step, cycles against the compiler's
prediction, power from the step's counters; CP through the pipeline's filling first).
Configuration S is compiled only, on chip alone: the rows give the compiler's error (the
sizes that do not fit); with a DRAM channel per core every method runs there (Table 2,
``paper.json``).
"""

from __future__ import annotations

from benchmarks import bench_train_chip, bench_train_chip_mb, bench_train_cp
from arch.config import PRESETS
from sw.mlp import MLP
from sw.train import TrainCompileError

LARGE = (784, 2500, 2000, 1500, 1000, 500, 10)
#: one step per case: a minibatch step is the same program every step (about 4 minutes
#: of the fast chip engine at configuration L)
STEPS = 1
BATCH = 16

#: published GFLOPS/W of the large network (../shared/reference/caterpillar.md, Table 2)
REFERENCE = {"L": {"sgd": 185, "cp": 211, "mbgd": 195}, "S": {"sgd": 98, "cp": 127, "mbgd": 187},
             "source": "../shared/reference/caterpillar.md, Table 2 (large net; config S: does not fit on chip)"}


def _compile_only(preset: str, method: str) -> dict:
    """Compile ``method`` for the large network on ``preset``; the error text if it fails."""
    from sw.train_chip import compile_chip_sgd
    from sw.train_chip_mb import compile_chip_mbgd
    from sw.train_cp import compile_chip_cp

    cfg = PRESETS[preset]
    batch = BATCH if method == "mbgd" else 1
    mlp = MLP(LARGE, "mse", 0.01, batch=batch)
    fn = {"sgd": compile_chip_sgd, "cp": compile_chip_cp, "mbgd": compile_chip_mbgd}[method]
    try:
        tp = fn(cfg, mlp)
    except TrainCompileError as e:
        return {"preset": preset, "method": method, "batch": batch, "fits": False, "error": str(e)}
    return {"preset": preset, "method": method, "batch": batch, "fits": True, "step_cycles": tp.step_cycles()}


METHOD_KEYS = {"minibatch GD": "mbgd", "SGD": "sgd", "CP": "cp"}


def _row(c: dict, method: str) -> dict:
    last, p = c["steps"][-1], c["steps"][-1]["power"]
    nr = c["config"]["nr"]
    return {"chip": f"{c['preset']}: {c['cores']} x {nr}x{nr}", "network": "-".join(map(str, c["sizes"])),
            "method": method, "batch": c.get("batch", 1), "step cycles (= predicted)": last["cycles"],
            "host turnaround": last.get("host_cycles", 0), "MAC util. %": round(last["mac_utilization"] * 100, 2),
            "GFLOPS": round(p["gflops"], 1), "GFLOPS/W everything": round(p["gflops_per_w_all"], 1),
            "area mm^2": round(p["area_mm2"]["total"], 1), "GFLOPS/mm^2": round(p["gflops_per_mm2"], 2),
            "GFLOPS/W compared scope": round(p["gflops_per_w_compared"], 1),
            "reference GFLOPS/W (compared scope)": REFERENCE[c["preset"]][METHOD_KEYS[method]],
            "mem/FPU energy": round(p["memory_over_fpu_energy"], 2), "golden": f"{len(c['steps'])} step(s) bit-exact"}


def run() -> dict:
    mb = bench_train_chip_mb.measure("L", LARGE, "softmax_ce", BATCH, steps=STEPS)
    sgd = bench_train_chip.measure("L", LARGE, "softmax_ce", steps=STEPS)
    cp = bench_train_cp.measure("L", LARGE, "softmax_ce", steps=STEPS)
    rows = [_row(mb, "minibatch GD"), _row(sgd, "SGD"), _row(cp, "CP")]
    tried = [_compile_only("S", m) for m in ("sgd", "cp", "mbgd")]
    for t in tried:
        rows.append({"chip": t["preset"], "network": "-".join(map(str, LARGE)),
                     "method": {"sgd": "SGD", "cp": "CP", "mbgd": "minibatch GD"}[t["method"]], "batch": t["batch"],
                     "step cycles (= predicted)": "does not fit: " + t.get("error", "")[:420],
                     "reference GFLOPS/W (compared scope)": REFERENCE[t["preset"]][t["method"]]})
    pm, ps, pc = mb["steps"][-1]["power"], sgd["steps"][-1]["power"], cp["steps"][-1]["power"]
    note = (f"The reference design's large network on the fast chip engine, {STEPS} step per case (weights bit for "
            f"bit against the golden trainers, cycles = predicted). Configuration L, minibatch GD (b = {BATCH}): MAC "
            f"utilization {mb['steps'][-1]['mac_utilization'] * 100:.1f}%, {pm['gflops_per_w_compared']:.0f} "
            f"GFLOPS/W in the compared scope ({pm['gflops_per_w_compared'] / REFERENCE['L']['mbgd']:.2f}x "
            f"its minibatch figure, {pm['gflops_per_w_compared'] / 211:.2f}x its best, 211), "
            f"{pm['gflops_per_w_all']:.0f} counting every energy category; SGD: "
            f"{sgd['steps'][-1]['mac_utilization'] * 100:.1f}%, {ps['gflops_per_w_compared']:.0f} "
            f"({ps['gflops_per_w_compared'] / REFERENCE['L']['sgd']:.2f}x its 185); CP: "
            f"{cp['steps'][-1]['mac_utilization'] * 100:.1f}%, {pc['gflops_per_w_compared']:.0f} "
            f"({pc['gflops_per_w_compared'] / REFERENCE['L']['cp']:.2f}x its 211), the input histories in the "
            f"scratchpads and layer 0's last rows paged from there (pages {cp['spad_pages']}). The other rows are "
            "compile attempts at configuration S, on chip alone, that fail with the sizes: the padded weights "
            "(24,412 words per PE) and the activations exceed a core's PE memories and scratchpad together "
            "(8192 + 16,384 words per PE). With a DRAM channel per core every one of them runs (Table 2, "
            "paper.json).")
    return {"title": "The reference design's large network (784-2500-2000-1500-1000-500-10)", "note": note,
            "reference": REFERENCE, "rows": rows, "cases": {"mbgd_L": mb, "sgd_L": sgd, "cp_L": cp}, "compile_attempts": tried}


if __name__ == "__main__":
    import json

    print(json.dumps(run()["rows"], indent=1))
