"""The ring crossing between two core kinds of a heterogeneous chip: a format converter
per lane and a gearbox (``docs/chip.md``, "Heterogeneous chips";
:class:`sim.ring_crossing.CrossingModel` is its model).
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from pe.fp_convert import FPConvert
from rtl.streams import RingLink

__all__ = ["RingCrossing"]


class RingCrossing(wiring.Component):
    """The link from a core of kind ``a`` to the next core, of kind ``b`` (an
    :class:`arch.hetero.Crossing`), in place of the plain wires of a ring link.

    Parameters
    ----------
    x : arch.hetero.Crossing

    Ports
    -----
    ring_in : In(:class:`rtl.streams.RingLink` (``nr_a * width_a``, ``depth``))
        From the sender's ``ring_out`` (``wiring.connect``): ``data`` / ``en`` a beat
        pushed this cycle; ``level`` (driven here) the level the sender's credit check
        reads, in sender beats (collecting: ``ring_out.level + pending + (1 if a beat is
        partly collected)``; splitting: ``depth - (depth - ring_out.level - pending) //
        k``; ``pending`` the receiver beats held here).
    ring_out : Out(:class:`rtl.streams.RingLink` (``nr_b * width_b``, ``depth``))
        To the receiver's ``ring_in``: ``data`` / ``en`` a beat pushed into its FIFO;
        ``level`` the receiver's FIFO level.

    Latency and cycle behaviour
    ---------------------------
    Every lane of an arriving beat is converted to ``fmt_b`` in the cycle it arrives
    (:class:`pe.fp_convert.FPConvert`, combinational; exact when widening, round to
    nearest even otherwise). Collecting (``nr_b = k nr_a``, ``k >= 1``): the lanes go
    into a collection register, the first beat in the low lanes; the beat that completes
    a receiver beat loads the output register, which pushes it into the receiver's FIFO
    in the next cycle. Splitting (``nr_a = k nr_b``): the converted beat enters a FIFO of
    ``ceil(depth / k)`` wide beats; from the next cycle on, its head is pushed one
    ``nr_b``-lane slice (low lanes first) per cycle. A beat a ``rout`` sends in cycle
    ``t`` (pushed in ``t + 2``) that completes a receiver beat, or is the first slice, is
    therefore in the receiver's FIFO in ``t + 3`` and can be taken by a ``rin`` in
    ``t + 4``: one cycle more than a plain link (:data:`arch.hetero.CROSSING_LATENCY`);
    the further slices follow one per cycle.
    """

    def __init__(self, x):
        self.x = x
        a, b = x.a, x.b
        depth = a.ring_fifo_depth
        super().__init__({
            "ring_in": In(RingLink(a.nr * a.fmt.width, depth)),
            "ring_out": Out(RingLink(b.nr * b.fmt.width, depth)),
        })

    def _convert(self, m):
        """The sender's lanes converted to ``fmt_b``, concatenated (``nr_a * width_b`` bits)."""
        a, b = self.x.a, self.x.b
        wa = a.fmt.width
        if a.fmt == b.fmt:
            return self.ring_in.data
        lanes = []
        for i in range(a.nr):
            cv = FPConvert(a.fmt, b.fmt)
            m.submodules[f"conv{i}"] = cv
            m.d.comb += cv.a.eq(self.ring_in.data[i * wa:(i + 1) * wa])
            lanes.append(cv.o)
        return Cat(*lanes)

    def elaborate(self, platform):
        m = Module()
        x = self.x
        conv = self._convert(m)
        if x.widen:
            self._collect(m, conv)
        else:
            self._split(m, conv)
        return m

    def _collect(self, m, conv):
        x, k = self.x, self.x.ratio
        slice_w = x.a.nr * x.b.fmt.width
        acc = Signal(max(1, (k - 1) * slice_w))
        cnt = Signal(range(k))
        out_valid = Signal()
        out_data = Signal(len(self.ring_out.data))
        m.d.comb += [self.ring_out.en.eq(out_valid), self.ring_out.data.eq(out_data)]
        m.d.sync += out_valid.eq(0)
        with m.If(self.ring_in.en):
            if k == 1:
                m.d.sync += [out_data.eq(conv), out_valid.eq(1)]
            else:
                with m.If(cnt == k - 1):
                    m.d.sync += [out_data.eq(Cat(acc, conv)), out_valid.eq(1), cnt.eq(0)]
                with m.Else():
                    for j in range(k - 1):
                        with m.If(cnt == j):
                            m.d.sync += acc[j * slice_w:(j + 1) * slice_w].eq(conv)
                    m.d.sync += cnt.eq(cnt + 1)
        m.d.comb += self.ring_in.level.eq(self.ring_out.level + out_valid + (cnt != 0))

    def _split(self, m, conv):
        x, k = self.x, self.x.ratio
        depth = x.a.ring_fifo_depth
        nb = x.b.nr * x.b.fmt.width
        q = fifo.SyncFIFO(width=len(conv), depth=-(-depth // k))
        m.submodules.queue = q
        sl = Signal(range(k))
        m.d.comb += [q.w_data.eq(conv), q.w_en.eq(self.ring_in.en)]
        m.d.comb += [self.ring_out.en.eq(q.r_rdy), self.ring_out.data.eq(q.r_data.word_select(sl, nb))]
        with m.If(q.r_rdy):
            with m.If(sl == k - 1):
                m.d.comb += q.r_en.eq(1)
                m.d.sync += sl.eq(0)
            with m.Else():
                m.d.sync += sl.eq(sl + 1)
        bits = (depth * 2 + 2).bit_length() + 1
        pending = Signal(signed(bits))
        free = Signal(signed(bits))
        m.d.comb += [pending.eq(q.r_level * k - sl), free.eq(depth - self.ring_out.level - pending)]
        m.d.comb += self.ring_in.level.eq(depth - (free >> (k.bit_length() - 1)))
