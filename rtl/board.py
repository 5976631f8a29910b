"""Board top level: a core whose AXI4-Stream host ports are reached over the board's UART.

:class:`BoardTop` is an ``Elaboratable`` for any amaranth-boards platform with a
``uart`` resource (ULX3S: the FTDI USB serial port). It instantiates
:class:`rtl.core.Core` and :class:`rtl.uart_bridge.UARTBridge`, and on ECP5 platforms can
run the core from a PLL (``EHXPLLL``) at a clock other than the board oscillator's.
With ``top="pe"`` it holds one PE in a scan harness instead (place and route of a PE
by itself). LEDs of the core top (when the board has them): 0 = heartbeat (about
1.5 Hz), 1 = a host beat was accepted recently, 2 = the core sent a beat recently,
3 = UART receive overflow (sticky), 4 = UART framing error (sticky).
"""

from __future__ import annotations

from amaranth import ClockDomain, Elaboratable, Instance, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from rtl.core import Core
from rtl.pe_harness import PEHarness
from rtl.uart_bridge import UARTBridge
from arch.errors import InputError

__all__ = ["BoardTop", "UARTCore", "ecp5_pll_params"]


def ecp5_pll_params(f_in_hz: float, f_out_hz: float) -> dict:
    """Dividers of an ECP5 ``EHXPLLL`` (feedback from CLKOP) closest to ``f_out_hz``.

    ``f_out = f_in * CLKFB_DIV / CLKI_DIV``, VCO ``= f_out * CLKOP_DIV`` in 400..800 MHz,
    phase-detector input ``f_in / CLKI_DIV`` >= 3.125 MHz (the limits ``ecppll`` uses).
    Returns ``{"clki_div", "clkfb_div", "clkop_div", "f_out_hz", "f_vco_hz"}``.
    """
    best = None
    for clki in range(1, 129):
        if f_in_hz / clki < 3.125e6:
            break
        for clkfb in range(1, 81):
            f_out = f_in_hz * clkfb / clki
            for clkop in range(1, 129):
                vco = f_out * clkop
                if 400e6 <= vco <= 800e6:
                    key = (round(abs(f_out - f_out_hz)), abs(vco - 600e6))   # then a mid-range VCO
                    if best is None or key < best[0]:
                        best = (key, dict(clki_div=clki, clkfb_div=clkfb, clkop_div=clkop,
                                          f_out_hz=f_out, f_vco_hz=vco))
    if best is None:
        raise InputError(f"no ECP5 PLL setting makes {f_out_hz / 1e6:g} MHz from {f_in_hz / 1e6:g} MHz")
    return best[1]


class UARTCore(wiring.Component):
    """A core whose host streams go through a :class:`~rtl.uart_bridge.UARTBridge`.

    Parameters
    ----------
    cfg : ArchConfig
    divisor : int
        Clock cycles per UART bit.
    rx_fifo_depth : int
        Receive FIFO of the bridge, bytes.

    Ports
    -----
    rx : In(1), tx : Out(1)
        The serial line (8N1, frames of ``rtl.uart_bridge.frame_bytes(cfg.host_width)``
        bytes per beat).
    overflow, frame_error : Out(1)
        The bridge's sticky error flags.

    The submodules are ``self.core`` and ``self.bridge``; the core's ``s_axis`` is fed
    by ``bridge.o`` and its ``m_axis`` drains into ``bridge.i``.
    """

    def __init__(self, cfg, divisor: int, rx_fifo_depth: int = 512):
        self.cfg = cfg
        self.core = Core(cfg)
        self.bridge = UARTBridge(cfg.host_width, divisor, rx_fifo_depth)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "overflow": Out(1), "frame_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.bridge = br = self.bridge
        wiring.connect(m, br.o, core.s_axis)
        wiring.connect(m, core.m_axis, br.i)
        m.d.comb += [
            br.rx.eq(self.rx), self.tx.eq(br.tx),
            self.overflow.eq(br.overflow), self.frame_error.eq(br.frame_error),
        ]
        return m


class BoardTop(Elaboratable):
    """A core on an FPGA board, its host stream bridged to the board's UART.

    Parameters
    ----------
    cfg : ArchConfig
        Core configuration.
    top : str
        ``"core"``: the core behind the UART bridge (the LEDs below). ``"pe"``: one PE in
        its scan harness (:class:`rtl.pe_harness.PEHarness`: scan input on the UART's
        receive pin through a two-flip-flop synchronizer, scan output on its transmit
        pin), for the Fmax of a PE by itself; ``baud`` is then unused.
    baud : int
        Serial line rate (the host must use the same; 8N1).
    clock_hz : float or None
        Core clock. ``None`` or the board oscillator's frequency: the oscillator drives
        the core directly. Otherwise (ECP5 only) an ``EHXPLLL`` makes the nearest
        frequency it can (``self.clock_hz`` after elaboration holds it) and the core is
        held in reset until the PLL locks.
    rx_fifo_depth : int
        Receive FIFO of the UART bridge, bytes.
    """

    TOPS = ("core", "pe")

    def __init__(self, cfg, *, top: str = "core", baud: int = 115200, clock_hz: float | None = None,
                 rx_fifo_depth: int = 512):
        if top not in self.TOPS:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise InputError(f"board top {top!r}: allowed {', '.join(self.TOPS)}")
        self.cfg = cfg
        self.top = top
        self.baud = int(baud)
        self.clock_hz = clock_hz
        self.rx_fifo_depth = rx_fifo_depth
        self.pll = None

    def _clock(self, m, platform) -> float:
        f_in = platform.default_clk_frequency
        want = self.clock_hz
        if want is None or abs(want - f_in) < 1:
            # the platform's default domain (oscillator + power-on reset)
            return f_in
        from amaranth.vendor import LatticeECP5Platform

        if not isinstance(platform, LatticeECP5Platform):
            raise InputError(f"a core clock other than the board's {f_in / 1e6:g} MHz needs a PLL; "
                             f"only ECP5 boards are supported")
        p = ecp5_pll_params(f_in, want)
        self.pll = p
        m.submodules.clk_in = clk_in = io.Buffer("i", platform.request(platform.default_clk, dir="-"))
        clk_in_buf = clk_in.i
        m.domains.sync = cd = ClockDomain("sync")
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{f_in / 1e6:g}", a_FREQUENCY_PIN_CLKOP=f"{p['f_out_hz'] / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p["clki_div"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["clkop_div"],
            p_CLKOP_CPHASE=p["clkop_div"] - 1, p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=p["clkfb_div"],
            i_RST=0, i_STDBY=0, i_CLKI=clk_in_buf, o_CLKOP=cd.clk, i_CLKFB=cd.clk,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked,
        )
        # The core is held in reset until the PLL locks: a two-flip-flop reset
        # synchronizer (asynchronous assert, synchronous release), its output on a global
        # network (DCCA), because the synchronous reset reaches every flip-flop of the
        # design: through the fabric it is the critical path of a 4 x 4 core
        # (docs/fpga.md, "The board design").
        # (ECP5 flip-flops with asynchronous preset, FD1S3BX, rather than a second clock
        # domain, which would give the core clock a second name in nextpnr's reports)
        r0 = Signal(name="rst_ff0")
        r1 = Signal(name="rst_ff1")
        rst_glb = Signal(name="rst_global")
        for i, (d, q) in enumerate(((0, r0), (r0, r1))):
            m.submodules[f"rst_ff{i}"] = Instance("FD1S3BX", i_CK=cd.clk, i_PD=~locked, i_D=d, o_Q=q)
        m.submodules.rst_gbuf = Instance("DCCA", i_CLKI=r1, i_CE=1, o_CLKO=rst_glb)
        m.d.comb += cd.rst.eq(rst_glb)
        platform.add_clock_constraint(cd.clk, p["f_out_hz"])
        return p["f_out_hz"]

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        f = self._clock(m, platform)
        self.clock_hz = f
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx_buf = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx_buf = io.Buffer("o", uart.tx)
        if self.top == "pe":
            m.submodules.harness = h = PEHarness(cfg)
            m.submodules.din_sync = FFSynchronizer(rx_buf.i, h.din)
            m.d.comb += tx_buf.o.eq(h.dout)
            return m
        divisor = round(f / self.baud)
        if divisor < 4:
            raise InputError(f"{self.baud} baud is too fast for a {f / 1e6:g} MHz clock")
        m.submodules.ucore = ucore = UARTCore(cfg, divisor, self.rx_fifo_depth)
        core, br = ucore.core, ucore.bridge
        m.d.comb += [ucore.rx.eq(rx_buf.i), tx_buf.o.eq(ucore.tx)]

        # status LEDs
        leds = []
        for i in range(5):
            try:
                port = platform.request("led", i, dir="-")
            except Exception:   # the board has fewer LEDs
                break
            m.submodules[f"led{i}"] = buf = io.Buffer("o", port)
            leds.append(buf.o)
        hb = Signal(range(max(2, int(f / 3))))
        hb_led = Signal()
        with m.If(hb == 0):
            m.d.sync += [hb.eq(int(f / 3) - 1), hb_led.eq(~hb_led)]
        with m.Else():
            m.d.sync += hb.eq(hb - 1)
        # the activity LEDs see each host-port handshake a cycle late, from a flip-flop:
        # the handshake itself (the bridge's valid -> the core's ready) is a long path,
        # and nothing should be added to it for a LED (a 2 x 2 build's critical path)
        beat_in = Signal(name="act_beat_in")
        beat_out = Signal(name="act_beat_out")
        m.d.sync += [beat_in.eq(core.s_axis.valid & core.s_axis.ready),
                     beat_out.eq(core.m_axis.valid & core.m_axis.ready)]
        act_in = Signal(range(max(2, int(f / 20))))
        act_out = Signal.like(act_in)
        with m.If(beat_in):
            m.d.sync += act_in.eq(int(f / 20) - 1)
        with m.Elif(act_in != 0):
            m.d.sync += act_in.eq(act_in - 1)
        with m.If(beat_out):
            m.d.sync += act_out.eq(int(f / 20) - 1)
        with m.Elif(act_out != 0):
            m.d.sync += act_out.eq(act_out - 1)
        for led, v in zip(leds, [hb_led, act_in != 0, act_out != 0, br.overflow, br.frame_error]):
            m.d.comb += led.eq(v)
        return m

