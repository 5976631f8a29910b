"""Statements of assembly text: lines, continuations, labels, loop blocks, ``.equ``.

:func:`_parse_text` turns source text into a list of :class:`_Item` (instructions with
their parsed slots, labels and loop closings) for the back end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sw.asm.errors import AsmError, Pos
from sw.asm.lexer import Tok, _tokenize
from sw.asm.slot_parser import _HANDLERS, _SlotParser
from sw.asm.slots import Slot

_OPERAND_NAME = re.compile(r"(r\d+|ar\d+|g\d+|mema|memb|row|col|zero|nzero|one)$")


def _split_slots(toks, file) -> list[list[Tok]]:
    slots, cur = [], []
    for t in toks:
        if t.text == "|":
            if not cur:
                raise AsmError("empty slot", t.line, t.col, len(slots) + 1, file)
            slots.append(cur)
            cur = []
        else:
            cur.append(t)
    if not cur:
        last = toks[-1]
        raise AsmError("empty slot", last.line, last.col, len(slots) + 1, file)
    slots.append(cur)
    return slots


def _parse_slots(toks, equ, file, pos, src_lines=None) -> list[Slot]:
    out = []
    for n, stoks in enumerate(_split_slots(toks, file), 1):
        a, z = stoks[0], stoks[-1]
        if src_lines and a.line == z.line and a.col is not None:
            text = src_lines[a.line - 1][a.col - 1:z.col - 1 + len(z.text)]
        else:
            text = " ".join(t.text for t in stoks)
        for s in _SlotParser(stoks, equ, file, n).parse():
            s.text = text
            s.pos = Pos(stoks[0].line, stoks[0].col, file)
            s.slot_no = n
            out.append(s)
    return out


@dataclass
class _Item:
    kind: str                  # "instr" | "close" | "label"
    pos: Pos
    slots: list = field(default_factory=list)
    name: str = ""


def _parse_text(text: str, file=None, equ=None) -> list[_Item]:
    equ = {} if equ is None else equ
    items: list[_Item] = []
    pending: list[Tok] = []
    lines = text.splitlines()
    for lineno, rawline in enumerate(lines, 1):
        code = rawline.split(";", 1)[0]
        toks = _tokenize(code, lineno, file)
        if pending:
            toks = pending + toks
            pending = []
        if not toks:
            continue
        if toks[-1].text == "|":          # continuation: the instruction goes on
            pending = toks
            continue
        _parse_statement(toks, items, equ, file, lines)
    if pending:
        t = pending[-1]
        raise AsmError("the last instruction ends with '|' (a continuation with no next line)",
                       t.line, t.col, None, file)
    return items


def _parse_statement(toks, items, equ, file, src_lines=None):
    t0 = toks[0]
    pos = Pos(t0.line, t0.col, file)
    if t0.text.startswith("."):
        if t0.text != ".equ":
            raise AsmError(f"unknown directive {t0.text!r} (only .equ)", t0.line, t0.col, None, file)
        _parse_equ(toks, equ, file)
        return
    i = 0
    while i + 1 < len(toks) and toks[i].kind == "name" and toks[i + 1].text == ":":
        items.append(_Item("label", Pos(toks[i].line, toks[i].col, file), name=toks[i].text))
        i += 2
    toks = toks[i:]
    if not toks:
        return
    if all(t.text == "}" for t in toks):
        for t in toks:
            items.append(_Item("close", Pos(t.line, t.col, file)))
        return
    for t in toks:
        if t.text == "}":
            raise AsmError("'}' must be on a line of its own", t.line, t.col, None, file)
    opens = toks[-1].text == "{"
    if opens:
        toks = toks[:-1]
        if not toks:
            t = t0 if t0.text == "{" else toks[-1]
            raise AsmError("'{' without a loop (write: loop NAME COUNT {)", t.line, t.col, None, file)
    for t in toks:
        if t.text in ("{", ":"):
            raise AsmError(f"unexpected {t.text!r}" + (" ('{' must end a loop line)" if t.text == "{" else ""),
                           t.line, t.col, None, file)
    slots = _parse_slots(toks, equ, file, pos, src_lines)
    is_loop = any(s.ctl and s.ctl[0] == "loop" for s in slots)
    if opens and not is_loop:
        t = toks[-1]
        raise AsmError("'{' without a loop slot on the line (write: loop NAME COUNT {)",
                       t.line, t.col + len(t.text), None, file)
    if is_loop and not opens:
        s = next(s for s in slots if s.ctl and s.ctl[0] == "loop")
        raise AsmError("a loop line must end with '{'", s.pos.line, s.col, s.slot_no, file)
    items.append(_Item("instr", Pos(toks[0].line, toks[0].col, file), slots))


def _parse_equ(toks, equ, file):
    d = toks[0]
    if len(toks) < 3 or toks[1].kind != "name":
        raise AsmError(".equ needs a name and a value: .equ NAME VALUE", d.line, d.col, None, file)
    name = toks[1].text
    rest = toks[2:]
    if rest and rest[0].text == "=":
        rest = rest[1:]
    if not rest:
        raise AsmError(f".equ {name} has no value", d.line, d.col, None, file)
    if name in equ:
        raise AsmError(f"duplicate .equ {name!r}", toks[1].line, toks[1].col, None, file)
    if _OPERAND_NAME.match(name) or name in _HANDLERS or name in ("level", "stride", "gate", "last", "if", "noread"):
        raise AsmError(f".equ cannot redefine the reserved name {name!r}", toks[1].line, toks[1].col, None, file)
    if len(rest) == 1 and rest[0].kind == "name":
        t = rest[0]
        if t.text in equ:
            equ[name] = equ[t.text]
        elif _OPERAND_NAME.match(t.text):
            equ[name] = t.text
        else:
            raise AsmError(f"undefined constant or operand {t.text!r}", t.line, t.col, None, file)
        return
    p = _SlotParser(rest, equ, file, None)
    v = p.expr()
    p.end()
    equ[name] = v
