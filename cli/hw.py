"""The hardware subcommands: ``info``, ``verilog``, ``synth``, ``build``, ``pnr`` and
``timing`` (Verilog, Yosys statistics, FPGA bitstreams and their timing)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from arch.config import config_from_arg
from arch.errors import InputError, UsageError
from cli.common import check_outputs, count, input_path, nonneg_int, positive_float

__all__ = ["add_parsers"]

def build_duration(top: str, nr: int) -> str:
    """What a bitstream build takes on two cores (docs/fpga.md, the FPGA benchmark's builds)."""
    if top == "pe":
        return "a lone PE takes a few minutes"
    if nr <= 2:
        return f"a {nr}x{nr} core takes 5-15 minutes"
    if nr <= 4:
        return f"a {nr}x{nr} core takes 20-75 minutes"
    return f"a {nr}x{nr} core takes hours"


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
    from amaranth.back import verilog

    from arch.files import atomic_write
    from rtl.tops import build_top

    cfg = config_from_arg(args.config)
    check_outputs(args, "output")
    comp, name = build_top(args.top, cfg)
    text = verilog.convert(comp, name=name, emit_src=False)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        atomic_write(args.output, text, make_parents=False)
        print(f"wrote {args.output}: module {name} ({args.top}, {cfg.fmt}, nr={cfg.nr}), "
              f"{len(text.splitlines())} lines", file=sys.stderr)
    return 0


def _cmd_synth(args) -> int:
    from arch.files import ROOT, atomic_write
    from rtl.fpga import DEVICES, FitError, check_fit, default_device, fit_report, fpga_resources
    from rtl.synth import format_table, synthesize_top

    cfg = config_from_arg(args.config)
    check_outputs(args, "json")
    if args.device and args.device not in DEVICES:
        raise UsageError(f"--device {args.device!r}: unknown device; known: {', '.join(DEVICES)}")
    device = args.device or default_device(args.target)
    print(f"synthesizing {args.top} ({cfg.fmt}, nr={cfg.nr}, {cfg.mem_a_words}+{cfg.mem_b_words} words SRAM) "
          f"for {args.target} with Yosys (a PE takes about a minute, a 4x4 core several) ...", file=sys.stderr)
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
        atomic_write(args.json, json.dumps(res, indent=2) + "\n", make_parents=False)
        print(f"wrote {args.json}", file=sys.stderr)
    if err is not None:
        raise err
    return 0


def _check_out_dir(path: str | None, option: str) -> None:
    """A build directory to create (or reuse): its parent must exist, and it must not be a file."""
    if path is None:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {p}: exists and is not a directory")
    if not p.exists() and not p.parent.is_dir():
        raise UsageError(f"{option} {p}: directory {p.parent} does not exist")


def _log(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def _cmd_build(args) -> int:
    from rtl.fpga import build, format_build, get_platform

    cfg = config_from_arg(args.config)
    try:
        get_platform(args.board)                    # an unknown board fails before any work
    except InputError as e:
        raise UsageError(f"--board: {e}") from None
    _check_out_dir(args.out, "--out")
    if args.top == "pe" and not args.floorplan:
        raise UsageError("--no-floorplan applies to --top core (a PE's block RAMs are not floorplanned)")
    _log(f"building a bitstream for {args.board}: {build_duration(args.top, cfg.nr)} "
         f"(Yosys, then nextpnr; steps are reported as they finish)")
    summary = build(cfg, args.board, out_dir=args.out, clock_mhz=args.clock_mhz, baud=args.baud,
                    seed=args.seed, dff=not args.no_dff, widelut=not args.no_widelut, router=args.router,
                    nextpnr_extra=args.nextpnr_opt or (), top=args.top, floorplan=args.floorplan,
                    timeout_s=args.timeout_min * 60, log=_log)
    print(format_build(summary))
    _log(f"wrote {summary['dir']}/summary.json")
    return 0


def _cmd_pnr(args) -> int:
    from rtl.fpga import format_build, reroute, reroute_source

    src = input_path(args.build_dir, "build directory", directory=True)
    _check_out_dir(args.out, "--out")
    reroute_source(src, Path(args.out))
    _log("placing and routing again with nextpnr (a 4x4 core takes 20-40 minutes)")
    summary = reroute(args.build_dir, args.out, seed=args.seed, router=args.router,
                      nextpnr_extra=args.nextpnr_opt, constrain_mhz=args.constrain_mhz,
                      timeout_s=args.timeout_min * 60, log=_log)
    print(format_build(summary))
    _log(f"wrote {summary['dir']}/summary.json")
    return 0


def _cmd_timing(args) -> int:
    from arch.files import atomic_write
    from rtl.endpoints import endpoint_report, format_endpoint_report

    input_path(args.build_dir, "build directory", directory=True)
    check_outputs(args, "json")
    rep = endpoint_report(args.build_dir, mhz=args.mhz, depth=args.depth)
    print(format_endpoint_report(rep, top=args.top))
    if args.json:
        atomic_write(Path(args.json), json.dumps(rep, indent=1) + "\n", make_parents=False)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _add_timeout(p) -> None:
    p.add_argument("--timeout-min", type=positive_float, default=240,
                   help="stop a tool (Yosys, nextpnr, ecppack) that runs longer than this many minutes, "
                        "an error (default 240; nextpnr's --tmg-ripup may not stop by itself when a few "
                        "connections cannot meet the target)")


def add_parsers(sub, cfg_help: str) -> None:
    """The hardware subcommands' parsers (``sub``: argparse subparsers)."""
    from rtl.fpga_boards import DEFAULT_BOARD
    from rtl.tops import TOPS

    p = sub.add_parser("info", help="print architecture parameters")
    p.add_argument("--config", help=cfg_help)
    p.add_argument("--json", action="store_true", help="print JSON")
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
    p.add_argument("--clock-mhz", type=positive_float, default=None,
                   help="core clock from a PLL (default: the board oscillator, 25 MHz on the ULX3S)")
    p.add_argument("--baud", type=count, default=115200, help="UART rate (default 115200)")
    p.add_argument("--seed", type=nonneg_int, default=1, help="nextpnr placement seed")
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
    p.add_argument("--seed", type=nonneg_int, default=None, help="nextpnr placement seed (default: the build's)")
    p.add_argument("--router", choices=("router1", "router2"), default=None,
                   help="nextpnr router (default: the build's)")
    p.add_argument("--nextpnr-opt", action="append", metavar="ARG", default=None,
                   help="one more nextpnr-ecp5 argument, repeatable (default: the build's own extra "
                        "arguments; given, they replace them)")
    p.add_argument("--constrain-mhz", type=positive_float, default=None,
                   help="timing target for nextpnr on the core clock (the design and its clock are unchanged; "
                        "e.g. above the achieved Fmax, for --nextpnr-opt=--tmg-ripup)")
    _add_timeout(p)
    p.set_defaults(fn=_cmd_pnr)

    p = sub.add_parser("timing", help="late register inputs of a routed build, grouped by design unit "
                                      "(needs --nextpnr-opt=--detailed-timing-report)")
    p.add_argument("build_dir", help="directory of a finished `caterpillar build`")
    p.add_argument("--mhz", type=positive_float, default=100.0, help="clock to check against (default 100)")
    p.add_argument("--depth", type=count, default=2, help="hierarchy levels of a unit (default 2)")
    p.add_argument("--top", type=count, default=30, help="units shown (default 30)")
    p.add_argument("--json", help="also save the analysis as JSON")
    p.set_defaults(fn=_cmd_timing)
