"""Layer 2 of the fast model: the loop-level dataflow engine.

A *region* is a window of cycles ``[0, n)`` of the RUN state (a loop nest, some
iterations of one, straight-line code), entered with the exact machine state of
:class:`~sim.fast_common.VecState` (including the micro-op in its operand stage and
the FMAs in flight) and left with the exact state at cycle ``n`` in the same form, so
regions and the per-cycle engine (:mod:`sim.fast_cycle`) can follow each other at any
cycle.

A region is *compiled* into a :class:`Plan`, then the plan is *executed*:

Compilation (depends only on the instruction trace and on the address-register and
pipeline *structure* at entry, never on data):

1. Every instruction address (pc) occurring in the region is one instruction; its
   occurrences are handled together. The address registers' trajectory over the whole
   region (cumulative sums of increments, reset at ``SET``s, strides forward-filled;
   per PE only when predicates differ) gives every SRAM address of every occurrence.
2. *Value nodes*: per instruction, its SRAM reads (``ra``/``rb``), its move result,
   its FMA product and FMA result, its SRAM write data. Every operand read of every
   occurrence is resolved to the write that produced its value, by the timing rules of
   ``docs/architecture.md``: a read in cycle ``u`` sees the writes of cycles ``< u``; the
   FMA write-back wins over a move in the same cycle; the FMA's ``c`` is read
   ``mul_latency`` cycles after the operand stage; an FMA write-back into SRAM drops the
   operand-stage write of that bank; bus values are the driver's operand read (or the
   host lane). Register and read-port writes are resolved by a sorted search over the
   region's writes, per group of PEs with the same predicate/gate masks; SRAM words by
   a search keyed on (PE, address, cycle).
3. The resolved reads form a dependency graph over the value nodes. Its strongly
   connected components are ordered; the only cycles accepted are *accumulation chains*
   (FMAs whose late ``c`` operand is the previous result of the chain: ``mac r += a*b``,
   also interleaved or ping-pong chains). Any other cycle (a register swap, a product
   recurrence, an SRAM word read back by the loop that writes it) raises
   :class:`FlowFail` and the caller falls back to the per-cycle engine.
4. All values of the region live in one table ``V`` [rows, PEs]: a row per occurrence of
   every value node, plus rows for the state at entry (registers, read ports,
   constants, host lanes, FMAs in flight). Every read becomes an index into ``V``. Nodes
   are grouped by dependency level and kind into *batches*: one numpy gather + one
   arithmetic operation for all occurrences of all instructions of the batch;
   accumulation chains of equal length are evaluated with one ``np.add.accumulate``
   along the chain, in its sequential order (bit-exact: each partial sum is rounded to
   the format; checked against sequential :func:`pe.fp_golden.add_bits` by the tests).
5. Counters are counted from the static structure (events per occurrence and PE mask),
   the exit state (register file, read ports, SRAM words, address registers, operand
   stage, FMAs in flight at cycle ``n``) is a list of gathers from ``V``.

Execution binds the entry values (register file, read ports, SRAM, host data, the
FMAs in flight) and runs the batches. Plans are cached by :class:`FlowRunner` (key: the
region's trace and entry structure), so a program run again (a training loop, or the
iterations of an outer loop) skips compilation.
"""

from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np

from arch.microop import ArOp, FmaWb, MvOp
from sim.fast_common import (SRC_COL, SRC_MEMA, SRC_MEMB, SRC_NZERO, SRC_ONE, SRC_ROW, SRC_ZERO, AddEntry,
                             MulEntry)
from arch.isa import HostDir

__all__ = ["FlowRunner", "FlowFail", "RegionMismatch", "Compiler", "Plan", "state_diff", "clear_plan_cache"]


class FlowFail(Exception):
    """The region's dependency graph has a cycle the dataflow engine does not evaluate.

    ``memory``: the cycle goes through an SRAM word written and read back in the region
    (cutting the region in time between the write and the read may remove it)."""

    def __init__(self, msg, memory: bool = False):
        super().__init__(msg)
        self.memory = memory


class RegionMismatch(AssertionError):
    """Verification mode: a region's result differs from the per-cycle engine's."""


def state_diff(a, b, P):
    """First difference between two VecStates as text (None: equal)."""
    for name in ("rf", "mem_a", "mem_b", "rd_a", "rd_b", "ar", "stride", "s1_pred"):
        x, y = getattr(a, name), getattr(b, name)
        if not np.array_equal(x, y):
            idx = tuple(int(i) for i in np.argwhere(np.asarray(x) != np.asarray(y))[0])
            what = {"mem_a": "SRAM A [PE, address]", "mem_b": "SRAM B [PE, address]", "rf": "RF [PE, register]",
                    "ar": "AR [PE, index]", "stride": "stride [PE, index]"}.get(name, name)
            return f"{what} {idx}: per-cycle {np.asarray(x)[idx]}, region {np.asarray(y)[idx]}"
    if a.s1.key != b.s1.key or any(not np.array_equal(np.broadcast_to(u, (P,)), np.broadcast_to(v, (P,)))
                                   for u, v in zip(a.s1_addr, b.s1_addr)):
        return "operand-stage micro-op or its addresses"
    if (a.op_hin, a.op_hout, a.op_hlast) != (b.op_hin, b.op_hout, b.op_hlast) or \
            (a.op_hin and not np.array_equal(a.op_lanes, b.op_lanes)):
        return "operand-stage host lanes"
    for pipe in ("mp", "ap"):
        for i, (e, f) in enumerate(zip(getattr(a, pipe), getattr(b, pipe))):
            if (e is None) != (f is None):
                return f"FMA pipeline {pipe}[{i}]: {'empty' if e is None else 'busy'} vs {'empty' if f is None else 'busy'}"
            if e is None:
                continue
            if not np.array_equal(e.valid, f.valid):
                return f"FMA pipeline {pipe}[{i}].valid"
            va = e.valid
            for fld in e.__slots__:
                if fld == "valid":
                    continue
                u, v = getattr(e, fld), getattr(f, fld)
                if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
                    u = np.broadcast_to(np.asarray(u), (P,))[va]     # lanes of PEs without the FMA
                    v = np.broadcast_to(np.asarray(v), (P,))[va]     # are never used
                if not np.array_equal(np.asarray(u), np.asarray(v)):
                    return f"FMA pipeline {pipe}[{i}].{fld}"
    return None


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
    _, inv = np.unique(m.T, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return int(inv.max()) + 1, inv


# -----------------------------------------------------------------------------------------
# compile-time structures
# -----------------------------------------------------------------------------------------
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
    column) or [k, P]; ``cols`` None (own column) or [k, P]."""

    __slots__ = ("rows", "cols")

    def __init__(self, rows, cols=None):
        self.rows, self.cols = rows, cols


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


# -----------------------------------------------------------------------------------------
# the plan
# -----------------------------------------------------------------------------------------
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
            coord = model.geo.row if axis == "row" else model.geo.col
            V[row0:row0 + len(ln)] = ln[:, coord]
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
            elif kind == "copy":
                _, s, e, rs = b
                V[s:e] = _gather(V, rs, pidx)
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
            lanes = V[rows, cols]
            w = self.w
            for h in range(len(lasts)):
                data = 0
                for i, v in enumerate(lanes[h].tolist()):
                    data |= v << (i * w)
                beats.append((data, lasts[h]))
        plan = self
        s1_lanes = lanes_all[lane_of[x + self.n - 1]] if self.s1_tmpl.hin else None

        def commit(ctr, out):
            st.rf = new_rf
            st.rd_a, st.rd_b = new_rd
            for bank, pp, aa, vv in mem_up:
                (st.mem_a if bank == "a" else st.mem_b)[pp, aa] = vv
            st.ar = plan.final_ar.copy()
            st.stride = plan.final_stride.copy()
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


def _nbytes(obj) -> int:
    """Bytes of the numpy arrays reachable through tuples / lists / Refs (plan size)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes if obj.base is None else 0
    if isinstance(obj, Ref):
        return _nbytes(obj.rows) + _nbytes(obj.cols)
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return 0


def _gather(V, ref, pidx):
    if ref.cols is None:
        if ref.rows.ndim == 1:
            return V[ref.rows]
        return V[ref.rows, pidx]
    return V[ref.rows, ref.cols]


def _to2d(ref, P, pidx):
    rows = ref.rows if ref.rows.ndim == 2 else np.broadcast_to(ref.rows[:, None], (len(ref.rows), P))
    cols = ref.cols if ref.cols is not None else np.broadcast_to(pidx, rows.shape)
    return rows, cols


def _cat_refs(refs, P, pidx):
    refs = [r for r in refs if len(r.rows)]
    if not refs:
        return Ref(np.zeros(0, np.int64))
    if len(refs) == 1:
        return refs[0]
    if all(r.cols is None and r.rows.ndim == 1 for r in refs):
        return Ref(np.concatenate([r.rows for r in refs]))
    if all(r.cols is None for r in refs):
        return Ref(np.concatenate([r.rows if r.rows.ndim == 2 else np.broadcast_to(r.rows[:, None], (len(r.rows), P))
                                   for r in refs]))
    rc = [_to2d(r, P, pidx) for r in refs]
    return Ref(np.concatenate([a for a, _ in rc]), np.concatenate([b for _, b in rc]))


# -----------------------------------------------------------------------------------------
# the compiler
# -----------------------------------------------------------------------------------------
class Compiler:
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
        for i in range(self.n_ar):
            inc = np.array([bool((u.ra_inc and u.ra_ar == i) or (u.rb_inc and u.rb_ar == i)
                                 or (u.wa_inc and u.wa_ar == i) or (u.wb_inc and u.wb_ar == i))
                            for u in tmpls], bool)
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
        plan.nbytes = _nbytes((plan.batches, plan.final_rf, plan.final_rd, plan.final_mem, plan.exit_mp,
                               plan.exit_ap, plan.hout, plan.host)) + plan.rows * self.P * self.ut.itemsize
        return plan

    def _addr(self, I, f):
        """SRAM addresses of field f (0 ra, 1 rb, 2 wa, 3 wb) of every occurrence of I: [k, Q]."""
        if I.virtual:
            return I.addr[f]
        return self.addr_of(f)[I.t]

    # -- nodes, writes, reads, events ------------------------------------------------------------
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
        n, P = self.n, self.P
        mul, lat = self.mul, self.lat
        st = self.st
        nodes = []
        rf_w = [[] for _ in range(self.n_regs)]
        rd_w = [[], []]
        mem_w = {"a": [], "b": []}
        wr_nodes = {"a": [], "b": []}
        fmas = []
        ev = dict(mv=0, mem_a_rd=0, mem_b_rd=0, mem_a_wr=0, mem_b_wr=0, rf_rd=0, rf_wr=0, rf_conflict=0,
                  mem_conflict=0)
        fma_terms = []                # (pred mask, occurrences): fma[p] counters
        hop_terms = {"row": [], "col": []}
        host_hops = {"row": 0, "col": 0}
        hout = []
        buses = []
        host_steps = {"row": [], "col": []}
        for I in [self.s1] + self.instrs:
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
                        nodes.append(nd)
                        rd_w[bank].append(Writes(nd, t, 0, do))
                        ev["mem_a_rd" if bank == 0 else "mem_b_rd"] += len(t) * nd_
            if k_op == 0:
                continue
            s = t[:k_op] + 1
            I.s = s
            need = self._bus_needs(u, pred, I.hout)
            for axis, hd, drv, hops, src, ndrv in (("row", HostDir.ROW, u.rdrv, u.row_hops, u.rdrv_src, u.n_rdrv),
                                                  ("col", HostDir.COL, u.cdrv, u.col_hops, u.cdrv_src, u.n_cdrv)):
                if I.hin == hd:
                    host_hops[axis] += self.nr * k_op
                elif ndrv:
                    hop_terms[axis].append((hops, k_op))
                if ndrv and src < 16:
                    ev["rf_rd"] += k_op * ndrv
                if axis not in need:
                    continue
                if I.hin == hd:
                    I.bus[axis] = ("host", len(host_steps[axis]))
                    if I.virtual:
                        host_steps[axis].append(("s1", None))
                    else:
                        host_steps[axis].append(("steps", t[:k_op]))
                elif ndrv:
                    rd = self._src(src, I, s, drv=True)
                    I.bus[axis] = ("drv", rd, u.row_from if axis == "row" else u.col_from)
                    buses.append(rd)
                else:
                    I.bus[axis] = ("zero",)
            if I.hout:
                hout.append(I)
            if not npred:
                continue
            if u.fpu_en:
                prod = Node("prod", k_op)
                prod.reads["a"] = self._src(u.fpu_a, I, s)
                prod.reads["b"] = self._src(u.fpu_b, I, s)
                nodes.append(prod)
                k_res = k_op if int(s[-1]) + mul < n else int(np.searchsorted(s + mul, n))   # late read < n
                fma = Node("fma", k_res, prod=prod, s=s, dst=u.fpu_dst, wbk=u.wbk, pred=pred)
                fma.deps.add(prod)
                if u.c_rf:
                    fma.info["c_reg"] = u.fpu_c
                    fma.reads["c"] = self._src(u.fpu_c, I, s[:k_res] + mul)
                else:
                    fma.info["cap"] = self._src(u.fpu_c, I, s)     # captured at the operand stage
                nodes.append(fma)
                fmas.append(fma)
                fma_terms.append((pred, k_op))
                ev["rf_rd"] += k_op * npred * ((u.fpu_a < 16) + (u.fpu_b < 16))
                if u.c_rf:
                    ev["rf_rd"] += k_res * npred
                waddr = self._addr(I, 1 if u.wbk == FmaWb.MEMB else 0)
                fma.info["waddr"] = waddr[:k_op]
                wcyc = s + lat
                k_w = k_op if int(wcyc[-1]) < n else int(np.searchsorted(wcyc, n))
                self._fma_writes(fma, u.wbk, u.fpu_dst, wcyc[:k_w], np.arange(k_w), pred, waddr[:k_w], rf_w,
                                 mem_w, ev)
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
                    rf_w[u.mv_dst].append(Writes(mv, s, 0, pred))
                nodes.append(mv)
            for bank, en, srcf, ai in (("a", u.wa_en, u.wa_src, 2), ("b", u.wb_en, u.wb_src, 3)):
                if en:
                    wn = Node("wr", k_op, s=s, pred=pred, waddr=self._addr(I, ai)[:k_op])
                    wn.reads["src"] = self._src(srcf, I, s)
                    ev["rf_rd"] += k_op * npred * (srcf < 16)
                    nodes.append(wn)
                    wr_nodes[bank].append(wn)
        # FMAs in flight at entry
        pseudo = []
        for i, e in enumerate(st.mp):
            if e is None:
                continue
            s_ = np.array([-(i + 1)], np.int64)
            prod = Node("pprod", 1, bound=True, entry=i)
            pseudo.append(prod)
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
                pseudo.append(cn)
                fma.info["cap_node"] = cn
            nodes.append(fma)
            fmas.append(fma)
            wcyc = s_ + lat
            k_w = int(wcyc[0] < n)
            self._fma_writes(fma, e.wb, e.dst, wcyc[:k_w], np.arange(k_w), e.valid, fma.info["waddr"][:k_w],
                             rf_w, mem_w, ev)
        for j, e in enumerate(st.ap):
            if e is None:
                continue
            lcyc = -(j + 1)
            pv = Node("pval", 1, bound=True, entry=j, s=np.array([lcyc - mul], np.int64), dst=e.dst, wbk=e.wb,
                      pred=e.valid, waddr=np.asarray(e.waddr).reshape(1, -1), pending_ap=True)
            pseudo.append(pv)
            fmas.append(pv)
            wcyc = np.array([lcyc + self.add], np.int64)
            k_w = int(wcyc[0] < n)
            self._fma_writes(pv, e.wb, e.dst, wcyc[:k_w], np.arange(k_w), e.valid, pv.info["waddr"][:k_w],
                             rf_w, mem_w, ev)
        # operand-stage SRAM writes: dropped where an FMA write-back hits the bank that cycle
        for bank in ("a", "b"):
            wbk = mem_w[bank]
            blocked = None
            if wbk and wr_nodes[bank]:
                blocked = np.zeros((n + 1, P), bool)
                for w in wbk:
                    blocked[w.cyc] |= np.broadcast_to(w.mask, (len(w.cyc), P))
            for wn in wr_nodes[bank]:
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
        # rf_conflict: a move and an FMA write-back to one register in one cycle
        for ws in rf_w:
            mvs = [w for w in ws if w.prio == 0]
            fws = [w for w in ws if w.prio == 1]
            for a in mvs:
                for b in fws:
                    common = np.intersect1d(a.cyc, b.cyc)
                    if len(common):
                        ev["rf_conflict"] += len(common) * int((a.mask & b.mask).sum())
        # ... and for registers >= n_regs (no register, but the events count)
        mvx = [nd for nd in nodes if nd.kind == "mv" and nd.info["dst"] >= self.n_regs]
        for f in fmas:
            if f.info["wbk"] != FmaWb.RF or f.info["dst"] < self.n_regs:
                continue
            wcyc = f.info["s"] + lat
            wcyc = wcyc[(wcyc >= 0) & (wcyc < n)]
            ev["rf_wr"] += len(wcyc) * int(f.info["pred"].sum())
            for mnd in mvx:
                if mnd.info["dst"] == f.info["dst"]:
                    common = np.intersect1d(mnd.info["s"], wcyc)
                    ev["rf_conflict"] += len(common) * int((mnd.info["pred"] & f.info["pred"]).sum())
        self.nodes, self.pseudo, self.fmas = nodes, pseudo, fmas
        self.rf_w, self.rd_w, self.mem_w = rf_w, rd_w, mem_w
        self.hout_instrs = hout
        self.host_steps = host_steps
        plan = self.plan
        plan.ev = {k: int(v) for k, v in ev.items()}
        plan.ev_fma = (sum(np.asarray(pr, np.int64) * k for pr, k in fma_terms) if fma_terms
                       else np.zeros(P, np.int64)) * np.ones(P, np.int64)
        for axis in ("row", "col"):
            h = np.full(self.nr, host_hops[axis], np.int64)
            for hops, k in hop_terms[axis]:
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
        for nd in self.nodes:
            if nd.kind == "mr":
                hits = self._mem_resolve(nd)
                nd.info["hits"] = hits
                if hits is not None:
                    nd.deps |= {w.node for w in hits[4]}

    def _read_deps(self, rd):
        if rd.kind in ("rf", "rd"):
            return rd.deps
        if rd.kind == "bus":
            I, axis = rd.a
            b = I.bus[axis]
            if b[0] == "drv":
                return self._read_deps(b[1])
        return set()

    def _bank_index(self, bank):
        if bank in self.bank_ix:
            return self.bank_ix[bank]
        ws = [w for w in self.mem_w[bank] if len(w.cyc)]
        if not ws:
            self.bank_ix[bank] = None
            return None
        P = self.P
        D = self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words
        C = self.n + 64
        keys, wid, occ = [], [], []
        for i, w in enumerate(ws):
            m = np.broadcast_to(w.mask, (len(w.cyc), P))
            kk, pp = np.nonzero(m)
            addr = np.broadcast_to(w.addr, (len(w.cyc), P))[kk, pp]
            keys.append((pp * D + addr) * C + (w.cyc[kk] + 32))
            wid.append(np.full(len(kk), i, np.int64))
            occ.append(w.occ[kk])
        keys = np.concatenate(keys)
        order = np.argsort(keys, kind="stable")
        res = (keys[order], np.concatenate(wid)[order], np.concatenate(occ)[order], ws, C, D)
        self.bank_ix[bank] = res
        return res

    def _mem_resolve(self, nd):
        """SRAM reads of ``nd`` that hit a write of the region (only PEs that read):
        (k idx, pe idx, writer idx, writer occ, writers) or None."""
        idx = self._bank_index(nd.info["bank"])
        if idx is None:
            return None
        keys, wid, occ, ws, C, D = idx
        pes = np.nonzero(nd.info["pred"])[0]
        t = nd.info["t"]
        addr = np.broadcast_to(nd.info["addr"], (len(t), self.P))[:, pes]
        rkey = (pes[None, :] * D + addr) * C + (t[:, None] + 32)
        pos = np.searchsorted(keys, rkey, side="left") - 1
        pc = np.maximum(pos, 0)
        hit = (pos >= 0) & (keys[pc] // C == rkey // C)
        if not hit.any():
            return None
        kk, jj = np.nonzero(hit)
        return (kk, pes[jj], wid[pc[kk, jj]], occ[pc[kk, jj]], ws)

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
                r = Ref(batch["rows"][off:off + k])
            else:
                r = Ref(self._res_rows(rd.kind, rd.a, self.rf_ix[rd.a] if rd.kind == "rf" else self.rd_ix[rd.a],
                                       rd.res))
        elif rd.kind == "bus":
            I, axis = rd.a
            r = self.bus_ref(I, axis)
        else:
            raise AssertionError(rd.kind)
        rd.ref = r
        return r

    def _res_rows(self, kind, a, ix, res):
        init = self.plan.rf_row0 + a if kind == "rf" else self.plan.rd_row + a
        bases = np.array([w.node.base for w in ix.writers] + [init], np.int64)
        if len(res) == 1:
            _, wid, occ = res[0]
            return bases[wid] + np.where(wid >= 0, occ, 0)
        k = len(res[0][1])
        rows = np.empty((k, self.P), np.int64)
        for pes, wid, occ in res:
            rows[:, pes] = (bases[wid] + np.where(wid >= 0, occ, 0))[:, None]
        return rows

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
        R, C = _to2d(dref, P, self.pidx)
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
            if nd.k == 0 or nd.info.get("chain"):
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
                    batches.append(("prod", s, e, _cat_refs([self.ref(nd.reads["a"]) for nd in nds], P, pidx),
                                    _cat_refs([self.ref(nd.reads["b"]) for nd in nds], P, pidx)))
                elif kind == "fma":
                    prows = np.concatenate([nd.info["prod"].base + np.arange(nd.k) for nd in nds])
                    batches.append(("fma", s, e, prows, _cat_refs([self._c_ref(nd) for nd in nds], P, pidx)))
                elif kind == "mv":
                    rs = _cat_refs([self.ref(nd.reads["src"]) for nd in nds], P, pidx)
                    rm = _cat_refs([self.ref(nd.reads["msk"]) for nd in nds], P, pidx) if op == MvOp.MASK else None
                    batches.append(("mv", op, s, e, rs, rm))
                elif kind == "wr":
                    batches.append(("copy", s, e, _cat_refs([self.ref(nd.reads["src"]) for nd in nds], P, pidx)))
            for comp in chains_by_level.get(lvl, []):
                batches.extend(b + (lvl,) for b in self._chain_batches(comp))
        plan.batches = [b[:5] if b[0] == "chain" else b for b in self._merge_chain_batches(batches)]

    def _c_ref(self, nd):
        k = nd.k
        if "c_reg" in nd.info:
            return self.ref(nd.reads["c"]) if k else Ref(np.zeros(0, np.int64))
        if "cap_node" in nd.info:
            return Ref(np.full(k, nd.info["cap_node"].base, np.int64))
        r = self.ref(nd.info["cap"])
        return Ref(r.rows[:k], None if r.cols is None else r.cols[:k])

    def _hits(self, nd):
        h = nd.info["hits"]
        if h is None:
            return None
        kk, pp, wid, occ, ws = h
        bases = np.array([w.node.base for w in ws], np.int64)
        return (nd.base + kk, pp, bases[wid] + occ, pp)

    def _merge_chain_batches(self, batches):
        """Consecutive chain batches with the same length and all-PE form -> one batch."""
        out = []
        for b in batches:
            if (b[0] == "chain" and out and out[-1][0] == "chain" and b[5] == out[-1][5] and b[1] is None
                    and out[-1][1] is None and b[3].shape[1] == out[-1][3].shape[1] and b[2].cols is None
                    and out[-1][2].cols is None and b[2].rows.ndim == 1 and out[-1][2].rows.ndim == 1):
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
            pp_all, aa_all, cc_all, rr_all = [], [], [], []
            for w in ws:
                m = np.broadcast_to(w.mask, (len(w.cyc), P)) & (w.cyc < n)[:, None]
                kk, pp = np.nonzero(m)
                if not len(kk):
                    continue
                pp_all.append(pp)
                aa_all.append(np.broadcast_to(w.addr, (len(w.cyc), P))[kk, pp])
                cc_all.append(w.cyc[kk])
                rr_all.append(w.node.base + w.occ[kk])
            if not pp_all:
                continue
            pp = np.concatenate(pp_all)
            aa = np.concatenate(aa_all)
            cc = np.concatenate(cc_all)
            rr = np.concatenate(rr_all)
            key = pp * D + aa
            o = np.lexsort((cc, key))
            key, rr, pp = key[o], rr[o], pp[o]
            lastw = np.concatenate([key[1:] != key[:-1], [True]])
            plan.final_mem.append((bank, pp[lastw], key[lastw] % D, rr[lastw], pp[lastw]))
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
                        r = self.ref(nd.info["cap"])
                        c = Ref(r.rows[k:k + 1], None if r.cols is None else r.cols[k:k + 1])
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
            R, C = _to2d(ref, P, self.pidx)
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


# -----------------------------------------------------------------------------------------
# region planning
# -----------------------------------------------------------------------------------------
#: compiled plans per configuration (process-wide, LRU)
_PLANS: dict = {}
#: bytes of the plans in each cache of _PLANS (by id)
_PLAN_BYTES: dict = {}


def clear_plan_cache() -> None:
    """Forget every compiled plan (benchmarks of cold runs)."""
    for c in _PLANS.values():
        c.clear()
    _PLAN_BYTES.clear()


class FlowRunner:
    """Cuts a run into regions along the trace's loop spans; runs each on the dataflow
    engine (compiled plans, cached), falling back to the per-cycle engine for regions
    it rejects."""

    def __init__(self, model, max_elems: int = 1 << 22, cut=None, cache_size: int = 1 << 16, verify: bool = False,
                 cache_bytes: int = 1 << 29):
        self.m = model
        self.max_elems = max_elems
        self.cut = cut          # tests: optional callable(x, y) -> list of cut points
        self.verify = verify    # diagnosis: re-run every region on the per-cycle engine and compare
        # plans are shared by every model of the same configuration in the process (the
        # same program on several cores compiles once)
        self.cache = _PLANS.setdefault(model.cfg.to_json(), OrderedDict())
        self.cache_size = cache_size
        self.cache_bytes = cache_bytes      # plans kept per configuration: at most this many bytes
        self.last_fail = None

    def run(self, trace, allpcs, offs, lanes, lane_of, ctr, out):
        self.args = (allpcs, offs, lanes, lane_of, ctr, out)
        self.stats = {"flow_cycles": 0, "cycle_engine_cycles": 0, "regions": 0, "fallbacks": 0,
                      "plans_compiled": 0, "plans_reused": 0}
        from sim.core_model import pe_start_cycles

        sh = pe_start_cycles(self.m.cfg)
        spans = [self._shift(s, sh) for s in trace.spans]
        self._seq(0, len(allpcs), spans)
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
                self._straight(a, min(y, a + lim))
            return
        self._iters(span, 0, span.n_iter)

    def _iters(self, span, i, j):
        """Iterations [i, j) of a loop span: one region if possible; otherwise groups
        that fit, halves (a cycle through SRAM written and read back far apart in time
        disappears when the region is cut between them), single iterations split into
        their parts (a dependency carried from one iteration to the next), or the
        per-cycle engine (a recurrence inside an innermost loop)."""
        lim = self._limit()
        L = span.iter_len
        a, b = span.start + i * L, span.start + j * L
        if b - a > lim:
            per = max(1, lim // L)
            if per < j - i and L <= lim:
                for k in range(i, j, per):
                    self._iters(span, k, min(j, k + per))
                return
        elif self._try(a, b):
            return
        fail = self.last_fail
        if j - i > 1 and (b - a > lim or (fail is not None and fail.memory)):
            h = (i + j) // 2
            self._iters(span, i, h)
            self._iters(span, h, j)
        elif span.children:
            for it in range(i, j):
                s0 = span.start + it * L
                self._seq(s0, s0 + L, [self._shift(c, s0) for c in span.children])
        elif b - a > lim:
            for k in range(a, b, lim):
                self._straight(k, min(b, k + lim))
        else:
            self._cycles(a, b)

    def _straight(self, x, y):
        """Steps without loop structure (e.g. loops the trace had to step): halves until
        accepted, the per-cycle engine below 32 cycles."""
        if self._try(x, y):
            return
        if y - x <= 32:
            self._cycles(x, y)
            return
        h = (x + y) // 2
        self._straight(x, h)
        self._straight(h, y)

    def _try(self, x, y) -> bool:
        self.last_fail = None
        sp = self.m._spad_run
        if self.cut is not None or (sp is not None and sp.cut_points(x, y)):
            # test cuts, and the scratchpad reads that see a write of the same run
            # (FastModel._SpadRun: a region never holds one after its first cycle)
            cuts = [c for c in self.cut(x, y) if x < c < y] if self.cut is not None else []
            if sp is not None:
                cuts += sp.cut_points(x, y)
            if cuts:
                pts = [x] + sorted(set(cuts)) + [y]
                for a, b in zip(pts[:-1], pts[1:]):
                    if not self._try_one(a, b):
                        self._cycles(a, b)
                return True
        return self._try_one(x, y)

    def _key(self, x, y):
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        st = self.m.state
        mp = tuple(None if e is None else (e.valid.tobytes(), e.dst, e.c_rf, e.c if e.c_rf else None, e.wb,
                                           np.asarray(e.waddr).tobytes()) for e in st.mp)
        ap = tuple(None if e is None else (e.valid.tobytes(), e.dst, e.wb, np.asarray(e.waddr).tobytes())
                   for e in st.ap)
        s1 = (None if st.s1.nop else (st.s1.key, st.s1_pred.tobytes(),
                                        b"".join(np.asarray(a).tobytes() for a in st.s1_addr)))
        # the microcode words the region executes (not the whole image: cores whose images
        # differ elsewhere share the plans of their common code)
        pcs = allpcs[x:y]
        mem = self.m.seq.mem
        used = np.unique(pcs[pcs < len(mem)]).tolist()
        return (tuple(mem[i] for i in used), pcs.tobytes(), offs[x:y].tobytes(), st.ar.tobytes(),
                st.stride.tobytes(), s1,
                st.op_hin, st.op_hout, st.op_hlast, mp, ap)

    def _try_one(self, x, y) -> bool:
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        key = self._key(x, y)
        plan = self.cache.get(key)
        self.last_fail = None
        if plan is None:
            try:
                plan = Compiler(self.m, allpcs, offs, lane_of, x, y).compile()
            except FlowFail as e:
                # cached without its traceback: the frames would keep the compiler's whole
                # dependency graph alive (gigabytes over a long run)
                plan = e.with_traceback(None)
                plan.__context__ = plan.__cause__ = None
            self.cache[key] = plan
            size = _PLAN_BYTES.get(id(self.cache), 0) + getattr(plan, "nbytes", 0)
            while len(self.cache) > 1 and (len(self.cache) > self.cache_size or size > self.cache_bytes):
                _, old = self.cache.popitem(last=False)
                size -= getattr(old, "nbytes", 0)
            _PLAN_BYTES[id(self.cache)] = size
            self.stats["plans_compiled"] += 1
        else:
            self.cache.move_to_end(key)
            self.stats["plans_reused"] += 1
        if isinstance(plan, FlowFail):
            self.stats["fallbacks"] += 1
            self.last_fail = plan
            return False
        if self.m._spad_run is not None:
            self.m._spad_run.sync(x, y)
        if self.verify:
            ref_state, ref_ctr, ref_out = copy.deepcopy((self.m.state, ctr, out))
        commit = plan.run(self.m, self.m.state, lanes, lane_of, x)
        commit(ctr, out)
        if self.verify:
            self._verify(x, y, ref_state, ref_ctr, ref_out, ctr, out)
        self.stats["flow_cycles"] += y - x
        self.stats["regions"] += 1
        return True

    def _verify(self, x, y, st0, ctr0, out0, ctr, out):
        """Run cycles [x, y) on the per-cycle engine from the region's entry state and
        raise :class:`RegionMismatch` naming the first difference from the region's result."""
        allpcs, offs, lanes, lane_of, _, _ = self.args
        m = self.m
        saved = m.state
        m.state = st0
        try:
            m._run_cycles(x, y, allpcs, offs, lanes, lane_of, ctr0, out0, sync=False)
        finally:
            m.state = saved
        diff = state_diff(st0, saved, m.P)
        if diff is None and out0 != out:
            k = next(i for i, (a, b) in enumerate(zip(out0 + [None], out + [None])) if a != b)
            diff = f"output beat {k}: per-cycle {out0[k] if k < len(out0) else None}, region " \
                   f"{out[k] if k < len(out) else None}"
        if diff is None:
            a, b = ctr0.as_dict(), ctr.as_dict()
            bad = [k for k in a if a[k] != b[k] and k not in ("cycles", "instructions")]
            if bad:
                diff = f"counter {bad[0]}: per-cycle {a[bad[0]]}, region {b[bad[0]]}"
        if diff is not None:
            raise RegionMismatch(f"region of cycles [{x}, {y}) (RUN cycles from the start latency): {diff}")

    def _cycles(self, a, b):
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        self.m._run_cycles(a, b, allpcs, offs, lanes, lane_of, ctr, out)
        self.stats["cycle_engine_cycles"] += b - a
