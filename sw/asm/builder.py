"""The assembler's front ends: :func:`assemble` (text) and :class:`Builder` (Python)."""

from __future__ import annotations

import contextlib

from sw.asm.encode import _assemble_items
from sw.asm.errors import AsmError, _caller_pos
from sw.asm.lexer import _tokenize
from sw.asm.operands import _AGU_RE, _DMA_SEL, _SPAD_SEL, _idx
from sw.asm.program import Program
from sw.asm.slots import Slot, _ctl
from sw.asm.statements import _Item, _parse_slots, _parse_text


#: Builder.text's parsed statements by text (texts without constants)
_TEXT_ITEMS: dict = {}


def assemble(text: str, cfg, *, origin: int = 0, file: str | None = None, equ: dict | None = None) -> Program:
    """Assemble ``text`` for ``cfg``; the program is placed at microcode address ``origin``.

    ``equ`` pre-defines ``.equ`` constants (name -> int or operand name).
    Raises :class:`AsmError` (with ``.line``) on any error.
    """
    items = _parse_text(text, file, dict(equ or {}))
    try:
        return _assemble_items(items, cfg, origin)
    except AsmError as e:
        if e.file is None and file is not None:      # an error of the whole program: name its file
            raise AsmError(e.msg, e.line, e.col, e.slot, file) from None
        raise


class Builder:
    """Python API producing the same :class:`Program` as :func:`assemble`.

    ::

        b = Builder(cfg)
        b.agu_base("g0", 0)
        b.agu_stride("g0", "i", 16)
        with b.loop("i", 64, rdb(ar=1, inc=True), mov(4, "memb")):
            b.emit(rda(0, agu="g0", inc=True), mac(0, "mema", "r4"))
            b.emit("@col=1 | mul r1 = row * 1 | rdrv r2 @col=0")   # slot text works too
        b.halt(hout("row", last=True), rdrv("r0", diag=0))
        prog = b.build()

    Every method takes extra slots (slot objects or slot text, ``|``-separated text
    allowed). Errors are :class:`AsmError` naming the line of the Python call.
    """

    def __init__(self, cfg, origin: int = 0):
        self.cfg, self.origin = cfg, origin
        self._items: list[_Item] = []
        self._equ: dict = {}
        self._open: list[str] = []
        self._n = 0

    def equ(self, name: str, value) -> None:
        """Define a constant (int) or operand alias (e.g. ``"r3"``) for slot text."""
        self._equ[name] = value

    def _slots(self, slots, pos) -> list[Slot]:
        out = []
        for s in slots:
            if isinstance(s, Slot):
                s = Slot(s.kind, dict(s.fields), s.ctl, s.text)
                s.slot_no = len(out) + 1
                s.pos = pos
                out.append(s)
            elif isinstance(s, str):
                toks = _tokenize(s, pos.line, pos.file)
                if not toks:
                    continue
                for t in toks:
                    t.col = None
                for ps in _parse_slots(toks, self._equ, pos.file, pos):
                    ps.slot_no = len(out) + 1
                    ps.col = None
                    ps.pos = pos
                    out.append(ps)
            else:
                raise pos.err(f"not a slot: {s!r}")
        return out

    def _instr(self, slots, ctl=None, depth=3) -> int:
        pos = _caller_pos(depth)
        sl = self._slots(slots, pos)
        if ctl is not None:
            c = _ctl(*ctl)
            c.slot_no = len(sl) + 1
            c.pos = pos
            sl.append(c)
        self._items.append(_Item("instr", pos, sl))
        self._n += 1
        return self.origin + self._n - 1

    def emit(self, *slots) -> int:
        """Append one instruction made of ``slots``; returns its address."""
        return self._instr(slots)

    def nop(self) -> int:
        return self._instr(())

    def label(self, name: str) -> None:
        """Label the next instruction."""
        self._items.append(_Item("label", _caller_pos(2), name=name))

    @contextlib.contextmanager
    def loop(self, name: str, count: int, *slots, level: int | None = None):
        """``with b.loop("i", 16, *slots):`` the loop instruction (with ``slots``) and its body."""
        self._instr(slots, ("loop", name, int(count), level), depth=4)
        self._open.append(name)
        yield
        self._open.pop()
        self._items.append(_Item("close", _caller_pos(3)))

    def agu_base(self, agu, value: int, *slots) -> int:
        return self._instr(slots, ("agu_base", _idx(agu, _AGU_RE, "address generator"), int(value)))

    def agu_stride(self, agu, loop, value: int, *slots) -> int:
        """``loop``: a loop name or an int level."""
        return self._instr(slots, ("agu_stride", _idx(agu, _AGU_RE, "address generator"), loop, int(value)))

    def jump(self, label: str, *slots) -> int:
        return self._instr(slots, ("jump", label))

    def halt(self, *slots) -> int:
        return self._instr(slots, ("halt",))

    def spad(self, which: str, value: int, *slots) -> int:
        """``spad rd|wr|rw = value`` (with ``slots`` doing work in the same instruction)."""
        if which not in _SPAD_SEL:
            raise AsmError(f"spad pointer must be rd, wr or rw, got {which!r}")
        return self._instr(slots, ("spad", which, int(value)))

    def dma_ptr(self, which: str, value: int, *slots) -> int:
        """``dma dram|spad|both = value``: set the DMA engine's DRAM / scratchpad / both
        addresses (with ``slots`` in the same instruction, e.g. ``dma("load", n)``)."""
        if which not in _DMA_SEL:
            raise AsmError(f"dma address must be dram, spad or both, got {which!r}")
        return self._instr(slots, ("dma", which, int(value)))

    def text(self, src: str) -> None:
        """Append assembly text (whole statements; a loop may open in one call and close
        in another). Errors in it name lines relative to ``src``."""
        if self._equ or ".equ" in src:
            items = _parse_text(src, None, self._equ)
        else:
            # without constants the parse depends on the text alone (the back end does not
            # modify the parsed statements), so the texts repeated across programs, e.g.
            # the same collective on every core of a chip, are parsed once
            items = _TEXT_ITEMS.get(src)
            if items is None:
                items = _parse_text(src, None, {})
                if len(_TEXT_ITEMS) >= 512:
                    _TEXT_ITEMS.pop(next(iter(_TEXT_ITEMS)))
                _TEXT_ITEMS[src] = items
        self._n += sum(1 for it in items if it.kind == "instr")
        self._items.extend(items)

    def build(self) -> Program:
        if self._open:
            raise AsmError(f"loop {self._open[-1]!r} is still open")
        return _assemble_items(self._items, self.cfg, self.origin)
