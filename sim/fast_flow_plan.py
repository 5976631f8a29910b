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

__all__ = ["Plan", "plan_nbytes"]


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
        for row0, axis, steps, s1_host in self.host:
            if steps is not None and len(steps):
                ln = lanes_all[lane_of[x + steps]]
            else:
                ln = np.zeros((0, self.nr), self.ut)
            if s1_host:
                ln = np.concatenate([st.op_lanes.reshape(1, -1), ln])
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
                    V[s:e] = mem[bank][:, addr].T
                else:
                    V[s:e] = mem[bank][pidx, addr]
                if hits is not None:
                    dr, dc, sr, sc = hits
                    V[dr, dc] = V[sr, sc]
            elif kind == "prod":
                _, s, e, ra, rb = b
                V[s:e] = A.mul(_gather(V, ra, pidx), _gather(V, rb, pidx))
            elif kind == "fma":
                _, s, e, prows, rc = b
                V[s:e] = A.add(V[prows], _gather(V, rc, pidx))
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
                nch, L = prows.shape
                if pes is None:
                    seq = np.empty((L + 1, nch, P), self.ut)
                    seq[0] = _gather(V, head, pidx)
                    seq[1:] = V[prows.T]
                    acc = A.accumulate(seq, axis=0)
                    V[rrows.T] = acc[1:]
                else:
                    G = len(pes)
                    seq = np.empty((L + 1, nch, G), self.ut)
                    seq[0] = V[head.rows[:, None], pes[None, :]]
                    seq[1:] = V[prows.T[:, :, None], pes[None, None, :]]
                    acc = A.accumulate(seq, axis=0)
                    V[rrows.T[:, :, None], pes[None, None, :]] = acc[1:]
            else:
                raise AssertionError(kind)
        return self._commit_fn(V, st, lanes_all, lane_of, x)

    def _commit_fn(self, V, st, lanes_all, lane_of, x):
        pidx = self.pidx
        new_rf = st.rf.copy()
        for r, ref in self.final_rf:
            new_rf[:, r] = _gather(V, ref, pidx)[0]
        new_rd = [st.rd_a, st.rd_b]
        for i, ref in self.final_rd:
            new_rd[i] = np.array(_gather(V, ref, pidx)[0])
        mem_up = [(bank, pp, aa, V[rr, cc]) for bank, pp, aa, rr, cc in self.final_mem]
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
            rows, cols, lasts = self.hout
            beats = list(zip(pack_beats(V[rows, cols], self.w), lasts))
        plan = self
        s1_lanes = lanes_all[lane_of[x + self.n - 1]] if self.s1_tmpl.hin else None

        def commit(ctr, out):
            st.rf = new_rf
            st.rd_a, st.rd_b = new_rd
            for bank, pp, aa, vv in mem_up:
                (st.mem_a if bank == "a" else st.mem_b)[pp, aa] = vv
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
        return plan_nbytes(obj.rows) + plan_nbytes(obj.cols)
    if isinstance(obj, (tuple, list)):
        return sum(plan_nbytes(o) for o in obj)
    return 0


def _gather(V, ref, pidx):
    if ref.cols is None:
        if ref.rows.ndim == 1:
            return V[ref.rows]
        return V[ref.rows, pidx]
    return V[ref.rows, ref.cols]
