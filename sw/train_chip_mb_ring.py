"""Which collectives of a minibatch step across cores run inside the GEMMs that read
their data (:mod:`sw.ring_mat_gemm`), for :func:`sw.train_chip_mb.compile_chip_mbgd`:
the layers whose forward GEMM takes its input off the ring, those whose update takes
``A^T``'s column blocks off it, why the others do not, and the choice when the longer
text costs microcode reloads (``docs/training.md``, "Minibatch GD across the cores of a
chip")."""

from __future__ import annotations

import itertools

from sw.kernels import Scalar, gemm_cost
from sw.layout import local_len
from sw.mlp import MLP
from sw.ring import RingError
from sw.ring_mat import mat_all_gather_slots, mat_broadcast_slots
from sw.ring_mat_gemm import gemm_ring_check, gemm_ring_frag, gemm_ring_update_frag
from sw.train import Allocator, _other

__all__ = ["ring_gemm", "ring_update", "ring_fw_layers", "ring_up_layers", "cheapest"]


def ring_gemm(cfg, k: int, l: int, P: list, N: list, b: int, W, X, Y):
    """Core ``k``'s forward GEMM of layer ``l`` with its input from the ring
    (:func:`sw.ring_mat_gemm.gemm_ring_frag`): ``X`` broadcast from core 0 (``l = 0``),
    else ``A_l``'s segment ``s`` from core ``s``."""
    origins = [0] if l == 0 else list(range(cfg.cores))
    return gemm_ring_frag(cfg, k, P[l], N[l], b, W, X, Y, origins, name=f"fr{l}_")


def ring_fw_layers(cfg, mlp: MLP, al: Allocator, P: list, N: list, out_map: str, spad: dict,
                   ag_overlap: bool = True, bcast_overlap: bool = True) -> dict:
    """The layers whose forward GEMM takes its input from the ring (layer 0: the
    broadcast of ``X`` if ``bcast_overlap``; ``l >= 1``: the all-gather of ``A_l`` if
    ``ag_overlap``), and why each other layer keeps the collective before its GEMM:
    ``{layer: None or reason}``. A paged panel keeps it (its pages re-read the gathered
    input), as does the split output layer (its input is not gathered)."""
    R, nl = {n: v.region for n, v in al.items.items()}, mlp.n_layers
    out = {}
    for l in range(nl):
        if out_map == "cols" and l == nl - 1:
            continue
        if not (bcast_overlap if l == 0 else ag_overlap):
            out[l] = "switched off"
        elif l in spad:
            out[l] = "paged panel (its pages re-read the gathered input)"
        else:
            X = R["X"] if l == 0 else R[f"A{l}"]
            out[l] = gemm_ring_check(cfg, R[f"W{l}"], X, X)
            if out[l] is None:
                try:
                    Y = R[f"A{l + 1}"] if l < nl - 1 else R["Z"]
                    fr = ring_gemm(cfg, 0, l, P, N, mlp.batch, R[f"W{l}"], X, Y)
                    Lb, Ln = local_len(mlp.batch, cfg.nr), local_len(N[l], cfg.nr)
                    m = Ln * Lb * cfg.nr if l == 0 else local_len(P[l - 1], cfg.nr) * Lb * cfg.nr
                    old = gemm_cost(cfg, P[l], N[l], mlp.batch)["instructions"] + (
                        mat_broadcast_slots(cfg, m) if l == 0 else mat_all_gather_slots(cfg, m))
                    out[l] = _slower(fr.slots, old)
                except RingError as e:
                    out[l] = str(e)
    return out


def _slower(new: int, old: int) -> str | None:
    """None if the ring GEMM's ``new`` slots beat the collective and the GEMM's ``old``."""
    return None if new < old else f"no faster ({new} slots inside the GEMM, {old} for the collective and the GEMM)"


def ring_update(cfg, k: int, l: int, P: list, N: list, b: int, D, AT, W, nlr):
    """Core ``k``'s update of layer ``l``, ``W += (-lr/b) D A^T``, with ``A^T``'s column
    blocks taken off the ring (:func:`sw.ring_mat_gemm.gemm_ring_update_frag`)."""
    return gemm_ring_update_frag(cfg, k, P[l], b, N[l], D, AT, W, nlr, local_len(P[l - 1], cfg.nr),
                                 name=f"ur{l}_")


def ring_up_layers(cfg, mlp: MLP, al: Allocator, P: list, N: list, out_map: str, spad: dict,
                   ag_overlap: bool = True, words: dict | None = None, gains: dict | None = None) -> dict:
    """The layers ``l >= 1`` whose update takes the all-gather of ``A_l^T``'s column blocks
    off the ring (if ``ag_overlap``), and why each other one keeps it before the update:
    ``{layer: None or reason}`` (a paged panel keeps it: its pages re-read ``A^T``; the
    split output layer's ``A^T`` is not gathered). ``words``: filled with each layer's
    fragment's microcode words (core 0's); ``gains``: with ``(slots it saves against the
    collective and the update apart, its most words on any core)``."""
    R, nl = {n: v.region for n, v in al.items.items()}, mlp.n_layers
    out = {}
    for l in range(1, nl):
        if out_map == "cols" and l == nl - 1:
            continue
        if not ag_overlap:
            out[l] = "switched off"
        elif l in spad:
            out[l] = "paged panel (its pages re-read A^T)"
        else:
            D = R[f"E{l + 1}"] if l < nl - 1 else R.get("G", R["Z"])
            AT = R[f"AT_{_other(D.bank)}"]
            try:
                nlr = Scalar(R["nlr"].bank, R["nlr"].base)
                fr = ring_update(cfg, 0, l, P, N, mlp.batch, D, AT, R[f"W{l}"], nlr)
                if words is not None:
                    words[("u", l)] = fr.words
                m = local_len(mlp.batch, cfg.nr) * local_len(P[l - 1], cfg.nr) * cfg.nr
                old = gemm_cost(cfg, P[l], mlp.batch, N[l], alpha=True)["instructions"] + mat_all_gather_slots(cfg, m)
                if gains is not None:
                    most = max(ring_update(cfg, k, l, P, N, mlp.batch, D, AT, R[f"W{l}"], nlr).words
                               for k in range(cfg.cores))
                    gains[("u", l)] = (old - fr.slots, most)
                out[l] = _slower(fr.slots, old)
            except RingError as e:
                out[l] = str(e)
    return out


def _fitting(up: list, gains: dict, room: int) -> list:
    """The update items of ``up`` whose fragments fit ``room`` microcode words together
    on every core with the most slots saved (``gains``: ``(slots saved, most words on
    a core)``; every subset of up to 12 items, else the most slots per word first)."""
    gain = {it: gains.get(it, (0, room + 1)) for it in up}
    if len(up) > 12:
        out, left = [], room
        for it in sorted(up, key=lambda it: -gain[it][0] / max(1, gain[it][1])):
            if gain[it][1] <= left:
                out.append(it)
                left -= gain[it][1]
        return out
    subsets = (c for r in range(len(up) + 1) for c in itertools.combinations(up, r))
    fits = (c for c in subsets if sum(gain[it][1] for it in c) <= room)
    return list(max(fits, key=lambda c: sum(gain[it][0] for it in c)))


def cheapest(build, items: list, forced: bool, words: dict | None = None, depth: int = 0,
             gains: dict | None = None):
    """``build(items)``; unless something is forced: the update items (``("u", l)``) only
    if their fragments' ``words`` fit the ``depth``-word microcode beside the program
    without them (when they do not all fit, those that fit together on every core with
    the most slots saved, ``gains``, if that program is faster), and when the longer text
    costs microcode reloads, the fewest cycles of it, the forward and the update items
    apart, each item alone, and none; the reason recorded for the items left out."""
    up = [it for it in items if it[0] == "u"]
    tp, left = None, {}
    if not forced and up and len(up) < len(items) and words is not None:
        tp = build([it for it in items if it[0] == "f"])
        used = max(len(w) for w in tp.images[0]) if len(tp.images) == 1 else depth
        need = sum(words.get(it, 0) for it in up)
        if used + need > depth:
            room = (f"the {depth - used} microcode words the rest leaves" if len(tp.images) == 1 else
                    "the microcode: the rest takes several images already")
            keep = _fitting(up, gains or {}, depth - used) if len(tp.images) == 1 else []
            if keep:
                alt = build([it for it in items if it[0] == "f" or it in keep])
                if alt.reload_cycles() or alt.step_cycles() >= tp.step_cycles():
                    keep = []
                else:
                    tp = alt
            kept = f" (layers {[l for _, l in keep]} fit, with the most slots saved)" if keep else ""
            left = {it: f"the updates' texts ({need} words) do not fit {room}{kept}" for it in up if it not in keep}
            items = [it for it in items if it[0] == "f" or it in keep]
        else:
            tp = None
    tp = tp or build(items)
    best = tp
    if items and not forced and tp.reload_cycles():
        groups = [[it for it in items if it[0] == t] for t in ("f", "u")]
        alts = [g for g in groups if 0 < len(g) < len(items)] + ([[it] for it in items] if len(items) > 1 else []) + [[]]
        for alt in alts:
            alt = build(alt)
            if alt.step_cycles() < best.step_cycles():
                best = alt
        for t, l in items:
            if l not in best.meta["ring_fw" if t == "f" else "ring_up"]:
                left[(t, l)] = (f"the longer program's microcode reloads ({tp.step_cycles()} cycles per step with every "
                                f"collective inside its GEMM, {best.step_cycles()} so)")
    for (t, l), why in left.items():
        best.meta["ring_fw_why" if t == "f" else "ring_up_why"][l] = why
    return best
