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

Modules: :mod:`~sw.asm.errors` (errors, positions), :mod:`~sw.asm.operands` (operand
tables), :mod:`~sw.asm.slots` (slot constructors), :mod:`~sw.asm.lexer`,
:mod:`~sw.asm.slot_parser` and :mod:`~sw.asm.statements` (the text front end),
:mod:`~sw.asm.context` and :mod:`~sw.asm.encode` (the back end),
:mod:`~sw.asm.builder` (:func:`assemble`, :class:`Builder`), :mod:`~sw.asm.program`
(programs, microcode words and hex files), :mod:`~sw.asm.fieldtext` and
:mod:`~sw.asm.disasm` (the disassembler), :mod:`~sw.asm.cli` (``python -m sw.asm``).
"""

from __future__ import annotations

from sw.asm.builder import Builder, assemble
from sw.asm.disasm import disassemble
from sw.asm.errors import AsmError
from sw.asm.program import LoopInfo, Program, decode_words, encode_program, read_hex, write_hex
from sw.asm.slots import (Slot, add, ar_add, ar_set, ar_stride, cdrv, fma, hin, hout, mac, mask, mov, mul, nop, pred,
                          raw, rda, rdb, rdrv, relu, rin, rout, sin, sout, wra, wrb)

# further names reachable as ``sw.asm.<name>``: the instruction layout, the command line,
# the configuration tables, positions, tokens, the scratchpad-pointer slot
from arch.isa import instr_layout  # noqa: F401
from sw.asm.cli import main  # noqa: F401
from sw.asm.context import _ctx  # noqa: F401
from sw.asm.disasm import LOOP_NAMES  # noqa: F401
from sw.asm.errors import Pos  # noqa: F401
from sw.asm.lexer import Tok  # noqa: F401
from sw.asm.operands import SEG_BITS  # noqa: F401
from sw.asm.slots import dma, spad  # noqa: F401

__all__ = [
    "AsmError", "Program", "LoopInfo", "Builder", "assemble", "disassemble",
    "encode_program", "decode_words", "write_hex", "read_hex",
    # slot constructors (Builder API)
    "Slot", "nop", "pred", "fma", "mac", "mul", "add", "mov", "relu", "mask", "rdrv", "cdrv",
    "rda", "rdb", "wra", "wrb", "ar_set", "ar_add", "ar_stride", "hin", "hout", "rin", "rout", "sin", "sout", "raw",
]
