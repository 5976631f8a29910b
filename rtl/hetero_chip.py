"""A heterogeneous chip: groups of cores of different kinds on one ring
(:class:`arch.hetero.HeteroConfig`), one AXI4-Stream host port with ``tdest`` routing.

Specified in ``docs/chip.md``, "Heterogeneous chips"; :class:`sim.chip_model.ChipModel`
(given the same :class:`~arch.hetero.HeteroConfig`) is the reference the RTL tests
compare against.
"""

from __future__ import annotations

from amaranth import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.chip import broadcast_dest, dest_bits, merge_host_out, route_host_in
from rtl.core import Core
from rtl.ring_crossing import RingCrossing

__all__ = ["HeteroChip"]


class HeteroChip(wiring.Component):
    """One :class:`rtl.core.Core` per core, built with its group's configuration; core
    ``k``'s ring output feeds core ``(k + 1) mod cores``, through a
    :class:`rtl.ring_crossing.RingCrossing` where the two kinds differ in ``nr`` or
    ``fmt``.

    Parameters
    ----------
    hcfg : arch.hetero.HeteroConfig

    Ports
    -----
    s_axis_tdata/tvalid/tready/tlast : host -> chip stream (``hcfg.host_width`` bits, the
        widest kind's); a core of a narrower kind takes the low ``host_width`` bits of
        its kind (the host writes its beats there, the upper bits are ignored)
    s_axis_tdest : In(dest_bits)
        Core the beat is for; :func:`rtl.chip.broadcast_dest` (all ones) sends it to
        every core, accepted only in a cycle where each core waits for a command or a
        microcode word (``cmd_ready``), so a broadcast ``RUN`` starts every core in the
        same cycle. Microcode is loaded core by core (the kinds' words differ).
    m_axis_tdata/tvalid/tready/tlast : chip -> host stream; a narrower core's beats
        zero-extended
    m_axis_tid : Out(dest_bits)
        Core that sent the beat (round robin per beat, held while waiting, as
        :class:`rtl.chip.Chip`).

    Cycle behaviour
    ---------------
    As :class:`rtl.chip.Chip` without partitions (no configuration commands): a plain
    link is one cycle (a ``rout`` issued in ``t`` can be taken by a ``rin`` in
    ``t + 3``); a crossing adds a cycle and, where the widths differ, collects or
    splits beats (:class:`~rtl.ring_crossing.RingCrossing`).
    """

    def __init__(self, hcfg):
        self.hcfg = hcfg
        hw = hcfg.host_width
        db = dest_bits(hcfg)
        super().__init__({
            "s_axis_tdata": In(hw), "s_axis_tvalid": In(1), "s_axis_tready": Out(1), "s_axis_tlast": In(1),
            "s_axis_tdest": In(db),
            "m_axis_tdata": Out(hw), "m_axis_tvalid": Out(1), "m_axis_tready": In(1), "m_axis_tlast": Out(1),
            "m_axis_tid": Out(db),
        })

    def elaborate(self, platform):
        m = Module()
        h = self.hcfg
        n = h.cores
        cores = [Core(h.core_cfg(k)) for k in range(n)]
        for k, c in enumerate(cores):
            m.submodules[f"core{k}"] = c
        for k, c in enumerate(cores):
            nxt = cores[(k + 1) % n]
            x = h.crossing(k)
            if x is None:
                m.d.comb += [
                    nxt.ring_in_data.eq(c.ring_out_data),
                    nxt.ring_in_en.eq(c.ring_out_en),
                    c.ring_out_level.eq(nxt.ring_in_level),
                ]
                continue
            xc = RingCrossing(x)
            m.submodules[f"crossing{k}"] = xc
            m.d.comb += [
                xc.in_data.eq(c.ring_out_data), xc.in_en.eq(c.ring_out_en), c.ring_out_level.eq(xc.in_level),
                nxt.ring_in_data.eq(xc.out_data), nxt.ring_in_en.eq(xc.out_en), xc.out_level.eq(nxt.ring_in_level),
            ]
        everyone = [Const(1) for _ in range(n)]
        route_host_in(m, self, cores, everyone, Const(0), broadcast_dest(h))
        merge_host_out(m, self, cores, Const(0))
        return m
