"""The performance counter bank against its specification, with random sources.

``tests/rtl/test_core.py`` checks the counters of whole RUNs against the core model; there
no event happens outside a RUN and the host clears only between RUNs. Here the bank is
driven directly (Amaranth's simulator) in phases of counting (``count_en`` mostly high,
random events, some phases with every source at its largest value) and idle spells of
random length, with events also while ``count_en`` is low and clears at random times
(while counting, during the settling, while idle). Every cycle:

* ``ready`` must be exactly the rule of ``docs/core.md``: high in cycle ``t`` when no
  cycle of ``[t - SETTLE - 3, t - 1]`` counted or cleared (and ``t >= SETTLE + 3``
  after reset);
* while ``ready``, a counter is read (``sel`` in turn) and the value that comes out
  ``READOUT_LATENCY`` cycles later must be the sum of the sources of the cycles ``s``
  with ``count_en`` high and ``last clear < s`` (a clear drops every event before it).
"""

import random

import pytest
from amaranth.sim import Simulator

from pe.layouts import EVENT_LAYOUT
from arch.config import ArchConfig
from rtl.perf_counters import SUMMED_EVENTS, PerfCounters
from arch.counters import counter_names


def _random_sources(rng, cfg, p_event, count_en, full=False):
    """One cycle of source values: {port name: int} (PE events as whole structs);
    ``full``: every source at its largest value."""
    nr = cfg.nr
    ev = (lambda: True) if full else (lambda: rng.random() < p_event)
    val = (lambda w: (1 << w) - 1) if full else rng.getrandbits
    src = {"count_en": count_en, "stall": int(ev()), "issue": int(ev())}
    for p in range(nr * nr):
        src[f"pe_ev{p}"] = {n: (val(f.width) if ev() else 0) for n, f in EVENT_LAYOUT}
    for i in range(nr):
        src[f"row_hops{i}"] = nr if full else rng.randrange(nr + 1)
        src[f"col_hops{i}"] = nr if full else rng.randrange(nr + 1)
    for n in ("host_in", "host_out", "ring_in", "ring_out") + (("spad_rd", "spad_wr") if cfg.spad_kib else ()):
        src[n] = int(ev())
    return src


def _increments(cfg, src) -> list[int]:
    """Each counter's increment for one cycle's sources (readout order), ungated."""
    nr = cfg.nr
    pes = [src[f"pe_ev{p}"] for p in range(nr * nr)]
    incs = [1, src["stall"], src["issue"]]
    incs += [ev["fma"] for ev in pes]
    incs += [sum(ev[n] for ev in pes) for n in SUMMED_EVENTS]
    incs += [src[f"row_hops{r}"] for r in range(nr)] + [src[f"col_hops{c}"] for c in range(nr)]
    incs += [src[n] for n in ("host_in", "host_out", "ring_in", "ring_out")]
    if cfg.spad_kib:
        incs += [src["spad_rd"], src["spad_wr"]]
    assert len(incs) == len(counter_names(cfg))
    return incs


#: the 4 x 4 bank in make test-all: the same logic as the 2 x 2 banks with more counters
@pytest.mark.parametrize("nr,spad_kib,seed", [(2, 0, 1), (2, 16, 2), pytest.param(4, 0, 3, marks=pytest.mark.slow)])
def test_counters_follow_count_en_and_clear(nr, spad_kib, seed):
    """Counting phases and idle spells with clears anywhere; ``ready`` checked every
    cycle, one counter read in every ready cycle (in turn) against the sum."""
    print(f"seed {seed}")
    rng = random.Random(seed)
    cfg = ArchConfig(nr=nr, spad_kib=spad_kib, counter_bits=32)
    dut = PerfCounters(cfg)
    names = counter_names(cfg)
    n_cycles = 5000
    settle = dut.SETTLE
    # the phases: (counting?, length, every source at its maximum?)
    plan = []
    while sum(length for _, length, _ in plan) < n_cycles:
        plan.append((True, rng.randrange(1, 120), rng.random() < 0.25))
        plan.append((False, rng.randrange(0, 4 * settle), False))
    phase_of = [ph for ph in plan for _ in range(ph[1])]
    checked = {"reads": 0, "ready": 0, "gated": 0, "cleared_in_flight": 0, "clear_settling": 0,
               "clear_idle": 0, "full_run": 0}
    full_run = 0

    async def tb(ctx):
        nonlocal full_run
        totals = [0] * len(names)   # sum over counted cycles since the last clear
        recent = []                 # per cycle: counted or cleared
        pending = []                # (cycle due, counter, expected): the readout is pipelined
        for t in range(n_cycles):
            if pending and pending[0][0] == t:
                _, k, want = pending.pop(0)
                got = ctx.get(dut.value)
                assert got == want, f"cycle {t}: counter {names[k]} = {got}, expected {want} (seed {seed})"
                checked["reads"] += 1
            want_ready = t >= settle + 3 and not any(recent[max(0, t - settle - 3):t])
            assert ctx.get(dut.ready) == want_ready, f"cycle {t}: ready {not want_ready}, expected {want_ready}"
            if want_ready:
                checked["ready"] += 1
                k = t % len(names)
                ctx.set(dut.sel, k)
                pending.append((t + PerfCounters.READOUT_LATENCY, k, totals[k] % (1 << cfg.counter_bits)))
            counting, _, full = phase_of[t]
            # (a phase at the maximum counts in every cycle: the low parts fill up)
            en = int(full or rng.random() < 0.85) if counting else 0
            src = _random_sources(rng, cfg, 0.5, en, full=full and en)
            clear = int(rng.random() < 0.01)
            for port, v in src.items():
                sig = getattr(dut, port)
                if isinstance(v, dict):
                    for n, fv in v.items():
                        ctx.set(getattr(sig, n), fv)
                else:
                    ctx.set(sig, v)
            ctx.set(dut.clear, clear)
            incs = _increments(cfg, src)
            if not en and any(incs[1:]):
                checked["gated"] += 1
            full_run = full_run + 1 if full and en else 0
            checked["full_run"] = max(checked["full_run"], full_run)
            if clear:
                totals = [0] * len(names)
                if any(recent[max(0, t - 3):t]):
                    checked["cleared_in_flight"] += 1
                elif not want_ready:
                    checked["clear_settling"] += 1
                else:
                    checked["clear_idle"] += 1
            elif en:
                totals = [a + b for a, b in zip(totals, incs)]
            recent.append(bool(en or clear))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    print(checked)
    # the stimulus did exercise what this test is for
    assert checked["reads"] >= checked["ready"] - PerfCounters.READOUT_LATENCY and checked["reads"] > 500, checked
    assert checked["gated"] > 50 and checked["cleared_in_flight"] >= 3, checked
    assert checked["clear_settling"] >= 1 and checked["clear_idle"] >= 1 and checked["full_run"] >= len(names), checked
