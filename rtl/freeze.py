"""A freeze (clock enable) spread over copies of its flip-flop: one net per part of a unit.

A core freezes each PE in a bubble with one clock enable on every register of the PE
(:class:`amaranth.hdl.EnableInserter`). On an FPGA that enable is one net from one
flip-flop to about 1,500 clock-enable, write-enable and LUT pins spread over the PE's
area: in a routed 4 x 4 core its farthest pins see it 8.5 ns after the clock edge, and
every register with an enable of its own gets it through one more LUT
(docs/fpga-timing.md, session 38).
:func:`split_freeze` applies the same enable from several flip-flops that hold the same
value in every cycle, each to a part of the unit, the way a synthesis tool replicates a
high-fanout register per hierarchy: the cycle behaviour is that of one enable.

>>> m.submodules.pe = split_freeze(PE(cfg, row=0, col=0, issue_in=True), bubble_next)  # doctest: +SKIP
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, EnableInserter, Fragment, Signal
from amaranth.hdl._ast import _StatementList
from amaranth.hdl._xfrm import LHSMaskCollector

__all__ = ["FREEZE_CHUNK", "freeze_parts", "split_freeze"]

#: register bits of a unit's own statements per enable copy
FREEZE_CHUNK = 256


def _bits(stmt) -> int:
    """Register bits a (top-level) statement assigns."""
    c = LHSMaskCollector()
    c.visit_stmt(stmt)
    return sum((len(sig) if stop is None else stop - start) for sig, start, stop in c.chunks())


def freeze_parts(fragment, domain: str = "sync") -> list:
    """How :func:`split_freeze` divides an elaborated ``fragment``: a list of parts, each
    ``("statements", [indices of its top-level statements of domain])`` (consecutive
    statements, about :data:`FREEZE_CHUNK` register bits each) or ``("submodules",
    [names])`` (each submodule with registers of its own; the memories' ports share one
    part, since each port has one enable gate)."""
    stmts = list(fragment.statements.get(domain, []))
    parts = []
    cur, bits = [], 0
    for i, s in enumerate(stmts):
        cur.append(i)
        bits += _bits(s)
        if bits >= FREEZE_CHUNK:
            parts.append(("statements", cur))
            cur, bits = [], 0
    if cur:
        parts.append(("statements", cur))
    mems, others = [], []
    for sub, name, _ in fragment.subfragments:
        (others if type(sub) is Fragment else mems).append(name)
    parts += [("submodules", [n]) for n in others]
    if mems:
        parts.append(("submodules", mems))
    return parts


class _SplitFreeze(Elaboratable):
    """The elaboratable :func:`split_freeze` returns."""

    def __init__(self, unit, freeze_next, domain):
        self._unit = unit
        self._freeze_next = freeze_next
        self._domain = domain

    def __getattr__(self, attr):
        return getattr(self._unit, attr)

    def elaborate(self, platform):
        frag = Fragment.get(self._unit, platform)
        dom = self._domain
        parts = freeze_parts(frag, dom)
        stmts = list(frag.statements.get(dom, []))
        # the copies: loaded every cycle, outside every enable (no reset: ``freeze_next``
        # is a flip-flop's copy, low while the core is in reset)
        copies = [Signal(name=f"freeze{k}", reset_less=True) for k in range(len(parts))]
        en_of_sub = {}
        wrapped = []
        for (kind, items), cp in zip(parts, copies):
            if kind == "submodules":
                en_of_sub.update(dict.fromkeys(items, ~cp))
                continue
            # a part's statements (consecutive, so the order and with it the priority of
            # a register assigned in two parts are kept) under the part's enable
            pf = Fragment()
            pf.add_statements(dom, [stmts[i] for i in items])
            wrapped += list(EnableInserter({dom: ~cp})(pf).statements[dom])
        frag.statements[dom] = _StatementList(wrapped)
        frag.add_statements(dom, [cp.eq(self._freeze_next) for cp in copies])
        frag.subfragments = [(EnableInserter({dom: en_of_sub[name]})(sub), name, src_loc)
                             for sub, name, src_loc in frag.subfragments]
        return frag


def split_freeze(unit, freeze_next, domain: str = "sync"):
    """``unit`` frozen (its ``domain`` registers and memory ports disabled) in every cycle
    after one in which ``freeze_next`` is high, through one flip-flop copy of
    ``freeze_next`` per part of the unit (:func:`freeze_parts`; signals ``freeze<k>`` in
    the unit's module, which a build keeps apart: ``rtl.fpga.keep_pe_ffs``).

    The same cycle behaviour as ``EnableInserter(~r)(unit)`` with ``r`` a register
    loaded with ``freeze_next`` every cycle; only the enables' fan-out differs."""
    return _SplitFreeze(unit, freeze_next, domain)
