"""Sessions of a partitioned chip (``docs/chip.md``, "Partitions") through the host port:
one sequence of :class:`sim.chip_run.ChipPhase` per group, each written for a chip of
the group's size, on the per-cycle chip model or on the RTL (cocotb).

The host stream configures the groups (``GROUP`` beats to :func:`rtl.chip.config_dest`),
then serves the groups one after another: a group's broadcasts are preceded by a
``SELECT`` of its block, its single-core beats go to ``tdest`` of the chip's core. A group
whose phase faults in the model (a deadlock, a malformed program) gets that phase's
``LOAD``, ``CLEAR`` and ``RUN`` only and is left running while the next groups run; once
every group has been served, the host ``STOP``s each faulty group and, optionally, runs
its ``recover`` phases (the group is usable again). The expected per-core output streams
are those of each group's phases run alone on ``cfg.replace(cores=size)``; the RTL must
match them beat for beat, and a faulty group must send nothing for its faulty phase.
"""

from __future__ import annotations

import json
import os

from arch.host import Cmd
from arch.partition import Partition
from sim.chip_model import ChipModel
from sim.chip_run import _model_outputs, chip_session_beats
from sw.host_protocol import header

__all__ = ["partition_session", "run_partition_session"]


def _remap(cfg, members, level, frames, drop_counters=False):
    """A group's frames (as :func:`chip_session_beats` for a chip of its size) on the full
    chip: its cores' ``tdest`` and waits mapped to ``members``, each broadcast preceded by
    a ``SELECT`` of the group."""
    from rtl.chip import broadcast_dest, config_dest

    sub_bc = broadcast_dest(cfg.replace(cores=len(members)))
    out = []
    for f in frames:
        if f[0] == "wait":
            out.append(("wait", members[f[1]], f[2]))
        elif f[0] == sub_bc:
            if drop_counters and f[1] == [header(Cmd.COUNTERS)]:
                continue
            out += [(config_dest(cfg), [header(Cmd.SELECT, members[0], level)]), (broadcast_dest(cfg), f[1])]
        else:
            out.append((members[f[0]], f[1]))
    return out


def _group_frames(cfg, members, level, phases, streams):
    """Frames of one group's ``phases`` (model run on a chip of its size, appending each
    core's expected beats to ``streams``; waits count from what the core sent before).
    Returns ``(frames, error)``: a faulty phase ends the group's frames with its
    ``LOAD``, ``CLEAR`` and ``RUN``."""
    sub = cfg.replace(cores=len(members))
    model = ChipModel(sub, "cycle")
    frames = []
    for ph in phases:
        base = [len(streams[k]) for k in members]
        try:
            _, st, _, done_at, end_at, per_core = _model_outputs(sub, model, [ph])
        except Exception as e:               # noqa: BLE001 - a faulty phase: reported, its group stopped
            fr = chip_session_beats(sub, [ph], per_core=[False])
            return frames + _remap(cfg, members, level, fr, drop_counters=True), \
                f"phase {ph.name!r}: {type(e).__name__}: {e}"
        done_at = [[d + b for d, b in zip(done_at[0], base)]]
        end_at = [[d + b for d, b in zip(end_at[0], base)]]
        frames += _remap(cfg, members, level, chip_session_beats(sub, [ph], done_at, end_at, per_core))
        for i, k in enumerate(members):
            streams[k] += st[i]
    return frames, None


def partition_session(cfg, partition: Partition, jobs, recover=None):
    """The host frames and expected per-core output streams of ``jobs`` (per group, a list
    of :class:`sim.chip_run.ChipPhase` for a chip of the group's size) on ``cfg``
    partitioned by ``partition``; ``recover[g]``: phases run in group ``g`` after it was
    stopped. Returns ``(frames, streams, errors)``: ``errors[g]`` is the model's error for
    group ``g`` (``None``: every phase ran)."""
    from rtl.chip import config_dest

    frames = [(config_dest(cfg), [header(Cmd.GROUP, a, partition.level(a))]) for a, _ in partition.groups]
    streams = [[] for _ in range(cfg.cores)]
    errors = []
    for g, phases in enumerate(jobs):
        members = partition.members(g)
        fr, err = _group_frames(cfg, members, partition.level(members[0]), phases, streams)
        frames += fr
        errors.append(err)
    for g, err in enumerate(errors):
        if err is None:
            continue
        members = partition.members(g)
        lv = partition.level(members[0])
        frames.append((config_dest(cfg), [header(Cmd.STOP, members[0], lv)]))
        if recover and recover[g]:
            fr, _ = _group_frames(cfg, members, lv, recover[g], streams)
            frames += fr
    return frames, streams, errors


def run_partition_session(cfg, partition: Partition, jobs, *, recover=None, sim: str | None = None,
                          name: str = "chip_partition") -> dict:
    """Replay :func:`partition_session` on the chip RTL (cocotb, ``sim.tb_chip``): every
    core's output beats must equal its group's model run alone. Returns ``{"errors",
    "streams", "sim_cycles", "wall_s"}``."""
    from arch.files import atomic_write
    from rtl.chip import Chip
    from sim.harness import BUILD, default_sim, run_cocotb

    frames, streams, errors = partition_session(cfg, partition, jobs, recover)
    sim = sim or default_sim()
    tag = f"{name}-{sim}-{os.getpid()}"
    vec = BUILD / "vectors" / f"{tag}.json"
    res = BUILD / "vectors" / f"{tag}-result.json"
    atomic_write(vec, json.dumps({"in": frames, "out": [[[b.data, b.last] for b in s] for s in streams]}))
    run_cocotb(Chip(cfg), "chip", "sim.tb_chip", sim=sim, config=cfg, design_key=cfg.to_json(),
               params={"vectors": str(vec), "result": str(res)})
    got = json.loads(res.read_text())
    return {"errors": errors, "streams": got["out"], "sim_cycles": got["sim_cycles"], "wall_s": got["wall_s"]}
