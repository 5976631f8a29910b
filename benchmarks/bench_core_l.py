"""The configuration-L core (16 x 16 PEs, binary16) on Verilator against the fast model.

A GEMV and a GEMM block each run in their own session (load, kernel, unload) on the RTL
under cocotb. The outputs are checked against ``sw/golden.py`` bit for bit, and every
counter of the kernel phase (all of :func:`rtl.perf_counters.counter_names`) against the
fast model's (:class:`sim.fast_model.FastModel`, also the reference the testbench checks
every output beat against).

The core is preset L's (``cores=1``, no scratchpad) with PE memories and microcode just
large enough for the shapes (:data:`CFG`); ``tests/rtl/test_core_l.py`` runs the same
configuration, so the two share one Verilator build. The C++ is compiled at
``BENCH_CORE_L_OPT`` (default ``-O0``, as the test suite). Build seconds are the build
folder's lifetime (its lock file's creation to its completion stamp), so a cached build
reports the time it took when it was made.

    python -m benchmarks.run core_l
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from sw.collectives import Region
from arch.config import PRESETS
from arch.counters import counter_names
from sw import golden
from sw.kernels import emit_gemm, emit_gemv
from sim.core_run import run_kernel
from sw.layout import local_len, pack_matrix, pack_vector, unpack_vector

#: preset L's core alone, with PE memories and microcode just large enough for the shapes
CFG = PRESETS["L"].replace(cores=1, spad_kib=0, mem_a_words=128, mem_b_words=32, ucode_depth=512)
GEMV_SHAPE = (128, 72)          # 8 x 5 local words per PE (72 is not a multiple of 16)
GEMM_SHAPE = (128, 64, 16)      # m, n, batch: one 8 x 1 block of accumulators


def _rand(fmt, rng, shape):
    return fmt.from_float(rng.uniform(-1.0, 1.0, size=shape)).astype(fmt.np_uint)


def gemv_session(cfg, rng):
    """``(name, shape, loads, kernel, unloads, check)`` of ``y = W x`` (tree reduction, x diag)."""
    fmt, nr = cfg.fmt, cfg.nr
    m, n = GEMV_SHAPE
    mp, np_ = local_len(m, nr), local_len(n, nr)
    Wg, xg = _rand(fmt, rng, (m, n)), _rand(fmt, rng, (n,))
    W, x, xc, y = Region("a", 0), Region("b", 0), Region("b", np_), Region("b", 2 * np_ + 1)
    want = golden.gemv(fmt, nr, Wg, xg)

    def check(outs):
        assert (unpack_vector(outs[0], m, "rows") == want).all(), "gemv y"

    return ("gemv (tree, x diag)", f"{m}x{n}", [(W, pack_matrix(Wg, nr)), (x, pack_vector(xg, nr, "diag"))],
            lambda b: emit_gemv(b, cfg, m, n, W, x, y, x_layout="diag", x_copy=xc), [(y, mp)], check)


def gemm_session(cfg, rng):
    """``(name, shape, loads, kernel, unloads, check)`` of ``Y = W X``."""
    fmt, nr = cfg.fmt, cfg.nr
    m, n, bsz = GEMM_SHAPE
    mp, np_, bp = local_len(m, nr), local_len(n, nr), local_len(bsz, nr)
    Wg, Xg = _rand(fmt, rng, (m, n)), _rand(fmt, rng, (n, bsz))
    W, X, Y = Region("a", 0), Region("b", 0), Region("a", mp * np_)
    want = pack_matrix(golden.gemm(fmt, nr, Wg, Xg), nr)

    def check(outs):
        assert (outs[0] == want).all(), "gemm Y"

    return (f"gemm b={bsz}", f"{m}x{n}, b={bsz}", [(W, pack_matrix(Wg, nr)), (X, pack_matrix(Xg, nr))],
            lambda b: emit_gemm(b, cfg, m, n, bsz, W, X, Y), [(Y, mp * bp)], check)


@contextlib.contextmanager
def _env(name, value):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _build_dir(since: float):
    """The Verilator build folder this process's last simulation ran in (its run folder
    ends in this process id), or None."""
    from sim.harness import BUILD

    runs = [p for p in (BUILD / "verilator").glob(f"core-*/run/*-{os.getpid()}") if p.stat().st_mtime >= since]
    return max(runs, key=lambda p: p.stat().st_mtime).parent.parent if runs else None


def _build_seconds(build_dir) -> float | None:
    try:
        return round((build_dir / ".complete").stat().st_mtime - (build_dir / ".lock").stat().st_mtime, 1)
    except (OSError, TypeError):
        return None


def run() -> dict:
    from rtl.core import Core
    from sim.harness import write_verilog

    cfg = CFG
    names = counter_names(cfg)
    opt = os.environ.get("BENCH_CORE_L_OPT", "-O0")
    t0 = time.perf_counter()
    write_verilog(Core(cfg), "core", design_key=cfg.to_json())     # cached per design and sources
    verilog_s = round(time.perf_counter() - t0, 1)
    rows, builds = [], set()
    for seed, make in ((2031, gemv_session), (2032, gemm_session)):
        name, shape, loads, kernel, unloads, check = make(cfg, np.random.default_rng(seed))
        _, fast = run_kernel(cfg, loads, kernel, unloads, backend="fast")
        since = time.time()
        t1 = time.perf_counter()
        with _env("VERILATOR_OPT", opt):
            outs, rtl = run_kernel(cfg, loads, kernel, unloads, backend="rtl", sim="verilator",
                                   name=f"bench-core-l-{name.split()[0]}", reference="fast")
        session_s = time.perf_counter() - t1
        check(outs)
        r, f = rtl[0].counters, fast[0].counters
        assert sorted(r) == sorted(names) == sorted(f)
        diff = {k: (r[k], f[k]) for k in names if r[k] != f[k]}
        bdir = _build_dir(since)
        builds.add(bdir)
        info = rtl[0].info
        rows.append({"kernel": name, "shape": shape, "cycles": r["cycles"], "fast-model cycles": f["cycles"],
                     "cycles equal": r["cycles"] == f["cycles"], "counters compared": len(names),
                     "all counters equal": not diff, "differing": diff or "",
                     "outputs == golden": True, "build s": _build_seconds(bdir),
                     "session s": round(session_s, 1), "sim s": round(info["wall_s"], 1),
                     "session cycles": int(info["sim_cycles"]),
                     "cycles/s": round(info["sim_cycles"] / max(info["wall_s"], 1e-9))})
    note = (f"One {cfg.nr}x{cfg.nr} binary16 core: preset L with cores=1, spad_kib=0, {cfg.mem_a_words}/"
            f"{cfg.mem_b_words}-word PE banks, {cfg.ucode_depth}-word microcode; Verilator, C++ at {opt}. Each "
            "kernel runs in its own session (load, kernel, unload); 'cycles' is the kernel phase's cycles counter; "
            f"all {len(names)} counters of the kernel phase are compared with the fast model, every output beat of "
            "the session too (by the testbench), the outputs with sw/golden.py bit for bit. 'build s': the Verilator "
            f"build (verilate + C++), one build for both rows ({len(builds)} build folder); 'sim s' and 'cycles/s': "
            "the whole session in the testbench (loads and unloads included, 'session cycles'); 'session s': the "
            f"session's wall time from the host side (simulator start included). Verilog conversion (or its cache): "
            f"{verilog_s} s.")
    return {"title": "Configuration-L core (16x16, binary16) on Verilator vs the fast model", "note": note,
            "rows": rows, "verilog_s": verilog_s}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
