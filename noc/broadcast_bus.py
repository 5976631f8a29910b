"""A (segmentable) broadcast bus of one PE row or column."""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.buses import segment_len, segment_of
from arch.microop import SEG_BITS

__all__ = ["BroadcastBus", "segment_of", "segment_len", "visibility", "vis_bits", "vis_port_bits"]


def vis_bits(n: int) -> int:
    """Number of visibility flags of a bus of ``n`` PEs (one per bit of a PE position)."""
    return max(1, (n - 1).bit_length())


def vis_port_bits(n: int) -> int:
    """Number of visibility flags that depend on the segmentation (``vis_bits(n) - 1``):
    flag 0 is always set, since a segment holds at least two PEs (``2**g``, ``g >= 1``) or
    the whole bus, so PEs whose positions differ only in bit 0 always share one."""
    return vis_bits(n) - 1


def visibility(seg, n: int):
    """The visibility flags of segmentation ``seg`` on a bus of ``n`` PEs, as a value of
    :func:`vis_bits` bits: bit ``k`` is set iff two PEs whose positions differ first
    (highest) in bit ``k`` share a segment, i.e. ``seg = g`` with ``g = 0``,
    ``2**g >= n`` or ``g > k``."""
    n_seg = 1 << SEG_BITS
    return Cat(*(Array([Const(int(g == 0 or g > k or (1 << g) >= n), 1) for g in range(n_seg)])[seg]
                 for k in range(vis_bits(n))))


class BroadcastBus(wiring.Component):
    """Resolves one row or column bus from its possible drivers.

    Unsegmented (``seg = 0``), every PE sees the value of the single PE driver, or the
    host lane when ``host_en``, or +0 when nobody drives. With ``seg = g > 0`` switches cut
    the bus into segments of ``2**g`` consecutive PEs that carry independent transfers in
    the same cycle (the micro-op selects one driver per segment); this is what makes a
    log2(nr)-step tree reduction possible. The host lane always drives the whole bus and
    wins over PE drivers (``conflict``).

    Purely combinational: a transfer happens in the cycle it is driven (the operand stage
    of the micro-op that drives it).

    Parameters
    ----------
    width : int
        Data width (the format's width).
    n : int
        Number of PEs on the bus (``nr``).
    vis_in : bool
        Take each receiver's visibility flags from ports ``vis{i}`` (flip-flops the core
        loads with :func:`visibility` of the segmentation beside the ``seg`` register,
        one copy per receiver: FPGA timing, ``docs/fpga.md``, "Timing") instead of decoding them
        here from ``seg``, which then only counts ``hops``. Flag 0, always set, is not a
        port (:func:`vis_port_bits`): a registered copy of it, reset to 0, is an input
        synthesis cannot fold, and on the 4 x 4 core's buses it doubled the resolvers'
        LUTs (an 8-input function of each receiver's bit instead of 7). Its own host enable
        from ports ``host_en{i}`` (flip-flops the core loads beside ``host_en``), so
        ``host_en`` only counts ``hops`` and ``conflict``. Same values.

    Ports
    -----
    data_in{i} : In(width), oe{i} : In(1)
        PE ``i``'s drive value and output enable. ``data_in`` must be +0 when the PE does
        not drive (the value is not gated by ``oe``, which only counts ``hops``).
    seg : In(SEG_BITS)
        Segmentation of this cycle (the operand-stage micro-op's ``rdrv.seg``/``cdrv.seg``).
    vis{i} : In(vis_port_bits(n)), only with ``vis_in`` and ``n > 2``
        Flags 1.. of :func:`visibility` of ``seg``, as receiver ``i``'s own copy.
    host_en{i} : In(1), only with ``vis_in``
        ``host_en``, as receiver ``i``'s own copy.
    host_data : In(width), host_en : In(1)
        Host stream lane driving the bus.
    value{i} : Out(width)
        The value PE ``i`` receives.
    hops : Out(range(n + 1))
        Wire activity this cycle in PE pitches: each active driver counts the length of
        its segment (the host or an unsegmented transfer counts ``n``). The power model
        charges bus energy per hop.
    conflict : Out(1)
        Host and a PE drove the bus in the same cycle (host wins).
    """

    def __init__(self, width: int, n: int, vis_in: bool = False):
        self.width = width
        self.n = n
        self.vis_in = vis_in
        members = {}
        for i in range(n):
            members[f"data_in{i}"] = In(width)
            members[f"oe{i}"] = In(1)
            members[f"value{i}"] = Out(width)
            if vis_in:
                if vis_port_bits(n):
                    members[f"vis{i}"] = In(vis_port_bits(n))
                members[f"host_en{i}"] = In(1)
        members.update(seg=In(SEG_BITS), host_data=In(width), host_en=In(1),
                       hops=Out(range(n + 1)), conflict=Out(1))
        super().__init__(members)

    def drivers(self):
        """List of (data, oe) port pairs, one per PE on the bus."""
        return [(getattr(self, f"data_in{i}"), getattr(self, f"oe{i}")) for i in range(self.n)]

    def values(self):
        return [getattr(self, f"value{i}") for i in range(self.n)]

    def elaborate(self, platform):
        m = Module()
        n = self.n
        drv = self.drivers()
        n_seg = 1 << SEG_BITS
        pe_any = Signal()
        m.d.comb += pe_any.eq(Cat(*(oe for _, oe in drv)).any())
        # A PE that does not drive puts +0 on its data input (PE.row_out / col_out), so
        # the value on PE i's segment is the OR of the data inputs of the PEs sharing it,
        # with no output-enable gating. PE j shares i's segment under segmentation g iff
        # g = 0, 2**g >= n or g > k, k = the highest bit in which i and j differ: one
        # visibility flag per k, decoded once per bus from ``seg`` (or, with ``vis_in``,
        # each receiver's own registered copy), so each value is one AND-OR of the n data
        # inputs and the host lane (FPGA timing: the bus lies on the operand-stage paths).
        if not self.vis_in:
            vis_all = Signal(vis_bits(n), name="vis")
            m.d.comb += vis_all.eq(visibility(self.seg, n))
        for i, out in enumerate(self.values()):
            if not self.vis_in:
                vis = vis_all
            else:   # flag 0 is always set
                vis = Cat(Const(1, 1), getattr(self, f"vis{i}")) if vis_port_bits(n) else Const(1, 1)
            host_en = getattr(self, f"host_en{i}") if self.vis_in else self.host_en
            acc = drv[i][0]
            for j in range(n):
                if j != i:
                    acc = acc | Mux(vis[(i ^ j).bit_length() - 1], drv[j][0], 0)
            m.d.comb += out.eq(Mux(host_en, self.host_data, acc))
        # hops: each active PE driver counts its segment length
        per_g_hops = []
        for g in range(n_seg):
            h = Signal(range(n * n + 1), name=f"hops_g{g}")
            m.d.comb += h.eq(sum((Mux(drv[j][1], segment_len(j, g, n), 0) for j in range(n)), start=Const(0, 1)))
            per_g_hops.append(h)
        m.d.comb += [
            self.hops.eq(Mux(self.host_en, n, Array(per_g_hops)[self.seg])),
            self.conflict.eq(self.host_en & pe_any),
        ]
        return m
