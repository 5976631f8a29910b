"""Read resolution and dependency levels of the loop-level dataflow compiler.

:class:`Resolver` is the part of :class:`sim.fast_flow_compile.Compiler` that resolves
every operand read of the region to the write that produced its value (register and
read-port writes by a sorted search per group of PEs, SRAM words by a search keyed on
PE, address and cycle), orders the dependency graph's strongly connected components
into levels and accepts accumulation chains as the only cycles.
"""

from __future__ import annotations

import numpy as np

from arch.microop import FmaWb
from sim.fast_flow_graph import FlowFail, ResIndex, group_columns, uniq

__all__ = ["Resolver"]

_ONE_CLASS, _NO_CLASS = np.zeros(1, np.int64), np.zeros(0, np.int64)


class Resolver:
    """Resolution of reads, dependency levels and accumulation chains of a region
    (mixed into :class:`~sim.fast_flow_compile.Compiler`, whose attributes it uses)."""

    # -- resolution --------------------------------------------------------------------------
    def _all_reads(self):
        for nd in self.nodes:
            for rd in nd.reads.values():
                yield rd
            if "cap" in nd.info:
                yield nd.info["cap"]

    def _resolve(self):
        P = self.P
        self.rf_ix = [ResIndex(w, P) for w in self.rf_w]
        self.rd_ix = [ResIndex(w, P) for w in self.rd_w]
        # batch the reads of each resource: one search per resource and PE group
        by_res = {}
        reads = list(self._all_reads())
        for I in [self.s1] + self.instrs:
            for v in I.bus.values():
                if v[0] == "drv":
                    reads.append(v[1])
        for rd in reads:
            if rd.kind in ("rf", "rd"):
                by_res.setdefault((rd.kind, rd.a), []).append(rd)
        for (kind, a), lst in by_res.items():
            ix = self.rf_ix[a] if kind == "rf" else self.rd_ix[a]
            lens = [len(r.cyc) for r in lst]
            cyc = np.concatenate([r.cyc for r in lst]) if len(lst) > 1 else lst[0].cyc
            res = ix.resolve(cyc)
            batch = {"ix": ix, "res": res, "kind": kind, "a": a}
            pos = 0
            for r, k in zip(lst, lens):
                r.res = [(pes, wid[pos:pos + k], occ[pos:pos + k]) for pes, wid, occ in res]
                r.batch = (batch, pos, k)
                pos += k
            # dependencies of every read of this resource at once
            W = len(ix.writers)
            if W:
                rid = np.repeat(np.arange(len(lst)), lens)
                for pes, wid, occ in res:
                    for key in uniq(rid * (W + 1) + (wid + 1)):
                        ri, w = divmod(key, W + 1)
                        if w >= 1:
                            lst[ri].deps.add(ix.writers[w - 1].node)
        # dependencies
        for nd in self.nodes:
            for rd in nd.reads.values():
                nd.deps |= self._read_deps(rd)
            if "cap" in nd.info:
                nd.deps |= self._read_deps(nd.info["cap"])
        # SRAM reads
        self.bank_ix = {}
        readers = [nd for nd in self.nodes if nd.kind == "mr"]
        hits_of = self._mem_resolve(readers)
        for nd in readers:
            hits = hits_of[nd]
            nd.info["hits"] = hits
            if hits is not None:        # the writers hit (not every writer of the bank)
                nd.deps |= {hits[4][w].node for w in uniq(hits[2])}

    def _read_deps(self, rd):
        if rd.kind in ("rf", "rd"):
            return rd.deps
        if rd.kind == "bus":
            I, axis = rd.a
            b = I.bus[axis]
            if b[0] == "drv":
                return self._read_deps(b[1])
        return set()

    def _pe_classes(self, bank, ws):
        """``(G, class of each PE, first PE of each class)``: PEs whose SRAM traffic in
        ``bank`` is the same in this region (the same masks and addresses in every write
        and every read): their reads resolve alike, so one PE of each class is searched."""
        P = self.P
        rows = []
        readers = [nd for nd in self.nodes if nd.kind == "mr" and nd.info["bank"] == bank]
        arrays = [a for w in ws for a in (w.mask, w.addr)] + [a for nd in readers
                                                            for a in (nd.info["pred"], nd.info["addr"])]
        for a in arrays:
            a = np.asarray(a)
            if a.ndim and a.shape[-1] == P:
                a = a.reshape(-1, P)
                if not (a == a[:, :1]).all():
                    rows.append(a.astype(np.int64))
        if not rows:
            return 1, np.zeros(P, np.int64), np.zeros(1, np.int64)
        G, cls = group_columns(np.concatenate(rows))
        rep = np.full(G, P, np.int64)
        np.minimum.at(rep, cls, np.arange(P))
        return G, cls, rep

    def _bank_index(self, bank):
        if bank in self.bank_ix:
            return self.bank_ix[bank]
        ws = [w for w in self.mem_w[bank] if len(w.cyc)]
        if not ws:
            self.bank_ix[bank] = None
            return None
        P = self.P
        G, cls, rep = self._pe_classes(bank, ws)
        D = self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words
        C = self.n + 64
        keys, wid, occ = [], [], []
        for i, w in enumerate(ws):
            m = np.broadcast_to(w.mask, (len(w.cyc), P))[:, rep]
            kk, gg = np.nonzero(m)
            addr = np.broadcast_to(w.addr, (len(w.cyc), P))[:, rep][kk, gg]
            keys.append((gg * D + addr) * C + (w.cyc[kk] + 32))
            wid.append(np.full(len(kk), i, np.int64))
            occ.append(w.occ[kk])
        keys = np.concatenate(keys)
        order = np.argsort(keys, kind="stable")
        # the PEs of each class, in order: members[starts[g]:starts[g + 1]]
        members = np.argsort(cls, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(cls, minlength=G))])
        res = (keys[order], np.concatenate(wid)[order], np.concatenate(occ)[order], ws, C, D, cls, rep, members,
               starts)
        self.bank_ix[bank] = res
        return res

    def _mem_resolve(self, readers) -> dict:
        """Per SRAM read node: its reads that hit a write of the region (only PEs that
        read), (k idx, pe idx, writer idx, writer occ, writers), or None. The search is per
        class of PEs (:meth:`_pe_classes`), its hits then hold for every PE of the class;
        one search for all the reads of a bank."""
        out = {}
        for bank in ("a", "b"):
            nds = [nd for nd in readers if nd.info["bank"] == bank]
            idx = self._bank_index(bank) if nds else None
            if idx is None:
                out.update(dict.fromkeys(nds, None))
                continue
            keys, wid, occ, ws, C, D, cls, rep, members, starts = idx
            classes, rk, shapes = {}, [], []
            for nd in nds:
                pred = nd.info["pred"]
                if len(rep) == 1:
                    gs = _ONE_CLASS if pred.any() else _NO_CLASS
                else:       # the classes that read (all their PEs do)
                    gs = classes.get(id(pred))
                    if gs is None:
                        gs = classes[id(pred)] = np.unique(cls[np.nonzero(pred)[0]])
                t, addr = nd.info["t"], nd.info["addr"]
                if addr.shape[1] != 1 or len(gs) != 1:
                    addr = np.broadcast_to(addr, (len(t), self.P))[:, rep[gs]]
                r = (gs[None, :] * D + addr) * C + (t[:, None] + 32)
                rk.append(r.reshape(-1))
                shapes.append((gs, r.shape))
            rkey = np.concatenate(rk)
            pos = np.searchsorted(keys, rkey, side="left") - 1
            pc = np.maximum(pos, 0)
            hit = (pos >= 0) & (keys[pc] // C == rkey // C)
            lens = [len(r) for r in rk]
            nhit = np.bincount(np.repeat(np.arange(len(nds)), lens)[hit], minlength=len(nds))
            a = 0
            for i, nd in enumerate(nds):
                b = a + lens[i]
                gs, shape = shapes[i]
                out[nd] = self._mem_hits(gs, hit[a:b].reshape(shape), pc[a:b].reshape(shape), idx) if nhit[i] \
                    else None
                a = b
        return out

    @staticmethod
    def _mem_hits(gs, hit, pc, idx):
        """The hits of one read node (:meth:`_mem_resolve`): ``hit`` and ``pc`` [k, classes]."""
        keys, wid, occ, ws, C, D, cls, rep, members, starts = idx
        kk, jj = np.nonzero(hit)
        g = gs[jj]
        n = starts[g + 1] - starts[g]
        if (n == 1).all():
            return (kk, members[starts[g]], wid[pc[kk, jj]], occ[pc[kk, jj]], ws)
        # every PE of the hit's class
        first = np.repeat(starts[g] - np.concatenate([[0], np.cumsum(n)[:-1]]), n)
        pe = members[first + np.arange(int(n.sum()))]
        return (np.repeat(kk, n), pe, np.repeat(wid[pc[kk, jj]], n), np.repeat(occ[pc[kk, jj]], n), ws)

    # -- levels ------------------------------------------------------------------------------------
    def _levels(self):
        nodes = [nd for nd in self.nodes if not nd.bound]
        idx = {nd: i for i, nd in enumerate(nodes)}
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
                av = adj[v]
                for j in range(i, len(av)):
                    w = av[j]
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
        # Tarjan emits dependencies first
        self.chains = []
        for comp in sccs:
            cn = [nodes[i] for i in comp]
            cs = set(cn)
            lvl = 0
            for nd in cn:
                for d in nd.deps:
                    if d not in cs and not d.bound:
                        lvl = max(lvl, d.level + 1)
            if len(cn) > 1 or comp[0] in adj[comp[0]]:
                self._check_chain(cn, cs)
                self.chains.append((lvl, cn))
                for nd in cn:
                    nd.info["chain"] = True
            for nd in cn:
                nd.level = lvl

    def _check_chain(self, comp, cs):
        memory = any(nd.kind == "mr" for nd in comp)
        for nd in comp:
            if nd.kind != "fma" or "c_reg" not in nd.info or nd.info["wbk"] != FmaWb.RF \
                    or "c" not in nd.reads or nd.reads["c"].kind != "rf":
                raise FlowFail(f"dependency cycle through {nd}", memory)
            if nd.info["prod"] in cs:
                raise FlowFail(f"dependency cycle through the product of {nd}", memory)
