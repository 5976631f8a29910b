"""A CATERPILLAR chip: ``cfg.cores`` cores on a unidirectional ring, one AXI4-Stream host
port with ``tdest`` routing.

Specified in ``docs/chip.md``; :class:`sim.chip_model.ChipModel` is the reference the RTL
tests compare against.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.host import Cmd
from arch.partition import mux_sources, pred_of_level, succ_of_level, whole_level
from rtl.core import Core

__all__ = ["Chip", "dest_bits", "broadcast_dest", "config_dest", "route_host_in", "merge_host_out"]


def dest_bits(cfg) -> int:
    """Width of ``tdest`` / ``tid``: core indices plus the broadcast code."""
    return max(1, cfg.cores.bit_length())


def broadcast_dest(cfg) -> int:
    """The ``tdest`` value that sends a beat to every core in the same cycle."""
    return (1 << dest_bits(cfg)) - 1


def config_dest(cfg) -> int:
    """The ``tdest`` value of the chip's configuration commands (``GROUP``, ``SELECT``,
    ``STOP`` of :class:`arch.host.Cmd`): ``cfg.cores``, a code no core and not the
    broadcast."""
    return cfg.cores


class Chip(wiring.Component):
    """``cfg.cores`` cores; core ``k``'s ring output feeds core ``(k + 1) mod cores``.

    Ports
    -----
    s_axis_tdata/tvalid/tready/tlast : host -> chip stream (``cfg.host_width`` bits)
    s_axis_tdest : In(dest_bits)
        Core the beat is for; :func:`broadcast_dest` (all ones) sends it to every core
        selected by the last ``SELECT`` (after reset: every core), accepted only in a
        cycle where each of them waits for a command or a microcode word
        (``cmd_ready``), so they take it in the same cycle (a broadcast ``RUN`` starts
        them together; RUN data beats go to one core each). :func:`config_dest` takes
        the chip's configuration commands (always ready, no reply): ``GROUP`` writes the
        group registers of a block of cores, ``SELECT`` the broadcast's block, ``STOP``
        resets a block's cores (``docs/chip.md``, "Partitions").
    m_axis_tdata/tvalid/tready/tlast : chip -> host stream
    m_axis_tid : Out(dest_bits)
        Core that sent the beat. The cores' output streams are merged beat by beat,
        round robin (beats of different ``tid`` interleave, as AXI4-Stream allows;
        ``tlast`` ends a core's packet). While a beat waits for ``tready`` the choice is
        held, so ``tdata`` / ``tid`` stay stable.

    Cycle behaviour
    ---------------
    Each core has a group register (:mod:`arch.partition`; reset: the whole ring): its
    ring input comes through a mux of ``len(mux_sources)`` inputs from the predecessor
    the register names, and a beat (or a credit level) crosses a link only when both
    cores hold the same register value, so a group's ring never delivers into another
    group; a mismatched successor reads as a full FIFO. Configuration registers are
    written in the cycle after their beat; a ``STOP`` holds the block's cores in reset
    for one cycle. No register on the host paths (a core's stream timing is its own, plus the wait for
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
        lmax = whole_level(n)
        level = [Signal(range(lmax + 1), init=lmax, name=f"group_level{k}") for k in range(n)]
        stop = [Signal(name=f"stop{k}") for k in range(n)]
        for k, c in enumerate(cores):
            m.submodules[f"core{k}"] = ResetInserter(stop[k])(c)
        self._ring(m, cores, level)
        sel_level = Signal(range(lmax + 1), init=lmax)
        sel_first = Signal(range(n))
        self._config(m, level, stop, sel_level, sel_first)
        cfg_hit = self.s_axis_tdest == config_dest(cfg)
        in_sel = [Signal(name=f"bcast_sel{k}") for k in range(n)]
        for k in range(n):
            m.d.comb += in_sel[k].eq((Const(k, range(n)) >> sel_level) == (sel_first >> sel_level))

        route_host_in(m, self, cores, in_sel, cfg_hit, broadcast_dest(cfg))
        merge_host_out(m, self, cores, Cat(*stop).any())
        return m

    def _ring(self, m, cores, level):
        """Core ``k``'s ring input: a mux over :func:`arch.partition.mux_sources` chosen
        by its group register; a link carries beats and credits only between cores whose
        registers are equal."""
        n = self.cfg.cores
        depth = self.cfg.ring_fifo_depth
        for k, c in enumerate(cores):
            for lv in range(whole_level(n) + 1):
                p, s = pred_of_level(k, lv, n), succ_of_level(k, lv, n)
                with m.If(level[k] == lv):
                    m.d.comb += [
                        c.ring_in_data.eq(cores[p].ring_out_data),
                        c.ring_in_en.eq(cores[p].ring_out_en & (level[p] == lv)),
                        c.ring_out_level.eq(Mux(level[s] == lv, cores[s].ring_in_level, depth)),
                    ]
            assert len({pred_of_level(k, lv, n) for lv in range(whole_level(n) + 1)}) == len(mux_sources(k, n))

    def _config(self, m, level, stop, sel_level, sel_first):
        """The configuration commands at :func:`config_dest`: ``GROUP``, ``SELECT``,
        ``STOP`` (``arg0`` a core, ``arg1`` a level; acting on the aligned block)."""
        n = self.cfg.cores
        d = self.s_axis_tdata
        cmd, arg0, arg1 = d[0:4], d[4:20], d[20:32]
        take = self.s_axis_tvalid & (self.s_axis_tdest == config_dest(self.cfg))
        for k in range(n):
            m.d.sync += stop[k].eq(0)
        with m.If(take & (arg1 <= whole_level(n))):
            for k in range(n):
                in_block = (Const(k, 16) >> arg1) == (arg0 >> arg1)
                with m.If((cmd == Cmd.GROUP) & in_block):
                    m.d.sync += level[k].eq(arg1)
                with m.If((cmd == Cmd.STOP) & in_block):
                    m.d.sync += stop[k].eq(1)
            with m.If(cmd == Cmd.SELECT):
                m.d.sync += [sel_level.eq(arg1), sel_first.eq(arg0)]


def route_host_in(m, top, cores, in_sel, extra_ready, bcast_code):
    """Host -> cores: ``top.s_axis_*`` to core ``tdest``, or to every core with
    ``in_sel[k]`` for ``tdest == bcast_code`` when each of them is ready for a command
    (``cmd_ready``); ``extra_ready``: a ``tdest`` the chip itself takes (always ready).
    A narrower core takes the low bits of ``tdata``."""
    bcast = Signal()
    all_ready = Signal()
    m.d.comb += [
        bcast.eq(top.s_axis_tdest == bcast_code),
        all_ready.eq(Cat(*(c.cmd_ready | ~in_sel[k] for k, c in enumerate(cores))).all()),
    ]
    sel_ready = Signal()
    for k, c in enumerate(cores):
        hit = top.s_axis_tdest == k
        m.d.comb += [
            c.s_axis_tdata.eq(top.s_axis_tdata),
            c.s_axis_tlast.eq(top.s_axis_tlast),
            c.s_axis_tvalid.eq(top.s_axis_tvalid & ((hit & ~bcast) | (bcast & all_ready & in_sel[k]))),
        ]
        with m.If(hit):
            m.d.comb += sel_ready.eq(c.s_axis_tready)
    m.d.comb += top.s_axis_tready.eq(((sel_ready & ~bcast) | (bcast & all_ready) | extra_ready))


def merge_host_out(m, top, cores, void):
    """Cores -> host: per-beat round robin over the cores' ``m_axis`` streams onto
    ``top.m_axis_*`` (``tid`` = core), the choice held while a beat waits for ``tready``;
    ``void``: drop a held choice (a core was stopped). A narrower core's ``tdata`` is
    zero-extended."""
    n = len(cores)
    db = len(top.m_axis_tid)
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
                top.m_axis_tdata.eq(c.m_axis_tdata),
                top.m_axis_tlast.eq(c.m_axis_tlast),
                top.m_axis_tvalid.eq(c.m_axis_tvalid),
                c.m_axis_tready.eq(top.m_axis_tready),
            ]
    m.d.comb += top.m_axis_tid.eq(sel)
    with m.If(void):
        m.d.sync += held.eq(0)
    with m.If(top.m_axis_tvalid & top.m_axis_tready):
        m.d.sync += [held.eq(0), ptr.eq(Mux(sel == n - 1, 0, sel + 1))]
    with m.Elif(top.m_axis_tvalid):
        m.d.sync += [held.eq(1), held_sel.eq(sel)]
