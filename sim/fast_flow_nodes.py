"""Value nodes of the loop-level dataflow compiler.

:class:`NodeBuilder` is the part of :class:`sim.fast_flow_compile.Compiler` that turns
the region's instructions (every occurrence of each at once) and the FMAs in flight at
entry into value nodes (SRAM reads, products, FMA results, moves, SRAM write data),
their writes into registers, read ports and SRAM words, their operand reads, the bus
wiring and host lanes, and the events the counters count from them.
"""

from __future__ import annotations

import numpy as np

from arch.isa import HostDir
from arch.microop import FmaWb, MvOp
from sim.fast_common import SRC_COL, SRC_MEMA, SRC_MEMB, SRC_ROW
from sim.fast_flow_graph import Node, Read, Writes

__all__ = ["NodeBuilder"]


class _Tally:
    """What the node builders collect besides the nodes: event counts, the terms of the
    per-PE FMA and hop counters, and the operand-stage SRAM write nodes per bank."""

    __slots__ = ("ev", "fma_terms", "hop_terms", "host_hops", "wr_nodes")

    def __init__(self):
        self.ev = dict(mv=0, mem_a_rd=0, mem_b_rd=0, mem_a_wr=0, mem_b_wr=0, rf_rd=0, rf_wr=0, rf_conflict=0,
                       mem_conflict=0)
        self.fma_terms = []                # (pred mask, occurrences): fma[p] counters
        self.hop_terms = {"row": [], "col": []}
        self.host_hops = {"row": 0, "col": 0}
        self.wr_nodes = {"a": [], "b": []}


class NodeBuilder:
    """Nodes, writes, reads and events of a region (mixed into
    :class:`~sim.fast_flow_compile.Compiler`, whose attributes it uses)."""

    @staticmethod
    def _bus_needs(u, pred, hout):
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

    def _src(self, code, I, s, drv=False) -> Read:
        """The read of source ``code`` in cycles ``s`` (operand stages of ``I``)."""
        if code < 16:
            if code >= self.n_regs:
                return Read("const", 0, s)
            return Read("rf", code, s)
        if code == SRC_MEMA:
            return Read("rd", 0, s)
        if code == SRC_MEMB:
            return Read("rd", 1, s)
        if code in (SRC_ROW, SRC_COL):
            if drv:
                return Read("const", 0, s)
            return Read("bus", (I, "row" if code == SRC_ROW else "col"), s)
        return Read("const", self.cvals.get(code, 0), s)

    def _nodes(self):
        """Build the value nodes of the region's instructions and of the FMAs in flight at
        entry, their writes and reads; count the events into the plan."""
        self.nodes, self.pseudo, self.fmas = [], [], []
        self.rf_w = [[] for _ in range(self.n_regs)]
        self.rd_w = [[], []]
        self.mem_w = {"a": [], "b": []}
        self.hout_instrs = []
        self.host_steps = {"row": [], "col": []}
        tl = _Tally()
        for I in [self.s1] + self.instrs:
            self._instr_nodes(I, tl)
        self._entry_fma_nodes(tl)
        self._operand_sram_writes(tl)
        self._rf_conflicts(tl)
        self._plan_events(tl)

    def _instr_nodes(self, I, tl):
        """The nodes of every occurrence of instruction ``I``: its SRAM reads (issue
        stage), then in its operand stages (those before the region's end) the bus
        wiring, the FMA, the move and the SRAM writes."""
        n = self.n
        ev = tl.ev
        u = I.u
        pred = I.pred
        t = I.t
        k_op = 1 if I.virtual else len(t) - (int(t[-1]) == n - 1)    # operand stage < n
        I.k_op = k_op
        npred = int(pred.sum()) if I.virtual else u.n_pred
        if not I.virtual:
            for bank, en, do, nd_ in ((0, u.ra_en, u.ra_do, u.n_ra), (1, u.rb_en, u.rb_do, u.n_rb)):
                if en and nd_:
                    nd = Node("mr", len(t), bank="ab"[bank], addr=self._addr(I, bank), t=t, pred=do)
                    self.nodes.append(nd)
                    self.rd_w[bank].append(Writes(nd, t, 0, do))
                    ev["mem_a_rd" if bank == 0 else "mem_b_rd"] += len(t) * nd_
        if k_op == 0:
            return
        s = t[:k_op] + 1
        I.s = s
        self._bus_wiring(I, s, tl)
        if I.hout:
            self.hout_instrs.append(I)
        if not npred:
            return
        if u.fpu_en:
            self._fma_nodes(I, s, npred, tl)
        if u.mv_op != MvOp.NOP:
            mv = Node("mv", k_op, op=u.mv_op, dst=u.mv_dst, s=s, pred=pred)
            mv.reads["src"] = self._src(u.mv_src, I, s)
            ev["mv"] += k_op * npred
            ev["rf_rd"] += k_op * npred * (u.mv_src < 16)
            if u.mv_op == MvOp.MASK:
                mv.reads["msk"] = self._src(u.mv_msk, I, s)
                ev["rf_rd"] += k_op * npred * (u.mv_msk < 16)
            ev["rf_wr"] += k_op * npred
            if u.mv_dst < self.n_regs:
                self.rf_w[u.mv_dst].append(Writes(mv, s, 0, pred))
            self.nodes.append(mv)
        wmask = u.wpred if u.wp_en else pred              # the SRAM writes' PEs (a write predicate)
        nw = int(wmask.sum())
        for bank, en, srcf, ai in (("a", u.wa_en, u.wa_src, 2), ("b", u.wb_en, u.wb_src, 3)):
            if en and nw:
                wn = Node("wr", k_op, s=s, pred=wmask, waddr=self._addr(I, ai)[:k_op])
                wn.reads["src"] = self._src(srcf, I, s)
                ev["rf_rd"] += k_op * nw * (srcf < 16)
                self.nodes.append(wn)
                tl.wr_nodes[bank].append(wn)

    def _bus_wiring(self, I, s, tl):
        """What ``I``'s row and column buses carry in its operand stages ``s`` (host lanes,
        a driver's read, or zero; only the buses something reads), and their hops."""
        u = I.u
        k_op = I.k_op
        ev = tl.ev
        need = self._bus_needs(u, I.pred, I.hout)
        for axis, hd, drv, hops, src, ndrv in (("row", HostDir.ROW, u.rdrv, u.row_hops, u.rdrv_src, u.n_rdrv),
                                              ("col", HostDir.COL, u.cdrv, u.col_hops, u.cdrv_src, u.n_cdrv)):
            if I.hin == hd:
                tl.host_hops[axis] += self.nr * k_op
            elif ndrv:
                tl.hop_terms[axis].append((hops, k_op))
            if ndrv and src < 16:
                ev["rf_rd"] += k_op * ndrv
            if axis not in need:
                continue
            if I.hin == hd:
                I.bus[axis] = ("host", len(self.host_steps[axis]))
                if I.virtual:
                    self.host_steps[axis].append(("s1", None))
                else:
                    self.host_steps[axis].append(("steps", I.t[:k_op]))
            elif ndrv:
                rd = self._src(src, I, s, drv=True)
                I.bus[axis] = ("drv", rd, u.row_from if axis == "row" else u.col_from)
            else:
                I.bus[axis] = ("zero",)

    def _fma_nodes(self, I, s, npred, tl):
        """The product and FMA-result nodes of ``I``'s FMA and its write-backs in the region."""
        n = self.n
        mul, lat = self.mul, self.lat
        ev = tl.ev
        u = I.u
        pred = I.pred
        k_op = I.k_op
        prod = Node("prod", k_op)
        prod.reads["a"] = self._src(u.fpu_a, I, s)
        prod.reads["b"] = self._src(u.fpu_b, I, s)
        self.nodes.append(prod)
        k_res = k_op if int(s[-1]) + mul < n else int(np.searchsorted(s + mul, n))   # late read < n
        fma = Node("fma", k_res, prod=prod, s=s, dst=u.fpu_dst, wbk=u.wbk, pred=pred)
        fma.deps.add(prod)
        if u.c_rf:
            fma.info["c_reg"] = u.fpu_c
            fma.reads["c"] = self._src(u.fpu_c, I, s[:k_res] + mul)
        else:
            fma.info["cap"] = self._src(u.fpu_c, I, s)     # captured at the operand stage
        self.nodes.append(fma)
        self.fmas.append(fma)
        tl.fma_terms.append((pred, k_op))
        ev["rf_rd"] += k_op * npred * ((u.fpu_a < 16) + (u.fpu_b < 16))
        if u.c_rf:
            ev["rf_rd"] += k_res * npred
        waddr = self._addr(I, 1 if u.wbk == FmaWb.MEMB else 0)
        fma.info["waddr"] = waddr[:k_op]
        wcyc = s + lat
        k_w = k_op if int(wcyc[-1]) < n else int(np.searchsorted(wcyc, n))
        self._fma_writes(fma, u.wbk, u.fpu_dst, wcyc[:k_w], np.arange(k_w), pred, waddr[:k_w], self.rf_w,
                         self.mem_w, ev)

    def _entry_fma_nodes(self, tl):
        """Nodes of the FMAs in flight at entry: their products, captured ``c`` operands
        and pending sums are bound from the entry state (pseudo nodes)."""
        n = self.n
        mul, lat = self.mul, self.lat
        st = self.st
        ev = tl.ev
        for i, e in enumerate(st.mp):
            if e is None:
                continue
            s_ = np.array([-(i + 1)], np.int64)
            prod = Node("pprod", 1, bound=True, entry=i)
            self.pseudo.append(prod)
            k_res = int(s_[0] + mul < n)
            fma = Node("fma", k_res, prod=prod, s=s_, dst=e.dst, wbk=e.wb, pred=e.valid, name=f"mp{i}",
                       waddr=np.asarray(e.waddr).reshape(1, -1))
            if e.c_rf:
                fma.info["c_reg"] = e.c
                if k_res:
                    fma.reads["c"] = self._src(e.c, None, s_ + mul)
                ev["rf_rd"] += k_res * int(e.valid.sum())
            else:
                cn = Node("pcval", 1, bound=True, entry=i)
                self.pseudo.append(cn)
                fma.info["cap_node"] = cn
            self.nodes.append(fma)
            self.fmas.append(fma)
            wcyc = s_ + lat
            k_w = int(wcyc[0] < n)
            self._fma_writes(fma, e.wb, e.dst, wcyc[:k_w], np.arange(k_w), e.valid, fma.info["waddr"][:k_w],
                             self.rf_w, self.mem_w, ev)
        for j, e in enumerate(st.ap):
            if e is None:
                continue
            lcyc = -(j + 1)
            pv = Node("pval", 1, bound=True, entry=j, s=np.array([lcyc - mul], np.int64), dst=e.dst, wbk=e.wb,
                      pred=e.valid, waddr=np.asarray(e.waddr).reshape(1, -1), pending_ap=True)
            self.pseudo.append(pv)
            self.fmas.append(pv)
            wcyc = np.array([lcyc + self.add], np.int64)
            k_w = int(wcyc[0] < n)
            self._fma_writes(pv, e.wb, e.dst, wcyc[:k_w], np.arange(k_w), e.valid, pv.info["waddr"][:k_w],
                             self.rf_w, self.mem_w, ev)

    def _operand_sram_writes(self, tl):
        """The operand-stage SRAM writes: dropped where an FMA write-back hits the bank
        that cycle."""
        n, P = self.n, self.P
        ev = tl.ev
        mem_w = self.mem_w
        for bank in ("a", "b"):
            wbk = mem_w[bank]
            blocked = None
            if wbk and tl.wr_nodes[bank]:
                blocked = np.zeros((n + 1, P), bool)
                for w in wbk:
                    blocked[w.cyc] |= np.broadcast_to(w.mask, (len(w.cyc), P))
            for wn in tl.wr_nodes[bank]:
                s = wn.info["s"]
                pred = wn.info["pred"]
                if blocked is not None:
                    bl = blocked[s]
                    mask = pred[None, :] & ~bl
                    ev["mem_conflict"] += int((pred[None, :] & bl).sum())
                    ev[f"mem_{bank}_wr"] += int(mask.sum())
                else:
                    mask = pred
                    ev[f"mem_{bank}_wr"] += len(s) * int(pred.sum())
                mem_w[bank].append(Writes(wn, s, 0, mask, addr=wn.info["waddr"]))

    def _rf_conflicts(self, tl):
        """``rf_conflict`` events (a move and an FMA write-back to one register in one
        cycle), and the register-file events of registers >= ``n_regs``."""
        n, lat = self.n, self.lat
        ev = tl.ev
        for ws in self.rf_w:
            mvs = [w for w in ws if w.prio == 0]
            fws = [w for w in ws if w.prio == 1]
            for a in mvs:
                for b in fws:
                    common = np.intersect1d(a.cyc, b.cyc)
                    if len(common):
                        ev["rf_conflict"] += len(common) * int((a.mask & b.mask).sum())
        # ... and for registers >= n_regs (no register, but the events count)
        mvx = [nd for nd in self.nodes if nd.kind == "mv" and nd.info["dst"] >= self.n_regs]
        for f in self.fmas:
            if f.info["wbk"] != FmaWb.RF or f.info["dst"] < self.n_regs:
                continue
            wcyc = f.info["s"] + lat
            wcyc = wcyc[(wcyc >= 0) & (wcyc < n)]
            ev["rf_wr"] += len(wcyc) * int(f.info["pred"].sum())
            for mnd in mvx:
                if mnd.info["dst"] == f.info["dst"]:
                    common = np.intersect1d(mnd.info["s"], wcyc)
                    ev["rf_conflict"] += len(common) * int((mnd.info["pred"] & f.info["pred"]).sum())

    def _plan_events(self, tl):
        """The plan's event counts, per-PE FMA counts and per-row / per-column hops."""
        P = self.P
        plan = self.plan
        plan.ev = {k: int(v) for k, v in tl.ev.items()}
        plan.ev_fma = (sum(np.asarray(pr, np.int64) * k for pr, k in tl.fma_terms) if tl.fma_terms
                       else np.zeros(P, np.int64)) * np.ones(P, np.int64)
        for axis in ("row", "col"):
            h = np.full(self.nr, tl.host_hops[axis], np.int64)
            for hops, k in tl.hop_terms[axis]:
                h = h + hops * k
            setattr(plan, axis + "_hops", h)

    def _fma_writes(self, nd, wbk, dst, wcyc, occ, valid, waddr, rf_w, mem_w, ev):
        if len(wcyc) and wcyc[0] < 0:       # write-backs before the region (entry pipeline)
            keep = wcyc >= 0
            wcyc, occ, waddr = wcyc[keep], occ[keep], waddr[keep]
        if wbk in (FmaWb.MEMA, FmaWb.MEMB):
            bank = "a" if wbk == FmaWb.MEMA else "b"
            mem_w[bank].append(Writes(nd, wcyc, 1, valid, occ=occ, addr=waddr))
            ev[f"mem_{bank}_wr"] += len(wcyc) * int(valid.sum())
        elif dst < self.n_regs:
            rf_w[dst].append(Writes(nd, wcyc, 1, valid, occ=occ))
            ev["rf_wr"] += len(wcyc) * int(valid.sum())
