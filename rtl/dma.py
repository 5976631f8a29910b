"""The core's DMA engine: copies beats between external DRAM (an AXI4 master port) and
the scratchpad, concurrently with the program.

Specified in ``docs/core.md`` ("The DMA engine"); the models are
:class:`sim.dma_model.DmaEngine` and :mod:`sim.fast_dma`.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.isa import DMA_N_BITS

__all__ = ["DmaEngine", "axi_master_members"]


def axi_master_members(cfg, prefix: str = "m_axi") -> dict:
    """The AXI4 master port's members (flat names ``<prefix>_awaddr`` ..., the names
    cocotbext-axi's ``AxiBus.from_prefix`` finds): 1-bit IDs, INCR bursts, byte
    addresses of ``log2(dram_mib * 2^20)`` bits, data one beat (``nr * width`` bits)."""
    aw = cfg.dram_addr_bits + (cfg.spad_beat_bytes.bit_length() - 1)
    dw = cfg.nr * cfg.fmt.width
    p = prefix
    return {
        f"{p}_awid": Out(1), f"{p}_awaddr": Out(aw), f"{p}_awlen": Out(8), f"{p}_awsize": Out(3),
        f"{p}_awburst": Out(2), f"{p}_awvalid": Out(1), f"{p}_awready": In(1),
        f"{p}_wdata": Out(dw), f"{p}_wstrb": Out(dw // 8), f"{p}_wlast": Out(1), f"{p}_wvalid": Out(1),
        f"{p}_wready": In(1),
        f"{p}_bid": In(1), f"{p}_bresp": In(2), f"{p}_bvalid": In(1), f"{p}_bready": Out(1),
        f"{p}_arid": Out(1), f"{p}_araddr": Out(aw), f"{p}_arlen": Out(8), f"{p}_arsize": Out(3),
        f"{p}_arburst": Out(2), f"{p}_arvalid": Out(1), f"{p}_arready": In(1),
        f"{p}_rid": In(1), f"{p}_rdata": In(dw), f"{p}_rresp": In(2), f"{p}_rlast": In(1), f"{p}_rvalid": In(1),
        f"{p}_rready": Out(1),
    }


class DmaEngine(wiring.Component):
    """One transfer at a time between DRAM (AXI4, one burst per transfer) and the
    scratchpad (its own read and write port).

    Ports
    -----
    start : In(1), store : In(1), n : In(8), dram : In(dram_addr_bits), spad : In(spad_addr_bits)
        A transfer of ``n + 1`` beats (a store with ``store``) at DRAM beat ``dram`` and
        scratchpad beat ``spad``, taken in a cycle with ``start`` (only while idle: the
        core stalls every DMA start and wait while ``busy``).
    busy : Out(1)
        Combinational: ``start`` or a transfer in progress. The core stalls DMA starts and
        waits on it, the host interface's drain waits for it, the counters count it.
    rd_beat, wr_beat : Out(1)
        A beat arrived from DRAM (R handshake) / went to DRAM (W handshake) this cycle.
    spad_raddr, spad_ren, spad_rdata, spad_waddr, spad_wdata, spad_wen
        The scratchpad's DMA ports (:class:`rtl.scratchpad.Scratchpad` ``dma_*``).
    m_axi_* : the AXI4 master port (:func:`axi_master_members`).

    Cycle behaviour
    ---------------
    ``start`` in cycle ``t`` latches the transfer; from ``t + 1`` a load drives ``AR``
    (one INCR burst of ``n + 1`` beats, ``arsize`` = the beat) until ``arready``, then
    takes every ``R`` beat (``rready`` always high) and writes it to the scratchpad in
    its cycle; it is idle after the ``rlast`` beat's cycle. A store drives ``AW`` until
    ``awready`` and, from ``t + 1``, streams the beats: the scratchpad read port's output
    register is the ``W`` data register (a beat is read whenever ``W`` is empty or taken,
    so the beats go out one per cycle while ``wready`` is high); it is idle after the
    ``B`` response's cycle. So ``busy`` lasts ``n + 1`` cycles plus the memory's
    latencies (``docs/core.md`` measures them for cocotbext-axi's ``AxiRam``).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        bw = cfg.nr * cfg.fmt.width
        ab = cfg.spad_addr_bits
        super().__init__({
            "start": In(1), "store": In(1), "n": In(DMA_N_BITS), "dram": In(cfg.dram_addr_bits), "spad": In(ab),
            "busy": Out(1), "rd_beat": Out(1), "wr_beat": Out(1),
            "spad_raddr": Out(ab), "spad_ren": Out(1), "spad_rdata": In(bw),
            "spad_waddr": Out(ab), "spad_wdata": Out(bw), "spad_wen": Out(1),
            **axi_master_members(cfg),
        })

    def _axi(self, name):
        return getattr(self, f"m_axi_{name}")

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        a = self._axi
        shift = cfg.spad_beat_bytes.bit_length() - 1
        n = Signal(DMA_N_BITS)
        spad = Signal(cfg.spad_addr_bits)          # next scratchpad beat (load: write; store: read)
        addr = Signal.like(a("araddr"))
        k = Signal(DMA_N_BITS + 1)                 # store: beats read so far
        w_done = Signal()                          # store: the last beat was taken by W
        wvalid = Signal()
        wlast = Signal()
        aw_done = Signal()
        state = Signal(range(5))                   # IDLE, AR, R, AW_W, B
        IDLE, AR, R, AW_W, B = range(5)
        m.d.comb += [
            self.busy.eq(self.start | (state != IDLE)),
            a("awid").eq(0), a("arid").eq(0), a("awburst").eq(1), a("arburst").eq(1),
            a("awsize").eq(shift), a("arsize").eq(shift), a("awlen").eq(n), a("arlen").eq(n),
            a("awaddr").eq(addr), a("araddr").eq(addr), a("wstrb").eq(-1),
            a("arvalid").eq(state == AR), a("rready").eq(state == R),
            a("awvalid").eq((state == AW_W) & ~aw_done), a("bready").eq(state == B),
            a("wvalid").eq(wvalid), a("wdata").eq(self.spad_rdata), a("wlast").eq(wlast),
            self.rd_beat.eq(a("rvalid") & a("rready")),
            self.wr_beat.eq(wvalid & a("wready")),
        ]
        with m.Switch(state):
            with m.Case(IDLE):
                with m.If(self.start):
                    m.d.sync += [n.eq(self.n), spad.eq(self.spad), addr.eq(self.dram << shift), k.eq(0),
                                 w_done.eq(0), wvalid.eq(0), aw_done.eq(0), state.eq(AR)]
                    with m.If(self.store):
                        m.d.sync += state.eq(AW_W)
            with m.Case(AR):
                with m.If(a("arready")):
                    m.d.sync += state.eq(R)
            with m.Case(R):
                m.d.comb += [self.spad_waddr.eq(spad), self.spad_wdata.eq(a("rdata")),
                             self.spad_wen.eq(a("rvalid"))]
                with m.If(a("rvalid")):
                    m.d.sync += spad.eq(spad + 1)
                    with m.If(a("rlast")):
                        m.d.sync += state.eq(IDLE)
            with m.Case(AW_W):
                with m.If(a("awready")):
                    m.d.sync += aw_done.eq(1)
                advance = ~wvalid | a("wready")
                more = k <= n
                m.d.comb += [self.spad_raddr.eq(spad), self.spad_ren.eq(advance & more)]
                with m.If(advance):
                    m.d.sync += [wvalid.eq(more), wlast.eq(k == n)]
                    with m.If(more):
                        m.d.sync += [spad.eq(spad + 1), k.eq(k + 1)]
                last_now = wvalid & a("wready") & wlast
                with m.If(last_now):
                    m.d.sync += w_done.eq(1)
                with m.If((w_done | last_now) & (aw_done | a("awready"))):
                    m.d.sync += state.eq(B)
            with m.Case(B):
                with m.If(a("bvalid")):
                    m.d.sync += state.eq(IDLE)
        return m
