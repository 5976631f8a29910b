"""PE resources on ECP5 (YoWASP Yosys synth_ecp5), binary16 and binary32, 16 KB SRAM."""

from __future__ import annotations

from arch.config import ArchConfig
from rtl.fpga import fpga_resources
from rtl.synth import synthesize_top


def run() -> dict:
    rows = []
    for fmt in ("binary16", "bfloat16", "binary32"):
        cfg = ArchConfig(fmt=fmt)
        r = synthesize_top("pe", cfg, "ecp5")
        s = r["summary"]
        rows.append({"format": fmt, "SRAM KiB": cfg.pe_sram_bytes // 1024,
                     "LUT4 cells": s.get("LUT4", 0), "CCU2C": s.get("CCU2C (carry, 2 LUT4)", 0),
                     "LUT4": s.get("LUT4", 0) + 2 * s.get("CCU2C (carry, 2 LUT4)", 0),
                     "FF": s.get("FF", 0), "MULT18X18D": s.get("MULT18X18D (DSP)", 0),
                     "DP16KD": s.get("DP16KD (block RAM)", 0),
                     "LUT RAM (DPR16X4)": s.get("DPR16X4 (LUT RAM)", 0),
                     "LUT4 incl. LUT RAM": fpga_resources(r)["LUT4"]})
    return {"title": "PE resources on ECP5 (Yosys synth_ecp5, before place and route)",
            "note": ("'LUT4 cells' and 'CCU2C' are the cell counts `caterpillar synth --target ecp5` prints; "
                     "LUT4 counts carry cells (CCU2C) as two LUT4s; the register file is LUT RAM "
                     "(DPR16X4: 16 x 4 bits, 4 LUT4 in RAM mode + 2 for the write port, counted in the last "
                     "column as the device counts them, as in the FPGA table). Default configuration otherwise."),
            "rows": rows}
