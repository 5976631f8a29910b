"""Train an MLP with SGD on one simulated core, beside float64 SGD: the ``caterpillar
train`` command.

:func:`train` compiles the network (:func:`sw.train.compile_sgd`), loads the initial
weights, runs every SGD step on the fast model (or the core model), evaluates the test
accuracy after each epoch with the array's own forward pass, trains a float64 textbook
SGD (:class:`sw.golden_train.Float64SGD`) from the same weights on the same samples in
the same order, and optionally checks the array against the bit-exact golden trainer
for the first steps. It reports the cycles, MAC utilization and GFLOPS/W of one step
(:func:`sim.power.report_from_counters` on the step's counters).
"""

from __future__ import annotations

import json
import time

import numpy as np

from sw.golden_train import Float64SGD, GoldenSGD
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, CoreSession, compile_sgd, init_weights

__all__ = ["train", "train_cp", "step_report", "plot_curves", "cmd_train", "add_train_arguments"]


def _sum_counters(ctrs):
    out = {}
    for c in ctrs:
        for k, v in c.items():
            out[k] = out.get(k, 0) + int(v)
    return out


def step_report(tp, counters_list, host_latency: int = HOST_LATENCY_CYCLES):
    """Power reports of one step from its RUNs' counters: ``(array, with_host)``: the RUN
    cycles alone, and with the host turnaround added as idle cycles (softmax)."""
    from sim.power import report_from_counters

    ctr = _sum_counters(counters_list)
    flops = tp.mlp.flops_per_step()
    rep = report_from_counters(tp.cfg, ctr, flops=flops)
    host = tp.host_cycles(host_latency)
    rep_h = rep
    if host:
        ch = dict(ctr)
        ch["cycles"] += host
        rep_h = report_from_counters(tp.cfg, ch, flops=flops)
    return rep, rep_h


def _run_record(rep) -> dict:
    """The step's run record, for ``caterpillar report`` (:func:`sim.power.run_record`)."""
    from sim.power import run_record

    return run_record(rep)


def _acc(pred_fn, x, y):
    return float(np.mean([int(np.argmax(pred_fn(xi))) == int(yi) for xi, yi in zip(x, y)]))


def _golden_step(tp, sess, gold, x, t, step: int) -> None:
    """Step the golden model too; raise unless the array's weights (padding included)
    equal its weights bit for bit."""
    gold.step(x, t)
    got, want = tp.weights_from_session(sess, padded=True), gold.weights(padded=True)
    if not all(np.array_equal(a, b) for a, b in zip(got, want)):
        raise AssertionError(f"step {step}: the array's weights differ from the golden model's")


def _epoch(ep: int, acc_fn, ref_acc_fn, losses, ref_losses, n: int, data, t0: float, log) -> dict:
    """An epoch's summary (logged): the mean of the last ``n`` losses of the array and of
    the float64 reference, the test accuracies ``acc_fn(x, y)`` and ``ref_acc_fn(x, y)``,
    the array's accuracy on the first 300 training samples; ``data``: ``(xtr, ytr, xte,
    yte)``."""
    xtr, ytr, xte, yte = data
    acc, acc_ref = acc_fn(xte, yte), ref_acc_fn(xte, yte)
    e = {"epoch": ep + 1, "train_loss": float(np.mean(losses[-n:])),
         "train_loss_float64": float(np.mean(ref_losses[-n:])), "test_accuracy": acc,
         "test_accuracy_float64": acc_ref, "train_accuracy_300": acc_fn(xtr[:300], ytr[:300]),
         "wall_s": round(time.perf_counter() - t0, 2)}
    log(f"epoch {ep + 1}: loss {e['train_loss']:.4f} (float64 {e['train_loss_float64']:.4f}), "
        f"test accuracy {acc * 100:.2f}% (float64 {acc_ref * 100:.2f}%), {e['wall_s']} s")
    return e


def train(cfg, mlp: MLP, data, *, epochs: int = 5, seed: int = 0, backend: str = "fast",
          host_latency: int = HOST_LATENCY_CYCLES, golden_steps: int = 0, log=print,
          max_train: int | None = None, max_test: int | None = None, progress=None,
          out_map: str = "auto", softmax: str = "auto", backward: str = "auto", overlap: bool = True) -> dict:
    """Train ``mlp`` on ``data`` (:class:`sw.datasets.Dataset`) for ``epochs`` epochs.

    Targets: the class index for ``softmax_ce``, the one-hot vector for ``mse``.
    A chip configuration (``cfg.cores > 1``) trains across its cores
    (:func:`sw.train_chip.compile_chip_sgd`, its output layer mapped by ``out_map``).
    ``softmax``: where a softmax loss's gradient is computed (:func:`sw.train.resolve_softmax`).
    ``backward``: the backward step of the layers ``l >= 1`` (:func:`sw.train.backward_plan`).
    ``overlap`` (chip): the weight updates in the reduce-scatters' free slots
    (:func:`sw.train_chip.compile_chip_sgd`). ``golden_steps``: check the weights against
    the golden trainer (:class:`GoldenSGD`, :class:`sw.golden_train_chip.GoldenChipSGD`)
    bit for bit after each of the first ``golden_steps`` steps (raises on a difference). ``progress``:
    called as ``progress(done_steps, total_steps)`` after every step. Returns a dict of
    results (JSON-serializable)."""
    fmt = cfg.fmt
    if data.n_in != mlp.n_in or data.n_classes != mlp.n_out:
        raise ValueError(f"the data set has {data.n_in} inputs and {data.n_classes} classes, the network "
                         f"{mlp.n_in} inputs and {mlp.n_out} outputs")
    chip = cfg.cores > 1
    if chip:                     # SGD across the cores of a chip (sw/train_chip.py)
        from sw.golden_train_chip import GoldenChipSGD
        from sw.train_chip import ChipSession, compile_chip_sgd

        tp = compile_chip_sgd(cfg, mlp, out_map=out_map, softmax=softmax, backward=backward, overlap=overlap)
    else:
        tp = compile_sgd(cfg, mlp, softmax=softmax, backward=backward)
    log(tp.describe().split("\n\n")[0])
    W0 = init_weights(mlp, fmt, seed)
    sess = ChipSession(cfg, backend) if chip else CoreSession(cfg, backend)
    tp.init(sess, W0)
    ref = Float64SGD(mlp, [fmt.to_float(W) for W in W0])
    gold = None
    if golden_steps:
        gold = (GoldenChipSGD(cfg, mlp, W0, out_map=out_map, softmax=softmax, fused=tp.fused) if chip
                else GoldenSGD(cfg, mlp, W0, fused=tp.fused, softmax=softmax))
    xtr, ytr = data.x_train[:max_train], data.y_train[:max_train]
    xte, yte = data.x_test[:max_test], data.y_test[:max_test]
    rng = np.random.default_rng(seed)
    eye = np.eye(mlp.n_out)
    tgt = (lambda c: int(c)) if mlp.loss == "softmax_ce" else (lambda c: eye[int(c)])   # noqa: E731
    losses, ref_losses, epochs_out = [], [], []
    step_ctrs = None
    t_start = time.perf_counter()
    steps = 0
    for ep in range(epochs):
        t0 = time.perf_counter()
        order = rng.permutation(len(xtr))
        for i in order:
            x, t = xtr[i], tgt(ytr[i])
            r = tp.run_step(sess, x, t, host_latency=host_latency)
            if step_ctrs is None:
                step_ctrs = r if chip else r.counters
            losses.append(r.loss)
            ref_losses.append(ref.step(x, t)["loss"])
            if gold is not None and steps < golden_steps:
                _golden_step(tp, sess, gold, x, t, steps)
            steps += 1
            if progress is not None:
                progress(steps, epochs * len(xtr))
        epochs_out.append(_epoch(ep, lambda x, y: _acc(lambda v: tp.predict(sess, v), x, y),
                                 lambda x, y: _acc(ref.predict, x, y), losses, ref_losses, len(order),
                                 (xtr, ytr, xte, yte), t0, log))
    if chip:
        from sw.train_chip import chip_step_report

        rep, rep_h = chip_step_report(tp, step_ctrs, host_latency)
        run_cycles, programs = tp.step_cycles(host_latency) - tp.host_cycles(host_latency), len(tp.chip_parts())
    else:
        rep, rep_h = step_report(tp, step_ctrs, host_latency)
        run_cycles, programs = sum(tp.predicted_cycles()), len(tp.programs)
    res = {
        "network": mlp.describe(), "sizes": list(mlp.sizes), "loss": mlp.loss, "lr": mlp.lr,
        "lr_stored": tp.meta["lr_stored"], "config": cfg.to_dict(), "data": data.describe(),
        "backend": backend, "seed": seed, "steps": steps, "golden_checked_steps": min(steps, golden_steps),
        "epochs": epochs_out, "losses": losses, "losses_float64": ref_losses,
        "step": {"run_cycles": run_cycles, "host_cycles": tp.host_cycles(host_latency),
                 "cycles": tp.step_cycles(host_latency), "programs": programs, "cores": cfg.cores,
                 "flops": mlp.flops_per_step(),
                 "mac_utilization": rep.mac_utilization, "mac_utilization_with_host": rep_h.mac_utilization,
                 "gflops": rep.gflops, "gflops_with_host": rep_h.gflops,
                 "gflops_per_w_all": rep.gflops_per_w_all, "gflops_per_w_compared": rep.gflops_per_w_compared,
                 "watts": rep.watts, "pj_per_flop": rep.pj_per_flop},
        "run": _run_record(rep_h),
        "breakdown": [list(b) for b in tp.breakdown()],
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    return res


def train_cp(cfg, mlp: MLP, data, *, epochs: int = 5, seed: int = 0, backend: str = "fast",
             golden_steps: int = 0, log=print, max_train: int | None = None, max_test: int | None = None,
             progress=None, groups=None, backward: str = "auto") -> dict:
    """Continuous propagation of ``mlp`` across the cores of a chip configuration
    (:func:`sw.train_cp.compile_chip_cp`; ``groups``, ``backward`` as there) on ``data``
    for ``epochs`` epochs, beside float64 SGD (minibatch GD for ``mlp.batch > 1``) on the
    same samples in the same order.

    Each epoch streams the shuffled training samples (minibatch CP: minibatches of ``b``,
    the last partial one dropped) into the pipeline, one per step, each target following
    its input ``L`` steps later, then drains the pipeline with zero inputs (``2 L``
    steps, so every update is in) and evaluates the test accuracy of the array's
    weights, read back from the cores, with the pipeline's own forward arithmetic
    (:func:`sw.golden_train_cp.cp_forward`, :func:`sw.golden_train_cp_mb.cp_forward_mb`:
    the pipeline has no separate inference program). ``golden_steps``: the first steps
    are checked bit for bit against the golden pipeline. The step figures are those of
    the first steady-state step (every group busy). Returns a dict as :func:`train`'s."""
    from sw.golden_train_cp import GoldenChipCP, cp_forward
    from sw.golden_train_cp_mb import GoldenChipMBCP, cp_forward_mb
    from sw.golden_train_mb import Float64MBGD
    from sw.train_chip import ChipSession, chip_step_report
    from sw.train_cp import compile_chip_cp

    fmt, b = cfg.fmt, mlp.batch
    if data.n_in != mlp.n_in or data.n_classes != mlp.n_out:
        raise ValueError(f"the data set has {data.n_in} inputs and {data.n_classes} classes, the network "
                         f"{mlp.n_in} inputs and {mlp.n_out} outputs")
    tp = compile_chip_cp(cfg, mlp, groups=groups, backward=backward)
    log(tp.describe().split("\n\n")[0])
    W0 = init_weights(mlp, fmt, seed)
    sess = ChipSession(cfg, backend)
    tp.init(sess, W0)
    Wf = [fmt.to_float(W) for W in W0]
    ref = Float64MBGD(mlp, Wf) if b > 1 else Float64SGD(mlp, Wf)
    gold = None
    if golden_steps:
        gold = (GoldenChipMBCP(cfg, mlp, W0, groups=tp.groups) if b > 1
                else GoldenChipCP(cfg, mlp, W0, groups=tp.groups, fused=tp.fused))
    xtr, ytr = data.x_train[:max_train], data.y_train[:max_train]
    xte, yte = data.x_test[:max_test], data.y_test[:max_test]
    rng = np.random.default_rng(seed)
    eye = np.eye(mlp.n_out)
    if b > 1:
        def item(idx):
            return xtr[idx].T, eye[ytr[idx].astype(np.int64)].T

        def accs(W):
            return (lambda x, y: _accuracy(lambda X: cp_forward_mb(cfg, W, X)[:mlp.n_out], x, y, b, mlp.n_in),
                    lambda x, y: _accuracy(ref.predict, x, y, b, mlp.n_in))
    else:
        tgt = (lambda c: int(c)) if mlp.loss == "softmax_ce" else (lambda c: eye[int(c)])   # noqa: E731

        def item(i):
            return xtr[i], tgt(ytr[i])

        def accs(W):
            return (lambda x, y: _acc(lambda v: cp_forward(cfg, tp.P, tp.N, W, v)[:mlp.n_out], x, y),
                    lambda x, y: _acc(ref.predict, x, y))
    L = tp.latency_steps()
    losses, ref_losses, epochs_out = [], [], []
    steady = None
    t_start, steps = time.perf_counter(), 0
    for ep in range(epochs):
        t0 = time.perf_counter()
        order = _batches(xtr, ytr, b, rng) if b > 1 else list(rng.permutation(len(xtr)))
        per_epoch = len(order) + 2 * L
        for s in range(per_epoch):
            x = item(order[s])[0] if s < len(order) else None
            t = item(order[s - L])[1] if 0 <= s - L < len(order) else None
            r = tp.run_step(sess, x, t)
            if s == 2 * L - 1 and steady is None and len(order) >= 2 * L:
                steady = r
            if r.loss is not None:
                losses.append(r.loss)
            if x is not None:
                ref_losses.append(ref.step(*item(order[s]))["loss"])
            if gold is not None and steps < golden_steps:
                _golden_step(tp, sess, gold, x, t, steps)
            steps += 1
            if progress is not None:
                progress(steps, epochs * per_epoch)
        epochs_out.append(_epoch(ep, *accs(tp.weights_from_session(sess, padded=True)), losses, ref_losses,
                                 len(order), (xtr, ytr, xte, yte), t0, log))
    if steady is None:
        raise ValueError(f"CP figures need a steady-state step: at least {2 * L} training "
                         f"{'minibatches' if b > 1 else 'samples'} per epoch, got {len(order)}")
    rep, rep_h = chip_step_report(tp, steady)          # with the host's softmax turnaround (minibatch CP)
    host = sum(c for _, c in tp.host_phase_cycles())
    return {
        "method": "cp", "network": mlp.describe(), "sizes": list(mlp.sizes), "loss": mlp.loss, "lr": mlp.lr,
        "batch": b, "lr_stored": tp.meta["lr_stored"], "config": cfg.to_dict(), "data": data.describe(),
        "backend": backend, "seed": seed, "steps": steps, "golden_checked_steps": min(steps, golden_steps),
        "groups": tp.groups, "fused": tp.fused, "pipeline_steps_per_epoch": per_epoch,
        "epochs": epochs_out, "losses": losses, "losses_float64": ref_losses,
        "step": {"run_cycles": steady.cycles - host, "host_cycles": host, "cycles": steady.cycles,
                 "predicted_cycles": tp.step_cycles(), "cores": cfg.cores, "flops": mlp.flops_per_step(),
                 "host_turnaround_cycles": tp.host_cycles(),
                 "mac_utilization": rep.mac_utilization, "mac_utilization_with_host": rep_h.mac_utilization,
                 "gflops": rep.gflops, "gflops_with_host": rep_h.gflops,
                 "gflops_per_w_all": rep.gflops_per_w_all, "gflops_per_w_compared": rep.gflops_per_w_compared,
                 "watts": rep.watts, "pj_per_flop": rep.pj_per_flop},
        "run": _run_record(rep_h),
        "breakdown": [list(x) for x in tp.breakdown()],
        "wall_s": round(time.perf_counter() - t_start, 1),
    }


def plot_curves(res: dict, path, window: int = 100) -> None:
    """Save a PNG: training loss (moving average over ``window`` steps) of the array and
    of float64 SGD side by side, and the test accuracy per epoch."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def smooth(v):
        v = np.asarray(v, dtype=np.float64)
        if len(v) < window:
            return v
        c = np.cumsum(np.insert(v, 0, 0.0))
        return (c[window:] - c[:-window]) / window

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    fmt = res["config"]["fmt"]
    a1.plot(smooth(res["losses"]), label=f"array ({fmt}, {res['backend']} model"
            + (", CP)" if res.get("method") == "cp" else ")"), lw=1.2)
    ref = "float64 minibatch GD" if res.get("batch", 1) > 1 else "float64 SGD"
    a1.plot(smooth(res["losses_float64"]), label=ref, lw=1.2, ls="--")
    a1.set_xlabel("minibatch step" if res.get("batch", 1) > 1 else
                  "sample (continuous propagation)" if res.get("method") == "cp" else "SGD step")
    a1.set_ylabel(f"{res['loss']} loss (moving average, {window} steps)")
    a1.set_yscale("log")
    a1.legend(fontsize=8)
    a1.set_title(f"{res['network']}", fontsize=9)
    ep = [e["epoch"] for e in res["epochs"]]
    a2.plot(ep, [e["test_accuracy"] * 100 for e in res["epochs"]], "o-", label=f"array ({fmt})")
    a2.plot(ep, [e["test_accuracy_float64"] * 100 for e in res["epochs"]], "s--", label=ref)
    a2.set_xlabel("epoch")
    a2.set_ylabel("test accuracy (%)")
    a2.legend(fontsize=8)
    st = res["step"]
    a2.set_title(f"{res['data'].split(':')[0]}; step {st['cycles']} cycles, "
                 f"{st['mac_utilization'] * 100:.1f}% MAC util., {st['gflops_per_w_all']:.0f} GFLOPS/W", fontsize=9)
    fig.tight_layout()
    from sim.harness import atomic_savefig

    atomic_savefig(fig, path, dpi=110)


def _batches(x, y, b, rng):
    idx = rng.permutation(len(x))
    n = len(idx) // b * b                          # the last partial batch is dropped each epoch
    return [idx[i:i + b] for i in range(0, n, b)]


def _accuracy(pred, x, y, b, n_in):
    """Accuracy of ``pred`` (n_in x b -> n_out x b) over ``x`` in batches of ``b`` (the
    last batch padded with zero columns, their outputs ignored)."""
    correct = 0
    for i in range(0, len(x), b):
        xb = x[i:i + b]
        X = np.zeros((n_in, b))
        X[:, :len(xb)] = xb.T
        out = pred(X)[:, :len(xb)]
        correct += int(np.sum(np.argmax(out, axis=0) == y[i:i + b]))
    return correct / len(x)


def train_minibatch(cfg, sizes, data=None, b: int = 16, lr: float = 0.1, epochs: int = 10, seed: int = 0,
                    golden_steps: int = 20, log=print, max_steps: int | None = None, progress=None,
                    loss: str = "softmax_ce", backend: str = "fast", out_map: str = "auto") -> dict:
    """Minibatch GD of ``MLP(sizes, loss, lr, batch=b)`` on ``data`` (default:
    scikit-learn's digits, :func:`sw.datasets.load_digits`; targets: the class for
    ``softmax_ce``, its one-hot column for ``mse``): on one core, or across the cores of
    a chip configuration (:func:`sw.train_chip_mb.compile_chip_mbgd`, its output layer
    mapped by ``out_map``), on the fast
    engine (``backend="fast"``) or the reference / per-cycle one (``"model"``). The
    first ``golden_steps`` steps are checked bit for bit against the golden trainer;
    float64 minibatch GD runs on the same batches (the last partial batch of each epoch
    is dropped). ``max_steps`` stops each epoch early (for the demo); ``progress(done,
    total)`` after every step."""
    from sw.datasets import load_digits
    from sw.golden_train_mb import Float64MBGD, GoldenMBGD
    from sw.train_mb import compile_mbgd

    data = data if data is not None else load_digits()
    mlp = MLP(sizes, loss, lr, batch=b)
    if data.n_in != mlp.n_in or data.n_classes != mlp.n_out:
        raise ValueError(f"the data set has {data.n_in} inputs and {data.n_classes} classes, the network "
                         f"{mlp.n_in} inputs and {mlp.n_out} outputs")
    fmt = cfg.fmt
    W0 = init_weights(mlp, fmt, seed)
    chip = cfg.cores > 1
    if chip:
        from sw.golden_train_chip_mb import GoldenChipMBGD
        from sw.train_chip import ChipSession
        from sw.train_chip_mb import compile_chip_mbgd

        tp, sess = compile_chip_mbgd(cfg, mlp, out_map=out_map), ChipSession(cfg, backend)
        gold = GoldenChipMBGD(cfg, mlp, W0, out_map=out_map)
    else:
        tp, sess, gold = compile_mbgd(cfg, mlp), CoreSession(cfg, backend), GoldenMBGD(cfg, mlp, W0)
    log(tp.describe().split("\n\n")[0])
    tp.init(sess, W0)
    ref = Float64MBGD(mlp, [fmt.to_float(W) for W in W0])
    rng = np.random.default_rng(seed)
    xtr, ytr, xte, yte = data.x_train, data.y_train, data.x_test, data.y_test
    epochs_out, losses, ref_losses = [], [], []
    steps, ctrs, t0 = 0, None, time.perf_counter()
    for ep in range(epochs):
        te = time.perf_counter()
        bl = _batches(xtr, ytr, b, rng)[:max_steps]
        for idx in bl:
            X, T = xtr[idx].T, ytr[idx]
            if loss == "mse":
                T = np.eye(mlp.n_out)[T.astype(np.int64)].T
            r = tp.run_step(sess, X, T)
            ctrs = ctrs or (r if chip else r.counters)
            losses.append(r.loss)
            ref_losses.append(ref.step(X, T)["loss"])
            if steps < golden_steps:
                gold.step(X, T)
                if not all(np.array_equal(a, w) for a, w in zip(tp.weights_from_session(sess, padded=True),
                                                                 gold.weights(padded=True))):
                    raise AssertionError(f"step {steps}: the array's weights differ from the golden trainer's")
            steps += 1
            if progress is not None:
                progress(steps, epochs * len(bl))
        acc = _accuracy(lambda X: tp.predict(sess, X), xte, yte, b, mlp.n_in)
        acc_ref = _accuracy(ref.predict, xte, yte, b, mlp.n_in)
        n = len(bl)
        e = {"epoch": ep + 1, "train_loss": float(np.mean(losses[-n:])),
             "train_loss_float64": float(np.mean(ref_losses[-n:])), "test_accuracy": acc,
             "test_accuracy_float64": acc_ref, "wall_s": round(time.perf_counter() - te, 2)}
        epochs_out.append(e)
        log(f"b={b} epoch {ep + 1}: loss {e['train_loss']:.4f} (float64 {e['train_loss_float64']:.4f}), "
            f"test accuracy {acc * 100:.2f}% (float64 {acc_ref * 100:.2f}%)")
    if chip:
        from sw.train_chip import chip_step_report

        rep, rep_h = chip_step_report(tp, ctrs, HOST_LATENCY_CYCLES)
        run_cycles = tp.step_cycles() - tp.host_cycles()
    else:
        rep, rep_h = step_report(tp, ctrs, HOST_LATENCY_CYCLES)
        run_cycles = sum(tp.predicted_cycles())
    return {"network": mlp.describe(), "sizes": list(mlp.sizes), "loss": loss, "lr": lr,
            "lr_over_b_stored": tp.meta["neg_lr_over_b"], "batch": b, "config": cfg.to_dict(), "backend": backend,
            "data": data.describe(), "seed": seed, "steps": steps, "golden_checked_steps": min(steps, golden_steps),
            "epochs": epochs_out, "final_test_accuracy": epochs_out[-1]["test_accuracy"],
            "final_test_accuracy_float64": epochs_out[-1]["test_accuracy_float64"],
            "cores": cfg.cores,
            "step": {"run_cycles": run_cycles, "host_cycles": tp.host_cycles(),
                     "cycles": run_cycles + tp.host_cycles(), "cores": cfg.cores, "batch": b,
                     "flops": mlp.flops_per_step(), "mac_utilization": rep.mac_utilization,
                     "mac_utilization_with_host": rep_h.mac_utilization, "gflops_per_w_all": rep.gflops_per_w_all,
                     "gflops_per_w_compared": rep.gflops_per_w_compared},
            "run": _run_record(rep_h),
            "wall_s": round(time.perf_counter() - t0, 1), "losses": losses, "losses_float64": ref_losses}


def add_train_arguments(p) -> None:
    """The ``caterpillar train`` options (``p``: an argparse parser)."""
    p.add_argument("--config", help="preset, JSON file or inline JSON (default: default, a 4x4 binary16 core; a "
                   "chip configuration such as chip-small or S trains across its cores)")
    p.add_argument("--data", default="digits", choices=("digits", "mnist", "synthetic"),
                   help="digits: scikit-learn's bundled 8x8 digits; mnist: IDX files in --mnist-dir")
    p.add_argument("--mnist-dir", help="directory with the MNIST IDX files (nothing is downloaded)")
    p.add_argument("--hidden", default="64", help="hidden layer sizes, comma separated (default 64)")
    p.add_argument("--loss", default="softmax_ce", choices=("mse", "softmax_ce"))
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--method", default="sgd", choices=("sgd", "cp"),
                   help="sgd: SGD (or minibatch GD with --batch); cp: continuous propagation, the layers pipelined "
                        "over groups of cores (chip configurations; with --batch b > 1: minibatch CP, whose softmax "
                        "runs on the host)")
    p.add_argument("--groups", help="cp: cores per layer, comma separated (default: the compiler's balance)")
    p.add_argument("--backward", default="auto", choices=("auto", "fused", "separate"),
                   help="batch 1: the backward step of layers >= 1: W^T d and the update in one pass over W (fused), "
                        "as two kernels (separate), or the compiler's choice (auto)")
    p.add_argument("--no-overlap", action="store_true",
                   help="batch-1 SGD across a chip: run the reduce-scatters and the weight updates one after the "
                        "other (default: the first rows of each update in its reduce-scatter's free slots)")
    p.add_argument("--batch", type=int, default=1,
                   help="minibatch size (default 1: SGD; b > 1: minibatch GD with W -= (lr / b) sum, on one core or "
                        "across the cores of a chip configuration)")
    p.add_argument("--out-map", default="auto", choices=("auto", "rows", "cols"),
                   help="chip configurations: the output layer by row panels or split by columns across the cores "
                        "(auto: by columns when it has at most cores x nr rows)")
    p.add_argument("--softmax", default="auto", choices=("auto", "array", "host"),
                   help="softmax_ce with batch 1: compute softmax(z) - t on the array (one core, or core 0 of a chip "
                        "with the output layer split by columns) or on the host between two RUNs (its turnaround "
                        "counted); auto: the array when it can")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="fast", choices=("fast", "model"),
                   help="fast model (default) or core model (for a chip: the fast or the per-cycle chip engine)")
    p.add_argument("--host-latency", type=int, default=HOST_LATENCY_CYCLES,
                   help="assumed host turnaround for the softmax, in core cycles")
    p.add_argument("--golden-steps", type=int, default=0,
                   help="check the first N steps against the bit-exact golden trainer")
    p.add_argument("--max-train", type=int, help="use at most this many training samples")
    p.add_argument("--max-test", type=int, help="use at most this many test samples")
    p.add_argument("--json", help="save the results as JSON")
    p.add_argument("--png", help="save the loss curves and accuracies as a PNG plot")
    p.add_argument("--describe", action="store_true", help="print the memory map and the step's kernels")


def cmd_train(args) -> int:
    """``caterpillar train``: train on a simulated core (or across the cores of a chip
    configuration), print the figures."""
    from rtl.config import config_from_arg
    from sim.harness import atomic_write
    from sw.datasets import load_dataset

    cfg = config_from_arg(args.config)
    data = load_dataset(args.data, mnist_dir=args.mnist_dir)
    hidden = [int(h) for h in args.hidden.split(",") if h.strip()] if args.hidden else []
    mlp = MLP((data.n_in, *hidden, data.n_classes), args.loss, args.lr, batch=args.batch)
    print(data.describe())
    if args.no_overlap and (args.method != "sgd" or args.batch > 1 or cfg.cores < 2):
        raise ValueError("--no-overlap is for batch-1 SGD across the cores of a chip configuration")
    if args.method == "cp":
        return _cmd_train_cp(args, cfg, mlp, data)
    if args.groups:
        raise ValueError("--groups is for --method cp")
    if args.batch > 1:
        return _cmd_train_minibatch(args, cfg, mlp, data)
    if args.describe:
        if cfg.cores > 1:
            from sw.train_chip import compile_chip_sgd

            print(compile_chip_sgd(cfg, mlp, out_map=args.out_map, softmax=args.softmax,
                                   backward=args.backward, overlap=not args.no_overlap).describe())
        else:
            print(compile_sgd(cfg, mlp, softmax=args.softmax, backward=args.backward).describe())
    res = train(cfg, mlp, data, epochs=args.epochs, seed=args.seed, backend=args.model,
                host_latency=args.host_latency, golden_steps=args.golden_steps,
                max_train=args.max_train, max_test=args.max_test, out_map=args.out_map, softmax=args.softmax,
                backward=args.backward, overlap=not args.no_overlap)
    st = res["step"]
    e = res["epochs"][-1]
    print(f"final test accuracy {e['test_accuracy'] * 100:.2f}% (float64 SGD {e['test_accuracy_float64'] * 100:.2f}%)")
    print(f"per SGD step: {st['cycles']} cycles ({st['run_cycles']} RUN + {st['host_cycles']} host), "
          f"{st['flops']} FLOPs, MAC utilization {st['mac_utilization'] * 100:.1f}% of the RUN cycles "
          f"({st['mac_utilization_with_host'] * 100:.1f}% with the host turnaround), "
          f"{st['gflops_per_w_all']:.1f} GFLOPS/W (compared scope {st['gflops_per_w_compared']:.1f})")
    if args.png:
        plot_curves(res, args.png)
        print(f"wrote {args.png}")
    if args.json:
        atomic_write(args.json, json.dumps(compact(res), indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def _finish(args, res: dict, window: int = 100) -> None:
    from sim.harness import atomic_write

    if args.png:
        plot_curves(res, args.png, window=window)
        print(f"wrote {args.png}")
    if args.json:
        atomic_write(args.json, json.dumps(compact(res), indent=1) + "\n")
        print(f"wrote {args.json}")


def _cmd_train_cp(args, cfg, mlp: MLP, data) -> int:
    """``caterpillar train --method cp``: continuous propagation (:func:`train_cp`)."""
    from sw.train_cp import compile_chip_cp

    if cfg.cores < 2:
        raise ValueError(f"--method cp pipelines the layers over the cores of a chip; configuration "
                         f"{args.config or 'default'} has cores={cfg.cores} (try --config chip-small)")
    try:
        groups = [int(g) for g in args.groups.split(",")] if args.groups else None
    except ValueError:
        raise ValueError(f"--groups takes comma-separated integers, got {args.groups!r}") from None
    if args.describe:
        print(compile_chip_cp(cfg, mlp, groups=groups, backward=args.backward).describe())
    res = train_cp(cfg, mlp, data, epochs=args.epochs, seed=args.seed, backend=args.model,
                   golden_steps=args.golden_steps, max_train=args.max_train, max_test=args.max_test,
                   groups=groups, backward=args.backward)
    st, e = res["step"], res["epochs"][-1]
    print(f"final test accuracy {e['test_accuracy'] * 100:.2f}% (float64 {'minibatch GD' if mlp.batch > 1 else 'SGD'} "
          f"{e['test_accuracy_float64'] * 100:.2f}%)")
    what = f"a minibatch of {mlp.batch}" if mlp.batch > 1 else "one sample"
    print(f"per pipeline step ({what} completes; cores per layer {res['groups']}): {st['cycles']} cycles "
          f"({st['run_cycles']} RUN + {st['host_cycles']} host I/O), {st['flops']} FLOPs, MAC utilization "
          f"{st['mac_utilization'] * 100:.1f}%, {st['gflops_per_w_all']:.1f} GFLOPS/W (compared scope "
          f"{st['gflops_per_w_compared']:.1f})")
    _finish(args, res, window=100 if mlp.batch == 1 else 10)
    return 0


def _cmd_train_minibatch(args, cfg, mlp: MLP, data) -> int:
    """``caterpillar train --batch b`` (b > 1): minibatch GD (:func:`train_minibatch`)."""
    from dataclasses import replace

    from sim.harness import atomic_write

    if args.describe:
        if cfg.cores > 1:
            from sw.train_chip_mb import compile_chip_mbgd

            print(compile_chip_mbgd(cfg, mlp, out_map=args.out_map).describe())
        else:
            from sw.train_mb import compile_mbgd

            print(compile_mbgd(cfg, mlp).describe())
    data = replace(data, x_train=data.x_train[:args.max_train], y_train=data.y_train[:args.max_train],
                   x_test=data.x_test[:args.max_test], y_test=data.y_test[:args.max_test])
    res = train_minibatch(cfg, mlp.sizes, data, b=mlp.batch, lr=args.lr, epochs=args.epochs, seed=args.seed,
                          golden_steps=args.golden_steps, loss=args.loss, backend=args.model, out_map=args.out_map)
    st, e = res["step"], res["epochs"][-1]
    print(f"final test accuracy {e['test_accuracy'] * 100:.2f}% (float64 minibatch GD "
          f"{e['test_accuracy_float64'] * 100:.2f}%)")
    print(f"per minibatch step (b = {mlp.batch}): {st['cycles']} cycles ({st['run_cycles']} RUN + "
          f"{st['host_cycles']} host), {st['flops']} FLOPs, MAC utilization {st['mac_utilization'] * 100:.1f}% of the "
          f"RUN cycles ({st['mac_utilization_with_host'] * 100:.1f}% with the host turnaround), "
          f"{st['gflops_per_w_all']:.1f} GFLOPS/W (compared scope {st['gflops_per_w_compared']:.1f})")
    if args.png:
        plot_curves(res, args.png, window=10)
        print(f"wrote {args.png}")
    if args.json:
        atomic_write(args.json, json.dumps(compact(res), indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def compact(res: dict, every: int = 10) -> dict:
    """``res`` with the per-step loss lists replaced by means over ``every`` steps."""
    out = dict(res)
    for k in ("losses", "losses_float64"):
        v = np.asarray(out.pop(k), dtype=np.float64)
        n = len(v) // every * every
        out[f"{k}_mean{every}"] = [round(float(x), 6) for x in v[:n].reshape(-1, every).mean(axis=1)]
    return out
