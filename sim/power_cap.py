"""Power caps: a training step scheduled so that the modelled power stays at or below a
cap in every window of ``N`` cycles, and the naive duty-cycling baseline.

**Power** is the power model's *everything* scope (:mod:`sim.power`: FPU, SRAM,
scratchpad, buses, register files, ring, control and the leakage of every core), from
the counters of each window (:mod:`sim.power_trace`), with the microcode store of the
configuration (``ArchConfig.ucode_depth``). A cap is on the whole chip.

**Mechanism** (:mod:`sw.throttle`): the host waits between RUNs while the chip is halted
(leakage only); chip phases are cut into one RUN per op, the finest unit a RUN can stop
at. Nothing else changes: the same ops, the same results bit for bit. A CP step pauses
between its RUNs (input phase, head, tail, output phase), which are not cut: its cores
run different layers and share no op boundary.

**Planning.** A profile run (the step with every op its own RUN, on the fast chip
engine) gives each op's and host phase's dynamic energy in bins of ``bin`` cycles from
its start. On that piecewise-constant power, with the step repeated (a periodic
schedule) and every *sliding* window of ``N`` cycles checked (:func:`_feasible`),
:func:`plan_capped` first follows every segment with just enough idle to bring its own
mean power to one level, the highest that meets the cap: segments below it (host I/O,
the host's turnaround, cool collectives and kernels) get none. Then it cuts each wait as
far as the windows allow, longest first (pooling a hot op with cool neighbours in a
window); the same cutting applied to the naive plan is the other candidate, and the
shorter step wins. A wait only ever lowers a window's energy (an idle cycle is the
cheapest cycle), so the searches are monotone. :func:`plan_naive` stretches every op and
host phase by one factor (each followed by a wait of ``(s - 1)`` times its length), the
smallest ``s`` that meets the cap.

**Checking.** :func:`run_schedule` runs a schedule for some steps on the fast chip
engine, the weights checked against the golden trainer after each, and samples the
counters per window of ``N`` cycles (aligned windows from the first traced step; the
last, partial window left out). A plan is made against ``cap x (1 - margin)`` and, if a
checked window exceeds the cap (the bins' uniform power is a model), made again with a
larger margin.
"""

from __future__ import annotations

import numpy as np

from arch.errors import UsageError
from sim.power_trace import TracingSession, dynamic_pj, leakage_watts, window_watts
from sw.throttle import HOST_RUNS, pause, segments

__all__ = ["DEFAULT_WINDOW", "profile", "plan_capped", "plan_naive", "run_schedule", "power_cap",
           "check_cap_args"]

#: the default window: 200,000 cycles (200 us at 1 GHz), shorter than the milliseconds
#: and more over which power limiters commonly average. A RUN cannot stop inside an op, so
#: the window must hold the step's longest op with enough idle around it: the reference
#: design's small network at S with minibatch GD has a 13,348-cycle weight update, which
#: at half the uncapped power needs about 101,000 cycles.
DEFAULT_WINDOW = 200_000


def check_cap_args(cap, window) -> None:
    """One-line errors for a cap or a window out of range."""
    if cap is not None and (not np.isfinite(cap) or cap <= 0):
        raise UsageError(f"--power-cap must be a positive number of watts, got {cap:g}")
    if window is not None and (int(window) != window or window < 1):
        raise UsageError(f"--power-window must be a positive number of cycles, got {window}")


class _Timeline:
    """A piecewise-constant power timeline: pieces ``(cycles, dynamic pJ)`` after each
    other, idle pieces at zero dynamic energy (the leakage is added per window)."""

    def __init__(self):
        self.t = [0.0]
        self.e = [0.0]

    def add(self, cycles, pj):
        if cycles <= 0 and pj > 0:
            cycles = 1e-3                 # energy without time (a host phase's idle cores' HALTs)
        if cycles > 0:
            self.t.append(self.t[-1] + cycles)
            self.e.append(self.e[-1] + pj)

    def worst(self, N, since: float) -> float:
        """Largest dynamic energy of a window of ``N`` cycles ending after ``since``."""
        t, e = np.asarray(self.t), np.asarray(self.e)
        cand = np.concatenate([t, t + N])
        cand = cand[(cand > since) & (cand <= t[-1] + N)]
        if not len(cand):
            return 0.0
        return float(np.max(np.interp(cand, t, e) - np.interp(cand - N, t, e, left=0.0)))


def profile(cfg, tp, init_weights, x, t, bin: int) -> list:
    """The step's pause points in order (:func:`sw.throttle.segments`), each with its
    pieces ``[(cycles, dynamic pJ)]`` (bins of ``bin`` cycles from each RUN's start) and
    the fixed idle after it (the host's turnaround): ``[(seg, pieces, idle)]``, from a
    run of the step with every op its own RUN (one step to warm up, one measured)."""
    prog = pause(tp, {}, cut_all=True)
    s = TracingSession(cfg, 10 ** 9, bin=bin)
    prog.init(s, init_weights)
    prog.run_step(s, x, t)
    s.begin()
    prog.run_step(s, x, t)
    order = segments(tp)
    out, cur, lead = [], None, 0
    for name, kind, t0, T, bins in s.runs:
        if kind == "idle":          # the host's turnaround, or microcode LOADs (before the first RUN:
            if out:                 # after the step's last segment, as the steps follow each other)
                out[-1][2] += T
            else:
                lead += T
            continue
        side = kind == "host-side"          # an inactive core's RUN in a host phase: no time of its own
        kind = "host" if side else kind
        seg = prog.part_seg[name] if name in prog.part_seg else ("host", HOST_RUNS[name])
        if cur != seg:
            out.append([seg, [], 0])
            cur = seg
        lens = [min(bin, T - j * bin) for j in range(len(bins))]
        out[-1][1] += [(0 if side else n, dynamic_pj(cfg, b, cfg.cores)) for n, b in zip(lens, bins)]
    if [o[0] for o in out] != order:        # pragma: no cover - the step runs its segments in order
        raise AssertionError("the profile's RUNs do not follow the step's pause points")
    out[-1][2] += lead
    return [tuple(o) for o in out]


def _budget(cfg, cap, N, margin):
    """Dynamic energy (pJ) a window of ``N`` cycles may hold under ``cap x (1 - margin)``."""
    leak = leakage_watts(cfg, cfg.cores)
    return ((cap * (1 - margin)) - leak) * N / (cfg.clock_mhz * 1e6) * 1e12


def _step_timeline(tl, prof, waits) -> None:
    for seg, pieces, idle in prof:
        tl.add(waits.get(seg, 0), 0.0)
        for n, e in pieces:
            tl.add(n, e)
        tl.add(idle, 0.0)


def _feasible(prof, waits, budget, N) -> bool:
    """Whether the step repeated with ``waits`` keeps every sliding window of ``N`` cycles
    within ``budget`` (steady state: windows ending after the first step)."""
    one = _Timeline()
    _step_timeline(one, prof, waits)
    P = one.t[-1]
    tl = _Timeline()
    for _ in range(int(np.ceil(N / max(P, 1))) + 2):
        _step_timeline(tl, prof, waits)
    return tl.worst(N, P) <= budget


def _after(prof, amounts) -> dict:
    """Waits before each segment from amounts of idle after each (the last step's wraps)."""
    keys = [seg for seg, _, _ in prof]
    return {keys[(i + 1) % len(keys)]: int(a) for i, a in enumerate(amounts) if a > 0}


def plan_capped(cfg, prof, cap, N, margin=0.01) -> dict:
    """The waits (pause point -> cycles) of the capped schedule. First every segment
    (an op, a host phase) is followed by just enough idle to bring its own mean power to
    one level (the highest level that meets the cap, by bisection): segments already
    below it get none. Then each wait is cut as far as the windows allow (pooling a hot
    op with cool neighbours), longest first. The same cutting from the naive schedule
    (:func:`plan_naive`) is the other candidate; the shorter step wins. Every check is on
    the step repeated (the periodic schedule)."""
    budget = _budget(cfg, cap, N, margin)
    if budget <= 0:
        raise UsageError(f"a power cap of {cap:g} W is at or below the chip's leakage floor of "
                         f"{leakage_watts(cfg, cfg.cores):.3f} W: no schedule can meet it")
    E = np.array([sum(e for _, e in pieces) for _, pieces, _ in prof])
    L = np.array([sum(n for n, _ in pieces) + idle for _, pieces, idle in prof])

    def at(rate):
        return _after(prof, np.ceil(np.maximum(0.0, E / rate - L)))

    hi = budget / N                                   # pJ per cycle: the cap's own rate
    lo = hi / 2
    while not _feasible(prof, at(lo), budget, N):
        lo /= 2
        if lo < hi * 1e-4:
            for seg, pieces, _ in prof:             # name the op no wait can help
                cyc = max(1, round(sum(n for n, _ in pieces)))
                if sum(e for _, e in pieces) > budget:
                    raise UsageError(
                        f"{seg[0]} {seg[1]} ({cyc} cycles, {sum(e for _, e in pieces) / cyc * 1e-6 * cfg.clock_mhz:.3f}"
                        f" W dynamic) cannot meet a {cap:g} W cap in windows of {N} cycles: a RUN cannot stop "
                        f"inside it; use a longer --power-window or a higher cap")
            raise UsageError(f"no schedule of pauses between ops meets a {cap:g} W cap in windows of {N} cycles; "
                             f"use a longer --power-window or a higher cap")
    if _feasible(prof, at(hi), budget, N):
        lo = hi
    while hi / lo > 1.002:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _feasible(prof, at(mid), budget, N) else (lo, mid)
    best = None
    for start in (at(lo), plan_naive(cfg, prof, cap, N, margin)[0]):
        waits = _shorten(prof, dict(start), budget, N)
        if best is None or _period(prof, waits) < _period(prof, best):
            best = waits
    return best


def _period(prof, waits) -> float:
    tl = _Timeline()
    _step_timeline(tl, prof, waits)
    return tl.t[-1]


def _shorten(prof, waits, budget, N, sweeps: int = 2) -> dict:
    """Each wait cut as far as the windows allow, longest first, ``sweeps`` times."""
    for _ in range(sweeps):
        for seg in sorted(waits, key=lambda k: -waits[k]):
            w = waits[seg]
            if not w:
                continue
            if _feasible(prof, {**waits, seg: 0}, budget, N):
                waits[seg] = 0
                continue
            a, b = 0, w
            while b - a > 1:
                m = (a + b) // 2
                if _feasible(prof, {**waits, seg: m}, budget, N):
                    b = m
                else:
                    a = m
            waits[seg] = b
    return {k: v for k, v in waits.items() if v}


def plan_naive(cfg, prof, cap, N, margin=0.01) -> tuple:
    """``(waits, s)``: naive duty cycling, every op and host phase followed by a wait of
    ``(s - 1)`` times its length, the smallest such ``s`` (to 0.1 %) that meets the cap
    on the profile (the step repeated)."""
    budget = _budget(cfg, cap, N, margin)
    if budget <= 0:
        raise UsageError(f"a power cap of {cap:g} W is at or below the chip's leakage floor of "
                         f"{leakage_watts(cfg, cfg.cores):.3f} W: no schedule can meet it")
    L = np.array([sum(n for n, _ in pieces) for _, pieces, _ in prof])

    def waits_for(s):
        return _after(prof, np.round((s - 1) * L))

    def ok(s):
        return _feasible(prof, waits_for(s), budget, N)

    lo, hi = 1.0, 2.0
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise UsageError(f"naive throttling cannot meet a {cap:g} W cap in windows of {N} cycles")
    if ok(lo):
        return waits_for(lo), lo
    while hi / lo > 1.001:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return waits_for(hi), hi


def run_schedule(cfg, tp, waits, N, inputs, W0, golden=None, cut_all=True, min_windows: int = 4,
                 max_steps: int = 40) -> dict:
    """Run ``tp`` paused by ``waits`` (:func:`sw.throttle.pause`) on the fast chip engine
    from the weights ``W0``, steps with ``inputs()`` (``(x, t)`` each) until the trace
    holds ``min_windows`` whole windows of ``N`` cycles (at most ``max_steps`` steps);
    ``golden``: a golden trainer, the weights checked after every step. Returns the
    per-window watts (the last, partial window left out), the step's cycles, the
    program and the steps run."""
    from sim.step_measure import _check_weights

    prog = pause(tp, waits, cut_all=cut_all)
    s = TracingSession(cfg, N)
    prog.init(s, W0)
    s.begin()
    steps = 0
    while steps < max_steps and (steps < 2 or s.t < (min_windows + 1) * N):
        x, t = inputs()
        prog.run_step(s, x, t)
        if golden is not None:
            golden.step(x, t)
            _check_weights(prog, s, golden, f"paused step {steps + 1}")
        steps += 1
    wins, lens = s.window_list()
    whole = [i for i, n in enumerate(lens) if n == N]
    watts = window_watts(cfg, [wins[i] for i in whole], [N] * len(whole), cfg.cores)
    energy = sum(dynamic_pj(cfg, w, cfg.cores) for w in wins) * 1e-12
    avg = energy / (s.t / (cfg.clock_mhz * 1e6)) + leakage_watts(cfg, cfg.cores)
    return {"watts": [float(w) for w in watts], "step_cycles": prog.step_cycles(), "steps": steps,
            "cycles": s.t, "mean_watts": float(avg), "program": prog}


def power_cap(cfg, mlp, method: str, cap=None, window: int = DEFAULT_WINDOW, *, cap_fraction=None,
              bin: int | None = None, seed: int = 0, golden: bool = True, log=None, tp=None) -> dict:
    """Train steps of ``mlp`` with ``method`` (``sgd``, ``mbgd``, ``cp``) on the chip ``cfg``
    uncapped, under the capped schedule and under naive throttling, on the fast chip
    engine; ``cap`` in watts, or ``cap_fraction`` of the uncapped mean power. Returns the
    three runs' per-window watts, step cycles, samples/s and their ratio, and the bound
    no schedule of pauses can beat (``bound_step_cycles``: the step's dynamic energy over
    the cap less the leakage, the cap met on average only)."""
    from sim.step_measure import _golden, _inputs, compile_method
    from sw.train import init_weights

    check_cap_args(cap, window)
    N = int(window)
    tp = tp if tp is not None else compile_method(method, cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, seed)
    rng = np.random.default_rng(seed + 1)
    fixed = _inputs(mlp, rng)

    def gen(seed2):
        r = np.random.default_rng(seed2)
        return lambda: _inputs(mlp, r)

    def gold():
        return _golden(method, cfg, mlp, tp, W0) if golden else None

    say = log or (lambda *_: None)
    unc = run_schedule(cfg, tp, {}, N, gen(seed + 2), W0, gold(), cut_all=False)
    if cap is None:
        cap = (cap_fraction or 0.5) * unc["mean_watts"]
    check_cap_args(cap, window)
    say(f"uncapped: {unc['step_cycles']} cycles per step, mean {unc['mean_watts']:.3f} W, "
        f"largest window {max(unc['watts'], default=0):.3f} W; cap {cap:.3f} W in windows of {N} cycles")
    prof = profile(cfg, tp, W0, *fixed, bin or max(1, N // 100))
    out = {"uncapped": unc}
    for name in ("capped", "naive"):
        margin, factor = 0.01, None
        for attempt in range(5):
            if name == "capped":
                waits = plan_capped(cfg, prof, cap, N, margin)
            else:
                waits, factor = plan_naive(cfg, prof, cap, N, margin)
            res = run_schedule(cfg, tp, waits, N, gen(seed + 2), W0, gold())
            worst = max(res["watts"], default=0.0)
            say(f"{name}: {res['step_cycles']} cycles per step, largest window {worst:.3f} W (margin {margin:.3f})")
            if worst <= cap:
                break
            margin = margin + 1.5 * (worst - cap) / cap + 0.002
        else:                                    # pragma: no cover - the margin grows until it holds
            raise RuntimeError(f"{name} schedule: a window exceeds the cap after 5 plans")
        res["waits"] = {f"{k[0]}:{k[1]}": v for k, v in waits.items() if v}
        res["margin"], res["stretch"] = margin, factor
        out[name] = res
    B = mlp.batch
    for r in out.values():
        r["samples_per_s"] = B * cfg.clock_mhz * 1e6 / r["step_cycles"]
        r["max_window_watts"] = max(r["watts"], default=0.0)
        r.pop("program", None)
    leak = leakage_watts(cfg, cfg.cores)
    dyn_pj = sum(e for _, pieces, _ in prof for _, e in pieces)
    bound = dyn_pj / ((cap - leak) * 1e12 / (cfg.clock_mhz * 1e6))
    return {"cap_watts": cap, "window_cycles": N, "scope": "everything", "method": method,
            "network": mlp.describe(), "batch": B, "leakage_watts": leak,
            "bound_step_cycles": bound, "bound_samples_per_s": B * cfg.clock_mhz * 1e6 / bound,
            "runs": out, "throughput_ratio": out["capped"]["samples_per_s"] / out["naive"]["samples_per_s"]}


def plot_trace(res: dict, path, title: str | None = None) -> None:
    """PNG: per-window power of the uncapped, capped and naive runs with the cap line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from arch.files import atomic_savefig

    N = res["window_cycles"]
    fig, ax = plt.subplots(figsize=(10, 4))
    for name, style in (("uncapped", "-"), ("capped", "-"), ("naive", "--")):
        r = res["runs"][name]
        w = r["watts"]
        x = np.arange(len(w) + 1) * N / 1e3
        ax.step(x, list(w) + w[-1:], where="post", ls=style,
                label=f"{name}: {r['samples_per_s']:.0f} samples/s, {r['step_cycles']:,} cycles/step")
    ax.axhline(res["cap_watts"], color="red", lw=1, label=f"cap {res['cap_watts']:.2f} W")
    ax.axhline(res["leakage_watts"], color="gray", lw=0.8, ls=":", label=f"leakage {res['leakage_watts']:.2f} W")
    ax.set_xlabel(f"k cycles (windows of {N:,} cycles)")
    ax.set_ylabel("modelled power, everything (W)")
    ax.set_title(title or f"{res['network']}, {res['method']}: capped / naive throughput "
                 f"{res['throughput_ratio']:.2f}x", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
