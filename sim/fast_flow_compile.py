"""The loop-level dataflow compiler: :class:`Compiler` (:mod:`sim.fast_flow` describes
the steps).

The compiler proper holds the address-register trajectories of the region, the order
of the steps and the exit state; the value nodes (:mod:`sim.fast_flow_nodes`), the
resolution of reads and dependency levels (:mod:`sim.fast_flow_resolve`) and the rows
and batches of the plan (:mod:`sim.fast_flow_batches`) are its parts.
"""

from __future__ import annotations

import numpy as np

from arch.microop import ArOp
from arch.isa import HostDir
from sim.fast_common import SRC_NZERO, SRC_ONE, SRC_ZERO, ar_columns
from sim.fast_flow_batches import Batcher
from sim.fast_flow_graph import Instr, Read, Ref, to2d, uniq
from sim.fast_flow_nodes import NodeBuilder
from sim.fast_flow_plan import Plan, flatten, plan_nbytes
from sim.fast_flow_resolve import Resolver

__all__ = ["Compiler"]


class Compiler(NodeBuilder, Resolver, Batcher):
    """Compiles cycles ``[x, y)`` of a run, entered with state ``st``, into a :class:`Plan`
    (raises :class:`FlowFail` for regions with non-chain dependency cycles)."""

    def __init__(self, model, allpcs, offs, lane_of, x, y):
        self.m = model
        cfg = model.cfg
        self.cfg = cfg
        self.st = model.state
        self.geo = model.geo
        self.nr = cfg.nr
        self.P = cfg.nr * cfg.nr
        self.pidx = np.arange(self.P)
        self.ut = cfg.fmt.np_uint
        self.n_regs = cfg.n_regs
        self.n_ar = cfg.n_ar
        self.mul = cfg.mul_latency
        self.add = cfg.add_latency
        self.lat = cfg.mul_latency + cfg.add_latency   # operand stage -> write-back
        self.amask = (1 << cfg.addr_bits) - 1
        self.n = y - x
        self.x = x
        self.allpcs, self.offs, self.lane_of = allpcs, offs, lane_of
        fmt = cfg.fmt
        self.cvals = {SRC_ZERO: 0, SRC_NZERO: fmt.neg_zero, SRC_ONE: fmt.one}

    # -- address registers ------------------------------------------------------------------
    def _ar_trajectory(self, tmpls, inv):
        """AR values before each step and after the last: n_ar arrays [n+1, Q]; final
        strides [P, n_ar]."""
        st = self.st
        n = self.n
        am = self.amask
        pred_tab = np.array([u.pred for u in tmpls], bool)             # [U, P]
        pred_all = np.array([u.pred_all for u in tmpls], bool)
        op = np.array([u.ar_op for u in tmpls], np.int64)
        idx = np.array([u.ar_idx for u in tmpls], np.int64)
        imm = np.array([u.ar_imm for u in tmpls], np.int64)
        out = []
        final_stride = st.stride.copy()
        steps = np.arange(n)
        pred_any = pred_tab.any(axis=1)
        # per template and field (ra, rb, wa, wb): the AR it post-increments (-1: none)
        inc_ar = np.array([[u.ra_ar if u.ra_inc else -1, u.rb_ar if u.rb_inc else -1,
                            u.wa_ar if u.wa_inc else -1, u.wb_ar if u.wb_inc else -1] for u in tmpls],
                          np.int64).reshape(len(tmpls), 4)
        for i in range(self.n_ar):
            inc = (inc_ar == i).any(axis=1)
            is_set = (op == ArOp.SET) & (idx == i)
            is_add = (op == ArOp.ADD) & (idx == i)
            is_str = (op == ArOp.STRIDE) & (idx == i)
            touch = (is_set | is_add | is_str | inc) & pred_any
            ar0, s0 = st.ar[:, i], st.stride[:, i]
            ar_u = bool((ar0 == ar0[0]).all())
            if not touch[inv].any():
                out.append(np.broadcast_to(ar0[:1], (n + 1, 1)) if ar_u else np.broadcast_to(ar0, (n + 1, self.P)))
                continue
            uniform = bool(pred_all[touch].all()) and ar_u and bool((s0 == s0[0]).all())
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

    # -- compile ---------------------------------------------------------------------------
    def compile(self) -> Plan:
        try:
            return self._compile()
        finally:
            self._release()

    def _release(self):
        """Break the references between the compile-time structures (nodes and their
        reads, instructions and their bus reads, the compiler's own closures), so that
        reference counting frees them when compilation ends, not the cyclic collector."""
        for nd in getattr(self, "nodes", ()) + getattr(self, "pseudo", []):
            nd.deps = nd.reads = nd.info = None
        for I in getattr(self, "instrs", []) + [getattr(self, "s1", None)]:
            if I is not None:
                I.bus = None
        self.__dict__.clear()

    def _compile(self) -> Plan:
        st = self.st
        n = self.n
        x = self.x
        tm = self.m._pc_tables()[0]
        pcs = self.allpcs[x:x + n]
        upcs, inv = np.unique(pcs, return_inverse=True)
        inv = inv.reshape(-1)
        tmpls = [tm[p] for p in upcs]
        ars, final_stride = self._ar_trajectory(tmpls, inv)
        offs = self.offs[x:x + n]
        am = self.amask
        ma, mb = self.cfg.mem_a_words - 1, self.cfg.mem_b_words - 1

        def field_addr(arfield, col, dmask):
            ar_idx = np.array([getattr(u, arfield) for u in tmpls], np.int64)[inv]
            used = uniq(ar_idx)
            Q = max((ars[i].shape[1] if i < self.n_ar else 1) for i in used)
            res = np.empty((n, Q), np.int64)
            for i in used:
                if len(used) == 1:
                    arr = ars[i][:n] if i < self.n_ar else np.zeros((n, 1), np.int64)
                    res[:] = (arr + offs[:, col][:, None]) & am & dmask
                    break
                sel = ar_idx == i
                arr = ars[i][:n][sel] if i < self.n_ar else np.zeros((int(sel.sum()), 1), np.int64)
                res[sel] = (arr + offs[sel, col][:, None]) & am & dmask
            return res

        specs = (("ra_ar", 0, ma), ("rb_ar", 1, mb), ("wa_ar", 2, ma), ("wb_ar", 3, mb))
        cache = {}

        def addr_of(f):
            if f not in cache:
                cache[f] = field_addr(*specs[f])
            return cache[f]

        self.addr_of = addr_of
        order = np.argsort(inv, kind="stable")
        counts = np.bincount(inv, minlength=len(upcs))
        starts = np.concatenate([[0], np.cumsum(counts)])
        instrs = []
        last = None
        for ui, u in enumerate(tmpls):
            t = order[starts[ui]:starts[ui + 1]]
            I = Instr(u, t, None)
            I.pred, I.hin, I.hout, I.hlast = u.pred, u.hin, u.hout, u.hlast
            if t[-1] == n - 1:
                last = I
            if not u.nop:
                instrs.append(I)
        s1 = Instr(st.s1, np.array([-1]), tuple(a.reshape(1, -1) for a in st.s1_addr), virtual=True)
        s1.pred, s1.hin, s1.hout, s1.hlast = st.s1_pred, st.op_hin, st.op_hout, st.op_hlast
        plan = Plan()
        plan.P, plan.ut, plan.nr, plan.n, plan.w = self.P, self.ut, self.nr, n, self.cfg.fmt.width
        plan.n_regs = self.n_regs
        plan.pidx = self.pidx
        ar = np.empty_like(st.ar)
        for i, a in enumerate(ars):
            ar[:, i] = a[n]
        plan.final_ar, plan.final_stride = ar, final_stride
        # the address registers the region names: the plan sets these at its exit, the
        # others keep their values (the plan does not depend on them: FlowRunner's key)
        plan.ar_cols = ar_columns(tmpls, self.n_ar)
        plan.s1_tmpl = last.u
        plan.s1_addr = tuple(np.array(np.broadcast_to(addr_of(f)[n - 1], (self.P,))) for f in range(4))
        self.instrs, self.s1 = instrs, s1
        self.plan = plan
        self._nodes()
        self._resolve()
        self._levels()
        self._allocate()
        self._batches()
        self._exit()
        flatten(plan, self.P, {"a": self.cfg.mem_a_words, "b": self.cfg.mem_b_words})
        plan.nbytes = plan_nbytes((plan.batches, plan.final_rf, plan.final_rd, plan.final_mem, plan.exit_mp,
                               plan.exit_ap, plan.hout, plan.host)) + plan.rows * self.P * self.ut.itemsize
        return plan

    def _addr(self, I, f):
        """SRAM addresses of field f (0 ra, 1 rb, 2 wa, 3 wb) of every occurrence of I: [k, Q]."""
        if I.virtual:
            return I.addr[f]
        return self.addr_of(f)[I.t]

    def _final_mem_by_class(self, bank, ws, cls, lo, hi, a, r) -> bool:
        """The last SRAM writes of at most 32 classes of PEs, per class: its words and,
        for values in the PE's own column of ``V`` in rows that do not depend on the PE,
        the rows (the plan writes ``mem[pes][:, words] = V[rows][:, pes].T``), otherwise
        flat indices into ``V`` [words, pes of the class]. False (nothing added) for more
        classes."""
        G = len(lo)
        if G > 32:
            return False
        P = self.P
        rows = np.full(len(a), -1, np.int64)          # -1: a value that depends on the PE
        per_pe = []
        for i in uniq(r[0]):
            nd = ws[i].node
            sel = np.nonzero(r[0] == i)[0]
            if nd.kind != "wr":
                rows[sel] = nd.base + r[1][sel]
                continue
            ref = self.ref(nd.reads["src"])
            if ref.rows.ndim == 1 and ref.cols is None and ref.cmap is None:
                rows[sel] = ref.rows[r[1][sel]]
            else:
                per_pe.append((ref, sel))
        for j in range(G):
            if hi[j] <= lo[j]:
                continue
            pes = None if G == 1 else np.nonzero(cls == j)[0]
            pj = self.pidx if pes is None else pes
            u = rows[lo[j]:hi[j]] >= 0
            if u.any():
                self.plan.final_mem.append(("class", bank, pes, a[lo[j]:hi[j]][u], rows[lo[j]:hi[j]][u]))
            for ref, sel in per_pe:
                sel = sel[(sel >= lo[j]) & (sel < hi[j])]
                if len(sel):
                    occ = r[1][sel]
                    R = ref.rows[occ][:, pj] if ref.rows.ndim == 2 else ref.rows[occ][:, None]
                    Cc = ref.cmap[pj][None, :] if ref.cmap is not None else pj[None, :] if ref.cols is None \
                        else ref.cols[occ][:, pj]
                    self.plan.final_mem.append(("class", bank, pes, a[sel], np.ascontiguousarray(R * P + Cc)))
        return True

    # -- exit state ------------------------------------------------------------------------------------
    def _exit(self):
        plan = self.plan
        n, P = self.n, self.P
        mul, lat = self.mul, self.lat
        plan.final_rf = []
        for r, ix in enumerate(self.rf_ix):
            if ix.writers:
                rd = Read("rf", r, np.array([n]))
                rd.res = ix.resolve(rd.cyc)
                plan.final_rf.append((r, self.ref(rd)))
        plan.final_rd = []
        for b, ix in enumerate(self.rd_ix):
            if ix.writers:
                rd = Read("rd", b, np.array([n]))
                rd.res = ix.resolve(rd.cyc)
                plan.final_rd.append((b, self.ref(rd)))
        plan.final_mem = []
        for bank in ("a", "b"):
            ws = [w for w in self.mem_w[bank] if len(w.cyc)]
            if not ws:
                continue
            D = self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words
            # the last write of every word, found for one PE of each class of PEs with the
            # same writes (Resolver._pe_classes), then every PE of the class
            ix = self._bank_index(bank)
            cls, rep = ix[6:8]
            gg_all, aa_all, cc_all, rr_all = [], [], [], []
            for i, w in enumerate(ws):
                m = np.broadcast_to(w.mask, (len(w.cyc), P))[:, rep] & (w.cyc < n)[:, None]
                kk, gg = np.nonzero(m)
                if not len(kk):
                    continue
                gg_all.append(gg)
                aa_all.append(np.broadcast_to(w.addr, (len(w.cyc), P))[:, rep][kk, gg])
                cc_all.append(w.cyc[kk])
                rr_all.append(np.stack([np.full(len(kk), i), w.occ[kk]]))       # writer, occurrence
            if not gg_all:
                continue
            gg = np.concatenate(gg_all)
            aa = np.concatenate(aa_all)
            cc = np.concatenate(cc_all)
            rr = np.concatenate(rr_all, axis=1)
            key = gg * D + aa
            o = np.lexsort((cc, key))
            key, rr, gg = key[o], rr[:, o], gg[o]
            lastw = np.concatenate([key[1:] != key[:-1], [True]])
            g, a, r = gg[lastw], key[lastw] % D, rr[:, lastw]
            # every PE (in order) takes its class's words (in address order: sorted by key)
            lo = np.searchsorted(g, np.arange(len(rep)))
            hi = np.searchsorted(g, np.arange(len(rep)), side="right")
            if self._final_mem_by_class(bank, ws, cls, lo, hi, a, r):
                continue
            lens = (hi - lo)[cls]
            idx = np.repeat(lo[cls] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(int(lens.sum()))
            pp = np.repeat(np.arange(P), lens)
            a, r = a[idx], r[:, idx]
            vr, vc = np.empty_like(pp), np.empty_like(pp)
            for i in uniq(r[0]):
                sel = r[0] == i
                vr[sel], vc[sel] = self.val_rows(ws[i].node, r[1][sel], pp[sel])
            plan.final_mem.append(("flat", bank, pp, a, vr, vc))
        # FMAs in flight at cycle n
        plan.exit_mp = [None] * mul
        plan.exit_ap = [None] * self.add
        for nd in self.fmas:
            s = nd.info["s"]
            waddr = nd.info["waddr"]
            if nd.info.get("pending_ap"):
                lcyc = int(s[0]) + mul
                if lcyc + self.add >= n:
                    plan.exit_ap[n - 1 - lcyc] = (nd.info["pred"], nd.info["dst"], nd.base, nd.info["wbk"],
                                                  np.array(np.broadcast_to(waddr[0], (P,))))
                continue
            k0 = int(np.searchsorted(s, n - lat, side="left"))
            for k in range(k0, len(s)):
                sk = int(s[k])
                if sk >= n:
                    break
                wa = np.array(np.broadcast_to(waddr[k], (P,)))
                if sk + mul >= n:
                    c_rf = "c_reg" in nd.info
                    if c_rf:
                        c = nd.info["c_reg"]
                    elif "cap_node" in nd.info:
                        c = Ref(np.array([nd.info["cap_node"].base]))
                    else:
                        c = self.ref(nd.info["cap"]).head(k, k + 1)
                    plan.exit_mp[n - 1 - sk] = (nd.info["pred"], nd.info["dst"], nd.info["prod"].base + k, c_rf, c,
                                                nd.info["wbk"], wa)
                elif sk + lat >= n:
                    plan.exit_ap[n - 1 - (sk + mul)] = (nd.info["pred"], nd.info["dst"], nd.base + k,
                                                        nd.info["wbk"], wa)
        # hout beats in cycle order
        rows, cols, lasts, cyc = [], [], [], []
        nr = self.nr
        for I in self.hout_instrs:
            axis = "row" if I.hout == HostDir.ROW else "col"
            ref = self.bus_ref(I, axis)
            R, C = to2d(ref, P, self.pidx)
            pos = np.arange(nr) * nr if axis == "row" else np.arange(nr)
            rows.append(R[:, pos])
            cols.append(C[:, pos])
            lasts += [bool(I.hlast)] * I.k_op
            cyc.append(I.s)
        if rows:
            cyc = np.concatenate(cyc)
            o = np.argsort(cyc, kind="stable")
            plan.hout = (np.concatenate(rows)[o], np.concatenate(cols)[o], [lasts[i] for i in o])
        else:
            plan.hout = None
