"""Shared start and ending of the stream testbenches (:mod:`sim.tb_core`,
:mod:`sim.tb_chip`, :mod:`sim.tb_dram`).

The top-level port names (``s_axis_tdata``, ``s_axis_tvalid``, ``s_axis_tready``,
``s_axis_tlast``, ``s_axis_tdest``, ``m_axis_tid`` ...) are those of
:class:`rtl.streams.AxisTop`, through which :func:`rtl.verilog.write_verilog` converts a
design whose host streams are ``lib.stream`` interfaces; cocotbext-axi's
``AxiStreamBus.from_prefix`` finds them by prefix."""

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamSink, AxiStreamSource


def start_stream(dut):
    """Hold the reset (before the first clock edge: an undriven reset would make state
    X), clear ``s_axis_tvalid`` and ``m_axis_tready``, start the 10 ns clock; returns
    cocotbext-axi's ``(source, sink)`` on ``s_axis`` / ``m_axis``."""
    dut.rst.value = 1
    dut.s_axis_tvalid.value = 0
    dut.m_axis_tready.value = 0
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_lanes=1)
    return src, sink


def attach_dram(dut, cfg, prefix: str = "m_axi"):
    """cocotbext-axi's ``AxiRam`` of ``cfg.dram_mib`` MiB (zeros) on the AXI4 master
    port ``<prefix>_*`` (a core's ``m_axi``; a chip's core ``k``: ``m_axi_<k>``); None for
    a configuration without DRAM."""
    if not cfg.dram_mib:
        return None
    from cocotbext.axi import AxiBus, AxiRam

    return AxiRam(AxiBus.from_prefix(dut, prefix), dut.clk, dut.rst, size=cfg.dram_mib << 20)


async def release_reset(dut):
    """Three cycles of reset, then released; returns at the next rising edge."""
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


async def finish_stream(dut, sink, prm, got, start_time, t0, more=None):
    """After the expected beats: the simulated cycles and wall time of the run, then 20
    more cycles in which nothing may come out. Writes ``{"out", "sim_cycles", "wall_s"}``
    (and ``more(extra_beats)``'s entries, read after those cycles) to ``prm["result"]``
    when given; returns ``(cycles, wall, extra_beats)``."""
    cycles = (cocotb.utils.get_sim_time("ns") - start_time) / 10
    wall = time.perf_counter() - t0
    await ClockCycles(dut.clk, 20)
    extra = []
    while not sink.empty():
        extra += [int(d) for d in sink.recv_nowait().tdata]
    if prm.get("result"):
        with open(prm["result"], "w") as fh:
            json.dump({"out": got, "sim_cycles": cycles, "wall_s": wall, **(more(extra) if more else {})}, fh)
    return cycles, wall, extra
