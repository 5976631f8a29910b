"""The core RTL against the core model, through the AXI4-Stream host protocol."""

import json
import os
import random

import numpy as np
import pytest

from pe.fp_golden import mac_bits
from arch.microop import Gate, MicroOp, PredMode, Src
from tests.simulators import sim_matrix
from arch.config import PRESETS, ArchConfig
from rtl.core import Core
from sim.core_model import Beat, CoreModel
from arch.files import atomic_write
from sim.harness import BUILD, run_cocotb
from sw.host_protocol import clear_beats, counters_beats, decode_counters, load_beats, run_beats
from arch.isa import HostDir, Instruction, SeqOp

CONFIGS = {
    "nr2_fp16": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128),
    "nr4_fp32": ArchConfig(nr=4, fmt="binary32", mem_a_words=64, mem_b_words=64, ucode_depth=256),
    # the FPGA timing with one distribution level: execute, bus, distribution and fetch
    # stages, FP 4 / 5 (the read stage is run by the core-level tests of test_chip,
    # test_kernels, test_train*)
    "nr2_fp16_fpga": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, exec_stage=True,
                                bus_stage=True, dist_stage=True, fetch_stage=True, mul_latency=4, add_latency=5),
    # preset fpga: the same with two distribution levels (fan stage), the PE side two
    # cycles behind the sequencer, and the receive and read stages
    "nr2_fp16_fan": PRESETS["fpga"].replace(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128),
    # the base core with the 4-cycle multiplier (its operands registered too): elaborated
    # for ECP5 its MULT18X18D needs the freeze (a 2-cycle one is frozen by its operands)
    "nr2_fp16_mul4": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, mul_latency=4),
}


def fill_and_compute_program(cfg, n_words: int):
    """Stream n_words values into memA and memB of every PE, compute
    r1 = a0*b0 + 0; r1 = a1*b1 + r1 in every PE, store r1 to memA[n_words], read
    memA[0..n_words] of every PE back over the column buses."""
    nr = cfg.nr
    prog = []
    for bank in ("wa", "wb"):
        for k in range(nr):
            for a in range(n_words):
                prog.append(Instruction(MicroOp(pred_mode=PredMode.COL, pred_k=k, **{
                    f"{bank}_en": 1, f"{bank}_off": a, f"{bank}_src": Src.ROW}), hin=HostDir.ROW))
    prog.append(Instruction(MicroOp(ra_en=1, ra_off=0, rb_en=1, rb_off=0, fpu_en=1, fpu_a=Src.MEMA,
                                    fpu_b=Src.MEMB, fpu_c=Src.ZERO, fpu_dst=1)))
    prog += [Instruction()] * (cfg.acc_reuse_distance - 1)
    prog.append(Instruction(MicroOp(ra_en=1, ra_off=1, rb_en=1, rb_off=1, fpu_en=1, fpu_a=Src.MEMA,
                                    fpu_b=Src.MEMB, fpu_c=1, fpu_dst=1)))
    prog += [Instruction()] * (cfg.fpu_latency - 1)
    prog.append(Instruction(MicroOp(wa_en=1, wa_off=n_words, wa_src=1)))
    for a in range(n_words + 1):
        for k in range(nr):
            prog.append(Instruction(MicroOp(ra_en=1, ra_gate=Gate.CDRV, ra_off=a, cdrv_en=1, cdrv_k=k,
                                            cdrv_src=Src.MEMA), hout=HostDir.COL,
                                    hlast=int(a == n_words and k == nr - 1)))
    prog.append(Instruction(op=SeqOp.HALT))
    return [i.encode(cfg) for i in prog]


def random_lane_beats(cfg, rng, n):
    w = cfg.fmt.width
    vals = cfg.fmt.from_float(rng.uniform(-2, 2, size=(n, cfg.nr)))
    return [sum(int(v) << (i * w) for i, v in enumerate(row)) for row in vals]


def run_core(cfg, beats, name, sim, pause_in=0.0, pause_out=0.0, seed=0):
    model = CoreModel(cfg)
    expected = model.process(beats)
    vec = BUILD / "vectors" / f"core-{name}-{sim}-{os.getpid()}.json"
    res = BUILD / "vectors" / f"core-{name}-{sim}-{os.getpid()}-result.json"
    per = -(-64 // cfg.host_width)
    n_ctr = sum(1 for b in beats if b == counters_beats()[0]) * per * len(model.names)
    atomic_write(vec, json.dumps({"in": beats, "out": [[b.data, b.last] for b in expected]}))
    params = {"vectors": str(vec), "result": str(res), "pause_in": pause_in, "pause_out": pause_out, "seed": seed,
              "relaxed_tail": n_ctr if (pause_in or pause_out) else 0}
    run_cocotb(Core(cfg), "core", "sim.tb_core", sim=sim, config=cfg, params=params, design_key=cfg.to_json())
    return model, expected, json.loads(res.read_text())


#: Verilator in make test-all: the same RTL as the Icarus cases; make test builds and runs
#: a Verilator design through the same harness in tests/rtl/test_sequencer.py. nr4_fp32 in
#: make test-all too: tests/sim/test_fast_model.py::test_fast_vs_rtl[nr2_fp32-icarus] runs
#: host fills and programs on a binary32 core's RTL in make test (at 2 x 2)
@pytest.mark.parametrize("cname,sim", sim_matrix(CONFIGS, verilator=set(), slow={"nr4_fp32"}))
def test_core_fill_compute_readback(cname, sim):
    cfg = CONFIGS[cname]
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    n_words = 4
    words = fill_and_compute_program(cfg, n_words)
    data = random_lane_beats(cfg, rng, 2 * cfg.nr * n_words)
    beats = clear_beats() + load_beats(cfg, words) + run_beats(0, data) + counters_beats()
    model, expected, _ = run_core(cfg, beats, f"fill-{cname}", sim)
    # the model's numbers are the numpy golden MAC (independent check of the model)
    nr, w, m = cfg.nr, cfg.fmt.width, (1 << cfg.fmt.width) - 1
    lanes = np.array([[(d >> (i * w)) & m for i in range(nr)] for d in data], dtype=np.uint64)
    a = lanes[:nr * n_words].reshape(nr, n_words, nr)   # [col k, word, row r]
    b = lanes[nr * n_words:].reshape(nr, n_words, nr)
    fmt = cfg.fmt
    zero = np.zeros(1, fmt.np_uint)
    for r in range(nr):
        for c in range(nr):
            av, bv = a[c, :, r].astype(fmt.np_uint), b[c, :, r].astype(fmt.np_uint)
            p0 = mac_bits(fmt, av[:1], bv[:1], zero)
            want = int(mac_bits(fmt, av[1:2], bv[1:2], p0)[0])
            beat = expected[n_words * nr + r]   # word n_words, driver row r: lane c
            assert (beat.data >> (c * w)) & m == want, (r, c)
    ctr = decode_counters(cfg, [(b.data, b.last) for b in expected[-len(model.names) * (-(-64 // cfg.host_width)):]])
    assert ctr["instructions"] == len(words)
    assert ctr["host_in_beats"] == len(data)
    assert all(ctr[f"fma[{p}]"] == 2 for p in range(nr * nr))


@pytest.mark.parametrize("cname", ["nr2_fp16", "nr2_fp16_fan"])
def test_core_counters_accumulate_and_clear(require_simulator, cname):
    """Counters add up over RUNs until a CLEAR, read back to back with the headers:
    COUNTERS straight after a CLEAR (zeros, while the bank settles from the clear),
    RUN straight after a CLEAR (its counts alone), two RUNs without one (their sum);
    every beat against the core model."""
    require_simulator("icarus")
    cfg = CONFIGS[cname]
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    words = fill_and_compute_program(cfg, 2)

    def run():
        return run_beats(0, random_lane_beats(cfg, rng, 2 * cfg.nr * 2))

    read = counters_beats()
    parts = [load_beats(cfg, words), run(), run(), read, clear_beats(), read,
             run(), read, clear_beats(), run(), read]
    run_core(cfg, [b for part in parts for b in part], f"clear-{cname}", "icarus")
    # what the model (and so the RTL) read: two RUNs' sum, zeros, one RUN, one RUN
    model = CoreModel(cfg)
    reads = []
    for part in parts:
        out = model.process(part)
        if part is read:
            reads.append(decode_counters(cfg, [(b.data, b.last) for b in out]))
    one = reads[2]
    assert one["instructions"] == len(words) and one["cycles"] > len(words)
    assert reads[3] == one and reads[0] == {k: 2 * v for k, v in one.items()}
    assert all(v == 0 for v in reads[1].values())


@pytest.mark.parametrize("sim", ["icarus"])
@pytest.mark.parametrize("cname", ["nr2_fp16", "nr2_fp16_fpga", "nr2_fp16_fan"])
def test_core_stalls_are_invisible(sim, cname):
    """Random gaps on the input stream and backpressure on the output: same beats."""
    cfg = CONFIGS[cname]
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    words = fill_and_compute_program(cfg, 4)
    data = random_lane_beats(cfg, rng, 2 * cfg.nr * 4)
    beats = clear_beats() + load_beats(cfg, words) + run_beats(0, data)
    run_core(cfg, beats, f"stall-{cname}", sim, pause_in=0.4, pause_out=0.5, seed=seed)


# Host-stream gaps and backpressure stall the sequencer; every bubble that follows
# freezes the PEs with FMAs, moves, SRAM reads and writes in flight: the multiplier, the
# adder, the SRAM and register-file ports and the PE's own registers must all hold.
# Both freeze programs first fill banks A and B from the host, with unit strides.
_FREEZE_FILL = """
    stride ar0 = 1
    stride ar1 = 1
    stride ar2 = 1
    stride ar3 = 1
    loop i 8 {
        hin row | wra [ar0]++ = row
        hin col | wrb [ar1]++ = col
    }
    ar0 = 0
    ar1 = 0
"""
FREEZE_PROGRAM = _FREEZE_FILL + """
    loop j 8 {
        hin row | rda [ar0]++ | rdb [ar1]++ | mac r2 += mema * memb | mov r3 = row
        mac r4 += r3 * r3 | relu r5 = r2 | wrb [ar2]++ = r4
        hin col | mov r6 = col | mac r7 += r6 * r2 | wra [ar3]++ = r5
    }
    loop w 10 {
        nop
    }
    rdrv r2 @col=0 | hout row
    rdrv r2 @col=1 | hout row
    rdrv r4 @col=0 | hout row
    rdrv r4 @col=1 | hout row
    rdrv r7 @col=0 | hout row
    rdrv r7 @col=1 | hout row
    ar2 = 0
    ar3 = 0
    loop k 8 {
        rdb [ar2]++ | cdrv memb @row=0 | hout col
        rda [ar3]++ | cdrv mema @row=1 | hout col
    }
    halt
"""


# Back-to-back reads through the AR each one post-increments, on instructions that wait
# for the host: a bubble holds the stalled head's micro-op on the PE side (not executed),
# so neither its AR increments nor its stride setting may act in the bubble (a PE that
# computed its read address a cycle early, or loaded its strides outside the freeze,
# would get this wrong unless it took the freeze into account: docs/fpga.md, "Timing").
FREEZE_AR_PROGRAM = _FREEZE_FILL + """
    loop j 8 {
        hin row | rda [ar0]++ | mov r3 = row | wrb [ar2 + 8]++ = mema
    }
    loop k 4 {
        hin col | rdb [ar1]++ | mov r4 = col | wra [ar3 + 8]++ = memb | stride ar1 = 2
        hin col | rdb [ar1]++ | mov r4 = col | wra [ar3 + 8]++ = memb | stride ar1 = 1
    }
    ar2 = 0
    ar3 = 0
    loop w 4 {
        nop
    }
    loop m 8 {
        rdb [ar2 + 8]++ | cdrv memb @row=0 | hout col
    }
    loop n 8 {
        rda [ar3 + 8]++ | cdrv mema @row=1 | hout col
    }
    halt
"""


@pytest.mark.parametrize("program", ["units", "ar"])
@pytest.mark.parametrize("cname,board", [("nr2_fp16", None), ("nr2_fp16_fpga", None), ("nr2_fp16_fan", None),
                                         ("nr2_fp16_mul4", "ulx3s-85f"), ("nr2_fp16_fan", "ulx3s-85f")])
def test_core_freeze_holds_units_in_flight(require_simulator, cname, board, program):
    """Bubbles with every PE unit busy (FREEZE_PROGRAM) or on stalled instructions that
    post-increment and re-stride the ARs they read through (FREEZE_AR_PROGRAM), random
    stream gaps and backpressure: the RTL's output beats equal the core model's.

    ``board``: the core elaborated for that ECP5 board, as ``caterpillar build`` does:
    each PE's multiplier a MULT18X18D whose own registers (the significands' with the
    4-cycle multiplier) run on the PE's enable through the block's clock enable, simulated with the primitives' models
    (sim/models); both cores' PE enables, the freeze with and without the distribution
    stage. (A 2-cycle multiplier has only the product register in the block, whose
    input the frozen operands hold: it would not need the enable.)"""
    from sim.core_run import run_job
    from sw.asm import assemble

    require_simulator("icarus")
    cfg = CONFIGS[cname]
    platform = None
    if board is not None:
        from rtl.fpga import get_platform
        platform = get_platform(board)
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    words = assemble({"units": FREEZE_PROGRAM, "ar": FREEZE_AR_PROGRAM}[program], cfg).words()
    # binary16 lanes below 1.0 (no overflow to infinity in the sums)
    data = [rng.getrandbits(32) & 0x3BFF3BFF for _ in range(32)]
    ref = run_job(cfg, words, data, backend="model")
    got = run_job(cfg, words, data, backend="rtl", sim="icarus", name=f"freeze-{program}-{cname}-{board}", pause_in=0.5,
                  pause_out=0.5, seed=seed, platform=platform)
    assert got.data == ref.data
    assert got.counters["stall_cycles"] > 0
    assert got.counters["instructions"] == ref.counters["instructions"]


def test_core_bad_command_answers_error_beat():
    cfg = CONFIGS["nr2_fp16"]
    out = CoreModel(cfg).process([0x7, 0xF])
    assert out == [Beat(0xF | (0x7 << 4), True), Beat(0xF | (0xF << 4), True)]


@pytest.mark.slow
def test_core_nr8_simulates_on_rtl(require_simulator):
    """An 8 x 8 core (64 PEs) runs a fill/compute/readback job on Icarus, equal to the
    model (``slow``: the same generator runs at 2 x 2 and 4 x 4 in ``make test``)."""
    require_simulator("icarus")
    cfg = ArchConfig(nr=8, mem_a_words=16, mem_b_words=16, ucode_depth=256)
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    words = fill_and_compute_program(cfg, 2)
    data = random_lane_beats(cfg, rng, 2 * cfg.nr * 2)
    run_core(cfg, clear_beats() + load_beats(cfg, words) + run_beats(0, data), "nr8", "icarus")


@pytest.mark.slow
def test_core_nr16_elaborates():
    """A 16 x 16 core (the reference design's config-L core) elaborates: 256 PEs, 32 buses
    (``slow``: the generator, the same for every ``nr``, elaborates and simulates at
    2 x 2 and 4 x 4 in ``make test``)."""
    from amaranth.hdl import Fragment

    cfg = ArchConfig(nr=16, mem_a_words=16, mem_b_words=16, ucode_depth=64)
    frag = Fragment.get(Core(cfg), None)
    names = [str(n) for _, n, _ in frag.subfragments]
    assert sum(n.startswith("pe_") for n in names) == 256
    assert sum(n.startswith(("row_bus", "col_bus")) for n in names) == 32


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["binary16", "binary32"])
def test_core_nr16_converts_to_netlist(fmt):
    """Full RTLIL conversion of a 16 x 16 core (3-5 minutes each; its elaboration alone:
    test_core_nr16_elaborates)."""
    from amaranth.back import rtlil

    cfg = ArchConfig(nr=16, fmt=fmt, mem_a_words=16, mem_b_words=16, ucode_depth=64)
    text = rtlil.convert(Core(cfg), name="core16")
    assert text.count("\nmodule ") >= 256 + 1


@pytest.mark.parametrize("cname", ["nr2_fp16", "nr2_fp16_fpga", "nr2_fp16_fan"])
def test_core_host_credit_register_tracks_level(cname):
    """The output-FIFO credit register equals the FIFO level plus the host-bound pushes in
    flight in every cycle (Amaranth's simulator, internal signals), under heavy random
    backpressure: runs that fill the FIFO with ``hout`` beats, counter replies and done
    beats between them. The RTL tests compare beats and stall-free cycles; this checks
    the invariant the room check relies on, cycle by cycle."""
    from amaranth.sim import Simulator

    cfg = CONFIGS[cname]
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    words = fill_and_compute_program(cfg, 4)
    data = random_lane_beats(cfg, np.random.default_rng(seed), 2 * cfg.nr * 4)
    beats = (clear_beats() + load_beats(cfg, words) + run_beats(0, data) + counters_beats()
             + run_beats(0, data))
    expected = CoreModel(cfg).process(beats)
    dut = Core(cfg)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    credits, level, flags = dut._credit_probe
    got, stats = [], {"full": 0, "cycles": 0}

    async def bench(ctx):
        k = 0
        while len(got) < len(expected):
            stats["cycles"] += 1
            assert stats["cycles"] < 20_000, "timeout"
            ready = rng.random() < 0.35
            ctx.set(dut.m_axis.ready, ready)
            ctx.set(dut.s_axis.valid, k < len(beats))
            ctx.set(dut.s_axis.payload.data, beats[k] if k < len(beats) else 0)
            c, lv = ctx.get(credits), ctx.get(level)
            in_flight = sum(ctx.get(f) for f in flags)
            assert c == lv + in_flight, f"cycle {stats['cycles']}: credits {c} != level {lv} + {in_flight}"
            stats["full"] += c >= 8
            took = k < len(beats) and ctx.get(dut.s_axis.ready)
            if ready and ctx.get(dut.m_axis.valid):
                got.append(Beat(ctx.get(dut.m_axis.payload.data), bool(ctx.get(dut.m_axis.payload.last))))
            await ctx.tick()
            k += took

    sim.add_testbench(bench)
    sim.run()
    # the counters differ (stalls, cycles): compare the data beats and the done beats
    n_ctr = len(CoreModel(cfg).names) * -(-64 // cfg.host_width)
    r = (len(expected) - n_ctr) // 2        # beats of one run, its done beat included
    assert len(got) == len(expected)
    assert got[:r] == expected[:r] and got[r + n_ctr:] == expected[r + n_ctr:]
    assert stats["full"] > 0, "the FIFO never filled: the room check was not exercised"


@pytest.mark.parametrize("cname", ["nr2_fp16", "nr2_fp16_fpga", "nr2_fp16_fan"])
def test_core_microcode_written_only_while_unread(cname):
    """The microcode RAM is never read in a cycle in which it is written: the ground on
    which the FPGA build declares its read port collision-undefined
    (``rtl.fpga.sram_reads_collision_free``; Yosys would otherwise add read-during-write
    logic in front of the RAM's output). Two programs loaded over the same addresses, the
    second right behind the first run's done beat, each run at once after its load, so
    the host's LOAD and RUN follow each other as closely as the protocol lets them; in
    every cycle the write and read enables are not both set (Amaranth's simulator,
    internal signals), and both runs return the model's beats, so the second run read
    the words just written."""
    from amaranth.sim import Simulator

    cfg = CONFIGS[cname]
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    prog_a, prog_b = fill_and_compute_program(cfg, 4), fill_and_compute_program(cfg, 3)
    assert prog_a[:len(prog_b)] != prog_b      # the second load overwrites live words
    data_a, data_b = random_lane_beats(cfg, rng, 2 * cfg.nr * 4), random_lane_beats(cfg, rng, 2 * cfg.nr * 3)
    beats = (clear_beats() + load_beats(cfg, prog_a) + run_beats(0, data_a)
             + load_beats(cfg, prog_b) + run_beats(0, data_b))
    expected = CoreModel(cfg).process(beats)
    dut = Core(cfg)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got, seen = [], {"writes": 0, "reads": 0, "cycles": 0}

    async def bench(ctx):
        w_en, r_en = dut._seq._ucode_probe
        ctx.set(dut.m_axis.ready, 1)
        k = 0
        while len(got) < len(expected):
            seen["cycles"] += 1
            assert seen["cycles"] < 20_000, "timeout"
            ctx.set(dut.s_axis.valid, k < len(beats))
            ctx.set(dut.s_axis.payload.data, beats[k] if k < len(beats) else 0)
            we, re_ = ctx.get(w_en), ctx.get(r_en)
            assert not (we and re_), f"cycle {seen['cycles']}: the microcode is written and read"
            seen["writes"] += we
            seen["reads"] += re_
            took = k < len(beats) and ctx.get(dut.s_axis.ready)
            if ctx.get(dut.m_axis.valid):
                got.append(Beat(ctx.get(dut.m_axis.payload.data), bool(ctx.get(dut.m_axis.payload.last))))
            await ctx.tick()
            k += took

    sim.add_testbench(bench)
    sim.run()
    assert got == expected
    assert seen["writes"] == len(prog_a) + len(prog_b) and seen["reads"] > len(prog_a)


@pytest.mark.parametrize("cname", ["nr2_fp16", "nr2_fp16_fpga", "nr2_fp16_fan"])
def test_lone_core_rout_never_waits_and_rin_waits_forever(cname):
    """A lone core (``cores == 1``) is on no ring (docs/core.md): a ``rout`` issues
    without looking at ``ring_out.level`` (held full here) and its beats leave on
    ``ring_out`` as the model's ``ring_out``; a ``rin`` never issues, whatever arrives
    on ``ring_in`` (nothing receives it, ``ring_in.level`` stays 0), so its run never
    ends. Amaranth's simulator, cycle by cycle."""
    from amaranth.sim import Simulator

    cfg = CONFIGS[cname]
    assert cfg.cores == 1
    nr = cfg.nr
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    fill = [Instruction(MicroOp(pred_mode=PredMode.COL, pred_k=k, wa_en=1, wa_off=0, wa_src=Src.ROW),
                        hin=HostDir.ROW) for k in range(nr)]
    send = [Instruction(MicroOp(ra_en=1, ra_gate=Gate.CDRV, ra_off=0, cdrv_en=1, cdrv_k=k, cdrv_src=Src.MEMA),
                        hout=HostDir.COL, rout=1) for k in range(nr)]
    gap = [Instruction()] * (cfg.sram_read_distance - 1)      # no stale read
    prog_out = [i.encode(cfg) for i in fill + gap + send + [Instruction(op=SeqOp.HALT)]]
    prog_in = [i.encode(cfg) for i in [Instruction(MicroOp(wa_en=1, wa_off=1, wa_src=Src.ROW), hin=HostDir.ROW, rin=1),
                                       Instruction(op=SeqOp.HALT)]]
    data = random_lane_beats(cfg, rng, nr)
    model = CoreModel(cfg)
    beats_out = clear_beats() + load_beats(cfg, prog_out) + run_beats(0, data)
    expected = model.process(beats_out)
    ring_model = CoreModel(cfg)        # the same run, its ring beats (process() drops them)
    ring_model.process(clear_beats() + load_beats(cfg, prog_out))
    ring_expected = ring_model.run(0, data).ring_out
    assert len(ring_expected) == nr and any(ring_expected)
    beats_in = load_beats(cfg, prog_in) + run_beats(0)

    dut = Core(cfg)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got, ring_got, waited = [], [], {"cycles": 0}
    depth = cfg.ring_fifo_depth

    async def bench(ctx):
        ctx.set(dut.m_axis.ready, 1)
        ctx.set(dut.ring_out.level, depth)          # the next core (if any) would be full
        for beats, phase in ((beats_out, "out"), (beats_in, "in")):
            k, cyc = 0, 0
            limit = 2000 if phase == "out" else 400
            while cyc < limit:
                cyc += 1
                ctx.set(dut.s_axis.valid, k < len(beats))
                ctx.set(dut.s_axis.payload.data, beats[k] if k < len(beats) else 0)
                ctx.set(dut.ring_in.en, phase == "in")   # a beat every cycle: nobody takes it
                ctx.set(dut.ring_in.data, int(rng.integers(1 << min(62, nr * cfg.fmt.width))))
                assert ctx.get(dut.ring_in.level) == 0
                took = k < len(beats) and ctx.get(dut.s_axis.ready)
                if ctx.get(dut.m_axis.valid):
                    got.append(Beat(ctx.get(dut.m_axis.payload.data), bool(ctx.get(dut.m_axis.payload.last))))
                if ctx.get(dut.ring_out.en):
                    ring_got.append(ctx.get(dut.ring_out.data))
                await ctx.tick()
                k += took
                if phase == "out" and len(got) == len(expected):
                    break
            if phase == "in":
                assert k == len(beats), "the rin program was not accepted"
                waited["cycles"] = cyc

    sim.add_testbench(bench)
    sim.run()
    assert got == expected, "the rout program's host beats (its done beat) differ from the model"
    assert ring_got == ring_expected
    assert waited["cycles"] == 400           # the rin program ran its whole window ...
    assert len(got) == len(expected)         # ... and never answered (no done beat)


#: 4 x 4 cores for the segmented-bus test: the default PE timing, and preset fpga (bus and
#: receive stages: the buses' visibility flags are per-receiver registers, rtl/core.py)
SEG_CONFIGS = {
    "nr4_fp16": ArchConfig(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=256),
    "nr4_fp16_fpga": PRESETS["fpga"].replace(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=256),
}


@pytest.mark.parametrize("cname", list(SEG_CONFIGS))
def test_core_segmented_bus_transfers(cname):
    """Row and column transfers over segmented buses in the same micro-op, with different
    segmentations, on a 4 x 4 core: every PE holds a distinct value; each case drives it
    with a row and a column segmentation (segments of 1 bus, 2 PEs or the whole bus again)
    and every PE moves its row bus into one register and its column bus into another
    (through the FMA, ``col * 1 + -0``); all 32 values are read back. The RTL against the
    fast model (beat by beat) and both against the segment definition."""
    from arch.buses import segment_of
    from sim.core_run import Phase, run_session
    from sw.asm import assemble

    cfg = SEG_CONFIGS[cname]
    nr = cfg.nr
    nop = "nop\n" * (cfg.fpu_latency + 2)
    src = "hin row | mov r1 = row\nhin col | mov r3 = col\n" + nop
    src += "fma r4 = r1 * r3 + -0\n" + nop
    # (row driver spec, segmentation, k), (column driver spec, segmentation, k)
    cases = [((0, 1), (1, 0)), ((1, 0), (0, 2)), ((1, 1), (2, 3)), ((2, 2), (1, 1)),
             ((0, 3), (0, 0)), ((1, 1), (1, 0)), ((2, 0), (0, 1))]
    spec = {0: "={k}", 1: "%2={k}", 2: "%4={k}"}
    for (rg, rk), (cg, ck) in cases:
        src += (f"rdrv r4 @col{spec[rg].format(k=rk)} | cdrv r4 @row{spec[cg].format(k=ck)} | mov r5 = row"
                f" | fma r6 = col * 1 + -0\n") + nop
        for reg in ("r5", "r6"):
            for k in range(nr):
                src += f"cdrv {reg} @row={k} | hout col\n"
    src += "halt\n"
    words = assemble(src, cfg).words()
    fmt = cfg.fmt
    a = [2.0 ** r for r in range(nr)]              # row lane r
    b = [2.0 ** (4 * c) for c in range(nr)]        # column lane c: a[r] * b[c] distinct
    lanes = lambda v: sum(int(x) << (i * fmt.width) for i, x in enumerate(fmt.from_float(np.array(v))))
    data = [lanes(a), lanes(b)]
    val = {(r, c): a[r] * b[c] for r in range(nr) for c in range(nr)}
    expected = []
    for (rg, rk), (cg, ck) in cases:
        def driver(i, g, k):
            seg = segment_of(i, g, nr)
            return seg[0] + k if g else k
        r5 = {(r, c): val[r, driver(c, rg, rk)] for r in range(nr) for c in range(nr)}
        r6 = {(r, c): val[driver(r, cg, ck), c] for r in range(nr) for c in range(nr)}
        for reg in (r5, r6):
            expected += [lanes([reg[k, c] for c in range(nr)]) for k in range(nr)]
    fast = run_session(cfg, [Phase(words, data)], backend="fast")[0]
    assert [b_.data for b_ in fast.data] == expected
    rtl = run_session(cfg, [Phase(words, data)], backend="rtl", reference="fast", name=f"seg-{cname}")[0]
    assert [b_.data for b_ in rtl.data] == expected


def test_core_move_unit_classes_over_buses():
    """The move unit's classes (> 0, NaN) of bus operands, which with the receive stage
    cross the buses as class bits beside the data (``PE.row_out_cls``, the host lane's
    test in the core): ReLU and mask of values of every class (normal, zero, infinity,
    NaN, subnormal; both signs) on a bus driven by the host lane, by a PE's register, by
    its read-stage SRAM data and by an SRAM bypass word, on the row and the column buses,
    as the move's source and as its mask. Preset fpga's 2 x 2 core, the RTL against the
    fast model (beat by beat) and both against ReLU / mask written out here."""
    from sim.core_run import Phase, run_session
    from sw.asm import assemble

    cfg = CONFIGS["nr2_fp16_fan"]
    fmt, nr = cfg.fmt, cfg.nr
    assert cfg.rx_stage and cfg.read_stage and nr == 2
    one, qnan = 0x3C00, fmt.qnan
    vals = [0x3E00, 0xC000, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x0001, 0x8001, 0x7BFF]

    def is_nan(x):
        return (x >> 10) & 0x1F == 0x1F and x & 0x3FF != 0

    def pos(x):
        return not x >> 15 and x != 0 and not is_nan(x)

    def relu(x):
        return x if pos(x) else qnan if is_nan(x) else 0

    def mask(src, msk):
        return (qnan if is_nan(src) else src) if pos(msk) else 0

    nop = "nop\n" * (cfg.fpu_latency + 2)
    gap = "nop\n" * (cfg.sram_read_distance - 1)
    # one loop iteration per beat of two values (lane r on row bus r)
    regs = range(1, 10)
    src = (f"nop | loop g {len(vals) // nr} {{\n"
           "hin row | relu r1 = row | wra [ar0] = row\n"        # the host lane's classes
           "hin row | mask r2 = 1 if row\n"
           "hin row | mask r3 = row if 1\n"
           "hin row | mov r4 = row\n" + nop +
           # a register driven, on a row and a column bus
           "rdrv r4 @col=0 | relu r5 = row\n"
           "cdrv r4 @row=1 | mask r6 = 1 if col\n"
           # read-stage SRAM data driven
           "rda [ar0] | rdrv mema @col=1 | mask r7 = row if 1\n"
           "rda [ar0] | cdrv mema @row=0 | relu r8 = col\n"
           # an SRAM bypass word driven (the read issued as the write lands)
           "hin row | wrb [ar1] = row\n" + gap +
           "rdb [ar1] | cdrv memb @row=0 | mask r9 = col if col\n" + nop +
           "".join(f"rdrv r{reg} @col=0 | hout row\n" for reg in regs) + "}\nhalt\n")
    lanes = lambda v: sum(x << (i * fmt.width) for i, x in enumerate(v))
    data, expected = [], []
    for k in range(0, len(vals), nr):
        a, b = vals[k], vals[k + 1]
        data += [lanes([a, b])] * 5
        outs = {1: [relu(a), relu(b)], 2: [one if pos(a) else 0, one if pos(b) else 0],
                3: [mask(a, one), mask(b, one)], 4: [a, b], 5: [relu(a), relu(b)],
                6: [one if pos(b) else 0] * 2, 7: [mask(a, one), mask(b, one)], 8: [relu(a)] * 2,
                9: [mask(a, a)] * 2}
        expected += [lanes(outs[reg]) for reg in regs]
    words = assemble(src, cfg).words()
    fast = run_session(cfg, [Phase(words, data)], backend="fast")[0]
    assert [b_.data for b_ in fast.data] == expected
    rtl = run_session(cfg, [Phase(words, data)], backend="rtl", reference="fast", name="mv-classes")[0]
    assert [b_.data for b_ in rtl.data] == expected
