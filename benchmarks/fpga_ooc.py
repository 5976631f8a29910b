"""One unit of a core placed and routed by itself (out of context) on an ECP5, to tell a
path that is long in the unit's own logic from one that is long because of where the
core's placement puts the unit (``docs/fpga.md``, "Timing")::

    python -m benchmarks.fpga_ooc counters [--config '{"preset": "fpga"}'] [--mhz 150]

Yosys ``synth_ecp5 -abc9``, then nextpnr-ecp5 ``--out-of-context`` (the unit's ports are
not pins) on the LFE5U-85F with the given clock target and seed. Prints the routed Fmax
and the critical path and writes them, with the command, to
``benchmarks/results/fpga_ooc_<unit>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from arch.config import config_from_arg
from rtl.fpga import find_tool
from rtl.synth import _summarize, collision_free_prepare
from arch.files import atomic_write
from sim.harness import ROOT


def _counters(cfg):
    from rtl.perf_counters import PerfCounters
    return PerfCounters(cfg)


def _sequencer(cfg):
    from rtl.sequencer import Sequencer
    return Sequencer(cfg)


#: unit name -> its component for a configuration
UNITS = {"counters": _counters, "sequencer": _sequencer}
#: units whose memory reads the build declares collision-undefined
#: (:func:`rtl.fpga.sram_reads_collision_free`): the same here
COLLISION_FREE = {"counters", "sequencer"}


def run(unit: str, cfg, mhz: float = 150.0, seed: int = 1) -> dict:
    """Place and route ``unit`` (a name of :data:`UNITS`) for ``cfg`` out of context;
    ``{"unit", "fmax_mhz", "critical_path": [(type, ns, to_cell)], ...}``."""
    from amaranth.back import verilog

    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; allowed: {', '.join(UNITS)}")
    text = verilog.convert(UNITS[unit](cfg), name="top")
    yosys, nextpnr = find_tool("YOSYS"), find_tool("NEXTPNR_ECP5")
    with tempfile.TemporaryDirectory(prefix="caterpillar-ooc-") as tmp:
        # (YoWASP tools see only their working directory: relative paths)
        Path(tmp, "top.v").write_text(text)
        prep = collision_free_prepare(text, "top", pe=False, lone_unit=unit in COLLISION_FREE)
        prep = prep + "; " if prep else ""
        subprocess.run([yosys, "-q", "-p", f"read_verilog top.v; {prep}synth_ecp5 -abc9 -top top -json top.json; "
                        "tee -q -o stat.json stat -json"],
                       cwd=tmp, check=True)
        subprocess.run([nextpnr, "--85k", "--package", "CABGA381", "--json", "top.json", "--freq", f"{mhz:g}",
                        "--out-of-context", "--timing-allow-fail", "--report", "report.json", "--quiet",
                        "--seed", str(seed)], cwd=tmp, check=True)
        rep = json.loads(Path(tmp, "report.json").read_text())
        stat = json.loads(Path(tmp, "stat.json").read_text())
    (clk,) = rep["fmax"].values()
    path = next((c["path"] for c in rep["critical_paths"] if c["from"] == c["to"] != "<async>"), [])
    return {"unit": unit, "config": cfg.to_dict(), "device": "LFE5U-85F", "constraint_mhz": mhz, "seed": seed,
            "cells": _summarize(stat, "top", "ecp5")["cells"], "fmax_mhz": round(clk["achieved"], 2),
            "critical_path": [(s["type"], round(s["delay"], 2), s["to"]["cell"]) for s in path]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unit", choices=sorted(UNITS))
    ap.add_argument("--config", default='{"preset": "fpga"}', help="ArchConfig JSON or file (default preset fpga)")
    ap.add_argument("--mhz", type=float, default=150.0, help="clock target (default 150)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    res = run(args.unit, config_from_arg(args.config), args.mhz, args.seed)
    res["command"] = "python -m benchmarks.fpga_ooc " + " ".join(sys.argv[1:] if argv is None else argv)
    out = ROOT / "benchmarks" / "results" / f"fpga_ooc_{args.unit}.json"
    atomic_write(out, json.dumps(res, indent=1) + "\n")
    print(f"{args.unit} out of context on {res['device']}: {res['fmax_mhz']} MHz (target {args.mhz:g})")
    for typ, ns, to in res["critical_path"]:
        print(f"  {typ:9s} {ns:5.2f}  {to}")
    print("  cells: " + ", ".join(f"{k} {v}" for k, v in res["cells"].items()))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
