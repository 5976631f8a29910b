"""Cycle-accurate Python reference model of one PE: the executable specification.

:class:`PEModel` implements ``docs/architecture.md`` (sections "The PE", "The PE
micro-operation", "Pipeline timing and hazards", "Events") cycle by cycle, with all
arithmetic done by the bit-exact numpy golden functions of :mod:`pe.fp_golden`
(``mul_bits``, ``add_bits``: round to nearest even, subnormals, canonical NaN).
The RTL (:class:`pe.pe.PE`) is compared against it every cycle by the cocotb tests.

Two-phase step, so that many models can share buses (a core, later the vectorized
fast model of the whole array):

1. :meth:`PEModel.drive` returns ``(row_out, row_oe, col_out, col_oe)`` of this cycle,
   computed from the current state only (the micro-op in its operand stage, the SRAM
   read-port registers, the register file). Bus drivers never forward a bus value
   (driver sources ``ROW``/``COL`` drive +0), so drives never depend on bus inputs.
2. The caller resolves each bus (the value of its single driver, or anything when
   nobody drives) and calls :meth:`PEModel.clock` with the micro-op issued this cycle
   and the resolved ``row_in``/``col_in``; it returns this cycle's :class:`PEEvents`
   (same fields and values as the RTL's ``ev`` port) and advances the state by one clock.

:meth:`PEModel.run` does both for a single PE whose buses resolve like a 1x1 core: the
PE's own drive when it drives, the external input otherwise.

Values everywhere are integer bit patterns of ``cfg.fmt``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Sequence

import numpy as np

from arch.counters import EVENT_FIELDS
from arch.microop import ArOp, FmaWb, Gate, MicroOp, MvOp, PredMode, Src, uop_fields

__all__ = ["PEModel", "PEEvents", "EVENT_FIELDS", "DecodedUop", "decode_uop"]



class PEEvents(NamedTuple):
    """Event strobes of one PE in one cycle (see the Events table of the spec)."""

    fma: int = 0
    mv: int = 0
    mem_a_rd: int = 0
    mem_b_rd: int = 0
    mem_a_wr: int = 0
    mem_b_wr: int = 0
    rf_rd: int = 0
    rf_wr: int = 0
    row_drv: int = 0
    col_drv: int = 0
    rf_conflict: int = 0
    mem_conflict: int = 0

    def pack(self) -> int:
        """The integer value of the RTL's ``ev`` port (fields LSB first)."""
        word, off = 0, 0
        for (name, width), v in zip(EVENT_FIELDS, self):
            word |= (int(v) & ((1 << width) - 1)) << off
            off += width
        return word

    @classmethod
    def unpack(cls, word: int) -> "PEEvents":
        vals, off = [], 0
        for _, width in EVENT_FIELDS:
            vals.append((word >> off) & ((1 << width) - 1))
            off += width
        return cls(*vals)


NO_EVENTS = PEEvents()


class DecodedUop:
    """A micro-op as plain attributes (flat ``group_field`` names, unsigned values)."""

    __slots__ = tuple(n for n, _, _ in uop_fields(16, 4, True)) + ("word",)

    def __repr__(self):
        return repr(MicroOp(**{n: getattr(self, n) for n in self.__slots__ if n != "word"}))


@lru_cache(maxsize=1 << 16)
def decode_uop(word: int, addr_bits: int, sel_bits: int, wp: bool = False) -> DecodedUop:
    """Decode an integer micro-op word (cached: programs repeat their words); ``wp``: the
    layout has the write predicate (else ``wp_en`` is 0)."""
    d = DecodedUop()
    d.wp_en = 0
    for name, off, width in uop_fields(addr_bits, sel_bits, wp):
        setattr(d, name, (word >> off) & ((1 << width) - 1))
    d.word = word
    return d


class _MulEntry(NamedTuple):
    dst: int
    product: int
    c_rf: bool    # c names a register: read it late, when the product reaches the adder
    c: int        # register index (c_rf) or the value captured at the operand stage
    wb: int       # FmaWb destination kind
    waddr: int    # SRAM write-back address (wb = MEMA / MEMB)


class _Exec(NamedTuple):
    """What a micro-op does in its execute stage, from the values it read in its operand
    stage (``None``: not done, predicate false or no such operation)."""

    mul: tuple | None    # (dst, a, b, c_rf, c, wb kind, SRAM write-back address)
    mv: tuple | None     # (dst, value): the move unit's result
    wa: tuple | None     # (address, value) of the SRAM A write
    wb: tuple | None     # (address, value) of the SRAM B write


_NO_EXEC = _Exec(None, None, None, None)


class PEModel:
    """Cycle-accurate reference model of the PE at coordinates ``(row, col)``.

    Parameters
    ----------
    cfg : arch.config.ArchConfig
    row, col : int
        Coordinates of the PE in its ``nr x nr`` core (used by predicates and drivers).

    State (all integers, read them through the accessors): register file
    :attr:`rf`, SRAM banks :attr:`mem_a` / :attr:`mem_b`, read-port output registers
    :attr:`rd_a` / :attr:`rd_b`, address and stride registers :attr:`ar` /
    :attr:`stride`, the micro-op in its operand stage, the execute queue (what the
    micro-ops read, ``cfg.exec_delay`` entries: the execute stage and, with
    ``cfg.bus_stage``, the bus stage) and the FMA pipeline. Everything resets to 0.
    """

    def __init__(self, cfg, row: int = 0, col: int = 0):
        if not (0 <= row < cfg.nr and 0 <= col < cfg.nr):
            raise ValueError(f"PE coordinates ({row}, {col}) outside a {cfg.nr}x{cfg.nr} core")
        from pe import fp_golden  # imported late: the model module itself needs no FP code

        self.cfg = cfg
        self.row, self.col = row, col
        self.fmt = fmt = cfg.fmt
        self._golden = fp_golden
        self._dtype = fmt.np_uint
        self.n_regs = cfg.n_regs
        self.n_ar = cfg.n_ar
        self.ab = cfg.addr_bits
        self.sb = cfg.sel_bits
        self.wp = cfg.spad_kib > 0
        self.amask = (1 << cfg.addr_bits) - 1
        self.diag = (col - row) % cfg.nr
        self.wmask = (1 << fmt.width) - 1
        self._const = {int(Src.ZERO): 0, int(Src.NZERO): fmt.neg_zero, int(Src.ONE): fmt.one}
        self.reset()

    # -- state ------------------------------------------------------------------------
    def reset(self):
        cfg = self.cfg
        self.rf = [0] * self.n_regs
        self.mem_a = [0] * cfg.mem_a_words
        self.mem_b = [0] * cfg.mem_b_words
        self.rd_a = 0
        self.rd_b = 0
        self.ar = [0] * self.n_ar
        self.stride = [0] * self.n_ar
        self.cycle = 0
        # operand stage: the micro-op issued last cycle and what was decided at its issue
        self._s1 = decode_uop(0, self.ab, self.sb, self.wp)
        self._s1_pred = False
        self._s1_wpred = False
        self._s1_wa_addr = 0
        self._s1_wb_addr = 0
        self._s1_ra_addr = 0
        self._s1_rb_addr = 0
        # FMA pipeline: _mp[i] entered the multiplier i+1 cycles ago; _ap[j] entered the
        # adder j+1 cycles ago. None = bubble.
        self._mp: list = [None] * cfg.mul_latency
        self._ap: list = [None] * cfg.add_latency
        # execute stage (cfg.exec_stage) and bus stage (cfg.bus_stage): what the micro-ops
        # read in their operand stage, oldest first (cfg.exec_delay entries; _xq[k]
        # executes k cycles from now)
        self._xq: list = [_NO_EXEC] * cfg.exec_delay
        self._byp: dict = {}       # in-flight moves as operand-stage reads see them
        self._dbyp: dict = {}      # ... and as bus drivers see them

    def regs(self) -> list[int]:
        """Register file contents (bit patterns), ``RF[0..n_regs-1]``."""
        return list(self.rf)

    def memory(self, bank: str) -> np.ndarray:
        """Contents of SRAM bank ``"a"`` or ``"b"`` as a uint array of bit patterns."""
        return np.array(self.mem_a if bank.lower() == "a" else self.mem_b, dtype=self._dtype)

    def ars(self) -> list[int]:
        return list(self.ar)

    def strides(self) -> list[int]:
        return list(self.stride)

    def pipeline_busy(self) -> bool:
        """True while an FMA is in flight (its result not yet written)."""
        return (any(x.mul is not None for x in self._xq) or any(e is not None for e in self._mp)
                or any(e is not None for e in self._ap))

    # -- arithmetic (bit-exact golden) -----------------------------------------------------
    def _mul(self, a: int, b: int) -> int:
        dt = self._dtype
        return int(self._golden.mul_bits(self.fmt, np.array([a], dt), np.array([b], dt))[0])

    def _add(self, a: int, b: int) -> int:
        dt = self._dtype
        return int(self._golden.add_bits(self.fmt, np.array([a], dt), np.array([b], dt))[0])

    def _is_nan(self, x: int) -> bool:
        f = self.fmt
        return (x >> f.frac_bits) & f.exp_max == f.exp_max and x & ((1 << f.frac_bits) - 1) != 0

    def _positive(self, x: int) -> bool:
        """x > 0: sign clear, not zero, not NaN."""
        return not (x & self.fmt.sign_mask) and x != 0 and not self._is_nan(x)

    def relu(self, x: int) -> int:
        if self._positive(x):
            return x
        return self.fmt.qnan if self._is_nan(x) else 0

    def mask(self, v: int, m: int) -> int:
        if not self._positive(m):
            return 0
        return self.fmt.qnan if self._is_nan(v) else v

    # -- selection logic ---------------------------------------------------------------
    @staticmethod
    def _seg(index: int, seg: int) -> int:
        return index % (1 << seg) if seg else index

    def predicate(self, u: DecodedUop) -> bool:
        mode, k, g = u.pred_mode, u.pred_k, u.pred_seg
        if mode == PredMode.ALL:
            return True
        if mode == PredMode.COL:
            return self._seg(self.col, g) == k
        if mode == PredMode.ROW:
            return self._seg(self.row, g) == k
        return self._seg(self.diag, g) == k

    def row_driver(self, u: DecodedUop) -> bool:
        """This PE is the row-bus driver selected by ``u.rdrv`` (segmented: ``diag`` ignored)."""
        if not u.rdrv_en:
            return False
        if u.rdrv_seg:
            return self._seg(self.col, u.rdrv_seg) == u.rdrv_k
        return (self.diag if u.rdrv_diag else self.col) == u.rdrv_k

    def col_driver(self, u: DecodedUop) -> bool:
        """This PE is the column-bus driver selected by ``u.cdrv`` (segmented: ``diag`` ignored)."""
        if not u.cdrv_en:
            return False
        if u.cdrv_seg:
            return self._seg(self.row, u.cdrv_seg) == u.cdrv_k
        return (self.diag if u.cdrv_diag else self.row) == u.cdrv_k

    def _gate(self, gate: int, u: DecodedUop, pred: bool) -> bool:
        if gate == Gate.ALL:
            return True
        if gate == Gate.PRED:
            return pred
        if gate == Gate.RDRV:
            return self.row_driver(u)
        return self.col_driver(u)

    def _ar(self, i: int) -> int:
        return self.ar[i] if i < self.n_ar else 0

    # -- operand-stage sources ------------------------------------------------------------
    def _bypass(self, n: int) -> dict:
        """The moves in flight of the first ``n`` execute-queue entries (the one executing
        in this cycle, then, with the bus stage, the one executing next cycle) as
        register -> value, as reads see them: each move's result, or the FMA's if the FMA
        write-back writes the same register in the move's cycle (what the register holds
        afterwards); the later move wins. FMA results alone are not bypassed. Empty
        without an execute stage or without a move.

        Operand-stage sources see ``n = cfg.exec_delay`` entries; a bus driver, whose
        value is registered at the end of its operand stage with the bus stage, sees
        only the move executing in that cycle (``n = int(cfg.exec_stage)``)."""
        out = {}
        for k in range(n):
            mv = self._xq[k].mv
            if mv is None:
                continue
            dst, val = mv
            w = self._ap[-1 - k]
            if w is not None and w[2] not in (FmaWb.MEMA, FmaWb.MEMB) and w[0] == dst:
                val = w[1]
            out[dst] = val
        return out

    def _src(self, code: int, row_in: int, col_in: int, byp: dict | None = None) -> int:
        if code < 16:
            if code >= self.n_regs:
                return 0
            byp = self._byp if byp is None else byp
            return byp.get(code, self.rf[code]) if byp else self.rf[code]
        if code == Src.MEMA:
            return self.rd_a
        if code == Src.MEMB:
            return self.rd_b
        if code == Src.ROW:
            return row_in
        if code == Src.COL:
            return col_in
        return self._const.get(code, 0)

    def _drv_src(self, code: int) -> int:
        # drivers never forward a bus: ROW/COL (and invalid codes) drive +0
        if code in (Src.ROW, Src.COL):
            return 0
        return self._src(code, 0, 0, self._dbyp)

    # -- phase 1 ------------------------------------------------------------------------
    def drive(self) -> tuple[int, int, int, int]:
        """This cycle's ``(row_out, row_oe, col_out, col_oe)`` (before :meth:`clock`)."""
        s = self._s1
        roe = self.row_driver(s)
        coe = self.col_driver(s)
        self._set_bypass()
        return (self._drv_src(s.rdrv_src) if roe else 0, int(roe),
                self._drv_src(s.cdrv_src) if coe else 0, int(coe))

    # -- phase 2 ------------------------------------------------------------------------
    def clock(self, uop, row_in: int, col_in: int) -> PEEvents:
        """Execute one cycle: ``uop`` is issued now, the buses resolve to ``row_in``,
        ``col_in``. Returns this cycle's events; state advances to the next cycle.

        ``uop`` is a :class:`~arch.microop.MicroOp`, an integer word or a :class:`DecodedUop`.
        """
        u = self._as_decoded(uop)
        row_in &= self.wmask
        col_in &= self.wmask
        s, p1, pw = self._s1, self._s1_pred, self._s1_wpred
        rf_rd = 0
        self._set_bypass()

        # ---- operand stage of the micro-op issued last cycle: read every source ------------
        # (with the execute stage through the move bypass, PEModel._bypass)
        roe = self.row_driver(s)
        coe = self.col_driver(s)
        rf_rd += (roe and s.rdrv_src < 16) + (coe and s.cdrv_src < 16)

        mul_in = None
        if s.fpu_en and p1:
            a = self._src(s.fpu_a, row_in, col_in)
            b = self._src(s.fpu_b, row_in, col_in)
            c_rf = s.fpu_c < 16
            c = s.fpu_c if c_rf else self._src(s.fpu_c, row_in, col_in)
            wbk_kind = s.fpu_wb if s.fpu_wb in (FmaWb.MEMA, FmaWb.MEMB) else FmaWb.RF
            waddr = self._s1_rb_addr if wbk_kind == FmaWb.MEMB else self._s1_ra_addr
            mul_in = (s.fpu_dst, a, b, c_rf, c, wbk_kind, waddr)
            rf_rd += (s.fpu_a < 16) + (s.fpu_b < 16)

        mv = None
        if s.mv_op != MvOp.NOP and p1:
            v = self._src(s.mv_src, row_in, col_in)
            rf_rd += s.mv_src < 16
            if s.mv_op == MvOp.MOV:
                mv = (s.mv_dst, v)
            elif s.mv_op == MvOp.RELU:
                mv = (s.mv_dst, self.relu(v))
            else:
                mv = (s.mv_dst, self.mask(v, self._src(s.mv_msk, row_in, col_in)))
                rf_rd += s.mv_msk < 16

        wa = wb = None
        if s.wa_en and pw:
            wa = (self._s1_wa_addr, self._src(s.wa_src, row_in, col_in))
            rf_rd += s.wa_src < 16
        if s.wb_en and pw:
            wb = (self._s1_wb_addr, self._src(s.wb_src, row_in, col_in))
            rf_rd += s.wb_src < 16
        x = _Exec(mul_in, mv, wa, wb)

        # ---- execute stage: the micro-op read now (or, with an execute stage, the one
        # read exec_delay cycles ago) enters the multiplier, moves and writes SRAM --------
        if self._xq:
            self._xq.append(x)
            x = self._xq.pop(0)
        new_mul = None
        if x.mul is not None:
            dst, a, b, c_rf, c, wbk_kind, waddr = x.mul
            new_mul = _MulEntry(dst, self._mul(a, b), c_rf, c, wbk_kind, waddr)
        fma, mv, wa, wb = x.mul is not None, x.mv, x.wa, x.wb

        # ---- late stage: the product reaching the adder reads an RF `c` now ---------------
        new_add = None
        e = self._mp[-1]
        if e is not None:
            if e.c_rf:
                c = self.rf[e.c] if e.c < self.n_regs else 0
                rf_rd += 1
            else:
                c = e.c
            new_add = (e.dst, self._add(e.product, c), e.wb, e.waddr)

        # ---- write-back of the FMA issued fpu_latency-1 cycles ago --------------------------
        wbk = self._ap[-1]
        wbk_a = wbk is not None and wbk[2] == FmaWb.MEMA
        wbk_b = wbk is not None and wbk[2] == FmaWb.MEMB
        if wbk_a or wbk_b:
            wbk_mem, wbk = wbk, None   # an SRAM write-back is no RF write
        else:
            wbk_mem = None

        # ---- issue stage of the new micro-op -------------------------------------------
        pred = self.predicate(u)             # the SRAM writes' (and read gate PRED's) selection
        xpred = pred or bool(u.wp_en)        # the FMA's, the move's and the AR updates'
        ra = bool(u.ra_en) and self._gate(u.ra_gate, u, pred)
        rb = bool(u.rb_en) and self._gate(u.rb_gate, u, pred)
        amask = self.amask
        ra_addr = (self._ar(u.ra_ar) + u.ra_off) & amask & (self.cfg.mem_a_words - 1)
        rb_addr = (self._ar(u.rb_ar) + u.rb_off) & amask & (self.cfg.mem_b_words - 1)
        wa_addr = (self._ar(u.wa_ar) + u.wa_off) & amask & (self.cfg.mem_a_words - 1)
        wb_addr = (self._ar(u.wb_ar) + u.wb_off) & amask & (self.cfg.mem_b_words - 1)

        ev = PEEvents(
            fma=int(fma), mv=int(mv is not None), mem_a_rd=int(ra), mem_b_rd=int(rb),
            mem_a_wr=int(wa is not None or wbk_a), mem_b_wr=int(wb is not None or wbk_b),
            rf_rd=int(rf_rd), rf_wr=int(mv is not None) + int(wbk is not None),
            row_drv=int(roe), col_drv=int(coe),
            rf_conflict=int(mv is not None and wbk is not None and wbk[0] == mv[0]),
            mem_conflict=int((wa is not None and wbk_a) or (wb is not None and wbk_b)),
        )

        # ---- end of cycle: all registers update ------------------------------------------
        # SRAM: the read samples the array before this cycle's write (read-during-write
        # returns the old data; with the execute stage, the bypass returns the data of the
        # write landing on the address in this cycle, an operand-stage write's or an FMA
        # write-back's); a read that is not performed keeps the port register.
        if ra:
            self.rd_a = self._sram_read(self.mem_a, ra_addr, wa, wbk_mem if wbk_a else None, "wa", FmaWb.MEMA)
        if rb:
            self.rd_b = self._sram_read(self.mem_b, rb_addr, wb, wbk_mem if wbk_b else None, "wb", FmaWb.MEMB)
        # one write port per bank: an FMA write-back into SRAM displaces the
        # operand-stage write of the same bank (mem_conflict)
        if wbk_a:
            self.mem_a[wbk_mem[3]] = wbk_mem[1]
        elif wa is not None:
            self.mem_a[wa[0]] = wa[1]
        if wbk_b:
            self.mem_b[wbk_mem[3]] = wbk_mem[1]
        elif wb is not None:
            self.mem_b[wb[0]] = wb[1]
        # RF: the move unit first, the FMA write-back wins a conflict
        if mv is not None and mv[0] < self.n_regs:
            self.rf[mv[0]] = mv[1]
        if wbk is not None and wbk[0] < self.n_regs:
            self.rf[wbk[0]] = wbk[1]
        # address registers (predicated; AR values before this micro-op were used above)
        if xpred:
            self._update_ars(u)
        # pipelines
        self._ap = [new_add] + self._ap[:-1]
        self._mp = [new_mul] + self._mp[:-1]
        self._s1, self._s1_pred, self._s1_wpred = u, xpred, pred
        self._s1_wa_addr, self._s1_wb_addr = wa_addr, wb_addr
        self._s1_ra_addr, self._s1_rb_addr = ra_addr, rb_addr
        self.cycle += 1
        return ev

    def _set_bypass(self):
        cfg = self.cfg
        self._byp = self._bypass(cfg.exec_delay)
        self._dbyp = self._bypass(int(cfg.exec_stage)) if cfg.bus_stage else self._byp

    def _sram_read(self, mem: list, addr: int, wr, wbk_now, field: str, kind) -> int:
        """An SRAM read at the end of this cycle: the array before this cycle's writes,
        or with the execute stage the SRAM bypass: the word of the write to the address
        that lands in this cycle (an FMA write-back into the bank, ``wbk_now``, which
        displaces an operand-stage write, else the operand-stage write ``wr``; with the
        bus stage also the operand-stage write landing next cycle, which is younger and
        wins, unless an FMA write-back into the bank displaces it then)."""
        v = mem[addr]
        if not self.cfg.exec_stage:
            return v
        if wbk_now is not None:
            if wbk_now[3] == addr:
                v = wbk_now[1]
        elif wr is not None and wr[0] == addr:
            v = wr[1]
        if self.cfg.bus_stage:
            nxt = getattr(self._xq[0], field)        # executes next cycle
            w = self._ap[-2]
            if nxt is not None and not (w is not None and w[2] == kind) and nxt[0] == addr:
                v = nxt[1]
        return v

    @staticmethod
    def post_increments(u: DecodedUop, i: int) -> bool:
        """A port of ``u`` post-increments AR ``i`` by its stride."""
        return bool((u.ra_inc and u.ra_ar == i) or (u.rb_inc and u.rb_ar == i)
                    or (u.wa_inc and u.wa_ar == i) or (u.wb_inc and u.wb_ar == i))

    def _update_ars(self, u: DecodedUop):
        amask = self.amask
        op, idx, imm = u.ar_op, u.ar_idx, u.ar_imm
        new_ar = []
        for i in range(self.n_ar):
            if op == ArOp.SET and idx == i:
                new_ar.append(imm & amask)
                continue
            v = self.ar[i]
            if op == ArOp.ADD and idx == i:
                v += imm
            if self.post_increments(u, i):
                v += self.stride[i]
            new_ar.append(v & amask)
        self.ar = new_ar
        if op == ArOp.STRIDE and idx < self.n_ar:
            self.stride[idx] = imm & amask

    def _as_decoded(self, uop) -> DecodedUop:
        if isinstance(uop, DecodedUop):
            return uop
        if isinstance(uop, MicroOp):
            uop = uop.encode(self.ab, self.sb, self.wp)
        return decode_uop(int(uop), self.ab, self.sb, self.wp)

    # -- convenience ----------------------------------------------------------------------
    def step(self, uop, ext_row: int = 0, ext_col: int = 0):
        """One cycle of a lone PE (buses resolved as own drive if driving, else external).

        Returns ``((row_out, row_oe, col_out, col_oe), events)``.
        """
        drv = self.drive()
        row_in = drv[0] if drv[1] else ext_row
        col_in = drv[2] if drv[3] else ext_col
        return drv, self.clock(uop, row_in, col_in)

    def run(self, uops: Sequence, row_ins: Sequence[int] | None = None,
            col_ins: Sequence[int] | None = None) -> list:
        """Run a program on a lone PE; ``row_ins``/``col_ins`` are the external bus inputs
        per cycle (default 0). Returns per cycle ``((row_out, row_oe, col_out, col_oe),
        events)``."""
        n = len(uops)
        row_ins = row_ins if row_ins is not None else [0] * n
        col_ins = col_ins if col_ins is not None else [0] * n
        return [self.step(u, r, c) for u, r, c in zip(uops, row_ins, col_ins)]
