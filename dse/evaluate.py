"""One design point measured: every workload compiled for the point's configuration and
method, one training step run on the fast chip engine, its counters turned into power
and area (:func:`sim.step_measure.measure_step`, :mod:`sim.power`).

:func:`evaluate_point` is the task the search's engines run (a plain function of
picklable arguments, so that Ray can ship it). It never raises for a bad point: an
invalid configuration, a network that does not fit, or an error in the run is recorded
in ``status`` with its reason.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

__all__ = ["Workload", "WORKLOADS", "OBJECTIVES", "config_area", "evaluate_point", "parse_workloads"]

#: the reference design's networks (784 inputs, 10 classes)
NETS = {"small": (784, 500, 500, 500, 10), "large": (784, 2500, 2000, 1500, 1000, 500, 10)}

#: objectives: name -> (result key, higher is better)
OBJECTIVES = {
    "throughput_per_tdp": ("throughput_per_tdp", True),
    "throughput": ("throughput", True),
    "gflops_per_w": ("gflops_per_w", True),
    "energy_per_sample": ("energy_per_sample_j", False),
}


@dataclass(frozen=True)
class Workload:
    """An MLP to train, with its weight in the objective (a weighted geometric mean over
    the workloads)."""

    name: str
    sizes: tuple
    loss: str = "softmax_ce"
    lr: float = 0.01
    weight: float = 1.0

    def key(self) -> dict:
        return {"sizes": list(self.sizes), "loss": self.loss, "lr": self.lr}


WORKLOADS = {n: Workload(n, s) for n, s in NETS.items()}


def parse_workloads(text: str) -> list[Workload]:
    """``small``, ``large`` or layer sizes ``784-100-10``, comma separated, each with an
    optional ``*weight`` (e.g. ``small*2,large``)."""
    from arch.errors import UsageError

    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, _, w = item.partition("*")
        try:
            weight = float(w) if w else 1.0
        except ValueError:
            raise UsageError(f"--workloads {item!r}: the weight after '*' must be a number") from None
        if not (weight > 0 and math.isfinite(weight)):
            raise UsageError(f"--workloads {item!r}: the weight must be positive")
        if name in NETS:
            out.append(Workload(name, NETS[name], weight=weight))
            continue
        try:
            sizes = tuple(int(s) for s in name.split("-"))
        except ValueError:
            raise UsageError(f"--workloads {name!r}: a network is small, large or layer sizes like 784-100-10") \
                from None
        if len(sizes) < 2 or min(sizes) < 1:
            raise UsageError(f"--workloads {name!r}: at least an input and an output size, all positive")
        out.append(Workload(name, sizes, weight=weight))
    if not out:
        raise UsageError("--workloads: give at least one network")
    return out


def _workload(cfg, wl: Workload, method: str, batch: int, golden: bool, mapping: dict) -> dict:
    from sim.step_measure import measure_step, phase_cycles
    from sw.mlp import MLP

    loss = "mse" if method == "cp" and batch > 1 else wl.loss       # minibatch CP trains MSE on the array
    mlp = MLP(wl.sizes, loss, wl.lr, batch=batch)
    m = measure_step(cfg, mlp, method, golden=golden, label=f"{wl.name} {method}", ucode_from_program=False,
                     options=mapping)
    rep = m.report
    seconds = m.counters["cycles"] / (cfg.clock_mhz * 1e6)
    samples = batch / seconds
    return {"workload": wl.name, "method": method, "batch": batch, "cycles": m.counters["cycles"],
            "samples_per_s": samples, "watts": rep.watts, "gflops_per_w_compared": rep.gflops_per_w_compared,
            "gflops_per_w_all": rep.gflops_per_w_all, "mac_utilization": rep.mac_utilization,
            "energy_per_sample_j": rep.watts / samples, "ucode_words": m.ucode_words,
            "area_mm2": rep.area_mm2["total"],
            "phases": phase_cycles(m.tp, getattr(m.result, "host_cycles", 0), getattr(m.result, "load_cycles", 0)),
            "pj_per_flop": dict(rep.pj_per_flop), **_memory_figures(m.tp, m.counters, cfg),
            "golden": f"{m.steps_run} step(s) bit-exact" if golden else "not checked"}


def _memory_figures(tp, ctr, cfg) -> dict:
    """Where each layer's weights live (PE memory, scratchpad, DRAM or both) and, with
    DRAM, the step's DRAM beats and the cycles a core stalled on its DMA (measured)."""
    from sw.train_dram import panel_tier

    spad = getattr(tp, "spad", {}) or {}
    out = {"weights": {f"W{l}": panel_tier(spad.get(l)) for l in range(tp.mlp.n_layers)}}
    if cfg.dram_mib:
        out.update(dram_beats=int(ctr.get("dram_rd_beats", 0)) + int(ctr.get("dram_wr_beats", 0)),
                   dma_stall_cycles_per_core=int(ctr.get("dma_stall_cycles", 0)) // cfg.cores)
    return out


def config_area(cfg) -> float:
    """The chip's area in mm^2 as a measurement reports it (the power model's blocks of
    every core, the microcode stores of ``ucode_depth`` words), from the configuration
    alone."""
    from sim.power import area_of_core

    blocks = {k: v for k, v in area_of_core(cfg).items() if k != "pe"}
    return cfg.cores * sum(blocks.values())


def _geomean(values, weights) -> float:
    tot = sum(weights)
    return math.exp(sum(w * math.log(max(v, 1e-300)) for v, w in zip(values, weights)) / tot)


def evaluate_point(base: dict, point: dict, workloads: list[Workload], key: str, golden: bool = False) -> dict:
    """Measure ``point`` (axis values over the configuration ``base``, a dict of
    ArchConfig fields) on ``workloads``; the result dict (``status`` ``ok`` or the
    reason), with the objectives' values when ``ok``."""
    from arch.config import ArchConfig, ConfigError
    from arch.errors import CaterpillarError
    from dse.space import ARCH_AXES, point_mapping, point_method

    t0 = time.perf_counter()
    out = {"key": key, "point": dict(point), "worker_pid": os.getpid()}
    try:
        cfg = ArchConfig.from_dict({**base, **{k: v for k, v in point.items() if k in ARCH_AXES}})
        if cfg.cores < 2:
            raise ConfigError("the chip compilers need cores >= 2 (a ring)")
    except (ConfigError, TypeError) as e:
        return {**out, "status": f"invalid: {e}", "wall_s": round(time.perf_counter() - t0, 3)}
    method, batch = point_method(point)
    mapping = point_mapping(point)
    rows = []
    try:
        for wl in workloads:
            rows.append(_workload(cfg, wl, method, batch, golden, mapping))
    except CaterpillarError as e:              # TrainCompileError and the other compile errors
        return {**out, "status": f"does not fit: {e}", "wall_s": round(time.perf_counter() - t0, 3)}
    except Exception as e:                     # noqa: BLE001 - a failed run is recorded, never lost
        return {**out, "status": f"error: {type(e).__name__}: {e}", "wall_s": round(time.perf_counter() - t0, 3)}
    w = [wl.weight for wl in workloads]
    thr = _geomean([r["samples_per_s"] for r in rows], w)
    tdp = max(r["watts"] for r in rows)
    return {**out, "status": "ok", "config": cfg.to_dict(), "area_mm2": rows[0]["area_mm2"], "tdp_w": tdp,
            "throughput": thr, "throughput_per_tdp": thr / tdp,
            "gflops_per_w": _geomean([r["gflops_per_w_all"] for r in rows], w),
            "gflops_per_w_compared": _geomean([r["gflops_per_w_compared"] for r in rows], w),
            "energy_per_sample_j": _geomean([r["energy_per_sample_j"] for r in rows], w),
            "workloads": rows, "wall_s": round(time.perf_counter() - t0, 3)}
