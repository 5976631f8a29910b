"""The ops of a training step: :class:`Op` (one kernel call or host transfer, with the
regions it reads and writes), the NOPs two ops need between them (:func:`kernel_gap`),
and the per-op breakdown of a step's cycles."""

from __future__ import annotations

from dataclasses import dataclass, field

from sw.asm import Builder
from sw.kernels import gemv_t_rank1_cost

__all__ = ["Op", "kernel_gap", "ops_breakdown", "breakdown_lines"]


@dataclass
class Op:
    """One kernel call (or host transfer) of a step."""

    name: str
    kind: str                         #: gemv, gemv_t, relu, relu_mask, axpy, rank1, load, unload, host
    emit: object = None               #: emit(builder) -> instructions issued
    reads: list = field(default_factory=list)     #: [(Region, words)]
    writes: list = field(default_factory=list)    #: [(Region, words)]
    fma_wb: bool = False              #: writes SRAM with FMA write-backs (may leave them in flight at its end)
    stores: bool = True               #: writes SRAM with operand-stage stores (else only FMA write-backs)
    data: str | None = None           #: load: the host vector it consumes; unload: what it returns
    words: int = 0                    #: load/unload: words per PE
    wb: list | None = None            #: the regions written by FMA write-backs (None: all ``writes`` if fma_wb)
    wb_tail: int = 0                  #: instructions issued after its last SRAM-writing FMA
    per_core: bool = False            #: chip programs: assembles differently on different cores
    info: dict = field(default_factory=dict)      #: what a combined op holds (e.g. rows of a merged update)

    def wb_regions(self) -> list:
        if not self.fma_wb:
            return []
        return list(self.writes) if self.wb is None else list(self.wb)

    def store_regions(self) -> list:
        if not self.stores:
            return []
        wb = self.wb_regions()
        return [w for w in self.writes if w not in wb]


def _overlap(r1, n1, r2, n2):
    return r1.bank == r2.bank and r1.base < r2.base + n2 and r2.base < r1.base + n1


def kernel_gap(cfg, a: Op, b: Op) -> int:
    """NOPs needed between the last instruction of ``a`` and the first of ``b``.

    * ``a`` writes SRAM with FMAs (axpy, rank-1, the fused backward step's ``W``): the
      last one, issued ``a.wb_tail`` instructions before ``a``'s end (0 for axpy and
      rank-1, whose last instruction is that FMA; at least ``fpu_latency`` for the fused
      kernel, whose reduction and moves follow its last update), is written at the end
      of cycle ``t + fpu_latency - 1`` (``t`` its issue); ``b`` must not read what ``a``
      wrote before then, nor store into that bank when it lands (the write-back would
      drop the store): ``fpu_latency - 1 - wb_tail`` NOPs (if positive) when ``b`` reads
      an overlapping region or stores into a bank ``a`` writes back to (``b``'s own FMA
      write-backs cannot collide: one FMA issues per cycle, all with the same latency).
    * ``a`` stores (a store issued at ``t`` is readable from ``t +
      cfg.sram_read_distance``, ``t + 2`` but with the receive stage; conservatively
      ``a``'s last instruction): ``sram_read_distance - 1`` NOPs when ``b`` reads an
      overlapping region (the fused kernel's ``y`` moves are its last instructions);
      none when that distance is 2 and ``b``'s first instruction reads no word ``a``'s
      last one stores (:func:`_edge_words`: both at fixed addresses; e.g. a GEMV's last
      output word and the next GEMV's first input word).
    * Otherwise none: no kernel leaves register writes in flight (their last FMAs are
      read by their own final instructions).
    """
    def hit(ws):
        return any(_overlap(wr, wn, rr, rn) for wr, wn in ws for rr, rn in b.reads)

    gap = 0
    wb = a.wb_regions()
    if wb:
        need = max(0, cfg.fpu_latency - 1 - a.wb_tail)
        banks = {wr.bank for wr, _ in wb}
        if need and (hit(wb) or any(r.bank in banks for r, _ in b.store_regions())):
            gap = need
    if hit(a.store_regions()) and gap < cfg.sram_read_distance - 1:
        d = cfg.sram_read_distance - 1
        ea, eb = (_edge_words(cfg, a, last=True), _edge_words(cfg, b, last=False)) if d == 1 else (None, None)
        gap = d if ea is None or eb is None or ea[1] & eb[0] else gap
    return gap


def _edge_words(cfg, op: Op, last: bool):
    """``(reads, stores)`` of ``op``'s first (``last``: last) instruction, each a set of
    ``(bank, address)``; None when the op's code differs between cores (``per_core``, the
    broadcast's waits), it has no instruction, or one of those accesses is not at a fixed
    address (an address register other than AR 0, which the kernels keep at 0, an
    increment or an AGU). A loop's last instruction is the op's last issued one. Read
    from the builder's statements (both ends at once, kept in ``op.info``), not encoded."""
    cache = op.info.get("_edge_words")
    if cache is None:
        if op.emit is not None and not (op.per_core or op.name.startswith("bcast")):
            b = Builder(cfg)
            op.emit(b)
            note_edge_words(op, b._items)
        cache = op.info.setdefault("_edge_words", {False: None, True: None})
    return cache[last]


def note_edge_words(op: Op, items) -> None:
    """Keep :func:`_edge_words` of ``op`` from the statements its ``emit`` gave (a caller
    that emits the op anyway saves the second emit)."""
    if "_edge_words" in op.info:
        return
    cache = op.info["_edge_words"] = {False: None, True: None}
    ins = [it for it in items if it.kind == "instr"]
    if ins and not (op.per_core or op.name.startswith("bcast")):
        cache[False], cache[True] = _slot_words(ins[0].slots), _slot_words(ins[-1].slots)


def _slot_words(slots):
    """``(reads, stores)`` of one instruction's slots (see :func:`_edge_words`), or None."""
    f = {}
    for sl in slots:
        f.update(sl.fields)
    acc = {"r": set(), "w": set()}
    for port in ("ra", "rb", "wa", "wb"):
        if not f.get(f"{port}_en"):
            continue
        if f.get(f"{port}_ar") or f.get(f"{port}_inc") or f.get(f"ag_{port}"):
            return None
        acc[port[0]].add((port[1], f.get(f"{port}_off", 0)))
    return acc["r"], acc["w"]


def _fused_tail(cfg, m: int, n: int) -> int:
    """Instructions :func:`sw.kernels.emit_gemv_t_rank1` issues after its last ``W``
    update (a lower bound: the last block's NOPs to ``Lc2``, its reduction steps and the
    final moves, without the gap NOPs)."""
    c = gemv_t_rank1_cost(cfg, m, n)
    lc, lc2, p = (c["rem"], c["Lc2_last"], c["P_last"]) if c["rem"] else (c["L"], c["Lc2"], c["P"])
    return (lc2 - 2 * lc) + c["S"] * p + c["L"]


def ops_breakdown(cfg, programs) -> list:
    """``(op name, kind, instructions)`` of every op and gap of ``programs`` (``(ops,
    gaps)`` pairs, or ``(ops, gaps, jumps[, calls])`` with the indices of the ops an
    alignment JUMP follows and of those run in the resident region, a JUMP there and one
    back, :class:`sw.train_chip_place.ChipPart`; one per RUN), each RUN ending with its
    HALT and drain."""
    out = []
    for ops, gaps, *rest in programs:
        jumps = set(rest[0]) if rest else set()
        calls = set(rest[1]) if len(rest) > 1 else set()
        b = Builder(cfg)
        for i, (op, g) in enumerate(zip(ops, gaps)):
            if g:
                out.append(("gap", "nop", g))
            if i in calls:
                out.append(("call", "jump", 1))
            out.append((op.name, op.kind, op.emit(b)))
            if i in calls:
                out.append(("return", "jump", 1))
            if i in jumps:
                out.append(("align", "jump", 1))
        out.append(("halt+drain", "halt", cfg.run_overhead))
    return out


def breakdown_lines(rows) -> list:
    """The table :meth:`TrainProgram.describe` prints under the memory map."""
    return [f"{'op':<14} {'kind':<10} {'cycles':>7}"] + [f"{n:<14} {k:<10} {i:>7}" for n, k, i in rows]
