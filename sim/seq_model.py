"""Executable reference model of the core's microprogrammed sequencer.

:class:`SequencerModel` has exactly the semantics of :class:`rtl.sequencer.Sequencer`
(specified in ``docs/core.md``, section "The sequencer"), minus timing: it turns a
microcode image and a start pc into the stream of issued instructions, each with its
micro-op as the PEs see it (the selected address generators' values added to the
``ra``/``rb``/``wa``/``wb`` offsets, modulo ``2^addr_bits``).

It is used by the RTL tests (cycle-by-cycle comparison of the issued stream), the core
model and the fast simulator, so it works on integers: each microcode word is decoded
once (cached per address) and the loop / AGU state is kept in plain lists, with the AGU
values maintained incrementally.

Usage::

    m = SequencerModel(cfg)
    m.load(program)                  # Instructions or integer words, at address 0
    for issued in m.run(start_pc=0):
        issued.pc, issued.uop        # uop: int word as broadcast to the PEs
        issued.instr                 # decoded Instruction (lazily)

Stepping interface (for a core model that interleaves host-stream stalls)::

    m.start(pc); while m.running: m.head ...; m.step()
"""

from __future__ import annotations

import numpy as np

from arch.isa import AGU_FIELDS, DMA_DRAM, DMA_SPAD, SPAD_RD, SPAD_WR, Instruction, SeqOp, instr_layout, uop_offset_fields
from arch.errors import CaterpillarError, InputError

__all__ = ["SequencerModel", "Issued", "ProgramError", "RunawayError", "SpadPointers", "spad_pointer_trace"]


class RunawayError(CaterpillarError, RuntimeError):
    """A program did not reach ``HALT`` within the allowed number of instructions."""


class ProgramError(InputError):
    """A program that the sequencer does not define: a ``LOOP`` executed at the end of an
    armed loop (the last instruction of a loop body may not be a ``LOOP``; the
    assembler's nested blocks never produce one), and with ``cfg.addr_stage`` three more
    improperly nested ``LOOP`` placements (``docs/core.md``, "The address stage")."""


class Issued:
    """One issued instruction.

    Attributes
    ----------
    pc : int
        Microcode address of the instruction.
    uop : int
        The micro-op word as broadcast to the PEs (AGU values added to the offsets).
    word : int
        The whole instruction word (``ctl`` unchanged, ``uop`` as broadcast).
    op : int
        The :class:`~arch.isa.SeqOp` of the instruction.
    hin, hout, hlast : int
        Stream fields of the instruction (:class:`~arch.isa.HostDir` codes).
    rin, rout : int
        1 when the ``hin`` beat comes from the ring / the ``hout`` beat goes to the ring
        (the ``rin`` / ``rout`` assembly forms) instead of the host stream.
    sin, sout : int
        1 when the ``hin`` beat comes from the scratchpad / the ``hout`` beat goes to it
        (cores with a scratchpad; they take precedence: ``rin`` / ``rout`` are then 0).
    spad_sel, spad_val : int
        A ``SPAD_PTR`` instruction: which pointers it sets (bit 0 read, bit 1 write) and
        the value (mod ``spad_depth``); 0 otherwise.
    dma, dma_n : int
        Cores with DRAM: the :class:`~arch.isa.DmaOp` and its beats - 1; 0 otherwise.
    dma_sel, dma_val : int
        A ``DMA_PTR`` instruction: which addresses it sets (bit 0 DRAM, bit 1
        scratchpad) and the value ``imm | target << loop_bits``; 0 otherwise.
    """

    __slots__ = ("pc", "uop", "word", "op", "hin", "hout", "hlast", "rin", "rout", "sin", "sout",
                 "spad_sel", "spad_val", "dma", "dma_n", "dma_sel", "dma_val", "_cfg", "_instr")

    def __init__(self, pc, uop, word, op, hin, hout, hlast, cfg, rin=0, rout=0, sin=0, sout=0, spad_sel=0,
                 spad_val=0, dma=0, dma_n=0, dma_sel=0, dma_val=0):
        self.pc, self.uop, self.word, self.op = pc, uop, word, op
        self.hin, self.hout, self.hlast = hin, hout, hlast
        self.rin, self.rout = rin, rout
        self.sin, self.sout = sin, sout
        self.spad_sel, self.spad_val = spad_sel, spad_val
        self.dma, self.dma_n, self.dma_sel, self.dma_val = dma, dma_n, dma_sel, dma_val
        self._cfg = cfg
        self._instr = None

    @property
    def instr(self) -> Instruction:
        """The issued word decoded as an :class:`~arch.isa.Instruction` (AGU offsets applied)."""
        if self._instr is None:
            self._instr = Instruction.decode(self.word, self._cfg)
        return self._instr

    def __eq__(self, other):
        return isinstance(other, Issued) and (self.pc, self.word) == (other.pc, other.word)

    def __hash__(self):
        return hash((self.pc, self.word))

    def __repr__(self):
        return f"Issued(pc={self.pc}, {self.instr!r})"


#: decoded microcode words by (layout, word), shared by every sequencer model
_WORDS: dict = {}


class _Decoded:
    """A microcode word split into the fields the sequencer uses (decoded once)."""

    __slots__ = ("op", "lvl", "agu", "target", "imm", "hin", "hout", "hlast", "rin", "rout", "sin", "sout",
                 "spad_sel", "spad_val", "dma", "dma_n", "dma_sel", "dma_val", "sels", "uop", "ctl")


class SequencerModel:
    """Reference model of :class:`rtl.sequencer.Sequencer`.

    Parameters
    ----------
    cfg : ArchConfig
        Supplies ``ucode_depth``, ``n_loops``, ``n_agus``, ``loop_bits``, ``addr_bits``.

    Notes
    -----
    Semantics (``docs/core.md``): for the instruction at ``pc``, with every read seeing
    the state before it,

    1. AGU ``a`` has the value ``base[a] + sum_l off[a][l]`` (mod ``2^addr_bits``); a
       selector ``ag_x = k`` (1..n_agus) adds AGU ``k-1`` to the micro-op's ``x.off``.
    2. ``JUMP``: next pc = target. ``HALT``: stop. Otherwise the armed levels ending at
       ``pc`` are scanned from level ``n_loops-1`` down: ``cnt > 1`` decrements, advances
       the level's AGU offsets by their strides and branches to the level's start (stop
       scanning); otherwise the level re-arms (``cnt = trip``, offsets 0) and the scan
       goes on. No branch: next pc = ``pc + 1`` (mod ``ucode_depth``).
    3. ``LOOP`` arms level ``lvl`` (start ``pc+1``, end ``target``, ``cnt = trip = imm``,
       offsets of the level 0) after step 2; ``AGU_BASE`` / ``AGU_STRIDE`` set
       ``base[agu]`` / ``stride[agu][lvl]`` to ``imm`` (mod ``2^addr_bits``).

    A ``LOOP`` word at the end of an armed loop (an improperly nested loop, which the
    assembler cannot produce) raises :class:`ProgramError` before anything changes.

    Out-of-range ``lvl`` / ``agu`` values (``>= n_loops`` / ``>= n_agus``) make ``LOOP`` /
    ``AGU_*`` change nothing, selectors ``> n_agus`` add 0, op codes 6 and 7 act as
    ``NEXT``. :meth:`start` resets all loop and AGU state (as the RTL's ``start`` does).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.depth = cfg.ucode_depth
        self.n_loops = cfg.n_loops
        self.n_agus = cfg.n_agus
        self.amask = (1 << cfg.addr_bits) - 1
        self._addr_stage = cfg.addr_stage
        lay = instr_layout(cfg)
        self._ctl = {n: (f.offset, (1 << f.width) - 1) for n, f in lay["ctl"].shape}
        self._uop_shift = lay["uop"].offset
        self._uop_mask = (1 << lay["uop"].shape.size) - 1
        self._ctl_mask = (1 << self._uop_shift) - 1
        offs = uop_offset_fields(cfg)
        self._off_fields = [offs[f"{f}_off"][0] for f in AGU_FIELDS]
        self.mem = [0] * self.depth
        self._dec: list[_Decoded | None] = [None] * self.depth
        #: what a word's decoding depends on besides the word (the _WORDS key)
        self._dkey = (tuple(self._ctl.items()), self._uop_shift, self._uop_mask, tuple(self._off_fields),
                      self.n_agus, cfg.loop_bits, cfg.spad_depth)
        self.running = False
        self.pc = 0
        self._reset_state()

    # -- microcode memory ---------------------------------------------------------------
    def load(self, program, addr: int = 0) -> None:
        """Write ``program`` (Instructions or integer words) into microcode from ``addr``."""
        words = [w.encode(self.cfg) if isinstance(w, Instruction) else int(w) for w in program]
        if addr < 0 or addr + len(words) > self.depth:
            raise ValueError(f"program of {len(words)} words at address {addr} does not fit in "
                             f"ucode_depth={self.depth}")
        top = 1 << instr_layout(self.cfg).size
        for i, w in enumerate(words):
            if not 0 <= w < top:
                raise ValueError(f"microcode word {i} ({w:#x}) does not fit in {top.bit_length() - 1} bits")
            self.mem[addr + i] = w
            self._dec[addr + i] = None

    def _decode(self, pc: int) -> _Decoded:
        d = self._dec[pc]
        if d is None:
            w = self.mem[pc]
            d = _WORDS.get((self._dkey, w))
            if d is None:
                d = self._decode_word(w)
                if len(_WORDS) >= 1 << 16:
                    _WORDS.clear()
                _WORDS[(self._dkey, w)] = d
            self._dec[pc] = d
        return d

    def _decode_word(self, w: int) -> _Decoded:
        """The fields of microcode word ``w`` (a function of the word alone: shared by
        every sequencer of the same layout through _WORDS, and never modified)."""
        c = self._ctl
        d = _Decoded()

        def f(name):
            off, mask = c[name]
            return (w >> off) & mask

        d.op, d.lvl, d.agu, d.target, d.imm = f("op"), f("lvl"), f("agu"), f("target"), f("imm")
        d.hin, d.hout, d.hlast = f("hin"), f("hout"), f("hlast")
        d.rin, d.rout = f("rin"), f("rout")
        d.sin = d.sout = d.spad_sel = d.spad_val = 0
        if "sin" in c:
            # scratchpad flags take precedence over the ring flags; they only matter
            # with a direction (as rin / rout)
            d.sin, d.sout = f("sin") if d.hin else 0, f("sout") if d.hout else 0
            if d.sin:
                d.rin = 0
            if d.sout:
                d.rout = 0
            if d.op == SeqOp.SPAD_PTR:
                d.spad_sel = d.lvl & (SPAD_RD | SPAD_WR)
                d.spad_val = (d.imm | (d.target << self.cfg.loop_bits)) & (self.cfg.spad_depth - 1)
        d.dma = d.dma_n = d.dma_sel = d.dma_val = 0
        if "dma" in c:
            d.dma, d.dma_n = f("dma"), f("dma_n")
            if d.op == SeqOp.DMA_PTR:
                d.dma_sel = d.lvl & (DMA_DRAM | DMA_SPAD)
                d.dma_val = d.imm | (d.target << self.cfg.loop_bits)
        sels = tuple((off, f(f"ag_{fld}")) for fld, off in zip(AGU_FIELDS, self._off_fields))
        d.sels = tuple((off, s - 1) for off, s in sels if 1 <= s <= self.n_agus)
        d.uop = (w >> self._uop_shift) & self._uop_mask
        d.ctl = w & self._ctl_mask
        return d

    # -- state ----------------------------------------------------------------------------
    def _reset_state(self):
        nl, na = self.n_loops, self.n_agus
        self.lstart = [0] * nl
        self.lend = [0] * nl
        self.trip = [0] * nl
        self.cnt = [0] * nl
        self.armed = [False] * nl
        self.base = [0] * na
        self.stride = [[0] * nl for _ in range(na)]
        self.off = [[0] * nl for _ in range(na)]
        self.agu = [0] * na          # base + sum(off), maintained incrementally
        self._ends: dict[int, list[int]] = {}  # end pc -> armed levels ending there, high first

    def _reindex_ends(self):
        ends: dict[int, list[int]] = {}
        for lv in range(self.n_loops - 1, -1, -1):
            if self.armed[lv]:
                ends.setdefault(self.lend[lv], []).append(lv)
        self._ends = ends

    def agu_values(self) -> list[int]:
        """Current AGU values ``base + sum_l off[l]`` (mod ``2^addr_bits``)."""
        return list(self.agu)

    def start(self, pc: int) -> None:
        """Start running at ``pc`` with all loop and AGU state reset (RTL ``start`` pulse)."""
        if not 0 <= pc < self.depth:
            raise ValueError(f"start pc {pc} outside microcode (ucode_depth={self.depth})")
        self._reset_state()
        self.pc = pc
        self.running = True

    @property
    def head(self) -> Instruction:
        """The instruction that issues next (decoded, before AGU offsets)."""
        return Instruction.decode(self.mem[self.pc], self.cfg)

    @property
    def head_needs(self) -> tuple[int, int]:
        """``(hin, hout)`` of the instruction that issues next (the RTL ``need_*`` outputs)."""
        d = self._decode(self.pc)
        return d.hin, d.hout

    # -- execution ------------------------------------------------------------------------
    def step(self) -> Issued:
        """Issue the head instruction and advance; returns what was issued."""
        if not self.running:
            raise RuntimeError("sequencer is not running (call start() first)")
        pc = self.pc
        d = self._decode(pc)
        uop = d.uop
        if d.sels:
            am = self.amask
            agu = self.agu
            for off, a in d.sels:
                v = (((uop >> off) & am) + agu[a]) & am
                uop = (uop & ~(am << off)) | (v << off)
        op = d.op
        if op == SeqOp.LOOP and self._ends.get(pc):
            lvs = ", ".join(str(lv) for lv in self._ends[pc])
            raise ProgramError(f"LOOP at microcode address {pc} is the last instruction of the armed "
                               f"loop body of level {lvs}: a loop body must not end with a LOOP "
                               f"(the sequencer does not define it)")
        if op == SeqOp.LOOP and self._addr_stage and d.lvl < self.n_loops:
            self._check_addr_stage_loop(pc, d)
        if op == SeqOp.JUMP:
            self.pc = d.target
        elif op == SeqOp.HALT:
            self.running = False
        else:
            nxt = pc + 1
            if nxt == self.depth:
                nxt = 0
            levels = self._ends.get(pc)
            if levels:
                am = self.amask
                for lv in levels:                 # high level first
                    if self.cnt[lv] > 1:
                        self.cnt[lv] -= 1
                        for a in range(self.n_agus):
                            s = self.stride[a][lv]
                            if s:
                                self.off[a][lv] = (self.off[a][lv] + s) & am
                                self.agu[a] = (self.agu[a] + s) & am
                        nxt = self.lstart[lv]
                        break
                    self.cnt[lv] = self.trip[lv]
                    for a in range(self.n_agus):
                        o = self.off[a][lv]
                        if o:
                            self.off[a][lv] = 0
                            self.agu[a] = (self.agu[a] - o) & am
            self.pc = nxt
            if op == SeqOp.LOOP:
                lv = d.lvl
                if lv < self.n_loops:
                    self.lstart[lv] = (pc + 1) % self.depth
                    self.lend[lv] = d.target
                    self.trip[lv] = self.cnt[lv] = d.imm
                    self.armed[lv] = True
                    for a in range(self.n_agus):
                        o = self.off[a][lv]
                        if o:
                            self.off[a][lv] = 0
                            self.agu[a] = (self.agu[a] - o) & self.amask
                    self._reindex_ends()
            elif op == SeqOp.AGU_BASE:
                a = d.agu
                if a < self.n_agus:
                    v = d.imm & self.amask
                    self.agu[a] = (self.agu[a] - self.base[a] + v) & self.amask
                    self.base[a] = v
            elif op == SeqOp.AGU_STRIDE:
                a = d.agu
                if a < self.n_agus and d.lvl < self.n_loops:
                    self.stride[a][d.lvl] = d.imm & self.amask
        return Issued(pc, uop, d.ctl | (uop << self._uop_shift), op, d.hin, d.hout, d.hlast,
                      self.cfg, d.rin, d.rout, d.sin, d.sout, d.spad_sel, d.spad_val, d.dma, d.dma_n, d.dma_sel,
                      d.dma_val)

    def _check_addr_stage_loop(self, pc: int, d: _Decoded, ends=None) -> None:
        """``cfg.addr_stage``: raise :class:`ProgramError` for the ``LOOP`` placements the
        address stage does not define (its scan of the instruction after a ``LOOP`` runs
        before the ``LOOP`` is decoded; ``docs/core.md``, "The address stage").

        ``ends``: the armed levels ending at ``pc + 1``, high level first (default: the
        model's own; :func:`sim.fast_trace.issue_trace` passes them for a ``LOOP`` it
        plans ahead of stepping to it)."""
        nxt = (pc + 1) % self.depth
        if ends is None:
            ends = self._ends.get(nxt, ())
        lv = d.lvl
        where = f"LOOP at microcode address {pc} (level {lv}, target {d.target})"
        if d.target != nxt:
            if ends:
                raise ProgramError(f"{where}: the armed loop of level {ends[0]} ends at the next "
                                   f"address {nxt}, inside the new loop's body (not defined with "
                                   f"ArchConfig.addr_stage)")
            return
        higher = [k for k in ends if k > lv]
        if higher:
            raise ProgramError(f"{where}: its one-instruction body {nxt} is also the end of the armed "
                               f"loop of level {higher[0]}, a higher level (not defined with "
                               f"ArchConfig.addr_stage)")
        if lv in ends and d.imm <= 1 and self.cnt[lv] > 1:
            raise ProgramError(f"{where}: re-arms its level with one trip while that level's loop "
                               f"ending at {nxt} still counts {self.cnt[lv]} (not defined with "
                               f"ArchConfig.addr_stage)")

    def iter_run(self, start_pc: int = 0, max_instructions: int = 1_000_000):
        """Generator form of :meth:`run` (raises :class:`RunawayError` when exhausted)."""
        self.start(start_pc)
        step = self.step
        for _ in range(max_instructions):
            yield step()
            if not self.running:
                return
        raise RunawayError(
            f"no HALT within {max_instructions} instructions (started at pc {start_pc}, "
            f"now at pc {self.pc}): runaway program?")

    def run(self, start_pc: int = 0, max_instructions: int = 1_000_000) -> list[Issued]:
        """Run from ``start_pc`` (state reset) until ``HALT``; the issued instructions in order.

        The ``HALT`` itself is the last element. Raises :class:`RunawayError` if no
        ``HALT`` issues within ``max_instructions``.
        """
        return list(self.iter_run(start_pc, max_instructions))


class SpadPointers:
    """The scratchpad read / write pointers of a RUN (sequencer state of cores with a
    scratchpad; both 0 at the start of every RUN, like the loop and AGU state).

    :meth:`step` takes the issued instructions in order and returns the scratchpad
    addresses the instruction reads (``sin``) and writes (``sout``), ``None`` when it
    does not: each access post-increments its pointer (mod ``spad_depth``); a
    ``SPAD_PTR`` sets the selected pointers for the next instructions (overriding the
    increment of its own access)."""

    def __init__(self, cfg):
        self.mask = max(cfg.spad_depth - 1, 0)
        self.rd = self.wr = 0

    def step(self, issued: Issued):
        ra = wa = None
        if issued.sin:
            ra = self.rd
            self.rd = (self.rd + 1) & self.mask
        if issued.sout:
            wa = self.wr
            self.wr = (self.wr + 1) & self.mask
        if issued.spad_sel & SPAD_RD:
            self.rd = issued.spad_val
        if issued.spad_sel & SPAD_WR:
            self.wr = issued.spad_val
        return ra, wa


def spad_pointer_trace(acc, sel, val, mask):
    """Vectorized :class:`SpadPointers` over the instructions of a RUN: ``acc`` [n] bool
    (the instruction reads, resp. writes, the scratchpad), ``sel`` [n] bool (it is a
    ``SPAD_PTR`` setting this pointer), ``val`` [n] the value it sets. Returns the
    pointer value each instruction sees (its address when ``acc``)."""
    n = len(acc)
    if n == 0:
        return np.zeros(0, np.int64)
    acc = np.asarray(acc, np.int64)
    c = np.concatenate([[0], np.cumsum(acc)])                 # accesses before step i
    idx = np.arange(n)
    last = np.maximum.accumulate(np.where(sel, idx, -1))       # last set at or before i
    prev = np.concatenate([[-1], last[:-1]])                    # last set before i
    base = np.where(prev >= 0, np.asarray(val, np.int64)[np.maximum(prev, 0)], 0)
    since = c[idx] - np.where(prev >= 0, c[prev + 1], 0)
    return (base + since) & mask
