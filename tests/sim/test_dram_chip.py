"""DMA engines on a chip (each core with its own DRAM): the chip's cycle engine and fast
engine agree on data, DRAM, cycles and counters when DMA stalls shift the cores' clocks
apart; the fast engine's ring check sees the shifted schedules."""

from __future__ import annotations

import random

import pytest

from arch.config import ArchConfig
from sim.chip_model import ChipModel, RingStallError
from sw.asm import assemble

CHIP = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, cores=2, spad_kib=1, dram_mib=1, dram_latency=9,
                  dram_gbps=2.0)

#: load a block, send it round the ring, store what arrives; {extra} beats more loaded
#: first on one core (a longer DMA stall), {gap} nops before the receives
PROG = """
        dma load {first}
        dma wait
        dma spad = 0
        dma load 4
        dma wait
        spad rd = 0
        loop i 4 {{
            sin row | rout row
        }}
        loop g {gap} {{
            nop
        }}
        spad wr = 8
        loop j 4 {{
            rin row | sout row
        }}
        nop
        dma both = 8
        dma dram = 100
        dma store 4
        halt
"""


def _chip(engine, words0, words1, data):
    chip = ChipModel(CHIP, engine)
    chip.load(words0, 0, core=0)
    chip.load(words1, 128, core=1)
    for k in range(2):
        chip.core(k).dram.write(0, data[k])
    return chip, chip.run([0, 128])


@pytest.mark.parametrize("first,gap", [(1, 1), (30, 60), (60, 120)])
def test_chip_engines_agree(first, gap):
    w0 = assemble(PROG.format(first=1, gap=gap), CHIP).words()
    w1 = assemble(PROG.format(first=first, gap=gap), CHIP, origin=128).words()
    rng = random.Random(first)
    data = [[rng.getrandbits(32) for _ in range(64)] for _ in range(2)]
    ref, r0 = _chip("cycle", w0, w1, data)
    fast, r1 = _chip("fast", w0, w1, data)
    assert r1.cycles == r0.cycles
    for k in range(2):
        assert r1.cores[k].counters == r0.cores[k].counters, k
        stored = ref.core(k).dram.read(100, 4)
        assert fast.core(k).dram.read(100, 4) == stored
        f = first if k == 0 else 1                # the other core's second block, round the ring
        assert stored == data[1 - k][f:f + 4]
    assert r0.cores[1].counters["dma_stall_cycles"] > r0.cores[0].counters["dma_stall_cycles"] or first == 1


def test_fast_engine_sees_dma_stalls_on_the_ring():
    """Core 1's long load delays its sends past core 0's receives: a ring stall, which the
    fast engine reports (it would not without the DMA shifts); the cycle engine runs it."""
    w0 = assemble(PROG.format(first=1, gap=1), CHIP).words()
    w1 = assemble(PROG.format(first=60, gap=1), CHIP, origin=128).words()
    data = [[1] * 64, [2] * 64]
    ref, r0 = _chip("cycle", w0, w1, data)
    assert r0.cores[0].counters["stall_cycles"] > r0.cores[0].counters["dma_stall_cycles"]
    with pytest.raises(RingStallError, match="core 0 would stall"):
        _chip("fast", w0, w1, data)


def test_fast_engine_usable_after_a_ring_stall_error():
    """After the ring check refuses a run, the models run the next program correctly."""
    w0 = assemble(PROG.format(first=1, gap=1), CHIP).words()
    w1 = assemble(PROG.format(first=60, gap=1), CHIP, origin=128).words()
    data = [[1] * 64, [2] * 64]
    chip, _ = _chip("cycle", w0, w1, data)
    fast = ChipModel(CHIP, "fast")
    fast.load(w0, 0, core=0)
    fast.load(w1, 128, core=1)
    with pytest.raises(RingStallError):
        fast.run([0, 128])
    ok = assemble(PROG.format(first=1, gap=1), CHIP, origin=128).words()
    ref = ChipModel(CHIP, "cycle")
    for m in (ref, fast):
        m.load(w0, 0, core=0)
        m.load(ok, 128, core=1)
    r0, r1 = ref.run([0, 128]), fast.run([0, 128])
    assert [c.counters for c in r1.cores] == [c.counters for c in r0.cores]
