"""Run a complete core program on the core model or on the RTL (cocotb), the same way.

A *job* is what a host does with a core: ``CLEAR``, ``LOAD`` the microcode, ``RUN`` it
with the input data beats its ``hin`` instructions consume, read the ``COUNTERS``. Both
backends take the same job and return a :class:`JobResult` (the ``hout`` data beats, the
done beat, the decoded counters). ``run_job(..., backend="rtl")`` runs the RTL under
cocotb (Icarus or Verilator) with cocotbext-axi driving the streams, and checks every
output beat against the core model; with ``stream="replay"`` the beats come from and go
into memories of a harness around the core instead (:mod:`sim.replay_run`: no Python
per cycle, the same beats and counters, several times faster under Verilator).
``backend="fast"`` runs the cycle-exact fast model (:class:`sim.fast_model.FastModel`:
same beats, same counters, thousands of times faster than the RTL); ``reference="fast"``
makes an RTL run check its beats against the fast model instead of the core model (for
programs too long for the core model).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from sim.core_model import Beat, CoreModel
from sim.replay_run import STREAMS
from sw.host_protocol import clear_beats, counters_beats, decode_counters, load_beats, run_beats
from arch.errors import InputError

__all__ = ["JobResult", "job_beats", "run_job", "split_job", "Phase", "session_beats", "run_session", "run_kernel",
           "kernel_phases", "BACKENDS"]


@dataclass
class JobResult:
    data: list            #: hout beats (Beat) of the run
    done: Beat            #: the done beat
    counters: dict        #: decoded counters of the run
    backend: str
    info: dict = field(default_factory=dict)


def job_beats(cfg, words, data=(), start_pc: int = 0) -> list[int]:
    return clear_beats() + load_beats(cfg, words) + run_beats(start_pc, data) + counters_beats()


def check_host_data(cfg, words, data, start_pc: int = 0, where: str = "--data") -> None:
    """Raise :class:`InputError` unless ``data`` holds exactly the host input beats the
    program's RUN from ``start_pc`` reads with ``hin`` (a dry run of its sequencer)."""
    m = CoreModel(cfg)
    m.seq.load(list(words), 0)
    need = m.hin_beats(start_pc)
    if need != len(data):
        raise InputError(f"the program reads {need} host input beat(s) with hin; {where} gives {len(data)}"
                         + ("" if data else " (give them with --data FILE)"))


def split_job(cfg, out, backend, info=None) -> JobResult:
    per = -(-64 // cfg.host_width)
    from arch.counters import counter_names

    n_ctr = per * len(counter_names(cfg))
    ctr_beats, rest = out[-n_ctr:], out[:-n_ctr]
    return JobResult(data=rest[:-1], done=rest[-1],
                     counters=decode_counters(cfg, [(b.data, b.last) for b in ctr_beats]),
                     backend=backend, info=info or {})


BACKENDS = ("model", "fast", "rtl")


def _check_stream(stream: str) -> None:
    if stream not in STREAMS:
        raise InputError(f"unknown stream {stream!r}; allowed: {', '.join(STREAMS)}")


def _reference(cfg, backend: str, reference: str):
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    if reference not in ("model", "fast"):
        raise InputError(f"unknown reference {reference!r}; allowed: model, fast")
    if backend == "fast" or (backend == "rtl" and reference == "fast"):
        from sim.fast_model import FastModel

        return FastModel(cfg)
    return CoreModel(cfg)


def run_job(cfg, words, data=(), *, backend: str = "model", sim: str | None = None, name: str = "job",
            pause_in: float = 0.0, pause_out: float = 0.0, seed: int = 0, reference: str = "model",
            platform=None, stream: str = "axi") -> JobResult:
    """Run microcode ``words`` (ints) with host input ``data`` on ``backend``
    (``"model"``, ``"fast"`` or ``"rtl"``; ``platform``: the RTL elaborated for it, its
    vendor primitives simulated with :func:`sim.harness.primitive_models`).

    ``stream`` (RTL): ``"axi"``, cocotbext-axi drives the host streams (random pauses;
    with pauses the counters are not compared), or ``"replay"``, the replay harness
    (:func:`sim.replay_run.run_replay`: no per-cycle Python, LFSR pauses; with pauses
    only the ``cycles`` and ``stall_cycles`` counters are not compared)."""
    beats = job_beats(cfg, words, data)
    model = _reference(cfg, backend, reference)
    expected = model.process(beats)
    if backend in ("model", "fast"):
        return split_job(cfg, expected, backend)
    _check_stream(stream)
    if stream == "replay":
        from sim.harness import default_sim
        from sim.replay_run import counter_timing_beats, run_replay

        sim = sim or default_sim()
        n_ctr = -(-64 // cfg.host_width) * len(model.names)
        relaxed = counter_timing_beats(cfg, len(expected) - n_ctr) if (pause_in or pause_out) else ()
        out, info = run_replay(cfg, beats, expected, sim=sim, name=name, pause_in=pause_in,
                               pause_out=pause_out, seed=seed, relaxed=relaxed, platform=platform)
        return split_job(cfg, out, f"rtl-{sim}", info=info)
    from rtl.core import Core
    from arch.files import atomic_write
    from sim.harness import BUILD, default_sim, run_cocotb

    sim = sim or default_sim()
    tag = f"{name}-{sim}-{os.getpid()}"
    vec = BUILD / "vectors" / f"{tag}.json"
    res = BUILD / "vectors" / f"{tag}-result.json"
    per = -(-64 // cfg.host_width)
    n_ctr = per * len(model.names)
    atomic_write(vec, json.dumps({"in": beats, "out": [[b.data, b.last] for b in expected]}))
    params = {"vectors": str(vec), "result": str(res), "pause_in": pause_in, "pause_out": pause_out,
              "seed": seed, "relaxed_tail": n_ctr if (pause_in or pause_out) else 0}
    ran = run_cocotb(Core(cfg), "core", "sim.tb_core", sim=sim, config=cfg, params=params,
                     design_key=cfg.to_json(), platform=platform)
    got = json.loads(res.read_text())
    out = [Beat(int(d), bool(last)) for d, last in got["out"]]
    return split_job(cfg, out, f"rtl-{sim}", info={"sim_cycles": got["sim_cycles"], "wall_s": got["wall_s"],
                                                   "convert_s": ran["convert_s"], "build_s": ran["build_s"],
                                                   "stream": "axi"})


@dataclass
class Phase:
    """One RUN of a session: its microcode image (loaded at address 0), input data, the
    pc the RUN starts at (``start``), and whether to LOAD the image first (``load=False``:
    the microcode is already there, e.g. several programs resident at different origins)."""

    words: list
    data: list = field(default_factory=list)
    name: str = ""
    start: int = 0
    load: bool = True


def session_beats(cfg, phases) -> list[int]:
    """Host stream for a session: for each phase, LOAD its microcode at address 0
    (unless ``load`` is False; loading is not part of RUN cycles), CLEAR the counters,
    RUN it from ``start`` with its data, read the COUNTERS."""
    beats = []
    for ph in phases:
        if ph.load:
            beats += load_beats(cfg, ph.words, 0)
        beats += clear_beats() + run_beats(ph.start, ph.data) + counters_beats()
    return beats


def run_session(cfg, phases, *, backend: str = "model", sim: str | None = None, name: str = "session",
                pause_in: float = 0.0, pause_out: float = 0.0, seed: int = 0,
                reference: str = "model", stream: str = "axi") -> list[JobResult]:
    """Run several programs back to back on one core (PE memories keep their contents
    between phases); returns one :class:`JobResult` per phase with that phase's counters.
    ``backend``: ``"model"``, ``"fast"`` or ``"rtl"`` (checked against ``reference``).
    ``stream`` (RTL): ``"axi"`` (cocotbext-axi, no pauses: every counter is compared) or
    ``"replay"`` (:func:`sim.replay_run.run_replay`; with pauses every beat but the
    ``cycles`` and ``stall_cycles`` counters of each phase is compared)."""
    phases = list(phases)
    beats = session_beats(cfg, phases)
    model = _reference(cfg, backend, reference)
    expected = model.process(beats)
    info = {}
    per = -(-64 // cfg.host_width)
    n_ctr = per * len(model.names)
    if backend == "rtl":
        _check_stream(stream)
    if backend == "rtl" and stream == "replay":
        from sim.harness import default_sim
        from sim.replay_run import counter_timing_beats, run_replay

        sim = sim or default_sim()
        relaxed, pos = [], 0
        for i in range(len(phases)):
            pos += model.run_data_beats[i] + 1
            relaxed += counter_timing_beats(cfg, pos) if (pause_in or pause_out) else []
            pos += n_ctr
        out, info = run_replay(cfg, beats, expected, sim=sim, name=name, pause_in=pause_in,
                               pause_out=pause_out, seed=seed, relaxed=relaxed)
        backend = f"rtl-{sim}"
    elif backend == "rtl":
        from rtl.core import Core
        from arch.files import atomic_write
        from sim.harness import BUILD, default_sim, run_cocotb

        sim = sim or default_sim()
        tag = f"{name}-{sim}-{os.getpid()}"
        vec = BUILD / "vectors" / f"{tag}.json"
        res = BUILD / "vectors" / f"{tag}-result.json"
        atomic_write(vec, json.dumps({"in": beats, "out": [[b.data, b.last] for b in expected]}))
        if pause_in or pause_out:
            raise InputError("run_session compares counters exactly: no stream pauses")
        params = {"vectors": str(vec), "result": str(res), "seed": seed}
        ran = run_cocotb(Core(cfg), "core", "sim.tb_core", sim=sim, config=cfg, params=params,
                         design_key=cfg.to_json())
        got = json.loads(res.read_text())
        out = [Beat(int(d), bool(last)) for d, last in got["out"]]
        info = {"sim_cycles": got["sim_cycles"], "wall_s": got["wall_s"], "convert_s": ran["convert_s"],
                "build_s": ran["build_s"], "stream": "axi"}
        backend = f"rtl-{sim}"
    else:
        out = expected
    # split: per phase, its hout beats + done beat + counter beats
    results, pos = [], 0
    for i, ph in enumerate(phases):
        # the done beat is the first beat with tlast whose low nibble is RUN (2) after
        # this phase's data; data beats are counted by the model's expectation
        n_data = model.run_data_beats[i]
        chunk = out[pos:pos + n_data + 1 + n_ctr]
        r = split_job(cfg, chunk, backend, info)
        results.append(r)
        pos += n_data + 1 + n_ctr
    return results


def run_kernel(cfg, loads, kernel, unloads, *, backend: str = "model", sim: str | None = None,
               name: str = "kernel", reference: str = "model", stream: str = "axi", pause_in: float = 0.0,
               pause_out: float = 0.0, seed: int = 0):
    """Load operands, run ``kernel`` as its own phase, unload results (one session).

    ``loads``: list of ``(Region, local)`` with ``local`` ``(nr, nr, L)`` bit patterns
    (``L`` words per PE at the region). ``kernel``: callable ``kernel(builder)`` emitting
    the kernel (the HALT is added here), or a list of such callables (one phase each).
    ``unloads``: list of ``(Region, n_words)``. Returns ``(outputs, kernel_results)``:
    the unloaded ``(nr, nr, n_words)`` arrays and the :class:`sim.core_run.JobResult` of
    each kernel phase (its counters are the kernel's alone). ``backend``/``sim``/
    ``reference``/``stream``/``pause_*``/``seed`` are those of
    :func:`sim.core_run.run_session` (an RTL run checks every output beat and counter
    against the ``reference`` model). Load and unload programs
    are split into as many phases as the microcode needs.
    """
    from sw.transfer import decode_unload

    nr = cfg.nr
    phases, k0, u0 = kernel_phases(cfg, loads, kernel, unloads)
    n_kernels = u0 - k0
    kw = {"reference": reference} if reference != "model" else {}
    if stream != "axi":
        kw["stream"] = stream
    if pause_in or pause_out or seed:
        kw.update(pause_in=pause_in, pause_out=pause_out, seed=seed)
    res = run_session(cfg, phases, backend=backend, sim=sim, name=name, **kw)
    data = [beat for r in res[u0:] for beat in r.data]
    outs, pos = [], 0
    for reg_, nw in unloads:
        outs.append(decode_unload(cfg, data[pos:pos + nr * nw], nw))
        pos += nr * nw
    return outs, res[k0:k0 + n_kernels]


def kernel_phases(cfg, loads, kernel, unloads):
    """The session :func:`run_kernel` runs: ``(phases, k0, u0)``, the phases and the
    indices of the first kernel phase and of the first unload phase."""
    from sw.asm import Builder
    from sw.transfer import emit_load, emit_unload, load_beats_for

    nr = cfg.nr
    budget = cfg.ucode_depth - 1                      # room for the HALT

    def chunks(items, per):
        """Split transfer items so that each phase's program fits the microcode."""
        out, cur, size = [], [], 0
        for it in items:
            if cur and size + per > budget:
                out.append(cur)
                cur, size = [], 0
            cur.append(it)
            size += per
        return out + ([cur] if cur else [])

    phases = []
    for grp in chunks(list(loads), 1 + 3 * nr):
        bl = Builder(cfg)
        data = []
        for reg_, local in grp:
            emit_load(bl, cfg, reg_.bank, reg_.base, local.shape[2])
            data += load_beats_for(cfg, local)
        bl.halt()
        phases.append(Phase(bl.build().words(), data, "load"))
    kernels = kernel if isinstance(kernel, (list, tuple)) else [kernel]
    k0 = len(phases)
    for i, kf in enumerate(kernels):
        bk = Builder(cfg)
        kf(bk)
        bk.halt()
        phases.append(Phase(bk.build().words(), [], f"kernel{i}"))
    u0 = len(phases)
    for grp in chunks(list(unloads), 3 + 3 * nr):
        bu = Builder(cfg)
        for i, (reg_, nw) in enumerate(grp):
            emit_unload(bu, cfg, reg_.bank, reg_.base, nw, last=i == len(grp) - 1)
        bu.halt()
        phases.append(Phase(bu.build().words(), [], "unload"))
    return phases, k0, u0

