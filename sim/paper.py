"""The reference design's Table 2, cell by cell, beside ours (``caterpillar paper``).

Each cell (network x configuration x training method) is compiled by the project's
training compilers, its He-uniform weights (seed :data:`WEIGHT_SEED`) are loaded into a
fast chip engine session, and one training step runs with random inputs (seed
:data:`INPUT_SEED`; CP runs until its pipeline is full and measures the next step). The
weights read back are compared bit for bit with the golden trainer's after every step.
Figures come from that step's counters through :func:`sim.power.report_from_counters`,
with the host turnaround counted as idle cycles; its data movement, hidden and exposed
per kind, from the step's cycles classified on the engine (:mod:`sim.movement`: the
critical path and the mean over cores, row key ``movement``). A cell whose network does
not fit is reported with the compiler's message.

Area: configurations S and L, the blocks the reference design's totals cover (PE arrays
and scratchpads) beside its Table 2 figure, and our microcode stores separately, sized
from the largest program image the cells of that configuration need
(:func:`ucode_words_needed`); the power model's leakage and fetch energy use that size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from arch.config import PRESETS
from sim.arch_bound import architecture_bound
from sim.movement import MovementSession
from sim.power import COMPARED, DEFAULT_TECH, EVERYTHING, MEMORY, area_of_core, report_from_counters
from sim.step_measure import compile_method, measure_step, ucode_words_needed

__all__ = ["Cell", "CELLS", "PAPER", "PAPER_AREA_MM2", "run_cell", "table2", "convention", "format_table",
           "movement_share", "schedule_bound", "arch_bound_of", "areas", "plot_table2", "ucode_words_needed"]

NETS = {"small": (784, 500, 500, 500, 10), "large": (784, 2500, 2000, 1500, 1000, 500, 10)}
METHODS = ("sgd", "cp", "mbgd")
METHOD_NAMES = {"sgd": "SGD", "cp": "CP", "mbgd": "minibatch GD"}
BATCH = {"sgd": 1, "cp": 1, "mbgd": 16}
WEIGHT_SEED = 0
INPUT_SEED = 1
LR = 0.01
LOSS = "softmax_ce"

#: Table 2 of the reference design (../shared/reference/caterpillar.md): GFLOPS/W and,
#: where the paper states it, MAC utilization
PAPER = {
    ("small", "S", "sgd"): (177, 0.80), ("small", "S", "cp"): (204, None), ("small", "S", "mbgd"): (195, None),
    ("large", "S", "sgd"): (98, 0.47), ("large", "S", "cp"): (127, 0.75), ("large", "S", "mbgd"): (187, 0.94),
    ("large", "L", "sgd"): (185, None), ("large", "L", "cp"): (211, 0.98), ("large", "L", "mbgd"): (195, None),
}
PAPER_AREA_MM2 = {"S": 103.2, "L": 178.9}

#: off-chip memory for the cells that do not fit on chip (the reference design runs them
#: from off-chip memory): the configuration with a DRAM channel per core
#: (:class:`arch.config.ArchConfig` defaults: 25.6 GB/s, one 64-bit DDR4-3200 channel;
#: 80 cycles latency), 64 MiB each, and a DMA queue; the rest of the configuration is
#: unchanged
DRAM_MIB = 64
#: transfers each core's DMA engine holds (``ArchConfig.dma_queue``): a page copy is one
#: start per transfer of at most 256 beats (one AXI4 burst), and a start stalls the core
#: while the queue is full; the large net's DRAM pages are 10 transfers (SGD, minibatch
#: GD) and up to 49 (CP's 12,500-beat pages), so 64 lets a page's starts issue at once
#: behind the copy in progress and move while the core computes; the queue is 63
#: descriptors of 48 bits beside the transfer in progress, 0.014 mm^2 of flip-flops per
#: core (:func:`sim.power.area_of_core`)
DMA_QUEUE = 64


def dram_config(name: str):
    """Configuration ``name`` with :data:`DRAM_MIB` MiB of DRAM per core and a DMA
    engine holding :data:`DMA_QUEUE` transfers."""
    return PRESETS[name].replace(dram_mib=DRAM_MIB, dma_queue=DMA_QUEUE)


@dataclass(frozen=True)
class Cell:
    net: str
    config: str
    method: str

    @property
    def batch(self) -> int:
        return BATCH[self.method]

    @property
    def label(self) -> str:
        return f"{self.net} net, {self.config}, {METHOD_NAMES[self.method]}"


CELLS = tuple(Cell(n, c, m) for n, c in (("small", "S"), ("large", "S"), ("large", "L")) for m in METHODS)


def run_cell(cell: Cell, log=None, offchip: bool = True) -> dict:
    """Compile and run one cell; its row (status ``ok``) or the compiler's reason.
    ``offchip``: a cell that does not fit on chip is run with a DRAM channel per core
    (:func:`dram_config`) where the compiler can stream its weights; else it is reported
    as not fitting."""
    from sw.mlp import MLP
    from sw.train import TrainCompileError

    cfg = PRESETS[cell.config]
    mlp = MLP(NETS[cell.net], LOSS, LR, batch=cell.batch)
    paper, paper_util = PAPER[(cell.net, cell.config, cell.method)]
    row = {"net": cell.net, "config": cell.config, "method": cell.method, "batch": cell.batch,
           "network": mlp.describe(), "paper_gflops_w": paper, "paper_mac_util": paper_util}
    t0 = time.perf_counter()
    try:
        tp = compile_method(cell.method, cfg, mlp)
    except TrainCompileError as e:
        try:                               # off-chip: the largest weight panels streamed from DRAM
            cfg = dram_config(cell.config)
            tp = compile_method(cell.method, cfg, mlp) if offchip else None
        except TrainCompileError:
            tp = None
        if tp is None:
            return {**row, "gflops_w": None, "gflops_w_all": None, "mac_util": None, "ratio": None,
                    "status": f"does not fit: {e}"}
        row["offchip"] = (f"DRAM {cfg.dram_mib} MiB per core ({cfg.dram_gbps:g} GB/s, {cfg.dram_latency} cycles "
                          f"latency)")
    m = measure_step(cfg, mlp, cell.method, weight_seed=WEIGHT_SEED, input_seed=INPUT_SEED, tp=tp,
                     label=cell.label, session=MovementSession(cfg, "fast"))
    r, ctr, rep, words, flops, steps = m.result, m.counters, m.report, m.ucode_words, m.flops, m.steps_run
    cycles = ctr["cycles"]
    if m.movement["critical"]["cycles"] != cycles:
        raise AssertionError(f"{cell.label}: the classified cycles ({m.movement['critical']['cycles']}) are not the "
                             f"step's ({cycles})")
    alt = report_from_counters(cfg, ctr, flops=flops, n_cores=cfg.cores, ucode_words=words,
                               tech=DEFAULT_TECH.replace(fpu_pj_per_flop=dict(DEFAULT_TECH.fpu_pj_per_flop,
                                                                              binary16=2.63)))
    if log:
        log(f"{cell.label}: {cycles} cycles, MAC util. {rep.mac_utilization * 100:.1f}%, "
            f"{rep.gflops_per_w_compared:.0f} GFLOPS/W compared ({rep.gflops_per_w_all:.0f} everything); "
            f"weights = golden bit for bit; {time.perf_counter() - t0:.1f} s")
    return {**row, "gflops_w": rep.gflops_per_w_compared, "gflops_w_all": rep.gflops_per_w_all,
            "mac_util": rep.mac_utilization, "ratio": rep.gflops_per_w_compared / paper, "status": "ok",
            "gflops_w_table1_fpu": alt.gflops_per_w_compared, "memory_over_fpu": rep.memory_over_fpu,
            "cycles": cycles, "host_cycles": r.host_cycles, "flops": flops, "gflops": rep.gflops,
            "watts_all": rep.watts, "pj_per_flop": rep.pj_per_flop, "ucode_words": words,
            "steps_run": steps, "golden": f"{steps} step(s) bit-exact", "wall_s": round(time.perf_counter() - t0, 1),
            "movement": {"critical": m.movement["critical"], "mean": m.movement["mean"]},
            **_reload_figures(tp, r), **_dram_figures(tp, ctr), **arch_bound_of(row, cfg)}


def arch_bound_of(row: dict, cfg=None) -> dict:
    """``{"arch_bound": ...}``: the cell of ``row`` under :func:`sim.arch_bound.architecture_bound`
    on ``cfg`` (default: the row's configuration, with DRAM if it ran off-chip), its
    ``port_words_needed`` for the paper's utilization where the paper gives one."""
    if cfg is None:
        cfg = dram_config(row["config"]) if row.get("offchip") else PRESETS[row["config"]]
    b = architecture_bound(cfg, NETS[row["net"]], row["method"], row["batch"], row.get("paper_mac_util"), LOSS)
    return {"arch_bound": {k: b[k] for k in ("bound", "binding", "cycles", "loads", "stores", "dram_words")
                           if k in b} | ({"port_words_needed": b["port_words_needed"]}
                                         if "port_words_needed" in b else {})}


def _reload_figures(tp, r) -> dict:
    """A step that LOADs microcode images between its RUNs: the LOADs' cycles (in
    ``cycles``) and the words per core of the images it switches between."""
    if not getattr(r, "load_cycles", 0):
        return {}
    return {"microcode_load_cycles": r.load_cycles, "microcode_reload_words_per_step": tp.reload_words_per_step()}


def _dram_figures(tp, ctr) -> dict:
    """Per step (cores summed): DRAM and scratchpad traffic in beats, the DMA cycles the
    compiler predicted hidden and exposed (and the measured stalls), per layer where its
    weight panel lives."""
    from sw.train_dram import panel_tier

    spad = getattr(tp, "spad", {}) or {}
    out = {"weights": {f"W{l}": panel_tier(spad.get(l)) for l in range(tp.mlp.n_layers)},
           "spad_rd_beats": int(ctr.get("spad_rd_beats", 0)), "spad_wr_beats": int(ctr.get("spad_wr_beats", 0))}
    if hasattr(tp, "dram_per_step") and tp.cfg.dram_mib:
        d = tp.dram_per_step()
        out.update({"dram_rd_beats": int(ctr.get("dram_rd_beats", 0)), "dram_wr_beats": int(ctr.get("dram_wr_beats", 0)),
                    "dma_busy_cycles_per_core": d["busy"], "dma_hidden_cycles_per_core": d["hidden"],
                    "dma_exposed_cycles_per_core": d["stall"] + d["tail"], "dma_stall_cycles_per_core": d["stall"],
                    "dma_stall_cycles_measured": int(ctr.get("dma_stall_cycles", 0)) // tp.cfg.cores})
    return out


def convention(tech=DEFAULT_TECH) -> dict:
    """The energy convention of every compared figure, and its derivation."""
    e = tech.fpu_pj_per_flop["binary16"]
    implied = {"small net at S, SGD: 177 GFLOPS/W, memory 1.5x FPU": 1e3 / 177 / 2.5,
               "small net at S, CP: 204 GFLOPS/W, memory about even": 1e3 / 204 / 2,
               "large net at L, CP: 211 GFLOPS/W, memory about even": 1e3 / 211 / 2}
    return {
        "fpu_pj_per_flop": e, "flops_per_fpu_issue": tech.flops_per_fpu_issue, "flops_per_mac": 2,
        "fpu_only_ceiling_gflops_w": 1e3 / e,
        "derivation": ("The reference design's own totals and energy split imply the FPU energy per FLOP: "
                       + "; ".join(f"{k} -> {v:.2f} pJ" for k, v in implied.items())
                       + f"; mean {sum(implied.values()) / 3:.2f} pJ per FLOP (its Table 1 gives 2.63 pJ per op, "
                       "the column gflops_w_table1_fpu uses that). FLOPs = 2 per useful multiply-add of the "
                       "network; every FPU issue is charged as 2 FLOPs of energy, reduction adds included."),
        "implied_pj_per_flop": implied,
        "compared_scope": list(COMPARED), "everything": list(EVERYTHING), "memory": list(MEMORY),
        "leakage_mw_per_mm2": {"logic": tech.leakage_mw_per_mm2_logic, "sram": tech.leakage_mw_per_mm2_sram},
        "tech": tech.name, "source": "sim/tech/45nm.json (every value with its source); docs/power.md",
    }


def table2(cells=CELLS, log=None, progress=None, offchip: bool = True) -> dict:
    """Run ``cells``; the ``caterpillar paper`` JSON (keys ``cells``, ``area_mm2``,
    ``convention``). ``offchip``: see :func:`run_cell`."""
    rows = []
    for cell in cells:
        rows.append(run_cell(cell, log, offchip))
        if progress:
            progress(cell)
    area, breakdown = areas(rows)
    return {"title": "The reference design's Table 2 beside this model", "cells": rows, "area_mm2": area,
            "area_breakdown_mm2": breakdown, "convention": convention(),
            "weight_seed": WEIGHT_SEED, "input_seed": INPUT_SEED, "loss": LOSS, "lr": LR}


def areas(rows) -> tuple[dict, dict]:
    """``(area_mm2, area_breakdown_mm2)`` of :func:`table2` for its cell rows ``rows``:
    the microcode stores sized from the largest image of each configuration's cells."""
    area, breakdown = {}, {}
    for name in ("S", "L"):
        cfg = PRESETS[name]
        need = [r["ucode_words"] for r in rows if r["config"] == name and r["status"] == "ok"]
        words = max(need) if need else cfg.ucode_depth
        a = area_of_core(cfg, ucode_words=words)
        blocks = {k: cfg.cores * v for k, v in a.items() if k != "pe"}
        ours = sum(v for k, v in blocks.items() if k != "ucode")
        area[name] = {"ours": ours, "paper": PAPER_AREA_MM2[name], "ratio": ours / PAPER_AREA_MM2[name],
                      "ucode": blocks["ucode"], "total_with_ucode": ours + blocks["ucode"]}
        breakdown[name] = {**blocks, "ucode_words_per_core": words,
                           "ucode_sized_from": "largest program image of this configuration's cells"
                           if need else "ArchConfig.ucode_depth (no cell ran)"}
    return area, breakdown


def _f(v, spec, none="-"):
    return none if v is None else format(v, spec)


def _pct(v):
    return "-" if v is None else f"{v * 100:.1f}%"


def movement_share(r: dict) -> str:
    """``"hidden/exposed %"``: a row's data-movement cycles on the critical path as
    percentages of the step's cycles; ``"-"`` for a row without them."""
    mv = (r.get("movement") or {}).get("critical")
    if not mv or not mv["cycles"]:
        return "-"
    return f"{mv['hidden'] / mv['cycles'] * 100:.0f}/{mv['exposed'] / mv['cycles'] * 100:.0f}%"


#: the resources of a core that serve one event per cycle, as :func:`schedule_bound` names
#: them, and the movement kinds (:data:`sim.movement.KINDS`) that occupy each: the host
#: port carries host I/O and microcode LOADs
RESOURCES = {"FPU issue": (), "scratchpad port": ("spad",), "DRAM DMA": ("dma",), "host port": ("host", "ucode"),
             "ring port": ("ring",)}


def schedule_bound(r: dict) -> dict | None:
    """The MAC utilization a cell's schedule cannot exceed, from its step's counters on
    the critical core (``r["movement"]["critical"]``), or None for a cell without them.

    A core issues one instruction per cycle, its scratchpad port moves one beat per
    cycle, its DMA engine does one transfer at a time and the host port streams one beat
    per cycle; so the step lasts at least as long as the busiest of these resources is
    busy (:data:`RESOURCES`; ``FPU issue`` = the cycles whose instruction starts an FMA in
    some PE). No reordering of the same instructions and transfers (FMAs, page moves, DMA
    copies, LOADs) beats ``mac_util x cycles / busiest``: ``bound``, the resource
    ``binding``, its ``busy`` cycles. ``hidden``: the utilization with every exposed
    data-movement cycle removed and nothing else changed (:mod:`sim.movement`), which the
    bound caps when a resource, not the FPU issue, binds. ``fpu_efficiency``: useful MACs
    per PE and FPU-issue cycle (the part of ``bound`` that padding, reductions, the softmax
    and other partial-array work take when the FPU issue binds)."""
    crit = (r.get("movement") or {}).get("critical")
    if not crit or r.get("mac_util") is None:
        return None
    busy = {name: crit["compute"] if not kinds else sum(crit[k]["cycles"] for k in kinds)
            for name, kinds in RESOURCES.items()}
    binding = max(busy, key=busy.get)
    u, cyc = r["mac_util"], crit["cycles"]
    return {"bound": u * cyc / busy[binding], "binding": binding, "busy": busy,
            "hidden": u * cyc / (cyc - crit["exposed"]), "fpu_efficiency": u * cyc / crit["compute"]}


def _bound(r: dict) -> str:
    b = schedule_bound(r)
    return "-" if b is None else f"{b['bound'] * 100:.1f}% {b['binding']}"


def _arch(r: dict) -> str:
    b = r.get("arch_bound")
    return "-" if b is None else f"{b['bound'] * 100:.1f}% {b['binding']}"


def format_table(res: dict) -> str:
    """The JSON of :func:`table2` as a text table."""
    lines = [f"{'case':<30} {'paper':>6} {'ours':>6} {'ratio':>6} {'all':>6} {'MAC util':>9} {'paper util':>10} "
             f"{'mem/FPU':>8} {'DM hid/exp %':>13} {'util bound':>24} {'arch bound':>24}  status"]
    for r in res["cells"]:
        st = r["status"] if r["status"] == "ok" else r["status"][:110] + ("..." if len(r["status"]) > 110 else "")
        if r.get("offchip"):
            st += (f" (off-chip: {r['offchip']}; per step DRAM {r['dram_rd_beats'] + r['dram_wr_beats']} beats, "
                   f"scratchpad {r['spad_rd_beats'] + r['spad_wr_beats']} beats, cores summed; DMA per core "
                   f"{r['dma_hidden_cycles_per_core']} cycles hidden, {r['dma_exposed_cycles_per_core']} exposed)")
        lines.append(f"{Cell(r['net'], r['config'], r['method']).label:<30} {r['paper_gflops_w']:>6} "
                     f"{_f(r['gflops_w'], '.0f'):>6} {_f(r['ratio'], '.2f'):>6} {_f(r['gflops_w_all'], '.0f'):>6} "
                     f"{_pct(r['mac_util']):>9} {_pct(r['paper_mac_util']):>10} "
                     f"{_f(r.get('memory_over_fpu'), '.2f'):>8} {movement_share(r):>13} {_bound(r):>24} {_arch(r):>24}  {st}")
    c = res["convention"]
    lines += ["", "GFLOPS/W: 'ours' = compared scope (" + " + ".join(c["compared_scope"]) + "); 'all' = everything "
              "(+ " + ", ".join(c["everything"][len(c["compared_scope"]):]) + f"); FPU {c['fpu_pj_per_flop']} pJ "
              f"per FLOP, {c['flops_per_fpu_issue']:g} FLOPs per FPU issue; MAC util. = useful MACs / (cycles x "
              "PEs), host turnaround included; DM hid/exp = cycles of the step's critical path with data movement "
              "beside compute / without, % of the step (sim.movement); util bound = the MAC util. the step's "
              "instructions and transfers allow, from the busiest resource of its critical core "
              "(sim.paper.schedule_bound); arch bound = the MAC util. no schedule of the method passes on the "
              "configuration, from its PE memories, scratchpad and DRAM capacities and port widths "
              "(sim.arch_bound).",
              "area (PE arrays + scratchpads, the paper's blocks): " + "; ".join(
                  f"{k} {v['ours']:.1f} mm^2 (paper {v['paper']}, {v['ratio']:.3f}x) + microcode stores "
                  f"{v['ucode']:.1f} mm^2 = {v['total_with_ucode']:.1f}" for k, v in res["area_mm2"].items())]
    return "\n".join(lines)


def plot_table2(res: dict, path) -> None:
    """PNG: per cell, the paper's GFLOPS/W beside ours in both scopes; cells that do not
    run are marked. Written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from arch.files import atomic_savefig

    rows = res["cells"]
    fig, ax = plt.subplots(figsize=(12, 5))
    xs = np.arange(len(rows))
    w = 0.27
    top = max([r["paper_gflops_w"] for r in rows] + [r["gflops_w"] or 0 for r in rows])
    series = (("paper", "paper_gflops_w", "#7f7f7f"), ("ours, compared scope", "gflops_w", "#1f77b4"),
              ("ours, everything", "gflops_w_all", "#ff7f0e"))
    for i, (lab, key, col) in enumerate(series):
        vals = [r[key] or 0 for r in rows]
        bars = ax.bar(xs + (i - 1) * w, vals, w, label=lab, color=col)
        for b, v in zip(bars, vals):
            if v:
                ax.text(b.get_x() + b.get_width() / 2, v + top * 0.01, f"{v:.0f}", ha="center", fontsize=7)
    for x, r in zip(xs, rows):
        if r["status"] != "ok":
            ax.text(x + w / 2, top * 0.05, "does not fit", rotation=90, ha="center", va="bottom", fontsize=8,
                    color="#d62728")
    ax.set_xticks(xs, [f"{r['net']} {r['config']}{' + DRAM' if r.get('offchip') else ''}\n"
                       f"{METHOD_NAMES[r['method']]}\n"
                       + (f"{r['mac_util'] * 100:.0f}% MAC util." if r["mac_util"] is not None else "")
                       for r in rows], fontsize=8)
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel("GFLOPS/W")
    c = res["convention"]
    ax.set_title(f"Table 2 of the reference design beside this model (FPU {c['fpu_pj_per_flop']} pJ/FLOP; compared "
                 f"scope {' + '.join(c['compared_scope'])})", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)

