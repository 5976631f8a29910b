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
from rtl.streams import host_stream
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
    s_axis : In(:func:`rtl.streams.host_stream` (``hcfg.host_width``, ``dest=dest_bits``))
        Host -> chip stream, ``hcfg.host_width`` bits (the widest kind's); a core of a
        narrower kind takes the low ``host_width`` bits of its kind (the host writes its
        beats there, the upper bits are ignored). ``payload.dest`` (``tdest``): the core
        the beat is for; :func:`rtl.chip.broadcast_dest` (all ones) sends it to every
        core, accepted only in a cycle where each core waits for a command or a microcode
        word (``cmd_ready``), so a broadcast ``RUN`` starts every core in the same cycle.
        Microcode is loaded core by core (the kinds' words differ).
    m_axis : Out(:func:`rtl.streams.host_stream` (``hcfg.host_width``, ``id=dest_bits``))
        Chip -> host stream; a narrower core's beats zero-extended; ``payload.id``
        (``tid``) the core that sent the beat (round robin per beat, held while waiting,
        as :class:`rtl.chip.Chip`).

    The ring links are joined with ``wiring.connect``: core to core, or core to
    crossing to core. As a Verilog top level (:class:`rtl.streams.AxisTop`) the ports
    have the AXI4-Stream names of :class:`rtl.chip.Chip`'s.

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
        super().__init__({"s_axis": In(host_stream(hw, dest=db)), "m_axis": Out(host_stream(hw, id=db))})

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
                wiring.connect(m, c.ring_out, nxt.ring_in)
                continue
            xc = RingCrossing(x)
            m.submodules[f"crossing{k}"] = xc
            wiring.connect(m, c.ring_out, xc.ring_in)
            wiring.connect(m, xc.ring_out, nxt.ring_in)
        everyone = [Const(1) for _ in range(n)]
        route_host_in(m, self, cores, everyone, Const(0), broadcast_dest(h))
        merge_host_out(m, self, cores, Const(0))
        return m
