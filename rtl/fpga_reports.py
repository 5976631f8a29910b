"""Results of the FPGA flow: nextpnr's report and log (utilization, Fmax, critical paths,
overflowing resources), cell names shortened to the design hierarchy, and a build
summary as text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rtl.fpga_devices import _NEXTPNR_CLASSES

__all__ = ["parse_nextpnr_log", "parse_nextpnr_report", "parse_critical_paths", "short_cell", "format_build"]


_FMAX_RE = re.compile(r"^Info: Max frequency for clock '([^']+)': ([\d.]+) MHz \((?:PASS|FAIL) at ([\d.]+) MHz\)", re.M)


_UTIL_RE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%", re.M)

_CRIT_HEAD_RE = re.compile(r"^Info: Critical path report for clock '([^']+)' \(posedge -> posedge\):$", re.M)
_CRIT_STEP_RE = re.compile(r"^Info:\s+(clk-to-q|logic|routing|setup)\s+([\d.]+)\s+([\d.]+)\s+(?:Source|Net)\s+(\S+)")
_CRIT_SINK_RE = re.compile(r"^Info:\s+Sink\s+(\S+)")


def parse_nextpnr_log(text: str) -> dict:
    """Utilization (after packing) and the last Fmax estimates from a nextpnr log, for a
    run that did not finish (the placer prints a pre-routing estimate)."""
    util = {name: {"used": int(u), "available": int(a)} for name, u, a, _ in _UTIL_RE.findall(text)}
    fmax = {}
    for clk, got, want in _FMAX_RE.findall(text):
        fmax[clk] = {"achieved_mhz": float(got), "constraint_mhz": float(want)}
    return {"utilization": util, "fmax": fmax}


def short_cell(name: str) -> str:
    """A cell name of a nextpnr report shortened to its design hierarchy: packer suffixes
    and the board-top prefix dropped (``ucore.core.pe_0_1.mem_a.0.3.DOB0`` -> ``pe_0_1.mem_a``)."""
    name = re.split(r"[$]|_TRELLIS|_LUT4|_PFUMX|_L6MUX|_CCU2C|_DPR16X4|_DP16KD|_MULT18|_DO_|_DI_|_Q_", name)[0]
    for pre in ("ucore.core.", "ucore."):
        if name.startswith(pre):
            name = name[len(pre):]
            break
    parts = [p for p in name.split(".") if not p.isdigit()]
    if parts and re.fullmatch(r"[A-Z]+\d*", parts[-1]):    # a pin (DOB0, Q, F, ...)
        parts = parts[:-1]
    return ".".join(parts[:3])


def parse_nextpnr_report(path: Path) -> dict:
    """Utilization and Fmax from nextpnr's ``--report`` JSON."""
    d = json.loads(Path(path).read_text())
    util = {k: {"used": int(v["used"]), "available": int(v["available"])} for k, v in d.get("utilization", {}).items()}
    fmax = {k: {"achieved_mhz": round(float(v["achieved"]), 2), "constraint_mhz": round(float(v["constraint"]), 2)}
            for k, v in d.get("fmax", {}).items()}
    return {"utilization": util, "fmax": fmax}


def parse_critical_paths(text: str) -> dict:
    """The last critical path report per clock of a nextpnr log (after routing, if it got
    there): ``{clock: {"ns", "logic_ns", "routing_ns", "lut_levels", "from", "to", "steps"}}``.

    ``from`` is the start cell (its output pin), ``to`` the end cell (its input pin),
    ``lut_levels`` the logic steps with a delay between them (LUT4, PFUMX, L6MUX21, carry),
    ``steps`` the cells on the path in order. ``logic_ns`` includes clock-to-output and setup.
    """
    out = {}
    heads = list(_CRIT_HEAD_RE.finditer(text))
    for k, h in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        logic = routing = total = 0.0
        levels = 0
        cells, sink = [], None
        for line in text[h.end():end].splitlines()[2:]:
            mm = _CRIT_STEP_RE.match(line)
            if mm:
                kind, cur, tot, name = mm.group(1), float(mm.group(2)), float(mm.group(3)), mm.group(4)
                total = tot
                if kind == "routing":
                    routing += cur
                else:
                    logic += cur
                    cells.append(name)
                    levels += kind == "logic" and cur > 0
                continue
            mm = _CRIT_SINK_RE.match(line)
            if mm:
                sink = mm.group(1)
                continue
            if not line.startswith("Info:    ") and not line.startswith("Info:       type"):
                break
        if cells:
            out[h.group(1)] = {"ns": round(total, 2), "logic_ns": round(logic, 2), "routing_ns": round(routing, 2),
                               "lut_levels": levels, "from": cells[0], "to": sink or cells[-1], "steps": cells}
    return out


def _nextpnr_overflow(log: str) -> list[tuple[str, int, int]]:
    """Resources over 100 % in nextpnr's 'Device utilisation' log section."""
    out = []
    for name, used, avail, _ in _UTIL_RE.findall(log):
        if int(used) > int(avail):
            out.append((_NEXTPNR_CLASSES.get(name, name), int(used), int(avail)))
    return out


def format_build(summary: dict) -> str:
    if summary.get("top") == "pe":
        lines = [f"board {summary['board']} ({summary['device']}), one PE in its scan harness, "
                 f"clock {summary['clock_mhz']} MHz"]
    else:
        lines = [f"board {summary['board']} ({summary['device']}), core clock {summary['clock_mhz']} MHz, "
                 f"UART {summary['baud']} baud"]
    util = summary.get("nextpnr", {}).get("utilization", {})
    if util:
        lines.append(f"{'resource':<16} {'used':>8} {'available':>10} {'%':>6}")
        for k, v in util.items():
            if v["used"]:
                lines.append(f"{k:<16} {v['used']:>8} {v['available']:>10} {100.0 * v['used'] / v['available']:>6.1f}")
    for clk, v in summary.get("nextpnr", {}).get("fmax", {}).items():
        ok = "met" if v["achieved_mhz"] >= v["constraint_mhz"] else "NOT met"
        lines.append(f"Fmax {clk}: {v['achieved_mhz']} MHz (constraint {v['constraint_mhz']} MHz, {ok})")
    for clk, c in summary.get("nextpnr", {}).get("critical_paths", {}).items():
        lines.append(f"critical path {clk}: {c['ns']} ns ({c['logic_ns']} logic, {c['routing_ns']} routing, "
                     f"{c['lut_levels']} logic levels) from {c['from']} to {c['to']}")
    if summary.get("bitstream"):
        lines.append(f"bitstream {summary['bitstream']}")
    return "\n".join(lines)
