"""cocotb testbench of the core: host stream in, host stream out, compared with the model.

Parameters (``sim.harness.tb_params()``):

``vectors``  path of a JSON file ``{"in": [int...], "out": [[data, last]...], "counters": {...}}``
             written by the pytest side (input beats and the model's expected output)
``pause_in``, ``pause_out``  probability of a gap cycle on s_axis / of backpressure on m_axis
``seed``     for the pause generators
``result``   where to write the measured output beats and timing (JSON)
"""

import json
import random
import time

import cocotb
from cocotbext.axi import AxiStreamFrame

from sim.harness import tb_config, tb_params
from sim.tb_stream import attach_dram, finish_stream, release_reset, start_stream


def _pauses(rng, p):
    while True:
        yield rng.random() < p


@cocotb.test()
async def core_stream(dut):
    prm = tb_params()
    vec = json.loads(open(prm["vectors"]).read())
    rng = random.Random(prm.get("seed", 0))
    src, sink = start_stream(dut)
    attach_dram(dut, tb_config())
    if prm.get("pause_in", 0):
        src.set_pause_generator(_pauses(rng, prm["pause_in"]))
    if prm.get("pause_out", 0):
        sink.set_pause_generator(_pauses(rng, prm["pause_out"]))
    await release_reset(dut)

    expected = [(int(d), bool(last)) for d, last in vec["out"]]
    t0 = time.perf_counter()
    start_time = cocotb.utils.get_sim_time("ns")
    await src.send(AxiStreamFrame(vec["in"]))
    got = []
    while len(got) < len(expected):
        frame = await sink.recv()
        words = list(frame.tdata)
        for i, d in enumerate(words):
            got.append((int(d), i == len(words) - 1))
    cycles, wall, extra = await finish_stream(dut, sink, prm, got, start_time, t0)
    n_relaxed = prm.get("relaxed_tail", 0)
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e and i < len(expected) - n_relaxed:
            raise AssertionError(f"output beat {i} of {len(expected)}: got data={g[0]:#x} last={g[1]}, "
                                 f"model data={e[0]:#x} last={e[1]}")
    assert not extra, f"core sent {len(extra)} more beats than the model: {[hex(x) for x in extra[:8]]}"
    dut._log.info("%d beats match the model; %d cycles, %.0f cycles/s", len(got), cycles, cycles / max(wall, 1e-9))
