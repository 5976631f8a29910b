"""A broadcast bus of one PE row or column: one driver per cycle, every PE listens."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["BroadcastBus"]


class BroadcastBus(wiring.Component):
    """Resolves the value of one row or column bus from its possible drivers.

    The value is the host lane when ``host_en`` is set, else the data of the PE whose
    ``oe`` is set, else +0. The PE micro-op selects at most one driver per bus by
    construction (``rdrv``/``cdrv`` name one column/row or one diagonal offset), so PE
    contention cannot happen; the host overriding a PE driver is reported on
    ``conflict`` (the core counts it).

    Purely combinational: the bus carries the value in the same cycle (the operand stage
    of the micro-op that drives it).

    Parameters
    ----------
    width : int
        Data width (the format's width).
    n : int
        Number of PEs on the bus (``nr``).

    Ports
    -----
    data_in : In(width) x n, oe : In(1) x n
        Each PE's drive value and output enable.
    host_data : In(width), host_en : In(1)
        Host stream lane driving the bus.
    value : Out(width)
        Resolved bus value, fanned out to every PE on the bus.
    busy : Out(1)
        A transfer happens this cycle (some driver is active).
    conflict : Out(1)
        Host and a PE drove the bus in the same cycle (host wins).
    """

    def __init__(self, width: int, n: int):
        self.width = width
        self.n = n
        members = {}
        for i in range(n):
            members[f"data_in{i}"] = In(width)
            members[f"oe{i}"] = In(1)
        members.update(host_data=In(width), host_en=In(1), value=Out(width), busy=Out(1), conflict=Out(1))
        super().__init__(members)

    def drivers(self):
        """List of (data, oe) port pairs, one per PE on the bus."""
        return [(getattr(self, f"data_in{i}"), getattr(self, f"oe{i}")) for i in range(self.n)]

    def elaborate(self, platform):
        m = Module()
        pe_val = Signal(self.width)
        pe_any = Signal()
        # one-hot by construction: an AND-OR mux is cheapest
        acc = 0
        for data, oe in self.drivers():
            acc = acc | Mux(oe, data, 0)
        m.d.comb += [
            pe_val.eq(acc),
            pe_any.eq(Cat(*(oe for _, oe in self.drivers())).any()),
            self.value.eq(Mux(self.host_en, self.host_data, pe_val)),
            self.busy.eq(self.host_en | pe_any),
            self.conflict.eq(self.host_en & pe_any),
        ]
        return m
