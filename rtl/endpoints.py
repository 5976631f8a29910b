"""Where a routed design is slow: every timing endpoint's arrival time, grouped by design unit.

nextpnr's critical path report names one path per clock; to plan pipelining one needs
to know *how many* register inputs are late and *where* they are. With
``--detailed-timing-report`` (``caterpillar build --nextpnr-opt=--detailed-timing-report``)
nextpnr's JSON report lists every endpoint (a register, block RAM or LUT-RAM write
input) with its arrival time: the longest path from a launching clock edge, clock to
output and routing included, setup not. This module reads that list and groups it by
design unit (PE indices folded, so the 16 PEs of a 4 x 4 core form one group):

>>> rows = endpoint_groups(endpoint_arrivals(report), period_ns=10.0, depth=2)   # doctest: +SKIP

``caterpillar timing BUILD_DIR [--mhz 100]`` prints the table (``docs/fpga.md``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from arch.errors import InputError

__all__ = ["endpoint_arrivals", "unit_of", "endpoint_groups", "arrival_histogram", "endpoint_report",
           "format_endpoint_report"]

_PE_RE = re.compile(r"^pe_\d+_\d+")


def endpoint_arrivals(report: dict) -> list[tuple[str, str, float]]:
    """``(cell, port, arrival_ns)`` of every clocked endpoint in a nextpnr JSON report
    written with ``--detailed-timing-report`` (the worst arrival over launching clocks;
    asynchronous launches, e.g. from input pins, are left out).

    Raises ``ValueError`` when the report has no per-endpoint timing."""
    nets = report.get("detailed_net_timings")
    if nets is None:
        raise InputError("the nextpnr report has no detailed_net_timings: build with "
                         "--nextpnr-opt=--detailed-timing-report")
    worst: dict[tuple[str, str], float] = {}
    for net in nets:
        if net.get("event", "") == "<async>":
            continue
        for ep in net.get("endpoints", []):
            if ep.get("event", "") == "<async>":
                continue
            key = (ep["cell"], ep["port"])
            # "delay" is the endpoint's [min, max] arrival (nextpnr's arrival time at the
            # port, not the routing delay of this net: the report has no per-net delay)
            d = float(ep["delay"][1])
            if d > worst.get(key, float("-inf")):
                worst[key] = d
    return [(c, p, d) for (c, p), d in worst.items()]


def unit_of(cell: str, depth: int = 2) -> str:
    """The design unit of a cell: its hierarchy (:func:`rtl.fpga.short_cell`) cut to
    ``depth`` levels, PE indices folded (``pe_2_3.byp_a_val`` -> ``pe_*_*.byp_a_val``,
    ``pe_1_0_dist.bubble`` -> ``pe_*_*_dist.bubble``)."""
    from rtl.fpga import short_cell

    parts = [p for p in short_cell(cell).split(".") if p][:max(1, depth)]
    parts = [_PE_RE.sub("pe_*_*", p) for p in parts]
    return ".".join(parts) or "(top)"


def endpoint_groups(arrivals, period_ns: float, depth: int = 2) -> list[dict]:
    """Endpoints per design unit, worst first: ``unit``, ``endpoints``, ``late`` (arrival
    above ``period_ns``), ``worst_ns`` and ``worst_cell`` (an endpoint with that arrival)."""
    groups: dict[str, dict] = {}
    for cell, port, d in arrivals:
        u = unit_of(cell, depth)
        g = groups.setdefault(u, {"unit": u, "endpoints": 0, "late": 0, "worst_ns": float("-inf"),
                                  "worst_cell": ""})
        g["endpoints"] += 1
        g["late"] += d > period_ns
        if d > g["worst_ns"]:
            g["worst_ns"], g["worst_cell"] = d, f"{cell}.{port}"
    rows = sorted(groups.values(), key=lambda g: (-g["late"], -g["worst_ns"], g["unit"]))
    for g in rows:
        g["worst_ns"] = round(g["worst_ns"], 2)
    return rows


def arrival_histogram(arrivals, step_ns: float = 1.0) -> list[tuple[float, int]]:
    """``(lower bound ns, endpoints)`` per ``step_ns`` bin of arrival time, ascending."""
    counts: dict[int, int] = {}
    for _, _, d in arrivals:
        k = int(d // step_ns)
        counts[k] = counts.get(k, 0) + 1
    return [(round(k * step_ns, 3), counts[k]) for k in sorted(counts)]


def endpoint_report(build_dir: Path | str, mhz: float = 100.0, depth: int = 2) -> dict:
    """The endpoint analysis of a build directory's ``top.report.json`` against a clock
    of ``mhz``: ``{"period_ns", "endpoints", "late", "groups", "histogram"}``."""
    path = Path(build_dir) / "top.report.json"
    if not path.is_file():
        raise InputError(f"{path} not found: give the directory of a finished `caterpillar build`")
    if mhz <= 0:
        raise InputError(f"--mhz must be > 0, got {mhz}")
    arr = endpoint_arrivals(json.loads(path.read_text()))
    period = 1000.0 / mhz
    return {"report": str(path), "mhz": mhz, "period_ns": round(period, 3), "endpoints": len(arr),
            "late": sum(d > period for _, _, d in arr), "groups": endpoint_groups(arr, period, depth),
            "histogram_step_ns": 1.0, "histogram": arrival_histogram(arr, 1.0)}


def format_endpoint_report(rep: dict, top: int = 30) -> str:
    """A text table of :func:`endpoint_report` (the ``top`` units with late endpoints)."""
    lines = [f"{rep['report']}: {rep['endpoints']} endpoints, {rep['late']} arrive after "
             f"{rep['period_ns']} ns ({rep['mhz']:g} MHz)", "",
             f"{'unit':40s} {'late':>6s} {'of':>6s} {'worst ns':>8s}  worst endpoint"]
    late = [g for g in rep["groups"] if g["late"]]
    for g in late[:top] or rep["groups"][:min(top, 10)]:
        lines.append(f"{g['unit']:40s} {g['late']:6d} {g['endpoints']:6d} {g['worst_ns']:8.2f}  {g['worst_cell']}")
    rest = late[top:]
    if rest:
        lines.append(f"... {len(rest)} more units with {sum(g['late'] for g in rest)} late endpoints")
    lines += ["", "arrival histogram (ns: endpoints):",
              "  " + ", ".join(f"{lo:g}-{lo + rep['histogram_step_ns']:g}: {n}" for lo, n in rep["histogram"])]
    return "\n".join(lines)
