"""``--power-cap`` and ``--power-window`` of ``caterpillar train`` and ``caterpillar dse``
(:mod:`sim.power_cap`)."""

from __future__ import annotations

import argparse
import math

from arch.errors import UsageError

__all__ = ["add_power_cap_arguments", "check_power_cap_args", "run_power_cap", "power_cap_lines"]


def _watts(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected watts (a positive number), got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"the cap must be a positive number of watts, got {text}")
    return v


def _window(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of cycles, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"the window must be at least 1 cycle, got {v}")
    return v


def add_power_cap_arguments(p, what: str, extra: str = "") -> None:
    from sim.power_cap import DEFAULT_WINDOW

    p.add_argument("--power-cap", type=_watts, metavar="W",
                   help=f"schedule {what} so that the modelled power (everything: dynamic energy and leakage) stays "
                        f"at or below W watts in every window of --power-window cycles; reports its throughput "
                        f"against naive duty cycling (chip SGD, minibatch GD and CP; docs/power.md){extra}")
    p.add_argument("--power-window", type=_window, metavar="N",
                   help=f"the power cap's window in cycles (default {DEFAULT_WINDOW:,}; docs/power.md says why)")


def check_power_cap_args(args, cfg=None, method: str | None = None) -> None:
    """Usage errors: a window without a cap, a cap on a run the schedule does not cover
    (one core), a cap at or below the leakage floor. Every ``method`` of
    :data:`sim.step_measure.METHODS` (SGD, minibatch GD, CP) is capped."""
    if args.power_window is not None and args.power_cap is None:
        raise UsageError("--power-window applies to --power-cap")
    if args.power_cap is None:
        return
    if cfg is not None and cfg.cores < 2:
        raise UsageError("--power-cap schedules a chip's RUNs; the configuration has one core (try --config S)")
    if cfg is not None:
        from sim.power_trace import leakage_watts

        floor = leakage_watts(cfg, cfg.cores)
        if args.power_cap <= floor:
            raise UsageError(f"--power-cap {args.power_cap:g} W is at or below the chip's leakage floor of "
                             f"{floor:.3f} W (everything leaks while halted): no schedule can meet it")


def run_power_cap(args, cfg, mlp, method: str, log=None, options: dict | None = None, tp=None) -> dict:
    """The capped and the naive schedules of one step of ``mlp`` (:func:`sim.power_cap.power_cap`),
    compiled with the mapping ``options`` (:func:`sim.step_measure.compile_method`) unless
    ``tp`` (the compiled step) is given."""
    from sim.power_cap import DEFAULT_WINDOW, power_cap
    from sim.step_measure import compile_method

    tp = tp if tp is not None else compile_method(method, cfg, mlp, **(options or {}))
    return power_cap(cfg, mlp, method, args.power_cap, args.power_window or DEFAULT_WINDOW, log=log, tp=tp)


def power_cap_lines(res: dict) -> list[str]:
    r = res["runs"]
    return [f"power cap {res['cap_watts']:.3f} W in every window of {res['window_cycles']:,} cycles (modelled power, "
            f"everything; leakage floor {res['leakage_watts']:.3f} W):",
            *(f"  {k:<9} {v['step_cycles']:>10,} cycles per step, {v['samples_per_s']:>12,.1f} samples/s, largest "
              f"window {v['max_window_watts']:.3f} W ({len(v['watts'])} windows, {v['steps']} steps checked against "
              f"the golden trainer)" for k, v in r.items()),
            f"  capped schedule / naive duty cycling: {res['throughput_ratio']:.3f}x the throughput"]
