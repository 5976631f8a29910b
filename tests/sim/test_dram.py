"""The DMA engine and external DRAM (``cfg.dram_mib > 0``) in the models: the reference
core model and both fast-model engines agree on data, cycles and counters; bad transfers
and races fail with :class:`sim.dma_model.DramError`; assembler forms and errors."""

from __future__ import annotations

import random

import numpy as np
import pytest

from arch.config import ArchConfig, ConfigError
from arch.counters import counter_names
from sim.core_model import CoreModel
from sim.dma_model import DramError, transfer_cycles
from sim.fast_model import FastModel, core_state
from sw.asm import AsmError, assemble, disassemble

BASE = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, spad_kib=2, dram_mib=1, dram_latency=7,
                  dram_gbps=4.0)

#: DRAM -> scratchpad -> PEs -> x * x + x -> scratchpad -> DRAM, with a second load started
#: while the first block is computed (double buffering) and the store left running at HALT
PIPE = """
        dma dram = {src}
        dma load 4                      ; block 0 -> spad 0..3
        dma wait{early}
        dma load 4                      ; block 1 -> spad 4..7, while block 0 is used
        spad rd = 0
        loop i 4 {{
            sin row | wra [ar0]++ = row
        }}
        loop j 4 {{
            rda [ar1]++ | rdb [ar2]++ noread | fma memb = mema * mema + mema
        }}
        loop k 8 {{
            nop
        }}
        spad wr = 16
        loop m 4 {{
            rdb [ar3]++ | rdrv memb @col={col} | sout row
        }}
        dma wait{late}
        loop n 4 {{
            sin row | wra [ar0]++ = row
        }}
        dma both = 16
        dma dram = {dst}
        dma store 4
        {tail}
        halt
"""


def _prog(cfg, src=8, dst=200, col=0, early="", late="", tail="nop"):
    return assemble(PIPE.format(src=src, dst=dst, col=col, early=early, late=late, tail=tail), cfg)


def _models(cfg):
    return [CoreModel(cfg), FastModel(cfg), FastModel(cfg, engine="cycle")]


def _run_all(cfg, words, dram_init, host_in=()):
    res = []
    for m in _models(cfg):
        m.load(words)
        for a, beats in dram_init.items():
            m.dram.write(a, beats)
        res.append((m, m.run(0, list(host_in))))
    return res


def _spad(m):
    if isinstance(m, FastModel):
        from arch.lanes import pack_beats
        return pack_beats(m.scratchpad(), m.w)
    return list(m.spad)


@pytest.mark.parametrize("lat,gbps", [(1, 4.0), (7, 4.0), (30, 4.0), (7, 1.0), (7, 0.7)])
@pytest.mark.parametrize("variant", ["plain", "early_nops", "col1"])
def test_models_agree(lat, gbps, variant):
    """Data, cycles and every counter equal in the core model and both fast engines."""
    cfg = BASE.replace(dram_latency=lat, dram_gbps=gbps)
    kw = {"early_nops": {"early": "\n        nop\n        nop", "tail": "loop q 3 {\n nop\n }"},
          "col1": {"col": 1}}.get(variant, {})
    words = _prog(cfg, **kw).words()
    rng = random.Random(lat * 100 + int(gbps * 10))
    data = [rng.getrandbits(32) for _ in range(8)]
    res = _run_all(cfg, words, {8: data})
    m0, r0 = res[0]
    for m, r in res[1:]:
        assert r.cycles == r0.cycles
        assert r.counters == r0.counters
        assert m.dram.read(200, 4) == m0.dram.read(200, 4)
        assert _spad(m) == _spad(m0)
        for k, v in core_state(m0).items():
            assert np.array_equal(v, core_state(m)[k]), k
    c = r0.counters
    assert c["dram_rd_beats"] == 8 and c["dram_wr_beats"] == 4
    assert c["dma_busy_cycles"] == 2 * transfer_cycles(cfg, 4) + transfer_cycles(cfg, 4, store=True)
    assert c["stall_cycles"] == c["dma_stall_cycles"] > 0
    assert m0.dram.read(200, 4) != [0] * 4


def test_transfer_cycles():
    cfg = BASE.replace(dram_latency=10, dram_gbps=4.0)     # 4 bytes per cycle = one beat
    assert transfer_cycles(cfg, 1) == 11 and transfer_cycles(cfg, 256) == 266
    assert transfer_cycles(cfg.replace(dram_gbps=100.0), 8) == 18      # at most a beat per cycle
    assert transfer_cycles(cfg.replace(dram_gbps=1.0), 8) == 10 + 32
    assert transfer_cycles(cfg.replace(dram_gbps=3.0), 3) == 10 + 4
    assert transfer_cycles(cfg, 8, store=True) == 10 + 8 + 1


def test_timing_of_a_wait():
    """A start in cycle t keeps the engine busy in t+1 .. t+B; a wait issues at t+B+1; the
    RUN ends when the drain is over and the engine is idle."""
    cfg = BASE.replace(dram_latency=5, dram_gbps=4.0)
    b = transfer_cycles(cfg, 3)
    for m in _models(cfg):
        m.load(assemble("dma load 3\ndma wait\nhalt\n", cfg).words())
        r = m.run(0, [])
        # the load issues in cycle t, the wait stalls in t+1 .. t+b and issues at t+b+1
        assert r.counters["dma_stall_cycles"] == b, type(m)
        plain = CoreModel(cfg)
        plain.load(assemble("nop\nnop\nhalt\n", cfg).words())
        assert r.cycles == plain.run(0, []).cycles + b
        m.load(assemble("dma store 3\nhalt\n", cfg).words())
        r = m.run(0, [])
        assert r.cycles == max(plain.run(0, []).cycles - 1, 1 + b + 2), type(m)     # a store: b + 1


def test_timing_of_a_queue():
    """``dma_queue = Q``: starts issue back to back while fewer than ``Q`` transfers are
    outstanding, the engine does them one after another (each from the end of the one
    before), the next start waits for the oldest; a wait for all of them; the models
    agree on every counter, and with ``Q = 1`` each start after the first stalls for
    the whole transfer before it."""
    text = "dma load 4\ndma load 4\ndma load 4\ndma load 4\ndma load 4\n" + "nop\n" * 30 + "dma wait\nhalt\n"
    for q in (1, 2, 5):
        cfg = BASE.replace(dram_latency=5, dram_gbps=4.0, dma_queue=q)
        b = transfer_cycles(cfg, 4)
        res = []
        for m in _models(cfg):
            m.load(assemble(text, cfg).words())
            res.append(m.run(0, []))
        assert all(r.counters == res[0].counters and r.cycles == res[0].cycles for r in res), q
        c = res[0].counters
        assert c["dma_busy_cycles"] == 5 * b and c["dram_rd_beats"] == 20
        # start k issues at u_k = max(u_(k-1) + 1, end_(k-q) + 1), the engine ends it at
        # end_k = max(u_k, end_(k-1)) + b; the wait after 30 nops, once end_4 is over
        u, end = [0], [b]
        for k in range(1, 5):
            u.append(max(u[-1] + 1, end[k - q] + 1 if k >= q else 0))
            end.append(max(u[-1], end[-1]) + b)
        stall_starts = u[-1] - 4
        stall_wait = max(0, end[-1] + 1 - (u[-1] + 31))
        assert c["dma_stall_cycles"] == stall_starts + stall_wait, (q, c["dma_stall_cycles"], u, end)
    assert stall_starts == 0 and stall_wait > 0                   # q = 5: every start at once


def test_queue_keeps_regions_open():
    """With ``dma_queue = 2`` a load's region stays open over the next start (it may not
    be done), and closes at the start after that (which waits for it) or at a wait; with
    one transfer at a time the next start closes it. Every model raises alike."""
    first = "dma spad = 100\ndma load 4\ndma spad = 200\ndma load 4\n"
    read = "spad rd = 101\nsin row | hout row last\nhalt\n"
    for q, mid, bad in ((1, "", False), (2, "", True), (2, "dma spad = 300\ndma load 4\n", False),
                        (2, "dma wait\n", False)):
        cfg = BASE.replace(dma_queue=q)
        for m in _models(cfg):
            m.load(assemble(first + mid + read, cfg).words())
            if bad:
                with pytest.raises(DramError, match="reads scratchpad beat 101 of the dma load"):
                    m.run(0, [])
            else:
                m.run(0, [])


def test_dram_contents_bit_exact():
    cfg = BASE
    words = assemble("dma dram = 1000\ndma spad = 40\ndma load 16\ndma both = 40\ndma dram = 2000 | dma wait\n"
                     "dma store 16\nhalt\n", cfg).words()
    data = [random.Random(5).getrandbits(32) for _ in range(16)]
    for m, r in _run_all(cfg, words, {1000: data}):
        assert m.dram.read(2000, 16) == data
        assert _spad(m)[40:56] == data
        assert r.counters["dram_rd_beats"] == r.counters["dram_wr_beats"] == 16


@pytest.mark.parametrize("src,msg", [
    ("dma dram = 262140\ndma load 8\nhalt\n", "overrun the 262144-beat DRAM"),
    ("dma dram = 1020\ndma load 8\nhalt\n", "cross a 4 KiB page"),
    ("dma spad = 510\ndma load 8\nhalt\n", "overrun the 512-beat scratchpad"),
    ("dma load 8\nsin row\ndma wait\nhalt\n", "sin at pc 1 reads scratchpad beat 0 of the dma load"),
    ("dma load 8\nspad wr = 7\nhin row | sout row\ndma wait\nhalt\n", "sout at pc 2 writes scratchpad beat 7"),
    ("dma store 8\nhin row | sout row\nhalt\n", "sout at pc 1 writes scratchpad beat 0 of the dma store"),
    ("dma store 8 | hin row | sout row\nhalt\n", "sout at pc 0 writes"),
])
def test_bad_transfers(src, msg):
    cfg = BASE
    words = assemble(src, cfg).words()
    for m in _models(cfg):
        m.load(words)
        with pytest.raises(DramError, match=msg):
            m.run(0, [1, 2, 3])


def test_races_that_are_not():
    """A sin on a load's own start reads the old beat; a store's region may be read; a
    wait closes the region."""
    cfg = BASE
    src = ("spad wr = 0\nhin row | sout row\nnop\ndma load 1 | sin row | hout row\ndma store 4\nspad rd = 1\n"
           "sin row | hout row\ndma wait\nspad rd = 0\nsin row | hout row\nhalt\n")
    words = assemble(src, cfg).words()
    for m, r in _run_all(cfg, words, {0: [0xAAAA5555], 1: [1]}, [0x12345678]):
        assert r.counters["dram_rd_beats"] == 1 and r.counters["dram_wr_beats"] == 4
        assert [b.data for b in r.out] == [0x12345678, 0, 0xAAAA5555], type(m)
        assert m.dram.read(0, 2) == [0xAAAA5555, 0]


def test_counters_and_config():
    assert "dram_rd_beats" not in counter_names(BASE.replace(dram_mib=0))
    assert counter_names(BASE)[-4:] == ["dram_rd_beats", "dram_wr_beats", "dma_busy_cycles", "dma_stall_cycles"]
    assert "dram_mib" not in ArchConfig().to_dict()
    assert ArchConfig.from_dict(BASE.to_dict()) == BASE
    for kw, msg in [({"dram_mib": 3}, "dram_mib must be 0 or a power of two"),
                    ({"dram_mib": 1, "spad_kib": 0}, "needs a scratchpad"),
                    ({"dram_latency": 0}, "dram_latency must be an integer"),
                    ({"dma_queue": 0}, "dma_queue must be an integer"),
                    ({"dma_queue": 65}, "dma_queue must be an integer"),
                    ({"dram_gbps": 0}, "dram_gbps must be a number"),
                    ({"dram_mib": 1, "nr": 3}, "power of two of bytes"),
                    ({"dram_mib": 1, "dist_stage": True}, "dist_stage=False"),
                    ({"dram_mib": 65536, "mem_a_words": 256, "mem_b_words": 256, "loop_bits": 8, "ucode_depth": 16},
                     "raise loop_bits")]:
        base = {"nr": 2, "spad_kib": 2, **kw}
        with pytest.raises(ConfigError, match=msg):
            ArchConfig(**base)


@pytest.mark.parametrize("src", [
    "dma load 1\ndma store 256\ndma wait\nhalt\n",
    "dma dram = 262143\ndma spad = 511\ndma both = 17 | dma load 3\nsin row | dma wait\nhalt\n",
    "dma load 2\ndma wait 1 | sin row\ndma wait 255\ndma wait | nop\nhalt\n",
])
def test_asm_round_trip(src):
    p = assemble(src, BASE)
    text = disassemble(p, BASE)
    assert assemble(text, BASE).words() == p.words()
    assert "dma" in text


@pytest.mark.parametrize("src,msg", [
    ("dma load 0\nhalt\n", "moves 1..256 beats"),
    ("dma store 257\nhalt\n", "moves 1..256 beats"),
    ("dma wait 256\nhalt\n", "keeps 0..255 transfers outstanding"),
    ("dma wait -1\nhalt\n", "keeps 0..255"),
    ("dma fetch 3\nhalt\n", "dma must be load, store, wait"),
    ("dma dram = 262144\nhalt\n", "DRAM beat address 262144 out of range"),
    ("dma spad = 512\nhalt\n", "scratchpad beat address 512 out of range"),
    ("dma load 1 | dma wait\nhalt\n", "conflicts"),
    ("dma dram = 4 | spad rd = 1\nhalt\n", "spad conflicts with dma"),
])
def test_asm_errors(src, msg):
    with pytest.raises(AsmError, match=msg):
        assemble(src, BASE)


def test_asm_needs_dram():
    cfg = BASE.replace(dram_mib=0)
    for src in ("dma load 1\nhalt\n", "dma dram = 1\nhalt\n"):
        with pytest.raises(AsmError, match=r"needs DRAM.*dram_mib = 0"):
            assemble(src, cfg)


def test_power_charges_dram():
    """DRAM energy = beats x nr x width / 64 x the 64-bit access energy (Horowitz, 45 nm),
    in the everything scope only; the DMA engine's area is a logic block."""
    from arch.isa import dma_descriptor_bits
    from sim.power import COMPARED, DEFAULT_TECH, EVERYTHING, area_of_core, report_from_counters

    cfg = BASE
    m = CoreModel(cfg)
    m.load(_prog(cfg).words())
    m.dram.write(8, list(range(1, 9)))
    r = m.run(0, [])
    rep = report_from_counters(cfg, r.counters)
    beats = r.counters["dram_rd_beats"] + r.counters["dram_wr_beats"]
    assert rep.energy_pj["dram"] == pytest.approx(beats * 2 * 16 / 64 * 1950.0)
    assert DEFAULT_TECH.dram_pj_per_64b == 1950.0 and "Horowitz" in DEFAULT_TECH.sources["dram_pj_per_64b"]
    assert "dram" not in COMPARED and "dram" not in EVERYTHING
    assert cfg.dma_queue == 1 and area_of_core(cfg)["dma"] == DEFAULT_TECH.dma_area_mm2
    # a queue of Q transfers adds Q - 1 descriptors of flip-flops (1 + 8 + 18 + 9 bits here)
    assert dma_descriptor_bits(cfg) == 1 + 8 + cfg.dram_addr_bits + cfg.spad_addr_bits == 36
    q16 = area_of_core(cfg.replace(dma_queue=16))["dma"]
    assert q16 == pytest.approx(DEFAULT_TECH.dma_area_mm2 + 15 * 36 * DEFAULT_TECH.rf_area_mm2_per_16x16b / 256)
    off = cfg.replace(dram_mib=0)
    assert "dma" not in area_of_core(off)
    assert "dram" not in report_from_counters(off, {k: v for k, v in r.counters.items()
                                                    if k in counter_names(off)}).energy_pj


def test_isa_doc_example():
    """The ``asm-dma`` block of docs/isa.md assembles, round-trips and runs on the models."""
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "isa.md"
    blocks = re.findall(r"```asm-dma\n(.*?)```", doc.read_text(), re.S)
    assert blocks
    cfg = BASE
    for text in blocks:
        p = assemble(text, cfg)
        assert assemble(disassemble(p, cfg), cfg).words() == p.words()
        data = list(range(100, 132))
        res = _run_all(cfg, p.words(), {64: data})
        for m, r in res:
            assert m.dram.read(512, 16) == data[16:]
            assert r.counters == res[0][1].counters


def test_double_buffering_hides_transfers():
    """Blocks streamed from DRAM through two scratchpad buffers: block k + 1 loads while
    block k goes to the PEs. With enough work per block only the first load is exposed
    (dma_stall_cycles); every other transfer is hidden behind the work."""
    cfg = BASE.replace(dram_latency=20, dram_gbps=4.0)
    n, blocks, work = 16, 6, 40
    b_load = transfer_cycles(cfg, n)
    lines = ["dma load 16", "dma wait"]
    for k in range(blocks):
        if k + 1 < blocks:
            lines.append(f"dma spad = {(k + 1) % 2 * 64}")
            lines.append("dma load 16")
        lines.append(f"spad rd = {k % 2 * 64}")
        lines.append(f"loop c{k} {n} {{\n sin row | wra [ar0]++ = row\n }}")
        lines.append(f"loop w{k} {work} {{\n nop\n }}")
        lines.append("dma wait")
    lines.append("halt")
    words = assemble("\n".join(lines) + "\n", cfg).words()
    data = list(range(1, 16 * blocks + 1))
    res = _run_all(cfg, words, {0: data})
    for m, r in res:
        assert r.counters == res[0][1].counters
        assert r.counters["dma_stall_cycles"] == b_load           # the first load only
        assert r.counters["dma_busy_cycles"] == blocks * b_load
    for m, _ in res:
        # the two buffers hold the last two blocks; PE (0, 0) took lane 0 of the last beat
        assert _spad(m)[64:80] == data[-16:] and _spad(m)[0:16] == data[-32:-16]
        assert int(core_state(m)["mem_a"][0, 0, 0]) == data[-1] & 0xFFFF
