"""The softmax-gradient kernel (:mod:`sw.softmax`) in a training step: its regions
(:func:`alloc_softmax`), the loads of its constants and its op."""

from __future__ import annotations

import numpy as np

from sw.collectives import Frag, Region
from sw.layout import local_len
from sw.softmax import emit_softmax_grad, softmax_pen, softmax_plan, softmax_size, softmax_table
from sw.train_alloc import Allocator, _other
from sw.train_ops import Op

__all__ = ["alloc_softmax", "softmax_const_items", "softmax_op"]


def alloc_softmax(al: Allocator, cfg, n: int, words: int, forbid, g_where: str, t_where: str) -> None:
    """The regions of the softmax kernel (``n`` outputs, ``words`` per PE): ``g`` (not in
    ``forbid``), ``t`` in the other bank, the constant table (one copy per bank) and the
    penalty words."""
    g = al.alloc("g", words, f"output gradient softmax(z) - t ({g_where})", forbid=forbid)
    al.alloc("t", words, f"target ({t_where})", bank=_other(g.bank))
    p = softmax_plan(cfg, n)
    al.alloc("smx_ka", p.table_words, "softmax constants (every PE)", bank="a")
    al.alloc("smx_kb", p.table_words, "softmax constants (every PE)", bank="b")
    al.alloc("smx_pen", p.passes, "softmax padding penalties (per PE)")


def softmax_const_items(cfg, regions: dict, n: int) -> list:
    """``(Region, local)`` loads of the softmax kernel's constants (init phases)."""
    nr = cfg.nr
    tab = softmax_table(cfg, n)
    tl = np.ascontiguousarray(np.broadcast_to(tab, (nr, nr, len(tab))))
    return [(regions["smx_ka"], tl), (regions["smx_kb"], tl), (regions["smx_pen"], softmax_pen(cfg, n))]


def softmax_op(cfg, regions: dict, alloc: Allocator, n: int, z: Region, name: str = "softmax", *,
               z_layout: str = "rows", core: int | None = None) -> "Op":
    """The :class:`Op` of :func:`sw.softmax.emit_softmax_grad`: ``g = softmax(z) - t``.
    ``core`` (chip programs): the kernel runs on core 0; the other cores issue as many
    NOPs (a loop), so the cores stay in step."""
    idle = core is not None and core != 0
    w = local_len(n, cfg.nr)
    R = regions
    tw = alloc.items["smx_ka"].words

    def emit(b):
        if not idle:
            return emit_softmax_grad(b, cfg, n, z, R["t"], R["g"], R["smx_ka"], R["smx_kb"], R["smx_pen"],
                                     z_layout=z_layout, name="smx").instructions
        ins = softmax_size(cfg, n)[1]
        f = Frag()
        f.open_loop(f.ins(), "smxi", ins - 1, 0)
        f.ins()
        f.close_loop()
        f.emit(b)
        return ins

    return Op(name, "softmax", emit,
              reads=[(z, w), (R["t"], w), (R["smx_ka"], tw), (R["smx_kb"], tw),
                     (R["smx_pen"], alloc.items["smx_pen"].words)],
              writes=[(R["g"], w)], fma_wb=True, stores=False, per_core=core is not None)
