"""Value-table layout and batches of the loop-level dataflow compiler.

:class:`Batcher` is the part of :class:`sim.fast_flow_compile.Compiler` that allocates
the rows of the plan's value table (entry state, constants, host lanes, FMAs in flight,
value nodes by level and kind), turns every read into an index into it (:class:`Ref`)
and groups the nodes into batches, accumulation chains into chain batches evaluated
along the chain.
"""

from __future__ import annotations

import numpy as np

from arch.microop import MvOp
from sim.fast_flow_graph import FlowFail, Read, Ref, cat_refs, group_columns, to2d, uniq

__all__ = ["Batcher"]


class Batcher:
    """Rows, references and batches of a region (mixed into
    :class:`~sim.fast_flow_compile.Compiler`, whose attributes it uses)."""

    # -- rows ------------------------------------------------------------------------------------
    def _allocate(self):
        plan = self.plan
        row = 0
        plan.rf_row0 = row
        row += self.n_regs
        plan.rd_row = row
        row += 2
        consts = {}
        for rd in self._every_read():
            if rd.kind == "const":
                consts.setdefault(rd.a, None)
        consts.setdefault(0, None)
        plan.consts = []
        self.const_row = {}
        for v in consts:
            self.const_row[v] = row
            plan.consts.append((row, self.ut.type(v)))
            row += 1
        plan.host = []
        self.host_row = {}
        for axis in ("row", "col"):
            lst = self.host_steps[axis]
            if not lst:
                continue
            s1_host = lst[0][0] == "s1"
            steps = [v for kind, v in lst if kind == "steps"]
            occ_base = []
            r0 = row
            pos = 1 if s1_host else 0
            for kind, v in lst:
                if kind == "s1":
                    occ_base.append(r0)
                else:
                    occ_base.append(r0 + pos)
                    pos += len(v)
            self.host_row[axis] = occ_base
            allsteps = np.concatenate(steps) if steps else np.zeros(0, np.int64)
            plan.host.append((r0, axis, allsteps, s1_host))
            row += pos
        plan.pseudo = []
        for nd in self.pseudo:
            nd.base = row
            what = {"pprod": "prod", "pcval": "cval", "pval": "val"}[nd.kind]
            plan.pseudo.append((row, what, nd.info["entry"]))
            row += 1
        # value nodes by (level, kind); chain results anywhere
        kinds = {"mr": 0, "prod": 1, "fma": 2, "mv": 3, "wr": 4}
        order = sorted((nd for nd in self.nodes if not nd.bound),
                       key=lambda nd: (nd.level, kinds[nd.kind], nd.info.get("bank", ""),
                                       nd.info.get("op", 0), bool(nd.info.get("chain"))))
        for nd in order:
            if nd.kind == "wr":
                # an SRAM store's data is its source's value: no rows of its own, the reads
                # of what it writes read the source (:meth:`val_rows`)
                nd.base = -1
                continue
            nd.base = row
            row += nd.k
        self.order = order
        plan.rows = row

    def _every_read(self):
        yield from self._all_reads()
        for I in [self.s1] + self.instrs:
            for v in I.bus.values():
                if v[0] == "drv":
                    yield v[1]

    # -- references ------------------------------------------------------------------------------
    def ref(self, rd: Read) -> Ref:
        if rd.ref is not None:
            return rd.ref
        if rd.kind == "const":
            r = Ref(np.full(len(rd.cyc), self.const_row[rd.a], np.int64))
        elif rd.kind in ("rf", "rd"):
            if rd.batch is not None:
                batch, off, k = rd.batch
                if "rows" not in batch:
                    batch["rows"] = self._res_rows(rd.kind, rd.a, batch["ix"], batch["res"])
                r = Ref(self._group_rows(*batch["rows"], off, off + k))
            else:
                vals, gid = self._res_rows(rd.kind, rd.a, self.rf_ix[rd.a] if rd.kind == "rf" else self.rd_ix[rd.a],
                                           rd.res)
                r = Ref(self._group_rows(vals, gid, 0, vals.shape[1]))
        elif rd.kind == "bus":
            I, axis = rd.a
            r = self.bus_ref(I, axis)
        else:
            raise AssertionError(rd.kind)
        rd.ref = r
        return r

    def _res_rows(self, kind, a, ix, res):
        """The rows in ``V`` of resolved register / read-port reads: ``(vals, gid)``, the
        rows of each group of PEs [groups, reads] and the group of each PE."""
        init = self.plan.rf_row0 + a if kind == "rf" else self.plan.rd_row + a
        bases = np.array([w.node.base for w in ix.writers] + [init], np.int64)
        vals = np.empty((len(res), len(res[0][1])), np.int64)
        gid = np.zeros(self.P, np.int64)
        for g, (pes, wid, occ) in enumerate(res):
            vals[g] = bases[wid] + np.where(wid >= 0, occ, 0)
            if pes is not None:
                gid[pes] = g
        return vals, gid

    @staticmethod
    def _group_rows(vals, gid, i, j):
        """Rows of the reads ``i .. j - 1`` (:meth:`_res_rows`): [j - i] when every group
        of PEs reads the same rows (the PE's own column), otherwise [j - i, P]."""
        v = vals[:, i:j]
        if len(v) == 1 or (v == v[:1]).all():
            return v[0]
        return v.T.take(gid, axis=1)

    def bus_ref(self, I, axis, k=None):
        P = self.P
        b = I.bus[axis]
        k = I.k_op if k is None else k
        if b[0] == "host":
            base = self.host_row[axis][b[1]]
            return Ref(base + np.arange(k, dtype=np.int64))
        if b[0] == "zero":
            return Ref(np.full(k, self.const_row[0], np.int64))
        _, drv, frm = b
        dref = self.ref(drv)
        if dref.rows.ndim == 1 and dref.cols is None and dref.cmap is None:
            # the driver's values in one row per read: PE p hears column frm[p] of it
            if (frm < 0).any():
                rows = np.broadcast_to(dref.rows[:, None], (len(dref.rows), P))
                return Ref(np.ascontiguousarray(np.where(frm[None, :] < 0, self.const_row[0], rows)),
                           np.ascontiguousarray(np.broadcast_to(np.maximum(frm, 0), rows.shape)))   # col 0: +0
            return Ref(dref.rows, cmap=np.asarray(frm, np.int64))
        R, C = to2d(dref, P, self.pidx)
        fc = np.maximum(frm, 0)
        rows = R[:, fc]
        cols = C[:, fc]
        if (frm < 0).any():
            none = frm < 0
            rows = np.where(none[None, :], self.const_row[0], rows)
            cols = np.where(none[None, :], 0, cols)
        return Ref(np.ascontiguousarray(rows), np.ascontiguousarray(cols))

    # -- batches ------------------------------------------------------------------------------------
    def _batches(self):
        P, pidx = self.P, self.pidx
        plan = self.plan
        batches = []
        chains_by_level = {}
        for lvl, comp in self.chains:
            chains_by_level.setdefault(lvl, []).append(comp)
        # group consecutive nodes of one level and kind (allocation order)
        groups = []
        for nd in self.order:
            if nd.k == 0 or nd.info.get("chain") or nd.kind == "wr":
                continue
            key = (nd.level, nd.kind, nd.info.get("bank"), nd.info.get("op") if nd.kind == "mv" else None)
            if groups and groups[-1][0] == key:
                groups[-1][1].append(nd)
            else:
                groups.append((key, [nd]))
        levels = sorted({g[0][0] for g in groups} | set(chains_by_level))
        gi = 0
        for lvl in levels:
            while gi < len(groups) and groups[gi][0][0] == lvl:
                (_, kind, bank, op), nds = groups[gi]
                gi += 1
                s, e = nds[0].base, nds[-1].base + nds[-1].k
                if kind == "mr":
                    if all(nd.info["addr"].shape[1] == 1 for nd in nds):
                        addr = np.concatenate([nd.info["addr"][:, 0] for nd in nds])
                    else:
                        addr = np.concatenate([np.broadcast_to(nd.info["addr"], (nd.k, P)) for nd in nds])
                    hits = [self._hits(nd) for nd in nds]
                    hits = [h for h in hits if h is not None]
                    if hits:
                        hits = tuple(np.concatenate([h[i] for h in hits]) for i in range(4))
                    else:
                        hits = None
                    batches.append(("memread", bank, s, e, addr, hits))
                elif kind == "prod":
                    batches.append(("prod", s, e, cat_refs([self.ref(nd.reads["a"]) for nd in nds], P, pidx),
                                    cat_refs([self.ref(nd.reads["b"]) for nd in nds], P, pidx)))
                elif kind == "fma":
                    prows = np.concatenate([nd.info["prod"].base + np.arange(nd.k) for nd in nds])
                    batches.append(("fma", s, e, prows, cat_refs([self._c_ref(nd) for nd in nds], P, pidx)))
                elif kind == "mv":
                    rs = cat_refs([self.ref(nd.reads["src"]) for nd in nds], P, pidx)
                    rm = cat_refs([self.ref(nd.reads["msk"]) for nd in nds], P, pidx) if op == MvOp.MASK else None
                    batches.append(("mv", op, s, e, rs, rm))
            for comp in chains_by_level.get(lvl, []):
                batches.extend(b + (lvl,) for b in self._chain_batches(comp))
        plan.batches = [b[:5] if b[0] == "chain" else b for b in self._merge_chain_batches(batches)]

    def _c_ref(self, nd):
        k = nd.k
        if "c_reg" in nd.info:
            return self.ref(nd.reads["c"]) if k else Ref(np.zeros(0, np.int64))
        if "cap_node" in nd.info:
            return Ref(np.full(k, nd.info["cap_node"].base, np.int64))
        return self.ref(nd.info["cap"]).head(0, k)

    def _hits(self, nd):
        h = nd.info["hits"]
        if h is None:
            return None
        kk, pp, wid, occ, ws = h
        sr, sc = np.empty_like(pp), np.empty_like(pp)
        for i in uniq(wid):
            sel = wid == i
            sr[sel], sc[sel] = self.val_rows(ws[i].node, occ[sel], pp[sel])
        return (nd.base + kk, pp, sr, sc)

    def val_rows(self, node, occ, pp):
        """``(rows, cols)`` in ``V`` of ``node``'s values at its occurrences ``occ`` on the
        PEs ``pp``; an SRAM store's are its source's (it has no rows of its own)."""
        if node.kind != "wr":
            return node.base + occ, pp
        ref = self.ref(node.reads["src"])
        rows = ref.rows[occ] if ref.rows.ndim == 1 else ref.rows[occ, pp]
        if ref.cmap is not None:
            return rows, ref.cmap[pp]
        return rows, pp if ref.cols is None else ref.cols[occ, pp]

    def _merge_chain_batches(self, batches):
        """Consecutive chain batches with the same length and all-PE form -> one batch."""
        out = []
        for b in batches:
            if (b[0] == "chain" and out and out[-1][0] == "chain" and b[5] == out[-1][5] and b[1] is None
                    and out[-1][1] is None and b[3].shape[1] == out[-1][3].shape[1] and b[2].cols is None
                    and out[-1][2].cols is None and b[2].rows.ndim == 1 and out[-1][2].rows.ndim == 1
                    and b[2].cmap is None and out[-1][2].cmap is None):
                p = out[-1]
                out[-1] = ("chain", None, Ref(np.concatenate([p[2].rows, b[2].rows])),
                           np.concatenate([p[3], b[3]]), np.concatenate([p[4], b[4]]), b[5])
            else:
                out.append(b)
        return out

    def _chain_batches(self, comp):
        """Accumulation chains of one SCC as chain batches (see Plan.run)."""
        P = self.P
        if len(comp) == 1:
            b = self._chain_simple(comp[0])
            if b is not None:
                return b
        base = {}
        E = 0
        for nd in comp:
            base[nd] = E
            E += nd.k
        if E == 0:
            return []
        sig = [nd.info["pred"] for nd in comp]
        for nd in comp:
            gid = np.zeros(P, np.int64)
            for g, (pes, _, _) in enumerate(nd.reads["c"].res):
                if pes is not None:
                    gid[pes] = g
            sig.append(gid)
        ng, inv = group_columns(np.array(sig, np.int64))
        out = []
        for g in range(ng):
            pes = np.nonzero(inv == g)[0]
            out += self._chain_group(comp, base, E, pes)
        return out

    def _chain_simple(self, nd):
        """One FMA accumulating into itself alike on every PE, each chain a run of
        consecutive occurrences (``mac r += ...`` in a loop); None: general path."""
        rd = nd.reads["c"]
        if not nd.info["pred"].all() or len(rd.res) != 1:
            return None
        _, wid, occ = rd.res[0]
        ix = self.rf_ix[rd.a]
        self_w = [i for i, w in enumerate(ix.writers) if w.node is nd]
        if len(self_w) != 1:
            return None
        inner = wid == self_w[0]
        k = nd.k
        e = np.arange(k)
        if not np.array_equal(occ[inner], e[inner] - 1):
            return None
        starts = np.flatnonzero(~inner)
        lens = np.diff(np.append(starts, k))
        init = self.plan.rf_row0 + rd.a
        bases = np.array([w.node.base for w in ix.writers] + [init], np.int64)
        hw, ho = wid[starts], occ[starts]
        heads = np.where(hw >= 0, bases[hw] + ho, init)
        prod = nd.info["prod"].base
        out = []
        for L in uniq(lens):
            chs = np.flatnonzero(lens == L)
            idx = starts[chs][:, None] + np.arange(L)[None, :]
            out.append(("chain", None, Ref(heads[chs]), prod + idx, nd.base + idx))
        return out

    def _chain_group(self, comp, base, E, pes):
        p0 = pes[0]
        prev = np.full(E, -2, np.int64)      # -2: inactive here, -1: head, else element index
        res_of = {}
        for nd in comp:
            if not nd.info["pred"][p0]:
                continue
            rd = nd.reads["c"]
            ix = self.rf_ix[rd.a]
            for gpes, wid, occ in rd.res:
                if gpes is None or (gpes == p0).any():
                    break
            pr = np.full(nd.k, -1, np.int64)
            for w in uniq(wid):
                if w < 0:
                    continue
                wn = ix.writers[w].node
                if wn in base:
                    sel = wid == w
                    pr[sel] = base[wn] + occ[sel]
            prev[base[nd]:base[nd] + nd.k] = pr
            res_of[nd] = (wid, occ, ix)
        act = prev > -2
        if not act.any():
            return []
        succ_src = prev[prev >= 0]
        if len(succ_src) and np.bincount(succ_src).max() > 1:
            raise FlowFail("accumulator value read by two chain elements")
        ids = np.nonzero(act)[0]
        head = np.where(prev >= 0, prev, np.arange(E))
        while True:
            nxt = head[head]
            if np.array_equal(nxt, head):
                break
            head = nxt
        times = np.zeros(E, np.int64)
        node_of = np.zeros(E, np.int64)
        occ_of = np.zeros(E, np.int64)
        for i, nd in enumerate(comp):
            times[base[nd]:base[nd] + nd.k] = nd.info["s"][:nd.k]
            node_of[base[nd]:base[nd] + nd.k] = i
            occ_of[base[nd]:base[nd] + nd.k] = np.arange(nd.k)
        order = ids[np.lexsort((times[ids], head[ids]))]
        hd = head[order]
        starts = np.nonzero(np.concatenate([[True], hd[1:] != hd[:-1]]))[0]
        lens = np.diff(np.concatenate([starts, [len(order)]]))
        nonhead = np.ones(len(order), bool)
        nonhead[starts] = False
        if not np.array_equal(prev[order[1:][nonhead[1:]]], order[:-1][nonhead[1:]]):
            raise FlowFail("accumulation chain is not a sequence")
        prod_base = np.array([nd.info["prod"].base for nd in comp], np.int64)
        res_base = np.array([nd.base for nd in comp], np.int64)
        prow = prod_base[node_of[order]] + occ_of[order]
        rrow = res_base[node_of[order]] + occ_of[order]
        heads = order[starts]
        hrow = np.empty(len(heads), np.int64)
        for h_i, e in enumerate(heads):
            nd = comp[node_of[e]]
            wid, occ, ix = res_of[nd]
            o = occ_of[e]
            w = wid[o]
            init = self.plan.rf_row0 + nd.reads["c"].a
            hrow[h_i] = init if w < 0 else ix.writers[w].node.base + occ[o]
        out = []
        allp = len(pes) == self.P
        for L in uniq(lens):
            chs = np.flatnonzero(lens == L)
            idx = starts[chs][:, None] + np.arange(L)[None, :]
            out.append(("chain", None if allp else pes, Ref(hrow[chs]), prow[idx], rrow[idx]))
        return out
