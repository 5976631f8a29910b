"""``caterpillar schedule``: place each layer's forward, backward and update phases on the
core groups of a heterogeneous chip with the performance model, and check the placement
by running it (:mod:`perf.schedule`, :mod:`perf.hybrid_run`; docs/hybrid.md)."""

from __future__ import annotations

import json
import sys

from arch.errors import UsageError
from cli.common import check_outputs

__all__ = ["add_schedule_arguments", "cmd_schedule", "parse_network"]


def add_schedule_arguments(p) -> None:
    p.add_argument("--hetero", required=True, metavar="CHIP",
                   help="the heterogeneous chip: a preset (hetero-tiny, hetero-tiny-fmt, hetero-S, hetero-L), inline "
                        "JSON or a JSON file")
    p.add_argument("--network", default="784-500-500-500-10", metavar="SIZES",
                   help="layer sizes, e.g. 784-500-500-500-10 (default: the reference design's small network)")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate (default 0.01)")
    p.add_argument("--schedule", default="energy", choices=("energy", "throughput"),
                   help="energy: least energy per sample at no loss of throughput against the best single-kind chip "
                        "of the same area (or --min-throughput); throughput: most samples/s within --energy-budget")
    p.add_argument("--energy-budget", type=float, metavar="J", help="joules per sample (--schedule throughput)")
    p.add_argument("--min-throughput", type=float, metavar="S", help="samples/s (--schedule energy; default: the "
                                                                      "best single-kind chip of the same area)")
    p.add_argument("--placement", metavar="P",
                   help="skip the search: this placement (group per layer, 1,1,0,0; g:k puts a layer's row "
                        "panels on k cores of group g, 1:2,1:2,1; or JSON / a JSON file with "
                        "forward/backward/update per layer)")
    p.add_argument("--describe", action="store_true",
                   help="print the placement and why: per layer, phase and group, the predicted cycles and energy")
    p.add_argument("--run", type=int, default=0, metavar="STEPS",
                   help="compile the placement and run STEPS SGD steps (weights checked bit for bit against the "
                        "golden trainer; measured cycles and energy against the model's)")
    p.add_argument("--engine", default="fast", choices=("fast", "cycle"), help="chip engine for --run")
    p.add_argument("--transfers", default="ring", choices=("ring", "host"),
                   help="vectors between layers on different cores: over the ring through the crossings (default) "
                        "or through the host")
    p.add_argument("--json", help="save the schedule (and the run) as JSON")


def parse_network(text: str) -> list:
    try:
        sizes = [int(x) for x in text.split("-")]
    except ValueError:
        raise UsageError(f"--network {text!r}: expected layer sizes like 784-500-10") from None
    if len(sizes) < 3 or min(sizes) < 1:
        raise UsageError(f"--network {text!r}: at least an input, a hidden and an output layer, sizes >= 1")
    return sizes


def cmd_schedule(args) -> int:
    from arch.files import atomic_write
    from arch.hetero import hetero_from_arg
    from perf.hybrid_run import run_placement
    from perf.schedule import layer_costs, model_for, predict_placement, schedule
    from sw.mlp import MLP
    from sw.train_hetero import check_fit
    from sw.train_hetero_place import PlacementError, placement_from_arg

    check_outputs(args, "json")
    if args.schedule == "throughput" and args.energy_budget is None and args.placement is None:
        raise UsageError("--schedule throughput needs --energy-budget J (joules per sample)")
    if args.energy_budget is not None and args.schedule != "throughput":
        raise UsageError("--energy-budget goes with --schedule throughput")
    if args.min_throughput is not None and args.schedule != "energy":
        raise UsageError("--min-throughput goes with --schedule energy")
    if args.run < 0:
        raise UsageError(f"--run {args.run}: a number of steps >= 0")
    hcfg = hetero_from_arg(args.hetero)
    mlp = MLP(parse_network(args.network), "mse", args.lr)
    doc = {"chip": args.hetero, "network": mlp.describe()}
    if args.placement is not None:
        pl = placement_from_arg(args.placement)
        check_fit(hcfg, mlp, pl, args.transfers)
        model, kinds = model_for(hcfg)
        costs = {(l, g): layer_costs(model, kinds[g], hcfg.group_cfgs[g], mlp, l, args.transfers)
                 for l in range(mlp.n_layers) for g in range(len(hcfg.groups))}
        if any(p.cores > 1 for p in pl.layers):
            from perf.schedule_split import predict_split

            pred = predict_split(hcfg, mlp, pl, model, kinds)
            if not pred.fits:
                raise PlacementError(pred.reason)
        else:
            pred = predict_placement(hcfg, mlp, [p.forward for p in pl.layers], costs, model, kinds,
                                     args.transfers)
        print(f"placement {pl.short()} (given): predicted {pred.cycles:.0f} cycles, {pred.samples_per_s:.1f} "
              f"samples/s, {pred.energy_pj * 1e-6:.3f} uJ per sample (everything)")
        doc["placement"], doc["predicted"] = pl.to_dict(), pred.to_dict()
    else:
        s = schedule(hcfg, mlp, objective=args.schedule, energy_budget=args.energy_budget,
                     min_throughput=args.min_throughput, transfers=args.transfers)
        pl, pred = s.chosen.placement, s.chosen
        print(s.describe(hcfg, mlp) if args.describe else
              f"placement {pl.short()}: predicted {pred.cycles:.0f} cycles, {pred.samples_per_s:.1f} samples/s, "
              f"{pred.energy_pj * 1e-6:.3f} uJ per sample (everything); {s.why()}")
        doc["schedule"] = s.to_dict()
    if args.run:
        r = run_placement(hcfg, mlp, pl, steps=args.run, engine=args.engine, predicted=pred.to_dict(),
                          transfers=args.transfers,
                          log=lambda m: print(m, file=sys.stderr))
        print(f"ran {args.run} step(s) on the {args.engine} engine: weights = golden bit for bit; {r['cycles']} "
              f"cycles ({r['samples_per_s']:.1f} samples/s), model {r['model_cycles_err']:+.1%}; "
              f"{r['energy_uj_per_sample_everything']:.3f} uJ per sample everything "
              f"({r['energy_uj_per_sample_compared']:.3f} compared), model {r['model_energy_err']:+.1%}")
        doc["run"] = r
    if args.json:
        atomic_write(args.json, json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
