"""The chip: cores on a ring. Ring instructions, the per-cycle chip model (stalls, credits,
deadlock), the fast chip model against it, and the chip RTL against the model (cocotb,
``tdest`` / ``tid`` routing, broadcast RUN)."""

import numpy as np
import pytest

from tests.simulators import sim_matrix
from arch.config import ArchConfig, ConfigError
from sim.chip_model import ChipModel, RingDeadlock, RingStallError
from sim.chip_run import ChipPhase, run_chip_session
from sw.asm import AsmError, assemble, disassemble

CHIP2 = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, cores=2)
CHIP4 = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, cores=4)
#: the FPGA timing (preset fpga's PE timing: execute, bus, receive and read stages; one
#: distribution level, as a chip needs): the distribution stage moves the ring pushes
#: and pops
CHIP4_FPGA = CHIP4.replace(exec_stage=True, bus_stage=True, rx_stage=True, dist_stage=True, fetch_stage=True,
                           addr_stage=True, read_stage=True, mul_latency=4, add_latency=5)
#: the same timing on 2 cores: the chip RTL with the FPGA timing in ``make test`` (the ring
#: logic of every core is the same; half the design to convert and simulate)
CHIP2_FPGA = CHIP4_FPGA.replace(cores=2)


def _asm(cfg, text):
    return assemble(text, cfg).words()


def fill_program(cfg, n):
    """Host beats -> SRAM A[0..n-1] of the PEs in column 0 (lane r -> PE (r, 0))."""
    return _asm(cfg, f"""
        stride ar0 = 1
        ar0 = 0
        loop i {n} {{
            hin row | @col=0 | wra [ar0]++ = row
        }}
        ar0 = 0
        halt""")


def sender(cfg, n, delay=0, back=0, back_delay=0):
    """Send SRAM A[0..n-1] of column 0 to the next core; then (``back``) take ``back`` beats
    from the previous core into SRAM B and return them to the host."""
    d = f"loop d {delay} {{\n nop\n }}" if delay else ""
    bd = f"loop e {back_delay} {{\n nop\n }}" if back_delay else ""
    tail = f"""
        {bd}
        stride ar1 = 1
        loop j {back} {{
            rin row | @col=0 | wrb [ar1]++ = row | hout row
        }}""" if back else ""
    return _asm(cfg, f"""
        stride ar0 = 1
        {d}
        loop i {n} {{
            rda [ar0]++ gate=rdrv | rdrv mema @col=0 | rout row
        }}
        {tail}
        halt""")


def forwarder(cfg, n, delay=0):
    """Take ``n`` beats from the previous core, keep them in SRAM B of column 1, pass them on."""
    d = f"loop d {delay} {{\n nop\n }}" if delay else ""
    return _asm(cfg, f"""
        stride ar1 = 1
        {d}
        loop i {n} {{
            rin row | @col=1 | wrb [ar1]++ = row | rout row
        }}
        halt""")


def lane_beats(cfg, rng, n):
    w = cfg.fmt.width
    vals = cfg.fmt.from_float(rng.uniform(-2, 2, size=(n, cfg.nr)))
    return [sum(int(v) << (i * w) for i, v in enumerate(row)) for row in vals]


def roundtrip_phases(cfg, n, seed, delays):
    """Core 0 sends n beats around the whole ring; they come back to core 0 and out."""
    rng = np.random.default_rng(seed)
    c = cfg.cores
    data = [lane_beats(cfg, rng, n)] + [[] for _ in range(c - 1)]
    data[1:] = [lane_beats(cfg, rng, 1) for _ in range(c - 1)]   # every core runs the fill
    fills = [fill_program(cfg, n)] + [fill_program(cfg, 1)] * (c - 1)
    d0, dk, dback = delays
    ring = [sender(cfg, n, d0, back=n, back_delay=dback)] + [forwarder(cfg, n, dk * k) for k in range(1, c)]
    return data[0], [ChipPhase(fills, data, "fill"), ChipPhase(ring, name="ring")]


# -- configuration and assembly ------------------------------------------------------------
def test_cores_must_be_one_or_even():
    with pytest.raises(ConfigError, match="cores"):
        ArchConfig(cores=3)
    with pytest.raises(ConfigError, match="ring_fifo_depth"):
        ArchConfig(cores=2, ring_fifo_depth=2)
    assert ArchConfig.from_dict({"preset": "S"}).cores == 32


def test_ring_forms_round_trip_and_errors():
    text = "rin row | rout col | cdrv r1 @row=0 | mov r2 = row\nrin col | hout row last | rdrv r1 @col=1\nhalt\n"
    p = assemble(text, CHIP2)
    assert assemble(disassemble(p, CHIP2), CHIP2).words() == p.words()
    for bad, msg in [("rin row | hin col", "stream input"), ("rout row | hout col | rdrv r1 @col=0", "stream output"),
                     ("rin col | cdrv r1 @row=0", "column bus conflict"), ("rout col", "nothing drives")]:
        with pytest.raises(AsmError, match=msg):
            assemble(bad + "\nhalt", CHIP2)


# -- models --------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [CHIP2, CHIP4, CHIP4_FPGA], ids=["2cores", "4cores", "4cores-fpga"])
def test_roundtrip_stall_free_cycle_equals_fast(cfg):
    n = 6
    # core k may take beat m at cycle (send cycle of core k-1) + 3: delay each forwarder
    host, phases = roundtrip_phases(cfg, n, seed=1, delays=(0, 3, 4 * cfg.cores))
    a = run_chip_session(cfg, phases, backend="model")
    b = run_chip_session(cfg, phases, backend="fast")
    assert [x.data for x in a[1][0].data] == host            # the beats came back unchanged
    for pa, pb in zip(a, b):
        for ra, rb in zip(pa, pb):
            assert ra.data == rb.data and ra.counters == rb.counters
    assert a[1][0].counters["stall_cycles"] == 0
    assert sum(r.counters["ring_out_beats"] for r in a[1]) == n * cfg.cores


@pytest.mark.parametrize("cfg", [CHIP4, CHIP4_FPGA], ids=["default", "fpga"])
def test_stalls_on_empty_fifo_and_credits(cfg):
    n = 10      # more than the 8-beat FIFOs: the sender must wait for credits
    host, phases = roundtrip_phases(cfg, n, seed=2, delays=(0, 0, 0))
    res = run_chip_session(cfg, phases, backend="model")
    assert [x.data for x in res[1][0].data] == host
    assert sum(r.counters["stall_cycles"] for r in res[1]) > 0
    with pytest.raises(RingStallError, match="would stall"):
        run_chip_session(cfg, phases, backend="fast")
    # a slow consumer: core 1 waits 30 cycles; core 0 stalls on credits after 8 beats in
    # the FIFO plus the ones in flight
    _, ph2 = roundtrip_phases(cfg, n, seed=2, delays=(0, 30, 0))
    r2 = run_chip_session(cfg, ph2, backend="model")
    assert r2[1][0].counters["stall_cycles"] >= 30 - 8 - 3


@pytest.mark.parametrize("stage", ["dist_stage", "fetch_stage", "addr_stage"])
@pytest.mark.parametrize("delays", [(0, 3, 16), (0, 2, 0), (0, 0, 0), (0, 25, 0), (5, 1, 3)])
def test_stage_keeps_ring_timing(delays, stage):
    """The distribution stage delays the whole PE side by a cycle, ring pushes included,
    but a rin's look-ahead and the receiver's level net of its pop keep the ring timing
    seen from the sequencers; the fetch stage delays every core's first issue by a cycle,
    and the address stage behind it by one more. With each, every core stalls exactly as
    without the stage (rin waits and credit waits), with the same data, and each RUN lasts
    one cycle longer (two with fetch and address stages)."""
    base = CHIP4
    dist = CHIP4.replace(**{stage: True}, **({"fetch_stage": True} if stage == "addr_stage" else {}))
    extra = 2 if stage == "addr_stage" else 1
    n = 10
    _, phases = roundtrip_phases(base, n, seed=4, delays=delays)
    a = run_chip_session(base, phases, backend="model")
    b = run_chip_session(dist, phases, backend="model")
    for pa, pb in zip(a, b):
        for ra, rb in zip(pa, pb):
            assert ra.data == rb.data
            assert ra.counters["stall_cycles"] == rb.counters["stall_cycles"]
            assert rb.counters["cycles"] == ra.counters["cycles"] + extra
    # stalls of both kinds happen in some of these schedules
    if delays in ((0, 0, 0), (0, 25, 0)):
        assert sum(r.counters["stall_cycles"] for r in b[1]) > 0


@pytest.mark.parametrize("prog0,engines,exc,match", [
    ("rin row | mov r1 = row\nhalt", ("cycle",), RingDeadlock, "core 0 at pc 0 waits on rin"),
    ("rdrv r1 @col=0 | rout row\nhalt", ("cycle", "fast"), RingStallError, "sen"),
], ids=["deadlock", "unbalanced"])
def test_ring_misuse_is_reported(prog0, engines, exc, match):
    """A core waiting for a beat nobody sends (deadlock, named by core and pc); a beat
    nobody takes (left in a FIFO / unbalanced link)."""
    cfg = CHIP2
    for eng in engines:
        ch = ChipModel(cfg, eng)
        ch.load(_asm(cfg, prog0), core=0)
        ch.load(_asm(cfg, "halt"), core=1)
        with pytest.raises(exc, match=match):
            ch.run()


def test_fast_engine_needs_only_as_many_rounds_as_hops():
    cfg = CHIP4
    host, phases = roundtrip_phases(cfg, 3, seed=3, delays=(0, 3, 20))
    ch = ChipModel(cfg, "fast")
    for k, img in enumerate(phases[0].images(4)):
        ch.load(img, core=k)
    for k in range(4):
        ch.cores[k].run(0, phases[0].data[k])
    for k, img in enumerate(phases[1].images(4)):
        ch.load(img, core=k)
    r = ch.run()
    assert r.rounds <= cfg.cores + 1
    assert [b.data for b in r.cores[0].out] == host


# -- RTL ---------------------------------------------------------------------------------
#: the chip on Icarus in ``make test``; on Verilator ``slow`` (the same RTL and sessions;
#: the Verilator build and harness are checked at core level in ``make test``)
@pytest.mark.parametrize("cname,sim", sim_matrix(["default", "fpga"], verilator=set()))
def test_chip_rtl_matches_model(cname, sim):
    """One session on the 4-core chip of the CP replays (with the FPGA timing, the 2-core
    chip of this module): stall-free round trip, then one with rin stalls and credit
    stalls (8-beat FIFOs); every core's beats and counters equal the model's. With the
    FPGA timing the distribution stage's ring look-ahead is exercised."""
    from tests.sw.test_train_cp import CHIP4 as CHIP4_CP     # the CP replays' chip: one conversion for both

    cfg = {"default": CHIP4_CP, "fpga": CHIP2_FPGA}[cname]
    host1, ph1 = roundtrip_phases(cfg, 6, seed=11, delays=(0, 3, 16))
    host2, ph2 = roundtrip_phases(cfg, 9, seed=12, delays=(0, 0, 0))
    host3, ph3 = roundtrip_phases(cfg, 9, seed=13, delays=(0, 25, 0))
    res = run_chip_session(cfg, ph1 + ph2 + ph3, backend="rtl", sim=sim,
                           name="chip_ring" + ("_fpga" if cfg.dist_stage else ""))
    ref = run_chip_session(cfg, ph1 + ph2 + ph3, backend="model")
    for p, (pr, pm) in enumerate(zip(res, ref)):
        for k, (a, b) in enumerate(zip(pr, pm)):
            assert a.data == b.data and a.counters == b.counters, (p, k)
    assert [b.data for b in res[1][0].data] == host1
    assert [b.data for b in res[3][0].data] == host2
    assert [b.data for b in res[5][0].data] == host3
    assert sum(r.counters["stall_cycles"] for r in res[3]) > 0
    assert sum(r.counters["stall_cycles"] for r in res[5]) > 0
