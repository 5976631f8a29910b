"""Placements of a training step on a heterogeneous chip (:class:`arch.hetero.HeteroConfig`).

A :class:`Placement` says, per layer of an MLP, which core group runs its forward,
backward and update phases, and on which core of that group (an index inside the
group) its weights live. JSON::

    {"layers": [{"forward": 1, "backward": 1, "update": 1, "core": 0}, ...]}

or the short form ``"1,1,0,0"`` (every phase of layer ``l`` on group ``g_l``, cores
chosen first-fit; ``"1:2"``: the layer's row panels on the first 2 cores of group 1,
``"cores": 2`` in JSON, :mod:`sw.train_hetero_split`). ``docs/hybrid.md`` describes the compiler that takes it
(:mod:`sw.train_hetero`) and the scheduler that chooses it (:mod:`perf.schedule`).

Forward, backward and update of one layer on *different* groups need the weights on
both: :func:`weight_copy_words` is that copy's size per step (the weights go to the
backward/update group and come back, every step, as the update changes them), which
:func:`check_placement` reports as the one-line reason it is not compiled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from arch.errors import InputError
from sw.layout import local_len

__all__ = ["LayerPlace", "Placement", "PlacementError", "placement_from_arg", "weight_copy_words",
           "check_placement", "layer_words"]


class PlacementError(InputError):
    """A placement that is malformed or that the compiler does not compile (one line)."""


@dataclass(frozen=True)
class LayerPlace:
    forward: int
    backward: int
    update: int
    core: int | None = None     #: index of the core inside the group (None: first fit)
    cores: int = 1              #: cores of the group holding row panels of the layer (from ``core``)

    @property
    def group(self) -> int:
        return self.forward

    def to_dict(self) -> dict:
        d = {"forward": self.forward, "backward": self.backward, "update": self.update}
        if self.core is not None:
            d["core"] = self.core
        if self.cores != 1:
            d["cores"] = self.cores
        return d


@dataclass(frozen=True)
class Placement:
    layers: tuple

    @classmethod
    def uniform(cls, groups) -> Placement:
        """Every phase of layer ``l`` on group ``groups[l]``."""
        return cls(tuple(LayerPlace(g, g, g) for g in groups))

    @classmethod
    def from_dict(cls, d) -> Placement:
        if isinstance(d, list):
            d = {"layers": d}
        if not isinstance(d, dict) or not isinstance(d.get("layers"), list) or not d["layers"]:
            raise PlacementError('a placement is {"layers": [{"forward": g, "backward": g, "update": g}, ...]}')
        out = []
        for i, e in enumerate(d["layers"]):
            if isinstance(e, int) and not isinstance(e, bool):
                out.append(LayerPlace(e, e, e))
                continue
            if not isinstance(e, dict):
                raise PlacementError(f"placement layer {i}: expected a group number or an object, got {e!r}")
            unknown = set(e) - {"forward", "backward", "update", "core", "group", "cores"}
            if unknown:
                raise PlacementError(f"placement layer {i}: unknown field(s) {', '.join(sorted(unknown))}")
            g = e.get("group", e.get("forward"))
            vals = [e.get("forward", g), e.get("backward", g), e.get("update", g)]
            for name, v in zip(("forward", "backward", "update"), vals):
                if not isinstance(v, int) or isinstance(v, bool):
                    raise PlacementError(f"placement layer {i}: {name} must be a group number, got {v!r}")
            core = e.get("core")
            if core is not None and (not isinstance(core, int) or isinstance(core, bool) or core < 0):
                raise PlacementError(f"placement layer {i}: core must be an index >= 0, got {core!r}")
            k = e.get("cores", 1)
            if not isinstance(k, int) or isinstance(k, bool) or k < 1:
                raise PlacementError(f"placement layer {i}: cores must be a count >= 1, got {k!r}")
            out.append(LayerPlace(*vals, core, k))
        return cls(tuple(out))

    def to_dict(self) -> dict:
        return {"layers": [p.to_dict() for p in self.layers]}

    def short(self) -> str:
        if all(p.forward == p.backward == p.update and (p.cores == 1 or p.core in (None, 0)) for p in self.layers):
            return ",".join(str(p.forward) + (f":{p.cores}" if p.cores > 1 else "") for p in self.layers)
        return json.dumps(self.to_dict())


def placement_from_arg(arg: str) -> Placement:
    """``"1,1,0,0"``, inline JSON or a JSON file."""
    import os

    s = arg.strip()
    if s and all(c.isdigit() or c in ", :" for c in s):
        try:
            out = []
            for x in (x.strip() for x in s.split(",") if x.strip()):
                g, _, k = x.partition(":")
                k = int(k) if k else 1
                if k < 1:
                    raise ValueError
                out.append(LayerPlace(int(g), int(g), int(g), 0 if k > 1 else None, k))
            return Placement(tuple(out))
        except ValueError:
            raise PlacementError(f"bad placement {arg!r}: expected group numbers like 1,1,0,0 (g:k: a layer on "
                                 f"k cores of group g)") from None
    if s.startswith("{") or s.startswith("["):
        try:
            return Placement.from_dict(json.loads(s))
        except json.JSONDecodeError as e:
            raise PlacementError(f"bad placement JSON: {e.msg} (column {e.colno})") from None
    if os.path.isfile(s):
        try:
            with open(s) as f:
                return Placement.from_dict(json.load(f))
        except json.JSONDecodeError as e:
            raise PlacementError(f"{s}: bad placement JSON: {e.msg} (line {e.lineno})") from None
    raise PlacementError(f"bad placement {arg!r}: group numbers (1,1,0,0), JSON or a JSON file")


def layer_words(cfg, m: int, n: int) -> int:
    """Words of an ``m x n`` layer's padded weights on one core of ``cfg``."""
    return local_len(m, cfg.nr) * local_len(n, cfg.nr) * cfg.nr * cfg.nr


def weight_copy_words(mlp, placement: Placement, l: int) -> int:
    """Words crossing the ring per step to keep layer ``l``'s weights where its phases
    run: ``2 m n`` (there and back, the update changes them) when its backward or update
    group differs from its forward group, else 0."""
    p = placement.layers[l]
    if p.forward == p.backward == p.update:
        return 0
    m, n = mlp.shape(l)
    return 2 * m * n


def check_placement(hcfg, mlp, placement: Placement, transfers: str = "ring") -> None:
    """Raise :class:`PlacementError` (one line) unless ``placement`` fits ``hcfg`` and
    ``mlp`` and is one the compiler compiles (``transfers="host"``: on groups of one
    number format; over the ring the crossings convert)."""
    nl, ng = mlp.n_layers, len(hcfg.groups)
    if len(placement.layers) != nl:
        raise PlacementError(f"placement has {len(placement.layers)} layers, the network {nl}")
    for l, p in enumerate(placement.layers):
        for name, g in (("forward", p.forward), ("backward", p.backward), ("update", p.update)):
            if not 0 <= g < ng:
                raise PlacementError(f"layer {l}: {name} group {g} does not exist (the chip has {ng} groups)")
        if p.core is not None and p.core >= hcfg.groups[p.forward].count:
            raise PlacementError(f"layer {l}: core {p.core} of group {p.forward}, which has "
                                 f"{hcfg.groups[p.forward].count} cores")
        if weight_copy_words(mlp, placement, l):
            m, n = mlp.shape(l)
            raise PlacementError(f"layer {l}: forward on group {p.forward}, backward on {p.backward}, update on "
                                 f"{p.update} needs its {m} x {n} weights copied between the groups every step "
                                 f"({weight_copy_words(mlp, placement, l)} words); not compiled: place its phases "
                                 f"on one group")
    fmts = {str(c.fmt) for c in hcfg.group_cfgs}
    used = {hcfg.group_cfgs[p.forward].fmt.name for p in placement.layers}
    if len(used) > 1 and transfers == "host":
        raise PlacementError(f"layers on groups of different number formats ({', '.join(sorted(fmts))}) with "
                             f"host transfers: not compiled (the ring's crossings convert; the host does not)")
