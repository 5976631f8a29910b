"""``caterpillar characterize``: every operation class the compilers emit, over a grid of
shapes on each core kind, on the fast engines; the performance model fitted to it and
its error on held-out shapes (:mod:`perf`; docs/perf.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from arch.errors import UsageError
from cli.common import check_outputs, write_json_png

__all__ = ["add_characterize_arguments", "cmd_characterize", "parse_kinds"]


def add_characterize_arguments(p, cfg_help: str) -> None:
    p.add_argument("--configs", nargs="+", default=["S", "L"], metavar="CONFIG",
                   help=f"the core kinds, one argument each ({cfg_help}; default S L: the 4x4 and 16x16 cores of "
                        f"the reference design's configurations)")
    p.add_argument("--classes", default="all",
                   help="operation classes, comma separated (gemv, gemv_t, rank1, fused_backward, gemm, gemm_acc, "
                        "transpose, relu, bus_broadcast, bus_reduce, spad_store, spad_load, dram_load, dram_store, "
                        "ring_pass_along, "
                        "ring_broadcast, ring_all_gather, ring_reduce, ring_reduce_scatter, mat_broadcast, "
                        "mat_all_gather, mat_reduce_scatter, mat_reduce), or core, ring, all (default)")
    p.add_argument("--grid", default="full", choices=("full", "quick"),
                   help="shapes: full (default; about a minute per kind) or quick (a few seconds)")
    p.add_argument("--json", help="save every measured point, the fitted model and its errors as JSON")
    p.add_argument("--png", help="save cycles against work per class and kind as a PNG")
    p.add_argument("--progress", default="auto", choices=("auto", "on", "off"))


def parse_kinds(args: list[str]) -> dict:
    """``--configs`` values -> {kind name: ArchConfig}: a preset keeps its name, a JSON
    file its stem, inline JSON ``kind<i>``."""
    from arch.config import PRESETS, ConfigError, config_from_arg

    kinds = {}
    for i, a in enumerate(args):
        try:
            cfg = config_from_arg(a)
        except ConfigError as e:
            msg = str(e)
            raise UsageError("--configs" + msg[len("--config"):] if msg.startswith("--config")
                             else f"--configs {a!r}: {msg}") from None
        name = a if a in PRESETS else (f"kind{i + 1}" if a.lstrip().startswith("{") else Path(a).stem)
        if name in kinds:
            raise UsageError(f"--configs: kind {name!r} given twice")
        kinds[name] = cfg
    return kinds


def cmd_characterize(args) -> int:
    from cli.common import Progress
    from perf.characterize import characterize, parse_classes
    from perf.model import PerfModel
    from perf.report import characterization_document, plot_characterization, table

    kinds = parse_kinds(args.configs)
    classes = parse_classes(args.classes)
    check_outputs(args, "json", "png")
    if args.json and args.png and Path(args.json).resolve() == Path(args.png).resolve():
        raise UsageError("--json and --png name the same file")
    print(f"characterizing {len(classes)} operation class(es) on {len(kinds)} core kind(s) "
          f"({', '.join(kinds)}), {args.grid} grid, on the fast engines", file=sys.stderr, flush=True)
    with Progress("points", unit="point", mode=args.progress) as bar:
        doc = characterize(kinds, classes, grid=args.grid, progress=bar)
    model = PerfModel.fit(doc)
    full = characterization_document(doc, model)
    print(table(full))
    print(f"{doc['points']} points in {doc['seconds']:.1f} s")
    write_json_png(args, lambda: json.dumps(full, indent=1) + "\n", lambda path: plot_characterization(full, path))
    return 0
