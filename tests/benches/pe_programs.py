"""PE micro-op programs shared by the model tests and the RTL (cocotb) tests.

A :class:`Program` is what a lone PE is fed cycle by cycle: micro-op words and the
external row / column bus inputs (used in the cycles in which the PE does not drive the
bus itself), plus optional hand-computed expectations ``(cycle, field, value)`` on the
PE's outputs (``row_out``, ``row_oe``, ``col_out``, ``col_oe``) and event fields.

* :data:`DIRECTED`: one directed program per feature (source codes, predicates,
  drivers, AR rules, read gating, ReLU / mask, SRAM read-during-write, FMA/move
  conflict, result timing, events, FMA write-back into SRAM and ``mem_conflict``).
  Each starts by clearing the ARs and strides and writes every register / word it
  reads, so they can run back to back.
* :func:`random_program`: a seeded random valid program over the whole ISA, with
  random external bus inputs and a random RF / SRAM preload through ROW/COL-bus writes.
* :func:`gemv_program`: a GEMV inner loop (``L`` interleaved accumulators, weights
  streamed from SRAM A with AR post-increment, ``x[j]`` in a register loaded from SRAM
  B), with its numpy golden result and MAC utilization.
* :func:`state_dump`: a program that drives every RF register and SRAM word, then the
  ARs and strides (through an identity pattern written into the banks), onto the buses,
  so that the whole architectural state is compared black-box.

Input timing: a micro-op issued at cycle ``t`` reads the buses in its operand stage
``t+1``; the builder's ``row=``/``col=`` arguments put the value at ``t+1``.

Every program is correct for both PE timings (``cfg.exec_stage`` off / on). Moves, SRAM
writes (``wa``/``wb``), FMA entry and their events happen at the execute stage
``t + 1 + cfg.exec_delay``, the FMA write-back at the end of ``t + cfg.fpu_latency - 1``.
With the execute stage two bypasses keep the default distances (``docs/architecture.md``,
"The execute stage"): an operand-stage RF read of the register the move unit writes in
that cycle returns the move's result (the FMA's in an ``rf_conflict``), and an SRAM read
issued in the cycle an operand-stage write lands on its address returns the written word
(not for an FMA write-back into SRAM, nor for a write that one displaces). So with
either timing a move result is read by the next micro-op, an SRAM write by the read
issued two later (:meth:`Builder.wait_sram`: one NOP), an FMA result (RF or SRAM) by the
micro-ops issued ``cfg.fpu_latency - 1`` (RF) / ``cfg.fpu_latency`` (SRAM) or more
later, and an RF ``c`` is read late, directly from the RF. With the execute stage the
programs also check the bypasses at their exact cycles (the read in the write cycle gets
the new value, one a cycle earlier the old one) and where there is none (FMA results,
an RF ``c``, a displaced SRAM write: the old value in the write cycle).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import numpy as np

from arch.microop import ArOp, FmaWb, Gate, MicroOp, MvOp, PredMode, Src

__all__ = [
    "Program", "Builder", "DIRECTED", "directed_programs", "random_program", "random_value",
    "gemv_program", "state_dump", "concat", "valid_sources",
]


@dataclass
class Program:
    """A lone-PE program: per-cycle micro-op words and external bus inputs."""

    name: str
    uops: list[int]
    row_ins: list[int]
    col_ins: list[int]
    expect: list[tuple[int, str, int]] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.uops)


def concat(programs, name="concat") -> Program:
    """Programs back to back (expectation cycles shifted)."""
    out = Program(name, [], [], [])
    for p in programs:
        base = len(out.uops)
        out.uops += p.uops
        out.row_ins += p.row_ins
        out.col_ins += p.col_ins
        out.expect += [(base + c, f, v) for c, f, v in p.expect]
    return out


class Builder:
    """Appends micro-ops for the PE at ``(row, col)`` of ``cfg``.

    ``op(**fields, row=v, col=v)`` issues one micro-op now (cycle :attr:`t`) and puts
    ``v`` on the external row / column bus at ``t+1``, its operand stage.
    """

    def __init__(self, cfg, row: int, col: int, name: str, *, clear_ars: bool = True):
        self.cfg, self.row, self.col, self.name = cfg, row, col, name
        self.ab, self.sb = cfg.addr_bits, cfg.sel_bits
        self.key = cfg.uop_key
        self.fmt = cfg.fmt
        self.uops: list[int] = []
        self.row_ins: list[int] = [0]
        self.col_ins: list[int] = [0]
        self.expects: list[tuple[int, str, int]] = []
        self._mv_t: dict[int, int] = {}     # register -> issue cycle of the last move into it
        self.diag = (col - row) % cfg.nr
        #: fields that make this PE the row / column bus driver
        self.me_r = dict(rdrv_en=1, rdrv_k=col)
        self.me_c = dict(cdrv_en=1, cdrv_k=row)
        if clear_ars:
            for i in range(cfg.n_ar):
                self.op(ar_op=ArOp.SET, ar_idx=i, ar_imm=0)
                self.op(ar_op=ArOp.STRIDE, ar_idx=i, ar_imm=0)

    @property
    def t(self) -> int:
        return len(self.uops)

    def f(self, x: float) -> int:
        """Bit pattern of ``x`` rounded to the format."""
        return int(self.fmt.from_float(x))

    def off(self, v: int) -> int:
        """An address / immediate field value (two's complement, modulo 2**addr_bits)."""
        return v % (1 << self.ab)

    def op(self, *, row: int | None = None, col: int | None = None, **fields) -> int:
        t = self.t
        if fields.get("mv_op", MvOp.NOP) != MvOp.NOP:
            self._mv_t[fields.get("mv_dst", 0)] = t
        self.uops.append(MicroOp(**fields).encode(*self.key))
        while len(self.row_ins) < t + 2:
            self.row_ins.append(0)
            self.col_ins.append(0)
        if row is not None:
            self.row_ins[t + 1] = row
        if col is not None:
            self.col_ins[t + 1] = col
        return t

    def nops(self, n: int):
        for _ in range(n):
            self.op()

    def wait_sram(self):
        """NOPs after an SRAM write by ``wa``/``wb``, so that the next micro-op's read
        sees it: ``cfg.sram_read_distance - 1`` (one; two with the receive stage)."""
        self.nops(self.cfg.sram_read_distance - 1)

    def expect(self, cycle: int, **fields):
        for k, v in fields.items():
            self.expects.append((cycle, k, int(v)))

    # -- helpers ------------------------------------------------------------------------
    def set_reg(self, i: int, value: int) -> int:
        return self.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=i, row=value)

    def write_a(self, addr: int, value: int, ar: int = 0) -> int:
        return self.op(wa_en=1, wa_ar=ar, wa_off=self.off(addr), wa_src=Src.ROW, row=value)

    def write_b(self, addr: int, value: int, ar: int = 0) -> int:
        return self.op(wb_en=1, wb_ar=ar, wb_off=self.off(addr), wb_src=Src.COL, col=value)

    def _drive_after_move(self, src: int):
        """NOPs first when ``src`` is a register a recent micro-op moves into and drivers
        see moves only ``cfg.mv_drive_distance`` micro-ops later (2 with the bus stage, 3
        with the receive stage)."""
        t_mv = self._mv_t.get(src, -99)
        if self.t - t_mv < self.cfg.mv_drive_distance:
            self.nops(self.cfg.mv_drive_distance - (self.t - t_mv))

    def show(self, src: int, expect: int | None = None, **extra) -> int:
        """Drive ``src`` on the row bus; returns the cycle the value is on ``row_out``
        (after a NOP when ``src`` was just moved into, see :meth:`_drive_after_move`)."""
        self._drive_after_move(src)
        t = self.op(rdrv_src=src, **self.me_r, **extra) + 1
        if expect is not None:
            self.expect(t, row_out=expect, row_oe=1)
        return t

    def show_col(self, src: int, expect: int | None = None, **extra) -> int:
        self._drive_after_move(src)
        t = self.op(cdrv_src=src, **self.me_c, **extra) + 1
        if expect is not None:
            self.expect(t, col_out=expect, col_oe=1)
        return t

    def build(self, drain: bool = True) -> Program:
        if drain:
            self.nops(self.cfg.fpu_latency)
        n = len(self.uops)
        return Program(self.name, list(self.uops), self.row_ins[:n], self.col_ins[:n],
                       list(self.expects))


# ---------------------------------------------------------------------------------------
# directed programs
# ---------------------------------------------------------------------------------------
def _p_sources(cfg, row, col) -> Program:
    """Every source code, through the move unit and the drivers."""
    b = Builder(cfg, row, col, "sources")
    fmt = cfg.fmt
    x, y, z, rv, cv = b.f(1.5), b.f(-2.25), b.f(3.0), b.f(0.75), b.f(-6.5)
    b.set_reg(1, x)
    b.write_a(5, y)
    b.write_b(6, z)
    b.nops(1)
    # RF source, directly on the row bus and through MOV
    b.show(1, x)
    b.op(mv_op=MvOp.MOV, mv_src=1, mv_dst=2)
    b.show(2, x)
    # MEMA / MEMB: the data read by this micro-op
    b.show(Src.MEMA, y, ra_en=1, ra_off=5)
    b.show_col(Src.MEMB, z, rb_en=1, rb_off=6)
    b.op(mv_op=MvOp.MOV, mv_src=Src.MEMA, mv_dst=3, ra_en=1, ra_off=5)
    b.show(3, y)
    # ROW / COL read the resolved buses (external inputs here)
    b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=4, row=rv)
    b.op(mv_op=MvOp.MOV, mv_src=Src.COL, mv_dst=5, col=cv)
    b.show(4, rv)
    b.show(5, cv)
    # a PE reads its own drive back: drive r1 and move ROW into r6 in the same micro-op
    b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=6, rdrv_src=1, **b.me_r, row=rv)
    b.show(6, x)
    if cfg.exec_stage:
        # the bypass: the micro-op after a move reads its result in every kind of operand
        # read (move source and mask, FMA a / b, SRAM write sources, both drivers) in the
        # move's execute cycle, while the RF still holds the old value
        v, w = b.f(1.75), b.f(-0.5)          # v > 0: MASK(v, v) = v
        b.set_reg(9, w)                      # RF[9] = w at the end of its execute stage
        b.nops(cfg.mv_drive_distance - 2)    # (so that the drivers below see it)
        b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=9, row=v)
        tf = b.op(mv_op=MvOp.MASK, mv_src=9, mv_msk=9, mv_dst=10,
                  fpu_en=1, fpu_a=9, fpu_b=9, fpu_c=Src.ZERO, fpu_dst=11,
                  wa_en=1, wa_off=12, wa_src=9, wb_en=1, wb_off=12, wb_src=9,
                  rdrv_src=9, **b.me_r, cdrv_src=9, **b.me_c)
        # (with the bus stage a driven value is registered before the move executes: the
        # drivers see it one micro-op later, cfg.mv_drive_distance = 2, so here the old w)
        dv = v if cfg.mv_drive_distance == 1 else w
        b.expect(tf + 1, row_out=dv, row_oe=1, col_out=dv, col_oe=1)
        b.show(10, v)                        # the MASK result, through the bypass again
        b.show(Src.MEMA, v, ra_en=1, ra_off=12)
        b.show_col(Src.MEMB, v, rb_en=1, rb_off=12)
        b.nops(tf + cfg.fpu_latency - 1 - b.t)
        b.show(11, b.f(1.75 * 1.75))
        # moves into one register in consecutive micro-ops: a reader 1, 2 and 3 micro-ops
        # after the last one gets the newest value at every bypass point, for every kind
        # of operand read through the execute stage (move source and mask, FMA a, SRAM
        # write source), though older moves' values are in flight at the other points
        # (new values for each gap, so the register's value before them is never the
        # expected one)
        for gap in range(3):
            vals = [b.f(0.75 + k + 4 * gap) for k in range(3)]
            for v_ in vals:
                b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=9, row=v_)
            b.nops(gap)
            tr = b.op(mv_op=MvOp.MASK, mv_src=9, mv_msk=9, mv_dst=10,
                      fpu_en=1, fpu_a=9, fpu_b=Src.ONE, fpu_c=Src.ZERO, fpu_dst=11,
                      wa_en=1, wa_off=13, wa_src=9)
            b.show(10, vals[-1])
            b.show(Src.MEMA, vals[-1], ra_en=1, ra_off=13)
            b.nops(tr + cfg.fpu_latency - 1 - b.t)
            b.show(11, vals[-1])
    # constants
    b.show(Src.ZERO, 0)
    b.show(Src.NZERO, fmt.neg_zero)
    b.show(Src.ONE, fmt.one)
    # drivers never forward a bus: ROW / COL drive +0
    b.show(Src.ROW, 0, row=rv)
    b.show_col(Src.COL, 0, col=cv)
    # invalid codes read +0 (the assembler rejects them)
    for code in (20, 23, 27, 31) + tuple(range(cfg.n_regs, 16)):
        b.set_reg(7, x)
        b.op(mv_op=MvOp.MOV, mv_src=code, mv_dst=7)
        b.show(7, 0)
    # SRAM write sources: a constant and a register
    b.op(wa_en=1, wa_off=9, wa_src=Src.ONE)
    b.op(wb_en=1, wb_off=9, wb_src=1)
    b.wait_sram()
    b.show(Src.MEMA, fmt.one, ra_en=1, ra_off=9)
    b.show(Src.MEMB, x, rb_en=1, rb_off=9)
    # FMA operands from every kind of source: ROW*COL + MEMA
    b.op(fpu_en=1, fpu_a=Src.ROW, fpu_b=Src.COL, fpu_c=Src.MEMA, fpu_dst=8, ra_en=1, ra_off=5,
         row=b.f(2.0), col=b.f(3.0))
    b.nops(cfg.fpu_latency - 1)
    b.show(8, b.f(2.0 * 3.0 - 2.25))
    return b.build()


def _pred_true(cfg, row, col, mode, k):
    return {PredMode.ALL: True, PredMode.COL: col == k, PredMode.ROW: row == k,
            PredMode.DIAG: (col - row) % cfg.nr == k}[mode]


def _p_predicates(cfg, row, col) -> Program:
    """Every predicate mode and k: move, FMA, SRAM write and AR update are predicated;
    drivers and ALL-gated reads are not. As a write predicate (``wp_en``) it gates the
    SRAM writes only."""
    b = Builder(cfg, row, col, "predicates")
    one, two = b.f(1.0), b.f(2.0)
    fixed = cfg.n_ar - 1        # stays 0; AR0 post-increments (when there are two ARs)
    inc = dict(ra_inc=1, ra_ar=0) if cfg.n_ar > 1 else {}
    b.op(ar_op=ArOp.STRIDE, ar_idx=0, ar_imm=1)
    ar0 = 0
    wps = (0, 1) if cfg.uop_key[2] else (0,)
    for mode, k, wp in itertools.product(PredMode, range(1 << cfg.sel_bits), wps):
        if wp and mode == PredMode.ALL and k:
            continue
        p = dict(pred_mode=mode, pred_k=k, **({"wp_en": wp} if wp else {}))
        on = _pred_true(cfg, row, col, mode, k)
        on_x = on or wp                 # the FMA, move and AR update
        b.set_reg(3, 0)
        b.write_a(20, 0, ar=fixed)
        b.write_b(20, 0, ar=fixed)
        b.op(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=3, **p)
        b.show(3, one if on_x else 0)
        b.op(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_dst=3, **p)
        b.nops(cfg.fpu_latency - 1)
        b.show(3, two if on_x else 0)
        # SRAM writes (addressed off AR1 = 0) and an AR0 post-increment
        b.op(wa_en=1, wa_ar=fixed, wa_off=20, wa_src=Src.ONE, wb_en=1, wb_ar=fixed,
             wb_off=20, wb_src=Src.ONE, **inc, **p)
        ar0 += 1 if on_x and inc else 0
        b.wait_sram()
        b.show(Src.MEMA, one if on else 0, ra_en=1, ra_ar=fixed, ra_off=20)
        b.show(Src.MEMB, one if on else 0, rb_en=1, rb_ar=fixed, rb_off=20)
        # a driver is independent of the predicate
        b.show(Src.ONE, one, **p)
    # AR0 advanced once per true predicate: write a marker through AR0, read it absolute
    if inc:
        marker = b.f(5.0)
        b.op(wa_en=1, wa_ar=0, wa_off=0, wa_src=Src.ROW, row=marker)
        b.wait_sram()
        b.show(Src.MEMA, marker, ra_en=1, ra_ar=fixed, ra_off=ar0)
    return b.build()


def _p_drivers(cfg, row, col) -> Program:
    """Row / column driver selection, plain and diagonal, for every k."""
    b = Builder(cfg, row, col, "drivers")
    one = b.f(1.0)
    diag = (col - row) % cfg.nr
    for dg in (0, 1):
        for k in range(1 << cfg.sel_bits):
            r_on = (diag if dg else col) == k
            c_on = (diag if dg else row) == k
            t = b.op(rdrv_en=1, rdrv_diag=dg, rdrv_k=k, rdrv_src=Src.ONE,
                     cdrv_en=1, cdrv_diag=dg, cdrv_k=k, cdrv_src=Src.NZERO) + 1
            b.expect(t, row_oe=int(r_on), row_out=one if r_on else 0, row_drv=int(r_on),
                     col_oe=int(c_on), col_out=b.fmt.neg_zero if c_on else 0, col_drv=int(c_on))
    # en = 0 selects nobody
    t = b.op(rdrv_k=col, cdrv_k=row, rdrv_src=Src.ONE, cdrv_src=Src.ONE) + 1
    b.expect(t, row_oe=0, col_oe=0, row_out=0, col_out=0)
    return b.build()


def _p_ar_rules(cfg, row, col) -> Program:
    """AR SET / STRIDE / ADD / post-increment rules and their priority."""
    b = Builder(cfg, row, col, "ar_rules")
    depth_a = cfg.mem_a_words
    amod = 1 << cfg.addr_bits
    # identity pattern: memA[a] = a for the words used below
    used = list(range(0, 40)) + [depth_a - 3, depth_a - 2, depth_a - 1]
    for a in used:
        b.write_a(a, a)
    b.wait_sram()
    n = cfg.n_ar
    i = n - 1           # the AR under test (the last one)
    ar = 0

    def read(off=0, expect_addr=None, **extra):
        b.show(Src.MEMA, (ar + off) % amod % depth_a if expect_addr is None else expect_addr,
               ra_en=1, ra_ar=i, ra_off=b.off(off), **extra)

    b.op(ar_op=ArOp.SET, ar_idx=i, ar_imm=4); ar = 4
    read()
    # STRIDE takes effect from the next micro-op: an inc in the same micro-op uses the old stride (0)
    b.op(ar_op=ArOp.STRIDE, ar_idx=i, ar_imm=3, ra_en=1, ra_ar=i, ra_inc=1)
    read()
    b.op(ra_en=1, ra_ar=i, ra_inc=1); ar += 3        # 7
    read()
    read(off=-2)                                     # 5
    read(off=30)                                     # 37
    # several ports incrementing the same AR advance it by one stride
    b.op(ra_inc=1, ra_ar=i, rb_inc=1, rb_ar=i, wa_inc=1, wa_ar=i, wb_inc=1, wb_ar=i); ar += 3  # 10
    read()
    # inc without en still increments
    b.op(wa_inc=1, wa_ar=i); ar += 3                 # 13
    read()
    # ADD and inc add up
    b.op(ar_op=ArOp.ADD, ar_idx=i, ar_imm=5, ra_en=1, ra_ar=i, ra_inc=1); ar += 5 + 3   # 21
    read()
    # SET wins over an increment
    b.op(ar_op=ArOp.SET, ar_idx=i, ar_imm=2, ra_inc=1, ra_ar=i, rb_inc=1, rb_ar=i); ar = 2
    read()
    # the read address uses the AR before this micro-op's update
    b.show(Src.MEMA, 2, ra_en=1, ra_ar=i, ar_op=ArOp.SET, ar_idx=i, ar_imm=30); ar = 30
    read()
    # negative ADD wraps modulo 2**addr_bits
    b.op(ar_op=ArOp.ADD, ar_idx=i, ar_imm=b.off(-32)); ar = (ar - 32) % amod   # -2
    read()
    # negative stride
    b.op(ar_op=ArOp.STRIDE, ar_idx=i, ar_imm=b.off(-1))
    b.op(ra_inc=1, ra_ar=i); ar = (ar - 1) % amod      # -3
    read()
    # the predicate gates increments and updates
    other = 1 if cfg.nr > 1 else None
    if other is not None:
        kk = (row + 1) % cfg.nr
        b.op(ra_inc=1, ra_ar=i, pred_mode=PredMode.ROW, pred_k=kk)
        b.op(ar_op=ArOp.SET, ar_idx=i, ar_imm=9, pred_mode=PredMode.ROW, pred_k=kk)
        read()
    # ARs are independent
    if n > 1:
        b.op(ar_op=ArOp.SET, ar_idx=0, ar_imm=11)
        b.op(ar_op=ArOp.STRIDE, ar_idx=0, ar_imm=2)
        b.op(ra_inc=1, ra_ar=0)
        b.show(Src.MEMA, 13, ra_en=1, ra_ar=0)
        read()
    # an AR index >= n_ar names no register: reads as 0, updates are ignored
    if n < 4:
        b.op(ar_op=ArOp.SET, ar_idx=3, ar_imm=17, ra_inc=1, ra_ar=3)
        b.show(Src.MEMA, 6, ra_en=1, ra_ar=3, ra_off=6)
    return b.build()


def _p_gating(cfg, row, col) -> Program:
    """SRAM read gates ALL / PRED / RDRV / CDRV; an ungated-off MEMA keeps the last data."""
    b = Builder(cfg, row, col, "gating")
    va, vb, old = b.f(1.25), b.f(-0.5), b.f(9.0)
    b.write_a(3, va)
    b.write_b(3, vb)
    b.write_a(4, old)
    b.write_b(4, old)
    b.wait_sram()
    other_k = (col + 1) % (1 << cfg.sel_bits)
    other_r = (row + 1) % (1 << cfg.sel_bits)
    cases = [
        (Gate.ALL, {}, True),
        (Gate.PRED, {}, True),
        (Gate.PRED, dict(pred_mode=PredMode.COL, pred_k=other_k), col == other_k),
        (Gate.PRED, dict(pred_mode=PredMode.COL, pred_k=col), True),
        (Gate.RDRV, dict(rdrv_en=1, rdrv_k=col), True),
        (Gate.RDRV, dict(rdrv_en=1, rdrv_k=other_k), col == other_k),
        (Gate.RDRV, dict(rdrv_en=0, rdrv_k=col), False),
        (Gate.CDRV, dict(cdrv_en=1, cdrv_k=row), True),
        (Gate.CDRV, dict(cdrv_en=1, cdrv_k=other_r), row == other_r),
        (Gate.CDRV, dict(cdrv_en=1, cdrv_diag=1, cdrv_k=(col - row) % cfg.nr), True),
    ]
    for gate, extra, on in cases:
        # load `old` into both port registers, then a gated read of address 3
        b.op(ra_en=1, ra_off=4, rb_en=1, rb_off=4)
        t = b.op(ra_en=1, ra_off=3, ra_gate=gate, rb_en=1, rb_off=3, rb_gate=gate,
                 mv_op=MvOp.MOV, mv_src=Src.MEMA, mv_dst=2, **extra)
        b.expect(t, mem_a_rd=int(on), mem_b_rd=int(on))
        p_on = _pred_true(cfg, row, col, extra.get("pred_mode", 0), extra.get("pred_k", 0))
        b.op(mv_op=MvOp.MOV, mv_src=Src.MEMB, mv_dst=3, rb_en=0)   # MEMB still holds its data
        if p_on:
            b.show(2, va if on else old)
        b.show(3, vb if on else old)
        # with en = 0 the port keeps the last read data
        b.show(Src.MEMA, va if on else old, ra_off=4)
    return b.build()


def _p_relu_mask(cfg, row, col) -> Program:
    """MOV keeps bits; ReLU / mask on signed zeros, infinities, NaNs and subnormals."""
    b = Builder(cfg, row, col, "relu_mask")
    fmt = cfg.fmt
    nan_payload = fmt.inf | 1                    # a signalling NaN with payload 1
    neg_nan = fmt.sign_mask | fmt.qnan | 2
    sub = 1                                      # smallest positive subnormal
    vals = [b.f(2.5), b.f(-2.5), 0, fmt.neg_zero, fmt.inf, fmt.sign_mask | fmt.inf,
            nan_payload, neg_nan, sub, fmt.sign_mask | sub, fmt.max_finite]

    def relu(x):
        if fmt.is_nan(x):
            return fmt.qnan
        return x if not x & fmt.sign_mask and x != 0 else 0

    def positive(x):
        return not fmt.is_nan(x) and not x & fmt.sign_mask and x != 0

    for v in vals:
        b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=1, row=v)
        b.show(1, v)                                  # MOV keeps NaN payloads and -0
        b.op(mv_op=MvOp.RELU, mv_src=Src.ROW, mv_dst=2, row=v)
        b.show(2, relu(v))
    for m in vals:
        for v in (b.f(-3.0), nan_payload, fmt.neg_zero):
            b.set_reg(4, v)
            b.op(mv_op=MvOp.MASK, mv_src=4, mv_msk=Src.ROW, mv_dst=5, row=m)
            b.show(5, (fmt.qnan if fmt.is_nan(v) else v) if positive(m) else 0)
    return b.build()


def _p_rdw(cfg, row, col) -> Program:
    """SRAM read-during-write returns the old data; the write is seen one cycle later.

    A write issued at ``t`` is seen by the read issued at ``t+d`` (``d =
    cfg.sram_read_distance``), not by the ones issued before it: without the execute
    stage the write lands at the end of ``t+1``, where the read issued then samples the
    old word; with it the write lands at the end of ``t+1+exec_delay``, and the reads
    issued in that cycle and (with the bus stage) the one before it get the word through
    the SRAM bypass (same bank and address only). With the receive stage the bypass
    covers the same two cycles while the write lands a cycle later: ``d`` = 3."""
    b = Builder(cfg, row, col, "read_during_write")
    d = cfg.sram_read_distance
    old, new = b.f(1.0), b.f(-7.0)
    b.write_a(7, old)
    b.write_b(7, old)
    b.nops(d)
    b.op(wa_en=1, wa_off=7, wa_src=Src.ROW, wb_en=1, wb_off=7, wb_src=Src.ROW, row=new)  # t
    for k in range(1, d + 1):                            # issued at t+k
        b.show(Src.MEMA, new if k == d else old, ra_en=1, ra_off=7)
    b.op(wb_en=1, wb_off=7, wb_src=Src.ONE)
    for k in range(1, d + 1):
        b.show_col(Src.MEMB, b.f(1.0) if k == d else new, rb_en=1, rb_off=7)
    # a read and a write of the same address in the same micro-op: the read is earlier
    # than the write, so it sees the old data
    b.op(wa_en=1, wa_off=8, wa_src=Src.ONE)
    b.wait_sram()
    t = b.show(Src.MEMA, b.f(1.0), ra_en=1, ra_off=8, wa_en=1, wa_off=8, wa_src=Src.NZERO) - 1
    for k in range(1, d + 1):
        b.show(Src.MEMA, cfg.fmt.neg_zero if k == d else b.f(1.0), ra_en=1, ra_off=8)
    assert b.t == t + d + 1
    if cfg.exec_stage:
        # the SRAM bypass compares bank and address: in the landing cycle of a write of
        # A[7], a read of A[8] and one of B[7] get their own words, then A[7] the new one
        b.op(wa_en=1, wa_off=7, wa_src=Src.ZERO)
        b.nops(d - 1)
        tc = b.show(Src.MEMA, cfg.fmt.neg_zero, ra_en=1, ra_off=8, rb_en=1, rb_off=7,
                    cdrv_src=Src.MEMB, **b.me_c)
        b.expect(tc, col_out=b.f(1.0), col_oe=1)
        b.show(Src.MEMA, 0, ra_en=1, ra_off=7)
    return b.build()


def _p_timing(cfg, row, col) -> Program:
    """When FMA and move results become readable (with the execute stage: moves through
    the bypass, in the write cycle; FMA results not bypassed); late read of an RF `c`
    (never bypassed); MAC chains."""
    b = Builder(cfg, row, col, "timing")
    L = cfg.fpu_latency
    e = cfg.exec_delay
    one, two, three = b.f(1.0), b.f(2.0), b.f(3.0)
    b.set_reg(1, two)
    b.set_reg(2, three)
    b.set_reg(5, one)
    b.set_reg(7, one)
    b.nops(1)
    # FMA r5 = r1*r2 + ONE issued at t is written at the end of t+L-1 (L = fpu_latency):
    # the driver issued at t+k reads r5 in its operand stage t+k+1, so k >= L-1 sees it
    # (with either timing: FMA results are not bypassed, k = L-2 reads in the write cycle)
    t = b.op(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=Src.ONE, fpu_dst=5)
    for k in range(1, L + 1):
        assert b.t == t + k
        b.show(5, b.f(7.0) if k >= L - 1 else one)
    # move: issued at t, readable by the micro-op issued at t+1 (with the execute stage
    # through the bypass, in the move's write cycle, while the RF holds the old value)
    if e:
        b.set_reg(6, two)
    b.op(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=6)
    b.show(6, one)
    # the RF `c` is read late: a MOV to r7 after issue but before the product reaches the
    # adder is seen (issued at t+m, written at the end of t+m+1+exec_delay, c read at
    # t+1+exec_delay+mul_latency: seen for m <= mul_latency-1)
    t = b.op(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=7, fpu_dst=8)
    b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=7, row=b.f(10.0))
    b.nops(L)
    b.show(8, b.f(16.0))
    # a non-RF `c` is captured at the operand stage (the bus value of t+1)
    b.op(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=Src.ROW, fpu_dst=9, row=b.f(0.5))
    b.nops(L)
    b.show(9, b.f(6.5))
    # MAC chain on one accumulator at the reuse distance: both MACs count
    d = cfg.acc_reuse_distance
    b.set_reg(10, one)
    b.nops(1)
    b.op(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=10, fpu_dst=10)
    b.nops(d - 1)
    b.op(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=10, fpu_dst=10)
    b.nops(L)
    b.show(10, three)
    # one cycle closer: the second MAC reads the accumulator in the first one's write-back
    # cycle, directly from the RF (an RF `c` never goes through the bypass): the old value
    b.set_reg(10, one)
    b.nops(1)
    b.op(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=10, fpu_dst=10)
    b.nops(d - 2)
    b.op(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=10, fpu_dst=10)
    b.nops(L)
    b.show(10, two)
    # MUL and ADD idioms: c = -0 keeps the product (even -0 * x); b = ONE adds
    b.op(fpu_en=1, fpu_a=Src.NZERO, fpu_b=2, fpu_c=Src.NZERO, fpu_dst=11)
    b.op(fpu_en=1, fpu_a=1, fpu_b=Src.ONE, fpu_c=2, fpu_dst=12)
    b.nops(L)
    b.show(11, cfg.fmt.neg_zero)
    b.show(12, b.f(5.0))
    if e:
        # the late read of an RF `c` does not go through the bypass: a MOV to r7 whose
        # write lands in the cycle of the read (issued at t + mul_latency) is not seen
        b.set_reg(7, one)
        b.nops(1)
        t = b.op(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=7, fpu_dst=8)
        b.nops(t + cfg.mul_latency - b.t)
        b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=7, row=b.f(10.0))
        b.nops(L)
        b.show(8, b.f(7.0))
        # nor does an FMA result with any operand read: the move, SRAM write, FMA operand
        # and column driver of the micro-op issued at t+L-2 (operand stage in the
        # write-back cycle) read the old r3, those issued at t+L-1 r3 = 6
        b.set_reg(3, one)
        b.nops(1)
        t = b.op(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=Src.ZERO, fpu_dst=3)
        b.nops(t + L - 2 - b.t)
        six = b.f(6.0)
        for dst, wr, v in ((4, dict(wa_en=1, wa_off=3, wa_src=3), one),
                           (0, dict(wb_en=1, wb_off=3, wb_src=3), six)):
            tc = b.op(mv_op=MvOp.MOV, mv_src=3, mv_dst=dst, fpu_en=1, fpu_a=3, fpu_b=Src.ONE,
                      fpu_c=Src.ONE, fpu_dst=dst + 8, cdrv_src=3, **b.me_c, **wr) + 1
            b.expect(tc, col_out=v, col_oe=1)
        b.show(4, one)
        b.show(0, six)
        b.show(Src.MEMA, one, ra_en=1, ra_off=3)
        b.show_col(Src.MEMB, six, rb_en=1, rb_off=3)
        b.nops(L)
        b.show(12, two)                  # old r3 * 1 + 1
        b.show(8, b.f(7.0))              # new r3 * 1 + 1
    return b.build()


def _p_conflict(cfg, row, col) -> Program:
    """FMA write-back and a move to the same register in the same cycle: the FMA wins.

    The micro-op after the move reads the register in its operand stage (with the
    execute stage: through the move bypass, in the write cycle itself, which then gives
    the winner, the FMA's value)."""
    b = Builder(cfg, row, col, "conflict")
    L = cfg.fpu_latency
    e = cfg.exec_delay      # a move issued at tm writes at the end of tm+1+e
    b.set_reg(1, b.f(2.0))
    if e:
        b.set_reg(4, b.f(-3.0))      # neither written value: the bypass is read below
    b.nops(1)
    t = b.op(fpu_en=1, fpu_a=1, fpu_b=1, fpu_c=Src.NZERO, fpu_dst=4)    # r4 = 4, written end of t+L-1
    b.nops(L - 3 - e)
    tm = b.op(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=4)                # written end of t+L-1
    assert tm + 1 + e == t + L - 1
    b.expect(t + L - 1, rf_conflict=1, rf_wr=2, mv=1)
    b.show(4, b.f(4.0))          # exec: operand stage at t+L-1, the FMA's value (bypass)
    # a move one cycle later overwrites the FMA result, no conflict
    t = b.op(fpu_en=1, fpu_a=1, fpu_b=1, fpu_c=Src.NZERO, fpu_dst=4)
    b.nops(L - 2 - e)
    tm = b.op(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=4)
    assert tm + 1 + e == t + L
    b.expect(tm + 1 + e, rf_conflict=0, rf_wr=1, mv=1)
    b.show(4, b.f(1.0))          # exec: the move's value bypassed (the RF holds 4)
    # same cycle, different registers: both written
    if e:
        b.set_reg(5, b.f(-3.0))
    t = b.op(fpu_en=1, fpu_a=1, fpu_b=1, fpu_c=Src.NZERO, fpu_dst=4)
    b.nops(L - 3 - e)
    b.op(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=5)
    b.expect(t + L - 1, rf_conflict=0, rf_wr=2)
    if e:
        # operand stage in the write cycle: r5 through the move bypass, the FMA's r4 not
        tc = b.show(5, b.f(1.0), cdrv_src=4, **b.me_c)
        b.expect(tc, col_out=b.f(1.0), col_oe=1)
        b.show(4, b.f(4.0))
    else:
        b.show(4, b.f(4.0))
        b.show(5, b.f(1.0))
    # the move unit reads the winner too: ReLU and mask in the micro-op right after the
    # move (with the execute stage: the move bypass at its last point, in the write
    # cycle). The FMA's result is negative and the move's positive, so a move unit that
    # took the move's value, or its sign or class, gives 1 or -4 instead of 0. A gap of
    # one or two cycles after the move reaches the bypass's earlier points (with the
    # receive stage: the bus stage's, then the register file). The FMA's result is then
    # positive and a NaN too, so a move unit that took the wrong one of its class flags
    # (> 0, NaN) as well fails.
    fmt = cfg.fmt
    b.set_reg(6, b.f(-2.0))
    b.set_reg(2, b.f(2.0))
    b.set_reg(3, fmt.inf)
    results = ((1, 6, b.f(-4.0)), (1, 2, b.f(4.0)), (3, Src.ZERO, fmt.qnan))   # a * b + -0
    for gap in (0, 1, 2):
        for fa, fb, r4 in results:
            pos = not fmt.is_nan(r4) and not r4 & fmt.sign_mask
            relu = fmt.qnan if fmt.is_nan(r4) else (r4 if pos else 0)
            for op, src, msk, want in ((MvOp.RELU, 4, 0, relu), (MvOp.MASK, Src.ONE, 4, b.f(1.0) if pos else 0),
                                       (MvOp.MASK, 4, Src.ONE, r4)):
                t = b.op(fpu_en=1, fpu_a=fa, fpu_b=fb, fpu_c=Src.NZERO, fpu_dst=4)
                b.nops(L - 3 - e)
                tm = b.op(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=4)
                assert tm + 1 + e == t + L - 1
                b.nops(gap)
                b.op(mv_op=op, mv_src=src, mv_msk=msk, mv_dst=7)
                b.show(7, want)
                b.show(4, r4)
    return b.build()


def _p_move_chain(cfg, row, col) -> Program:
    """A move reading the result of the move just before it, or one or two micro-ops
    later (with the execute stage: each point of the move bypass), as source and as mask:
    MOV, ReLU and mask results of every class (> 0, a zero made from a value > 0, a NaN
    made quiet, a negative value kept), so a move unit that took the class of its operand
    instead of its result's, or the wrong class flag, fails."""
    b = Builder(cfg, row, col, "move_chain")
    fmt = cfg.fmt
    nan_payload = fmt.inf | 1

    def positive(x):
        return not fmt.is_nan(x) and not x & fmt.sign_mask and x != 0

    def move(op, src, msk):
        if op == MvOp.MOV:
            return src
        if op == MvOp.RELU:
            return fmt.qnan if fmt.is_nan(src) else (src if positive(src) else 0)
        return (fmt.qnan if fmt.is_nan(src) else src) if positive(msk) else 0

    b.set_reg(2, b.f(2.0))
    vals = [b.f(3.0), b.f(-3.0), nan_payload, 0]
    for op1 in (MvOp.MOV, MvOp.RELU, MvOp.MASK):
        for v in vals:
            for m in ((b.f(1.0), b.f(-1.0)) if op1 == MvOp.MASK else (0,)):
                r5 = move(op1, v, m)
                for gap in (0, 1, 2):
                    b.set_reg(4, m)
                    b.op(mv_op=op1, mv_src=Src.ROW, mv_msk=4, mv_dst=5, row=v)
                    b.nops(gap)
                    # r5 as the mask (of +2) and as the source of a ReLU and a mask by +1
                    b.op(mv_op=MvOp.MASK, mv_src=2, mv_msk=5, mv_dst=6)
                    b.op(mv_op=MvOp.RELU, mv_src=5, mv_dst=7)
                    b.op(mv_op=MvOp.MASK, mv_src=5, mv_msk=Src.ONE, mv_dst=8)
                    b.show(6, b.f(2.0) if positive(r5) else 0)
                    b.show(7, move(MvOp.RELU, r5, 0))
                    b.show(8, move(MvOp.MASK, r5, b.f(1.0)))
                    b.show(5, r5)
    return b.build()


def _p_events(cfg, row, col) -> Program:
    """Event counts: RF reads of every kind, RF writes, SRAM reads / writes, drives."""
    b = Builder(cfg, row, col, "events")
    m = cfg.mul_latency
    L = cfg.fpu_latency
    e = cfg.exec_delay
    # issue t: SRAM reads; operand stage t+1: RF reads of the sources, drives; execute
    # stage t+1+e: FMA, move, SRAM writes, RF write of the move; t+1+e+m: late read of an
    # RF c; t+L-1: FMA write-back
    for i in range(4):
        b.set_reg(i, b.f(1.0 + i))
    b.nops(max(1, e))       # the last move executed before t+1
    t = b.op(fpu_en=1, fpu_a=0, fpu_b=1, fpu_c=2, fpu_dst=3,
             mv_op=MvOp.MASK, mv_src=0, mv_msk=1, mv_dst=2,
             rdrv_src=3, **b.me_r, cdrv_src=2, **b.me_c,
             wa_en=1, wa_src=0, wb_en=1, wb_src=1, ra_en=1, rb_en=1, rb_gate=Gate.CDRV)
    b.expect(t, mem_a_rd=1, mem_b_rd=1, rf_rd=0)
    b.expect(t + 1, rf_rd=8, row_drv=1, col_drv=1)
    b.expect(t + 1 + e, fma=1, mv=1, mem_a_wr=1, mem_b_wr=1, rf_wr=1, rf_conflict=0)
    if e:   # nothing is executed in the operand stage, nothing read or driven at execute
        b.expect(t + 1, fma=0, mv=0, mem_a_wr=0, mem_b_wr=0, rf_wr=0)
        b.expect(t + 1 + e, rf_rd=0, row_drv=0, col_drv=0)
    b.expect(t + 1 + e + m, rf_rd=1, fma=0, rf_wr=0)           # the late read of c
    b.expect(t + L - 1, rf_wr=1, rf_rd=0)                     # the FMA write-back
    b.nops(L)
    # MOV / RELU read one register, MASK two; non-register sources none
    t = b.op(mv_op=MvOp.RELU, mv_src=0, mv_msk=1, mv_dst=4)
    b.expect(t + 1, rf_rd=1)
    b.expect(t + 1 + e, mv=1, rf_wr=1)
    t = b.op(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_msk=1, mv_dst=4)
    b.expect(t + 1, rf_rd=0)
    b.expect(t + 1 + e, mv=1, rf_wr=1)
    t = b.op(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ROW, fpu_c=Src.ZERO, fpu_dst=5,
             wa_en=1, wa_src=Src.ONE, rdrv_src=Src.MEMA, **b.me_r)
    b.expect(t + 1, rf_rd=0, row_drv=1)
    b.expect(t + 1 + e, fma=1, mem_a_wr=1)
    if e:
        b.expect(t + 1, fma=0, mem_a_wr=0)
        b.expect(t + 1 + e, row_drv=0)
    b.expect(t + 1 + e + m, rf_rd=0)
    b.nops(L)
    # a predicated-off micro-op counts nothing but its drives and ALL-gated reads
    if cfg.nr > 1:
        t = b.op(fpu_en=1, fpu_a=0, fpu_b=1, fpu_c=2, fpu_dst=3, mv_op=MvOp.MOV, mv_src=0,
                 mv_dst=2, wa_en=1, wa_src=0, ra_en=1, rb_en=1, rb_gate=Gate.PRED,
                 rdrv_src=1, **b.me_r, pred_mode=PredMode.ROW, pred_k=(row + 1) % cfg.nr)
        b.expect(t, mem_a_rd=1, mem_b_rd=0)
        b.expect(t + 1, rf_rd=1, row_drv=1)
        b.expect(t + 1 + e, fma=0, mv=0, mem_a_wr=0, rf_wr=0)
        if e:
            b.expect(t + 1 + e, rf_rd=0, row_drv=0)
        b.expect(t + 1 + e + m, rf_rd=0)
    return b.build()


def _p_fma_writeback(cfg, row, col) -> Program:
    """FMA write-back into SRAM (``fpu_wb``): at the micro-op's ``ra`` / ``rb`` address
    taken at issue, at the end of ``t + fpu_latency - 1`` (the cycle of an RF write-back),
    no RF write; an operand SRAM write of the same bank executed in that cycle is
    displaced (``mem_conflict``), one of the other bank is not. The write-back is seen by
    the reads issued at ``t + fpu_latency`` and later; the read issued in the write-back
    cycle gets the old word without the execute stage and the written one with it (the
    SRAM bypass takes the write landing in the read's cycle, the write-back's, not the
    operand write it displaces; an operand write landing in that cycle in the other bank
    is bypassed too)."""
    b = Builder(cfg, row, col, "fma_writeback")
    L, e = cfg.fpu_latency, cfg.exec_delay
    old, keep, one = b.f(9.0), b.f(-5.0), b.f(1.0)
    for a in (10, 11, 12):
        b.write_a(a, old)
        b.write_b(a, old)
    b.set_reg(3, keep)
    b.wait_sram()
    # A[AR0 + 10] = 2*1 + 1 (no read: the address is used without ra_en); AR0 post-increments
    # to 1, then is set to 2 before the write-back: the address is the one of the issue
    b.op(ar_op=ArOp.STRIDE, ar_idx=0, ar_imm=1)
    t = b.op(fpu_en=1, fpu_a=Src.ROW, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_dst=3,
             fpu_wb=FmaWb.MEMA, ra_off=10, ra_inc=1, rb_off=11, row=b.f(2.0))
    b.op(ar_op=ArOp.SET, ar_idx=0, ar_imm=2)
    b.expect(t + L - 1, mem_a_wr=1, mem_b_wr=0, rf_wr=0, mem_conflict=0)
    b.nops(t + L - 1 - b.t)
    # A[10] issued t+L-1, the same edge: old without the execute stage, bypassed with it
    b.show(Src.MEMA, b.f(3.0) if e else old, ra_en=1, ra_off=8)
    b.show(Src.MEMA, b.f(3.0), ra_en=1, ra_off=8)         # A[10] issued t+L
    b.show(Src.MEMA, old, ra_en=1, ra_off=9)              # A[11]
    b.show(Src.MEMA, old, ra_en=1, ra_off=10)             # A[12]
    b.show_col(Src.MEMB, old, rb_en=1, rb_off=9)          # B[11]: bank B untouched
    b.show(3, keep, ar_op=ArOp.SET, ar_idx=0, ar_imm=0)   # no RF write
    # B[10] = 3*1 + 1; operand writes of both banks executed in the write-back cycle: the
    # one into B (another address) is displaced and lost, the one into A is done
    t = b.op(fpu_en=1, fpu_a=Src.ROW, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_dst=3,
             fpu_wb=FmaWb.MEMB, rb_off=10, ra_off=12, row=b.f(3.0))
    b.nops(L - 3 - e)
    tw = b.op(wa_en=1, wa_off=11, wa_src=Src.ONE, wb_en=1, wb_off=11, wb_src=Src.ONE)
    assert tw + 1 + e == t + L - 1
    b.expect(t + L - 1, mem_conflict=1, mem_a_wr=1, mem_b_wr=1, rf_wr=0)
    if e:
        # reads issued in the write-back cycle t+L-1: the operand write landing on A[11]
        # then is bypassed, the displaced one into B[11] is not
        b.nops(t + L - 1 - b.t)
        tc = b.show(Src.MEMA, one, ra_en=1, ra_off=11, rb_en=1, rb_off=11,
                    cdrv_src=Src.MEMB, **b.me_c)
        b.expect(tc, col_out=old, col_oe=1)
    b.nops(t + L - b.t)
    b.show_col(Src.MEMB, b.f(4.0), rb_en=1, rb_off=10)
    b.show_col(Src.MEMB, old, rb_en=1, rb_off=11)         # the displaced write
    b.show(Src.MEMA, one, ra_en=1, ra_off=11)
    b.show(Src.MEMA, old, ra_en=1, ra_off=12)             # the FMA's ra address: not written
    b.show(3, keep)
    # an operand write into B one cycle before the write-back is overwritten by it, one
    # cycle after overwrites it; no conflict. The read issued at the later write's cycle:
    # with the execute stage the write landing then is bypassed to it, the operand write
    # (d = 1) or the FMA write-back (d = -1)
    for d, final in ((-1, b.f(5.0)), (1, one)):
        t = b.op(fpu_en=1, fpu_a=Src.ROW, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_dst=3,
                 fpu_wb=FmaWb.MEMB, rb_off=10, row=b.f(4.0))
        b.nops(L - 3 - e + d)
        tw = b.op(wb_en=1, wb_off=10, wb_src=Src.ONE)
        assert tw + 1 + e == t + L - 1 + d
        b.expect(t + L - 1, mem_conflict=0, mem_b_wr=1)
        b.expect(t + L - 1 + d, mem_conflict=0, mem_b_wr=1)
        if e and d < 0:
            b.nops(t + L - 1 - b.t)
            b.show_col(Src.MEMB, final, rb_en=1, rb_off=10)
        b.nops(max(t + L, tw + 2) - b.t)
        b.show_col(Src.MEMB, final, rb_en=1, rb_off=10)
    return b.build()


def _p_absent_reg(cfg, row, col) -> Program:
    """A move into a register the configuration does not have (``>= n_regs``) writes
    nothing: reads of it return +0 at every distance after the move, as an operand
    (source select, move bypass) and as the FMA's late ``c``. (With the execute stage the
    move's register-file write is made a cycle late, from a register; this checks that
    neither that register nor its bypass gives an absent register a value.) With 16
    registers there is none: the program checks a present one the same way."""
    b = Builder(cfg, row, col, "absent_reg")
    L = cfg.fpu_latency
    reg = min(cfg.n_regs, 15)
    want = 0 if cfg.n_regs < 16 else None     # a present register: the model decides
    b.set_reg(1, b.f(2.0))
    mv = dict(mv_op=MvOp.MOV, mv_src=1, mv_dst=reg)
    fma = dict(fpu_en=1, fpu_a=1, fpu_b=1, fpu_c=reg, fpu_dst=2)
    # the move d micro-ops after the FMA (d < 0: before it): every alignment of the late
    # `c` read (one cycle ahead of the adder) with the move's write and its registered copy
    for d in range(-3, L + 3):
        b.set_reg(2, b.f(-1.0))
        if d < 0:
            b.op(**mv)
            b.nops(-d - 1)
            b.op(**fma)
        elif d == 0:
            b.op(**fma, **mv)
        else:
            b.op(**fma)
            b.nops(d - 1)
            b.op(**mv)
        b.nops(L)
        b.show(2, None if want is None else b.f(4.0))
    for k in range(4):                  # as a source k micro-ops after the move
        b.set_reg(3, b.f(-1.0))
        b.op(mv_op=MvOp.MOV, mv_src=1, mv_dst=reg)
        b.nops(k)
        b.op(mv_op=MvOp.MOV, mv_src=reg, mv_dst=3)
        b.show(3, b.f(2.0) if want is None else want)    # mv_read_distance is 1
    return b.build()


DIRECTED = {
    "sources": _p_sources,
    "predicates": _p_predicates,
    "drivers": _p_drivers,
    "ar_rules": _p_ar_rules,
    "gating": _p_gating,
    "relu_mask": _p_relu_mask,
    "read_during_write": _p_rdw,
    "timing": _p_timing,
    "conflict": _p_conflict,
    "move_chain": _p_move_chain,
    "events": _p_events,
    "fma_writeback": _p_fma_writeback,
    "absent_reg": _p_absent_reg,
}


def directed_programs(cfg, row, col) -> list[Program]:
    if cfg.n_regs < 13:
        raise ValueError(f"the directed PE programs use registers r0..r12; n_regs={cfg.n_regs}")
    return [f(cfg, row, col) for f in DIRECTED.values()]


# ---------------------------------------------------------------------------------------
# random programs
# ---------------------------------------------------------------------------------------
def valid_sources(cfg, *, buses: bool = True) -> list[int]:
    """Source codes the assembler accepts (drivers: no ROW / COL)."""
    s = list(range(cfg.n_regs)) + [Src.MEMA, Src.MEMB, Src.ZERO, Src.NZERO, Src.ONE]
    if buses:
        s += [Src.ROW, Src.COL]
    return [int(x) for x in s]


def random_value(rng: random.Random, fmt) -> int:
    """A random bit pattern: mostly moderate numbers, some specials and raw patterns."""
    r = rng.random()
    if r < 0.12:
        return rng.choice([0, fmt.neg_zero, fmt.inf, fmt.sign_mask | fmt.inf, fmt.qnan,
                           fmt.inf | 1, fmt.max_finite, fmt.sign_mask | fmt.max_finite, 1,
                           fmt.sign_mask | 1, fmt.one, fmt.sign_mask | fmt.one])
    if r < 0.22:
        return rng.getrandbits(fmt.width)
    x = rng.uniform(-4.0, 4.0) * 2.0 ** rng.randint(-4, 4)
    return int(fmt.from_float(x))


def random_program(cfg, row: int, col: int, seed: int, n_cycles: int = 300,
                   window: int = 32) -> Program:
    """A seeded random valid program: preload, then ``n_cycles`` random micro-ops.

    Addresses stay mostly in a window of ``window`` words (ARs set to small values,
    small offsets and strides) so that reads hit written data.
    """
    rng = random.Random(seed)
    b = Builder(cfg, row, col, f"random[{seed}]", clear_ars=False)
    fmt = cfg.fmt
    ab = cfg.addr_bits
    srcs = valid_sources(cfg)
    dsrcs = valid_sources(cfg, buses=False)
    kmax = 1 << cfg.sel_bits
    rv = lambda: random_value(rng, fmt)  # noqa: E731

    # preload: ARs, strides, every register, a window of both banks (ROW / COL writes)
    ar0 = 0
    for i in range(cfg.n_ar):
        v = rng.randrange(window)
        ar0 = v if i == 0 else ar0
        b.op(ar_op=ArOp.SET, ar_idx=i, ar_imm=v)
        b.op(ar_op=ArOp.STRIDE, ar_idx=i, ar_imm=b.off(rng.choice([0, 1, 1, 2, 3, -1])))
    for r in range(cfg.n_regs):
        b.op(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=r, row=rv())
    for a in range(window):
        b.op(wa_en=1, wa_ar=0, wa_off=b.off(a - ar0), wa_src=Src.ROW, row=rv(),
             wb_en=1, wb_ar=0, wb_off=b.off(a - ar0), wb_src=Src.COL, col=rv())

    def k_for(coord):
        # select this PE about half the time
        return coord if rng.random() < 0.5 else rng.randrange(kmax)

    def addr_off():
        return b.off(rng.randint(-4, 12) if rng.random() < 0.9 else rng.randrange(1 << ab))

    for _ in range(n_cycles):
        f = {}
        if rng.random() < 0.4:
            mode = rng.randrange(4)
            coord = {1: col, 2: row, 3: (col - row) % cfg.nr}.get(mode, 0)
            seg = rng.choice([0, 0, 0, 1, 2])
            f.update(pred_mode=mode, pred_seg=seg, pred_k=k_for(coord % (1 << seg) if seg else coord))
            if cfg.uop_key[2] and rng.random() < 0.25:
                f["wp_en"] = 1
        if rng.random() < 0.6:
            f.update(fpu_en=1, fpu_a=rng.choice(srcs), fpu_b=rng.choice(srcs),
                     fpu_c=rng.choice(srcs), fpu_dst=rng.randrange(cfg.n_regs),
                     fpu_wb=rng.choice([0, 0, 0, 1, 2, 3]))
        if rng.random() < 0.5:
            f.update(mv_op=rng.randrange(1, 4), mv_src=rng.choice(srcs), mv_msk=rng.choice(srcs),
                     mv_dst=rng.randrange(cfg.n_regs))
        for d, coord_plain in (("rdrv", col), ("cdrv", row)):
            if rng.random() < 0.5:
                dg = rng.randrange(2)
                seg = rng.choice([0, 0, 0, 1, 2])
                coord = (col - row) % cfg.nr if dg else coord_plain
                if seg:
                    coord = coord_plain % (1 << seg)
                f.update({f"{d}_en": 1, f"{d}_diag": dg, f"{d}_seg": seg, f"{d}_k": k_for(coord),
                          f"{d}_src": rng.choice(dsrcs)})
        for p in ("ra", "rb"):
            if rng.random() < 0.6:
                f.update({f"{p}_en": 1, f"{p}_gate": rng.randrange(4)})
            if rng.random() < 0.7:
                f.update({f"{p}_ar": rng.randrange(cfg.n_ar), f"{p}_off": addr_off(),
                          f"{p}_inc": int(rng.random() < 0.25)})
        for p in ("wa", "wb"):
            if rng.random() < 0.35:
                f.update({f"{p}_en": 1, f"{p}_src": rng.choice(srcs)})
            if rng.random() < 0.5:
                f.update({f"{p}_ar": rng.randrange(cfg.n_ar), f"{p}_off": addr_off(),
                          f"{p}_inc": int(rng.random() < 0.2)})
        r = rng.random()
        if r < 0.25:
            op = rng.randrange(1, 4)
            imm = {ArOp.SET: rng.randrange(window), ArOp.STRIDE: rng.choice([0, 1, 2, 3, -1, -2]),
                   ArOp.ADD: rng.randint(-6, 6)}[op]
            f.update(ar_op=op, ar_idx=rng.randrange(cfg.n_ar), ar_imm=b.off(imm))
        b.op(row=rv(), col=rv(), **f)
    p = b.build(drain=True)
    # random external inputs in every cycle (the PE ignores them while it drives)
    for i in range(len(p.uops)):
        if p.row_ins[i] == 0:
            p.row_ins[i] = rv()
        if p.col_ins[i] == 0:
            p.col_ins[i] = rv()
    p.meta["seed"] = seed
    return p


# ---------------------------------------------------------------------------------------
# GEMV inner loop
# ---------------------------------------------------------------------------------------
def gemv_program(cfg, row: int, col: int, L: int | None = None, J: int = 16,
                 seed: int = 0) -> Program:
    """``y[i] += W[i, j] * x[j]`` for ``i < L``, ``j < J``: one MAC per cycle.

    Layout: ``W[i, j]`` at SRAM A address ``j*L + i`` (streamed with AR0 += 1), ``x[j]``
    at SRAM B address ``j`` (AR1 += 1), ``y`` in ``RF[0..L-1]``, ``x[j]`` in
    ``RF[L]``, loaded by a move in the last micro-op of block ``j-1``: the MACs of block
    ``j-1`` read the old value in their operand stage, the first MAC of block ``j`` the
    new one (with the execute stage through the bypass). ``x[0]`` is loaded by the first
    loop micro-op (``t0``), the first MAC follows it.
    ``meta``: ``golden`` (numpy, same operation order), ``fma_cycles``, ``loop_cycles``
    (first loop micro-op to the last result written), ``utilization``, ``t0``,
    ``t_fma0`` / ``t_last`` (issue of the first / last MAC). The results are driven on
    the row bus at the end (expectations).
    """
    from pe.fp_golden import mac_bits

    L = cfg.acc_reuse_distance if L is None else L
    if not cfg.acc_reuse_distance <= L <= cfg.n_regs - 1:
        raise ValueError(f"GEMV needs acc_reuse_distance <= L <= n_regs-1, got L={L}")
    if L * J > cfg.mem_a_words or J > cfg.mem_b_words:
        raise ValueError("GEMV operands do not fit in the banks")
    if cfg.n_ar < 2:
        raise ValueError("GEMV streams W and x through AR0 and AR1: needs n_ar >= 2")
    fmt = cfg.fmt
    rng = np.random.default_rng(seed)
    W = fmt.from_float(rng.uniform(-2, 2, size=(L, J)))
    x = fmt.from_float(rng.uniform(-2, 2, size=J))
    y0 = fmt.from_float(rng.uniform(-2, 2, size=L))
    golden = y0.copy()
    for j in range(J):
        golden = mac_bits(fmt, W[:, j], np.full(L, x[j], dtype=fmt.np_uint), golden)

    b = Builder(cfg, row, col, f"gemv[L={L},J={J},seed={seed}]")
    xr = L
    # preload through the buses: W into A, x into B, y into the RF
    for k in range(max(L * J, J)):
        f = {}
        if k < L * J:
            f.update(wa_en=1, wa_off=b.off(k), wa_src=Src.ROW, row=int(W[k % L, k // L]))
        if k < J:
            f.update(wb_en=1, wb_off=b.off(k), wb_src=Src.COL, col=int(x[k]))
        b.op(**f)
    for i in range(L):
        b.set_reg(i, int(y0[i]))
    b.op(ar_op=ArOp.STRIDE, ar_idx=0, ar_imm=1)
    b.op(ar_op=ArOp.STRIDE, ar_idx=1, ar_imm=1)
    # the loop
    t0 = b.op(rb_en=1, rb_ar=1, rb_inc=1, mv_op=MvOp.MOV, mv_src=Src.MEMB, mv_dst=xr)
    t_fma0 = b.t
    load_at = L - 1                        # the micro-op of block j-1 that loads x[j]
    fma = 0
    for j in range(J):
        for i in range(L):
            f = dict(fpu_en=1, fpu_a=Src.MEMA, fpu_b=xr, fpu_c=i, fpu_dst=i,
                     ra_en=1, ra_ar=0, ra_inc=1)
            if i == load_at and j < J - 1:
                f.update(rb_en=1, rb_ar=1, rb_inc=1, mv_op=MvOp.MOV, mv_src=Src.MEMB, mv_dst=xr)
            t_last = b.op(**f)
            fma += 1
    b.nops(cfg.fpu_latency - 1)
    t_done = b.t          # first cycle at which every result is readable
    for i in range(L):
        b.show(i, int(golden[i]))
    b.nops(1)
    p = b.build(drain=False)
    loop_cycles = t_done - t0
    p.meta.update(golden=golden, W=W, x=x, y0=y0, fma_cycles=fma, loop_cycles=loop_cycles,
                  utilization=fma / loop_cycles, t0=t0, t_fma0=t_fma0, t_last=t_last)
    return p


# ---------------------------------------------------------------------------------------
# architectural state dump
# ---------------------------------------------------------------------------------------
def state_dump(cfg, row: int, col: int, ars: list[int]) -> Program:
    """Drive the whole architectural state onto the buses (black-box comparison).

    ``ars``: the AR values expected now (the model's). The program 1. drives
    ``RF[0..n_regs-1]`` on the row bus; 2. reads every word of bank A onto the row bus and
    of bank B onto the column bus, word ``k`` through ``AR[k mod n_ar]`` with offset
    ``k - ars[k mod n_ar]`` (a wrong AR reads a wrong word); 3. overwrites both banks
    with the identity pattern ``mem[a] = a`` and reads through each ``AR[i]`` (showing
    its value), post-increments it and reads again (showing ``AR[i] + STRIDE[i]``).
    Expects a drained pipeline.
    """
    b = Builder(cfg, row, col, "state_dump", clear_ars=False)
    n = cfg.n_ar
    for i in range(cfg.n_regs):
        b.op(rdrv_src=i, **b.me_r)
    da, db = cfg.mem_a_words, cfg.mem_b_words
    for k in range(max(da, db)):
        i = k % n
        f = {}
        if k < da:
            f.update(ra_en=1, ra_ar=i, ra_off=b.off(k - ars[i]), rdrv_src=Src.MEMA, **b.me_r)
        if k < db:
            f.update(rb_en=1, rb_ar=i, rb_off=b.off(k - ars[i]), cdrv_src=Src.MEMB, **b.me_c)
        b.op(**f)
    for k in range(max(da, db)):
        f = {}
        if k < da:
            f.update(wa_en=1, wa_ar=0, wa_off=b.off(k - ars[0]), wa_src=Src.ROW, row=k)
        if k < db:
            f.update(wb_en=1, wb_ar=0, wb_off=b.off(k - ars[0]), wb_src=Src.COL, col=k)
        b.op(**f)
    b.wait_sram()
    for i in range(n):
        show = dict(ra_en=1, ra_ar=i, rdrv_src=Src.MEMA, **b.me_r,
                    rb_en=1, rb_ar=i, cdrv_src=Src.MEMB, **b.me_c)
        b.op(**show, ra_inc=1)
        b.op(**show)
    b.nops(1)
    return b.build(drain=False)
