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
from rtl.dma import AxiMaster, axi_port
from rtl.streams import host_stream

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
    s_axis : In(:func:`rtl.streams.host_stream` (``cfg.host_width``, ``dest=dest_bits``))
        Host -> chip stream (AXI4-Stream ``tdata`` / ``tlast`` / ``tdest`` are
        ``payload.data`` / ``.last`` / ``.dest``). ``dest``: the core the beat is for;
        :func:`broadcast_dest` (all ones) sends it to every core selected by the last
        ``SELECT`` (after reset: every core), accepted only in a cycle where each of them
        waits for a command or a microcode word (``cmd_ready``), so they take it in the
        same cycle (a broadcast ``RUN`` starts them together; RUN data beats go to one
        core each). :func:`config_dest` takes the chip's configuration commands (always
        ready, no reply): ``GROUP`` writes the group registers of a block of cores,
        ``SELECT`` the broadcast's block, ``STOP`` resets a block's cores
        (``docs/chip.md``, "Partitions").
    m_axis : Out(:func:`rtl.streams.host_stream` (``cfg.host_width``, ``id=dest_bits``))
        Chip -> host stream; ``payload.id`` (``tid``) is the core that sent the beat. The
        cores' output streams are merged beat by beat, round robin (beats of different
        ``id`` interleave, as AXI4-Stream allows; ``last`` ends a core's packet). While
        a beat waits for ``ready`` the choice is held, so ``data`` / ``id`` stay stable.
    m_axi : Out(:class:`rtl.dma.AxiMaster` (cfg)).array(cfg.cores)
        Only with DRAM (``cfg.dram_mib > 0``; without it the chip has no such member and
        is unchanged): ``m_axi[k]`` is core ``k``'s AXI4 master port, its DMA engine's,
        joined to the core's flat ``m_axi_*`` port by ``wiring.connect`` (wires, no
        latency: the core's DMA timing, ``docs/core.md``, "The DMA engine"). One DRAM
        channel per core; the ports share nothing.

    As a Verilog top level (:class:`rtl.streams.AxisTop`, applied by
    :func:`rtl.verilog.write_verilog`) the ports are ``s_axis_tdata``, ``s_axis_tvalid``,
    ``s_axis_tready``, ``s_axis_tlast``, ``s_axis_tdest``, ``m_axis_tdata``,
    ``m_axis_tvalid``, ``m_axis_tready``, ``m_axis_tlast``, ``m_axis_tid`` and, with
    DRAM, ``m_axi_<k>_awaddr`` ... ``m_axi_<k>_rready`` per core ``k`` (the prefix
    ``m_axi_<k>`` for cocotbext-axi's ``AxiBus.from_prefix``).

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
        members = {"s_axis": In(host_stream(hw, dest=db)), "m_axis": Out(host_stream(hw, id=db))}
        if cfg.dram_mib:
            members["m_axi"] = Out(AxiMaster(cfg)).array(cfg.cores)
        super().__init__(members)

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
            if cfg.dram_mib:
                wiring.connect(m, axi_port(c, cfg), wiring.flipped(self.m_axi[k]))
        self._ring(m, cores, level)
        sel_level = Signal(range(lmax + 1), init=lmax)
        sel_first = Signal(range(n))
        self._config(m, level, stop, sel_level, sel_first)
        cfg_hit = self.s_axis.payload.dest == config_dest(cfg)
        in_sel = [Signal(name=f"bcast_sel{k}") for k in range(n)]
        for k in range(n):
            m.d.comb += in_sel[k].eq((Const(k, range(n)) >> sel_level) == (sel_first >> sel_level))

        route_host_in(m, self, cores, in_sel, cfg_hit, broadcast_dest(cfg))
        merge_host_out(m, self, cores, Cat(*stop).any())
        return m

    def _ring(self, m, cores, level):
        """Core ``k``'s ring input: a mux over :func:`arch.partition.mux_sources` chosen
        by its group register; a link carries beats and credits only between cores whose
        registers are equal. The links are therefore written out member by member (the
        :class:`rtl.streams.RingLink` fields through the mux), not with
        ``wiring.connect``, which joins one interface to one other
        (:class:`rtl.hetero_chip.HeteroChip`'s fixed ring uses it)."""
        n = self.cfg.cores
        depth = self.cfg.ring_fifo_depth
        for k, c in enumerate(cores):
            for lv in range(whole_level(n) + 1):
                p, s = pred_of_level(k, lv, n), succ_of_level(k, lv, n)
                with m.If(level[k] == lv):
                    m.d.comb += [
                        c.ring_in.data.eq(cores[p].ring_out.data),
                        c.ring_in.en.eq(cores[p].ring_out.en & (level[p] == lv)),
                        c.ring_out.level.eq(Mux(level[s] == lv, cores[s].ring_in.level, depth)),
                    ]
            assert len({pred_of_level(k, lv, n) for lv in range(whole_level(n) + 1)}) == len(mux_sources(k, n))

    def _config(self, m, level, stop, sel_level, sel_first):
        """The configuration commands at :func:`config_dest`: ``GROUP``, ``SELECT``,
        ``STOP`` (``arg0`` a core, ``arg1`` a level; acting on the aligned block)."""
        n = self.cfg.cores
        d = self.s_axis.payload.data
        cmd, arg0, arg1 = d[0:4], d[4:20], d[20:32]
        take = self.s_axis.valid & (self.s_axis.payload.dest == config_dest(self.cfg))
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
    """Host -> cores: ``top.s_axis`` (payload with ``dest``) to core ``dest``, or to
    every core with ``in_sel[k]`` for ``dest == bcast_code`` when each of them is ready
    for a command (``cmd_ready``); ``extra_ready``: a ``dest`` the chip itself takes
    (always ready). A narrower core takes the low bits of ``data``. A demultiplexer, so
    written out field by field rather than with ``wiring.connect``."""
    bcast = Signal()
    all_ready = Signal()
    m.d.comb += [
        bcast.eq(top.s_axis.payload.dest == bcast_code),
        all_ready.eq(Cat(*(c.cmd_ready | ~in_sel[k] for k, c in enumerate(cores))).all()),
    ]
    sel_ready = Signal()
    for k, c in enumerate(cores):
        hit = top.s_axis.payload.dest == k
        m.d.comb += [
            c.s_axis.payload.data.eq(top.s_axis.payload.data),
            c.s_axis.payload.last.eq(top.s_axis.payload.last),
            c.s_axis.valid.eq(top.s_axis.valid & ((hit & ~bcast) | (bcast & all_ready & in_sel[k]))),
        ]
        with m.If(hit):
            m.d.comb += sel_ready.eq(c.s_axis.ready)
    m.d.comb += top.s_axis.ready.eq(((sel_ready & ~bcast) | (bcast & all_ready) | extra_ready))


def merge_host_out(m, top, cores, void):
    """Cores -> host: per-beat round robin over the cores' ``m_axis`` streams onto
    ``top.m_axis`` (payload ``id`` = core), the choice held while a beat waits for
    ``ready``; ``void``: drop a held choice (a core was stopped). A narrower core's
    ``data`` is zero-extended. A multiplexer, so written out field by field rather than
    with ``wiring.connect``."""
    n = len(cores)
    db = len(top.m_axis.payload.id)
    ptr = Signal(db)          # first core to consider
    held = Signal()           # a beat is offered and not taken: keep the choice
    held_sel = Signal(db)
    pick = Signal(db)
    # rotated priority: the first valid core at or after ptr (scan written backwards so
    # the last assignment, the nearest one, wins)
    for off in reversed(range(n)):
        for p in range(n):
            k = (p + off) % n
            with m.If((ptr == p) & cores[k].m_axis.valid):
                m.d.comb += pick.eq(k)
    sel = Signal(db)
    m.d.comb += sel.eq(pick)
    with m.If(held):
        m.d.comb += sel.eq(held_sel)
    for k, c in enumerate(cores):
        with m.If(sel == k):
            m.d.comb += [
                top.m_axis.payload.data.eq(c.m_axis.payload.data),
                top.m_axis.payload.last.eq(c.m_axis.payload.last),
                top.m_axis.valid.eq(c.m_axis.valid),
                c.m_axis.ready.eq(top.m_axis.ready),
            ]
    m.d.comb += top.m_axis.payload.id.eq(sel)
    with m.If(void):
        m.d.sync += held.eq(0)
    with m.If(top.m_axis.valid & top.m_axis.ready):
        m.d.sync += [held.eq(0), ptr.eq(Mux(sel == n - 1, 0, sel + 1))]
    with m.Elif(top.m_axis.valid):
        m.d.sync += [held.eq(1), held_sel.eq(sel)]
