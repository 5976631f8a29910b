"""Test wrapper: one PE whose buses resolve like a 1x1 core.

``row_in = row_out if row_oe else ext_row_in`` (same for the column bus), which is what
:meth:`pe.pe_model.PEModel.run` does. With ``cfg.bus_stage`` the bus carries the value a
cycle later (the external value is registered to match) and the outputs are the
operand-stage ``row_op`` / ``ev.row_drv``, the model's timing. The PE keeps its real coordinates ``(row, col)``
in an ``nr x nr`` configuration, so predicates and driver selection behave as at that
position of a core.

With ``cfg.dist_stage`` the PE is built the way a core with the distribution stage
builds it (``issue_in``): the micro-op reaches it through a register, beside the
register of its issue decode. Everything then happens one cycle later than the micro-op
word is written (``PETop.lag``): the external bus values are delayed to match, and the
testbench compares the outputs a cycle later.

With ``cfg.rx_stage`` the bus's class bits (``row_in_cls`` / ``col_in_cls``) resolve
like the data: the PE's own ``row_out_cls`` when it drives, else the classes of the
external value.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.fp_common import class_bits
from pe.layouts import EVENT_LAYOUT, uop_layout
from pe.pe import PE, issue_decode, issue_layout, issue_nop

__all__ = ["PETop", "obs_fields"]


def obs_fields(cfg):
    """``(name, offset, width)`` of the packed ``obs`` output."""
    w = cfg.fmt.width
    return (("row_out", 0, w), ("row_oe", w, 1), ("col_out", w + 1, w), ("col_oe", 2 * w + 1, 1),
            ("ev", 2 * w + 2, EVENT_LAYOUT.size), ("bus_err", 2 * w + 2 + EVENT_LAYOUT.size, 1))


class PETop(wiring.Component):
    """A lone PE for the cocotb tests.

    Attributes
    ----------
    uop : In(uop_layout size)
        The micro-op word as a plain integer (one write per cycle).
    ext_row_in, ext_col_in : In(fmt.width)
        Bus values used when the PE does not drive the bus itself.
    row_out, row_oe, col_out, col_oe, ev : Out
        The PE's outputs (``ev`` as a plain integer in ``EVENT_LAYOUT`` bit order).
    obs : Out
        All outputs packed into one integer (one read per cycle), see :func:`obs_fields`;
        its ``bus_err`` bit (always 0 when correct) says that, with ``cfg.bus_stage``,
        what the PE puts on a bus (``row_out`` / ``row_oe``, column alike) differs from
        its operand-stage drive of the cycle before (``row_op`` / ``ev.row_drv``), or,
        with ``cfg.rx_stage``, that the class bits it drives (``row_out_cls`` /
        ``col_out_cls``) are not :func:`~pe.fp_common.class_bits` of its drive.
    """

    def __init__(self, cfg, row: int, col: int):
        self.cfg, self.row, self.col = cfg, row, col
        #: cycles from writing a micro-op word to its issue (1 with ``cfg.dist_stage``)
        self.lag = int(cfg.dist_stage)
        w = cfg.fmt.width
        self._uop_layout = uop_layout(*cfg.uop_key)
        super().__init__({
            "uop": In(self._uop_layout.size),
            "ext_row_in": In(w),
            "ext_col_in": In(w),
            "row_out": Out(w),
            "row_oe": Out(1),
            "col_out": Out(w),
            "col_oe": Out(1),
            "ev": Out(EVENT_LAYOUT.size),
            "obs": Out(2 * w + 3 + EVENT_LAYOUT.size),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.pe = pe = PE(cfg, self.row, self.col, issue_in=bool(self.lag))
        ext_row, ext_col = self.ext_row_in, self.ext_col_in
        if self.lag:
            # as in a core with the distribution stage: the distribution register and the
            # issue decode beside it, loaded in every cycle
            u_next = Signal(self._uop_layout, name="uop_next")
            u_reg = Signal(self._uop_layout, name="uop_dist")
            wp = cfg.uop_key[2]
            issue = Signal(issue_layout(wp), name="issue_dist", init=issue_nop(wp))
            m.d.comb += u_next.as_value().eq(self.uop)
            m.d.sync += [u_reg.eq(u_next), issue.eq(issue_decode(m, cfg, self.row, self.col, u_next))]
            m.d.comb += pe.issue.eq(issue)
            uop = u_reg.as_value()
            ext_row, ext_col = Signal.like(ext_row), Signal.like(ext_col)
            m.d.sync += [ext_row.eq(self.ext_row_in), ext_col.eq(self.ext_col_in)]
        else:
            uop = self.uop
        if cfg.bus_stage:
            # the bus carries a value one cycle after the driver's operand stage: so do the
            # external values (given in operand-stage timing, as the model takes them)
            ext_in = (ext_row, ext_col)
            ext_row, ext_col = Signal.like(ext_row), Signal.like(ext_col)
            m.d.sync += [ext_row.eq(ext_in[0]), ext_col.eq(ext_in[1])]
            # outputs in operand-stage timing, as the model gives them
            row_out, row_oe, col_out, col_oe = pe.row_op, pe.ev.row_drv, pe.col_op, pe.ev.col_drv
            # the bus side checked against it: the drive of the cycle before
            prev = Signal(2 * cfg.fmt.width + 2)
            m.d.sync += prev.eq(Cat(pe.row_op, pe.ev.row_drv, pe.col_op, pe.ev.col_drv))
            bus_err = prev != Cat(pe.row_out, pe.row_oe, pe.col_out, pe.col_oe)
        else:
            row_out, row_oe, col_out, col_oe = pe.row_out, pe.row_oe, pe.col_out, pe.col_oe
            bus_err = 0
        if cfg.rx_stage:
            fmt = cfg.fmt
            m.d.comb += [pe.row_in_cls.eq(Mux(pe.row_oe, pe.row_out_cls, class_bits(fmt, ext_row))),
                         pe.col_in_cls.eq(Mux(pe.col_oe, pe.col_out_cls, class_bits(fmt, ext_col)))]
            bus_err = bus_err | (pe.row_out_cls != class_bits(fmt, pe.row_out)) \
                | (pe.col_out_cls != class_bits(fmt, pe.col_out))
        m.d.comb += [
            pe.uop.as_value().eq(uop),
            pe.row_in.eq(Mux(pe.row_oe, pe.row_out, ext_row)),
            pe.col_in.eq(Mux(pe.col_oe, pe.col_out, ext_col)),
            self.row_out.eq(row_out),
            self.row_oe.eq(row_oe),
            self.col_out.eq(col_out),
            self.col_oe.eq(col_oe),
            self.ev.eq(pe.ev.as_value()),
            self.obs.eq(Cat(row_out, row_oe, col_out, col_oe, pe.ev.as_value(), bus_err)),
        ]
        return m
