"""The subcommands that run things and report on them: ``run`` (a program on one core),
``report`` (the power / area report of a run) and ``paper`` (the reference design's
Table 2 beside this model)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from arch.config import config_from_arg
from arch.errors import InputError, UsageError
from arch.files import Outputs, read_text
from cli.common import Progress, check_outputs, count, input_path, nonneg_int, write_json_png

__all__ = ["add_parsers", "read_beats"]


def read_beats(path) -> list[int]:
    """Host input beats: one or more integers per line (decimal or 0x hex, comma or space
    separated); ``#`` / ``;`` comments. Errors name the file and line."""
    out = []
    for lineno, line in enumerate(read_text(path, "--data").splitlines(), 1):
        line = line.split("#")[0].split(";")[0].strip()
        for tok in line.replace(",", " ").split():
            try:
                v = int(tok, 0)
            except ValueError:
                raise InputError(f"--data {path}:{lineno}: {tok!r} is not an integer") from None
            if v < 0:
                raise InputError(f"--data {path}:{lineno}: beat {tok} is negative")
            out.append(v)
    return out


def _program_words(src: Path, cfg) -> list[int]:
    from sw.asm import assemble, read_hex

    if src.suffix == ".hex":
        return read_hex(src, cfg)
    return assemble(read_text(src, "program"), cfg, file=str(src)).words()


def _cmd_run(args) -> int:
    from sim.chip_model import RingStallError
    from sim.core_model import CoreModel
    from sim.core_run import check_host_data, job_beats, run_job, split_job
    from sim.fast_model import FastModel
    from sim.seq_model import ProgramError, RunawayError

    cfg = config_from_arg(args.config)
    src = input_path(args.program, "program")
    check_outputs(args, "output", "json")
    if args.model != "rtl" and args.sim:
        raise UsageError(f"--sim applies to --model rtl, not --model {args.model}")
    if args.model == "rtl" and args.start:
        raise UsageError("--start is not supported with --model rtl (programs start at pc 0)")
    if args.start >= cfg.ucode_depth:
        raise UsageError(f"--start {args.start}: beyond the microcode store ({cfg.ucode_depth} words)")
    words = _program_words(src, cfg)
    data = read_beats(args.data) if args.data else []
    check_host_data(cfg, words, data, args.start)
    t0 = time.perf_counter()
    stats = {}
    try:
        if args.model == "rtl":
            from sim.harness import default_sim

            print(f"simulating the core's RTL with {args.sim or default_sim()} (building the simulator takes up to "
                  f"a minute the first time) ...", file=sys.stderr, flush=True)
            res = run_job(cfg, words, data, backend="rtl", sim=args.sim, name="cli", reference="fast")
        else:
            model = FastModel(cfg) if args.model == "fast" else CoreModel(cfg)
            res = split_job(cfg, model.process(job_beats(cfg, words, data, args.start)), args.model)
            stats = getattr(model, "stats", {})
    except (RunawayError, ProgramError, RingStallError) as e:      # the program misbehaves: name it
        raise InputError(f"{src}: {e}") from e
    wall = time.perf_counter() - t0
    c = res.counters
    nr2 = cfg.n_pes
    fma = sum(c[f"fma[{p}]"] for p in range(nr2))
    print(f"{src.name}: {len(words)} words, {cfg.nr}x{cfg.nr} {cfg.fmt} core, model {res.backend}")
    print(f"  cycles {c['cycles']}, instructions {c['instructions']}, FPU-issue utilization "
          f"{100.0 * fma / max(1, c['cycles'] * nr2):.1f}%, host beats in {c['host_in_beats']} / out "
          f"{c['host_out_beats']}, done at pc {(res.done.data >> 4) & 0xFFFF}")
    if stats:
        print(f"  fast model: {stats.get('flow_cycles', 0)} cycles loop-level, "
              f"{stats.get('cycle_engine_cycles', 0)} per-cycle, {stats.get('regions', 0)} regions")
    print(f"  {wall * 1e3:.1f} ms wall ({c['cycles'] * nr2 / max(wall, 1e-9) / 1e6:.2f} M PE-cycles/s)")
    if args.counters:
        for k, v in c.items():
            print(f"  {k:<20} {v}")
    with Outputs() as outs:
        if args.output:
            outs.write_text(args.output, "".join(f"{b.data:#x} {int(b.last)}\n" for b in res.data))
        if args.json:
            from sim.power import RUN_FORMAT

            outs.write_text(args.json, json.dumps({"format": RUN_FORMAT, "config": cfg.to_dict(), "n_cores": 1,
                                                   "model": res.backend, "counters": c,
                                                   "out": [[b.data, int(b.last)] for b in res.data],
                                                   "wall_s": wall, "stats": stats}, indent=1) + "\n")
    if args.output:
        print(f"wrote {len(res.data)} output beats to {args.output}", file=sys.stderr)
    return 0


def _report_config(args, stored: dict | None, src: Path):
    """The configuration of a stored run: the run's own; ``--config`` must agree with it."""
    from arch.config import ArchConfig

    if stored is None:
        if args.config is None:
            raise InputError(f"{src}: the run stores no configuration; name it with --config")
        return config_from_arg(args.config)
    cfg = ArchConfig.from_dict(dict(stored))
    if args.config is not None:
        given = config_from_arg(args.config)
        diff = sorted(k for k, v in given.to_dict().items() if cfg.to_dict().get(k) != v)
        if diff:
            raise UsageError(f"--config {args.config} contradicts the run in {src}: "
                             + ", ".join(f"{k} {given.to_dict()[k]!r} (run: {cfg.to_dict().get(k)!r})"
                                         for k in diff[:4]))
    return cfg


def _cmd_report(args) -> int:
    from sim.power import load_tech, plot_breakdown, read_run_record, report_from_counters

    src = input_path(args.input, "input")
    check_outputs(args, "json", "png")
    n_cores, ucode_words, flops = 1, None, args.flops
    tech = load_tech(args.tech) if args.tech else None
    if src.suffix == ".json":
        if args.data:
            raise UsageError("--data applies to a program input (.s/.hex), not to a stored run")
        try:
            d = json.loads(read_text(src, "run record"))
        except json.JSONDecodeError as e:
            raise InputError(f"run record {src}: not JSON ({e})") from None
        rec = read_run_record(d, str(src))
        cfg = _report_config(args, rec["config"], src)
        counters, n_cores, ucode_words = rec["counters"], rec["n_cores"], rec["ucode_words"]
        if flops is None:
            flops = rec["flops"]
    else:
        from sim.core_run import check_host_data, job_beats, split_job
        from sim.fast_model import FastModel

        cfg = config_from_arg(args.config)
        words = _program_words(src, cfg)
        data = read_beats(args.data) if args.data else []
        check_host_data(cfg, words, data)
        counters = split_job(cfg, FastModel(cfg).process(job_beats(cfg, words, data)), "fast").counters
    rep = report_from_counters(cfg, counters, flops=flops, n_cores=n_cores, ucode_words=ucode_words,
                               **({"tech": tech} if tech else {}))
    print(rep.table())
    write_json_png(args, lambda: rep.to_json() + "\n", lambda path: plot_breakdown({src.stem: rep}, path))
    return 0


def _cmd_paper(args) -> int:
    from sim.paper import CELLS, format_table, plot_table2, table2

    cells = CELLS
    if args.cells is not None:
        want = [c.strip() for c in args.cells.split(",") if c.strip()]
        names = {f"{c.net}-{c.config}-{c.method}": c for c in CELLS}
        unknown = [w for w in want if w not in names]
        if unknown or not want:
            raise UsageError(f"--cells: unknown cell {unknown[0] if unknown else args.cells!r}; "
                             f"cells are {', '.join(names)}")
        cells = tuple(names[w] for w in want)
    check_outputs(args, "json", "png")
    print(f"running {len(cells)} Table 2 cell(s) on the fast chip engine (a small-net cell takes seconds, "
          f"the large net at L minutes, the large net's SGD at S off-chip about 4 CPU-minutes) ...",
          file=sys.stderr)
    with Progress("Table 2 cells", unit="cell", mode=args.progress) as bar:
        done = []

        def step(_cell):
            done.append(_cell)
            bar(len(done), len(cells))

        res = table2(cells, log=lambda s: bar.log("  " + s), progress=step)
    print(format_table(res))
    write_json_png(args, lambda: json.dumps(res, indent=1) + "\n", lambda path: plot_table2(res, path))
    return 0


def add_progress_argument(p) -> None:
    p.add_argument("--progress", default="auto", choices=("auto", "on", "off"),
                   help="progress bar on stderr (auto: when stderr is a terminal)")


def add_parsers(sub, cfg_help: str) -> None:
    """The ``run``, ``report`` and ``paper`` parsers (``sub``: argparse subparsers)."""
    p = sub.add_parser("run", help="assemble and run a program on one core (fast model, core model or RTL)")
    p.add_argument("program", help="assembly source (.s) or hex microcode (.hex)")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--model", default="fast", choices=("fast", "model", "rtl"),
                   help="fast: cycle-exact fast model (default); model: reference core model; rtl: cocotb")
    p.add_argument("--sim", default=None, choices=("icarus", "verilator"), help="simulator for --model rtl")
    p.add_argument("--data", help="host input beats for the program's hin instructions, one per line")
    p.add_argument("--start", type=nonneg_int, default=0, help="start pc")
    p.add_argument("-o", "--output", help="write the output beats (data last) to this file")
    p.add_argument("--json", help="write counters, output beats and timing as JSON")
    p.add_argument("--counters", action="store_true", help="print every counter")
    p.set_defaults(fn=_cmd_run)

    p = sub.add_parser("report", help="power/area report (GFLOPS/W, utilization, energy breakdown) of a run")
    p.add_argument("input", help="run JSON (from `caterpillar run --json` or `caterpillar train --json`: its stored "
                                 "configuration is used) or a program (.s/.hex, run on the fast model)")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--data", help="input beats for a program (as for `caterpillar run`)")
    p.add_argument("--flops", type=count, help="FLOPs of the workload's mathematics (default: 2 per FMA issue)")
    p.add_argument("--tech", help="technology table JSON (default: sim/tech/45nm.json)")
    p.add_argument("--json", help="save the report as JSON")
    p.add_argument("--png", help="save the energy breakdown as a PNG plot")
    p.set_defaults(fn=_cmd_report)

    p = sub.add_parser("paper", help="the reference design's Table 2 beside this model: every cell (network x "
                                      "configuration x method) compiled and run on the fast chip engine")
    p.add_argument("--cells", help="comma-separated cells, e.g. small-S-sgd,large-L-mbgd (default: all nine)")
    p.add_argument("--json", help="save the table as JSON (keys cells, area_mm2, convention)")
    p.add_argument("--png", help="save a plot of GFLOPS/W per cell")
    add_progress_argument(p)
    p.set_defaults(fn=_cmd_paper)
