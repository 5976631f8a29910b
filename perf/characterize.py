"""Offline characterization: every operation class the compilers emit, run over a grid of
shapes on each core kind, on the fast engines (docs/perf.md).

A *core kind* is an :class:`~arch.config.ArchConfig` (its ``nr``, number format, SRAM,
scratchpad, latencies; ``cores`` is the ring size the chip-level classes default to). An
*operation class* (:data:`CLASSES`) is one kernel or collective generator of :mod:`sw`:

* single-core classes (DRAM copies included, on a kind with DRAM) run as one RUN phase of :func:`sim.core_run.run_kernel` on the fast
  core model (``backend="fast"``), exactly as ``benchmarks/bench_kernels.py`` measures
  them (there on the RTL): the phase's counters are the kernel's alone;
* ring classes run on the fast chip engine (:class:`sim.chip_model.ChipModel`,
  ``engine="fast"``) as ``benchmarks/bench_ring.py`` and ``tests/test_ring_mat.py`` run
  them: one program per core (the collective and a HALT), all started together.

Each point stores the RUN's cycles, its counters (summed over the PEs: ``fma``,
``row_hops``, ``col_hops``; and over the cores for ring classes) and the energy per
category of :func:`sim.power.report_from_counters` (the project's one power model and
convention). Timing and counters do not depend on the operand values (no counter sees
data), so the operands are left at zero and the results are deterministic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from arch.errors import UsageError
from sim.power import report_from_counters, scope_note
from sw.layout import local_len

__all__ = ["OpClass", "CLASSES", "CORE_CLASSES", "RING_CLASSES", "GRIDS", "measure", "characterize",
           "parse_classes", "FORMAT", "aggregate_counters", "point_grid"]

#: the ``format`` tag of a characterization document
FORMAT = "caterpillar-characterization/1"
#: grid sizes: ``quick`` for tests and a first look, ``full`` for the model's fit
GRIDS = ("quick", "full")


@dataclass(frozen=True)
class OpClass:
    """One operation class: how to build it for a shape, whether a shape fits a kind, its
    useful work, and its grid and held-out shapes.

    Attributes
    ----------
    name : str
        Class name (``gemv``, ``ring_all_gather``, ...).
    scope : str
        ``"core"`` (one core, :func:`sim.core_run.run_kernel`) or ``"ring"`` (the fast
        chip engine; shape dimension ``cores`` is the ring size).
    dims : tuple of str
        Shape dimensions.
    unit : str
        What :attr:`work` counts (``MAC``, ``word``, ``beat``).
    what : str
        One line: the generator and its operands.
    """

    name: str
    scope: str
    dims: tuple
    unit: str
    what: str
    build: Callable = field(repr=False, compare=False)     #: (cfg, shape) -> kernel callable or core images
    fits: Callable = field(repr=False, compare=False)      #: (cfg, shape) -> bool
    work: Callable = field(repr=False, compare=False)      #: (cfg, shape) -> int
    grid: Callable = field(repr=False, compare=False)      #: (cfg, quick) -> list of shape dicts
    holdout: Callable = field(repr=False, compare=False)   #: (cfg, quick) -> list of shape dicts
    schedule: Callable | None = field(default=None, repr=False, compare=False)   #: (cfg, shape) -> dict


# -- shapes --------------------------------------------------------------------------------
def _dims(cfg, quick: bool) -> list[int]:
    """Matrix dimensions of the grid: multiples of ``nr``, some with a local length
    (``7``, ``29``) the compiler's blockings do not divide (a partial last block)."""
    return [cfg.nr * k for k in ((2, 4, 7, 16) if quick else (2, 4, 7, 8, 16, 29, 32, 64))]


def _odd_dims(cfg, quick: bool) -> list[int]:
    """Held-out matrix dimensions: between the grid's, mostly not multiples of ``nr``."""
    ks = ((3, -1), (5, 1), (11, 3)) if quick else ((3, -1), (5, 1), (11, 3), (23, -2), (45, 1))
    return [max(1, cfg.nr * k + d) for k, d in ks]


def _batches(cfg, quick: bool) -> list[int]:
    nr = cfg.nr
    vals = (2, nr, 2 * nr) if quick else (2, max(1, nr // 2), nr, 2 * nr, 4 * nr)
    return sorted(set(vals))


def _odd_batches(cfg, quick: bool) -> list[int]:
    nr = cfg.nr
    return sorted({3, nr + 1} if quick else {3, nr + 1, 3 * nr - 1})


VEC = (1, 4, 16, 64, 256, 1024)
VEC_QUICK = (1, 8, 32)
VEC_ODD = (3, 10, 45, 150, 700)
VEC_ODD_QUICK = (3, 20)
RING_M = (1, 4, 16, 64, 128)
RING_M_QUICK = (1, 7, 16, 24)
RING_M_ODD = (3, 10, 45, 100)
RING_M_ODD_QUICK = (3, 20)
MAT_K = (1, 2, 8, 32)
MAT_K_QUICK = (1, 4, 8)
MAT_K_ODD = (3, 5, 20)
MAT_K_ODD_QUICK = (3, 10)


def _pairs(a, b):
    return [{"m": x, "n": y} for x in a for y in b]


def _mat_grid(cfg, quick):
    d = _dims(cfg, quick)
    return _pairs(d, d)


def _mat_holdout(cfg, quick):
    d = _odd_dims(cfg, quick)
    return _pairs(d, d)


def _gemm_grid(cfg, quick):
    d = [cfg.nr * k for k in ((2, 7, 16) if quick else (2, 7, 32))]
    return [{"m": m, "n": n, "b": b} for m in d for n in d for b in _batches(cfg, quick)]


def _gemm_holdout(cfg, quick):
    d = _odd_dims(cfg, quick)
    pairs = [(d[0], d[1]), (d[1], d[2]), (d[2], d[0])] + ([] if quick else [(d[3], d[1])])
    return [{"m": m, "n": n, "b": b} for m, n in pairs for b in _odd_batches(cfg, quick)]


def _tr_grid(cfg, quick):
    return [{"r": r, "c": c} for r in _dims(cfg, quick) for c in _batches(cfg, quick)]


def _tr_holdout(cfg, quick):
    return [{"r": r, "c": c} for r in _odd_dims(cfg, quick) for c in _odd_batches(cfg, quick)]


def _vec_grid(cfg, quick):
    return [{"n": n} for n in (VEC_QUICK if quick else VEC)]


def _vec_holdout(cfg, quick):
    return [{"n": n} for n in (VEC_ODD_QUICK if quick else VEC_ODD)]


def _ring_cores(cfg, quick, odd):
    """Ring sizes (a chip has an even number of cores): the grid's, or the held-out ones
    (between and beyond the grid's)."""
    if odd:
        return [6] + ([] if quick else [12])
    return [2, 4, 8]


def _ring_grid(lengths, odd_lengths):
    def grid(cfg, quick):
        return [{"cores": c, "m": m} for c in _ring_cores(cfg, quick, False)
                for m in (lengths[1] if quick else lengths[0])]

    def holdout(cfg, quick):
        return [{"cores": c, "m": m} for c in _ring_cores(cfg, quick, True)
                for m in (odd_lengths[1] if quick else odd_lengths[0])]

    return grid, holdout


# -- single-core classes -------------------------------------------------------------------
def _L(cfg, k):
    return local_len(k, cfg.nr)


def _fits_words(cfg, a: int, b: int) -> bool:
    return a <= cfg.mem_a_words and b <= cfg.mem_b_words


def _gemv_layout(cfg, s, trans):
    mp, np_ = _L(cfg, s["m"]), _L(cfg, s["n"])
    xin, yout = (mp, np_) if trans else (np_, mp)
    return mp, np_, xin, yout


def _gemv_fits(trans):
    def fits(cfg, s):
        mp, np_, xin, yout = _gemv_layout(cfg, s, trans)
        return _fits_words(cfg, mp * np_, 2 * xin + 1 + yout)
    return fits


def _gemv_build(trans):
    def build(cfg, s):
        from sw.collectives import Region
        from sw.kernels import emit_gemv

        mp, np_, xin, yout = _gemv_layout(cfg, s, trans)
        W, x, xc, y = Region("a", 0), Region("b", 0), Region("b", xin), Region("b", 2 * xin + 1)
        return lambda bb: emit_gemv(bb, cfg, s["m"], s["n"], W, x, y, trans=trans, x_layout="diag", x_copy=xc)
    return build


def _gemv_sched(trans):
    def sched(cfg, s):
        from sw.kernels import gemv_cost

        c = gemv_cost(cfg, s["m"], s["n"], trans=trans)
        return {"B": c["B"], "L": c["L"]}
    return sched


def _rank1_fits(cfg, s):
    mp, np_ = _L(cfg, s["m"]), _L(cfg, s["n"])
    return _fits_words(cfg, mp * np_, mp + np_ + 1)


def _rank1_build(cfg, s):
    from sw.collectives import Region
    from sw.kernels import Scalar, emit_rank1

    mp, np_ = _L(cfg, s["m"]), _L(cfg, s["n"])
    W, u, v = Region("a", 0), Region("b", 0), Region("b", mp)
    return lambda bb: emit_rank1(bb, cfg, s["m"], s["n"], W, u, v, alpha=Scalar("b", mp + np_), u_layout="diag",
                                 v_layout="cols")


def _fused_fits(cfg, s):
    mp, np_ = _L(cfg, s["m"]), _L(cfg, s["n"])
    return _fits_words(cfg, mp * np_, mp + 2 + 2 * np_)


def _fused_build(cfg, s):
    from sw.collectives import Region
    from sw.kernels import Scalar, emit_gemv_t_rank1

    mp, np_ = _L(cfg, s["m"]), _L(cfg, s["n"])
    W, d, a, y = Region("a", 0), Region("b", 0), Region("b", mp + 1), Region("b", mp + 1 + np_)
    return lambda bb: emit_gemv_t_rank1(bb, cfg, s["m"], s["n"], W, d, a, y,
                                        alpha=Scalar("b", mp + 1 + 2 * np_))


def _fused_sched(cfg, s):
    from sw.kernels import gemv_t_rank1_cost

    c = gemv_t_rank1_cost(cfg, s["m"], s["n"])
    return {"B": c["B"], "L": c["L"]}


def _gemm_fits(acc):
    def fits(cfg, s):
        mp, np_, bp = _L(cfg, s["m"]), _L(cfg, s["n"]), _L(cfg, s["b"])
        return _fits_words(cfg, mp * np_, np_ * bp + mp * bp + (1 if acc else 0))
    return fits


def _gemm_build(acc):
    def build(cfg, s):
        from sw.collectives import Region
        from sw.kernels import Scalar, emit_gemm

        mp, np_, bp = _L(cfg, s["m"]), _L(cfg, s["n"]), _L(cfg, s["b"])
        W, X, Y = Region("a", 0), Region("b", 0), Region("b", np_ * bp)
        kw = {"accumulate": True, "alpha": Scalar("b", np_ * bp + mp * bp)} if acc else {}
        return lambda bb: emit_gemm(bb, cfg, s["m"], s["n"], s["b"], W, X, Y, **kw)
    return build


def _gemm_sched(acc):
    def sched(cfg, s):
        from sw.kernels import gemm_cost

        c = gemm_cost(cfg, s["m"], s["n"], s["b"], alpha=acc)
        return {"block": f"{c['Li']}x{c['Lc']}", "Bi": c["Bi"], "Bc": c["Bc"]}
    return sched


def _tr_fits(cfg, s):
    k = _L(cfg, s["r"]) * _L(cfg, s["c"])
    return _fits_words(cfg, k, 2 * k)


def _tr_build(cfg, s):
    from sw.collectives import Region, emit_transpose

    k = _L(cfg, s["r"]) * _L(cfg, s["c"])
    return lambda bb: emit_transpose(bb, cfg, s["r"], s["c"], Region("a", 0), Region("b", 0), Region("b", k))


def _vec_fits(cfg, s):
    return _fits_words(cfg, s["n"], s["n"])


def _relu_build(cfg, s):
    from sw.collectives import Region
    from sw.kernels.elementwise import emit_relu

    return lambda bb: emit_relu(bb, cfg, s["n"], Region("a", 0), Region("b", 0))


def _bcast_build(cfg, s):
    from sw.collectives import Region, emit_broadcast

    return lambda bb: emit_broadcast(bb, cfg, "row", s["n"], Region("a", 0), Region("b", 0))


def _reduce_build(cfg, s):
    from sw.collectives import Region, emit_reduce

    return lambda bb: emit_reduce(bb, cfg, "row", s["n"], Region("a", 0), Region("b", 0), mode="tree")


def _spad_fits(cfg, s):
    return bool(cfg.spad_kib) and s["n"] <= cfg.mem_a_words and cfg.nr * s["n"] <= cfg.spad_depth


def _spad_build(store):
    def build(cfg, s):
        from sw.transfer import emit_load, emit_unload

        if store:
            return lambda bb: emit_unload(bb, cfg, "a", 0, s["n"], dest="spad", spad_addr=0)
        return lambda bb: emit_load(bb, cfg, "a", 0, s["n"], source="spad", spad_addr=0, lanes="cols")
    return build


def _dram_fits(cfg, s):
    return bool(cfg.dram_mib) and s["n"] <= min(cfg.spad_depth, cfg.dram_depth)


def _dram_build(kind):
    def build(cfg, s):
        from sw.dram import emit_dma_copy

        return lambda bb: emit_dma_copy(bb, cfg, kind, 0, 0, s["n"])
    return build


DRAM_N = (1, 16, 64, 256, 300, 1024, 1500, 4096)
DRAM_N_QUICK = (1, 64, 100, 300)
DRAM_N_ODD = (7, 100, 500, 3000)
DRAM_N_ODD_QUICK = (20, 230)


def _dram_grid(cfg, quick):
    return [{"n": n} for n in (DRAM_N_QUICK if quick else DRAM_N)]


def _dram_holdout(cfg, quick):
    return [{"n": n} for n in (DRAM_N_ODD_QUICK if quick else DRAM_N_ODD)]


# -- ring classes --------------------------------------------------------------------------
def _ring_cfg(cfg, cores: int):
    return cfg if cfg.cores == cores else cfg.replace(cores=cores)


def _texts(cfg, texts) -> list:
    from sw.asm import assemble

    return [assemble(t + "\nhalt", cfg).words() for t in texts]


def _lines(cfg, per_core) -> list:
    from sw.ring import ring_text

    return _texts(cfg, [ring_text(cfg, lines) for lines in per_core])


def _seg_fits(n_per_core):
    def fits(cfg, s):
        return n_per_core(s) <= min(cfg.mem_a_words, cfg.mem_b_words)
    return fits


def _pass_build(cfg, s):
    from sw.ring import emit_pass_along

    return emit_pass_along(cfg, s["m"], ("a", 0), ("b", 0))


def _rbcast_build(cfg, s):
    from sw.ring import broadcast_lines

    return _lines(cfg, [broadcast_lines(cfg, k, s["m"], ("a", 0), ("b", 0)) for k in range(cfg.cores)])


def _rag_build(cfg, s):
    from sw.ring import all_gather_lines

    return _lines(cfg, [all_gather_lines(cfg, s["m"], "a", 0)] * cfg.cores)


def _rred_build(cfg, s):
    from sw.ring import reduce_lines

    return _lines(cfg, [reduce_lines(cfg, k, s["m"], "a", 0) for k in range(cfg.cores)])


def _rrs_build(cfg, s):
    from sw.ring import reduce_scatter_vec_lines

    return _lines(cfg, [reduce_scatter_vec_lines(cfg, s["m"], "a", 0)] * cfg.cores)


def _seg(k):
    from sw.ring_mat import MatBlock

    return lambda s: MatBlock("a", 0, k, s, 1, 0, k)


def _mag_build(cfg, s):
    from sw.ring_mat import mat_all_gather

    return _texts(cfg, [mat_all_gather(cfg, k, _seg(s["m"])).text for k in range(cfg.cores)])


def _mrs_build(cfg, s):
    from sw.ring_mat import mat_reduce_scatter

    return _texts(cfg, [mat_reduce_scatter(cfg, k, _seg(s["m"])).text for k in range(cfg.cores)])


def _mbc_build(cfg, s):
    from sw.ring_mat import MatBlock, mat_broadcast

    src, dst = MatBlock("a", 0, s["m"], 0, 1, 0, s["m"]), MatBlock("b", 0, s["m"], 0, 1, 0, s["m"])
    return _texts(cfg, [mat_broadcast(cfg, k, src, dst).text for k in range(cfg.cores)])


def _mred_build(cfg, s):
    from sw.ring_mat import MatBlock, mat_reduce

    blk = MatBlock("a", 0, s["m"], 0, 1, 0, s["m"])
    return _texts(cfg, [mat_reduce(cfg, k, blk).text for k in range(cfg.cores)])


def _core(name, dims, unit, what, build, fits, work, grid, holdout, schedule=None):
    return OpClass(name, "core", dims, unit, what, build, fits, work, grid, holdout, schedule)


def _ring(name, unit, what, build, fits, work, lengths, odd):
    g, h = _ring_grid(lengths, odd)
    return OpClass(name, "ring", ("cores", "m"), unit, what, build, fits, work, g, h)


_MN = ("m", "n")
_rm, _rodd = (RING_M, RING_M_QUICK), (RING_M_ODD, RING_M_ODD_QUICK)
_mk, _modd = (MAT_K, MAT_K_QUICK), (MAT_K_ODD, MAT_K_ODD_QUICK)

#: every operation class, in report order
CLASSES: dict[str, OpClass] = {c.name: c for c in [
    _core("gemv", _MN, "MAC", "emit_gemv: y = W x (x from the diagonal, tree reduction)", _gemv_build(False),
          _gemv_fits(False), lambda cfg, s: s["m"] * s["n"], _mat_grid, _mat_holdout, _gemv_sched(False)),
    _core("gemv_t", _MN, "MAC", "emit_gemv(trans=True): y = W^T x", _gemv_build(True), _gemv_fits(True),
          lambda cfg, s: s["m"] * s["n"], _mat_grid, _mat_holdout, _gemv_sched(True)),
    _core("rank1", _MN, "MAC", "emit_rank1: W += alpha u v^T (u diag, v cols)", _rank1_build, _rank1_fits,
          lambda cfg, s: s["m"] * s["n"], _mat_grid, _mat_holdout),
    _core("fused_backward", _MN, "MAC", "emit_gemv_t_rank1: y = W^T d and W += d (alpha a)^T in one pass",
          _fused_build, _fused_fits, lambda cfg, s: 2 * s["m"] * s["n"], _mat_grid, _mat_holdout, _fused_sched),
    _core("gemm", ("m", "n", "b"), "MAC", "emit_gemm: Y = W X (block Li x Lc chosen by the compiler)",
          _gemm_build(False), _gemm_fits(False), lambda cfg, s: s["m"] * s["n"] * s["b"], _gemm_grid,
          _gemm_holdout, _gemm_sched(False)),
    _core("gemm_acc", ("m", "n", "b"), "MAC", "emit_gemm(accumulate=True, alpha): Y += alpha W X (the update)",
          _gemm_build(True), _gemm_fits(True), lambda cfg, s: s["m"] * s["n"] * s["b"], _gemm_grid,
          _gemm_holdout, _gemm_sched(True)),
    _core("transpose", ("r", "c"), "word", "emit_transpose: dst = src^T (r x c)", _tr_build, _tr_fits,
          lambda cfg, s: s["r"] * s["c"], _tr_grid, _tr_holdout),
    _core("relu", ("n",), "word", "emit_relu: n words per PE", _relu_build, _vec_fits,
          lambda cfg, s: s["n"] * cfg.nr * cfg.nr, _vec_grid, _vec_holdout),
    _core("bus_broadcast", ("n",), "word", "sw.collectives.emit_broadcast: n diagonal words over the row buses",
          _bcast_build, _vec_fits, lambda cfg, s: s["n"] * cfg.nr, _vec_grid, _vec_holdout),
    _core("bus_reduce", ("n",), "word", "sw.collectives.emit_reduce(tree): n partials per PE along the rows",
          _reduce_build, _vec_fits, lambda cfg, s: s["n"] * cfg.nr * cfg.nr, _vec_grid, _vec_holdout),
    _core("spad_store", ("n",), "word", "emit_unload(dest='spad'): n words per PE to the scratchpad",
          _spad_build(True), _spad_fits, lambda cfg, s: s["n"] * cfg.nr * cfg.nr, _vec_grid, _vec_holdout),
    _core("spad_load", ("n",), "word", "emit_load(source='spad'): n words per PE from the scratchpad",
          _spad_build(False), _spad_fits, lambda cfg, s: s["n"] * cfg.nr * cfg.nr, _vec_grid, _vec_holdout),
    _core("dram_load", ("n",), "beat", "sw.dram.emit_dma_copy('load'): n beats DRAM -> scratchpad (DMA, waited for)",
          _dram_build("load"), _dram_fits, lambda cfg, s: s["n"], _dram_grid, _dram_holdout),
    _core("dram_store", ("n",), "beat", "sw.dram.emit_dma_copy('store'): n beats scratchpad -> DRAM",
          _dram_build("store"), _dram_fits, lambda cfg, s: s["n"], _dram_grid, _dram_holdout),
    _ring("ring_pass_along", "beat", "sw.ring.emit_pass_along: every core sends m beats to the next",
          _pass_build, _seg_fits(lambda s: s["m"]), lambda cfg, s: s["cores"] * s["m"], _rm, _rodd),
    _ring("ring_broadcast", "beat", "sw.ring.broadcast_lines: m beats from core 0 to every core",
          _rbcast_build, _seg_fits(lambda s: s["m"]), lambda cfg, s: (s["cores"] - 1) * s["m"], _rm, _rodd),
    _ring("ring_all_gather", "beat", "sw.ring.all_gather_lines: one m-beat segment per core to every core",
          _rag_build, _seg_fits(lambda s: s["cores"] * s["m"]),
          lambda cfg, s: s["cores"] * (s["cores"] - 1) * s["m"], _rm, _rodd),
    _ring("ring_reduce", "beat", "sw.ring.reduce_lines: sum of every core's m beats onto core 0",
          _rred_build, _seg_fits(lambda s: s["m"]), lambda cfg, s: (s["cores"] - 1) * s["m"], _rm, _rodd),
    _ring("ring_reduce_scatter", "beat", "sw.ring.reduce_scatter_vec_lines: c segments of m beats per core",
          _rrs_build, _seg_fits(lambda s: s["cores"] * s["m"]),
          lambda cfg, s: s["cores"] * (s["cores"] - 1) * s["m"], _rm, _rodd),
    _ring("mat_broadcast", "beat", "sw.ring_mat.mat_broadcast: an m-word block (m nr beats) from core 0",
          _mbc_build, _seg_fits(lambda s: s["m"]), lambda cfg, s: (s["cores"] - 1) * s["m"] * cfg.nr, _mk, _modd),
    _ring("mat_all_gather", "beat", "sw.ring_mat.mat_all_gather: one m-word segment per core",
          _mag_build, _seg_fits(lambda s: s["cores"] * s["m"]),
          lambda cfg, s: s["cores"] * (s["cores"] - 1) * s["m"] * cfg.nr, _mk, _modd),
    _ring("mat_reduce_scatter", "beat", "sw.ring_mat.mat_reduce_scatter: c m-word segments per core",
          _mrs_build, _seg_fits(lambda s: s["cores"] * s["m"]),
          lambda cfg, s: s["cores"] * (s["cores"] - 1) * s["m"] * cfg.nr, _mk, _modd),
    _ring("mat_reduce", "beat", "sw.ring_mat.mat_reduce: sum of an m-word block onto core 0",
          _mred_build, _seg_fits(lambda s: s["m"]), lambda cfg, s: (s["cores"] - 1) * s["m"] * cfg.nr, _mk, _modd),
]}
CORE_CLASSES = tuple(n for n, c in CLASSES.items() if c.scope == "core")
RING_CLASSES = tuple(n for n, c in CLASSES.items() if c.scope == "ring")


def parse_classes(text: str | None) -> list[str]:
    """``--classes`` value: comma-separated class names, ``core``, ``ring`` or ``all``."""
    if text is None or text.strip() in ("", "all"):
        if text is not None and not text.strip():
            raise UsageError("--classes: empty (give class names, core, ring or all)")
        return list(CLASSES)
    out = []
    for t in (x.strip() for x in text.split(",")):
        if t == "core":
            out += CORE_CLASSES
        elif t == "ring":
            out += RING_CLASSES
        elif t in CLASSES:
            out.append(t)
        else:
            raise UsageError(f"--classes {t!r}: not an operation class ({', '.join(CLASSES)}; or core, ring, all)")
    return list(dict.fromkeys(out))


# -- measurement ---------------------------------------------------------------------------
def aggregate_counters(counters: dict) -> dict:
    """Counters with the per-PE and per-bus ones summed (``fma``, ``row_hops``, ``col_hops``)."""
    out: dict = {}
    for k, v in counters.items():
        key = k.split("[", 1)[0]
        out[key] = out.get(key, 0) + int(v)
    return out


def _run_core(cfg, kernel):
    from sim.core_run import run_kernel

    _, res = run_kernel(cfg, [], [kernel], [], backend="fast", name="characterize")
    return res[0].counters, 1


def _run_ring(cfg, images):
    from sim.chip_model import ChipModel

    ch = ChipModel(cfg, "fast")
    for k, img in enumerate(images):
        ch.load(img, core=k)
    r = ch.run()
    ctr = dict(r.counters)
    ctr["cycles"] = r.cycles
    return ctr, cfg.cores


def measure(cfg, cls: OpClass | str, shape: dict) -> dict:
    """Run one operation class at one shape on the kind ``cfg`` (fast engines).

    Parameters
    ----------
    cfg : ArchConfig
        The core kind (for ring classes, ``shape["cores"]`` replaces ``cfg.cores``).
    cls : OpClass or str
    shape : dict
        The class's dimensions.

    Returns
    -------
    dict
        ``shape``, ``work``, ``cycles``, ``counters`` (:func:`aggregate_counters`),
        ``energy_pj`` (per category of :data:`sim.power.EVERYTHING`, and ``dram`` on a
        kind with DRAM), ``energy_total_pj``
        and, for kernels that choose a blocking, ``schedule``.
    """
    cls = CLASSES[cls] if isinstance(cls, str) else cls
    if cls.scope == "ring":
        run_cfg = _ring_cfg(cfg, shape["cores"])
        ctr, n_cores = _run_ring(run_cfg, cls.build(run_cfg, shape))
    else:
        run_cfg = cfg
        ctr, n_cores = _run_core(cfg, cls.build(cfg, shape))
    rep = report_from_counters(run_cfg, ctr, n_cores=n_cores)
    out = {"shape": dict(shape), "work": int(cls.work(cfg, shape)), "cycles": int(rep.cycles),
           "counters": aggregate_counters(ctr), "energy_pj": {k: float(v) for k, v in rep.energy_pj.items()},
           "energy_total_pj": float(sum(rep.energy_pj.values()))}
    if cls.schedule is not None:
        out["schedule"] = cls.schedule(cfg, shape)
    return out


def point_grid(cfg, cls: OpClass, quick: bool, held_out: bool = False) -> list[dict]:
    """The shapes of ``cls`` that fit the kind ``cfg``: its grid, or its held-out shapes."""
    shapes = (cls.holdout if held_out else cls.grid)(cfg, quick)
    if cls.scope == "ring":
        shapes = [s for s in shapes if cls.fits(_ring_cfg(cfg, s["cores"]), s)]
    else:
        shapes = [s for s in shapes if cls.fits(cfg, s)]
    return shapes


def characterize(kinds: dict, classes=None, grid: str = "full", progress=None, held_out: bool = True) -> dict:
    """Characterize each kind: every class over its grid (and its held-out shapes).

    Parameters
    ----------
    kinds : dict
        Kind name -> :class:`~arch.config.ArchConfig`.
    classes : list of str, optional
        Class names (default all, :data:`CLASSES`).
    grid : str
        ``"quick"`` or ``"full"`` (:data:`GRIDS`).
    progress : callable, optional
        ``progress(done, total)`` after every point.
    held_out : bool
        Also measure the held-out shapes (the model's test set; never fitted).

    Returns
    -------
    dict
        The characterization document (``format`` :data:`FORMAT`): per kind its
        configuration and, per class, the measured ``grid`` and ``held_out`` points.
    """
    if grid not in GRIDS:
        raise UsageError(f"grid {grid!r}: allowed {', '.join(GRIDS)}")
    names = list(classes) if classes else list(CLASSES)
    quick = grid == "quick"
    plan = []
    for kname, cfg in kinds.items():
        for cname in names:
            cls = CLASSES[cname]
            for part in ("grid", "held_out") if held_out else ("grid",):
                for s in point_grid(cfg, cls, quick, part == "held_out"):
                    plan.append((kname, cname, part, s))
    doc = {"format": FORMAT, "grid": grid,
           "engine": "fast core model (sim.core_run.run_kernel, backend='fast') for core classes; fast chip engine "
                     "(sim.chip_model.ChipModel, engine='fast') for ring classes",
           "energy_convention": scope_note() + "; energy_pj per category of sim.power.report_from_counters, every "
                                               "category (compared scope and everything); ring classes: all cores",
           "cycles": "RUN cycles of the operation's phase: the program, its HALT, the start-latency cycle and the "
                     "drain (cfg.run_overhead); ring classes: the chip's RUN cycles",
           "counters": "summed over PEs (fma, row_hops, col_hops) and, for ring classes, over cores",
           "kinds": {k: {"config": cfg.to_dict(), "classes": {}} for k, cfg in kinds.items()}}
    t0 = time.perf_counter()
    for i, (kname, cname, part, s) in enumerate(plan):
        cls = CLASSES[cname]
        entry = doc["kinds"][kname]["classes"].setdefault(
            cname, {"scope": cls.scope, "dims": list(cls.dims), "unit": cls.unit, "what": cls.what, "grid": [],
                    "held_out": []})
        entry[part].append(measure(kinds[kname], cls, s))
        if progress:
            progress(i + 1, len(plan))
    doc["points"] = len(plan)
    doc["seconds"] = round(time.perf_counter() - t0, 2)
    return doc
