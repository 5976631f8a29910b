"""A CATERPILLAR chip: ``cfg.cores`` cores on a unidirectional ring, one AXI4-Stream host
port with ``tdest`` routing.

Specified in ``docs/chip.md``; :class:`sim.chip_model.ChipModel` is the reference the RTL
tests compare against.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.core import Core

__all__ = ["Chip", "dest_bits", "broadcast_dest"]


def dest_bits(cfg) -> int:
    """Width of ``tdest`` / ``tid``: core indices plus the broadcast code."""
    return max(1, cfg.cores.bit_length())


def broadcast_dest(cfg) -> int:
    """The ``tdest`` value that sends a beat to every core in the same cycle."""
    return (1 << dest_bits(cfg)) - 1


class Chip(wiring.Component):
    """``cfg.cores`` cores; core ``k``'s ring output feeds core ``(k + 1) mod cores``.

    Ports
    -----
    s_axis_tdata/tvalid/tready/tlast : host -> chip stream (``cfg.host_width`` bits)
    s_axis_tdest : In(dest_bits)
        Core the beat is for; :func:`broadcast_dest` (all ones) sends it to every core,
        accepted only in a cycle where every core waits for a command or a microcode
        word (``cmd_ready``), so all cores take it in the same cycle (a broadcast
        ``RUN`` starts them together; RUN data beats go to one core each).
    m_axis_tdata/tvalid/tready/tlast : chip -> host stream
    m_axis_tid : Out(dest_bits)
        Core that sent the beat. The cores' output streams are merged beat by beat,
        round robin (beats of different ``tid`` interleave, as AXI4-Stream allows;
        ``tlast`` ends a core's packet). While a beat waits for ``tready`` the choice is
        held, so ``tdata`` / ``tid`` stay stable.

    Cycle behaviour
    ---------------
    No register on the host paths (a core's stream timing is its own, plus the wait for
    its turn on ``m_axis``). A ring link is one cycle: a ``rout`` pushes into the next
    core's receive FIFO in its operand stage (issue + 2) and a ``rin`` there can issue one
    cycle later (``docs/chip.md``).
    """

    def __init__(self, cfg):
        if cfg.cores < 2:
            raise ValueError(f"a chip needs cfg.cores >= 2 (a ring), got {cfg.cores}; use rtl.core.Core for one core")
        self.cfg = cfg
        hw = cfg.host_width
        db = dest_bits(cfg)
        super().__init__({
            "s_axis_tdata": In(hw), "s_axis_tvalid": In(1), "s_axis_tready": Out(1), "s_axis_tlast": In(1),
            "s_axis_tdest": In(db),
            "m_axis_tdata": Out(hw), "m_axis_tvalid": Out(1), "m_axis_tready": In(1), "m_axis_tlast": Out(1),
            "m_axis_tid": Out(db),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        n = cfg.cores
        cores = [Core(cfg) for _ in range(n)]
        for k, c in enumerate(cores):
            m.submodules[f"core{k}"] = c

        # --- the ring -------------------------------------------------------------------
        for k, c in enumerate(cores):
            nxt = cores[(k + 1) % n]
            m.d.comb += [
                nxt.ring_in_data.eq(c.ring_out_data),
                nxt.ring_in_en.eq(c.ring_out_en),
                c.ring_out_level.eq(nxt.ring_in_level),
            ]

        # --- host -> cores: tdest routing, broadcast when every core is ready -------------
        bcast = Signal()
        all_ready = Signal()
        m.d.comb += [
            bcast.eq(self.s_axis_tdest == broadcast_dest(cfg)),
            all_ready.eq(Cat(*(c.cmd_ready for c in cores)).all()),
        ]
        sel_ready = Signal()
        for k, c in enumerate(cores):
            hit = self.s_axis_tdest == k
            m.d.comb += [
                c.s_axis_tdata.eq(self.s_axis_tdata),
                c.s_axis_tlast.eq(self.s_axis_tlast),
                c.s_axis_tvalid.eq(self.s_axis_tvalid & ((hit & ~bcast) | (bcast & all_ready))),
            ]
            with m.If(hit):
                m.d.comb += sel_ready.eq(c.s_axis_tready)
        m.d.comb += self.s_axis_tready.eq(((sel_ready & ~bcast) | (bcast & all_ready)))

        # --- cores -> host: per-beat round robin, held while waiting -------------------------
        db = dest_bits(cfg)
        ptr = Signal(db)          # first core to consider
        held = Signal()           # a beat is offered and not taken: keep the choice
        held_sel = Signal(db)
        pick = Signal(db)
        # rotated priority: the first valid core at or after ptr (scan written backwards so
        # the last assignment, the nearest one, wins)
        for off in reversed(range(n)):
            for p in range(n):
                k = (p + off) % n
                with m.If((ptr == p) & cores[k].m_axis_tvalid):
                    m.d.comb += pick.eq(k)
        sel = Signal(db)
        m.d.comb += sel.eq(pick)
        with m.If(held):
            m.d.comb += sel.eq(held_sel)
        for k, c in enumerate(cores):
            with m.If(sel == k):
                m.d.comb += [
                    self.m_axis_tdata.eq(c.m_axis_tdata),
                    self.m_axis_tlast.eq(c.m_axis_tlast),
                    self.m_axis_tvalid.eq(c.m_axis_tvalid),
                    c.m_axis_tready.eq(self.m_axis_tready),
                ]
        m.d.comb += self.m_axis_tid.eq(sel)
        with m.If(self.m_axis_tvalid & self.m_axis_tready):
            m.d.sync += [held.eq(0), ptr.eq(Mux(sel == n - 1, 0, sel + 1))]
        with m.Elif(self.m_axis_tvalid):
            m.d.sync += [held.eq(1), held_sel.eq(sel)]
        return m
