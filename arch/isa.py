"""The core's instruction set: a sequencer control field plus the PE micro-op.

An instruction is one microcode word: ``ctl`` (sequencer: loops, address generators,
jumps, host stream traffic) and ``uop`` (the PE micro-op broadcast to every PE, see
:mod:`arch.microop`). The sequencer adds the selected address generators' values to the
micro-op's SRAM offset fields before broadcasting it.

Semantics are specified in ``docs/architecture.md`` (section "The sequencer").
"""

from __future__ import annotations

import enum
from functools import lru_cache

from arch.layout import StructLayout
from arch.microop import MicroOp, uop_fields, uop_layout

__all__ = ["SeqOp", "HostDir", "ctl_layout", "instr_layout", "Instruction", "AGU_FIELDS", "SPAD_RD", "SPAD_WR",
           "spad_ptr_value", "DmaOp", "DMA_DRAM", "DMA_SPAD", "DMA_N_BITS", "dma_descriptor_bits"]

#: micro-op offset fields an address generator can be added to, in ctl order
AGU_FIELDS = ("ra", "rb", "wa", "wb")


class SeqOp(enum.IntEnum):
    NEXT = 0        #: fall through (or loop back at a loop end)
    LOOP = 1        #: arm loop ``lvl``: body = pc+1 .. target, trip count = imm
    AGU_BASE = 2    #: base of AGU ``agu`` = imm
    AGU_STRIDE = 3  #: stride of AGU ``agu`` for loop level ``lvl`` = imm
    JUMP = 4        #: next pc = target
    HALT = 5        #: stop after this instruction; drain the PE pipelines; report done
    #: (cores with a scratchpad only; otherwise op 6 acts as ``NEXT``) set the scratchpad
    #: read pointer (``lvl`` bit 0) and / or write pointer (``lvl`` bit 1) to
    #: ``imm | target << loop_bits`` (mod ``spad_depth``), from the next instruction on
    SPAD_PTR = 6
    #: (cores with DRAM only; otherwise op 7 acts as ``NEXT``) set the DMA engine's DRAM
    #: address (``lvl`` bit 0, mod ``dram_depth``) and / or scratchpad address (``lvl`` bit
    #: 1, mod ``spad_depth``) to ``imm | target << loop_bits``, from the next instruction on
    DMA_PTR = 7


#: ``lvl`` bits of a ``SPAD_PTR`` instruction
SPAD_RD, SPAD_WR = 1, 2

#: ``lvl`` bits of a ``DMA_PTR`` instruction
DMA_DRAM, DMA_SPAD = 1, 2


class DmaOp(enum.IntEnum):
    """The ``dma`` control field (cores with DRAM, ``cfg.dram_mib > 0``)."""

    NONE = 0
    LOAD = 1   #: start copying ``dma_n + 1`` beats DRAM -> scratchpad
    STORE = 2  #: start copying ``dma_n + 1`` beats scratchpad -> DRAM
    WAIT = 3   #: issue only when the DMA engine is idle


#: width of the ``dma_n`` field: a transfer moves 1..256 beats (one AXI4 burst)
DMA_N_BITS = 8


def dma_descriptor_bits(cfg) -> int:
    """Bits of one transfer the DMA engine queues (``cfg.dma_queue > 1``): load or
    store, ``dma_n``, the DRAM and the scratchpad beat addresses (``rtl.dma.DmaEngine``'s
    descriptor FIFO, and its area in :func:`sim.power.area_of_core`)."""
    return 1 + DMA_N_BITS + cfg.dram_addr_bits + cfg.spad_addr_bits


class HostDir(enum.IntEnum):
    NONE = 0
    ROW = 1  #: lane r of the beat <-> row bus r
    COL = 2  #: lane c of the beat <-> column bus c


@lru_cache(maxsize=None)
def ctl_layout(pc_bits: int, loop_bits: int, n_loops: int, n_agus: int, spad: bool = False,
               dram: bool = False) -> StructLayout:
    lvl_bits = max(1, (n_loops - 1).bit_length())
    agu_bits = max(1, (n_agus - 1).bit_length())
    sel_bits = n_agus.bit_length()  # 0 = none, 1..n_agus = AGU index + 1
    fields = {
        "op": 3, "lvl": lvl_bits, "agu": agu_bits, "target": pc_bits, "imm": loop_bits,
        "hin": 2, "hout": 2, "hlast": 1,
        # 1: the hin beat comes from the ring (previous core) / the hout beat goes to the
        # ring (next core) instead of the host stream
        "rin": 1, "rout": 1,
    }
    for f in AGU_FIELDS:
        fields[f"ag_{f}"] = sel_bits
    if spad:
        # cores with a scratchpad (cfg.spad_kib > 0): 1: the hin beat comes from the
        # scratchpad (read pointer) / the hout beat is written to it (write pointer);
        # they take precedence over rin / rout
        fields["sin"] = 1
        fields["sout"] = 1
    if dram:
        # cores with DRAM (cfg.dram_mib > 0): a DMA start / wait (DmaOp) and its beats - 1
        fields["dma"] = 2
        fields["dma_n"] = DMA_N_BITS
    return StructLayout(fields)


def _key(cfg):
    return (cfg.pc_bits, cfg.loop_bits, cfg.n_loops, cfg.n_agus, cfg.addr_bits, cfg.sel_bits, cfg.spad_kib > 0, cfg.dram_mib > 0)


def spad_ptr_value(imm: int, target: int, cfg) -> int:
    """The pointer value a ``SPAD_PTR`` instruction sets: ``imm | target << loop_bits``
    modulo ``cfg.spad_depth`` (``imm`` taken as its ``loop_bits``-bit pattern)."""
    v = (imm & ((1 << cfg.loop_bits) - 1)) | (target << cfg.loop_bits)
    return v & (cfg.spad_depth - 1)


@lru_cache(maxsize=None)
def _instr_layout(pc_bits, loop_bits, n_loops, n_agus, addr_bits, sel_bits, spad=False, dram=False) -> StructLayout:
    return StructLayout({
        "ctl": ctl_layout(pc_bits, loop_bits, n_loops, n_agus, spad, dram),
        "uop": uop_layout(addr_bits, sel_bits, spad),
    })


@lru_cache(maxsize=None)
def _ctl_ranges(*key) -> tuple:
    """``({name: (index, offset, width, lowest value)}, offset of the micro-op)`` of the
    sequencer fields (``imm`` is signed)."""
    lay = _instr_layout(*key)
    return ({name: (i, fld.offset, fld.width, -(1 << (fld.width - 1)) if name == "imm" else 0)
             for i, (name, fld) in enumerate(lay["ctl"].shape)}, lay["uop"].offset)


def instr_layout(cfg) -> StructLayout:
    """Microcode word layout for an :class:`~arch.config.ArchConfig`."""
    return _instr_layout(*_key(cfg))


class Instruction:
    """One microcode word: ``ctl`` fields by name plus a :class:`MicroOp`.

    ``Instruction(MicroOp(...), op=SeqOp.LOOP, lvl=0, target=12, imm=64, ag_ra=1)``
    """

    __slots__ = ("uop", "ctl")

    def __init__(self, uop: MicroOp | None = None, **ctl):
        self.uop = uop if uop is not None else MicroOp()
        self.ctl = {k: int(v) for k, v in ctl.items()}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.ctl.get(name, 0)

    def encode(self, cfg) -> int:
        key = _key(cfg)
        table, uop_off = _ctl_ranges(*key)
        unknown = set(self.ctl) - table.keys()
        if unknown:
            raise ValueError(f"unknown sequencer field(s) {sorted(unknown)}")
        # absent fields are 0 (always in range, no bits): only the given ones, in layout order
        word = 0
        for name in sorted(self.ctl, key=lambda n: table[n][0]):
            v = self.ctl[name]
            _, off, width, lo = table[name]
            if not lo <= v < (1 << width):
                raise ValueError(f"sequencer field {name}={v} does not fit in {width} bits")
            word |= (v & ((1 << width) - 1)) << off
        return word | (self.uop.encode(*cfg.uop_key) << uop_off)

    @classmethod
    def decode(cls, word: int, cfg) -> "Instruction":
        lay = instr_layout(cfg)
        ctl = {n: (word >> f.offset) & ((1 << f.width) - 1) for n, f in lay["ctl"].shape}
        uop = MicroOp.decode(word >> lay["uop"].offset, *cfg.uop_key)
        return cls(uop, **ctl)

    def __eq__(self, other):
        return (isinstance(other, Instruction) and self.uop == other.uop
                and {k: v for k, v in self.ctl.items() if v} == {k: v for k, v in other.ctl.items() if v})

    def __repr__(self):
        ctl = ", ".join(f"{k}={v}" for k, v in sorted(self.ctl.items()) if v)
        return f"Instruction({self.uop!r}{', ' if ctl else ''}{ctl})"


def instr_bits(cfg) -> int:
    return instr_layout(cfg).size


def uop_offset_fields(cfg):
    """(name, offset, width) of the micro-op's SRAM offset fields inside the uop word."""
    return {n: (o, w) for n, o, w in uop_fields(*cfg.uop_key) if n.endswith("_off")}
