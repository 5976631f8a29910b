"""Chip programs from per-core ops: a part's ops split into RUNs that fit the microcode
on every core, assembled for each core and placed at the same origin on all of them
(:func:`_place_parts`)."""

from __future__ import annotations

from dataclasses import dataclass

from arch.isa import Instruction, SeqOp, instr_layout
from arch.microop import MicroOp
from sw.asm import AsmError, Builder
from sw.host_protocol import steady_reload
from sw.train import _gaps
from sw.train_ops import note_edge_words
from sw.train_host import TrainCompileError

__all__ = ["ChipPart"]

#: the largest share of the microcode the resident region may take (:func:`_resident`),
#: tried first; then half of it, then none, the placement whose step LOADs the fewest
#: beats kept (:func:`_place_parts`)
RESIDENT_SHARE = 0.75


def _build_ops(cfg, ops, origin=0):
    """(words, instructions issued) of ``ops`` with their gaps and a HALT at ``origin``."""
    b = Builder(cfg, origin=origin)
    ins = 0
    for op, g in zip(ops, _gaps(cfg, ops)):
        for _ in range(g):
            b.nop()
        ins += g + op.emit(b)
    b.halt()
    return b.build().words(), ins


@dataclass
class ChipPart:
    """One chip-phase program: per core its words (all at ``origin`` of ``image``)."""

    name: str
    ops: list                     #: core 0's ops (the others differ only in the broadcast's waits)
    instructions: int             #: issued per RUN (the same on every core)
    image: int = 0
    origin: int = 0
    #: every core's ops (``core_ops[k]``: core ``k``'s), for passes that rebuild the part
    core_ops: list | None = None
    #: the ops followed by an alignment JUMP (:func:`_assemble_aligned`), by index
    jumps: tuple = ()
    #: the ops that run in the resident region (:func:`_resident`), by index: a JUMP to
    #: the op's code there, and the JUMP back after it, one instruction each
    calls: tuple = ()


def _varies(ops) -> bool:
    """Whether these ops assemble differently on different cores (the broadcast's waits,
    or ops marked ``per_core``)."""
    return any(op.per_core or op.name.startswith("bcast") for op in ops)


def _reps(cfg, ops) -> list:
    """The cores whose programs bound the sizes of ``ops``: every core when an op is
    ``per_core`` (its words depend on the core), else cores 0, 1 and ``c - 1`` (the
    broadcast's folded waits cover every case with those)."""
    c = cfg.cores
    if any(op.per_core for op in ops):
        return list(range(c))
    return sorted({0, 1 % c, c - 1})


def _op_words(cfg, op, codes) -> int:
    """Words of ``op`` assembled alone (through ``codes`` when it fits the microcode)."""
    if codes is not None:
        try:
            return len(codes.get(op).words)
        except AsmError:
            pass
    return len(_build_ops(replace_depth(cfg), [op])[0]) - 1


def _split(cfg, per_core_ops: list, codes=None, aligned: bool = False, calls=frozenset(),
           depth: int | None = None) -> list:
    """Greedy split of a part's ops into programs that fit the microcode on every core:
    ``[(i, j, words)]``, op ranges (each becomes its own chip RUN) with the program's size
    on the largest core. A program's size is the sum of its ops' words (each op assembles
    on its own), its gap NOPs and the HALT; the broadcast's size depends on the core's
    hop distance only through its folded waits (cores 0, 1 and ``c - 1`` cover every
    case). ``aligned``: every op at the same address on every core (:func:`_slots`), the
    size the sum of their slots; an op of ``calls`` (indices, :func:`_resident`) takes
    one word, its JUMP. ``depth``: the words the programs may take (default the
    microcode's)."""
    depth = cfg.ucode_depth if depth is None else depth
    reps = _reps(cfg, per_core_ops[0])
    n = len(per_core_ops[0])
    words = [[_op_words(cfg, op, codes) if (k == 0 or _varies([op])) else None
              for op in per_core_ops[k]] for k in reps]
    words = [[w if w is not None else words[0][i] for i, w in enumerate(row)] for row in words]
    slots = [1 if i in calls else w for i, w in enumerate(_slots(words))]

    def size(i, j):
        gaps = sum(_gaps(cfg, per_core_ops[0][i:j]))
        return (sum(slots[i:j]) if aligned else max(sum(row[i:j]) for row in words)) + gaps + 1

    out, i = [], 0
    while i < n:
        j = i + 1
        if size(i, j) > depth:
            raise TrainCompileError(f"{per_core_ops[0][i].name} alone needs {size(i, j)} microcode words; the "
                                    f"core holds {depth} (ArchConfig.ucode_depth"
                                    f"{'' if depth == cfg.ucode_depth else ' less the resident region'})")
        while j < n and size(i, j + 1) <= depth:
            j += 1
        out.append((i, j, size(i, j)))
        i = j
    return out


def _slots(words: list) -> list:
    """Per op, its words in an aligned program (``words[k][i]``: op ``i``'s words on core
    ``k``): the longest core's, plus a JUMP over the padding when the cores' differ."""
    return [max(col) + (len(set(col)) > 1) for col in zip(*words)]


class _OpCode:
    """One op assembled alone at address 0: its words, instructions issued, labels and
    loops (:func:`_assemble_ops`)."""

    __slots__ = ("words", "ins", "labels", "loops")

    def __init__(self, b, ins):
        b.halt()
        prog = b.build()
        self.words = prog.words()[:-1]
        self.ins = ins
        self.labels = set(prog.labels)
        self.loops = {(lp.name, lp.level) for lp in prog.loops}


class _Codes:
    """The :class:`_OpCode` of ops, each op emitted once and each distinct one (by the
    statements it emits: the cores of a chip mostly emit the same ops) assembled once."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.by_op: dict = {}            # id(op) -> (op, code)
        self.by_text: dict = {}

    def get(self, op) -> _OpCode:
        hit = self.by_op.get(id(op))
        if hit is not None:
            return hit[1]
        b = Builder(self.cfg)
        ins = op.emit(b)
        note_edge_words(op, b._items)
        key = (ins, tuple((it.kind, it.name, tuple((s.kind, tuple(s.fields.items()), s.ctl) for s in it.slots))
                          for it in b._items))
        code = self.by_text.get(key)
        if code is None:
            code = self.by_text[key] = _OpCode(b, ins)
        self.by_op[id(op)] = (op, code)          # the op kept alive: its id stays its own
        return code


def _relocate(cfg, words, delta: int) -> list:
    """``words`` assembled at address 0, moved to address ``delta``: the targets of the
    loops and jumps (the only absolute addresses in a word) moved with them."""
    if not delta:
        return list(words)
    ctl = dict((n, f) for n, f in instr_layout(cfg)["ctl"].shape)
    op, tg = ctl["op"], ctl["target"]
    om, tm = (1 << op.width) - 1, ((1 << tg.width) - 1) << tg.offset
    out = []
    for w in words:
        if (w >> op.offset) & om in (SeqOp.LOOP, SeqOp.JUMP):
            t = ((w & tm) >> tg.offset) + delta
            if t >> tg.width:             # pragma: no cover - the program is sized to fit
                raise TrainCompileError(f"a jump or loop target {t} does not fit the microcode")
            w = (w & ~tm) | (t << tg.offset)
        out.append(w)
    return out


def _assemble_ops(cfg, ops, codes, origin: int):
    """``(words, instructions issued)`` of ``ops`` with their gaps and a HALT at
    ``origin`` from each op assembled alone (``codes``: their :class:`_OpCode`), the
    same words as assembling the whole program (:func:`_build_ops`) when the ops do not
    name each other's labels or loops; ``None`` when they might (a label in two ops, a
    loop name at two levels)."""
    if _interact(codes):
        return None
    nop, halt = _nop_halt(cfg)
    words, ins = [], 0
    for code, g in zip(codes, _gaps(cfg, ops)):
        words += [nop] * g
        words += _relocate(cfg, code.words, origin + len(words))
        ins += g + code.ins
    return words + [halt], ins


def _interact(codes) -> bool:
    """Whether ops (their :class:`_OpCode`) might name each other's labels or loops: a
    label in two ops, or a loop name at two levels."""
    labels, levels = set(), {}
    for code in codes:
        if labels & code.labels:
            return True
        labels |= code.labels
        for name, lvl in code.loops:
            if levels.setdefault(name, lvl) != lvl:
                return True
    return False


def _jump(cfg, target: int) -> int:
    return Instruction(MicroOp(), op=SeqOp.JUMP, target=target).encode(cfg)


def _assemble_aligned(cfg, per_core_ops: list, per_core_codes: list, origin: int, calls: dict | None = None):
    """``(per core (words, instructions issued), the ops followed by a JUMP, the resident
    code)``: every core's words and instructions of its ops (``per_core_ops[k]``, their
    :class:`_OpCode` ``per_core_codes[k]``) with each op at the same address on every core:
    an op whose words differ in number between the cores is followed, on every core, by a
    JUMP to the end of its slot, the longest core's words plus the JUMP, the shorter cores'
    padded (words never executed); ``None`` when the ops might name each other's labels or
    loops (:func:`_assemble_ops`). An op of ``calls`` (index -> its slot's address in the
    resident region, :func:`_resident`) is a JUMP to that slot; the resident code is
    ``{slot address: per core the op's words there and the JUMP back}``."""
    if any(_interact(codes) for codes in per_core_codes):
        return None
    calls = calls or {}
    nop, halt = _nop_halt(cfg)
    c = len(per_core_ops)
    lens = [[len(code.words) for code in codes] for codes in per_core_codes]
    slots = _slots(lens)
    words = [[] for _ in range(c)]
    ins = [0] * c
    jumps, fills = [], {}
    for i, g in enumerate(_gaps(cfg, per_core_ops[0])):
        jump = i not in calls and len({row[i] for row in lens}) > 1
        if jump:
            jumps.append(i)
        for k in range(c):
            code = per_core_codes[k][i]
            w = words[k]
            w += [nop] * g
            at = origin + len(w)
            ins[k] += g + code.ins
            if i in calls:          # the op runs at its slot and jumps back
                slot = calls[i]
                w.append(_jump(cfg, slot))
                fills.setdefault(slot, []).append(_relocate(cfg, code.words, slot) + [_jump(cfg, at + 1)])
                ins[k] += 2
                continue
            w += _relocate(cfg, code.words, at)
            if jump:
                w.append(_jump(cfg, at + slots[i]))
                w += [nop] * (at + slots[i] - origin - len(w))
                ins[k] += 1
    return [(w + [halt], n) for w, n in zip(words, ins)], tuple(jumps), fills


def _nop_halt(cfg) -> tuple:
    b = Builder(cfg)
    b.nop()
    b.halt()
    return tuple(b.build().words())


def _place_parts(cfg, per_core_ops: dict, align: bool = True, resident: bool = True) -> tuple:
    """Split each part into programs that fit the microcode (:func:`_split`, which gives
    their sizes), assemble them for every core and pad each to the longest core's size
    so every core has it at the same origin; one image when all programs fit together,
    else one per program (reloaded per RUN). Each distinct op is assembled once and
    moved to its address on every core (:func:`_assemble_ops`; the whole program is
    assembled when its ops could interact); an op that assembles alike on every core
    (not ``per_core``, not the broadcast: :func:`_varies`) is emitted for core 0 only,
    the other cores taking its code at the same position of their ops. When the programs
    are reloaded (they do not fit together), ``align`` and a ``JUMP`` costs no bubble
    (``cfg.jump_delay`` 0), each op sits at the same address on every core
    (:func:`_assemble_aligned`), and with ``resident`` the ops whose code is mostly the
    core's own run from the resident region at the bottom of the microcode
    (:func:`_resident`), which every image holds unchanged."""
    codes = _Codes(cfg)

    def split(aligned, calls=None, depth=None):
        progs, sizes = [], []
        for nm, pco in per_core_ops.items():
            cl = (calls or {}).get(nm, {})
            rng = _split(cfg, pco, codes, aligned, frozenset(cl), depth)
            for q, (i, j, words) in enumerate(rng):
                progs.append((nm, f"{nm}{q}" if len(rng) > 1 else nm, [ops[i:j] for ops in pco],
                              {x - i: a for x, a in cl.items() if i <= x < j}))
                sizes.append(words)
        return progs, sizes
    progs, sizes = split(False)
    together = sum(sizes) <= cfg.ucode_depth
    align = align and not together and not cfg.jump_delay       # a JUMP costs no bubble
    if not align:
        return _place_programs(cfg, progs, sizes, codes, together, align, 0)
    best = None
    for share in ((RESIDENT_SHARE, RESIDENT_SHARE / 2) if resident else ()) + (0,):
        calls, base = _resident(cfg, per_core_ops, codes, share)
        if share and not calls:
            continue
        try:
            progs, sizes = split(True, calls, cfg.ucode_depth - base)
        except TrainCompileError:
            if not share:                  # an op does not fit the microcode at all
                raise
            continue                       # an op does not fit beside the resident region
        placed = _place_programs(cfg, progs, sizes, codes, together, align, base)
        if placed is None:                 # a called op's program could not be aligned
            continue
        cost = _reload_beats(cfg, placed)
        if best is None or cost < best[0]:
            best = (cost, placed)
    return best[1]


def _reload_beats(cfg, placed) -> int:
    """Host stream cycles of the LOADs of the programs of ``placed`` (:func:`_place_programs`)
    run one after another, then again from the first (the predictions' programs left out):
    what a placement costs a step in steady state."""
    parts, images = placed
    runs = [images[p.image] for nm, ps in parts.items() if nm != "predict" for p in ps]
    return steady_reload(cfg, runs)[0]


def _place_programs(cfg, progs, sizes, codes, together: bool, align: bool, base: int):
    """Assemble the programs of :func:`_place_parts` into images (from address ``base``,
    above the resident region); ``None`` when a program with called ops cannot be
    aligned."""
    c = cfg.cores
    parts, images, org, fills = {}, [], base, {}
    for (nm, sub, pco, calls), size in zip(progs, sizes):
        if not together or not images:
            org = base
            images.append([[] for _ in range(c)])
        ins, longest, first = set(), 0, None
        built = []
        for k, ops in enumerate(pco):
            try:
                # an op that assembles alike on every core: core 0's code (emitted once)
                cs = [first[i] if first is not None and not _varies([op]) and op.name == pco[0][i].name
                      else codes.get(op) for i, op in enumerate(ops)]
                first = first or cs
                built.append(cs)
            except AsmError:
                built = None                       # an op that does not assemble alone
                break
        # reloaded programs: every op at the same address on every core, so that the LOADs
        # broadcast the words the cores share and patch only the ops that differ
        # (sw.host_protocol.load_plan)
        al = _assemble_aligned(cfg, pco, built, org, calls) if built and align else None
        if calls and al is None:
            return None
        jumps = al[1] if al else ()
        fills.update(al[2] if al else {})
        for k, ops in enumerate(pco):
            b = al[0][k] if al else (_assemble_ops(cfg, ops, built[k], org) if built else None)
            w, n = b or _build_ops(cfg, ops, origin=org)
            images[-1][k].extend(w + [0] * (size - len(w)))
            ins.add(n)
            longest = max(longest, len(w))
        if longest > size or (longest != size and not al):   # pragma: no cover - the ops' sizes are additive
            raise AssertionError(f"program {sub}: {longest} words on its largest core, sized {size}")
        assert len(ins) == 1, f"program {sub}: cores issue different instruction counts {ins}"
        parts.setdefault(nm, []).append(ChipPart(sub, pco[0], ins.pop(), len(images) - 1, org, pco, jumps,
                                                 tuple(sorted(calls))))
        org += size
    if base:
        low = _resident_words(cfg, fills, base)
        images = [[low[k] + w for k, w in enumerate(img)] for img in images]
    return parts, images


def _resident(cfg, per_core_ops: dict, codes, share: float = RESIDENT_SHARE) -> tuple:
    """``({part: {op index: slot address}}, words)``: the resident region, at the bottom
    of the microcode of reloaded programs, for the ops whose code is mostly the core's own
    (at least half its words differ from core 0's on some core: the ring collectives, whose
    addresses follow the core's place on the ring). Loaded once, it is never reloaded: a
    step's LOADs broadcast the words the cores share and patch only what differs
    (:func:`sw.host_protocol.load_plan`), and these ops would be patched into every core
    at every step. Each op runs at its slot (the longest core's words and a JUMP back) from
    a JUMP in its program, two instructions more; the slots take at most ``share`` of
    the microcode, the ops with the most such words first."""
    cand = []
    for nm, pco in per_core_ops.items():
        for i in range(len(pco[0])):
            if not _varies([pco[0][i]]):
                continue
            try:
                cs = [codes.get(ops[i]) for ops in pco]
            except AsmError:
                continue
            own = max(_differ(cs[0].words, x.words) for x in cs)
            if 2 * own >= len(cs[0].words) > 0:
                cand.append((own, nm, i, max(len(x.words) for x in cs) + 1))
    chosen, words = set(), 0
    for own, nm, i, size in sorted(cand, key=lambda t: -t[0]):
        if words + size <= cfg.ucode_depth * share:
            chosen.add((nm, i))
            words += size
    calls, at = {}, 0
    for own, nm, i, size in cand:                  # slots in program order
        if (nm, i) in chosen:
            calls.setdefault(nm, {})[i] = at
            at += size
    return calls, at


def _differ(a: list, b: list) -> int:
    """Words at which ``b`` differs from ``a`` (the longer's extra words included)."""
    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))


def _resident_words(cfg, fills: dict, size: int) -> list:
    """Per core the resident region's ``size`` words from :func:`_assemble_aligned`'s
    resident code (NOPs between the slots)."""
    nop, _ = _nop_halt(cfg)
    out = None
    for at, per_core in sorted(fills.items()):
        if out is None:
            out = [[nop] * size for _ in per_core]
        for k, w in enumerate(per_core):
            out[k][at:at + len(w)] = w
    return out


def replace_depth(cfg):
    from dataclasses import replace

    return replace(cfg, ucode_depth=1 << 16)
