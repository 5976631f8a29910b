"""cocotb testbench of a core with DRAM: cocotbext-axi's ``AxiRam`` on the core's AXI4
master port (``m_axi_*``), the host streams as in :mod:`sim.tb_core`.

Parameters (``sim.harness.tb_params()``):

``vectors``  JSON file ``{"in": [int...], "n_out": int, "dram": {byte address: hex},
             "read": [[byte address, bytes]...]}``: the host input beats, the number of
             output beats to collect, the DRAM's initial contents and the ranges to read
             back after the run
``result``   where to write ``{"out": [[data, last]...], "extra": [int...], "dram": [hex...],
             "sim_cycles", "wall_s"}``; the pytest side compares them with the models
"""

import json
import time

import cocotb
from cocotbext.axi import AxiStreamFrame

from sim.harness import tb_config, tb_params
from sim.tb_stream import attach_dram, finish_stream, release_reset, start_stream


@cocotb.test()
async def core_dram(dut):
    prm = tb_params()
    cfg = tb_config()
    vec = json.loads(open(prm["vectors"]).read())
    src, sink = start_stream(dut)
    ram = attach_dram(dut, cfg)
    for addr, data in vec["dram"].items():
        ram.write(int(addr), bytes.fromhex(data))
    await release_reset(dut)
    t0 = time.perf_counter()
    start_time = cocotb.utils.get_sim_time("ns")
    await src.send(AxiStreamFrame(vec["in"]))
    got = []
    while len(got) < vec["n_out"]:
        frame = await sink.recv()
        words = list(frame.tdata)
        got += [(int(d), i == len(words) - 1) for i, d in enumerate(words)]
    await finish_stream(dut, sink, prm, got, start_time, t0,
                        more=lambda extra: {"extra": extra, "dram": [ram.read(a, n).hex() for a, n in vec["read"]]})
