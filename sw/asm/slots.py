"""Slots (the parts of an instruction) and their constructors, the Builder API.

Every slot constructor (``fma``, ``rda``, ``hout`` ...) returns a :class:`Slot`: the
micro-op and sequencer-control fields it sets, plus for control slots a control item
(loop, AGU setting, jump, halt, scratchpad pointer) that the back end resolves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arch.microop import ArOp, MvOp, PredMode, Src

from sw.asm.errors import AsmError, Pos
from sw.asm.fieldtext import _slot_text
from arch.isa import DMA_N_BITS
from sw.asm.operands import (_AGU_RE, _AR_RE, _DIRS, _DMA_OPS, _DMA_SEL, _GATES, _SPAD_SEL, _WB_DST, _idx, _reg,
                             _seg_of, _src_code)


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


def nop() -> Slot:
    """An empty slot (``nop``)."""
    return Slot("nop")


def pred(mode: str = "all", k: int = 0, mod: int | None = None, writes: bool = False) -> Slot:
    """Predicate: ``pred("col", 1)`` = ``@col=1``; ``pred("col", 1, mod=2)`` = ``@col%2=1``
    (the odd columns). Modes ``all``, ``col``, ``row``, ``diag``. ``writes``: a write
    predicate, ``@row=1 writes`` (it selects the PEs of the SRAM writes only; the FMA, the
    move and the address-register updates run in every PE)."""
    modes = {"all": PredMode.ALL, "col": PredMode.COL, "row": PredMode.ROW, "diag": PredMode.DIAG}
    if mode not in modes:
        raise AsmError(f"unknown predicate {mode!r} (all, col, row, diag)")
    if mode == "all" and mod is not None:
        raise AsmError("@all takes no index modulus")
    wp = {"wp_en": 1} if writes else {}
    return Slot("pred", {"pred_mode": modes[mode], "pred_k": int(k), "pred_seg": _seg_of(mod)} | wp)


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


def dma(what: str, value: int | None = None) -> Slot:
    """The DMA engine (cores with DRAM): ``dma("load", n)`` / ``dma("store", n)`` start a
    copy of ``n`` beats (1..256) DRAM -> scratchpad / scratchpad -> DRAM at the engine's
    addresses; ``dma("wait")`` issues once the engine is idle, ``dma("wait", k)`` once
    at most the ``k`` (0..255) latest transfers are outstanding; ``dma("dram", a)``,
    ``dma("spad", a)``, ``dma("both", a)`` set its DRAM / scratchpad / both addresses (a
    sequencer control slot, from the next instruction on)."""
    if what in _DMA_SEL:
        if value is None:
            raise AsmError(f"dma {what} needs an address: 'dma {what} = N'")
        return _ctl("dma", what, int(value))
    if what not in _DMA_OPS:
        raise AsmError(f"dma must be load, store, wait, dram, spad or both, got {what!r}")
    if what == "wait":
        if value is not None and not 0 <= int(value) < 1 << DMA_N_BITS:
            raise AsmError(f"dma wait keeps 0..{(1 << DMA_N_BITS) - 1} transfers outstanding, got {value!r}")
        return Slot("dma", {"dma": _DMA_OPS[what], "dma_n": int(value or 0)})
    if value is None or not 1 <= int(value) <= 1 << DMA_N_BITS:
        raise AsmError(f"dma {what} moves 1..{1 << DMA_N_BITS} beats (one AXI4 burst), got {value!r}")
    return Slot("dma", {"dma": _DMA_OPS[what], "dma_n": int(value) - 1})


def raw(**fields) -> Slot:
    """Set fields by name (micro-op ``group_field`` names or ctl names, not ``op``)."""
    return Slot("raw", {k: int(v) for k, v in fields.items()})


def _ctl(kind, *args) -> Slot:
    return Slot("ctl", {}, (kind, *args))
