"""Quoted figures of the FPGA flow (docs/fpga.md), its check that every decimal figure
there is a logged build, and the remaining quotes of other pages (the README's MNIST run,
the step-speed benchmark).
``QUOTES`` is checked by ``tests/project/test_docs.py``."""

from __future__ import annotations

import math
import re

from tests.project.quotes_results import _tech
from tests.project.quotes_sim import KERN, KROW
from tests.project.quotes_training import AUTO128, CASE, CHIP, CP, CYC, DIGITS, GRADE8, SEP128, SMALL_NET, TRAIN
from tests.project.quoting import RES, ROOT, TECH, Cell, Quote, _load, get, num


QUOTES: list = []

FPGA, SYNTH = RES + "fpga.json", RES + "pe_synth.json"
FPGA_ROWS = {  # docs/fpga.md's results table: (design, format, part) -> fpga.json row
    ("PE", "binary16", "LFE5U-85F-6"): ("PE", "binary16"),
    ("2x2 core", "binary16", "LFE5U-85F-6"): ("2x2 core", "binary16"),
    ("4x4 core", "binary16", "LFE5U-85F-6"): ("4x4 core", "binary16"),
    ("PE", "binary32", "LFE5U-85F-6"): ("PE", "binary32"),
    ("2x2 core", "binary32", "LFE5U-85F-6"): ("2x2 core", "binary32"),
    ("4x4 core", "binary32", "LFE5U-85F-6"): ("4x4 core", "binary32"),
    ("PE, preset `fpga`", "binary16", "LFE5U-85F-6"): ("PE (preset fpga)", "binary16"),
    ("2x2 core, preset `fpga`", "binary16", "LFE5U-85F-6"): ("2x2 core (preset fpga)", "binary16"),
    ("4x4 core, preset `fpga`", "binary16", "LFE5U-85F-6"): ("4x4 core (preset fpga)", "binary16"),
    ("PE, preset `fpga`", "binary16", "LFE5UM5G-85F-8"): ("PE (preset fpga)" + GRADE8, "binary16"),
    ("2x2 core, preset `fpga`", "binary16", "LFE5UM5G-85F-8"): ("2x2 core (preset fpga)" + GRADE8, "binary16"),
    ("4x4 core, preset `fpga`", "binary16", "LFE5UM5G-85F-8"): ("4x4 core (preset fpga)" + GRADE8, "binary16"),
}
FROW = lambda design, fmt="binary16": (lambda d: get(d, ("rows", {"design": design, "format": fmt})))


def _fmax(r) -> str:
    f = r["Fmax MHz (nextpnr)"]
    if f == "":
        return "-"
    if r["design"].startswith("PE"):
        return f"{f} (alone)"
    if r["design"].startswith("4x4 core (preset") and f >= r["constraint MHz"]:
        return f"{f}, timing met"
    return f"{f}"


def _path(r, *parts):
    """Figures of a row's critical path ``30.29 ns (11 logic levels, 18.22 ns routing): ...``."""
    m = re.match(r"([\d.]+) ns \(.*?([\d.]+) ns routing", r["critical path"])
    return m.group(1), m.group(2)


SYNTH_B16 = lambda d: get(d, ("rows", {"format": "binary16"}))
#: the logged build of the preset 4 x 4 core on speed grade 8 at 100 MHz with seed 2
GRADE8_SEED2 = lambda d: get([r for r in d["rows"] if "LFE5UM5G" in r["variant"]],
                             ({"seed": 2, "constraint MHz": 100.0},))

QUOTES += [
    *[Quote("docs/fpga.md", Cell("| design | format | part |", row, col), FPGA, lambda d, k=k, f=f: f(FROW(*k)(d)))
      for row, k in FPGA_ROWS.items() for col, f in (
          ("LUT4", lambda r: f"{r['LUT4']}"), ("FF", lambda r: f"{r['FF']}"), ("DP16KD", lambda r: f"{r['DP16KD']}"),
          ("MULT18X18D", lambda r: f"{r['MULT18X18D']}"), ("fits", lambda r: r["fits 85F"]),
          ("clock (MHz)", lambda r: "-" if r["constraint MHz"] == "" else f"{r['constraint MHz']:.0f}"),
          ("Fmax (MHz)", _fmax))],
    Quote("docs/fpga.md", r"`pe_1_0\.mul`, (\S+) ns,\s+(\S+) ns routing\)", FPGA, lambda d: _path(FROW("4x4 core")(d)),
          lambda v: v),
    Quote("docs/fpga.md", r"\(`sram\.mem_a` -> `sram\.rd_a_q_cls`, (\S+) ns,", FPGA, lambda d: _path(FROW("PE (preset fpga)")(d))[0]),
    Quote("docs/fpga.md", r"a block RAM's address pin \((\S+) ns\) on grade", FPGA,
          lambda d: _path(FROW("4x4 core (preset fpga)")(d))[0]),
    Quote("docs/fpga.md", r"stride's clock enable \((\S+) ns\) on\s+grade 8", FPGA,
          lambda d: _path(FROW("4x4 core (preset fpga)" + GRADE8)(d))[0]),
    Quote("docs/fpga.md", r"\(the default at (\d+) %\s+of the LUTs, the preset at (\d+) %\)", FPGA,
          lambda d: (FROW("4x4 core")(d)["LUT4 % (nextpnr)"], FROW("4x4 core (preset fpga)")(d)["LUT4 % (nextpnr)"]),
          lambda v: v),
    Quote("docs/fpga.md", r"does not fit\*\*: ([\d,]+) LUT4 \((\d+) %\) over", FPGA,
          lambda d: (lambda over: (f"{over:,}", f"{over / 83640 * 100:.0f}"))(
              int(re.search(r"\+(\d+)", FROW("4x4 core", "binary32")(d)["fits 85F"]).group(1))), lambda v: v),
    Quote("docs/fpga.md", r"routes at\s+(\S+) / (\S+) MHz \(seeds 1 / 2\) on the LFE5UM5G-85F-8", FPGA,
          lambda d: (f"{FROW('4x4 core (preset fpga)' + GRADE8)(d)['Fmax MHz (nextpnr)']}",
                     f"{GRADE8_SEED2(_load(RES + 'fpga_exec_stage.json'))['Fmax MHz (nextpnr, routed)']:.2f}"),
          lambda v: v),
    Quote("docs/fpga.md", r"default timing routes the 4 x 4\s+core at (\d+) MHz on grade 6", FPGA,
          lambda d: FROW("4x4 core")(d)["Fmax MHz (nextpnr)"], "{:.0f}"),
    Quote("docs/fpga.md", r"The default binary16 PE takes (\d+) LUT4 cells and (\d+) CCU2C carry cells \(what\s+"
                          r"`caterpillar synth --target ecp5` prints\), (\d+) LUT4 with each carry cell counted as\s+"
                          r"two, (\d+) flip-flops and (\d+) DPR16X4, (\d+) LUT4 as the device counts them", SYNTH,
          lambda d: tuple(str(SYNTH_B16(d)[k]) for k in ("LUT4 cells", "CCU2C", "LUT4", "FF", "LUT RAM (DPR16X4)",
                                                          "LUT4 incl. LUT RAM")), lambda v: v),
    Quote("docs/fpga.md", r"a preset PE ([\d,]+) LUT4 and ([\d,]+)\s+flip-flops", FPGA,
          lambda d: (f"{FROW('PE (preset fpga)')(d)['LUT4']:,}", f"{FROW('PE (preset fpga)')(d)['FF']:,}"), lambda v: v),
    Quote("docs/fpga.md", r"16 of\s+them and the sequencer fill (\d+) % of the LFE5U-85F", FPGA,
          lambda d: FROW("4x4 core (preset fpga)")(d)["LUT4 % (nextpnr)"]),
]

#: nextpnr's delay model of the two speed grades (LUT4, carry step, flip-flop clock-to-output),
#: quoted in docs/fpga.md's timing section: constants of its database, not measurements
NEXTPNR_MODEL = {"0.24", "0.14", "0.45", "0.28", "0.52", "0.31"}


def _json_numbers(*sources) -> set:
    """Every number in some JSON files, values and numbers inside strings, to 2 decimals."""
    out = set()

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            out.add(round(float(x), 2))
        elif isinstance(x, str):
            out.update(round(float(m.replace(",", "")), 2) for m in re.findall(r"\d[\d,]*(?:\.\d+)?", x))
    for s in sources:
        walk(_load(s))
    return out


def unlogged_fpga_figures(text: str) -> list[str]:
    """The clock, path-delay and LUT figures of docs/fpga.md (every number with a decimal
    point or a thousands separator)
    that are in no FPGA benchmark JSON: the results table, the experiment log
    (``fpga_exec_stage.json``, its rows with the command that rebuilds each), the
    out-of-context units, the timing-only experiments."""
    logged = _json_numbers(*(str(p.relative_to(ROOT)) for p in sorted((ROOT / RES).glob("fpga*.json"))))
    figures = r"(?<![\w.])(\d+\.\d+|\d{1,3}(?:,\d{3})+)(?![\w.])"      # 78.77, 60,679
    return [m.group(1) for m in re.finditer(figures, text)
            if m.group(1) not in NEXTPNR_MODEL and round(float(m.group(1).replace(",", "")), 2) not in logged]


QUOTES += [
    Quote("docs/fpga.md", r"default 4 x 4 core from \S+ to (\S+) MHz \(`benchmarks/results/fpga_pe_ff_copies\.json`\)",
          RES + "fpga_pe_ff_copies.json", ("fmax_mhz",)),
    Quote("docs/fpga.md", r"Out of context it routes at\s+(\S+) MHz \(`benchmarks/results/fpga_ooc_sequencer\.json`\)",
          RES + "fpga_ooc_sequencer.json", ("fmax_mhz",)),
    Quote("docs/fpga.md", r"the counter bank at (\S+)\s+\(`fpga_ooc_counters\.json`\)", RES + "fpga_ooc_counters.json",
          ("fmax_mhz",)),
    Quote("docs/fpga.md", r"A lone preset PE routes at (\S+) MHz \(the bench row\)", FPGA,
          lambda d: FROW("PE (preset fpga)")(d)["Fmax MHz (nextpnr)"]),
]

QUOTES += [
    Quote("docs/training.md", r"the GEMVs and rank-1 updates dominate \((\S+) %\s+and (\d+) % MAC utilization each\)", KERN,
          lambda d: (f"{KROW('gemv (tree, x diag)')(d)['MAC util %']:.1f}",
                     f"{KROW('rank1 (alpha, u/v diag)')(d)['MAC util %']:.0f}"), lambda v: v),
    Quote("docs/training.md", r"128 x 128 layer \((\d+) cycles, (\S+) %, for the", TRAIN,
          lambda d: (lambda s, f: (str(f - s), f"{(f / s - 1) * 100:.1f}"))(
              SEP128(d)[CYC], AUTO128(d)[CYC]),
          lambda v: v),
    Quote("docs/training.md", r"It is latency-bound: (\d+)\s+instructions", CHIP,
          lambda d: get(CASE(preset="S", sizes=SMALL_NET, loss="softmax_ce", backward="auto")(d),
                        ("breakdown_per_op", {"op": "softmax"}, "cycles"))),
    Quote("docs/training.md", r"reach\s+the accuracy of batch-1 SGD \((\d+-\d+) %\)", DIGITS,
          lambda d: (d["epochs"][-1]["test_accuracy"] * 100, max(e["test_accuracy"] for e in d["epochs"]) * 100),
          lambda v: f"{math.floor(v[0])}-{math.floor(v[1])}"),
    Quote("docs/training.md", r"\(the\s+reference design: over (\d+) %\), and reaches", CHIP, ("reference", "mac_utilization"),
          lambda v: f"{num(v) * 100:.0f}"),
    Quote("docs/training.md", r"\(195\) and CP \((\d+)\) figures at S", CP, ("reference", "gflops_per_w")),
]

QUOTES += [
    Quote("docs/kernels.md", r"for `256 x 256` identical \((\d+) cycles\)", KERN, KROW("gemv_t (tree, x diag)"),
          lambda r: f"{r['cycles']}"),
    Quote("docs/kernels.md", r"scheduled straight-line code: (\d+) instructions for 10 outputs", CHIP,
          lambda d: get(CASE(preset="S", sizes=SMALL_NET, loss="softmax_ce", backward="auto")(d),
                        ("breakdown_per_op", {"op": "softmax"}, "cycles"))),
    Quote("docs/kernels.md", r"the rank-1 update's (\d+) % is the", KERN,
          lambda d: 100 - KROW("rank1 (alpha, u/v diag)")(d)["MAC util %"], "{:.0f}"),
    Quote("docs/kernels.md", r"the GEMM's (\S+) % the stores after each", KERN,
          lambda d: 100 - KROW("gemm b=32 (block 1x8)")(d)["MAC util %"], "{:.1f}"),
    Quote("docs/power.md", r"\* \*\*The FPU costs (\S+) pJ per FLOP\*\*", TECH, _tech("fpu_pj_per_flop", "binary16")),
    Quote("docs/power.md", r"charged as two FLOPs \((\S+)\s+pJ\)", TECH,
          lambda d: d["fpu_pj_per_flop"]["binary16"]["value"] * d["flops_per_fpu_issue"]["value"], "{:.2f}"),
    Quote("README.md", r"reaches (\S+) % test accuracy beside float64's \S+ %", RES + "train_mnist.json",
          lambda d: d["final_test_accuracy"] * 100, "{:.1f}"),
    Quote("README.md", r"reaches \S+ % test accuracy beside float64's (\S+) %", RES + "train_mnist.json",
          lambda d: d["final_test_accuracy_float64"] * 100, "{:.1f}"),
    Quote("docs/simulators.md", r"runs at about ([\d,]+) cycles/s at `VERILATOR_OPT", RES + "rtl_stream.json",
          lambda d: round(d["cycles_per_s"]["replay"], -3), "{:,.0f}"),
    Quote("docs/simulators.md", r"and at\s+about ([\d,]+) cycles/s counting the memories", RES + "rtl_stream.json",
          lambda d: round(d["checked_cycles_per_s"]["replay"], -3), "{:,.0f}"),
]

STEP = RES + "step_speed.json"
STEP_L = lambda d: get(d, ("cases", {"preset": "L"}))
QUOTES += [
    Quote("docs/simulators.md", r"In CPU seconds of the\s+process: compile (\S+), weight load (\S+), run (\S+), golden check (\S+),",
          STEP, lambda d: tuple(STEP_L(d)["cpu_s"][k] for k in ("compile", "weight load", "run", "golden check")),
          lambda v: tuple(f"{x:.2f}" for x in v)),
    Quote("docs/simulators.md", r"golden check \S+, (\S+) s in all, and\s+(\S+) s of wall time", STEP,
          lambda d: (STEP_L(d)["total_cpu_s"], STEP_L(d)["total_wall_s"]), lambda v: tuple(f"{x:.2f}" for x in v)),
    Quote("docs/simulators.md", r"with the machine's load average at (\S+) \(2 cores", STEP,
          lambda d: STEP_L(d)["load_average_1min"][0], "{:.2f}"),
    Quote("docs/simulators.md", r"The goal of\s+(\S+) s is (met|not met)", STEP,
          lambda d: (d["goal_s"], "met" if STEP_L(d)["total_wall_s"] <= d["goal_s"] else "not met"),
          lambda v: (f"{v[0]:g}", v[1])),
    Quote("docs/simulators.md", r"the second step runs in (\S+) s of CPU", STEP,
          lambda d: STEP_L(d)["cpu_s"]["run, 2nd step"], "{:.2f}"),
    Quote("docs/simulators.md", r"Loading them costs a fresh process (\S+) s of CPU", STEP,
          ("kernels", "load", "cpu_s"), "{:.2f}"),
    Quote("docs/simulators.md", r"an empty cache, a fresh checkout\), (\S+) s\.", STEP,
          ("kernels", "first compile", "cpu_s"), "{:.2f}"),
]
