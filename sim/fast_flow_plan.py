"""Execution of a compiled region of the loop-level dataflow engine: :class:`Plan`.

A plan binds the region's entry values (register file, read ports, constants, host
lanes, FMAs in flight) into its value table, runs its batches (gathers and one
arithmetic operation each; accumulation chains along the chain) and returns the commit
of the exit state (:mod:`sim.fast_flow` describes the engine).
"""

from __future__ import annotations

import numpy as np

from arch.lanes import pack_beats
from arch.microop import MvOp
from sim.fast_common import AddEntry, MulEntry
from sim.fast_flow_graph import Ref

__all__ = ["Plan", "plan_nbytes", "flatten"]


class Plan:
    """A compiled region (see the module doc). :meth:`run` executes it on a state."""

    def run(self, model, st, lanes_all, lane_of, x):
        P = self.P
        A = model.arith
        V = np.empty((self.rows, P), self.ut)
        # entry values
        V[self.rf_row0:self.rf_row0 + self.n_regs] = st.rf.T
        V[self.rd_row] = st.rd_a
        V[self.rd_row + 1] = st.rd_b
        for row, val in self.consts:
            V[row] = val
        direct = getattr(self, "host_direct", ())
        lanes = []
        for i, (row0, axis, steps, s1_host) in enumerate(self.host):
            if steps is not None and len(steps):
                ln = lanes_all[lane_of[x + steps]]
            else:
                ln = np.zeros((0, self.nr), self.ut)
            if s1_host:
                ln = np.concatenate([st.op_lanes.reshape(1, -1), ln])
            lanes.append(ln)
            if i in direct:         # read by the exit's SRAM writes alone, from the lanes
                continue
            # PE (r, c) hears lane r of a row beat, lane c of a column beat (Geometry.row / .col)
            blk = V[row0:row0 + len(ln)].reshape(len(ln), self.nr, self.nr)
            blk[:] = ln[:, :, None] if axis == "row" else ln[:, None, :]
        for row, what, i in self.pseudo:
            if what == "prod":
                V[row] = st.mp[i].product
            elif what == "cval":
                V[row] = st.mp[i].c
            else:
                V[row] = st.ap[i].value
        mem = {"a": st.mem_a, "b": st.mem_b}
        pidx = self.pidx
        for b in self.batches:
            kind = b[0]
            if kind == "memread":
                _, bank, s, e, addr, hits = b
                if addr.ndim == 1:          # the same address on every PE
                    V[s:e] = mem[bank].take(addr, axis=1).T
                else:                       # flat indices into the bank (flatten)
                    V[s:e] = mem[bank].reshape(-1).take(addr)
                if hits is not None:
                    dst, src = hits
                    Vf = V.reshape(-1)
                    Vf[dst] = Vf.take(src)
            elif kind == "prod":
                _, s, e, ra, rb = b
                V[s:e] = A.mul(_gather(V, ra, pidx), _gather(V, rb, pidx))
            elif kind == "fma":
                _, s, e, prows, rc = b
                V[s:e] = A.add(V.take(prows, axis=0), _gather(V, rc, pidx))
            elif kind == "mv":
                _, op, s, e, rs, rm = b
                v = _gather(V, rs, pidx)
                if op == MvOp.RELU:
                    v = A.relu(v)
                elif op == MvOp.MASK:
                    v = A.mask(v, _gather(V, rm, pidx))
                V[s:e] = v
            elif kind == "chain":
                _, pes, head, prows, rrows = b
                nch, L = (prows.shape[1], prows.shape[0]) if pes is not None else prows.shape
                if pes is None:
                    seq = np.empty((L + 1, nch, P), self.ut)
                    seq[0] = _gather(V, head, pidx)
                    seq[1:] = V.take(prows.T, axis=0)
                    acc = A.accumulate(seq, axis=0)
                    V[rrows.T] = acc[1:]
                else:                       # flat indices [nch, G], [L, nch, G] (flatten)
                    G = len(pes)
                    Vf = V.reshape(-1)
                    seq = np.empty((L + 1, nch, G), self.ut)
                    seq[0] = Vf.take(head.flat)
                    seq[1:] = Vf.take(prows)
                    acc = A.accumulate(seq, axis=0)
                    Vf[rrows] = acc[1:]
            else:
                raise AssertionError(kind)
        return self._commit_fn(V, st, lanes_all, lane_of, x, lanes)

    def _mem_values(self, V, lanes):
        """The values of the exit's SRAM writes (see :meth:`_commit_fn`)."""
        Vf = V.reshape(-1)
        out = []
        for kind, bank, pes, mi, vi in self.final_mem:
            if kind == "flat":
                v = Vf.take(vi)
            elif kind == "lanes":       # vi = (host block, positions in it, each PE's lane)
                blk, pos, lane = vi
                v = lanes[blk][pos].take(lane, axis=1).T
            elif isinstance(vi, slice):     # evenly spaced rows: a view of V
                v = (V[vi] if pes is None else V[vi][:, pes]).T
            elif vi.ndim == 2:
                v = Vf.take(vi).T
            else:
                v = (V.take(vi, axis=0) if pes is None else V[vi, pes] if isinstance(pes, slice)
                     else V[vi[:, None], pes]).T
            out.append((bank, pes, mi, v))
        return out

    def _commit_fn(self, V, st, lanes_all, lane_of, x, lanes=()):
        pidx = self.pidx
        new_rf = st.rf.copy()
        for r, ref in self.final_rf:
            new_rf[:, r] = _gather(V, ref, pidx)[0]
        new_rd = [st.rd_a, st.rd_b]
        for i, ref in self.final_rd:
            new_rd[i] = np.array(_gather(V, ref, pidx)[0])
        Vf = V.reshape(-1)
        # "class": words mi of the PEs pes (None: all) from rows vi of V (the PE's own
        # column) or from flat indices vi [words, pes]; "lanes": from a host block's lanes;
        # "flat": flat indices into the bank
        mem_up = self._mem_values(V, lanes)
        mp = [None] * len(self.exit_mp)
        for i, e in enumerate(self.exit_mp):
            if e is not None:
                valid, dst, prow, c_rf, c, wb, waddr = e
                cv = c if c_rf else np.array(_gather(V, c, pidx)[0])
                mp[i] = MulEntry(valid, dst, V[prow].copy(), c_rf, cv, wb, waddr)
        ap = [None] * len(self.exit_ap)
        for j, e in enumerate(self.exit_ap):
            if e is not None:
                valid, dst, vrow, wb, waddr = e
                ap[j] = AddEntry(valid, dst, V[vrow].copy(), wb, waddr)
        beats = []
        if self.hout is not None:
            flat, lasts = self.hout
            beats = list(zip(pack_beats(Vf.take(flat), self.w), lasts))
        plan = self
        s1_lanes = lanes_all[lane_of[x + self.n - 1]] if self.s1_tmpl.hin else None

        def commit(ctr, out):
            st.rf = new_rf
            st.rd_a, st.rd_b = new_rd
            for bank, pes, mi, vv in mem_up:
                mem = st.mem_a if bank == "a" else st.mem_b
                if vv.ndim == 1:            # flat indices (flatten)
                    mem.reshape(-1)[mi] = vv
                elif pes is None:           # every PE: words mi <- rows of V
                    mem[:, mi] = vv
                else:                       # pes, mi: index arrays or slices
                    mem[pes if isinstance(mi, slice) or isinstance(pes, slice) else pes[:, None], mi] = vv
            cols = plan.ar_cols
            if len(cols) == st.ar.shape[1]:
                st.ar = plan.final_ar.copy()
                st.stride = plan.final_stride.copy()
            else:
                st.ar, st.stride = st.ar.copy(), st.stride.copy()
                st.ar[:, cols] = plan.final_ar[:, cols]
                st.stride[:, cols] = plan.final_stride[:, cols]
            u = plan.s1_tmpl
            st.s1 = u
            st.s1_pred = u.pred
            st.s1_addr = plan.s1_addr
            st.op_hin = u.hin
            if u.hin:
                st.op_lanes = s1_lanes
            st.op_hout, st.op_hlast = u.hout, u.hlast
            st.mp, st.ap = mp, ap
            ctr.fma += plan.ev_fma
            for k2, v in plan.ev.items():
                ctr.ev[k2] += v
            ctr.row_hops += plan.row_hops
            ctr.col_hops += plan.col_hops
            out.extend(beats)

        return commit


def plan_nbytes(obj) -> int:
    """Bytes of the numpy arrays reachable through tuples / lists / Refs (plan size)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes if obj.base is None else 0
    if isinstance(obj, Ref):
        return plan_nbytes(obj.rows) + plan_nbytes(obj.cols) + plan_nbytes(obj.flat) + plan_nbytes(obj.cmap)
    if isinstance(obj, (tuple, list)):
        return sum(plan_nbytes(o) for o in obj)
    return 0


def _flat_ref(ref, P, pidx):
    """``ref`` for :func:`_gather` at run time: [k, P] rows / columns as flat indices."""
    if ref.cols is None and ref.rows.ndim == 1:
        return ref          # own columns, or a column map (cmap): gathered by rows
    cols = pidx if ref.cols is None else ref.cols
    return Ref(None, None, np.ascontiguousarray(ref.rows * P + cols))


def flatten(plan, P, depth: dict):
    """The compiled plan's two-dimensional indices into ``V`` ([rows, PEs]) and into the
    SRAM banks ([PEs, words]) as indices into the flattened arrays (one fancy index
    instead of two; ``depth``: words per PE of each bank): reads of the batches, the
    exit state, SRAM reads and their hits, the last SRAM writes, the output beats."""
    pidx = np.arange(P)
    out = []
    for b in plan.batches:
        kind = b[0]
        if kind == "memread":
            _, bank, s, e, addr, hits = b
            if addr.ndim == 2:
                addr = np.ascontiguousarray(addr + pidx * depth[bank])
            if hits is not None:
                dr, dc, sr, sc = hits
                hits = (dr * P + dc, sr * P + sc)
            b = (kind, bank, s, e, addr, hits)
        elif kind == "prod":
            b = (kind, b[1], b[2], _flat_ref(b[3], P, pidx), _flat_ref(b[4], P, pidx))
        elif kind == "fma":
            b = (kind, b[1], b[2], b[3], _flat_ref(b[4], P, pidx))
        elif kind == "mv":
            b = (kind, b[1], b[2], b[3], _flat_ref(b[4], P, pidx), None if b[5] is None else _flat_ref(b[5], P, pidx))
        elif kind == "chain" and b[1] is not None:
            _, pes, head, prows, rrows = b
            b = (kind, pes, Ref(None, None, head.rows[:, None] * P + pes[None, :]),
                 np.ascontiguousarray(prows.T[:, :, None] * P + pes[None, None, :]),
                 np.ascontiguousarray(rrows.T[:, :, None] * P + pes[None, None, :]))
        out.append(b)
    plan.batches = out
    plan.final_rf = [(r, _flat_ref(ref, P, pidx)) for r, ref in plan.final_rf]
    plan.final_rd = [(i, _flat_ref(ref, P, pidx)) for i, ref in plan.final_rd]
    plan.final_mem = [e if e[0] == "class" else ("flat", e[1], None, e[2] * depth[e[1]] + e[3], e[4] * P + e[5])
                      for e in plan.final_mem]
    plan.exit_mp = [e if e is None or e[3] else e[:4] + (_flat_ref(e[4], P, pidx),) + e[5:] for e in plan.exit_mp]
    if plan.hout is not None:
        rows, cols, lasts = plan.hout
        plan.hout = (rows * P + cols, lasts)
    _host_direct(plan)
    plan.final_mem = [(kind, bank, _as_slice(pes), _as_slice(mi), _as_slice(vi) if kind == "class" else
                       (vi[0], _as_slice(vi[1]), vi[2]) if kind == "lanes" else vi)
                      for kind, bank, pes, mi, vi in plan.final_mem]


def _as_slice(a):
    """``a`` (an index array) as a slice when it is evenly spaced increasing ints (basic
    indexing: views and strided copies instead of gathers and scatters)."""
    if isinstance(a, np.ndarray) and a.ndim == 1 and len(a) > 1:
        d = int(a[1]) - int(a[0])
        if d > 0 and int(a[-1]) - int(a[0]) == d * (len(a) - 1) and (np.diff(a) == d).all():
            return slice(int(a[0]), int(a[-1]) + 1, d)
    return a


def _host_direct(plan):
    """A region that only moves host beats into SRAM (no batches; the exit reads nothing
    of ``V`` but its SRAM writes): the writes of host values take them from the host
    block's lanes ("lanes": block, positions in it, the lane each PE hears), and a block
    no other write reads is not spread over ``V`` (:attr:`Plan.host_direct`)."""
    plan.host_direct = ()
    if plan.batches or plan.final_rf or plan.final_rd or plan.hout is not None or \
            any(e is not None for e in plan.exit_mp + plan.exit_ap):
        return
    nr, P = plan.nr, plan.P
    blocks = [(row0, row0 + (len(steps) if steps is not None else 0) + int(s1_host), axis)
              for row0, axis, steps, s1_host in plan.host]
    used, out = set(), []
    for e in plan.final_mem:
        kind, bank, pes, mi, vi = e
        if kind == "class" and vi.ndim == 1 and len(vi):
            lo, hi = int(vi.min()), int(vi.max())
            hit = [i for i, (a, b, _) in enumerate(blocks) if a <= lo and hi < b]
            if hit:
                a, _, axis = blocks[hit[0]]
                pp = plan.pidx if pes is None else pes
                # PE (r, c) hears lane r of a row beat, lane c of a column beat
                out.append(("lanes", bank, pes, mi, (hit[0], vi - a, pp // nr if axis == "row" else pp % nr)))
                continue
        rows = vi if kind == "class" and vi.ndim == 1 else vi // P      # flat indices: their rows
        used |= {i for i, (a, b, _) in enumerate(blocks) if ((rows >= a) & (rows < b)).any()}
        out.append(e)
    plan.final_mem = out
    plan.host_direct = tuple(i for i in range(len(blocks)) if i not in used)


def _gather(V, ref, pidx):
    # integer index arrays: ``take`` gives fancy indexing's result, faster
    if ref.flat is not None:
        return V.reshape(-1).take(ref.flat)
    if ref.cmap is not None:
        return V.take(ref.rows, axis=0).take(ref.cmap, axis=1)
    if ref.cols is None:
        if ref.rows.ndim == 1:
            return V.take(ref.rows, axis=0)
        return V[ref.rows, pidx]
    return V[ref.rows, ref.cols]
