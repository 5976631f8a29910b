"""Offline characterization of every operation class on the reference design's two core
kinds, and the performance model's error on held-out shapes (docs/perf.md).

The kinds are the cores of configurations S (4 x 4 PEs) and L (16 x 16 PEs), binary16, as
a heterogeneous chip holds them (:func:`arch.hetero.mix_kind`: the chip's ring FIFO depth,
which the hybrid scheduler's chips have).
Every point is a run on the fast engines (:func:`perf.characterize.measure`: single-core
classes on the fast core model through :func:`sim.core_run.run_kernel`, ring classes on
the fast chip engine, ring sizes 2, 4, 8 on the grid). The model
(:class:`perf.model.PerfModel`) is fitted on the grid only; its error is measured on
held-out shapes: matrix sides ``3 nr - 1``, ``5 nr + 1``, ``11 nr + 3``, ``23 nr - 2``,
``45 nr + 1`` (none a multiple of ``nr``), odd batch sizes, vector and segment lengths
between the grid's, ring sizes 6 and 12 (between and beyond the grid's). The DRAM copy
classes run on the same kinds with 64 MiB of DRAM (kinds ``S+dram``, ``L+dram``).
"""

from __future__ import annotations

from arch.hetero import mix_kind
from perf.characterize import characterize
from perf.model import PerfModel
from perf.report import characterization_document

#: the core kinds: configuration S's core and configuration L's core
KINDS = ("S", "L")
#: the DRAM copy classes run on the same kinds with DRAM (the presets have none)
DRAM_MIB = 64


def _pct(x: float) -> float:
    return round(100.0 * x, 3)


def run() -> dict:
    doc = characterize({k: mix_kind(k) for k in KINDS}, grid="full")
    dram = characterize({f"{k}+dram": mix_kind(k, dram_mib=DRAM_MIB) for k in KINDS},
                        ["dram_load", "dram_store"], grid="full")
    doc["kinds"].update(dram["kinds"])
    doc["points"] += dram["points"]
    doc["seconds"] = round(doc["seconds"] + dram["seconds"], 2)
    model = PerfModel.fit(doc)
    full = characterization_document(doc, model)
    rows, worst_c, worst_e, means_c, means_e = [], 0.0, 0.0, [], []
    for kname, kd in full["kinds"].items():
        for c, e in kd["classes"].items():
            g = full["errors"]["grid"][kname][c]
            h = full["errors"]["held_out"][kname][c]
            cyc = [p["cycles"] for p in e["grid"]]
            rows.append({"kind": kname, "class": c, "grid points": len(e["grid"]), "held-out points": h["points"],
                         "grid cycles": f"{min(cyc)}..{max(cyc)}", "fit cycles err % (grid, max)":
                         _pct(g["cycles"]["max"]),
                         "held-out cycles err % max": _pct(h["cycles"]["max"]),
                         "held-out cycles err % mean": _pct(h["cycles"]["mean"]),
                         "held-out energy err % max": _pct(h["energy"]["max"]),
                         "held-out energy err % mean": _pct(h["energy"]["mean"]),
                         "held-out worst category err % max": _pct(h["category"]["max"])})
            worst_c, worst_e = max(worst_c, h["cycles"]["max"]), max(worst_e, h["energy"]["max"])
            means_c.append(h["cycles"]["mean"])
            means_e.append(h["energy"]["mean"])
    held = sum(r["held-out points"] for r in rows)
    note = (f"{doc['points']} points measured on the fast engines in {doc['seconds']:.0f} s ({held} of them held "
            f"out: never fitted). Model: per class and kind, cycles and each energy category linear in the class's "
            f"schedule terms (perf.model.terms: the compiler's blocking times the work per block; ring size times "
            f"segment length), least squares on the grid. Held-out error, |predicted - measured| / measured: cycles "
            f"max {_pct(worst_c)} %, mean over classes {_pct(sum(means_c) / len(means_c))} %; total energy max "
            f"{_pct(worst_e)} %, mean {_pct(sum(means_e) / len(means_e))} % (goal 3 %). 'worst category' = the "
            f"largest error of one energy category holding at least 1 % of the point's energy. Energy: "
            f"{doc['energy_convention']}.")
    return {"title": "Characterization and performance model (cores of S and L, fast engines, held-out shapes)",
            "note": note, "rows": rows, "errors": full["errors"]["held_out"],
            "held_out_worst_by_class": full["errors"]["held_out_worst_by_class"], "model": full["model"],
            "points": doc["points"], "characterize_seconds": doc["seconds"]}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
