"""Shared pieces of the fast core model (:mod:`sim.fast_model`).

* :class:`Arith` - the PE's floating-point operations on whole numpy arrays of bit
  patterns (bit-exact with :mod:`pe.fp_golden`: the same dtype arithmetic, NaNs
  canonicalized), plus ``relu``/``mask`` of the move unit.
* :class:`Tmpl` - the static part of a micro-op (every field except the four SRAM
  offsets, which the sequencer's address generators change from issue to issue),
  decoded once, with its per-PE masks: predicate, row/column driver, read gates, and
  the bus resolution (which PE each PE hears on its row/column bus, hops per bus).
* :class:`VecState` - the architectural and pipeline state of all PEs of a core as
  numpy arrays indexed by PE ``p = row * nr + col`` (register file, SRAM banks, read
  port registers, address/stride registers, the operand-stage micro-op and the FMA
  pipeline), in exactly the form of :class:`pe.pe_model.PEModel`, so the per-cycle
  engine (:mod:`sim.fast_cycle`) and the loop-level engine (:mod:`sim.fast_flow`) can
  hand the state to each other at any cycle.
* :class:`Counters` - event totals in numpy form, converted to the counter dict of
  :func:`rtl.perf_counters.counter_names`.
"""

from __future__ import annotations

import numpy as np

from arch.buses import segment_len, segment_of
from arch.gc_pause import gc_paused
from arch.microop import ArOp, FmaWb, Gate, MvOp, PredMode, Src, uop_fields
from arch.counters import SUMMED_EVENTS, counter_names

__all__ = ["gc_paused", "ar_columns", "Arith", "Tmpl", "VecState", "MulEntry", "AddEntry", "Counters", "OFF_FIELDS", "offset_mask"]

#: micro-op SRAM offset fields, in the order the sequencer's AGU selectors name them
OFF_FIELDS = ("ra_off", "rb_off", "wa_off", "wb_off")

SRC_MEMA, SRC_MEMB, SRC_ROW, SRC_COL = int(Src.MEMA), int(Src.MEMB), int(Src.ROW), int(Src.COL)
SRC_ZERO, SRC_NZERO, SRC_ONE = int(Src.ZERO), int(Src.NZERO), int(Src.ONE)


def offset_mask(cfg) -> int:
    """Mask of the four offset fields inside a micro-op word."""
    m = 0
    for name, off, width in uop_fields(*cfg.uop_key):
        if name in OFF_FIELDS:
            m |= ((1 << width) - 1) << off
    return m


class Arith:
    """Bit-exact PE arithmetic on arrays of bit patterns (``fmt.np_uint``).

    The same computation as :func:`pe.fp_golden.mul_bits` / ``add_bits`` (numpy dtype
    arithmetic, which is correctly rounded for these formats, then NaN
    canonicalization), without the per-call argument checking, so it can be called on
    large arrays many times. Callers run inside ``np.errstate(all="ignore")``.
    """

    def __init__(self, fmt):
        from pe import fp_golden

        self.fmt = fmt
        self.ut = fmt.np_uint
        self.dt = fmt.np_dtype
        self.golden = fp_golden
        self.qnan = self.ut.type(fmt.qnan)
        self.magmask = self.ut.type(fmt.sign_mask - 1)
        self.sign = self.ut.type(fmt.sign_mask)
        self.inf = self.ut.type(fmt.inf)
        self.zero = self.ut.type(0)
        #: binary16: the compiled kernels of :func:`pe.fp_golden.f16_op` (:mod:`pe.fp16_kernels`)
        self.f16 = self.dt == np.float16
        if self.dt is not None:
            fp_golden.check_subnormals()

    def canon(self, bits: np.ndarray) -> np.ndarray:
        """Replace NaN bit patterns by the canonical NaN (in place when possible)."""
        nan = (bits & self.magmask) > self.inf
        if nan.any():
            bits = np.array(bits, copy=True) if not bits.flags.writeable else bits
            bits[nan] = self.qnan
        return bits

    def is_nan(self, bits):
        return (bits & self.magmask) > self.inf

    def mul(self, a, b) -> np.ndarray:
        if self.dt is None:
            return self.golden.mul_bits(self.fmt, a, b)
        a = np.asarray(a, dtype=self.ut)
        b = np.asarray(b, dtype=self.ut)
        if self.f16:
            return self.golden.f16_op(a, b, np.multiply)
        r = np.multiply(a.view(self.dt), b.view(self.dt))
        return self.canon(np.asarray(r).view(self.ut))

    def add(self, a, b) -> np.ndarray:
        if self.dt is None:
            return self.golden.add_bits(self.fmt, a, b)
        a = np.asarray(a, dtype=self.ut)
        b = np.asarray(b, dtype=self.ut)
        if self.f16:
            return self.golden.f16_op(a, b, np.add)
        r = np.add(a.view(self.dt), b.view(self.dt))
        return self.canon(np.asarray(r).view(self.ut))

    def accumulate(self, seq: np.ndarray, axis: int) -> np.ndarray:
        """Running sums ``s[0], s[0]+s[1], (s[0]+s[1])+s[2], ...`` along ``axis``, each
        step rounded to the format: the PE's accumulation chain, in its order.

        binary16: the compiled chains of :func:`pe.fp_golden.f16_accumulate_rows`. Other
        formats: wide chains (many independent accumulators side by side) are summed one
        step at a time over all of them (``np.add`` into the next row: one rounded add
        per element, the PE's operation); narrow ones with ``np.add.accumulate``, which
        is sequential and rounds every partial sum to the dtype too. All are checked
        bit-exact against sequential :func:`pe.fp_golden.add_bits` by
        ``tests/sim/test_fast_model.py``.
        """
        if self.dt is None:
            out = np.array(seq, copy=True)
            idx = [slice(None)] * seq.ndim
            prev = [slice(None)] * seq.ndim
            for k in range(1, seq.shape[axis]):
                idx[axis], prev[axis] = k, k - 1
                out[tuple(idx)] = self.golden.add_bits(self.fmt, seq[tuple(idx)], out[tuple(prev)])
            return out
        seq = np.asarray(seq, dtype=self.ut)
        L = seq.shape[axis]
        if self.f16 and L:
            src = np.moveaxis(seq, axis, 0)
            first = self.canon(np.array(src[0]))        # the chain's first value, NaN canonical too
            return np.moveaxis(self.golden.f16_accumulate_rows(first, src[1:]), 0, axis)
        if L > 1 and seq.size // L >= 48:
            src = np.moveaxis(seq, axis, 0).view(self.dt)
            out = np.empty(src.shape, self.dt)
            out[0] = src[0]
            for k in range(1, L):
                np.add(out[k - 1], src[k], out=out[k])
            return np.moveaxis(self.canon(out.view(self.ut)), 0, axis)
        seq = np.ascontiguousarray(seq)
        r = np.add.accumulate(seq.view(self.dt), axis=axis)
        return self.canon(r.view(self.ut))

    def positive(self, x):
        """x > 0: sign clear, not zero, not NaN."""
        return ((x & self.sign) == 0) & (x != 0) & ~self.is_nan(x)

    def relu(self, x):
        return np.where(self.positive(x), x, np.where(self.is_nan(x), self.qnan, self.zero)).astype(self.ut)

    def mask(self, v, m):
        kept = np.where(self.is_nan(v), self.qnan, v)
        return np.where(self.positive(m), kept, self.zero).astype(self.ut)


def ar_columns(tmpls, n_ar: int) -> list:
    """The address registers the micro-ops ``tmpls`` name (:attr:`Tmpl.ar_mask`): a
    region's plan depends on these registers' values and strides at its entry only, and
    leaves the others as they are."""
    m = 0
    for u in tmpls:
        m |= u.ar_mask
    return [i for i in range(n_ar) if m >> i & 1]


class Tmpl:
    """Static part of a micro-op: decoded fields (offsets zeroed) and per-PE masks.

    Attributes are the flat micro-op field names (``fpu_en``, ``ra_ar`` ...) plus:

    ``pred`` [P] bool, ``rdrv`` / ``cdrv`` [P] bool (this PE drives), ``ra_do`` /
    ``rb_do`` [P] bool (this PE performs the read: ``en`` and its gate),
    ``row_from`` / ``col_from`` [P] int (index of the PE whose drive this PE hears on
    its row / column bus in the operand stage of this micro-op, -1: nobody, +0),
    ``row_hops`` / ``col_hops`` [nr] (bus activity of the operand stage when no host
    lane drives), and ``hin``/``hout``/``hlast`` when built from a microcode word.
    """

    def __init__(self, geo, fields: dict, key: int, ctl=(0, 0, 0)):
        self.key = key
        self.wp_en = 0                   # cores without the write predicate
        self.__dict__.update(fields)
        nr = geo.nr
        P = nr * nr
        row, col, diag = geo.row, geo.col, geo.diag
        self.hin, self.hout, self.hlast = ctl

        def seg(idx, g):
            return idx % (1 << g) if g else idx

        mode, k, g = self.pred_mode, self.pred_k, self.pred_seg
        if mode == PredMode.ALL:
            pred = np.ones(P, bool)
        elif mode == PredMode.COL:
            pred = seg(col, g) == k
        elif mode == PredMode.ROW:
            pred = seg(row, g) == k
        else:
            pred = seg(diag, g) == k
        #: the SRAM writes' selection (the predicate); with ``wp_en`` the rest of the
        #: micro-op (FMA, move, AR updates: ``pred``) runs in every PE
        self.wpred = pred
        if self.wp_en:
            pred = np.ones(P, bool)
        self.pred = pred
        self.pred_all = bool(pred.all())
        self.pred_any = bool(pred.any())

        def driver(en, dg, kk, sg, plain):
            if not en:
                return np.zeros(P, bool)
            if sg:
                return seg(plain, sg) == kk
            return (diag if dg else plain) == kk

        self.rdrv = driver(self.rdrv_en, self.rdrv_diag, self.rdrv_k, self.rdrv_seg, col)
        self.cdrv = driver(self.cdrv_en, self.cdrv_diag, self.cdrv_k, self.cdrv_seg, row)

        def gate(g_):
            return {Gate.ALL: np.ones(P, bool), Gate.PRED: self.wpred, Gate.RDRV: self.rdrv,
                    Gate.CDRV: self.cdrv}[g_]

        self.ra_do = gate(self.ra_gate) if self.ra_en else np.zeros(P, bool)
        self.rb_do = gate(self.rb_gate) if self.rb_en else np.zeros(P, bool)
        # bus resolution of this micro-op's operand stage
        self.row_from, self.row_hops = geo.resolve(self.rdrv, self.rdrv_seg, axis="row")
        self.col_from, self.col_hops = geo.resolve(self.cdrv, self.cdrv_seg, axis="col")
        self.n_pred = int(pred.sum())
        self.n_rdrv = int(self.rdrv.sum())
        self.n_cdrv = int(self.cdrv.sum())
        self.n_ra = int(self.ra_do.sum())
        self.n_rb = int(self.rb_do.sum())
        self.fma_on = bool(self.fpu_en) and self.pred_any
        self.mv_on = self.mv_op != MvOp.NOP and self.pred_any
        self.wa_on = bool(self.wa_en) and bool(self.wpred.any())
        self.wb_on = bool(self.wb_en) and bool(self.wpred.any())
        self.wbk = self.fpu_wb if self.fpu_wb in (FmaWb.MEMA, FmaWb.MEMB) else FmaWb.RF
        self.c_rf = self.fpu_c < 16
        self.ar_on = self.pred_any and (self.ar_op != ArOp.NOP or self.ra_inc or self.rb_inc or self.wa_inc
                                        or self.wb_inc)
        #: bit i: address register i is named by this micro-op (an SRAM port's register, or
        #: the one an AR operation changes): the only registers its addresses and updates use
        self.ar_mask = ((1 << self.ra_ar) | (1 << self.rb_ar) | (1 << self.wa_ar) | (1 << self.wb_ar)
                        | ((1 << self.ar_idx) if self.ar_op != ArOp.NOP else 0))
        self.nop = not (self.fpu_en or self.mv_op or self.ra_en or self.rb_en or self.wa_en or self.wb_en
                        or self.rdrv_en or self.cdrv_en or self.ar_on or any(ctl))


class Geometry:
    """PE coordinates of an ``nr x nr`` core and bus resolution tables."""

    def __init__(self, nr: int):
        self.nr = nr
        P = nr * nr
        p = np.arange(P)
        self.row = p // nr
        self.col = p % nr
        self.diag = (self.col - self.row) % nr
        self._cache = {}

    def resolve(self, oe: np.ndarray, g: int, axis: str):
        """For each PE, the PE it hears on its row/column bus (-1: none) and hops per bus."""
        key = (oe.tobytes(), g, axis)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        nr = self.nr
        src = np.full(nr * nr, -1, dtype=np.int64)
        hops = np.zeros(nr, dtype=np.int64)
        for bus in range(nr):
            for i in range(nr):
                p_i = bus * nr + i if axis == "row" else i * nr + bus
                for j in segment_of(i, g, nr):
                    p_j = bus * nr + j if axis == "row" else j * nr + bus
                    if oe[p_j]:
                        src[p_i] = p_j
                if oe[p_i]:
                    hops[bus] += segment_len(i, g, nr)
        src.setflags(write=False)
        hops.setflags(write=False)
        self._cache[key] = (src, hops)
        return src, hops


class MulEntry:
    """An FMA in the multiplier: per-PE ``valid`` mask and ``product``; ``c`` is a
    register index (``c_rf``: read late) or the per-PE value captured at the operand
    stage; ``wb`` the FmaWb kind and ``waddr`` the per-PE SRAM address."""

    __slots__ = ("valid", "dst", "product", "c_rf", "c", "wb", "waddr")

    def __init__(self, valid, dst, product, c_rf, c, wb, waddr):
        self.valid, self.dst, self.product, self.c_rf, self.c = valid, dst, product, c_rf, c
        self.wb, self.waddr = wb, waddr


class AddEntry:
    """An FMA in the adder (its ``c`` read): per-PE ``valid`` and result ``value``."""

    __slots__ = ("valid", "dst", "value", "wb", "waddr")

    def __init__(self, valid, dst, value, wb, waddr):
        self.valid, self.dst, self.value, self.wb, self.waddr = valid, dst, value, wb, waddr


class VecState:
    """Architectural + pipeline state of all PEs of a core (PE index ``row * nr + col``).

    Mirrors :class:`pe.pe_model.PEModel` field by field: ``rf`` [P, n_regs], ``mem_a`` /
    ``mem_b`` [P, words], ``rd_a`` / ``rd_b`` [P], ``ar`` / ``stride`` [P, n_ar] (int64),
    the operand stage (``s1`` a :class:`Tmpl`, ``s1_pred``, ``s1_addr`` = per-PE
    ``(ra, rb, wa, wb)`` addresses computed at its issue) and the FMA pipeline ``mp``
    (``mul_latency`` entries, index 0 = entered last cycle) and ``ap``
    (``add_latency`` entries), the execute queue ``x`` (``cfg.exec_delay`` entries). Core level: the host lanes of the operand stage
    (``op_hin``, ``op_lanes``, ``op_hout``, ``op_hlast``).
    """

    def __init__(self, cfg, nop: Tmpl):
        nr = cfg.nr
        P = nr * nr
        ut = cfg.fmt.np_uint
        self.rf = np.zeros((P, cfg.n_regs), ut)
        self.mem_a = np.zeros((P, cfg.mem_a_words), ut)
        self.mem_b = np.zeros((P, cfg.mem_b_words), ut)
        self.rd_a = np.zeros(P, ut)
        self.rd_b = np.zeros(P, ut)
        self.ar = np.zeros((P, cfg.n_ar), np.int64)
        self.stride = np.zeros((P, cfg.n_ar), np.int64)
        self.s1 = nop
        self.s1_pred = np.zeros(P, bool)
        z = np.zeros(P, np.int64)
        self.s1_addr = (z, z, z, z)
        self.mp: list = [None] * cfg.mul_latency
        self.ap: list = [None] * cfg.add_latency
        #: the execute queue (``cfg.exec_delay`` entries, oldest first: ``x[k]`` executes
        #: ``k`` cycles from now): ``(mul, mv, wa, wb)`` read by the micro-ops of the last
        #: operand stages (:meth:`sim.fast_cycle.CycleEngine.tick`)
        self.x = [(None, None, None, None)] * cfg.exec_delay
        self.op_hin = 0
        self.op_lanes = np.zeros(nr, ut)
        self.op_hout = 0
        self.op_hlast = 0
        #: the core's scratchpad (``cfg.spad_kib > 0``): ``[spad_depth, nr]`` lanes of each beat
        self.spad = np.zeros((cfg.spad_depth, nr), ut)

    def pipeline_busy(self) -> bool:
        return (any(x[0] is not None for x in self.x) or any(e is not None for e in self.mp)
                or any(e is not None for e in self.ap))


class Counters:
    """Event totals of a run in numpy form; :meth:`as_dict` gives the counter dict."""

    def __init__(self, cfg):
        self.cfg = cfg
        nr = cfg.nr
        self.fma = np.zeros(nr * nr, np.int64)
        self.ev = dict.fromkeys(SUMMED_EVENTS, 0)
        self.row_hops = np.zeros(nr, np.int64)
        self.col_hops = np.zeros(nr, np.int64)
        self.cycles = 0
        self.instructions = 0
        self.host_in = 0
        self.host_out = 0
        self.ring_in = 0
        self.ring_out = 0
        self.spad_rd = 0
        self.spad_wr = 0
        #: the DMA counters of the run (``cfg.dram_mib > 0``: a dict of them, stalls included)
        self.dma = None

    def add_ev(self, name, v):
        self.ev[name] += int(v)

    def as_dict(self) -> dict:
        cfg = self.cfg
        d = dict.fromkeys(counter_names(cfg), 0)
        d["cycles"] = self.cycles
        d["instructions"] = self.instructions
        for p in range(cfg.nr * cfg.nr):
            d[f"fma[{p}]"] = int(self.fma[p])
        for k, v in self.ev.items():
            d[k] = int(v)
        for i in range(cfg.nr):
            d[f"row_hops[{i}]"] = int(self.row_hops[i])
            d[f"col_hops[{i}]"] = int(self.col_hops[i])
        d["host_in_beats"] = self.host_in
        d["host_out_beats"] = self.host_out
        d["ring_in_beats"] = self.ring_in
        d["ring_out_beats"] = self.ring_out
        if cfg.spad_kib:
            d["spad_rd_beats"] = self.spad_rd
            d["spad_wr_beats"] = self.spad_wr
        if self.dma is not None:
            d.update(self.dma)
            d["stall_cycles"] += self.dma["dma_stall_cycles"]
        return d
