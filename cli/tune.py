"""``caterpillar tune``: a learning-rate and batch search for one network, its trials run
concurrently on the core groups of one chip (:mod:`share.tune`, Optuna's sampler and
pruner), against sequential tuning on the whole chip."""

from __future__ import annotations

import json

from arch.errors import UsageError
from cli.common import Progress, check_outputs, count

__all__ = ["add_tune_arguments", "cmd_tune", "format_tune"]


def _range(text: str) -> tuple[float, float]:
    import argparse

    lo, sep, hi = text.partition(":")
    try:
        a, b = float(lo), float(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH, got {text!r}") from None
    if not sep or not 0 < a < b:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH with 0 < LOW < HIGH, got {text!r}")
    return a, b


def add_tune_arguments(p, cfg_help: str) -> None:
    from cli.run import add_progress_argument
    from cli.train import _data_spec, _sizes

    p.add_argument("--config", default="S", help=cfg_help + " (default S)")
    p.add_argument("--data", default="digits", type=_data_spec, help="data set (as caterpillar train; default digits)")
    p.add_argument("--mnist-dir", help="directory with the MNIST IDX files (--data mnist)")
    p.add_argument("--hidden", default=[64], type=_sizes, help="hidden layer sizes, comma separated (default 64)")
    p.add_argument("--trials", type=count, default=16, help="trials (default 16)")
    p.add_argument("--group-cores", type=count, default=4, help="cores per trial's group, a power of two (default 4)")
    p.add_argument("--lr", type=_range, default=(0.003, 0.3), metavar="LOW:HIGH",
                   help="learning-rate range, searched log-uniformly (default 0.003:0.3)")
    p.add_argument("--batches", type=_sizes, default=[1, 4, 8], help="batch sizes to choose from (default 1,4,8)")
    p.add_argument("--epochs", type=count, default=1, help="epochs per trial (default 1)")
    p.add_argument("--train-samples", type=count, default=400, help="training samples used (default 400)")
    p.add_argument("--checkpoints", type=count, default=4,
                   help="accuracy reports per trial, where the pruner may stop it (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the report as JSON here")
    add_progress_argument(p)


def format_tune(rep: dict) -> str:
    lines = [f"{'trial':>5s} {'lr':>9s} {'batch':>5s} {'group':>5s} {'steps':>6s} {'state':9s} {'accuracy':>8s}"]
    for r in rep["records"]:
        lines.append(f"{r['trial']:5d} {r['lr']:9.4g} {r['batch']:5d} {r['group']:5d} {r['steps']:6d} "
                     f"{r['state']:9s} {r['accuracy']:8.3f}")
    b, p, s = rep["best"], rep["partitioned"], rep["sequential"]
    lines += ["", f"best: trial {b['trial']} (lr {b['lr']:.4g}, batch {b['batch']}): test accuracy {b['accuracy']:.3f}, "
                  f"float64 training with the same hyperparameters {b['accuracy_float64']:.3f}",
              f"partitioned ({rep['groups']} groups of {rep['group_cores']} cores): {p['cycles']} cycles; sequential "
              f"on the whole chip: {s['cycles']} cycles; {rep['chip_time_ratio']:.2f}x less chip time "
              f"({rep['pruned']} trials pruned)"]
    return "\n".join(lines)


def cmd_tune(args) -> int:
    from arch.config import config_from_arg
    from arch.files import Outputs
    from share.tune import tune
    from sw.datasets import load_dataset

    check_outputs(args, "json")
    if not args.batches:
        raise UsageError("--batches needs at least one batch size")
    cfg = config_from_arg(args.config)
    data = load_dataset(args.data, mnist_dir=args.mnist_dir)
    sizes = (data.n_in, *args.hidden, data.n_classes)
    with Progress("trials", unit="trial", mode=args.progress) as bar:
        rep = tune(cfg, sizes, data, trials=args.trials, group_cores=args.group_cores, lr_range=args.lr,
                   batches=tuple(args.batches), epochs=args.epochs, train_samples=args.train_samples,
                   checkpoints=args.checkpoints, seed=args.seed, progress=bar, log=bar.log)
    print(format_tune(rep))
    with Outputs() as outs:
        if args.json:
            outs.write_text(args.json, json.dumps(rep, indent=1) + "\n")
    return 0
