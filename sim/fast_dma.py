"""The DMA engine in the fast model (:class:`sim.fast_model.FastModel`): :func:`dma_plan`.

The DMA instructions of a RUN are few, so the plan walks them in order
(:class:`sim.dma_model.DmaPointers`) once the issue trace is known: the transfers, the
race check of ``docs/core.md`` ("The DMA engine") against the scratchpad pointer traces,
and the timing (:func:`sim.dma_model.dma_schedule`: the stalls of the starts and waits
that find the engine busy shift every later cycle, and the RUN ends once the engine is
idle). A stall freezes the whole core, so it changes no value: the engines run the
unstalled trace and only the cycle counters take the stalls.

Data: under the race rule a transfer's beats may move at any time in its window, so the
plan moves them at the RUN cycle ``s + 2`` of a start issued at ``s`` (every ``sout``
issued before the start has written the scratchpad by then, and no instruction before
the next wait may touch the region): a cut of the scratchpad plan's windows
(:class:`sim.fast_model._SpadRun` calls :meth:`DmaPlan.move` before each window).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from arch.isa import DmaOp
from arch.lanes import pack_beats, unpack_beats
from sim.core_model import pe_start_cycles
from sim.dma_model import DmaPointers, RegionCheck, dma_schedule

__all__ = ["DmaPlan", "dma_plan"]


class DmaPlan:
    """The transfers of one RUN: ``ops`` ``[(RUN cycle the beats move, Transfer)]``,
    the counters (``rd_beats``, ``wr_beats``, ``busy``, ``stalls``), the RUN's
    ``cycles`` with the stalls and the wait for the engine at the end, and the stalls
    ``stall_at`` (the unstalled RUN cycles of the DMA instructions that stall, and by how
    much: every later instruction issues that much later)."""

    def __init__(self, ops, rd_beats, wr_beats, busy, stalls, cycles, stall_at=((), ())):
        self.ops, self.rd_beats, self.wr_beats = ops, rd_beats, wr_beats
        self.busy, self.stalls, self.cycles = busy, stalls, cycles
        self.stall_at = stall_at
        self.pos = 0

    def shift(self, cycles) -> np.ndarray:
        """The cycles the instructions at unstalled RUN cycles ``cycles`` issue later."""
        at, n = (np.asarray(x, np.int64) for x in self.stall_at)
        csum = np.concatenate([[0], np.cumsum(n)])
        return csum[np.searchsorted(at, np.asarray(cycles, np.int64), side="right")]

    @property
    def cuts(self) -> list:
        return [c for c, _ in self.ops]

    def move(self, model, upto: int | None = None) -> None:
        """Move the beats of the transfers whose cycle is at most ``upto`` (all: ``None``)
        between ``model.state.spad`` and ``model.dram``."""
        spad, dram = model.state.spad, model.dram
        w = model.w
        while self.pos < len(self.ops) and (upto is None or self.ops[self.pos][0] <= upto):
            t = self.ops[self.pos][1]
            if t.kind == DmaOp.LOAD:
                spad[t.spad:t.spad + t.n] = unpack_beats(dram.read(t.dram, t.n), model.nr, w, spad.dtype)
            else:
                dram.write(t.dram, pack_beats(spad[t.spad:t.spad + t.n], w))
            self.pos += 1

    def counters(self) -> dict:
        return {"dram_rd_beats": self.rd_beats, "dram_wr_beats": self.wr_beats, "dma_busy_cycles": self.busy,
                "dma_stall_cycles": self.stalls}


def _race_check(t, s, c, pcs, rd, wr, sin_t, sout_t) -> None:
    """The ``sin`` / ``sout`` of trace steps ``[s, c)`` against transfer ``t`` started at
    step ``s`` (sins from ``s + 1``; a sin on the start reads the old beat)."""
    rc = RegionCheck()
    rc.opened = [t]
    lo, hi = t.spad, t.spad + t.n
    w = np.nonzero(sout_t[s:c])[0] + s
    bad_w = w[(wr[w] >= lo) & (wr[w] < hi)]
    bad_r = np.zeros(0, np.int64)
    if t.kind == DmaOp.LOAD:
        r = np.nonzero(sin_t[s + 1:c])[0] + s + 1
        bad_r = r[(rd[r] >= lo) & (rd[r] < hi)]
    if len(bad_r) and (not len(bad_w) or bad_r[0] <= bad_w[0]):
        i = int(bad_r[0])
        rc.check(int(pcs[i]), int(rd[i]), None)
    if len(bad_w):
        i = int(bad_w[0])
        rc.check(int(pcs[i]), None, int(wr[i]))


def _closes(cfg, ev_steps, ev_t, keeps, k: int, end: int) -> int:
    """The trace step at which the region of the transfer started by DMA event ``k``
    closes: the next wait that does not keep it outstanding (fewer starts after it than
    the wait keeps), or the start ``cfg.dma_queue`` starts later (``end``: none)."""
    starts = 0
    for j in range(k + 1, len(ev_steps)):
        if ev_t[j] is None:
            if starts >= keeps[j]:
                return ev_steps[j]
            continue
        starts += 1
        if starts == cfg.dma_queue:
            return ev_steps[j]
    return end


def dma_plan(model, trace, rd, wr, sin_t, sout_t, n_cycles: int) -> DmaPlan | None:
    """The :class:`DmaPlan` of a RUN (``None`` without DMA instructions): ``rd`` / ``wr``
    the scratchpad pointer traces and ``sin_t`` / ``sout_t`` the accesses, per trace step;
    ``n_cycles`` the RUN's length without stalls."""
    cfg = model.cfg
    pcs = trace.pcs
    depth = cfg.ucode_depth
    dec = {int(pc): model.seq._decode(int(pc)) for pc in np.unique(pcs).tolist() if pc != depth}
    has = np.zeros(depth + 1, bool)
    for pc, d in dec.items():
        has[pc] = bool(d.dma or d.dma_sel)
    idx = np.nonzero(has[pcs])[0].tolist()
    if not idx:
        return None
    ptrs = DmaPointers(cfg)
    ev_steps, ev_t, keeps = [], [], []
    for i in idx:
        pc = int(pcs[i])
        d = dec[pc]
        t = ptrs.step(SimpleNamespace(dma=d.dma, dma_n=d.dma_n, dma_sel=d.dma_sel, dma_val=d.dma_val, pc=pc))
        if d.dma:
            ev_steps.append(i)
            ev_t.append(t)
            keeps.append(d.dma_n if t is None else 0)
    pre = pe_start_cycles(cfg)
    ops = []
    rd_beats = wr_beats = 0
    for k, (s, t) in enumerate(zip(ev_steps, ev_t)):
        if t is None:
            continue
        _race_check(t, s, _closes(cfg, ev_steps, ev_t, keeps, k, len(pcs)), pcs, rd, wr, sin_t, sout_t)
        ops.append((s + pre + 2, t))
        if t.kind == DmaOp.LOAD:
            rd_beats += t.n
        else:
            wr_beats += t.n
    # 1-based issue cycles without stalls: trace step j issues in RUN cycle j + pre
    # (cfg.dist_delay is 0 with DRAM)
    spans: list = []
    stalls, busy, cycles, each = dma_schedule(cfg, [s + pre for s in ev_steps], ev_t, n_cycles, spans, keeps)
    at = [(s + pre, x) for s, x in zip(ev_steps, each) if x]
    plan = DmaPlan(ops, rd_beats, wr_beats, busy, stalls, cycles, ([a for a, _ in at], [x for _, x in at]))
    plan.spans = spans          # (start cycle, busy cycles) per transfer (dma_schedule)
    return plan
