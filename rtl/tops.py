"""Named top-level designs for Verilog generation, synthesis and FPGA builds."""

from __future__ import annotations

__all__ = ["TOPS", "build_top"]

TOPS = {
    "pe": "one processing element: FP MAC, register file, SRAM banks A/B, bus ports",
}


def build_top(name: str, cfg):
    """Return ``(component, verilog_module_name)`` for the top-level design ``name``."""
    if name == "pe":
        from pe.pe import PE

        return PE(cfg, row=0, col=0), "caterpillar_pe"
    raise ValueError(f"unknown top-level design {name!r}; allowed: {', '.join(TOPS)}")
