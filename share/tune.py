"""Learning-rate and batch search for one network with its trials run concurrently on
the groups of one chip (``caterpillar tune``; ``docs/chip.md``, "Tuning on partitions").

Search and early stopping are Optuna's (a TPE sampler, a median pruner), driven through
its ask-and-tell interface. The chip is cut into ``cores / group_cores`` groups of
``group_cores`` cores (:class:`sim.sessions.SharedChip`); each group runs one trial at a
time, the trial's program compiled for ``cfg.replace(cores=group_cores)``. A trial
trains for ``epochs`` over its training samples and reports the test accuracy of the
array's weights at ``checkpoints`` points; the pruner stops a trial whose accuracy is
below the median of the others at the same point, and its group takes a new trial.

Concurrency is in chip time: every group has its own clock (the cycles of its trials'
steps); the next trial to advance is always the one whose group's clock is earliest, so
reports reach the pruner in the order they would on the chip. The sequential baseline
runs the same trials, with the same stops, one after another on the whole chip, each
step at its exclusive cycles (the fastest group size of the whole chip for that batch).
"""

from __future__ import annotations

import heapq
import time

import numpy as np

from arch.errors import InputError
from arch.partition import Partition

__all__ = ["tune"]


def _accuracy(mlp, fmt, weights, x, y) -> float:
    """Test accuracy of the array's weights, evaluated in float64 (the weights exactly as
    stored, the forward pass in float64)."""
    from sw.golden_train import Float64SGD

    ref = Float64SGD(mlp, [fmt.to_float(W) for W in weights])
    return float(np.mean([int(np.argmax(ref.predict(xi))) == int(yi) for xi, yi in zip(x, y)]))


def _float64_accuracy(mlp, W0f, order, xtr, ytr, xte, yte) -> float:
    """Test accuracy of float64 training with the same hyperparameters and samples."""
    from sw.golden_train import Float64SGD
    from sw.golden_train_mb import Float64MBGD

    b = mlp.batch
    if b == 1:
        ref = Float64SGD(mlp, [W.copy() for W in W0f])
        for i in order:
            ref.step(xtr[i], int(ytr[i]))
        return float(np.mean([int(np.argmax(ref.predict(v))) == int(c) for v, c in zip(xte, yte)]))
    ref = Float64MBGD(mlp, [W.copy() for W in W0f])
    for i in range(0, len(order) - b + 1, b):
        idx = order[i:i + b]
        ref.step(xtr[idx].T, ytr[idx])
    out = ref.predict(xte.T)
    return float(np.mean(np.argmax(out, axis=0) == yte))


class _Trial:
    """One trial in one group: its compiled program, its sample order, its progress."""

    def __init__(self, cfg, sizes, loss, ot, batches, lr_range, sess, xtr, seed, epochs):
        from sim.step_measure import compile_method
        from sw.mlp import MLP
        from sw.train import init_weights

        self.ot = ot
        lr = ot.suggest_float("lr", lr_range[0], lr_range[1], log=True)
        b = ot.suggest_categorical("batch", list(batches))
        self.mlp = MLP(tuple(sizes), loss=loss, lr=lr, batch=b)
        self.sess = sess
        self.tp = compile_method("sgd" if b == 1 else "mbgd", sess.cfg, self.mlp)
        self.W0 = init_weights(self.mlp, sess.cfg.fmt, seed)
        self.tp.init(sess, self.W0)
        rng = np.random.default_rng(seed + ot.number)
        self.order = np.concatenate([rng.permutation(len(xtr)) for _ in range(epochs)])
        self.steps_total = len(self.order) // b
        self.done = 0
        self.cycles = 0
        self.step_cycles = 0

    def advance(self, n, xtr, ytr):
        """Run up to ``n`` more steps; their cycles."""
        b, c0 = self.mlp.batch, self.cycles
        for _ in range(min(n, self.steps_total - self.done)):
            idx = self.order[self.done * b:(self.done + 1) * b]
            r = (self.tp.run_step(self.sess, xtr[idx[0]], int(ytr[idx[0]])) if b == 1
                 else self.tp.run_step(self.sess, xtr[idx].T, ytr[idx]))
            self.step_cycles = int(r.cycles + r.host_cycles)
            self.cycles += self.step_cycles
            self.done += 1
        return self.cycles - c0


def _exclusive_step(cfg, sizes, loss, b, cache) -> int:
    """The fastest step of a batch-``b`` network on any group size of the whole chip."""
    if b not in cache:
        from share.schedule import _sizes, profile_job
        from share.jobs import Job
        from sw.mlp import MLP

        job = Job("probe", MLP(tuple(sizes), loss=loss, batch=b), "sgd" if b == 1 else "mbgd", 1, None,
                  "random", None)
        cache[b] = profile_job(cfg, job, _sizes(cfg.cores)).exclusive()[1]
    return cache[b]


def tune(cfg, sizes, data, *, trials: int = 16, group_cores: int = 4, lr_range=(0.003, 0.3), batches=(1, 4, 8),
         epochs: int = 1, train_samples: int = 400, checkpoints: int = 4, loss: str = "softmax_ce", seed: int = 0,
         progress=None, log=print) -> dict:
    """Search ``lr`` (log-uniform in ``lr_range``) and the batch (one of ``batches``) for
    the network ``sizes`` on ``data`` (:class:`sw.datasets.Dataset`) with ``trials``
    trials on groups of ``group_cores`` cores of ``cfg``; the report (JSON-ready)."""
    import optuna

    if cfg.cores < 2 or group_cores < 2 or group_cores & (group_cores - 1) or group_cores > cfg.cores:
        raise InputError(f"--group-cores must be a power of two in 2..{cfg.cores}, got {group_cores}")
    if not 0 < lr_range[0] < lr_range[1]:
        raise InputError(f"invalid learning-rate range {lr_range[0]:g}..{lr_range[1]:g}: need 0 < low < high")
    if not batches or any(b < 1 or b > 1024 for b in batches):
        raise InputError(f"invalid batch sizes {list(batches)}: need integers in 1..1024")
    if data.n_in != sizes[0] or data.n_classes != sizes[-1]:
        raise InputError(f"the data set has {data.n_in} inputs and {data.n_classes} classes, the network "
                         f"{sizes[0]} inputs and {sizes[-1]} outputs")
    from sim.sessions import SharedChip

    t0 = time.perf_counter()
    xtr, ytr = data.x_train[:train_samples], data.y_train[:train_samples].astype(np.int64)
    xte, yte = data.x_test, data.y_test.astype(np.int64)
    if len(xtr) < max(batches):
        raise InputError(f"{len(xtr)} training samples: fewer than the largest batch {max(batches)}")
    slots = cfg.cores // group_cores
    part = Partition.of(cfg.cores, [(i * group_cores, group_cores) for i in range(slots)])
    chip = SharedChip(cfg, part, "fast")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed),
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=max(2, slots // 2),
                                                                   n_warmup_steps=0))
    clock = [0] * slots
    heap: list = []
    started = 0
    records = []

    def start(slot):
        nonlocal started
        if started >= trials:
            return
        tr = _Trial(cfg, sizes, loss, study.ask(), batches, lr_range, chip.group(slot), xtr, seed, epochs)
        tr.slot, tr.start = slot, clock[slot]
        started += 1
        heapq.heappush(heap, (clock[slot], tr.ot.number, tr))

    for s in range(slots):
        start(s)
    while heap:
        _, _, tr = heapq.heappop(heap)
        chunk = -(-tr.steps_total // checkpoints)
        clock[tr.slot] += tr.advance(chunk, xtr, ytr)
        point = -(-tr.done // chunk)
        acc = _accuracy(tr.mlp, cfg.fmt, tr.tp.weights_from_session(tr.sess), xte, yte)
        tr.ot.report(acc, point)
        finished = tr.done >= tr.steps_total
        pruned = not finished and tr.ot.should_prune()
        if finished or pruned:
            if pruned:
                study.tell(tr.ot, state=optuna.trial.TrialState.PRUNED)
            else:
                study.tell(tr.ot, acc)
            records.append({"trial": tr.ot.number, "lr": tr.mlp.lr, "batch": tr.mlp.batch, "accuracy": acc,
                            "state": "pruned" if pruned else "complete", "steps": tr.done,
                            "step_cycles": tr.step_cycles, "cycles": tr.cycles, "group": tr.slot,
                            "start_cycle": tr.start, "W0": tr.W0, "order": tr.order})
            if progress is not None:
                progress(len(records), trials)
            start(tr.slot)
        else:
            heapq.heappush(heap, (clock[tr.slot], tr.ot.number, tr))
    cache: dict = {}
    seq = 0
    for r in records:
        r["exclusive_step_cycles"] = _exclusive_step(cfg, sizes, loss, r["batch"], cache)
        seq += r["steps"] * r["exclusive_step_cycles"]
    done = [r for r in records if r["state"] == "complete"]
    best = max(done, key=lambda r: r["accuracy"])
    from sw.mlp import MLP

    bmlp = MLP(tuple(sizes), loss=loss, lr=best["lr"], batch=best["batch"])
    f64 = _float64_accuracy(bmlp, [cfg.fmt.to_float(W) for W in best["W0"]], best["order"], xtr, ytr, xte, yte)
    for r in records:
        del r["W0"], r["order"]
    makespan = max(clock)
    chip_time = sum(r["cycles"] for r in records) * group_cores
    return {
        "config": cfg.to_dict(), "network": list(sizes), "data": data.describe(), "trials": trials,
        "group_cores": group_cores, "groups": slots, "epochs": epochs, "train_samples": len(xtr),
        "checkpoints": checkpoints, "lr_range": list(lr_range), "batches": list(batches),
        "records": sorted(records, key=lambda r: r["trial"]),
        "pruned": sum(r["state"] == "pruned" for r in records),
        "best": {"trial": best["trial"], "lr": best["lr"], "batch": best["batch"], "accuracy": best["accuracy"],
                 "accuracy_float64": f64},
        "partitioned": {"cycles": makespan, "core_cycles": chip_time},
        "sequential": {"cycles": seq, "core_cycles": seq * cfg.cores},
        "chip_time_ratio": seq / makespan if makespan else 0.0,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
