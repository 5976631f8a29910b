"""cocotb testbench of the chip: one host stream in (``tdest`` routing), one out (``tid``),
compared per core with the chip model.

Parameters (``sim.harness.tb_params()``):

``vectors``  JSON ``{"in": [[tdest, [beat...](, follow)] or ["wait", core, n]...],
             "out": [[[data, last]...] per core], "dram_read": [[[byte address, bytes]...]
             per core]}`` written by the pytest side
             (:func:`sim.chip_run.run_chip_session`); a ``wait`` entry holds the input
             stream until ``core`` has sent ``n`` beats (a host that runs the cores one
             after another waits for each one's done beat); ``follow`` true: the next
             frame is queued at once, so it starts in the cycle after this one's last
             beat (a chip RUN's host beats); ``dram_read`` (a chip with
             DRAM): the ranges of each core's DRAM to read back after the run
``result``   where to write the measured per-core output beats and timing (JSON) and,
             with DRAM, ``"dram": [[hex...] per core]``

With DRAM (``cfg.dram_mib > 0``) one cocotbext-axi ``AxiRam`` of ``cfg.dram_mib`` MiB
(zeros at the start) serves each core's AXI4 master port ``m_axi_<k>``
(:class:`rtl.chip.Chip`); its latency is the one ``docs/core.md`` measures for a core.
"""

import json
import time

import cocotb
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiStreamFrame

from sim.harness import tb_config, tb_params
from sim.tb_stream import attach_dram, finish_stream, release_reset, start_stream


def _per_beat(v, n):
    """A frame's tid field as one value per beat (cocotbext-axi may compact it)."""
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v] if len(v) == n else [int(v[0])] * n
    return [int(v)] * n


@cocotb.test()
async def chip_stream(dut):
    cfg = tb_config()
    prm = tb_params()
    vec = json.loads(open(prm["vectors"]).read())
    src, sink = start_stream(dut)
    rams = [attach_dram(dut, cfg, f"m_axi_{k}") for k in range(cfg.cores)] if cfg.dram_mib else []
    await release_reset(dut)

    expected = [[(int(d), bool(last)) for d, last in core] for core in vec["out"]]
    t0 = time.perf_counter()
    start_time = cocotb.utils.get_sim_time("ns")
    got = [[] for _ in range(cfg.cores)]

    async def receive():
        while any(len(g) < len(e) for g, e in zip(got, expected)):
            frame = await sink.recv()
            words = list(frame.tdata)
            tids = _per_beat(frame.tid, len(words))
            for i, (d, k) in enumerate(zip(words, tids)):
                if k >= cfg.cores:
                    raise AssertionError(f"beat from tid {k}: no such core")
                got[k].append((int(d), i == len(words) - 1))

    rx = cocotb.start_soon(receive())
    for entry in vec["in"]:
        if entry[0] == "wait":
            _, core, n = entry
            while len(got[core]) < n:
                await RisingEdge(dut.clk)
            continue
        dest, beats, *follow = entry
        await src.send(AxiStreamFrame(beats, tdest=dest))
        if not (follow and follow[0]):        # else the next frame follows with no idle beat
            await src.wait()
    await rx
    reads = vec.get("dram_read") or [[] for _ in rams]
    cycles, wall, extra = await finish_stream(
        dut, sink, prm, got, start_time, t0,
        more=lambda _: {"dram": [[ram.read(a, n).hex() for a, n in rd] for ram, rd in zip(rams, reads)]})
    for k, (g, e) in enumerate(zip(got, expected)):
        for i, (a, b) in enumerate(zip(g, e)):
            # a frame of the merged stream ends at a beat with tlast, whichever core sent it,
            # so each beat's last flag is its own
            if a != b:
                raise AssertionError(f"core {k}, output beat {i} of {len(e)}: got data={a[0]:#x} last={a[1]}, "
                                     f"model data={b[0]:#x} last={b[1]}")
    assert not extra, f"chip sent {len(extra)} more beats than the model: {[hex(x) for x in extra[:8]]}"
    dut._log.info("%d beats match the model; %d cycles, %.0f cycles/s", sum(map(len, got)), cycles,
                  cycles / max(wall, 1e-9))
