"""Append one build to the FPGA timing-experiment log (``benchmarks/results/fpga_exec_stage.json``).

Each row of that log is one ``caterpillar build`` directory: its configuration, resources,
the placer's Fmax estimate, the routed Fmax, the router and its time, the tool versions,
and the command that rebuilds it; the variant, the code (commit) and the critical path
are written by hand from the build's ``top.tim`` (``caterpillar timing DIR --mhz N``)::

    python -m benchmarks.fpga_experiment_row BUILD_DIR --variant "..." --code "main abc1234" \\
        --critical "11.86 ns (...): A -> B" --baseline "84.35 MHz (seed 1)"

A build that did not finish routing (stopped, or nextpnr failed) is refused: the log
holds routed figures only (docs/fpga.md says what did not route).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from arch.config import PRESETS
from rtl.fpga import DEFAULT_BOARD, NO_FLOORPLAN, parse_nextpnr_log
from arch.files import atomic_write
from sim.harness import ROOT

LOG = ROOT / "benchmarks" / "results" / "fpga_exec_stage.json"


def _config_arg(cfg: dict) -> dict:
    """The ``--config`` value that rebuilds ``cfg`` (a summary's configuration): preset
    ``fpga`` with its ``nr`` when that is what it is, else the whole configuration."""
    fpga = PRESETS["fpga"].replace(nr=cfg["nr"]).to_dict()
    return {"preset": "fpga", "nr": cfg["nr"]} if cfg == fpga else cfg


def row_of(build_dir: Path, variant: str, code: str, critical: str, baseline: str) -> dict:
    """The log row of a finished build directory."""
    s = json.loads((build_dir / "summary.json").read_text())
    if s.get("fmax_mhz") is None:
        raise ValueError(f"{build_dir}: no routed Fmax in summary.json ({s.get('error', 'build did not finish')})")
    tim = (build_dir / "top.tim").read_text(errors="replace")
    est = parse_nextpnr_log(tim.split("Info: Routing", 1)[0])["fmax"]   # the placer's last estimate
    cfg = s["config"]
    comb = s["nextpnr"]["utilization"]["TRELLIS_COMB"]
    opts = "".join(f" --nextpnr-opt={a}" for a in s.get("nextpnr_extra", []))
    top = "" if s.get("top", "core") == "core" else f" --top {s['top']}"
    if s.get("rerouted_from"):       # caterpillar pnr: the netlist of another build, placed and routed again
        cons = f" --constrain-mhz {s['constrain_mhz']:g}" if s.get("constrain_mhz") else ""
        command = (f"caterpillar pnr {s['rerouted_from']['dir']} --out {s['dir']} --seed {s['seed']} "
                   f"--router {s['router']}{opts}{cons}")
    else:
        board = "" if s.get("board", DEFAULT_BOARD) == DEFAULT_BOARD else f" --board {s['board']}"
        command = (f"caterpillar build{top}{board} --config '{json.dumps(_config_arg(cfg))}' --clock-mhz "
                   f"{s['clock_mhz']:g} --router {s['router']}{'' if s.get('abc9_dff', s.get('abc9')) else ' --no-dff'}"
                   f"{'' if s.get('widelut', True) else ' --no-widelut'}"
                   f"{' --no-floorplan' if (s.get('floorplan') or {}).get('reason') == NO_FLOORPLAN else ''} "
                   f"--seed {s['seed']}{opts}")
    return {
        "variant": variant, "code": code, "config": cfg,
        "LUT4 (synth)": s["synth"]["resources"]["LUT4"], "FF": s["synth"]["resources"]["FF"],
        "LUT4 % (nextpnr)": round(100 * comb["used"] / comb["available"]),
        "TRELLIS_COMB (nextpnr)": comb["used"],
        "constraint MHz": s.get("constrain_mhz") or s["clock_mhz"], "seed": s["seed"],
        "Fmax MHz (nextpnr, pre-routing estimate)": min((v["achieved_mhz"] for v in est.values()), default=None),
        "Fmax MHz (nextpnr, routed)": s["fmax_mhz"],
        "critical path": critical,
        "routing": f"{s['router']}, nextpnr {s['times']['nextpnr_s']} s", "nextpnr_s": s["times"]["nextpnr_s"],
        "baseline": baseline,
        "tools": s["tools"],
        "command": command,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", type=Path)
    ap.add_argument("--variant", required=True, help="what the build is (the RTL change it measures)")
    ap.add_argument("--code", required=True, help="branch and commit of the RTL")
    ap.add_argument("--critical", required=True, help="the critical path, from top.tim")
    ap.add_argument("--baseline", required=True, help="the row it is compared with")
    a = ap.parse_args(argv)
    try:
        row = row_of(a.build_dir, a.variant, a.code, a.critical, a.baseline)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    log = json.loads(LOG.read_text())
    log["rows"].append(row)
    atomic_write(LOG, json.dumps(log, indent=1) + "\n")
    print(f"row {len(log['rows'])} appended to {LOG.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
