"""The reference design's Table 2 cell by cell beside this model (``caterpillar paper``):
every cell compiled and run on the fast chip engine (weights bit for bit against the
golden trainers), GFLOPS/W in the compared scope and with everything counted, MAC
utilization with the host turnaround, the memory / FPU energy split, and the areas of
configurations S and L. Also writes ``benchmarks/results/paper.png``.
"""

from __future__ import annotations

from sim.paper import METHOD_NAMES, plot_table2, table2
from sim.power import scope_note

from benchmarks.run import RESULTS


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
        "mem/FPU energy": round(r["memory_over_fpu"], 2) if ok else "",
        "status": r["status"] if ok else r["status"][:300],
    }


def run() -> dict:
    res = table2(log=print)
    rows = [table_row(r) for r in res["cells"]]
    plot_table2(res, RESULTS / "paper.png")
    area = "; ".join(f"{k}: {v['ours']:.1f} mm^2 of PE arrays and scratchpads against the paper's {v['paper']} "
                     f"({v['ratio']:.3f}x), plus {v['ucode']:.1f} mm^2 of microcode stores "
                     f"({res['area_breakdown_mm2'][k]['ucode_words_per_core']} words per core)"
                     for k, v in res["area_mm2"].items())
    note = (res["convention"]["derivation"] + " " + scope_note() + ". MAC util. = useful MACs / (cycles x PEs), "
            "the host turnaround included. Area: " + area + ". Plot: paper.png.")
    return {"title": "The reference design's Table 2 beside this model (fast chip engine)", "note": note,
            "rows": rows, **res}


def readme_table(res: dict) -> str:
    """The README's Table 2 block, made from a ``paper.json`` (tests/project/test_docs.py checks
    that the README holds exactly this)."""
    head = ("| case | paper GFLOPS/W | ours, compared | ratio | ours, everything | MAC util. (paper) | "
            "memory / FPU energy |\n|---|---|---|---|---|---|---|\n")
    lines = []
    for r in res["cells"]:
        case = f"{r['net']} net, {r['config']}, {METHOD_NAMES[r['method']]}" + (
            f" (b = {r['batch']})" if r["batch"] > 1 else "")
        paper_util = "" if r["paper_mac_util"] is None else f" ({r['paper_mac_util'] * 100:.0f} %)"
        if r["status"] != "ok":
            lines.append(f"| {case} | {r['paper_gflops_w']} | does not fit | | | -{paper_util} | |")
            continue
        lines.append(f"| {case} | {r['paper_gflops_w']} | {r['gflops_w']:.0f} | {r['ratio']:.2f} | "
                     f"{r['gflops_w_all']:.0f} | {r['mac_util'] * 100:.1f} %{paper_util} | {r['memory_over_fpu']:.2f} |")
    return head + "\n".join(lines) + "\n"
