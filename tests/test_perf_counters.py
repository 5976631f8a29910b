"""The performance counter bank against its specification, with random sources.

``tests/test_core.py`` checks the counters of whole RUNs against the core model; there
no event happens outside a RUN and the host clears only between RUNs. Here the bank is
driven directly (Amaranth's simulator) with random events in every cycle, ``count_en``
toggling and ``clear`` in the middle of counting, and compared every cycle with the
rule of ``docs/core.md``: the value read in cycle ``t`` is the sum of the sources of
the cycles ``s`` with ``count_en`` high and ``last clear < s <= t - 3`` (a clear also
drops the events still in flight); ``value`` shows counter ``sel`` of cycle ``t`` in
cycle ``t + PerfCounters.READOUT_LATENCY`` (pipelined: a new ``sel`` every cycle).
"""

import random

import pytest
from amaranth.sim import Simulator

from pe.pe import EVENT_LAYOUT
from rtl.config import ArchConfig
from rtl.perf_counters import SUMMED_EVENTS, PerfCounters, counter_names

LATENCY = 3


def _random_sources(rng, cfg, p_event):
    """One cycle of source values: {port name: int} (PE events as whole structs)."""
    nr = cfg.nr
    src = {"count_en": int(rng.random() < 0.7), "stall": int(rng.random() < p_event),
           "issue": int(rng.random() < p_event)}
    for p in range(nr * nr):
        fields = {n: (rng.getrandbits(f.width) if rng.random() < p_event else 0) for n, f in EVENT_LAYOUT}
        src[f"pe_ev{p}"] = fields
    for i in range(nr):
        src[f"row_hops{i}"] = rng.randrange(nr + 1)
        src[f"col_hops{i}"] = rng.randrange(nr + 1)
    for n in ("host_in", "host_out", "ring_in", "ring_out") + (("spad_rd", "spad_wr") if cfg.spad_kib else ()):
        src[n] = int(rng.random() < p_event)
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


@pytest.mark.parametrize("nr,spad_kib,seed", [(2, 0, 1), (2, 16, 2), (4, 0, 3)])
def test_counters_follow_count_en_and_clear(nr, spad_kib, seed):
    """Random events every cycle (also while ``count_en`` is low), random clears while
    events are in flight; one counter is read every cycle, in turn (the readout is
    pipelined: ``value`` is counter ``sel`` of READOUT_LATENCY cycles before), and must
    equal the specification's sum."""
    print(f"seed {seed}")
    rng = random.Random(seed)
    cfg = ArchConfig(nr=nr, spad_kib=spad_kib, counter_bits=32)
    dut = PerfCounters(cfg)
    names = counter_names(cfg)
    n_cycles = 2000
    checked = {"reads": 0, "gated": 0, "cleared_in_flight": 0}

    async def tb(ctx):
        history = []          # per cycle: (clear, count_en, increments)
        last_clear = -1
        pending = []          # (cycle due, counter, expected): the readout is pipelined
        for t in range(n_cycles):
            if pending and pending[0][0] == t:
                _, k, want = pending.pop(0)
                got = ctx.get(dut.value)
                assert got == want, f"cycle {t}: counter {names[k]} = {got}, expected {want} (seed {seed})"
                checked["reads"] += 1
            # what counter k holds in cycle t (before this cycle's edge), read out later
            k = t % len(names)
            want = sum(inc[k] for s, (clr, en, inc) in enumerate(history)
                       if en and last_clear < s <= t - LATENCY) % (1 << cfg.counter_bits)
            ctx.set(dut.sel, k)
            pending.append((t + PerfCounters.READOUT_LATENCY, k, want))
            src = _random_sources(rng, cfg, p_event=0.5)
            clear = int(rng.random() < 0.03)
            for port, v in src.items():
                sig = getattr(dut, port)
                if isinstance(v, dict):
                    for n, fv in v.items():
                        ctx.set(getattr(sig, n), fv)
                else:
                    ctx.set(sig, v)
            ctx.set(dut.clear, clear)
            incs = _increments(cfg, src)
            history.append((clear, src["count_en"], incs))
            if not src["count_en"] and any(incs[1:]):
                checked["gated"] += 1
            if clear:
                if any(en and any(inc) for _, en, inc in history[max(0, t - LATENCY + 1):t]):
                    checked["cleared_in_flight"] += 1
                last_clear = t
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    # the stimulus did exercise what this test is for
    assert checked["reads"] == n_cycles - PerfCounters.READOUT_LATENCY, checked
    assert checked["gated"] > 50 and checked["cleared_in_flight"] >= 3, checked

