"""Speed of the cycle-exact fast model (sim/fast_model.py) against cocotb + Verilator.

Programs are the MLP kernels of ``sw/kernels/`` with random data preloaded into the
PE memories (the fast model's speed, like the RTL's, does not depend on the values).
For each program:

* ``cycles``: the RUN's cycle count (identical on every backend, see the tests);
* Verilator: the same program as a session on the RTL under cocotb + Verilator (its
  build excluded, as for the fast model's imports), checked beat by beat against the
  fast model by the testbench; rate = simulated cycles / wall time of the session's
  stream (from the testbench), times the PE count;
* fast model *cold*: a new model with an empty plan cache (trace, compilation of the
  loop-level regions, execution); *warm*: the same program run again (compiled plans
  reused, as when a training loop runs its kernels many times);
* ratio = fast-model PE-cycles/s / Verilator PE-cycles/s.

Wall-clock times are the best of several repetitions (the machine is shared).
Environment: ``BENCH_FAST_VERILATOR=0`` skips the RTL measurements.
"""

from __future__ import annotations

import os
import time

import numpy as np

from sw.collectives import Region
from arch.config import ArchConfig
from sim.fast_flow import clear_plan_cache
from sim.fast_model import FastModel
from sw.asm import Builder
from sw.kernels import Scalar, emit_gemm, emit_gemv, emit_rank1, emit_relu

REPEAT = 15        # warm repetitions (best of); cold: REPEAT // 5


def _program(cfg, emit):
    b = Builder(cfg)
    emit(b)
    b.halt()
    return b.build().words()


def _random_state(cfg, rng):
    fmt = cfg.fmt
    P = cfg.n_pes
    a = fmt.from_float(rng.uniform(-1, 1, (P, cfg.mem_a_words))).astype(fmt.np_uint)
    b = fmt.from_float(rng.uniform(-1, 1, (P, cfg.mem_b_words))).astype(fmt.np_uint)
    return a, b


def _fast(cfg, words, mem, repeat=REPEAT):
    """(cold seconds, warm seconds, cycles, engine stats) of one program."""
    cold = []
    for _ in range(max(1, repeat // 5)):
        clear_plan_cache()
        f = FastModel(cfg)
        f.load(words)
        f.state.mem_a[:], f.state.mem_b[:] = mem
        t = time.perf_counter()
        r = f.run(0)
        cold.append(time.perf_counter() - t)
    warm = []
    for _ in range(repeat):
        f.state.mem_a[:], f.state.mem_b[:] = mem
        t = time.perf_counter()
        r = f.run(0)
        warm.append(time.perf_counter() - t)
    return min(cold), min(warm), r.cycles, dict(f.stats)


def _verilator(cfg, words, name):
    """Verilator cycles/s on this program (cocotb session), or None."""
    if os.environ.get("BENCH_FAST_VERILATOR", "1") in ("0", ""):
        return None
    from sim.core_run import Phase, run_session
    from sim.harness import SimulatorMissing, find_simulator

    try:
        find_simulator("verilator")
    except SimulatorMissing:
        return None
    res = run_session(cfg, [Phase(words)], backend="rtl", sim="verilator", reference="fast", name=f"bench-{name}")
    info = res[0].info
    return info["sim_cycles"] / info["wall_s"]


def _row(name, cfg, cycles, cold, warm, stats, vrate=None, pes=None):
    pes = pes or cfg.n_pes
    pc = cycles * pes
    row = {"program": name, "PEs": pes, "cycles": cycles,
           "Verilator PE-cycles/s": f"{vrate * cfg.n_pes:,.0f}" if vrate else "-",
           "fast cold ms": round(cold * 1e3, 1), "fast warm ms": round(warm * 1e3, 2),
           "fast cold PE-cycles/s": f"{pc / cold:,.0f}", "fast warm PE-cycles/s": f"{pc / warm:,.0f}",
           "ratio cold": f"{pc / cold / (vrate * cfg.n_pes):.0f}x" if vrate else "-",
           "ratio warm": f"{pc / warm / (vrate * cfg.n_pes):.0f}x" if vrate else "-",
           "loop-level share": f"{stats['flow_cycles'] / max(1, stats['flow_cycles'] + stats['cycle_engine_cycles']):.0%}"}
    return row


def kernels_4x4(rows, rng):
    cfg = ArchConfig(nr=4)
    m = n = 256
    mem = _random_state(cfg, rng)
    W, x, y = Region("a", 0), Region("b", 0), Region("b", 2048)
    u, v, al = Region("b", 0), Region("b", 100), Region("b", 300)
    progs = [
        ("gemv 256x256", lambda b: emit_gemv(b, cfg, m, n, W, x, y), True),
        ("gemv_t 256x256", lambda b: emit_gemv(b, cfg, m, n, W, x, y, trans=True), False),
        ("rank-1 update 256x256", lambda b: emit_rank1(b, cfg, m, n, W, u, v, alpha=Scalar("b", al.base)), True),
        ("gemm 128x128 x batch 16", lambda b: emit_gemm(b, cfg, 128, 128, 16, Region("a", 0), Region("b", 0),
                                                        Region("a", 1024)), False),
        ("relu 2048 words/PE", lambda b: emit_relu(b, cfg, 2048, Region("a", 0), Region("b", 0)), False),
    ]
    vrate_any = None
    for name, emit, rtl in progs:
        words = _program(cfg, emit)
        cold, warm, cycles, stats = _fast(cfg, words, mem)
        vrate = _verilator(cfg, words, name.split()[0]) if rtl else None
        vrate_any = vrate or vrate_any
        rows.append(_row(f"{name}, 4x4 binary16", cfg, cycles, cold, warm, stats, vrate or None))
    # ratios of the kernels without their own RTL run, against the measured Verilator rate
    if vrate_any:
        for r in rows:
            if r["Verilator PE-cycles/s"] == "-":
                pc = r["cycles"] * r["PEs"]
                r["Verilator PE-cycles/s"] = f"({vrate_any * 16:,.0f})"
                r["ratio cold"] = f"({pc / (r['fast cold ms'] / 1e3) / (vrate_any * 16):.0f}x)"
                r["ratio warm"] = f"({pc / (r['fast warm ms'] / 1e3) / (vrate_any * 16):.0f}x)"
    return vrate_any


def core_model_reference(rows, rng):
    """The Python reference model (one PEModel per PE) on a smaller GEMV, for scale."""
    from sim.core_model import CoreModel

    cfg = ArchConfig(nr=4)
    words = _program(cfg, lambda b: emit_gemv(b, cfg, 64, 64, Region("a", 0), Region("b", 0), Region("b", 2048)))
    cm = CoreModel(cfg)
    cm.load(words)
    t = time.perf_counter()
    r = cm.run(0)
    dt = time.perf_counter() - t
    cold, warm, cycles, stats = _fast(cfg, words, _random_state(cfg, rng))
    row = _row("gemv 64x64, 4x4 (CoreModel reference)", cfg, cycles, cold, warm, stats)
    row["Verilator PE-cycles/s"] = f"CoreModel {r.cycles * 16 / dt:,.0f}"
    rows.append(row)


def big_cores(rows, rng):
    """256 PEs (one 16x16 core) and 2048 PEs (8 such cores, one row block of a large
    GEMV each: the same program, compiled once, data per core)."""
    cfg = ArchConfig(nr=16)
    mem = _random_state(cfg, rng)
    words = _program(cfg, lambda b: emit_gemv(b, cfg, 1024, 1024, Region("a", 0), Region("b", 0),
                                              Region("b", 2048)))
    cold, warm, cycles, stats = _fast(cfg, words, mem, repeat=5)
    rows.append(_row("gemv 1024x1024, 16x16 binary16", cfg, cycles, cold, warm, stats))
    # 2048 PEs: y = W x with W 4096 x 2048 split in 8 row blocks of 512 x 2048
    m, n = 512, 2048
    words = _program(cfg, lambda b: emit_gemv(b, cfg, m, n, Region("a", 0), Region("b", 0), Region("b", 2048)))
    mems = [_random_state(cfg, rng) for _ in range(8)]
    clear_plan_cache()
    t = time.perf_counter()
    cyc = 0
    cores = []
    for k in range(8):
        f = FastModel(cfg)
        f.load(words)
        f.state.mem_a[:], f.state.mem_b[:] = mems[k]
        cyc = f.run(0).cycles
        cores.append(f)
    cold = time.perf_counter() - t
    t = time.perf_counter()
    for k, f in enumerate(cores):
        f.state.mem_a[:], f.state.mem_b[:] = mems[k]
        f.run(0)
    warm = time.perf_counter() - t
    rows.append(_row("gemv 4096x2048 on 8 cores of 16x16 (2048 PEs)", cfg, cyc, cold, warm, cores[0].stats,
                     pes=2048))


def scaling(rows, rng):
    """Cost against trip count: GEMV 64 x n on a 4x4 core, n doubling (cycles ~ linear)."""
    cfg = ArchConfig(nr=4)
    mem = _random_state(cfg, rng)
    for n in (64, 128, 256, 512, 1024):
        words = _program(cfg, lambda b: emit_gemv(b, cfg, 64, n, Region("a", 0), Region("b", 0), Region("b", 2048)))
        cold, warm, cycles, stats = _fast(cfg, words, mem)
        row = _row(f"scaling: gemv 64x{n}, 4x4", cfg, cycles, cold, warm, stats)
        row["Verilator PE-cycles/s"] = f"warm ns/cycle {warm / cycles * 1e9:,.0f}"
        rows.append(row)


def run() -> dict:
    rng = np.random.default_rng(2024)
    rows: list = []
    vrate = kernels_4x4(rows, rng)
    core_model_reference(rows, rng)
    big_cores(rows, rng)
    scaling(rows, rng)
    note = ("Fast model = sim.fast_model.FastModel (loop-level dataflow engine, per-cycle fallback), "
            "single Python process; cold = empty plan cache, warm = plans reused. Verilator = the core RTL "
            "under cocotb 2 + Verilator, session streamed by cocotbext-axi, every beat checked"
            + (f" (measured {vrate:,.0f} cycles/s on the 4x4 core)" if vrate else " (not measured)")
            + "; values in parentheses use that rate for programs not run on the RTL. Scaling rows: "
              "warm ns per simulated cycle of the core should stay flat as the trip count doubles.")
    return {"title": "Fast model speed vs cocotb + Verilator (PE-cycles per second)", "note": note, "rows": rows,
            "verilator_cycles_per_s": vrate}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
