"""The performance model: a layer phase's cycles and energy on a core kind, predicted
from the characterization (:mod:`perf.characterize`; docs/perf.md).

Form
----
Every kernel and collective is a static schedule: its cycles are a sum of *schedule
terms*, each the count of one kind of instruction group the generator lays down (MAC
stream steps of a block, reduction steps, stores, setup, ring hops, ...), and each
counter the power model reads is a sum of the same terms. So per class the model is
linear in the class's terms (:func:`terms`)::

    cycles    = sum_t a_t * term_t(shape)
    energy[k] = sum_t e_kt * term_t(shape)          (per energy category k)

The terms come from how the kernel schedules the shape: the tiling the compiler picks for
it (block counts and sizes, from the compile-time cost helpers of :mod:`sw.kernels`, which
run nothing) times the work per block; for the ring collectives, the ring size ``c``
times the segment length (``c (c - 1) m`` ring beats for an all-gather, ...), and for the
energies of ring classes the same terms times ``c`` (counters are summed over the
cores), ``m`` and ``c^2 m`` (the ring traffic).
The coefficients are fitted by least squares on the kind's grid; nothing of a kind's
timing (latencies, setup, drain) is assumed, it is in the fitted coefficients.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from arch.config import ArchConfig
from arch.errors import InputError
from perf.characterize import CLASSES, FORMAT
from sim.power import EVERYTHING
from sw.layout import local_len

__all__ = ["terms", "PerfModel", "ClassFit", "MODEL_FORMAT", "TARGETS", "CYCLE_TERMS"]

MODEL_FORMAT = "caterpillar-perf-model/1"
#: what the model predicts: cycles, the energy of each category (and ``dram`` on a kind
#: with DRAM), and the total energy
TARGETS = ("cycles",) + tuple(f"energy.{k}" for k in EVERYTHING) + ("energy_total",)


def _targets(categories) -> tuple:
    return ("cycles",) + tuple(f"energy.{k}" for k in categories) + ("energy_total",)


def _gemv_terms(cfg, s, trans):
    from sw.kernels import gemv_cost

    c = gemv_cost(cfg, s["m"], s["n"], trans=trans)
    B, L, ns, nch = c["B"], c["L"], c["nstream"], c["nchain"]
    return {"1": 1, "B*Lc*ns": B * c["Lc"] * ns, "B*L*ns": B * L * ns, "B*(gap+S*P)": B * (c["gap"] + c["S"] * c["P"]),
            "B*S*L": B * c["S"] * L, "tail": nch - (B - 1) * L, "B*ns": B * ns, "nchain": nch, "ns": ns}


def _rank1_terms(cfg, s):
    from sw.kernels import rank1_cost

    c = rank1_cost(cfg, s["m"], s["n"], v_layout="cols")
    return {"1": 1, "mp*np": c["mp"] * c["np"], "mp": c["mp"], "mp*pad": c["mp"] * c["pad"], "setup": c["setup"],
            "np": c["np"]}


def _fused_terms(cfg, s):
    from sw.kernels import gemv_t_rank1_cost

    c = gemv_t_rank1_cost(cfg, s["m"], s["n"])
    L, full, rem, ns, S = c["L"], c["full"], c["rem"], c["nstream"], c["S"]
    last = 1 if rem else 0

    def red(scale, gap, P):
        return (L if scale else 0) + max(0, gap - (L if scale else 0)) + S * P

    reds = red(c["B"] > 1, c["gap0"], c["P"]) + (full - 1) * red(True, c["gap0"], c["P"]) \
        + last * red(False, c["gap_last"], c["P_last"])
    return {"1": 1, "stream": full * c["Lc2"] * ns + last * c["Lc2_last"] * ns, "macs": (full * L + rem) * ns,
            "reduce": reds, "adds": S * (full * L + rem), "B": c["B"], "B*ns": c["B"] * ns, "setup": c["setup"],
            "L": L, "ns": ns, "nchain": c["nchain"], "scalings": L * (full - 1 + (c["B"] > 1)), "rem": rem}


def _gemm_terms(cfg, s, acc):
    from sw.kernels import gemm_cost

    c = gemm_cost(cfg, s["m"], s["n"], s["b"], alpha=acc)
    nr, np_ = cfg.nr, local_len(s["n"], cfg.nr)
    blocks, steps = c["Bi"] * c["Bc"], c["Bi"] * c["Bc"] * cfg.nr * np_
    return {"1": 1, "blocks*nr*np*G": steps * c["G"], "blocks*nr*np*L": steps * c["L"],
            "blocks*nr*np*Li": steps * c["Li"], "latch": steps * c["Li"] * (c["Lc"] > 1), "blocks*E": blocks * c["E"],
            "blocks*L": blocks * c["L"], "blocks": blocks, "inner": c["Bi"] if c["Bi"] > 1 and c["Bc"] > 1 else 0,
            "setup": c["setup"], "steps": steps, "nr*np": nr * np_,
            "blocks*Li*latched": blocks * c["Li"] * (c["Lc"] > 1)}


def _transpose_terms(cfg, s):
    k = local_len(s["r"], cfg.nr) * local_len(s["c"], cfg.nr)
    return {"1": 1, "k": k, "pad": max(0, cfg.sram_read_distance - k)}


def _vec_terms(cfg, s):
    return {"1": 1, "n": s["n"]}


def _reduce_terms(cfg, s):
    from sw.collectives import group_size

    G = group_size(cfg)
    return {"1": 1, "groups*G": -(-s["n"] // G) * G, "n": s["n"]}


def _rsv_terms(cfg, s):
    """The register reduce-scatter's passes (``sw.ring.reduce_scatter_vec_lines``): chunks
    of at most ``rsv_chunk`` beats; per pass its first add, step-0 and later periods."""
    from sw.ring import rsv_chunk

    c, m, F = s["cores"], s["m"], cfg.fpu_latency - 1
    n = -(-m // rsv_chunk(cfg))
    sizes = [m // n + (1 if i < m % n else 0) for i in range(n)]
    a0 = sum(max(3, z) for z in sizes)
    mz = sum(max(z, F) for z in sizes)
    p = sum(max(z + 3, cfg.fpu_latency + 2) for z in sizes)
    more = 1 if c > 2 else 0
    return {"1": 1, "passes": n, "a0": a0, "m": m, ">2*passes": more * n, ">2*max(z,F)": more * mz,
            ">2*(c-3)*p": more * (c - 3) * p}


def _dram_terms(cfg, s, store):
    """A DMA copy (``sw.dram.emit_dma_copy``): its transfers (at most 256 beats, inside a
    DRAM page), each a DRAM latency and its beats at the DRAM bandwidth (at most one per
    cycle), and the instructions starting them (one per run of equal transfers, a loop
    for a run of several)."""
    from fractions import Fraction

    from sw.dram import dma_chunks

    chunks = dma_chunks(cfg, 0, s["n"])
    per = Fraction(cfg.spad_beat_bytes) * Fraction(str(cfg.clock_mhz)) / (Fraction(str(cfg.dram_gbps)) * 1000)
    runs = [len(list(g)) for _, g in itertools.groupby(chunks)]
    return {"1": 1, "transfers": len(chunks), "bandwidth": sum(max(m, math.ceil(m * per)) for m in chunks),
            "n": s["n"], "runs": len(runs), "loops": sum(1 for r in runs if r > 1)}


def _ring_terms(name, cfg, s):
    c, m = s["cores"], s["m"]
    if name == "ring_pass_along":
        return {"1": 1, "m": m}
    if name in ("ring_broadcast", "ring_reduce", "mat_broadcast", "mat_reduce"):
        return {"1": 1, "c": c, "m": m}
    if name == "ring_all_gather":
        from sw.ring import ag_min_stream

        P = max(m, ag_min_stream(cfg))
        return {"1": 1, "c*P": c * P, "P": P, "m": m}
    if name == "ring_reduce_scatter":
        return _rsv_terms(cfg, s)
    if name in ("mat_all_gather", "mat_reduce_scatter"):
        return {"1": 1, "c*m": c * m, "c": c, "m": m}
    raise KeyError(name)


_CORE_TERMS = {
    "gemv": lambda cfg, s: _gemv_terms(cfg, s, False), "gemv_t": lambda cfg, s: _gemv_terms(cfg, s, True),
    "rank1": _rank1_terms, "fused_backward": _fused_terms, "gemm": lambda cfg, s: _gemm_terms(cfg, s, False),
    "gemm_acc": lambda cfg, s: _gemm_terms(cfg, s, True), "transpose": _transpose_terms, "relu": _vec_terms,
    "bus_broadcast": _vec_terms, "bus_reduce": _reduce_terms, "spad_store": _vec_terms, "spad_load": _vec_terms,
    "dram_load": lambda cfg, s: _dram_terms(cfg, s, False), "dram_store": lambda cfg, s: _dram_terms(cfg, s, True),
}


#: the terms of the cycle fit, per core class (the others are energy terms only: counts
#: of events that take no cycle of their own, e.g. the MACs of a block beside its
#: instruction slots); ring classes: every term of :func:`_ring_terms`
CYCLE_TERMS = {
    "gemv": ("1", "B*Lc*ns", "B*(gap+S*P)", "tail"), "gemv_t": ("1", "B*Lc*ns", "B*(gap+S*P)", "tail"),
    "rank1": ("1", "mp*np", "mp", "mp*pad", "setup"), "fused_backward": ("1", "stream", "reduce", "setup", "L"),
    "gemm": ("1", "blocks*nr*np*G", "blocks*E", "inner", "setup"),
    "gemm_acc": ("1", "blocks*nr*np*G", "blocks*E", "inner", "setup"),
}


def terms(cfg, cls: str, shape: dict, energy: bool = False) -> dict:
    """The schedule terms of class ``cls`` at ``shape`` on the kind ``cfg`` (the model's
    features): those of the cycle fit (:data:`CYCLE_TERMS`), or with ``energy`` those
    of the energy fits (every term; for ring classes, the cycle terms times the ring size,
    since counters and leakage are summed over the cores; and ``m`` and ``c^2 m`` for the
    ring traffic, ``(c - 1) m`` beats for a chain, ``c (c - 1) m`` when every core's
    segment goes round)."""
    if cls in _CORE_TERMS:
        t = _CORE_TERMS[cls](cfg, shape)
        return t if energy or cls not in CYCLE_TERMS else {k: t[k] for k in CYCLE_TERMS[cls]}
    t = _ring_terms(cls, cfg, shape)
    if energy:
        c = shape["cores"]
        t = {**{f"c*({k})": c * v for k, v in t.items()}, "m": shape["m"], "c*c*m": c * c * shape["m"]}
    return t


def _target(point: dict, target: str) -> float:
    if target == "cycles":
        return float(point["cycles"])
    if target == "energy_total":
        return float(point["energy_total_pj"])
    return float(point["energy_pj"][target.split(".", 1)[1]])


def _solve(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with the columns scaled to unit norm (minimum-norm solution when
    terms are collinear on the grid)."""
    norms = np.linalg.norm(X, axis=0)
    norms[norms == 0] = 1.0
    coef, *_ = np.linalg.lstsq(X / norms, y, rcond=None)
    return coef / norms


class ClassFit:
    """The fitted model of one class on one kind: per target, coefficients over its terms.

    Parameters
    ----------
    cls : str
    cycle_terms, energy_terms : list of str
        Term names (:func:`terms`) of the cycle and energy fits.
    coef : dict
        Target (:data:`TARGETS`) -> list of coefficients.
    points : int
        Grid points fitted.
    """

    def __init__(self, cls: str, cycle_terms: list, energy_terms: list, coef: dict, points: int):
        self.cls, self.cycle_terms, self.energy_terms, self.coef, self.points = \
            cls, list(cycle_terms), list(energy_terms), coef, points

    @classmethod
    def fit(cls, cfg, name: str, grid: list) -> ClassFit:
        """Least squares on the measured ``grid`` points of class ``name``."""
        if not grid:
            raise InputError(f"{name}: no grid points to fit")
        tc = [terms(cfg, name, p["shape"]) for p in grid]
        te = [terms(cfg, name, p["shape"], energy=True) for p in grid]
        cn, en = list(tc[0]), list(te[0])
        Xc = np.array([[t[k] for k in cn] for t in tc], dtype=float)
        Xe = np.array([[t[k] for k in en] for t in te], dtype=float)
        coef = {}
        for tg in _targets(grid[0]["energy_pj"]):
            y = np.array([_target(p, tg) for p in grid])
            coef[tg] = [float(v) for v in _solve(Xc if tg == "cycles" else Xe, y)]
        return cls(name, cn, en, coef, len(grid))

    def predict(self, cfg, shape: dict) -> dict:
        """``cycles``, ``energy_pj`` per category and ``energy_total_pj`` at ``shape``."""
        tc, te = terms(cfg, self.cls, shape), terms(cfg, self.cls, shape, energy=True)
        xc = np.array([tc[k] for k in self.cycle_terms], dtype=float)
        xe = np.array([te[k] for k in self.energy_terms], dtype=float)
        val = {tg: float((xc if tg == "cycles" else xe) @ np.array(c)) for tg, c in self.coef.items()}
        return {"cycles": val["cycles"],
                "energy_pj": {k.split(".", 1)[1]: v for k, v in val.items() if k.startswith("energy.")},
                "energy_total_pj": val["energy_total"]}

    def to_dict(self) -> dict:
        return {"cycle_terms": self.cycle_terms, "energy_terms": self.energy_terms, "coef": self.coef,
                "points": self.points}

    @classmethod
    def from_dict(cls, name: str, d: dict) -> ClassFit:
        return cls(name, d["cycle_terms"], d["energy_terms"], d["coef"], d["points"])


def _rel(pred: float, meas: float) -> float:
    if meas == 0:
        return 0.0 if abs(pred) < 1e-9 else math.inf
    return abs(pred - meas) / abs(meas)


class PerfModel:
    """Per kind and class, a :class:`ClassFit`; predicts any shape of a fitted class.

    Parameters
    ----------
    kinds : dict
        Kind name -> :class:`~arch.config.ArchConfig`.
    fits : dict
        Kind name -> {class name -> :class:`ClassFit`}.
    """

    def __init__(self, kinds: dict, fits: dict):
        self.kinds, self.fits = kinds, fits

    @classmethod
    def fit(cls, doc: dict) -> PerfModel:
        """Fit every class of every kind of a characterization document on its grid."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise InputError(f"not a characterization document (format {FORMAT})")
        kinds, fits = {}, {}
        for kname, kd in doc["kinds"].items():
            cfg = ArchConfig.from_dict(kd["config"])
            kinds[kname] = cfg
            fits[kname] = {c: ClassFit.fit(cfg, c, e["grid"]) for c, e in kd["classes"].items() if e["grid"]}
        return cls(kinds, fits)

    def predict(self, kind: str, cls: str, shape: dict) -> dict:
        """Predicted cycles and energies of class ``cls`` at ``shape`` on kind ``kind``."""
        if kind not in self.fits:
            raise InputError(f"kind {kind!r} is not in the model ({', '.join(self.fits)})")
        if cls not in self.fits[kind]:
            raise InputError(f"class {cls!r} was not characterized on kind {kind!r}")
        missing = [d for d in CLASSES[cls].dims if d not in shape]
        if missing:
            raise InputError(f"{cls}: the shape needs {', '.join(CLASSES[cls].dims)} (missing {', '.join(missing)})")
        return self.fits[kind][cls].predict(self.kinds[kind], shape)

    def errors(self, kind: str, cls: str, points: list) -> dict:
        """Relative errors of the model against measured ``points`` of one class: per
        point, and the max and mean over them, of the cycles, the total energy and the
        largest energy category error (categories under 1 % of the total excluded)."""
        rows = []
        for p in points:
            q = self.predict(kind, cls, p["shape"])
            tot = p["energy_total_pj"]
            cats = [_rel(q["energy_pj"][k], v) for k, v in p["energy_pj"].items() if v >= 0.01 * tot]
            rows.append({"shape": p["shape"], "cycles": p["cycles"], "predicted_cycles": round(q["cycles"], 2),
                         "cycles_err": _rel(q["cycles"], p["cycles"]),
                         "energy_err": _rel(q["energy_total_pj"], tot), "category_err": max(cats, default=0.0)})

        def stat(key):
            vals = [r[key] for r in rows]
            return {"max": max(vals, default=0.0), "mean": sum(vals) / len(vals) if vals else 0.0}

        return {"points": len(rows), "cycles": stat("cycles_err"), "energy": stat("energy_err"),
                "category": stat("category_err"), "rows": rows}

    def evaluate(self, doc: dict, part: str = "held_out") -> dict:
        """:meth:`errors` of every fitted class on the ``part`` points (``held_out`` or
        ``grid``) of a characterization document: {kind: {class: errors}}."""
        out = {}
        for kname, kd in doc["kinds"].items():
            for c, e in kd["classes"].items():
                if kname in self.fits and c in self.fits[kname] and e.get(part):
                    out.setdefault(kname, {})[c] = self.errors(kname, c, e[part])
        return out

    def to_dict(self) -> dict:
        return {"format": MODEL_FORMAT, "kinds": {k: {"config": cfg.to_dict(),
                                                       "classes": {c: f.to_dict() for c, f in self.fits[k].items()}}
                                                   for k, cfg in self.kinds.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> PerfModel:
        if not isinstance(d, dict) or d.get("format") != MODEL_FORMAT:
            raise InputError(f"not a performance model (format {MODEL_FORMAT})")
        kinds = {k: ArchConfig.from_dict(v["config"]) for k, v in d["kinds"].items()}
        fits = {k: {c: ClassFit.from_dict(c, f) for c, f in v["classes"].items()} for k, v in d["kinds"].items()}
        return cls(kinds, fits)
