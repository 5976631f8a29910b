"""``caterpillar train``: its arguments and the runs they select (:mod:`sim.train_driver`)."""

from __future__ import annotations

import json

from sim.train_driver import compact, plot_curves, train, train_cp, train_minibatch
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, compile_sgd

__all__ = ["add_train_arguments", "cmd_train"]


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
    from arch.config import config_from_arg
    from arch.files import atomic_write
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
    from arch.files import atomic_write

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

    from arch.files import atomic_write

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
