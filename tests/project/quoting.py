"""Quoted figures: a ``Quote`` ties one measured figure of a document to the value of
the JSON file it comes from (:func:`quote_errors` checks a list of them), and the helpers
the quote lists (``tests/project/quotes_*.py``) share; ``tests/project/test_docs.py``
runs the check."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=None)
def _prose(path: Path) -> str:
    """The page without its code blocks (no headings or links there), read once."""
    return re.sub(r"```.*?```", "", path.read_text(), flags=re.S)


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
