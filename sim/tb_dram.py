"""cocotb testbench of a core with DRAM: cocotbext-axi's ``AxiRam`` on the core's AXI4
master port (``m_axi_*``), the host streams as in :mod:`sim.tb_core`.

Parameters (``sim.harness.tb_params()``):

``vectors``  JSON file ``{"in": [int...], "n_out": int, "dram": {byte address: hex},
             "read": [[byte address, bytes]...]}``: the host input beats, the number of
             output beats to collect, the DRAM's initial contents and the ranges to read
             back after the run
``result``   where to write ``{"out": [[data, last]...], "dram": [hex...], "sim_cycles",
             "wall_s"}``; the pytest side compares them with the models
"""

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiBus, AxiRam, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from sim.harness import tb_config, tb_params


@cocotb.test()
async def core_dram(dut):
    prm = tb_params()
    cfg = tb_config()
    vec = json.loads(open(prm["vectors"]).read())
    dut.rst.value = 1
    dut.s_axis_tvalid.value = 0
    dut.m_axis_tready.value = 0
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_lanes=1)
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=cfg.dram_mib << 20)
    for addr, data in vec["dram"].items():
        ram.write(int(addr), bytes.fromhex(data))
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    t0 = time.perf_counter()
    start_time = cocotb.utils.get_sim_time("ns")
    await src.send(AxiStreamFrame(vec["in"]))
    got = []
    while len(got) < vec["n_out"]:
        frame = await sink.recv()
        words = list(frame.tdata)
        got += [(int(d), i == len(words) - 1) for i, d in enumerate(words)]
    cycles = (cocotb.utils.get_sim_time("ns") - start_time) / 10
    wall = time.perf_counter() - t0
    await ClockCycles(dut.clk, 20)
    extra = []
    while not sink.empty():
        extra += [int(d) for d in sink.recv_nowait().tdata]
    dram = [ram.read(a, n).hex() for a, n in vec["read"]]
    with open(prm["result"], "w") as fh:
        json.dump({"out": got, "extra": extra, "dram": dram, "sim_cycles": cycles, "wall_s": wall}, fh)
