"""Operand tables of the assembly language and their conversions.

Source operands (registers, SRAM data, buses, constants), destination and address
registers, address generators, read gates, stream directions, index moduli and
scratchpad pointer selectors, shared by the slot constructors, the text parser, the back
end and the disassembler.
"""

from __future__ import annotations

import re

from arch import microop as _microop
from arch.isa import SPAD_RD, SPAD_WR, HostDir
from arch.microop import Gate, Src

from sw.asm.errors import AsmError

#: width of the segment fields pred.seg / rdrv.seg / cdrv.seg (of micro-op layouts that have them)
SEG_BITS = getattr(_microop, "SEG_BITS", 3)

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


def _seg_of(mod) -> int:
    """Modulus ``2**g`` (or None) -> segment field ``g``."""
    if mod is None:
        return 0
    mod = int(mod)
    if mod < 2 or mod & (mod - 1) or mod > 1 << ((1 << SEG_BITS) - 1):
        raise AsmError(f"index modulus {mod} must be a power of two in 2..{1 << ((1 << SEG_BITS) - 1)}")
    return mod.bit_length() - 1


_WB_DST = {"mema": 1, "memb": 2}      # arch.microop.FmaWb.MEMA / MEMB

_SPAD_SEL = {"rd": SPAD_RD, "wr": SPAD_WR, "rw": SPAD_RD | SPAD_WR}
#: ``dma dram|spad|both = N``: the DMA engine's addresses a DMA_PTR sets (arch.isa DMA_DRAM / DMA_SPAD)
_DMA_SEL = {"dram": 1, "spad": 2, "both": 3}
#: ``dma load|store N`` / ``dma wait``: the ``dma`` field (arch.isa.DmaOp)
_DMA_OPS = {"load": 1, "store": 2, "wait": 3}
