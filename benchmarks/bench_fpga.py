"""FPGA resources and Fmax on the ECP5-85F (ULX3S): PE, 2 x 2 core, 4 x 4 core, binary16
and binary32.

PE rows: resources from Yosys ``synth_ecp5`` of a lone PE; Fmax from place and route of
the PE in its scan harness on the board (``caterpillar build --top pe``,
:class:`rtl.pe_harness.PEHarness`: every PE input from a flip-flop, every output into
one), at 100 MHz: the paths inside one PE, without a core around it.
Core rows: ``rtl.fpga.build`` of the core behind the UART bridge on the ULX3S-85F, core
clock from the PLL at 100 MHz (the target: nextpnr optimizes for it and reports the
achieved Fmax); a configuration that does not fit stops after synthesis with the
overflow. Builds take from minutes (2 x 2) to about an hour (4 x 4) on two cores; a
build directory ``build/fpga/bench/<row>/summary.json`` with the same configuration is
reused (delete it to rebuild). ``FPGA_BENCH_ROWS=pe-binary16,core2-binary16`` builds
only those rows and carries the others over from the existing results file. Rows
``pe-fpga``, ``core2-fpga`` and ``core4-fpga`` are preset fpga's PE, 2 x 2 and 4 x 4
core; ``core4-fpga`` (70 MHz clock, nextpnr's rip-up) is built only when named there, and so is
``core4-fpga-s8``: the preset 4 x 4 core on the fastest speed grade of the 85F (-8, the
ECP5-5G evaluation board's LFE5UM5G-85F; the ULX3S has the slowest, -6) at 100 MHz.
``pe-fpga-s8`` and ``core2-fpga-s8`` are the preset PE and 2 x 2 core on that part.
``FPGA_BENCH_SYNTH_ONLY=1`` skips place and route.
"""

from __future__ import annotations

import json
import os

from arch.config import PRESETS, ArchConfig
from rtl.fpga import (DEFAULT_BOARD, DEVICES, FitError, build, fit_report, fpga_resources, get_platform, nextpnr_result_options,
                      parse_critical_paths, parse_nextpnr_log, short_cell)
from rtl.synth import synthesize_top
from sim.harness import ROOT

BOARD = DEFAULT_BOARD
DEVICE = "LFE5U-85F"
CLOCK_MHZ = 100.0
BENCH_DIR = ROOT / "build" / "fpga" / "bench"


#: the preset fpga 4 x 4 row (the preset's pipeline stages, FP 4 / 5): routed with router2
#: (router1 stalls on every 4 x 4 core) with nextpnr's timing-driven rip-up, which reroutes
#: the connections of paths that fail the clock, at a 70 MHz core clock (the rip-up does not
#: always converge at the PLL's next step, 71.875 MHz); docs/fpga.md, "Timing", has the
#: figures. Built only when FPGA_BENCH_ROWS names it
FPGA_PRESET_CLOCK_MHZ = 70.0
#: with nextpnr seed 1, and nextpnr's per-endpoint timing (`caterpillar timing`)
FPGA_PRESET_SEED = 1
FPGA_PRESET_NEXTPNR = ("--detailed-timing-report", "--tmg-ripup")


#: every row, in table order
ALL_ROWS = [f"{k}-{f}" for f in ("binary16", "binary32") for k in ("pe", "core2", "core4")] + [
    "pe-fpga", "core2-fpga", "core4-fpga", "pe-fpga-s8", "core2-fpga-s8", "core4-fpga-s8"]

#: rows built for another board than BOARD: preset fpga's PE, 2 x 2 and 4 x 4 core on the
#: fastest speed grade of the 85F (-8; the ULX3S has the slowest, -6): Lattice's ECP5-5G
#: evaluation board, LFE5UM5G-85F-8 (the same 85k-LUT fabric and block RAMs;
#: docs/fpga.md, "Timing"). The 4 x 4 core meets its 100 MHz core clock there with the
#: rip-up.
ROW_BOARD = {n: "ecp55gevn" for n in ("pe-fpga-s8", "core2-fpga-s8", "core4-fpga-s8")}

#: rows built only when FPGA_BENCH_ROWS names them (about an hour each)
NAMED_ONLY = ("core4-fpga", "core4-fpga-s8")

#: the 2 x 2 preset fpga row: router2 at the 100 MHz target without the rip-up (which may
#: not stop by itself when a few connections cannot meet the target), seed 1
CORE2_PRESET_NEXTPNR = ("--detailed-timing-report",)

#: the nextpnr seed of row core4-fpga-s8
S8_SEED = 1

#: (core clock MHz, nextpnr seed, extra nextpnr options) of the rows that do not build with
#: the defaults (CLOCK_MHZ, seed 1, none)
ROW_BUILD = {"core4-fpga": (FPGA_PRESET_CLOCK_MHZ, FPGA_PRESET_SEED, FPGA_PRESET_NEXTPNR),
             "core2-fpga": (CLOCK_MHZ, 1, CORE2_PRESET_NEXTPNR),
             "core2-fpga-s8": (CLOCK_MHZ, 1, CORE2_PRESET_NEXTPNR),
             "core4-fpga-s8": (CLOCK_MHZ, S8_SEED, FPGA_PRESET_NEXTPNR)}


def _rows_wanted():
    sel = os.environ.get("FPGA_BENCH_ROWS")
    if not sel:
        return [n for n in ALL_ROWS if n not in NAMED_ONLY]
    return [n for n in ALL_ROWS if n in sel.split(",")]


def _board(name: str) -> str:
    return ROW_BOARD.get(name, BOARD)


def _device(name: str) -> str:
    """The FPGA part of a row's board (e.g. ``LFE5U-85F``)."""
    return get_platform(_board(name)).device.upper()


def _cfg(name: str) -> ArchConfig:
    kind, fmt = name.split("-")[:2]
    nr = 4 if kind in ("pe", "core4") else 2
    if fmt == "fpga":
        return PRESETS["fpga"].replace(nr=nr)
    return ArchConfig(fmt=fmt, nr=nr)


def _preset_stages() -> str:
    """The pipeline stages of preset fpga, in words (e.g. "execute, bus and fetch")."""
    names = {"exec_stage": "execute", "bus_stage": "bus", "rx_stage": "receive", "read_stage": "read",
             "dist_stage": "distribution", "fan_stage": "second distribution", "fetch_stage": "fetch",
             "addr_stage": "address"}
    on = [v for k, v in names.items() if getattr(PRESETS["fpga"], k)]
    return ", ".join(on[:-1]) + " and " + on[-1] if len(on) > 1 else "".join(on)


def _clock(name: str) -> float:
    return ROW_BUILD.get(name, (CLOCK_MHZ,))[0]


def _crit(out, s) -> str:
    """The slowest critical path of a build directory's nextpnr log, one line."""
    if not ((out / "top.tim").exists() and "fmax_mhz" in s):
        return ""
    paths = parse_critical_paths((out / "top.tim").read_text(errors="replace"))
    if not paths:
        return ""
    c = max(paths.values(), key=lambda c: c["ns"])
    return (f"{c['ns']} ns ({c['lut_levels']} logic levels, {c['routing_ns']} ns routing): "
            f"{short_cell(c['from'])} -> {short_cell(c['to'])}")


def _pe_row(name: str) -> dict:
    cfg = _cfg(name)
    res = fpga_resources(synthesize_top("pe", cfg, "ecp5"))
    fit = fit_report(res, _device(name))
    row = {"design": _design(name)[0], "format": cfg.fmt.name, "LUT4": res["LUT4"], "FF": res["FF"],
           "DP16KD": res["DP16KD"], "MULT18X18D": res["MULT18X18D"],
           "LUT RAM (DPR16X4)": res["LUTRAM (DPR16X4)"],
           "fits 85F": "yes" if all(x["used"] <= x["available"] for x in fit.values()) else "no",
           "LUT4 % (nextpnr)": "", "Fmax MHz (nextpnr)": "", "critical path": "", "source": "synth",
           "constraint MHz": ""}
    if os.environ.get("FPGA_BENCH_SYNTH_ONLY"):
        return row
    s = _built(name, cfg, top="pe")
    row.update({"Fmax MHz (nextpnr)": s.get("fmax_mhz"), "critical path": _crit(BENCH_DIR / name, s),
                "source": "synth (resources); place and route of the PE in its scan harness (Fmax)",
                "constraint MHz": _clock(name)})
    return row


def _built(name: str, cfg, top: str = "core") -> dict:
    """The build summary of row ``name``: reused from its build directory when that has
    the same configuration and top, else built (may raise FitError)."""
    out = BENCH_DIR / name
    sj = out / "summary.json"
    s = json.loads(sj.read_text()) if sj.exists() else None
    _, seed, extra = ROW_BUILD.get(name, (CLOCK_MHZ, 1, ()))
    extra = list(extra)
    # a core placed before the floorplan (rtl/floorplan.py, on by default) is rebuilt,
    # and so is a build at another clock request, seed or nextpnr options (options that
    # only write more files, e.g. --write routed.json, do not count)
    if (s is not None and s.get("config") == cfg.to_dict() and "synth" in s and s.get("top", "core") == top
            and s.get("seed", 1) == seed and abs(s.get("clock_mhz", 0) - _clock(name)) < 1
            and nextpnr_result_options(s.get("nextpnr_extra", [])) == extra
            and (top == "pe" or "floorplan" in s or "nextpnr" not in s)):
        return s
    # ABC9 without -dff (plain synth_ecp5; Yosys 0.70 always maps with ABC9): -dff
    # overflows YoWASP's stack on a 4 x 4 core and takes minutes on a 2 x 2; one
    # mapping for every row
    # router2: router1 had not resolved the congestion of a 4 x 4 core after 25 min,
    # nor of a 2 x 2 binary32 core after 18 min; one router for every core row
    # (router1 for a lone PE, which it routes in a few minutes)
    return build(cfg, _board(name), out_dir=out, clock_mhz=_clock(name), dff=False, top=top,
                 router="router1" if top == "pe" else "router2",
                 seed=seed, nextpnr_extra=extra,
                 place=not os.environ.get("FPGA_BENCH_SYNTH_ONLY"),
                 log=lambda m: print(f"[{name}] {m}", flush=True))


def _core_row(name: str) -> dict:
    cfg = _cfg(name)
    out = BENCH_DIR / name
    sj = out / "summary.json"
    try:
        s = _built(name, cfg)
    except FitError:
        s = json.loads(sj.read_text())
    res = s["synth"]["resources"]
    fit = s["synth"].get("fit") or fit_report(res, _device(name))
    source = "place and route"
    if "nextpnr" not in s and (out / "top.partial.tim").exists():
        # place and route stopped during routing: packing utilization and the placer's
        # pre-routing Fmax estimate
        s = dict(s, nextpnr=parse_nextpnr_log((out / "top.partial.tim").read_text()))
        fm = s["nextpnr"]["fmax"]
        s["fmax_mhz"] = min((v["achieved_mhz"] for v in fm.values()), default=None)
        source = "placement (pre-routing estimate; routing not finished)"
        s.pop("error", None)
    fits = all(x["used"] <= x["available"] for x in fit.values()) and "error" not in s
    util = s.get("nextpnr", {}).get("utilization", {})
    comb = util.get("TRELLIS_COMB")
    crit = _crit(out, s)
    over = [f"{r} +{v['used'] - v['available']}" for r, v in fit.items() if v["used"] > v["available"]]
    return {"design": _design(name)[0], "format": cfg.fmt.name, "LUT4": res["LUT4"], "FF": res["FF"],
            "DP16KD": res["DP16KD"], "MULT18X18D": res["MULT18X18D"],
            "LUT RAM (DPR16X4)": res["LUTRAM (DPR16X4)"],
            "fits 85F": "yes" if fits else ("no: " + ", ".join(over) if over else "no"),
            "LUT4 % (nextpnr)": f"{100.0 * comb['used'] / comb['available']:.0f}" if comb else "",
            "Fmax MHz (nextpnr)": s.get("fmax_mhz") if s.get("fmax_mhz") is not None else "",
            "critical path": crit, "source": source if util else "synth",
            "constraint MHz": s.get("clock_mhz", _clock(name)) if util else ""}


def _design(name: str) -> tuple:
    """(design, format) of a row, as its table shows them."""
    cfg = _cfg(name)
    preset = " (preset fpga)" if "-fpga" in name else ""
    part = f", {_device(name)}-{get_platform(_board(name)).speed} ({_board(name)})" if name in ROW_BOARD else ""
    if name.startswith("pe"):
        return "PE" + preset + part, cfg.fmt.name
    return f"{cfg.nr}x{cfg.nr} core{preset}{part}", cfg.fmt.name


def run() -> dict:
    """Every row; the rows not built (those ``FPGA_BENCH_ROWS`` does not name, and by
    default the hour-long preset 4 x 4 rows) are carried over from the existing
    ``benchmarks/results/fpga.json`` (marked in their ``source``), so one row can be
    re-measured without hours of rebuilding the rest."""
    from benchmarks.run import RESULTS

    wanted = _rows_wanted()
    old = {}
    prev = RESULTS / "fpga.json"
    if prev.exists():
        p = json.loads(prev.read_text())
        old = {(r["design"], r["format"]): dict(r, source=r["source"] if "carried over" in r["source"] else
                                                f"{r['source']} (carried over from the previous results of {p.get('date', '?')})")
               for r in p["rows"]}
        for r in old.values():
            r.setdefault("constraint MHz", CLOCK_MHZ if r.get("Fmax MHz (nextpnr)") not in ("", None) else "")
    rows = []
    for name in ALL_ROWS:
        if name in wanted:
            rows.append(_pe_row(name) if name.startswith("pe") else _core_row(name))
        elif _design(name) in old:
            rows.append(old[_design(name)])
    return {
        "title": f"FPGA resources and Fmax on the ECP5-85F ({BOARD})",
        "note": (f"Default configuration (16 KB SRAM per PE, 16 registers, mul/add latency 2/3) except nr. "
                 f"LUT4 = post-synthesis LUT4 + 2 per CCU2C carry + 6 per DPR16X4 LUT RAM (Yosys synth_ecp5 -dff for PEs, "
                 f"plain synth_ecp5 for cores: ABC9 without -dff); LUT4 % = nextpnr's TRELLIS_COMB after packing (a few % above the estimate); "
                 f"the {DEVICE} has {DEVICES[DEVICE]['LUT4']} LUT4, {DEVICES[DEVICE]['DP16KD']} DP16KD, "
                 f"{DEVICES[DEVICE]['MULT18X18D']} MULT18X18D. Cores include the UART bridge and board glue, "
                 f"each PE's flip-flops kept (no merge across PEs, rtl.fpga.keep_pe_ffs), their block RAMs "
                 f"floorplanned (rtl/floorplan.py); nextpnr-ecp5 "
                 f"(router2, seed 1) with the core clock constrained to {CLOCK_MHZ:g} MHz (PLL), "
                 f"Fmax = achieved. PE rows: resources from synthesis of the lone PE, Fmax from place and route "
                 f"of the PE in its scan harness (caterpillar build --top pe, router1). Rows 'preset fpga': "
                 f"the {_preset_stages()} stages and FP latencies "
                 f"{PRESETS['fpga'].mul_latency} / {PRESETS['fpga'].add_latency} (docs/fpga.md, Timing); "
                 f"the 2x2 core with nextpnr option {' '.join(CORE2_PRESET_NEXTPNR)}; the 4x4 core (the "
                 f"default 4 x 4 binary16 core's preset) routed at a {FPGA_PRESET_CLOCK_MHZ:g} MHz core clock "
                 f"with nextpnr options {' '.join(FPGA_PRESET_NEXTPNR)}, seed {FPGA_PRESET_SEED}, and built "
                 f"only with FPGA_BENCH_ROWS=core4-fpga (docs/fpga.md). Row core4-fpga-s8: the same core on "
                 f"the 85F's fastest speed grade (the board {ROW_BOARD['core4-fpga-s8']}, "
                 f"{_device('core4-fpga-s8')}-{get_platform(ROW_BOARD['core4-fpga-s8']).speed}; the ULX3S's part is "
                 f"speed grade {get_platform(BOARD).speed}) at a {_clock('core4-fpga-s8'):g} MHz core clock, "
                 f"the same nextpnr options, seed {S8_SEED}, built only with FPGA_BENCH_ROWS=core4-fpga-s8; "
                 f"rows pe-fpga-s8 and core2-fpga-s8: the preset PE and 2x2 core on that part, as on the ULX3S."),
        "rows": rows,
    }
