"""Train an MLP with SGD on one simulated core, beside float64 SGD: the ``caterpillar
train`` command.

:func:`train` compiles the network (:func:`sw.train.compile_sgd`), loads the initial
weights, runs every SGD step on the fast model (or the core model), evaluates the test
accuracy after each epoch with the array's own forward pass, trains a float64 textbook
SGD (:class:`sw.golden_train.Float64SGD`) from the same weights on the same samples in
the same order, and optionally checks the array against the bit-exact golden trainer
for the first steps. It reports the cycles, MAC utilization and GFLOPS/W of one step
(:func:`sim.power.report_from_counters` on the step's counters). :func:`train_cp`
pipelines the layers over the cores (continuous propagation) beside float64 CP with the
same schedule and float64 SGD; :func:`train_minibatch` runs minibatch GD.
"""

from __future__ import annotations

import time

import numpy as np

from arch.errors import InputError
from sim.power import report_from_counters, run_record

from sw.golden_train import Float64SGD, GoldenSGD
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, compile_sgd, init_weights
from sim.sessions import CoreSession

__all__ = ["train", "train_cp", "train_minibatch", "step_report", "chip_step_report", "plot_curves", "compact"]


def _sum_counters(ctrs):
    out = {}
    for c in ctrs:
        for k, v in c.items():
            out[k] = out.get(k, 0) + int(v)
    return out


def step_report(tp, counters_list, host_latency: int = HOST_LATENCY_CYCLES):
    """Power reports of one step from its RUNs' counters: ``(array, with_host)``: the RUN
    cycles alone, and with the host turnaround added as idle cycles (softmax)."""
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


def chip_step_report(tp, result, host_latency: int = HOST_LATENCY_CYCLES):
    """Power reports of one chip step from its counters (every core, every phase):
    ``(array, with_host)``, the second with the softmax host turnaround as idle cycles.
    FLOPs are the network's (:meth:`sw.mlp.MLP.flops_per_step`), not the padded work."""
    ctr: dict = {}
    for pc in result.core_counters:
        for k, v in pc.items():
            ctr[k] = ctr.get(k, 0) + int(v)
    ctr["cycles"] = result.cycles
    flops = tp.mlp.flops_per_step()
    rep = report_from_counters(tp.cfg, ctr, flops=flops, n_cores=tp.cfg.cores)
    host = tp.host_cycles(host_latency)
    if not host:
        return rep, rep
    ch = dict(ctr)
    ch["cycles"] += host
    return rep, report_from_counters(tp.cfg, ch, flops=flops, n_cores=tp.cfg.cores)


def _step_figures(rep, rep_h) -> dict:
    """A step's figures from its reports without (``rep``) and with (``rep_h``) the host
    turnaround."""
    return {"mac_utilization": rep.mac_utilization, "mac_utilization_with_host": rep_h.mac_utilization,
            "gflops": rep.gflops, "gflops_with_host": rep_h.gflops,
            "gflops_per_w_all": rep.gflops_per_w_all, "gflops_per_w_compared": rep.gflops_per_w_compared,
            "watts": rep.watts, "pj_per_flop": rep.pj_per_flop}


def _run_record(rep) -> dict:
    """The step's run record, for ``caterpillar report`` (:func:`sim.power.run_record`)."""
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


def _epoch(ep: int, acc_fn, ref_acc_fn, losses, ref_losses, n: int, data, t0: float, log, cp=None) -> dict:
    """An epoch's summary (logged): the mean of the last ``n`` losses of the array and of
    the float64 reference, the test accuracies ``acc_fn(x, y)`` and ``ref_acc_fn(x, y)``,
    the array's accuracy on the first 300 training samples; ``data``: ``(xtr, ytr, xte,
    yte)``. ``cp``: ``(acc_fn, losses, name)``: the float64 CP baseline (its keys
    ``test_accuracy_float64_cp``, ``train_loss_float64_cp``) and the float64 reference's
    name for the log."""
    xtr, ytr, xte, yte = data
    acc, acc_ref = acc_fn(xte, yte), ref_acc_fn(xte, yte)
    e = {"epoch": ep + 1, "train_loss": float(np.mean(losses[-n:])),
         "train_loss_float64": float(np.mean(ref_losses[-n:])), "test_accuracy": acc,
         "test_accuracy_float64": acc_ref, "train_accuracy_300": acc_fn(xtr[:300], ytr[:300]),
         "wall_s": round(time.perf_counter() - t0, 2)}
    if cp is None:
        log(f"epoch {ep + 1}: loss {e['train_loss']:.4f} (float64 {e['train_loss_float64']:.4f}), "
            f"test accuracy {acc * 100:.2f}% (float64 {acc_ref * 100:.2f}%), {e['wall_s']} s")
        return e
    cp_acc_fn, cp_losses, name = cp
    e["test_accuracy_float64_cp"] = cp_acc_fn(xte, yte)
    e["train_loss_float64_cp"] = float(np.mean(cp_losses[-n:]))
    log(f"epoch {ep + 1}: loss {e['train_loss']:.4f} (float64 CP {e['train_loss_float64_cp']:.4f}, "
        f"{name} {e['train_loss_float64']:.4f}), test accuracy {acc * 100:.2f}% (float64 CP "
        f"{e['test_accuracy_float64_cp'] * 100:.2f}%, {name} {acc_ref * 100:.2f}%), {e['wall_s']} s")
    return e


def train(cfg, mlp: MLP, data, *, epochs: int = 5, seed: int = 0, backend: str = "fast",
          host_latency: int = HOST_LATENCY_CYCLES, golden_steps: int = 0, log=print,
          max_train: int | None = None, max_test: int | None = None, progress=None,
          out_map: str = "auto", softmax: str = "auto", backward: str = "auto", overlap: bool = True,
          out_reduce: str = "auto") -> dict:
    """Train ``mlp`` on ``data`` (:class:`sw.datasets.Dataset`) for ``epochs`` epochs.

    Targets: the class index for ``softmax_ce``, the one-hot vector for ``mse``.
    A chip configuration (``cfg.cores > 1``) trains across its cores
    (:func:`sw.train_chip.compile_chip_sgd`, its output layer mapped by ``out_map``).
    ``softmax``: where a softmax loss's gradient is computed (:func:`sw.train.resolve_softmax`).
    ``backward``: the backward step of the layers ``l >= 1`` (:func:`sw.train.backward_plan`).
    ``overlap`` (chip): the collectives beside compute (:func:`sw.train_chip.overlap_options`);
    ``out_reduce`` (chip): how the split output layer's partials are reduced
    (:func:`sw.train_chip.compile_chip_sgd`). ``golden_steps``: check the weights against
    the golden trainer (:class:`GoldenSGD`, :class:`sw.golden_train_chip.GoldenChipSGD`)
    bit for bit after each of the first ``golden_steps`` steps (raises on a difference). ``progress``:
    called as ``progress(done_steps, total_steps)`` after every step. Returns a dict of
    results (JSON-serializable)."""
    fmt = cfg.fmt
    if data.n_in != mlp.n_in or data.n_classes != mlp.n_out:
        raise InputError(f"the data set has {data.n_in} inputs and {data.n_classes} classes, the network "
                         f"{mlp.n_in} inputs and {mlp.n_out} outputs")
    chip = cfg.cores > 1
    if chip:                     # SGD across the cores of a chip (sw/train_chip.py)
        from sw.golden_train_chip import GoldenChipSGD
        from sw.train_chip import compile_chip_sgd, overlap_options
        from sim.sessions import ChipSession

        tp = compile_chip_sgd(cfg, mlp, out_map=out_map, softmax=softmax, backward=backward, out_reduce=out_reduce,
                              **overlap_options(overlap))
    else:
        tp = compile_sgd(cfg, mlp, softmax=softmax, backward=backward)
    log(tp.describe().split("\n\n")[0])
    W0 = init_weights(mlp, fmt, seed)
    sess = ChipSession(cfg, backend) if chip else CoreSession(cfg, backend)
    tp.init(sess, W0)
    ref = Float64SGD(mlp, [fmt.to_float(W) for W in W0])
    gold = None
    if golden_steps:
        gold = (GoldenChipSGD.for_program(tp, W0) if chip
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
                 **_step_figures(rep, rep_h)},
        "run": _run_record(rep_h),
        "breakdown": [list(b) for b in tp.breakdown()],
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    return res


def train_cp(cfg, mlp: MLP, data, *, epochs: int = 5, seed: int = 0, backend: str = "fast",
             golden_steps: int = 0, log=print, max_train: int | None = None, max_test: int | None = None,
             progress=None, groups=None, backward: str = "auto", overlap: bool = True) -> dict:
    """Continuous propagation of ``mlp`` across the cores of a chip configuration
    (:func:`sw.train_cp.compile_chip_cp`; ``groups``, ``backward`` as there; ``overlap``:
    its ``chain_overlap``) on ``data``
    for ``epochs`` epochs, beside two float64 baselines from the same initial weights: CP
    with the same pipeline schedule (:class:`sw.golden_train_cp.Float64CP`,
    :class:`sw.golden_train_cp_mb.Float64MBCP`), stepped with the array's inputs and
    targets, and SGD (minibatch GD for ``mlp.batch > 1``) on the same samples in the same
    order. The first has CP's stale weights, so the array's gap to it is its numerics; the
    second shows what the staleness costs.

    Each epoch streams the shuffled training samples (minibatch CP: minibatches of ``b``,
    the last partial one dropped) into the pipeline, one per step, each target following
    its input ``L`` steps later, then drains the pipeline with zero inputs (``2 L``
    steps, so every update is in) and evaluates the test accuracy of the array's
    weights, read back from the cores, with the pipeline's own forward arithmetic
    (:func:`sw.golden_train_cp.cp_forward`, :func:`sw.golden_train_cp_mb.cp_forward_mb`:
    the pipeline has no separate inference program; the float64 CP's after the same
    drain). ``golden_steps``: the first steps are checked bit for bit against the golden
    pipeline. The step figures are those of the first steady-state step (every group
    busy). Returns a dict as :func:`train`'s, with per epoch ``test_accuracy_float64_cp``
    and ``train_loss_float64_cp``, the losses ``losses_float64_cp`` and ``baselines``
    naming what ``float64`` and ``float64_cp`` are."""
    from sw.golden_train_cp import Float64CP, GoldenChipCP, cp_forward
    from sw.golden_train_cp_mb import Float64MBCP, GoldenChipMBCP, cp_forward_mb
    from sw.golden_train_mb import Float64MBGD
    from sim.sessions import ChipSession
    from sw.train_cp import compile_chip_cp

    fmt, b = cfg.fmt, mlp.batch
    if data.n_in != mlp.n_in or data.n_classes != mlp.n_out:
        raise InputError(f"the data set has {data.n_in} inputs and {data.n_classes} classes, the network "
                         f"{mlp.n_in} inputs and {mlp.n_out} outputs")
    tp = compile_chip_cp(cfg, mlp, groups=groups, backward=backward, chain_overlap=overlap)
    log(tp.describe().split("\n\n")[0])
    W0 = init_weights(mlp, fmt, seed)
    sess = ChipSession(cfg, backend)
    tp.init(sess, W0)
    Wf = [fmt.to_float(W) for W in W0]
    ref = Float64MBGD(mlp, Wf) if b > 1 else Float64SGD(mlp, Wf)
    ref_cp = Float64MBCP(mlp, Wf) if b > 1 else Float64CP(mlp, Wf)
    baselines = {"float64": "float64 minibatch GD" if b > 1 else "float64 SGD",
                 "float64_cp": "float64 CP, same schedule"}
    gold = None
    if golden_steps:
        gold = (GoldenChipMBCP(cfg, mlp, W0, groups=tp.groups) if b > 1
                else GoldenChipCP.for_program(tp, W0))
    xtr, ytr = data.x_train[:max_train], data.y_train[:max_train]
    xte, yte = data.x_test[:max_test], data.y_test[:max_test]
    rng = np.random.default_rng(seed)
    eye = np.eye(mlp.n_out)
    if b > 1:
        def item(idx):
            return xtr[idx].T, eye[ytr[idx].astype(np.int64)].T

        def accs(W):
            return (lambda x, y: _accuracy(lambda X: cp_forward_mb(cfg, W, X)[:mlp.n_out], x, y, b, mlp.n_in),
                    lambda x, y: _accuracy(ref.predict, x, y, b, mlp.n_in),
                    lambda x, y: _accuracy(ref_cp.predict, x, y, b, mlp.n_in))
    else:
        tgt = (lambda c: int(c)) if mlp.loss == "softmax_ce" else (lambda c: eye[int(c)])   # noqa: E731

        def item(i):
            return xtr[i], tgt(ytr[i])

        def accs(W):
            return (lambda x, y: _acc(lambda v: cp_forward(cfg, tp.P, tp.N, W, v)[:mlp.n_out], x, y),
                    lambda x, y: _acc(ref.predict, x, y),
                    lambda x, y: _acc(ref_cp.predict, x, y))
    L = tp.latency_steps()
    per = len(xtr) // b if b > 1 else len(xtr)
    if per < 2 * L:                         # checked before training: the figures need a steady step
        raise InputError(f"CP figures need a steady-state step: at least {2 * L} training "
                         f"{'minibatches' if b > 1 else 'samples'} per epoch, got {per}")
    losses, ref_losses, cp_losses, epochs_out = [], [], [], []
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
            r_cp = ref_cp.step(x, t)
            if r.loss is not None:
                losses.append(r.loss)
                cp_losses.append(r_cp["loss"])
            if x is not None:
                ref_losses.append(ref.step(*item(order[s]))["loss"])
            if gold is not None and steps < golden_steps:
                _golden_step(tp, sess, gold, x, t, steps)
            steps += 1
            if progress is not None:
                progress(steps, epochs * per_epoch)
        acc, acc_ref, acc_cp = accs(tp.weights_from_session(sess, padded=True))
        epochs_out.append(_epoch(ep, acc, acc_ref, losses, ref_losses, len(order), (xtr, ytr, xte, yte), t0, log,
                                 cp=(acc_cp, cp_losses, baselines["float64"])))
    assert steady is not None, "a steady-state step was recorded"
    rep, rep_h = chip_step_report(tp, steady)          # with the host's softmax turnaround (minibatch CP)
    host = sum(c for _, c in tp.host_phase_cycles())
    return {
        "method": "cp", "network": mlp.describe(), "sizes": list(mlp.sizes), "loss": mlp.loss, "lr": mlp.lr,
        "batch": b, "lr_stored": tp.meta["lr_stored"], "config": cfg.to_dict(), "data": data.describe(),
        "backend": backend, "seed": seed, "steps": steps, "golden_checked_steps": min(steps, golden_steps),
        "groups": tp.groups, "fused": tp.fused, "pipeline_steps_per_epoch": per_epoch, "baselines": baselines,
        "epochs": epochs_out, "losses": losses, "losses_float64": ref_losses, "losses_float64_cp": cp_losses,
        "step": {"run_cycles": steady.cycles - host, "host_cycles": host, "cycles": steady.cycles,
                 "predicted_cycles": tp.step_cycles(), "cores": cfg.cores, "flops": mlp.flops_per_step(),
                 "host_turnaround_cycles": tp.host_cycles(),
                 **_step_figures(rep, rep_h)},
        "run": _run_record(rep_h),
        "breakdown": [list(x) for x in tp.breakdown()],
        "wall_s": round(time.perf_counter() - t_start, 1),
    }


def plot_curves(res: dict, path, window: int = 100) -> None:
    """Save a PNG: training loss (moving average over ``window`` steps) of the array and
    of float64 SGD (minibatch GD) side by side, and the test accuracy per epoch (whole
    epochs on the axis). A CP result (:func:`train_cp`) adds its float64 CP baseline
    (``losses_float64_cp``, ``test_accuracy_float64_cp``) to both, each baseline
    labelled by ``res["baselines"]``."""

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
    names = res.get("baselines", {})
    ref = names.get("float64", "float64 minibatch GD" if res.get("batch", 1) > 1 else "float64 SGD")
    cp = "losses_float64_cp" in res
    if cp:
        a1.plot(smooth(res["losses_float64_cp"]), label=names.get("float64_cp", "float64 CP"), lw=1.2, ls="-.")
    a1.plot(smooth(res["losses_float64"]), label=ref, lw=1.2, ls="--")
    a1.set_xlabel("minibatch step" if res.get("batch", 1) > 1 else
                  "sample (continuous propagation)" if res.get("method") == "cp" else "SGD step")
    a1.set_ylabel(f"{res['loss']} loss (moving average, {window} steps)")
    a1.set_yscale("log")
    a1.legend(fontsize=8)
    a1.set_title(f"{res['network']}", fontsize=9)
    ep = [e["epoch"] for e in res["epochs"]]
    a2.plot(ep, [e["test_accuracy"] * 100 for e in res["epochs"]], "o-", label=f"array ({fmt})")
    if cp:
        a2.plot(ep, [e["test_accuracy_float64_cp"] * 100 for e in res["epochs"]], "^-.",
                label=names.get("float64_cp", "float64 CP"))
    a2.plot(ep, [e["test_accuracy_float64"] * 100 for e in res["epochs"]], "s--", label=ref)
    _epoch_axis(a2, len(ep))
    a2.set_xlabel("epoch")
    a2.set_ylabel("test accuracy (%)")
    a2.legend(fontsize=8)
    st = res["step"]
    a2.set_title(f"{res['data'].split(':')[0]}; step {st['cycles']} cycles, "
                 f"{st['mac_utilization'] * 100:.1f}% MAC util., {st['gflops_per_w_all']:.0f} GFLOPS/W", fontsize=9)
    fig.tight_layout()
    from arch.files import atomic_savefig

    atomic_savefig(fig, path, dpi=110)


def _epoch_axis(ax, n: int) -> None:
    """Whole epochs ``1 .. n`` on ``ax``'s x axis (every one up to 12 epochs)."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlim(0.5, n + 0.5)
    if n <= 12:
        ax.set_xticks(range(1, n + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


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
                    loss: str = "softmax_ce", backend: str = "fast", out_map: str = "auto",
                    overlap: bool = True) -> dict:
    """Minibatch GD of ``MLP(sizes, loss, lr, batch=b)`` on ``data`` (default:
    scikit-learn's digits, :func:`sw.datasets.load_digits`; targets: the class for
    ``softmax_ce``, its one-hot column for ``mse``): on one core, or across the cores of
    a chip configuration (:func:`sw.train_chip_mb.compile_chip_mbgd`, its output layer
    mapped by ``out_map``; ``overlap``: the collectives beside compute,
    :func:`sw.train_chip.overlap_options`), on the fast
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
        raise InputError(f"the data set has {data.n_in} inputs and {data.n_classes} classes, the network "
                         f"{mlp.n_in} inputs and {mlp.n_out} outputs")
    fmt = cfg.fmt
    W0 = init_weights(mlp, fmt, seed)
    chip = cfg.cores > 1
    if chip:
        from sw.golden_train_chip_mb import GoldenChipMBGD
        from sim.sessions import ChipSession
        from sw.train_chip import overlap_options
        from sw.train_chip_mb import compile_chip_mbgd

        tp = compile_chip_mbgd(cfg, mlp, out_map=out_map, **overlap_options(overlap))
        sess = ChipSession(cfg, backend)
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


def compact(res: dict, every: int = 10) -> dict:
    """``res`` with the per-step loss lists replaced by means over ``every`` steps."""
    out = dict(res)
    for k in ("losses", "losses_float64", "losses_float64_cp"):
        if k not in out:
            continue
        v = np.asarray(out.pop(k), dtype=np.float64)
        n = len(v) // every * every
        out[f"{k}_mean{every}"] = [round(float(x), 6) for x in v[:n].reshape(-1, every).mean(axis=1)]
    return out
