"""The core's performance counter bank (the power model's inputs).

The order and meaning of the counters are specified in ``docs/core.md`` ("Performance
counters"); their names come from :func:`arch.counters.counter_names`.
"""

from __future__ import annotations

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from arch.counters import SUMMED_EVENTS, counter_names
from pe.layouts import EVENT_LAYOUT

__all__ = ["PerfCounters", "counter_names", "SUMMED_EVENTS"]

class PerfCounters(wiring.Component):
    """Counter bank of one core: small counters in flip-flops, totals in a block RAM.

    Every counter is ``cfg.counter_bits`` wide, wraps modulo its width, and counts only
    in cycles where ``count_en`` is high. The sources of a cycle are registered as they
    are (no reset, enable or gate on these flip-flops); the next cycle registers the
    events summed over the PEs of each PE row (and every other source once more), and
    the cycle after sums those into a registered increment, zero unless ``count_en``
    was high and no ``clear`` came (no path runs from the PEs' event strobes into a sum
    in one cycle, no sum has more than ``nr`` terms, and ``count_en`` and ``clear``
    reach only the last stage), which the cycle after
    adds to the counter's **low part**, a flip-flop counter just wide enough for
    ``n`` cycles of increments (``n`` = number of counters). The **totals** are words of
    a memory (``cfg.counter_bits`` wide, ``n`` deep: block RAM on an FPGA). A sweep
    visits one counter per cycle in turn (``ptr``): it takes the low part (zeroing it in
    the same cycle, this cycle's increment kept) and adds it to the counter's word in
    three cycles (read; register; add; write), so every low part is emptied every ``n``
    cycles and never overflows. Against a bank of ``n`` full-width counters in
    flip-flops this saves ``n`` wide adders, their flip-flops and the readout mux
    (docs/core.md, "Performance counters"; docs/fpga.md, "Timing").

    ``ready`` says the words are the counts: it is high once no cycle has counted and no
    ``clear`` has been given for ``SETTLE + SWEEP_LATENCY`` cycles (every low part has
    been swept and its write has landed): ``n + 7`` cycles after the last counted cycle,
    47 for a 4 x 4 core. The memory's one read port serves the sweep until then and the
    readout after; the host interface waits for ``ready`` before it reads.

    ``clear`` drops the three stages in flight (the increments are zeroed, and the first
    two stages' sources never counted) and zeroes the low parts at once (every event of its
    cycle and before is dropped), and starts a clearing sweep: the next ``n`` visits
    write the low part alone, not added to the old word. Reset does the same (the
    sweep's registers reset into a clearing sweep), so a reset core reads zeros.

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
    dram_rd, dram_wr, dma_busy, dma_stall : In(1)
        (``cfg.dram_mib > 0`` only) A beat came from / went to DRAM, the DMA engine is
        busy, the sequencer stalls on it (counters ``dram_rd_beats`` ... ``dma_stall_cycles``).
    clear : In(1)
        Zero every counter (takes priority over counting).
    ready : Out(1)
        The readout shows the counts: no count and no clear in the last
        ``SETTLE + SWEEP_LATENCY`` cycles (the sweep has stopped and its last write has
        landed).
    sel : In(range(n)), value : Out(counter_bits)
        Readout while ``ready``: ``value`` is counter ``sel`` of cycle ``t`` in cycle
        ``t + READOUT_LATENCY`` (a new ``sel`` may be given every cycle; ``ready`` in
        cycle ``t`` is what counts).
    """

    #: Cycles from ``sel`` to ``value``.
    READOUT_LATENCY = 2
    #: the DMA engine's event inputs, in counter order (``cfg.dram_mib > 0``)
    DMA_EVENTS = ("dram_rd", "dram_wr", "dma_busy", "dma_stall")
    #: Cycles from a visit of the sweep to its write landing in the memory.
    SWEEP_LATENCY = 3

    def __init__(self, cfg):
        self.cfg = cfg
        self.names = counter_names(cfg)
        nr = cfg.nr
        members = {
            "count_en": In(1), "stall": In(1), "issue": In(1),
            "host_in": In(1), "host_out": In(1), "ring_in": In(1), "ring_out": In(1),
            "clear": In(1), "ready": Out(1), "sel": In(range(len(self.names))), "value": Out(cfg.counter_bits),
        }
        if cfg.spad_kib:
            members.update({"spad_rd": In(1), "spad_wr": In(1)})
        if cfg.dram_mib:
            members.update({name: In(1) for name in self.DMA_EVENTS})
        for p in range(nr * nr):
            members[f"pe_ev{p}"] = In(EVENT_LAYOUT)
        for i in range(nr):
            members[f"row_hops{i}"] = In(range(nr + 1))
            members[f"col_hops{i}"] = In(range(nr + 1))
        super().__init__(members)

    @property
    def n(self) -> int:
        """Number of counters (the sweep's period in cycles)."""
        return len(self.names)

    @property
    def SETTLE(self) -> int:
        """Cycles the sweep runs after the last counted cycle (or ``clear``): the last
        event reaches its low part at the end of the third cycle after its own, and every
        counter is visited within the ``n`` cycles after that (the sweep needs no more:
        ``tests/rtl/test_perf_counters.py`` fails with one cycle less); its write lands
        :attr:`SWEEP_LATENCY` cycles after the visit, and ``ready`` rises the cycle after."""
        return self.n + 3

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

    def low_bits(self, i: int) -> int:
        """Width of counter ``i``'s low part: ``n`` cycles of its largest increment."""
        return min(self.cfg.counter_bits, (self.n * self._inc_max(i)).bit_length())

    def pe_events(self):
        return [getattr(self, f"pe_ev{p}") for p in range(self.cfg.nr * self.cfg.nr)]

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        nr = cfg.nr
        n = self.n
        # first stage: every source into a flip-flop of its own (the PEs' event strobes
        # come from all over the die), with no reset, enable or gate: count_en and clear
        # reach only the last stage, whose registers sit with the sum, not the die's
        # few hundred first-stage bits (a gate there is on the 4 x 4 core's critical
        # path: docs/fpga.md, "Timing"). The increments are summed from these.
        def stage(v, name, prefix="src"):
            r = Signal.like(v, name=f"{prefix}_{name}", reset_less=True)
            m.d.sync += r.eq(v)
            return r

        evs = [stage(ev, f"pe_ev{p}") for p, ev in enumerate(self.pe_events())]
        # second stage: the events summed over all PEs as partial sums, one per PE row
        # (registered; their sum is the increment in the third stage), every other
        # source registered once more. A sum over 16 PEs in one cycle (four adder levels)
        # is among the 4 x 4 core's late paths (docs/fpga.md, "Timing").
        def sum_of(xs):
            """A balanced adder tree of ``xs``."""
            while len(xs) > 1:
                xs = [xs[k] + xs[k + 1] if k + 1 < len(xs) else xs[k] for k in range(0, len(xs), 2)]
            return xs[0]

        parts: list = [[stage(self.count_en, "cycle")], [stage(self.stall, "stall")], [stage(self.issue, "issue")]]
        parts += [[ev.fma] for ev in evs]
        for name in SUMMED_EVENTS:
            parts.append([sum_of([getattr(ev, name) for ev in evs[r * nr:(r + 1) * nr]]) for r in range(nr)])
        others = [f"row_hops{r}" for r in range(nr)] + [f"col_hops{c}" for c in range(nr)]
        others += ["host_in", "host_out", "ring_in", "ring_out"] + (["spad_rd", "spad_wr"] if cfg.spad_kib else [])
        others += list(self.DMA_EVENTS) if cfg.dram_mib else []
        parts += [[stage(getattr(self, n_), n_)] for n_ in others]
        assert len(parts) == n
        incs = [sum_of([stage(v, f"{i}_{k}", "src2") for k, v in enumerate(ps)]) for i, ps in enumerate(parts)]

        # the sweep: ptr (binary, the memory address and the harvest mux) and visit (the
        # same position one-hot, a ring of flip-flops) advance every cycle
        ptr = Signal(range(n), name="sweep_ptr")
        visit = Signal(n, init=1, name="sweep_visit")
        m.d.sync += [ptr.eq(Mux(ptr == n - 1, 0, ptr + 1)), visit.eq(visit.rotate_left(1))]
        # third stage and low parts. The second stage holds cycle t - 2's sources (the
        # first t - 1's); en_2 says they count: count_en in t - 2 and no clear in t - 2 or
        # t - 1. A clear in t also drops them (not in inc_r), the first stage's (en_2 is
        # loaded with 0), this cycle's sources (en_1 is loaded with 0) and the increment
        # of t - 3 (not in the low part).
        en_1 = Signal(name="count_en_1")
        en_2 = Signal(name="count_en_2")
        m.d.sync += [en_1.eq(self.count_en & ~self.clear), en_2.eq(en_1 & ~self.clear)]
        take = Signal(name="inc_take")
        m.d.comb += take.eq(en_2 & ~self.clear)
        lows = []
        for i, inc in enumerate(incs):
            inc_r = Signal(range(self._inc_max(i) + 1), name=f"inc_{i}")
            low = Signal(self.low_bits(i), name=f"low_{i}")
            m.d.sync += inc_r.eq(Mux(take, inc, 0))
            with m.If(self.clear):
                m.d.sync += low.eq(0)
            with m.Else():
                m.d.sync += low.eq(Mux(visit[i], 0, low) + inc_r)
            lows.append(low)
        # the sweep runs (owns the read port, writes) while settle != 0; a clear, and a
        # reset, start a clearing sweep of n visits (the old words are not added)
        settle = Signal(range(self.SETTLE + 1), init=self.SETTLE, name="sweep_settle")
        clearing = Signal(range(n + 1), init=n, name="sweep_clearing")
        with m.If(self.count_en | self.clear):
            m.d.sync += settle.eq(self.SETTLE)
        with m.Elif(settle != 0):
            m.d.sync += settle.eq(settle - 1)
        with m.If(self.clear):
            m.d.sync += clearing.eq(n)
        with m.Elif(clearing != 0):
            m.d.sync += clearing.eq(clearing - 1)
        active = Signal(name="sweep_active")
        m.d.comb += active.eq(settle != 0)

        # block RAM, not LUT RAM (Yosys would pick LUT RAM for so few words: 36 DPR16X4
        # for a 4 x 4 core's 40 x 48 bits, against 2 DP16KD, which a core has to spare)
        m.submodules.words = words = Memory(shape=cfg.counter_bits, depth=n, init=[], attrs={"ram_style": "block"})
        rd = words.read_port()
        wr = words.write_port()
        m.d.comb += rd.addr.eq(Mux(active, ptr, self.sel))
        # visit (cycle t): take the low part; t + 1: the word comes out of the memory,
        # into a register (also the readout's); t + 2: add; t + 3: write
        harvest = Signal(max(self.low_bits(i) for i in range(n)), name="sweep_low")
        m.d.sync += harvest.eq(Mux(self.clear, 0, Array(lows)[ptr]))
        word = Signal(cfg.counter_bits, name="sweep_word")
        m.d.sync += word.eq(rd.data)
        m.d.comb += self.value.eq(word)
        act = [active]
        addr = [ptr]
        fresh = [clearing != 0]
        for k in range(1, self.SWEEP_LATENCY + 1):
            act.append(Signal(name=f"sweep_active_{k}"))
            addr.append(Signal(range(n), name=f"sweep_addr_{k}"))
            fresh.append(Signal(name=f"sweep_clearing_{k}"))
            m.d.sync += [act[k].eq(act[k - 1]), addr[k].eq(addr[k - 1]), fresh[k].eq(fresh[k - 1])]
        harvest2 = Signal.like(harvest, name="sweep_low_2")
        total = Signal(cfg.counter_bits, name="sweep_total")
        m.d.sync += [harvest2.eq(harvest), total.eq(Mux(fresh[2], 0, word) + harvest2)]
        m.d.comb += [wr.en.eq(act[3]), wr.addr.eq(addr[3]), wr.data.eq(total)]
        m.d.comb += self.ready.eq(~(act[0] | act[1] | act[2] | act[3]))
        return m
