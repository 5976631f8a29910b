"""Chip programs from per-core ops: a part's ops split into RUNs that fit the microcode
on every core, assembled for each core and placed at the same origin on all of them
(:func:`_place_parts`)."""

from __future__ import annotations

from dataclasses import dataclass

from sw.asm import Builder
from sw.train import _gaps
from sw.train_host import TrainCompileError

__all__ = ["ChipPart"]


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


def _split(cfg, per_core_ops: list) -> list:
    """Greedy split of a part's ops into programs that fit the microcode on every core:
    ``[(i, j, words)]``, op ranges (each becomes its own chip RUN) with the program's size
    on the largest core. A program's size is the sum of its ops' words (each op assembles
    on its own), its gap NOPs and the HALT; the broadcast's size depends on the core's
    hop distance only through its folded waits (cores 0, 1 and ``c - 1`` cover every
    case)."""
    big = replace_depth(cfg)
    reps = _reps(cfg, per_core_ops[0])
    n = len(per_core_ops[0])
    words = [[len(_build_ops(big, [op])[0]) - 1 if (k == 0 or _varies([op])) else None
              for op in per_core_ops[k]] for k in reps]
    words = [[w if w is not None else words[0][i] for i, w in enumerate(row)] for row in words]

    def size(i, j):
        gaps = sum(_gaps(cfg, per_core_ops[0][i:j]))
        return max(sum(row[i:j]) for row in words) + gaps + 1

    out, i = [], 0
    while i < n:
        j = i + 1
        if size(i, j) > cfg.ucode_depth:
            raise TrainCompileError(f"{per_core_ops[0][i].name} alone needs {size(i, j)} microcode words; the "
                                    f"core holds {cfg.ucode_depth} (ArchConfig.ucode_depth)")
        while j < n and size(i, j + 1) <= cfg.ucode_depth:
            j += 1
        out.append((i, j, size(i, j)))
        i = j
    return out


def _place_parts(cfg, per_core_ops: dict) -> tuple:
    """Split each part into programs that fit the microcode (:func:`_split`, which gives
    their sizes), assemble them for every core (once when no op depends on the core) and
    pad each to the longest core's size so every core has it at the same origin; one
    image when all programs fit together, else one per program (reloaded per RUN)."""
    c = cfg.cores
    progs, sizes = [], []
    for nm, pco in per_core_ops.items():
        rng = _split(cfg, pco)
        for q, (i, j, words) in enumerate(rng):
            progs.append((nm, f"{nm}{q}" if len(rng) > 1 else nm, [ops[i:j] for ops in pco]))
            sizes.append(words)
    together = sum(sizes) <= cfg.ucode_depth
    parts, images, org = {}, [], 0
    for (nm, sub, pco), size in zip(progs, sizes):
        if not together or not images:
            org = 0
            images.append([[] for _ in range(c)])
        ins, longest = set(), 0
        shared = None if _varies(pco[0]) else _build_ops(cfg, pco[0], origin=org)
        for k, ops in enumerate(pco):
            w, n = shared or _build_ops(cfg, ops, origin=org)
            images[-1][k].extend(w + [0] * (size - len(w)))
            ins.add(n)
            longest = max(longest, len(w))
        if longest != size:                        # pragma: no cover - the ops' sizes are additive
            raise AssertionError(f"program {sub}: {longest} words on its largest core, sized {size}")
        assert len(ins) == 1, f"program {sub}: cores issue different instruction counts {ins}"
        parts.setdefault(nm, []).append(ChipPart(sub, pco[0], ins.pop(), len(images) - 1, org))
        org += size
    return parts, images


def replace_depth(cfg):
    from dataclasses import replace

    return replace(cfg, ucode_depth=1 << 16)
