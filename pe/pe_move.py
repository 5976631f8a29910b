"""The PE's move unit (MOV / RELU / MASK into the register file): its datapath, the
component :class:`MoveFn`, and its operands (:func:`move_unit`), in the execute stage or,
with the receive stage, computed in the receive stage into a register
(``docs/architecture.md``, "The PE micro-operation", "The receive stage")."""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.microop import MvOp
from pe.fp_common import CLS_NAN, CLS_POS, is_nan, is_positive

__all__ = ["MoveFn", "move_unit"]


class MoveFn(wiring.Component):
    """The move unit's datapath (combinational): the result of ``op`` on ``src`` / ``msk``.

    ``MOV``: ``src``; ``RELU``: ``src`` if ``src`` > 0, a quiet NaN if it is a NaN, else +0;
    ``MASK``: ``src`` if ``msk`` > 0 (a quiet NaN for a NaN ``src``), else +0; ``NOP``: +0.

    Parameters
    ----------
    fmt : pe.fp_common format
        The word format.
    classes : bool
        The operands' classes come from outside (``src_pos`` / ``src_nan`` /
        ``msk_pos``); the result is then an AND-OR of ``src`` and a quiet NaN under two
        flags (``mv_keep`` / ``mv_qnan``, kept by synthesis), with no test of ``src`` or
        ``msk`` here.

    Attributes
    ----------
    op : In(2)
        The :class:`~arch.microop.MvOp`.
    src, msk : In(fmt.width)
        The operands.
    src_pos, src_nan, msk_pos : In(1)
        Only with ``classes``: ``src`` > 0, ``src`` is a NaN, ``msk`` > 0.
    out : Out(fmt.width)
        The result, in the same cycle.
    """

    def __init__(self, fmt, *, classes=False):
        self.fmt, self.classes = fmt, classes
        w = fmt.width
        super().__init__({"op": In(2), "src": In(w), "msk": In(w), "out": Out(w),
                          **({"src_pos": In(1), "src_nan": In(1), "msk_pos": In(1)} if classes else {})})

    def elaborate(self, platform):
        m = Module()
        fmt, op, src, msk, out = self.fmt, self.op, self.src, self.msk, self.out
        if self.classes:
            # from the classes: keep the source, or make a quiet NaN (two flags, then
            # one LUT per bit with the source's bit)
            src_pos, src_nan, msk_pos = self.src_pos, self.src_nan, self.msk_pos
            is_mov, is_relu, is_mask = op == MvOp.MOV, op == MvOp.RELU, op == MvOp.MASK
            keep, qnan = Signal(name="mv_keep", attrs={"keep": 1}), Signal(name="mv_qnan", attrs={"keep": 1})
            m.d.comb += [keep.eq(is_mov | (is_relu & src_pos) | (is_mask & msk_pos & ~src_nan)),
                         qnan.eq((is_relu | (is_mask & msk_pos)) & src_nan)]
            m.d.comb += out.eq(Mux(keep, src, 0) | Mux(qnan, fmt.qnan, 0))
            return m
        src_pos, src_nan, msk_pos = is_positive(fmt, src), is_nan(fmt, src), is_positive(fmt, msk)
        with m.Switch(op):
            with m.Case(MvOp.MOV):
                m.d.comb += out.eq(src)
            with m.Case(MvOp.RELU):
                m.d.comb += out.eq(Mux(src_pos, src, Mux(src_nan, fmt.qnan, 0)))
            with m.Case(MvOp.MASK):
                m.d.comb += out.eq(Mux(msk_pos, Mux(src_nan, fmt.qnan, src), 0))
        return m


def _move_fn(m, fmt, op, src, msk, out, classes=None):
    """The :class:`MoveFn` (submodule ``mv``) of ``op`` on ``src`` / ``msk`` driving
    ``out``; ``classes``: ``(positive(src), nan_of(src), positive(msk))`` if computed
    apart."""
    m.submodules.mv = mv = MoveFn(fmt, classes=classes is not None)
    m.d.comb += [mv.op.eq(op), mv.src.eq(src), mv.msk.eq(msk), out.eq(mv.out)]
    if classes is not None:
        m.d.comb += [mv.src_pos.eq(classes[0]), mv.src_nan.eq(classes[1]), mv.msk_pos.eq(classes[2])]


def move_unit(m, cfg, pe, ops, byp):
    """Build the move unit, driving ``byp.mv_val``.

    Without the receive stage ``mv_val`` is combinational in the execute stage (the
    operand stage without ``cfg.exec_stage``), from the execute-stage operands
    ``mv_src`` / ``mv_msk`` (:meth:`pe.pe_operands.Operands.xsrc`); with it see
    :func:`_move_unit_rx`.

    Returns
    -------
    (mv_go, mv_dst)
        The move's enable and destination register in its execute stage.
    """
    s1 = ops.st.s1
    mv_go = ops.mv_go_st[-1] if cfg.exec_delay else byp.mv_rd
    mv_dst = ops.mv_dst_st[-1] if cfg.exec_delay else s1.mv.dst
    if cfg.rx_stage:
        _move_unit_rx(m, cfg, pe, ops, byp)
    else:
        _move_fn(m, cfg.fmt, ops.ex(s1.mv.op, "mv_op"), ops.xsrc(lambda x: x.mv.src, name="mv_src"),
                ops.xsrc(lambda x: x.mv.msk, name="mv_msk"), byp.mv_val)
    return mv_go, mv_dst


def _move_unit_rx(m, cfg, pe, ops, byp):
    """The move unit with the receive stage: it works in the receive stage, on the values
    its execute-stage registers would load, and its result is registered into
    ``mv_val`` (and its private copy ``mv_val_loop``), so in the execute stage ``mv_val``
    (the move bypass's value at all three points, the register-file write, the early
    ``c`` read) comes from flip-flops instead of the move unit's logic. Same value in the
    same cycle.

    FPGA timing: the move unit's operands take the bypass of the receive stage's point
    (the move issued just before) from a private copy of the bypass select, so the move
    unit's loop (mv_val -> the bypass -> the operand -> the move -> mv_val) does not run
    through the shared bypass net, which reaches every operand's bypass points across the
    PE (docs/fpga.md, "Timing"). Same value: the copy's select register loads what
    byp_fma loads (the build keeps the PE's flip-flops apart, rtl.fpga.keep_pe_ffs). The
    loop's other registers are private copies too: of the receive registers (mv_rx_row /
    mv_rx_col), the adder's output register (mv_fma_out, loading the adder's o_next) and
    mv_val itself (mv_val_loop). Each original drives operands, bypass points and
    register-file banks across the PE, and its long route to the move unit would set the
    clock. The copies load the same values, so the move unit sees the same operands in
    the same cycles.

    The move unit's operand classes (> 0, NaN) come from flip-flops loaded beside each
    value the operand is selected from, with that value's class: the bus-stage value
    (r_*), the receive registers (the buses' values as they arrive), the adder's output
    copy (FPAdd's o_next class) and the move unit's own result (its class from the
    operands' classes and the op). At most one of the values ORed into an operand is
    nonzero (the source reads one of them), so the operand's class is the same select of
    their classes, and no 16-bit reduction (8 connections deep) follows the select. The
    buses' classes come with them (row_in_cls / col_in_cls, from the drivers), so these
    flip-flops load a bus bit each.
    """
    w, fmt = cfg.fmt.width, cfg.fmt
    nan_of, positive = partial(is_nan, fmt), partial(is_positive, fmt)
    byp_fma_mv = Signal(name="byp_fma_mv")
    m.d.sync += byp_fma_mv.eq(byp.byp_fma_next)
    mv_fma_out = Signal(w, name="mv_fma_out")
    mv_val_loop = Signal(w, name="mv_val_loop")
    mv_buses = {"row": Signal(w, name="mv_rx_row"), "col": Signal(w, name="mv_rx_col")}
    m.d.sync += [mv_fma_out.eq(byp.fma_out_next), mv_buses["row"].eq(pe.row_in),
                 mv_buses["col"].eq(pe.col_in)]
    byp_mv = Signal(w, name="byp_mv")
    m.d.comb += byp_mv.eq(Mux(byp_fma_mv, mv_fma_out, mv_val_loop))
    mv_fn = Signal(w, name="mv_fn")
    fns = {"pos": positive, "nan": nan_of}
    bit = {"pos": CLS_POS, "nan": CLS_NAN}
    cls = {}
    for k in fns:
        for src_nm, val in (("row", pe.row_in_cls), ("col", pe.col_in_cls), ("fma", None), ("loop", None)):
            cls[src_nm, k] = Signal(name=f"mv_{src_nm}_{k}")
            if val is not None:
                m.d.sync += cls[src_nm, k].eq(val[bit[k]])
        m.d.sync += cls["fma", k].eq(byp.fma_next_pos if k == "pos" else byp.fma_next_nan)
    # the class of the shared bypass value byp_val (the bus stage's point)
    byp_cls = {k: Mux(byp.byp_fma, cls["fma", k], cls["loop", k]) for k in fns}
    src_p = {"fns": fns, "byp_cls": byp_cls}
    msk_p = {"fns": {"pos": positive}, "byp_cls": byp_cls}
    src_x = ops.xsrc(lambda x: x.mv.src, name="mv_src", pre=True, byp_rx=byp_mv, buses=mv_buses, parts=src_p)
    msk_x = ops.xsrc(lambda x: x.mv.msk, name="mv_msk", pre=True, byp_rx=byp_mv, buses=mv_buses, parts=msk_p)

    def cls_of(parts, k, name):
        c = Signal(name=f"{name}_{k}", attrs={"keep": 1})
        byp_c = Mux(byp_fma_mv, cls["fma", k], cls["loop", k])
        m.d.comb += c.eq(Mux(parts["hit_rx"], byp_c, parts["r_cls"][k])
                         | (parts["row"] & cls["row", k]) | (parts["col"] & cls["col", k]))
        return c
    classes = (cls_of(src_p, "pos", "mv_src"), cls_of(src_p, "nan", "mv_src"), cls_of(msk_p, "pos", "mv_msk"))
    mv_op = ops.pipe(ops.st.s1.mv.op, "mv_op")[-2]
    _move_fn(m, fmt, mv_op, src_x, msk_x, mv_fn, classes=classes)
    # the result's class: MOV and RELU keep the source's (a RELU of a NaN is a
    # NaN, of anything else not > 0 a zero), MASK the source's under a mask > 0
    res_on = Signal(name="mv_res_on")
    m.d.comb += res_on.eq((mv_op == MvOp.MOV) | (mv_op == MvOp.RELU) | ((mv_op == MvOp.MASK) & classes[2]))
    m.d.sync += [cls["loop", "pos"].eq(res_on & classes[0]), cls["loop", "nan"].eq(res_on & classes[1])]
    m.d.sync += [byp.mv_val.eq(mv_fn), mv_val_loop.eq(mv_fn)]
