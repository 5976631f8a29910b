"""The ``caterpillar`` command line.

Subcommands::

    caterpillar info    [--config C]                      architecture parameters
    caterpillar verilog [--config C] [--top pe] -o FILE   Verilog for FPGA/ASIC flows
    caterpillar synth   [--config C] [--top pe] --target ecp5|ice40|generic [--json FILE]
    caterpillar demo    [--sim icarus|verilator]          the main job (``make demo``)

``--config`` takes a preset name (``default``, ``tiny``, ``small``), a JSON file, or
inline JSON such as ``'{"fmt": "binary32", "nr": 2}'``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rtl.config import ConfigError, PRESETS, config_from_arg
from rtl.tops import TOPS

__all__ = ["main"]


def _cmd_info(args) -> int:
    cfg = config_from_arg(args.config)
    d = cfg.to_dict()
    d.update(n_pes=cfg.n_pes, addr_bits=cfg.addr_bits, fpu_latency=cfg.fpu_latency,
             acc_reuse_distance=cfg.acc_reuse_distance, pe_sram_bytes=cfg.pe_sram_bytes)
    if args.json:
        print(json.dumps(d, indent=2, sort_keys=True))
    else:
        for k, v in d.items():
            print(f"{k:<20} {v}")
    return 0


def _cmd_verilog(args) -> int:
    from sim.harness import atomic_write
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
    from rtl.synth import format_table, synthesize
    from rtl.tops import build_top
    from sim.harness import ROOT, atomic_write, write_verilog

    cfg = config_from_arg(args.config)
    comp, name = build_top(args.top, cfg)
    _, vpath = write_verilog(comp, name)
    print(f"synthesizing {args.top} ({cfg.fmt}, {cfg.mem_a_words}+{cfg.mem_b_words} words SRAM) "
          f"for {args.target} with Yosys ...", file=sys.stderr)
    res = synthesize(vpath, name, args.target, log=ROOT / "build" / "synth" / f"{name}-{args.target}.log")
    res["config"] = cfg.to_dict()
    res["design"] = args.top
    print(format_table(res))
    if args.json:
        atomic_write(args.json, json.dumps(res, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _cmd_demo(args) -> int:
    from sim.demo import run_demo

    return run_demo(sim=args.sim)


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
    p.add_argument("--json", help="also save the result as JSON")
    p.set_defaults(fn=_cmd_synth)

    p = sub.add_parser("demo", help="the main job: PE Verilog, a PE program under cocotb vs numpy, synthesis")
    p.add_argument("--sim", default=None, choices=("icarus", "verilator"))
    p.set_defaults(fn=_cmd_demo)

    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except ConfigError as e:
        print(f"caterpillar: configuration error: {e}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError, OSError) as e:
        print(f"caterpillar {args.cmd}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
