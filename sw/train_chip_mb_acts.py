"""Minibatch GD across cores when the activations do not fit resident: the compact
allocation (:func:`allocate_chip_mb_reuse`) and its ``describe()`` lines.

With every gathered activation resident (:func:`sw.train_chip_mb.allocate_chip_mb`) the
PE memories hold ``X``, ``X^T``, every ``A_l`` (``N_l x b``) and the backward pass's
scratch at once. Yet a gathered ``A_l`` is read whole only by layer ``l``'s forward GEMM:
the backward pass reads just this core's own segment (the ReLU mask and the transpose
into ``A^T``'s column block). The compact allocation therefore keeps

* two **activation buffers** ``ACT0`` / ``ACT1``: the inputs of the even layers (``X``,
  ``A2``, ...) share ``ACT0``, those of the odd layers ``ACT1`` (layer ``l`` reads one
  and writes the other), each in the bank its layers' weights are not in;
* the **own segments** ``S_l`` (``P_{l-1} x b``) copied out of ``A_l`` by a second ReLU
  (idempotent, so the values are those of the gathered matrix);
* the backward pass's scratch (``A^T``, ``dX^T``, ``D^T``, the deltas, the transpose
  stage) in a second arena at the same addresses as the forward buffers (the forward
  pass is over when it starts);
* ``X^T``, needed only by layer 0's update at the end of the backward pass, in the
  **scratchpad** (reserved beats at its top): broadcast into ``ACT1`` (free until layer
  0's GEMM writes ``A1``), stored to the scratchpad, loaded back into the backward arena
  before layer 0's update.

The numerics are those of the resident allocation (the same kernels in the same order
on the same values), so the golden trainer needs nothing new.
"""

from __future__ import annotations

from sw.layout import local_len
from sw.mlp import MLP
from sw.ring_mat_t import broadcast_t_why_not
from sw.train import Allocator, _other

__all__ = ["allocate_chip_mb_reuse", "xt_spad_beats", "acts_lines"]


def xt_spad_beats(cfg, mlp: MLP, N: list) -> int:
    """Scratchpad beats reserved for ``X^T`` (0 without a scratchpad: then it stays in
    the PE memories)."""
    if not cfg.spad_kib:
        return 0
    return cfg.nr * local_len(mlp.batch, cfg.nr) * local_len(N[0], cfg.nr)


def _weights(al: Allocator, cfg, mlp: MLP, wbanks: list, P: list, N: list, cols: bool, pages: dict) -> None:
    """The resident panels and one page buffer per bank the paged panels use (``WP``:
    the first paged layer's bank; ``WP{l}`` names a layer's buffer)."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    nl = mlp.n_layers
    for l in range(nl):
        if l in pages:
            continue
        what = (f"column panel of W{l} ({P[l]} rows x {N[l]} of {mlp.shape(l)[1]} columns)"
                if cols and l == nl - 1 else f"row panel of W{l} ({P[l]} of {mlp.shape(l)[0]} rows x {N[l]})")
        al.alloc(f"W{l}", L(P[l]) * L(N[l]), what, bank=wbanks[l])
    ls = sorted(pages)
    for j, bk in enumerate(dict.fromkeys(wbanks[l] for l in ls)):
        lb = [l for l in ls if wbanks[l] == bk]
        nm = "WP" if j == 0 else f"WP_{bk}"
        al.alloc(nm, max(pages[l] * L(N[l]) for l in lb), "page buffer of the panels in the scratchpad / DRAM ("
                 + ", ".join(f"W{l}: {pages[l] * cfg.nr} of {P[l]} rows" for l in lb) + " per page)", bank=bk)
        for l in lb:
            al.items[f"WP{l}"] = al.items[nm]


def xt_from_host(cfg) -> bool:
    """The host loads ``X^T`` into core 0 beside ``X`` (a chip without the transposed
    broadcast, :func:`sw.ring_mat_t.broadcast_t_why_not`); else the ring transposes
    core 0's ``X`` as it broadcasts it."""
    return broadcast_t_why_not(cfg) is not None


def xt_source(cfg) -> str:
    """Where ``X^T`` comes from, for the allocation's descriptions."""
    return ("core 0 loads it, the ring broadcasts it" if xt_from_host(cfg)
            else "the ring transposes core 0's X as it broadcasts it")


def _forward_arena(al: Allocator, cfg, mlp: MLP, wbanks: list, N: list, cols: bool, xt_words: int) -> None:
    """``ACT0`` / ``ACT1`` and the gathered matrices at their addresses."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    nl, b = mlp.n_layers, mlp.batch
    Lb = L(b)
    names = {0: "X", **{l: f"A{l}" for l in range(1, nl)}}
    for j in (0, 1):
        members = [l for l in range(nl) if l % 2 == j and not (cols and l == nl - 1)]
        if not members:
            continue
        words = max(L(N[l]) * Lb for l in members)
        if j == 1 and xt_words:
            words = max(words, xt_words)
        al.alloc(f"ACT{j}", words, "gathered layer inputs " + ", ".join(
            f"{names[l]} ({N[l]} x {b})" for l in members) + (", the broadcast X^T" if j == 1 and xt_words else "")
            + ", one at a time", forbid={wbanks[l] for l in members})
        for l in members:
            al.alias(names[l], f"ACT{j}", L(N[l]) * Lb, f"{names[l]} gathered ({N[l]} x {b}) in ACT{j}")
    if xt_words:
        if "ACT1" in al.items:
            al.alias("XT", "ACT1", xt_words, f"X^T ({b} x {N[0]}; {xt_source(cfg)}, "
                     f"stored to the scratchpad) in ACT1 before A1")
        else:
            al.alloc("XT", xt_words, f"X^T ({b} x {N[0]}; broadcast, stored to the scratchpad)")


def allocate_chip_mb_reuse(cfg, mlp: MLP, wbanks: list, P: list, N: list, out_map: str = "rows",
                           pages: dict | None = None) -> Allocator:
    """The compact allocation (module docstring); the same bank rules as
    :func:`sw.train_chip_mb.allocate_chip_mb`, plus: the mask's ``E_l`` and ``S_l`` in
    different banks. ``al.meta``: ``acts = "reuse"``, ``xt_spad`` (the scratchpad beat
    of ``X^T``, or None when it stays in the PE memories)."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    nl, b = mlp.n_layers, mlp.batch
    Lb = L(b)
    cols = out_map == "cols"
    pages = pages or {}
    al = Allocator(cfg)
    xb = xt_spad_beats(cfg, mlp, N)
    xt_words = Lb * L(N[0])
    al.meta.update(acts="reuse", xt_spad=(cfg.spad_depth - xb) if xb else None)
    _weights(al, cfg, mlp, wbanks, P, N, cols, pages)
    # persistent: the output panels, scalars, own segments. The own segments share the
    # bank of ACT1 (the larger buffer's bank, A^T's in the backward arena), the deltas
    # and the output panel the other, so A^T needs one region only.
    sb = _other(wbanks[1]) if nl > 1 else "a"
    z = al.alloc("Z", L(P[-1]) * Lb, f"output partial ({P[-1]} x {b}), reduced onto core 0; MSE: D = Z - T in "
                 f"place, broadcast from core 0" if cols else f"output panel ({P[-1]} x {b}); MSE: D = Z - T in place",
                 bank=_other(sb))
    if mlp.loss == "mse":
        al.alloc("T", L(P[-1]) * Lb, f"target panel ({P[-1]} x {b}, loaded per step)", bank=_other(z.bank))
        al.alloc("m1", 1, "scalar -1 (every PE)")
        dbank = {nl - 1: z.bank}
    else:
        g = al.alloc("G", L(P[-1]) * Lb, f"output gradient softmax(Z) - T ({P[-1]} x {b}, loaded per step)",
                     bank=_other(sb))
        dbank = {nl - 1: g.bank}
    al.alloc("nlr", 1, "scalar -lr/b (every PE)")
    for i in range(1, nl):
        if cols and i == nl - 1:
            al.alloc(f"A{i}", L(N[i]) * Lb, f"own segment of A{i} ({N[i]} x {b}; not gathered: the output layer is "
                     f"split by columns)", forbid={wbanks[i]})
            al.alias(f"S{i}", f"A{i}", L(N[i]) * Lb, f"own segment of A{i} (= A{i})")
        else:
            al.alloc(f"S{i}", L(P[i - 1]) * Lb, f"own segment of A{i} ({P[i - 1]} x {b}), kept for the backward "
                     f"pass (mask, A^T)", bank=sb)
    with al.arenas() as ar:
        _forward_arena(al, cfg, mlp, wbanks, N, cols, xt_words if xb else 0)
        ar.next()
        _backward_arena(al, cfg, mlp, wbanks, P, N, dbank, xt_words if xb else 0)
    if not xb:
        al.alloc("XT", xt_words, f"X^T ({b} x {N[0]}; {xt_source(cfg)})", forbid={dbank[0]})
    return al


def _backward_arena(al: Allocator, cfg, mlp: MLP, wbanks: list, P: list, N: list, dbank: dict,
                    xt_words: int) -> None:
    """Deltas, ``D^T``, ``A^T`` (and ``X^T`` reloaded at an ``A^T`` of its bank),
    ``dX^T`` and the transpose stage."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    nl, b = mlp.n_layers, mlp.batch
    Lb = L(b)
    for i in range(nl - 1, 0, -1):
        e = al.alloc(f"E{i}", L(P[i - 1]) * Lb, f"delta panel of A{i}: (W{i}^T D{i + 1}) * relu'(A{i}) "
                     f"({P[i - 1]} x {b})", forbid={al.items[f"S{i}"].region.bank})
        dbank[i - 1] = e.bank
    need: dict = {}
    for l in range(1, nl):
        for key, words in ((("DT", _other(wbanks[l])), Lb * L(P[l])), (("AT", _other(dbank[l])), Lb * L(N[l]))):
            need[key] = max(need.get(key, 0), words)
    if xt_words:
        key = ("AT", _other(dbank[0]))
        need[key] = max(need.get(key, 0), xt_words)
    for (role, bank), words in sorted(need.items()):
        what = "D^T (transposed output delta panel)" if role == "DT" else "A^T (transposed gathered layer input)"
        al.alloc(f"{role}_{bank}", words, what + ", shared by the layers", bank=bank)
    if xt_words:
        at = f"AT_{_other(dbank[0])}"
        al.alias("XTb", at, xt_words, f"X^T loaded back from the scratchpad for W0's update, in {at}")
    if nl > 1:
        al.alloc("EXT", max(Lb * L(N[l]) for l in range(1, nl)),
                 "dX^T = D^T W partial (b x N), reduce-scattered by column segments; shared", bank=dbank[0])
        st = max(max(L(P[l]) * Lb, Lb * L(P[l - 1])) for l in range(1, nl))
        al.alloc("stage", st, "transpose stage (diagonal PEs), shared")


def acts_lines(cfg, al: Allocator, mlp: MLP) -> list:
    """The describe() lines of the activations' placement."""
    if al.meta.get("acts") != "reuse":
        return ["activations: every gathered A_l resident in the PE memories"]
    it = al.items
    out = ["activations: they do not fit resident, so the gathered layer inputs share two buffers "
           + ", ".join(f"ACT{j} (bank {it[f'ACT{j}'].region.bank.upper()}, {it[f'ACT{j}'].words} words)"
                       for j in (0, 1) if f"ACT{j}" in it)
           + "; each core keeps its own segments S_l for the backward pass, whose scratch (A^T, dX^T, D^T, "
           "deltas) reuses the forward buffers' addresses"]
    if al.meta.get("xt_spad") is not None:
        w, at = it["XT"].words, al.meta["xt_spad"]
        out.append(f"X^T ({w} words per PE) in scratchpad beats {at}..{at + cfg.nr * w - 1}: stored after its "
                   f"broadcast, loaded back for W0's update")
    return out
