"""Outputs of a characterization: the fitted model with its errors (one JSON document),
the table printed on stdout, and the plots of cycles against work per class and kind."""

from __future__ import annotations

import math

from perf.characterize import CLASSES
from perf.model import PerfModel

__all__ = ["characterization_document", "error_summary", "table", "plot_characterization"]


def error_summary(ev: dict) -> dict:
    """{kind: {class: {points, cycles, energy, category}}} without the per-point rows."""
    return {k: {c: {x: e[x] for x in ("points", "cycles", "energy", "category")} for c, e in d.items()}
            for k, d in ev.items()}


def characterization_document(doc: dict, model: PerfModel) -> dict:
    """The characterization with the fitted model and its errors: on the grid it was
    fitted to, and on the held-out shapes (measured, never fitted; with every point's
    prediction)."""
    held = model.evaluate(doc, "held_out")
    grid = model.evaluate(doc, "grid")
    worst = {}
    for d in held.values():
        for c, e in d.items():
            w = worst.setdefault(c, {"cycles_max": 0.0, "energy_max": 0.0})
            w["cycles_max"] = max(w["cycles_max"], e["cycles"]["max"])
            w["energy_max"] = max(w["energy_max"], e["energy"]["max"])
    return {**doc, "model": model.to_dict(),
            "model_form": "per class and kind: cycles and each energy category linear in the class's schedule terms "
                          "(perf.model.terms), least squares on the grid; errors relative, |predicted - measured| / "
                          "measured",
            "errors": {"grid": error_summary(grid), "held_out": error_summary(held),
                       "held_out_points": {k: {c: e["rows"] for c, e in d.items()} for k, d in held.items()},
                       "held_out_worst_by_class": worst}}


def _pct(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x * 100:.2f}"


def table(full: dict) -> str:
    """Per kind, per class: points, cycles over the grid, the fit's error on the grid and
    the held-out errors (cycles and total energy, max / mean, %)."""
    lines = []
    held, grid = full["errors"]["held_out"], full["errors"]["grid"]
    for kname, kd in full["kinds"].items():
        cfg = kd["config"]
        lines.append(f"kind {kname}: {cfg['nr']}x{cfg['nr']} PEs, {cfg['fmt']}, banks {cfg['mem_a_words']}/"
                     f"{cfg['mem_b_words']} words, scratchpad {cfg['spad_kib']} KiB")
        lines.append(f"  {'class':<20} {'grid':>5} {'held':>5} {'cycles (grid)':>19} {'fit %':>7} "
                     f"{'held-out cycles %':>18} {'held-out energy %':>18}")
        for c, e in kd["classes"].items():
            cyc = [p["cycles"] for p in e["grid"]]
            g = grid.get(kname, {}).get(c)
            h = held.get(kname, {}).get(c)
            rng = f"{min(cyc)}..{max(cyc)}" if cyc else "-"
            fit = _pct(g["cycles"]["max"]) if g else "-"
            hc = f"{_pct(h['cycles']['max'])} / {_pct(h['cycles']['mean'])}" if h else "-"
            he = f"{_pct(h['energy']['max'])} / {_pct(h['energy']['mean'])}" if h else "-"
            lines.append(f"  {c:<20} {len(e['grid']):>5} {len(e['held_out']):>5} {rng:>19} {fit:>7} {hc:>18} "
                         f"{he:>18}")
        lines.append("")
    lines.append("held-out errors: max / mean of |predicted - measured| / measured over shapes not in the grid "
                 "(most not multiples of nr; ring sizes between and beyond the grid's)")
    return "\n".join(lines)


def plot_characterization(full: dict, path) -> None:
    """PNG: per class, cycles against work (log-log) for every kind: the grid's points,
    the held-out shapes measured (crosses) and as the model predicts them (circles)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    from arch.files import atomic_savefig

    names = [c for c in CLASSES if any(c in kd["classes"] for kd in full["kinds"].values())]
    cols = 4
    rows = max(1, -(-len(names) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    preds = full["errors"]["held_out_points"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, c in zip(axes.flat, names):
        for i, (kname, kd) in enumerate(full["kinds"].items()):
            e = kd["classes"].get(c)
            if not e:
                continue
            col = colors[i % len(colors)]
            pts = sorted(e["grid"], key=lambda p: p["work"])
            ax.scatter([p["work"] for p in pts], [p["cycles"] for p in pts], s=10, color=col, label=f"{kname} grid")
            ho = e["held_out"]
            if ho:
                ax.scatter([p["work"] for p in ho], [p["cycles"] for p in ho], marker="x", s=22, color=col,
                           label=f"{kname} held-out")
                pr = preds.get(kname, {}).get(c, [])
                ax.scatter([p["work"] for p in ho], [r["predicted_cycles"] for r in pr], marker="o", s=36,
                           facecolors="none", edgecolors=col, label=f"{kname} model")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(c, fontsize=9)
        ax.set_xlabel(f"work ({CLASSES[c].unit}s)", fontsize=8)
        ax.set_ylabel("cycles", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    if names:
        axes.flat[0].legend(fontsize=6)
    fig.suptitle(f"characterization ({full['grid']} grid): cycles against work; crosses held-out shapes, circles "
                 f"the model's predictions", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    atomic_savefig(fig, path)
