"""Quoted figures of the README, Table 2 and the power model (docs/power.md), chips and
collectives (docs/chip.md), hybrid chips (docs/hybrid.md), the design-space search
(docs/dse.md) and Table 2's cells in docs/simulators.md and docs/training.md.
``QUOTES`` is checked by ``tests/project/test_docs.py``."""

from __future__ import annotations

import re

from tests.project.quoting import (AREA_S, FAST_KERNELS, PAPER_CELL, PAPER_OK, RES, TECH, Cell, Quote, _load,
                                   _sram_share, get, schedule_bound, span)


QUOTES: list[Quote] = [
    # README.md
    Quote("README.md", r"fast model \(loop-level; (\d+-\d+)x cocotb", RES + "fast_model.json",
          lambda d: span(r["ratio cold"] for r in FAST_KERNELS(d)), "{0:.0f}-{1:.0f}"),
    Quote("README.md", r"of a kernel, (\d+-\d+)x\s+with its plans cached", RES + "fast_model.json",
          lambda d: span(r["ratio warm"] for r in FAST_KERNELS(d)), "{0:.0f}-{1:.0f}"),
    Quote("docs/training.md", r"\*\*([\d,]+) cycles per\s+step,\s+(\S+) % MAC utilization\*\* \([\d,]+ of [\d,]+\s+microcode",
          RES + "paper.json", lambda d: (lambda c: (f"{c['cycles']:,}", f"{c['mac_util'] * 100:.1f}"))(
              PAPER_CELL("large", "L", "cp")(d)), lambda v: v),
    Quote("docs/training.md", r"predicted \*\*([\d,]+) cycles per step\*\* \(the 1000-cycle host turnaround "
          r"included\), \*\*(\S+)\s+% MAC utilization\*\*", RES + "paper.json",
          lambda d: (lambda c: (f"{c['cycles']:,}", f"{c['mac_util'] * 100:.1f}"))(PAPER_CELL("large", "S", "mbgd")(d)),
          lambda v: v),
    Quote("docs/training.md", r"its pages loaded three ahead, below\): \*\*([\d,]+) cycles per step, (\S+) % MAC\s+"
          r"utilization\*\*; what is left on the critical core is mostly the scratchpad port \(([\d,]+)\s+cycles, "
          r"([\d,]+) of them exposed[\s\S]*?the DMA's stalls \(([\d,]+)\) and the microcode reloads \(([\d,]+)\)",
          RES + "paper.json", lambda d: (lambda c: (
              f"{c['cycles']:,}", f"{c['mac_util'] * 100:.1f}", f"{c['movement']['critical']['spad']['cycles']:,}",
              f"{c['movement']['critical']['spad']['exposed']:,}", f"{c['dma_stall_cycles_per_core']:,}",
              f"{c['movement']['critical']['ucode']['cycles']:,}"))(PAPER_CELL("large", "S", "sgd")(d)), lambda v: v),
    Quote("docs/training.md", r"large network's W2 and W4 of its four: ([\d,]+) cycles a step", RES + "paper.json",
          lambda d: f"{PAPER_CELL('large', 'L', 'mbgd')(d)['cycles']:,}"),
    Quote("docs/training.md", r"microcode, so the host LOADs images between RUNs every step: ([\d,]+) cycles",
          RES + "paper.json", lambda d: f"{PAPER_CELL('large', 'S', 'mbgd')(d)['microcode_load_cycles']:,}"),
    Quote("README.md", r"compared-scope figure is (\S+)x of the paper's", RES + "paper.json",
          lambda d: span((c["ratio"] for c in PAPER_OK(d)), 2), "{0:.2f}-{1:.2f}"),
    Quote("README.md", r"at S their MAC utilization\s+\((\d+-\d+) %\)", RES + "paper.json",
          lambda d: span(PAPER_CELL("small", "S", m)(d)["mac_util"] * 100 for m in ("sgd", "cp")),
          "{0:.0f}-{1:.0f}"),
    Quote("README.md", r"is under the reference design's \((>\d+ %)\)", RES + "paper.json",
          lambda d: PAPER_CELL("small", "S", "sgd")(d)["paper_mac_util"], lambda v: f">{v * 100:.0f} %"),
    Quote("README.md", r"local SRAM and scratchpads are (\d+) % of the PE", RES + "paper.json",
          lambda d: _sram_share(AREA_S(d)), lambda v: f"{v * 100:.0f}"),
    Quote("README.md", r"scratchpads and ring FIFOs (\S+ / \S+) mm\^2 at S / L", RES + "paper.json",
          lambda d: (d["area_mm2"]["S"]["ours"], d["area_mm2"]["L"]["ours"]), "{0:.1f} / {1:.1f}"),
    Quote("README.md", r"at S / L \(paper (\S+ / \S+)\)", RES + "paper.json",
          lambda d: (d["area_mm2"]["S"]["paper"], d["area_mm2"]["L"]["paper"]), "{0:.1f} / {1:.1f}"),
    Quote("README.md", r"microcode stores \((\S+) mm\^2 at S\)", RES + "paper.json",
          ("area_mm2", "S", "ucode"), "{:.1f}"),
    Quote("README.md", r"cap SGD and CP at (\S+ % and \S+) %", RES + "paper.json",
          lambda d: tuple(schedule_bound(PAPER_CELL("large", "S", m)(d))["bound"] * 100 for m in ("sgd", "cp")),
          "{0:.1f} % and {1:.1f}"),
    Quote("README.md", r"issue every other cell at (\d+-\d+) %", RES + "paper.json",
          lambda d: span(b["bound"] * 100 for b in map(schedule_bound, d["cells"]) if b["binding"] == "FPU issue"),
          "{0:.0f}-{1:.0f}"),
    Quote("README.md", r"caps only the large net's\s+SGD at S, at (\S+) %", RES + "paper.json",
          lambda d: PAPER_CELL("large", "S", "sgd")(d)["arch_bound"]["bound"] * 100, "{:.1f}"),
    Quote("docs/simulators.md", r"its SGD is capped at\s+\*\*(\S+) %\*\*", RES + "paper.json",
          lambda d: PAPER_CELL("large", "S", "sgd")(d)["arch_bound"]["bound"] * 100, "{:.1f}"),
    Quote("docs/simulators.md", r"need a port of at least (\S+ and \S+) values a cycle", RES + "paper.json",
          lambda d: tuple(PAPER_CELL("large", "S", m)(d)["arch_bound"]["port_words_needed"] for m in ("sgd", "cp")),
          "{0:.1f} and {1:.1f}"),
]



# docs/simulators.md, "The bound on a cell's utilization": each Table 2 cell's MAC
# utilization and its bound from paper.json
_BOUND_ROWS = {f"{n} net, {c}, {name}": (n, c, m) for n, c in (("small", "S"), ("large", "S"), ("large", "L"))
               for m, name in (("sgd", "SGD"), ("cp", "CP"), ("mbgd", "minibatch GD"))}
QUOTES += [q for row, (n, c, m) in _BOUND_ROWS.items() for q in (
    Quote("docs/simulators.md", Cell("| cell | MAC util. | bound (busiest resource)", row, "MAC util."),
          RES + "paper.json", lambda d, n=n, c=c, m=m: PAPER_CELL(n, c, m)(d)["mac_util"] * 100, "{:.1f} %"),
    Quote("docs/simulators.md", Cell("| cell | MAC util. | bound (busiest resource)", row, "bound (busiest resource)"),
          RES + "paper.json", lambda d, n=n, c=c, m=m: schedule_bound(PAPER_CELL(n, c, m)(d)),
          lambda b: f"{b['bound'] * 100:.1f} % ({b['binding']})"))]


# docs/training.md, CP of the large network at S: the Table 2 cell
_LCP = PAPER_CELL("large", "S", "cp")
QUOTES += [
    Quote("docs/training.md", r"64-transfer DMA queue of the off-chip cells: \*\*([\d,]+) cycles", RES + "paper.json",
          lambda d: _LCP(d)["cycles"], "{:,}"),
    Quote("docs/training.md", r"cycles\s+per step, (\S+) %\*\* \(with a 16-transfer", RES + "paper.json",
          lambda d: _LCP(d)["mac_util"] * 100, "{:.1f}"),
    Quote("docs/training.md", r"they issue at once\s+and ([\d,]+) stall it", RES + "paper.json",
          lambda d: _LCP(d)["dma_stall_cycles_per_core"], "{:,}"),
    Quote("docs/training.md", r"of its DMA engine's ([\d,]+) busy cycles", RES + "paper.json",
          lambda d: _LCP(d)["dma_busy_cycles_per_core"], "{:,}"),
    Quote("docs/training.md", r"and out \(([\d,]+ cycles, \d+) % of the step\)", RES + "paper.json",
          lambda d: (_LCP(d)["movement"]["critical"]["spad"]["cycles"],
                     _LCP(d)["movement"]["critical"]["spad"]["cycles"] / _LCP(d)["cycles"] * 100), "{0:,} cycles, {1:.0f}"),
    Quote("docs/training.md", r"bounds the cell at (\S+) %", RES + "paper.json",
          lambda d: schedule_bound(_LCP(d))["bound"] * 100, "{:.1f}"),
]


# docs/power.md, "Power caps": the benchmark's table
PCAP = RES + "power_cap.json"
_PCAP_COLS = (("cap (W)", "{:.2f}"), ("uncapped samples/s", "{:,}"), ("capped samples/s", "{:,}"),
              ("capped: largest window (W)", "{:.2f}"), ("naive samples/s", "{:,}"),
              ("naive: largest window (W)", "{:.2f}"), ("capped / naive", "{:.2f}"), ("bound samples/s", "{:,}"))
QUOTES += [
    Quote("docs/power.md", Cell("| method | window (cycles) | cap (W)", (m, f"{w:,}"), col), PCAP,
          lambda d, m=m, w=w, col=col: next(r for r in d["rows"] if r["method"] == m
                                            and r["window (cycles)"] == w)[col], fmt)
    for m, w in (("SGD", 10_000), ("minibatch GD (b = 16)", 200_000), ("CP", 50_000))
    for col, fmt in _PCAP_COLS
] + [Quote("docs/power.md", r"at S the leakage alone is (\S+) W", PCAP, lambda d: d["cases"][0]["leakage_watts"],
           "{:.2f}"),
     Quote("docs/power.md", r"against the bound's ([\d,]+)\.", PCAP,
           lambda d: round(next(c for c in d["cases"] if c["method"] == "cp")["bound_step_cycles"]), "{:,}")]

# docs/hybrid.md, "Measured": the hybrid benchmark's table, the model's error, the savings
HYB = RES + "hybrid.json"
_HYB_COLS = (("cycles", "cycles"), ("samples/s", "samples/s"), ("uJ per sample, everything", "uJ/sample everything"),
             ("compared", "uJ/sample compared"))
_HYB_ROWS = (  # (the page's first cells, the JSON row's chip prefix, compiler prefix, placement or None)
    (("hybrid 2 S + 2 L (55.6 mm2), scheduled", "`1:2,1:2,1:2,1` (split)"), "hybrid", "layers split", "1:2,1:2,1:2,1"),
    (("hybrid 2 S + 2 L, not chosen", "`1:2,1:2,1:2,0` (split, output on S)"), "hybrid", "layers split",
     "1:2,1:2,1:2,0"),
    (("hybrid 2 S + 2 L, not chosen", "`1,1,1,1` (every layer on one L core)"), "hybrid", "layers on", "1,1,1,1"),
    (("hybrid 2 S + 2 L, not chosen", "`1,1,1,0`"), "hybrid", "layers on", "1,1,1,0"),
    (("hybrid 2 S + 2 L, not chosen", "`1:2,0:2,1:2,1` (split, the second layer paged on the S cores)"), "hybrid",
     "layers split", "1:2,0:2,1:2,1"),
    (("16 x S (+5.1 % area), SGD across cores",), "16 x S", "SGD across", None),
    (("2 x L (-13.1 % area), layers on cores",), "2 x L", "layers on", None),
    (("2 x L (-13.1 % area), SGD across cores",), "2 x L", "SGD across", None),
)


def _hyb_row(d, chip, comp, pl):
    return next(r for r in d["rows"] if r["chip"].startswith(chip) and r["compiler"].startswith(comp)
                and (pl is None or r["placement"] == pl))


QUOTES += [
    Quote("docs/hybrid.md", Cell("| chip | placement | cycles", row if len(row) > 1 else row[0], col), HYB,
          lambda d, chip=chip, comp=comp, pl=pl, key=key: _hyb_row(d, chip, comp, pl)[key], "{}")
    for row, chip, comp, pl in _HYB_ROWS for col, key in _HYB_COLS
] + [
    Quote("docs/hybrid.md", r"error on the chosen placement: cycles (\S+) %, energy (\S+) %\. On the split", HYB,
          lambda d: (100 * d["hybrid"]["model_cycles_err"], 100 * d["hybrid"]["model_energy_err"]),
          lambda v: (f"{v[0]:+.1f}", f"{v[1]:+.1f}")),
    Quote("docs/hybrid.md", r"\*\*(\S+) % against 16 x S with SGD across cores", HYB,
          lambda d: 100 * d["equal_throughput_saving"][0]["saving"], "{:+.1f}"),
    Quote("docs/hybrid.md", r"\*\*(\S+) % against 2 x L with every layer on one core", HYB,
          lambda d: 100 * d["equal_throughput_saving"][1]["saving"], "{:+.1f}"),
]

# docs/hybrid.md, "Measured: 784-2500-...": the large network's table, errors and savings
_HYB_LARGE_ROWS = (  # (the page's first cells, the JSON row's chip prefix, compiler prefix)
    (("hybrid 2 S + 8 L (200.47 mm2), scheduled", "`1:8,1:8,1:8,1:8,1:8,1`"), "large net: hybrid 2 S + 8 L",
     "layers split"),
    (("hybrid 32 S + 4 L (hetero-L), scheduled", "`1:4,0:32,1:4,1:4,0:32,1`"), "large net: hybrid 32 S + 4 L",
     "layers split"),
    (("54 x S (-1.6 % area), SGD across cores",), "large net: 54 x S", "SGD across"),
    (("8 x L (-3.6 % area), SGD across cores",), "large net: 8 x L", "SGD across"),
)
_LARGE = lambda d: d["large_network"]                          # noqa: E731
QUOTES += [
    Quote("docs/hybrid.md", Cell("| large-network chip | placement | cycles", row if len(row) > 1 else row[0], col),
          HYB, lambda d, chip=chip, comp=comp, key=key: _hyb_row(d, chip, comp, None)[key], "{}")
    for row, chip, comp in _HYB_LARGE_ROWS for col, key in _HYB_COLS
] + [
    Quote("docs/hybrid.md", r"error on the chosen placement: cycles (\S+) %, energy (\S+) %\. On hetero-L's:\n"
          r"(\S+) % and (\S+) %", HYB,
          lambda d: tuple(100 * r[k] for r in (_LARGE(d)["hybrid"], _LARGE(d)["others"][0])
                          for k in ("model_cycles_err", "model_energy_err")),
          lambda v: tuple(f"{x:+.1f}" for x in v)),
    Quote("docs/hybrid.md", r"\*\*(\S+) % against 54 x S with SGD across cores", HYB,
          lambda d: 100 * _LARGE(d)["equal_throughput_saving"][0]["saving"], "{:+.1f}"),
    Quote("docs/hybrid.md", r"a slower chip \((\d+) samples/s\)\. Its\s+54 cores leak (\d+) uJ per sample over its "
          r"(\d+) cycles, its control costs (\d+) uJ[\s\S]*?from the scratchpad\s+\((\d+) uJ\)", HYB,
          lambda d: (lambda r: (f"{r['samples_per_s']:.0f}", *(f"{r['energy_pj_by_category'][k] / 1e6:.0f}" for k in
                                                               ("leakage",)), str(r["cycles"]),
                                *(f"{r['energy_pj_by_category'][k] / 1e6:.0f}" for k in ("control", "spad"))))(
              _LARGE(d)["single_kind"][0]["sgd_across_cores"]), lambda v: v),
    Quote("docs/hybrid.md", r"the hybrid loses: \*\*(\S+) %\*\*", HYB,
          lambda d: 100 * _LARGE(d)["faster_single_kind"][0]["saving"], "{:+.1f}"),
    Quote("docs/hybrid.md", r"at (\S+) times its samples/s", HYB,
          lambda d: _LARGE(d)["faster_single_kind"][0]["throughput_ratio"], "{:.2f}"),
]


PAPER_FIGURE = lambda net, config, method: (lambda d: PAPER_CELL(net, config, method)(d)["paper_gflops_w"])
STATEMENTS = {  # docs/power.md's rows: the reference design's statements and the cell each one is about
    "small net at S, SGD: {} GFLOPS/W, memory about 1.5x FPU": ("small", "S", "sgd"),
    "small net at S, CP: {} GFLOPS/W, memory about even": ("small", "S", "cp"),
    "large net at L, CP: {} GFLOPS/W, memory about even": ("large", "L", "cp"),
}


def _statement_quotes():
    out = []
    for label, c in STATEMENTS.items():
        figure = PAPER_FIGURE(*c)(_load(RES + "paper.json"))
        row = label.format(figure)
        out += [
            Quote("docs/power.md", r"\| " + re.escape(label).replace(r"\{\}", r"(\d+)"), RES + "paper.json",
                  PAPER_FIGURE(*c)),
            Quote("docs/power.md", Cell("FPU pJ per FLOP", row, "pJ per FLOP"), RES + "paper.json",
                  PAPER_FIGURE(*c), lambda g: f"{1000 / g:.2f}"),
            Quote("docs/power.md", Cell("FPU pJ per FLOP", row, "FPU pJ per FLOP"), RES + "paper.json",
                  lambda d, head=row.split(" GFLOPS/W")[0]: get(d, ("convention", "implied_pj_per_flop"))[
                      next(k for k in d["convention"]["implied_pj_per_flop"] if k.startswith(head))],
                  "{:.2f}"),
        ]
    return out


def _tech(key, sub=None):
    return lambda d: d[key]["value"] if sub is None else d[key][sub]["value"]


QUOTES += [
    Quote("docs/dse.md", r"Over 8 seeds, it found the optimum each time \(worst (\S+) of it\)", RES + "dse.json",
          ("heuristic_min_ratio",), "{:.1f}"),
    Quote("docs/dse.md", r"asking (\d+)-\d+ points", RES + "dse.json",
          lambda d: min(r["heuristic evaluations"] for r in d["rows"]), "{}"),
    Quote("docs/dse.md", r"asking \d+-(\d+) points", RES + "dse.json", ("heuristic_max_evaluations",), "{}"),
    Quote("docs/dse.md", r"points \((\S+) on average\)", RES + "dse.json", ("heuristic_mean_evaluations",), "{:.1f}"),
    Quote("docs/dse.md", r"random search needs (\d+)-\d+ points", RES + "dse.json",
          lambda d: min(r["random evaluations to reach 2 %"] for r in d["rows"]), "{}"),
    Quote("docs/dse.md", r"random search needs \d+-(\d+) points", RES + "dse.json",
          lambda d: max(r["random evaluations to reach 2 %"] for r in d["rows"]), "{}"),
    Quote("docs/dse.md", r"The heuristic asks (\d+) of \d+ points", RES + "dse.json",
          ("small_net_within_S_area", "heuristic_evaluations"), "{}"),
    Quote("docs/dse.md", r"with minibatch GD, (\S+)x the throughput", RES + "dse.json",
          ("small_net_within_S_area", "gain_over_S_best_method"), "{:.2f}"),
    Quote("docs/dse.md", r"MAC utilization is higher too \((\S+) % against (\S+) %\)", RES + "dse.json",
          lambda d: tuple(re.findall(r"(\d+\.\d)%", d["small_net_within_S_area"]["why"])[:2]), lambda v: v),
    Quote("docs/dse.md", r"500, 1000 and 2000 MHz give (\d+), (\d+) and (\d+) samples/s/W", RES + "dse.json",
          lambda d: tuple(f"{r['throughput_per_tdp']:.0f}" for r in _sweep(d, "clock_mhz")), lambda v: v),
    Quote("docs/dse.md", r"grows less than the clock \((\S+), (\S+) and (\S+) W\)", RES + "dse.json",
          lambda d: tuple(f"{r['tdp_w']:.2f}" for r in _sweep(d, "clock_mhz")), lambda v: v),
    Quote("docs/dse.md", r"changes the step's cycles by at most (\S+) %", RES + "dse.json",
          lambda d: _sweep_span(d, "cycles"), "{:.1f}"),
    Quote("docs/dse.md", r"and throughput per TDP by at most (\S+) %", RES + "dse.json",
          lambda d: _sweep_span(d, "throughput_per_tdp"), "{:.1f}"),
]


def _large(d, *path):
    return get(d["large_net_within_S_area"], path)


QUOTES += [
    Quote("docs/dse.md", r"within S's area with its DMA engines\s+\((\S+) mm\^2\)", RES + "dse.json",
          lambda d: _large(d, "limits", "area_mm2"), "{:.1f}"),
    Quote("docs/dse.md", r"S with its best method, minibatch GD, reaches (\d+) samples/s/W", RES + "dse.json",
          lambda d: _large(d, "S", "throughput_per_tdp"), "{:.0f}"),
    Quote("docs/dse.md", r"its SGD and CP cells of Table 2 reach (\d+) and (\d+)", RES + "dse.json",
          lambda d: tuple(f"{_large(d, 'S_other_methods_from_paper_json', m, 'throughput_per_w'):.0f}"
                          for m in ("sgd", "cp")), lambda v: v),
    Quote("docs/dse.md", r"The heuristic \(seed 0\) measures (\d+) points", RES + "dse.json",
          lambda d: _large(d, "heuristic_evaluations"), "{}"),
    Quote("docs/dse.md", r"scratchpad each, reaches (\S+)x S's throughput per TDP", RES + "dse.json",
          lambda d: _large(d, "gain_over_S_best_method"), "{:.2f}"),
    Quote("docs/dse.md", r"those LOADs are (\d+) % of S's step against (\d+) %", RES + "dse.json",
          lambda d: tuple(f"{_large(d, k, 'phases', 'microcode') * 100:.0f}" for k in ("S", "best")), lambda v: v),
    Quote("docs/dse.md", r"control (\S+) W against (\S+) W", RES + "dse.json",
          lambda d: tuple(f"{_large(d, k, 'watts_by_block', 'control'):.2f}" for k in ("best", "S")),
          lambda v: v),
    Quote("docs/dse.md", r"stalls on DMA \((\d+) against (\d+) cycles a core; memory (\d+) % of the step against "
          r"(\d+) %\)", RES + "dse.json",
          lambda d: tuple(str(_large(d, k, "dma_stall_cycles_per_core")) for k in ("best", "S"))
          + tuple(f"{_large(d, k, 'phases', 'memory') * 100:.0f}" for k in ("best", "S")), lambda v: v),
    Quote("docs/dse.md", r"its MAC utilization is (\S+) % against S's (\S+) %", RES + "dse.json",
          lambda d: tuple(f"{_large(d, k, 'mac_utilization') * 100:.1f}" for k in ("best", "S")), lambda v: v),
    Quote("docs/dse.md", r"\((\d+) against (\d+) samples/s at (\S+) W against (\S+) W", RES + "dse.json",
          lambda d: tuple(f"{_large(d, k, 'throughput'):.0f}" for k in ("best", "S"))
          + tuple(f"{_large(d, k, 'tdp_w'):.2f}" for k in ("best", "S")), lambda v: v),
]


def _sweep(d, axis):
    return [r for r in d["clock_latency_sweep"]["rows"] if r["axis"] == axis]


def _sweep_span(d, key):
    """The largest change of ``key`` over the FP-latency sweeps, in % of the first value."""
    return max(100 * abs(r[key] / rows[0][key] - 1) for rows in (_sweep(d, "mul_latency"), _sweep(d, "add_latency"))
               for r in rows)
QUOTES += _statement_quotes() + [
    Quote("docs/power.md", r"Their mean, \*\*(\S+) pJ per FLOP\*\*", RES + "paper.json",
          ("convention", "fpu_pj_per_flop")),
    Quote("docs/power.md", r"Their mean, \*\*(\S+) pJ per FLOP\*\*", TECH, _tech("fpu_pj_per_flop", "binary16")),
    Quote("docs/power.md", r"the FPU-only ceiling is then (\d+) GFLOPS/W", RES + "paper.json",
          ("convention", "fpu_only_ceiling_gflops_w"), "{:.0f}"),
    Quote("docs/power.md", r"it lowers our compared-scope figures by (\d+-\d+) %", RES + "paper.json",
          lambda d: span(100 * (1 - c["gflops_w_table1_fpu"] / c["gflops_w"]) for c in PAPER_OK(d)),
          "{0:.0f}-{1:.0f}"),
    # 2.63 pJ per multiply-add: the FPU at 1.315 pJ per FLOP, memory the rest of each statement's total
    Quote("docs/power.md", r"put memory at (\S+)x the FPU energy", RES + "paper.json",
          lambda d: span(((1000 / PAPER_FIGURE(*c)(d) - 1.315) / 1.315 for c in STATEMENTS.values()), 1),
          "{0:.1f}-{1:.1f}"),
    *[Quote("docs/power.md", Cell("memory / FPU, ours", row, "memory / FPU, ours"), RES + "paper.json",
            lambda d, m=m: PAPER_CELL("small", "S", m)(d)["memory_over_fpu"], "{:.2f}")
      for row, m in (("SGD", "sgd"), ("CP", "cp"), ("minibatch GD (b = 16)", "mbgd"))],
    Quote("docs/power.md", r"\(512 PEs in 32 cores, (\S+) mm\^2\)", RES + "paper.json", ("area_mm2", "S", "paper")),
    Quote("docs/power.md", r"\(2048 PEs in 8\s+cores, (\S+) mm\^2\)", RES + "paper.json", ("area_mm2", "L", "paper")),
    Quote("docs/power.md", r"both fit (\S+) mm\^2 per PE", RES + "paper.json",
          lambda d: (d["area_mm2"]["S"]["paper"] - 32 * 1.948) / 512, "{:.4f}"),
    Quote("docs/power.md", r"per PE \+ (\S+) mm\^2 \(the 512 KB scratchpad\)", TECH, _tech("spad_area_mm2_per_512kib")),
    Quote("docs/power.md", r"so the PE logic is (\S+ - \S+ - \S+ - \S+ = \S+) mm\^2", TECH,
          lambda d: ((d["pe_logic_area_mm2"]["value"] + d["fpu_area_mm2"]["binary16"]["value"]
                      + d["local_sram_area_mm2_per_16kib"]["value"] + d["rf_area_mm2_per_16x16b"]["value"]),
                     d["fpu_area_mm2"]["binary16"]["value"], d["local_sram_area_mm2_per_16kib"]["value"],
                     d["rf_area_mm2_per_16x16b"]["value"], d["pe_logic_area_mm2"]["value"]),
          "{0:.4f} - {1} - {2} - {3} = {4}"),
    Quote("docs/power.md", r"and ring FIFOs come to (\S+ / \S+) mm\^2 at S / L", RES + "paper.json",
          lambda d: (d["area_mm2"]["S"]["ours"], d["area_mm2"]["L"]["ours"]), "{0:.1f} / {1:.1f}"),
    Quote("docs/power.md", r"with the (\S+)-word store", RES + "paper.json",
          ("area_breakdown_mm2", "S", "ucode_words_per_core"), "{:,}"),
    Quote("docs/power.md", r"cells needs, (\S+) mm\^2 more", RES + "paper.json", ("area_mm2", "S", "ucode"), "{:.1f}"),
    Quote("docs/power.md", r"scratchpads are (\d+) % of\s+configuration S's", RES + "paper.json",
          lambda d: _sram_share(AREA_S(d)), lambda v: f"{v * 100:.0f}"),
    # the 45 nm table: every value is an entry of sim/tech/45nm.json
    *[Quote("docs/power.md", Cell("| entry | value | source |", row, "value"), TECH, f, fmt) for row, f, fmt in (
        ("FPU, binary16", lambda d: (d["fpu_pj_per_flop"]["binary16"]["value"], d["fpu_area_mm2"]["binary16"]["value"]),
         "{0} pJ per FLOP, {1} mm^2"),
        ("FPU, bfloat16", lambda d: (d["fpu_pj_per_flop"]["bfloat16"]["value"], d["fpu_area_mm2"]["bfloat16"]["value"]),
         "{0} pJ per FLOP, {1} mm^2"),
        ("FPU, binary32", lambda d: (d["fpu_pj_per_flop"]["binary32"]["value"], d["fpu_area_mm2"]["binary32"]["value"]),
         "{0} pJ per FLOP, {1} mm^2"),
        ("FLOPs per FPU issue", _tech("flops_per_fpu_issue"), "{}"),
        ("local SRAM", lambda d: (d["local_sram_pj_per_16b"]["value"], d["local_sram_area_mm2_per_16kib"]["value"]),
         "{0} pJ per 16-bit access; {1} mm^2 per 16 KB"),
        ("SRAM bank-size scaling", lambda d: (d["local_sram_ref_bank_bytes"]["value"] // 1024,
                                              d["local_sram_size_exponent"]["value"]),
         "reference bank {0} KB, exponent {1}"),
        ("scratchpad", lambda d: (d["spad_pj_per_16b"]["value"], d["spad_area_mm2_per_512kib"]["value"]),
         "{0:g} pJ per 16-bit access; {1} mm^2 per 512 KB"),
        ("register file", _tech("rf_pj_per_16b"), "{} pJ per 16-bit access"),
        ("register file area", _tech("rf_area_mm2_per_16x16b"), "{} mm^2 per 16 x 16 bits"),
        ("PE logic area", _tech("pe_logic_area_mm2"), "{} mm^2"),
        ("wires", _tech("wire_pj_per_bit_mm"), "{} pJ per bit per mm"),
        ("microcode fetch", lambda d: (d["ucode_pj_per_bit"]["value"], d["ucode_ref_bytes"]["value"] // 1024),
         "{0:.3f} pJ per bit at {1} KB"),
        ("microcode area", _tech("ucode_area_mm2_per_16kib"), "{} mm^2 per 16 KB"),
        ("micro-op switching, broadcast length",
         lambda d: (d["uop_switching_fraction"]["value"], d["uop_wire_core_sides"]["value"]),
         "{0} of the bits, {1} core sides"),
        ("leakage, logic", _tech("leakage_mw_per_mm2_logic"), "{} mW/mm^2"),
        ("leakage, SRAM", _tech("leakage_mw_per_mm2_sram"), "{} mW/mm^2 (about 0.2 mW per KB)"),
    )],
]

RING_S = lambda name, key, m=64: (lambda d: get(d, ("rows", {"cores": 32, "collective": name,
                                                             "m (beats/core)": m}, key)))
CHIP_SGD_S = lambda d: get(d, ("cases", {"preset": "S", "backward": "auto", "loss": "softmax_ce",
                                        "sizes": [784, 500, 500, 500, 10]}))
CP_S = lambda d, loss="softmax_ce", backward="auto", batch=1, sizes=(784, 500, 500, 500, 10), preset="S", swap=True: get(
    d, ("cases", {"preset": preset, "backward": backward, "loss": loss, "batch": batch, "sizes": list(sizes),
                  "page_swap": swap}))

QUOTES += [
    Quote("docs/chip.md", r"groups of 8 cores: the shared run takes (\d+\.\d+)x less time", RES + "share.json",
          ("scenarios", "small networks", "throughput_ratio"), "{:.2f}"),
    Quote("docs/chip.md", r"aggregate samples/s (\d+\.\d+)x\), normalized progress", RES + "share.json",
          lambda d: d["scenarios"]["small networks"]["shared"]["samples_per_s"]
          / d["scenarios"]["small networks"]["time_sharing"]["samples_per_s"], "{:.2f}"),
    Quote("docs/chip.md", r"normalized progress (\d+\.\d+), at", RES + "share.json",
          ("scenarios", "small networks", "normalized_progress"), "{:.2f}"),
    Quote("docs/chip.md", r"at (\d+\.\d) GFLOPS/W against\s+time sharing's (\d+\.\d)", RES + "share.json",
          lambda d: (d["scenarios"]["small networks"]["shared"]["gflops_per_w"],
                     d["scenarios"]["small networks"]["time_sharing"]["gflops_per_w"]),
          lambda v: (f"{v[0]:.1f}", f"{v[1]:.1f}")),
    Quote("docs/chip.md", r"Per-job slowdowns (\d+\.\d+-\d+\.\d+):", RES + "share.json",
          lambda d: span((j["slowdown"] for j in d["scenarios"]["small networks"]["jobs"]), 2), "{0:.2f}-{1:.2f}"),
    Quote("docs/chip.md", r"equal steps: only (\d+\.\d+)x", RES + "share.json",
          ("scenarios", "with the paper's small network", "throughput_ratio"), "{:.2f}"),
    Quote("docs/chip.md", r"makespan; normalized progress (\d+\.\d+)\.", RES + "share.json",
          ("scenarios", "with the paper's small network", "normalized_progress"), "{:.2f}"),
    Quote("docs/chip.md", r"on 8 groups of 4 cores: (\d+) cycles of chip", RES + "tune.json",
          ("report", "partitioned", "cycles")),
    Quote("docs/chip.md", r"time against (\d+) for sequential tuning", RES + "tune.json",
          ("report", "sequential", "cycles")),
    Quote("docs/chip.md", r"for sequential tuning, (\d+\.\d+)x less", RES + "tune.json",
          ("report", "chip_time_ratio"), "{:.2f}"),
    Quote("docs/chip.md", r"less; (\d+) trials pruned", RES + "tune.json", ("report", "pruned")),
    Quote("docs/chip.md", r"reaches a test accuracy of (\d\.\d+), float64", RES + "tune.json",
          ("report", "best", "accuracy"), "{:.3f}"),
    Quote("docs/chip.md", r"with its hyperparameters\s+(\d\.\d+)\.", RES + "tune.json",
          ("report", "best", "accuracy_float64"), "{:.3f}"),
    Quote("docs/chip.md", r"SGD step takes (\d+) cycles on 4 cores and (\d+) at its best", RES + "tune.json",
          lambda d: next((str(r["step_cycles"]), str(r["exclusive_step_cycles"])) for r in d["report"]["records"]
                         if r["batch"] == 1), lambda v: v),
    Quote("docs/chip.md", r"a collective alone converges in (\d+-\d+) rounds", RES + "ring.json",
          lambda d: span(r["fast-model rounds"] for r in d["rows"] if r["cores"] == 32), "{0:.0f}-{1:.0f}"),
    Quote("docs/chip.md", r"on 32 cores:\s+(\d+\.\d-\d+\.\d) s of wall time", RES + "train_chip.json",
          lambda d: span((s["wall_s"] for s in CHIP_SGD_S(d)["steps"]), 1), "{0:.1f}-{1:.1f}"),
    Quote("docs/chip.md", r"the drain \((\d+) cycles for the SPMD collectives below\)", RES + "ring.json",
          lambda d: {r["cycles"] - r["collective slots"] for r in d["rows"]
                     if r["collective"] in ("pass-along", "all-gather", "reduce-scatter")}, lambda v: "/".join(map(str, v))),
    Quote("docs/chip.md", r"all-gather costs (\d+) slots", RES + "ring.json", RING_S("all-gather", "collective slots")),
    Quote("docs/chip.md", r"all-gather costs \d+ slots and its program (\d+) cycles", RES + "ring.json",
          RING_S("all-gather", "cycles")),
    Quote("docs/chip.md", r"the reduce-scatter (\d+) slots\s+and \d+ cycles", RES + "ring.json",
          RING_S("reduce-scatter", "collective slots")),
    Quote("docs/chip.md", r"the reduce-scatter \d+ slots\s+and (\d+) cycles", RES + "ring.json",
          RING_S("reduce-scatter", "cycles")),
    Quote("docs/chip.md", r"against the reference design's `\(c - 1\) m` = (\d+)\s", RES + "ring.json",
          RING_S("all-gather", "reference (c-1)m")),
    Quote("docs/chip.md", r"\(the input to the (\d+) cores of the first group", RES + "train_cp.json",
          lambda d: CP_S(d)["groups"][0]),
    Quote("docs/chip.md", r"activation gathers\) take (\d+) cycles of the tail RUN", RES + "train_cp.json",
          lambda d: CP_S(d)["runs"]["chains"]),
]
