"""The core's off-core scratchpad: a beat-wide single-port-per-direction SRAM.

Specified in ``docs/core.md`` (section "The scratchpad"); the models keep it as an array
of beats (:class:`sim.core_model.CoreModel`, :class:`sim.fast_model.FastModel`).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["Scratchpad"]


class Scratchpad(wiring.Component):
    """``cfg.spad_depth`` words of one beat (``nr`` values of ``cfg.fmt``) each.

    Parameters
    ----------
    cfg : ArchConfig
        Uses ``spad_depth`` (> 0), ``spad_addr_bits``, ``nr`` and ``fmt``.

    Ports
    -----
    raddr : In(spad_addr_bits), ren : In(1)
        Read port: the word at ``raddr`` is sampled at the end of a cycle with ``ren``.
    rdata : Out(nr * width)
        The word read by the last enabled read (held while ``ren`` is 0); lane ``i`` is
        ``rdata[i*width +: width]``.
    waddr : In(spad_addr_bits), wdata : In(nr * width), wen : In(1)
        Write port: ``wdata`` is written to ``waddr`` at the end of a cycle with ``wen``.

    dma_raddr, dma_ren, dma_rdata, dma_waddr, dma_wdata, dma_wen
        (``cfg.dram_mib > 0`` only) A second read and write port of the same behaviour,
        the DMA engine's (:class:`rtl.dma.DmaEngine`): it never waits for the sequencer's
        ports nor they for it (a program must not touch a transfer's words until its
        ``dma wait``, ``docs/core.md``), so the memory has two ports of each kind.

    Latency
    -------
    Synchronous read, one cycle: ``ren`` at cycle ``t`` -> ``rdata`` valid from ``t+1``.
    The read port is not transparent: a read and a write of the same word in the same
    cycle return the old word; the new word is read from the next cycle on. The contents
    are 0 after configuration (FPGA) or at simulation start, and are never reset.

    The core wraps it in its clock enable (frozen in the bubble cycle after a stall, like
    the PEs), presents the read in an instruction's issue stage (``sin``) and writes in
    its operand stage (``sout``), so a ``sout`` issued in cycle ``t`` is read by a ``sin``
    issued in ``t + 2`` or later (``docs/core.md``).
    """

    def __init__(self, cfg):
        if not cfg.spad_depth:
            raise ValueError("Scratchpad needs cfg.spad_kib > 0")
        self.cfg = cfg
        bw = cfg.nr * cfg.fmt.width
        ab = cfg.spad_addr_bits
        ports = {
            "raddr": In(ab), "ren": In(1), "rdata": Out(bw),
            "waddr": In(ab), "wdata": In(bw), "wen": In(1),
        }
        if cfg.dram_mib:       # the DMA engine's own read and write ports
            ports.update({"dma_raddr": In(ab), "dma_ren": In(1), "dma_rdata": Out(bw),
                          "dma_waddr": In(ab), "dma_wdata": In(bw), "dma_wen": In(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.mem = mem = Memory(shape=cfg.nr * cfg.fmt.width, depth=cfg.spad_depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=())
        m.d.comb += [
            rp.addr.eq(self.raddr), rp.en.eq(self.ren), self.rdata.eq(rp.data),
            wp.addr.eq(self.waddr), wp.data.eq(self.wdata), wp.en.eq(self.wen),
        ]
        if cfg.dram_mib:
            dwp = mem.write_port()
            drp = mem.read_port(transparent_for=())
            m.d.comb += [
                drp.addr.eq(self.dma_raddr), drp.en.eq(self.dma_ren), self.dma_rdata.eq(drp.data),
                dwp.addr.eq(self.dma_waddr), dwp.data.eq(self.dma_wdata), dwp.en.eq(self.dma_wen),
            ]
        return m
