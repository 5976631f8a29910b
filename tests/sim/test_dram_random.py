"""Random DMA programs (loads, stores, waits, scratchpad traffic and PE work around them,
random DRAM latency and bandwidth): the reference core model and both fast-model engines
agree on output beats, cycles, every counter, the scratchpad, the DRAM and the PEs."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from arch.config import ArchConfig
from arch.lanes import pack_beats
from sim.core_model import CoreModel
from sim.fast_model import FastModel, core_state
from sw.asm import assemble

SEED = int(os.environ["FAST_SEED"]) if os.environ.get("FAST_SEED") else random.randrange(1 << 30)
N_RANDOM = int(os.environ.get("DRAM_N", "40"))
BASE = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, spad_kib=2, dram_mib=1, ucode_depth=256)


def _filler(rng, lines, hi, hin):
    """A few instructions touching scratchpad beats below ``hi`` only (and the PEs);
    returns the host beats their ``hin`` take."""
    for _ in range(rng.randrange(0, 4)):
        k = rng.randrange(6)
        if k == 0:
            lines.append(f"loop f{len(lines)} {rng.randrange(1, 12)} {{\n nop\n }}")
        elif k == 1:
            lines.append(f"spad rd = {rng.randrange(hi - 4)}")
            lines.append("sin row | wra [ar0]++ = row")
            lines.append("sin col | hout col")
        elif k == 2:
            lines.append(f"spad wr = {rng.randrange(hi - 4)}")
            lines.append("hin row | sout row")
            hin += 1
        elif k == 3:
            lines.append("rda [ar1]++ | rdrv mema @col=1 | hout row")
        elif k == 4:
            lines.append(f"spad wr = {rng.randrange(hi - 4)}")
            lines.append("rda [ar2]++ | rdrv mema @col=0 | sout row")
        else:
            lines.append("nop")
    return hin


def random_dma_program(rng, depth: int = 512):
    """Assembly text and the number of host beats it reads (DMA regions in the upper half
    of a ``depth``-beat scratchpad, the program's own traffic in the lower half while a
    transfer is open)."""
    half = depth // 2
    lines, hin = [], 0
    open_ = False
    for _ in range(rng.randrange(2, 7)):
        n = rng.randrange(1, 17)
        page = rng.randrange(4)
        lines.append(f"dma dram = {page * 1024 + rng.randrange(0, 1024 - n + 1)}")
        lines.append(f"dma spad = {rng.randrange(half, depth - n + 1)}")
        lines.append(f"dma {rng.choice(['load', 'store'])} {n}")
        open_ = True
        hin = _filler(rng, lines, half, hin)
        if rng.random() < 0.7:
            lines.append("dma wait")
            open_ = False
            hin = _filler(rng, lines, depth, hin)
        elif rng.random() < 0.5:                     # keeps the latest transfers open
            lines.append(f"dma wait {rng.randrange(1, 3)}")
            hin = _filler(rng, lines, half, hin)
    if rng.random() < 0.5 and not open_:
        lines.append(f"spad rd = {half + 44}\nsin row | hout row")
    lines.append("halt")
    return "\n".join(lines) + "\n", hin


@pytest.mark.parametrize("i", range(N_RANDOM))
def test_random_dma_programs(i):
    rng = random.Random(SEED * 1000 + i)
    cfg = BASE.replace(dram_latency=rng.randrange(1, 40), dram_gbps=rng.choice([0.5, 1.0, 2.5, 4.0, 16.0]),
                       dma_queue=rng.choice([1, 1, 2, 3, 8]))
    text, n_hin = random_dma_program(rng)
    words = assemble(text, cfg).words()
    host = [rng.getrandbits(32) for _ in range(n_hin)]
    init = {a: rng.getrandbits(32) for a in rng.sample(range(4096), 400)}
    spad0 = [rng.getrandbits(32) for _ in range(512)]
    res = []
    for m in (CoreModel(cfg), FastModel(cfg), FastModel(cfg, engine="cycle")):
        m.load(words)
        for a, v in init.items():
            m.dram.write(a, [v])
        if isinstance(m, FastModel):
            m.state.spad[:] = np.array([[v & 0xFFFF, v >> 16] for v in spad0], m.state.spad.dtype)
            spad = lambda m=m: pack_beats(m.scratchpad(), 16)          # noqa: E731
        else:
            m.spad[:] = spad0
            spad = lambda m=m: list(m.spad)                           # noqa: E731
        r = m.run(0, host)
        res.append((m, r, spad()))
    (m0, r0, s0) = res[0]
    for m, r, s in res[1:]:
        where = f"seed {SEED} program {i} ({type(m).__name__}):\n{text}"
        assert [(b.data, b.last) for b in r.out] == [(b.data, b.last) for b in r0.out], where
        assert r.cycles == r0.cycles, where
        assert r.counters == r0.counters, where
        assert s == s0, where
        assert m.dram.beats == m0.dram.beats, where
        for k, v in core_state(m0).items():
            assert np.array_equal(v, core_state(m)[k]), (k, where)
