"""The core's DMA engine: copies beats between external DRAM (an AXI4 master port) and
the scratchpad, concurrently with the program.

Specified in ``docs/core.md`` ("The DMA engine"); the models are
:class:`sim.dma_model.DmaEngine` and :mod:`sim.fast_dma`.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from arch.isa import DMA_N_BITS, dma_descriptor_bits

__all__ = ["DmaEngine", "AxiMaster", "axi_members", "axi_master_members", "axi_port"]


def axi_members(cfg) -> dict:
    """The AXI4 master port's members from the master's view, unprefixed (``awid``,
    ``awaddr`` ... ``rready``): 1-bit IDs, INCR bursts, byte addresses of
    ``log2(dram_mib * 2^20)`` bits, data one beat (``nr * width`` bits)."""
    aw = cfg.dram_addr_bits + (cfg.spad_beat_bytes.bit_length() - 1)
    dw = cfg.nr * cfg.fmt.width
    return {
        "awid": Out(1), "awaddr": Out(aw), "awlen": Out(8), "awsize": Out(3),
        "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(dw), "wstrb": Out(dw // 8), "wlast": Out(1), "wvalid": Out(1),
        "wready": In(1),
        "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "arid": Out(1), "araddr": Out(aw), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
        "rid": In(1), "rdata": In(dw), "rresp": In(2), "rlast": In(1), "rvalid": In(1),
        "rready": Out(1),
    }


def axi_master_members(cfg, prefix: str = "m_axi") -> dict:
    """The AXI4 master port's members as flat ports ``<prefix>_awaddr`` ... (the names
    cocotbext-axi's ``AxiBus.from_prefix`` finds): :func:`axi_members`, prefixed."""
    return {f"{prefix}_{name}": member for name, member in axi_members(cfg).items()}


class AxiMaster(wiring.Signature):
    """The AXI4 master port of a core's DMA engine as one interface, from the master's
    view (:func:`axi_members`: ``Out`` ``aw*`` / ``w*`` / ``bready`` / ``ar*`` /
    ``rready``, ``In`` ``awready`` / ``wready`` / ``b*`` / ``arready`` / ``r*``).

    A chip brings each core's port out as ``Out(AxiMaster(cfg))``; the core's own port
    is flat (``m_axi_*``, :func:`axi_master_members`) and joins it through
    :func:`axi_port` with ``wiring.connect``. As a Verilog top-level port
    (:class:`rtl.streams.AxisTop`) member ``x`` of interface ``p`` is named ``p_x``.
    """

    def __init__(self, cfg):
        self.addr_width = cfg.dram_addr_bits + (cfg.spad_beat_bytes.bit_length() - 1)
        self.data_width = cfg.nr * cfg.fmt.width
        super().__init__(axi_members(cfg))

    def __eq__(self, other):
        return isinstance(other, AxiMaster) and (self.addr_width, self.data_width) == (
            other.addr_width, other.data_width)

    def __repr__(self):
        return f"AxiMaster(addr={self.addr_width}, data={self.data_width})"


class _PortView:
    """An interface object over existing signals (:func:`axi_port`)."""

    def __init__(self, signature, ports: dict):
        self.signature = signature
        self.__dict__.update(ports)


def axi_port(component, cfg, prefix: str = "m_axi"):
    """``component``'s flat AXI4 master ports ``<prefix>_*`` (a :class:`rtl.core.Core`'s
    ``m_axi_*``) as one :class:`AxiMaster` interface object, the same signals, so that
    ``wiring.connect`` joins them to an ``AxiMaster`` port. No logic."""
    return _PortView(AxiMaster(cfg), {name: getattr(component, f"{prefix}_{name}") for name in axi_members(cfg)})


class DmaEngine(wiring.Component):
    """Transfers between DRAM (AXI4, one burst per transfer) and the scratchpad (its own
    read and write port), one after another; ``cfg.dma_queue - 1`` more wait in a
    descriptor queue (:class:`amaranth.lib.fifo.SyncFIFO`) behind the one it moves.

    Ports
    -----
    start : In(1), store : In(1), n : In(8), dram : In(dram_addr_bits), spad : In(spad_addr_bits)
        A transfer of ``n + 1`` beats (a store with ``store``) at DRAM beat ``dram`` and
        scratchpad beat ``spad``, taken in a cycle with ``start``: latched when the
        engine is idle and nothing is queued, else queued (the core stalls a DMA start
        while ``full``, so the queue has room).
    busy : Out(1)
        Combinational: ``start``, a transfer in progress or one queued. The core stalls DMA
        waits on it, the host interface's drain waits for it, the counters count it.
    count : Out(range(dma_queue + 2)), full : Out(1)
        Combinational: the transfers outstanding (``start``, the one in progress, the
        queued ones); ``full``: ``cfg.dma_queue`` of them. The core stalls a DMA start
        on ``full``, a ``dma wait K`` while ``count > K``.
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
    its cycle; it is idle after the ``rlast`` beat's cycle (and takes the next queued
    transfer in the cycle after, as a ``start`` would be taken). A store drives ``AW`` until
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
            "busy": Out(1), "count": Out(range(cfg.dma_queue + 2)), "full": Out(1), "rd_beat": Out(1),
            "wr_beat": Out(1),
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
        # the transfer taken in an idle cycle: a start, or the queue's oldest
        take = Signal()
        d_store, d_n = Signal(), Signal(DMA_N_BITS)
        d_dram, d_spad = Signal(cfg.dram_addr_bits), Signal(cfg.spad_addr_bits)
        idle = state == IDLE
        if cfg.dma_queue > 1:
            m.submodules.queue = q = SyncFIFO(width=dma_descriptor_bits(cfg), depth=cfg.dma_queue - 1)
            pop = idle & q.r_rdy
            m.d.comb += [
                q.w_data.eq(Cat(self.store, self.n, self.dram, self.spad)),
                q.w_en.eq(self.start & ~(idle & ~q.r_rdy)),
                q.r_en.eq(pop),
                take.eq(pop | (idle & self.start)),
                Cat(d_store, d_n, d_dram, d_spad).eq(Mux(pop, q.r_data, q.w_data)),
                self.busy.eq(self.start | ~idle | q.r_rdy),
                self.count.eq(self.start + ~idle + q.level),
            ]
        else:
            m.d.comb += [
                take.eq(idle & self.start),
                Cat(d_store, d_n, d_dram, d_spad).eq(Cat(self.store, self.n, self.dram, self.spad)),
                self.busy.eq(self.start | ~idle),
                self.count.eq(self.start + ~idle),
            ]
        m.d.comb += self.full.eq(self.count >= cfg.dma_queue)
        m.d.comb += [
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
                with m.If(take):
                    m.d.sync += [n.eq(d_n), spad.eq(d_spad), addr.eq(d_dram << shift), k.eq(0),
                                 w_done.eq(0), wvalid.eq(0), aw_done.eq(0), state.eq(AR)]
                    with m.If(d_store):
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
