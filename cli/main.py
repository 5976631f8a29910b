"""The ``caterpillar`` command line.

Subcommands::

    caterpillar info    [--config C]                      architecture parameters
    caterpillar verilog [--config C] [--top pe] -o FILE   Verilog for FPGA/ASIC flows
    caterpillar synth   [--config C] [--top pe|core] --target ecp5|ice40|generic [--device D] [--json FILE]
    caterpillar build   [--board ulx3s-85f] [--config C] [--clock-mhz F] [--top core|pe] [--no-floorplan]
                                                          FPGA bitstream (UART host link; pe: one PE's Fmax)
    caterpillar timing  BUILD_DIR [--mhz 100] [--depth 2] [--json FILE]   late endpoints by unit
    caterpillar demo    [--sim icarus|verilator]          the main job (``make demo``)
    caterpillar run     program.s [--config C] [--model fast|model|rtl] [--data FILE] [-o FILE]
                                                          run a program on one core
    caterpillar report  RUN.json|program.s [--config C] [--json F] [--png F]   power / area report of a run
    caterpillar paper   [--cells C,...] [--json F] [--png F]   the reference design's Table 2 beside ours
    caterpillar train   [--data digits|mnist] [--hidden 64] [--loss softmax_ce|mse] [--epochs N]
                                                          SGD training on one simulated core

``--config`` takes a preset name (``default``, ``tiny``, ``small``), a JSON file, or
inline JSON such as ``'{"fmt": "binary32", "nr": 2}'``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from arch.config import ConfigError, PRESETS, config_from_arg
from rtl.fpga import DEFAULT_BOARD
from rtl.tops import TOPS

__all__ = ["main"]


def _cmd_info(args) -> int:
    cfg = config_from_arg(args.config)
    d = cfg.to_dict()
    d.update(n_pes=cfg.n_pes, addr_bits=cfg.addr_bits, fpu_latency=cfg.fpu_latency,
             acc_reuse_distance=cfg.acc_reuse_distance, mv_read_distance=cfg.mv_read_distance,
             mv_drive_distance=cfg.mv_drive_distance, sram_read_distance=cfg.sram_read_distance,
             run_overhead=cfg.run_overhead, jump_delay=cfg.jump_delay,
             pe_sram_bytes=cfg.pe_sram_bytes)
    if cfg.spad_kib:
        d.update(spad_depth=cfg.spad_depth, spad_addr_bits=cfg.spad_addr_bits)
    if args.json:
        print(json.dumps(d, indent=2, sort_keys=True))
    else:
        for k, v in d.items():
            print(f"{k:<20} {v}")
    return 0


def _cmd_verilog(args) -> int:
    from arch.files import atomic_write
    from amaranth.back import verilog
    from rtl.tops import build_top

    cfg = config_from_arg(args.config)
    comp, name = build_top(args.top, cfg)
    text = verilog.convert(comp, name=name, emit_src=False)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        atomic_write(args.output, text)
        print(f"wrote {args.output}: module {name} ({args.top}, {cfg.fmt}, nr={cfg.nr}), "
              f"{len(text.splitlines())} lines", file=sys.stderr)
    return 0


def _cmd_synth(args) -> int:
    from rtl.fpga import FitError, check_fit, default_device, fit_report, fpga_resources
    from rtl.synth import format_table, synthesize_top
    from arch.files import atomic_write
    from sim.harness import ROOT

    cfg = config_from_arg(args.config)
    device = args.device or default_device(args.target)
    print(f"synthesizing {args.top} ({cfg.fmt}, nr={cfg.nr}, {cfg.mem_a_words}+{cfg.mem_b_words} words SRAM) "
          f"for {args.target} with Yosys ...", file=sys.stderr)
    res = synthesize_top(args.top, cfg, args.target, log=ROOT / "build" / "synth" / f"{args.top}-{args.target}.log")
    print(format_table(res))
    err = None
    if device:
        res["device"] = device
        res["resources"] = fpga_resources(res)
        res["fit"] = fit_report(res["resources"], device)
        try:
            check_fit(res["resources"], device)
            res["fits"] = True
        except FitError as e:
            res["fits"] = False
            err = e
        print(f"{device}: " + ", ".join(f"{r} {v['used']}/{v['available']} ({v['percent']}%)"
                                        for r, v in res["fit"].items()))
    if args.json:
        atomic_write(args.json, json.dumps(res, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    if err is not None:
        raise err
    return 0


def _add_timeout(p) -> None:
    p.add_argument("--timeout-min", type=float, default=240,
                   help="stop a tool (Yosys, nextpnr, ecppack) that runs longer than this many minutes, "
                        "an error (default 240; nextpnr's --tmg-ripup may not stop by itself when a few "
                        "connections cannot meet the target)")


def _timeout_s(args) -> float:
    if not args.timeout_min > 0:
        raise ValueError(f"--timeout-min must be a positive number of minutes, got {args.timeout_min:g}")
    return args.timeout_min * 60


def _cmd_build(args) -> int:
    from rtl.fpga import build, format_build

    cfg = config_from_arg(args.config)
    summary = build(cfg, args.board, out_dir=args.out, clock_mhz=args.clock_mhz, baud=args.baud,
                    seed=args.seed, dff=not args.no_dff, widelut=not args.no_widelut, router=args.router,
                    nextpnr_extra=args.nextpnr_opt or (), top=args.top, floorplan=args.floorplan,
                    timeout_s=_timeout_s(args), log=lambda s: print(s, file=sys.stderr))
    print(format_build(summary))
    print(f"wrote {summary['dir']}/summary.json", file=sys.stderr)
    return 0


def _cmd_pnr(args) -> int:
    from rtl.fpga import format_build, reroute

    summary = reroute(args.build_dir, args.out, seed=args.seed, router=args.router,
                      nextpnr_extra=args.nextpnr_opt, constrain_mhz=args.constrain_mhz,
                      timeout_s=_timeout_s(args), log=lambda s: print(s, file=sys.stderr))
    print(format_build(summary))
    print(f"wrote {summary['dir']}/summary.json", file=sys.stderr)
    return 0


def _cmd_timing(args) -> int:
    from rtl.endpoints import endpoint_report, format_endpoint_report
    from arch.files import atomic_write

    rep = endpoint_report(args.build_dir, mhz=args.mhz, depth=args.depth)
    print(format_endpoint_report(rep, top=args.top))
    if args.json:
        atomic_write(Path(args.json), json.dumps(rep, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _cmd_demo(args) -> int:
    from cli.demo import run_demo

    return run_demo(sim=args.sim)


def _read_beats(path) -> list[int]:
    """Host input beats: one integer per line (decimal or 0x hex); '#' / ';' comments."""
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#")[0].split(";")[0].strip()
        if line:
            out += [int(tok, 0) for tok in line.replace(",", " ").split()]
    return out


def _cmd_run(args) -> int:
    import time

    from sim.core_model import CoreModel
    from sim.core_run import job_beats, run_job, split_job
    from arch.files import atomic_write
    from sw.asm import assemble, read_hex

    cfg = config_from_arg(args.config)
    src = Path(args.program)
    if src.suffix == ".hex":
        words = read_hex(src, cfg)
    else:
        words = assemble(src.read_text(), cfg, file=str(src)).words()
    data = _read_beats(args.data) if args.data else []
    t0 = time.perf_counter()
    stats = {}
    if args.model == "rtl":
        if args.start:
            raise ValueError("--start is not supported with --model rtl (programs start at pc 0)")
        res = run_job(cfg, words, data, backend="rtl", sim=args.sim, name="cli",
                      reference="fast")
    else:
        if args.model == "fast":
            from sim.fast_model import FastModel

            model = FastModel(cfg)
        else:
            model = CoreModel(cfg)
        res = split_job(cfg, model.process(job_beats(cfg, words, data, args.start)), args.model)
        stats = getattr(model, "stats", {})
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
    if args.output:
        atomic_write(args.output, "".join(f"{b.data:#x} {int(b.last)}\n" for b in res.data))
        print(f"wrote {len(res.data)} output beats to {args.output}", file=sys.stderr)
    if args.json:
        from sim.power import RUN_FORMAT

        atomic_write(args.json, json.dumps({"format": RUN_FORMAT, "config": cfg.to_dict(), "n_cores": 1,
                                            "model": res.backend, "counters": c,
                                            "out": [[b.data, int(b.last)] for b in res.data],
                                            "wall_s": wall, "stats": stats}, indent=1) + "\n")
    return 0


def _report_config(args, stored: dict | None, src: Path):
    """The configuration of a stored run: the run's own; ``--config`` must agree with it."""
    from arch.config import ArchConfig

    if stored is None:
        if args.config is None:
            raise ValueError(f"{src}: the run stores no configuration; name it with --config")
        return config_from_arg(args.config)
    cfg = ArchConfig.from_dict(dict(stored))
    if args.config is not None:
        given = config_from_arg(args.config)
        diff = sorted(k for k, v in given.to_dict().items() if cfg.to_dict().get(k) != v)
        if diff:
            raise ValueError(f"--config {args.config} contradicts the run in {src}: "
                             + ", ".join(f"{k} {given.to_dict()[k]!r} (run: {cfg.to_dict().get(k)!r})"
                                         for k in diff[:4]))
    return cfg


def _cmd_report(args) -> int:
    from arch.files import atomic_write
    from sim.power import load_tech, plot_breakdown, read_run_record, report_from_counters

    if args.flops is not None and args.flops <= 0:
        raise ValueError(f"--flops must be a positive number of FLOPs, got {args.flops}")
    src = Path(args.input)
    n_cores, ucode_words, flops = 1, None, args.flops
    if src.suffix == ".json":
        try:
            d = json.loads(src.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot read counters from {src}: {e}") from None
        rec = read_run_record(d, str(src))
        cfg = _report_config(args, rec["config"], src)
        counters, n_cores, ucode_words = rec["counters"], rec["n_cores"], rec["ucode_words"]
        if flops is None:
            flops = rec["flops"]
    else:
        from sim.core_run import job_beats, split_job
        from sim.fast_model import FastModel
        from sw.asm import assemble, read_hex

        cfg = config_from_arg(args.config)
        words = read_hex(src, cfg) if src.suffix == ".hex" else assemble(src.read_text(), cfg, file=str(src)).words()
        data = _read_beats(args.data) if args.data else []
        counters = split_job(cfg, FastModel(cfg).process(job_beats(cfg, words, data)), "fast").counters
    tech = load_tech(args.tech) if args.tech else None
    rep = report_from_counters(cfg, counters, flops=flops, n_cores=n_cores, ucode_words=ucode_words,
                               **({"tech": tech} if tech else {}))
    print(rep.table())
    if args.json:
        atomic_write(args.json, rep.to_json() + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    if args.png:
        plot_breakdown({src.stem: rep}, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def _cmd_paper(args) -> int:
    from arch.files import atomic_write
    from sim.paper import CELLS, format_table, plot_table2, table2

    cells = CELLS
    if args.cells:
        want = [c.strip() for c in args.cells.split(",") if c.strip()]
        names = {f"{c.net}-{c.config}-{c.method}": c for c in CELLS}
        unknown = [w for w in want if w not in names]
        if unknown or not want:
            raise ValueError(f"--cells: unknown cell {unknown[0] if unknown else args.cells!r}; "
                             f"cells are {', '.join(names)}")
        cells = tuple(names[w] for w in want)
    print(f"running {len(cells)} Table 2 cell(s) on the fast chip engine (the large net at L takes minutes) ...",
          file=sys.stderr)
    res = table2(cells, log=lambda s: print("  " + s, file=sys.stderr))
    print(format_table(res))
    if args.json:
        atomic_write(args.json, json.dumps(res, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    if args.png:
        plot_table2(res, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def _cmd_train(args) -> int:
    from cli.train import cmd_train

    return cmd_train(args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="caterpillar", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    cfg_help = f"preset ({', '.join(PRESETS)}), JSON file or inline JSON"

    p = sub.add_parser("info", help="print architecture parameters")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_cmd_info)

    p = sub.add_parser("verilog", help="write Verilog of a design")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--top", default="pe", choices=sorted(TOPS))
    p.add_argument("-o", "--output", required=True, help="output file, or - for stdout")
    p.set_defaults(fn=_cmd_verilog)

    p = sub.add_parser("synth", help="synthesize with Yosys and print resource use")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--top", default="pe", choices=sorted(TOPS))
    p.add_argument("--target", default="ecp5", choices=("ecp5", "ice40", "generic"))
    p.add_argument("--device", help="check the fit against this part (default LFE5U-85F for ecp5, "
                                    "iCE40UP5K for ice40; see rtl/fpga_devices.py DEVICES)")
    p.add_argument("--json", help="also save the result as JSON")
    p.set_defaults(fn=_cmd_synth)

    p = sub.add_parser("build", help="FPGA bitstream of a core behind a UART bridge (amaranth-boards, YoWASP tools)")
    p.add_argument("--board", default=DEFAULT_BOARD, help=f"amaranth-boards ECP5 board (default {DEFAULT_BOARD})")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--clock-mhz", type=float, default=None,
                   help="core clock from a PLL (default: the board oscillator, 25 MHz on the ULX3S)")
    p.add_argument("--baud", type=int, default=115200, help="UART rate (default 115200)")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    p.add_argument("--out", help="build directory (default build/fpga/<board>-<fmt>-nr<nr>, "
                                 "-pe with --top pe)")
    p.add_argument("--no-dff", "--noabc9", dest="no_dff", action="store_true",
                   help="synthesize with plain synth_ecp5 instead of synth_ecp5 -dff (Yosys 0.70 always maps "
                        "with ABC9; -dff, which a 4x4 core overflows the WebAssembly stack with, also hands "
                        "it the flip-flops). --noabc9 is the older name of this flag")
    p.add_argument("--no-widelut", action="store_true",
                   help="synthesize with synth_ecp5 -nowidelut: LUT4s only, no LUT5 / LUT6 made of slice "
                        "muxes (fewer LUT4s, more logic levels)")
    p.add_argument("--nextpnr-opt", action="append", metavar="ARG",
                   help="one more nextpnr-ecp5 argument, repeatable, e.g. --nextpnr-opt=--tmg-ripup (reroute "
                        "the paths that fail the clock: the best Fmax of a core that does not meet it), or "
                        "--nextpnr-opt=--placer-heap-beta --nextpnr-opt=0.8 (saved in summary.json)")
    p.add_argument("--router", choices=("router1", "router2"),
                   help="nextpnr router (default router1; router2 converges faster on a congested 4x4 core)")
    p.add_argument("--top", choices=("core", "pe"), default="core",
                   help="core (default): the core behind the UART bridge; pe: one PE in a scan harness "
                        "(its own Fmax, no core around it)")
    p.add_argument("--no-floorplan", dest="floorplan", action="store_false",
                   help="let nextpnr place the PEs' block RAMs freely (default: each PE's RAMs on adjacent "
                        "sites, the PE array's shape kept on the die; rtl/floorplan.py)")
    _add_timeout(p)
    p.set_defaults(fn=_cmd_build)

    p = sub.add_parser("pnr", help="place and route a finished build's synthesized netlist again (another seed, "
                                   "router or nextpnr options; no synthesis)")
    p.add_argument("build_dir", help="directory of a finished `caterpillar build` (its top.json is reused)")
    p.add_argument("--out", required=True, help="new build directory")
    p.add_argument("--seed", type=int, default=None, help="nextpnr placement seed (default: the build's)")
    p.add_argument("--router", choices=("router1", "router2"), default=None,
                   help="nextpnr router (default: the build's)")
    p.add_argument("--nextpnr-opt", action="append", metavar="ARG", default=None,
                   help="one more nextpnr-ecp5 argument, repeatable (default: the build's own extra "
                        "arguments; given, they replace them)")
    p.add_argument("--constrain-mhz", type=float, default=None,
                   help="timing target for nextpnr on the core clock (the design and its clock are unchanged; "
                        "e.g. above the achieved Fmax, for --nextpnr-opt=--tmg-ripup)")
    _add_timeout(p)
    p.set_defaults(fn=_cmd_pnr)

    p = sub.add_parser("timing", help="late register inputs of a routed build, grouped by design unit "
                                      "(needs --nextpnr-opt=--detailed-timing-report)")
    p.add_argument("build_dir", help="directory of a finished `caterpillar build`")
    p.add_argument("--mhz", type=float, default=100.0, help="clock to check against (default 100)")
    p.add_argument("--depth", type=int, default=2, help="hierarchy levels of a unit (default 2)")
    p.add_argument("--top", type=int, default=30, help="units shown (default 30)")
    p.add_argument("--json", help="also save the analysis as JSON")
    p.set_defaults(fn=_cmd_timing)

    p = sub.add_parser("demo", help="the main job: Verilog, a GEMV on the core in RTL vs numpy, power report, synthesis")
    p.add_argument("--sim", default=None, choices=("icarus", "verilator"))
    p.set_defaults(fn=_cmd_demo)

    p = sub.add_parser("run", help="assemble and run a program on one core (fast model, core model or RTL)")
    p.add_argument("program", help="assembly source (.s) or hex microcode (.hex)")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--model", default="fast", choices=("fast", "model", "rtl"),
                   help="fast: cycle-exact fast model (default); model: reference core model; rtl: cocotb")
    p.add_argument("--sim", default=None, choices=("icarus", "verilator"), help="simulator for --model rtl")
    p.add_argument("--data", help="host input beats for the program's hin instructions, one per line")
    p.add_argument("--start", type=int, default=0, help="start pc")
    p.add_argument("-o", "--output", help="write the output beats (data last) to this file")
    p.add_argument("--json", help="write counters, output beats and timing as JSON")
    p.add_argument("--counters", action="store_true", help="print every counter")
    p.set_defaults(fn=_cmd_run)

    p = sub.add_parser("report", help="power/area report (GFLOPS/W, utilization, energy breakdown) of a run")
    p.add_argument("input", help="run JSON (from `caterpillar run --json` or `caterpillar train --json`: its stored "
                                 "configuration is used) or a program (.s/.hex, run on the fast model)")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--data", help="input beats for a program (as for `caterpillar run`)")
    p.add_argument("--flops", type=int, help="FLOPs of the workload's mathematics (default: 2 per FMA issue)")
    p.add_argument("--tech", help="technology table JSON (default: sim/tech/45nm.json)")
    p.add_argument("--json", help="save the report as JSON")
    p.add_argument("--png", help="save the energy breakdown as a PNG plot")
    p.set_defaults(fn=_cmd_report)

    p = sub.add_parser("paper", help="the reference design's Table 2 beside this model: every cell (network x "
                                      "configuration x method) compiled and run on the fast chip engine")
    p.add_argument("--cells", help="comma-separated cells, e.g. small-S-sgd,large-L-mbgd (default: all nine)")
    p.add_argument("--json", help="save the table as JSON (keys cells, area_mm2, convention)")
    p.add_argument("--png", help="save a plot of GFLOPS/W per cell")
    p.set_defaults(fn=_cmd_paper)

    p = sub.add_parser("train", help="train an MLP on a simulated core or chip (SGD, minibatch GD, continuous "
                                     "propagation; fast model), beside float64 SGD")
    from cli.train import add_train_arguments

    add_train_arguments(p)
    p.set_defaults(fn=_cmd_train)

    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        sys.stderr.close()
        return 0
    except ConfigError as e:
        print(f"caterpillar: configuration error: {e}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError, OSError) as e:
        print(f"caterpillar {args.cmd}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
