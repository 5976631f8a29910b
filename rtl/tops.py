"""Named top-level designs for Verilog generation, synthesis and FPGA builds."""

from __future__ import annotations

__all__ = ["TOPS", "build_top"]

TOPS = {
    "pe": "one processing element: FP MAC, register file, SRAM banks A/B, bus ports",
    "core": "an nr x nr core: PEs, buses, sequencer, AXI4-Stream host interface, counters",
}


def build_top(name: str, cfg):
    """Return ``(component, verilog_module_name)`` for the top-level design ``name``."""
    if name == "pe":
        from pe.pe import PE

        return PE(cfg, row=0, col=0), "caterpillar_pe"
    if name == "core":
        from rtl.core import Core

        return Core(cfg), "caterpillar_core"
    raise ValueError(f"unknown top-level design {name!r}; allowed: {', '.join(TOPS)}")
