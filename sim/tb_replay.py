"""cocotb testbench of :class:`rtl.replay.CoreReplay`: a whole session without per-cycle Python.

The testbench writes the input beats into the harness's input memory (through the
simulator's VPI, :mod:`sim.vpi_mem`), starts the clock
(in the simulator, :class:`cocotb.clock.Clock`), raises ``go`` and sleeps until ``done``
(one trigger), then reads every captured output beat and compares it (data and
``tlast``) with the model's expected beat, as :mod:`sim.tb_core` does.

Parameters (``sim.harness.tb_params()``): ``vectors``, ``result`` and ``seed`` as in
:mod:`sim.tb_core`; ``pause_in`` / ``pause_out`` as probabilities (rounded to 1/256, the
pause generators' resolution); ``relaxed``: output beat indices not compared (the
counters stream pauses change); ``max_cycles``: the harness's cycle limit (default 50
cycles per beat plus 100,000).
The result JSON adds ``load_s`` and ``readback_s`` (memory access through the simulator)
to ``out``, ``sim_cycles`` (checked against the harness's own count) and ``wall_s``.
"""

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from rtl.replay import RESET_CYCLES
from sim import vpi_mem
from sim.harness import tb_params

EXTRA_CYCLES = 20   # after the last expected beat, cycles in which no further beat may come
GO_LATENCY = 1      # the harness samples its inputs in flip-flops (rtl.replay.CoreReplay)


def _threshold(p: float) -> int:
    return max(0, min(256, round(p * 256)))


def _load(dut, beats, hw):
    if vpi_mem.available():
        vpi_mem.write_words(dut.in_mem._path, beats, hw)
        return
    mem = dut.in_mem
    for i, b in enumerate(beats):
        mem[i].value = b


def _readback(dut, n, hw):
    if vpi_mem.available():
        words = vpi_mem.read_words(dut.out_mem._path, n, hw + 1)
    else:
        words = [int(dut.out_mem[i].value) for i in range(n)]
    return [(v & ((1 << hw) - 1), bool(v >> hw)) for v in words]


def _first_mismatch(got, expected, relaxed):
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e and i not in relaxed:
            return (f"output beat {i} of {len(expected)}: got data={g[0]:#x} last={g[1]}, "
                    f"model data={e[0]:#x} last={e[1]}")
    return None


@cocotb.test()
async def replay_stream(dut):
    prm = tb_params()
    with open(prm["vectors"]) as fh:
        vec = json.load(fh)
    beats, expected = vec["in"], [(int(d), bool(last)) for d, last in vec["out"]]
    hw = len(dut.rd_data) - 1
    depth_in, depth_out = len(dut.in_mem), len(dut.out_mem)
    assert len(beats) <= depth_in, f"{len(beats)} input beats, the harness holds {depth_in}"
    seed = int(prm.get("seed", 0))
    dut.go.value = 0
    dut.n_in.value = len(beats)
    dut.n_out.value = len(expected)
    dut.max_cycles.value = int(prm.get("max_cycles") or 50 * (len(beats) + len(expected)) + 100_000)
    dut.pause_in.value = _threshold(prm.get("pause_in", 0))
    dut.pause_out.value = _threshold(prm.get("pause_out", 0))
    dut.seed_in.value = (0x1D0F + 7919 * seed) & 0xFFFF
    dut.seed_out.value = (0xACE1 + 104729 * seed) & 0xFFFF
    dut.rd_addr.value = 0
    Clock(dut.clk, 10, unit="ns").start()
    await ClockCycles(dut.clk, 1)       # after the design's initial blocks (memories zeroed)
    t = time.perf_counter()
    _load(dut, beats, hw)
    load_s = time.perf_counter() - t
    await ClockCycles(dut.clk, RESET_CYCLES + 1)   # the harness resets itself
    dut.go.value = 1
    t0 = time.perf_counter()
    start_time = cocotb.utils.get_sim_time("ns")
    await RisingEdge(dut.done)
    wall = time.perf_counter() - t0
    cycles = (cocotb.utils.get_sim_time("ns") - start_time) / 10 - GO_LATENCY
    await ClockCycles(dut.clk, EXTRA_CYCLES)
    assert not int(dut.timeout.value), (
        f"cycle limit {int(dut.max_cycles.value)} hit: {int(dut.n_got.value)} of {len(expected)} output beats, "
        f"{int(dut.n_sent.value)} of {len(beats)} input beats taken")
    n_got, n_sent = int(dut.n_got.value), int(dut.n_sent.value)
    assert int(dut.cycles.value) == cycles, f"harness counted {int(dut.cycles.value)} cycles, simulation time {cycles}"
    t = time.perf_counter()
    got = _readback(dut, min(n_got, depth_out), hw)
    readback_s = time.perf_counter() - t
    if prm.get("result"):
        with open(prm["result"], "w") as fh:
            json.dump({"out": got[:len(expected)], "sim_cycles": cycles, "wall_s": wall, "load_s": load_s,
                       "readback_s": readback_s}, fh)
    bad = _first_mismatch(got, expected, set(prm.get("relaxed") or ()))
    if bad:
        raise AssertionError(bad)
    assert n_sent == len(beats), f"the core took {n_sent} of {len(beats)} input beats"
    assert n_got == len(expected), (
        f"core sent {n_got - len(expected)} more beats than the model: "
        f"{[hex(d) for d, _ in got[len(expected):len(expected) + 8]]}")
    dut._log.info("%d beats match the model; %d cycles, %.0f cycles/s (load %.3f s, readback %.3f s)",
                  len(got), cycles, cycles / max(wall, 1e-9), load_s, readback_s)
