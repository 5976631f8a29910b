"""Shared ending of the stream testbenches (:mod:`sim.tb_core`, :mod:`sim.tb_chip`)."""

import json
import time

import cocotb
from cocotb.triggers import ClockCycles


async def finish_stream(dut, sink, prm, got, start_time, t0):
    """After the expected beats: the simulated cycles and wall time of the run, then 20
    more cycles in which nothing may come out. Writes ``{"out", "sim_cycles", "wall_s"}``
    to ``prm["result"]`` when given; returns ``(cycles, wall, extra_beats)``."""
    cycles = (cocotb.utils.get_sim_time("ns") - start_time) / 10
    wall = time.perf_counter() - t0
    await ClockCycles(dut.clk, 20)
    extra = []
    while not sink.empty():
        extra += [int(d) for d in sink.recv_nowait().tdata]
    if prm.get("result"):
        with open(prm["result"], "w") as fh:
            json.dump({"out": got, "sim_cycles": cycles, "wall_s": wall}, fh)
    return cycles, wall, extra
