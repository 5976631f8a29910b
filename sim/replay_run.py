"""Run a core's host stream on the RTL through the replay harness (:class:`rtl.replay.CoreReplay`).

:func:`run_replay` is the ``stream="replay"`` path of :func:`sim.core_run.run_job` and
:func:`sim.core_run.run_session`: the input beats go into the harness's memory, the
simulator runs the whole session without waking Python per cycle, and
:mod:`sim.tb_replay` compares every captured output beat with the expected one.
"""

from __future__ import annotations

import json
import os
import time

from sim.core_model import Beat

__all__ = ["run_replay", "replay_depth", "STREAMS", "counter_timing_beats"]

#: host stream drivers of an RTL run: cocotbext-axi (per-cycle Python, random pauses) or
#: the replay harness (no per-cycle Python, LFSR pauses)
STREAMS = ("axi", "replay")

MIN_DEPTH = 1024

#: what :mod:`sim.tb_replay` reaches in :class:`rtl.replay.CoreReplay` (the rest of a
#: Verilator build stays private to Verilator's optimizer, :func:`sim.harness.run_cocotb`)
TB_SIGNALS = {
    **{name: "rw" for name in ("clk", "go", "n_in", "n_out", "max_cycles", "pause_in", "pause_out",
                               "seed_in", "seed_out", "rd_addr", "in_mem")},
    **{name: "rd" for name in ("done", "timeout", "cycles", "n_sent", "n_got", "rd_data", "out_mem")},
}


def replay_depth(n: int) -> int:
    """Memory depth of the harness for ``n`` beats: a power of two, at least
    :data:`MIN_DEPTH` (sessions of similar length share one build)."""
    return max(MIN_DEPTH, 1 << max(0, n - 1).bit_length())


def counter_timing_beats(cfg, start: int) -> list[int]:
    """Output beat indices of the ``cycles`` and ``stall_cycles`` counters in a counter
    readout starting at beat ``start``: the counters stream pauses change."""
    per = -(-64 // cfg.host_width)
    return list(range(start, start + 2 * per))


def run_replay(cfg, beats, expected, *, sim: str | None = None, name: str = "replay", pause_in: float = 0.0,
               pause_out: float = 0.0, seed: int = 0, relaxed=(), max_cycles: int | None = None,
               platform=None) -> tuple[list, dict]:
    """Stream ``beats`` (ints) into a core on the RTL and check its output against
    ``expected`` (:class:`sim.core_model.Beat`, all of them, except the indices in
    ``relaxed``); raises ``AssertionError`` (from the harness) on a difference.

    ``pause_in`` / ``pause_out``: probability of a pause cycle on ``s_axis_tvalid`` /
    ``m_axis_tready`` (resolution 1/256, deterministic per ``seed``). Returns the RTL's
    output beats and an info dict: ``sim_cycles``, ``wall_s`` (simulation of the stream),
    ``load_s`` / ``readback_s`` (harness memories), ``convert_s`` / ``build_s`` (Verilog
    conversion and simulator build, :func:`sim.harness.run_cocotb`), ``total_s`` (all of it).
    """
    from arch.files import atomic_write
    from rtl.replay import CoreReplay
    from sim.harness import BUILD, default_sim, run_cocotb

    t0 = time.perf_counter()
    sim = sim or default_sim()
    tag = f"{name}-replay-{sim}-{os.getpid()}"
    vec = BUILD / "vectors" / f"{tag}.json"
    res = BUILD / "vectors" / f"{tag}-result.json"
    atomic_write(vec, json.dumps({"in": list(beats), "out": [[b.data, b.last] for b in expected]}))
    d_in, d_out = replay_depth(len(beats)), replay_depth(len(expected) + 1)
    params = {"vectors": str(vec), "result": str(res), "pause_in": pause_in, "pause_out": pause_out,
              "seed": seed, "relaxed": sorted(relaxed), "max_cycles": max_cycles}
    if res.exists():
        res.unlink()
    ran = run_cocotb(CoreReplay(cfg, d_in, d_out), "core_replay", "sim.tb_replay", sim=sim, config=cfg,
                     params=params, design_key=f"{cfg.to_json()} replay {d_in} {d_out}", platform=platform,
                     public=TB_SIGNALS)
    got = json.loads(res.read_text())
    out = [Beat(int(d), bool(last)) for d, last in got["out"]]
    info = {k: got[k] for k in ("sim_cycles", "wall_s", "load_s", "readback_s")}
    info.update(convert_s=ran["convert_s"], build_s=ran["build_s"], total_s=time.perf_counter() - t0, stream="replay")
    return out, info
