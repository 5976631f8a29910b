"""Spatial sharing at configuration S (32 cores of 4 x 4 PEs): four training jobs of
different sizes at once on right-sized, buddy-packed core groups (``caterpillar share``,
:func:`share.schedule.share`), against time sharing (the same jobs one after another,
each with its fastest group of the whole chip, the whole chip leaking all along).

Every figure is from the fast chip engine (each job's program, compiled for its group's
size, run in its group of one :class:`sim.sessions.SharedChip`; tests prove a group's run
bit for bit equal to the job alone, ``tests/sim/test_partition.py``). Three throughput
figures, as they answer different questions: ``makespan ratio`` (time sharing's cycles
over the shared run's, for the steps given: the last job decides), ``samples/s ratio``
(the same for these steps) and ``normalized progress`` (the sum over jobs of exclusive
step / shared step: how many jobs' worth of progress the shared chip makes per unit of
time in steady state; time sharing's is 1).
"""

from __future__ import annotations

from arch.config import ArchConfig
from share.jobs import parse_jobs
from share.schedule import share

#: two mixes of four jobs: the small networks alone (steps chosen so that each job's
#: exclusive run is about as long, 60-75 k cycles: equal-length jobs, as in a search),
#: and with the reference design's small network (equal steps; it scales to the whole
#: chip, so it bounds the makespan)
SCENARIOS = {
    "small networks": [
        {"name": "digits", "network": "digits", "method": "sgd", "steps": 64},
        {"name": "digits-mb", "network": "digits-wide", "method": "mbgd:8", "steps": 20},
        {"name": "mnist", "network": "mnist-mlp", "method": "sgd", "steps": 24},
        {"name": "mnist-mb", "network": [784, 128, 10], "method": "mbgd:4", "steps": 8},
    ],
    "with the paper's small network": [
        {"name": "digits", "network": "digits", "method": "sgd", "steps": 8},
        {"name": "digits-mb", "network": "digits-wide", "method": "mbgd:8", "steps": 8},
        {"name": "mnist", "network": "mnist-mlp", "method": "sgd", "steps": 8},
        {"name": "paper", "network": "paper-small", "method": "sgd", "steps": 8},
    ],
}
SLOWDOWN = 1.5


def run() -> dict:
    cfg = ArchConfig.from_dict({"preset": "S"})
    rows, reports = [], {}
    for name, spec in SCENARIOS.items():
        rep = share(cfg, parse_jobs(spec, cfg.cores), slowdown=SLOWDOWN, log=lambda *_: None)
        reports[name] = {k: v for k, v in rep.items() if k != "config"}
        for r in rep["jobs"]:
            m = f"mbgd:{r['batch']}" if r["method"] == "mbgd" else r["method"]
            rows.append({"scenario": name, "job": r["job"], "network": "-".join(map(str, r["network"])),
                         "method": m, "cores": r["cores"], "step cycles": r.get("step_cycles"),
                         "exclusive step cycles": r["exclusive_step_cycles"],
                         "exclusive cores": r["exclusive_cores"],
                         "slowdown": round(r["slowdown"], 3) if r["error"] is None else r["error"],
                         "GFLOPS/W": round(r["gflops_per_w"], 1) if r["error"] is None else None})
        sh, ts = rep["shared"], rep["time_sharing"]
        rows.append({"scenario": name, "job": "all (shared)", "network": "", "method": "",
                     "cores": sum(r["cores"] for r in rep["jobs"]), "step cycles": sh["cycles"],
                     "exclusive step cycles": ts["cycles"], "exclusive cores": cfg.cores,
                     "slowdown": (f"makespan ratio {rep['throughput_ratio']:.2f}, samples/s "
                                  f"{sh['samples_per_s'] / ts['samples_per_s']:.2f}x, normalized progress "
                                  f"{rep['normalized_progress']:.2f}"),
                     "GFLOPS/W": f"{sh['gflops_per_w']:.1f} (time sharing {ts['gflops_per_w']:.1f})"})
    return {"title": "Spatial sharing at configuration S: four jobs on core groups vs time sharing (fast chip engine)",
            "note": ("per job: its group ('cores'), its step on the shared chip and its exclusive step (its fastest "
                     "group of the whole chip), slowdown = their ratio; 'all' rows: the shared run's cycles vs "
                     "time sharing's for the steps given, and GFLOPS/W with the chip's leakage (idle cores "
                     "included). Right-sizing limit: step within 1.5x the exclusive step, then groups halved "
                     "(least makespan growth) until they fit."),
            "rows": rows, "scenarios": reports}
