"""Sessions of programs on a heterogeneous chip (:class:`arch.hetero.HeteroConfig`) on
the per-cycle chip model, the fast chip model or the RTL (:class:`rtl.hetero_chip.HeteroChip`
under cocotb, checked beat for beat against the per-cycle model), the same way as
:func:`sim.chip_run.run_chip_session` does for a homogeneous chip.

Every core is loaded with its own image (``tdest = k``; the kinds' microcode words
differ), and talks to the host in its own kind's beats, in the low bits of the chip's
wider stream. A phase with host data runs core by core and must not use the ring; a
phase without it starts every core with one broadcast ``RUN``. After each phase a
broadcast ``COUNTERS`` reads every core's counters (each in its own kind's beats).
"""

from __future__ import annotations

import json
import os

from arch.host import Cmd
from sim.chip_model import ChipModel, ChipRunResult
from sim.chip_run import ChipPhase, split_session_output
from sim.core_model import Beat
from sim.core_run import JobResult
from sw.host_protocol import clear_beats, counters_beats, load_beats, run_beats

__all__ = ["run_hetero_session", "hetero_session_beats"]


def _model(hcfg, model, phases):
    """Per phase the model's result; per core the expected output stream; per phase and
    core the beats out once the phase's done beat / counters are out."""
    n = hcfg.cores
    streams = [[] for _ in range(n)]
    runs, done_at, end_at = [], [], []
    for ph in phases:
        imgs, data = ph.images(n), ph.host_data(n)
        if ph.load:
            for k in range(n):
                model.load(imgs[k], 0, core=k)
        model.clear_counters()
        if any(data):
            res = [model.cores[k].run(ph.start, data[k], ring_in=()) for k in range(n)]
            if any(r.ring_out for r in res):
                raise ValueError(f"phase {ph.name!r} has host data and sends on the ring: it runs core by core")
            rr = ChipRunResult(res, max(r.cycles for r in res), {})
        else:
            rr = model.run(ph.start)
        runs.append(rr)
        for k in range(n):
            streams[k] += rr.cores[k].out
            streams[k].append(Beat(Cmd.RUN | (model.cores[k]._last_pc << 4), True))
        done_at.append([len(s) for s in streams])
        for k in range(n):
            streams[k] += model.cores[k].counter_beats()
        end_at.append([len(s) for s in streams])
    return runs, streams, done_at, end_at


def hetero_session_beats(hcfg, phases, done_at, end_at) -> list:
    """The host stream (``(tdest, beats)`` frames and ``("wait", core, n)`` entries, as
    :func:`sim.chip_run.chip_session_beats`)."""
    from rtl.chip import broadcast_dest

    n = hcfg.cores
    bc = broadcast_dest(hcfg)
    frames = []
    for p, ph in enumerate(phases):
        imgs, data = ph.images(n), ph.host_data(n)
        if ph.load:
            frames += [(k, load_beats(hcfg.core_cfg(k), imgs[k], 0)) for k in range(n)]
        frames.append((bc, clear_beats()))
        if any(data):
            for k in range(n):
                frames += [(k, run_beats(ph.start, data[k])), ("wait", k, done_at[p][k])]
        else:
            frames.append((bc, run_beats(ph.start)))
        frames.append((bc, counters_beats()))
        frames += [("wait", k, end_at[p][k]) for k in range(n)]
    return frames


def run_hetero_session(hcfg, phases: list[ChipPhase], *, backend: str = "model", sim: str | None = None,
                       name: str = "hetero") -> list[list[JobResult]]:
    """Run ``phases`` on heterogeneous chip ``hcfg``; per phase, per core, a
    :class:`~sim.core_run.JobResult`. ``backend``: ``"model"``, ``"fast"`` or ``"rtl"``."""
    if backend not in ("model", "fast", "rtl"):
        raise ValueError(f"unknown backend {backend!r}; allowed: model, fast, rtl")
    phases = list(phases)
    model = ChipModel(hcfg, "fast" if backend == "fast" else "cycle")
    runs, streams, done_at, end_at = _model(hcfg, model, phases)
    out, info = streams, {}
    if backend == "rtl":
        from arch.files import atomic_write
        from rtl.hetero_chip import HeteroChip
        from sim.harness import BUILD, default_sim, run_cocotb

        sim = sim or default_sim()
        tag = f"{name}-{sim}-{os.getpid()}"
        vec = BUILD / "vectors" / f"{tag}.json"
        res = BUILD / "vectors" / f"{tag}-result.json"
        atomic_write(vec, json.dumps({"in": hetero_session_beats(hcfg, phases, done_at, end_at),
                                      "out": [[[b.data, b.last] for b in s] for s in streams]}))
        # the testbench reads only the core count from its config: group 0's kind has the chip's
        run_cocotb(HeteroChip(hcfg), "hetero_chip", "sim.tb_chip", sim=sim, config=hcfg.core_cfg(0),
                   design_key=hcfg.to_json(), params={"vectors": str(vec), "result": str(res)})
        got = json.loads(res.read_text())
        out = [[Beat(int(d), bool(last)) for d, last in s] for s in got["out"]]
        info = {"sim_cycles": got["sim_cycles"], "wall_s": got["wall_s"]}
        backend = f"rtl-{sim}"
    return split_session_output(runs, out, hcfg.core_cfg, lambda k: len(model.cores[k].counter_beats()),
                                backend, info)
