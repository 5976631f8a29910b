"""The PE micro-operation: one control word per cycle, broadcast to every PE of a core.

The word is a VLIW of independent fields that all act in the same cycle: an FMA issue,
a register move (MOV / ReLU / ReLU-derivative mask), a row-bus and a column-bus driver,
one read and one write on each SRAM bank, and an address-register update. This is
what lets a GEMV or rank-1-update inner loop issue one MAC per PE per cycle while
operands stream from SRAM and buses and results drain to SRAM in parallel.

Field semantics, pipeline timing and hazards are specified in ``docs/architecture.md``
(section "PE micro-operation"); :class:`pe.pe_model.PEModel` is the executable spec and
:func:`pe.layouts.uop_layout` the RTL's Amaranth layout of the same word.

Python side: :class:`MicroOp` holds the fields by flat name (``fpu_en``, ``ra_off`` ...)
and encodes to / decodes from the integer control word of :func:`uop_layout`.
"""

from __future__ import annotations

import enum
from functools import lru_cache

from arch.layout import StructLayout

__all__ = [
    "Src", "PredMode", "MvOp", "ArOp", "Gate", "FmaWb", "SEG_BITS", "uop_layout", "uop_fields", "MicroOp", "SRC_BITS",
]

SRC_BITS = 5
RF_INDEX_BITS = 4
AR_INDEX_BITS = 2
#: width of the segment fields: 0 = whole bus / plain index; g >= 1 = segments of 2**g PEs
SEG_BITS = 3


class Src(enum.IntEnum):
    """Operand source codes (5 bits). Codes 0..15 read register ``RF[code]``."""

    MEMA = 16   #: data read from SRAM A by this micro-op's ``ra`` field
    MEMB = 17   #: data read from SRAM B by this micro-op's ``rb`` field
    ROW = 18    #: value on this PE's row bus this cycle
    COL = 19    #: value on this PE's column bus this cycle
    ZERO = 24   #: +0.0
    NZERO = 25  #: -0.0 (additive identity for MUL: a*b + -0 == a*b exactly)
    ONE = 26    #: +1.0 (multiplicative identity for ADD: a*1 + c)

    @staticmethod
    def rf(i: int) -> int:
        return int(i)

    @staticmethod
    def is_valid(code: int, n_regs: int) -> bool:
        return 0 <= code < n_regs or code in _VALID_NON_RF

    @staticmethod
    def name_of(code: int) -> str:
        if 0 <= code < 16:
            return f"r{code}"
        try:
            return Src(code).name.lower()
        except ValueError:
            return f"src{code}"


_VALID_NON_RF = frozenset(int(s) for s in Src)


class PredMode(enum.IntEnum):
    """Which PEs execute the state-changing fields of a micro-op.

    With ``pred.seg = g > 0`` the index compared with ``k`` is taken modulo ``2**g``
    (e.g. ``COL``, ``seg = 1``, ``k = 0``: the even columns).
    """

    ALL = 0   #: every PE
    COL = 1   #: PEs in column ``k``
    ROW = 2   #: PEs in row ``k``
    DIAG = 3  #: PEs with ``(col - row) mod nr == k`` (k = 0: the diagonal)


class MvOp(enum.IntEnum):
    """Move-unit operation (one cycle, result in ``RF[mv_dst]``)."""

    NOP = 0
    MOV = 1    #: dst = src
    RELU = 2   #: dst = src if src > 0 else +0 (NaN -> canonical NaN)
    MASK = 3   #: dst = src if msk > 0 else +0 (ReLU derivative applied to src)


class FmaWb(enum.IntEnum):
    """Where an FMA result is written at the end of the pipeline."""

    RF = 0     #: RF[fpu.dst]
    MEMA = 1   #: SRAM A at this micro-op's ``ra`` address (AR[ra.ar] + ra.off, read or not)
    MEMB = 2   #: SRAM B at this micro-op's ``rb`` address


class ArOp(enum.IntEnum):
    """Address-register update."""

    NOP = 0
    SET = 1      #: AR[idx] = imm
    STRIDE = 2   #: STRIDE[idx] = imm
    ADD = 3      #: AR[idx] += imm


class Gate(enum.IntEnum):
    """Which PEs perform an SRAM read (reads change no state, but they cost energy)."""

    ALL = 0    #: every PE
    PRED = 1   #: PEs selected by the micro-op predicate
    RDRV = 2   #: only the PE driving its row bus
    CDRV = 3   #: only the PE driving its column bus


@lru_cache(maxsize=None)
def uop_layout(addr_bits: int, sel_bits: int, wp: bool = False) -> StructLayout:
    """The micro-op :class:`~arch.layout.StructLayout` for given field widths; ``wp``: with
    the write predicate (cores with a scratchpad).

    Use ``uop_layout(*cfg.uop_key)``.
    """
    src = SRC_BITS
    rfi = RF_INDEX_BITS
    ari = AR_INDEX_BITS
    rd = StructLayout({"en": 1, "gate": 2, "ar": ari, "inc": 1, "off": addr_bits})
    wr = StructLayout({"en": 1, "ar": ari, "inc": 1, "off": addr_bits, "src": src})
    drv = StructLayout({"en": 1, "diag": 1, "k": sel_bits, "src": src, "seg": SEG_BITS})
    return StructLayout({
        "pred": StructLayout({"mode": 2, "k": sel_bits, "seg": SEG_BITS}),
        "fpu": StructLayout({"en": 1, "a": src, "b": src, "c": src, "dst": rfi, "wb": 2}),
        "mv": StructLayout({"op": 2, "src": src, "msk": src, "dst": rfi}),
        "rdrv": drv,
        "cdrv": drv,
        "ra": rd,
        "rb": rd,
        "wa": wr,
        "wb": wr,
        "ar": StructLayout({"op": 2, "idx": ari, "imm": addr_bits}),
        # 1: the predicate selects the PEs of the SRAM operand writes (wa, wb) only; the
        # FMA, the move and the address-register updates run in every PE
        **({"wp": StructLayout({"en": 1})} if wp else {}),
    })


@lru_cache(maxsize=None)
def uop_fields(addr_bits: int, sel_bits: int, wp: bool = False) -> tuple[tuple[str, int, int], ...]:
    """Flat field table ``(name, offset, width)``; names are ``group_field``."""
    out = []
    for gname, gfield in uop_layout(addr_bits, sel_bits, wp):
        for fname, ffield in gfield.shape:
            out.append((f"{gname}_{fname}", gfield.offset + ffield.offset, ffield.width))
    return tuple(out)


@lru_cache(maxsize=None)
def _field_ranges(addr_bits: int, sel_bits: int, wp: bool = False) -> dict:
    """``name -> (index in uop_fields, offset, width, lowest value)`` (offsets and
    immediates are signed)."""
    return {name: (i, off, width, -(1 << (width - 1)) if name.endswith(("_off", "_imm")) else 0)
            for i, (name, off, width) in enumerate(uop_fields(addr_bits, sel_bits, wp))}


class MicroOp:
    """A micro-op as Python values; unspecified fields are zero (a NOP).

    Example: ``MicroOp(fpu_en=1, fpu_a=Src.MEMA, fpu_b=3, fpu_c=0, fpu_dst=0, ra_en=1, ra_inc=1)``
    is a MAC ``r0 += memA[AR0++] * r3``.
    """

    __slots__ = ("f",)

    def __init__(self, **fields):
        self.f = {k: int(v) for k, v in fields.items()}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.f.get(name, 0)

    def replace(self, **fields) -> "MicroOp":
        m = MicroOp(**self.f)
        m.f.update({k: int(v) for k, v in fields.items()})
        return m

    def encode(self, addr_bits: int, sel_bits: int, wp: bool = False) -> int:
        table = _field_ranges(addr_bits, sel_bits, wp)
        unknown = set(self.f) - table.keys()
        if unknown:
            raise ValueError(f"unknown micro-op field(s) {sorted(unknown)}")
        # absent fields are 0 (always in range, no bits): only the given ones, in table order
        word = 0
        for name in sorted(self.f, key=lambda n: table[n][0]):
            v = self.f[name]
            _, off, width, lo = table[name]
            if not lo <= v < (1 << width):
                raise ValueError(f"micro-op field {name}={v} does not fit in {width} bits")
            word |= (v & ((1 << width) - 1)) << off
        return word

    @classmethod
    def decode(cls, word: int, addr_bits: int, sel_bits: int, wp: bool = False) -> "MicroOp":
        return cls(**{n: (word >> off) & ((1 << w) - 1) for n, off, w in uop_fields(addr_bits, sel_bits, wp)})

    def __eq__(self, other):
        return isinstance(other, MicroOp) and {k: v for k, v in self.f.items() if v} == {
            k: v for k, v in other.f.items() if v}

    def __repr__(self):
        return "MicroOp(" + ", ".join(f"{k}={v}" for k, v in sorted(self.f.items()) if v) + ")"
