"""The Markdown docs' relative links point at files and headings that exist.

Anchors follow GitHub's rule: the heading in lower case, punctuation but ``-`` and ``_``
dropped, spaces made ``-``. A moved or renamed section breaks links silently otherwise.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
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
    import json

    from benchmarks.bench_paper import readme_table

    text = (ROOT / "README.md").read_text()
    start, end = "<!-- table2: benchmarks/results/paper.json -->\n", "<!-- /table2 -->"
    assert start in text and end in text, "README.md has no Table 2 block"
    block = text.split(start, 1)[1].split(end, 1)[0]
    res = json.loads((ROOT / "benchmarks" / "results" / "paper.json").read_text())
    assert block == readme_table(res)
