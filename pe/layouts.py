"""Amaranth layouts of the architecture's control words and event strobes.

The encodings are defined once, in plain Python, in :mod:`arch` (:mod:`arch.microop`,
:mod:`arch.isa`, :mod:`arch.counters`); the RTL builds its ``amaranth.lib.data``
layouts from them here, field for field and bit for bit.
"""

from __future__ import annotations

from functools import lru_cache

from amaranth.lib import data

from arch import isa, microop
from arch.counters import EVENT_FIELDS
from arch.layout import StructLayout

__all__ = ["to_amaranth", "uop_layout", "instr_layout", "EVENT_LAYOUT"]


@lru_cache(maxsize=None)
def to_amaranth(layout: StructLayout) -> data.StructLayout:
    """The ``amaranth.lib.data.StructLayout`` of an :class:`arch.layout.StructLayout`."""
    return data.StructLayout({n: to_amaranth(f.shape) if isinstance(f.shape, StructLayout) else f.shape
                              for n, f in layout})


def uop_layout(addr_bits: int, sel_bits: int, wp: bool = False) -> data.StructLayout:
    """The PE micro-op word (:func:`arch.microop.uop_layout`) as an Amaranth layout."""
    return to_amaranth(microop.uop_layout(addr_bits, sel_bits, wp))


def instr_layout(cfg) -> data.StructLayout:
    """The microcode word (:func:`arch.isa.instr_layout`) as an Amaranth layout."""
    return to_amaranth(isa.instr_layout(cfg))


#: Per-cycle event strobes of a PE (:data:`arch.counters.EVENT_FIELDS`, LSB first).
EVENT_LAYOUT = data.StructLayout(dict(EVENT_FIELDS))
