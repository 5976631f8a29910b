"""Interfaces of the cores' links: the host streams and the ring link.

* Host streams (AXI4-Stream): :func:`host_stream`, an :class:`amaranth.lib.stream.Signature`
  whose payload is :func:`beat_layout` (``data``, ``last`` and, on a chip, ``dest`` /
  ``id``). ``valid`` / ``ready`` are AXI4-Stream's ``tvalid`` / ``tready``.
* Ring link: :class:`RingLink`, credit-based and so without ``ready``: the sender drives
  ``data`` and ``en`` (a beat pushed into the receiver's FIFO this cycle), the receiver
  drives ``level`` back (the beats in its FIFO, which the sender's credit check reads).
* :class:`AxisTop`: the Verilog top-level adapter. It names the ports of a component's
  streams and ring links as AXI4-Stream does (``s_axis_tdata``, ``s_axis_tvalid``,
  ``s_axis_tready``, ``s_axis_tlast``, ``s_axis_tdest``, ``m_axis_tid`` ...; ``ring_in_data``
  ...), the names cocotbext-axi's ``AxiStreamBus.from_prefix`` and the testbenches use.
  :func:`rtl.verilog.write_verilog` applies it to every component it converts.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.dma import AxiMaster

__all__ = ["beat_layout", "host_stream", "RingLink", "ring_link", "AxisTop", "has_links"]


def beat_layout(width: int, *, dest: int = 0, id: int = 0) -> data.StructLayout:
    """Payload of a host stream: one AXI4-Stream beat, ``data`` (``tdata``, ``width``
    bits) and ``last`` (``tlast``), plus ``dest`` (``tdest``) / ``id`` (``tid``) when
    their widths are nonzero."""
    fields = {"data": width, "last": 1}
    if dest:
        fields["dest"] = dest
    if id:
        fields["id"] = id
    return data.StructLayout(fields)


def host_stream(width: int, *, dest: int = 0, id: int = 0) -> stream.Signature:
    """An AXI4-Stream host stream (from the source's view): payload :func:`beat_layout`,
    ``valid`` and ``ready``."""
    return stream.Signature(beat_layout(width, dest=dest, id=id))


class RingLink(wiring.Signature):
    """A ring link from the sender's view: ``Out`` ``data`` (``width`` bits) and ``en``
    (a beat pushed into the receiver's FIFO at the end of the cycle), ``In`` ``level``
    (the receiver's FIFO level, ``range(depth + 1)``). There is no ``ready``: the sender
    pushes only when its credit check (``level`` plus its pushes in flight) leaves room.
    A core's ``ring_out`` is ``Out(RingLink)``, its ``ring_in`` ``In(RingLink)``;
    ``wiring.connect`` joins one to the other."""

    def __init__(self, width: int, depth: int):
        self.width, self.depth = width, depth
        super().__init__({"data": Out(width), "en": Out(1), "level": In(range(depth + 1))})

    def __eq__(self, other):
        return isinstance(other, RingLink) and (self.width, self.depth) == (other.width, other.depth)

    def __repr__(self):
        return f"RingLink({self.width}, {self.depth})"


def ring_link(cfg) -> RingLink:
    """The ring link of a core of ``cfg``: ``nr`` lanes of ``fmt.width`` bits,
    ``cfg.ring_fifo_depth`` beats of credit."""
    return RingLink(cfg.nr * cfg.fmt.width, cfg.ring_fifo_depth)


def _flat_name(path, sig_members) -> str:
    """The Verilog name of a port at ``path`` of a component's signature: a host
    stream's ``valid`` / ``ready`` / payload field ``f`` -> ``<name>_tvalid`` / ``_tready``
    / ``_t<f>``; a ring link's ``data`` -> ``<name>_data``, an AXI4 master port's
    (:class:`rtl.dma.AxiMaster`, one per core in an array) ``awaddr`` ->
    ``<name>_<k>_awaddr``; a plain port keeps its name;
    any other interface's ports keep Amaranth's names (``a__b``)."""
    if len(path) == 1:
        return path[0]
    member = sig_members[path[0]]
    if isinstance(member.signature, stream.Signature):
        return f"{path[0]}_t{path[-1]}"
    if isinstance(member.signature, (RingLink, AxiMaster)):
        return "_".join(map(str, path))
    return "__".join(map(str, path))


def has_links(component) -> bool:
    """``component`` has a host stream or ring link member (:class:`AxisTop` renames
    its ports)."""
    sig = getattr(component, "signature", None)
    if not isinstance(sig, wiring.Signature):
        return False
    return any(m.is_signature and isinstance(m.signature, (stream.Signature, RingLink))
               for m in sig.members.values())


class AxisTop(wiring.Component):
    """A component with its stream and ring-link ports flattened to AXI4-Stream names.

    Parameters
    ----------
    inner : wiring.Component
        The design (:class:`rtl.core.Core`, :class:`rtl.chip.Chip`, ...). Its
        ``elaborate`` result is this top's module, so the design's hierarchy and signal
        names are unchanged (no extra level); the adapter adds only wires.

    Ports
    -----
    For each member of ``inner``'s signature: a host stream ``s`` (an
    :class:`amaranth.lib.stream.Signature`) becomes ``s_tvalid``, ``s_tready`` and
    ``s_t<field>`` per payload field (``s_axis_tdata``, ``s_axis_tlast``,
    ``s_axis_tdest``, ``m_axis_tid``); a ring link ``r`` with members ``x`` becomes
    ``r_x`` (``ring_in_data``, ``ring_out_level``), an array ``p`` of AXI4 master
    ports (:class:`rtl.dma.AxiMaster`) ``p_<k>_x`` (``m_axi_0_awaddr``); a plain port
    keeps its name.
    Directions as in ``inner``. No latency: wires only.
    """

    def __init__(self, inner):
        self.inner = inner
        inner._MustUse__used = True   # elaborated by this top, in place: no unused warning
        members = inner.signature.members
        self._links = []     # (flat name, inner value, flow)
        ports = {}
        for path, member, value in inner.signature.flatten(inner):
            if isinstance(value, data.View) and isinstance(members[path[0]].signature, stream.Signature):
                for fname, _field in value.shape():
                    name = _flat_name((*path[:-1], fname), members)
                    v = value[fname]
                    ports[name] = member.flow(len(v))
                    self._links.append((name, v, member.flow))
                continue
            name = _flat_name(path, members)
            ports[name] = member.flow(member.shape, init=member.init)
            self._links.append((name, value, member.flow))
        super().__init__(ports)

    def elaborate(self, platform):
        inner = self.inner
        m = inner.elaborate(platform)
        if not isinstance(m, Module):
            top = Module()
            top.submodules.inner = m
            m = top
        for name, v, flow in self._links:
            port = getattr(self, name)
            m.d.comb += (v.eq(port) if flow == In else port.eq(v))
        return m
