"""nextpnr-ecp5 command lines of the FPGA flow: the options a build sets, the extra
arguments it accepts, the ones that change no result, and the device options of a
command line.
"""

from __future__ import annotations

import re
import shlex
from arch.errors import InputError

__all__ = ["check_nextpnr_extra", "NEXTPNR_OUTPUT_ONLY", "nextpnr_result_options", "nextpnr_options"]


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
        raise InputError("nextpnr_extra must be a list of arguments, not one string")
    for a in args:
        if not isinstance(a, (str, int, float)):
            raise InputError(f"nextpnr argument {a!r} is not a string")
    out = [str(a) for a in args]
    if out and not out[0].startswith("-"):
        raise InputError(f"nextpnr arguments must start with an option, got {out[0]!r}")
    for a in out:
        opt = a.split("=", 1)[0]
        if opt in _NEXTPNR_OWN:
            raise InputError(f"nextpnr argument {opt} is set by the build itself; "
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
            raise InputError(f"router must be router1 or router2, got {router!r}")
        opts += f" --router {router}"
    extra = check_nextpnr_extra(extra)
    if extra:
        opts += " " + " ".join(shlex.quote(a) for a in extra)
    return opts


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
