"""A UART bridge to a core's AXI4-Stream host ports, for FPGA boards.

The host talks to the core over a serial line (8 data bits, no parity, 1 stop bit).
Every AXI4-Stream beat travels as one *frame* of ``1 + ceil(width / 8)`` bytes:

======  =============================================================================
byte    meaning
======  =============================================================================
0       flags: bit 0 = ``tlast``; bits 7..1 are 0 (reserved, ignored on receive)
1..n    ``tdata``, least significant byte first (``n = ceil(width / 8)``; bits above
        ``width`` are 0 / ignored)
======  =============================================================================

in both directions (host to core: the beats of ``sw.host_protocol``; core to host: the
core's replies). There is no flow control on the serial line: the receiver has a byte
FIFO of ``rx_fifo_depth`` bytes, and a host that sends input beats faster than the
program consumes them must keep fewer than that many bytes in flight (the core consumes
``LOAD`` words and command headers every cycle, so only the data of long-running
``RUN`` commands needs care). A byte received while the FIFO is full is dropped and
sets the sticky ``overflow`` flag. ``sw.uart_host`` is the host side.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.streams import beat_layout

__all__ = ["UARTRx", "UARTTx", "UARTBridge", "beat_layout", "frame_bytes", "encode_frame",
           "decode_frames"]


def frame_bytes(width: int) -> int:
    """Bytes per beat on the serial line: one flag byte and ``ceil(width / 8)`` data bytes."""
    return 1 + -(-width // 8)


def encode_frame(width: int, tdata: int, last: bool = False) -> bytes:
    """The serial frame of one beat (host side of the protocol)."""
    n = frame_bytes(width) - 1
    if not 0 <= tdata < (1 << width):
        raise ValueError(f"beat {tdata:#x} is wider than {width} bits")
    return bytes([int(bool(last))]) + int(tdata).to_bytes(n, "little")


def decode_frames(width: int, raw: bytes) -> list[tuple[int, bool]]:
    """Beats ``(tdata, tlast)`` of a byte string of whole frames."""
    n = frame_bytes(width)
    if len(raw) % n:
        raise ValueError(f"{len(raw)} bytes is not a whole number of {n}-byte frames")
    return [(int.from_bytes(raw[i + 1:i + n], "little"), bool(raw[i] & 1)) for i in range(0, len(raw), n)]


class _UARTPort(wiring.Component):
    """Base of :class:`UARTRx` and :class:`UARTTx`: 8N1, LSB first.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (``clk_hz / baud``), >= 4.
    """

    def __init__(self, divisor: int, signature: dict):
        if divisor < 4:
            raise ValueError(f"UART divisor must be >= 4 clock cycles per bit, got {divisor}")
        self.divisor = int(divisor)
        super().__init__(signature)


class UARTRx(_UARTPort):
    """UART receiver (parameter ``divisor`` as in :class:`_UARTPort`).

    Ports
    -----
    rx : In(1)
        Serial input (idle high); synchronized here with two flip-flops.
    o : Out(stream.Signature(8, always_ready=True))
        Received bytes: ``valid`` is high for one cycle per byte (no backpressure).
    frame_error : Out(1)
        High for one cycle when a stop bit was sampled low (the byte is dropped).

    Latency: ``o.valid`` rises about ``9.5 * divisor + 3`` cycles after the start bit's
    falling edge (sampling at mid-bit).
    """

    def __init__(self, divisor: int):
        super().__init__(divisor, {"rx": In(1, init=1), "o": Out(stream.Signature(8, always_ready=True)),
                                   "frame_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        sync0 = Signal(init=1)
        rx = Signal(init=1)
        m.d.sync += [sync0.eq(self.rx), rx.eq(sync0)]
        cnt = Signal(range(d))
        bit = Signal(range(8))
        sr = Signal(8)
        m.d.comb += self.o.payload.eq(sr)
        with m.FSM(name="uart_rx"):
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += cnt.eq(d // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(cnt == 0):
                    with m.If(rx):          # glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [cnt.eq(d - 1), bit.eq(0)]
                        m.next = "DATA"
                with m.Else():
                    m.d.sync += cnt.eq(cnt - 1)
            with m.State("DATA"):
                with m.If(cnt == 0):
                    m.d.sync += [sr.eq(Cat(sr[1:], rx)), cnt.eq(d - 1), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += cnt.eq(cnt - 1)
            with m.State("STOP"):
                with m.If(cnt == 0):
                    with m.If(rx):
                        m.d.comb += self.o.valid.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += self.frame_error.eq(1)
                        m.next = "BREAK"
                with m.Else():
                    m.d.sync += cnt.eq(cnt - 1)
            with m.State("BREAK"):          # wait for the line to go idle again
                with m.If(rx):
                    m.next = "IDLE"
        return m


class UARTTx(_UARTPort):
    """UART transmitter (parameter ``divisor`` as in :class:`_UARTPort`).

    Ports
    -----
    i : In(stream.Signature(8))
        Bytes to send; ``ready`` is high while the transmitter is idle.
    tx : Out(1)
        Serial output (idle high).

    Latency: the start bit begins the cycle after the byte is accepted; one byte takes
    ``10 * divisor`` cycles, after which the next byte is accepted.
    """

    def __init__(self, divisor: int):
        super().__init__(divisor, {"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        cnt = Signal(range(d))
        sr = Signal(10, init=0x3FF)      # stop, data[7:0], start; shifted out LSB first
        left = Signal(range(11))
        m.d.comb += [self.tx.eq(sr[0]), self.i.ready.eq(left == 0)]
        with m.If(left == 0):
            with m.If(self.i.valid):
                m.d.sync += [sr.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))), left.eq(10),
                             cnt.eq(d - 1)]
        with m.Elif(cnt == 0):
            m.d.sync += [sr.eq(Cat(sr[1:], Const(1, 1))), left.eq(left - 1), cnt.eq(d - 1)]
        with m.Else():
            m.d.sync += cnt.eq(cnt - 1)
        return m


class UARTBridge(wiring.Component):
    """Serial line <-> AXI4-Stream beats of ``width`` bits (framing in the module docstring).

    Parameters
    ----------
    width : int
        ``tdata`` width of the streams (a core's ``cfg.host_width``).
    divisor : int
        Clock cycles per bit (``clk_hz / baud``), >= 4.
    rx_fifo_depth : int
        Bytes buffered between the receiver and the beat assembler.

    Ports
    -----
    rx : In(1)
        Serial input from the host.
    tx : Out(1)
        Serial output to the host.
    o : Out(stream.Signature(beat_layout(width)))
        Beats received from the host (to the core's ``s_axis``). A beat is offered once
        all of its frame's bytes are in; it is held until ``ready``.
    i : In(stream.Signature(beat_layout(width)))
        Beats to send to the host (from the core's ``m_axis``). ``ready`` is high for one
        cycle when the serializer is idle; the frame then takes
        ``frame_bytes(width) * 10 * divisor`` cycles.
    overflow : Out(1)
        Sticky: a received byte was dropped because the FIFO was full (cleared by reset).
    frame_error : Out(1)
        Sticky: a byte with a bad stop bit was received (cleared by reset).

    Latency: a beat is offered on ``o`` 2 cycles after the UART receiver delivers the
    last byte of its frame; the first byte of a reply frame starts 2 cycles after the
    beat is accepted on ``i``.
    """

    def __init__(self, width: int, divisor: int, rx_fifo_depth: int = 512):
        self.width = int(width)
        self.divisor = int(divisor)
        self.rx_fifo_depth = int(rx_fifo_depth)
        self.n_data = frame_bytes(self.width) - 1
        super().__init__({
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "o": Out(stream.Signature(beat_layout(self.width))),
            "i": In(stream.Signature(beat_layout(self.width))),
            "overflow": Out(1), "frame_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n_data
        m.submodules.urx = urx = UARTRx(self.divisor)
        m.submodules.utx = utx = UARTTx(self.divisor)
        m.submodules.rxq = rxq = fifo.SyncFIFOBuffered(width=8, depth=self.rx_fifo_depth)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     rxq.w_data.eq(urx.o.payload), rxq.w_en.eq(urx.o.valid)]
        with m.If(urx.o.valid & ~rxq.w_rdy):
            m.d.sync += self.overflow.eq(1)
        with m.If(urx.frame_error):
            m.d.sync += self.frame_error.eq(1)

        # ---- host -> core: flag byte, then n data bytes (LSB first) -> one beat ----------
        in_data = Signal(8 * n)
        in_last = Signal()
        in_k = Signal(range(n + 1))     # 0: expecting the flag byte; k: data byte k-1
        in_full = Signal()
        m.d.comb += [self.o.payload.data.eq(in_data[:self.width]), self.o.payload.last.eq(in_last),
                     self.o.valid.eq(in_full)]
        with m.If(in_full):
            with m.If(self.o.ready):
                m.d.sync += in_full.eq(0)
        with m.Else():
            m.d.comb += rxq.r_en.eq(1)
            with m.If(rxq.r_rdy):
                with m.If(in_k == 0):
                    m.d.sync += [in_last.eq(rxq.r_data[0]), in_k.eq(1)]
                with m.Else():
                    m.d.sync += in_data.eq(Cat(in_data[8:], rxq.r_data))
                    with m.If(in_k == n):
                        m.d.sync += [in_k.eq(0), in_full.eq(1)]
                    with m.Else():
                        m.d.sync += in_k.eq(in_k + 1)

        # ---- core -> host: one beat -> flag byte, then n data bytes -------------------------
        out_sr = Signal(8 * (n + 1))
        out_k = Signal(range(n + 2))    # bytes left to send
        m.d.comb += [utx.i.payload.eq(out_sr[:8]), utx.i.valid.eq(out_k != 0),
                     self.i.ready.eq(out_k == 0)]
        with m.If(out_k == 0):
            with m.If(self.i.valid):
                m.d.sync += [out_sr.eq(Cat(self.i.payload.last, Const(0, 7), self.i.payload.data)),
                             out_k.eq(n + 1)]
        with m.Elif(utx.i.ready):
            m.d.sync += [out_sr.eq(out_sr >> 8), out_k.eq(out_k - 1)]
        return m
