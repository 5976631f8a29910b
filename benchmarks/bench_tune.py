"""Hyperparameter tuning on partitions at configuration S: a learning-rate and batch
search for a digits network (64-64-10, scikit-learn's 8 x 8 digits) with 16 trials,
run 8 at a time on groups of 4 cores (``caterpillar tune``, :func:`share.tune.tune`:
Optuna's TPE sampler and median pruner), against the same trials with the same stops
run one after another on the whole chip, each step at its exclusive cycles.

Chip time is simulated time (cycles of the fast chip engine); the best trial's accuracy
is the same in both (a trial's run in a group is bit for bit its run alone), and is
shown beside float64 training with the same hyperparameters and samples.
"""

from __future__ import annotations

from arch.config import ArchConfig
from share.tune import tune
from sw.datasets import load_dataset

TRIALS, GROUP_CORES = 16, 4


def run() -> dict:
    cfg = ArchConfig.from_dict({"preset": "S"})
    rep = tune(cfg, (64, 64, 10), load_dataset("digits"), trials=TRIALS, group_cores=GROUP_CORES,
               train_samples=400, epochs=1, checkpoints=4, seed=0, log=lambda *_: None)
    rows = [{"trial": r["trial"], "lr": round(r["lr"], 5), "batch": r["batch"], "group": r["group"],
             "state": r["state"], "steps": r["steps"], "step cycles": r["step_cycles"],
             "exclusive step cycles": r["exclusive_step_cycles"], "test accuracy": round(r["accuracy"], 3)}
            for r in rep["records"]]
    b = rep["best"]
    rows.append({"trial": "all", "lr": round(b["lr"], 5), "batch": b["batch"], "group": "",
                 "state": f"{rep['pruned']} pruned",
                 "steps": sum(r["steps"] for r in rep["records"]),
                 "step cycles": f"partitioned {rep['partitioned']['cycles']}",
                 "exclusive step cycles": f"sequential {rep['sequential']['cycles']} "
                                          f"({rep['chip_time_ratio']:.2f}x)",
                 "test accuracy": f"best {b['accuracy']:.3f} (float64 {b['accuracy_float64']:.3f})"})
    return {"title": "Tuning on partitions at configuration S: 16 trials, 8 groups of 4 cores, vs sequential",
            "note": ("'all' row: chip cycles of the partitioned search (the last group to finish) and of the "
                     "sequential one (the same trials and stops on the whole chip at each batch's fastest group "
                     "size), their ratio; the best trial's test accuracy (its weights evaluated in float64) and "
                     "float64 training's with the same hyperparameters."),
            "rows": rows, "report": {k: v for k, v in rep.items() if k != "config"}}
