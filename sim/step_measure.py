"""One training step of a network on a chip configuration, measured on the fast chip
engine: compile, load He-uniform weights, run the step (CP: until its pipeline is full,
then the next step), optionally check the weights against the golden trainer after every
step, and turn the measured step's counters into a :class:`sim.power.Report`.

Shared by ``caterpillar paper`` (:mod:`sim.paper`) and the design-space search
(:mod:`dse`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.power import report_from_counters

__all__ = ["METHODS", "MAPPING_OPTIONS", "StepMeasure", "compile_method", "mapping_options", "measure_step", "phase_cycles", "ucode_words_needed"]

#: training methods of the chip compilers: SGD, minibatch GD, CP (minibatch CP with batch > 1)
METHODS = ("sgd", "mbgd", "cp")


@dataclass
class StepMeasure:
    """A measured step: the compiled program, the step's result, its counters summed over
    the cores (``cycles`` = the step's cycles, host turnaround included), the microcode
    words per core, the network's FLOPs per step, the report, the steps run, and the data
    movement of the step."""

    tp: object
    result: object
    counters: dict
    ucode_words: int
    flops: int
    report: object
    steps_run: int
    #: the measured step's data movement (:meth:`sim.movement.MovementSession.movement`;
    #: ``None`` unless ``measure_step`` ran on such a session)
    movement: dict | None = None


#: the mapping choices each method's compiler takes (the rest do not apply to it)
MAPPING_OPTIONS = {"sgd": ("out_map", "backward", "softmax", "overlap", "out_reduce"), "mbgd": ("out_map", "overlap"),
                   "cp": ("backward", "softmax", "overlap")}


def mapping_options(method: str, batch: int, options: dict) -> dict:
    """The mapping ``options`` that apply to ``method`` with minibatch ``batch``; a name
    no method takes (:data:`MAPPING_OPTIONS`) is a ValueError."""
    known = {k for names in MAPPING_OPTIONS.values() for k in names}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown mapping option {unknown[0]!r} (known: {', '.join(sorted(known))})")
    keep = MAPPING_OPTIONS[method] if not (method == "cp" and batch > 1) else ()
    return {k: v for k, v in options.items() if k in keep}


def compile_method(method: str, cfg, mlp, **options):
    """Compile ``mlp`` for ``method`` (:data:`METHODS`) on the chip ``cfg`` with its
    mapping ``options`` (:data:`MAPPING_OPTIONS`); raises
    :class:`sw.train.TrainCompileError` when it does not fit."""
    from sw.train_chip import compile_chip_sgd, overlap_options
    from sw.train_chip_mb import compile_chip_mbgd
    from sw.train_cp import compile_chip_cp

    opts = mapping_options(method, mlp.batch, options)
    if "overlap" in opts:                            # every collective beside compute, or none
        on = opts.pop("overlap")
        opts.update({"chain_overlap": on} if method == "cp" else overlap_options(on))
    return {"sgd": compile_chip_sgd, "cp": compile_chip_cp, "mbgd": compile_chip_mbgd}[method](cfg, mlp, **opts)


def _golden(method: str, cfg, mlp, tp, W0):
    from sw.golden_train_chip import GoldenChipSGD
    from sw.golden_train_chip_mb import GoldenChipMBGD
    from sw.golden_train_cp import GoldenChipCP
    from sw.golden_train_cp_mb import GoldenChipMBCP

    if method == "sgd":
        return GoldenChipSGD.for_program(tp, W0)
    if method == "cp":
        return (GoldenChipMBCP(cfg, mlp, W0, groups=tp.groups) if mlp.batch > 1
                else GoldenChipCP.for_program(tp, W0))
    return GoldenChipMBGD(cfg, mlp, W0)


def ucode_words_needed(tp) -> int:
    """Words per core of the largest microcode image a compiled training program loads."""
    if hasattr(tp, "images"):
        return max(len(w) for img in tp.images for w in img)
    return max(len(tp.image[k]) for k in range(tp.cfg.cores))


def _inputs(mlp, rng):
    b = mlp.batch
    if b > 1:
        return rng.uniform(0, 1, (mlp.n_in, b)), rng.integers(0, mlp.n_out, b)
    return rng.uniform(0, 1, mlp.n_in), int(rng.integers(mlp.n_out))


def _check_weights(tp, sess, gold, label):
    got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
    bad = [l for l, (a, w) in enumerate(zip(got, want)) if not np.array_equal(a, w)]
    if bad:
        raise AssertionError(f"{label}: weights of layers {bad} differ from {type(gold).__name__}'s")


def _sum_counters(result) -> dict:
    ctr: dict = {}
    for c in result.core_counters:
        for k, v in c.items():
            ctr[k] = ctr.get(k, 0) + int(v)
    return ctr


def measure_step(cfg, mlp, method: str, *, weight_seed: int = 0, input_seed: int = 1, golden: bool = True,
                 tp=None, label: str = "step", tech=None, ucode_from_program: bool = True,
                 options: dict | None = None, session=None) -> StepMeasure:
    """Compile (unless ``tp`` is given) and run one step of ``mlp`` with ``method`` on
    the chip ``cfg``; ``golden``: check the weights bit for bit after every step (raises
    ``AssertionError`` on a difference). ``ucode_from_program``: size the microcode store
    (its area, leakage and fetch energy) from the program's largest image, else from
    ``cfg.ucode_depth``. ``options``: the compiler's mapping choices
    (:func:`compile_method`). ``session``: the chip session to run on (default a new
    fast :class:`sim.sessions.ChipSession`; one with ``begin_step``, e.g.
    :class:`sim.movement.MovementSession`, is told where each step begins). Raises
    ``TrainCompileError`` for a network that does not fit."""
    from sim.sessions import ChipSession
    from sw.train import init_weights

    tp = tp if tp is not None else compile_method(method, cfg, mlp, **(options or {}))
    sess = session if session is not None else ChipSession(cfg, "fast")
    W0 = init_weights(mlp, cfg.fmt, weight_seed)
    tp.init(sess, W0)
    gold = _golden(method, cfg, mlp, tp, W0) if golden else None
    rng = np.random.default_rng(input_seed)
    lat = tp.latency_steps() if method == "cp" else 0
    steps = 2 * lat + 1
    xs = [_inputs(mlp, rng) for _ in range(steps)]
    movement = None
    for s in range(steps):
        if hasattr(sess, "begin_step"):
            sess.begin_step()
        x = xs[s][0]
        t = xs[s - lat][1] if s >= lat else None
        r = tp.run_step(sess, x, t)
        if hasattr(sess, "movement"):      # before the golden check's read-back RUNs
            movement = sess.movement(r.host_cycles)
        if gold is not None:
            gold.step(x, t)
            _check_weights(tp, sess, gold, f"{label}, step {s + 1}")
    ctr = _sum_counters(r)
    ctr["cycles"] = r.cycles + r.host_cycles
    words = ucode_words_needed(tp)
    flops = mlp.flops_per_step()
    kw = {"tech": tech} if tech is not None else {}
    rep = report_from_counters(cfg, ctr, flops=flops, n_cores=cfg.cores,
                               ucode_words=words if ucode_from_program else None, **kw)
    return StepMeasure(tp, r, ctr, words, flops, rep, steps, movement)


#: the phase of a step an operation kind belongs to (:meth:`breakdown` rows' kind)
_PHASE_OF_KIND = {"ring": "collectives", "nop": "overhead", "halt": "overhead", "jump": "overhead"}
_MEMORY_KINDS = ("spad", "page", "transpose")


def phase_cycles(tp, host_cycles: int = 0, load_cycles: int = 0) -> dict:
    """The step's cycles by phase, from the compiler's breakdown (core 0's operations):
    ``compute`` (GEMV, GEMM, rank-1 and the elementwise kernels), ``collectives`` (ring),
    ``memory`` (scratchpad paging, transposes), ``overhead`` (gaps, halts, the JUMPs of
    aligned and resident programs), ``host`` and
    ``microcode`` (the host's LOADs of microcode images between RUNs, ``load_cycles``)."""
    out = {"compute": 0, "collectives": 0, "memory": 0, "overhead": 0, "host": int(host_cycles),
           "microcode": int(load_cycles)}
    for _op, kind, cycles in tp.breakdown():
        phase = _PHASE_OF_KIND.get(kind) or ("memory" if kind.startswith(_MEMORY_KINDS) else "compute")
        out[phase] += int(cycles)
    return out
