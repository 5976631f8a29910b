"""Floorplan of the PEs' block RAMs (rtl/floorplan.py): the layout rule, its errors, the
device's block-RAM sites read off nextpnr, and nextpnr placing cells where the plan says."""

from __future__ import annotations

import json
import subprocess

import pytest

from rtl.floorplan import FloorplanError, apply_floorplan, ebr_sites, plan_other_rams, plan_pe_rams, ram_netlist
from rtl.fpga import _device_args, find_tool

# a made-up device: 3 block-RAM rows (y = 10, 30, 50) of 12 sites (x = 2, 4, ..., 24)
SITES = [f"X{x}/Y{y}/EBR{(x // 2) % 4}" for y in (50, 10, 30) for x in range(24, 0, -2)]


def _names(nr, per_pe=4, extra=("core.seq.ucode.0.0",)):
    return [f"core.pe_{r}_{c}.mem_{b}.0.{i}" for r in range(nr) for c in range(nr)
            for b in "ab" for i in range(per_pe // 2)] + list(extra)


def _xy(bel):
    x, y, _ = bel.split("/")
    return int(x[1:]), int(y[1:])


def test_plan_keeps_the_array_shape():
    plan = plan_pe_rams(_names(3), 3, SITES)
    assert "core.seq.ucode.0.0" not in plan               # not a PE's RAM: left to the placer
    assert len(plan) == 36 and len(set(plan.values())) == 36
    for r in range(3):
        for c in range(3):
            mine = sorted(_xy(b) for n, b in plan.items() if f"pe_{r}_{c}." in n)
            assert {y for _, y in mine} == {(10, 30, 50)[r]}  # PE row r on block-RAM row r
            xs = [x for x, _ in mine]
            assert xs == list(range(xs[0], xs[0] + 8, 2))    # adjacent sites
            assert 8 * c + 2 <= xs[0] and xs[-1] <= 8 * c + 8  # in the c-th third of the row
    # bank A before bank B, left to right
    assert _xy(plan["core.pe_0_0.mem_a.0.0"])[0] < _xy(plan["core.pe_0_0.mem_b.0.1"])[0]


def test_plan_uses_the_middle_rows_and_leaves_the_middle_free():
    plan = plan_pe_rams(_names(1), 1, SITES)
    assert sorted(_xy(b) for b in plan.values()) == [(x, 30) for x in (10, 12, 14, 16)]
    plan = plan_pe_rams(_names(2), 2, SITES)
    assert {_xy(b)[1] for b in plan.values()} == {10, 30}   # (3 - 2) // 2 = row 0 and row 1
    # the right half of the array at the right end of its stretch, the left half at the left
    assert sorted(_xy(b)[0] for n, b in plan.items() if "pe_1_1." in n) == [18, 20, 22, 24]
    assert sorted(_xy(b)[0] for n, b in plan.items() if "pe_0_0." in n) == [2, 4, 6, 8]
    # stretches of at most twice a PE's RAMs, in the middle of the row: a small core stays compact
    plan = plan_pe_rams(_names(2, per_pe=2), 2, SITES)
    assert sorted(_xy(b)[0] for n, b in plan.items() if "pe_0_0." in n) == [6, 8]
    assert sorted(_xy(b)[0] for n, b in plan.items() if "pe_0_1." in n) == [18, 20]


def test_plan_errors():
    with pytest.raises(FloorplanError, match="4 PE rows but the device has 3 block-RAM rows"):
        plan_pe_rams(_names(4), 4, SITES)
    with pytest.raises(FloorplanError, match="a PE has 6 block RAMs.*gives each 4 sites"):
        plan_pe_rams(_names(3, per_pe=6), 3, SITES)
    with pytest.raises(FloorplanError, match=r"PE \(2, 0\), outside a 2x2 core"):
        plan_pe_rams(["core.pe_2_0.mem_a.0.0"], 2, SITES)
    with pytest.raises(ValueError, match="not an ECP5 bel name"):
        plan_pe_rams(_names(1), 1, ["EBR_R22C4"])
    assert plan_pe_rams(["core.seq.ucode.0.0"], 2, SITES) == {}


def test_other_rams_go_to_the_middle():
    names = _names(3, per_pe=2, extra=("core.seq.ucode.0.0", "core.seq.ucode.0.1", "bridge.fifo.0.0"))
    pe_plan = plan_pe_rams(names, 3, SITES)
    other = plan_other_rams(names, pe_plan, SITES)
    assert sorted(other) == ["bridge.fifo.0.0", "core.seq.ucode.0.0", "core.seq.ucode.0.1"]
    assert not set(other.values()) & set(pe_plan.values())
    # centre of the PE RAMs: x = 13, y = 30 (PE columns at x = 2-4, 12-14, 22-24); the
    # free sites of the middle row nearest to it, the two-cell microcode first
    assert {n: _xy(b) for n, b in other.items()} == {
        "core.seq.ucode.0.0": (10, 30), "core.seq.ucode.0.1": (16, 30), "bridge.fifo.0.0": (8, 30)}
    assert plan_other_rams(names, {}, SITES) == {}                         # no PE plan: no anchor
    assert plan_other_rams(names + [f"x.{i}" for i in range(16)], pe_plan, SITES) == {}   # 19 > 18 free


def test_device_args():
    args = "--quiet --seed 3 --um5g-45k --package CABGA554 --speed 8 --json top.json --lpf top.lpf".split()
    assert _device_args(args) == ["--um5g-45k", "--package", "CABGA554", "--speed", "8"]
    assert _device_args(["--85k", "--json", "x"]) == ["--85k"]


def test_sites_from_nextpnr_and_placement_follows_the_plan(tmp_path):
    """The LFE5U-25F's 56 block-RAM sites read off nextpnr (cached); a floorplanned 2 x 2
    set of PE RAMs written into a netlist is placed by nextpnr exactly there."""
    nextpnr = find_tool("NEXTPNR_ECP5")
    dev = ["--25k", "--package", "CABGA381"]
    cache = tmp_path / "sites.json"
    sites = ebr_sites(nextpnr, dev, 56, cache=cache)
    assert len(sites) == len(set(sites)) == 56 and json.loads(cache.read_text()) == sites
    assert len({_xy(b)[1] for b in sites}) >= 2
    cache.write_text(json.dumps(sites[::-1]))              # the cache is used when it matches the count
    assert ebr_sites(nextpnr, dev, 56, cache=cache) == sites[::-1]

    net = tmp_path / "top.json"
    net.write_text(json.dumps(ram_netlist(_names(2))))
    fp = apply_floorplan(net, 2, sites)
    assert fp["pe_rams"] == 16 and len(fp["rows"]) == 2
    r = subprocess.run([nextpnr, *dev, "--json", "top.json", "--write", "placed.json", "--quiet",
                        "--timing-allow-fail"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    placed = json.loads((tmp_path / "placed.json").read_text())["modules"]["top"]["cells"]
    assert {n: placed[n]["attributes"]["NEXTPNR_BEL"] for n in fp["plan"]} == fp["plan"]


def test_sites_error_names_the_device(tmp_path):
    nextpnr = find_tool("NEXTPNR_ECP5")
    with pytest.raises(RuntimeError, match="could not place 57 block RAMs.*--25k"):
        ebr_sites(nextpnr, ["--25k", "--package", "CABGA381"], 57, cache=tmp_path / "s.json")


def test_build_step_writes_the_plan(tmp_path):
    """The build's floorplan step: sites cached per device, BEL attributes in top.json,
    the plan in floorplan.json; a layout that does not fit is reported, not fatal."""
    from rtl.fpga import _floorplan, setup_tool_env

    env = setup_tool_env()
    args = ["--quiet", "--25k", "--package", "CABGA381", "--speed", "6", "--json", "top.json"]
    (tmp_path / "top.json").write_text(json.dumps(ram_netlist(_names(2, per_pe=8))))
    logs = []
    fp = _floorplan(tmp_path, 2, "LFE5U-25F", args, env, logs.append)
    assert fp["pe_rams"] == 32 and fp["other_rams"] == 1 and len(fp["rows"]) == 2
    assert "32 PE block RAMs" in logs[0] and "1 other" in logs[0]
    plan = json.loads((tmp_path / "floorplan.json").read_text())
    cells = json.loads((tmp_path / "top.json").read_text())["modules"]["top"]["cells"]
    assert {n: c["attributes"]["BEL"] for n, c in cells.items() if "BEL" in c["attributes"]} == plan
    assert sum(".pe_" not in n for n in plan) == 1       # the microcode RAM, in the middle

    (tmp_path / "top.json").write_text(json.dumps(ram_netlist(_names(3, per_pe=8))))
    fp = _floorplan(tmp_path, 3, "LFE5U-25F", args, env, logs.append)
    assert fp["pe_rams"] == 0 and "3 PE rows but the device has 2 block-RAM rows" in fp["reason"]
    assert "not applied" in logs[-1]
    assert _floorplan(tmp_path, 2, "LFE5U-99F", args, env, logs.append)["pe_rams"] == 0
