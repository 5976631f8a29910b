"""FPGA device tables and fit checks: the capacities of the supported parts, the resource
classes of a synthesized design (:func:`fpga_resources`) and the comparison of the two
(:func:`check_fit`, :func:`fit_report`, :class:`FitError`).
"""

from __future__ import annotations

from arch.errors import InputError, ToolError

__all__ = ["DEVICES", "FitError", "default_device", "fpga_resources", "check_fit", "fit_report"]


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


class FitError(ToolError):
    """The design needs more of a resource than the device has."""

    def __init__(self, device: str, overflows: list[tuple[str, int, int]], where: str = "synthesis"):
        self.device = device
        self.overflows = overflows
        parts = [f"{res}: needs {need}, {device} has {have} ({need - have} over, {100.0 * need / have:.0f}%)"
                 if have else f"{res}: needs {need}, {device} has none"
                 for res, need, have in overflows]
        super().__init__(f"the design does not fit {device} (after {where}): " + "; ".join(parts))


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
        raise InputError(f"unknown device {device!r}; known: {', '.join(DEVICES)}")
    cap = DEVICES[device]
    return {r: {"used": int(resources.get(r, 0)), "available": int(n),
                "percent": round(100.0 * resources.get(r, 0) / n, 1) if n else (0.0 if not resources.get(r) else float("inf"))}
            for r, n in cap.items() if r != "family"}
