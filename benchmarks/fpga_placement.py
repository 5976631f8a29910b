"""Where a build's PEs sit and where its routing time goes (docs/fpga.md, "Timing").

Reads a build directory made with ``--nextpnr-opt=--write --nextpnr-opt=routed.json`` and
``--nextpnr-opt=--detailed-timing-report`` (``routed.json``: every cell's site;
``top.report.json``: every register input's arrival time) and prints

* the largest units of no PE and their cells;
* per PE (cells named ``pe_<r>_<c>.``, or the lone PE ``harness.pe.``): its cells, the
  standard deviation of their x and y (tiles), and its endpoints later than ``--mhz``;
* the median and 90th-percentile arrival time of the register inputs driven from inside
  their own PE, by the Manhattan length of that last connection in tiles (4-tile
  buckets; nextpnr's report holds arrival times, not per-connection routing delays)::

    python -m benchmarks.fpga_placement build/exp/c4-base32-s1 [--mhz 100]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from rtl.endpoints import endpoint_arrivals
from rtl.floorplan import site_xy

_PE = re.compile(r"(pe_\d+_\d+|harness\.pe)\.")


def sites(routed: dict) -> dict[str, tuple[int, int]]:
    """``{cell: (x, y)}`` of a routed nextpnr netlist."""
    (mod,) = routed["modules"].values()
    return {name: site_xy(c["attributes"]["NEXTPNR_BEL"]) for name, c in mod["cells"].items()
            if c.get("attributes", {}).get("NEXTPNR_BEL")}


def other_units(routed: dict, top: int = 6) -> list[tuple[str, Counter]]:
    """The largest units of no PE (``ucore.core.<unit>``, ``ucore.<unit>``): their cell
    types, most cells first."""
    (mod,) = routed["modules"].values()
    units = defaultdict(Counter)
    for name, c in mod["cells"].items():
        if _PE.search(name):
            continue
        parts = name.split(".")
        k = 3 if parts[:2] == ["ucore", "core"] else 2
        units[".".join(parts[:k]) if len(parts) > k else "<top>"][c["type"]] += 1
    return sorted(units.items(), key=lambda kv: -sum(kv[1].values()))[:top]


def pe_spread(xy: dict, arrivals, period_ns: float) -> dict[str, dict]:
    """Per PE: cell count, standard deviation of x and y, endpoints later than ``period_ns``."""
    pos = defaultdict(list)
    for name, p in xy.items():
        m = _PE.search(name)
        if m:
            pos[m[1]].append(p)
    late = Counter(m[1] for cell, _, t in arrivals if t > period_ns and (m := _PE.search(cell)))
    return {pe: {"cells": len(v), "sd_x": round(statistics.pstdev(x for x, _ in v), 1),
                 "sd_y": round(statistics.pstdev(y for _, y in v), 1), "late": late[pe]}
            for pe, v in sorted(pos.items())}


def arrival_by_distance(report: dict, xy: dict, bucket: int = 4, cap: int = 40) -> dict[int, dict]:
    """Arrival time (ns; the latest, ``delay[1]``: nextpnr reports each endpoint's min and
    max arrival) of the register inputs whose net's driver is a cell of the same PE, by
    the Manhattan length from driver to sink: ``{bucket start: {"n", "median", "p90"}}``."""
    ds = defaultdict(list)
    for net in report.get("detailed_net_timings", []):
        m = _PE.search(net["driver"])
        p0 = xy.get(net["driver"])
        if not m or p0 is None:
            continue
        for e in net["endpoints"]:
            p1 = xy.get(e["cell"])
            m1 = _PE.search(e["cell"])
            if p1 is None or not m1 or m1[1] != m[1]:
                continue
            d = e["delay"][1] if isinstance(e["delay"], list) else e["delay"]
            ds[min(abs(p0[0] - p1[0]) + abs(p0[1] - p1[1]), cap) // bucket * bucket].append(d)
    out = {}
    for b, v in sorted(ds.items()):
        v.sort()
        out[b] = {"n": len(v), "median": round(v[len(v) // 2], 2), "p90": round(v[int(0.9 * len(v))], 2)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", type=Path)
    ap.add_argument("--mhz", type=float, default=100.0, help="clock for the late counts (default 100)")
    a = ap.parse_args(argv)
    try:
        routed = json.loads((a.build_dir / "routed.json").read_text())
        report = json.loads((a.build_dir / "top.report.json").read_text())
    except FileNotFoundError as e:
        print(f"error: {e.filename} missing (build with --nextpnr-opt=--write --nextpnr-opt=routed.json "
              f"--nextpnr-opt=--detailed-timing-report)", file=sys.stderr)
        return 2
    xy = sites(routed)
    print(f"PE cells, spread (sd of x, y in tiles), endpoints later than {1000 / a.mhz:.2f} ns:")
    for pe, s in pe_spread(xy, endpoint_arrivals(report), 1000.0 / a.mhz).items():
        print(f"  {pe:12s} {s['cells']:6d} cells  sd {s['sd_x']:5.1f} {s['sd_y']:5.1f}  late {s['late']}")
    print("largest units of no PE: cells (TRELLIS_COMB, TRELLIS_FF)")
    for unit, ty in other_units(routed):
        print(f"  {unit:28s} {sum(ty.values()):6d}  ({ty['TRELLIS_COMB']}, {ty['TRELLIS_FF']})")
    print("arrival of register inputs driven from their own PE, by the length of that last connection "
          "(tiles): endpoints, median, p90 (ns)")
    for b, s in arrival_by_distance(report, xy).items():
        print(f"  {b:2d}-{b + 3:2d}: {s['n']:6d}  {s['median']:5.2f}  {s['p90']:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
