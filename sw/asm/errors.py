"""Assembly errors and source positions.

An :class:`AsmError` names the line (and column / slot when known) of the source text,
or, for the :class:`~sw.asm.Builder`, the line of the Python call that made the
instruction.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from arch.errors import CaterpillarError

#: directory of the assembler's modules: frames in them are skipped when looking for
#: the Python line that called the Builder
_HERE = os.path.dirname(__file__)


class AsmError(CaterpillarError):
    """An assembly error.

    Attributes
    ----------
    msg : str
        The message without the position.
    line : int or None
        1-based source line (for the :class:`Builder`, the line of the Python call).
    col : int or None
        1-based column of the offending token or slot, when known.
    slot : int or None
        1-based slot number within the instruction, when known.
    file : str or None
        Source file name, when known.
    """

    def __init__(self, msg, line=None, col=None, slot=None, file=None):
        self.msg, self.line, self.col, self.slot, self.file = msg, line, col, slot, file
        super().__init__(self._format())

    def _format(self):
        loc = ""
        if self.line is not None:
            loc = f"{self.file}:{self.line}" if self.file else f"line {self.line}"
            if self.col is not None:
                loc += f":{self.col}" if self.file else f", col {self.col}"
        elif self.file:
            loc = self.file
        if self.slot is not None:
            loc += f"{' ' if loc else ''}(slot {self.slot})"
        return f"{loc}: {self.msg}" if loc else self.msg


@dataclass(frozen=True)
class Pos:
    line: int | None = None
    col: int | None = None
    file: str | None = None

    def err(self, msg, slot=None, col=None):
        return AsmError(msg, self.line, self.col if col is None else col, slot, self.file)


def _caller_pos(depth=2) -> Pos:
    f = sys._getframe(depth)
    while f is not None and (os.path.dirname(f.f_code.co_filename) == _HERE
                             or f.f_code.co_filename == contextlib.__file__):
        f = f.f_back
    return Pos(f.f_lineno, None, f.f_code.co_filename) if f is not None else Pos()
