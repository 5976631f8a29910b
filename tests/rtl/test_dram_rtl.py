"""The DMA engine's RTL (AXI4 master, cocotbext-axi ``AxiRam`` as the DRAM, Icarus):
DRAM -> scratchpad -> PEs -> compute -> scratchpad -> DRAM on a 2 x 2 core, the DRAM
contents bit for bit and every counter equal to the reference and fast models', whose
DRAM latency is set to the ``AxiRam``'s (``docs/core.md``, "The DMA engine")."""

from __future__ import annotations

import json
import os
import random

import pytest

from arch.config import ArchConfig
from arch.files import atomic_write
from sim.core_model import Beat, CoreModel
from sim.core_run import job_beats, split_job
from sim.fast_model import FastModel
from sw.asm import assemble
from tests.sim.test_dram import PIPE

#: a 2 x 2 binary16 core, 1 KiB scratchpad, 1 MiB DRAM at one beat (4 bytes) per cycle;
#: the latency is AxiRam's (measured by test_axiram_latency)
AXIRAM_LATENCY = 3
CFG = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, spad_kib=1, dram_mib=1, dram_latency=AXIRAM_LATENCY,
                 dram_gbps=4.0)


def run_rtl(cfg, words, dram_init, read, name, data=()):
    """(Icarus.) Run ``words`` on the RTL core with ``dram_init`` ``{beat address: [beats]}`` in
    the AxiRam; the output beats, and the DRAM beats of ``read`` ``[(address, n)]``."""
    from rtl.core import Core
    from sim.harness import BUILD, run_cocotb

    bb = cfg.spad_beat_bytes
    beats = job_beats(cfg, words, data)
    ref = CoreModel(cfg)
    for a, bs in dram_init.items():
        ref.dram.write(a, bs)
    expected = ref.process(beats)
    tag = f"{name}-{os.getpid()}"
    vec = BUILD / "vectors" / f"{tag}.json"
    res = BUILD / "vectors" / f"{tag}-result.json"
    dram = {str(a * bb): b"".join(x.to_bytes(bb, "little") for x in bs).hex() for a, bs in dram_init.items()}
    atomic_write(vec, json.dumps({"in": beats, "n_out": len(expected), "dram": dram,
                                  "read": [[a * bb, n * bb] for a, n in read]}))
    run_cocotb(Core(cfg), "core_dram", "sim.tb_dram", sim="icarus", config=cfg,
               params={"vectors": str(vec), "result": str(res)}, design_key=cfg.to_json())
    got = json.loads(res.read_text())
    assert not got["extra"], got["extra"]
    out = [Beat(int(d), bool(last)) for d, last in got["out"]]
    mem = []
    for h in got["dram"]:
        raw = bytes.fromhex(h)
        mem.append([int.from_bytes(raw[i:i + bb], "little") for i in range(0, len(raw), bb)])
    return split_job(cfg, out, "rtl-icarus"), split_job(cfg, expected, "model"), mem, ref


def test_axiram_latency(require_simulator):
    """A lone load and a lone store: the RTL's busy cycles are AXIRAM_LATENCY + beats (+ 1
    for the store's first scratchpad read), the models' figure with ``dram_latency =
    AXIRAM_LATENCY``; the wait right after the load stalls for all of the load's."""
    require_simulator("icarus")
    words = assemble("dma load 5\ndma wait\ndma dram = 40\ndma store 7\nhalt\n", CFG).words()
    rtl, model, _, _ = run_rtl(CFG, words, {0: [1, 2, 3, 4, 5]}, [(40, 7)], "dram_lat")
    assert rtl.counters["dma_busy_cycles"] == (AXIRAM_LATENCY + 5) + (AXIRAM_LATENCY + 7 + 1)
    assert rtl.counters["dma_stall_cycles"] == AXIRAM_LATENCY + 5
    assert rtl.counters == model.counters


STAGES = {"plain": {}, "fetch": {"fetch_stage": True}, "fetch_addr": {"fetch_stage": True, "addr_stage": True},
          "exec_bus": {"exec_stage": True, "bus_stage": True}}


#: the fetch stage alone in make test-all: fetch_addr runs it with the address stage
@pytest.mark.parametrize("stage", [pytest.param(s, marks=pytest.mark.slow) if s == "fetch" else s for s in STAGES])
def test_dram_pipeline_rtl(stage, require_simulator):
    """DRAM -> spad -> PEs -> x * x + x -> spad -> DRAM with a load overlapping compute:
    DRAM bit for bit and every counter equal to the core model's and the fast model's
    (also with the sequencer's fetch and address stages, and the PE's execute and bus
    stages)."""
    require_simulator("icarus")
    cfg = CFG.replace(**STAGES[stage])
    words = assemble(PIPE.format(src=8, dst=200, col=1, early="", late="", tail="nop"), cfg).words()
    rng = random.Random(11)
    data = [rng.getrandbits(32) for _ in range(8)]
    rtl, model, mem, ref = run_rtl(cfg, words, {8: data}, [(200, 4), (8, 8)], f"dram_pipe_{stage}")
    assert mem[0] == ref.dram.read(200, 4) and mem[0] != [0] * 4
    assert mem[1] == data
    assert [b.data for b in rtl.data] == [b.data for b in model.data]
    assert rtl.counters == model.counters
    fast = FastModel(cfg)
    fast.load(words)
    fast.dram.write(8, data)
    r = fast.run(0, [])
    assert fast.dram.read(200, 4) == mem[0]
    assert {k: v for k, v in r.counters.items()} == rtl.counters
    assert rtl.counters["dma_stall_cycles"] > 0 and rtl.counters["dram_rd_beats"] == 8


@pytest.mark.parametrize("seed", range(1, 1 + int(os.environ.get("DRAM_RTL_N", "3"))))
def test_random_dma_programs_rtl(seed, require_simulator):
    """Random DMA programs (tests/sim/test_dram_random.py's generator) on the RTL: output
    beats, every counter and the DRAM equal to the core model's."""
    require_simulator("icarus")
    from tests.sim.test_dram_random import random_dma_program

    rng = random.Random(seed)
    text, n_hin = random_dma_program(rng, CFG.spad_depth)
    words = assemble(text, CFG).words()
    host = [rng.getrandbits(32) for _ in range(n_hin)]
    init = {a: [rng.getrandbits(32)] for a in rng.sample(range(4096), 300)}
    rtl, model, mem, ref = run_rtl(CFG, words, init, [(0, 4096)], f"dram_rand{seed}", host)
    assert [(b.data, b.last) for b in rtl.data] == [(b.data, b.last) for b in model.data], text
    assert rtl.counters == model.counters, text
    assert mem[0] == ref.dram.read(0, 4096), text


def test_dma_queue_rtl(require_simulator):
    """``dma_queue = 3`` (a descriptor queue of 2 behind the transfer in progress): five
    loads and a store issued back to back (the fourth waits for the first), a ``dma
    wait 3`` (for the third load), compute while the rest move, a wait; then a random
    DMA program. Every counter, the output beats
    and the DRAM equal to the core model's (and the fast model's), and fewer stalls than
    with one transfer at a time."""
    require_simulator("icarus")
    from tests.sim.test_dram_random import random_dma_program

    cfg = CFG.replace(dma_queue=3)
    text = ("dma spad = 100\n" + "dma load 8\n" * 5 + "dma spad = 20\ndma dram = 500\ndma store 6\n"
            + "dma wait 3\n" + "nop\n" * 12 + "dma wait\nspad rd = 100\n" + "sin row | hout row\n" * 39 + "sin row | hout row last\nhalt\n")
    init = {0: [random.Random(5).getrandbits(32) for _ in range(40)]}
    rtl, model, mem, ref = run_rtl(cfg, assemble(text, cfg).words(), init, [(500, 6)], "dma_queue")
    assert [b.data for b in rtl.data] == [b.data for b in model.data] == init[0]
    assert rtl.counters == model.counters and mem[0] == ref.dram.read(500, 6)
    fast = FastModel(cfg)
    fast.load(assemble(text, cfg).words())
    fast.dram.write(0, init[0])
    assert fast.run(0, []).counters == rtl.counters
    one = CoreModel(CFG)
    one.dram.write(0, init[0])
    one.load(assemble(text, CFG).words())
    assert one.run(0, []).counters["dma_stall_cycles"] > rtl.counters["dma_stall_cycles"] > 0
    rng = random.Random(17)
    text, n_hin = random_dma_program(rng, cfg.spad_depth)
    host = [rng.getrandbits(32) for _ in range(n_hin)]
    init = {a: [rng.getrandbits(32)] for a in rng.sample(range(4096), 300)}
    rtl, model, mem, ref = run_rtl(cfg, assemble(text, cfg).words(), init, [(0, 4096)], "dma_queue_rand", host)
    assert [(b.data, b.last) for b in rtl.data] == [(b.data, b.last) for b in model.data], text
    assert rtl.counters == model.counters and mem[0] == ref.dram.read(0, 4096), text


def test_run_job_rtl_with_dram(require_simulator):
    """sim.core_run.run_job on the RTL of a core with DRAM (sim.tb_core attaches an empty
    AxiRam): a scratchpad -> DRAM -> scratchpad round trip, equal to the model's."""
    require_simulator("icarus")
    from sim.core_run import run_job

    words = assemble("spad wr = 3\nhin row | sout row\nhin row | sout row\ndma spad = 3\ndma store 2\n"
                     "dma dram = 0 | dma wait\ndma spad = 9\ndma load 2\ndma wait\nspad rd = 9\nsin row | hout row\n"
                     "sin row | hout row last\nhalt\n", CFG).words()
    rtl = run_job(CFG, words, [0x11223344, 0x55667788], backend="rtl", sim="icarus", name="dram_job")
    ref = run_job(CFG, words, [0x11223344, 0x55667788], backend="model")
    assert [b.data for b in rtl.data] == [b.data for b in ref.data] == [0x11223344, 0x55667788]
    assert rtl.counters == ref.counters
