"""Assembler, disassembler and microcode files for the core's instruction set.

The language is specified in ``docs/isa.md``. In short: one instruction per line,
made of *slots* separated by ``|``; every slot sets one part of the micro-op or of the
sequencer control field::

    .equ N 64
    start:
        agu g0 = 0
        agu g0 stride i = 16                      ; g0 advances by 16 per iteration of i
        rdb [ar1]++ | mov r4 = memb | loop i N {  ; the LOOP instruction also does work
            rda [ar0 + g0]++ | mac r0 += mema * r4
            @col=1 | mul r1 = row * 1 | rdrv r2 @col=0
        }
        hout row last | rdrv r0 @diag=0 | halt

Three entry points produce the same :class:`Program` (a list of
:class:`~arch.isa.Instruction`):

* :func:`assemble` (text),
* :class:`Builder` (Python API; slots from the constructor functions of this module,
  e.g. ``fma``, ``rda``, ``hout``, or slot text),
* :func:`read_hex` + :func:`decode_words` (microcode files).

:func:`disassemble` prints text that :func:`assemble` turns back into the same program.
Every error is an :class:`AsmError` naming the line (and column / slot when known).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from arch import microop as _microop
from arch.microop import ArOp, Gate, MvOp, MicroOp, PredMode, Src, uop_fields

#: width of the segment fields pred.seg / rdrv.seg / cdrv.seg (of micro-op layouts that have them)
SEG_BITS = getattr(_microop, "SEG_BITS", 3)
from arch.isa import SPAD_RD, SPAD_WR, HostDir, Instruction, SeqOp, instr_layout

__all__ = [
    "AsmError", "Program", "LoopInfo", "Builder", "assemble", "disassemble",
    "encode_program", "decode_words", "write_hex", "read_hex",
    # slot constructors (Builder API)
    "Slot", "nop", "pred", "fma", "mac", "mul", "add", "mov", "relu", "mask", "rdrv", "cdrv",
    "rda", "rdb", "wra", "wrb", "ar_set", "ar_add", "ar_stride", "hin", "hout", "rin", "rout", "sin", "sout", "raw",
]

LOOP_NAMES = "ijklmnop"   # names the disassembler gives to loop levels 0..7


# ======================================================================================
# errors and positions
# ======================================================================================
class AsmError(Exception):
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
    while f is not None and f.f_code.co_filename in (__file__, contextlib.__file__):
        f = f.f_back
    return Pos(f.f_lineno, None, f.f_code.co_filename) if f is not None else Pos()


# ======================================================================================
# slots
# ======================================================================================
@dataclass
class Slot:
    """One slot of an instruction: fields it sets (all of them claimed, zeros included)
    plus, for control slots, a control item resolved by the assembler.

    ``fields``: flat micro-op fields (``fpu_en``, ``ra_off`` ...) and ctl fields (``hin``,
    ``ag_ra`` ...). ``ctl``: ``("loop", name, count, level|None)``, ``("agu_base", k, v)``,
    ``("agu_stride", k, loop_name|int level, v)``, ``("jump", label)`` or ``("halt",)``.
    """

    kind: str
    fields: dict = field(default_factory=dict)
    ctl: tuple | None = None
    text: str = ""
    pos: Pos | None = None
    col: int | None = None
    slot_no: int | None = None

    def __str__(self):
        return self.text or _slot_text(self)


_UNIT = {
    "pred": "the predicate", "fpu": "the FMA unit", "mv": "the move unit",
    "rdrv": "the row-bus driver", "cdrv": "the column-bus driver",
    "ra": "the SRAM A read port", "rb": "the SRAM B read port",
    "wa": "the SRAM A write port", "wb": "the SRAM B write port",
    "ar": "the address-register update", "hin": "the stream input (hin/rin/sin)",
    "hout": "the stream output (hout/rout/sout)", "hlast": "the stream output (hout/rout/sout)",
    "rin": "the stream input (hin/rin/sin)", "rout": "the stream output (hout/rout/sout)",
    "sin": "the stream input (hin/rin/sin)", "sout": "the stream output (hout/rout/sout)",
    "ctl": "the sequencer control (one loop/agu/jump/halt/spad per instruction)",
}


def _unit_of(fname):
    if fname.startswith("ag_"):
        return _UNIT[fname[3:]]
    if fname in ("op", "lvl", "agu", "target", "imm"):
        return _UNIT["ctl"]
    return _UNIT.get(fname.split("_")[0], fname)


# -- operands -------------------------------------------------------------------------
_SRC_WORDS = {"mema": Src.MEMA, "memb": Src.MEMB, "row": Src.ROW, "col": Src.COL,
              "zero": Src.ZERO, "nzero": Src.NZERO, "one": Src.ONE}
_SRC_PRINT = {Src.MEMA: "mema", Src.MEMB: "memb", Src.ROW: "row", Src.COL: "col",
              Src.ZERO: "0", Src.NZERO: "-0", Src.ONE: "1"}
_SRC_HELP = "r0..r15, mema, memb, row, col, 0, -0, 1"
_REG_RE = re.compile(r"r(\d+)$")
_AR_RE = re.compile(r"ar(\d+)$")
_AGU_RE = re.compile(r"g(\d+)$")
_GATES = {"all": Gate.ALL, "pred": Gate.PRED, "rdrv": Gate.RDRV, "cdrv": Gate.CDRV}
_DIRS = {"row": HostDir.ROW, "col": HostDir.COL}


def _src_code(v) -> int:
    """Builder operand -> source code (int code, Src, or text such as 'r3', 'mema', '-0')."""
    if isinstance(v, bool):
        raise AsmError(f"invalid source operand {v!r} (sources: {_SRC_HELP})")
    if isinstance(v, int):
        return int(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("0", "+0"):
            return Src.ZERO
        if s == "-0":
            return Src.NZERO
        if s == "1":
            return Src.ONE
        if s in _SRC_WORDS:
            return _SRC_WORDS[s]
        m = _REG_RE.match(s)
        if m and int(m.group(1)) < 16:
            return int(m.group(1))
    raise AsmError(f"invalid source operand {v!r} (sources: {_SRC_HELP})")


def _reg(v) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        m = _REG_RE.match(v.strip())
        if m:
            return int(m.group(1))
    raise AsmError(f"invalid register {v!r} (expected r0..r15)")


def _idx(v, regex, what) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        m = regex.match(v.strip())
        if m:
            return int(m.group(1))
    raise AsmError(f"invalid {what} {v!r}")


def _src_text(code: int) -> str:
    if 0 <= code < 16:
        return f"r{code}"
    if code in _SRC_PRINT:
        return _SRC_PRINT[code]
    raise ValueError(code)


# -- slot constructors (the Builder API) -------------------------------------------------
def nop() -> Slot:
    """An empty slot (``nop``)."""
    return Slot("nop")


def _seg_of(mod) -> int:
    """Modulus ``2**g`` (or None) -> segment field ``g``."""
    if mod is None:
        return 0
    mod = int(mod)
    if mod < 2 or mod & (mod - 1) or mod > 1 << ((1 << SEG_BITS) - 1):
        raise AsmError(f"index modulus {mod} must be a power of two in 2..{1 << ((1 << SEG_BITS) - 1)}")
    return mod.bit_length() - 1


def pred(mode: str = "all", k: int = 0, mod: int | None = None) -> Slot:
    """Predicate: ``pred("col", 1)`` = ``@col=1``; ``pred("col", 1, mod=2)`` = ``@col%2=1``
    (the odd columns). Modes ``all``, ``col``, ``row``, ``diag``."""
    modes = {"all": PredMode.ALL, "col": PredMode.COL, "row": PredMode.ROW, "diag": PredMode.DIAG}
    if mode not in modes:
        raise AsmError(f"unknown predicate {mode!r} (all, col, row, diag)")
    if mode == "all" and mod is not None:
        raise AsmError("@all takes no index modulus")
    return Slot("pred", {"pred_mode": modes[mode], "pred_k": int(k), "pred_seg": _seg_of(mod)})


_WB_DST = {"mema": 1, "memb": 2}      # arch.microop.FmaWb.MEMA / MEMB


def _fpu(kind, dst, a, b, c) -> Slot:
    wb = _WB_DST.get(dst.strip().lower(), 0) if isinstance(dst, str) else 0
    f = {"fpu_en": 1, "fpu_a": _src_code(a), "fpu_b": _src_code(b), "fpu_c": _src_code(c), "fpu_wb": wb}
    if not wb:               # an SRAM write-back leaves fpu.dst unused (and unclaimed)
        f["fpu_dst"] = _reg(dst)
    return Slot(kind, f)


def fma(dst, a, b, c) -> Slot:
    """``fma rD = a * b + c``; ``dst`` ``"mema"``/``"memb"``: write the result to SRAM A/B
    at this instruction's ``rda``/``rdb`` address instead of a register."""
    return _fpu("fma", dst, a, b, c)


def mac(dst, a, b) -> Slot:
    """``mac rD += a * b`` (``c = rD``); ``mac mema += a * b`` accumulates in SRAM A
    (``c = mema``, the result goes back to the ``rda`` address)."""
    c = dst if isinstance(dst, str) and dst.strip().lower() in _WB_DST else _reg(dst)
    return _fpu("mac", dst, a, b, c)


def mul(dst, a, b) -> Slot:
    """``mul rD = a * b`` (``c = -0``, exact)."""
    return _fpu("mul", dst, a, b, Src.NZERO)


def add(dst, a, c) -> Slot:
    """``add rD = a + c`` (``b = 1``, exact)."""
    return _fpu("add", dst, a, Src.ONE, c)


def mov(dst, src) -> Slot:
    """``mov rD = src``."""
    return Slot("mov", {"mv_op": MvOp.MOV, "mv_src": _src_code(src), "mv_dst": _reg(dst)})


def relu(dst, src) -> Slot:
    """``relu rD = src``."""
    return Slot("relu", {"mv_op": MvOp.RELU, "mv_src": _src_code(src), "mv_dst": _reg(dst)})


def mask(dst, src, msk) -> Slot:
    """``mask rD = src if msk`` (``src`` where ``msk > 0``, else +0)."""
    return Slot("mask", {"mv_op": MvOp.MASK, "mv_src": _src_code(src), "mv_msk": _src_code(msk),
                         "mv_dst": _reg(dst)})


def _drv(bus, src, sel, k, mod=None) -> Slot:
    if mod is not None and sel == "diag":
        raise AsmError(f"a segmented {bus} selects its drivers by {'col' if bus == 'rdrv' else 'row'} "
                       f"index, not diag")
    return Slot(bus, {f"{bus}_en": 1, f"{bus}_diag": int(sel == "diag"), f"{bus}_k": int(k),
                      f"{bus}_src": _src_code(src), f"{bus}_seg": _seg_of(mod)})


def rdrv(src, *, col=None, diag=None, mod=None) -> Slot:
    """Row-bus driver: ``rdrv src @col=k`` (PE with col == k) or ``@diag=k``;
    ``mod=2**g``: ``@col%M=k``, one driver per segment of ``M`` PEs (col mod M == k)."""
    if (col is None) == (diag is None):
        raise AsmError("rdrv needs exactly one of col=k or diag=k")
    return _drv("rdrv", src, "col" if col is not None else "diag", col if col is not None else diag, mod)


def cdrv(src, *, row=None, diag=None, mod=None) -> Slot:
    """Column-bus driver: ``cdrv src @row=k`` (PE with row == k) or ``@diag=k``;
    ``mod``: segmented (see :func:`rdrv`)."""
    if (row is None) == (diag is None):
        raise AsmError("cdrv needs exactly one of row=k or diag=k")
    return _drv("cdrv", src, "row" if row is not None else "diag", row if row is not None else diag, mod)


def _agu_sel(agu) -> int:
    return 0 if agu is None else _idx(agu, _AGU_RE, "address generator (expected g0..g6)") + 1


def _read(port, ar, off, inc, agu, gate, read=True) -> Slot:
    if isinstance(gate, str):
        if gate not in _GATES:
            raise AsmError(f"unknown read gate {gate!r} (all, pred, rdrv, cdrv)")
        gate = _GATES[gate]
    return Slot(port, {f"{port}_en": int(bool(read)), f"{port}_gate": int(gate),
                       f"{port}_ar": _idx(ar, _AR_RE, "address register (expected ar0..ar3)"),
                       f"{port}_inc": int(bool(inc)), f"{port}_off": int(off),
                       f"ag_{port}": _agu_sel(agu)})


def rda(ar=0, off=0, *, inc=False, agu=None, gate="all", read=True) -> Slot:
    """SRAM A read at ``AR[ar] + off (+ AGU)``: ``rda [ar0 + g1 + 4]++ gate=rdrv``.
    ``read=False`` (``noread``): only the address (and ``++``), for ``fma mema = ...``."""
    return _read("ra", ar, off, inc, agu, gate, read)


def rdb(ar=0, off=0, *, inc=False, agu=None, gate="all", read=True) -> Slot:
    """SRAM B read (see :func:`rda`)."""
    return _read("rb", ar, off, inc, agu, gate, read)


def _write(port, src, ar, off, inc, agu) -> Slot:
    return Slot(port, {f"{port}_en": 1, f"{port}_ar": _idx(ar, _AR_RE, "address register (expected ar0..ar3)"),
                       f"{port}_inc": int(bool(inc)), f"{port}_off": int(off),
                       f"{port}_src": _src_code(src), f"ag_{port}": _agu_sel(agu)})


def wra(src, ar=0, off=0, *, inc=False, agu=None) -> Slot:
    """SRAM A write of ``src``: ``wra [ar2 + g0]++ = r3``."""
    return _write("wa", src, ar, off, inc, agu)


def wrb(src, ar=0, off=0, *, inc=False, agu=None) -> Slot:
    """SRAM B write (see :func:`wra`)."""
    return _write("wb", src, ar, off, inc, agu)


def _arop(op, kind, i, v) -> Slot:
    return Slot(kind, {"ar_op": op, "ar_idx": _idx(i, _AR_RE, "address register (expected ar0..ar3)"),
                       "ar_imm": int(v)})


def ar_set(i, v) -> Slot:
    """``arN = v``."""
    return _arop(ArOp.SET, "ar_set", i, v)


def ar_add(i, v) -> Slot:
    """``arN += v``."""
    return _arop(ArOp.ADD, "ar_add", i, v)


def ar_stride(i, v) -> Slot:
    """``stride arN = v``."""
    return _arop(ArOp.STRIDE, "ar_stride", i, v)


def hin(direction) -> Slot:
    """Pop a host input beat onto the ``"row"`` or ``"col"`` buses."""
    if direction not in _DIRS:
        raise AsmError(f"hin direction must be row or col, got {direction!r}")
    return Slot("hin", {"hin": _DIRS[direction]})


def hout(direction, last=False) -> Slot:
    """Push the ``"row"`` or ``"col"`` bus values to the host (``last``: tlast)."""
    if direction not in _DIRS:
        raise AsmError(f"hout direction must be row or col, got {direction!r}")
    return Slot("hout", {"hout": _DIRS[direction], "hlast": int(bool(last))})


def rin(direction) -> Slot:
    """Pop a beat from the ring (sent by the previous core) onto the ``"row"`` or ``"col"``
    buses (the stream-input unit: not with ``hin`` in one instruction)."""
    if direction not in _DIRS:
        raise AsmError(f"rin direction must be row or col, got {direction!r}")
    return Slot("hin", {"hin": _DIRS[direction], "rin": 1})


def rout(direction) -> Slot:
    """Send the ``"row"`` or ``"col"`` bus values to the next core on the ring (the
    stream-output unit: not with ``hout`` in one instruction)."""
    if direction not in _DIRS:
        raise AsmError(f"rout direction must be row or col, got {direction!r}")
    return Slot("hout", {"hout": _DIRS[direction], "rout": 1})


def sin(direction) -> Slot:
    """Read a beat from the core's scratchpad at its read pointer (post-incremented) onto
    the ``"row"`` or ``"col"`` buses (the stream-input unit: not with ``hin`` / ``rin``)."""
    if direction not in _DIRS:
        raise AsmError(f"sin direction must be row or col, got {direction!r}")
    return Slot("hin", {"hin": _DIRS[direction], "sin": 1})


def sout(direction) -> Slot:
    """Write the ``"row"`` or ``"col"`` bus values to the core's scratchpad at its write
    pointer (post-incremented) (the stream-output unit: not with ``hout`` / ``rout``)."""
    if direction not in _DIRS:
        raise AsmError(f"sout direction must be row or col, got {direction!r}")
    return Slot("hout", {"hout": _DIRS[direction], "sout": 1})


def spad(which: str, value: int) -> Slot:
    """``spad rd = N`` / ``spad wr = N`` / ``spad rw = N``: set the scratchpad read / write
    / both pointers (a sequencer control slot, from the next instruction on)."""
    if which not in _SPAD_SEL:
        raise AsmError(f"spad pointer must be rd, wr or rw, got {which!r}")
    return _ctl("spad", which, int(value))


_SPAD_SEL = {"rd": SPAD_RD, "wr": SPAD_WR, "rw": SPAD_RD | SPAD_WR}


def raw(**fields) -> Slot:
    """Set fields by name (micro-op ``group_field`` names or ctl names, not ``op``)."""
    return Slot("raw", {k: int(v) for k, v in fields.items()})


def _ctl(kind, *args) -> Slot:
    return Slot("ctl", {}, (kind, *args))


# ======================================================================================
# configuration-dependent tables
# ======================================================================================
class _Ctx:
    def __init__(self, cfg):
        self.cfg = cfg
        self.uop = {n: w for n, _, w in uop_fields(cfg.addr_bits, cfg.sel_bits)}
        lay = instr_layout(cfg)
        self.ctl = {n: f.width for n, f in lay["ctl"].shape}
        self.signed = {n for n in self.uop if n.endswith("_off") or n == "ar_imm"} | {"imm"}
        self.widths = {**self.uop, **self.ctl}
        self.amod = 1 << cfg.addr_bits
        self.bank = {"a": cfg.mem_a_words, "b": cfg.mem_b_words}


@lru_cache(maxsize=64)
def _ctx(cfg) -> _Ctx:
    return _Ctx(cfg)


# ======================================================================================
# the text front end
# ======================================================================================
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


_OPERAND_NAME = re.compile(r"(r\d+|ar\d+|g\d+|mema|memb|row|col|zero|nzero|one)$")


class _SlotParser:
    """Recursive-descent parser of one slot's tokens."""

    def __init__(self, toks, equ, file, slot_no):
        self.t, self.i, self.equ, self.file, self.slot_no = toks, 0, equ, file, slot_no

    # -- token helpers
    def err(self, msg, tok=None):
        tok = tok or (self.t[self.i] if self.i < len(self.t) else self.t[-1])
        return AsmError(msg, tok.line, tok.col, self.slot_no, self.file)

    def peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def at(self, *texts, k=0):
        p = self.peek(k)
        return p is not None and p.text in texts

    def next(self, what="more"):
        if self.i >= len(self.t):
            last = self.t[-1]
            raise AsmError(f"unexpected end of slot: expected {what}", last.line,
                           None if last.col is None else last.col + len(last.text), self.slot_no,
                           self.file)
        tok = self.t[self.i]
        self.i += 1
        return tok

    def expect(self, text, what=None):
        tok = self.next(repr(text))
        if tok.text != text:
            raise self.err(f"expected {what or repr(text)}, got {tok.text!r}", tok)
        return tok

    def end(self):
        if self.i < len(self.t):
            raise self.err(f"unexpected {self.t[self.i].text!r} at the end of the slot")

    def alias(self, tok) -> str:
        """Name token text with .equ aliases resolved."""
        text = tok.text
        v = self.equ.get(text)
        return v if isinstance(v, str) else text

    # -- operands
    def src(self) -> int:
        tok = self.next("a source operand")
        if tok.text == "-" and self.at("0"):
            self.next()
            return Src.NZERO
        if tok.kind == "num":
            if tok.value == 0:
                return Src.ZERO
            if tok.value == 1:
                return Src.ONE
            raise self.err(f"unknown source operand {tok.text!r} (sources: {_SRC_HELP})", tok)
        if tok.kind == "name":
            name = self.alias(tok)
            if name in _SRC_WORDS:
                return _SRC_WORDS[name]
            m = _REG_RE.match(name)
            if m:
                r = int(m.group(1))
                if r >= 16:
                    raise self.err(f"register {name} does not exist (at most r0..r15)", tok)
                return r
        raise self.err(f"unknown source operand {tok.text!r} (sources: {_SRC_HELP})", tok)

    def dst(self):
        """FMA destination: a register or mema/memb (SRAM write-back)."""
        tok = self.peek()
        if tok is not None and tok.kind == "name" and self.alias(tok) in _WB_DST:
            self.next()
            return self.alias(tok)
        return self.reg()

    def reg(self) -> int:
        tok = self.next("a register")
        m = _REG_RE.match(self.alias(tok)) if tok.kind == "name" else None
        if not m:
            raise self.err(f"expected a destination register r0..r15, got {tok.text!r}", tok)
        r = int(m.group(1))
        if r >= 16:
            raise self.err(f"register r{r} does not exist (at most r0..r15)", tok)
        return r

    def named(self, regex, what):
        tok = self.next(what)
        m = regex.match(self.alias(tok)) if tok.kind == "name" else None
        if not m:
            raise self.err(f"expected {what}, got {tok.text!r}", tok)
        return int(m.group(1)), tok

    def ident(self, what):
        tok = self.next(what)
        if tok.kind != "name" or tok.text.startswith("."):
            raise self.err(f"expected {what}, got {tok.text!r}", tok)
        return tok.text

    # -- expressions: | << >> | + - | * / % | unary | atom
    def expr(self):
        v = self.additive()
        while self.at("<<", ">>"):
            op = self.next().text
            r = self.additive()
            if r < 0:
                raise self.err("negative shift count")
            v = v << r if op == "<<" else v >> r
        return v

    def additive(self):
        v = self.term()
        while self.at("+", "-"):
            op = self.next().text
            r = self.term()
            v = v + r if op == "+" else v - r
        return v

    def term(self):
        v = self.unary()
        while self.at("*", "/", "%"):
            tok = self.next()
            r = self.unary()
            if tok.text != "*" and r == 0:
                raise self.err("division by zero", tok)
            v = v * r if tok.text == "*" else (v // r if tok.text == "/" else v % r)
        return v

    def unary(self):
        if self.at("-"):
            self.next()
            return -self.unary()
        if self.at("+"):
            self.next()
            return self.unary()
        return self.atom()

    def atom(self):
        tok = self.next("a number")
        if tok.kind == "num":
            return tok.value
        if tok.text == "(":
            v = self.expr()
            self.expect(")")
            return v
        if tok.kind == "name":
            if tok.text in self.equ:
                v = self.equ[tok.text]
                if isinstance(v, int):
                    return v
                raise self.err(f"{tok.text!r} is an operand alias ({v}), not a number", tok)
            raise self.err(f"undefined constant {tok.text!r}", tok)
        raise self.err(f"expected a number, got {tok.text!r}", tok)

    def number(self, what="a number"):
        if self.peek() is None:
            self.next(what)
        return self.expr()

    # -- composite operands
    def address(self, port):
        """``[arN (+ gK) (+- expr)...]`` then optional ``++``."""
        self.expect("[", "'[' (an address such as [ar0 + g1 + 4])")
        first = self.peek()
        ar = agu = None
        off = 0
        while True:
            sign = 1
            if self.at("+", "-"):
                sign = 1 if self.next().text == "+" else -1
            tok = self.peek()
            if tok is None:
                self.next("']'")
            name = self.alias(tok) if tok.kind == "name" else None
            if name and _AR_RE.match(name):
                self.next()
                if ar is not None:
                    raise self.err("an address has one address register", tok)
                if sign < 0:
                    raise self.err(f"cannot subtract {name}", tok)
                ar = int(_AR_RE.match(name).group(1))
            elif name and _AGU_RE.match(name):
                self.next()
                if agu is not None:
                    raise self.err("an address adds at most one address generator", tok)
                if sign < 0:
                    raise self.err(f"cannot subtract {name}", tok)
                agu = int(_AGU_RE.match(name).group(1))
            else:
                off += sign * self.term()
            if self.at("]"):
                self.next()
                break
            if not self.at("+", "-"):
                raise self.err("expected '+', '-' or ']' in the address")
        if ar is None:
            raise self.err("the address needs an address register (e.g. [ar0 + 4])", first)
        inc = 0
        if self.at("++"):
            self.next()
            inc = 1
        return ar, agu, off, inc

    def modulus(self):
        """Optional ``%M`` after a selector name."""
        if not self.at("%"):
            return None
        self.next()
        tok = self.peek()
        m = self.unary()
        try:
            _seg_of(m)
        except AsmError as e:
            raise self.err(e.msg, tok) from None
        return m

    def drv_sel(self, bus):
        allowed = ("col", "diag") if bus == "rdrv" else ("row", "diag")
        tok = self.expect("@", f"@{allowed[0]}=k or @diag=k")
        name = self.ident(f"{allowed[0]} or diag")
        if name not in allowed:
            raise self.err(f"{bus} selects its driver with @{allowed[0]}=k or @diag=k, not @{name}", tok)
        mod = self.modulus()
        if mod is not None and name == "diag":
            raise self.err(f"a segmented {bus} selects its drivers by {allowed[0]} index, not diag", tok)
        self.expect("=")
        return name, self.number(), mod

    # -- the slot
    def parse(self) -> list[Slot]:
        out = []
        if self.at("@"):
            col = self.peek().col
            out.append(self.predicate())
            out[-1].col = col
            if self.peek() is None:
                return out
        head = self.next("an operation")
        op = head.text
        handler = _HANDLERS.get(op)
        if handler is None:
            name = self.alias(head) if head.kind == "name" else ""
            if _AR_RE.match(name):
                handler = _SlotParser.p_arop
            else:
                raise self.err(f"unknown operation {op!r}", head)
        s = handler(self, op)
        self.end()
        s.col = head.col
        out.append(s)
        return out

    def predicate(self):
        self.expect("@")
        tok = self.peek()
        name = self.ident("all, col=k, row=k or diag=k")
        if name == "all":
            return pred("all")
        if name not in ("col", "row", "diag"):
            raise self.err(f"unknown predicate @{name} (@all, @col=k, @row=k, @diag=k)", tok)
        mod = self.modulus()
        self.expect("=")
        return pred(name, self.number(), mod)

    def p_nop(self, op):
        return nop()

    def p_fpu(self, op):
        d = self.dst()
        if op == "mac":
            self.expect("+=")
            a = self.src()
            self.expect("*")
            return _fpu(op, d, a, self.src(), d)
        self.expect("=")
        a = self.src()
        if op == "add":
            self.expect("+")
            return _fpu(op, d, a, Src.ONE, self.src())
        self.expect("*")
        b = self.src()
        if op == "mul":
            return _fpu(op, d, a, b, Src.NZERO)
        self.expect("+")
        return _fpu(op, d, a, b, self.src())

    def p_mv(self, op):
        d = self.reg()
        self.expect("=")
        s = self.src()
        if op == "mask":
            self.expect("if", "'if' (mask rD = src if msk)")
            return mask(d, s, self.src())
        return (mov if op == "mov" else relu)(d, s)

    def p_drv(self, op):
        s = self.src()
        sel, k, mod = self.drv_sel(op)
        return _drv(op, s, sel, k, mod)

    def p_read(self, op):
        port = {"rda": "ra", "rdb": "rb"}[op]
        ar, agu, off, inc = self.address(port)
        gate = Gate.ALL
        read = True
        if self.at("noread"):
            self.next()
            read = False
        if self.at("gate"):
            self.next()
            self.expect("=")
            tok = self.peek()
            g = self.ident("a read gate")
            if g not in _GATES:
                raise self.err(f"unknown read gate {g!r} (all, pred, rdrv, cdrv)", tok)
            gate = _GATES[g]
        return _read(port, ar, off, inc, agu, gate, read)

    def p_write(self, op):
        port = {"wra": "wa", "wrb": "wb"}[op]
        ar, agu, off, inc = self.address(port)
        self.expect("=")
        return _write(port, self.src(), ar, off, inc, agu)

    def p_arop(self, op):
        self.i -= 1
        idx, _ = self.named(_AR_RE, "an address register")
        tok = self.next("'=', '+=' or '-='")
        if tok.text == "=":
            return ar_set(idx, self.number())
        if tok.text in ("+=", "-="):
            v = self.number()
            return ar_add(idx, v if tok.text == "+=" else -v)
        raise self.err(f"expected '=', '+=' or '-=' after ar{idx}, got {tok.text!r}", tok)

    def p_stride(self, op):
        idx, _ = self.named(_AR_RE, "an address register")
        self.expect("=")
        return ar_stride(idx, self.number())

    def p_host(self, op):
        tok = self.peek()
        d = self.ident("row or col")
        if d not in _DIRS:
            raise self.err(f"{op} direction must be row or col, got {d!r}", tok)
        if op == "hin":
            return hin(d)
        if op == "rin":
            return rin(d)
        if op == "rout":
            return rout(d)
        if op == "sin":
            return sin(d)
        if op == "sout":
            return sout(d)
        last = False
        if self.at("last"):
            self.next()
            last = True
        return hout(d, last)

    def p_loop(self, op):
        tok = self.peek()
        name = self.ident("a loop name")
        if name == "level":
            raise self.err("'level' is reserved and cannot name a loop", tok)
        count = self.number("a trip count")
        level = None
        if self.at("level"):
            self.next()
            self.expect("=")
            level = self.number("a loop level")
        return _ctl("loop", name, count, level)

    def p_agu(self, op):
        k, _ = self.named(_AGU_RE, "an address generator g0..g6")
        if self.at("stride"):
            self.next()
            if self.at("level"):
                self.next()
                ref = self.number("a loop level")
            else:
                ref = self.ident("a loop name or 'level N'")
            self.expect("=")
            return _ctl("agu_stride", k, ref, self.number())
        self.expect("=", "'=' or 'stride'")
        return _ctl("agu_base", k, self.number())

    def p_jump(self, op):
        return _ctl("jump", self.ident("a label"))

    def p_spad(self, op):
        tok = self.peek()
        which = self.ident("rd, wr or rw")
        if which not in _SPAD_SEL:
            raise self.err(f"spad pointer must be rd, wr or rw, got {which!r}", tok)
        self.expect("=")
        return _ctl("spad", which, self.number("a scratchpad address"))

    def p_halt(self, op):
        return _ctl("halt")

    def p_raw(self, op):
        fields = {}
        if self.peek() is None:
            raise self.err("raw needs field=value pairs")
        while self.peek() is not None:
            tok = self.peek()
            name = self.ident("a field name")
            self.expect("=")
            if name in fields:
                raise self.err(f"raw sets {name} twice", tok)
            fields[name] = self.number()
            if self.at(","):
                self.next()
        s = raw(**fields)
        return s


_HANDLERS = {
    "nop": _SlotParser.p_nop,
    "fma": _SlotParser.p_fpu, "mac": _SlotParser.p_fpu, "mul": _SlotParser.p_fpu, "add": _SlotParser.p_fpu,
    "mov": _SlotParser.p_mv, "relu": _SlotParser.p_mv, "mask": _SlotParser.p_mv,
    "rdrv": _SlotParser.p_drv, "cdrv": _SlotParser.p_drv,
    "rda": _SlotParser.p_read, "rdb": _SlotParser.p_read,
    "wra": _SlotParser.p_write, "wrb": _SlotParser.p_write,
    "stride": _SlotParser.p_stride,
    "hin": _SlotParser.p_host, "hout": _SlotParser.p_host,
    "rin": _SlotParser.p_host, "rout": _SlotParser.p_host,
    "sin": _SlotParser.p_host, "sout": _SlotParser.p_host, "spad": _SlotParser.p_spad,
    "loop": _SlotParser.p_loop, "agu": _SlotParser.p_agu, "jump": _SlotParser.p_jump,
    "halt": _SlotParser.p_halt, "raw": _SlotParser.p_raw,
}


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


# -- statements ------------------------------------------------------------------------
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


# ======================================================================================
# the back end: layout, loops, labels, validation, encoding
# ======================================================================================
@dataclass
class LoopInfo:
    """A loop of an assembled program."""

    name: str
    level: int
    count: int
    pc: int          #: address of the LOOP instruction; the body is pc+1 .. end
    end: int
    line: int | None
    parent: "LoopInfo | None" = None


class Program(list):
    """An assembled program: a list of :class:`~arch.isa.Instruction` (compares equal to
    a plain list of the same instructions) with its metadata.

    Attributes: ``cfg``, ``origin`` (microcode address of the first instruction),
    ``labels`` (name -> address), ``loops`` (:class:`LoopInfo`), ``lines`` (source line
    of each instruction).
    """

    def __init__(self, instrs=(), cfg=None, origin=0, labels=None, loops=None, lines=None):
        super().__init__(instrs)
        self.cfg, self.origin = cfg, origin
        self.labels = labels or {}
        self.loops = loops or []
        self.lines = lines or []

    def words(self) -> list[int]:
        """The microcode words (integers)."""
        return encode_program(self, self.cfg)

    def disassemble(self, **kw) -> str:
        return disassemble(self, self.cfg, origin=self.origin, **kw)


@dataclass
class _Rec:
    pos: Pos
    slots: list
    pc: int
    ctl: tuple | None = None
    loop: LoopInfo | None = None


def _assemble_items(items: list[_Item], cfg, origin=0) -> Program:
    cx = _ctx(cfg)
    depth = cfg.ucode_depth
    if not 0 <= origin < depth:
        raise AsmError(f"origin {origin} is outside the microcode (ucode_depth={depth})")
    labels: dict[str, tuple[int, Pos]] = {}
    recs: list[_Rec] = []
    loops: list[LoopInfo] = []
    stack: list[LoopInfo] = []
    pc = origin
    for it in items:
        if it.kind == "label":
            if it.name in labels:
                first = labels[it.name][1]
                raise it.pos.err(f"duplicate label {it.name!r} (first defined on line {first.line})")
            labels[it.name] = (pc, it.pos)
        elif it.kind == "close":
            if not stack:
                raise it.pos.err("unbalanced '}': no loop is open")
            lp = stack.pop()
            lp.end = pc - 1
            if lp.end == lp.pc:
                raise AsmError(f"loop {lp.name!r} has an empty body", lp.line, None, None, it.pos.file)
            last = recs[-1]
            if last.ctl and last.ctl[0] in ("jump", "halt"):
                raise last.pos.err(f"loop {lp.name!r} (line {lp.line}) ends on a {last.ctl[0]}: a loop body "
                                   f"must not end with jump or halt (add an instruction after it)")
        else:
            if pc >= depth:
                raise it.pos.err(f"program does not fit in the microcode: instruction {pc - origin + 1} "
                                 f"is at address {pc} >= ucode_depth={depth}")
            ctls = [s for s in it.slots if s.ctl]
            if len(ctls) > 1:
                s = ctls[1]
                raise it.pos.err(f"{s.ctl[0]} conflicts with {ctls[0].ctl[0]} (slot {ctls[0].slot_no}): "
                                 f"one loop/agu/jump/halt per instruction", slot=s.slot_no, col=s.col)
            rec = _Rec(it.pos, it.slots, pc, ctls[0].ctl if ctls else None)
            recs.append(rec)
            if rec.ctl and rec.ctl[0] == "loop":
                _, name, count, level = rec.ctl
                s = ctls[0]
                parent = stack[-1] if stack else None
                if any(lp.name == name for lp in stack):
                    raise it.pos.err(f"loop {name!r} is nested inside a loop of the same name",
                                     slot=s.slot_no, col=s.col)
                default = parent.level + 1 if parent else 0
                if level is None:
                    if default >= cfg.n_loops:
                        raise it.pos.err(f"loop nesting deeper than the sequencer's {cfg.n_loops} loop "
                                         f"levels (cfg.n_loops): loop {name!r} would need level {default}",
                                         slot=s.slot_no, col=s.col)
                    level = default
                else:
                    if not 0 <= level < cfg.n_loops:
                        raise it.pos.err(f"loop level {level} out of range 0..{cfg.n_loops - 1} (cfg.n_loops)",
                                         slot=s.slot_no, col=s.col)
                    if parent and level <= parent.level:
                        raise it.pos.err(f"loop {name!r} at level {level} must use a higher level than the "
                                         f"enclosing loop {parent.name!r} (level {parent.level})",
                                         slot=s.slot_no, col=s.col)
                top = (1 << cfg.loop_bits) - 1
                if not 1 <= count <= top:
                    raise it.pos.err(f"loop {name!r}: trip count {count} out of range 1..{top} "
                                     f"(cfg.loop_bits={cfg.loop_bits})", slot=s.slot_no, col=s.col)
                lp = LoopInfo(name, level, count, pc, -1, it.pos.line, parent)
                rec.loop = lp
                loops.append(lp)
                stack.append(lp)
            pc += 1
    if stack:
        lp = stack[-1]
        raise AsmError(f"loop {lp.name!r} opened on line {lp.line} is never closed (missing '}}')",
                       lp.line, None, None, items[-1].pos.file if items else None)
    if not recs:
        raise AsmError("empty program: no instructions")
    last = recs[-1]
    if not (last.ctl and last.ctl[0] in ("halt", "jump")):
        raise last.pos.err("the program falls off its end: the last instruction must be halt or jump")

    # names of loops -> levels
    by_name: dict[str, set[int]] = {}
    for lp in loops:
        by_name.setdefault(lp.name, set()).add(lp.level)

    instrs = []
    for rec in recs:
        instrs.append(_encode_rec(rec, cx, labels, by_name, loops, origin, len(recs)))
    return Program(instrs, cfg, origin, {k: v[0] for k, v in labels.items()}, loops,
                   [r.pos.line for r in recs])


def _serr(rec, s, msg) -> AsmError:
    """An error located at slot ``s`` of instruction ``rec``."""
    if s is None:
        return rec.pos.err(msg)
    line = s.pos.line if s.pos is not None and s.pos.line is not None else rec.pos.line
    return AsmError(msg, line, s.col, s.slot_no, rec.pos.file)


def _encode_rec(rec, cx, labels, by_name, loops, origin, n) -> Instruction:
    cfg = cx.cfg
    fields: dict[str, int] = {}
    owner: dict[str, Slot] = {}
    for s in rec.slots:
        for k, v in s.fields.items():
            if k in ("sin", "sout") and k not in cx.widths and v:
                raise _serr(rec, s, f"{k} needs a scratchpad: this configuration has none (cfg.spad_kib = 0)")
            if k not in cx.widths and not v and s.kind != "raw":
                continue     # an optional field this micro-op layout does not have, left 0
            if k not in cx.widths or k == "op":
                if k not in cx.widths and k in _OPTIONAL:
                    raise _serr(rec, s, f"this configuration's micro-op has no field {k} "
                                        f"({_OPTIONAL[k]})")
                if k == "op":
                    raise _serr(rec, s, "raw cannot set the sequencer op: use loop, agu, jump or halt")
                raise _serr(rec, s, f"unknown field {k!r} (micro-op fields: {', '.join(cx.uop)}; "
                                  f"ctl fields: {', '.join(n for n in cx.ctl if n != 'op')})")
            if k in fields:
                o = owner[k]
                raise _serr(rec, s, f"'{s}' conflicts with '{o}' (slot {o.slot_no}): both use "
                                  f"{_unit_of(k)} ({k})")
            fields[k] = v
            owner[k] = s
        _check_slot(s, rec, cx)
    # control
    if rec.ctl:
        s = next(s for s in rec.slots if s.ctl)
        kind = rec.ctl[0]
        ctl_f = {}
        if kind == "loop":
            lp = rec.loop
            ctl_f = {"op": SeqOp.LOOP, "lvl": lp.level, "target": lp.end, "imm": lp.count}
        elif kind == "agu_base" or kind == "agu_stride":
            k = rec.ctl[1]
            if not 0 <= k < cfg.n_agus:
                raise _serr(rec, s, f"address generator g{k} does not exist (cfg.n_agus={cfg.n_agus})")
            v = rec.ctl[-1]
            lim = cx.amod
            if not -lim < v < lim:
                raise _serr(rec, s, f"agu value {v} out of range {-lim + 1}..{lim - 1} (an SRAM address, "
                                  f"addr_bits={cfg.addr_bits})")
            ctl_f = {"op": SeqOp.AGU_BASE if kind == "agu_base" else SeqOp.AGU_STRIDE, "agu": k,
                     "imm": v & ((1 << cfg.loop_bits) - 1)}
            if kind == "agu_stride":
                ref = rec.ctl[2]
                if isinstance(ref, str):
                    lv = by_name.get(ref)
                    if not lv:
                        raise _serr(rec, s, f"unknown loop {ref!r} in agu stride")
                    if len(lv) > 1:
                        raise _serr(rec, s, f"loop name {ref!r} is ambiguous (levels {sorted(lv)}): rename "
                                          f"a loop or write 'level N'")
                    ref = next(iter(lv))
                elif not 0 <= ref < cfg.n_loops:
                    raise _serr(rec, s, f"loop level {ref} out of range 0..{cfg.n_loops - 1} (cfg.n_loops)")
                ctl_f["lvl"] = ref
        elif kind == "jump":
            label = rec.ctl[1]
            if label not in labels:
                raise _serr(rec, s, f"undefined label {label!r}")
            t = labels[label][0]
            if t >= origin + n:
                raise _serr(rec, s, f"label {label!r} (line {labels[label][1].line}) marks no instruction "
                                  f"(end of program)")
            for lp in loops:
                if lp.pc < t <= lp.end and not lp.pc < rec.pc <= lp.end:
                    raise _serr(rec, s, f"jump to {label!r} enters the body of loop {lp.name!r} (line "
                                      f"{lp.line}) from outside: enter a loop through its loop instruction")
            ctl_f = {"op": SeqOp.JUMP, "target": t}
        elif kind == "halt":
            ctl_f = {"op": SeqOp.HALT}
        elif kind == "spad":
            if not cfg.spad_kib:
                raise _serr(rec, s, "spad needs a scratchpad: this configuration has none (cfg.spad_kib = 0)")
            v = rec.ctl[2]
            if not 0 <= v < cfg.spad_depth:
                raise _serr(rec, s, f"scratchpad address {v} out of range 0..{cfg.spad_depth - 1} "
                                  f"(cfg.spad_depth beats)")
            ctl_f = {"op": SeqOp.SPAD_PTR, "lvl": _SPAD_SEL[rec.ctl[1]],
                     "imm": v & ((1 << cfg.loop_bits) - 1), "target": v >> cfg.loop_bits}
        for k, v in ctl_f.items():
            if k in fields:
                o = owner[k]
                raise _serr(rec, o, f"'{o}' (slot {o.slot_no}) sets {k}, which {kind} uses")
            fields[k] = int(v)
            owner[k] = s
    _check_instruction(fields, owner, rec, cx)
    uop, ctl = {}, {}
    for k, v in fields.items():
        if v:
            w = cx.widths[k]
            v &= (1 << w) - 1
            (uop if k in cx.uop else ctl)[k] = v
    return Instruction(MicroOp(**uop), **ctl)


_DST_FIELDS = ("mv_dst",)
#: fields of newer micro-op layouts that older ones lack
_OPTIONAL = {"pred_seg": "index modulus", "rdrv_seg": "segmented row bus",
             "cdrv_seg": "segmented column bus", "fpu_wb": "FMA write-back to SRAM"}
_K_FIELDS = {"pred_k": "predicate", "rdrv_k": "row-bus driver", "cdrv_k": "column-bus driver"}


def _check_slot(s: Slot, rec: _Rec, cx: _Ctx):
    """Field ranges of one slot (the error names the slot)."""
    cfg = cx.cfg

    def err(msg):
        return _serr(rec, s, msg)

    f = s.fields
    if "fpu_dst" in f and not f.get("fpu_wb") and not 0 <= f["fpu_dst"] < cfg.n_regs:
        raise err(f"register r{f['fpu_dst']} does not exist (cfg.n_regs={cfg.n_regs})")
    for k, v in f.items():
        if k not in cx.widths:
            continue
        w = cx.widths[k]
        lo = -(1 << (w - 1)) if k in cx.signed else 0
        if s.kind == "raw" and not lo <= v < (1 << w):
            raise err(f"raw {k}={v} does not fit in {w} bits")
        if k in _DST_FIELDS and not 0 <= v < cfg.n_regs:
            raise err(f"register r{v} does not exist (cfg.n_regs={cfg.n_regs})")
        if k in _K_FIELDS and not 0 <= v < cfg.nr:
            raise err(f"{_K_FIELDS[k]} index {v} out of range 0..{cfg.nr - 1} for a "
                      f"{cfg.nr}x{cfg.nr} core")
        if k in _K_FIELDS:
            seg = f.get(k[:-1] + "seg", 0)
            if seg and not v < 1 << seg:
                raise err(f"{_K_FIELDS[k]} index {v} modulo {1 << seg} selects no PE (use 0..{(1 << seg) - 1})")
        if k == "fpu_wb" and v not in (0, 1, 2):
            raise err(f"fpu_wb={v} is not a write-back target (0 register, 1 mema, 2 memb)")
        if k.endswith("_off"):
            bank = k[1]
            depth = cx.bank[bank]
            if not -depth < v < depth:
                raise err(f"offset {v} is outside SRAM bank {bank.upper()} ({depth} words): "
                          f"use {-depth + 1}..{depth - 1}")
        if k == "ar_imm":
            lim = cx.amod
            if not -lim < v < lim:
                raise err(f"address-register immediate {v} out of range {-lim + 1}..{lim - 1} "
                          f"(addr_bits={cfg.addr_bits})")
        if k.startswith("ag_") and not 0 <= v <= cfg.n_agus:
            raise err(f"address generator g{v - 1} does not exist (cfg.n_agus={cfg.n_agus})")
        if k in ("hin", "hout") and v not in (0, 1, 2):
            raise err(f"{k}={v} is not a host direction (0 none, 1 row, 2 col)")


def _check_instruction(f, owner, rec, cx):
    """Cross-slot checks on the merged fields."""
    cfg = cx.cfg

    def err(msg, key):
        return _serr(rec, owner.get(key), msg)

    used = []   # (field, code)
    if f.get("fpu_en"):
        used += [(k, f.get(k, 0)) for k in ("fpu_a", "fpu_b", "fpu_c")]
    mv = f.get("mv_op", 0)
    if mv:
        used.append(("mv_src", f.get("mv_src", 0)))
        if mv == MvOp.MASK:
            used.append(("mv_msk", f.get("mv_msk", 0)))
    for bus in ("rdrv", "cdrv"):
        if f.get(f"{bus}_en"):
            used.append((f"{bus}_src", f.get(f"{bus}_src", 0)))
    for port in ("wa", "wb"):
        if f.get(f"{port}_en"):
            used.append((f"{port}_src", f.get(f"{port}_src", 0)))
    for k, code in used:
        if not Src.is_valid(code, cfg.n_regs):
            if 0 <= code < 16:
                raise err(f"register r{code} does not exist (cfg.n_regs={cfg.n_regs})", k)
            raise err(f"invalid source code {code} in {k} (sources: {_SRC_HELP})", k)
        if code == Src.MEMA and not f.get("ra_en"):
            raise err("source mema needs an SRAM A read (rda) in the same instruction", k)
        if code == Src.MEMB and not f.get("rb_en"):
            raise err("source memb needs an SRAM B read (rdb) in the same instruction", k)
        if code == Src.ROW and not (f.get("rdrv_en") or f.get("hin") == HostDir.ROW):
            raise err("source row: nothing drives the row bus in this instruction (add rdrv, hin row or rin row)", k)
        if code == Src.COL and not (f.get("cdrv_en") or f.get("hin") == HostDir.COL):
            raise err("source col: nothing drives the column bus in this instruction (add cdrv, hin col or rin col)", k)
        if k in ("rdrv_src", "cdrv_src") and code in (Src.ROW, Src.COL):
            raise err(f"a bus driver cannot forward a bus ({_src_text(code)}): drive a register or "
                      f"SRAM data", k)
    if f.get("hin") == HostDir.ROW and f.get("rdrv_en"):
        raise err("row bus conflict: hin/rin row and rdrv drive it in the same instruction", "rdrv_en")
    if f.get("hin") == HostDir.COL and f.get("cdrv_en"):
        raise err("column bus conflict: hin/rin col and cdrv drive it in the same instruction", "cdrv_en")
    for port in ("ra", "rb"):
        if f.get(f"{port}_en"):
            g = f.get(f"{port}_gate", 0)
            if g == Gate.RDRV and not f.get("rdrv_en"):
                raise err("gate=rdrv reads in no PE: this instruction has no rdrv", f"{port}_gate")
            if g == Gate.CDRV and not f.get("cdrv_en"):
                raise err("gate=cdrv reads in no PE: this instruction has no cdrv", f"{port}_gate")
    for port in ("ra", "rb", "wa", "wb"):
        if (f.get(f"{port}_en") or f.get(f"{port}_inc")) and not f.get(f"{port}_ar", 0) < cfg.n_ar:
            raise err(f"address register ar{f[f'{port}_ar']} does not exist (cfg.n_ar={cfg.n_ar})",
                      f"{port}_ar")
    wb = f.get("fpu_wb", 0) if f.get("fpu_en") else 0
    if wb:
        port = "ra" if wb == 1 else "rb"
        if f"{port}_ar" not in owner:
            raise err(f"fma to mem{port[1]} writes at this instruction's rd{port[1]} address: add "
                      f"rd{port[1]} [...] (or rd{port[1]} [...] noread)", "fpu_wb")
        if not f.get(f"{port}_ar", 0) < cfg.n_ar:
            raise err(f"address register ar{f[f'{port}_ar']} does not exist (cfg.n_ar={cfg.n_ar})",
                      f"{port}_ar")
    if f.get("ar_op") and not f.get("ar_idx", 0) < cfg.n_ar:
        raise err(f"address register ar{f['ar_idx']} does not exist (cfg.n_ar={cfg.n_ar})", "ar_idx")
    if f.get("hout") == HostDir.ROW and not (f.get("rdrv_en") or f.get("hin") == HostDir.ROW):
        raise err("hout row: nothing drives the row bus in this instruction (add rdrv, hin row or rin row)", "hout")
    if f.get("hout") == HostDir.COL and not (f.get("cdrv_en") or f.get("hin") == HostDir.COL):
        raise err("hout col: nothing drives the column bus in this instruction (add cdrv, hin col or rin col)", "hout")
    if f.get("hlast") and not f.get("hout"):
        raise err("hlast without hout (write: hout row last)", "hlast")
    # ring (rin/rout) and scratchpad (sin/sout) flags redirect the hin/hout stream slots
    for src, out in (("rin", "rout"), ("sin", "sout")):
        if f.get("hlast") and f.get(out):
            raise err(f"{out} has no tlast (last belongs to hout)", "hlast")
        for flag, slot in ((src, "hin"), (out, "hout")):
            if f.get(flag) and not f.get(slot):
                raise err(f"{flag} flag without a direction (write: {flag} row or {flag} col)", flag)
    if f.get("sin") and f.get("rin"):
        raise err("one stream input per instruction: sin and rin both set", "sin")
    if f.get("sout") and f.get("rout"):
        raise err("one stream output per instruction: sout and rout both set", "sout")


# ======================================================================================
# public front ends
# ======================================================================================
def assemble(text: str, cfg, *, origin: int = 0, file: str | None = None, equ: dict | None = None) -> Program:
    """Assemble ``text`` for ``cfg``; the program is placed at microcode address ``origin``.

    ``equ`` pre-defines ``.equ`` constants (name -> int or operand name).
    Raises :class:`AsmError` (with ``.line``) on any error.
    """
    items = _parse_text(text, file, dict(equ or {}))
    return _assemble_items(items, cfg, origin)


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

    def text(self, src: str) -> None:
        """Append assembly text (whole statements; a loop may open in one call and close
        in another). Errors in it name lines relative to ``src``."""
        items = _parse_text(src, None, self._equ)
        self._n += sum(1 for it in items if it.kind == "instr")
        self._items.extend(items)

    def build(self) -> Program:
        if self._open:
            raise AsmError(f"loop {self._open[-1]!r} is still open")
        return _assemble_items(self._items, self.cfg, self.origin)


# ======================================================================================
# disassembler
# ======================================================================================
def _signed(v, bits):
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _fmt_addr(port, f, ag):
    terms = [f"ar{f.get(port + '_ar', 0)}"]
    sel = f.get(f"ag_{port}", 0)
    if sel:
        terms.append(f"g{sel - 1}")
    off = f.get(port + "_off", 0)
    s = " + ".join(terms)
    if off > 0:
        s += f" + {off}"
    elif off < 0:
        s += f" - {-off}"
    return f"[{s}]" + ("++" if f.get(port + "_inc") else "")


def _mod_text(seg):
    return f"%{1 << seg}" if seg else ""


def _group_text(g, f, cx) -> tuple[str | None, set]:
    """Canonical text of one field group of a decoded instruction and the fields it claims.

    ``f`` has signed offsets/immediates already. Returns (None, set()) when the group
    is inactive or not printable canonically.
    """
    S = _src_text
    if g == "pred":
        mode = f.get("pred_mode", 0)
        if mode == PredMode.ALL:
            return None, set()
        name = {PredMode.COL: "col", PredMode.ROW: "row", PredMode.DIAG: "diag"}[mode]
        seg = f.get("pred_seg", 0)
        return f"@{name}{_mod_text(seg)}={f.get('pred_k', 0)}", {"pred_mode", "pred_k", "pred_seg"}
    if g == "fpu":
        if not f.get("fpu_en"):
            return None, set()
        wb = f.get("fpu_wb", 0)
        d, a, b, c = (f.get(k, 0) for k in ("fpu_dst", "fpu_a", "fpu_b", "fpu_c"))
        claimed = {"fpu_en", "fpu_a", "fpu_b", "fpu_c", "fpu_wb"}
        if wb == 0:
            dt, acc = f"r{d}", d
            claimed.add("fpu_dst")
        elif wb in (1, 2):
            dt = "mema" if wb == 1 else "memb"
            acc = Src.MEMA if wb == 1 else Src.MEMB
        else:
            return None, set()
        if c == Src.NZERO:
            t = f"mul {dt} = {S(a)} * {S(b)}"
        elif b == Src.ONE:
            t = f"add {dt} = {S(a)} + {S(c)}"
        elif c == acc:
            t = f"mac {dt} += {S(a)} * {S(b)}"
        else:
            t = f"fma {dt} = {S(a)} * {S(b)} + {S(c)}"
        return t, claimed
    if g == "mv":
        op = f.get("mv_op", 0)
        if not op:
            return None, set()
        d, s = f.get("mv_dst", 0), S(f.get("mv_src", 0))
        if op == MvOp.MASK:
            return f"mask r{d} = {s} if {S(f.get('mv_msk', 0))}", {"mv_op", "mv_src", "mv_msk", "mv_dst"}
        return f"{'mov' if op == MvOp.MOV else 'relu'} r{d} = {s}", {"mv_op", "mv_src", "mv_dst"}
    if g in ("rdrv", "cdrv"):
        if not f.get(f"{g}_en"):
            return None, set()
        seg = f.get(f"{g}_seg", 0)
        if seg and f.get(f"{g}_diag"):
            return None, set()
        sel = "diag" if f.get(f"{g}_diag") else ("col" if g == "rdrv" else "row")
        return (f"{g} {S(f.get(g + '_src', 0))} @{sel}{_mod_text(seg)}={f.get(g + '_k', 0)}",
                {f"{g}_en", f"{g}_diag", f"{g}_k", f"{g}_src", f"{g}_seg"})
    if g in ("ra", "rb"):
        if not any(f.get(k) for k in (f"{g}_en", f"{g}_ar", f"{g}_inc", f"{g}_off", f"ag_{g}", f"{g}_gate")):
            return None, set()
        t = f"rd{g[1]} {_fmt_addr(g, f, cx)}" + ("" if f.get(f"{g}_en") else " noread")
        gate = f.get(f"{g}_gate", 0)
        if gate:
            t += f" gate={Gate(gate).name.lower()}"
        return t, {f"{g}_en", f"{g}_gate", f"{g}_ar", f"{g}_inc", f"{g}_off", f"ag_{g}"}
    if g in ("wa", "wb"):
        if not f.get(f"{g}_en"):
            return None, set()
        return (f"wr{g[1]} {_fmt_addr(g, f, cx)} = {S(f.get(g + '_src', 0))}",
                {f"{g}_en", f"{g}_ar", f"{g}_inc", f"{g}_off", f"{g}_src", f"ag_{g}"})
    if g == "ar":
        op = f.get("ar_op", 0)
        if not op:
            return None, set()
        i, v = f.get("ar_idx", 0), f.get("ar_imm", 0)
        if op == ArOp.SET:
            t = f"ar{i} = {v}"
        elif op == ArOp.STRIDE:
            t = f"stride ar{i} = {v}"
        else:
            t = f"ar{i} += {v}" if v >= 0 else f"ar{i} -= {-v}"
        return t, {"ar_op", "ar_idx", "ar_imm"}
    if g == "hin":
        v = f.get("hin", 0)
        if v not in (HostDir.ROW, HostDir.COL):
            return None, set()
        if f.get("rin") and f.get("sin"):
            return None, set()
        src = "sin " if f.get("sin") else "rin " if f.get("rin") else "hin "
        return src + HostDir(v).name.lower(), {"hin", "rin", "sin"}
    if g == "hout":
        v = f.get("hout", 0)
        if v not in (HostDir.ROW, HostDir.COL):
            return None, set()
        if f.get("rout") and f.get("sout"):
            return None, set()
        if f.get("rout") and not f.get("hlast"):
            return f"rout {HostDir(v).name.lower()}", {"hout", "rout"}
        if f.get("sout") and not f.get("hlast"):
            return f"sout {HostDir(v).name.lower()}", {"hout", "sout"}
        if f.get("rout") or f.get("sout"):
            return None, set()
        return f"hout {HostDir(v).name.lower()}" + (" last" if f.get("hlast") else ""), {"hout", "hlast"}
    raise ValueError(g)


_GROUPS = ("pred", "ra", "rb", "fpu", "mv", "rdrv", "cdrv", "wa", "wb", "ar", "hin", "hout")


def _instr_fields(ins: Instruction, cx) -> dict:
    f = {k: v for k, v in ins.uop.f.items() if v}
    f.update({k: v for k, v in ins.ctl.items() if v})
    for k in list(f):
        if k in cx.signed:
            f[k] = _signed(f[k] & ((1 << cx.widths[k]) - 1), cx.widths[k])
    return f


def _slot_text(s: Slot) -> str:
    """Canonical text of a slot built without text (Builder slot objects)."""
    if s.ctl:
        k = s.ctl[0]
        if k == "loop":
            return f"loop {s.ctl[1]} {s.ctl[2]}"
        if k == "agu_base":
            return f"agu g{s.ctl[1]} = {s.ctl[2]}"
        if k == "agu_stride":
            return f"agu g{s.ctl[1]} stride {s.ctl[2]} = {s.ctl[3]}"
        if k == "spad":
            return f"spad {s.ctl[1]} = {s.ctl[2]}"
        return " ".join(str(x) for x in s.ctl)
    if s.kind == "raw":
        return "raw " + " ".join(f"{k}={v}" for k, v in s.fields.items())
    if s.kind == "pred" and not s.fields.get("pred_mode"):
        return "@all"
    for g in _GROUPS:
        try:
            t, _ = _group_text(g, s.fields, None)
        except (ValueError, KeyError):
            t = None
        if t:
            return t
    return s.kind


def disassemble(prog, cfg, *, origin: int | None = None, pcs: bool = True) -> str:
    """Assembly text for ``prog`` (Instructions, integer words or a :class:`Program`).

    :func:`assemble` of the result (with the same ``origin``) gives back the same
    instructions. Loops are shown as nested blocks named after their level (``i`` for
    level 0, ``j`` for 1, ...), with ``level=N`` when a level is not the enclosing level
    plus one; jump targets get labels ``L<address>``; fields no syntax form expresses
    are printed as ``raw name=value``. ``pcs`` appends each instruction's address as a
    comment. Raises :class:`AsmError` for loop structures that blocks cannot express.
    """
    if origin is None:
        origin = getattr(prog, "origin", 0)
    cx = _ctx(cfg)
    instrs = [Instruction.decode(w, cfg) if isinstance(w, int) else w for w in prog]
    n = len(instrs)
    end_pc = origin + n - 1
    # loop structure
    loops = {}
    for i, ins in enumerate(instrs):
        if ins.op == SeqOp.LOOP:
            pc = origin + i
            if not pc < ins.target <= end_pc:
                raise AsmError(f"address {pc}: loop body {pc + 1}..{ins.target} is empty or outside "
                               f"the program ({origin}..{end_pc})")
            loops[pc] = ins
    levels = {}
    stack: list[int] = []
    for pc in sorted(loops):
        while stack and loops[stack[-1]].target < pc:
            stack.pop()
        lv = loops[pc].lvl
        if stack:
            par = loops[stack[-1]]
            if loops[pc].target > par.target:
                raise AsmError(f"address {pc}: loop body {pc + 1}..{loops[pc].target} overlaps the end of "
                               f"the enclosing loop body ..{par.target}: not a nested block")
            if lv <= par.lvl:
                raise AsmError(f"address {pc}: loop level {lv} is not above the enclosing loop's level {par.lvl}")
        if lv >= cfg.n_loops:
            raise AsmError(f"address {pc}: loop level {lv} >= cfg.n_loops={cfg.n_loops}")
        levels[pc] = lv
        stack.append(pc)
    level_names = {lv: LOOP_NAMES[lv] for lv in set(levels.values())}
    targets = {ins.target for ins in instrs if ins.op == SeqOp.JUMP}
    for t in targets:
        if not origin <= t <= end_pc:
            raise AsmError(f"jump target {t} is outside the program ({origin}..{end_pc})")
    out = []
    depth = 0
    open_ends: list[int] = []
    width = 0
    lines = []
    for i, ins in enumerate(instrs):
        pc = origin + i
        if pc in targets:
            lines.append((None, f"L{pc}:", None))
        text = _instr_text(ins, cx, level_names, loops, levels, pc)
        lines.append((depth, text, pc))
        if pc in loops:
            open_ends.append(loops[pc].target)
            depth += 1
        while open_ends and open_ends[-1] == pc:
            open_ends.pop()
            depth -= 1
            lines.append((depth, "}", None))
    for d, text, pc in lines:
        if d is not None and 4 * d + len(text) <= 72:
            width = max(width, 4 * d + len(text))
    for d, text, pc in lines:
        if d is None:
            out.append(text)
            continue
        s = "    " * d + text
        if pcs and pc is not None:
            s = s.ljust(width) + f"  ; {pc}"
        out.append(s)
    return "\n".join(out) + "\n"


def _instr_text(ins, cx, level_names, loops, levels, pc) -> str:
    cfg = cx.cfg
    f = _instr_fields(ins, cx)
    parts = []
    claimed = {"op"}
    for g in _GROUPS:
        try:
            t, c = _group_text(g, f, cx)
        except (ValueError, KeyError):
            t, c = None, set()
        if t:
            parts.append(t)
            claimed |= c
    op = f.get("op", 0)
    ctl = None
    if op == SeqOp.LOOP:
        lv = levels[pc]
        par = None
        for p in sorted(loops):
            if p < pc <= loops[p].target:
                par = p
        default = levels[par] + 1 if par is not None else 0
        ctl = f"loop {level_names[lv]} {ins.imm}" + (f" level={lv}" if lv != default else "") + " {"
        claimed |= {"lvl", "target", "imm"}
    elif op in (SeqOp.AGU_BASE, SeqOp.AGU_STRIDE):
        v = _signed(ins.imm, cfg.loop_bits)
        if op == SeqOp.AGU_BASE:
            ctl = f"agu g{ins.agu} = {v}"
            claimed |= {"agu", "imm"}
        else:
            ref = level_names.get(ins.lvl, f"level {ins.lvl}")
            ctl = f"agu g{ins.agu} stride {ref} = {v}"
            claimed |= {"agu", "imm", "lvl"}
    elif op == SeqOp.JUMP:
        ctl = f"jump L{ins.target}"
        claimed |= {"target"}
    elif op == SeqOp.HALT:
        ctl = "halt"
    elif op == SeqOp.SPAD_PTR and cfg.spad_kib and ins.lvl in (1, 2, 3) \
            and ((ins.target << cfg.loop_bits) | ins.imm) < cfg.spad_depth:
        which = {v: k for k, v in _SPAD_SEL.items()}[ins.lvl]
        ctl = f"spad {which} = {(ins.target << cfg.loop_bits) | ins.imm}"
        claimed |= {"lvl", "target", "imm"}
    elif op != SeqOp.NEXT:
        raise AsmError(f"address {pc}: sequencer op {op} has no assembly form")
    rest = {k: v for k, v in f.items() if k not in claimed}
    if rest:
        parts.append("raw " + " ".join(f"{k}={v}" for k, v in rest.items()))
    if ctl:
        if ctl.endswith("{"):
            parts.append(ctl[:-2])
            return " | ".join(parts) + " {"
        parts.append(ctl)
    return " | ".join(parts) if parts else "nop"


# ======================================================================================
# microcode words and files
# ======================================================================================
def encode_program(prog, cfg) -> list[int]:
    """Microcode words (ints) of a list of Instructions."""
    return [ins.encode(cfg) if isinstance(ins, Instruction) else int(ins) for ins in prog]


def decode_words(words, cfg) -> list[Instruction]:
    return [Instruction.decode(int(w), cfg) for w in words]


def write_hex(path, prog, cfg) -> Path:
    """Write microcode as hex, one zero-padded word per line (``$readmemh`` compatible),
    atomically (temporary file + rename)."""
    bits = instr_layout(cfg).size
    digits = (bits + 3) // 4
    text = "".join(f"{w:0{digits}x}\n" for w in encode_program(prog, cfg))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


def read_hex(path, cfg) -> list[int]:
    """Read a microcode hex file (one word per line; blank lines and ``//``/``;``/``#``
    comments ignored). Errors name the file and line."""
    bits = instr_layout(cfg).size
    words = []
    p = Path(path)
    for lineno, line in enumerate(p.read_text().splitlines(), 1):
        s = re.split(r"//|;|#", line, maxsplit=1)[0].strip()
        if not s:
            continue
        try:
            w = int(s.replace("_", ""), 16)
        except ValueError:
            raise AsmError(f"invalid hex word {s!r}", lineno, None, None, str(p)) from None
        if w >> bits:
            raise AsmError(f"word {s} does not fit in {bits} bits (this configuration's instruction width)",
                           lineno, None, None, str(p))
        words.append(w)
        if len(words) > cfg.ucode_depth:
            raise AsmError(f"more than ucode_depth={cfg.ucode_depth} words", lineno, None, None, str(p))
    return words


# ======================================================================================
# command line: python -m sw.asm prog.s -o prog.hex
# ======================================================================================
def main(argv=None) -> int:
    from arch.config import config_from_arg

    ap = argparse.ArgumentParser(prog="python -m sw.asm", description="CATERPILLAR core assembler")
    ap.add_argument("source", help="assembly file (or a .hex file with --disasm)")
    ap.add_argument("-o", "--output", help="output hex file (default: print words)")
    ap.add_argument("--config", help="preset name, JSON file or inline JSON")
    ap.add_argument("--origin", type=int, default=0)
    ap.add_argument("--disasm", action="store_true", help="disassemble a hex file")
    a = ap.parse_args(argv)
    cfg = config_from_arg(a.config)
    try:
        if a.disasm:
            text = disassemble(read_hex(a.source, cfg), cfg, origin=a.origin)
            if a.output:
                Path(a.output).write_text(text)
            else:
                sys.stdout.write(text)
            return 0
        prog = assemble(Path(a.source).read_text(), cfg, origin=a.origin, file=a.source)
    except AsmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.output:
        write_hex(a.output, prog, cfg)
        print(f"{len(prog)} instructions -> {a.output}")
    else:
        digits = (instr_layout(cfg).size + 3) // 4
        for w in prog.words():
            print(f"{w:0{digits}x}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
