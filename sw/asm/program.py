"""Assembled programs and microcode words and files.

A :class:`Program` is a list of :class:`~arch.isa.Instruction` with its metadata
(origin, labels, loops, source lines); :func:`write_hex` / :func:`read_hex` store and
load microcode as ``$readmemh``-compatible hex files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from arch.files import atomic_write, read_text
from arch.isa import Instruction, instr_layout

from sw.asm.disasm import disassemble
from sw.asm.errors import AsmError


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


def encode_program(prog, cfg) -> list[int]:
    """Microcode words (ints) of a list of Instructions."""
    return [ins.encode(cfg) if isinstance(ins, Instruction) else int(ins) for ins in prog]


def decode_words(words, cfg) -> list[Instruction]:
    return [Instruction.decode(int(w), cfg) for w in words]


def write_hex(path, prog, cfg, *, make_parents: bool = True) -> Path:
    """Write microcode as hex, one zero-padded word per line (``$readmemh`` compatible),
    atomically (:func:`arch.files.atomic_write`)."""
    bits = instr_layout(cfg).size
    digits = (bits + 3) // 4
    text = "".join(f"{w:0{digits}x}\n" for w in encode_program(prog, cfg))
    return atomic_write(path, text, make_parents=make_parents)


def read_hex(path, cfg) -> list[int]:
    """Read a microcode hex file (one word per line; blank lines and ``//``/``;``/``#``
    comments ignored). Errors name the file and line."""
    bits = instr_layout(cfg).size
    words = []
    p = Path(path)
    for lineno, line in enumerate(read_text(p, "hex file").splitlines(), 1):
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
