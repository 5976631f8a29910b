"""Layer 1 of the fast model: an exact per-cycle engine vectorized over the PEs.

:class:`CycleEngine` advances a :class:`~sim.fast_common.VecState` by one clock per
call of :meth:`CycleEngine.tick`, doing for all PEs at once what
:meth:`pe.pe_model.PEModel.clock` does for one PE, together with the core's bus
resolution (segments, host lanes, hops) and ``hout`` sampling of
:class:`sim.core_model.CoreModel`. Every array operation is over PEs; the Python cost
per cycle is independent of the core size, so it is exact for any program and fast
enough as the fallback of the loop-level engine (:mod:`sim.fast_flow`).
"""

from __future__ import annotations

import numpy as np

from arch.microop import ArOp, FmaWb, MvOp
from sim.fast_common import (SRC_COL, SRC_MEMA, SRC_MEMB, SRC_NZERO, SRC_ONE, SRC_ROW, SRC_ZERO, AddEntry,
                             MulEntry)
from arch.isa import HostDir

__all__ = ["CycleEngine"]


_OPERAND = object()     # CycleEngine.src: the register file as operand-stage sources see it


class CycleEngine:
    def __init__(self, cfg, arith, geo):
        self.cfg = cfg
        self.ar_ = arith
        self.geo = geo
        self.nr = cfg.nr
        self.P = cfg.nr * cfg.nr
        self.ut = cfg.fmt.np_uint
        self.n_regs = cfg.n_regs
        self.n_ar = cfg.n_ar
        self.amask = (1 << cfg.addr_bits) - 1
        self.ma = cfg.mem_a_words - 1
        self.mb = cfg.mem_b_words - 1
        self.w = cfg.fmt.width
        fmt = cfg.fmt
        self.const = {SRC_ZERO: 0, SRC_NZERO: fmt.neg_zero, SRC_ONE: fmt.one}
        self.zeros = np.zeros(self.P, self.ut)
        self.pidx = np.arange(self.P)
        self.exec_stage = cfg.exec_stage
        self.bus_stage = cfg.bus_stage
        self.exec_delay = cfg.exec_delay
        self._rf = None     # with the execute stage: the RF as operand-stage reads see it
        self._rf_drv = None  # ... and as bus drivers see it (differs with the bus stage)

    # -- sources ------------------------------------------------------------------------
    def src(self, st, code, row_in, col_in, rf=_OPERAND):
        """Source ``code`` in the operand stage; ``rf``: the register file as the reader
        sees it (default: as operand-stage sources do; None: ``st.rf`` itself)."""
        if code < 16:
            if code >= self.n_regs:
                return self.zeros
            if rf is _OPERAND:
                rf = self._rf
            return st.rf[:, code] if rf is None else rf[:, code]
        if code == SRC_MEMA:
            return st.rd_a
        if code == SRC_MEMB:
            return st.rd_b
        if code == SRC_ROW:
            return row_in
        if code == SRC_COL:
            return col_in
        return np.full(self.P, self.const.get(code, 0), self.ut)

    def drv_src(self, st, code):
        if code in (SRC_ROW, SRC_COL):
            return self.zeros
        return self.src(st, code, None, None, self._rf_drv)

    def _bus(self, st, s, axis, ctr):
        """Values heard on each PE's row / column bus in this cycle (operand stage of s)."""
        nr = self.nr
        host = st.op_hin == (HostDir.ROW if axis == "row" else HostDir.COL)
        hops = ctr.row_hops if axis == "row" else ctr.col_hops
        if host:
            hops += nr
            coord = self.geo.row if axis == "row" else self.geo.col
            return st.op_lanes[coord]
        frm = s.row_from if axis == "row" else s.col_from
        drv = s.rdrv if axis == "row" else s.cdrv
        if not drv.any():
            return self.zeros
        hops += s.row_hops if axis == "row" else s.col_hops
        vals = self.drv_src(st, s.rdrv_src if axis == "row" else s.cdrv_src)
        return np.where(frm >= 0, vals[np.maximum(frm, 0)], self.ut.type(0)).astype(self.ut)

    # -- one clock ------------------------------------------------------------------------
    def tick(self, st, u, offs, lanes, ctr, out):
        """Issue ``u`` (a Tmpl) with SRAM offsets ``offs`` (ra, rb, wa, wb) this cycle.

        ``lanes``: the host beat's lanes [nr] when ``u.hin``; ``out`` collects
        ``(data, last)`` of ``hout`` pushes (sampled in the operand stage).
        """
        A = self.ar_
        s = st.s1
        p1 = st.s1_pred
        nr, w = self.nr, self.w
        if self.exec_stage:
            self._rf = self._bypass(st, self.exec_delay)
            self._rf_drv = self._bypass(st, 1) if self.bus_stage else self._rf
        else:
            self._rf = self._rf_drv = None
        # ---- buses of the operand stage ----------------------------------------------
        row_in = self._bus(st, s, "row", ctr)
        col_in = self._bus(st, s, "col", ctr)
        if st.op_hout:
            vals = row_in[::nr] if st.op_hout == HostDir.ROW else col_in[:nr]
            data = 0
            for i in range(nr):
                data |= int(vals[i]) << (i * w)
            out.append((data, bool(st.op_hlast)))
        rf_rd = 0
        roe, coe = s.rdrv, s.cdrv
        if s.rdrv_en and s.rdrv_src < 16:
            rf_rd += int(roe.sum())
        if s.cdrv_en and s.cdrv_src < 16:
            rf_rd += int(coe.sum())

        # ---- operand stage: read every source ------------------------------------------------
        new_mul, mv, wa, wb, n_rd = self._operand_stage(st, s, p1, row_in, col_in)
        rf_rd += n_rd

        # ---- execute stage: this micro-op, or with an execute stage the one read last cycle
        if self.exec_delay:
            st.x.append((new_mul, mv, wa, wb))
            new_mul, mv, wa, wb = st.x.pop(0)
        if new_mul is not None:
            ctr.fma += new_mul.valid

        # ---- late read of an RF c --------------------------------------------------------
        new_add = None
        e = st.mp[-1]
        if e is not None:
            if e.c_rf:
                c = st.rf[:, e.c] if e.c < self.n_regs else self.zeros
                rf_rd += int(e.valid.sum())
            else:
                c = e.c
            new_add = AddEntry(e.valid, e.dst, A.add(e.product, c), e.wb, e.waddr)

        # ---- write-back ------------------------------------------------------------------
        wbk = st.ap[-1]
        wbk_rf = wbk_a = wbk_b = None
        if wbk is not None:
            if wbk.wb == FmaWb.MEMA:
                wbk_a = wbk
            elif wbk.wb == FmaWb.MEMB:
                wbk_b = wbk
            else:
                wbk_rf = wbk

        # ---- issue stage of u ------------------------------------------------------------
        pred = u.pred
        ra = u.ra_do
        rb = u.rb_do
        am = self.amask
        ar = st.ar

        def arv(i):
            return ar[:, i] if i < self.n_ar else 0

        ra_addr = (arv(u.ra_ar) + offs[0]) & am & self.ma
        rb_addr = (arv(u.rb_ar) + offs[1]) & am & self.mb
        wa_addr = (arv(u.wa_ar) + offs[2]) & am & self.ma
        wb_addr = (arv(u.wb_ar) + offs[3]) & am & self.mb
        if not isinstance(ra_addr, np.ndarray):
            ra_addr = np.full(self.P, ra_addr, np.int64)
        if not isinstance(rb_addr, np.ndarray):
            rb_addr = np.full(self.P, rb_addr, np.int64)
        if not isinstance(wa_addr, np.ndarray):
            wa_addr = np.full(self.P, wa_addr, np.int64)
        if not isinstance(wb_addr, np.ndarray):
            wb_addr = np.full(self.P, wb_addr, np.int64)

        self._count_events(ctr.ev, ra, rb, rf_rd, mv, wa, wb, wbk_rf, wbk_a, wbk_b)

        # ---- end of cycle ----------------------------------------------------------------------
        # SRAM reads see the old word (with the execute stage, the bypass: the word of the
        # write landing on the address in this cycle, an operand-stage write's or an FMA
        # write-back's)
        if u.ra_en and ra.any():
            st.rd_a = np.where(ra, self._sram_read(st, st.mem_a, ra_addr, wa, wbk_a, 2, FmaWb.MEMA), st.rd_a)
        if u.rb_en and rb.any():
            st.rd_b = np.where(rb, self._sram_read(st, st.mem_b, rb_addr, wb, wbk_b, 3, FmaWb.MEMB), st.rd_b)
        self._mem_write(st.mem_a, wbk_a, wa)
        self._mem_write(st.mem_b, wbk_b, wb)
        if mv is not None and mv[1] < self.n_regs:
            st.rf[:, mv[1]] = np.where(mv[0], mv[2], st.rf[:, mv[1]])
        if wbk_rf is not None and wbk_rf.dst < self.n_regs:
            st.rf[:, wbk_rf.dst] = np.where(wbk_rf.valid, wbk_rf.value, st.rf[:, wbk_rf.dst])
        if u.ar_on:
            self._update_ars(st, u, pred)
        st.ap = [new_add] + st.ap[:-1]
        st.mp = [new_mul] + st.mp[:-1]
        st.s1, st.s1_pred = u, pred
        st.s1_addr = (ra_addr, rb_addr, wa_addr, wb_addr)
        st.op_hin = u.hin
        st.op_lanes = lanes if u.hin else st.op_lanes
        st.op_hout, st.op_hlast = u.hout, u.hlast

    def _operand_stage(self, st, s, p1, row_in, col_in):
        """The operand stage of ``s`` (predicate ``p1``): every source read, the FMA entering
        the multiplier, the move, the SRAM writes (or None each) and the register-file reads
        they count: ``(new_mul, mv, wa, wb, rf_rd)``."""
        A = self.ar_
        rf_rd = 0
        new_mul = None
        if s.fpu_en and p1.any():
            a = self.src(st, s.fpu_a, row_in, col_in)
            b = self.src(st, s.fpu_b, row_in, col_in)
            c = s.fpu_c if s.c_rf else np.array(self.src(st, s.fpu_c, row_in, col_in), copy=True)
            waddr = st.s1_addr[1] if s.wbk == FmaWb.MEMB else st.s1_addr[0]
            new_mul = MulEntry(p1, s.fpu_dst, A.mul(a, b), s.c_rf, c, s.wbk, waddr)
            rf_rd += int(p1.sum()) * ((s.fpu_a < 16) + (s.fpu_b < 16))
        mv = None
        if s.mv_op != MvOp.NOP and p1.any():
            n = int(p1.sum())
            v = self.src(st, s.mv_src, row_in, col_in)
            rf_rd += n * (s.mv_src < 16)
            if s.mv_op == MvOp.MOV:
                mv_val = np.array(v, copy=True)
            elif s.mv_op == MvOp.RELU:
                mv_val = A.relu(v)
            else:
                mv_val = A.mask(v, self.src(st, s.mv_msk, row_in, col_in))
                rf_rd += n * (s.mv_msk < 16)
            mv = (p1, s.mv_dst, mv_val)
        wa = wb = None
        pw = s.wpred if s.wp_en else p1            # the SRAM writes' PEs (a write predicate)
        if s.wa_en and pw.any():
            wa = (pw, st.s1_addr[2], np.array(self.src(st, s.wa_src, row_in, col_in), copy=True))
            rf_rd += int(pw.sum()) * (s.wa_src < 16)
        if s.wb_en and pw.any():
            wb = (pw, st.s1_addr[3], np.array(self.src(st, s.wb_src, row_in, col_in), copy=True))
            rf_rd += int(pw.sum()) * (s.wb_src < 16)
        return new_mul, mv, wa, wb, rf_rd

    def _count_events(self, ev, ra, rb, rf_rd, mv, wa, wb, wbk_rf, wbk_a, wbk_b):
        """The cycle's SRAM, register-file and move events (``ra`` / ``rb``: the issued
        reads' masks; ``mv``, ``wa``, ``wb``: the executing move and SRAM writes;
        ``wbk_*``: the FMA write-back into the register file or a bank)."""
        ev["mem_a_rd"] += int(ra.sum())
        ev["mem_b_rd"] += int(rb.sum())
        none = np.zeros(self.P, bool)
        wa_m = wa[0] if wa is not None else none
        wb_m = wb[0] if wb is not None else none
        wbk_a_v = wbk_a.valid if wbk_a is not None else none
        wbk_b_v = wbk_b.valid if wbk_b is not None else none
        ev["mem_a_wr"] += int(np.count_nonzero(wa_m | wbk_a_v))
        ev["mem_b_wr"] += int(np.count_nonzero(wb_m | wbk_b_v))
        ev["rf_rd"] += rf_rd
        n_mv = int(mv[0].sum()) if mv is not None else 0
        ev["mv"] += n_mv
        n_rfwb = int(wbk_rf.valid.sum()) if wbk_rf is not None else 0
        ev["rf_wr"] += n_mv + n_rfwb
        if mv is not None and wbk_rf is not None and wbk_rf.dst == mv[1]:
            ev["rf_conflict"] += int((mv[0] & wbk_rf.valid).sum())
        ev["mem_conflict"] += int((wa_m & wbk_a_v).sum()) + int((wb_m & wbk_b_v).sum())

    def _bypass(self, st, n):
        """The RF as reads see it with the execute stage: the moves of the first ``n``
        execute-queue entries applied in order (the one executing in this cycle, then,
        with the bus stage, the next cycle's; each with the FMA write-back's value where
        it writes the same register in the move's cycle); None when no move is in flight.
        Operand-stage sources see ``n = cfg.exec_delay``, bus drivers ``1``
        (``pe.pe_model.PEModel._bypass``)."""
        rf = None
        for k in range(n):
            mv = st.x[k][1]
            if mv is None or mv[1] >= self.n_regs:
                continue
            val = mv[2]
            wbk = st.ap[-1 - k]
            if wbk is not None and wbk.wb not in (FmaWb.MEMA, FmaWb.MEMB) and wbk.dst == mv[1]:
                val = np.where(wbk.valid, wbk.value, val)
            if rf is None:
                rf = st.rf.copy()
            rf[:, mv[1]] = np.where(mv[0], val, rf[:, mv[1]])
        return rf

    def _sram_read(self, st, mem, addr, wr, wbk, field, kind):
        """SRAM read data with the SRAM bypass (``pe.pe_model.PEModel._sram_read``):
        ``wr`` lands in this cycle (displaced by the FMA write-back ``wbk``, which lands
        then and is seen); with the bus stage the write of
        ``st.x[0]`` (tuple index ``field``) lands next cycle and wins."""
        data = mem[self.pidx, addr]
        if self.exec_stage and wr is not None:
            hit = wr[0] & (wr[1] == addr)
            if wbk is not None:
                hit &= ~wbk.valid
            if hit.any():
                data = np.where(hit, wr[2], data)
        if self.exec_stage and wbk is not None:     # the write-back landing in this cycle
            hit = wbk.valid & (wbk.waddr == addr)
            if hit.any():
                data = np.where(hit, wbk.value, data)
        if self.bus_stage:
            nxt = st.x[0][field]
            if nxt is not None:
                hit = nxt[0] & (nxt[1] == addr)
                w = st.ap[-2]
                if w is not None and w.wb == kind:
                    hit &= ~w.valid
                if hit.any():
                    data = np.where(hit, nxt[2], data)
        return data

    def _mem_write(self, mem, wbk, wr):
        """The SRAM write ``wr = (mask, addr, val)`` (or None) and the FMA write-back
        ``wbk`` into the same bank, which displaces it."""
        pi = self.pidx
        if wr is not None:
            p1, addr, val = wr
            keep = p1 & ~wbk.valid if wbk is not None else p1
            if keep.any():
                mem[pi[keep], addr[keep]] = val[keep]
        if wbk is not None and wbk.valid.any():
            v = wbk.valid
            mem[pi[v], wbk.waddr[v]] = wbk.value[v]

    def _update_ars(self, st, u, pred):
        am = self.amask
        ar = st.ar
        new = ar.copy()
        for i in range(self.n_ar):
            if u.ar_op == ArOp.SET and u.ar_idx == i:
                new[:, i] = u.ar_imm & am
                continue
            d = 0
            if u.ar_op == ArOp.ADD and u.ar_idx == i:
                d = u.ar_imm
            inc = ((u.ra_inc and u.ra_ar == i) or (u.rb_inc and u.rb_ar == i)
                   or (u.wa_inc and u.wa_ar == i) or (u.wb_inc and u.wb_ar == i))
            if d or inc:
                new[:, i] = (ar[:, i] + d + (st.stride[:, i] if inc else 0)) & am
        if pred.all():
            st.ar = new
        else:
            st.ar = np.where(pred[:, None], new, ar)
        if u.ar_op == ArOp.STRIDE and u.ar_idx < self.n_ar:
            st.stride = st.stride.copy()
            st.stride[pred, u.ar_idx] = u.ar_imm & am
