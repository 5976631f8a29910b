"""Bit layouts of control words, in plain Python.

:class:`StructLayout` lays named fields out LSB first, in order, as Amaranth's
``amaranth.lib.data.StructLayout`` does (the RTL converts one to the other with
:func:`pe.layouts.to_amaranth`, so both agree bit for bit). A field is an unsigned width
or a nested layout.
"""

from __future__ import annotations

__all__ = ["Field", "StructLayout"]


class Field:
    """One field of a :class:`StructLayout`: its ``shape`` (a width or a nested layout)
    and its bit ``offset``."""

    __slots__ = ("shape", "offset")

    def __init__(self, shape, offset: int):
        self.shape = shape
        self.offset = offset

    @property
    def width(self) -> int:
        return self.shape.size if isinstance(self.shape, StructLayout) else self.shape

    def __eq__(self, other):
        return isinstance(other, Field) and (self.shape, self.offset) == (other.shape, other.offset)

    def __hash__(self):
        return hash((self.shape, self.offset))

    def __repr__(self):
        return f"Field({self.shape!r}, offset={self.offset})"


class StructLayout:
    """Named fields packed LSB first: ``StructLayout({"op": 3, "sub": StructLayout(...)})``.

    Iterating gives ``(name, Field)`` pairs in bit order; ``layout[name]`` a
    :class:`Field`; ``size`` the total width.
    """

    __slots__ = ("_fields", "size")

    def __init__(self, fields: dict):
        self._fields = {}
        offset = 0
        for name, shape in fields.items():
            if isinstance(shape, StructLayout):
                width = shape.size
            elif isinstance(shape, int) and not isinstance(shape, bool) and shape >= 0:
                width = shape
            else:
                raise TypeError(f"field {name!r}: a width (int >= 0) or a StructLayout, got {shape!r}")
            self._fields[name] = Field(shape, offset)
            offset += width
        self.size = offset

    def __iter__(self):
        return iter(self._fields.items())

    def __getitem__(self, name: str) -> Field:
        return self._fields[name]

    def __contains__(self, name: str) -> bool:
        return name in self._fields

    def __eq__(self, other):
        return isinstance(other, StructLayout) and list(self) == list(other)

    def __hash__(self):
        return hash(tuple((n, f.shape) for n, f in self))

    def __repr__(self):
        return "StructLayout({" + ", ".join(f"{n!r}: {f.shape!r}" for n, f in self) + "})"
