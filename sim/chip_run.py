"""Run sessions of programs on a chip (cores on a ring) on the chip model, the fast chip
model or the RTL (cocotb), the same way.

A :class:`ChipPhase` gives each core its microcode and host data. A phase whose programs
read host data (``hin``), or in which more than one core sends results (``hout``), runs
core by core (``RUN`` sent to one core at a time, so host timing cannot perturb the
cores: they share one host port; such a phase must not use the ring). A phase without host traffic is a chip phase:
one broadcast ``RUN`` starts every core in the same cycle, and the cores talk over the
ring. After every phase a broadcast ``COUNTERS`` reads every core's
counters. The RTL run is checked beat for beat, per core, against the model.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from arch.host import Cmd
from sim.chip_model import ChipModel, ChipRunResult
from sim.core_model import Beat
from sim.core_run import JobResult
from sw.host_protocol import clear_beats, counters_beats, decode_counters, load_beats, load_plan, run_beats

__all__ = ["ChipPhase", "run_chip_session", "chip_session_beats", "BACKENDS"]

BACKENDS = ("model", "fast", "rtl")


@dataclass
class ChipPhase:
    """One RUN of a chip session.

    ``words``: one microcode image for every core, or a list with one image per core
    (loaded at address 0 unless ``load`` is False). ``data``: per core, host beats for its
    ``hin`` instructions (then the cores run one after another and must not use the ring).
    ``run_data``: per core, host beats its ``hin`` instructions consume in a chip RUN (the
    cores start together; on the chip the host sends each core's beats as a frame of its
    own right behind the broadcast RUN, so a program takes them from one core, which
    the stream serves as fast as it asks).
    """

    words: list
    data: list | None = None
    name: str = ""
    start: int = 0
    load: bool = True
    run_data: list | None = None

    def images(self, n):
        w = self.words
        if w and isinstance(w[0], (list, tuple)):
            if len(w) != n:
                raise ValueError(f"phase {self.name!r}: {len(w)} microcode images for {n} cores")
            return [list(x) for x in w]
        return [list(w)] * n

    def host_data(self, n):
        if not self.data:
            return [[] for _ in range(n)]
        if len(self.data) != n:
            raise ValueError(f"phase {self.name!r}: host data for {len(self.data)} cores, the chip has {n}")
        return [list(d) for d in self.data]


def _host_traffic(cfg, images, start) -> tuple[int, int]:
    """Cores whose program reads host data / sends host results (sequencer dry runs)."""
    from sim.seq_model import SequencerModel

    n_in = n_out = 0
    for img in images:
        seq = SequencerModel(cfg)
        seq.load(img, 0)
        hin = hout = False
        for i in seq.iter_run(start):
            # a stream slot flagged for the ring or the scratchpad is not host traffic
            hin |= bool(i.hin and not i.rin and not getattr(i, "sin", 0))
            hout |= bool(i.hout and not i.rout and not getattr(i, "sout", 0))
        n_in += hin
        n_out += hout
    return n_in, n_out


def _per_core(cfg, ph) -> bool:
    if ph.run_data is not None:
        return False
    n = cfg.cores
    n_in, n_out = _host_traffic(cfg, ph.images(n), ph.start)
    return bool(any(ph.host_data(n))) or n_in > 0 or n_out > 1


def chip_session_beats(cfg, phases, done_at=None, end_at=None, per_core=None) -> list:
    """The host stream as ``(tdest, beats)`` frames. ``done_at[p][k]`` / ``end_at[p][k]``:
    how many beats core ``k`` has sent once phase ``p``'s done beat / counter readout is
    out; with them, a phase that runs core by core waits for each core's done beat
    (``("wait", k, n)`` entries) before starting the next core, and every phase waits for
    the previous phase's counter beats of every core, so the cores never compete for the
    output port while one of them runs. ``per_core[p]``: phase ``p`` runs core by core
    (default: decided by :func:`_per_core`)."""
    from rtl.chip import broadcast_dest

    n, bc = cfg.cores, broadcast_dest(cfg)
    frames = []
    loaded = [None] * n
    for p, ph in enumerate(phases):
        imgs = ph.images(n)
        data = ph.host_data(n)
        if ph.load:             # the LOADs of the cores whose image changed (as the sessions count them)
            frames += [(bc if k is None else k, load_beats(cfg, w, a)) for k, a, w in load_plan(cfg, imgs, loaded)]
            loaded = imgs
        frames.append((bc, clear_beats()))
        if (per_core[p] if per_core is not None else _per_core(cfg, ph)):
            for k in range(n):
                frames.append((k, run_beats(ph.start, data[k])))
                if done_at is not None:
                    frames.append(("wait", k, done_at[p][k]))
        else:
            more = [(k, [int(b) for b in d]) for k, d in enumerate(ph.run_data or ()) if len(d)]
            # a chip RUN's host beats follow its broadcast RUN at once (no idle beat)
            frames.append((bc, run_beats(ph.start), True) if more else (bc, run_beats(ph.start)))
            frames += more
        frames.append((bc, counters_beats()))
        if end_at is not None:
            frames += [("wait", k, end_at[p][k]) for k in range(n)]
    return frames


def _model_outputs(cfg, model: ChipModel, phases):
    """Per phase: ChipRunResult (or per-core results); and the per-core expected streams."""
    n = cfg.cores
    hw = cfg.host_width
    per = -(-64 // hw)
    streams = [[] for _ in range(n)]
    runs = []
    #: per phase, per core: beats sent once the phase's done beat is out
    done_at = []
    end_at = []
    per_core = [_per_core(cfg, ph) for ph in phases]
    for p, ph in enumerate(phases):
        imgs = ph.images(n)
        data = ph.host_data(n)
        if ph.load:
            for k in range(n):
                model.load(imgs[k], 0, core=k)
        model.clear_counters()
        if per_core[p]:
            try:
                res = [model.cores[k].run(ph.start, data[k], ring_in=()) for k in range(n)]
            except ValueError as e:
                raise ValueError(f"phase {ph.name!r} uses the host streams, so it runs core by core and "
                                 f"cannot use the ring: {e}") from None
            if any(r.ring_out for r in res):
                raise ValueError(f"phase {ph.name!r} uses the host streams and sends on the ring: a phase "
                                 f"with host traffic runs core by core, so it cannot use the ring")
            cyc = max(r.cycles for r in res)
            rr = ChipRunResult(res, cyc, {})
        else:
            rr = model.run(ph.start, host_in=ph.run_data)
        runs.append(rr)
        for k in range(n):
            m = model.cores[k]
            streams[k] += rr.cores[k].out
            streams[k].append(Beat(Cmd.RUN | (m._last_pc << 4), True))     # the done beat
        done_at.append([len(st) for st in streams])
        for k in range(n):
            streams[k] += model.cores[k].counter_beats()
        end_at.append([len(st) for st in streams])
    return runs, streams, per, done_at, end_at, per_core


def run_chip_session(cfg, phases, *, backend: str = "model", sim: str | None = None,
                     name: str = "chip", dram_read=None) -> list[list[JobResult]]:
    """Run ``phases`` on a chip; per phase, per core, a :class:`~sim.core_run.JobResult`
    (``hout`` beats, done beat, counters of that phase). ``backend``: ``"model"`` (the
    per-cycle chip model), ``"fast"`` (the fast chip model) or ``"rtl"`` (cocotb, checked
    against the per-cycle chip model; with DRAM an ``AxiRam`` per core, ``sim.tb_chip``).

    ``dram_read`` (a chip with DRAM): per core a list of ``(beat address, beats)``; each
    result's ``info["dram"]`` is then, per core, the DRAM beats of those ranges after the
    session (integers, lane 0 in the low bits): the RTL's ``AxiRam`` contents, or the
    model's DRAM."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    phases = list(phases)
    model = ChipModel(cfg, "fast" if backend == "fast" else "cycle")
    runs, streams, per, done_at, end_at, per_core = _model_outputs(cfg, model, phases)
    info: dict = {}
    out = streams
    if dram_read is not None:
        info["dram"] = [[model.core(k).dram.read(a, n) for a, n in rd] for k, rd in enumerate(dram_read)]
    if backend == "rtl":
        from rtl.chip import Chip
        from arch.files import atomic_write
        from sim.harness import BUILD, default_sim, run_cocotb

        sim = sim or default_sim()
        tag = f"{name}-{sim}-{os.getpid()}"
        vec = BUILD / "vectors" / f"{tag}.json"
        res = BUILD / "vectors" / f"{tag}-result.json"
        bb = cfg.spad_beat_bytes
        atomic_write(vec, json.dumps({"in": chip_session_beats(cfg, phases, done_at, end_at, per_core),
                                      "out": [[[b.data, b.last] for b in s] for s in streams],
                                      "dram_read": [[[a * bb, n * bb] for a, n in rd] for rd in dram_read or ()]}))
        run_cocotb(Chip(cfg), "chip", "sim.tb_chip", sim=sim, config=cfg, design_key=cfg.to_json(),
                   params={"vectors": str(vec), "result": str(res)})
        got = json.loads(res.read_text())
        out = [[Beat(int(d), bool(last)) for d, last in s] for s in got["out"]]
        info = {"sim_cycles": got["sim_cycles"], "wall_s": got["wall_s"]}
        if dram_read is not None:
            info["dram"] = [[_beats(bytes.fromhex(h), bb) for h in rd] for rd in got["dram"]]
        backend = f"rtl-{sim}"
    from arch.counters import counter_names

    n_ctr = per * len(counter_names(cfg))
    return split_session_output(runs, out, lambda k: cfg, lambda k: n_ctr, backend, info)


def _beats(raw: bytes, bb: int) -> list:
    """Bytes of DRAM as beats of ``bb`` bytes (little-endian, lane 0 in the low bits)."""
    return [int.from_bytes(raw[i:i + bb], "little") for i in range(0, len(raw), bb)]


def split_session_output(runs, out, cfg_of, n_counters_of, backend: str, info: dict) -> list:
    """Cut each core's output beats of a replayed session (``out[k]``) into one
    :class:`JobResult` per run and core: the run's data beats (as many as the model's
    run ``runs[i]`` sent), the done beat, then ``n_counters_of(k)`` counter beats decoded
    with ``cfg_of(k)``."""
    results = []
    pos = [0] * len(out)
    for rr in runs:
        row = []
        for k in range(len(out)):
            nd, n_ctr = len(rr.cores[k].out), n_counters_of(k)
            chunk = out[k][pos[k]:pos[k] + nd + 1 + n_ctr]
            pos[k] += nd + 1 + n_ctr
            row.append(JobResult(data=chunk[:nd], done=chunk[nd],
                                 counters=decode_counters(cfg_of(k), [(b.data, b.last) for b in chunk[nd + 1:]]),
                                 backend=backend, info=dict(info, ring_out=rr.cores[k].ring_out,
                                                            chip_cycles=rr.cycles)))
        results.append(row)
    return results
