"""Floorplan of a core's SRAM block RAMs on an ECP5 (``caterpillar build --floorplan``).

nextpnr places the block RAMs (``DP16KD``, which sit in a few fixed rows across the die)
and the logic together; on a 4 x 4 core it scattered a PE's eight block RAMs and its
logic over the device, so paths inside one PE crossed the die (``docs/fpga.md``,
"Commands"). :func:`plan_pe_rams` gives each PE a group of adjacent block-RAM sites
instead: PE row ``r`` on one block-RAM row of the die (the middle ``nr`` rows), PE
column ``c`` on the ``c``-th of ``nr`` equal stretches of that row, so that the PE
array keeps its shape on the die (row buses run along the block-RAM rows, column buses
across them). The other block RAMs (the sequencer's microcode, FIFOs) go on the free
sites nearest the centre of the PE RAMs, one memory after the other, largest first
(:func:`plan_other_rams`), so that the sequencer, which feeds every PE, sits in the
middle of the array; to leave room there the PEs of the left half of the array take the
left end of their stretch, those of the right half its right end. :func:`apply_floorplan`
writes the sites into the synthesized netlist as nextpnr's ``BEL`` attribute; nextpnr
then places the logic around its RAMs.

The block-RAM sites of a device are read off nextpnr itself (:func:`ebr_sites`: a
netlist of nothing but as many ``DP16KD`` as the device has, placed in a few seconds)
and cached per device.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from arch.errors import InputError

__all__ = ["site_xy", "ebr_sites", "plan_pe_rams", "plan_other_rams", "apply_floorplan", "ram_netlist", "FloorplanError"]

#: A PE's block RAM in a flattened core netlist: ``...pe_<row>_<col>.<memory>...``
_PE_RAM = re.compile(r"(?:^|\.)pe_(\d+)_(\d+)\.")


class FloorplanError(InputError):
    """The PEs' block RAMs cannot be laid out on the device's block-RAM rows."""


def site_xy(bel: str) -> tuple[int, int]:
    """The (x, y) tile of an ECP5 bel name (``X4/Y22/EBR0``, ``X26/Y25/SLICEC.FF0``)."""
    m = re.fullmatch(r"X(\d+)/Y(\d+)/[\w.]+", bel)
    if not m:
        raise ValueError(f"not an ECP5 bel name: {bel!r}")
    return int(m[1]), int(m[2])


def ram_netlist(names: list[str]) -> dict:
    """A Yosys-JSON netlist of nothing but ``DP16KD`` cells named ``names`` on one clock."""
    cells = {n: {"type": "DP16KD", "parameters": {}, "attributes": {},
                 "port_directions": {"CLKA": "input"}, "connections": {"CLKA": [2]}} for n in names}
    return {"creator": "rtl.floorplan", "modules": {"top": {
        "attributes": {"top": "1".zfill(32)}, "ports": {"clk": {"direction": "input", "bits": [2]}},
        "cells": cells, "netnames": {"clk": {"bits": [2], "attributes": {}}}}}}


def ebr_sites(nextpnr: str, device_args: list[str], n_ebr: int, cache: Path | None = None,
              env: dict | None = None, timeout_s: float = 300) -> list[str]:
    """The ``DP16KD`` bel names of a device (e.g. ``X4/Y22/EBR0``), by placing ``n_ebr``
    unconnected block RAMs with nextpnr (``device_args``: its device options, e.g.
    ``["--85k", "--package", "CABGA381"]``). Cached in ``cache`` (a JSON file) if given."""
    if cache is not None and cache.exists():
        sites = json.loads(cache.read_text())
        if isinstance(sites, list) and len(sites) == n_ebr:
            return sites
    net = ram_netlist([f"ram{i}" for i in range(n_ebr)])
    with tempfile.TemporaryDirectory(prefix="ebr_sites") as work:
        (Path(work) / "in.json").write_text(json.dumps(net))
        r = subprocess.run([nextpnr, *device_args, "--json", "in.json", "--write", "out.json", "--quiet",
                            "--timing-allow-fail"], cwd=work, env=env, capture_output=True, text=True,
                           timeout=timeout_s)
        if r.returncode != 0:
            raise RuntimeError(f"nextpnr could not place {n_ebr} block RAMs to list the sites "
                               f"({' '.join(device_args)}): {(r.stdout + r.stderr)[-800:]}")
        placed = json.loads((Path(work) / "out.json").read_text())["modules"]["top"]["cells"]
    sites = sorted((c["attributes"]["NEXTPNR_BEL"] for c in placed.values() if c["type"] == "DP16KD"),
                   key=lambda b: site_xy(b)[::-1])
    if cache is not None:
        from arch.files import atomic_write
        atomic_write(cache, json.dumps(sites) + "\n")
    return sites


def plan_pe_rams(ram_cells: list[str], nr: int, sites: list[str]) -> dict[str, str]:
    """Block-RAM site per PE RAM cell (``{cell name: bel}``).

    ``ram_cells``: the ``DP16KD`` cell names of the netlist; those of PE ``(r, c)``
    contain ``pe_<r>_<c>.`` and are laid out, sorted by name (bank A before bank B), on
    adjacent sites. PE row ``r`` of ``nr`` goes on block-RAM row ``(R - nr) // 2 + r`` of
    the device's ``R`` rows (the middle ``nr`` rows), PE column ``c`` on the ``c``-th of
    ``nr`` equal stretches in the middle of that row (each ``R_sites // nr`` sites, at most
    twice a PE's RAMs, so a small core stays compact): at its left end for ``c < (nr - 1) / 2``, at its
    right end for ``c > (nr - 1) / 2``, in its middle for the middle column of an odd
    ``nr`` (the middle of each row stays free for :func:`plan_other_rams`). Cells of no
    PE are not in the result. Raises
    :class:`FloorplanError` when a stretch has fewer sites than a PE has RAMs or there are
    more PE rows than block-RAM rows.
    """
    if nr < 1:
        raise ValueError(f"nr must be >= 1, got {nr}")
    pe = defaultdict(list)
    for name in ram_cells:
        m = _PE_RAM.search(name)
        if m:
            r, c = int(m[1]), int(m[2])
            if not (r < nr and c < nr):
                raise FloorplanError(f"block RAM {name!r} belongs to PE ({r}, {c}), outside a {nr}x{nr} core")
            pe[(r, c)].append(name)
    if not pe:
        return {}
    rows = defaultdict(list)
    for b in sites:
        x, y = site_xy(b)
        rows[y].append((x, b))
    ys = sorted(rows)
    if nr > len(ys):
        raise FloorplanError(f"{nr} PE rows but the device has {len(ys)} block-RAM rows")
    k = max(len(v) for v in pe.values())
    plan = {}
    for (r, c), names in sorted(pe.items()):
        row = [b for _, b in sorted(rows[ys[(len(ys) - nr) // 2 + r]])]
        if len(row) // nr < k:
            raise FloorplanError(f"a PE has {k} block RAMs, but a block-RAM row of the device split among "
                                 f"{nr} PE columns gives each {len(row) // nr} sites")
        width = min(len(row) // nr, 2 * k)           # a small core stays compact
        base = (len(row) - nr * width) // 2
        off = base + c * width + (0 if 2 * c < nr - 1 else width - k if 2 * c > nr - 1 else (width - k) // 2)
        plan.update(zip(sorted(names), row[off:off + k]))
    return plan


def plan_other_rams(ram_cells: list[str], pe_plan: dict[str, str], sites: list[str]) -> dict[str, str]:
    """Sites for the block RAMs that belong to no PE (the sequencer's microcode, FIFOs,
    scratchpad): the free sites nearest the centre of the PE RAMs, taken by one memory
    after the other (a memory's cells are ``<memory>.<i>.<j>``; most cells first, then by
    name), so the sequencer, which feeds every PE, sits in the middle of the array and a
    memory's cells stay together. Empty when ``pe_plan`` is, or when there are not enough
    free sites."""
    others = [n for n in ram_cells if n not in pe_plan and not _PE_RAM.search(n)]
    if not pe_plan or not others:
        return {}
    mems = defaultdict(list)
    for n in others:
        mems[re.sub(r"(\.\d+)+$", "", n)].append(n)
    order = [n for _, cells in sorted(mems.items(), key=lambda kv: (-len(kv[1]), kv[0])) for n in sorted(cells)]
    xy = [site_xy(b) for b in pe_plan.values()]
    cx, cy = sum(x for x, _ in xy) / len(xy), sum(y for _, y in xy) / len(xy)
    used = set(pe_plan.values())
    free = sorted((b for b in sites if b not in used),
                  key=lambda b: ((site_xy(b)[0] - cx) ** 2 + (site_xy(b)[1] - cy) ** 2, site_xy(b)))
    if len(free) < len(order):
        return {}
    return dict(zip(order, free))


def apply_floorplan(netlist: Path, nr: int, sites: list[str]) -> dict:
    """Write the sites of :func:`plan_pe_rams` and :func:`plan_other_rams` into a Yosys
    JSON netlist (the ``BEL`` attribute nextpnr places a cell by; atomic rewrite of
    ``netlist``). Returns a summary: ``{"pe_rams": PE cells placed, "other_rams": other
    cells placed, "rows": block-RAM rows of the PEs (y), "plan": {cell: bel}}``."""
    from arch.files import atomic_write

    d = json.loads(Path(netlist).read_text())
    (top,) = [m for m in d["modules"].values() if int(str(m.get("attributes", {}).get("top", "0")), 2)]
    cells = top["cells"]
    rams = [n for n, c in cells.items() if c["type"] == "DP16KD"]
    pe_plan = plan_pe_rams(rams, nr, sites)
    other = plan_other_rams(rams, pe_plan, sites)
    plan = {**pe_plan, **other}
    for name, bel in plan.items():
        cells[name].setdefault("attributes", {})["BEL"] = bel
    atomic_write(Path(netlist), json.dumps(d))
    return {"pe_rams": len(pe_plan), "other_rams": len(other),
            "rows": sorted({site_xy(b)[1] for b in pe_plan.values()}), "plan": plan}
