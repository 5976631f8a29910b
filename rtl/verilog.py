"""Verilog of an Amaranth design, converted once per design and source tree.

:func:`write_verilog` converts a component to Verilog (``build/sim/verilog/``), reusing
an earlier conversion when a ``design_key`` and the RTL sources (:data:`RTL_PACKAGES`)
are unchanged; the cocotb harness (:mod:`sim.harness`) and the synthesis flow
(:mod:`rtl.synth`) use it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from pathlib import Path

from arch.files import ROOT, atomic_write, locked

__all__ = ["RTL_PACKAGES", "rtl_source_digest", "write_verilog", "VERILOG_DIR"]

#: converted designs (content-addressed files) and the design-key index
VERILOG_DIR = ROOT / "build" / "sim" / "verilog"


#: the packages whose Python source determines a design's Verilog (:func:`rtl_source_digest`)
RTL_PACKAGES = ("arch", "pe", "noc", "rtl")


@functools.lru_cache(maxsize=1)
def rtl_source_digest() -> str:
    """A digest of every ``.py`` file of :data:`RTL_PACKAGES` and of the Amaranth version:
    the Verilog of a design named by a ``design_key`` is reused while this is unchanged."""
    from importlib.metadata import version

    h = hashlib.sha256(f"amaranth {version('amaranth')}\n".encode())
    for pkg in RTL_PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            h.update(f"{f.relative_to(ROOT)}\n".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def write_verilog(component, name: str, path: Path | str | None = None, ports=None,
                  design_key: str | None = None, platform=None) -> tuple[str, Path]:
    """Convert an Amaranth component to Verilog; return (text, path).

    ``platform``: elaborate for it (e.g. an amaranth-boards ECP5 board: vendor
    primitives in place of some logic, :func:`sim.harness.primitive_models`); part of the key.

    ``design_key``: a string that, with the sources of :data:`RTL_PACKAGES` and the
    source file of ``component``'s class (a test's wrapper lies outside them), determines
    the design (e.g. ``cfg.to_json()`` for ``Core(cfg)``). The Verilog is then converted
    once: ``build/sim/verilog/keyed/`` maps the key to the digest of its content-addressed
    file, and later calls with the same key, name and sources read that file instead of
    converting ``component`` again (a 4-core chip takes 20-40 s to convert). Only for
    designs the key describes completely.

    A component with host streams or ring links (:class:`rtl.core.Core`,
    :class:`rtl.chip.Chip`, ...) is converted through :class:`rtl.streams.AxisTop`, so
    its Verilog ports have the AXI4-Stream names (``s_axis_tdata``, ``s_axis_tvalid``,
    ``s_axis_tready``, ``s_axis_tlast``, ``s_axis_tdest``, ``m_axis_tid``, ...) that
    cocotbext-axi and the testbenches use; no hierarchy level is added."""
    keyed = None
    if design_key is not None and path is None and ports is None:
        cls_src = inspect.getsourcefile(type(component))
        plat = "" if platform is None else f"{type(platform).__module__}.{type(platform).__qualname__}"
        h = hashlib.sha256(f"{name}\n{design_key}\n{plat}\n{rtl_source_digest()}\n".encode())
        h.update(Path(cls_src).read_bytes() if cls_src else b"")
        keyed = VERILOG_DIR / "keyed" / f"{name}-{h.hexdigest()[:16]}"
        hit = _keyed_verilog(keyed, name, component)
        if hit is not None:
            return hit
        with locked(keyed.with_name(keyed.name + ".lock")):   # one process converts, the others wait and read
            hit = _keyed_verilog(keyed, name, component)
            return hit if hit is not None else _convert(component, name, None, None, platform, keyed)
    return _convert(component, name, path, ports, platform, keyed)


def _keyed_verilog(keyed: Path, name: str, component) -> tuple[str, Path] | None:
    """The Verilog a design key maps to, if converted already."""
    if keyed.exists():
        p = VERILOG_DIR / f"{name}-{keyed.read_text().strip()}.v"
        if p.exists():
            if hasattr(component, "_MustUse__used"):   # not elaborated: no UnusedElaboratable warning
                component._MustUse__used = True
            return p.read_text(), p
    return None


def _convert(component, name: str, path, ports, platform, keyed: Path | None) -> tuple[str, Path]:
    from amaranth.back import verilog

    from rtl.streams import AxisTop, has_links

    top = AxisTop(component) if ports is None and has_links(component) else component
    text = verilog.convert(top, name=name, ports=ports, emit_src=False, platform=platform)
    if path is None:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = VERILOG_DIR / f"{name}-{digest}.v"
    p = Path(path)
    if not (p.exists() and p.read_text() == text):
        atomic_write(p, text)
    if keyed is not None:
        atomic_write(keyed, digest + "\n")
    return text, p
