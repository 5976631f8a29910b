"""The packages' one-way layers (pyproject.toml, ``[tool.importlinter]``): ``arch`` <
``pe`` < ``noc`` < ``rtl`` < ``sw`` < ``sim`` < ``cli``, and the compiler (``sw``) imports
with Amaranth, the simulators and the RTL made unimportable."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = """
import importlib, importlib.abc, pkgutil, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked")
sys.meta_path.insert(0, Block())
import {pkg}
for m in pkgutil.walk_packages({pkg}.__path__, "{pkg}."):
    importlib.import_module(m.name)
print("ok")
"""


def test_import_contracts_hold():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("lint-imports (import-linter) is not installed in this environment: run `make test`")
    r = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


@pytest.mark.parametrize("pkg,blocked", [
    ("sw", ("amaranth", "cocotb", "cocotb_tools", "cocotbext", "rtl", "noc", "sim", "cli")),
    ("arch", ("amaranth", "cocotb", "cocotb_tools", "cocotbext", "pe", "noc", "rtl", "sw", "sim", "cli")),
])
def test_package_imports_without_the_layers_above(pkg, blocked):
    """Every module of the package imports in a fresh interpreter in which the blocked
    packages cannot be imported."""
    r = subprocess.run([sys.executable, "-c", BLOCKER.format(pkg=pkg, blocked=blocked)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_the_blocker_blocks():
    """The check above fails for a package that does need Amaranth."""
    r = subprocess.run([sys.executable, "-c", BLOCKER.format(pkg="noc", blocked=("amaranth",))], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "amaranth" in r.stderr
