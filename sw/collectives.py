"""In-core collectives over the row and column broadcast buses, as program fragments.

Every generator emits instructions into a :class:`sw.asm.Builder` and has an exact cost
function (instructions issued, FMA issues per PE, bus hops) that the tests check against
the core's counters. The mapping and the measured costs are in ``docs/kernels.md``.

Collectives (``direction="row"`` uses the row buses, ``"col"`` the column buses):

* **broadcast** from the diagonal (:func:`emit_broadcast`): a vector in the ``diag``
  layout becomes the ``rows`` layout (row buses: PE ``(r, r)`` drives row ``r``) or the
  ``cols`` layout (column buses), into an SRAM region or into registers. One value per
  cycle on every bus; no FPU.
* **sequential reduction** (:func:`emit_reduce`, ``mode="seq"``), as in the reference
  design: every PE of a row holds ``n`` partial sums; for each value the ``nr - 1``
  other PEs send theirs over the shared bus one after the other (driver at diagonal
  offset ``d = 1 .. nr-1``) and the diagonal PE accumulates (``@diag=0 add``). The sums
  end in the ``diag`` layout.
* **transpose** (:func:`emit_transpose`): a matrix in the 2D round-robin layout becomes
  its transpose in the same layout (PE ``(p, q)``'s block goes to PE ``(q, p)``), in two
  bus phases per source PE row ``p``: the column buses carry row ``p``'s blocks to the
  diagonal PEs (into a staging region), then the row buses carry them from the diagonal
  to column ``p``. ``nr`` values per cycle; the minibatch backward pass needs it for
  activation-sized matrices (``docs/kernels.md``).
* **tree reduction** (``mode="tree"``): segmented buses carry ``nr / 2^(s+1)``
  transfers per cycle in step ``s``; every PE adds what its segment carries, so after
  ``S = ceil(log2 nr)`` steps column 0 (row 0 for ``"col"``) holds the sum; one more
  transfer moves it to the diagonal (or to the whole row: ``rows`` layout).

Both reductions are pipelined over groups of ``G = max(fpu_latency - 1,
acc_reuse_distance)`` values (6 with the default latencies), so each step of a value is
``G`` cycles after the previous one, the FPU issues every cycle and the buses carry a
value every cycle. The same step definitions (:func:`reduce_plan`, :func:`step_slots`)
are used by the GEMV kernels of :mod:`sw.kernels`, where the partial sums are already in
registers and the final moves hide in the next block's MAC instructions.

Conventions shared with :mod:`sw.kernels` and :mod:`sw.transfer`: address register
``ar0`` is 0 (its reset value; no fragment changes it), every SRAM address is
``ar0 + AGU + immediate``; a :class:`Region` is the same bank and base address on every
PE.

Programs are first built as a :class:`Frag` (instructions as slot lists, so that work
can be fused into existing instructions and control slots attached to any free
instruction), then emitted into a Builder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from arch.buses import segment_len
from sw.asm import Builder, add, cdrv, mov, pred, rda, rdb, rdrv, wra, wrb
from sw.layout import local_len
from arch.errors import InputError

__all__ = [
    "Region", "Frag", "CollectiveError", "Cost", "BusDir", "ReduceStep", "reduce_plan", "step_slots",
    "group_size", "tree_steps", "step_hops",
    "emit_broadcast", "cost_broadcast", "emit_reduce", "cost_reduce", "emit_transpose", "cost_transpose",
]


class CollectiveError(InputError):
    """A collective or kernel cannot be generated for these arguments."""


# ======================================================================================
# memory regions and small slot helpers
# ======================================================================================
@dataclass(frozen=True)
class Region:
    """``bank`` (``"a"`` or ``"b"``) at word address ``base``, the same on every PE."""

    bank: str
    base: int = 0
    #: bank depth once bound to a configuration (:meth:`bind`): addresses wrap modulo it
    depth: int = field(default=0, compare=False, repr=False)

    def bind(self, cfg) -> "Region":
        """This region with its bank depth known (immediates then wrap like addresses)."""
        from dataclasses import replace

        return replace(self, depth=cfg.mem_a_words if self.bank == "a" else cfg.mem_b_words)

    def _addr(self, off: int) -> int:
        a = self.base + off
        return a % self.depth if self.depth else a

    def __post_init__(self):
        if self.bank not in ("a", "b"):
            raise CollectiveError(f"unknown SRAM bank {self.bank!r}; allowed: 'a', 'b'")
        if self.base < 0:
            raise CollectiveError(f"negative base address {self.base}")

    @property
    def src(self) -> str:
        """The operand name of this bank's read data (``mema`` / ``memb``)."""
        return "mema" if self.bank == "a" else "memb"

    def rd(self, off: int = 0, *, agu=None, gate="all", read=True):
        """A read slot of ``base + off (+ agu)``."""
        return (rda if self.bank == "a" else rdb)(0, self._addr(off), agu=agu, gate=gate, read=read)

    def wr(self, src, off: int = 0, *, agu=None):
        """A write slot of ``src`` to ``base + off (+ agu)``."""
        return (wra if self.bank == "a" else wrb)(src, 0, self._addr(off), agu=agu)

    def check(self, cfg, n: int, what: str = "region") -> None:
        depth = cfg.mem_a_words if self.bank == "a" else cfg.mem_b_words
        if self.base + n > depth:
            raise CollectiveError(f"{what}: {n} words at {self.base} do not fit SRAM bank "
                                  f"{self.bank.upper()} ({depth} words)")


def reg(i: int) -> str:
    return f"r{i}"


# ======================================================================================
# the fragment IR
# ======================================================================================
@dataclass
class _Ins:
    slots: list = field(default_factory=list)
    #: ("agu_base", agu, v) | ("agu_stride", agu, level, v) | ("loop", name, n, level) | ("spad", rd|wr, v)
    ctl: tuple | None = None


class Frag:
    """A program fragment under construction.

    Instructions are lists of slots (:mod:`sw.asm` slot objects or slot text); more slots
    can be merged into an instruction later (:meth:`add`), control items attached to any
    instruction that has none (:meth:`attach`). Loops are opened on an existing
    instruction (it becomes the ``loop`` instruction, which executes once before the
    body, as in the assembler) and closed after the body. :meth:`emit` writes everything
    into a :class:`~sw.asm.Builder`, whose assembler then checks unit conflicts.
    """

    def __init__(self):
        self.items: list = []          # _Ins | ("close",)

    def __len__(self):
        return sum(isinstance(it, _Ins) for it in self.items)

    def ins(self, *slots) -> _Ins:
        it = _Ins([s for s in slots if s is not None])
        self.items.append(it)
        return it

    def nops(self, k: int) -> list:
        return [self.ins() for _ in range(k)]

    @staticmethod
    def add(it: _Ins, *slots) -> _Ins:
        it.slots.extend(s for s in slots if s is not None)
        return it

    def open_loop(self, it: _Ins, name: str, count: int, level: int) -> None:
        """Make ``it`` (the last instruction so far) the ``loop`` instruction of a loop
        whose body follows."""
        if self.items[-1] is not it:
            raise CollectiveError("a loop opens on the last instruction of the fragment")
        if it.ctl is not None:
            raise CollectiveError(f"instruction already carries {it.ctl[0]}")
        it.ctl = ("loop", name, int(count), level)

    def close_loop(self) -> None:
        self.items.append(("close",))

    def attach(self, ctl: tuple, candidates) -> _Ins:
        """Attach control item ``ctl`` to the first instruction of ``candidates`` without one."""
        for it in candidates:
            if it.ctl is None:
                it.ctl = ctl
                return it
        raise CollectiveError(f"no free instruction for control {ctl}")

    def extend(self, other: "Frag") -> None:
        self.items.extend(other.items)

    def count(self) -> int:
        """Instructions this fragment issues (loop bodies times their trip counts)."""
        stack = [[0, 1]]                # [count in this body, trip count]
        for it in self.items:
            if isinstance(it, _Ins):
                stack[-1][0] += 1
                if it.ctl and it.ctl[0] == "loop":
                    stack.append([0, it.ctl[2]])
            else:
                n, trips = stack.pop()
                stack[-1][0] += n * trips
        if len(stack) != 1:
            raise CollectiveError("unbalanced loops in fragment")
        return stack[0][0]

    def emit(self, b: Builder) -> None:
        open_cms = []
        for it in self.items:
            if not isinstance(it, _Ins):
                open_cms.pop().__exit__(None, None, None)
                continue
            ctl = it.ctl
            if ctl is None:
                b.emit(*it.slots)
            elif ctl[0] == "agu_base":
                b.agu_base(ctl[1], ctl[2], *it.slots)
            elif ctl[0] == "agu_stride":
                b.agu_stride(ctl[1], ctl[2], ctl[3], *it.slots)
            elif ctl[0] == "loop":
                cm = b.loop(ctl[1], ctl[2], *it.slots, level=ctl[3])
                cm.__enter__()
                open_cms.append(cm)
            elif ctl[0] == "halt":
                b.halt(*it.slots)
            elif ctl[0] == "spad":
                b.spad(ctl[1], ctl[2], *it.slots)
            else:  # pragma: no cover - internal
                raise CollectiveError(f"unknown control {ctl}")
        if open_cms:
            raise CollectiveError("fragment ends inside a loop")


# ======================================================================================
# bus directions and reduction plans
# ======================================================================================
class BusDir:
    """Helpers for one bus direction.

    ``"row"``: the row buses; PEs are selected by column index (``@col``), a value of PE
    row ``r`` travels along row ``r``. ``"col"``: the column buses, selected by row index.
    """

    def __init__(self, direction: str):
        if direction not in ("row", "col"):
            raise CollectiveError(f"unknown bus direction {direction!r}; allowed: 'row', 'col'")
        self.name = direction
        self.bus = direction                     # the operand that reads this bus
        self.gate = "rdrv" if direction == "row" else "cdrv"
        self.index = "col" if direction == "row" else "row"   # what selects a PE on this bus
        self.layout = "rows" if direction == "row" else "cols"

    def drive(self, src, *, idx=None, diag=None, mod=None):
        if self.name == "row":
            return rdrv(src, col=idx, diag=diag, mod=mod) if idx is not None else rdrv(src, diag=diag)
        return cdrv(src, row=idx, diag=diag, mod=mod) if idx is not None else cdrv(src, diag=diag)

    def pred_idx(self, k, mod=None):
        return pred(self.index, k, mod=mod)

    def other(self) -> "BusDir":
        return BusDir("col" if self.name == "row" else "row")


@dataclass(frozen=True)
class ReduceStep:
    """One step of a reduction: who drives (``idx``/``mod`` or ``diag``) and which PEs
    add (``pred`` None = every PE, or ``("diag", 0)``)."""

    idx: int | None = None
    mod: int | None = None
    diag: int | None = None
    pred: tuple | None = None

    def drive(self, d: BusDir, src):
        return d.drive(src, idx=self.idx, diag=self.diag, mod=self.mod)


def tree_steps(nr: int) -> int:
    """``S = ceil(log2 nr)``: steps of the tree reduction."""
    return max(0, math.ceil(math.log2(nr))) if nr > 1 else 0


def reduce_plan(cfg, mode: str):
    """``(steps, root)``: the reduction steps and the driver of the final value
    (``root``: a :class:`ReduceStep` whose ``drive`` puts the sum on the bus).

    ``tree``: step ``s`` drives from ``index mod 2^(s+1) == 2^s`` on segments of
    ``2^(s+1)`` PEs, every PE adds; the sum ends at index 0.
    ``seq``: step ``d`` (1..nr-1) drives from diagonal offset ``d``, only the diagonal
    adds; the sum ends on the diagonal.
    """
    nr = cfg.nr
    if mode == "tree":
        steps = [ReduceStep(idx=1 << s, mod=1 << (s + 1)) for s in range(tree_steps(nr))]
        return steps, ReduceStep(idx=0)
    if mode == "seq":
        steps = [ReduceStep(diag=d, pred=("diag", 0)) for d in range(1, nr)]
        return steps, ReduceStep(diag=0)
    raise CollectiveError(f"unknown reduction mode {mode!r}; allowed: 'tree', 'seq'")


def step_slots(d: BusDir, step: ReduceStep, k: int, first_src: Region | None = None, off: int = 0,
               agu=None, mem_driver: Region | None = None) -> list:
    """Slots of reduction step ``step`` for the value in accumulator ``r{k}``.

    ``first_src``: the first step takes the partials from SRAM (``first_src`` at ``off``)
    instead of the register: every PE reads its partial, the driver drives it and every
    adding PE adds its own. ``mem_driver``: later steps whose driver takes its partial
    from SRAM (the sequential reduction from SRAM: only the driver reads).
    """
    r = reg(k)
    out = []
    if first_src is not None:
        out += [first_src.rd(off, agu=agu), step.drive(d, first_src.src), add(r, d.bus, first_src.src)]
    elif mem_driver is not None:
        out += [mem_driver.rd(off, agu=agu, gate=d.gate), step.drive(d, mem_driver.src), add(r, d.bus, r)]
    else:
        out += [step.drive(d, r), add(r, d.bus, r)]
    if step.pred is not None:
        out.append(pred(*step.pred))
    return out


def step_hops(nr: int, step: ReduceStep) -> int:
    """Hops one transfer step puts on one bus (each driver counts its segment length)."""
    if step.diag is not None:
        return nr
    g = (step.mod.bit_length() - 1) if step.mod else 0
    hops = 0
    for i in range(nr):
        is_drv = (i % step.mod == step.idx) if step.mod else (i == step.idx)
        if is_drv:
            hops += segment_len(i, g, nr)
    return hops


def group_size(cfg) -> int:
    """Values reduced per pipeline group: ``max(fpu_latency - 1, acc_reuse_distance)``,
    the issue distance an FMA result needs before a driver or a late ``c`` reads it."""
    return max(cfg.fpu_latency - 1, cfg.acc_reuse_distance)


# ======================================================================================
# costs
# ======================================================================================
@dataclass
class Cost:
    """Exact cost of a fragment.

    ``instructions``: issued instructions (= cycles, the core never stalls inside a
    fragment); ``fma``: FMA issues per PE as ``{(row, col): n}`` (PEs not listed: 0);
    ``hops``: bus hops per bus, ``{"row": [...per row...], "col": [...]}``.
    """

    instructions: int
    fma: dict = field(default_factory=dict)
    hops: dict = field(default_factory=dict)

    def cycles_standalone(self, cfg) -> int:
        """Cycles of a program made of this fragment and a HALT (start latency and drain
        included: ``instructions + cfg.run_overhead``)."""
        return self.instructions + cfg.run_overhead


def _hops(cfg, direction, per_bus):
    z = [0] * cfg.nr
    return {"row": [per_bus] * cfg.nr if direction == "row" else z,
            "col": [per_bus] * cfg.nr if direction == "col" else list(z)}


# ======================================================================================
# broadcast from the diagonal
# ======================================================================================
def _stream(f: Frag, n: int, elem, ctls, level: int, name: str) -> None:
    """Emit ``elem(i, agu_offset_base)`` for i < n, one instruction each: the first
    ``len(ctls)`` elements straight (they carry the control items and use immediates
    only), the next one as the loop instruction, the rest as a one-instruction loop
    body (``elem(i0, True)``). Costs exactly ``n`` instructions."""
    c = len(ctls)
    if n < c + 2:
        for i in range(n):
            f.ins(*elem(i, False))
        return
    for i in range(c):
        it = f.ins(*elem(i, False))
        it.ctl = ctls[i]
    it = f.ins(*elem(c, False))
    f.open_loop(it, name, n - c - 1, level)
    f.ins(*elem(c + 1, True))
    f.close_loop()


def emit_broadcast(b: Builder | Frag, cfg, direction: str, n: int, src: Region, dst, *,
                   agu: str = "g0", level: int = 0, name: str = "bcast") -> Frag:
    """Broadcast ``n`` words per diagonal PE along the ``direction`` buses.

    ``src``: the vector in the ``diag`` layout (``n`` local words of the diagonal PEs).
    ``dst``: a :class:`Region` (every PE of the row / column writes, giving the ``rows``
    / ``cols`` layout) or a list of ``n`` register names (every PE copies the values into
    them). Uses AGU ``agu`` (base and stride set here) and loop level ``level``.
    Cost: :func:`cost_broadcast`.
    """
    d = BusDir(direction)
    if n < 1:
        raise CollectiveError("broadcast of an empty vector")
    src.check(cfg, n, "broadcast source")
    src = src.bind(cfg)
    f = Frag()
    if isinstance(dst, Region):
        dst.check(cfg, n, "broadcast destination")
        dst = dst.bind(cfg)

        def elem(i, looped):
            if looped:
                return [src.rd(i, agu=agu, gate=d.gate), d.drive(src.src, diag=0), dst.wr(d.bus, i, agu=agu)]
            return [src.rd(i, gate=d.gate), d.drive(src.src, diag=0), dst.wr(d.bus, i)]

        _stream(f, n, elem, [("agu_base", agu, 0), ("agu_stride", agu, level, 1)], level, name)
    else:
        regs = list(dst)
        if len(regs) != n:
            raise CollectiveError(f"broadcast into registers needs {n} registers, got {len(regs)}")
        for i, rname in enumerate(regs):
            f.ins(src.rd(i, gate=d.gate), d.drive(src.src, diag=0), mov(rname, d.bus))
    if isinstance(b, Frag):
        b.extend(f)
    else:
        f.emit(b)
    return f


def cost_broadcast(cfg, n: int, direction: str = "row") -> Cost:
    """``n`` instructions (one value per cycle on every bus of ``direction``), no FMA,
    ``n * nr`` hops on each of those buses."""
    return Cost(n, {}, _hops(cfg, direction, n * cfg.nr))


# ======================================================================================
# reductions (from SRAM partial sums)
# ======================================================================================
def emit_reduce(b: Builder | Frag, cfg, direction: str, n: int, src: Region, dst: Region, *,
                mode: str = "tree", dst_layout: str = "diag", agu: str = "g0", level: int = 0,
                name: str = "red") -> Frag:
    """Reduce ``n`` partial sums per PE along the ``direction`` buses.

    Every PE holds ``n`` partials at ``src``; value ``k`` of PE row ``r`` (``"row"``) is
    ``sum over c of src[k] of PE (r, c)``; it is written to ``dst[k]`` of the diagonal PE
    ``(r, r)`` (``dst_layout="diag"``) or, tree only, of every PE of the row
    (``"rows"``; ``"cols"`` for ``direction="col"``). Registers ``r0 .. r{G-1}`` are
    used (:func:`group_size`). The FP operations and their order are those of
    :func:`sw.golden.reduce_partials`. Cost: :func:`cost_reduce`.
    """
    d = BusDir(direction)
    nr = cfg.nr
    if nr < 2:
        raise CollectiveError("a reduction needs nr >= 2")
    if n < 1:
        raise CollectiveError("reduction of an empty vector")
    G = group_size(cfg)
    if G > cfg.n_regs:
        raise CollectiveError(f"a reduction group needs {G} registers, cfg.n_regs = {cfg.n_regs}")
    src.check(cfg, n, "reduction source")
    dst.check(cfg, n, "reduction destination")
    src, dst = src.bind(cfg), dst.bind(cfg)
    if dst_layout not in ("diag", d.layout):
        raise CollectiveError(f"dst_layout must be 'diag' or {d.layout!r} for direction {direction!r}")
    if mode == "seq" and dst_layout != "diag":
        raise CollectiveError("the sequential reduction leaves its sums on the diagonal only (dst_layout='diag')")
    steps, root = reduce_plan(cfg, mode)
    ng = -(-n // G)
    last_real = n - (ng - 1) * G
    ctls = [("agu_base", agu, 0), ("agu_stride", agu, level, G)]
    f = Frag()

    if mode == "seq":
        # group g: stage t (t = 0..nr-2, step d = t+1), value k at position t*G + k.
        # Group g >= 1 stores group g-1's sums in its first stage (same @diag=0 predicate).
        def group(g_off, looped, store_prev):
            a = agu if looped else None
            ins = []
            for t, st in enumerate(steps):
                for k in range(G):
                    if t == 0:
                        sl = step_slots(d, st, k, first_src=src, off=g_off + k, agu=a)
                        if store_prev:
                            sl.append(dst.wr(reg(k), g_off - G + k, agu=a))
                    else:
                        sl = step_slots(d, st, k, mem_driver=src, off=g_off + k, agu=a)
                    ins.append(f.ins(*sl))
            return ins

        first = group(0, False, False)
        for it, c in zip(first, ctls):
            it.ctl = c
        if ng > 1:
            f.open_loop(first[-1], name, ng - 1, level)
            group(G, True, True)
            f.close_loop()
        for k in range(last_real):   # epilogue: the last group's sums
            f.ins(pred("diag", 0), dst.wr(reg(k), (ng - 1) * G + k))
    else:
        # group g: S stages then a move stage; the move stage also uses the bus.
        wpred = [pred("diag", 0)] if dst_layout == "diag" else []

        def group(g_off, looped, n_moves):
            a = agu if looped else None
            ins = []
            for t, st in enumerate(steps):
                for k in range(G):
                    if t == 0:
                        ins.append(f.ins(*step_slots(d, st, k, first_src=src, off=g_off + k, agu=a)))
                    else:
                        ins.append(f.ins(*step_slots(d, st, k)))
            for k in range(n_moves):
                ins.append(f.ins(root.drive(d, reg(k)), dst.wr(d.bus, g_off + k, agu=a), *wpred))
            return ins

        first = group(0, False, G if ng > 1 else last_real)
        for it, c in zip(first, ctls):
            it.ctl = c
        if ng > 2:
            f.open_loop(first[-1], name, ng - 2, level)
            group(G, True, G)
            f.close_loop()
        if ng > 1:
            group((ng - 1) * G, False, last_real)
    if isinstance(b, Frag):
        b.extend(f)
    else:
        f.emit(b)
    return f


def cost_reduce(cfg, n: int, mode: str = "tree", direction: str = "row") -> Cost:
    """Exact cost of :func:`emit_reduce`.

    With ``G = group_size(cfg)``, ``ng = ceil(n / G)`` groups (the last one padded with
    dummy values that are computed but not stored), ``S = ceil(log2 nr)``:

    * ``seq``: ``ng * (nr - 1) * G + (n - (ng - 1) * G)`` instructions (``nr - 1``
      bus+FPU cycles per value, the last group's stores as epilogue); the diagonal PEs
      issue ``ng * G * (nr - 1)`` FMAs, the others none; ``nr`` hops per transfer.
    * ``tree``: ``ng * (S + 1) * G - (G - (n - (ng - 1) * G))`` instructions (``S``
      add steps and one move per value, all bus cycles); every PE issues
      ``ng * G * S`` FMAs.
    """
    nr = cfg.nr
    G = group_size(cfg)
    ng = -(-n // G)
    last_real = n - (ng - 1) * G
    steps, root = reduce_plan(cfg, mode)
    if mode == "seq":
        ins = ng * (nr - 1) * G + last_real
        fma = {(r, r): ng * G * (nr - 1) for r in range(nr)}
        per_bus = ng * G * (nr - 1) * nr
    else:
        S = len(steps)
        ins = ng * (S + 1) * G - (G - last_real)
        fma = {(r, c): ng * G * S for r in range(nr) for c in range(nr)}
        per_bus = ng * G * sum(step_hops(nr, st) for st in steps) + n * step_hops(nr, root)
    return Cost(ins, fma, _hops(cfg, direction, per_bus))


# ======================================================================================
# transpose of a 2D round-robin matrix
# ======================================================================================
def _overlaps(r1: Region, n1: int, r2: Region, n2: int) -> bool:
    return r1.bank == r2.bank and r1.base < r2.base + n2 and r2.base < r1.base + n1


def cost_transpose(cfg, r: int, c: int, *, dst_strided: bool = False) -> Cost:
    """Exact cost of :func:`emit_transpose` of an ``r x c`` matrix: with ``k = rp * cp``
    local words per PE (``rp = ceil(r / nr)``, ``cp = ceil(c / nr)``),
    ``8 + nr * (2 k + 1 + pad)`` instructions (8 AGU settings; per source PE row:
    one loop instruction, ``k`` column-bus cycles, ``k`` row-bus cycles, and ``pad =
    max(0, sram_read_distance - k)`` NOPs between the phases: a stage word is read ``k``
    cycles after its write at the least, and an SRAM write is readable
    ``cfg.sram_read_distance`` cycles after its issue), no FMA, ``nr * k * nr`` hops on
    every row bus and every column bus. ``dst_strided`` (a destination with its own row
    length, ``emit_transpose(dst_ld=...)``): phase 2 walks the destination in a
    two-level loop like phase 1, ``9 + nr * (2 k + 2 + pad)`` instructions, ``pad =
    max(0, sram_read_distance - cp (rp + 1))``."""
    nr = cfg.nr
    ins = 9 if dst_strided else 8
    k = local_len(r, nr) * local_len(c, nr)
    per_bus = nr * k * nr
    ins += nr * (2 * k + 2 - (not dst_strided) + _transpose_pad(cfg, r, c, dst_strided))
    return Cost(ins, {}, {"row": [per_bus] * nr, "col": [per_bus] * nr})


def _transpose_pad(cfg, r: int, c: int, dst_strided: bool) -> int:
    """NOPs :func:`emit_transpose` puts between its two phases, so that phase 2 reads
    each stage word ``cfg.sram_read_distance`` cycles after its write or later: the
    shortest distance is ``k = rp * cp`` (the last column block's words, read first), or
    ``cp * (rp + 1)`` with a strided destination (phase 2 has one loop instruction per
    column block as well)."""
    rp, cp = local_len(r, cfg.nr), local_len(c, cfg.nr)
    return max(0, cfg.sram_read_distance - (cp * (rp + 1) if dst_strided else rp * cp))


def emit_transpose(b: Builder | Frag, cfg, r: int, c: int, src: Region, dst: Region, stage: Region, *,
                   agus=("g0", "g1", "g2"), levels=(0, 1), name: str = "tp", src_ld: int | None = None,
                   dst_ld: int | None = None) -> Frag:
    """``dst = src^T``: ``src`` is an ``r x c`` matrix in the 2D round-robin layout
    (``rp * cp`` words per PE, local row-major), ``dst`` receives the ``c x r``
    transpose in the same layout (``cp * rp`` words per PE); padding goes to padding.
    ``stage``: ``rp * cp`` scratch words (only the diagonal PEs' copy is used). The three
    regions must not overlap; any banks. ``src_ld``: local words per local row of the
    region ``src`` is a column block of (default ``cp``: ``src`` is contiguous); the
    source word of local ``(a, b)`` is then ``a * src_ld + b``. Same cost. ``dst_ld``
    likewise for the destination (a column block of a wider matrix: destination word
    ``b * dst_ld + a``); phase 2 then runs as a two-level loop (see
    :func:`cost_transpose`).

    Element ``(i, j)`` lives in PE ``(i mod nr, j mod nr)`` and must reach PE
    ``(j mod nr, i mod nr)``. For each source PE row ``p`` (unrolled, ``@row=p`` is an
    immediate): phase 1, ``k = rp * cp`` cycles: PE ``(p, q)`` drives its block, element
    by element in the order of the destination, on column bus ``q``; the diagonal PE
    ``(q, q)`` writes it into ``stage`` (``@diag=0``). Phase 2, ``k`` cycles: the diagonal
    PE ``(q, q)`` drives ``stage`` on row bus ``q``, and PE ``(q, p)`` writes it into
    ``dst`` (``@col=p``). The phases cannot overlap: a micro-op has one predicate, and
    the two writes need different ones. Phase 1 writes the stage words in the order
    phase 2 reads them, so each is read ``k`` cycles after its write or later, NOPs
    between the phases making up the rest of ``cfg.sram_read_distance``. Uses AGUs ``agus`` (source, stage, linear) and
    loop levels ``levels`` (outer, inner). Cost: :func:`cost_transpose`.
    """
    nr = cfg.nr
    if nr < 2:
        raise CollectiveError("transpose needs nr >= 2")
    if r < 1 or c < 1:
        raise CollectiveError(f"bad shape {r} x {c}")
    rp, cp = local_len(r, nr), local_len(c, nr)
    k = rp * cp
    ld = cp if src_ld is None else src_ld
    if ld < cp:
        raise CollectiveError(f"transpose source row length src_ld={ld} is shorter than its {cp} local columns")
    dld = rp if dst_ld is None else dst_ld
    if dld < rp:
        raise CollectiveError(f"transpose destination row length dst_ld={dld} is shorter than its {rp} local columns")
    ks = (rp - 1) * ld + cp                   # source span
    kd = (cp - 1) * dld + rp                  # destination span
    for reg_, n_, what in ((src, ks, "transpose source"), (dst, kd, "transpose destination"),
                           (stage, k, "transpose stage")):
        reg_.check(cfg, n_, what)
    for (r1, n1, w1), (r2, n2, w2) in (((src, ks, "source"), (dst, kd, "destination")),
                                       ((src, ks, "source"), (stage, k, "stage")),
                                       ((dst, kd, "destination"), (stage, k, "stage"))):
        if _overlaps(r1, n1, r2, n2):
            raise CollectiveError(f"transpose {w1} and {w2} overlap ({r1} / {r2}, {n1} / {n2} words)")
    src, dst, stage = src.bind(cfg), dst.bind(cfg), stage.bind(cfg)
    gS, gT, gL = agus
    L0, L1 = levels
    if not L0 < L1:
        raise CollectiveError(f"transpose loop levels must be (outer, inner) with outer < inner, got {levels}")
    f = Frag()
    ctls = [("agu_base", gS, 0), ("agu_stride", gS, L0, 1), ("agu_stride", gS, L1, ld),
            ("agu_base", gT, 0), ("agu_stride", gT, L0, rp), ("agu_stride", gT, L1, 1),
            ("agu_base", gL, 0), ("agu_stride", gL, L0, 1 if dst_ld is None else dld)]
    if dst_ld is not None:
        ctls.append(("agu_stride", gL, L1, 1))
    for ctl in ctls:
        f.ins().ctl = ctl

    def up(a, p):
        """Phase 1 element of local column b (the outer loop index) and row ``a``:
        source word ``a * cp + b`` to stage word ``b * rp + a``."""
        return [src.rd(a * ld, agu=gS, gate="cdrv"), cdrv(src.src, row=p), pred("diag", 0),
                stage.wr("col", a, agu=gT)]

    def across(i, p, agu):
        return [stage.rd(i, agu=agu, gate="rdrv"), rdrv(stage.src, diag=0), pred("col", p),
                dst.wr("row", i, agu=agu)]

    def across2(a, p):
        """Strided phase 2 element of local column b (outer loop) and row ``a``: stage word
        ``b * rp + a`` to destination word ``b * dst_ld + a``."""
        return [stage.rd(a, agu=gT, gate="rdrv"), rdrv(stage.src, diag=0), pred("col", p),
                dst.wr("row", a, agu=gL)]

    for p in range(nr):
        f.open_loop(f.ins(), f"{name}b", cp, L0)
        if rp > 1:
            f.open_loop(f.ins(*up(0, p)), f"{name}a", rp - 1, L1)
            f.ins(*up(1, p))
            f.close_loop()
        else:
            f.ins(*up(0, p))
        f.close_loop()
        for _ in range(_transpose_pad(cfg, r, c, dst_ld is not None)):
            f.ins()             # the stage words written last are not readable yet
        if dst_ld is not None:
            f.open_loop(f.ins(), f"{name}kb", cp, L0)
            if rp > 1:
                f.open_loop(f.ins(*across2(0, p)), f"{name}ka", rp - 1, L1)
                f.ins(*across2(1, p))
                f.close_loop()
            else:
                f.ins(*across2(0, p))
            f.close_loop()
        elif k > 1:
            f.open_loop(f.ins(*across(0, p, None)), f"{name}k", k - 1, L0)
            f.ins(*across(1, p, gL))
            f.close_loop()
        else:
            f.ins(*across(0, p, None))
    assert f.count() == cost_transpose(cfg, r, c, dst_strided=dst_ld is not None).instructions
    if isinstance(b, Frag):
        b.extend(f)
    else:
        f.emit(b)
    return f
