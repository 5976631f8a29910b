"""FPGA flow: device capacities, fit checks, tool discovery, and bitstream builds of a core
on amaranth-boards platforms with the YoWASP (or system) Yosys / nextpnr / ecppack.

``build(cfg, board)`` elaborates :class:`rtl.board.BoardTop` (a core behind a UART
bridge) for an amaranth-boards ECP5 platform, runs Yosys, checks the synthesized design
against the device (a clear :class:`FitError` naming the resource and the overflow),
runs nextpnr (``--report``: utilization and achieved Fmax) and ecppack, and writes
``<out>/summary.json`` next to ``top.bit``. ``docs/fpga.md`` describes the flow.

This module holds the build and reroute steps; the parts they use, all importable from
here as well, are the device tables and fit checks (:mod:`rtl.fpga_devices`), the tools
and how they run (:mod:`rtl.fpga_tools`), the boards (:mod:`rtl.fpga_boards`), what the
build adds to the netlist (:mod:`rtl.fpga_netlist`), the nextpnr options
(:mod:`rtl.fpga_nextpnr`) and the parsing of nextpnr's results (:mod:`rtl.fpga_reports`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from rtl.fpga_boards import DEFAULT_BOARD, _device_of, board_commands, boards, get_platform, nextpnr_command
from rtl.fpga_devices import DEVICES, FitError, check_fit, default_device, fit_report, fpga_resources
from rtl.fpga_netlist import global_net, keep_enable_copies, keep_pe_ffs, sram_reads_collision_free
from rtl.fpga_nextpnr import (NEXTPNR_OUTPUT_ONLY, _device_args, check_nextpnr_extra, nextpnr_options,
                              nextpnr_result_options)
from rtl.fpga_reports import (_nextpnr_overflow, format_build, parse_critical_paths, parse_nextpnr_log,
                              parse_nextpnr_report, short_cell)
from rtl.fpga_tools import (BuildError, ToolMissing, _read, _run, _script_cmds, find_tool, setup_tool_env,
                            tool_versions)
from arch.errors import InputError

__all__ = ["DEFAULT_BOARD", "DEVICES", "FitError", "ToolMissing", "BuildError", "fpga_resources", "check_fit", "fit_report",
           "find_tool", "setup_tool_env", "tool_versions", "boards", "get_platform", "build", "default_device",
           "parse_critical_paths", "short_cell", "reroute", "reroute_source", "board_commands",
           "nextpnr_command", "core_clock_net", "NEXTPNR_OUTPUT_ONLY", "nextpnr_result_options", "global_net",
           "format_build", "parse_nextpnr_log"]


def build(cfg, board: str = DEFAULT_BOARD, *, out_dir: Path | str | None = None, clock_mhz: float | None = None,
          baud: int = 115200, seed: int = 1, timing_allow_fail: bool = True, fit_check: bool = True,
          dff: bool = True, place: bool = True, router: str | None = None, timeout_s: float = 4 * 3600,
          pe_ff_copies: bool = True, nextpnr_extra=(), top: str = "core", floorplan: bool = True,
          widelut: bool = True, log=print) -> dict:
    """Build a bitstream of a core behind a UART bridge for ``board`` (``top="pe"``: one
    PE in its scan harness, :class:`rtl.pe_harness.PEHarness`, for a PE's own Fmax).

    Returns the summary (also written to ``<out_dir>/summary.json``): configuration,
    board, device, post-synthesis resources and fit, nextpnr utilization and Fmax, clock,
    step times, paths. Raises :class:`FitError`, :class:`ToolMissing`, :class:`BuildError`.

    Synthesis is ``synth_ecp5 -dff``: YoWASP Yosys 0.70's ``synth_ecp5`` (a wrapper of
    ``synth_lattice``) always maps with ABC9, and ``-dff`` hands it the flip-flops too
    (it sometimes exits silently on small designs without it). On a flattened 4 x 4 core
    ABC9 with ``-dff`` runs out of WebAssembly call stack ("wasm trap: call stack
    exhausted"); the build then retries with plain ``synth_ecp5`` (ABC9 without ``-dff``)
    by itself. ``dff=False`` uses plain ``synth_ecp5`` from the start. ``widelut=False``
    adds ``-nowidelut``: ABC9 maps to LUT4s only, without the slice muxes (PFUMX,
    L6MUX21) that make LUT5 / LUT6 out of two or four LUT4s (fewer LUT4s, more levels).
    (``-noabc9``,
    which older builds passed here, is not an option of that Yosys: it is
    ignored, and those builds mapped with ABC9 without ``-dff`` too.)
    ``place=False`` stops after synthesis and the fit check. ``router``: nextpnr's
    ``--router`` (``router1``, its default, or ``router2``). ``pe_ff_copies``: mark the
    flip-flops of each PE module ``keep`` before synthesis (:func:`keep_pe_ffs`), so
    that Yosys does not merge the PEs' identical operand-stage registers into one copy
    driving every PE across the die (the same logic, more flip-flops).
    ``nextpnr_extra``: more nextpnr-ecp5 arguments (e.g. ``["--router2-alt-weights",
    "--placer-heap-beta", "0.8"]``), checked by :func:`check_nextpnr_extra` and saved in
    the summary; the ones the build sets itself are refused. ``floorplan`` (cores only):
    place each PE's block RAMs on adjacent sites, the PE array's shape kept on the die
    (:mod:`rtl.floorplan`); the summary's ``floorplan`` says what was placed, or why not.
    """
    from rtl.board import BoardTop
    from arch.files import atomic_write
    from arch.files import ROOT

    nextpnr_extra = check_nextpnr_extra(nextpnr_extra)   # bad arguments fail before any work
    nextpnr_opts = nextpnr_options(seed, timing_allow_fail, router, nextpnr_extra)
    platform = get_platform(board)
    device = _device_of(platform)
    env = setup_tool_env()
    if out_dir is None:
        out_dir = ROOT / "build" / "fpga" / (f"{board}-{cfg.fmt.name}-pe" if top == "pe" else
                                             f"{board}-{cfg.fmt.name}-nr{cfg.nr}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    what = (f"a {cfg.fmt.name} PE in its scan harness" if top == "pe" else
            f"a {cfg.nr}x{cfg.nr} {cfg.fmt.name} core + UART bridge")
    design = BoardTop(cfg, top=top, baud=baud, clock_hz=clock_mhz * 1e6 if clock_mhz else None)
    log(f"elaborating {what} for {board} ({device}) ...")
    t0 = time.perf_counter()
    synth_opts = " ".join(o for o, on in (("-dff", dff), ("-nowidelut", not widelut)) if on)
    plan = platform.build(design, name="top", do_build=False, synth_opts=synth_opts,
                          script_after_synth="tee -q -o top.stat.json stat -json",
                          nextpnr_opts=nextpnr_opts)
    plan.extract(out)
    after_read = []
    if pe_ff_copies:
        after_read += [keep_pe_ffs(plan.files["top.il"]), keep_enable_copies(plan.files["top.il"])]
    after_read.append(sram_reads_collision_free(plan.files["top.il"], pe=cfg.exec_stage))
    ys = (out / "top.ys").read_text()
    (out / "top.ys").write_text(ys.replace("# (script_after_read placeholder)", "\n".join(after_read), 1))
    t_elab = time.perf_counter() - t0
    cmds = _script_cmds(plan.files["build_top.sh"])
    logf = out / "build.log"
    logf.write_text("")
    times = {"elaborate_s": round(t_elab, 1)}
    summary = {"board": board, "device": device, "top": top, "config": cfg.to_dict(),
               "router": router or "router1",
               "seed": int(seed), "nextpnr_extra": list(nextpnr_extra), "widelut": bool(widelut),
               "clock_mhz": round(design.clock_hz / 1e6, 3), "baud": baud, "pll": design.pll,
               "dir": str(out), "bitstream": None, "tools": tool_versions(env)}

    log(f"yosys synth_ecp5{(' ' + synth_opts) if synth_opts else ''} (log {out / 'top.rpt'}) ...")
    try:
        times["yosys_s"] = round(_run([env["YOSYS"]] + cmds["YOSYS"], out, env, logf, "yosys", timeout_s), 1)
    except BuildError as e:
        if not (dff and "call stack exhausted" in str(e) + _read(logf)):
            raise
        log("yosys: ABC9 ran out of WebAssembly call stack; retrying with synth_ecp5 without -dff ...")
        ys = (out / "top.ys").read_text()
        (out / "top.ys").write_text(ys.replace("synth_ecp5 -dff", "synth_ecp5", 1))
        logf.write_text("")
        dff = False
        times["yosys_s"] = round(_run([env["YOSYS"]] + cmds["YOSYS"], out, env, logf, "yosys", timeout_s), 1)
    summary["abc9_dff"] = dff   # ABC9 mapped the flip-flops too (synth_ecp5 -dff)
    from rtl.synth import _summarize

    stat = json.loads((out / "top.stat.json").read_text())
    synth = _summarize(stat, "top", "ecp5")
    res = fpga_resources(synth)
    summary["synth"] = {"cells": synth["cells"], "resources": res}
    if device in DEVICES:
        summary["synth"]["fit"] = fit_report(res, device)
        if fit_check:
            try:
                check_fit(res, device)
            except FitError:
                summary["error"] = "does not fit (synthesis)"
                atomic_write(out / "summary.json", json.dumps(summary, indent=2) + "\n")
                raise
    if not place:
        summary["times"] = times
        atomic_write(out / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary
    if floorplan and top == "core":
        summary["floorplan"] = _floorplan(out, cfg.nr, device, cmds["NEXTPNR_ECP5"], env, log)
    elif top == "core":
        summary["floorplan"] = {"pe_rams": 0, "reason": NO_FLOORPLAN}
    return _place_route_pack(out, cmds, env, summary, times, device, timeout_s, log)


def _place_route_pack(out: Path, cmds: dict[str, list[str]], env: dict, summary: dict, times: dict,
                      device: str, timeout_s: float, log) -> dict:
    """Run nextpnr-ecp5 and ecppack (``cmds``) in ``out`` on its ``top.json``, complete
    ``summary`` with nextpnr's utilization, Fmax and critical paths, the step times and the
    bitstream, write it to ``out/summary.json`` and return it (shared by :func:`build` and
    :func:`reroute`)."""
    from arch.files import atomic_write

    log(f"nextpnr-ecp5 place and route (log {out / 'top.tim'}) ...")
    logf = out / "build.log"
    try:
        times["nextpnr_s"] = round(_run([env["NEXTPNR_ECP5"]] + cmds["NEXTPNR_ECP5"], out, env, logf,
                                        "nextpnr-ecp5", timeout_s), 1)
    except BuildError:
        over = _nextpnr_overflow(_read(out / "top.tim") + _read(logf))
        summary["error"] = "nextpnr failed"
        summary["times"] = times
        atomic_write(out / "summary.json", json.dumps(summary, indent=2) + "\n")
        if over:
            raise FitError(device, over, "packing (nextpnr)") from None
        raise
    summary["nextpnr"] = parse_nextpnr_report(out / "top.report.json")
    summary["nextpnr"]["critical_paths"] = parse_critical_paths(_read(out / "top.tim"))
    log("ecppack ...")
    times["ecppack_s"] = round(_run([env["ECPPACK"]] + cmds["ECPPACK"], out, env, logf, "ecppack", timeout_s), 1)
    summary["times"] = times
    summary["bitstream"] = str(out / "top.bit")
    fm = summary["nextpnr"]["fmax"]
    summary["fmax_mhz"] = min((v["achieved_mhz"] for v in fm.values()), default=None)
    summary["timing_met"] = all(v["achieved_mhz"] >= v["constraint_mhz"] for v in fm.values())
    atomic_write(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def core_clock_net(netlist: dict) -> str:
    """The name of the net the PLL (the top module's one ``EHXPLLL`` cell) drives from
    ``CLKOP`` in a Yosys JSON ``netlist``: the core clock of a :func:`build` with a
    ``clock_mhz``. Raises ``ValueError`` if there is no such PLL or net."""
    top = next((m for m in netlist["modules"].values() if "top" in m.get("attributes", {})), None)
    plls = [c for c in (top or {}).get("cells", {}).values() if c["type"] == "EHXPLLL"]
    if len(plls) != 1:
        raise InputError(f"the netlist's top module has {len(plls)} EHXPLLL cells, not one")
    bits = plls[0]["connections"].get("CLKOP")
    names = [n for n, v in top["netnames"].items() if v["bits"] == bits and not n.startswith("$")]
    if not names:
        raise InputError("no named net on the PLL's CLKOP output")
    return min(names, key=len)


def reroute_source(src: Path, out: Path) -> dict:
    """The summary of a finished build that :func:`reroute` can place and route again
    into ``out``; raises :class:`InputError` for anything else (checked before any work)."""
    try:
        s = json.loads((src / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{src}: not a build directory (summary.json: {e})") from None
    if not isinstance(s, dict) or "synth" not in s or not (src / "top.json").exists() \
            or not (src / "top.lpf").exists():
        raise InputError(f"{src}: the build has no synthesized netlist (top.json, top.lpf)")
    if s.get("error", "").startswith("does not fit"):
        raise InputError(f"{src}: the design does not fit the device ({s['error']})")
    if out.resolve() == src.resolve():
        raise InputError("the output directory must differ from the build it reroutes")
    return s


def reroute(src_dir: Path | str, out_dir: Path | str, *, seed: int | None = None, router: str | None = None,
            nextpnr_extra=None, constrain_mhz: float | None = None, timeout_s: float = 4 * 3600,
            log=print) -> dict:
    """Place and route the synthesized netlist of a finished :func:`build` again in
    ``out_dir``, without synthesis: another nextpnr ``seed``, ``router`` or
    ``nextpnr_extra`` options (each defaults to the build's own), and a bitstream.

    The netlist (``top.json``, with the build's floorplan in its ``BEL`` attributes) and
    the constraints are copied, so only placement and routing differ: the way to tell a
    seed's spread from a change, and to try nextpnr options on one synthesis (a synthesis
    alone moves a 4 x 4 core's clock by a few MHz, docs/fpga-timing.md). ``constrain_mhz`` sets
    the timing target nextpnr works to on the PLL's core clock (an LPF ``FREQUENCY NET``
    line on the PLL's output net after the build's, which nextpnr puts above the build's
    line and above the constraint it derives from the PLL) without
    changing the design: the bitstream still runs at the build's clock (the PLL and the
    UART's divider are in the netlist). It needs a build with ``clock_mhz``. The summary
    (``out_dir/summary.json``) is the build's with nextpnr's results replaced and
    ``rerouted_from`` naming the source. Raises ``ValueError`` for a source that is not a
    finished synthesis, or for ``out_dir`` equal to it, :class:`ToolMissing` and
    :class:`BuildError` as :func:`build`."""
    from arch.files import atomic_write

    src, out = Path(src_dir), Path(out_dir)
    s = reroute_source(src, out)
    seed = s["seed"] if seed is None else int(seed)
    router = s.get("router") if router is None else router
    extra = check_nextpnr_extra(s.get("nextpnr_extra", []) if nextpnr_extra is None else nextpnr_extra)
    opts = nextpnr_options(seed, True, router, extra)
    if constrain_mhz is not None and not (constrain_mhz > 0):
        raise InputError(f"constrain_mhz must be a positive frequency, got {constrain_mhz!r}")
    platform = get_platform(s["board"])
    env = setup_tool_env()
    lpf = (src / "top.lpf").read_text()
    if constrain_mhz is not None:
        if not s.get("pll"):
            raise InputError(f"{src}: the core runs from the board's oscillator (no PLL); constrain_mhz needs a "
                             "build with a core clock (caterpillar build --clock-mhz)")
        net = core_clock_net(json.loads((src / "top.json").read_text()))
        # after the build's own line for that net, which nextpnr then overrides
        lpf = lpf.rstrip("\n") + f'\nFREQUENCY NET "{net}" {constrain_mhz:g} MHZ;\n'
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src / "top.json", out / "top.json")
    atomic_write(out / "top.lpf", lpf)
    if (src / "floorplan.json").exists():
        shutil.copyfile(src / "floorplan.json", out / "floorplan.json")
    (out / "build.log").write_text("")
    summary = {k: v for k, v in s.items() if k not in ("nextpnr", "times", "fmax_mhz", "timing_met", "bitstream",
                                                       "error", "note", "dir", "rerouted_from")}
    summary.update(seed=seed, router=router or "router1", nextpnr_extra=extra, dir=str(out), bitstream=None,
                   rerouted_from={"dir": str(src), "seed": s["seed"], "tools": s.get("tools")},
                   tools=tool_versions(env))
    if constrain_mhz is not None:
        summary["constrain_mhz"] = constrain_mhz
    cmds = board_commands(platform, opts)
    log(f"rerouting {src} (seed {seed}, {router or 'router1'}"
        f"{f', constrained to {constrain_mhz:g} MHz' if constrain_mhz else ''}) in {out}")
    return _place_route_pack(out, cmds, env, summary, {}, _device_of(platform), timeout_s, log)


#: The summary's ``floorplan`` reason of a core built with ``floorplan=False``.
NO_FLOORPLAN = "not requested (--no-floorplan)"


def _floorplan(out: Path, nr: int, device: str, nextpnr_args: list[str], env: dict, log) -> dict:
    """Apply :func:`rtl.floorplan.apply_floorplan` to ``out/top.json``; its summary (without
    the per-cell plan), or ``{"pe_rams": 0, "reason": ...}`` when the RAMs do not lay out."""
    from rtl.floorplan import FloorplanError, apply_floorplan, ebr_sites
    from arch.files import atomic_write
    from arch.files import ROOT

    dev = _device_args(nextpnr_args)
    n_ebr = DEVICES.get(device, {}).get("DP16KD")
    if not n_ebr:
        return {"pe_rams": 0, "reason": f"no block-RAM count known for {device}"}
    cache = ROOT / "build" / "fpga" / "ebr_sites" / ("_".join(a.lstrip("-") for a in dev) + ".json")
    try:
        sites = ebr_sites(env["NEXTPNR_ECP5"], dev, n_ebr, cache=cache, env=env)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"floorplan: {e}") from None
    try:
        fp = apply_floorplan(out / "top.json", nr, sites)
    except FloorplanError as e:
        log(f"floorplan: not applied ({e})")
        return {"pe_rams": 0, "reason": str(e)}
    log(f"floorplan: {fp['pe_rams']} PE block RAMs placed on block-RAM rows y = {fp['rows']}, "
        f"{fp['other_rams']} other block RAMs in the middle")
    atomic_write(out / "floorplan.json", json.dumps(fp["plan"], indent=1, sort_keys=True) + "\n")
    return {"pe_rams": fp["pe_rams"], "other_rams": fp["other_rams"], "rows": fp["rows"],
            "file": str(out / "floorplan.json")}
