"""A scan harness around one PE, for place-and-route of a PE by itself.

A PE has a few hundred port bits (micro-op, buses, events): more than an FPGA package
has pins. :class:`PEHarness` brings them down to two pins, so that ``caterpillar build
--top pe`` can place and route a PE on a board and report its own register-to-register
Fmax (the paths inside one PE, without the core's buses, sequencer and congestion).
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.pe import PE

__all__ = ["PEHarness"]


class PEHarness(wiring.Component):
    """One PE between a scan-in and a scan-out shift register.

    Parameters
    ----------
    cfg : ArchConfig
        PE configuration.
    row, col : int
        PE position (sets its predicate and driver-select constants).

    Ports
    -----
    din : In(1)
        Scan input: shifted into the input register every cycle (LSB first: after
        ``n_in`` cycles bit ``k`` of the register is the bit presented ``n_in - 1 - k``
        cycles earlier).
    dout : Out(1)
        Scan output: bit 0 of the output register.

    Cycle behaviour: the input register (``n_in`` = every PE input bit: micro-op,
    ``row_in``, ``col_in``, with the distribution stage the issue-stage decisions,
    ``issue``, with the receive stage the buses' class bits) drives the PE's inputs
    directly, so every PE input comes from a flip-flop, as in a core (the sequencer's
    micro-op register, the buses' driver registers). Every ``n_out`` cycles (a
    free-running counter) the output register captures all PE outputs in parallel
    (``row_out``, ``col_out``, the enables, the operand-stage values, the event strobes
    and with the receive stage the driven class bits, ``n_out`` bits); in the other cycles it
    shifts right by one towards ``dout``. The PE's outputs therefore end in flip-flops,
    and nothing of the PE is optimized away. The operand-stage drive values (``row_op``,
    ``col_op``) are among them only where a core samples them
    (:attr:`~arch.config.ArchConfig.drive_op_sampled`): a lone core with the bus stage and
    without a scratchpad (what ``caterpillar build`` puts on a board) leaves them unused.
    """

    _INS = ("uop", "row_in", "col_in")          # scan-in order, LSB first
    _OUTS = ("row_out", "col_out", "row_oe", "col_oe", "row_op", "col_op", "ev")

    def __init__(self, cfg, row: int = 0, col: int = 0):
        self.cfg = cfg
        # as in a core: with the distribution stage the issue-stage decisions come from
        # flip-flops (here scan-in bits, like the micro-op)
        self.pe = PE(cfg, row, col, issue_in=cfg.dist_stage)
        if cfg.dist_stage:
            self._INS = self._INS + ("issue",)
        if cfg.rx_stage:    # the buses' class bits come with them (PE.row_in_cls)
            self._INS = self._INS + ("row_in_cls", "col_in_cls")
            self._OUTS = self._OUTS + ("row_out_cls", "col_out_cls")
        if not cfg.drive_op_sampled:
            self._OUTS = tuple(n for n in self._OUTS if n not in ("row_op", "col_op"))
        self.n_in = sum(len(Value.cast(getattr(self.pe, n))) for n in self._INS)
        self.n_out = sum(len(Value.cast(getattr(self.pe, n))) for n in self._OUTS)
        super().__init__({"din": In(1), "dout": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.pe = pe = self.pe
        sin = Signal(self.n_in, name="scan_in")
        m.d.sync += sin.eq(Cat(sin[1:], self.din))
        m.d.comb += Cat(*(getattr(pe, n) for n in self._INS)).eq(sin)

        outs = Cat(*(getattr(pe, n) for n in self._OUTS))
        sout = Signal(self.n_out, name="scan_out")
        phase = Signal(range(self.n_out), name="scan_phase")
        with m.If(phase == 0):
            m.d.sync += [sout.eq(outs), phase.eq(self.n_out - 1)]
        with m.Else():
            m.d.sync += [sout.eq(sout >> 1), phase.eq(phase - 1)]
        m.d.comb += self.dout.eq(sout[0])
        return m
