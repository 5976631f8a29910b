"""The design space: axes of :class:`~arch.config.ArchConfig` fields an architect trades,
the training method and the compilers' mapping choices, each a short list of values.

A point is one value per axis (a dict); its neighbours move one axis one step. The
space is written on the command line as ``field=v1,v2,...`` items, integer ranges
``field=lo..hi`` (every integer) or ``field=lo..hi:x2`` (doubling), or as a JSON file
``{"field": [values], ...}``. Unknown fields, empty ranges and values of the wrong type
are :class:`arch.errors.UsageError` naming the field.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

from arch.config import ArchConfig, ConfigError, PRESETS
from arch.errors import UsageError

__all__ = ["ARCH_AXES", "AXES", "CATEGORICAL", "MAPPING_AXES", "MEASUREMENT_VERSION", "METHOD_AXIS", "Space",
           "parse_space", "point_config", "point_key", "point_mapping", "point_method"]

#: The version of what a measurement counts, part of every point's cache key: raise it
#: whenever the compilers, the engines or the power model change the figures of an
#: unchanged point (e.g. how the microcode LOADs between a step's RUNs are planned, the
#: compilers' collectives inside their GEMVs and GEMMs, CP's layers sharing a core, CP's
#: input history in the scratchpad), so a cache written before the change is measured
#: again instead of read.
MEASUREMENT_VERSION = 7

#: ArchConfig fields the search may vary (the rest come from the base configuration)
ARCH_AXES = ("nr", "cores", "mem_a_words", "mem_b_words", "spad_kib", "n_regs", "fmt", "mul_latency",
             "add_latency", "clock_mhz", "ucode_depth", "dram_mib", "dram_gbps", "dram_latency")
#: the training method axis: ``sgd``, ``cp``, ``mbgd:B`` (minibatch GD of B), ``cp:B`` (minibatch CP)
METHOD_AXIS = "method"
#: the compilers' mapping choices, each a categorical axis (sim.step_measure.MAPPING_OPTIONS
#: says which method takes which; a choice that does not apply is not part of the point's key)
MAPPING_AXES = {"out_map": ("auto", "rows", "cols"), "backward": ("auto", "fused", "separate"),
                "softmax": ("auto", "array", "host"), "overlap": ("on", "off")}
#: axis values the compilers take as another type
_MAPPING_VALUES = {"overlap": {"on": True, "off": False}}
#: axes without an order that matters: every value is a neighbour of every other
CATEGORICAL = (METHOD_AXIS, "fmt", *MAPPING_AXES)
#: every axis a space may have
AXES = (*ARCH_AXES, METHOD_AXIS, *MAPPING_AXES)
_INT_AXES = {"nr", "cores", "mem_a_words", "mem_b_words", "spad_kib", "n_regs", "mul_latency", "add_latency",
             "dram_mib", "dram_latency",
             "ucode_depth"}


def _method_ok(v) -> bool:
    if not isinstance(v, str):
        return False
    name, _, b = v.partition(":")
    if name == "sgd":
        return not b
    if name in ("mbgd", "cp"):
        return not b or (b.isdigit() and int(b) >= 1)
    return False


def _typed(name: str, v):
    if name == METHOD_AXIS:
        if not _method_ok(v):
            raise UsageError(f"--space {name}: {v!r} is not a method (sgd, cp, mbgd:B, cp:B)")
        return v
    if name in MAPPING_AXES:
        if v not in MAPPING_AXES[name]:
            raise UsageError(f"--space {name}: {v!r} is not one of {', '.join(MAPPING_AXES[name])}")
        return v
    if name == "fmt":
        from arch.fpformat import get_format

        try:
            return get_format(v).name
        except (KeyError, ValueError, TypeError):
            raise UsageError(f"--space fmt: unknown number format {v!r}") from None
    if name in _INT_AXES:
        if isinstance(v, bool) or not isinstance(v, int):
            try:
                v = int(str(v), 0)
            except ValueError:
                raise UsageError(f"--space {name}: {v!r} is not an integer") from None
        return v
    try:
        return float(v)
    except (TypeError, ValueError):
        raise UsageError(f"--space {name}: {v!r} is not a number") from None


def _values(name: str, text: str) -> list:
    """``a,b,c``; ``lo..hi`` (every integer); ``lo..hi:xK`` (multiplying by K)."""
    text = text.strip()
    if ".." in text:
        lo_s, _, rest = text.partition("..")
        hi_s, _, step = rest.partition(":")
        try:
            lo, hi = int(lo_s), int(hi_s)
            mult = int(step[1:]) if step.startswith("x") else None
            add = int(step) if step and mult is None else 1
        except ValueError:
            raise UsageError(f"--space {name}={text}: a range is lo..hi, lo..hi:STEP or lo..hi:xFACTOR") from None
        if lo > hi or lo < 1 or (mult is not None and mult < 2) or add < 1:
            raise UsageError(f"--space {name}={text}: an empty or invalid range")
        out, v = [], lo
        while v <= hi:
            out.append(v)
            v = v * mult if mult else v + add
        return out
    return [t.strip() for t in text.split(",") if t.strip()]


@dataclass(frozen=True)
class Space:
    """Ordered value lists per axis over a base configuration.

    ``axes``: axis name -> tuple of values (ArchConfig fields of :data:`ARCH_AXES`, and
    ``method``); ``base``: the configuration the other fields come from."""

    axes: dict
    base: ArchConfig = field(default_factory=lambda: PRESETS["S"])

    def __post_init__(self):
        if not self.axes:
            raise UsageError("--space: no axes; give at least one field=values")
        for name, vals in self.axes.items():
            if name not in AXES:
                raise UsageError(f"--space: unknown field {name!r}; allowed: {', '.join(AXES)}")
            if not vals:
                raise UsageError(f"--space {name}: empty range")
            if len(set(vals)) != len(vals):
                raise UsageError(f"--space {name}: repeated values {list(vals)}")

    @property
    def names(self) -> list[str]:
        return list(self.axes)

    @property
    def size(self) -> int:
        n = 1
        for v in self.axes.values():
            n *= len(v)
        return n

    def points(self):
        """Every point, in the axes' order."""
        for combo in itertools.product(*self.axes.values()):
            yield dict(zip(self.axes, combo))

    def index(self, point: dict) -> tuple:
        return tuple(self.axes[n].index(point[n]) for n in self.axes)

    def at(self, idx) -> dict:
        return {n: self.axes[n][i] for n, i in zip(self.axes, idx)}

    def neighbours(self, point: dict) -> list[tuple[str, int, dict]]:
        """``(axis, direction, point)`` for every one-step move of one axis: the next
        value up or down an ordered axis, every other value of a categorical one
        (:data:`CATEGORICAL`; direction: the sign of the move in the axis's order)."""
        idx = self.index(point)
        out = []
        for a, name in enumerate(self.axes):
            n = len(self.axes[name])
            steps = [j for j in range(n) if j != idx[a]] if name in CATEGORICAL else \
                [j for j in (idx[a] - 1, idx[a] + 1) if 0 <= j < n]
            for j in steps:
                out.append((name, 1 if j > idx[a] else -1, self.at(idx[:a] + (j,) + idx[a + 1:])))
        return out

    def to_dict(self) -> dict:
        return {"axes": {k: list(v) for k, v in self.axes.items()}, "base": self.base.to_dict()}


def parse_space(items, base: ArchConfig | None = None) -> Space:
    """A :class:`Space` from ``field=values`` items, or one JSON file of ``{field: [values]}``."""
    base = base or PRESETS["S"]
    items = list(items or [])
    if not items:
        raise UsageError("--space: give field=values items (e.g. nr=2,4 cores=2..16:x2) or a JSON file")
    axes: dict = {}
    if len(items) == 1 and "=" not in items[0]:
        from arch.files import read_text

        if not Path(items[0]).is_file():
            raise UsageError(f"--space {items[0]!r}: neither field=values nor a JSON file")
        try:
            d = json.loads(read_text(items[0], "--space"))
        except json.JSONDecodeError as e:
            raise UsageError(f"--space {items[0]}: not JSON ({e})") from None
        if not isinstance(d, dict) or not all(isinstance(v, list) for v in d.values()):
            raise UsageError(f"--space {items[0]}: a JSON object of field -> list of values")
        raw = {k: list(v) for k, v in d.items()}
    else:
        raw = {}
        for it in items:
            name, eq, text = it.partition("=")
            if not eq or not name.strip():
                raise UsageError(f"--space {it!r}: expected field=values")
            raw[name.strip()] = _values(name.strip(), text)
    for name, vals in raw.items():
        if name not in AXES:
            raise UsageError(f"--space: unknown field {name!r}; allowed: {', '.join(AXES)}")
        axes[name] = tuple(_typed(name, v) for v in vals)
    return Space(axes, base)


def point_method(point: dict) -> tuple[str, int]:
    """The point's training method and minibatch (``mbgd`` defaults to 16)."""
    name, _, b = point.get(METHOD_AXIS, "sgd").partition(":")
    return name, int(b) if b else (16 if name == "mbgd" else 1)


def point_mapping(point: dict) -> dict:
    """The compiler's mapping choices of ``point`` that apply to its method."""
    from sim.step_measure import mapping_options

    chosen = mapping_options(*point_method(point), {k: v for k, v in point.items() if k in MAPPING_AXES})
    return {k: _MAPPING_VALUES.get(k, {}).get(v, v) for k, v in chosen.items()}


def point_config(space: Space, point: dict) -> ArchConfig:
    """The configuration of ``point`` (its ArchConfig fields over the space's base);
    raises :class:`ConfigError` for an invalid combination."""
    return space.base.replace(**{k: v for k, v in point.items() if k in ARCH_AXES})


def point_key(space: Space, point: dict, workloads) -> str:
    """A stable hash of everything that decides a point's measurement: the full
    configuration, the method, the workloads and :data:`MEASUREMENT_VERSION` (not the
    constraints or the objective)."""
    try:
        cfg = point_config(space, point).to_dict()
    except ConfigError:
        cfg = {**space.base.to_dict(), **{k: v for k, v in point.items() if k in ARCH_AXES}}
    doc = {"config": cfg, "method": point.get(METHOD_AXIS, "sgd"),
           "workloads": [w.key() for w in workloads], "measurement": MEASUREMENT_VERSION}
    mapping = point_mapping(point)
    if mapping:
        doc["mapping"] = mapping
    return hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]
