"""Table 2's data-movement figures (``sim.paper.run_cell``'s ``movement``, the summary
rows and the README column of ``benchmarks/bench_paper.py``), and re-running some cells
of a ``paper.json`` in place (:func:`benchmarks.bench_paper.refresh`), on the 4-core chip
standing in for S and L."""

from __future__ import annotations

import json

import pytest

import sim.paper as paper
from arch.config import PRESETS
from benchmarks import bench_paper
from benchmarks.bench_paper import readme_table, refresh, table_row
from sim.movement import KINDS


@pytest.fixture
def small_chip(monkeypatch):
    chip = PRESETS["chip-small"]
    monkeypatch.setattr(paper, "PRESETS", {"S": chip, "L": chip})
    monkeypatch.setattr(paper, "NETS", {"small": (64, 64, 64, 10), "large": (256, 512, 256, 10)})
    monkeypatch.setattr(paper, "BATCH", {"sgd": 1, "cp": 1, "mbgd": 4})
    monkeypatch.setattr(paper, "dram_config", lambda name: chip.replace(spad_kib=64, dram_mib=1))


def _check(row):
    for f in row["movement"].values():
        assert f["hidden"] + f["exposed"] + f["compute_only"] + f["other"] == pytest.approx(f["cycles"], abs=0.2)
        for k in KINDS:
            assert f[k]["hidden"] + f[k]["exposed"] == pytest.approx(f[k]["cycles"], abs=0.2)
    crit = row["movement"]["critical"]
    assert crit["cycles"] == row["cycles"]
    assert crit["hidden"] <= crit["compute"] and crit["ring"]["cycles"] > 0 and crit["host"]["exposed"] > 0


def test_cells_carry_their_data_movement(small_chip):
    rows = [paper.run_cell(paper.Cell("small", "S", m)) for m in paper.METHODS]
    for r in rows:
        _check(r)
    off = paper.run_cell(paper.Cell("large", "S", "mbgd"))       # weights streamed from DRAM
    _check(off)
    mean = off["movement"]["mean"]
    assert mean["dma"]["cycles"] > 0 and mean["dma"]["exposed"] >= off["dma_stall_cycles_measured"]
    tr = table_row(off)
    assert tr["DRAM beats"] == f"{off['dram_rd_beats'] + off['dram_wr_beats']:,}"
    assert tr["DRAM DMA h / e"] == f"{off['movement']['critical']['dma']['hidden']:,} / " \
                                   f"{off['movement']['critical']['dma']['exposed']:,}"
    assert "%" in paper.format_table({"cells": rows, "convention": paper.convention(), "area_mm2": {}})
    for r in rows + [off]:
        _check_bound(r)
    assert paper.schedule_bound(off)["busy"]["DRAM DMA"] == off["movement"]["critical"]["dma"]["cycles"]


def _check_bound(row):
    """The bound lies between the measured utilization and 1, is the busiest resource's,
    and the utilization with the exposed movement removed is at least the measured."""
    b = paper.schedule_bound(row)
    crit, u = row["movement"]["critical"], row["mac_util"]
    assert u <= b["bound"] <= 1 and u <= b["hidden"]
    assert b["busy"]["FPU issue"] == crit["compute"] and b["fpu_efficiency"] <= 1
    assert b["busy"]["host port"] == crit["host"]["cycles"] + crit["ucode"]["cycles"] > 0
    assert b["busy"][b["binding"]] == max(b["busy"].values()) <= crit["cycles"]
    assert b["bound"] == pytest.approx(u * crit["cycles"] / max(b["busy"].values()))
    tr = table_row(row)
    assert tr["util. bound % (busiest resource)"] == f"{b['bound'] * 100:.1f} ({b['binding']})"
    # no schedule passes the architecture's ceiling, this one's included
    a = row["arch_bound"]
    assert b["bound"] <= a["bound"] + 1e-9 and tr["arch. bound % (binding)"] == f"{a['bound'] * 100:.1f} ({a['binding']})"


def test_schedule_bound_names_the_busiest_resource():
    def kind(c, h=0):
        return {"cycles": c, "hidden": h, "exposed": c - h}
    crit = {"cycles": 1000, "compute": 300, "hidden": 100, "exposed": 600, "compute_only": 200, "other": 100,
            "ring": kind(50), "host": kind(20), "spad": kind(700, 100), "dma": kind(400), "ucode": kind(0)}
    row = {"mac_util": 0.2, "movement": {"critical": crit}}
    b = paper.schedule_bound(row)
    assert b["binding"] == "scratchpad port" and b["bound"] == pytest.approx(0.2 * 1000 / 700)
    assert b["hidden"] == pytest.approx(0.2 * 1000 / 400) and b["fpu_efficiency"] == pytest.approx(0.2 * 1000 / 300)
    crit["ucode"] = kind(800)                       # LOADs and host I/O share the host port
    assert paper.schedule_bound(row)["binding"] == "host port"
    assert paper.schedule_bound(row)["busy"]["host port"] == 820
    assert paper.schedule_bound({"mac_util": None, "movement": {"critical": crit}}) is None
    assert paper.schedule_bound({"mac_util": 0.2}) is None
    assert bench_paper.bound_columns({"mac_util": None})["util. bound % (busiest resource)"] == ""


def test_rows_without_the_figures_show_dashes(small_chip):
    row = paper.run_cell(paper.Cell("small", "S", "sgd"))
    old = {k: v for k, v in row.items() if k != "movement"}
    lines = readme_table({"cells": [row, old]}).splitlines()
    c = row["movement"]["critical"]
    assert lines[2].endswith(f"| {c['hidden'] / c['cycles'] * 100:.0f}/{c['exposed'] / c['cycles'] * 100:.0f}% |")
    assert lines[3].endswith("| - |")
    assert table_row(old)["data movement hidden / exposed, cycles"] == ""
    assert table_row(old)["scratchpad beats"] == table_row(row)["scratchpad beats"]


def test_refresh_replaces_cells_in_place(small_chip, tmp_path):
    res = bench_paper.finish(paper.table2([paper.Cell("small", "S", m) for m in ("sgd", "mbgd")]), tmp_path)
    for c in res["cells"]:
        del c["movement"]                        # cells measured before the figures existed
    res["date"] = "then"
    (tmp_path / "paper.json").write_text(json.dumps(res))
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- table2: benchmarks/results/paper.json -->\nold\n<!-- /table2 -->\nend\n")
    out = refresh([paper.Cell("small", "S", "mbgd")], results=tmp_path, readme=readme, log=None)
    got = json.loads((tmp_path / "paper.json").read_text())
    assert got == json.loads(json.dumps(out)) and got["date"] == "then"
    assert "movement" not in got["cells"][0] and "movement" in got["cells"][1]
    assert [r["net"] for r in got["rows"]] == ["small", "small"]
    assert got["rows"][1]["step cycles"] == f"{got['cells'][1]['cycles']:,}" and got["rows"][0]["step cycles"] == ""
    assert readme.read_text() == "intro\n<!-- table2: benchmarks/results/paper.json -->\n" + readme_table(got) + \
        "<!-- /table2 -->\nend\n"
    assert "| data movement hidden / exposed, cycles |" in (tmp_path / "SUMMARY.md").read_text()
    with pytest.raises(ValueError, match="not in"):
        refresh([paper.Cell("large", "L", "cp")], results=tmp_path, readme=None, log=None)
