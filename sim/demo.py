"""``make demo``: the main job, end to end on a fresh machine.

1. the architecture (one validated configuration object);
2. Verilog of the PE and of a core (for FPGA/ASIC flows);
3. a GEMV kernel on a 4 x 4 core in RTL simulation (cocotb + Icarus by default): data
   streamed in over AXI4-Stream, the kernel run, results streamed out and checked bit for
   bit against the numpy golden model (and every output beat against the core model);
4. the run's counters turned into utilization, GFLOPS, watts and GFLOPS/W by the power
   model;
5. ECP5 synthesis statistics of the PE (YoWASP Yosys).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from sim.harness import ROOT, atomic_write

OUT = ROOT / "build" / "demo"


def _hdr(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)), flush=True)


def _verilog(cfg) -> None:
    from amaranth.back import verilog

    from rtl.core import Core
    from rtl.tops import build_top

    _hdr("2. Verilog")
    comp, name = build_top("pe", cfg)
    t = verilog.convert(comp, name=name, emit_src=False)
    atomic_write(OUT / "pe.v", t)
    print(f"PE   -> {OUT / 'pe.v'}: {len(t.splitlines()):,} lines")
    t = verilog.convert(Core(cfg), name="caterpillar_core", emit_src=False)
    atomic_write(OUT / "core.v", t)
    print(f"core -> {OUT / 'core.v'}: {len(t.splitlines()):,} lines ({cfg.nr}x{cfg.nr} PEs, sequencer, buses, "
          f"AXI-Stream host ports)")


def _kernel(cfg, sim: str | None):
    from noc.collectives import Region
    from sw import golden
    from sw.kernels import emit_gemv, run_kernel
    from sw.layout import pack_matrix, pack_vector, unpack_vector

    _hdr("3. GEMV on the core, RTL simulation")
    m, n = 64, 48
    fmt = cfg.fmt
    rng = np.random.default_rng(1)
    W = fmt.from_float(rng.uniform(-1, 1, (m, n)))
    x = fmt.from_float(rng.uniform(-1, 1, n))
    rW, rx, ry = Region("a", 0), Region("b", 0), Region("b", 256)
    mp, np_ = -(-m // cfg.nr), -(-n // cfg.nr)
    info = {}

    def kernel(b):
        info["k"] = emit_gemv(b, cfg, m, n, rW, rx, ry)

    t0 = time.perf_counter()
    (ylocal,), (kres,) = run_kernel(cfg, [(rW, pack_matrix(W, cfg.nr)), (rx, pack_vector(x, cfg.nr, "cols"))],
                                    kernel, [(ry, mp)], backend="rtl", sim=sim, name="demo")
    dt = time.perf_counter() - t0
    y = unpack_vector(ylocal, m, "diag")
    want = golden.gemv(fmt, cfg.nr, W, x)
    ok = bool((y == want).all())
    c = kres.counters
    cycles = c["cycles"]
    macs = m * n
    fma = sum(v for k, v in c.items() if k.startswith("fma["))
    print(f"y = W x, W {m}x{n} {fmt}, {cfg.nr}x{cfg.nr} core, {kres.backend} ({dt:.1f} s wall for "
          f"load + kernel + unload)")
    print(f"  y vs the numpy golden model (same operations, same order): "
          f"{'bit-exact, all ' + str(m) + ' outputs' if ok else 'MISMATCH'}")
    print("  every output beat vs the cycle-accurate core model: identical")
    err = np.max(np.abs(fmt.to_float(y) - fmt.to_float(W).astype(np.float64) @ fmt.to_float(x)))
    print(f"  max |y - float64 W x| = {err:.3g} (binary16 rounding)")
    print(f"  kernel: {cycles} cycles, {c['instructions']} instructions; MAC utilization "
          f"{macs / (cycles * cfg.n_pes) * 100:.1f}% (useful MACs), FPU issue {fma / (cycles * cfg.n_pes) * 100:.1f}%")
    print(f"  (a small matrix: the reduction and pipeline fill weigh more than on 256x256, see "
          f"benchmarks/results/SUMMARY.md)")
    if not ok:
        raise SystemExit("demo: RTL results differ from the golden model")
    return kres, macs


def _power(cfg, kern, useful_macs) -> None:
    from sim.power import report_from_counters

    _hdr("4. Power and area model (45 nm, from the run's counters)")
    rep = report_from_counters(cfg, kern.counters, flops=2 * useful_macs)
    print(rep.table())
    atomic_write(OUT / "gemv_report.json", rep.to_json() + "\n")


def _synth(cfg) -> None:
    from rtl.synth import SynthError, ToolMissing, format_table, synthesize
    from rtl.tops import build_top
    from sim.harness import write_verilog

    _hdr("5. PE synthesis for ECP5 (Yosys synth_ecp5)")
    comp, name = build_top("pe", cfg)
    _, v = write_verilog(comp, name)
    try:
        res = synthesize(v, name, "ecp5")
    except (ToolMissing, SynthError) as e:
        print(f"synthesis skipped: {e}")
        return
    print(format_table(res))
    atomic_write(OUT / "pe_ecp5.json", json.dumps(res, indent=2) + "\n")


def run_demo(sim: str | None = None) -> int:
    from rtl.config import ArchConfig

    cfg = ArchConfig()  # the default: binary16, 4x4 PEs, 16 KB SRAM per PE
    _hdr("1. Architecture")
    print(f"{cfg.nr}x{cfg.nr} PEs per core, {cfg.fmt} (multiply, round, add, round), "
          f"{cfg.pe_sram_bytes // 1024} KB SRAM and {cfg.n_regs} registers per PE, "
          f"FMA latency {cfg.fpu_latency} cycles, {cfg.ucode_depth}-word microcode, {cfg.n_loops} loop levels")
    _verilog(cfg)
    kern, macs = _kernel(cfg, sim)
    _power(cfg, kern, macs)
    _synth(cfg)
    print(f"\nall outputs in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(run_demo())
