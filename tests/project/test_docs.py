"""The Markdown docs: relative links point at files and headings that exist, and every
measured figure they quote is the value of the JSON file it comes from (``QUOTES``: the
lists of ``tests/project/quotes_*.py``, checked with :mod:`tests.project.quoting`).

Anchors follow GitHub's rule: the heading in lower case, punctuation but ``-`` and ``_``
dropped, spaces made ``-``. A moved or renamed section breaks links silently otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path

from tests.project.quoting import RES, ROOT, _prose, quote_errors
from tests.project.quotes_fpga import QUOTES as FPGA_QUOTES, unlogged_fpga_figures
from tests.project.quotes_results import QUOTES as RESULTS_QUOTES
from tests.project.quotes_sim import QUOTES as SIM_QUOTES
from tests.project.quotes_training import QUOTES as TRAINING_QUOTES

#: every quoted figure of the documents (the lists of ``tests/project/quotes_*.py``)
QUOTES = RESULTS_QUOTES + SIM_QUOTES + TRAINING_QUOTES + FPGA_QUOTES

LINK = re.compile(r"\]\(([^)\s#]*)(#[^)\s]+)?\)")


def anchor(heading: str) -> str:
    h = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def _docs() -> list[Path]:
    return sorted([*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "benchmarks").rglob("*.md")])


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


def test_quoted_figures_are_the_json_values():
    """Every quoted measured figure equals its JSON value as the page writes it."""
    assert quote_errors(QUOTES) == []

def test_summary_is_the_benchmark_jsons():
    """benchmarks/results/SUMMARY.md (where the README sends readers for every other figure)
    is what ``benchmarks.run`` writes from the JSON files: no table edited by hand or left
    behind by a benchmark re-run."""
    from benchmarks.run import summary

    assert (ROOT / RES / "SUMMARY.md").read_text() == summary(ROOT / RES)


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

def test_fpga_figures_are_logged_builds():
    """Every Fmax, path delay and other decimal figure of docs/fpga.md is a value of a
    benchmarks/results/fpga*.json file (the experiments are its logged builds)."""
    assert unlogged_fpga_figures(_prose(ROOT / "docs" / "fpga.md")) == []
    assert unlogged_fpga_figures("routes at 78.85 MHz against 77.17 MHz, 81,510 LUT4") == ["78.85", "77.17", "81,510"]
