"""Layer 2 of the fast model: the loop-level dataflow engine.

A *region* is a window of cycles ``[0, n)`` of the RUN state (a loop nest, a few
iterations of one, or straight-line code), entered with the exact machine state of
:class:`~sim.fast_common.VecState` (including the micro-op in its operand stage and
the FMAs in flight) and left with the exact state at cycle ``n`` in the same form, so
regions and the per-cycle engine (:mod:`sim.fast_cycle`) can follow each other at any
cycle.

Inside a region every instruction address (pc) is a *node*; all its occurrences are
computed at once, as arrays ``[occurrences, PEs]``:

1. The address registers' whole trajectory (cumulative sums of their increments, reset
   at ``SET``s, strides forward-filled) gives every SRAM address of every occurrence.
2. Every operand read of every occurrence is resolved to the write that produced its
   value by the timing rules of ``docs/architecture.md`` (a read in cycle ``u`` sees the
   writes of cycles ``< u``; the FMA write-back wins over a move in the same cycle; an
   FMA write-back into SRAM drops the operand-stage write of that bank): register file
   writes by the move unit (operand stage) and FMA write-back (``fpu_latency - 1`` after
   issue, ``c`` read ``mul_latency`` after the operand stage), SRAM read-port registers
   (gated reads), SRAM words (address-keyed search over the region's writes), buses
   (the driver's operand read, or the host lane). Resolution is per group of PEs with
   the same predicate / gate masks.
3. The resolved reads define a dependency graph between *value nodes* (an
   instruction's SRAM reads, bus values, move result, FMA result, SRAM write data).
   Its strongly connected components are evaluated in topological order, each node
   once for all its occurrences with :class:`~sim.fast_common.Arith`. The only cycles
   accepted are *accumulation chains*: FMAs whose late ``c`` operand is the previous
   result of the chain (``mac r += a*b``, also interleaved or ping-pong chains), which
   are evaluated with ``np.add.accumulate`` along the chain, in its sequential order
   (bit-exact: each partial sum is rounded to the format). Any other cycle (a register
   swap, a product recurrence, an SRAM location read back by the loop that writes it)
   raises :class:`FlowFail` and the caller falls back to the per-cycle engine.
4. Counters are counted from the static structure (events per occurrence and PE
   masks), the output beats from the bus values, and the exit state (register file,
   SRAM, read ports, ARs, the operand stage and FMA pipeline at cycle ``n``) is
   gathered from the last writes.

:class:`FlowRunner` cuts a run into regions along the trace's loop spans (up to
``max_elems`` occurrence-PE elements per region) and falls back per region.
"""

from __future__ import annotations

import numpy as np

from pe.microop import ArOp, FmaWb, MvOp
from sim.fast_common import (SRC_COL, SRC_MEMA, SRC_MEMB, SRC_NZERO, SRC_ONE, SRC_ROW, SRC_ZERO, AddEntry,
                             MulEntry)
from sw.isa import HostDir

__all__ = ["FlowRunner", "FlowFail", "Region"]


class FlowFail(Exception):
    """The region's dependency graph has a cycle the dataflow engine does not evaluate."""


# -----------------------------------------------------------------------------------------
# nodes
# -----------------------------------------------------------------------------------------
class Instr:
    """All occurrences of one instruction (pc) in the region."""

    def __init__(self, u, t, addr, lanes, virtual=False):
        self.u = u              # Tmpl
        self.t = t              # issue cycles [k] (sorted)
        self.addr = addr        # (ra, rb, wa, wb) addresses [k, Q]
        self.lanes = lanes      # host lanes [k, nr] or None
        self.virtual = virtual  # the operand stage entering the region (issue at -1)
        self.busr = self.busc = None


class Node:
    """A value node: ``val`` [k, P] once evaluated."""

    __slots__ = ("kind", "ins", "k", "val", "deps", "reads", "pred", "done", "extra", "name")

    def __init__(self, kind, ins, k, pred, name=""):
        self.kind, self.ins, self.k, self.pred = kind, ins, k, pred
        self.val = None
        self.deps = set()
        self.reads = {}
        self.done = False
        self.extra = {}
        self.name = name

    def __repr__(self):
        return f"<{self.kind} {self.name}>"


class Writes:
    """Writes of one node into one resource: cycles [m] (sorted), priority, PE mask
    ([P] or [m, P]), occurrence index into the node's values."""

    __slots__ = ("node", "cyc", "prio", "mask", "occ", "addr")

    def __init__(self, node, cyc, prio, mask, occ=None, addr=None):
        self.node, self.cyc, self.prio, self.mask = node, cyc, prio, mask
        self.occ = np.arange(len(cyc)) if occ is None else occ
        self.addr = addr


class Res:
    """Resolution of reads: per PE group ``(pes or None, wid [k], occ [k])``; wid -1 =
    the value before the region."""

    __slots__ = ("groups", "writers")

    def __init__(self, groups, writers):
        self.groups, self.writers = groups, writers

    def deps(self):
        out = set()
        for _, wid, _ in self.groups:
            for w in np.unique(wid):
                if w >= 0:
                    out.add(self.writers[w].node)
        return out


class RegIndex:
    """Sorted writes of one register-like resource, per group of PEs."""

    def __init__(self, writers, P):
        self.writers = writers
        if not writers:
            self.groups = [(None, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))]
            return
        masks = np.array([w.mask for w in writers], dtype=bool).reshape(len(writers), P)
        cols, inv = np.unique(masks.T, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        self.groups = []
        for g in range(len(cols)):
            act = cols[g]
            pes = None if len(cols) == 1 else np.nonzero(inv == g)[0]
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

    def resolve(self, cycles) -> Res:
        out = []
        key = np.asarray(cycles, np.int64) * 2
        for pes, keys, wid, occ in self.groups:
            pos = np.searchsorted(keys, key, side="left") - 1
            ok = pos >= 0
            pc = np.maximum(pos, 0)
            w = np.where(ok, wid[pc] if len(wid) else -1, -1)
            o = np.where(ok, occ[pc] if len(occ) else 0, 0)
            out.append((pes, w, o))
        return Res(out, self.writers)


# -----------------------------------------------------------------------------------------
# the region engine
# -----------------------------------------------------------------------------------------
class Region:
    """Execute cycles ``[x, y)`` of the RUN state from ``model.state`` (see module doc).

    :meth:`execute` returns a commit function (mutates the state, counters and
    output) or raises :class:`FlowFail` without touching anything.
    """

    def __init__(self, model, allpcs, offs, lanes, lane_of, x, y):
        self.m = model
        cfg = model.cfg
        self.cfg = cfg
        self.A = model.arith
        self.st = model.state
        self.geo = model.geo
        self.nr = cfg.nr
        self.P = cfg.nr * cfg.nr
        self.ut = cfg.fmt.np_uint
        self.n_regs = cfg.n_regs
        self.n_ar = cfg.n_ar
        self.mul = cfg.mul_latency
        self.add = cfg.add_latency
        self.lat = cfg.mul_latency + cfg.add_latency   # operand stage -> write-back
        self.amask = (1 << cfg.addr_bits) - 1
        self.n = y - x
        self.x = x
        self.allpcs, self.offs, self.lanes_all, self.lane_of = allpcs, offs, lanes, lane_of
        fmt = cfg.fmt
        self.const = {SRC_ZERO: 0, SRC_NZERO: fmt.neg_zero, SRC_ONE: fmt.one}
        self.pidx = np.arange(self.P)

    # -- helpers ------------------------------------------------------------------------
    def full(self, k, v):
        return np.full((k, self.P), v, self.ut)

    # -- address registers ------------------------------------------------------------------
    def _ar_trajectory(self, tmpls, inv):
        """AR values before each step and after the last: [n_ar] arrays [n+1, Q]; final
        strides [P, n_ar]."""
        st = self.st
        n = self.n
        am = self.amask
        U = len(tmpls)
        pred_tab = np.array([u.pred for u in tmpls], bool)             # [U, P]
        pred_all = np.array([u.pred_all for u in tmpls], bool)
        op = np.array([u.ar_op for u in tmpls], np.int64)
        idx = np.array([u.ar_idx for u in tmpls], np.int64)
        imm = np.array([u.ar_imm for u in tmpls], np.int64)
        out = []
        final_stride = st.stride.copy()
        steps = np.arange(n)
        for i in range(self.n_ar):
            inc = np.array([bool((u.ra_inc and u.ra_ar == i) or (u.rb_inc and u.rb_ar == i)
                                 or (u.wa_inc and u.wa_ar == i) or (u.wb_inc and u.wb_ar == i))
                            for u in tmpls], bool)
            is_set = (op == ArOp.SET) & (idx == i)
            is_add = (op == ArOp.ADD) & (idx == i)
            is_str = (op == ArOp.STRIDE) & (idx == i)
            touch = (is_set | is_add | is_str | inc) & pred_tab.any(axis=1)
            ar0, s0 = st.ar[:, i], st.stride[:, i]
            if not touch[inv].any():
                out.append(np.broadcast_to(ar0, (n + 1, self.P)) if not (ar0 == ar0[0]).all()
                           else np.broadcast_to(ar0[:1], (n + 1, 1)))
                continue
            uniform = bool(pred_all[touch].all()) and (ar0 == ar0[0]).all() and (s0 == s0[0]).all()
            Q = 1 if uniform else self.P
            pr = pred_all[inv][:, None] if uniform else pred_tab[inv]       # [n, Q]
            a0 = ar0[:1] if uniform else ar0
            st0 = s0[:1] if uniform else s0
            s_set = is_str[inv][:, None] & pr
            if s_set.any():
                li = np.where(s_set, steps[:, None], -1)
                li = np.maximum.accumulate(li, axis=0)
                lt = np.empty_like(li)
                lt[0] = -1
                lt[1:] = li[:-1]
                sval = imm[inv] & am
                stride_b = np.where(lt >= 0, sval[np.maximum(lt, 0)], st0[None, :])
                fin = li[-1]
                final_stride[:, i] = np.where(fin >= 0, sval[np.maximum(fin, 0)], st0) if Q > 1 else \
                    (sval[fin[0]] if fin[0] >= 0 else st0[0])
            else:
                stride_b = np.broadcast_to(st0[None, :], (n, Q))
            d = np.where(is_add[inv], imm[inv], 0)[:, None] + np.where(inc[inv][:, None], stride_b, 0)
            d = np.where(pr, d, 0)
            setm = is_set[inv][:, None] & pr
            C = np.zeros((n + 1, Q), np.int64)
            np.cumsum(d, axis=0, out=C[1:])
            if setm.any():
                li = np.where(setm, steps[:, None], -1)
                li = np.maximum.accumulate(li, axis=0)
                lt = np.empty((n + 1, Q), np.int64)
                lt[0] = -1
                lt[1:] = li
                setv = imm[inv] & am
                lc = np.maximum(lt, 0)
                base = np.where(lt >= 0, setv[lc] - np.take_along_axis(C, lc + 1, axis=0), a0[None, :])
                traj = (base + C) & am
            else:
                traj = (a0[None, :] + C) & am
            out.append(traj)
        return out, final_stride

    # -- build ------------------------------------------------------------------------------
    def execute(self):
        st = self.st
        n = self.n
        m = self.m
        tm = m._pc_tables()[0]
        x = self.x
        pcs = self.allpcs[x:x + n]
        uniq, inv = np.unique(pcs, return_inverse=True)
        inv = inv.reshape(-1)
        tmpls = [tm[p] for p in uniq]
        self.tmpls, self.inv = tmpls, inv
        ars, final_stride = self._ar_trajectory(tmpls, inv)
        self.final_ar = [a[n] for a in ars]
        self.final_stride = final_stride
        offs = self.offs[x:x + n]
        am = self.amask
        ma, mb = self.cfg.mem_a_words - 1, self.cfg.mem_b_words - 1
        # per-step addresses: [n, Q]
        def field_addr(arfield, col, dmask):
            ar_idx = np.array([getattr(u, arfield) for u in tmpls], np.int64)[inv]
            used = np.unique(ar_idx)
            Q = max((ars[i].shape[1] if i < self.n_ar else 1) for i in used)
            res = np.empty((n, Q), np.int64)
            for i in used:
                sel = ar_idx == i
                arr = ars[i][:n][sel] if i < self.n_ar else np.zeros((int(sel.sum()), 1), np.int64)
                res[sel] = (arr + offs[sel, col][:, None]) & am & dmask
            return res

        self.addr = (field_addr("ra_ar", 0, ma), field_addr("rb_ar", 1, mb),
                     field_addr("wa_ar", 2, ma), field_addr("wb_ar", 3, mb))
        order = np.argsort(inv, kind="stable")
        counts = np.bincount(inv, minlength=len(uniq))
        starts = np.concatenate([[0], np.cumsum(counts)])
        instrs = []
        lanes_all, lane_of = self.lanes_all, self.lane_of
        for ui, u in enumerate(tmpls):
            t = order[starts[ui]:starts[ui + 1]]
            addr = tuple(a[t] for a in self.addr)
            ln = None
            if u.hin:
                ln = lanes_all[lane_of[x + t]]
            if u.nop and t[-1] != n - 1:
                continue
            instrs.append(Instr(u, t, addr, ln))
        # the operand stage entering the region
        s1 = Instr(st.s1, np.array([-1]), tuple(a.reshape(1, -1) for a in st.s1_addr),
                   st.op_lanes.reshape(1, -1), virtual=True)
        s1.hin_over, s1.hout_over, s1.hlast_over = st.op_hin, st.op_hout, st.op_hlast
        s1.pred = st.s1_pred
        self.instrs = instrs
        self.s1 = s1
        self._build_nodes()
        self._evaluate()
        return self._finish()

    # -- nodes and resolution -------------------------------------------------------------------
    def _hin(self, I):
        return I.hin_over if I.virtual else I.u.hin

    def _hout(self, I):
        return (I.hout_over, I.hlast_over) if I.virtual else (I.u.hout, I.u.hlast)

    def _pred(self, I):
        return I.pred if I.virtual else I.u.pred

    @staticmethod
    def _bus_needs(u, pred, hout):
        """Which buses ('row', 'col') the operand stage of ``u`` reads."""
        codes = []
        if pred.any():
            if u.fpu_en:
                codes += [u.fpu_a, u.fpu_b] + ([] if u.c_rf else [u.fpu_c])
            if u.mv_op != MvOp.NOP:
                codes.append(u.mv_src)
                if u.mv_op == MvOp.MASK:
                    codes.append(u.mv_msk)
            if u.wa_en:
                codes.append(u.wa_src)
            if u.wb_en:
                codes.append(u.wb_src)
        need = set()
        if SRC_ROW in codes or hout == HostDir.ROW:
            need.add("row")
        if SRC_COL in codes or (hout and hout != HostDir.ROW):
            need.add("col")
        return need

    def _build_nodes(self):
        n = self.n
        P = self.P
        mul, lat = self.mul, self.lat
        st = self.st
        nodes = []
        rf_w = {r: [] for r in range(self.n_regs)}
        rd_w = {"a": [], "b": []}
        mem_w = {"a": [], "b": []}
        fma_nodes = []
        ev = {"fma": np.zeros(P, np.int64), "mv": 0, "mem_a_rd": 0, "mem_b_rd": 0, "mem_a_wr": 0, "mem_b_wr": 0,
              "rf_rd": 0, "rf_wr": 0, "rf_conflict": 0, "mem_conflict": 0}
        row_hops = np.zeros(self.nr, np.int64)
        col_hops = np.zeros(self.nr, np.int64)
        self.hout_nodes = []
        allI = [self.s1] + self.instrs
        self.op_reads = []     # (node, field, code, instr, cycles) resolved later
        for I in allI:
            u = I.u
            pred = self._pred(I)
            t = I.t
            k_op = int(np.searchsorted(t, n - 1)) if not I.virtual else 1   # op stage < n
            I.k_op = k_op
            npred = int(pred.sum())
            # SRAM reads at issue (not for the entering operand stage)
            if not I.virtual:
                for bank, en, do in (("a", u.ra_en, u.ra_do), ("b", u.rb_en, u.rb_do)):
                    if en and do.any():
                        nd = Node("R" + bank, I, len(t), do, f"rd{bank}@{len(nodes)}")
                        nd.extra["addr"] = I.addr[0 if bank == "a" else 1]
                        nodes.append(nd)
                        rd_w[bank].append(Writes(nd, t, 0, do))
                        ev[f"mem_{bank}_rd"] += len(t) * int(do.sum())
                        setattr(I, "rnode_" + bank, nd)
            if k_op == 0:
                continue
            s = t[:k_op] + 1                           # operand-stage cycles
            I.s = s
            # buses
            hin = self._hin(I)
            hout, hlast = self._hout(I)
            need = self._bus_needs(u, pred, hout)
            for axis, hd, drv, hops in (("row", HostDir.ROW, u.rdrv, u.row_hops), ("col", HostDir.COL, u.cdrv,
                                                                                   u.col_hops)):
                acc = row_hops if axis == "row" else col_hops
                if hin == hd:
                    acc += self.nr * k_op
                elif drv.any():
                    acc += hops * k_op
                src = u.rdrv_src if axis == "row" else u.cdrv_src
                if drv.any() and src < 16:
                    ev["rf_rd"] += k_op * int(drv.sum())
                if axis not in need:
                    continue
                nd = Node("bus" + axis, I, k_op, np.ones(P, bool), f"{axis}@{len(nodes)}")
                nodes.append(nd)
                setattr(I, "bus" + ("r" if axis == "row" else "c"), nd)
                if hin == hd:
                    nd.extra["host"] = True
                elif drv.any():
                    self.op_reads.append((nd, "drv", src, I, s, True))
                else:
                    nd.val = self.full(k_op, 0)
                    nd.done = True
            if hout:
                self.hout_nodes.append((I, hout, hlast))
            if not pred.any():
                continue
            if u.fpu_en:
                nd = Node("fma", I, k_op, pred, f"fma@{len(nodes)}")
                nodes.append(nd)
                fma_nodes.append(nd)
                nd.extra.update(dst=u.fpu_dst, wbk=u.wbk, c_rf=u.c_rf, s=s)
                ev["fma"] += pred * k_op
                ev["rf_rd"] += k_op * npred * ((u.fpu_a < 16) + (u.fpu_b < 16))
                self.op_reads.append((nd, "a", u.fpu_a, I, s, False))
                self.op_reads.append((nd, "b", u.fpu_b, I, s, False))
                if not u.c_rf:
                    self.op_reads.append((nd, "c", u.fpu_c, I, s, False))
                else:
                    nd.extra["c_reg"] = u.fpu_c
                k_res = int(np.searchsorted(s + mul, n))          # late read < n
                nd.extra["k_res"] = k_res
                if u.c_rf:
                    ev["rf_rd"] += k_res * npred
                wcyc = s + lat
                k_w = int(np.searchsorted(wcyc, n))
                nd.extra["k_w"] = k_w
                waddr = I.addr[1] if u.wbk == FmaWb.MEMB else I.addr[0]
                nd.extra["waddr"] = waddr
                self._fma_writes(nd, u.wbk, u.fpu_dst, wcyc[:k_w], pred, waddr[:k_w], rf_w, mem_w, ev)
            if u.mv_op != MvOp.NOP:
                nd = Node("mv", I, k_op, pred, f"mv@{len(nodes)}")
                nodes.append(nd)
                nd.extra["op"] = u.mv_op
                self.op_reads.append((nd, "src", u.mv_src, I, s, False))
                ev["mv"] += k_op * npred
                ev["rf_rd"] += k_op * npred * (u.mv_src < 16)
                if u.mv_op == MvOp.MASK:
                    self.op_reads.append((nd, "msk", u.mv_msk, I, s, False))
                    ev["rf_rd"] += k_op * npred * (u.mv_msk < 16)
                ev["rf_wr"] += k_op * npred
                if u.mv_dst < self.n_regs:
                    rf_w[u.mv_dst].append(Writes(nd, s, 0, pred))
                nd.extra["dst"] = u.mv_dst
            for bank, en, srcf, ai in (("a", u.wa_en, u.wa_src, 2), ("b", u.wb_en, u.wb_src, 3)):
                if en:
                    nd = Node("w" + bank, I, k_op, pred, f"w{bank}@{len(nodes)}")
                    nodes.append(nd)
                    self.op_reads.append((nd, "src", srcf, I, s, False))
                    ev["rf_rd"] += k_op * npred * (srcf < 16)
                    nd.extra["waddr"] = I.addr[ai][:k_op]
                    nd.extra["s"] = s
                    mem_w[bank].append(nd)     # masks finished after the FMA write-backs are known
        # FMAs in flight at region entry
        for i, e in enumerate(st.mp):
            if e is None:
                continue
            s_ = np.array([-(i + 1)], np.int64)
            nd = Node("fma", None, 1, e.valid, f"mp{i}")
            nodes.append(nd)
            fma_nodes.append(nd)
            nd.extra.update(dst=e.dst, wbk=e.wb, c_rf=e.c_rf, s=s_, prod=e.product.reshape(1, -1),
                            waddr=np.asarray(e.waddr).reshape(1, -1))
            if e.c_rf:
                nd.extra["c_reg"] = e.c
            else:
                nd.extra["cval"] = np.asarray(e.c).reshape(1, -1)
            k_res = int(s_[0] + mul < n)
            nd.extra["k_res"] = k_res
            if e.c_rf:
                ev["rf_rd"] += k_res * int(e.valid.sum())
            wcyc = s_ + lat
            k_w = int(wcyc[0] < n)
            nd.extra["k_w"] = k_w
            self._fma_writes(nd, e.wb, e.dst, wcyc[:k_w], e.valid, nd.extra["waddr"][:k_w], rf_w, mem_w, ev)
        for j, e in enumerate(st.ap):
            if e is None:
                continue
            lcyc = -(j + 1)
            nd = Node("fma", None, 1, e.valid, f"ap{j}")
            nd.val = np.asarray(e.value).reshape(1, -1)
            nd.done = True
            nodes.append(nd)
            fma_nodes.append(nd)
            s_ = np.array([lcyc - mul], np.int64)
            nd.extra.update(dst=e.dst, wbk=e.wb, c_rf=False, s=s_, k_res=0, pending_ap=True,
                            waddr=np.asarray(e.waddr).reshape(1, -1))
            wcyc = np.array([lcyc + self.add], np.int64)
            k_w = int(wcyc[0] < n)
            nd.extra["k_w"] = k_w
            self._fma_writes(nd, e.wb, e.dst, wcyc[:k_w], e.valid, nd.extra["waddr"][:k_w], rf_w, mem_w, ev)
        # SRAM writes of the operand stage: dropped where an FMA write-back hits the bank
        for bank in ("a", "b"):
            wbk = [w for w in mem_w[bank] if isinstance(w, Writes)]
            ops = [w for w in mem_w[bank] if isinstance(w, Node)]
            blocked = None
            if wbk and ops:
                blocked = np.zeros((n + 1, P), bool)
                for w in wbk:
                    blocked[w.cyc] |= np.broadcast_to(w.mask, (len(w.cyc), P))
            lst = list(wbk)
            for nd in ops:
                s = nd.extra["s"]
                if blocked is not None:
                    bl = blocked[s]
                    mask = nd.pred[None, :] & ~bl
                    conf = int((nd.pred[None, :] & bl).sum())
                    ev["mem_conflict"] += conf
                    ev[f"mem_{bank}_wr"] += int(mask.sum())
                else:
                    mask = nd.pred
                    ev[f"mem_{bank}_wr"] += len(s) * int(nd.pred.sum())
                lst.append(Writes(nd, s, 0, mask, addr=nd.extra["waddr"]))
            mem_w[bank] = lst
        # rf_conflict: a move and an FMA write-back to the same register in the same cycle
        for r, ws in rf_w.items():
            mvs = [w for w in ws if w.prio == 0]
            fws = [w for w in ws if w.prio == 1]
            for a in mvs:
                for b in fws:
                    common, ia, ib = np.intersect1d(a.cyc, b.cyc, return_indices=True)
                    if len(common):
                        ev["rf_conflict"] += len(common) * int((a.mask & b.mask).sum())
        # moves / FMAs writing registers >= n_regs still count (as in the model): rf_conflict
        # for those is counted from the fields below
        self._extra_conflicts(nodes, ev)
        self.nodes = nodes
        self.fma_nodes = fma_nodes
        self.ev = ev
        self.row_hops, self.col_hops = row_hops, col_hops
        self.rf_index = {r: RegIndex(w, P) for r, w in rf_w.items()}
        self.rd_index = {b: RegIndex(w, P) for b, w in rd_w.items()}
        self.mem_w = mem_w
        # resolve operand reads
        for nd, fld, code, I, s, is_drv in self.op_reads:
            nd.reads[fld] = self._src_read(code, I, s, is_drv)
        for nd in fma_nodes:
            if nd.extra.get("c_reg") is not None and nd.extra["k_res"] > 0:
                r = nd.extra["c_reg"]
                late = nd.extra["s"][:nd.extra["k_res"]] + mul
                nd.reads["c"] = ("rf", r, self.rf_index[r].resolve(late)) if r < self.n_regs else ("const", 0)
        # memory reads
        self.mem_res = {}
        for nd in nodes:
            if nd.kind in ("Ra", "Rb"):
                bank = nd.kind[1]
                self.mem_res[nd] = self._mem_resolve(bank, nd)
        # dependencies
        for nd in nodes:
            for fld, rd in nd.reads.items():
                nd.deps |= self._read_deps(rd)
            if nd in self.mem_res:
                nd.deps |= self.mem_res[nd][1]

    def _extra_conflicts(self, nodes, ev):
        """rf_wr / rf_conflict of FMA write-backs and moves to registers >= n_regs (not in
        the register index) - the model counts them from the fields."""
        P = self.P
        mvs = [nd for nd in nodes if nd.kind == "mv" and nd.extra["dst"] >= self.n_regs]
        fws = [nd for nd in nodes if nd.kind == "fma" and nd.extra["wbk"] == FmaWb.RF
               and nd.extra["dst"] >= self.n_regs]
        for f in fws:
            k_w = f.extra["k_w"]
            wcyc = (f.extra["s"] + self.lat)[:k_w]
            wcyc = wcyc[wcyc >= 0]
            ev["rf_wr"] += len(wcyc) * int(f.pred.sum())
            for mnd in mvs:
                if mnd.extra["dst"] != f.extra["dst"]:
                    continue
                common = np.intersect1d(mnd.ins.s, wcyc)
                ev["rf_conflict"] += len(common) * int((mnd.pred & f.pred).sum())
        del P

    def _fma_writes(self, nd, wbk, dst, wcyc, valid, waddr, rf_w, mem_w, ev):
        occ = np.arange(len(wcyc))
        keep = wcyc >= 0
        wcyc, occ, waddr = wcyc[keep], occ[keep], waddr[keep]
        if wbk == FmaWb.MEMA or wbk == FmaWb.MEMB:
            bank = "a" if wbk == FmaWb.MEMA else "b"
            mem_w[bank].append(Writes(nd, wcyc, 1, valid, occ=occ, addr=waddr))
            ev[f"mem_{bank}_wr"] += len(wcyc) * int(valid.sum())
        else:
            if dst < self.n_regs:
                rf_w[dst].append(Writes(nd, wcyc, 1, valid, occ=occ))
                ev["rf_wr"] += len(wcyc) * int(valid.sum())

    def _src_read(self, code, I, s, is_drv):
        """How a source code reads in the operand stages ``s`` of instruction ``I``."""
        if code < 16:
            if code >= self.n_regs:
                return ("const", 0)
            return ("rf", code, self.rf_index[code].resolve(s))
        if code == SRC_MEMA:
            return ("rd", "a", self.rd_index["a"].resolve(s))
        if code == SRC_MEMB:
            return ("rd", "b", self.rd_index["b"].resolve(s))
        if code in (SRC_ROW, SRC_COL):
            if is_drv:
                return ("const", 0)
            return ("bus", I.busr if code == SRC_ROW else I.busc)
        return ("const", self.const.get(code, 0))

    @staticmethod
    def _read_deps(rd):
        if rd[0] in ("rf", "rd"):
            return rd[2].deps()
        if rd[0] == "bus":
            return {rd[1]}
        return set()

    def _mem_resolve(self, bank, nd):
        """Resolve the SRAM reads of node ``nd``: (value function inputs, dep set)."""
        ws = self.mem_w[bank]
        ws = [w for w in ws if len(w.cyc)]
        if not ws:
            return (None, set())
        P = self.P
        D = self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words
        n = self.n
        C = n + 64
        off = 32
        keys, wid, occ = [], [], []
        for i, w in enumerate(ws):
            m = np.broadcast_to(w.mask, (len(w.cyc), P))
            kk, pp = np.nonzero(m)
            addr = np.broadcast_to(w.addr, (len(w.cyc), P))[kk, pp]
            keys.append((pp * D + addr) * C + (w.cyc[kk] + off))
            wid.append(np.full(len(kk), i, np.int64))
            occ.append(w.occ[kk])
        keys = np.concatenate(keys)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        wid = np.concatenate(wid)[order]
        occ = np.concatenate(occ)[order]
        self.mem_sorted = getattr(self, "mem_sorted", {})
        self.mem_sorted[bank] = (keys, wid, occ, ws, C, off, D)
        t = nd.ins.t
        addr = np.broadcast_to(nd.extra["addr"], (len(t), P))
        rkey = (self.pidx[None, :] * D + addr) * C + (t[:, None] + off)
        pos = np.searchsorted(keys, rkey, side="left") - 1
        pc = np.maximum(pos, 0)
        hit = (pos >= 0) & (keys[pc] // C == rkey // C) if len(keys) else np.zeros(rkey.shape, bool)
        hit &= np.broadcast_to(nd.pred, hit.shape)
        rw = np.where(hit, wid[pc], -1)
        ro = np.where(hit, occ[pc], 0)
        deps = {ws[w].node for w in np.unique(rw) if w >= 0}
        return ((rw, ro, ws), deps)

    # -- evaluation ----------------------------------------------------------------------------
    def _gather_res(self, res: Res, init, k):
        """Values [k, P] of resolved reads; ``init`` [P] is the value before the region."""
        out = None
        for pes, wid, occ in res.groups:
            ws = res.writers
            present = np.unique(wid)
            if pes is None:
                if len(present) == 1:
                    w = present[0]
                    if w < 0:
                        blk = np.broadcast_to(init, (k, self.P))
                    else:
                        blk = ws[w].node.val[occ]
                    if out is None:
                        return np.array(blk, copy=True) if w < 0 else blk
                    out[:] = blk
                    continue
                if out is None:
                    out = np.empty((k, self.P), self.ut)
                for w in present:
                    rows = wid == w
                    out[rows] = init if w < 0 else ws[w].node.val[occ[rows]]
            else:
                if out is None:
                    out = np.empty((k, self.P), self.ut)
                for w in present:
                    rows = np.nonzero(wid == w)[0]
                    if w < 0:
                        out[np.ix_(rows, pes)] = init[pes][None, :]
                    else:
                        out[np.ix_(rows, pes)] = ws[w].node.val[np.ix_(occ[rows], pes)]
        return out

    def _read_val(self, rd, k):
        kind = rd[0]
        st = self.st
        if kind == "const":
            return self.full(k, rd[1])
        if kind == "rf":
            return self._gather_res(rd[2], st.rf[:, rd[1]], k)
        if kind == "rd":
            return self._gather_res(rd[2], st.rd_a if rd[1] == "a" else st.rd_b, k)
        if kind == "bus":
            return rd[1].val[:k]
        raise AssertionError(kind)

    def _evaluate(self):
        nodes = [nd for nd in self.nodes if not nd.done]
        idx = {nd: i for i, nd in enumerate(nodes)}
        # Tarjan SCC (iterative)
        N = len(nodes)
        adj = [[idx[d] for d in nd.deps if d in idx] for nd in nodes]
        index = [-1] * N
        low = [0] * N
        onstk = [False] * N
        stack, sccs = [], []
        counter = 0
        for v0 in range(N):
            if index[v0] >= 0:
                continue
            work = [(v0, 0)]
            while work:
                v, i = work.pop()
                if i == 0:
                    index[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    onstk[v] = True
                recurse = False
                for j in range(i, len(adj[v])):
                    w = adj[v][j]
                    if index[w] < 0:
                        work.append((v, j + 1))
                        work.append((w, 0))
                        recurse = True
                        break
                    if onstk[w]:
                        low[v] = min(low[v], index[w])
                if recurse:
                    continue
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        onstk[w] = False
                        comp.append(w)
                        if w == v:
                            break
                    sccs.append(comp)
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
        # sccs come out in reverse topological order of "depends on" => dependencies first
        for comp in sccs:
            if len(comp) == 1 and comp[0] not in adj[comp[0]]:
                self._eval_node(nodes[comp[0]])
            else:
                self._eval_chain([nodes[i] for i in comp])

    def _eval_node(self, nd):
        A = self.A
        k = nd.k
        kind = nd.kind
        if kind in ("Ra", "Rb"):
            bank = kind[1]
            mem = self.st.mem_a if bank == "a" else self.st.mem_b
            t = nd.ins.t
            addr = np.broadcast_to(nd.extra["addr"], (len(t), self.P))
            val = mem[self.pidx[None, :], addr]
            info = self.mem_res[nd][0]
            if info is not None:
                rw, ro, ws = info
                for w in np.unique(rw):
                    if w < 0:
                        continue
                    sel = rw == w
                    src = ws[w].node
                    kk, pp = np.nonzero(sel)
                    val[kk, pp] = src.val[ro[sel], pp]
            nd.val = val
        elif kind in ("busrow", "buscol"):
            I = nd.ins
            if nd.extra.get("host"):
                coord = self.geo.row if kind == "busrow" else self.geo.col
                nd.val = np.ascontiguousarray(I.lanes[:k][:, coord])
            else:
                v = self._read_val(nd.reads["drv"], k)
                frm = I.u.row_from if kind == "busrow" else I.u.col_from
                g = v[:, np.maximum(frm, 0)]
                if (frm < 0).any():
                    g = np.where((frm >= 0)[None, :], g, self.ut.type(0))
                nd.val = g
        elif kind == "mv":
            v = self._read_val(nd.reads["src"], k)
            op = nd.extra["op"]
            if op == MvOp.MOV:
                nd.val = v
            elif op == MvOp.RELU:
                nd.val = A.relu(v)
            else:
                nd.val = A.mask(v, self._read_val(nd.reads["msk"], k))
        elif kind in ("wa", "wb"):
            nd.val = self._read_val(nd.reads["src"], k)
        elif kind == "fma":
            self._fma_product(nd)
            k_res = nd.extra["k_res"]
            c = self._fma_c(nd, k_res)
            nd.val = A.add(nd.extra["prod"][:k_res], c) if k_res else np.zeros((0, self.P), self.ut)
        else:
            raise AssertionError(kind)
        nd.done = True

    def _fma_product(self, nd):
        if "prod" in nd.extra:
            return
        k = nd.k
        a = self._read_val(nd.reads["a"], k)
        b = self._read_val(nd.reads["b"], k)
        nd.extra["prod"] = self.A.mul(a, b)
        if "c" in nd.reads and nd.extra.get("c_reg") is None:
            nd.extra["cval"] = self._read_val(nd.reads["c"], k)

    def _fma_c(self, nd, k_res):
        if nd.extra.get("c_reg") is None:
            return nd.extra["cval"][:k_res]
        if k_res == 0:
            return None
        return self._read_val(nd.reads["c"], k_res)

    def _eval_chain(self, comp):
        """An SCC: accept only accumulation chains through the late ``c`` operand."""
        cs = set(comp)
        for nd in comp:
            if nd.kind != "fma" or nd.extra.get("c_reg") is None or nd.extra["wbk"] != FmaWb.RF:
                raise FlowFail(f"dependency cycle through {nd}")
            for fld, rd in nd.reads.items():
                if fld != "c" and self._read_deps(rd) & cs:
                    raise FlowFail(f"dependency cycle through operand {fld} of {nd}")
        for nd in comp:
            self._fma_product(nd)
            nd.val = np.zeros((nd.extra["k_res"], self.P), self.ut)
        P = self.P
        # element numbering: each node's occurrences with a late read in the region
        base = {}
        E = 0
        for nd in comp:
            base[nd] = E
            E += nd.extra["k_res"]
        if E == 0:
            for nd in comp:
                nd.done = True
            return
        # PE groups: predicate masks + resolution groups of the c reads
        sig = [nd.pred for nd in comp]
        for nd in comp:
            res = nd.reads["c"][2]
            gid = np.zeros(P, np.int64)
            for g, (pes, _, _) in enumerate(res.groups):
                if pes is not None:
                    gid[pes] = g
            sig.append(gid)
        sigm = np.array(sig, np.int64)
        cols, inv = np.unique(sigm.T, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        for g in range(len(cols)):
            pes = np.nonzero(inv == g)[0]
            self._chain_group(comp, base, E, pes)
        for nd in comp:
            nd.done = True

    def _chain_group(self, comp, base, E, pes):
        A = self.A
        p0 = pes[0]
        prev = np.full(E, -2, np.int64)      # -2: inactive, -1: head, else element index
        wid_of = {}
        for nd in comp:
            if not nd.pred[p0]:
                continue
            k_res = nd.extra["k_res"]
            res = nd.reads["c"][2]
            for gpes, wid, occ in res.groups:
                if gpes is None or (gpes == p0).any():
                    break
            ws = res.writers
            pr = np.full(k_res, -1, np.int64)
            for w in np.unique(wid):
                if w < 0:
                    continue
                wn = ws[w].node
                if wn in base:
                    sel = wid == w
                    pr[sel] = base[wn] + occ[sel]
            prev[base[nd]:base[nd] + k_res] = pr
            wid_of[nd] = (wid, occ, ws)
        act = prev > -2
        if not act.any():
            return
        # each element has at most one successor
        succ_src = prev[prev >= 0]
        if len(np.unique(succ_src)) != len(succ_src):
            raise FlowFail("accumulator value read by two chain elements")
        # chain heads by pointer jumping; the elements of a chain are in time order
        ids = np.nonzero(act)[0]
        head = np.where(prev >= 0, prev, np.arange(E))
        while True:
            nxt = head[head]
            if np.array_equal(nxt, head):
                break
            head = nxt
        times = np.zeros(E, np.int64)
        for nd in comp:
            k_res = nd.extra["k_res"]
            times[base[nd]:base[nd] + k_res] = nd.extra["s"][:k_res]
        order = ids[np.lexsort((times[ids], head[ids]))]
        hd = head[order]
        starts = np.nonzero(np.concatenate([[True], hd[1:] != hd[:-1]]))[0]
        lens = np.diff(np.concatenate([starts, [len(order)]]))
        # verify the linked order: each non-head element's prev is the element before it
        pos_prev = order[:-1]
        nonhead = np.ones(len(order), bool)
        nonhead[starts] = False
        if not np.array_equal(prev[order[1:][nonhead[1:]]], pos_prev[nonhead[1:]]):
            raise FlowFail("accumulation chain is not a sequence")
        # products and head c values for the elements, over the group's PEs
        nodes_of = np.empty(E, object)
        occ_of = np.zeros(E, np.int64)
        for nd in comp:
            k_res = nd.extra["k_res"]
            nodes_of[base[nd]:base[nd] + k_res] = nd
            occ_of[base[nd]:base[nd] + k_res] = np.arange(k_res)
        G = len(pes)
        prod = np.empty((len(order), G), self.ut)
        for nd in comp:
            sel = nodes_of[order] == nd
            if sel.any():
                prod[sel] = nd.extra["prod"][np.ix_(occ_of[order][sel], pes)]
        heads = order[starts]
        cval = np.empty((len(heads), G), self.ut)
        st = self.st
        for nd in comp:
            sel = nodes_of[heads] == nd
            if not sel.any():
                continue
            wid, occ, ws = wid_of[nd]
            o = occ_of[heads][sel]
            hw = wid[o]
            ho = occ[o]
            r = nd.extra["c_reg"]
            blk = np.empty((len(o), G), self.ut)
            for w in np.unique(hw):
                rows = hw == w
                if w < 0:
                    blk[rows] = st.rf[pes, r][None, :]
                else:
                    blk[rows] = ws[w].node.val[np.ix_(ho[rows], pes)]
            cval[sel] = blk
        # accumulate chains of equal length together
        result = np.empty((len(order), G), self.ut)
        for L in np.unique(lens):
            chs = np.nonzero(lens == L)[0]
            idx = starts[chs][:, None] + np.arange(L)[None, :]          # [nch, L] positions in order
            seq = np.empty((len(chs), L + 1, G), self.ut)
            seq[:, 0] = cval[chs]
            seq[:, 1:] = prod[idx]
            acc = A.accumulate(seq, axis=1)
            result[idx] = acc[:, 1:]
        for nd in comp:
            sel = nodes_of[order] == nd
            if sel.any():
                nd.val[np.ix_(occ_of[order][sel], pes)] = result[sel]

    # -- exit -------------------------------------------------------------------------------------
    def _finish(self):
        st = self.st
        n = self.n
        P = self.P
        mul, lat = self.mul, self.lat
        # register file at cycle n
        new_rf = st.rf.copy()
        for r, ix in self.rf_index.items():
            if ix.writers:
                res = ix.resolve(np.array([n]))
                new_rf[:, r] = self._gather_res(res, st.rf[:, r], 1)[0]
        new_rd = {}
        for b, ix in self.rd_index.items():
            init = st.rd_a if b == "a" else st.rd_b
            if ix.writers:
                new_rd[b] = self._gather_res(ix.resolve(np.array([n])), init, 1)[0].copy()
            else:
                new_rd[b] = init
        # SRAM: last write of each word before cycle n
        mem_updates = {}
        for bank in ("a", "b"):
            ws = [w for w in self.mem_w[bank] if len(w.cyc)]
            if not ws:
                continue
            D = self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words
            pp_all, aa_all, cc_all, vv_all = [], [], [], []
            for w in ws:
                m = np.broadcast_to(w.mask, (len(w.cyc), P))
                live = w.cyc < n
                m = m & live[:, None]
                kk, pp = np.nonzero(m)
                if not len(kk):
                    continue
                addr = np.broadcast_to(w.addr, (len(w.cyc), P))[kk, pp]
                pp_all.append(pp)
                aa_all.append(addr)
                cc_all.append(w.cyc[kk])
                vv_all.append(w.node.val[w.occ[kk], pp])
            if not pp_all:
                continue
            pp = np.concatenate(pp_all)
            aa = np.concatenate(aa_all)
            cc = np.concatenate(cc_all)
            vv = np.concatenate(vv_all)
            key = pp * D + aa
            order = np.lexsort((cc, key))
            key, vv = key[order], vv[order]
            last = np.concatenate([key[1:] != key[:-1], [True]])
            mem_updates[bank] = (key[last] // D, key[last] % D, vv[last])
        # hout beats
        beats = []
        nr, w = self.nr, self.cfg.fmt.width
        for I, hout, hlast in self.hout_nodes:
            nd = I.busr if hout == HostDir.ROW else I.busc
            vals = nd.val[:, ::nr] if hout == HostDir.ROW else nd.val[:, :nr]
            for k in range(nd.k):
                data = 0
                row = vals[k]
                for i in range(nr):
                    data |= int(row[i]) << (i * w)
                beats.append((int(I.s[k]), data, bool(hlast)))
        beats.sort(key=lambda b: b[0])
        # pipeline at cycle n
        mp = [None] * mul
        ap = [None] * self.add
        for nd in self.fma_nodes:
            s = nd.extra["s"]
            waddr = nd.extra["waddr"]
            if nd.extra.get("pending_ap"):
                lcyc = int(s[0]) + mul
                if lcyc + self.add >= n:
                    j = n - 1 - lcyc
                    ap[j] = AddEntry(nd.pred, nd.extra["dst"], nd.val[0], nd.extra["wbk"],
                                     np.broadcast_to(waddr[0], (P,)))
                continue
            for k in range(len(s)):
                sk = int(s[k])
                if sk >= n:
                    break
                if sk + mul >= n:
                    i = n - 1 - sk
                    c_rf = "c_reg" in nd.extra
                    c = nd.extra["c_reg"] if c_rf else np.array(nd.extra["cval"][k])
                    mp[i] = MulEntry(nd.pred, nd.extra["dst"], np.array(nd.extra["prod"][k]), c_rf, c,
                                     nd.extra["wbk"], np.array(np.broadcast_to(waddr[k], (P,))))
                elif sk + lat >= n:
                    j = n - 1 - (sk + mul)
                    ap[j] = AddEntry(nd.pred, nd.extra["dst"], nd.val[k], nd.extra["wbk"],
                                     np.array(np.broadcast_to(waddr[k], (P,))))
        # the operand stage at cycle n: the instruction issued at n-1
        last = None
        for I in self.instrs:
            if I.t[-1] == n - 1:
                last = I
                break
        ev, rh, ch = self.ev, self.row_hops, self.col_hops
        final_ar, final_stride = self.final_ar, self.final_stride
        lanes_all, lane_of, x = self.lanes_all, self.lane_of, self.x

        def commit(ctr, out):
            st.rf = new_rf
            st.rd_a, st.rd_b = new_rd["a"], new_rd["b"]
            for bank, (pp, aa, vv) in mem_updates.items():
                mem = st.mem_a if bank == "a" else st.mem_b
                mem[pp, aa] = vv
            ar = np.empty_like(st.ar)
            for i, a in enumerate(final_ar):
                ar[:, i] = a
            st.ar = ar
            st.stride = final_stride
            u = last.u
            st.s1 = u
            st.s1_pred = u.pred
            st.s1_addr = tuple(np.array(np.broadcast_to(a[-1], (P,))) for a in last.addr)
            st.op_hin = u.hin
            if u.hin:
                st.op_lanes = lanes_all[lane_of[x + n - 1]]
            st.op_hout, st.op_hlast = u.hout, u.hlast
            st.mp, st.ap = mp, ap
            ctr.fma += ev["fma"]
            for k2, v in ev.items():
                if k2 != "fma":
                    ctr.ev[k2] += int(v)
            ctr.row_hops += rh
            ctr.col_hops += ch
            out.extend((d, l_) for _, d, l_ in beats)

        return commit


# -----------------------------------------------------------------------------------------
# region planning
# -----------------------------------------------------------------------------------------
class FlowRunner:
    """Cuts a run into regions along the trace's loop spans; runs each on the dataflow
    engine, falling back to the per-cycle engine for regions it rejects."""

    def __init__(self, model, max_elems: int = 1 << 20, cut=None):
        self.m = model
        self.max_elems = max_elems
        self.cut = cut          # tests: optional callable(x, y) -> list of cut points

    def run(self, trace, allpcs, offs, lanes, lane_of, ctr, out):
        self.args = (allpcs, offs, lanes, lane_of, ctr, out)
        self.stats = {"flow_cycles": 0, "cycle_engine_cycles": 0, "regions": 0, "fallbacks": 0}
        from sim.core_model import START_LATENCY_CYCLES

        sh = START_LATENCY_CYCLES
        T = len(allpcs)
        spans = [self._shift(s, sh) for s in trace.spans]
        self._seq(0, T, spans)
        return self.stats

    @staticmethod
    def _shift(span, d):
        from sim.fast_trace import Span

        return Span(span.start + d, span.n_iter, span.iter_len, span.level, span.children)

    def _limit(self):
        return max(1, self.max_elems // self.m.P)

    def _parts(self, a, b, spans):
        parts = []
        x = a
        for s in sorted(spans, key=lambda s: s.start):
            if s.start > x:
                parts.append(("straight", x, s.start, None))
            parts.append(("loop", s.start, s.end, s))
            x = s.end
        if x < b:
            parts.append(("straight", x, b, None))
        return parts

    def _seq(self, a, b, spans):
        lim = self._limit()
        group = []
        glen = 0

        def flush():
            nonlocal group, glen
            if not group:
                return
            x0, y0 = group[0][1], group[-1][2]
            if len(group) == 1 or not self._try(x0, y0):
                if len(group) == 1:
                    self._part(group[0])
                else:
                    for p in group:
                        self._part(p)
            group, glen = [], 0

        for p in self._parts(a, b, spans):
            n = p[2] - p[1]
            if n > lim:
                flush()
                self._part(p)
                continue
            if glen + n > lim:
                flush()
            group.append(p)
            glen += n
        flush()

    def _part(self, p):
        kind, x, y, span = p
        lim = self._limit()
        if kind == "straight":
            for a in range(x, y, lim):
                b = min(y, a + lim)
                if not self._try(a, b):
                    self._cycles(a, b)
            return
        if y - x <= lim and self._try(x, y):
            return
        # loop too big or rejected: groups of iterations
        L = span.iter_len
        per = max(1, lim // L)
        i = 0
        failed = False
        while i < span.n_iter:
            j = min(span.n_iter, i + per)
            a, b = span.start + i * L, span.start + j * L
            if failed or L > lim or not self._try(a, b):
                failed = True
                if span.children:
                    for it in range(i, j):
                        s0 = span.start + it * L
                        self._seq(s0, s0 + L, [self._shift(c, s0) for c in span.children])
                else:
                    self._cycles(a, b)
            i = j

    def _try(self, x, y) -> bool:
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        if self.cut is not None:
            cuts = [c for c in self.cut(x, y) if x < c < y]
            if cuts:
                pts = [x] + sorted(set(cuts)) + [y]
                for a, b in zip(pts[:-1], pts[1:]):
                    if not self._try_one(a, b):
                        self._cycles(a, b)
                return True
        return self._try_one(x, y)

    def _try_one(self, x, y) -> bool:
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        try:
            commit = Region(self.m, allpcs, offs, lanes, lane_of, x, y).execute()
        except FlowFail:
            self.stats["fallbacks"] += 1
            return False
        commit(ctr, out)
        self.stats["flow_cycles"] += y - x
        self.stats["regions"] += 1
        return True

    def _cycles(self, a, b):
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        self.m._run_cycles(a, b, allpcs, offs, lanes, lane_of, ctr, out)
        self.stats["cycle_engine_cycles"] += b - a
