"""The reference design's Table 2 cell by cell beside this model (``caterpillar paper``):
every cell compiled and run on the fast chip engine (weights bit for bit against the
golden trainers), GFLOPS/W in the compared scope and with everything counted, MAC
utilization with the host turnaround, the memory / FPU energy split, and the areas of
configurations S and L, and per cell the step's data movement, hidden and exposed
(:mod:`sim.movement`), with its DRAM and scratchpad traffic. Also writes
``benchmarks/results/paper.png``. :func:`refresh` re-runs some cells in place.
"""

from __future__ import annotations

import json
from pathlib import Path

from arch.files import atomic_write
from sim.movement import KINDS
from sim.paper import (METHOD_NAMES, arch_bound_of, areas, movement_share, plot_table2, run_cell, schedule_bound,
                       table2)
from sim.power import scope_note

from benchmarks.run import RESULTS

ROOT = Path(__file__).resolve().parent.parent


def _pct(v):
    return "" if v is None else round(v * 100, 1)


def table_row(r: dict) -> dict:
    """The summary table's row of a cell of :func:`sim.paper.table2`."""
    ok = r["status"] == "ok"
    return {
        "net": r["net"], "config": r["config"], "method": METHOD_NAMES[r["method"]], "batch": r["batch"],
        "paper GFLOPS/W": r["paper_gflops_w"], "GFLOPS/W compared": round(r["gflops_w"], 1) if ok else "",
        "ratio": round(r["ratio"], 2) if ok else "", "GFLOPS/W everything": round(r["gflops_w_all"], 1) if ok else "",
        "GFLOPS/W at Table 1's 2.63 pJ/FLOP": round(r["gflops_w_table1_fpu"], 1) if ok else "",
        "MAC util. %": _pct(r["mac_util"]), "paper util. %": _pct(r["paper_mac_util"]),
        **bound_columns(r),
        "mem/FPU energy": round(r["memory_over_fpu"], 2) if ok else "",
        **movement_columns(r),
        "status": r["status"] if ok else r["status"][:300],
    }


def bound_columns(r: dict) -> dict:
    """A row's ceiling columns: the MAC utilization the schedule's events allow and the
    resource that binds it (:func:`sim.paper.schedule_bound`), the utilization with
    every exposed data-movement cycle removed, and the ceiling of any schedule on the
    configuration (:mod:`sim.arch_bound`); ``""`` without a run."""
    b, a = schedule_bound(r), r.get("arch_bound")
    arch = {"arch. bound % (binding)": "" if a is None else f"{a['bound'] * 100:.1f} ({a['binding']})"}
    if b is None:
        return {"util. bound % (busiest resource)": "", "util. if movement hidden %": "", **arch}
    return {"util. bound % (busiest resource)": f"{b['bound'] * 100:.1f} ({b['binding']})",
            "util. if movement hidden %": _pct(b["hidden"]), **arch}


#: the summary table's names of the kinds of data movement (:data:`sim.movement.KINDS`)
KIND_NAMES = {"ring": "ring", "host": "host I/O", "spad": "scratchpad", "dma": "DRAM DMA", "ucode": "microcode LOAD"}


def movement_columns(r: dict) -> dict:
    """A row's data-movement columns: on the step's critical path, the cycles with data
    movement hidden / exposed (all kinds, then per kind), the same mean over the cores,
    and the step's DRAM and scratchpad beats (cores summed); ``""`` where the cell has
    no such figure (not run since, or it does not fit)."""
    mv = r.get("movement") or {}
    crit, mean = mv.get("critical"), mv.get("mean")

    def he(f):
        return "" if f is None else f"{f['hidden']:,} / {f['exposed']:,}"
    out = {"step cycles": f"{crit['cycles']:,}" if crit else "",
           "data movement hidden / exposed, cycles": he(crit),
           "hidden / exposed % of step": movement_share(r) if crit else ""}
    for k in KINDS:
        out[f"{KIND_NAMES[k]} h / e"] = he(crit[k]) if crit else ""
    out["mean over cores h / e"] = "" if mean is None else f"{mean['hidden']:,.0f} / {mean['exposed']:,.0f}"
    beats = lambda a, b: "" if a not in r else f"{r[a] + r[b]:,}"
    out["DRAM beats"] = beats("dram_rd_beats", "dram_wr_beats")
    out["scratchpad beats"] = beats("spad_rd_beats", "spad_wr_beats")
    return out


def run() -> dict:
    return finish(table2(log=print))


def finish(res: dict, results=RESULTS) -> dict:
    """The benchmark's JSON from :func:`sim.paper.table2`'s: its summary rows and note;
    writes the plot ``paper.png`` into ``results``."""
    for r in res["cells"]:                 # rows of an older paper.json get theirs too
        if r["status"] == "ok":
            r.update(arch_bound_of(r))
    rows = [table_row(r) for r in res["cells"]]
    plot_table2(res, results / "paper.png")
    area = "; ".join(f"{k}: {v['ours']:.1f} mm^2 of PE arrays and scratchpads against the paper's {v['paper']} "
                     f"({v['ratio']:.3f}x), plus {v['ucode']:.1f} mm^2 of microcode stores "
                     f"({res['area_breakdown_mm2'][k]['ucode_words_per_core']} words per core)"
                     for k, v in res["area_mm2"].items())
    note = (res["convention"]["derivation"] + " " + scope_note() + ". MAC util. = useful MACs / (cycles x PEs), "
            "the host turnaround included. Util. bound: the step's counters on the critical core give each "
            "resource's busy cycles (FPU issue = cycles whose instruction starts an FMA; scratchpad port, DMA "
            "engine, host port = host I/O + microcode LOADs, ring port); the step lasts at least as long as the "
            "busiest is busy, so no reordering of the same instructions and transfers beats util. x cycles / its "
            "busy cycles (sim.paper.schedule_bound). Util. if movement hidden: every exposed data-movement cycle "
            "removed, which the bound caps. Arch. bound: the MAC util. no schedule of the method passes on the "
            "configuration, from the FMAs and the weight words its PE memories cannot hold, which must cross the "
            "scratchpad's read and write ports (nr values a cycle each) or the DMA engine every step "
            "(sim.arch_bound). Area: " + area + ". Plot: paper.png.")
    return {"title": "The reference design's Table 2 beside this model (fast chip engine)", "note": note,
            "rows": rows, **res}


def readme_table(res: dict) -> str:
    """The README's Table 2 block, made from a ``paper.json`` (tests/project/test_docs.py checks
    that the README holds exactly this)."""
    head = ("| case | paper GFLOPS/W | ours, compared | ratio | ours, everything | MAC util. (paper) | "
            "memory / FPU energy | DM hidden/exposed |\n|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in res["cells"]:
        case = f"{r['net']} net, {r['config']}, {METHOD_NAMES[r['method']]}" + (
            f" (b = {r['batch']})" if r["batch"] > 1 else "")
        paper_util = "" if r["paper_mac_util"] is None else f" ({r['paper_mac_util'] * 100:.0f} %)"
        if r["status"] != "ok":
            lines.append(f"| {case} | {r['paper_gflops_w']} | does not fit | | | -{paper_util} | | - |")
            continue
        lines.append(f"| {case} | {r['paper_gflops_w']} | {r['gflops_w']:.0f} | {r['ratio']:.2f} | "
                     f"{r['gflops_w_all']:.0f} | {r['mac_util'] * 100:.1f} %{paper_util} | {r['memory_over_fpu']:.2f} | "
                     f"{movement_share(r)} |")
    return head + "\n".join(lines) + "\n"


def refresh(cells, results=RESULTS, readme=ROOT / "README.md", log=print) -> dict:
    """Re-run the cells ``cells`` (:class:`sim.paper.Cell`) and put them in place of their
    entries in ``results/paper.json`` (the other cells kept as they are; every summary
    row rebuilt, the areas recomputed); writes ``paper.json``, ``paper.png``,
    ``SUMMARY.md`` and the README's Table 2 block (:func:`readme_table`), each
    atomically. Returns the new JSON."""
    from benchmarks.run import summary

    path = results / "paper.json"
    key = lambda r: (r["net"], r["config"], r["method"])
    known = {key(r) for r in json.loads(path.read_text())["cells"]}
    for cell in cells:
        if (cell.net, cell.config, cell.method) not in known:
            raise ValueError(f"cell {(cell.net, cell.config, cell.method)} is not in {path}")
    ran = {(c.net, c.config, c.method): run_cell(c, log) for c in cells}
    old = json.loads(path.read_text())      # read after the runs: another refresh may have written meanwhile
    cells_out = [ran.get(key(r), r) for r in old["cells"]]
    area, breakdown = areas(cells_out)
    res = finish({**{k: v for k, v in old.items() if k not in ("rows", "note")}, "cells": cells_out,
                  "area_mm2": area, "area_breakdown_mm2": breakdown}, results)
    res.update({k: old[k] for k in ("benchmark", "seconds", "peak_rss_mb_process_so_far", "machine", "date")
                if k in old})
    atomic_write(path, json.dumps(res, indent=2) + "\n")
    atomic_write(results / "SUMMARY.md", summary(results))
    if readme is not None:
        update_readme(res, readme)
    return res


def update_readme(res: dict, readme=ROOT / "README.md") -> None:
    """Put :func:`readme_table` of ``res`` between the README's Table 2 markers (atomically)."""
    text = Path(readme).read_text()
    start, end = "<!-- table2: benchmarks/results/paper.json -->\n", "<!-- /table2 -->"
    i, j = text.index(start) + len(start), text.index(end)
    atomic_write(readme, text[:i] + readme_table(res) + text[j:])
