"""The link interfaces (rtl/streams.py): host streams, ring links, the AXI4-Stream top."""

from amaranth.lib import stream, wiring

from arch.config import PRESETS
from rtl.chip import Chip
from rtl.core import Core
from rtl.ring_crossing import RingCrossing
from rtl.streams import AxisTop, RingLink, beat_layout, has_links

AXIS = {"s_axis_tdata", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast",
        "m_axis_tdata", "m_axis_tvalid", "m_axis_tready", "m_axis_tlast"}


def _used(*objs):
    """Mark designs built only to look at their interfaces as used (no warning)."""
    for o in objs:
        o._MustUse__used = True


def _ports(top):
    _used(top)
    return {name: member.flow for name, member in top.signature.members.items()}


def test_core_ports_are_interfaces_with_axis_names_at_the_top():
    cfg = PRESETS["chip-tiny"]
    core = Core(cfg)
    assert isinstance(core.signature.members["s_axis"].signature, stream.Signature)
    assert core.signature.members["ring_out"].signature == RingLink(cfg.nr * cfg.fmt.width, cfg.ring_fifo_depth)
    assert has_links(core)
    ports = _ports(AxisTop(core))
    ring = {f"ring_{d}_{f}" for d in ("in", "out") for f in ("data", "en", "level")}
    assert set(ports) == AXIS | ring | {"cmd_ready"}
    ins = {n for n, f in ports.items() if f == wiring.In}
    assert ins == {"s_axis_tdata", "s_axis_tvalid", "s_axis_tlast", "m_axis_tready",
                   "ring_in_data", "ring_in_en", "ring_out_level"}
    top = AxisTop(core)
    _used(top)
    assert len(top.s_axis_tdata) == cfg.host_width and len(top.ring_in_level) == len(core.ring_in.level)


def test_chip_ports_carry_tdest_and_tid():
    cfg = PRESETS["chip-tiny"]
    chip = Chip(cfg)
    assert chip.signature.members["s_axis"].signature.members["payload"].shape == beat_layout(cfg.host_width, dest=2)
    ports = _ports(AxisTop(chip))
    assert set(ports) == AXIS | {"s_axis_tdest", "m_axis_tid"}
    assert ports["s_axis_tdest"] == wiring.In and ports["m_axis_tid"] == wiring.Out


def test_ring_links_connect_core_to_crossing_to_core():
    """``wiring.connect`` joins core -> core and core -> crossing -> core (the ports of
    each link match in width and level range)."""
    from amaranth import Module

    from arch.config import ArchConfig
    from arch.hetero import Crossing

    a, b = ArchConfig(nr=2, cores=2), ArchConfig(nr=4, cores=2)
    m = Module()
    c0, c1, c2 = Core(a), Core(a), Core(b)
    xc = RingCrossing(Crossing(1, 2, a, b))
    wiring.connect(m, c0.ring_out, c1.ring_in)
    wiring.connect(m, c1.ring_out, xc.ring_in)
    wiring.connect(m, xc.ring_out, c2.ring_in)
    _used(m, c0, c1, c2, xc)
