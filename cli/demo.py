"""``make demo``: the main job, end to end on a fresh machine.

1. the architecture (one validated configuration object);
2. Verilog of the PE and of a core (for FPGA/ASIC flows);
3. a GEMV kernel on a 4 x 4 core in RTL simulation (cocotb + Icarus by default): data
   streamed in over AXI4-Stream, the kernel run, results streamed out and checked bit for
   bit against the numpy golden model (and every output beat against the core model);
4. the run's counters turned into utilization, GFLOPS, watts and GFLOPS/W by the power
   model;
5. ECP5 synthesis statistics of the PE (YoWASP Yosys);
6. SGD training of an MLP on the array: a few steps of a digits classifier on the RTL
   (the recorded host stream replayed under cocotb, every output beat and counter
   compared with the core model, the weights after the steps bit for bit with the numpy
   golden trainer);
7. then many steps on the cycle-exact fast model: test accuracy beside float64 SGD,
   cycles, MAC utilization and GFLOPS/W of a step, loss curves saved as a PNG;
8. the chip: all-gather and reduce-scatter over the ring on a 4-core chip RTL;
9. SGD across the cores of a chip: two steps on a 2-core chip RTL against the golden
   trainer, then many steps on a 4-core chip on the fast chip engine (test accuracy
   beside float64, loss curves saved), then one step of the reference design's
   784-500-500-500-10 network at configuration S (32 cores) with its figures;
10. minibatch GD across the cores of a chip: two steps on a 2-core chip RTL against the
   golden trainer, two epochs of digits on a 4-core chip on the fast chip engine (test
   accuracy beside float64 minibatch GD), one step of 784-500-500-500-10 at
   configuration S beside the reference design's minibatch figure;
11. continuous propagation (the layers pipelined over groups of cores): a few samples
   through a 2-core pipeline on the chip RTL against the golden pipeline, an epoch of
   digits on a 4-core chip on the fast chip engine (test accuracy beside float64 CP with
   the same pipeline schedule and float64 SGD, loss curves saved), and the steady state of 784-500-500-500-10 at configuration S
   beside the reference design's CP figure; then minibatch CP (b = 8, MSE): two epochs
   of digits on the 4-core chip and the steady state at configuration S;
12. the reference design's Table 2 cell by cell beside ours (``caterpillar paper``): the
   nine cells (small / large network x configurations S / L x SGD, CP, minibatch GD)
   compiled and run on the fast chip engine, GFLOPS/W in the compared scope and with
   everything counted, MAC utilization, areas of S and L;
13. a small design-space search (``caterpillar dse``) on a local Ray cluster: the best
   chip for a 196-64-10 network within configuration S's area, beside S and L.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from arch.files import atomic_write
from cli.common import Progress
from sim.harness import ROOT

OUT = ROOT / "build" / "demo"


def _hdr(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)), flush=True)


def _verilog(cfg) -> None:
    from amaranth.back import verilog

    from rtl.tops import build_top

    _hdr("2. Verilog")
    comp, name = build_top("pe", cfg)
    t = verilog.convert(comp, name=name, emit_src=False)
    atomic_write(OUT / "pe.v", t)
    print(f"PE   -> {OUT / 'pe.v'}: {len(t.splitlines()):,} lines")
    comp, name = build_top("core", cfg)
    t = verilog.convert(comp, name=name, emit_src=False)
    atomic_write(OUT / "core.v", t)
    print(f"core -> {OUT / 'core.v'}: {len(t.splitlines()):,} lines ({cfg.nr}x{cfg.nr} PEs, sequencer, buses, "
          f"AXI-Stream host ports)")


def _kernel(cfg, sim: str | None):
    from sw.collectives import Region
    from sw import golden
    from sw.kernels import emit_gemv
    from sim.core_run import run_kernel
    from sw.layout import pack_matrix, pack_vector, unpack_vector

    _hdr("3. GEMV on the core, RTL simulation")
    m, n = 64, 48
    fmt = cfg.fmt
    rng = np.random.default_rng(1)
    W = fmt.from_float(rng.uniform(-1, 1, (m, n)))
    x = fmt.from_float(rng.uniform(-1, 1, n))
    rW, rx, ry = Region("a", 0), Region("b", 0), Region("b", 256)
    mp = -(-m // cfg.nr)
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
    print("  (a small matrix: the reduction and pipeline fill weigh more than on 256x256, see "
          "benchmarks/results/SUMMARY.md)")
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
    from rtl.synth import SynthError, ToolMissing, format_table, synthesize_top

    _hdr("5. PE synthesis for ECP5 (Yosys synth_ecp5)")
    try:
        res = synthesize_top("pe", cfg, "ecp5")
    except (ToolMissing, SynthError) as e:
        print(f"synthesis skipped: {e}")
        return
    print(format_table(res))
    atomic_write(OUT / "pe_ecp5.json", json.dumps(res, indent=2) + "\n")


DEMO_NET = (64, 32, 10)        # digits: 8x8 inputs, 10 classes
DEMO_LR = 0.03


def _train_rtl(cfg, sim: str | None, steps: int = 3) -> None:
    from sim.core_run import Phase, run_session
    from sw.datasets import load_digits
    from sw.golden_train import GoldenSGD
    from sw.mlp import MLP
    from sw.train import compile_sgd, init_weights
    from sim.sessions import CoreSession

    _hdr(f"6. SGD on the RTL: {steps} steps of {'-'.join(map(str, DEMO_NET))} on digits, vs the golden trainer")
    data = load_digits()
    mlp = MLP(DEMO_NET, "softmax_ce", DEMO_LR)
    tp = compile_sgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, 0)
    sess = CoreSession(cfg, "model", record=True)
    tp.init(sess, W0)
    gold = GoldenSGD(cfg, mlp, W0, fused=tp.fused)
    results = []
    for i in range(steps):
        x, t = data.x_train[i], int(data.y_train[i])
        results.append(tp.run_step(sess, x, t))
        gold.step(x, t)
    phases = sess.phases + [Phase(w, d, n) for w, d, n in tp.unload_weights_phases()]
    t0 = time.perf_counter()
    res = run_session(cfg, phases, backend="rtl", sim=sim, name="demo-train")     # every beat vs the model
    wall = time.perf_counter() - t0
    n_init = len(sess.phases) - steps * len(tp.programs)
    runs = res[n_init:n_init + steps * len(tp.programs)]
    for i, st in enumerate(results):
        got = [r.counters for r in runs[i * len(tp.programs):(i + 1) * len(tp.programs)]]
        if got != st.counters:
            raise SystemExit(f"step {i}: RTL counters differ from the model's")
    got_w = tp.decode_weights(res[-mlp.n_layers:], padded=True)
    want_w = gold.weights(padded=True)
    if not all(np.array_equal(a, b) for a, b in zip(got_w, want_w)):
        raise SystemExit("the RTL's weights differ from the golden trainer's")
    cyc = [sum(r.counters["cycles"] for r in runs[i * len(tp.programs):(i + 1) * len(tp.programs)])
           for i in range(steps)]
    print(f"RTL ({res[0].info.get('sim', sim or 'icarus')}): {steps} SGD steps, {cyc} cycles per step "
          f"({'+ the host softmax turnaround' if tp.host_cycles() else 'softmax gradient on the array'}), whole session {sum(r.counters['cycles'] for r in res)} cycles in "
          f"{wall:.1f} s; weights after step {steps} equal the golden trainer's bit for bit "
          f"({sum(w.size for w in got_w)} words, padding included)")


def _train_fast(cfg, epochs: int = 3) -> None:
    from sw.datasets import load_digits
    from sw.mlp import MLP
    from sim.train_driver import plot_curves, train

    _hdr(f"7. SGD on the fast model: {'-'.join(map(str, DEMO_NET))} on digits, {epochs} epochs, beside float64")
    data = load_digits()
    mlp = MLP(DEMO_NET, "softmax_ce", DEMO_LR)
    bar = Progress("  training")
    res = train(cfg, mlp, data, epochs=epochs, backend="fast", golden_steps=20, log=bar.log, progress=bar)
    st = res["step"]
    last = res["epochs"][-1]
    print(f"test accuracy {last['test_accuracy'] * 100:.2f} % on the array (binary16), "
          f"{last['test_accuracy_float64'] * 100:.2f} % float64 SGD; first 20 steps checked bit for bit "
          f"against the golden trainer")
    where = "the host" if st["host_cycles"] else "the array"
    print(f"one step: {st['run_cycles']} array cycles + {st['host_cycles']} host cycles (softmax gradient on {where}), "
          f"MAC utilization {st['mac_utilization'] * 100:.1f} % ({st['mac_utilization_with_host'] * 100:.1f} % "
          f"with the host), {st['gflops']:.1f} GFLOPS, {st['gflops_per_w_all']:.0f} GFLOPS/W everything counted, "
          f"{st['gflops_per_w_compared']:.0f} GFLOPS/W in the reference design's scope (FPU + SRAM)")
    atomic_write(OUT / "train_digits.json", json.dumps(
        {k: v for k, v in res.items() if k not in ("losses", "losses_float64")}, indent=2) + "\n")
    try:
        plot_curves(res, OUT / "train_digits.png")
        print(f"loss curves: {OUT / 'train_digits.png'}")
    except ImportError as e:                 # matplotlib missing
        print(f"plot skipped: {e}")


def _chip(sim: str | None) -> None:
    """Collectives over the ring: all-gather and reduce-scatter on a 4-core chip RTL
    (checked against the chip model and numpy), then their cost at configuration S."""
    from sw.ring import (beats_segment, emit_all_gather, emit_reduce_scatter, fill_diag_program,
                          golden_all_gather, golden_reduce_scatter, read_diag_program, reduce_scatter_layout,
                          segment_beats)
    from arch.config import ArchConfig
    from sim.chip_model import ChipModel
    from sim.chip_run import ChipPhase, run_chip_session

    _hdr("8. The chip: collectives over the ring (RTL of 4 cores, then configuration S)")
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, cores=4)
    c, m = cfg.cores, 5
    rng = np.random.default_rng(8)
    segs = [cfg.fmt.from_float(rng.uniform(-2, 2, (m, cfg.nr))) for _ in range(c)]
    parts = [[cfg.fmt.from_float(rng.uniform(-2, 2, (m, cfg.nr))) for _ in range(c)] for _ in range(c)]
    ph = [ChipPhase(fill_diag_program(cfg, "a", 0, m), [segment_beats(cfg, x) for x in segs], "fill"),
          ChipPhase(emit_all_gather(cfg, m, 0), name="all-gather"),
          ChipPhase(read_diag_program(cfg, "a", 0, c * m), name="read")]
    lays = [reduce_scatter_layout(cfg, k, m, 32) for k in range(c)]
    for t in range(c):
        addr = 32 + t * m
        bank = next(b for b, a in lays[0].values() if a == addr)
        data = [segment_beats(cfg, parts[k][next(s for s, (b, a) in lays[k].items() if a == addr)]) for k in range(c)]
        ph.append(ChipPhase(fill_diag_program(cfg, bank, addr, m), data, f"fill partials {t}"))
    ph.append(ChipPhase(emit_reduce_scatter(cfg, m, 32), name="reduce-scatter"))
    ph.append(ChipPhase([read_diag_program(cfg, *lays[k][k], m) for k in range(c)], name="read sums"))
    t0 = time.perf_counter()
    res = run_chip_session(cfg, ph, backend="rtl", sim=sim, name="demo_chip")
    dt = time.perf_counter() - t0
    ag = golden_all_gather(segs)
    rs = golden_reduce_scatter(cfg, parts)
    ok_ag = all(np.array_equal(beats_segment(cfg, res[2][k].data), ag[k]) for k in range(c))
    ok_rs = all(np.array_equal(beats_segment(cfg, res[-1][k].data), rs[k]) for k in range(c))
    print(f"{c} cores of {cfg.nr}x{cfg.nr} PEs on a ring, {res[0][0].backend} ({dt:.1f} s wall); every core's "
          f"output beats and counters vs the chip model: identical")
    print(f"  all-gather of {m} beats per core: {res[1][0].counters['cycles']} cycles, "
          f"{sum(r.counters['ring_out_beats'] for r in res[1])} ring beats, "
          f"{'bit-exact vs numpy' if ok_ag else 'MISMATCH vs numpy'}")
    print(f"  reduce-scatter of {c} x {m} beats per core: {res[-2][0].counters['cycles']} cycles, "
          f"{'bit-exact vs numpy (same addition order)' if ok_rs else 'MISMATCH vs numpy'}")
    if not (ok_ag and ok_rs):
        raise SystemExit("chip collectives do not match the golden model")
    big = ArchConfig(nr=4, cores=32)
    c, m = big.cores, 64
    # collective slots: the cost formula of docs/chip.md (first send to last take), the unit of the
    # reference design's (c - 1) m; cycles: the whole program (setup, halt, start and drain included)
    for name, imgs, slots in (("all-gather", emit_all_gather(big, m, 0), (c - 1) * m + 3),
                              ("reduce-scatter", emit_reduce_scatter(big, m, 0),
                               (c - 1) * max(m + 3, big.fpu_latency + 5))):
        ch = ChipModel(big, "fast")
        for k in range(big.cores):
            ch.load(imgs[k], core=k)
        r = ch.run()
        print(f"  configuration S (32 cores of 4x4), {name} of {m} beats per core, fast chip model: {slots} "
              f"collective slots (reference design's (c-1)m = {(c - 1) * m} slots), {r.cycles} cycles for the whole "
              f"program, {r.counters['stall_cycles']} stalls")


def _chip_replay(cfg, tp, golden, samples, sim, name):
    """Run the steps of ``samples`` (``(x, t)`` pairs) of the compiled chip program ``tp``
    on the per-cycle chip model (recorded) and on ``golden(cfg, mlp, W0)``, then replay
    the session and unload the weights on the RTL (every beat and counter of every core
    against the chip model); the weights must equal the golden trainer's. Returns ``(per-phase
    results, wall seconds)``."""
    from sim.chip_run import ChipPhase, run_chip_session
    from sw.train import init_weights
    from sim.sessions import ChipSession

    W0 = init_weights(tp.mlp, cfg.fmt, 0)
    sess = ChipSession(cfg, "model", record=True)
    tp.init(sess, W0)
    gold = golden(cfg, tp.mlp, W0)
    for x, t in samples:
        tp.run_step(sess, x, t)
        gold.step(x, t)

    un = tp.unload_weights_phases()
    t0 = time.perf_counter()
    res = run_chip_session(cfg, sess.phases + [ChipPhase(imgs, None, n) for imgs, n in un], backend="rtl", sim=sim,
                           name=name)
    wall = time.perf_counter() - t0
    got = tp.decode_weights(res[-len(un):], padded=True)
    if not all(np.array_equal(a, w) for a, w in zip(got, gold.weights(padded=True))):
        raise SystemExit(f"{name}: the chip RTL's weights differ from the golden trainer's")
    return res, wall


def _chip_train(sim: str | None, steps_fast: int = 800) -> None:
    """SGD across the cores of a chip: a few steps on the RTL of a 2-core chip checked
    against the golden trainer, then many steps on a 4-core chip on the fast chip engine
    (test accuracy beside float64 SGD), then one step of the reference network at
    configuration S."""
    from arch.config import PRESETS, ArchConfig
    from sw.datasets import load_digits
    from sw.golden_train_chip import GoldenChipSGD
    from sw.mlp import MLP
    from sw.train import init_weights
    from sw.train_chip import compile_chip_sgd
    from sim.sessions import ChipSession
    from sim.train_driver import chip_step_report
    from sim.train_driver import plot_curves, train

    _hdr(f"9. SGD across the cores of a chip: {'-'.join(map(str, DEMO_NET))} on digits")
    data = load_digits()
    mlp = MLP(DEMO_NET, "softmax_ce", DEMO_LR)
    # -- RTL: 2 cores of 2x2 PEs, two steps, replayed under cocotb -------------------------
    cfg = ArchConfig(nr=2, mem_a_words=512, mem_b_words=512, cores=2)
    tp = compile_chip_sgd(cfg, mlp)
    samples = [(data.x_train[i], int(data.y_train[i])) for i in range(2)]
    res, wall = _chip_replay(cfg, tp, GoldenChipSGD, samples, sim, "demo-chip-sgd")
    print(f"RTL ({res[0][0].backend}, {wall:.1f} s): 2 SGD steps on {cfg.cores} cores of {cfg.nr}x{cfg.nr} PEs "
          f"(panels of {tp.P} rows per core; broadcast, all-gather and reduce-scatter over the ring), "
          f"{tp.step_cycles() - tp.host_cycles()} cycles per step + {tp.host_cycles()} host; every core's beats "
          f"and counters equal the chip model's, the weights read back equal the golden trainer's bit for bit")
    # -- fast chip engine: 4 cores of 4x4 PEs (the same driver as step 7) -----------------
    cfg = PRESETS["chip-small"]
    bar = Progress("  training")
    res = train(cfg, mlp, data, epochs=1, backend="fast", golden_steps=20, log=bar.log, progress=bar,
                max_train=steps_fast)
    st, last = res["step"], res["epochs"][-1]
    print(f"fast chip engine, {cfg.cores} cores of {cfg.nr}x{cfg.nr}: {res['steps']} steps in {res['wall_s']:.0f} s, "
          f"test accuracy {last['test_accuracy'] * 100:.2f} % (binary16 on the array) vs "
          f"{last['test_accuracy_float64'] * 100:.2f} % float64 SGD; first 20 steps bit for bit against the "
          f"golden trainer")
    print(f"one step: {st['run_cycles']} array cycles + {st['host_cycles']} host cycles, MAC utilization "
          f"{st['mac_utilization'] * 100:.1f} % ({st['mac_utilization_with_host'] * 100:.1f} % with the host), "
          f"{st['gflops_per_w_all']:.0f} GFLOPS/W everything counted ({st['gflops_per_w_compared']:.0f} in the "
          f"reference design's FPU + SRAM scope); a small network on 64 PEs: mostly communication")
    try:
        plot_curves(res, OUT / "train_chip_digits.png", window=50)
        print(f"loss curves: {OUT / 'train_chip_digits.png'}")
    except ImportError as e:
        print(f"plot skipped: {e}")
    # -- configuration S: the reference design's network -------------------------------
    cfg = PRESETS["S"]
    big = MLP((784, 500, 500, 500, 10), "softmax_ce", 0.01)
    t0 = time.perf_counter()
    tp = compile_chip_sgd(cfg, big)
    sess = ChipSession(cfg, "fast")
    Wb = init_weights(big, cfg.fmt, 0)
    tp.init(sess, Wb)
    x = np.random.default_rng(9).uniform(0, 1, 784)
    r = tp.run_step(sess, x, 3)
    gold = GoldenChipSGD(cfg, big, Wb)
    gold.step(x, 3)
    same = all(np.array_equal(a, b) for a, b in zip(tp.weights_from_session(sess), gold.weights()))
    rep, rep_h = chip_step_report(tp, r)
    print(f"configuration S ({cfg.cores} cores of {cfg.nr}x{cfg.nr}), 784-500-500-500-10, one SGD step on the fast "
          f"chip engine ({time.perf_counter() - t0:.0f} s, weights {'==' if same else '!='} golden): {r.cycles} "
          f"cycles + {r.host_cycles} host, MAC utilization {rep.mac_utilization * 100:.1f} % "
          f"({rep_h.mac_utilization * 100:.1f} % with the host), {rep.gflops_per_w_all:.0f} GFLOPS/W "
          f"({rep.gflops_per_w_compared:.0f} in the compared scope); reference design: 177 GFLOPS/W, "
          f"> 80 % utilization")
    if not same:
        raise SystemExit("configuration S: the fast chip engine's weights differ from the golden trainer's")


def _chip_minibatch(sim: str | None, b: int = 16) -> None:
    """Minibatch GD across the cores of a chip: two steps on the RTL of a 2-core chip
    checked against the golden trainer, two epochs of digits on a 4-core chip on the fast
    chip engine (test accuracy beside float64 minibatch GD), one step of the reference
    network at configuration S beside the reference design's minibatch figure."""
    from sim.train_driver import train_minibatch
    from arch.config import PRESETS, ArchConfig
    from sw.datasets import load_digits
    from sw.golden_train_chip_mb import GoldenChipMBGD
    from sw.mlp import MLP
    from sw.train import init_weights
    from sim.sessions import ChipSession
    from sim.train_driver import chip_step_report
    from sw.train_chip_mb import compile_chip_mbgd

    _hdr(f"10. Minibatch GD across the cores of a chip: {'-'.join(map(str, DEMO_NET))} on digits")
    data = load_digits()
    # -- RTL: 2 cores of 2x2 PEs, b = 4, two steps, replayed under cocotb ------------------
    cfg = ArchConfig(nr=2, mem_a_words=512, mem_b_words=512, cores=2)
    mlp = MLP(DEMO_NET, "softmax_ce", 0.1, batch=4)
    tp = compile_chip_mbgd(cfg, mlp)
    samples = [(data.x_train[4 * i:4 * i + 4].T, data.y_train[4 * i:4 * i + 4]) for i in range(2)]
    res, wall = _chip_replay(cfg, tp, GoldenChipMBGD, samples, sim, "demo-chip-mbgd")
    print(f"RTL ({res[0][0].backend}, {wall:.1f} s): 2 minibatch steps (b = 4) on {cfg.cores} cores of "
          f"{cfg.nr}x{cfg.nr} PEs (X broadcast, all-gather of the activations, reduce-scatter of D^T W over the "
          f"ring), {tp.step_cycles() - tp.host_cycles()} cycles per step + {tp.host_cycles()} host; every core's "
          f"beats and counters equal the chip model's, the weights read back equal the golden trainer's bit for bit")
    # -- fast chip engine: 4 cores of 4x4 PEs, digits ----------------------------------------
    cfg = PRESETS["chip-small"]
    bar = Progress("  training")
    r = train_minibatch(cfg, DEMO_NET, data, b=b, lr=0.1, epochs=2, golden_steps=10, log=bar.log, progress=bar)
    st = r["step"]
    print(f"fast chip engine, {cfg.cores} cores of {cfg.nr}x{cfg.nr}, b = {b}: {r['steps']} steps in "
          f"{r['wall_s']:.0f} s, test accuracy {r['final_test_accuracy'] * 100:.2f} % vs "
          f"{r['final_test_accuracy_float64'] * 100:.2f} % float64 minibatch GD; first 10 steps bit for bit "
          f"against the golden trainer; per step {st['run_cycles']} cycles + {st['host_cycles']} host, "
          f"{st['gflops_per_w_all']:.0f} GFLOPS/W ({st['gflops_per_w_compared']:.0f} compared scope)")
    # -- configuration S: the reference design's network ---------------------------------
    cfg = PRESETS["S"]
    big = MLP((784, 500, 500, 500, 10), "softmax_ce", 0.05, batch=b)
    t0 = time.perf_counter()
    tp = compile_chip_mbgd(cfg, big)
    sess = ChipSession(cfg, "fast")
    Wb = init_weights(big, cfg.fmt, 0)
    tp.init(sess, Wb)
    rng = np.random.default_rng(9)
    X, T = rng.uniform(0, 1, (784, b)), rng.integers(0, 10, b)
    rr = tp.run_step(sess, X, T)
    gold = GoldenChipMBGD(cfg, big, Wb)
    gold.step(X, T)
    same = all(np.array_equal(a, w) for a, w in zip(tp.weights_from_session(sess), gold.weights()))
    rep, rep_h = chip_step_report(tp, rr)
    print(f"configuration S ({cfg.cores} cores of {cfg.nr}x{cfg.nr}), 784-500-500-500-10, one minibatch step (b = "
          f"{b}) on the fast chip engine ({time.perf_counter() - t0:.0f} s, weights {'==' if same else '!='} "
          f"golden): {rr.cycles} cycles + {rr.host_cycles} host, MAC utilization {rep.mac_utilization * 100:.1f} % "
          f"({rep_h.mac_utilization * 100:.1f} % with the host), {rep.gflops_per_w_all:.0f} GFLOPS/W "
          f"({rep.gflops_per_w_compared:.0f} in the compared scope); reference design, minibatch: "
          f"195 GFLOPS/W")
    if not same:
        raise SystemExit("configuration S: the fast chip engine's weights differ from the golden trainer's")


def _chip_cp(sim: str | None, steps_fast: int = 800) -> None:
    """Continuous propagation across the cores of a chip: three samples through a 2-core
    pipeline (filling, steady state, draining) on the per-cycle chip model, replayed on
    the chip RTL, weights against the golden pipeline; an epoch of digits on a 4-core
    chip on the fast chip engine; the steady state of the reference network at
    configuration S."""
    from arch.config import PRESETS, ArchConfig
    from sw.datasets import load_digits
    from sw.golden_train_cp import GoldenChipCP
    from sw.mlp import MLP
    from sw.train import init_weights
    from sim.sessions import ChipSession
    from sim.train_driver import chip_step_report
    from sw.train_cp import compile_chip_cp
    from sim.train_driver import plot_curves, train_cp

    _hdr(f"11. Continuous propagation across the cores of a chip: {'-'.join(map(str, DEMO_NET))} on digits")
    data = load_digits()
    mlp = MLP(DEMO_NET, "softmax_ce", DEMO_LR)
    # -- RTL: 2 cores of 2x2 PEs, one layer per core --------------------------------------
    cfg = ArchConfig(nr=2, mem_a_words=512, mem_b_words=512, cores=2)
    tp = compile_chip_cp(cfg, mlp)
    L, n = tp.latency_steps(), 3
    seq = [(data.x_train[s] if s < n else None, int(data.y_train[s - L]) if 0 <= s - L < n else None)
           for s in range(n + 2 * L)]
    res, wall = _chip_replay(cfg, tp, GoldenChipCP, seq, sim, "demo-chip-cp")
    print(f"RTL ({res[0][0].backend}, {wall:.1f} s): {n} samples through a pipeline of {cfg.cores} cores of "
          f"{cfg.nr}x{cfg.nr} PEs ({len(seq)} steps: filling, steady state, draining; activations and deltas "
          f"chained over the ring), {tp.step_cycles()} cycles per step; every core's beats and counters equal the "
          f"chip model's, the weights read back equal the golden pipeline's bit for bit")
    # -- fast chip engine: 4 cores of 4x4 PEs, digits ------------------------------------
    cfg = PRESETS["chip-small"]
    bar = Progress("  training")
    res = train_cp(cfg, mlp, data, epochs=1, backend="fast", golden_steps=20, log=bar.log, progress=bar,
                   max_train=steps_fast)
    st, last = res["step"], res["epochs"][-1]
    print(f"fast chip engine, {cfg.cores} cores of {cfg.nr}x{cfg.nr} (cores per layer {res['groups']}): "
          f"{res['steps']} pipeline steps in {res['wall_s']:.0f} s, test accuracy {last['test_accuracy'] * 100:.2f} % "
          f"(binary16) vs {last['test_accuracy_float64_cp'] * 100:.2f} % float64 CP with the same pipeline "
          f"schedule ({last['test_accuracy_float64'] * 100:.2f} % float64 SGD, without CP's stale weights); first 20 "
          f"steps bit for bit against the golden pipeline")
    print(f"one step (one sample completes): {st['cycles']} cycles, MAC utilization {st['mac_utilization'] * 100:.1f} "
          f"%, {st['gflops_per_w_all']:.0f} GFLOPS/W ({st['gflops_per_w_compared']:.0f} compared scope)")
    try:
        plot_curves(res, OUT / "train_cp_digits.png", window=50)
        print(f"loss curves: {OUT / 'train_cp_digits.png'}")
    except ImportError as e:
        print(f"plot skipped: {e}")
    # -- configuration S: the reference design's network, steady state --------------------
    cfg = PRESETS["S"]
    big = MLP((784, 500, 500, 500, 10), "softmax_ce", 0.01)
    t0 = time.perf_counter()
    tp = compile_chip_cp(cfg, big)
    sess = ChipSession(cfg, "fast")
    Wb = init_weights(big, cfg.fmt, 0)
    tp.init(sess, Wb)
    gold = GoldenChipCP(cfg, big, Wb)
    rng = np.random.default_rng(9)
    L = tp.latency_steps()
    for s in range(2 * L):                      # the last step: every group on a real sample
        x, t = rng.uniform(0, 1, 784), (int(rng.integers(10)) if s >= L else None)
        r = tp.run_step(sess, x, t)
        gold.step(x, t)
    same = all(np.array_equal(a, b) for a, b in zip(tp.weights_from_session(sess), gold.weights()))
    rep, _ = chip_step_report(tp, r)
    print(f"configuration S ({cfg.cores} cores of {cfg.nr}x{cfg.nr}), 784-500-500-500-10, cores per layer "
          f"{tp.groups}, {2 * L} pipeline steps on the fast chip engine ({time.perf_counter() - t0:.0f} s, weights "
          f"{'==' if same else '!='} golden): {r.cycles} cycles per step, MAC utilization "
          f"{rep.mac_utilization * 100:.1f} %, {rep.gflops_per_w_all:.0f} GFLOPS/W ({rep.gflops_per_w_compared:.0f} "
          f"in the compared scope); reference design, CP: 204 GFLOPS/W")
    if not same:
        raise SystemExit("configuration S: the CP pipeline's weights differ from the golden pipeline's")
    # -- minibatch CP: chip-small on digits, then the steady state at S ---------------------
    from sw.golden_train_cp_mb import GoldenChipMBCP

    cfg, b = PRESETS["chip-small"], 8
    bar = Progress("  training")
    res = train_cp(cfg, MLP(DEMO_NET, "mse", 0.2, batch=b), data, epochs=2, backend="fast", golden_steps=10,
                   log=bar.log, progress=bar)
    st, last = res["step"], res["epochs"][-1]
    print(f"minibatch CP (b = {b}, MSE), fast chip engine, {cfg.cores} cores of {cfg.nr}x{cfg.nr}: {res['steps']} "
          f"pipeline steps in {res['wall_s']:.0f} s, test accuracy {last['test_accuracy'] * 100:.2f} % vs "
          f"{last['test_accuracy_float64_cp'] * 100:.2f} % float64 minibatch CP, same schedule "
          f"({last['test_accuracy_float64'] * 100:.2f} % float64 minibatch GD); first 10 steps bit for bit against "
          f"the golden pipeline; per step {st['cycles']} cycles, {st['gflops_per_w_all']:.0f} GFLOPS/W "
          f"({st['gflops_per_w_compared']:.0f} compared scope)")
    cfg = PRESETS["S"]
    big = MLP((784, 500, 500, 500, 10), "mse", 0.01, batch=b)
    t0 = time.perf_counter()
    tp = compile_chip_cp(cfg, big)
    sess = ChipSession(cfg, "fast")
    Wb = init_weights(big, cfg.fmt, 0)
    tp.init(sess, Wb)
    gold = GoldenChipMBCP(cfg, big, Wb)
    for s in range(2 * L):
        x, t = rng.uniform(0, 1, (784, b)), (rng.uniform(-1, 1, (10, b)) if s >= L else None)
        r = tp.run_step(sess, x, t)
        gold.step(x, t)
    same = all(np.array_equal(a, w) for a, w in zip(tp.weights_from_session(sess), gold.weights()))
    rep, _ = chip_step_report(tp, r)
    print(f"configuration S, 784-500-500-500-10, minibatch CP (b = {b}), cores per layer {tp.groups}, {2 * L} "
          f"pipeline steps ({time.perf_counter() - t0:.0f} s, weights {'==' if same else '!='} golden): {r.cycles} "
          f"cycles per step, MAC utilization {rep.mac_utilization * 100:.1f} %, {rep.gflops_per_w_all:.0f} GFLOPS/W "
          f"({rep.gflops_per_w_compared:.0f} in the compared scope); reference design: minibatch GD 195, "
          f"CP 204 GFLOPS/W")
    if not same:
        raise SystemExit("configuration S: the minibatch CP pipeline's weights differ from the golden pipeline's")


def _paper() -> None:
    from arch.files import atomic_write
    from sim.paper import format_table, plot_table2, table2

    _hdr("12. The reference design's Table 2 beside this model (fast chip engine, several minutes)")
    print("  (cells that fit on chip only: `caterpillar paper` also runs the large net's SGD at S off-chip, "
          "streaming weights from DRAM, which takes about 4 CPU-minutes more)")
    res = table2(log=lambda s: print("  " + s, flush=True), offchip=False)
    print(format_table(res))
    atomic_write(OUT / "paper.json", json.dumps(res, indent=1) + "\n")
    plot_table2(res, OUT / "paper.png")
    print(f"wrote {OUT / 'paper.json'} and {OUT / 'paper.png'}")


def _dse() -> None:
    """A small design-space search on a local Ray cluster, the winner beside S and L."""
    from dse.engine import Evaluator, RayEngine
    from dse.evaluate import evaluate_point, parse_workloads
    from dse.report import best_table, plot_pareto
    from dse.search import Constraints, Goal, critical_path_search
    from dse.space import parse_space
    from arch.config import PRESETS

    _hdr("13. Design-space search: the best chip for 196-64-10 within S's area (Ray, 2 workers)")
    space = parse_space(["nr=2,4,8", "cores=2,4,8,16", "method=sgd,cp,mbgd:16"], PRESETS["chip-small"])
    workloads = parse_workloads("196-64-10")
    refs = {n: evaluate_point(PRESETS[n].to_dict(), {"method": "sgd"}, workloads, f"preset-{n}") for n in "SL"}
    goal = Goal("throughput_per_tdp", Constraints(area_mm2=refs["S"]["area_mm2"]))
    engine = RayEngine(workers=2)
    try:
        ev = Evaluator(space, workloads, engine, cache=OUT / "dse.jsonl")
        res = critical_path_search(ev, goal, seed=0)
    finally:
        engine.close()
    print(f"{ev.evaluations} of {space.size} points measured (compile + a fast-engine step each; "
          f"{ev.cached_at_start} from an earlier run's cache); area limit {goal.constraints.area_mm2:.1f} mm^2 "
          f"(configuration S's)")
    print(best_table(res, goal, n=5, refs=refs))
    best = goal.best(res)
    print(f"the winner trains {best['throughput_per_tdp'] / refs['S']['throughput_per_tdp']:.1f}x more samples per "
          f"second per watt than configuration S on this network")
    plot_pareto(res, goal, OUT / "dse.png", refs=refs)
    print(f"wrote {OUT / 'dse.png'} (caterpillar dse, docs/dse.md)")


def run_demo(sim: str | None = None) -> int:
    from arch.config import ArchConfig

    cfg = ArchConfig()  # the default: binary16, 4x4 PEs, 16 KB SRAM per PE
    print("the demo takes about 20 minutes on two cores (RTL simulations, synthesis, training); each part "
          "prints as it finishes", flush=True)
    t0 = time.perf_counter()
    _hdr("1. Architecture")
    print(f"{cfg.nr}x{cfg.nr} PEs per core, {cfg.fmt} (multiply, round, add, round), "
          f"{cfg.pe_sram_bytes // 1024} KB SRAM and {cfg.n_regs} registers per PE, "
          f"FMA latency {cfg.fpu_latency} cycles, {cfg.ucode_depth}-word microcode, {cfg.n_loops} loop levels")
    _verilog(cfg)
    kern, macs = _kernel(cfg, sim)
    _power(cfg, kern, macs)
    _synth(cfg)
    _train_rtl(cfg, sim)
    _train_fast(cfg)
    _chip(sim)
    _chip_train(sim)
    _chip_minibatch(sim)
    _chip_cp(sim)
    _paper()
    _dse()
    print(f"\nall outputs in {OUT} ({(time.perf_counter() - t0) / 60:.1f} minutes)")
    return 0


if __name__ == "__main__":
    sys.exit(run_demo())
