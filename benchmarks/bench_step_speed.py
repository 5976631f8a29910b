"""How long one batch-1 SGD step takes to simulate, stage by stage: the reference
design's large network (784-2500-2000-1500-1000-500-10, softmax_ce) on configuration L
and its small network (784-500-500-500-10) on configuration S.

Each case starts cold (the fast engine's compiled plans, its shared microcode tables and
decoded words, the compiler's caches and the golden's reduction tables cleared) and
times, as :func:`benchmarks.bench_train_chip.measure` does them:

* compile: :func:`sw.train_chip.compile_chip_sgd`;
* weight load: the He-uniform initial weights (:func:`sw.train.init_weights`, seed
  :data:`WEIGHT_SEED`) loaded through the host phases of :meth:`ChipSGDProgram.init` on a
  fast chip session (:class:`sim.sessions.ChipSession` ``"fast"``);
* run: one step (:meth:`ChipSGDProgram.run_step`) with ``x ~ U(0, 1)`` and a random
  class from ``numpy.random.default_rng(INPUT_SEED)``; its cycles are checked against the
  compiler's prediction;
* golden check: the same step on :class:`sw.golden_train_chip.GoldenChipSGD` and the
  weights read back from the cores compared with it bit for bit (an AssertionError on
  any difference).

``total`` is their sum; a second step (warm: the plans compiled by the first) is timed
too. The binary16 arithmetic runs in numba kernels (:mod:`pe.fp16_kernels`) whose
machine code numba caches on disk: "cold" is a fresh start of the engine with that cache
warm, the kernels loaded before the stages are timed (like the modules' imports); what
loading them costs a fresh process (numba's start-up included) and what compiling them
costs the first time ever (an empty cache) are measured apart, in subprocesses
(:func:`kernel_times`). Wall-clock seconds on the machine of the run (``machine``), and the process's CPU
seconds beside them (the machine may be shared: each case is measured :data:`REPEATS`
times from a cold start and the run with the least total wall time kept; the 1-minute
load average before and after it is recorded).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from arch.config import PRESETS
from benchmarks.bench_train_chip import _check_weights
from sw.golden_train_chip import GoldenChipSGD
from sw.mlp import MLP
from sw.train import init_weights
from sw.train_chip import compile_chip_sgd
from sim.sessions import ChipSession

WEIGHT_SEED = 0
INPUT_SEED = 1
LR = 0.01
CASES = [("L", (784, 2500, 2000, 1500, 1000, 500, 10)), ("S", (784, 500, 500, 500, 10))]
#: the goal for the large network at L: compile + weight load + run + golden check
GOAL_S = 2.0
#: cold-start measurements per case (the fastest kept)
REPEATS = int(os.environ.get("BENCH_STEP_SPEED_REPEATS", "2"))


def clear_caches() -> None:
    """Forget what an earlier case or benchmark of the process compiled (a cold start)."""
    import sim.fast_model as fast_model
    import sim.seq_model as seq_model
    import sw.asm.builder as builder
    import sw.golden as golden
    import sw.train_chip_ops as chip_ops
    from sim.fast_flow import clear_plan_cache

    clear_plan_cache()
    golden._tree_drivers.cache_clear()
    for cache in (getattr(fast_model, "_SHARED", None), getattr(seq_model, "_WORDS", None),
                  getattr(builder, "_TEXT_ITEMS", None), getattr(chip_ops, "_RS_MEMO", None),
                  getattr(chip_ops, "_LINES_MEMO", None)):
        if cache is not None:
            cache.clear()


_KERNEL_LOAD = ("import time; w, c = time.perf_counter(), time.process_time(); import pe.fp16_kernels; "
                "print(time.perf_counter() - w, time.process_time() - c)")


def kernel_times() -> dict:
    """Seconds (wall, CPU) a fresh process takes to import :mod:`pe.fp16_kernels`: with
    numba's cache as it is (``load``: the kernels loaded from disk, numba's start-up
    included) and with an empty cache directory (``first compile``: every kernel compiled,
    as on a fresh checkout)."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", "import pe.fp16_kernels"], cwd=root, check=True)   # the cache filled
    out = {}
    with tempfile.TemporaryDirectory() as empty:
        for key, env in (("load", {}), ("first compile", {"NUMBA_CACHE_DIR": empty})):
            r = subprocess.run([sys.executable, "-c", _KERNEL_LOAD], cwd=root, check=True, capture_output=True,
                               text=True, env={**os.environ, **env})
            wall, cpu = map(float, r.stdout.split())
            out[key] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
    return out


def _timed(f):
    w, c = time.perf_counter(), time.process_time()
    r = f()
    return r, time.perf_counter() - w, time.process_time() - c


def measure(preset: str, sizes, log=print) -> dict:
    cfg = PRESETS[preset]
    mlp = MLP(sizes, "softmax_ce", LR)
    label = f"{preset} {mlp.describe()}"
    load0 = os.getloadavg()[0]
    clear_caches()
    wall, cpu = {}, {}
    tp, wall["compile"], cpu["compile"] = _timed(lambda: compile_chip_sgd(cfg, mlp))
    sess = ChipSession(cfg, "fast")
    W0 = init_weights(mlp, cfg.fmt, WEIGHT_SEED)
    _, wall["weight load"], cpu["weight load"] = _timed(lambda: tp.init(sess, W0))
    gold = GoldenChipSGD(cfg, mlp, W0, fused=tp.fused)
    rng = np.random.default_rng(INPUT_SEED)
    cycles = []
    for step in (1, 2):
        x = rng.uniform(0, 1, mlp.n_in)
        t = int(rng.integers(mlp.n_out))
        key = "run" if step == 1 else "run, 2nd step"
        r, wall[key], cpu[key] = _timed(lambda: tp.run_step(sess, x, t))
        predicted = tp.step_cycles() - tp.host_cycles()
        if r.cycles != predicted:
            raise AssertionError(f"{label}, step {step}: {r.cycles} cycles measured, {predicted} predicted")
        cycles.append(r.cycles)
        gkey = "golden check" if step == 1 else "golden check, 2nd step"
        _, wall[gkey], cpu[gkey] = _timed(lambda: (gold.step(x, t), _check_weights(tp, sess, gold, step, label)))
    stages = ("compile", "weight load", "run", "golden check")
    total, total_cpu = sum(wall[k] for k in stages), sum(cpu[k] for k in stages)
    log(f"{label}: " + ", ".join(f"{k} {wall[k]:.2f} s" for k in stages) + f"; total {total:.2f} s "
        f"(CPU {total_cpu:.2f} s); 2nd step: run {wall['run, 2nd step']:.2f} s")
    return {"preset": preset, "network": mlp.describe(), "sizes": list(sizes), "cores": cfg.cores,
            "pes": cfg.nr * cfg.nr * cfg.cores, "step_cycles": cycles, "golden_bit_exact": True,
            "wall_s": {k: round(v, 3) for k, v in wall.items()}, "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
            "total_wall_s": round(total, 3), "total_cpu_s": round(total_cpu, 3),
            "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def run() -> dict:
    import pe.fp16_kernels  # noqa: F401  (loaded before the stages are timed: see the module doc)

    kernels = kernel_times()
    cases = [min((measure(p, s) for _ in range(REPEATS)), key=lambda c: c["total_wall_s"]) for p, s in CASES]
    rows = []
    for c in cases:
        w, u = c["wall_s"], c["cpu_s"]
        rows.append({
            "chip": f"{c['preset']}: {c['cores']} cores, {c['pes']} PEs", "network": "-".join(map(str, c["sizes"])),
            "step cycles": c["step_cycles"][0],
            "compile s": round(w["compile"], 2), "weight load s": round(w["weight load"], 2),
            "run s": round(w["run"], 2), "golden check s": round(w["golden check"], 2),
            "total s": round(c["total_wall_s"], 2), "total CPU s": round(c["total_cpu_s"], 2),
            "2nd step run s": round(w["run, 2nd step"], 2), "golden": "2 steps bit-exact",
            "load (1 min)": c["load_average_1min"][0],
        })
    note = ("One batch-1 SGD step simulated on the fast chip engine from a cold start, stage by stage (wall "
            "seconds; CPU seconds of the process beside the total): compile = compile_chip_sgd, weight load = "
            "the host phases loading the initial weights, run = the step's phases (its cycles = the compiler's "
            "prediction), golden check = GoldenChipSGD's step and the weights compared bit for bit; the 2nd "
            f"step's run reuses the plans the first compiled. Goal for the large network at L: {GOAL_S:g} s in "
            f"all (the row's total s). The fastest of {REPEATS} cold runs per case; load (1 min) = the machine's "
            "1-minute load average when it started (2 cores, shared). Cold = the engine's and the compiler's "
            "caches cleared, numba's on-disk cache of the binary16 kernels warm and the kernels loaded before "
            "timing; a fresh process takes {lw:.2f} s ({lc:.2f} s CPU) to load them (numba's start-up "
            "included), {fw:.2f} s ({fc:.2f} s CPU) the first time ever, when it compiles them "
            "(kernels).").format(lw=kernels["load"]["wall_s"], lc=kernels["load"]["cpu_s"],
                                 fw=kernels["first compile"]["wall_s"], fc=kernels["first compile"]["cpu_s"])
    return {"title": "Simulation speed of one SGD step (fast chip engine, cold start)", "note": note,
            "goal_s": GOAL_S, "kernels": kernels, "rows": rows, "cases": cases}


if __name__ == "__main__":
    import json

    print(json.dumps(run()["rows"], indent=1))
