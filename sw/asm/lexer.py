"""Tokens of the assembly language."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sw.asm.errors import AsmError

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>0[xX][0-9a-fA-F_]+|0[bB][01_]+|\d[\d_]*)
  | (?P<name>\.?[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\+\+|\+=|-=|<<|>>|[-+*/%()\[\]=@,:{}|])
""", re.X)


@dataclass
class Tok:
    kind: str     # num, name, op
    text: str
    line: int
    col: int
    value: int = 0


def _tokenize(code: str, line: int, file) -> list[Tok]:
    out = []
    i = 0
    while i < len(code):
        m = _TOKEN.match(code, i)
        if not m:
            raise AsmError(f"unexpected character {code[i]!r}", line, i + 1, None, file)
        kind = m.lastgroup
        if kind != "ws":
            t = Tok(kind, m.group(), line, i + 1)
            if kind == "num":
                try:
                    t.value = int(t.text.replace("_", ""), 0)
                except ValueError:
                    raise AsmError(f"invalid number {t.text!r}", line, i + 1, None, file) from None
            out.append(t)
        i = m.end()
    return out
