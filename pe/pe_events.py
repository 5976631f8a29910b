"""The PE's event strobes (:class:`EventStrobes`; ``docs/architecture.md``, "Events")."""

from __future__ import annotations

from functools import reduce

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.layouts import EVENT_LAYOUT

__all__ = ["EventStrobes", "RF_READ_POINTS"]

#: Register-file read points counted by ``ev.rf_rd``: the FMA's ``a`` and ``b``, the late
#: ``c`` read, the move's source and mask, the row and column drivers' sources and the
#: ``wa`` / ``wb`` writes' sources.
RF_READ_POINTS = 9


class EventStrobes(wiring.Component):
    """This cycle's event strobes (``ev``), from the strobes of the PE's units.

    Attributes
    ----------
    fma, mv : In(1)
        An FMA / a move executes (execute stage).
    mem_a_rd, mem_b_rd : In(1)
        An SRAM read of bank A / B is issued.
    wa_go, wb_go : In(1)
        An operand write into bank A / B (execute stage).
    wbk_a, wbk_b : In(1)
        The FMA write-back writes bank A / B.
    rf_wbk : In(1)
        The FMA write-back writes the register file.
    rf_reads : In(RF_READ_POINTS)
        One bit per register-file read point that reads a register this cycle
        (:data:`RF_READ_POINTS`).
    row_drv, col_drv, rf_conflict : In(1)
        The PE drives its row / column bus; the FMA write-back overrides a move.
    ev : Out(EVENT_LAYOUT)
        The strobes: ``mem_*_wr`` an operand write or a write-back into the bank,
        ``mem_conflict`` both in one bank, ``rf_rd`` the number of ``rf_reads`` set,
        ``rf_wr`` the number of register-file writes; the rest as their inputs.

    Notes
    -----
    Combinational (no latency, no state).
    """

    def __init__(self):
        super().__init__({
            **{nm: In(1) for nm in ("fma", "mv", "mem_a_rd", "mem_b_rd", "wa_go", "wb_go", "wbk_a", "wbk_b",
                                    "rf_wbk")},
            "rf_reads": In(RF_READ_POINTS),
            **{nm: In(1) for nm in ("row_drv", "col_drv", "rf_conflict")},
            "ev": Out(EVENT_LAYOUT),
        })

    def elaborate(self, platform):
        m = Module()
        ev = self.ev
        rf_reads = [self.rf_reads[i] for i in range(RF_READ_POINTS)]
        m.d.comb += [
            ev.fma.eq(self.fma),
            ev.mv.eq(self.mv),
            ev.mem_a_rd.eq(self.mem_a_rd),
            ev.mem_b_rd.eq(self.mem_b_rd),
            ev.mem_a_wr.eq(self.wa_go | self.wbk_a),
            ev.mem_b_wr.eq(self.wb_go | self.wbk_b),
            ev.mem_conflict.eq((self.wa_go & self.wbk_a) | (self.wb_go & self.wbk_b)),
            ev.rf_rd.eq(reduce(lambda x, y: x + y, [r.as_unsigned() for r in rf_reads])),
            ev.rf_wr.eq(self.mv.as_unsigned() + self.rf_wbk.as_unsigned()),
            ev.row_drv.eq(self.row_drv),
            ev.col_drv.eq(self.col_drv),
            ev.rf_conflict.eq(self.rf_conflict),
        ]
        return m
