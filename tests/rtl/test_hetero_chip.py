"""Heterogeneous chips in RTL: the ring crossing against its model cycle by cycle
(Amaranth simulator), and a mixed chip replayed under cocotb against the chip model."""

import random

import pytest

from arch.config import ArchConfig
from arch.hetero import CoreGroup, Crossing, HeteroConfig
from rtl.ring_crossing import RingCrossing
from sim.chip_run import ChipPhase
from sim.hetero_run import run_hetero_session
from sim.ring_crossing import CrossingModel
from tests.sim.test_hetero import MIX_FMT, NARROW, WIDE, roundtrip

N2 = ArchConfig(nr=2, cores=2)
N4 = ArchConfig(nr=4, cores=2)


@pytest.mark.parametrize("a,b", [(N2, N4), (N4, N2), (N2, N4.replace(fmt="binary32")),
                                 (N4.replace(fmt="binary32"), N2), (N2, N2.replace(fmt="bfloat16"))],
                         ids=["collect", "split", "collect+widen", "split+narrow", "fmt-only"])
def test_crossing_rtl_equals_model(a, b):
    """Random sender pushes and receiver FIFO levels: every cycle the RTL crossing's
    pushes and reported level equal :class:`sim.ring_crossing.CrossingModel`'s (the
    sender respects the reported credit, as a core does)."""
    from amaranth.sim import Simulator

    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    x = Crossing(0, 1, a, b)
    dut = RingCrossing(x)
    model = CrossingModel(x)
    depth = a.ring_fifo_depth
    wa = a.nr * a.fmt.width
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def tb(ctx):
        level_b = 0
        inflight = []            # beats the sender has issued, pushed 2 cycles later
        for cyc in range(400):
            lv = model.level(level_b)
            ctx.set(dut.ring_out.level, level_b)
            assert ctx.get(dut.ring_in.level) == lv, (cyc, ctx.get(dut.ring_in.level), lv)
            # the sender: issue a rout when level + in flight < depth (and it wants to)
            if lv + len(inflight) < depth and rng.random() < 0.7:
                inflight.append((cyc + 2, rng.getrandbits(wa)))
            push = [d for t, d in inflight if t == cyc]
            inflight = [(t, d) for t, d in inflight if t != cyc]
            ctx.set(dut.ring_in.en, bool(push))
            ctx.set(dut.ring_in.data, push[0] if push else 0)
            got = (ctx.get(dut.ring_out.en), ctx.get(dut.ring_out.data))
            exp = model.step(push)
            assert bool(got[0]) == bool(exp), cyc
            if exp:
                assert got[1] == exp[0], (cyc, hex(got[1]), hex(exp[0]))
            # the receiver's FIFO: this cycle's push lands; pops at random
            level_b += bool(exp)
            assert level_b <= depth
            if level_b and rng.random() < 0.45:
                level_b -= 1
            await ctx.tick()

    sim.add_testbench(tb)
    sim.run()


#: ``nr``: a 2 x 2 core and a 4 x 4 core (binary16), both crossings at half the design of
#: ``MIX``; ``nr+fmt`` (make test-all): 2 cores of each kind, the 4 x 4 ones in binary32
MIX2 = HeteroConfig((CoreGroup(1, NARROW), CoreGroup(1, WIDE)))
#: name -> (chip, waits of the stall-free trip, of the stalling trip, ring_out_beats per core)
HETERO_RTL = {
    "nr": (MIX2, [0, 6, 60], [0, 0, 0], [8, 4]),
    "nr+fmt": (MIX_FMT, [0, 6, 40, 50, 60], [0, 0, 2, 2, 0], [8, 8, 4, 4]),
}


@pytest.mark.parametrize("name", ["nr", pytest.param("nr+fmt", marks=pytest.mark.slow)])
def test_mixed_chip_rtl_replay(name, require_simulator):
    """Cores of 2 x 2 PEs and of 4 x 4 (binary16; ``nr+fmt``: binary32) on one ring, under
    cocotb (Icarus): core 0's values go round the whole ring (through the collecting
    crossing from the last 2 x 2 core and the splitting crossing back to core 0) and back
    to the host, once stall-free and once with ring stalls; every core's output beats,
    done beats and counters equal the per-cycle chip model's."""
    require_simulator("icarus")
    h, waits, early, out_beats = HETERO_RTL[name]
    seed = 7
    print("seed", seed)
    host, phases = roundtrip(h, 16, seed, waits)
    # the same trip again with receivers too early: rin waits at the crossings and the
    # splitting crossing's credit holds its sender back (ring stalls, exact in both)
    phases.append(ChipPhase(roundtrip(h, 16, seed, early)[1][1].words, name="stalling"))
    model = run_hetero_session(h, phases, backend="model")
    assert sum(r.counters["stall_cycles"] for r in model[2]) > 0
    rtl = run_hetero_session(h, phases, backend="rtl", sim="icarus", name="hetero-mix")
    assert [b.data for b in rtl[1][0].data] == host
    for pm, pr in zip(model, rtl):
        for k, (a, b) in enumerate(zip(pm, pr)):
            assert a.data == b.data and a.done == b.done, k
            assert a.counters == b.counters, k
    assert [r.counters["ring_out_beats"] for r in rtl[1]] == out_beats
