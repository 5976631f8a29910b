"""The core's performance counters (the power model's inputs).

The order and meaning of the counters are specified in ``docs/core.md`` ("Performance
counters"); :func:`counter_names` is the one definition every layer uses (RTL readout,
core model, fast model, power model).
"""

from __future__ import annotations

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pe.pe import EVENT_LAYOUT

__all__ = ["PerfCounters", "counter_names", "SUMMED_EVENTS"]

#: PE events summed over all PEs, in readout order
SUMMED_EVENTS = ("mv", "mem_a_rd", "mem_a_wr", "mem_b_rd", "mem_b_wr", "rf_rd", "rf_wr", "rf_conflict",
                 "mem_conflict")


def counter_names(cfg) -> list[str]:
    """Counter names in readout order for an :class:`~rtl.config.ArchConfig`."""
    nr = cfg.nr
    names = ["cycles", "stall_cycles", "instructions"]
    names += [f"fma[{p}]" for p in range(nr * nr)]
    names += list(SUMMED_EVENTS)
    names += [f"row_hops[{r}]" for r in range(nr)] + [f"col_hops[{c}]" for c in range(nr)]
    names += ["host_in_beats", "host_out_beats"]
    names += ["ring_in_beats", "ring_out_beats"]
    if cfg.spad_kib:
        names += ["spad_rd_beats", "spad_wr_beats"]
    return names


class PerfCounters(wiring.Component):
    """Counter bank of one core.

    Every counter is ``cfg.counter_bits`` wide, wraps modulo its width, and counts only
    in cycles where ``count_en`` is high. The sources of a cycle (gated by ``count_en``)
    are registered, summed into a registered increment in the next cycle and added in
    the one after, so they are visible three cycles later: no path runs from the PEs'
    event strobes into their sum, nor from the sum into a counter's carry chain, in one
    cycle (the 4 x 4 FPGA builds' critical paths, ``docs/fpga-timing.md``). The host reads the
    counters only after a RUN's drain.

    Ports
    -----
    count_en : In(1)
        The core is running (RUN command, HALT drain included).
    stall : In(1), issue : In(1)
        The sequencer stalled / issued an instruction this cycle.
    pe_ev : In(EVENT_LAYOUT) per PE, as ``pe_ev{p}`` with ``p = row * nr + col``
        PE event strobes of this cycle.
    row_hops{i}, col_hops{i} : In(range(nr + 1))
        Bus activity of row / column bus ``i`` this cycle in PE pitches
        (:attr:`noc.broadcast_bus.BroadcastBus.hops`).
    host_in, host_out : In(1)
        A data beat was consumed from / pushed to the host this cycle.
    ring_in, ring_out : In(1)
        A beat was taken from the ring receive FIFO / sent to the next core this cycle.
    spad_rd, spad_wr : In(1)
        (``cfg.spad_kib > 0`` only) A beat was read from / written to the scratchpad.
    clear : In(1)
        Zero every counter (takes priority over counting).
    sel : In(range(n)), value : Out(counter_bits)
        Readout, pipelined: ``value`` is counter ``sel`` of cycle ``t`` in cycle
        ``t + READOUT_LATENCY`` (a new ``sel`` may be given every cycle). The mux is
        split in two registered stages (a group of :attr:`READOUT_GROUP` counters by
        the low bits of ``sel``, then the group), so no path runs through the whole
        counter mux, nor from it into the host's output FIFO.
    """

    #: Cycles from ``sel`` to ``value``.
    READOUT_LATENCY = 2
    #: Counters per first-stage group of the readout mux.
    READOUT_GROUP = 4

    def __init__(self, cfg):
        self.cfg = cfg
        self.names = counter_names(cfg)
        nr = cfg.nr
        members = {
            "count_en": In(1), "stall": In(1), "issue": In(1),
            "host_in": In(1), "host_out": In(1), "ring_in": In(1), "ring_out": In(1),
            "clear": In(1), "sel": In(range(len(self.names))), "value": Out(cfg.counter_bits),
        }
        if cfg.spad_kib:
            members.update({"spad_rd": In(1), "spad_wr": In(1)})
        for p in range(nr * nr):
            members[f"pe_ev{p}"] = In(EVENT_LAYOUT)
        for i in range(nr):
            members[f"row_hops{i}"] = In(range(nr + 1))
            members[f"col_hops{i}"] = In(range(nr + 1))
        super().__init__(members)

    def _inc_max(self, i: int) -> int:
        """The largest increment of counter ``i`` in one cycle."""
        nr = self.cfg.nr
        name = self.names[i]
        if name in SUMMED_EVENTS:
            width = dict((n, f.width) for n, f in EVENT_LAYOUT)[name]
            return nr * nr * ((1 << width) - 1)
        if "hops" in name:
            return nr
        return 1

    def pe_events(self):
        return [getattr(self, f"pe_ev{p}") for p in range(self.cfg.nr * self.cfg.nr)]

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        nr = cfg.nr
        # first stage: every source, gated by count_en, into a flip-flop (the PEs' event
        # strobes come from all over the die); the increments are summed from these
        def stage(sig, name):
            r = Signal.like(sig, name=f"src_{name}")
            with m.If(self.clear):
                m.d.sync += r.eq(0)
            with m.Else():
                m.d.sync += r.eq(Mux(self.count_en, sig, 0))
            return r

        evs = [stage(ev, f"pe_ev{p}") for p, ev in enumerate(self.pe_events())]
        incs: list = [stage(self.count_en, "cycle"), stage(self.stall, "stall"), stage(self.issue, "issue")]
        incs += [ev.fma for ev in evs]
        for name in SUMMED_EVENTS:
            incs.append(sum((getattr(ev, name) for ev in evs[1:]), start=getattr(evs[0], name)))
        others = [f"row_hops{r}" for r in range(nr)] + [f"col_hops{c}" for c in range(nr)]
        others += ["host_in", "host_out", "ring_in", "ring_out"] + (["spad_rd", "spad_wr"] if cfg.spad_kib else [])
        incs += [stage(getattr(self, n), n) for n in others]
        assert len(incs) == len(self.names)
        regs = [Signal(cfg.counter_bits, name=f"cnt_{i}") for i in range(len(self.names))]
        for i, (reg, inc) in enumerate(zip(regs, incs)):
            inc_r = Signal(range(self._inc_max(i) + 1), name=f"inc_{i}")
            with m.If(self.clear):
                m.d.sync += [reg.eq(0), inc_r.eq(0)]
            with m.Else():
                m.d.sync += [reg.eq(reg + inc_r), inc_r.eq(inc)]
        # readout stage 1: counter sel[:k] of every group of 2^k; stage 2: group sel[k:]
        g = self.READOUT_GROUP
        k = (g - 1).bit_length()
        groups = [Signal(cfg.counter_bits, name=f"readout_grp{j}") for j in range((len(regs) + g - 1) // g)]
        for j, grp in enumerate(groups):
            m.d.sync += grp.eq(Array(regs[j * g:(j + 1) * g])[self.sel[:k]])
        sel_hi = Signal(max(1, len(self.sel) - k), name="readout_sel_hi")
        m.d.sync += sel_hi.eq(self.sel[k:])
        m.d.sync += self.value.eq(Array(groups)[sel_hi])
        return m
