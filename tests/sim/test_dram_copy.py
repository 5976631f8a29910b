"""sw.dram: DRAM <-> scratchpad copies as program fragments (transfers split at 256 beats
and 4 KiB DRAM pages), round trips on the models, their time on an idle engine."""

from __future__ import annotations

import random

import pytest

from arch.config import ArchConfig
from sim.core_model import CoreModel
from sim.fast_model import FastModel
from sim.seq_model import SequencerModel
from sw.asm import Builder
from sw.dram import DramLayoutError, dma_chunks, dma_copy_cycles, emit_dma_copy
from sw.transfer import emit_spad_drain, emit_spad_fill

CFG = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, spad_kib=4, dram_mib=1, dram_latency=12, dram_gbps=2.0)


def test_chunks():
    assert CFG.dram_page_beats == 1024
    assert dma_chunks(CFG, 0, 600) == [256, 256, 88]
    assert dma_chunks(CFG, 900, 350) == [124, 226]
    assert dma_chunks(CFG, 1000, 1) == [1]
    for a, n in ((5, 3000), (1023, 2), (4096, 256)):
        ch = dma_chunks(CFG, a, n)
        assert sum(ch) == n and max(ch) <= 256
        at = a
        for m in ch:
            assert at // 1024 == (at + m - 1) // 1024
            at += m


def test_round_trip_and_time():
    """Host -> scratchpad -> DRAM (across a page) -> scratchpad -> host on every model;
    the copy's stalls are dma_copy_cycles less the instructions it overlaps."""
    n = 350
    b = Builder(CFG)
    emit_spad_fill(b, CFG, 0, n)
    emit_dma_copy(b, CFG, "store", 900, 0, n, loop="st")
    emit_dma_copy(b, CFG, "load", 900, 400, n, loop="ld")
    emit_spad_drain(b, CFG, 400, n)
    b.halt()
    words = b.build().words()
    data = [random.Random(1).getrandbits(32) for _ in range(n)]
    res = []
    for m in (CoreModel(CFG), FastModel(CFG), FastModel(CFG, engine="cycle")):
        m.load(words)
        r = m.run(0, data)
        assert [x.data for x in r.out] == data
        assert m.dram.read(900, n) == data
        res.append(r)
    assert res[0].counters == res[1].counters == res[2].counters
    c = res[0].counters
    assert c["dram_rd_beats"] == c["dram_wr_beats"] == n
    assert c["dma_busy_cycles"] == sum(CFG.dma_cycles(m, s) for s in (True, False) for m in dma_chunks(CFG, 900, n))
    # each copy: its starts and its wait issue dma_copy_cycles + 1 cycles apart
    seq = SequencerModel(CFG)
    seq.load(words)
    trace = list(seq.iter_run(0))
    pos = [i for i, x in enumerate(trace) if x.dma]
    waits = [i for i in pos if trace[i].dma == 3]
    firsts = [pos[0], pos[pos.index(waits[0]) + 1]]
    expect = sum(dma_copy_cycles(CFG, k, 900, n) + 1 - (w - f) for k, f, w in zip(("store", "load"), firsts, waits))
    assert c["dma_stall_cycles"] == expect


@pytest.mark.parametrize("kw,msg", [
    ({"kind": "fetch"}, "load or store"),
    ({"n": 0}, "does not fit"),
    ({"dram": CFG.dram_depth - 2, "n": 4}, "does not fit"),
    ({"spad": 1020, "n": 8}, "does not fit"),
])
def test_errors(kw, msg):
    args = {"kind": "load", "dram": 0, "spad": 0, "n": 4, **kw}
    with pytest.raises(DramLayoutError, match=msg):
        emit_dma_copy(Builder(CFG), CFG, args["kind"], args["dram"], args["spad"], args["n"])
    with pytest.raises(DramLayoutError, match="needs DRAM"):
        emit_dma_copy(Builder(CFG.replace(dram_mib=0)), CFG.replace(dram_mib=0), "load", 0, 0, 4)
