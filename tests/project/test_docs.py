"""The Markdown docs: relative links point at files and headings that exist, and every
measured figure they quote is the value of the JSON file it comes from (``QUOTES``).

Anchors follow GitHub's rule: the heading in lower case, punctuation but ``-`` and ``_``
dropped, spaces made ``-``. A moved or renamed section breaks links silently otherwise.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s#]*)(#[^)\s]+)?\)")


def anchor(heading: str) -> str:
    h = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def _docs() -> list[Path]:
    return sorted([*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "benchmarks").rglob("*.md")])


@lru_cache(maxsize=None)
def _prose(path: Path) -> str:
    """The page without its code blocks (no headings or links there), read once."""
    return re.sub(r"```.*?```", "", path.read_text(), flags=re.S)


@lru_cache(maxsize=None)
def _anchors(path: Path) -> frozenset[str]:
    return frozenset(anchor(line) for line in _prose(path).splitlines() if line.startswith("#"))


def broken_links(paths) -> list[str]:
    """``file: target`` for every relative link whose file or heading does not exist."""
    bad = []
    for doc in paths:
        for m in LINK.finditer(_prose(doc)):
            target, frag = m.group(1), m.group(2)
            if target.startswith(("http:", "https:", "mailto:")):
                continue
            dest = (doc.parent / target).resolve() if target else doc
            if not dest.exists():
                bad.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif frag and dest.suffix == ".md" and frag[1:] not in _anchors(dest):
                bad.append(f"{doc.relative_to(ROOT)}: {target}{frag} (no such heading)")
    return bad


def test_anchor_rule():
    assert anchor("## The execute stage (built: `ArchConfig.exec_stage`, preset `fpga`)") == \
        "the-execute-stage-built-archconfigexec_stage-preset-fpga"
    assert anchor("### nextpnr's timing-driven rip-up: 64 to 70 MHz") == "nextpnrs-timing-driven-rip-up-64-to-70-mhz"


def test_broken_links_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# Top\n## A section\n[ok](#a-section) [ok](b.md#b) "
                                   "[bad](#nothing) [gone](c.md) [bad2](b.md#x)\n")
    (tmp_path / "b.md").write_text("# B\n```\n# not a heading\n```\n")
    assert broken_links([tmp_path / "a.md"]) == ["a.md: #nothing (no such heading)", "a.md: c.md (no such file)",
                                                 "a.md: b.md#x (no such heading)"]


def test_docs_links_resolve():
    docs = _docs()
    assert len(docs) >= 10
    assert broken_links(docs) == []


def test_docs_have_one_title():
    """One ``# `` title per page (outside code blocks): sections are ``##`` and below."""
    for doc in _docs():
        titles = [line for line in _prose(doc).splitlines() if line.startswith("# ")]
        assert len(titles) <= 1, f"{doc.relative_to(ROOT)}: {len(titles)} titles: {titles[:3]}"


def test_readme_table2_is_the_benchmarks():
    """The README's Table 2 is exactly what benchmarks/results/paper.json gives
    (:func:`benchmarks.bench_paper.readme_table`), between its markers."""
    from benchmarks.bench_paper import readme_table

    text = (ROOT / "README.md").read_text()
    start, end = "<!-- table2: benchmarks/results/paper.json -->\n", "<!-- /table2 -->"
    assert start in text and end in text, "README.md has no Table 2 block"
    block = text.split(start, 1)[1].split(end, 1)[0]
    res = json.loads((ROOT / "benchmarks" / "results" / "paper.json").read_text())
    assert block == readme_table(res)


def test_readme_is_short():
    """The README stays an overview (at most 1,500 words, as `wc -w` counts them); the
    detail lives in docs/."""
    words = len((ROOT / "README.md").read_text().split())
    assert words <= 1500, f"README.md has {words} words; move detail to docs/"


# -- every measured figure a document quotes is a value of a JSON file -------------------------
#
# A ``Quote`` ties one figure of a document to the value it reports: the JSON file written by
# the benchmark (or the table of inputs) it comes from, the value's place there, and how the
# document writes it. ``test_quoted_figures_are_the_json_values`` fails when a document and
# its JSON disagree: a benchmark re-run that moved a figure, or a figure edited by hand.
# A figure whose place in the text or the JSON no longer exists fails too (the check goes
# with it, on purpose).

RES = "benchmarks/results/"
TECH = "sim/tech/45nm.json"


@dataclass(frozen=True)
class Cell:
    """A cell of a Markdown table: the table whose header line contains ``table``, the row
    whose first cell is ``row`` (exactly; a tuple: whose first cells are), the column
    headed ``col``."""
    table: str
    row: str | tuple
    col: str


@dataclass(frozen=True)
class Quote:
    """One figure of ``doc`` at ``at`` (a regex whose one group is the figure, matching
    exactly once in the page outside code blocks; several groups compare as a tuple with
    a tuple ``fmt`` result; or a table ``Cell``) that must read
    ``fmt`` applied to ``value`` of the JSON file ``source``: ``value`` is a key path (a str
    step is a key, an int an index, a dict selects the one list element with those fields)
    or a function of the loaded JSON. A tuple value fills ``fmt``'s fields in order."""
    doc: str
    at: str | Cell
    source: str
    value: tuple | Callable[[Any], Any]
    fmt: str | Callable[[Any], str] = "{}"


@lru_cache(maxsize=None)
def _load(source: str):
    return json.loads((ROOT / source).read_text())


def num(v) -> float:
    """A JSON figure as a number: ``5,122,306``, ``(27x)``, ``96.5%``, ``warm ns/cycle 939``."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    m = re.search(r"-?\d[\d,]*(?:\.\d+)?", str(v))
    if not m:
        raise ValueError(f"no number in {v!r}")
    return float(m.group(0).replace(",", ""))


def get(data, path):
    for step in path:
        if isinstance(step, dict):
            hits = [x for x in data if all(x.get(k) == v for k, v in step.items())]
            if len(hits) != 1:
                raise KeyError(f"{len(hits)} elements match {step}")
            data = hits[0]
        else:
            data = data[step]
    return data


def _split_row(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def table_cell(text: str, cell: Cell) -> str:
    """The text of ``cell`` in a page (tables outside code blocks)."""
    lines = text.splitlines()
    heads = [i for i, ln in enumerate(lines) if ln.startswith("|") and cell.table in ln
             and i + 1 < len(lines) and lines[i + 1].startswith("|-")]
    if len(heads) != 1:
        raise LookupError(f"{len(heads)} tables with a header containing {cell.table!r}")
    i = heads[0]
    cols = _split_row(lines[i])
    if cols.count(cell.col) != 1:
        raise LookupError(f"table {cell.table!r}: no single column {cell.col!r} in {cols}")
    rows = []
    for ln in lines[i + 2:]:
        if not ln.startswith("|"):
            break
        r = _split_row(ln)
        key = cell.row if isinstance(cell.row, tuple) else (cell.row,)
        if tuple(r[:len(key)]) == key:
            rows.append(r)
    if len(rows) != 1:
        raise LookupError(f"table {cell.table!r}: {len(rows)} rows {cell.row!r}")
    return rows[0][cols.index(cell.col)].replace("**", "")     # bold is presentation


def quoted(q: Quote, text: str) -> str:
    if isinstance(q.at, Cell):
        return table_cell(text, q.at)
    hits = re.findall(q.at, text)
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} matches of {q.at!r}")
    return hits[0]


def expected(q: Quote) -> str:
    data = _load(q.source)
    v = q.value(data) if callable(q.value) else get(data, q.value)
    if callable(q.fmt):
        return q.fmt(v)
    if isinstance(v, str) and q.fmt != "{}":
        v = num(v)
    return q.fmt.format(*v) if isinstance(v, tuple) else q.fmt.format(v)


def quote_errors(quotes, root: Path = ROOT) -> list[str]:
    bad = []
    for q in quotes:
        where = q.at if isinstance(q.at, str) else f"{q.at.table!r} / {q.at.row!r} / {q.at.col!r}"
        try:
            got = quoted(q, _prose(root / q.doc))
        except LookupError as e:
            bad.append(f"{q.doc}: {where}: {e}")
            continue
        try:
            want = expected(q)
        except (KeyError, IndexError, ValueError, TypeError, OSError) as e:
            bad.append(f"{q.doc}: {where}: {q.source}: {type(e).__name__}: {e}")
            continue
        if got != want:
            bad.append(f"{q.doc}: {where}: the page says {got!r}, {q.source} gives {want!r}")
    return bad


# helpers for values that several quotes share

def schedule_bound(cell: dict) -> dict:
    """:func:`sim.paper.schedule_bound` (imported when a quote needs it)."""
    from sim.paper import schedule_bound as bound
    return bound(cell)


def span(values, nd: int = 0) -> tuple:
    """(min, max) of some values, for a quoted range."""
    vs = [num(v) for v in values]
    return (round(min(vs), nd), round(max(vs), nd))


#: the 4x4 kernels the fast model's speed is compared with cocotb + Verilator on
FAST_KERNELS = lambda d: [r for r in d["rows"] if r["ratio cold"] not in ("-", "")]
PAPER_OK = lambda d: [c for c in d["cells"] if c["status"] == "ok"]
PAPER_CELL = lambda net, config, method: (lambda d: get(d, ("cells", {"net": net, "config": config,
                                                                       "method": method})))
AREA_S = lambda d: d["area_breakdown_mm2"]["S"]


def _sram_share(a):
    return (a["sram"] + a["spad"]) / (a["fpu"] + a["sram"] + a["rf"] + a["pe_logic"] + a["spad"])


QUOTES: list[Quote] = [
    # README.md
    Quote("README.md", r"fast model \(loop-level; (\d+-\d+)x cocotb", RES + "fast_model.json",
          lambda d: span(r["ratio cold"] for r in FAST_KERNELS(d)), "{0:.0f}-{1:.0f}"),
    Quote("README.md", r"of a kernel, (\d+-\d+)x\s+with its plans cached", RES + "fast_model.json",
          lambda d: span(r["ratio warm"] for r in FAST_KERNELS(d)), "{0:.0f}-{1:.0f}"),
    Quote("docs/training.md", r"\*\*([\d,]+) cycles per\s+step,\s+(\S+) % MAC utilization\*\* \([\d,]+ of [\d,]+\s+microcode",
          RES + "paper.json", lambda d: (lambda c: (f"{c['cycles']:,}", f"{c['mac_util'] * 100:.1f}"))(
              PAPER_CELL("large", "L", "cp")(d)), lambda v: v),
    Quote("README.md", r"compared-scope figure is (\S+)x of the paper's", RES + "paper.json",
          lambda d: span((c["ratio"] for c in PAPER_OK(d)), 2), "{0:.2f}-{1:.2f}"),
    Quote("README.md", r"at S their MAC utilization\s+\((\d+-\d+) %\)", RES + "paper.json",
          lambda d: span(PAPER_CELL("small", "S", m)(d)["mac_util"] * 100 for m in ("sgd", "cp")),
          "{0:.0f}-{1:.0f}"),
    Quote("README.md", r"is under the reference design's \((>\d+ %)\)", RES + "paper.json",
          lambda d: PAPER_CELL("small", "S", "sgd")(d)["paper_mac_util"], lambda v: f">{v * 100:.0f} %"),
    Quote("README.md", r"local SRAM and scratchpads are (\d+) % of the PE", RES + "paper.json",
          lambda d: _sram_share(AREA_S(d)), lambda v: f"{v * 100:.0f}"),
    Quote("README.md", r"and scratchpads (\S+ / \S+) mm\^2 at S / L", RES + "paper.json",
          lambda d: (d["area_mm2"]["S"]["ours"], d["area_mm2"]["L"]["ours"]), "{0:.1f} / {1:.1f}"),
    Quote("README.md", r"at S / L \(paper (\S+ / \S+)\)", RES + "paper.json",
          lambda d: (d["area_mm2"]["S"]["paper"], d["area_mm2"]["L"]["paper"]), "{0:.1f} / {1:.1f}"),
    Quote("README.md", r"microcode stores \((\S+) mm\^2 at S\)", RES + "paper.json",
          ("area_mm2", "S", "ucode"), "{:.1f}"),
    Quote("README.md", r"cap SGD and CP at (\S+ % and \S+) %", RES + "paper.json",
          lambda d: tuple(schedule_bound(PAPER_CELL("large", "S", m)(d))["bound"] * 100 for m in ("sgd", "cp")),
          "{0:.1f} % and {1:.1f}"),
    Quote("README.md", r"issue caps every cell at (\d+-\d+) %", RES + "paper.json",
          lambda d: span(b["bound"] * 100 for b in map(schedule_bound, d["cells"]) if b["binding"] == "FPU issue"),
          "{0:.0f}-{1:.0f}"),
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
    (("hybrid 2 S + 2 L (55.55 mm2), scheduled", "`1:2,1:2,1:2,1` (split)"), "hybrid", "layers split", "1:2,1:2,1:2,1"),
    (("hybrid 2 S + 2 L, not chosen", "`1:2,1:2,1:2,0` (split, output on S)"), "hybrid", "layers split",
     "1:2,1:2,1:2,0"),
    (("hybrid 2 S + 2 L, not chosen", "`1,1,1,1` (every layer on one L core)"), "hybrid", "layers on", "1,1,1,1"),
    (("hybrid 2 S + 2 L, not chosen", "`1,1,1,0`"), "hybrid", "layers on", "1,1,1,0"),
    (("hybrid 2 S + 2 L, not chosen", "`1:2,0:2,1:2,1` (split, the second layer paged on the S cores)"), "hybrid",
     "layers split", "1:2,0:2,1:2,1"),
    (("14 x S (-6.6 % area), SGD across cores",), "14 x S", "SGD across", None),
    (("2 x L (-13.3 % area), layers on cores",), "2 x L", "layers on", None),
    (("2 x L (-13.3 % area), SGD across cores",), "2 x L", "SGD across", None),
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
    Quote("docs/hybrid.md", r"\*\*(\S+) % against 14 x S with SGD across cores", HYB,
          lambda d: 100 * d["equal_throughput_saving"][0]["saving"], "{:+.1f}"),
    Quote("docs/hybrid.md", r"\*\*(\S+) % against 2 x L with every layer on one core", HYB,
          lambda d: 100 * d["equal_throughput_saving"][1]["saving"], "{:+.1f}"),
]

# docs/hybrid.md, "Measured: 784-2500-...": the large network's table, errors and savings
_HYB_LARGE_ROWS = (  # (the page's first cells, the JSON row's chip prefix, compiler prefix)
    (("hybrid 2 S + 8 L (200.32 mm2), scheduled", "`1:8,1:8,1:8,1:8,1:8,1`"), "large net: hybrid 2 S + 8 L",
     "layers split"),
    (("hybrid 32 S + 4 L (hetero-L), scheduled", "`1:4,0:32,1:4,1:4,0:32,1`"), "large net: hybrid 32 S + 4 L",
     "layers split"),
    (("54 x S (+0.1 % area), SGD across cores",), "large net: 54 x S", "SGD across"),
    (("8 x L (-3.7 % area), SGD across cores",), "large net: 8 x L", "SGD across"),
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
    Quote("docs/hybrid.md", r"the hybrid loses: \*\*(\S+) %\*\*", HYB,
          lambda d: 100 * _LARGE(d)["faster_single_kind"][0]["saving"], "{:+.1f}"),
    Quote("docs/hybrid.md", r"at (\S+) times its samples/s", HYB,
          lambda d: _LARGE(d)["faster_single_kind"][0]["throughput_ratio"], "{:.2f}"),
]


def test_quoted_figures_are_the_json_values():
    """Every quoted measured figure equals its JSON value as the page writes it."""
    assert quote_errors(QUOTES) == []

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
    Quote("docs/dse.md", r"MAC utilization is lower \((\S+) % against (\S+) %\)", RES + "dse.json",
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
    Quote("docs/power.md", r"arrays and scratchpads come to (\S+ / \S+) mm\^2 at S / L", RES + "paper.json",
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
CP_S = lambda d, loss="softmax_ce", backward="auto", batch=1, sizes=(784, 500, 500, 500, 10), preset="S": get(
    d, ("cases", {"preset": preset, "backward": backward, "loss": loss, "batch": batch, "sizes": list(sizes)}))

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


def test_summary_is_the_benchmark_jsons():
    """benchmarks/results/SUMMARY.md (where the README sends readers for every other figure)
    is what ``benchmarks.run`` writes from the JSON files: no table edited by hand or left
    behind by a benchmark re-run."""
    from benchmarks.run import summary

    assert (ROOT / RES / "SUMMARY.md").read_text() == summary(ROOT / RES)


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


def test_a_drifted_figure_fails(tmp_path):
    """The check catches a figure edited in the page, in a sentence and in a table, and a
    figure whose sentence is gone."""
    cases = (("docs/simulators.md", "(139-213x)", "(140-210x)"),
             ("docs/simulators.md", "| 24x / 213x |", "| 24x / 210x |"),
             ("docs/chip.md", "and its program 2001 cycles", "and its program 1987 cycles"),
             ("docs/chip.md", "all-gather costs 1987 slots", "all-gather takes 1987 slots"))
    for i, (doc, old, new) in enumerate(cases):
        text = (ROOT / doc).read_text()
        assert old in text
        root = tmp_path / str(i)          # a fresh page each time (pages are read once)
        (root / doc).parent.mkdir(parents=True)
        (root / doc).write_text(text.replace(old, new))
        mine = [q for q in QUOTES if q.doc == doc]
        assert quote_errors(mine, root=ROOT) == []
        assert quote_errors(mine, root=root), (doc, old)

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

TRAIN = RES + "train.json"
TR = lambda net, loss, backward: (lambda d: get(d, ("rows", {"network": net, "loss": loss,
                                                             "backward (layers 1..)": backward})))
CYC = "RUN cycles (measured = predicted)"
SEP128, AUTO128, FUSED128 = (TR("64-128-128-10", "softmax_ce", b) for b in ("separate: S/S", "auto: F/S", "fused: F/F"))
GC, GA = "GFLOPS/W compared scope", "GFLOPS/W everything"


def _step_change(sep, fus, tag):
    """``5370 -> 5412 (+0.8 %, softmax)`` from two train.json rows."""
    return lambda d: f"{sep(d)[CYC]} -> {fus(d)[CYC]} (+{(fus(d)[CYC] / sep(d)[CYC] - 1) * 100:.1f} %, {tag})"


def _epoch_row(r):
    return (f"{r['train_loss']:.4f}", f"{r['train_loss_float64']:.4f}", f"{r['test_accuracy'] * 100:.2f} %",
            f"{r['test_accuracy_float64'] * 100:.2f} %")


DIGITS, DIGITS_MSE = RES + "train_digits.json", RES + "train_digits_mse.json"
MB = RES + "train_mb.json"
MBR = lambda loss, b: (lambda d: get(d, ("rows", {"loss": loss, "batch": b})))
MB_DIGITS = lambda b: (lambda d: get(d, ("digits", {"batch": b})))


def _mb_epoch(d, b, epoch):
    e = MB_DIGITS(b)(d)["epochs"][epoch - 1]
    return (f"{e['test_accuracy'] * 100:.2f} % ({e['train_loss']:.4f})",
            f"{e['test_accuracy_float64'] * 100:.2f} % ({e['train_loss_float64']:.4f})")


QUOTES += [
    # one core: the fused backward step
    Quote("docs/training.md", r"never faster on a 4 x 4 core \(GEMV\^T (\S+) % and rank-1\s+(\d+) % vs (\S+) % fused",
          KERN, lambda d: (f"{KROW('gemv_t (tree, x diag)')(d)['MAC util %']:.1f}",
                           f"{KROW('rank1 (alpha, u/v diag)')(d)['MAC util %']:.0f}",
                           f"{KROW('fused gemv_t + rank1 (block 4)')(d)['MAC util %']:.1f}"), lambda v: v),
    Quote("docs/training.md", Cell("step cycles S -> F", "128 x 128 (64-128-128-10)", "step cycles S -> F"), TRAIN,
          _step_change(SEP128, AUTO128,
                       "softmax"), lambda v: v),
    Quote("docs/training.md", Cell("step cycles S -> F", "64 x 64 (64-64-64-10)", "step cycles S -> F"), TRAIN,
          _step_change(TR("64-64-64-10", "mse", "separate: S/S"), TR("64-64-64-10", "mse", "auto: F/S"), "MSE"),
          lambda v: v),
    Quote("docs/training.md", Cell("step cycles S -> F", "10 x 64 (64-64-10)", "step cycles S -> F"), TRAIN,
          _step_change(TR("64-64-10", "mse", "auto: S"), TR("64-64-10", "mse", "fused: F"), "MSE"), lambda v: v),
    Quote("docs/training.md", r"128 x 128 layer raises the step's figure from (\S+ to \S+)\s+\((\S+ to \S+)\) for (\d+) more",
          TRAIN, lambda d: (f"{SEP128(d)[GC]} to "
                            f"{AUTO128(d)[GC]}",
                            f"{SEP128(d)[GA]} to "
                            f"{AUTO128(d)[GA]}",
                            f"{AUTO128(d)[CYC] - SEP128(d)[CYC]}"),
          lambda v: v),
    Quote("docs/training.md", r"64 x 64 layer from (\S+ to \S+)\s+\((\S+ to \S+)\) for (\d+)\.", TRAIN,
          lambda d: (f"{TR('64-64-64-10', 'mse', 'separate: S/S')(d)[GC]} to {TR('64-64-64-10', 'mse', 'auto: F/S')(d)[GC]}",
                     f"{TR('64-64-64-10', 'mse', 'separate: S/S')(d)[GA]} to {TR('64-64-64-10', 'mse', 'auto: F/S')(d)[GA]}",
                     f"{TR('64-64-64-10', 'mse', 'auto: F/S')(d)[CYC] - TR('64-64-64-10', 'mse', 'separate: S/S')(d)[CYC]}"),
          lambda v: v),
    Quote("docs/training.md", r"\(64-64-10 with MSE: (\S+ to \S+) in the compared scope, (\S+ to \S+) counting\s+"
                              r"everything, for (\d+) more cycles\)", TRAIN,
          lambda d: (f"{TR('64-64-10', 'mse', 'auto: S')(d)[GC]} to {TR('64-64-10', 'mse', 'fused: F')(d)[GC]}",
                     f"{TR('64-64-10', 'mse', 'auto: S')(d)[GA]} to {TR('64-64-10', 'mse', 'fused: F')(d)[GA]}",
                     f"{TR('64-64-10', 'mse', 'fused: F')(d)[CYC] - TR('64-64-10', 'mse', 'auto: S')(d)[CYC]}"),
          lambda v: v),
    # one core: measured figures and digits
    Quote("docs/training.md", r"64-64-10 takes (\d+) cycles \((\S+) % MAC\s+utilization\), against (\d+) for MSE's", TRAIN,
          lambda d: (f"{TR('64-64-10', 'softmax_ce', 'auto: S')(d)[CYC]}",
                     f"{TR('64-64-10', 'softmax_ce', 'auto: S')(d)['MAC util. %']:.1f}",
                     f"{TR('64-64-10', 'mse', 'auto: S')(d)[CYC]}"), lambda v: v),
    Quote("docs/training.md", r"the leakage of its (\d+) cycles more than MSE's step", TRAIN,
          lambda d: TR("64-64-10", "softmax_ce", "auto: S")(d)[CYC] - TR("64-64-10", "mse", "auto: S")(d)[CYC]),
    Quote("docs/training.md", r"layer too\s+costs (\d+) more cycles", TRAIN,
          lambda d: FUSED128(d)[CYC] - AUTO128(d)[CYC]),
    Quote("docs/training.md", r"10 classes, (\d+)\s+train / (\d+) test samples", DIGITS,
          lambda d: tuple(re.search(r"(\d+) train / (\d+) test", d["data"]).groups()), lambda v: v),
    Quote("docs/training.md", r"`lr = 0\.03` \(stored as (\S+) in binary16\)", DIGITS, ("lr_stored",),
          lambda v: f"-{v:.3f}"),
    Quote("docs/training.md", r"the first (\d+) steps checked against `GoldenSGD` bit for bit", DIGITS,
          ("golden_checked_steps",)),
    *[Quote("docs/training.md", Cell("| epoch | train loss, array |", str(e), col), DIGITS,
            lambda d, e=e, i=i: _epoch_row(d["epochs"][e - 1])[i])
      for e in range(1, 11) for i, col in enumerate(("train loss, array", "train loss, float64",
                                                      "test accuracy, array", "test accuracy, float64"))],
    Quote("docs/training.md", r"Final test accuracy \*\*(\S+) %\*\* on the array \(float64 SGD: (\S+) %; the best epoch\s+(\S+) %\)",
          DIGITS, lambda d: (f"{d['epochs'][-1]['test_accuracy'] * 100:.2f}",
                             f"{d['epochs'][-1]['test_accuracy_float64'] * 100:.2f}",
                             f"{max(e['test_accuracy'] for e in d['epochs']) * 100:.2f}"), lambda v: v),
    Quote("docs/training.md", r"the train loss stays within (\d+) % of float64's", DIGITS,
          lambda d: max(abs(e["train_loss"] / e["train_loss_float64"] - 1) for e in d["epochs"]) * 100,
          lambda v: f"{math.ceil(v)}"),
    Quote("docs/training.md", r"Per step: one RUN of (\d+) cycles\s+with no host turnaround, (\d+) FLOPs, (\S+) % MAC",
          DIGITS, lambda d: (f"{d['step']['run_cycles']}", f"{d['step']['flops']}",
                             f"{d['step']['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"The (\d+) steps and the evaluations\s+took (\d+) s of wall time", DIGITS,
          lambda d: (f"{d['steps']}", f"{d['wall_s']:.0f}"), lambda v: v),
    Quote("docs/training.md", r"\(about (\d+) ms per step, `wall_s`\)", DIGITS,
          lambda d: d["wall_s"] / d["steps"] * 1000, "{:.0f}"),
    Quote("docs/training.md", r"one RUN per step of\s+(\d+) cycles, (\d+) steps golden-checked", DIGITS_MSE,
          lambda d: (f"{d['step']['run_cycles']}", f"{d['golden_checked_steps']}"), lambda v: v),
    Quote("docs/training.md", r"final test\s+accuracy \*\*(\S+) %\*\* on the array, (\S+) % for float64 SGD \(train loss\s+"
                              r"(\S+) vs (\S+)\); (\S+) % MAC utilization", DIGITS_MSE,
          lambda d: (f"{d['epochs'][-1]['test_accuracy'] * 100:.2f}", f"{d['epochs'][-1]['test_accuracy_float64'] * 100:.2f}",
                     f"{d['epochs'][-1]['train_loss']:.4f}", f"{d['epochs'][-1]['train_loss_float64']:.4f}",
                     f"{d['step']['mac_utilization'] * 100:.1f}"), lambda v: v),
    # minibatch GD on one core
    Quote("docs/training.md", r"At `b = 32` the step's (\d+) cycles are (\d+) in GEMMs, (\d+) in the four transposes,\s+"
                              r"(\d+) in loads/unloads and (\d+) in ReLU", MB,
          lambda d: (str(MBR("softmax_ce", 32)(d)["RUN cycles/step (measured = predicted)"]),
                     *MBR("softmax_ce", 32)(d)["cycles gemm/transpose/load+unload/other"].split("/")), lambda v: v),
    Quote("docs/training.md", r"the MAC utilization is close: (\d+-\d+) % vs (\d+) % with MSE", MB,
          lambda d: ("{0:.0f}-{1:.0f}".format(*span(MBR("mse", b)(d)["MAC util. %"] for b in (4, 16, 32))),
                     f"{MBR('mse', 1)(d)['MAC util. %']:.0f}"), lambda v: v),
    Quote("docs/training.md", r"compared scope is\s+(\S+)x SGD's \((\S+) against (\S+)\) and counting everything (\S+)x "
                              r"\((\S+) against (\S+)\)", MB,
          lambda d: (f"{MBR('mse', 32)(d)[GC] / MBR('mse', 1)(d)[GC]:.1f}", f"{MBR('mse', 32)(d)[GC]}",
                     f"{MBR('mse', 1)(d)[GC]}", f"{MBR('mse', 32)(d)[GA] / MBR('mse', 1)(d)[GA]:.2f}",
                     f"{MBR('mse', 32)(d)[GA]}", f"{MBR('mse', 1)(d)[GA]}"), lambda v: v),
    Quote("docs/training.md", r"at `b = 32`\s+the utilization is (\S+) % without the turnaround and (\S+) % with it", MB,
          lambda d: (f"{MBR('softmax_ce', 32)(d)['MAC util. %']:.1f}",
                     f"{MBR('softmax_ce', 32)(d)['MAC util. with host %']:.1f}"), lambda v: v),
    Quote("docs/training.md", r"the transposes cost\s+(\d+-\d+) % at every `b`", MB,
          lambda d: span(num(r["cycles gemm/transpose/load+unload/other"].split("/")[1])
                         / r["RUN cycles/step (measured = predicted)"] * 100 for r in d["rows"] if r["batch"] > 1),
          "{0:.0f}-{1:.0f}"),
    *[Quote("docs/training.md", Cell("| epoch | b = 16, lr 0.1: array |", str(e), col), MB,
            lambda d, e=e, b=b, i=i: _mb_epoch(d, b, e)[i])
      for e in range(1, 11) for b, cols in ((16, ("b = 16, lr 0.1: array", "b = 16: float64")),
                                            (32, ("b = 32, lr 0.2: array", "b = 32: float64")))
      for i, col in enumerate(cols)],
    Quote("docs/training.md", r"in 10 epochs with (\d+) / (\d+) steps instead of\s+(\d+),", MB,
          lambda d: (f"{MB_DIGITS(16)(d)['steps']}", f"{MB_DIGITS(32)(d)['steps']}", f"{_load(DIGITS)['steps']}"),
          lambda v: v),
    Quote("docs/training.md", r"`-lr/b` is\s+stored as (\S+) in binary16", MB, lambda d: MB_DIGITS(16)(d)["lr_over_b_stored"],
          "{:.6f}"),
    Quote("docs/training.md", r"Wall time: (\d+) s and (\d+) s", MB,
          lambda d: (f"{MB_DIGITS(16)(d)['wall_s']:.0f}", f"{MB_DIGITS(32)(d)['wall_s']:.0f}"), lambda v: v),
]

CHIP, CHIP_MB, CP, LARGE = (RES + f for f in ("train_chip.json", "train_chip_mb.json", "train_cp.json", "train_large.json"))
SMALL_NET, PAGED_NET = [784, 500, 500, 500, 10], [784, 1500, 1500, 1500, 10]
CASE = lambda **m: (lambda d: get(d, ("cases", m)))
LAST = lambda **m: (lambda d: get(d, ("cases", m))["steps"][-1])
SGD_S = LAST(preset="S", sizes=SMALL_NET, loss="softmax_ce", backward="auto")
SGD_PAGED = LAST(preset="S", sizes=PAGED_NET)
SGD_FUSED = LAST(preset="S", sizes=SMALL_NET, backward="fused")
PAGED_CASE = CASE(preset="S", sizes=PAGED_NET)
GPW = lambda step, scope="compared": step["power_with_host"][f"gflops_per_w_{scope}"]


def _share(step, *keys, total=None):
    """Percent of a step's cycles (with the host turnaround when it has one) in breakdown categories."""
    b = step["cycle_breakdown"]
    return 100 * sum(b[k]["cycles"] for k in keys) / (total or (step["cycles"] + step.get("host_cycles", 0)))


#: the ring collectives of the default SGD step at S with nothing beside them
RING_APART = ("broadcast x (ring)", "broadcast of the output gradient (ring)", "reduce of the output layer's partials (ring)")
APART_S = lambda d: CASE(preset="S", sizes=SMALL_NET, loss="softmax_ce", backward="auto")(d)["collectives_apart"]


def _within(d, kind):
    return 100 * get(d, ("cases", {"preset": "S", "sizes": SMALL_NET, "loss": "softmax_ce", "backward": "auto"},
                         "mac_utilization_within_kernels", kind, "mac_utilization"))


def _weights_per_pe(error: str) -> int:
    """The padded weight words per PE of a compile error's ``W0 panel 80x784: 3920, ...``."""
    return sum(int(n) for n in re.findall(r"W\d panel \d+x\d+: (\d+)", error))


MBS = lambda b: LAST(preset="S", sizes=SMALL_NET, batch=b)
CPS = lambda **m: (lambda d: CP_S(d, **m))

QUOTES += [
    # SGD across the cores of a chip
    Quote("docs/training.md", r"takes \*\*(\d+) cycles, (\S+) % MAC utilization\*\* \(the", CHIP,
          lambda d: (f"{SGD_S(d)['cycles']}", f"{SGD_S(d)['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"and reaches (\d+) GFLOPS/W against its (\d+) for SGD \((\S+)x\)", CHIP,
          lambda d: (f"{GPW(SGD_S(d)):.0f}", f"{d['reference']['gflops_per_w']}",
                     f"{GPW(SGD_S(d)) / d['reference']['gflops_per_w']:.2f}"),
          lambda v: v),
    Quote("docs/training.md", r"The softmax on core 0 takes (\d+) cycles more than MSE's axpy \((\d+) against (\d+)\)",
          CHIP, lambda d: (f"{SGD_S(d)['cycles'] - LAST(preset='S', sizes=SMALL_NET, loss='mse')(d)['cycles']}",
                           f"{SGD_S(d)['cycles']}", f"{LAST(preset='S', sizes=SMALL_NET, loss='mse')(d)['cycles']}"),
          lambda v: v),
    Quote("docs/training.md", r"Where the\s+(\d+) cycles go \(from the benchmark's", CHIP, lambda d: SGD_S(d)["cycles"]),
    Quote("docs/training.md", r"forward\s+GEMVs (\d+) % \((\d+) % MAC utilization inside\), transposed GEMVs (\d+) % \((\d+) %:",
          CHIP, lambda d: (f"{_share(SGD_S(d), 'GEMV W x (forward)'):.0f}", f"{_within(d, 'gemv'):.0f}",
                           f"{_share(SGD_S(d), 'GEMV^T W^T d (backward)'):.0f}", f"{_within(d, 'gemv_t'):.0f}"),
          lambda v: v),
    Quote("docs/training.md", r"in their free slots (\d+) % \((\d+) cycles\), the other rank-1 updates (\d+) % \((\d+) %\)",
          CHIP, lambda d: (f"{_share(SGD_S(d), 'reduce-scatter with rank-1 rows in its free slots'):.0f}",
                           f"{SGD_S(d)['cycle_breakdown']['reduce-scatter with rank-1 rows in its free slots']['cycles']}",
                           f"{_share(SGD_S(d), 'rank-1 update'):.0f}", f"{_within(d, 'rank1'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"nothing beside them (\d+) % \(the broadcast of x's wait for the ring's latency (\d+), the\s+"
                              r"gradient's broadcast (\d+), the output layer's reduce (\d+):", CHIP,
          lambda d: (f"{_share(SGD_S(d), *RING_APART):.0f}",
                     *(f"{SGD_S(d)['cycle_breakdown'][k]['cycles']}" for k in RING_APART)), lambda v: v),
    Quote("docs/training.md", r"`ag_overlap=False,\s+bcast_overlap=False, out_reduce=\"chain\"`, below\) it takes (\d+) cycles "
                              r"\((\S+) %\)", CHIP,
          lambda d: (f"{APART_S(d)['cycles']}", f"{APART_S(d)['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"the all-gather costs nothing: at S each of the\s+two took (\d+) cycles on its own", CHIP,
          lambda d: (lambda c: c["ag1"] if c["ag1"] == c["ag2"] else f"{c['ag1']} and {c['ag2']}")(
              APART_S(d)["collectives"])),
    Quote("docs/training.md", r"The\s+broadcast of x costs the ring's latency, (\d+) cycles at S, instead of (\d+)\.", CHIP,
          lambda d: (f"{SGD_S(d)['cycle_breakdown']['broadcast x (ring)']['cycles']}",
                     f"{APART_S(d)['collectives']['bcast_x']}"), lambda v: v),
    Quote("docs/training.md", r"At S the default step takes (\d+) cycles against (\d+) with both switches off and the", CHIP,
          lambda d: (f"{SGD_S(d)['cycles']}", f"{APART_S(d)['cycles']}"), lambda v: v),
    Quote("docs/training.md", r"the softmax kernel (\d+) %, ReLUs, masks and gaps\s+(\d+) %, host I/O (\d+) %\.", CHIP,
          lambda d: (f"{_share(SGD_S(d), 'other (softmax)'):.0f}",
                     f"{_share(SGD_S(d), 'gaps (NOPs between ops)', 'elementwise (ReLU, mask, loss grad)'):.0f}",
                     f"{_share(SGD_S(d), 'host phase in', 'host phase logits'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"Fusing every layer there costs (\S+) % cycles", CHIP,
          lambda d: (SGD_FUSED(d)["cycles"] / SGD_S(d)["cycles"] - 1) * 100,
          "{:.1f}"),
    Quote("docs/training.md", r"the GFLOPS/W in the compared scope (\S+)x \((\d+) against (\d+): each weight", CHIP,
          lambda d: (f"{GPW(SGD_FUSED(d)) / GPW(SGD_S(d)):.2f}",
                     f"{GPW(SGD_FUSED(d)):.0f}",
                     f"{GPW(SGD_S(d)):.0f}"), lambda v: v),
    Quote("docs/training.md", r"lowers it counting everything \((\S+) against (\S+): the", CHIP,
          lambda d: (f"{GPW(SGD_FUSED(d), 'all'):.1f}",
                     f"{GPW(SGD_S(d), 'all'):.1f}"), lambda v: v),
    Quote("docs/training.md", r"network at S \(([\d,]+) weight words per PE against (\d+) words of PE\s+memory\) pages "
                              r"W1 and W2 in (\d+) pages each", CHIP,
          lambda d: (f"{sum(-(-l['panel_rows_per_core'] // 4) * -(-l['panel_cols'] // 4) for l in PAGED_CASE(d)['layers']):,}",
                     f"{PAGED_CASE(d)['config']['mem_a_words'] + PAGED_CASE(d)['config']['mem_b_words']}",
                     *{str(v) for v in PAGED_CASE(d)["spad_pages"].values()}), lambda v: v),
    Quote("docs/training.md", r"\*\*([\d,]+) cycles per step, (\S+) % MAC\s+utilization\*\* \(one microcode image, no reload\)",
          CHIP, lambda d: (f"{SGD_PAGED(d)['cycles']:,}", f"{SGD_PAGED(d)['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"(\d+) % of the step is page traffic \(([\d,]+)\s+cycles: (\d+) page transfers of (\d+) cycles",
          CHIP, lambda d: (f"{_share(SGD_PAGED(d), 'scratchpad page load/store'):.0f}",
                           f"{SGD_PAGED(d)['cycle_breakdown']['scratchpad page load/store']['cycles']:,}",
                           *(lambda ops: (str(len(ops)), str(ops[0])))(
                               [o["cycles"] for o in PAGED_CASE(d)["breakdown_per_op"]
                                if re.match(r"(lf|lb|sb)\d", o["op"])])), lambda v: v),
    Quote("docs/training.md", r"the twelfth saved\), (\d+) % the GEMVs and updates", CHIP,
          lambda d: _share(SGD_PAGED(d), "GEMV W x (forward)", "GEMV^T W^T d (backward)", "rank-1 update"), "{:.0f}"),
    Quote("docs/training.md", r"reuses each paged weight `b` times \((\S+)\s+% at b = 8", CHIP_MB,
          lambda d: LAST(preset="S", sizes=PAGED_NET)(d)["mac_utilization"] * 100, "{:.1f}"),
    Quote("docs/training.md", r"\(([\d,]+) padded weight words per PE\s+against", LARGE,
          lambda d: _weights_per_pe(get(d, ("compile_attempts", {"preset": "S", "method": "sgd"}, "error"))), "{:,}"),
    Quote("docs/training.md", r"the host phase that loads x, (\d+) cycles at S, would then", CHIP,
          lambda d: SGD_S(d)["cycle_breakdown"]["host phase in"]["cycles"]),
    Quote("docs/training.md", r"the output gradient's broadcast inside the output layer's transposed GEMV\s+\((\d+) cycles", CHIP,
          lambda d: SGD_S(d)["cycle_breakdown"][RING_APART[1]]["cycles"]),
    Quote("docs/training.md", r"at S the reduce takes (\d+) cycles instead of the chain's (\d+)\.", CHIP,
          lambda d: (f"{SGD_S(d)['cycle_breakdown'][RING_APART[2]]['cycles']}", f"{APART_S(d)['collectives']['reduce_z']}"),
          lambda v: v),
    Quote("docs/training.md", r"minibatch step, ([\d,]+) cycles in two chip RUNs", LARGE,
          lambda d: d["cases"]["mbgd_L"]["steps"][-1]["cycles"], "{:,}"),
    # minibatch GD across the cores
    Quote("docs/training.md", r"takes (\d+) of (\d+) words per PE at `b = 16` \(MEM A (\d+), MEM B (\d+),", CHIP_MB,
          lambda d: (lambda c: (str(c["memory_words_per_pe"]["a"] + c["memory_words_per_pe"]["b"]),
                                str(c["config"]["mem_a_words"] + c["config"]["mem_b_words"]),
                                str(c["memory_words_per_pe"]["a"]), str(c["memory_words_per_pe"]["b"])))(
              CASE(preset="S", sizes=SMALL_NET, batch=16)(d)), lambda v: v),
    Quote("docs/training.md", r"Cycles per step at S: (\d+),\s+(\d+) and (\d+) \(\+ (\d+) host\) at `b` = 4, 8 and 16, "
                              r"(\S+), (\S+) and (\S+) % MAC", CHIP_MB,
          lambda d: (*(str(MBS(b)(d)["cycles"]) for b in (4, 8, 16)), str(MBS(16)(d)["host_cycles"]),
                     *(f"{MBS(b)(d)['mac_utilization'] * 100:.1f}" for b in (4, 8, 16))), lambda v: v),
    Quote("docs/training.md", r"\(3\s+pages\s+each\): ([\d,]+) \+ (\d+) cycles, (\S+) %; its programs take (\d+) microcode "
                              r"images \((\d+) words", CHIP_MB,
          lambda d: (lambda c, s: (f"{s['cycles']:,}", str(s["host_cycles"]), f"{s['mac_utilization'] * 100:.1f}",
                                   str(c["microcode_images"]), str(c["microcode_reload_words_per_step"])))(
              PAGED_CASE(d), LAST(preset="S", sizes=PAGED_NET)(d)), lambda v: v),
    Quote("docs/training.md", r"the host's LOADs between its RUNs are ([\d,]+) of those\s+cycles \((\d+) %\)", CHIP_MB,
          lambda d: (lambda s: (lambda lc: (f"{lc:,}", f"{lc / (s['cycles'] + s['host_cycles']) * 100:.0f}"))(
              sum(p["cycles"] for p in s["phases"] if p["kind"] == "load")))(LAST(preset="S", sizes=PAGED_NET)(d)),
          lambda v: v),
    Quote("docs/training.md", r"with W1 and W2 in the scratchpad \((\d) pages", CHIP_MB,
          lambda d: {str(v) for v in PAGED_CASE(d)["spad_pages"].values()}, lambda v: "/".join(v)),
    Quote("docs/training.md", r"one 16384-word microcode image: ([\d,]+) \+ (\d+)\s+cycles, \*\*(\S+) %\*\*", LARGE,
          lambda d: (lambda s: (f"{s['cycles']:,}", str(s["host_cycles"]), f"{s['mac_utilization'] * 100:.1f}"))(
              d["cases"]["mbgd_L"]["steps"][-1]), lambda v: v),
    Quote("docs/training.md", r"The utilization \((\d+) % at `b = 16`\)", CHIP_MB,
          lambda d: MBS(16)(d)["mac_utilization"] * 100, "{:.0f}"),
    Quote("docs/training.md", r"where the (\d+) \+ (\d+) cycles of `b = 16` go", CHIP_MB,
          lambda d: (str(MBS(16)(d)["cycles"]), str(MBS(16)(d)["host_cycles"])), lambda v: v),
    Quote("docs/training.md", r"GEMMs (\d+) % \(the broadcast of `X` and the all-gathers of\s+`A` and of `A\^T`'s column "
                              r"blocks run inside them\), the reduce-scatters of `dX\^T` (\d+) %", CHIP_MB,
          lambda d: (f"{_share(MBS(16)(d), 'GEMM forward W A', 'GEMM backward D^T W', 'GEMM update D A^T'):.0f}",
                     f"{_share(MBS(16)(d), 'reduce-scatter dX^T (ring)'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"the broadcasts of `X\^T` and the\s+gradient (\d+) %, host I/O (\d+) %", CHIP_MB,
          lambda d: (f"{_share(MBS(16)(d), 'broadcast X, X^T (ring)'):.0f}",
                     f"{_share(MBS(16)(d), 'host phase in', 'host phase logits', 'host phase g'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"transposes (\d+) %, the split output layer's reduce (\S+) %, the\s+softmax turnaround (\d+) %",
          CHIP_MB, lambda d: (f"{_share(MBS(16)(d), 'transposes'):.0f}", f"{_share(MBS(16)(d), 'other ring'):.1f}",
                              f"{_share(MBS(16)(d), 'host softmax turnaround (assumed)'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"broadcast of `X\^T`: (\d+) %\)", CHIP_MB,
          lambda d: _share(MBS(16)(d), "host phase in", "host phase logits", "host phase g", "broadcast X, X^T (ring)"),
          "{:.0f}"),
    # continuous propagation
    Quote("docs/training.md", r"784-500-500-500-10: fused, groups `(\[[\d, ]+\])` \(separate: `(\[[\d, ]+\])`\)", CP,
          lambda d: (str(CP_S(d)["groups"]), str(CP_S(d, backward="separate")["groups"])), lambda v: v),
    Quote("docs/training.md", r"design's CP figure \((\d+) at S\)", CP, ("reference", "gflops_per_w")),
    Quote("docs/training.md", r"a step takes (\d+) cycles with the fused backward\s+step \(groups `(\[[\d, ]+\])`; head (\d+), "
                              r"tail (\d+) of which chains (\d+), host (\d+)\), (\S+) %", CP,
          lambda d: (lambda c: (str(c["steps"][-1]["cycles"]), str(c["groups"]), *(str(c["runs"][k]) for k in
                                ("head", "tail", "chains", "host")), f"{c['steps'][-1]['mac_utilization'] * 100:.1f}"))(
              CP_S(d)), lambda v: v),
    Quote("docs/training.md", r"and (\d+) \((\S+) %\) with the separate one \(`(\[[\d, ]+\])`\); SGD across\s+all 32 cores "
                              r"takes (\d+) \((\S+) %\)", CP,
          lambda d: (lambda c: (str(c["steps"][-1]["cycles"]), f"{c['steps'][-1]['mac_utilization'] * 100:.1f}",
                                str(c["groups"]), str(SGD_S(_load(CHIP))["cycles"]),
                                f"{SGD_S(_load(CHIP))['mac_utilization'] * 100:.1f}"))(CP_S(d, backward="separate")),
          lambda v: v),
    Quote("docs/training.md", r"On chip-small, 64-64-64-10 with the softmax takes (\d+)\s+cycles \((\S+) %\)", CP,
          lambda d: (lambda s: (str(s["cycles"]), f"{s['mac_utilization'] * 100:.1f}"))(
              CP_S(d, preset="chip-small", sizes=(64, 64, 64, 10))["steps"][-1]), lambda v: v),
    Quote("docs/training.md", r"The fused backward step saves (\d+) cycles per step \((\S+) %\)", CP,
          lambda d: (lambda f, s: (str(s - f), f"{(s - f) / f * 100:.2f}"))(
              CP_S(d)["steps"][-1]["cycles"], CP_S(d, backward="separate")["steps"][-1]["cycles"]), lambda v: v),
    Quote("docs/training.md", r"Where the (\d+)\s+cycles go on the critical core \(a core of layer (\d), a (\d+) x (\d+)\s+panel",
          CP, lambda d: (lambda c: (str(c["steps"][-1]["cycles"]), str(c["critical_core_layer"]),
                                    str(c["panel_rows"][c["critical_core_layer"]]),
                                    str(c["panel_cols"][c["critical_core_layer"]])))(CP_S(d)), lambda v: v),
    Quote("docs/training.md", r"panel\): the fused `W\^T d` and update (\d+) %, the forward GEMV (\d+) %, the delta "
                              r"chains with\s+the GEMV's first rows merged (\d+) %,\s+the activation chains (\S+) %, "
                              r"the history copy (\S+) %, host I/O (\S+) %", CP,
          lambda d: (lambda b: tuple(f"{b[k]['share'] * 100:{f}}" for k, f in (
              ("W^T d + update, fused (backward)", ".0f"), ("GEMV W x (forward)", ".0f"),
              ("delta chains with forward GEMV rows (ring)", ".0f"), ("chains (ring)", ".1f"),
              ("history copies", ".1f"), ("host phases (x, t in; output out)", ".1f"))))(
              CP_S(d)["cycle_breakdown_critical_core"]), lambda v: v),
    Quote("docs/training.md", r"one\s+of layer (\d) \((\d+) x (\d+): GEMV (\d+) %, GEMV\^T (\d+) %, rank-1 (\d+) %\)", CP,
          lambda d: (lambda c, b: (str(c["critical_core_layer"]), str(c["panel_rows"][c["critical_core_layer"]]),
                                   str(c["panel_cols"][c["critical_core_layer"]]),
                                   *(f"{b[k]['share'] * 100:.0f}" for k in
                                     ("GEMV W x (forward)", "GEMV^T W^T d (backward)", "rank-1 update"))))(
              CP_S(d, backward="separate"), CP_S(d, backward="separate")["cycle_breakdown_critical_core"]), lambda v: v),
    Quote("docs/training.md", r"\(\[SGD's breakdown\]\(#sgd-across-the-cores-of-a-chip\):\s+(\d+) % ring collectives with "
                              r"nothing beside them, the transposed GEMVs at (\d+) %\)", CHIP,
          lambda d: (f"{_share(SGD_S(d), *RING_APART):.0f}", f"{_within(d, 'gemv_t'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"the kernels the PEs: (\S+) %\), a ring-buffer", CP,
          lambda d: CP_S(d)["cycle_breakdown_critical_core"]["chains (ring)"]["share"] * 100, "{:.1f}"),
    Quote("docs/training.md", r"persists across RUNs: (\S+) %\)", CP,
          lambda d: CP_S(d)["cycle_breakdown_critical_core"]["history copies"]["share"] * 100, "{:.1f}"),
    Quote("docs/training.md", r"groups `(\[[\d, ]+\])`, pages\s+every hidden layer \((\d), (\d) and (\d) pages per core\): "
                              r"\*\*([\d,]+) cycles per step, (\S+) % MAC\s+utilization\*\*, against paged SGD's ([\d,]+)", CP,
          lambda d: (lambda c: (str(c["groups"]), *(str(c["spad_pages"][k]) for k in ("0", "1", "2")),
                                f"{c['steps'][-1]['cycles']:,}", f"{c['steps'][-1]['mac_utilization'] * 100:.1f}",
                                f"{SGD_PAGED(_load(CHIP))['cycles']:,}"))(CP_S(d, sizes=PAGED_NET)), lambda v: v),
    Quote("docs/training.md", r"minibatch-GD\s+\((\d+)\) and CP", CHIP_MB, ("reference", "gflops_per_w")),
    Quote("docs/training.md", r"(\d+) cycles at `b = 4` \(groups `(\[[\d, ]+\])`, (\S+) % MAC utilization\) and (\d+) at\s+"
                              r"`b = 8` \(`(\[[\d, ]+\])`: head (\d+), tail (\d+) including chains (\d+), host (\d+);\s+(\S+) %\)",
          CP, lambda d: (lambda c4, c8: (str(c4["steps"][-1]["cycles"]), str(c4["groups"]),
                                         f"{c4['steps'][-1]['mac_utilization'] * 100:.1f}", str(c8["steps"][-1]["cycles"]),
                                         str(c8["groups"]), *(str(c8["runs"][k]) for k in ("head", "tail", "chains", "host")),
                                         f"{c8['steps'][-1]['mac_utilization'] * 100:.1f}"))(
              CP_S(d, loss="mse", batch=4), CP_S(d, loss="mse", batch=8)), lambda v: v),
    Quote("docs/training.md", r"on chip-small, 64-64-64-10 at `b = 8` takes (\d+) \((\S+) %\)", CP,
          lambda d: (lambda s: (str(s["cycles"]), f"{s['mac_utilization'] * 100:.1f}"))(
              CP_S(d, preset="chip-small", sizes=(64, 64, 64, 10), loss="mse", batch=8)["steps"][-1]), lambda v: v),
    Quote("docs/training.md", r"Where the (\d+) cycles go on the\s+critical core \(layer (\d), a (\d+) x (\d+) panel\): "
                              r"forward GEMM (\d+) %, the update GEMM (\d+) %", CP,
          lambda d: (lambda c, b: (str(c["steps"][-1]["cycles"]), str(c["critical_core_layer"]),
                                   str(c["panel_rows"][c["critical_core_layer"]]),
                                   str(c["panel_cols"][c["critical_core_layer"]]),
                                   f"{b['GEMM (forward W A; backward D^T W)']['share'] * 100:.0f}",
                                   f"{b['GEMM update W += D A^T']['share'] * 100:.0f}"))(
              CP_S(d, loss="mse", batch=8), CP_S(d, loss="mse", batch=8)["cycle_breakdown_critical_core"]), lambda v: v),
    Quote("docs/training.md", r"words per chain\), transposes (\S+) %, chains (\S+) %, host I/O (\S+) %", CP,
          lambda d: (lambda c, b: tuple(f"{b[k]['cycles'] / c['steps'][-1]['cycles'] * 100:.1f}" for k in
                                        ("transposes (history, D)", "chains (ring)", "host phases (x, t in; output out)")))(
              CP_S(d, loss="mse", batch=8), CP_S(d, loss="mse", batch=8)["cycle_breakdown_critical_core"]), lambda v: v),
]

FPGA, SYNTH = RES + "fpga.json", RES + "pe_synth.json"
GRADE8 = ", LFE5UM5G-85F-8 (ecp55gevn)"
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


def test_fpga_figures_are_logged_builds():
    """Every Fmax, path delay and other decimal figure of docs/fpga.md is a value of a
    benchmarks/results/fpga*.json file (the experiments are its logged builds)."""
    assert unlogged_fpga_figures(_prose(ROOT / "docs" / "fpga.md")) == []
    assert unlogged_fpga_figures("routes at 78.85 MHz against 77.17 MHz, 81,510 LUT4") == ["78.85", "77.17", "81,510"]

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
