"""Routed hops on the worst path into every register input of a synthesized ECP5 netlist.

nextpnr's report says how late each endpoint is after a 30-minute place and route; in
the 4 x 4 core most of a late path's delay is routing, 1.2-1.8 ns per connection
between cells (docs/fpga.md, "Timing"). This reads the netlist Yosys hands
nextpnr (``top.json`` of a build, or of ``caterpillar build`` stopped after synthesis)
and counts, for every endpoint (a flip-flop's data, enable or reset, a block RAM's or
LUT RAM's input), the connections between cells on its longest path from a launching
flip-flop or RAM: minutes instead of a build, the same for every seed, so an RTL change
to a path's depth is seen before it is placed.

A connection is *routed* unless it stays inside a slice: a LUT4 into a ``PFUMX``, a
``PFUMX`` into an ``L6MUX21``, a carry chain's ``COUT`` into the next ``CIN``. The
``TRELLIS_DPR16X4`` LUT RAM reads asynchronously (its ``RAD`` -> ``DO`` is one more
cell). ``MULT18X18D`` outputs start paths (its registers are inside the block)::

    python -m benchmarks.fpga_levels build/exp/c4-ucx-s1 [--min-hops 6] [--depth 3] [--paths 5]

prints, per unit (PE indices folded as in ``caterpillar timing``), the endpoints with at
least ``--min-hops`` routed connections and the deepest path of the worst units.

``--pe CONFIG`` synthesizes a lone PE of that configuration first (about a minute, as
the build synthesizes each PE of a core: from Amaranth's RTLIL, its flip-flops kept
apart, its SRAM reads collision-undefined, ``synth_ecp5`` without ``-dff``) and writes
its netlist to the directory given as ``netlist``::

    python -m benchmarks.fpga_levels /tmp/pe --pe '{"preset": "fpga", "nr": 4}' --unit mv_val

A PE's inputs are then ports, which start paths like flip-flops.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from rtl.endpoints import unit_of

# combinational cells (their outputs arrive after their latest input); every other
# cell's outputs start paths
_COMB = {"LUT4", "PFUMX", "L6MUX21", "CCU2C", "TRELLIS_DPR16X4"}
_CLOCKS = {"CLK", "WCK", "CLKA", "CLKB", "CLK0", "CLK1", "CLK2", "CLK3"}
# a LUT RAM's write inputs are clocked: only its read address reaches its output
_SYNC_INPUTS = {"TRELLIS_DPR16X4": {"DI", "WAD", "WRE"}}


def _comb_input(cell_type: str, port: str) -> bool:
    return port not in _CLOCKS and port not in _SYNC_INPUTS.get(cell_type, ())


def _unrouted(drv_type: str, drv_port: str, sink_type: str, sink_port: str) -> bool:
    """The connection stays inside a slice (no general routing)."""
    return ((drv_type == "LUT4" and sink_type == "PFUMX" and sink_port in ("ALUT", "BLUT"))
            or (drv_type == "PFUMX" and sink_type == "L6MUX21" and sink_port in ("D0", "D1"))
            or (drv_type == "CCU2C" and drv_port == "COUT" and sink_type == "CCU2C" and sink_port == "CIN"))


def load_module(path: Path | str) -> dict:
    """The one module of ``path`` with cells of an ECP5 netlist (the flattened top)."""
    mods = json.loads(Path(path).read_text())["modules"]
    tops = [m for m in mods.values() if any(c["type"] == "TRELLIS_FF" for c in m["cells"].values())]
    if len(tops) != 1:
        raise ValueError(f"{path}: expected one flattened module with flip-flops, found {len(tops)}")
    return tops[0]


def path_depths(mod: dict) -> tuple[dict, dict]:
    """``(endpoints, pred, worst_in)``: ``endpoints[(cell, port)] = (hops, cells)`` for
    every endpoint input, hops the routed connections and cells the logic cells on its
    deepest path; ``pred[(cell, port)]`` the driving ``(cell, port)`` of an input and
    ``worst_in[cell]`` a combinational cell's latest input port, for :func:`trace`."""
    cells = mod["cells"]
    driver: dict[int, tuple[str, str]] = {}
    for name, c in cells.items():
        for port, d in c.get("port_directions", {}).items():
            if d == "output":
                for b in c["connections"].get(port, []):
                    if isinstance(b, int):
                        driver[b] = (name, port)
    out_arr: dict[str, tuple[int, int, tuple | None]] = {}   # comb cell -> (hops, cells, worst input)
    pred: dict[tuple[str, str], tuple[str, str]] = {}

    def drivers_of(name: str, port: str) -> list[tuple[str, str]]:
        return [driver[b] for b in cells[name]["connections"].get(port, []) if isinstance(b, int) and b in driver]

    def comb_inputs(name: str) -> list[str]:
        c = cells[name]
        return [p for p, d in c.get("port_directions", {}).items() if d == "input" and _comb_input(c["type"], p)]

    def input_arrival(name: str, port: str) -> tuple[int, int]:
        best = (0, 0)
        for dn, dp in drivers_of(name, port):
            dtype = cells[dn]["type"]
            h, n = cell_arrival(dn)[:2] if dtype in _COMB else (0, 0)
            h += not _unrouted(dtype, dp, cells[name]["type"], port)
            if (h, n) > best:
                best = (h, n)
                pred[(name, port)] = (dn, dp)
        return best

    def cell_arrival(name: str):
        # depth first without recursion (carry chains and wide cones are deep): a cell
        # is evaluated once every combinational driver of it is
        stack = [name]
        while stack:
            top = stack[-1]
            if top in out_arr:
                stack.pop()
                continue
            pending = [dn for p in comb_inputs(top) for dn, _ in drivers_of(top, p)
                       if cells[dn]["type"] in _COMB and dn not in out_arr and dn not in stack]
            if pending:
                stack.extend(pending)
                continue
            best = (0, 0, None)
            for port in comb_inputs(top):
                h, n = input_arrival(top, port)
                if (h, n + 1) > best[:2]:
                    best = (h, n + 1, port)
            out_arr[top] = best
            stack.pop()
        return out_arr[name]

    endpoints = {}
    for name, c in cells.items():
        sync = _SYNC_INPUTS.get(c["type"])
        if (c["type"] in _COMB and not sync) or c["type"].startswith("$"):
            continue
        for port, d in c.get("port_directions", {}).items():
            if d != "input" or port in _CLOCKS or (sync and port not in sync):
                continue
            h, n = input_arrival(name, port)
            if h:
                endpoints[(name, port)] = (h, n)
    return endpoints, pred, {k: v[2] for k, v in out_arr.items()}


def trace(depths: tuple, mod: dict, cell: str, port: str) -> list[str]:
    """The deepest path into ``cell.port`` (``depths`` from :func:`path_depths`), launching
    cell first, as ``cell.port [type]`` steps."""
    _, pred, worst_in = depths
    cells = mod["cells"]
    out = [f"{cell}.{port}"]
    while (cell, port) in pred:
        dn, dp = pred[(cell, port)]
        out.append(f"{dn}.{dp} [{cells[dn]['type']}]")
        if cells[dn]["type"] not in _COMB or worst_in.get(dn) is None:
            break
        cell, port = dn, worst_in[dn]
    return out[::-1]


def pe_netlist(cfg, out_dir: Path | str, row: int = 1, col: int = 1) -> Path:
    """Synthesize PE ``(row, col)`` of ``cfg`` alone for the ECP5 as ``caterpillar build``
    synthesizes the PEs of a core (:func:`rtl.fpga.keep_pe_ffs`,
    :func:`rtl.fpga.sram_reads_collision_free`, ``synth_ecp5`` without ``-dff``); write
    its netlist to ``out_dir/top.json`` (atomically) and return that path."""
    import subprocess
    import tempfile

    from amaranth.back import rtlil

    from pe.pe import PE
    from rtl.fpga import sram_reads_collision_free
    from rtl.synth import SynthError, find_yosys
    from arch.files import atomic_write

    text = rtlil.convert(PE(cfg, row, col, issue_in=cfg.dist_stage), name="top")
    decl = sram_reads_collision_free(text, extra=("top",), pe=cfg.exec_stage)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="caterpillar-levels-") as tmp:
        # (YoWASP tools see only their working directory: relative paths)
        Path(tmp, "top.il").write_text(text)
        script = f"read_rtlil top.il; setattr -set keep 1 top/t:$dff; {decl}; synth_ecp5 -top top -json top.json"
        proc = subprocess.run(find_yosys() + ["-q", "-p", script], cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0 or not Path(tmp, "top.json").exists():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise SynthError(f"yosys synthesis of the lone PE failed (exit {proc.returncode}):\n{tail}")
        atomic_write(out / "top.json", Path(tmp, "top.json").read_text())
    return out / "top.json"


def report(build: Path | str, min_hops: int = 6, depth: int = 3, paths: int = 5,
           units: tuple[str, ...] = ()) -> str:
    """The table (and the ``paths`` deepest units' paths) of :mod:`this module <benchmarks.fpga_levels>`."""
    build = Path(build)
    mod = load_module(build / "top.json" if build.is_dir() else build)
    depths = path_depths(mod)
    eps = depths[0]
    groups: dict[str, list] = defaultdict(list)
    for (cell, port), (h, n) in eps.items():
        groups[unit_of(cell, depth)].append((h, n, cell, port))
    rows = []
    for unit, lst in groups.items():
        deep = [x for x in lst if x[0] >= min_hops]
        if deep:
            rows.append((max(deep)[:2], len(deep), len(lst), unit, max(deep)))
    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    hist = defaultdict(int)
    for h, n in eps.values():
        hist[h] += 1
    lines = [f"{len(eps)} endpoints; routed hops on the deepest path: "
             + ", ".join(f"{h}: {hist[h]}" for h in sorted(hist)),
             "", f"{'unit':44} {'>=' + str(min_hops):>6} {'of':>6}  hops cells  worst endpoint"]
    for (h, n), k, tot, unit, w in rows:
        lines.append(f"{unit:44} {k:6} {tot:6}  {h:4} {n:5}  {w[2]}.{w[3]}")
    shown = rows[:paths] + [r for r in rows[paths:] if any(u in r[3] for u in units)]
    for _, _, _, unit, w in shown:
        lines += ["", f"{unit}: {w[0]} hops, {w[1]} cells"]
        lines += ["  " + step for step in trace(depths, mod, w[2], w[3])]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("netlist", help="a build directory (its top.json) or a Yosys JSON netlist; "
                    "with --pe, the directory the lone PE's netlist is written to")
    ap.add_argument("--pe", metavar="CONFIG", help="synthesize a lone PE of this configuration "
                    "(JSON or a preset name, as caterpillar's --config) first")
    ap.add_argument("--min-hops", type=int, default=6)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--paths", type=int, default=5, help="print the deepest path of this many units")
    ap.add_argument("--unit", action="append", default=[],
                    help="also print the deepest path of the units whose name contains this (repeatable)")
    a = ap.parse_args(argv)
    if a.pe is not None:
        from arch.config import config_from_arg
        pe_netlist(config_from_arg(a.pe), a.netlist)
    print(report(a.netlist, a.min_hops, a.depth, a.paths, tuple(a.unit)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
