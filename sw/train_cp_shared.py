"""Several consecutive layers on one core of a batch-1 CP pipeline.

A core of layers ``a .. b`` (each on that core alone: one-core groups; ``shared`` names
the layers ``a+1 .. b``, each on the core of the layer before) holds every layer's
regions in one allocator: layer ``a``'s under their names, layer ``l > a``'s as
``name@l`` (:func:`sw.train_cp_ops.rname`). Its step does what the layers' own cores
would do, with the chains between them replaced by the core's own memory:

* head: the layers from the last to the first, each its own head ops
  (:func:`sw.train_cp_ops._head_ops`), except that the GEMV of layer ``l > a`` reads
  ``z`` of layer ``l - 1`` (diag; the activation that layer computed last step, which
  its own head, later in this one, overwrites) and leaves its column broadcast in ``ain``
  of layer ``l`` (the copy the kernel makes at no cost): the values the chains would
  have delivered;
* tail: every layer's tail ops, then per boundary ``l - 1 | l`` a copy of ``e`` of
  layer ``l`` (masked in the head) into ``din`` of layer ``l - 1`` (diag), the slice
  the chains' reduce and scatter would have stored; the chains leave and enter the core
  as those of layers ``a`` and ``b``.

The arithmetic of every layer is the one of its own core, so
:class:`sw.golden_train_cp.GoldenChipCP` models it unchanged. The layers' panels stay
in the PE memories (never paged).
"""

from __future__ import annotations

from dataclasses import replace

from sw.kernels import emit_copy, emit_gemv
from sw.layout import local_len
from sw.train_alloc import Allocator
from sw.train_cp_ops import Kit, _kern, rname

__all__ = ["SharedKit", "LayerView", "allocate_shared"]


class LayerView:
    """Layer ``l``'s regions of a core's allocator under their plain names (the
    ``items`` and ``meta`` the single-layer builders read)."""

    def __init__(self, al, l: int):
        layers = al.meta.get("layers")
        if not layers or l == layers[0]:
            self.items = {n: it for n, it in al.items.items() if "@" not in n}
        else:
            suf = f"@{l}"
            self.items = {n[:-len(suf)]: it for n, it in al.items.items() if n.endswith(suf)}
        self.meta = {k: v for k, v in al.meta.items() if k not in ("layers", "fused")}
        self.cfg = al.cfg

    def regions(self) -> dict:
        return {n: it.region for n, it in self.items.items()}


class _Suffixed:
    """Allocates into ``al`` as ``name@l`` (the allocator a single-layer builder fills)."""

    def __init__(self, al: Allocator, l: int):
        self.al, self.suf, self.cfg, self.meta = al, f"@{l}", al.cfg, {}

    def alloc(self, name: str, words: int, what: str, **kw):
        return self.al.alloc(name + self.suf, words, what, **kw)

    @property
    def items(self) -> dict:
        return {n[:-len(self.suf)]: it for n, it in self.al.items.items() if n.endswith(self.suf)}

    def __getattr__(self, name):
        return getattr(self.al, name)


def allocate_shared(kit: Kit, cfg, mlp, P: list, N: list, layers: list, V: int, softmax, fused: list) -> Allocator:
    """One allocator holding the regions of ``layers`` (consecutive, first to last) on a
    core: the first under their names, the others as ``name@l``."""
    al = Allocator(cfg)
    for l in layers:
        into = al if l == layers[0] else _Suffixed(al, l)
        kit.allocate(cfg, mlp, P, N, (l, 0), V, softmax, fused[l], into=into, copy_in=l != layers[0])
    al.meta["layers"] = list(layers)
    al.meta["fused"] = {l: bool(fused[l]) for l in layers}
    return al


def _named(ops: list, l: int) -> list:
    """``ops`` with their names prefixed by the layer (the breakdown tells them apart)."""
    return [replace(op, name=f"L{l}.{op.name}") for op in ops]


def _shared_head(kit, cfg, mlp, al, P, N, softmax) -> list:
    """The head of a core of several layers (module docstring): last layer first."""
    layers = al.meta["layers"]
    ops = []
    for l in reversed(layers):
        v = LayerView(al, l)
        h = kit.head(cfg, mlp, v, P, N, (l, 0), softmax, al.meta["fused"][l])
        if l != layers[0]:
            R, zp = v.regions(), LayerView(al, l - 1).regions()["z"]
            W, ain, z = R["W"], R["ain"], R["z"]
            nw, s, wn = local_len(N[l], cfg.nr), P[l] // cfg.nr, local_len(P[l], cfg.nr) * local_len(N[l], cfg.nr)
            assert h[0].kind == "gemv", h[0]
            h[0] = _kern("gemv", "gemv", lambda b, l=l, W=W, zp=zp, ain=ain, z=z:
                         emit_gemv(b, cfg, P[l], N[l], W, zp, z, x_layout="diag", x_copy=ain, name="fw_"),
                         [(W, wn), (zp, nw)], [(z, s), (ain, nw + 1)])
        ops += _named(h, l)
    return ops


def _shared_tail(kit, cfg, mlp, al, P, N, j: int, V: int, groups: list, dual: bool) -> list:
    """The tail of a core of several layers before the chains (module docstring)."""
    layers = al.meta["layers"]
    ops = []
    for l in layers:
        ops += _named(kit.tail(cfg, mlp, LayerView(al, l), P, N, (l, 0), j, V, groups, dual and l == layers[0]), l)
    for l in layers[1:]:
        e, din = LayerView(al, l).regions()["e"], LayerView(al, l - 1).regions()["din"]
        s = P[l - 1] // cfg.nr
        ops.append(_kern(f"d{l - 1}", "copy", lambda b, e=e, din=din, s=s, l=l:
                         emit_copy(b, cfg, s, e, din, layout="diag", name=f"cd{l}_"), [(e, s)], [(din, s)]))
    return ops


def _shared_ring_rw(cfg, mlp, al) -> tuple:
    """``(reads, writes)`` of the chains on a core of several layers: ``z`` of its last
    layer (hidden), ``e`` of its first, ``xin``; ``ain`` and the history of its first,
    ``din`` of its last."""
    layers = al.meta["layers"]
    it = al.items
    words = lambda n: (it[n].region, it[n].words)      # noqa: E731
    b = layers[-1]
    reads = [words(n) for n in (rname(al, b, "z") if b < mlp.n_layers - 1 else None, "e", "xin") if n in it]
    writes = [words(n) for n in ("ain", rname(al, b, "din"), "hist") if n in it]
    return reads, writes


class SharedKit:
    """A :class:`sw.train_cp_ops.Kit` whose builders also take cores of several layers
    (an allocator with ``meta["layers"]``), delegating the others to ``kit``."""

    def __init__(self, kit: Kit):
        self.kit = kit
        self.allocate, self.streams, self.host = kit.allocate, kit.streams, kit.host
        self.ring_text, self.program, self.head2 = kit.ring_text, kit.program, kit.head2

    def head(self, cfg, mlp, al, P, N, stage, softmax, fused=False, sp=None):
        if "layers" in al.meta:
            return _shared_head(self.kit, cfg, mlp, al, P, N, softmax)
        return self.kit.head(cfg, mlp, al, P, N, stage, softmax, fused, sp=sp)

    def tail(self, cfg, mlp, al, P, N, stage, j, V, groups, dual=False):
        if "layers" in al.meta:
            return _shared_tail(self.kit, cfg, mlp, al, P, N, j, V, groups, dual)
        return self.kit.tail(cfg, mlp, al, P, N, stage, j, V, groups, dual)

    def ring_rw(self, cfg, mlp, al, P, N, stage):
        if "layers" in al.meta:
            return _shared_ring_rw(cfg, mlp, al)
        return self.kit.ring_rw(cfg, mlp, al, P, N, stage)
