"""Kernel and collective utilization on one 4x4 binary16 core, measured on the RTL.

Each session loads the operands (phase 1), runs each kernel as its own phase (so its
counters are the kernel's alone), unloads the results and checks them against the
golden models bit for bit. The RTL runs under cocotb (Verilator, and Icarus for the
simulation-speed comparison); every output beat and every phase's counters are also
compared with the cycle-accurate core model.

MAC utilization = useful MACs / (cycles x 16); FPU-issue utilization = sum of the
``fma[p]`` counters / (cycles x 16) (includes the reduction adds and the ``alpha``
scalings); cycles are the kernel phase's ``cycles`` counter (start latency and the
``fpu_latency`` drain included).

The minibatch session runs one layer's step of minibatch training (``MB_M x MB_N``,
batch ``MB_BATCH``): forward GEMM, transpose of ``dY``, backward GEMM ``dX^T = dY^T W``,
transpose of ``X``, the accumulating update GEMM ``W += alpha dY X^T``.

Environment: ``BENCH_KERNELS_SIMS`` (default ``verilator,icarus``) picks the simulators
of the main session; ``BENCH_KERNELS_GEMM_SIMS`` (default ``verilator``) those of the
GEMM session.
"""

from __future__ import annotations

import os
import time

import numpy as np

from sw.collectives import (Region, cost_broadcast, cost_reduce, cost_transpose, emit_broadcast, emit_reduce,
                             emit_transpose)
from arch.config import ArchConfig
from sw import golden
from sw.kernels import (Scalar, emit_gemm, emit_gemv, emit_gemv_t_rank1, emit_rank1, gemm_cost, gemv_cost, gemv_t_rank1_cost, rank1_cost)
from sim.core_run import run_kernel
from sw.layout import local_len, pack_matrix, pack_vector, unpack_vector

M = N = 256
GEMM_BATCHES = (4, 16, 32)
COLLECTIVE_N = 64
MB_M = MB_N = 128
MB_BATCH = 16


def _rand(fmt, rng, shape, lo=-1.0, hi=1.0):
    return fmt.from_float(rng.uniform(lo, hi, size=shape)).astype(fmt.np_uint)


def _util(cfg, ctr, useful):
    nr2 = cfg.nr * cfg.nr
    fma = sum(ctr[f"fma[{p}]"] for p in range(nr2))
    cyc = ctr["cycles"]
    return round(100.0 * useful / (cyc * nr2), 2), round(100.0 * fma / (cyc * nr2), 2)


def _sims(var, default):
    return [s.strip() for s in os.environ.get(var, default).split(",") if s.strip()]


def main_session(cfg, backend, sim):
    """GEMV, transposed GEMV (tree and sequential reductions) and the rank-1 update of
    one 256 x 256 matrix, in one session (W loaded once; the rank-1 update runs last)."""
    fmt, nr = cfg.fmt, cfg.nr
    rng = np.random.default_rng(2017)
    mp, np_ = local_len(M, nr), local_len(N, nr)
    Wg = _rand(fmt, rng, (M, N))
    xg, x2g, ug, vg = (_rand(fmt, rng, (k,)) for k in (N, M, M, N))
    alpha = fmt.from_float(np.array([-0.0078125]))[0]
    W = Region("a", 0)
    nxt = [0]

    def reg(n):
        r = Region("b", nxt[0])
        nxt[0] += n
        return r

    x, xc, y1 = reg(np_), reg(np_ + 1), reg(mp)
    x2, x2c, y2 = reg(mp), reg(mp + 1), reg(np_)
    y3 = reg(mp)
    u, v, vc, al = reg(mp), reg(np_), reg(np_), reg(1)
    kernels = [
        ("gemv (tree, x diag)", lambda bb: emit_gemv(bb, cfg, M, N, W, x, y1, x_layout="diag", x_copy=xc),
         M * N, gemv_cost(cfg, M, N)["instructions"]),
        ("gemv_t (tree, x diag)", lambda bb: emit_gemv(bb, cfg, M, N, W, x2, y2, trans=True, x_layout="diag",
                                                         x_copy=x2c),
         M * N, gemv_cost(cfg, M, N, trans=True)["instructions"]),
        ("gemv (seq, x cols)", lambda bb: emit_gemv(bb, cfg, M, N, W, xc, y3, reduce="seq"),
         M * N, gemv_cost(cfg, M, N, reduce="seq")["instructions"]),
        ("rank1 (alpha, u/v diag)", lambda bb: emit_rank1(bb, cfg, M, N, W, u, v, alpha=Scalar("b", al.base),
                                                          u_layout="diag", v_layout="diag", v_copy=vc),
         M * N, rank1_cost(cfg, M, N, v_layout="diag")["instructions"]),
    ]
    loads = [(W, pack_matrix(Wg, nr)), (x, pack_vector(xg, nr, "diag")), (x2, pack_vector(x2g, nr, "diag")),
             (u, pack_vector(ug, nr, "diag")), (v, pack_vector(vg, nr, "diag")),
             (al, np.full((nr, nr, 1), alpha, dtype=fmt.np_uint))]
    unloads = [(y1, mp), (y2, np_), (y3, mp), (W, mp * np_)]
    t0 = time.perf_counter()
    outs, res = run_kernel(cfg, loads, [k[1] for k in kernels], unloads, backend=backend, sim=sim,
                           name="bench-main")
    wall = time.perf_counter() - t0
    # results vs golden
    assert (unpack_vector(outs[0], M, "rows") == golden.gemv(fmt, nr, Wg, xg)).all(), "gemv"
    assert (unpack_vector(outs[1], N, "cols") == golden.gemv_t(fmt, nr, Wg, x2g)).all(), "gemv_t"
    assert (unpack_vector(outs[2], M, "rows") == golden.gemv(fmt, nr, Wg, xg, "seq")).all(), "gemv seq"
    assert (outs[3] == pack_matrix(golden.rank1(fmt, nr, Wg, ug, vg, alpha), nr)).all(), "rank1"
    return kernels, res, wall


def gemm_session(cfg, backend, sim):
    fmt, nr = cfg.fmt, cfg.nr
    rng = np.random.default_rng(2018)
    mp, np_ = local_len(M, nr), local_len(N, nr)
    Wg = _rand(fmt, rng, (M, N))
    W = Region("a", 0)
    base = 0
    loads, unloads, kernels, wants = [(W, pack_matrix(Wg, nr))], [], [], []
    for bsz in GEMM_BATCHES:
        bp = local_len(bsz, nr)
        X, Y = Region("b", base), Region("b", base + np_ * bp)
        base += np_ * bp + mp * bp
        Xg = _rand(fmt, rng, (N, bsz))
        loads.append((X, pack_matrix(Xg, nr)))
        unloads.append((Y, mp * bp))
        c = gemm_cost(cfg, M, N, bsz)
        kernels.append((f"gemm b={bsz} (block {c['Li']}x{c['Lc']})",
                        lambda bb, X=X, Y=Y, bsz=bsz: emit_gemm(bb, cfg, M, N, bsz, W, X, Y),
                        M * N * bsz, c["instructions"]))
        wants.append(pack_matrix(golden.gemm(fmt, nr, Wg, Xg), nr))
    t0 = time.perf_counter()
    outs, res = run_kernel(cfg, loads, [k[1] for k in kernels], unloads, backend=backend, sim=sim,
                           name="bench-gemm")
    wall = time.perf_counter() - t0
    for o, w, k in zip(outs, wants, kernels):
        assert (o == w).all(), k[0]
    return kernels, res, wall


def fused_session(cfg, backend, sim):
    """The fused backward step (``y = W^T d`` and ``W += d (alpha a)^T`` in one pass)
    on a ``M x N`` matrix."""
    fmt, nr = cfg.fmt, cfg.nr
    rng = np.random.default_rng(2021)
    mp, np_ = local_len(M, nr), local_len(N, nr)
    Wg, dg, ag = _rand(fmt, rng, (M, N)), _rand(fmt, rng, (M,)), _rand(fmt, rng, (N,))
    alpha = fmt.from_float(np.array([-0.0078125]))[0]
    W, d, a, y, al = Region("a", 0), Region("b", 0), Region("b", mp + 1), Region("b", mp + 1 + np_), \
        Region("b", mp + 1 + 2 * np_)
    c = gemv_t_rank1_cost(cfg, M, N)
    kernels = [(f"fused gemv_t + rank1 (block {c['L']})",
                lambda bb: emit_gemv_t_rank1(bb, cfg, M, N, W, d, a, y, alpha=Scalar("b", al.base)),
                2 * M * N, c["instructions"])]
    loads = [(W, pack_matrix(Wg, nr)), (d, pack_vector(dg, nr, "diag")), (a, pack_vector(ag, nr, "cols")),
             (al, np.full((nr, nr, 1), alpha, dtype=fmt.np_uint))]
    outs, res = run_kernel(cfg, loads, [k[1] for k in kernels], [(y, np_), (W, mp * np_)], backend=backend,
                           sim=sim, name="bench-fused")
    assert (unpack_vector(outs[0], N, "cols") == golden.gemv_t(fmt, nr, Wg, dg)).all(), "fused y"
    assert (outs[1] == pack_matrix(golden.rank1_scaled_v(fmt, nr, Wg, dg, ag, alpha), nr)).all(), "fused W"
    return kernels, res


def minibatch_layer(cfg, rng):
    """One layer's minibatch step (docs/kernels.md, 'The minibatch backward pass'):
    ``(items, loads, unloads, check)``, items ``(name, emit, useful MACs, instructions)``."""
    fmt, nr = cfg.fmt, cfg.nr
    m, n, b = MB_M, MB_N, MB_BATCH
    L = lambda k: local_len(k, nr)                          # noqa: E731
    Wg, Xg, dYg = _rand(fmt, rng, (m, n)), _rand(fmt, rng, (n, b)), _rand(fmt, rng, (m, b), -0.1, 0.1)
    nxt = {"a": 0, "b": 0}

    def reg(bank, k):
        r = Region(bank, nxt[bank])
        nxt[bank] += k
        return r

    W, Y, dXT, dY = reg("a", L(m) * L(n)), reg("a", L(m) * L(b)), reg("a", L(b) * L(n)), reg("a", L(m) * L(b))
    X, XT, dYT = reg("b", L(n) * L(b)), reg("b", L(b) * L(n)), reg("b", L(b) * L(m))
    stage, eta = reg("b", max(L(n), L(m)) * L(b)), reg("b", 1)
    neg = fmt.from_float(np.array([-0.01 / b]))[0]
    items = [
        ("forward Y = W X", lambda bb: emit_gemm(bb, cfg, m, n, b, W, X, Y), m * n * b,
         gemm_cost(cfg, m, n, b)["instructions"]),
        ("transpose dY", lambda bb: emit_transpose(bb, cfg, m, b, dY, dYT, stage), 0,
         cost_transpose(cfg, m, b).instructions),
        ("backward dX^T = dY^T W", lambda bb: emit_gemm(bb, cfg, b, m, n, dYT, W, dXT), m * n * b,
         gemm_cost(cfg, b, m, n)["instructions"]),
        ("transpose X", lambda bb: emit_transpose(bb, cfg, n, b, X, XT, stage), 0,
         cost_transpose(cfg, n, b).instructions),
        ("update W += a dY X^T", lambda bb: emit_gemm(bb, cfg, m, b, n, dY, XT, W, accumulate=True,
                                                         alpha=Scalar("b", eta.base)), m * n * b,
         gemm_cost(cfg, m, b, n, alpha=True)["instructions"]),
    ]
    loads = [(W, pack_matrix(Wg, nr)), (X, pack_matrix(Xg, nr)), (dY, pack_matrix(dYg, nr)),
             (eta, np.full((nr, nr, 1), neg, dtype=fmt.np_uint))]
    unloads = [(Y, L(m) * L(b)), (dXT, L(b) * L(n)), (W, L(m) * L(n))]

    def check(outs):
        assert (outs[0] == pack_matrix(golden.gemm(fmt, nr, Wg, Xg), nr)).all()
        assert (outs[1] == pack_matrix(golden.gemm(fmt, nr, golden.transpose(fmt, nr, dYg), Wg), nr)).all()
        assert (outs[2] == pack_matrix(golden.gemm_acc(fmt, nr, dYg, golden.transpose(fmt, nr, Xg), Wg, neg),
                                       nr)).all()

    return items, loads, unloads, check


def minibatch_session(cfg, backend, sim):
    """:func:`minibatch_layer` on the RTL, each kernel its own phase."""
    nr = cfg.nr
    m, n, b = MB_M, MB_N, MB_BATCH
    items, loads, unloads, check = minibatch_layer(cfg, np.random.default_rng(2020))
    outs, res = run_kernel(cfg, loads, [it[1] for it in items], unloads, backend=backend, sim=sim,
                           name="bench-minibatch")
    check(outs)
    drain = cfg.run_overhead
    rows = []
    for (name, _, useful, pred), r in zip(items, res):
        ctr = r.counters
        assert ctr["cycles"] == pred + drain, (name, ctr["cycles"], pred + drain)
        mac, fpu = _util(cfg, ctr, useful)
        rows.append({"kernel": f"minibatch: {name}", "shape": f"{m}x{n}, b={b}", "cycles": ctr["cycles"],
                     "predicted": pred + drain, "useful MACs": useful, "MAC util %": mac, "FPU-issue util %": fpu,
                     "row hops": sum(ctr[f"row_hops[{q}]"] for q in range(nr)),
                     "col hops": sum(ctr[f"col_hops[{q}]"] for q in range(nr)), "measured on": sim})
    tot = sum(r["cycles"] for r in rows)
    useful = 3 * m * n * b
    rows.append({"kernel": "minibatch layer step (sum)", "shape": f"{m}x{n}, b={b}", "cycles": tot,
                 "predicted": sum(r["predicted"] for r in rows), "useful MACs": useful,
                 "MAC util %": round(100.0 * useful / (tot * nr * nr), 2),
                 "FPU-issue util %": round(sum(r["FPU-issue util %"] * r["cycles"] for r in rows) / tot, 2),
                 "row hops": sum(r["row hops"] for r in rows), "col hops": sum(r["col hops"] for r in rows),
                 "measured on": sim})
    return rows, res


def collective_session(cfg, backend, sim):
    fmt, nr = cfg.fmt, cfg.nr
    rng = np.random.default_rng(2019)
    n = COLLECTIVE_N
    Z = _rand(fmt, rng, (nr, nr, n))
    src = Region("a", 0)
    items = []
    base = 0
    for direction in ("row", "col"):
        dst = Region("b", base)
        base += n
        items.append((f"broadcast {direction}s", dst,
                      lambda bb, d=direction, dst=dst: emit_broadcast(bb, cfg, d, n, src, dst),
                      cost_broadcast(cfg, n, direction), golden.broadcast(Z, direction), direction))
        for mode in ("seq", "tree"):
            dst = Region("b", base)
            base += n
            sums = golden.reduce_partials(fmt, Z, mode, direction)
            want = np.zeros_like(Z)
            for q in range(nr):
                want[q, q] = sums[q]
            items.append((f"reduce {mode} along {direction}s", dst,
                          lambda bb, d=direction, m=mode, dst=dst: emit_reduce(bb, cfg, d, n, src, dst, mode=m),
                          cost_reduce(cfg, n, mode, direction), want, direction))
    loads = [(src, Z)] + [(it[1], np.zeros_like(Z)) for it in items]
    outs, res = run_kernel(cfg, loads, [it[2] for it in items], [(it[1], n) for it in items],
                           backend=backend, sim=sim, name="bench-coll")
    for o, it in zip(outs, items):
        assert (o == it[4]).all(), it[0]
    return items, res


def _kernel_rows(cfg, kernels, res, sim):
    drain = cfg.run_overhead
    out = []
    for (name, _, useful, pred), r in zip(kernels, res):
        ctr = r.counters
        mac, fpu = _util(cfg, ctr, useful)
        out.append({"kernel": name, "shape": f"{M}x{N}", "cycles": ctr["cycles"], "predicted": pred + drain,
                    "useful MACs": useful, "MAC util %": mac, "FPU-issue util %": fpu,
                    "row hops": sum(ctr[f"row_hops[{q}]"] for q in range(cfg.nr)),
                    "col hops": sum(ctr[f"col_hops[{q}]"] for q in range(cfg.nr)), "measured on": sim})
        assert ctr["cycles"] == pred + drain, (name, ctr["cycles"], pred + drain)
    return out


def run() -> dict:
    cfg = ArchConfig()              # 4x4, binary16, 4096-word banks, 1024-word microcode
    rows = []
    speed = []
    drain = cfg.run_overhead
    main_sims = _sims("BENCH_KERNELS_SIMS", "verilator,icarus")
    gemm_sims = _sims("BENCH_KERNELS_GEMM_SIMS", "verilator")
    for i, sim in enumerate(main_sims):
        kernels, res, wall = main_session(cfg, "rtl", sim)
        speed.append({"session": "gemv/gemv_t/rank1 256x256", "sim": sim, **res[0].info})
        if i == 0:
            rows += _kernel_rows(cfg, kernels, res, sim)
    for i, sim in enumerate(gemm_sims):
        kernels, res, wall = gemm_session(cfg, "rtl", sim)
        speed.append({"session": f"gemm 256x256 b={','.join(map(str, GEMM_BATCHES))}", "sim": sim, **res[0].info})
        if i == 0:
            rows += _kernel_rows(cfg, kernels, res, sim)
    kernels, res = fused_session(cfg, "rtl", gemm_sims[0])
    rows += _kernel_rows(cfg, kernels, res, gemm_sims[0])
    mb_rows, mb_res = minibatch_session(cfg, "rtl", gemm_sims[0])
    rows += mb_rows
    speed.append({"session": f"minibatch layer {MB_M}x{MB_N} b={MB_BATCH}", "sim": gemm_sims[0], **mb_res[0].info})
    items, res = collective_session(cfg, "rtl", main_sims[0])
    coll = []
    for it, r in zip(items, res):
        ctr, c = r.counters, it[3]
        d = it[5]
        coll.append({"kernel": it[0], "shape": f"n={COLLECTIVE_N}", "cycles": ctr["cycles"],
                     "predicted": c.instructions + drain, "useful MACs": 0, "MAC util %": 0.0,
                     "FPU-issue util %": _util(cfg, ctr, 0)[1],
                     "row hops": sum(ctr[f"row_hops[{q}]"] for q in range(4)),
                     "col hops": sum(ctr[f"col_hops[{q}]"] for q in range(4)), "measured on": main_sims[0]})
        assert ctr["cycles"] == c.instructions + drain and \
            [ctr[f"{d}_hops[{q}]"] for q in range(4)] == c.hops[d], it[0]
    rows += coll
    for s in speed:
        s["cycles/s"] = round(s["sim_cycles"] / max(s["wall_s"], 1e-9))
    note = ("One 4x4 core, binary16, default configuration (4096-word banks). Each kernel is its own RUN phase "
            "(counters are the kernel's alone; its cycles = the kernel's instructions + the HALT + the "
            f"start-latency cycle + the {cfg.fpu_latency + 1}-cycle drain). Results checked bit for bit against "
            "sw/golden.py; every output beat and counter also matches the core model. 'predicted' = the cost "
            "formula + 1 + fpu_latency + 2. MAC util = useful MACs / (cycles x 16); FPU-issue util = sum of fma "
            f"counters / (cycles x 16). Collectives: n = {COLLECTIVE_N} values per PE. GEMM ran on "
            f"{', '.join(gemm_sims)} only (about 12 min on Icarus at its speed). Simulation speed (whole sessions, loads "
            "included): " + "; ".join(f"{s['sim']} {s['session']}: {int(s['sim_cycles'])} cycles in "
                                      f"{s['wall_s']:.1f} s = {s['cycles/s']} cycles/s" for s in speed) + ".")
    return {"title": "Kernel and collective utilization (4x4 core, binary16, RTL)", "note": note, "rows": rows,
            "speed": speed}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
