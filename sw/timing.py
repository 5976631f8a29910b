"""Which PE timing the compilers schedule for.

The kernel, collective and training compilers place every read of a move result, an SRAM
write or an FMA result at the hazard distances of the default PE timing (a move result is
read by the next micro-op, an SRAM write by the read two micro-ops later). With
:attr:`rtl.config.ArchConfig.exec_stage` those distances grow by one (``docs/architecture.md``,
"Pipeline timing and hazards"), and the schedules are not yet rebuilt for them: the
compilers refuse such a configuration with :class:`TimingError` instead of producing
programs that read stale values. The RTL, the core model and the fast model run any program
with either timing; hand-written programs (``sw.asm``) can use the execute stage when they
keep its distances, and ``sim.hazards`` finds stale reads in a program.
"""

from __future__ import annotations

import functools
import inspect

__all__ = ["TimingError", "require_default_timing", "default_timing_only"]


class TimingError(ValueError):
    """A compiler was asked to schedule for a PE timing it does not support."""


def require_default_timing(cfg, what: str) -> None:
    """Raise :class:`TimingError` when ``cfg`` has the execute stage."""
    if getattr(cfg, "exec_stage", False):
        raise TimingError(
            f"{what}: the compilers schedule for the default PE timing; ArchConfig.exec_stage=true "
            f"(move results readable {cfg.mv_read_distance} micro-ops later, SRAM writes "
            f"{cfg.sram_read_distance} later) is supported by the RTL and the models but not yet "
            f"by the kernel and training compilers: use exec_stage=false, or a hand-written "
            f"program that keeps these distances (docs/fpga.md)")


def default_timing_only(fn):
    """Decorator: ``fn``'s argument ``cfg`` must have the default timing."""
    sig = inspect.signature(fn)
    if "cfg" not in sig.parameters:
        raise TypeError(f"{fn.__qualname__} has no 'cfg' parameter")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        cfg = sig.bind_partial(*args, **kwargs).arguments.get("cfg")
        require_default_timing(cfg, fn.__name__)
        return fn(*args, **kwargs)

    return wrapper
