"""``caterpillar share JOBS.json``: several training jobs at once on disjoint core groups
of one chip (:mod:`share.schedule`), against running them one after another on the whole
chip (time sharing)."""

from __future__ import annotations

import json

from arch.errors import UsageError
from cli.common import Progress, check_outputs, input_path, positive_float

__all__ = ["add_share_arguments", "cmd_share", "format_share"]


def add_share_arguments(p, cfg_help: str) -> None:
    from cli.run import add_progress_argument

    p.add_argument("jobs", metavar="JOBS.json",
                   help="a JSON list of jobs: {name, network (named or layer sizes), method (sgd, mbgd:B, cp), lr, "
                        "loss, steps or epochs, data (random, digits, mnist-sample, synthetic), cores (optional, a "
                        "power of two)} (docs/chip.md, Sharing a chip)")
    p.add_argument("--config", default="S", help=cfg_help + " (default S)")
    p.add_argument("--slowdown", type=positive_float, default=1.5,
                   help="right-size each job to the fewest cores keeping its step within this factor of its "
                        "exclusive step on the whole chip (default 1.5; >= 1)")
    p.add_argument("--json", help="write the report as JSON here")
    add_progress_argument(p)


def format_share(rep: dict) -> str:
    """The report as a text table."""
    lines = [f"{'job':12s} {'network':24s} {'method':7s} {'cores':>9s} {'step cyc':>9s} {'excl cyc':>9s} "
             f"{'slowdown':>8s} {'GFLOPS/W':>8s}"]
    for r in rep["jobs"]:
        net = "-".join(map(str, r["network"]))
        m = f"mbgd:{r['batch']}" if r["method"] == "mbgd" else r["method"]
        cores = f"{r['first_core']}..{r['first_core'] + r['cores'] - 1}"
        if r["error"] is not None:
            lines.append(f"{r['job']:12s} {net:24s} {m:7s} {cores:>9s} stopped: {r['error']}")
            continue
        lines.append(f"{r['job']:12s} {net:24s} {m:7s} {cores:>9s} {r['step_cycles']:9d} "
                     f"{r['exclusive_step_cycles']:9d} {r['slowdown']:8.2f} {r['gflops_per_w']:8.1f}")
    sh, ts = rep["shared"], rep["time_sharing"]
    lines += ["", f"shared:       {sh['cycles']} cycles, {sh['samples_per_s']:.4g} samples/s, "
                  f"{sh['gflops_per_w']:.1f} GFLOPS/W (idle leakage {sh['idle_leakage_pj'] / 1e6:.3g} uJ)",
              f"time sharing: {ts['cycles']} cycles, {ts['samples_per_s']:.4g} samples/s, "
              f"{ts['gflops_per_w']:.1f} GFLOPS/W",
              f"aggregate throughput: {rep['throughput_ratio']:.2f}x time sharing (these steps); normalized "
              f"progress {rep['normalized_progress']:.2f} (time sharing: 1)"]
    return "\n".join(lines)


def cmd_share(args) -> int:
    from arch.config import config_from_arg
    from arch.files import Outputs
    from share.jobs import load_jobs
    from share.schedule import share

    check_outputs(args, "json")
    if args.slowdown < 1:
        raise UsageError(f"--slowdown must be >= 1, got {args.slowdown:g}")
    path = input_path(args.jobs, "JOBS.json")
    cfg = config_from_arg(args.config)
    jobs = load_jobs(path, cfg.cores)
    with Progress("steps", mode=args.progress) as bar:
        rep = share(cfg, jobs, slowdown=args.slowdown, progress=bar, log=bar.log)
    print(format_share(rep))
    with Outputs() as outs:
        if args.json:
            outs.write_text(args.json, json.dumps(rep, indent=1) + "\n")
    return 1 if rep["failed"] else 0
