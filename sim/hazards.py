"""Stale-read checker: runs a program on the core model and reports every read that
does not see the write program order says it should see.

Nothing stalls in the PE (``docs/architecture.md``, "Pipeline timing and hazards"): a
micro-op that reads a register or an SRAM word too soon after a write silently gets the
old value. How soon is too soon depends on the PE timing of the configuration
(:attr:`arch.config.ArchConfig.exec_stage`, ``bus_stage``, ``rx_stage``, ``mul_latency``,
``add_latency``) and on the
pair (writer, reader): a move or an FMA write-back into the RF read by an operand-stage
source (FMA ``a``/``b``, move ``src``/``msk``, a driver's ``src``, an SRAM write's ``src``)
or by the late ``c`` read of an FMA (when its product reaches the adder: MAC chains need
only ``acc_reuse_distance``); an SRAM write (``wa``/``wb``, or an FMA write-back into SRAM)
read by ``ra``/``rb`` at issue. :func:`pe_timing` measures these minimum issue distances
on :class:`pe.pe_model.PEModel` itself (a writer and a reader at distance ``d`` on a lone
PE, for every pair; cached per timing), so the checker follows the reference model
exactly, whatever its timing. With the reference timing they are ``cfg.mv_read_distance``
(move -> RF read; ``cfg.mv_drive_distance`` for a bus driver's source),
``cfg.sram_read_distance`` (``wa``/``wb`` -> SRAM read),
``cfg.fpu_latency - 1`` (FMA -> operand-stage read), ``cfg.acc_reuse_distance`` (FMA ->
late ``c``) and ``cfg.fpu_latency`` (FMA write-back into SRAM -> SRAM read); print
``pe_timing(cfg).table()`` for another configuration.

:func:`find_hazards` runs the program on :class:`sim.core_model.CoreModel` (the sequencer
decides which micro-op issues in which cycle; each PE model keeps its address registers)
with PE models that, at every issue, check what the micro-op reads and record what it
writes: only the source fields it actually uses (predicate, read gates, bus-driver
selection; ``msk`` only for ``MASK``), at the addresses of its AR values. A read by the
micro-op issued at ``T`` should see the *expected* write: the latest performed write to
that location issued before ``T`` (within one micro-op the FMA comes last). It sees, of
the writes whose distance to ``T`` is at least their measured distance, the one that
landed last (an FMA write-back lands after a move or SRAM write issued up to
``fma_lag - 1`` cycles later; it wins a tie and drops the other bank write,
``mem_conflict``). The read is *stale* when it does not see the expected write: the
write comes too soon before it (distance below the minimum), or an older write landed
over it since (an FMA write-back after a later move), or it was dropped. Reads of
locations no write of this run has touched are never stale. Values play no part (the
FP arithmetic is not computed), so the result holds for any data.

Not covered: reads that see a *later* write too early (an FMA's late ``c`` read after a
move issued after the FMA), the scratchpad (``sin`` after ``sout``), and the SRAM read
port register (``mema``/``memb`` of a micro-op that did not read).

Command line: ``python -m sim.hazards PROGRAM [--config CFG] [--exec-stage] [--start PC]
[--limit N]`` (``PROGRAM``: assembly text, or a ``.hex`` microcode file).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from arch.microop import FmaWb, MvOp
from pe.pe_model import DecodedUop, PEModel
from sim.core_model import CoreModel, CoreRun
from arch.errors import InputError

__all__ = ["Hazard", "HazardError", "PETiming", "find_hazards", "check_program", "pe_timing", "summarize",
           "main"]

KINDS = ("mv", "fma", "sram")


@dataclass(frozen=True)
class Hazard:
    """One stale read of one PE.

    Attributes
    ----------
    kind : str
        ``"mv"`` (the write is a move into the RF), ``"fma"`` (an FMA write-back into the
        RF) or ``"sram"`` (a ``wa``/``wb`` write or an FMA write-back into SRAM, read by
        ``ra``/``rb``).
    cycle : int
        Issue cycle of the reading micro-op (PE clocks since the start of the RUN; the
        first instruction issues in cycle 1, after the sequencer's start cycle).
    pc : int
        Microcode address of the reading instruction.
    writer_cycle, writer_pc : int
        Issue cycle and address of the write the read should have seen.
    pe : tuple of int
        ``(row, col)`` of the PE.
    loc : int or tuple
        The register index, or ``(bank, address)`` with ``bank`` ``"a"``/``"b"``.
    field : str
        The reading source field(s), comma-separated: ``fma.a``, ``fma.b``, ``fma.c``
        (the late read), ``mv.src``, ``mv.msk``, ``rdrv.src``, ``cdrv.src``, ``wa.src``,
        ``wb.src``, or the SRAM read port ``ra`` / ``rb``.
    writer_unit : str
        ``"mv"``, ``"fma"``, ``"wa"`` or ``"wb"``.
    need : int
        Minimum issue distance from the writer for this read to see it (:attr:`distance`
        is the actual one; at or above ``need`` the write was overwritten or dropped by an
        older FMA write-back that landed later).
    """

    kind: str
    cycle: int
    pc: int | None
    writer_cycle: int
    writer_pc: int | None
    pe: tuple
    loc: object
    field: str
    writer_unit: str
    need: int

    @property
    def distance(self) -> int:
        """Issue distance from the writer to the reader."""
        return self.cycle - self.writer_cycle

    def where(self) -> str:
        if isinstance(self.loc, tuple):
            return f"{self.loc[0].upper()}[{self.loc[1]}]"
        return f"r{self.loc}"

    def __str__(self):
        why = (f"distance {self.distance} < {self.need}" if self.distance < self.need
               else f"distance {self.distance} >= {self.need}, but overwritten or dropped by an older FMA "
                    f"write-back landing later")
        return (f"{self.kind}: pc {self.pc} (cycle {self.cycle}) PE{self.pe} reads {self.where()} "
                f"({self.field}) before the {self.writer_unit} write of pc {self.writer_pc} "
                f"(cycle {self.writer_cycle}): {why}")


class HazardError(InputError):
    """A program has stale reads (raised by :func:`check_program`)."""

    def __init__(self, hazards, shown: int = 5):
        self.hazards = list(hazards)
        n = len(self.hazards)
        lines = [f"{n} stale read(s), first {min(shown, n)}:"] + [f"  {h}" for h in self.hazards[:shown]]
        super().__init__("\n".join(lines))


# ======================================================================================
# the PE's hazard distances, measured on the reference model
# ======================================================================================
#: source fields read in the operand stage (``fma.c`` is read late, when the product
#: reaches the adder)
OPERAND_FIELDS = ("fma.a", "fma.b", "mv.src", "mv.msk", "rdrv.src", "cdrv.src", "wa.src", "wb.src")
RF_FIELDS = OPERAND_FIELDS + ("fma.c",)


@dataclass(frozen=True)
class PETiming:
    """Hazard distances of one PE timing, measured on :class:`pe.pe_model.PEModel`.

    Attributes
    ----------
    need : dict
        ``(writer, reader) -> d``: a read issued ``d`` or more cycles after the write sees
        it, an earlier one does not. Writers ``"mv"``, ``"fma"`` (RF write-back) with every
        reader of :data:`RF_FIELDS`; ``("wa", "ra")``, ``("wb", "rb")``, and the FMA
        write-back into SRAM ``("fma", "ra")``, ``("fma", "rb")``.
    fma_lag : dict
        ``"rf"`` / ``"a"`` / ``"b"``: an FMA write-back lands in the same cycle as a move
        (an SRAM write into that bank) issued this many cycles after the FMA (the cycle of
        ``rf_conflict`` / ``mem_conflict``): orders writes that land out of issue order.
    """

    need: dict
    fma_lag: dict

    def table(self) -> str:
        """The distances as text lines ``writer -> reader: d``."""
        return "\n".join(f"{w:>3s} -> {r}: {d}" for (w, r), d in self.need.items())

    def summary(self) -> str:
        """One line: the distances grouped by writer and kind of read."""
        groups = {"mv -> RF operand": [("mv", f) for f in OPERAND_FIELDS],
                  "fma -> RF operand": [("fma", f) for f in OPERAND_FIELDS],
                  "fma -> late c": [("fma", "fma.c")],
                  "wa/wb -> SRAM read": [("wa", "ra"), ("wb", "rb")],
                  "fma -> SRAM read": [("fma", "ra"), ("fma", "rb")]}
        parts = []
        for name, keys in groups.items():
            ds = sorted({self.need[k] for k in keys})
            parts.append(f"{name} {ds[0] if len(ds) == 1 else ds}")
        return ", ".join(parts)


def _probe_cfg(cfg):
    """A 1 x 1 core with small banks and ``cfg``'s timing."""
    return cfg.replace(nr=1, mem_a_words=16, mem_b_words=16, spad_kib=0, cores=1)


@lru_cache(maxsize=None)
def _measure_timing(pcfg) -> PETiming:
    from arch.microop import MicroOp, Src

    one, nz = int(Src.ONE), int(Src.NZERO)
    nop = MicroOp()
    far = pcfg.fpu_latency + 3
    mov = dict(mv_op=int(MvOp.MOV), mv_dst=2)

    def run(uops):
        pe = PEModel(pcfg, 0, 0)
        evs = [pe.step(u)[1] for u in uops + [nop] * far]
        return pe, evs

    rf_writers = {
        "mv": MicroOp(mv_op=int(MvOp.MOV), mv_src=one, mv_dst=1),
        "fma": MicroOp(fpu_en=1, fpu_a=one, fpu_b=one, fpu_c=nz, fpu_dst=1, fpu_wb=int(FmaWb.RF)),
    }
    rf_readers = {    # each reads r1 and leaves what it read (a function of it) in r2 / A[9] / B[9]
        "fma.a": MicroOp(fpu_en=1, fpu_a=1, fpu_b=one, fpu_c=nz, fpu_dst=2),
        "fma.b": MicroOp(fpu_en=1, fpu_a=one, fpu_b=1, fpu_c=nz, fpu_dst=2),
        "fma.c": MicroOp(fpu_en=1, fpu_a=one, fpu_b=one, fpu_c=1, fpu_dst=2),
        "mv.src": MicroOp(mv_src=1, **mov),
        "mv.msk": MicroOp(mv_op=int(MvOp.MASK), mv_src=one, mv_msk=1, mv_dst=2),
        "rdrv.src": MicroOp(rdrv_en=1, rdrv_k=0, rdrv_src=1, mv_src=int(Src.ROW), **mov),
        "cdrv.src": MicroOp(cdrv_en=1, cdrv_k=0, cdrv_src=1, mv_src=int(Src.COL), **mov),
        "wa.src": MicroOp(wa_en=1, wa_off=9, wa_src=1),
        "wb.src": MicroOp(wb_en=1, wb_off=9, wb_src=1),
    }

    def seen(pe):
        return pe.rf[2], pe.mem_a[9], pe.mem_b[9]

    sram_pairs = {
        ("wa", "ra"): (MicroOp(wa_en=1, wa_off=5, wa_src=one), MicroOp(ra_en=1, ra_off=5, mv_src=int(Src.MEMA), **mov)),
        ("wb", "rb"): (MicroOp(wb_en=1, wb_off=5, wb_src=one), MicroOp(rb_en=1, rb_off=5, mv_src=int(Src.MEMB), **mov)),
        ("fma", "ra"): (MicroOp(fpu_en=1, fpu_a=one, fpu_b=one, fpu_c=nz, fpu_wb=int(FmaWb.MEMA), ra_off=5),
                        MicroOp(ra_en=1, ra_off=5, mv_src=int(Src.MEMA), **mov)),
        ("fma", "rb"): (MicroOp(fpu_en=1, fpu_a=one, fpu_b=one, fpu_c=nz, fpu_wb=int(FmaWb.MEMB), rb_off=5),
                        MicroOp(rb_en=1, rb_off=5, mv_src=int(Src.MEMB), **mov)),
    }
    pairs = {(w, r): (wu, ru) for w, wu in rf_writers.items() for r, ru in rf_readers.items()}
    pairs.update(sram_pairs)

    need = {}
    for key, (wu, ru) in pairs.items():
        def result(d, w=wu, r=ru):
            return seen(run([w] + [nop] * (d - 1) + [r])[0])
        new, old = result(far), result(far, nop)
        if new == old:
            raise RuntimeError(f"hazard probe {key}: the write does not change what the read gives")
        vis = [result(d) == new for d in range(1, far + 1)]
        d0 = next(i for i in range(len(vis)) if all(vis[i:])) + 1
        if any(vis[:d0 - 1]):
            raise RuntimeError(f"hazard probe {key}: visibility is not a distance rule: {vis}")
        need[key] = d0

    def lag(writer, second, event):
        for k in range(1, far):
            _, evs = run([writer] + [nop] * (k - 1) + [second])
            if any(getattr(e, event) for e in evs):
                return k
        raise RuntimeError(f"hazard probe: no {event} found")

    fma_rf = rf_writers["fma"]
    lags = {"rf": lag(fma_rf, MicroOp(mv_op=int(MvOp.MOV), mv_src=nz, mv_dst=1), "rf_conflict"),
            "a": lag(sram_pairs[("fma", "ra")][0], MicroOp(wa_en=1, wa_off=9, wa_src=one), "mem_conflict"),
            "b": lag(sram_pairs[("fma", "rb")][0], MicroOp(wb_en=1, wb_off=9, wb_src=one), "mem_conflict")}
    return PETiming(need, lags)


def pe_timing(cfg) -> PETiming:
    """The hazard distances of ``cfg``'s PE timing, measured on the PE reference model
    (cached per timing): what :func:`find_hazards` checks against.

    Parameters
    ----------
    cfg : arch.config.ArchConfig

    Returns
    -------
    PETiming
    """
    return _measure_timing(_probe_cfg(cfg))


# ======================================================================================
# bookkeeping
# ======================================================================================
class _W:
    """One performed write of one PE."""

    __slots__ = ("seq", "issue", "pc", "unit", "key", "dropped")

    def __init__(self, seq, issue, pc, unit, key, dropped=False):
        self.seq, self.issue, self.pc, self.unit, self.key, self.dropped = seq, issue, pc, unit, key, dropped


class _Loc:
    """The writes of one location: recent ones in issue order, and of the older ones
    (visible to every read still to come) the latest issued and the one whose value the
    location holds."""

    __slots__ = ("recent", "old_last", "old_value")

    def __init__(self):
        self.recent: list = []
        self.old_last = None
        self.old_value = None


class _Run:
    """State shared by the PEs of one checked RUN."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.t = t = pe_timing(cfg)
        self.pcs: list = []          # pc issued in each PE cycle (None: a NOP bubble)
        self.next_pc = None          # pc of the instruction the next PE clock issues
        self.found: list = []        # (cycle, row, col, order, Hazard)
        self.seq = 0
        self.order = 0
        self.horizon = max(t.need.values()) + max(t.fma_lag.values()) + 2


class _HazardPE(PEModel):
    """A :class:`PEModel` that checks the reads and records the writes of every micro-op
    it issues (before the clock: AR values of the issue). Its FP arithmetic returns 0
    (values do not matter for hazards)."""

    def __init__(self, cfg, row, col, run: _Run):
        super().__init__(cfg, row, col)
        self._run = run
        self._h_locs: dict = {}      # location -> _Loc
        self._h_fma_mem: dict = {}   # issue cycle -> banks an FMA of that cycle writes back into
        self._h_depth = {"a": cfg.mem_a_words - 1, "b": cfg.mem_b_words - 1}

    def _mul(self, a, b):
        return 0

    def _add(self, a, b):
        return 0

    # -- reads ---------------------------------------------------------------------------
    def _h_check(self, loc, field: str, reader: int):
        """The write a read of ``loc`` by the micro-op issued at ``reader`` should see,
        if it does not see it (else None)."""
        rec = self._h_locs.get(loc)
        if rec is None:
            return None
        need = self._run.t.need
        exp = rec.old_last
        prov = rec.old_value
        for x in rec.recent:
            if x.issue >= reader:
                break
            exp = x
            if not x.dropped and reader - x.issue >= need[(x.unit, field)] and (prov is None or x.key > prov.key):
                prov = x
        if exp is None or prov is exp:
            return None
        return exp

    def _h_report(self, loc, fields: list, w: _W, reader: int):
        run = self._run
        need = max(run.t.need[(w.unit, f)] for f in fields)
        kind = "sram" if isinstance(loc, tuple) else w.unit
        pcs = run.pcs
        h = Hazard(kind, reader, pcs[reader], w.issue, pcs[w.issue], (self.row, self.col), loc, ",".join(fields),
                   w.unit, need)
        run.order += 1
        run.found.append((reader, self.row, self.col, run.order, h))

    def _h_reads(self, u: DecodedUop, pred: bool, cycle: int):
        # SRAM reads (issue stage)
        if u.ra_en and self._gate(u.ra_gate, u, pred):
            loc = ("a", self._h_addr(u.ra_ar, u.ra_off, "a"))
            w = self._h_check(loc, "ra", cycle)
            if w is not None:
                self._h_report(loc, ["ra"], w, cycle)
        if u.rb_en and self._gate(u.rb_gate, u, pred):
            loc = ("b", self._h_addr(u.rb_ar, u.rb_off, "b"))
            w = self._h_check(loc, "rb", cycle)
            if w is not None:
                self._h_report(loc, ["rb"], w, cycle)
        # RF sources of the operand stage, then the late c
        n = self.n_regs
        reads = []
        if self.row_driver(u) and u.rdrv_src < n:
            reads.append((u.rdrv_src, "rdrv.src"))
        if self.col_driver(u) and u.cdrv_src < n:
            reads.append((u.cdrv_src, "cdrv.src"))
        late = None
        if pred:
            if u.fpu_en:
                if u.fpu_a < n:
                    reads.append((u.fpu_a, "fma.a"))
                if u.fpu_b < n:
                    reads.append((u.fpu_b, "fma.b"))
                if u.fpu_c < n:
                    late = u.fpu_c
            if u.mv_op != MvOp.NOP:
                if u.mv_src < n:
                    reads.append((u.mv_src, "mv.src"))
                if u.mv_op == MvOp.MASK and u.mv_msk < n:
                    reads.append((u.mv_msk, "mv.msk"))
            if u.wa_en and u.wa_src < n:
                reads.append((u.wa_src, "wa.src"))
            if u.wb_en and u.wb_src < n:
                reads.append((u.wb_src, "wb.src"))
        stale: dict = {}
        for loc, field in sorted(reads, key=lambda r: (r[0], OPERAND_FIELDS.index(r[1]))):
            w = self._h_check(loc, field, cycle)
            if w is not None:
                stale.setdefault((loc, w), []).append(field)
        for (loc, w), fields in stale.items():
            self._h_report(loc, fields, w, cycle)
        if late is not None:
            w = self._h_check(late, "fma.c", cycle)
            if w is not None:
                self._h_report(late, ["fma.c"], w, cycle)

    def _h_addr(self, ar: int, off: int, bank: str) -> int:
        v = self.ar[ar] if ar < self.n_ar else 0
        return (v + off) & self.amask & self._h_depth[bank]

    # -- writes --------------------------------------------------------------------------
    def _h_write(self, loc, unit: str, cycle: int):
        run = self._run
        run.seq += 1
        lag = 0
        dropped = False
        if unit == "fma":
            lag = run.t.fma_lag[loc[0] if isinstance(loc, tuple) else "rf"]
        elif isinstance(loc, tuple):
            # an FMA write-back into this bank landing in the same cycle displaces it
            dropped = loc[0] in self._h_fma_mem.get(cycle - run.t.fma_lag[loc[0]], ())
        w = _W(run.seq, cycle, run.pcs[cycle], unit, (cycle + lag, unit == "fma", run.seq), dropped)
        rec = self._h_locs.get(loc)
        if rec is None:
            rec = self._h_locs[loc] = _Loc()
        rec.recent.append(w)
        old = cycle - run.horizon
        while rec.recent[0].issue < old:
            x = rec.recent.pop(0)
            rec.old_last = x
            if not x.dropped and (rec.old_value is None or x.key > rec.old_value.key):
                rec.old_value = x

    def _h_writes(self, u: DecodedUop, cycle: int):
        # program order within one micro-op: the FMA last (its result lands last)
        n = self.n_regs
        if u.mv_op != MvOp.NOP and u.mv_dst < n:
            self._h_write(u.mv_dst, "mv", cycle)
        if u.wa_en:
            self._h_write(("a", self._h_addr(u.wa_ar, u.wa_off, "a")), "wa", cycle)
        if u.wb_en:
            self._h_write(("b", self._h_addr(u.wb_ar, u.wb_off, "b")), "wb", cycle)
        if u.fpu_en:
            if u.fpu_wb == FmaWb.MEMA:
                self._h_fma_mem.setdefault(cycle, set()).add("a")
                self._h_write(("a", self._h_addr(u.ra_ar, u.ra_off, "a")), "fma", cycle)
            elif u.fpu_wb == FmaWb.MEMB:
                self._h_fma_mem.setdefault(cycle, set()).add("b")
                self._h_write(("b", self._h_addr(u.rb_ar, u.rb_off, "b")), "fma", cycle)
            elif u.fpu_dst < n:
                self._h_write(u.fpu_dst, "fma", cycle)

    # -- one cycle ---------------------------------------------------------------------
    def clock(self, uop, row_in: int, col_in: int):
        u = self._as_decoded(uop)
        run = self._run
        cycle = self.cycle
        if cycle == len(run.pcs):
            run.pcs.append(run.next_pc)
        pred = self.predicate(u)
        self._h_reads(u, pred, cycle)
        if pred:
            self._h_writes(u, cycle)
        self._h_fma_mem.pop(cycle - run.horizon, None)
        return super().clock(u, row_in, col_in)


# ======================================================================================
# API
# ======================================================================================
def _words(words):
    return words.words() if hasattr(words, "words") else list(words)


def find_hazards(cfg, words, start_pc: int = 0, host_in=(), *, ring_in=(), max_instructions: int = 1_000_000,
                 limit: int | None = 100) -> list[Hazard]:
    """Run a program on the core model and report its stale reads.

    Parameters
    ----------
    cfg : arch.config.ArchConfig
        The configuration, PE timing included (``exec_stage``, ``mul_latency``,
        ``add_latency``).
    words : list of int or sw.asm.Program
        Microcode words, as :meth:`sim.core_model.CoreModel.load` takes them (loaded at
        address 0), or a :class:`sw.asm.Program`.
    start_pc : int
        Address the RUN starts at.
    host_in : sequence of int
        Host input beats consumed by ``hin`` instructions.
    ring_in : sequence of int
        Ring input beats consumed by ``rin`` instructions.
    max_instructions : int
        Instruction budget of the RUN (as :meth:`~sim.core_model.CoreModel.run`).
    limit : int or None
        Report at most this many hazards (the first ones in issue order; the run stops
        once they are known). ``None``: all of them.

    Returns
    -------
    list of Hazard
        Stale reads in issue order of the reader (then PE row, column; a PE's SRAM reads
        before its operand-stage reads before its late ``c`` read). Every PE reports its
        own: a stale read of an all-PE micro-op on an ``nr x nr`` core is ``nr**2``
        hazards.

    Notes
    -----
    The run starts from a reset core (registers, SRAM and pipelines empty), so only
    writes of this program count. Data values are not computed: the sequencer and the
    PEs' predicates, gates, drivers and addresses do not depend on them.
    """
    run = _Run(cfg)
    m = CoreModel(cfg)
    m.pes = [[_HazardPE(cfg, r, c, run) for c in range(cfg.nr)] for r in range(cfg.nr)]
    m.load(_words(words))
    r = CoreRun(m, start_pc, host_in, ring_in, max_instructions)
    iss_pc = None
    while not r.done:
        run.next_pc = iss_pc
        n = r.n
        r.cycle()
        iss_pc = r.last_pc if r.n > n else None
        if limit is not None and len(run.found) >= limit:
            break                                   # (found at issue, in issue order)
    run.found.sort(key=lambda f: f[:4])
    out = [f[4] for f in run.found]
    return out if limit is None else out[:limit]


def check_program(cfg, words, start_pc: int = 0, host_in=(), *, ring_in=(), max_instructions: int = 1_000_000,
                  shown: int = 5) -> None:
    """Raise :class:`HazardError` listing the first ``shown`` stale reads, if any.

    Parameters are those of :func:`find_hazards`; meant for tests
    (``check_program(cfg, prog)`` passes silently on a hazard-free program).
    """
    hz = find_hazards(cfg, words, start_pc, host_in, ring_in=ring_in, max_instructions=max_instructions,
                      limit=None)
    if hz:
        raise HazardError(hz, shown)


def summarize(hazards) -> dict:
    """Counts of ``hazards`` by kind (every kind present, 0 included), plus ``"pcs"``:
    the number of distinct reading instructions."""
    c = Counter(h.kind for h in hazards)
    out = {k: c.get(k, 0) for k in KINDS}
    out["pcs"] = len({h.pc for h in hazards})
    return out


# ======================================================================================
# command line
# ======================================================================================
def main(argv=None) -> int:
    """``python -m sim.hazards PROGRAM``: list the stale reads of a program."""
    from arch.config import config_from_arg
    from sw.asm import assemble, read_hex

    ap = argparse.ArgumentParser(prog="python -m sim.hazards", description=__doc__.splitlines()[0])
    ap.add_argument("program", help="assembly source, or a .hex microcode file")
    ap.add_argument("--config", help="preset name, JSON file or inline JSON (default: the default preset)")
    ap.add_argument("--exec-stage", action="store_true", help="check with ArchConfig.exec_stage=true")
    ap.add_argument("--start", type=int, default=0, help="start pc")
    ap.add_argument("--limit", type=int, default=20, help="hazards to list (0: all)")
    a = ap.parse_args(argv)
    cfg = config_from_arg(a.config)
    if a.exec_stage:
        cfg = cfg.replace(exec_stage=True)
    if a.program.endswith(".hex"):
        words = read_hex(a.program, cfg)
    else:
        with open(a.program) as f:
            words = assemble(f.read(), cfg, file=a.program).words()
    hz = find_hazards(cfg, words, a.start, limit=None)
    for h in hz[:a.limit or None]:
        print(h)
    s = summarize(hz)
    print(f"{len(hz)} stale read(s): " + ", ".join(f"{k} {s[k]}" for k in KINDS) + f" ({s['pcs']} instructions)")
    return 1 if hz else 0


if __name__ == "__main__":
    sys.exit(main())
