"""The amaranth-boards ECP5 platforms the FPGA flow builds for: their names, the default
board, a platform's device, and the tool command lines Amaranth writes for a board.
"""

from __future__ import annotations

from rtl.fpga_tools import _script_cmds
from arch.errors import InputError

__all__ = ["DEFAULT_BOARD", "boards", "get_platform", "board_commands", "nextpnr_command"]


#: The board `caterpillar build` and :func:`build` target unless told otherwise.
DEFAULT_BOARD = "ulx3s-85f"


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
        raise InputError(f"unknown board {board!r}; ECP5 boards of amaranth-boards: {', '.join(bs)}")
    return bs[key]()


def _device_of(platform) -> str:
    return platform.device.upper()


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
