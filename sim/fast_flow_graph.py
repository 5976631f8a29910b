"""Compile-time structures of the loop-level dataflow engine (:mod:`sim.fast_flow`).

The instructions of a region (:class:`Instr`), its value nodes (:class:`Node`), their
writes into a resource (:class:`Writes`), operand reads (:class:`Read`) and where their
values are in the plan's value table (:class:`Ref`), the sorted writes of a
register-like resource (:class:`ResIndex`), and :class:`FlowFail`, raised for a region
the engine does not evaluate.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FlowFail", "Instr", "Node", "Writes", "Read", "Ref", "ResIndex", "uniq", "group_columns", "to2d",
           "cat_refs"]


class FlowFail(Exception):
    """The region's dependency graph has a cycle the dataflow engine does not evaluate.

    ``memory``: the cycle goes through an SRAM word written and read back in the region
    (cutting the region in time between the write and the read may remove it)."""

    def __init__(self, msg, memory: bool = False):
        super().__init__(msg)
        self.memory = memory


def uniq(a) -> list:
    """Distinct values of a small-range int array (faster than np.unique for our sizes)."""
    a = np.asarray(a)
    if a.size == 0:
        return []
    mn = int(a.min())
    mx = int(a.max())
    if mn == mx:
        return [mn]
    return (np.flatnonzero(np.bincount((a - mn).reshape(-1))) + mn).tolist()


def group_columns(m: np.ndarray):
    """Group equal columns of a matrix [R, P]: (number of groups, group of each column)."""
    P = m.shape[1]
    if m.shape[0] == 0 or (m == m[:, :1]).all():
        return 1, np.zeros(P, np.int64)
    if m.dtype == bool and m.shape[0] <= 62:
        key = (m.astype(np.int64) << np.arange(m.shape[0], dtype=np.int64)[:, None]).sum(axis=0)
        _, inv = np.unique(key, return_inverse=True)
        return int(inv.max()) + 1, inv.reshape(-1)
    # each column as one opaque value of its bytes (sorted by memcmp, far faster than
    # np.unique(axis=0)'s field by field comparison); groups numbered by their first column
    cols = np.ascontiguousarray(m.T)
    _, first, inv = np.unique(cols.view(np.dtype((np.void, cols.dtype.itemsize * cols.shape[1]))).reshape(-1),
                              return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    inv = rank[inv.reshape(-1)]
    return len(first), inv


class Instr:
    """All occurrences of one instruction (pc) in the region."""

    __slots__ = ("u", "t", "addr", "virtual", "pred", "hin", "hout", "hlast", "k_op", "s", "bus", "lane_occ")

    def __init__(self, u, t, addr, virtual=False):
        self.u = u              # Tmpl
        self.t = t              # issue cycles [k] (sorted)
        self.addr = addr        # (ra, rb, wa, wb) addresses [k, Q]
        self.virtual = virtual  # the operand stage entering the region (issue at -1)
        self.bus = {}


class Node:
    """A value node: ``k`` rows of ``V`` from row ``base``."""

    __slots__ = ("kind", "k", "deps", "reads", "level", "base", "info", "bound")

    def __init__(self, kind, k, bound=False, **info):
        self.kind, self.k = kind, k
        self.deps = set()
        self.reads = {}
        self.level = -1
        self.base = -1
        self.info = info
        self.bound = bound

    def __repr__(self):
        return f"<{self.kind} k={self.k} {self.info.get('name', '')}>"


class Writes:
    """Writes of a node into a resource: cycles [m], priority, PE mask ([P] or [m, P]),
    occurrence (row offset in the node) of each write, SRAM addresses."""

    __slots__ = ("node", "cyc", "prio", "mask", "occ", "addr")

    def __init__(self, node, cyc, prio, mask, occ=None, addr=None):
        self.node, self.cyc, self.prio, self.mask = node, cyc, prio, mask
        self.occ = np.arange(len(cyc)) if occ is None else occ
        self.addr = addr


class Read:
    """An operand read: ``kind`` rf (a = register), rd (a = bank), const (a = value), bus
    (a = (Instr, axis)); ``cyc`` the cycles; after resolution ``res`` per PE group
    ``(pes or None, wid, occ)``."""

    __slots__ = ("kind", "a", "cyc", "res", "ref", "deps", "batch")

    def __init__(self, kind, a, cyc=None):
        self.kind, self.a, self.cyc = kind, a, cyc
        self.res = None
        self.ref = None
        self.deps = set()
        self.batch = None


class Ref:
    """Where the values of a read are in ``V``: ``rows`` [k] (all PEs read their own
    column) or [k, P]; ``cols`` None (own column) or [k, P]; or ``rows`` [k] and
    ``cmap`` [P]: PE ``p`` reads column ``cmap[p]`` of every row (a bus driven from
    values in one row per read). A compiled plan holds the [k, P] forms as ``flat``
    indices into ``V.reshape(-1)`` instead (:func:`sim.fast_flow_plan.flatten`)."""

    __slots__ = ("rows", "cols", "flat", "cmap")

    def __init__(self, rows, cols=None, flat=None, cmap=None):
        self.rows, self.cols, self.flat, self.cmap = rows, cols, flat, cmap

    def head(self, i, j):
        """The reads ``i .. j - 1``."""
        return Ref(self.rows[i:j], None if self.cols is None else self.cols[i:j], None, self.cmap)


class ResIndex:
    """Sorted writes of one register-like resource, per group of PEs."""

    def __init__(self, writers, P):
        self.writers = writers
        if not writers:
            self.groups = [(None, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))]
            return
        masks = np.array([w.mask for w in writers], dtype=bool).reshape(len(writers), P)
        ng, inv = group_columns(masks)
        self.groups = []
        for g in range(ng):
            pes = None if ng == 1 else np.nonzero(inv == g)[0]
            act = masks[:, 0 if pes is None else pes[0]]
            keys, wid, occ = [], [], []
            for i, w in enumerate(writers):
                if act[i] and len(w.cyc):
                    keys.append(w.cyc * 2 + w.prio)
                    wid.append(np.full(len(w.cyc), i, np.int64))
                    occ.append(w.occ)
            if keys:
                keys = np.concatenate(keys)
                order = np.argsort(keys, kind="stable")
                self.groups.append((pes, keys[order], np.concatenate(wid)[order], np.concatenate(occ)[order]))
            else:
                self.groups.append((pes, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)))

    def resolve(self, cycles):
        out = []
        key = np.asarray(cycles, np.int64) * 2
        for pes, keys, wid, occ in self.groups:
            if len(keys) == 0:
                out.append((pes, np.full(len(key), -1, np.int64), np.zeros(len(key), np.int64)))
                continue
            pos = np.searchsorted(keys, key, side="left") - 1
            ok = pos >= 0
            pc = np.maximum(pos, 0)
            out.append((pes, np.where(ok, wid[pc], -1), np.where(ok, occ[pc], 0)))
        return out

    def deps(self, res):
        out = set()
        for _, wid, _ in res:
            for w in uniq(wid):
                if w >= 0:
                    out.add(self.writers[w].node)
        return out


def to2d(ref, P, pidx):
    """The rows and columns of ``ref`` as two arrays [k, P]."""
    rows = ref.rows if ref.rows.ndim == 2 else np.broadcast_to(ref.rows[:, None], (len(ref.rows), P))
    if ref.cmap is not None:
        return rows, np.broadcast_to(ref.cmap, rows.shape)
    cols = ref.cols if ref.cols is not None else np.broadcast_to(pidx, rows.shape)
    return rows, cols


def cat_refs(refs, P, pidx):
    """One :class:`Ref` for the reads of ``refs`` one after the other."""
    refs = [r for r in refs if len(r.rows)]
    if not refs:
        return Ref(np.zeros(0, np.int64))
    if len(refs) == 1:
        return refs[0]
    if all(r.cols is None and r.rows.ndim == 1 for r in refs):
        cm = refs[0].cmap
        if all(r.cmap is None for r in refs):
            return Ref(np.concatenate([r.rows for r in refs]))
        if cm is not None and all(r.cmap is not None and np.array_equal(r.cmap, cm) for r in refs):
            return Ref(np.concatenate([r.rows for r in refs]), cmap=cm)
    if all(r.cols is None and r.cmap is None for r in refs):
        return Ref(np.concatenate([r.rows if r.rows.ndim == 2 else np.broadcast_to(r.rows[:, None], (len(r.rows), P))
                                   for r in refs]))
    rc = [to2d(r, P, pidx) for r in refs]
    return Ref(np.concatenate([a for a, _ in rc]), np.concatenate([b for _, b in rc]))
