"""Named top-level designs for Verilog generation, synthesis and FPGA builds."""

from __future__ import annotations

from arch.errors import InputError

__all__ = ["TOPS", "build_top"]

TOPS = {
    "pe": "one processing element: FP MAC, register file, SRAM banks A/B, bus ports",
    "core": "an nr x nr core: PEs, buses, sequencer, AXI4-Stream host interface, counters",
    "chip": "cfg.cores cores on a ring, one AXI4-Stream host port routed by tdest / tid",
}


def build_top(name: str, cfg):
    """Return ``(component, verilog_module_name)`` for the top-level design ``name``.

    ``core`` and ``chip`` are wrapped in :class:`rtl.streams.AxisTop`: their Verilog
    ports carry the AXI4-Stream names (``s_axis_tdata``, ``s_axis_tvalid``,
    ``s_axis_tready``, ``s_axis_tlast``, ``s_axis_tdest``, ``m_axis_tid``, ...; the
    ring links' ``ring_in_data`` ...) whichever converter is used; the wrapped design
    is ``component.inner``."""
    if name == "pe":
        from pe.pe import PE

        return PE(cfg, row=0, col=0), "caterpillar_pe"
    if name == "core":
        from rtl.core import Core
        from rtl.streams import AxisTop

        return AxisTop(Core(cfg)), "caterpillar_core"
    if name == "chip":
        from rtl.chip import Chip
        from rtl.streams import AxisTop

        if cfg.cores < 2:   # checked before the Chip exists (no unused-elaboratable warning)
            raise InputError(f"a chip needs cfg.cores >= 2 (a ring), got {cfg.cores}; use --top core for one core")
        return AxisTop(Chip(cfg)), "caterpillar_chip"
    raise InputError(f"unknown top-level design {name!r}; allowed: {', '.join(TOPS)}")
