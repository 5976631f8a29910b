"""The ``caterpillar`` command line.

Subcommands::

    caterpillar info    [--config C]                      architecture parameters
    caterpillar verilog [--config C] [--top pe] -o FILE   Verilog for FPGA/ASIC flows
    caterpillar synth   [--config C] [--top pe|core] --target ecp5|ice40|generic [--device D] [--json FILE]
    caterpillar build   [--board ulx3s-85f] [--config C] [--clock-mhz F] [--top core|pe] [--no-floorplan]
                                                          FPGA bitstream (UART host link; pe: one PE's Fmax)
    caterpillar pnr     BUILD_DIR --out DIR [--seed N]    place and route a build's netlist again
    caterpillar timing  BUILD_DIR [--mhz 100] [--depth 2] [--json FILE]   late endpoints by unit
    caterpillar demo    [--sim icarus|verilator]          the main job (``make demo``)
    caterpillar run     program.s [--config C] [--model fast|model|rtl] [--data FILE] [-o FILE]
                                                          run a program on one core
    caterpillar report  RUN.json|program.s [--config C] [--json F] [--png F]   power / area report of a run
    caterpillar paper   [--cells C,...] [--json F] [--png F]   the reference design's Table 2 beside ours
    caterpillar dse     --space nr=2,4 cores=2..32:x2 ... [--area MM2] [--power W] [--search heuristic]
                                                          design-space search on Ray
    caterpillar train   [--data digits|mnist|npz:F|csv:F] [--hidden 64] [--method sgd|cp] [--batch B]
                                                          training on a simulated core or chip
    caterpillar share JOBS.json [--config S] [--slowdown 1.5] [--json F]
                                                          several jobs at once on core groups of a chip
    caterpillar tune [--config S] [--hidden 64] [--trials 16] [--group-cores 4]
                                                          learning-rate and batch search on core groups
    caterpillar characterize [--configs S L] [--classes all] [--grid full|quick] [--json F] [--png F]
                                                          every operation class per core kind; performance model
    caterpillar schedule --hetero CHIP [--network 784-500-10] [--schedule energy|throughput] [--energy-budget J]
                         [--placement P] [--describe] [--run STEPS] [--json F]
                                                          layers' phases on a heterogeneous chip's core groups

``--config`` takes a preset name (``default``, ``tiny``, ``small``, ...), a JSON file, or
inline JSON such as ``'{"fmt": "binary32", "nr": 2}'``.

Errors are one line, ``caterpillar: error: <what and where>``; the exit status is 2 for
bad options and 1 for a failure while working (``--debug`` adds the traceback).
Output files are checked before any work starts and written all or nothing.
"""

from __future__ import annotations

import argparse
import sys

from arch.config import PRESETS
from cli.common import Parser, run_command

__all__ = ["main", "make_parser"]


def _cmd_demo(args) -> int:
    from cli.demo import run_demo

    return run_demo(sim=args.sim)


def _cmd_train(args) -> int:
    from cli.train import cmd_train

    return cmd_train(args)


def _cmd_dse(args) -> int:
    from cli.dse import cmd_dse

    return cmd_dse(args)


def _cmd_share(args) -> int:
    from cli.share import cmd_share

    return cmd_share(args)


def _cmd_tune(args) -> int:
    from cli.tune import cmd_tune

    return cmd_tune(args)


def _cmd_characterize(args) -> int:
    from cli.characterize import cmd_characterize

    return cmd_characterize(args)


def _cmd_schedule(args) -> int:
    from cli.schedule import cmd_schedule

    return cmd_schedule(args)


def make_parser() -> Parser:
    """The ``caterpillar`` argument parser (errors raise :class:`arch.errors.UsageError`)."""
    from cli import hw, run
    from cli.train import add_train_arguments

    ap = Parser(prog="caterpillar", description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    cfg_help = f"preset ({', '.join(PRESETS)}), JSON file or inline JSON"
    hw.add_parsers(sub, cfg_help)

    p = sub.add_parser("demo", help="the main job: Verilog, a GEMV on the core in RTL vs numpy, power report, "
                                    "synthesis, training on the core and the chip (about 20 minutes)")
    p.add_argument("--sim", default=None, choices=("icarus", "verilator"))
    p.set_defaults(fn=_cmd_demo)

    run.add_parsers(sub, cfg_help)

    p = sub.add_parser("dse", help="design-space search: the best chip for training workloads under area and power "
                                   "limits, evaluated on Ray (a local cluster unless --address)")
    from cli.dse import add_dse_arguments

    add_dse_arguments(p, cfg_help)
    p.set_defaults(fn=_cmd_dse)

    p = sub.add_parser("train", help="train an MLP on a simulated core or chip (SGD, minibatch GD, continuous "
                                     "propagation; fast model), beside float64 baselines")
    add_train_arguments(p, cfg_help)
    p.set_defaults(fn=_cmd_train)

    p = sub.add_parser("share", help="several training jobs at once on disjoint core groups of one chip "
                                     "(right-sized, buddy-packed, fast chip engine) against time sharing")
    from cli.share import add_share_arguments

    add_share_arguments(p, cfg_help)
    p.set_defaults(fn=_cmd_share)

    p = sub.add_parser("tune", help="learning-rate and batch search for one network, trials concurrent on core "
                                    "groups of a chip (Optuna sampler and pruner) against sequential tuning")
    from cli.tune import add_tune_arguments

    add_tune_arguments(p, cfg_help)
    p.set_defaults(fn=_cmd_tune)

    p = sub.add_parser("characterize", help="run every operation class the compilers emit over a grid of shapes on "
                                            "each core kind (fast engines); fit the performance model, report its "
                                            "error on held-out shapes")
    from cli.characterize import add_characterize_arguments

    add_characterize_arguments(p, cfg_help)
    p.set_defaults(fn=_cmd_characterize)

    p = sub.add_parser("schedule", help="place each layer's forward, backward and update phases on the core groups "
                                        "of a heterogeneous chip with the performance model; run the placement")
    from cli.schedule import add_schedule_arguments

    add_schedule_arguments(p)
    p.set_defaults(fn=_cmd_schedule)
    for p in sub.choices.values():
        p.add_argument("--debug", action="store_true", default=None, help="show the traceback of an error")
    return ap


def main(argv=None) -> int:
    """Run ``caterpillar`` with ``argv`` (default ``sys.argv[1:]``); the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    return run_command(_dispatch, argv, debug=debug)


def _dispatch(argv) -> int:
    args = make_parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
