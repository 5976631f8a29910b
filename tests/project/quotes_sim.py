"""Quoted figures of the fast model's speed (docs/simulators.md) and the kernels
(docs/kernels.md).
``QUOTES`` is checked by ``tests/project/test_docs.py``."""

from __future__ import annotations

import math

from tests.project.quoting import FAST_KERNELS, RES, Cell, Quote, get, num, span


QUOTES: list = []

def kilo(v) -> str:
    """``212,318`` -> ``212 k``, ``(222,890)`` -> ``(223 k)``, ``-`` stays."""
    if v in ("-", ""):
        return v
    s = f"{num(v) / 1000:.0f} k"
    return f"({s})" if str(v).startswith("(") else s


def mega(v) -> str:
    x = num(v) / 1e6
    return f"{x:.1f} M" if x < 10 else f"{x:.0f} M"


def ratios(r) -> str:
    return "" if r["ratio cold"] == "-" else f"{num(r['ratio cold']):.0f}x / {num(r['ratio warm']):.0f}x"


FAST_ROWS = {  # docs/simulators.md's speed table: row -> fast_model.json program
    "GEMV 256x256 on 4x4 (`emit_gemv`)": "gemv 256x256, 4x4 binary16",
    "rank-1 update 256x256 on 4x4": "rank-1 update 256x256, 4x4 binary16",
    "GEMV^T 256x256 on 4x4": "gemv_t 256x256, 4x4 binary16",
    "GEMM 128x128, batch 16, on 4x4": "gemm 128x128 x batch 16, 4x4 binary16",
    "ReLU, 2,048 words per PE, on 4x4": "relu 2048 words/PE, 4x4 binary16",
    "GEMV 1024x1024 on 16x16": "gemv 1024x1024, 16x16 binary16",
    "GEMV 4096x2048 on 8 cores of 16x16": "gemv 4096x2048 on 8 cores of 16x16 (2048 PEs)",
}
FAST = RES + "fast_model.json"
FAST_ROW = lambda program: (lambda d: get(d, ("rows", {"program": program})))
SCALING = lambda d: [r for r in d["rows"] if r["program"].startswith("scaling:")]
CORE_MODEL = lambda d: num(get(d, ("rows", {"program": "gemv 64x64, 4x4 (CoreModel reference)"}))["Verilator PE-cycles/s"])
VERILATOR_MEASURED = lambda d: [num(r["Verilator PE-cycles/s"]) / r["PEs"] for r in FAST_KERNELS(d)
                                if not r["Verilator PE-cycles/s"].startswith("(")]

QUOTES += [
    *[Quote("docs/simulators.md", Cell("cocotb + Verilator PE-cycles/s", row, col), FAST,
            lambda d, p=prog, f=f: f(FAST_ROW(p)(d)))
      for row, prog in FAST_ROWS.items() for col, f in (
          ("PEs", lambda r: f"{r['PEs']:,}"), ("cycles", lambda r: f"{r['cycles']:,}"),
          ("cocotb + Verilator PE-cycles/s", lambda r: kilo(r["Verilator PE-cycles/s"])),
          ("fast model, cold", lambda r: mega(r["fast cold PE-cycles/s"])),
          ("fast model, warm", lambda r: mega(r["fast warm PE-cycles/s"])),
          ("ratio cold / warm", ratios))],
    Quote("docs/simulators.md", r"on every kernel \((\d+-\d+)x\)", FAST,
          lambda d: span(r["ratio warm"] for r in FAST_KERNELS(d)), "{0:.0f}-{1:.0f}"),
    Quote("docs/simulators.md", r"reach (\d+-\d+)x on these\s+small 4x4 kernels", FAST,
          lambda d: span(r["ratio cold"] for r in FAST_KERNELS(d)), "{0:.0f}-{1:.0f}"),
    Quote("docs/simulators.md", r"the reference core model runs (\S+) k PE-cycles/s", FAST,
          lambda d: CORE_MODEL(d) / 1000, "{:.1f}"),
    Quote("docs/simulators.md", r"\| ([\d,]+) \(a 64 x 64 GEMV\) \|", FAST, lambda d: CORE_MODEL(d) / 16, "{:,.0f}"),
    Quote("docs/simulators.md", r"\| (\S+) M on a kernel's first run", FAST,
          lambda d: span((num(r["fast cold PE-cycles/s"]) / r["PEs"] / 1e6 for r in FAST_KERNELS(d)), 2),
          "{0:.2f}-{1:.2f}"),
    Quote("docs/simulators.md", r"first run, (\S+) M repeated", FAST,
          lambda d: span((num(r["fast warm PE-cycles/s"]) / r["PEs"] / 1e6 for r in FAST_KERNELS(d)), 1),
          "{0:.1f}-{1:.1f}"),
    Quote("docs/simulators.md", r"Verilator: (\S+) on single-kernel sessions", FAST,
          lambda d: span(VERILATOR_MEASURED(d)), "{0:,.0f}-{1:,.0f}"),
    Quote("docs/simulators.md", r"single-kernel sessions, (\S+) on the kernel benchmark's sessions",
          RES + "kernels.json", lambda d: span(s["cycles/s"] for s in d["speed"] if s["sim"] == "verilator"),
          "{0:,.0f}-{1:,.0f}"),
    Quote("docs/simulators.md", r"the cold time stays at (\d+-\d+) ms", FAST,
          lambda d: span(r["fast cold ms"] for r in SCALING(d)), "{0:.0f}-{1:.0f}"),
    Quote("docs/simulators.md", r"falls from (\S+ us to \S+ us) as n doubles", FAST,
          lambda d: (num(SCALING(d)[0]["Verilator PE-cycles/s"]) / 1000, num(SCALING(d)[-1]["Verilator PE-cycles/s"]) / 1000),
          "{0:.1f} us to {1:.1f} us"),
    Quote("docs/simulators.md", r"model simulates (\d+) M PE-cycles per second", FAST,
          lambda d: num(FAST_ROW(FAST_ROWS["GEMV 4096x2048 on 8 cores of 16x16"])(d)["fast warm PE-cycles/s"]) / 1e6,
          "{:.0f}"),
    Quote("docs/simulators.md", r"the ([\d,]+)-cycle kernel on all 8 cores", FAST,
          lambda d: FAST_ROW(FAST_ROWS["GEMV 4096x2048 on 8 cores of 16x16"])(d)["cycles"], "{:,}"),
    Quote("docs/simulators.md", r"on all 8 cores in\s+(\S+) s \(warm\)", FAST,
          lambda d: FAST_ROW(FAST_ROWS["GEMV 4096x2048 on 8 cores of 16x16"])(d)["fast warm ms"] / 1000, "{:.2f}"),
]


KERN = RES + "kernels.json"
KROW = lambda name: (lambda d: get(d, ("rows", {"kernel": name})))
KERNEL_ROWS = {  # docs/kernels.md's measured table: row -> kernels.json kernel
    "GEMV, tree reduction, `x` from the diagonal": "gemv (tree, x diag)",
    "transposed GEMV, tree, `x` from the diagonal": "gemv_t (tree, x diag)",
    "GEMV, sequential reduction, `x` in cols": "gemv (seq, x cols)",
    "rank-1 update, `alpha`, `u`/`v` from the diagonal": "rank1 (alpha, u/v diag)",
    "GEMM, b = 4 (block 16 x 1)": "gemm b=4 (block 16x1)",
    "GEMM, b = 16 (block 2 x 4)": "gemm b=16 (block 2x4)",
    "GEMM, b = 32 (block 1 x 8)": "gemm b=32 (block 1x8)",
}
COLLECTIVE_ROWS = {
    "broadcast diag -> rows": ("broadcast rows", "row"), "broadcast diag -> cols": ("broadcast cols", "col"),
    "sequential reduction along rows": ("reduce seq along rows", "row"),
    "tree reduction along rows": ("reduce tree along rows", "row"),
}
KSPEED = lambda session, sim: (lambda d: get(d, ("speed", {"session": session, "sim": sim})))
SPEED_ROWS = {  # docs/kernels.md's simulation speed table
    "GEMV, GEMV^T (x2), rank-1 of 256 x 256": ("gemv/gemv_t/rank1 256x256", "verilator"),
    "same": ("gemv/gemv_t/rank1 256x256", "icarus"),
    "GEMM 256 x 256, b = 4, 16, 32": ("gemm 256x256 b=4,16,32", "verilator"),
    "minibatch layer 128 x 128, b = 16": ("minibatch layer 128x128 b=16", "verilator"),
}


def _rate(v):
    return f"{v / 1000:.1f} k" if v >= 1000 else f"{v}"


POWER = RES + "power.json"
PROW = lambda name: (lambda d: get(d, ("rows", {"kernel": name})))

QUOTES += [
    *[Quote("docs/kernels.md", Cell("cycles (measured = predicted)", row, col), KERN,
            lambda d, k=k, f=f: f(KROW(k)(d)))
      for row, k in KERNEL_ROWS.items() for col, f in (
          ("cycles (measured = predicted)", lambda r: f"{r['cycles']}"),
          ("MAC util", lambda r: f"{r['MAC util %']:.2f} %"), ("FPU-issue util", lambda r: f"{r['FPU-issue util %']:.2f} %"),
          ("row hops", lambda r: f"{r['row hops']}"), ("col hops", lambda r: f"{r['col hops']}"))],
    *[Quote("docs/kernels.md", Cell("| collective | cycles | formula", row, col), KERN,
            lambda d, k=k, bus=bus, f=f: f(KROW(k)(d), bus))
      for row, (k, bus) in COLLECTIVE_ROWS.items() for col, f in (
          ("cycles", lambda r, bus: f"{r['cycles']}"),
          ("FPU-issue util", lambda r, bus: "0" if not r["FPU-issue util %"] else
           f"{r['FPU-issue util %']:.2f} %" + (" (diagonal only)" if "seq" in r["kernel"] else "")),
          ("hops on the buses used", lambda r, bus: f"{r[bus + ' hops']} ({bus})"))],
    Quote("docs/kernels.md", Cell("| collective | cycles | formula", "sequential / tree along cols", "cycles"), KERN,
          lambda d: (KROW("reduce seq along cols")(d)["cycles"], KROW("reduce tree along cols")(d)["cycles"]),
          "{0} / {1}"),
    Quote("docs/kernels.md", Cell("| collective | cycles | formula", "sequential / tree along cols",
                                  "hops on the buses used"), KERN,
          lambda d: (KROW("reduce seq along cols")(d)["col hops"], KROW("reduce tree along cols")(d)["col hops"]),
          "{0} / {1} (col)"),
    *[Quote("docs/kernels.md", Cell("| session | simulator |", row, col), KERN, lambda d, k=k, f=f: f(KSPEED(*k)(d)))
      for row, k in SPEED_ROWS.items() for col, f in (
          ("simulated cycles", lambda r: f"{r['sim_cycles']:.0f}"), ("wall time", lambda r: f"{r['wall_s']:.1f} s"),
          ("cycles/s", lambda r: _rate(r["cycles/s"])))],
    Quote("docs/kernels.md", r"its ([\d,]+)\s+cycles would take about", KERN,
          lambda d: KSPEED("gemm 256x256 b=4,16,32", "verilator")(d)["sim_cycles"], "{:,.0f}"),
    Quote("docs/kernels.md", r"would take about (\d+) minutes at Icarus's rate", KERN,
          lambda d: (KSPEED("gemm 256x256 b=4,16,32", "verilator")(d)["sim_cycles"]
                     / KSPEED("gemv/gemv_t/rank1 256x256", "icarus")(d)["cycles/s"] / 60), "{:.0f}"),
    # the kernels' sections
    Quote("docs/kernels.md", r"instructions, (\d+) cycles as a RUN phase", KERN, KROW("gemv (tree, x diag)"),
          lambda r: f"{r['cycles']}"),
    Quote("docs/kernels.md", r"(\d+) MAC cycles \((\S+) %\)", KERN, KROW("gemv (tree, x diag)"),
          lambda r: (f"{r['useful MACs'] // 16}", f"{r['MAC util %']:.1f}")),
    Quote("docs/kernels.md", r"sequential reduction: (\d+ cycles \(\S+ %\))", KERN, KROW("gemv (seq, x cols)"),
          lambda r: f"{r['cycles']} cycles ({r['MAC util %']:.1f} %)"),
    Quote("docs/kernels.md", r"counts the reduction adds too \((\S+) % tree\)", KERN, KROW("gemv (tree, x diag)"),
          lambda r: f"{r['FPU-issue util %']:.2f}"),
    Quote("docs/kernels.md", r"instructions,\s+(\d+ cycles, \*\*\S+ %\*\*) MAC utilization \(the 64 row", KERN,
          KROW("rank1 (alpha, u/v diag)"), lambda r: f"{r['cycles']} cycles, **{r['MAC util %']:.1f} %**"),
    Quote("docs/kernels.md", r"FPU-issue (\S+) %\)\. `alpha` multiplies", KERN, KROW("rank1 (alpha, u/v diag)"),
          lambda r: f"{r['FPU-issue util %']:.1f}"),
    Quote("docs/kernels.md", r"8459\s+instructions, (\d+ cycles, \*\*\S+ %\*\*)", KERN,
          KROW("fused gemv_t + rank1 (block 4)"), lambda r: f"{r['cycles']} cycles, **{r['MAC util %']:.1f} %**"),
    Quote("docs/kernels.md", r"separate RUNs:\s+(\d+ \+ \d+) cycles", KERN,
          lambda d: (KROW("gemv_t (tree, x diag)")(d)["cycles"], KROW("rank1 (alpha, u/v diag)")(d)["cycles"]),
          "{0} + {1}"),
    Quote("docs/kernels.md", r"the power model (\d+) GFLOPS/W in the compared scope", POWER,
          PROW("fused GEMV^T + rank-1 256x256"), lambda r: f"{r['GFLOPS/W compared scope']}"),
    # one after the other, on the same FLOPs: the harmonic mean of the two
    Quote("docs/kernels.md", r"one after the other give (\d+) \(", POWER,
          lambda d: 2 / (1 / PROW("GEMV^T 256x256")(d)["GFLOPS/W compared scope"]
                         + 1 / PROW("rank-1 256x256")(d)["GFLOPS/W compared scope"]), "{:.0f}"),
    Quote("docs/kernels.md", r"give \d+ \((\d+ and \d+) apart", POWER,
          lambda d: (PROW("GEMV^T 256x256")(d)["GFLOPS/W compared scope"],
                     PROW("rank-1 256x256")(d)["GFLOPS/W compared scope"]), "{0} and {1}"),
    *[Quote("docs/kernels.md", rf"`b = {b}`: (?:blocks\s+)?{blk},\s+(\d+ cycles \(\S+ %\))", KERN, KROW(k),
            lambda r: f"{r['cycles']} cycles ({r['MAC util %']:.1f} %)")
      for b, blk, k in (("4", "16 x 1", "gemm b=4 (block 16x1)"), ("16", "2 x 4", "gemm b=16 (block 2x4)"),
                        ("32", r"1 x 8", "gemm b=32 (block 1x8)"))],
    Quote("docs/kernels.md", r"here each of the three is above (\d+) % on its own", KERN,
          lambda d: min(KROW(k)(d)["MAC util %"] for k in ("gemv (tree, x diag)", "gemv_t (tree, x diag)",
                                                           "rank1 (alpha, u/v diag)")), lambda v: f"{math.floor(v)}"),
    Quote("docs/kernels.md", r"The GEMV's\s+(\S+) % loss is the tree reduction", KERN,
          KROW("gemv (tree, x diag)"), lambda r: f"{100 - r['MAC util %']:.1f}"),
]
