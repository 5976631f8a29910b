"""Compile batch-1 SGD of an MLP across the cores of a chip, and run it.

``compile_chip_sgd(cfg, mlp) -> ChipSGDProgram`` spreads every layer over the
``c = cfg.cores`` cores of a chip (``docs/training.md``, "SGD across cores"): core ``k``
holds the row panel ``k`` of every weight matrix, ``p_l = nr ceil(m_l / (c nr))`` rows
(the last panels padded with zero rows), and every core runs the single-core kernels of
:mod:`sw.train` on its panel, joined by the ring collectives of :mod:`sw.ring`. One
step (``loss="mse"``)::

    host: x -> core 0 (diag layout), t panel k -> core k (output cores)
    broadcast x from core 0 over the ring                    (x in the diag layout)
    for l = 0 .. L-1:
        z_k = W_l[panel k] a_l                               emit_gemv (x from the diagonal)
        hidden: a_{l+1} panel = relu(z_k); all-gather        every core gets all of a_{l+1},
                                                             in its ring step order
    d_k = z_k - t_k                                          emit_axpy on the output panel
    for l = L-1 .. 0:
        l >= 1: e = W_l[panel k]^T d_k                       emit_gemv(trans): a partial of
                                                             all of e on every core
                reduce-scatter e                             core k: the sum of its panel
                dm_k = e_k * relu'(a_l panel k)              emit_relu_mask (diag)
        W_l[panel k] += (-lr) d_k a_l^T                      emit_rank1 (a_l: the gathered copy)
    host: d panel k <- output cores

The all-gather leaves segment ``(k - t) mod c`` at position ``t`` on core ``k`` (ring
step order), so core ``k`` stores the columns of ``W_l`` (``l >= 1``) permuted the same
way (:func:`column_order`); the host permutes when it loads and reads the weights. The
reduce-scatter works on that order and leaves core ``k``'s panel at position 0.

Host phases (they share the chip's one host port, so they run core by core and cannot
use the ring) load ``x``/``t`` and unload ``d``; the ring work runs in chip phases (one
broadcast ``RUN``). ``loss="softmax_ce"`` with the output layer split by columns
(``out_map="cols"``): core 0 computes ``g = softmax(z) - t`` from the reduced logits
(:func:`sw.softmax.emit_softmax_grad`; the other cores wait in a NOP loop of the same
length) and broadcasts it, all in one chip phase, as for MSE. With row panels (or
``softmax="host"``) the forward pass ends with the logits unloaded from the output cores,
the host computes ``g`` (:func:`sw.train.host_softmax_grad`), loads its panels and the
backward pass runs in a second chip phase; the turnaround is counted as
:data:`sw.train.HOST_LATENCY_CYCLES`.

Weight panels that do not fit the PE memories stay in the cores' scratchpads and are
paged through a page buffer (:func:`plan_panels`, :func:`plan_chip_sgd`): the forward GEMV
page by page, and backward, per page from the last to the first, the page's part of
``W^T d`` (summed over the pages by an axpy with 1), its update and its store.

Cycles of a step (:meth:`ChipSGDProgram.step_cycles`): every chip phase's cycles (all
cores start together; the phase lasts until the last core drains) plus every host
phase's RUNs *back to back* (the host serves one core at a time) plus the host
turnaround. :class:`sw.golden_train_chip.GoldenChipSGD` is the bit-exact model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from sw.collectives import Region
from sw.ring import all_gather_lines, broadcast_lines, reduce_lines, reduce_scatter_vec_lines, ring_text
from sw.asm import Builder
from sw.kernels import (Scalar, emit_axpy, emit_gemv, emit_gemv_t_rank1, emit_rank1, emit_relu, emit_relu_mask, rank1_cost,
                        rank1_lines)
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.overlap import merge_rows
from sw.transfer import (decode_unload, emit_load, emit_spad_drain, emit_spad_fill, emit_unload, load_beats_for,
                         load_cost, unload_beats_for)
from sw.train import (HOST_LATENCY_CYCLES, Allocator, Op, StepResult, TrainCompileError, _fused_tail, _gaps, _other,
                      backward_plan,
                      alloc_softmax, breakdown_lines, ops_breakdown, resolve_softmax, softmax_const_items,
                      softmax_op, weight_bits,
                      decode_diag_beats, emit_load_vector, emit_unload_diag, host_softmax_grad,
                      mse_loss, one_hot, softmax_ce_loss, vector_beats, vector_bits)

__all__ = ["compile_chip_sgd", "ChipSGDProgram", "PanelMap", "PhaseLog", "panel_rows", "column_order",
           "ChipStepResult", "chip_shapes", "resolve_out_map", "OUT_MAPS",
]


def panel_rows(cfg, m: int) -> int:
    """Rows of a layer with ``m`` outputs per core: ``nr ceil(m / (cores nr))``."""
    return cfg.nr * local_len(m, cfg.cores * cfg.nr)


def column_order(cfg, k: int, p: int) -> np.ndarray:
    """Core ``k``'s order of a gathered vector of ``cores`` segments of ``p`` values:
    position ``t p + i`` holds global element ``((k - t) mod c) p + i``."""
    c = cfg.cores
    return np.concatenate([((k - t) % c) * p + np.arange(p) for t in range(c)])


OUT_MAPS = ("auto", "rows", "cols")


def resolve_out_map(cfg, mlp: MLP, out_map: str = "auto") -> str:
    """``"rows"`` or ``"cols"`` for ``out_map``: ``"auto"`` splits the output layer by
    columns when it has at most ``cores * nr`` rows (row panels would be one block of
    ``nr`` rows per core, most of them padding) and the network has a hidden layer."""
    if out_map not in OUT_MAPS:
        raise TrainCompileError(f"out_map must be one of {', '.join(OUT_MAPS)}, got {out_map!r}")
    if out_map == "auto":
        return "cols" if mlp.n_layers >= 2 and mlp.n_out <= cfg.cores * cfg.nr else "rows"
    if out_map == "cols" and mlp.n_layers < 2:
        raise TrainCompileError("out_map='cols' needs a hidden layer (the split output layer takes each core's "
                                "own segment of the last hidden activation); this network has none")
    return out_map


def chip_shapes(cfg, mlp: MLP, out_map: str = "rows") -> tuple:
    """``(P, N)``: rows and columns of each layer's panel per core. ``out_map="rows"``:
    every layer by row panels, ``P_l = nr ceil(m_l / (c nr))``, ``N_0 = n_in``, ``N_l = c
    P_{l-1}`` (the gathered input). ``"cols"``: the output layer by columns instead: core
    ``k`` holds columns ``k P_{L-2} .. (k + 1) P_{L-2} - 1`` of all its rows (``P_{L-1} =
    nr ceil(m_{L-1} / nr)``, ``N_{L-1} = P_{L-2}``: its own segment of the last hidden
    activation, which is never gathered)."""
    c = cfg.cores
    P = [panel_rows(cfg, mlp.shape(l)[0]) for l in range(mlp.n_layers)]
    N = [mlp.n_in] + [c * p for p in P[:-1]]
    if out_map == "cols":
        P[-1] = cfg.nr * local_len(mlp.n_out, cfg.nr)
        N[-1] = P[-2]
    return P, N



# ======================================================================================
# memory allocation (the same on every core)
# ======================================================================================
def _allocate(cfg, mlp: MLP, wbanks: list, P: list, N: list, out_map: str = "rows",
              softmax: str | None = None, fused: list | None = None, pages: dict | None = None) -> Allocator:
    """The regions of every core (the same on all); ``fused[l]``: layer ``l``'s backward
    step is the fused kernel (``e_l`` out of ``W_l``'s bank, which takes its updates; no
    rows copy of its ``d``). ``pages``: layer -> local rows per page of the panels kept in
    the scratchpad (:func:`plan_panels`): they share one page buffer ``WP`` in their
    common bank instead of panel regions; a paged layer ``l >= 1`` accumulates its
    ``W^T d`` page by page through ``ep`` (the next page's partial) and the scalar 1."""
    c, L = cfg.cores, (lambda n: local_len(n, cfg.nr))
    nl = mlp.n_layers
    fused = fused or [False] * nl
    pages = pages or {}
    s = [p // cfg.nr for p in P]
    split = out_map == "cols"
    # segments of a_i / e_i a core holds: all c, or its own only for the split output layer's input
    segs = {i: 1 if split and i == nl - 1 else c for i in range(1, nl)}
    al = Allocator(cfg)
    for l in range(nl):
        m, n = mlp.shape(l)
        if l not in pages:
            al.alloc(f"W{l}", L(P[l]) * L(N[l]), f"row panel of W{l} ({P[l]} of {m} x {N[l]} (n = {n}) per core)",
                     bank=wbanks[l])
    if pages:
        ls = sorted(pages)
        al.alloc("WP", max(pages[l] * L(N[l]) for l in ls),
                 "page buffer of the panels in the scratchpad (" + ", ".join(
                     f"W{l}: {pages[l] * cfg.nr} of {P[l]} rows" for l in ls) + " per page)", bank=wbanks[ls[0]])
    al.alloc("x", L(N[0]), "input sample (diag; core 0 loads it, the ring broadcasts it)", forbid={wbanks[0]})
    al.alloc("xc", L(N[0]) + 1, "cols copy of x (GEMV broadcast; rank-1 v)", forbid={wbanks[0]})
    for i in range(1, nl):
        al.alloc(f"a{i}", segs[i] * s[i - 1], f"a{i}: own panel relu(z) (rows) at 0" + (
                 ", then the all-gather (diag, step order)" if segs[i] > 1 else " (not gathered: the output layer "
                 "is split by columns)"), forbid={wbanks[i]})
        al.alloc(f"c{i}", L(N[i]) + 1, f"cols copy of a{i} (GEMV broadcast; rank-1 v)", forbid={wbanks[i]})
    al.alloc("z", s[nl - 1], "output partial z (rows), reduced onto core 0 (diag); MSE: d = z - t in place, "
             "broadcast from core 0" if split else "output panel z (rows); MSE: d = z - t in place",
             forbid={wbanks[nl - 1]})
    zb = al.items["z"].region.bank
    if mlp.loss == "mse":
        al.alloc("t", s[nl - 1], "target panel (rows, loaded per step)", bank=_other(zb))
        al.alloc("m1", 1, "scalar -1 (every PE)")
    elif softmax == "array":
        alloc_softmax(al, cfg, mlp.n_out, s[nl - 1], {wbanks[nl - 1]},
                      "core 0 computes it, the ring broadcasts it: rows on core 0, diag elsewhere",
                      "rows, core 0, loaded per step")
    else:
        al.alloc("g", s[nl - 1], "output gradient softmax(z) - t (core 0 loads it, the ring broadcasts it: diag)"
                 if split else "output gradient panel softmax(z) - t (rows, loaded per step)", forbid={wbanks[nl - 1]})
    if split:
        al.alloc("dz", s[nl - 1] + 1, "rows copy of the broadcast output gradient (transposed-GEMV broadcast)",
                 forbid={wbanks[nl - 1]})
    for i in range(nl - 1, 0, -1):
        ab = al.items[f"a{i}"].region.bank
        al.alloc(f"e{i}", segs[i] * s[i - 1], f"W{i}^T d partial (cols), reduce-scattered in place: own panel at 0"
                 if segs[i] > 1 else f"W{i}^T d (cols): the own panel (the split output layer needs no reduce-scatter)",
                 prefer=_other(ab), forbid={wbanks[i]} if fused[i] else ())
        al.alloc(f"dm{i}", s[i - 1], f"delta panel of layer {i}: e{i} * relu'(a{i}) (diag)", forbid={wbanks[i - 1]})
        if i + 1 < nl and not fused[i]:
            al.alloc(f"dc{i + 1}", s[i] + 1, f"rows copy of dm{i + 1} (transposed-GEMV broadcast)",
                     forbid={wbanks[i]})
    acc = [l for l in sorted(pages) if l >= 1 and len(page_split(L(P[l]), pages[l])) > 1]
    if acc:
        # the partial W^T d of a page after the first, added to e (the axpy streams the two
        # from different banks when it can; the fused kernel writes it out of W's bank)
        eb = al.items[f"e{acc[0]}"].region.bank
        al.alloc("ep", max(L(N[l]) for l in acc), "W^T d partial of one page (cols), added to e page by page: "
                 + ", ".join(f"W{l}" for l in acc), prefer=_other(eb),
                 forbid={wbanks[acc[0]]} if any(fused[l] for l in acc) else ())
        al.alloc("one", 1, "scalar 1 (every PE)")
    al.alloc("nlr", 1, "scalar -lr (every PE)")
    return al


# ======================================================================================
# the ops of one step on core k
# ======================================================================================
def _ring_op(cfg, name, lines, reads, writes, fma_wb=False, per_core=False, kind="ring", info=None):
    text = ring_text(cfg, lines, loop=f"{name}_")
    n = len(lines)

    def emit(b, text=text, n=n):
        b.text(text)
        return n

    return Op(name, kind, emit, reads=reads, writes=writes, fma_wb=fma_wb, stores=not fma_wb, per_core=per_core,
              info=info or {})


def _rank1_op(cfg, l, m, n, W, d, dlay, v, nlr, row0=0, tag=""):
    """The :func:`sw.kernels.emit_rank1` op ``W_l += (-lr) d v^T`` of the panel's local
    rows from ``row0`` on (``m`` x ``n`` the whole panel; ``tag`` tells apart the ops of
    one layer's pages)."""
    L = lambda x: local_len(x, cfg.nr)                # noqa: E731
    mp, np_ = L(m) - row0, L(n)
    W, d = _at(W, row0 * np_), _at(d, row0)
    alpha = Scalar(nlr.bank, nlr.base)
    return Op(f"rank1_{l}{tag}", "rank1", lambda b: emit_rank1(b, cfg, mp * cfg.nr, n, W, d, v, alpha=alpha,
                                                               u_layout=dlay, v_layout="cols",
                                                               name=f"up{l}{tag}_").instructions,
              reads=[(W, mp * np_), (d, mp), (v, np_), (nlr, 1)], writes=[(W, mp * np_)], fma_wb=True, stores=False)


def _at(r: Region, off: int) -> Region:
    return Region(r.bank, r.base + off)


def fused_backward_op(cfg, name: str, m: int, n: int, W: Region, d: Region, v: Region, e: Region, nlr: Region,
                      d_layout: str, label: str) -> Op:
    """The :func:`sw.kernels.emit_gemv_t_rank1` op: ``e = W^T d`` (old ``W``, ``m x n``)
    and ``W += d (-lr v)^T`` in one pass (``nlr``: the scalar ``-lr``). The kernel reads
    up to its block's width past the end of ``v`` and one word past ``d`` (values unused):
    only the used extents are hazards; ``W`` is written by FMA write-backs (the last
    :func:`sw.train._fused_tail` instructions), ``e`` by stores."""
    L = lambda x: local_len(x, cfg.nr)                # noqa: E731
    wn, alpha = L(m) * L(n), Scalar(nlr.bank, nlr.base)
    return Op(name, "gemv_t_rank1", lambda b: emit_gemv_t_rank1(b, cfg, m, n, W, d, v, e, alpha=alpha,
                                                                d_layout=d_layout, name=label).instructions,
              reads=[(W, wn), (d, L(m)), (v, L(n)), (nlr, 1)], writes=[(W, wn), (e, L(n))],
              fma_wb=True, stores=True, wb=[(W, wn)], wb_tail=_fused_tail(cfg, m, n))


def page_sum_op(cfg, name: str, words: int, ep: Region, e: Region, one: Region, label: str) -> Op:
    """``e += 1 * ep`` (:func:`sw.kernels.emit_axpy`, one rounding): a page's partial of
    ``W^T d`` added to the sum of the pages before it (``one``: the scalar 1)."""
    return Op(name, "axpy", lambda b: emit_axpy(b, cfg, words, Scalar(one.bank, one.base), ep, e,
                                                name=label).instructions,
              reads=[(ep, words), (e, words), (one, 1)], writes=[(e, words)], fma_wb=True, stores=False)


def _paged_backward(cfg, l, sp: "SpadPanel", R: dict, P, N, d, dlay, dcopy, v, fused: bool,
                    resident: bool = False) -> list:
    """Ops of layer ``l``'s backward step with its panel in the scratchpad, page by page
    from the last page to the first: load the page into ``WP`` (not the last page when
    ``resident``: the forward pass left it there); ``l >= 1``: its part of ``e = W_l^T d``
    (the old weights; the first page visited into ``e``, each further one into ``ep`` and
    added to ``e`` by an axpy with 1); its rows of the update (fused: the same pass);
    store the page back."""
    nr, L = cfg.nr, (lambda x: local_len(x, cfg.nr))
    WP, ln = R["WP"], L(N[l])
    ops = []
    last = len(sp.pages) - 1
    for p in range(last, -1, -1):
        r0, n = sp.pages[p]
        w, dp = sp.page_words(p), _at(d, r0)
        if not (resident and p == last):
            ops.append(spad_op(cfg, f"lb{l}_{p}", False, WP, w, sp.page_addr(nr, p)))
        if l >= 1:
            e = R[f"e{l}"] if p == last else R["ep"]
            if fused:
                ops.append(fused_backward_op(cfg, f"bwup{l}_{p}", n * nr, N[l], WP, dp, v, e, R["nlr"], dlay,
                                             f"bu{l}_{p}_"))
            else:
                dc = _at(dcopy, r0) if dcopy is not None else None
                ops.append(Op(f"gemv_t{l}_{p}", "gemv_t", lambda b, n=n, dp=dp, e=e, dc=dc, p=p:
                              emit_gemv(b, cfg, n * nr, N[l], WP, dp, e, trans=True,
                                        x_layout=dlay if dlay == "diag" else None, x_copy=dc,
                                        name=f"bw{l}_{p}_").instructions,
                              reads=[(WP, w), (dp, n)], writes=[(e, ln)] + ([(dc, n + 1)] if dc is not None else [])))
            if p != last:
                ops.append(page_sum_op(cfg, f"acc{l}_{p}", ln, R["ep"], R[f"e{l}"], R["one"], f"ac{l}_{p}_"))
        if not (l >= 1 and fused):
            ops.append(_rank1_op(cfg, l, n * nr, N[l], WP, dp, dlay, v, R["nlr"], tag=f"_{p}"))
        ops.append(spad_op(cfg, f"sb{l}_{p}", True, WP, w, sp.page_addr(nr, p)))
    return ops


def _chip_ops(cfg, mlp: MLP, al: Allocator, P: list, N: list, k: int, part: str, out_map: str = "rows",
              softmax: str | None = None, fused: list | None = None, overlap: bool = False,
              spad: dict | None = None) -> list:
    """Ops of core ``k``: ``part`` = ``"step"`` (MSE: the whole step), ``"forward"``
    (softmax: up to the logits; also the predict pass), ``"backward"`` (softmax: from
    the loaded gradient). ``out_map="cols"``: the output layer is split by columns
    (:func:`chip_shapes`): its input is each core's own panel (no all-gather), its
    partial outputs are reduced onto core 0, the output gradient is broadcast from there
    and its ``W^T d`` needs no reduce-scatter. ``softmax="array"`` (with ``"cols"``):
    ``part="step"`` holds the whole softmax step, core 0 computing the gradient from the
    reduced logits (:func:`sw.softmax.emit_softmax_grad`) while the others wait.
    ``fused[l]``: layer ``l``'s ``W^T d`` and update are one
    :func:`sw.kernels.emit_gemv_t_rank1` (before the reduce-scatter) instead of the
    transposed GEMV and, after the mask, the rank-1 update. ``spad``: layer ->
    :class:`SpadPanel`, the panels paged through ``WP``: per page a load and the page's
    rows of the forward GEMV; backward :func:`_paged_backward` (last page first, the last
    paged layer's last page not reloaded), then the reduce-scatter and the mask (no
    overlap: the update is done by then)."""
    nr, nl, L = cfg.nr, mlp.n_layers, (lambda n: local_len(n, cfg.nr))
    fused = fused or [False] * nl
    spad = spad or {}
    s = [p // nr for p in P]
    split = out_map == "cols"
    R = {n: v.region for n, v in al.items.items()}
    ops = []

    def kern(name, kind, fn, reads, writes, fma_wb=False):
        ops.append(Op(name, kind, lambda b, fn=fn: fn(b).instructions, reads=reads, writes=writes, fma_wb=fma_wb,
                      stores=not fma_wb))

    if part in ("step", "forward"):
        x = R["x"]
        ops.append(_ring_op(cfg, "bcast_x", broadcast_lines(cfg, k, L(N[0]), (x.bank, x.base), (x.bank, x.base)),
                            [(x, L(N[0]))], [(x, L(N[0]))]))
        for l in range(nl):
            xin, xc = (R["x"], R["xc"]) if l == 0 else (R[f"a{l}"], R[f"c{l}"])
            y = R[f"a{l + 1}"] if l < nl - 1 else R["z"]
            if l in spad:
                # page by page: load, the page's rows of z (the first page broadcasts the
                # input from the diagonal and keeps its cols copy, the others read the copy)
                sp, WP = spad[l], R["WP"]
                for p, (r0, n) in enumerate(sp.pages):
                    w = sp.page_words(p)
                    ops.append(spad_op(cfg, f"lf{l}_{p}", False, WP, w, sp.page_addr(nr, p)))
                    xi, yp = (xin if p == 0 else xc), _at(y, r0)
                    kern(f"gemv{l}_{p}", "gemv", lambda b, l=l, n=n, xi=xi, xc=xc, yp=yp, p=p:
                         emit_gemv(b, cfg, n * nr, N[l], WP, xi, yp, x_layout="diag" if p == 0 else None,
                                   x_copy=xc if p == 0 else None, name=f"fw{l}_{p}_"),
                         [(WP, w), (xi, L(N[l]))], [(yp, n)] + ([(xc, L(N[l]) + 1)] if p == 0 else []))
            else:
                W = R[f"W{l}"]
                wn = L(P[l]) * L(N[l])
                kern(f"gemv{l}", "gemv", lambda b, l=l, W=W, xin=xin, xc=xc, y=y:
                     emit_gemv(b, cfg, P[l], N[l], W, xin, y, x_layout="diag", x_copy=xc, name=f"fw{l}_"),
                     [(W, wn), (xin, L(N[l]))], [(y, s[l]), (xc, L(N[l]) + 1)])
            if l < nl - 1:
                kern(f"relu{l + 1}", "relu", lambda b, y=y, l=l: emit_relu(b, cfg, s[l], y, y, name=f"re{l}_"),
                     [(y, s[l])], [(y, s[l])])
                if not (split and l == nl - 2):
                    ops.append(_ring_op(cfg, f"ag{l + 1}", all_gather_lines(cfg, s[l], y.bank, y.base),
                                        [(y, cfg.cores * s[l])], [(y, cfg.cores * s[l])]))
            elif split:
                ops.append(_ring_op(cfg, "reduce_z", reduce_lines(cfg, k, s[l], y.bank, y.base, 0),
                                    [(y, s[l])], [(y, s[l])], fma_wb=True, per_core=True))
        if part == "forward":
            return ops
        if softmax == "array":
            ops.append(softmax_op(cfg, R, al, mlp.n_out, R["z"], z_layout="diag", core=k))
            d, dlay, dcopy = R["g"], "rows", None
        else:
            m1 = Scalar(R["m1"].bank, R["m1"].base)
            z, so = R["z"], s[nl - 1]
            kern("loss_grad", "axpy", lambda b: emit_axpy(b, cfg, so, m1, R["t"], z, name="lg_"),
                 [(R["t"], so), (z, so), (R["m1"], 1)], [(z, so)], fma_wb=True)
            d, dlay, dcopy = z, "rows", None
    else:
        d, dlay, dcopy = R["g"], "rows", None
    if split:
        so = s[nl - 1]
        ops.append(_ring_op(cfg, f"bcast_{'d' if part == 'step' and softmax != 'array' else 'g'}",
                            broadcast_lines(cfg, k, so, (d.bank, d.base), (d.bank, d.base)), [(d, so)], [(d, so)]))
        dlay, dcopy = "diag", R["dz"]
    for l in range(nl - 1, -1, -1):
        W = R.get(f"W{l}")
        wn = L(P[l]) * L(N[l])
        if l < nl - 1:
            d, dlay, dcopy = R[f"dm{l + 1}"], "diag", R.get(f"dc{l + 1}")
        v = R["xc"] if l == 0 else R[f"c{l}"]
        if l in spad:
            # the last paged layer's last page is still in WP from the forward pass
            ops += _paged_backward(cfg, l, spad[l], R, P, N, d, dlay, dcopy, v, fused[l], resident=l == max(spad))
            if l >= 1:
                e, a, dm = R[f"e{l}"], R[f"a{l}"], R[f"dm{l}"]
                if not (split and l == nl - 1):
                    ops.append(_ring_op(cfg, f"rs{l}", reduce_scatter_vec_lines(cfg, s[l - 1], e.bank, e.base),
                                        [(e, L(N[l]))], [(e, s[l - 1])], fma_wb=True))
                kern(f"mask{l}", "relu_mask", lambda b, l=l, e=e, a=a, dm=dm:
                     emit_relu_mask(b, cfg, s[l - 1], e, a, dm, layout="diag", name=f"mk{l}_"),
                     [(e, s[l - 1]), (a, s[l - 1])], [(dm, s[l - 1])])
            continue
        if l >= 1 and fused[l]:
            # e = W^T d (old W) and W += d (-lr v)^T in one pass
            ops.append(fused_backward_op(cfg, f"bwup{l}", P[l], N[l], W, d, v, R[f"e{l}"], R["nlr"], dlay, f"bu{l}_"))
        if l >= 1:
            e, a, dm = R[f"e{l}"], R[f"a{l}"], R[f"dm{l}"]
            wr = [(e, L(N[l]))] + ([(dcopy, s[l] + 1)] if dcopy is not None else [])
            if not fused[l]:
                kern(f"gemv_t{l}", "gemv_t", lambda b, l=l, W=W, d=d, e=e, dlay=dlay, dcopy=dcopy:
                     emit_gemv(b, cfg, P[l], N[l], W, d, e, trans=True, x_layout=dlay if dlay == "diag" else None,
                               x_copy=dcopy, name=f"bw{l}_"), [(W, wn), (d, s[l])], wr)
            rest = None
            if not (split and l == nl - 1):
                rs = reduce_scatter_vec_lines(cfg, s[l - 1], e.bank, e.base)
                chunk = (cfg.n_regs - 3) // 2          # the reduce-scatter's registers below the update's
                op = None
                if overlap and not fused[l] and chunk >= 1:
                    # in smaller chunks (other passes) only when the default ones need the update's registers
                    rs_ov = reduce_scatter_vec_lines(cfg, s[l - 1], e.bank, e.base, chunk=chunk)
                    op, rest = _rs_with_rank1(cfg, l, rs_ov, P[l], N[l], W, d, dlay, v, R["nlr"], e, s[l - 1])
                    if op.info["instructions"] + op.info["rest_instructions"] >= \
                            len(rs) + rank1_cost(cfg, P[l], N[l], alpha=True)["instructions"]:
                        op, rest = None, None              # the overlap would not shorten the step
                if op is not None:
                    ops.append(op)
                else:
                    ops.append(_ring_op(cfg, f"rs{l}", rs, [(e, L(N[l]))], [(e, s[l - 1])], fma_wb=True))
            kern(f"mask{l}", "relu_mask", lambda b, l=l, e=e, a=a, dm=dm:
                 emit_relu_mask(b, cfg, s[l - 1], e, a, dm, layout="diag", name=f"mk{l}_"),
                 [(e, s[l - 1]), (a, s[l - 1])], [(dm, s[l - 1])])
            if rest is not None:
                if rest:
                    ops.append(rest)
                continue
        if not fused[l]:
            ops.append(_rank1_op(cfg, l, P[l], N[l], W, d, dlay, v, R["nlr"]))
    return ops


def _rs_with_rank1(cfg, l, rs, m, n, W, d, dlay, v, nlr, e, seg) -> tuple:
    """The reduce-scatter of ``W_l^T d`` (``rs``: its lines) with the first local rows of
    the independent update ``W_l += (-lr) d v^T`` in its free slots
    (:func:`sw.overlap.merge_rows`, :func:`sw.kernels.rank1_lines` on the top three
    registers; the reduce-scatter uses ``r0 ..``): ``(merged op, rest)``, ``rest`` the
    :func:`sw.kernels.emit_rank1` op of the remaining rows, or ``False`` when every row
    is merged. The number of merged rows minimizes the two ops' instructions, with at
    most the last merged row running past the reduce-scatter's end (so the unrolled
    microcode stays about the reduce-scatter's length)."""
    L = lambda x: local_len(x, cfg.nr)                # noqa: E731
    mp, np_, nr = L(m), L(n), cfg.nr
    alpha = Scalar(nlr.bank, nlr.base)
    rows = rank1_lines(cfg, m, n, W, d, v, alpha, u_layout=dlay)
    _, ends = merge_rows(rs, rows)

    def rest_len(k):
        return 0 if k == mp else rank1_cost(cfg, (mp - k) * nr, n, alpha=True)["instructions"]

    # at most one row past the reduce-scatter's end (more would only move instructions of
    # the loop kernel into unrolled microcode)
    fit = [k for k in range(1, mp + 1) if ends[k - 1] - len(rs) <= len(rows[k - 1])]
    k = min(fit, key=lambda k: (ends[k - 1] + rest_len(k), k))
    lines, _ = merge_rows(rs, rows[:k])
    reads = [(e, L(n)), (W, k * np_), (d, k), (v, np_), (nlr, 1)]
    merged = _ring_op(cfg, f"rs{l}_up{l}", lines, reads, [(e, seg), (W, k * np_)], fma_wb=True, kind="ring+rank1",
                      info={"layer": l, "rows_merged": k, "rows": mp, "ring_slots": len(rs),
                            "instructions": len(lines), "rest_instructions": rest_len(k)})
    return merged, (False if k == mp else _rank1_op(cfg, l, m, n, W, d, dlay, v, nlr, row0=k))


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


# ======================================================================================
# the compiled program
# ======================================================================================
@dataclass
class ChipPart:
    """One chip-phase program: per core its words (all at ``origin`` of ``image``)."""

    name: str
    ops: list                     #: core 0's ops (the others differ only in the broadcast's waits)
    instructions: int             #: issued per RUN (the same on every core)
    image: int = 0
    origin: int = 0


@dataclass
class ChipStepResult(StepResult):
    #: per phase: (name, "chip" or "host", cycles counted for the step)
    phases: list = field(default_factory=list)
    #: per core: its counters summed over the step's phases (``cycles``: the step's)
    core_counters: list = field(default_factory=list)


class PhaseLog:
    """The phases of one chip step as they run: :meth:`note` each phase's per-core
    results and counted cycles, :meth:`result` the :class:`ChipStepResult` (every core's
    counters summed over the phases, ``cycles`` the step's)."""

    def __init__(self, cores: int):
        self.phases: list = []
        self.per_core = [dict() for _ in range(cores)]

    def note(self, name, kind, res, cyc):
        self.phases.append((name, kind, cyc))
        for k, r in enumerate(res):
            for key, v in r.counters.items():
                self.per_core[k][key] = self.per_core[k].get(key, 0) + v

    def result(self, loss, out, host_cycles: int, raw: dict) -> ChipStepResult:
        cyc = sum(c for _, _, c in self.phases)
        for pc in self.per_core:
            pc["cycles"] = cyc
        return ChipStepResult(loss, out, list(self.per_core), cyc, host_cycles, raw, self.phases, self.per_core)


def load_per_core(session, cfg, items: list, name: str) -> None:
    """Host phases writing ``items[k]`` (``(Region, (nr, nr, n) local words)`` pairs)
    into core ``k`` (:func:`sw.transfer.emit_load`), as many per phase as the microcode
    holds."""
    chunk = max(1, (cfg.ucode_depth - 1) // (1 + 3 * cfg.nr))
    for start in range(0, max(len(it) for it in items), chunk):
        imgs, data = [], []
        for k in range(cfg.cores):
            b = Builder(cfg)
            dk = []
            for j, (reg, local) in enumerate(items[k][start:start + chunk]):
                emit_load(b, cfg, reg.bank, reg.base, local.shape[2], loop=f"w{j}_")
                dk += load_beats_for(cfg, local)
            b.halt()
            imgs.append(b.build().words())
            data.append(dk)
        session.run(imgs, data, f"{name}{start}")


def _halt(cfg):
    b = Builder(cfg)
    b.halt()
    return b.build().words()


@dataclass(frozen=True)
class SpadPanel:
    """A weight panel kept in the core's scratchpad and moved through a PE-memory page
    buffer in row pages (:func:`plan_panels`). The panel's local words
    (``lrows x ncols`` per PE, the 2D round-robin layout) are stored page after page in
    the beat order of :func:`sw.transfer.emit_unload` (a page unloaded to the scratchpad
    loads back unchanged with ``emit_load(..., lanes="cols")``)."""

    base: int                     #: first scratchpad beat
    lrows: int                    #: local rows of the whole panel per PE (``L(P_l)``)
    ncols: int                    #: local columns per PE (``L(N_l)``): words of one local row
    pages: tuple                  #: ``((first local row, local rows), ...)``

    @property
    def words(self) -> int:
        return self.lrows * self.ncols

    def page_words(self, p: int) -> int:
        return self.pages[p][1] * self.ncols

    def page_addr(self, nr: int, p: int) -> int:
        """First scratchpad beat of page ``p`` (``nr`` beats per local word)."""
        return self.base + nr * self.pages[p][0] * self.ncols

    def beats(self, nr: int) -> int:
        return nr * self.words

    def row_pages(self, nr: int) -> tuple:
        """The pages in rows of the padded panel: ``((first row, rows), ...)``."""
        return tuple((r0 * nr, n * nr) for r0, n in self.pages)


def page_split(lrows: int, per: int) -> tuple:
    """Row pages ``((first local row, local rows), ...)`` of ``lrows`` local rows, at most
    ``per`` per page."""
    return tuple((r, min(per, lrows - r)) for r in range(0, lrows, per))


def spad_choice(cfg, spad, allowed: list, what: str) -> list:
    """An explicit choice of layers to page from the scratchpad, checked: sorted, a
    non-empty subset of ``allowed`` (``what`` names them), and the configuration has a
    scratchpad. Raises :class:`sw.train.TrainCompileError`."""
    layers = sorted(set(int(l) for l in spad))
    if not layers or any(l not in allowed for l in layers):
        raise TrainCompileError(f"spad layers must be a non-empty subset of {allowed} ({what}), got {sorted(spad)}")
    if not cfg.spad_kib:
        raise TrainCompileError("weights in the scratchpad need one: this configuration has none (cfg.spad_kib = 0)")
    return layers


def check_page_rows(cfg, page_rows) -> None:
    """``page_rows`` is None or a positive multiple of ``nr``, else
    :class:`sw.train.TrainCompileError`."""
    if page_rows is not None and (page_rows < cfg.nr or page_rows % cfg.nr):
        raise TrainCompileError(f"page_rows must be a positive multiple of nr = {cfg.nr}, got {page_rows}")


def largest(fits, hi: int) -> int:
    """The largest ``t`` in ``1 .. hi`` with ``fits(t)``, for ``fits`` true at 1 and
    monotone (binary search)."""
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def plan_panels(cfg, P: list, N: list, alloc, pageable: list, spad=None, page_rows: int | None = None,
                fail=None) -> tuple:
    """Where the weight panels live: ``(wbanks, allocator, {layer: SpadPanel})``, shared by
    SGD and minibatch GD across cores.

    ``alloc(wbanks, pages)`` returns the step's :class:`sw.train.Allocator` for a bank per
    panel and ``pages`` (layer -> local rows per page of the panels in the scratchpad, or
    None). Every panel in the PE memories when some assignment of the panels to the banks
    fits (``spad=None``); otherwise the largest ``pageable`` panels move to the core's
    scratchpad, one more at a time, until the rest fits with a page buffer ``WP`` (the
    paged panels share a bank). ``spad``: the layers to keep in the scratchpad (an
    explicit choice, e.g. to test paging on small networks). Pages are row pages of at
    most ``page_rows`` rows (a multiple of ``nr``; default: as many as the buffer holds,
    the buffer taking what the PE memories have left), the bank assignment with the
    fewest pages. Raises :class:`sw.train.TrainCompileError` (``fail(allocator)``: the
    message, with the sizes) when nothing fits."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    nl, nr = len(P), cfg.nr
    cands = [list(x) for x in itertools.islice(itertools.product("ab", repeat=nl), 1024)]
    if spad is None:
        for wb in cands:
            al = alloc(wb, None)
            if al.fits():
                return wb, al, {}
        order = sorted(pageable, key=lambda l: (-L(P[l]) * L(N[l]), l))
        sets = [sorted(order[:j]) for j in range(1, len(order) + 1)] if cfg.spad_kib else []
    else:
        sets = [spad_choice(cfg, spad, pageable, "the row-panel layers")]
    check_page_rows(cfg, page_rows)
    cap = (page_rows // nr) if page_rows else max(L(p) for p in P)
    lim = (1 << cfg.loop_bits) - 2
    for S in sets:
        beats = sum(nr * L(P[l]) * L(N[l]) for l in S)
        if beats > cfg.spad_depth:
            break                                  # more layers in the scratchpad only need more
        best = None

        def per(t, S=S):                           # local rows per page with at most t per page
            return {l: max(1, min(L(P[l]), t, cap, lim // L(N[l]))) for l in S}
        for wb in cands:
            if len({wb[l] for l in S}) != 1:
                continue
            if not alloc(wb, per(1)).fits():
                continue
            rows = per(largest(lambda t, wb=wb: alloc(wb, per(t)).fits(), max(L(P[l]) for l in S)))
            npages = sum(-(-L(P[l]) // rows[l]) for l in S)
            if best is None or npages < best[0]:
                best = (npages, wb, rows)
        if best is not None:
            _, wb, rows = best
            al = alloc(wb, rows)
            panels, at = {}, 0
            for l in S:
                panels[l] = SpadPanel(at, L(P[l]), L(N[l]), page_split(L(P[l]), rows[l]))
                at += panels[l].beats(nr)
            return wb, al, panels
    raise TrainCompileError(fail(alloc(cands[0], None)))


def spad_op(cfg, name: str, store: bool, WP: Region, words: int, addr: int) -> Op:
    """Move a page between the scratchpad (beats ``addr ..``) and the page buffer ``WP``
    (``words`` per PE): :func:`sw.transfer.emit_load` with ``lanes="cols"`` /
    :func:`sw.transfer.emit_unload` to the scratchpad, ``nr`` beats per word."""
    n = load_cost(cfg, words) + 1
    if store:
        return Op(name, "spad", lambda bl: (emit_unload(bl, cfg, WP.bank, WP.base, words, loop=f"{name}_",
                                                        dest="spad", spad_addr=addr), n)[1],
                  reads=[(WP, words)], writes=[], stores=False)
    return Op(name, "spad", lambda bl: (emit_load(bl, cfg, WP.bank, WP.base, words, loop=f"{name}_", source="spad",
                                                  spad_addr=addr, lanes="cols"), n)[1],
              reads=[], writes=[(WP, words)])


def spad_image(cfg, panel: SpadPanel, local) -> list:
    """The scratchpad beats of a panel (``(nr, nr, words)`` local words), page by page."""
    out = []
    for r0, n in panel.pages:
        out += unload_beats_for(cfg, local[:, :, r0 * panel.ncols:(r0 + n) * panel.ncols])
    return out


def spad_local(cfg, panel: SpadPanel, beats) -> np.ndarray:
    """Inverse of :func:`spad_image`: the panel's ``(nr, nr, words)`` local words."""
    out, at = [], 0
    for _, n in panel.pages:
        w = n * panel.ncols
        out.append(decode_unload(cfg, beats[at:at + cfg.nr * w], w))
        at += cfg.nr * w
    return np.concatenate(out, axis=2)


class PanelMap:
    """Where each core's weight panels sit in the global matrices: row panels (columns in
    the core's order, :meth:`_cols`) or, for the output layer with ``out_map="cols"``, a
    column panel. Shared by the compiled programs and the golden trainers (attributes
    ``cfg``, ``mlp``, ``P``, ``N``, ``out_map``)."""

    def _cols(self, l, k):
        """Core ``k``'s order of the columns of layer ``l``'s panel (None: natural):
        the all-gather's step order for ``l >= 1`` (a column panel: natural)."""
        return column_order(self.cfg, k, self.P[l - 1]) if l >= 1 and not self._split_cols(l) else None

    def _split_cols(self, l) -> bool:
        """Whether layer ``l`` is split by columns (the output layer with ``out_map="cols"``)."""
        return self.out_map == "cols" and l == self.mlp.n_layers - 1

    def _gshape(self, l) -> tuple:
        """Shape of layer ``l``'s padded global matrix (the cores' panels together)."""
        if self._split_cols(l):
            return self.P[l], self.cfg.cores * self.N[l]
        return self.cfg.cores * self.P[l], self.N[l]

    def _panel_index(self, l, k) -> tuple:
        """Index of core ``k``'s panel in :meth:`_gshape`'s matrix: its rows, its columns
        in the core's order (a column panel: its own columns, in the natural order)."""
        if self._split_cols(l):
            return slice(None), slice(k * self.N[l], (k + 1) * self.N[l])
        cols = self._cols(l, k)
        return slice(k * self.P[l], (k + 1) * self.P[l]), slice(None) if cols is None else cols


    def core_weights(self, weights) -> list:
        """Per core, per layer: its panel (:meth:`_panel_index` of the padded global
        matrix; global ``(m, n)`` bit patterns or floats in)."""
        fmt, c = self.cfg.fmt, self.cfg.cores
        out = [[] for _ in range(c)]
        for l, W in enumerate(weight_bits(self.mlp, fmt, weights)):
            m, n = self.mlp.shape(l)
            G = np.zeros(self._gshape(l), dtype=fmt.np_uint)
            G[:m, :n] = W
            for k in range(c):
                out[k].append(G[self._panel_index(l, k)])
        return out

    def join_panels(self, l, panels, padded: bool = False) -> np.ndarray:
        """Layer ``l``'s global matrix from the cores' panels (each ``P_l x N_l``, further
        padding ignored): ``(m, n)``, or with ``padded`` the whole :meth:`_gshape`."""
        G = np.zeros(self._gshape(l), dtype=self.cfg.fmt.np_uint)
        for k, panel in enumerate(panels):
            G[self._panel_index(l, k)] = panel[:self.P[l], :self.N[l]]
        m, n = self.mlp.shape(l)
        return G if padded else G[:m, :n]


@dataclass
class ChipSGDProgram(PanelMap):
    """A compiled SGD step across the cores (see the module docstring)."""

    cfg: object
    mlp: MLP
    wbanks: list
    alloc: Allocator
    P: list                       #: panel rows per layer
    N: list                       #: columns of each layer's panel (n_0, then c p_{l-1})
    parts: dict                   #: "step" (MSE) or "forward"/"backward" (softmax), "predict": [ChipPart]
    images: list                  #: per image, per core: words
    neg_lr: int
    meta: dict = field(default_factory=dict)
    #: host phase -> (image, origin) of its programs (:meth:`_place_host`)
    host_at: dict = field(default_factory=dict)
    #: ``"rows"`` or ``"cols"``: how the output layer is split (:func:`chip_shapes`)
    out_map: str = "rows"
    #: softmax_ce: ``"array"`` (core 0, :mod:`sw.softmax`) or ``"host"``
    softmax: str | None = None
    #: per layer: backward step fused (:func:`sw.kernels.emit_gemv_t_rank1`)
    fused: list = field(default_factory=list)
    #: layer -> :class:`SpadPanel`: weight panels kept in the scratchpad (:func:`plan_panels`)
    spad: dict = field(default_factory=dict)

    # -- figures ------------------------------------------------------------------------
    @property
    def regions(self) -> dict:
        return {k: v.region for k, v in self.alloc.items.items()}

    @property
    def out_cores(self) -> int:
        """Cores holding rows of the output layer (the others hold only padding)."""
        return local_len(self.mlp.n_out, self.P[-1])

    @property
    def one_run(self) -> bool:
        """Whether the step is one chip phase (MSE, or the softmax on the array)."""
        return self.mlp.loss == "mse" or self.softmax == "array"

    def chip_parts(self) -> list:
        """The chip programs (RUNs) of a step, in order."""
        names = ["step"] if self.one_run else ["forward", "backward"]
        return [p for n in names for p in self.parts[n]]

    def part_cycles(self, part: ChipPart) -> int:
        return part.instructions + self.cfg.run_overhead

    def host_phase_cycles(self) -> list:
        """``(name, cycles)`` of the step's host phases: the RUNs of their active cores,
        back to back (one instruction per beat, plus HALT, start latency and drain)."""
        cfg = self.cfg
        run = cfg.run_overhead
        so, K = self.P[-1] // cfg.nr, self.out_cores
        xin = local_len(self.N[0], cfg.nr) + 2            # address-register setup, one beat per word
        if self.one_run:
            return [("in", xin + K * (so + run)), ("d" if self.mlp.loss == "mse" else "logits", K * (so + run))]
        return [("in", xin + run), ("logits", K * (so + run)), ("g", K * (so + run))]

    def host_cycles(self, host_latency: int = HOST_LATENCY_CYCLES) -> int:
        return host_latency if self.softmax == "host" else 0

    def step_cycles(self, host_latency: int = HOST_LATENCY_CYCLES) -> int:
        return (sum(self.part_cycles(p) for p in self.chip_parts()) + sum(c for _, c in self.host_phase_cycles())
                + self.host_cycles(host_latency))

    def breakdown(self) -> list:
        """``(op, kind, instructions)`` of the chip phases of a step (core 0)."""
        return ops_breakdown(self.cfg, [(p.ops, _gaps(self.cfg, p.ops)) for p in self.chip_parts()])

    def _title(self) -> str:
        return "SGD step"

    def describe(self) -> str:
        cfg = self.cfg
        lines = [f"{self._title()} of {self.mlp.describe()} on {cfg.cores} cores of {cfg.nr}x{cfg.nr} {cfg.fmt} PEs",
                 f"  panel rows per core {self.P}, columns {self.N} (output layer "
                 f"{'split by columns, reduced onto core 0' if self.out_map == 'cols' else 'by row panels'}); "
                 f"weights in bank(s) {', '.join(b.upper() for b in self.wbanks)}; "
                 f"{self.step_cycles()} cycles per step (chip phases "
                 f"{', '.join(str(self.part_cycles(p)) for p in self.chip_parts())}; host phases "
                 f"{', '.join(f'{n} {c}' for n, c in self.host_phase_cycles())}"
                 + (f"; host turnaround {self.host_cycles()}" if self.host_cycles() else "") + ")"
                 + (f"; softmax gradient on the {'array (core 0)' if self.softmax == 'array' else 'host'}"
                    if self.softmax else ""),
                 "", self.alloc.table()]
        if self.reload_words_per_step():
            lines.append(f"warning: the step's programs do not fit the {cfg.ucode_depth}-word microcode together: "
                         f"{self.reload_words_per_step()} words per core are reloaded every step between RUNs, "
                         f"which the step's cycles do not include (a larger ArchConfig.ucode_depth avoids it)")
        for o in self.meta.get("overlap", []):
            lines.append(f"reduce-scatter of W{o['layer']}^T d ({o['ring_slots']} slots) with {o['rows_merged']} of "
                         f"the {o['rows']} local rows of W{o['layer']}'s update in its free slots: "
                         f"{o['instructions']} instructions")
        for l, sp in sorted(self.spad.items()):
            lines.append(f"scratchpad beats {sp.base}..{sp.base + sp.beats(cfg.nr) - 1}: W{l} panel, "
                         f"{len(sp.pages)} page(s) of up to {max(n for _, n in sp.pages) * cfg.nr} rows through WP")
        lines += [""] + breakdown_lines(self.breakdown())
        return "\n".join(lines)

    # -- host programs ------------------------------------------------------------------
    def _place_host(self) -> None:
        """Put the host-phase programs into the microcode image after the chip programs
        when they fit (no reload between phases), else into images of their own."""
        cfg = self.cfg
        phases = ("in", "in_x", "unload") + (("g",) if self.softmax == "host" else ())
        progs = {w: self._host_programs(w, 0) for w in phases}
        sizes = {w: max(len(x) for x in p) for w, p in progs.items()}
        used = max(len(x) for x in self.images[-1])
        self.host_at = {}
        if len(self.images) == 1 and used + sum(sizes.values()) <= cfg.ucode_depth:
            org = used
            for w in phases:
                ws = self._host_programs(w, org)
                for k in range(cfg.cores):
                    self.images[0][k].extend(ws[k] + [0] * (sizes[w] - len(ws[k])))
                self.host_at[w] = (0, org)
                org += sizes[w]
        else:
            for w in phases:
                self.images.append(progs[w])
                self.host_at[w] = (len(self.images) - 1, 0)

    def reload_words_per_step(self) -> int:
        """Microcode words per core loaded during every step: 0 when the step's chip and
        host programs share one image, else at least each image the step uses once (the
        session reloads an image whenever the next RUN needs another; the loading is not
        in the step's cycles)."""
        used = {p.image for p in self.chip_parts()} | {i for i, _ in self.host_at.values()}
        if len(used) <= 1:
            return 0
        return sum(max(len(x) for x in self.images[i]) for i in used)

    def _host_images(self, what: str) -> tuple:
        """``(per-core images, start pc)`` of a host phase."""
        i, org = self.host_at[what]
        return self.images[i], org

    def _host_programs(self, what: str, origin: int) -> list:
        """Per core the program of a host phase at ``origin``: ``in`` (x on core 0, t
        panels on the output cores), ``in_x`` (x only), ``unload`` (z / d panels of the
        output cores), ``g`` (gradient panels)."""
        cfg, R = self.cfg, self.regions
        L = lambda n: local_len(n, cfg.nr)           # noqa: E731
        so = self.P[-1] // cfg.nr
        imgs = []
        for k in range(cfg.cores):
            b = Builder(cfg, origin=origin)
            out = k < self.out_cores
            if what in ("in", "in_x") and k == 0:
                x = R["x"]
                b.text(ring_text(cfg, [f"ar1 = {x.base}", "stride ar1 = 1"]
                                 + [f"hin row | @diag=0 | wr{x.bank} [ar1]++ = row"] * L(self.N[0]), loop="ldx"))
            if what == "in" and out and self.one_run:
                emit_load_vector(b, cfg, R["t"], so, "rows", "ldt")
            if what == "g" and out:
                emit_load_vector(b, cfg, R["g"], so, "rows", "ldg")
            if what == "unload" and out:
                emit_unload_diag(b, cfg, R["z"], so, "ulz")
            b.halt()
            imgs.append(b.build().words())
        return imgs

    def _active(self, what):
        if what == "in_x" or (what == "in" and not self.one_run):
            return [0]
        return list(range(max(self.out_cores, 1 if what == "in" else 0)))

    # -- host data ----------------------------------------------------------------------
    def _vec(self, x, n):
        return vector_bits(self.cfg.fmt, x, n)

    def _panel(self, v, k):
        p = self.P[-1]
        pad = np.zeros(self.cfg.cores * p, dtype=np.uint64)
        pad[:len(v)] = np.asarray(v, dtype=np.uint64)
        return pad[k * p:(k + 1) * p]

    def _run_host(self, session, what, vecs=None, name=""):
        cfg = self.cfg
        so = self.P[-1] // cfg.nr
        data = [[] for _ in range(cfg.cores)]
        for k in self._active(what):
            if what in ("in", "in_x") and k == 0:
                data[k] += vector_beats(cfg, vecs["x"], local_len(self.N[0], cfg.nr))
            if what == "in" and self.one_run and k < self.out_cores:
                data[k] += vector_beats(cfg, self._panel(vecs["t"], k), so)
            if what == "g":
                data[k] += vector_beats(cfg, self._panel(vecs["g"], k), so)
        imgs, org = self._host_images(what)
        return session.run(imgs, data, name, org, active=self._active(what))

    def _run_part(self, session, part: ChipPart, name):
        imgs = [self.images[part.image][k] for k in range(self.cfg.cores)]
        res, cyc = session.run(imgs, None, name, part.origin)
        exp = self.part_cycles(part)
        for k, r in enumerate(res):
            if r.cycles != exp:
                raise AssertionError(f"{name}: core {k} ran {r.cycles} cycles, predicted {exp}")
            c = r.counters
            if c.get("mem_conflict") or c.get("rf_conflict") or c.get("stall_cycles"):
                raise AssertionError(f"{name}: core {k}: {c.get('mem_conflict')} SRAM / {c.get('rf_conflict')} "
                                     f"register write conflicts, {c.get('stall_cycles')} stall cycles")
        return res, cyc

    def _outputs(self, res) -> np.ndarray:
        cfg = self.cfg
        vals = [decode_diag_beats(cfg, res[k].out, self.P[-1]) for k in range(self.out_cores)]
        return np.concatenate(vals)[:self.mlp.n_out]

    # -- steps --------------------------------------------------------------------------
    def run_step(self, session, x, t, *, host_latency: int = HOST_LATENCY_CYCLES) -> ChipStepResult:
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        no = mlp.n_out
        if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(no, t)
        tb = np.asarray(t)
        tf = fmt.to_float(tb) if tb.dtype == fmt.np_uint else tb.astype(np.float64)
        if tf.shape != (no,):
            raise ValueError(f"target must have {no} values, got shape {tf.shape}")
        vecs = {"x": self._vec(x, mlp.n_in)}
        if self.one_run:
            vecs["t"] = self._vec(t, no)
        log = PhaseLog(cfg.cores)
        note = log.note

        note("in", "host", *self._run_host(session, "in", vecs, "step-in"))
        raw = {}
        if self.one_run:
            for part in self.parts["step"]:
                note(part.name, "chip", *self._run_part(session, part, part.name))
            res, cyc = self._run_host(session, "unload", name="step-out")
            what = "d" if mlp.loss == "mse" else "logits"
            note(what, "host", res, cyc)
            raw[what] = self._outputs(res)
            v = fmt.to_float(raw[what])
            loss, out = (mse_loss(v), v + tf) if mlp.loss == "mse" else (softmax_ce_loss(v, tf), v)
        else:
            for part in self.parts["forward"]:
                note(part.name, "chip", *self._run_part(session, part, part.name))
            res, cyc = self._run_host(session, "unload", name="logits")
            note("logits", "host", res, cyc)
            raw["logits"] = self._outputs(res)
            vecs["g"] = host_softmax_grad(fmt, raw["logits"], tf)
            note("g", "host", *self._run_host(session, "g", vecs, "g"))
            for part in self.parts["backward"]:
                note(part.name, "chip", *self._run_part(session, part, part.name))
            z = fmt.to_float(raw["logits"])
            loss, out = softmax_ce_loss(z, tf), z
        return log.result(loss, out, self.host_cycles(host_latency), raw)

    def predict(self, session, x) -> np.ndarray:
        self._run_host(session, "in_x", {"x": self._vec(x, self.mlp.n_in)}, "predict-in")
        for part in self.parts["predict"]:
            self._run_part(session, part, part.name)
        res, _ = self._run_host(session, "unload", name="predict-out")
        return self.cfg.fmt.to_float(self._outputs(res))

    # -- weights ------------------------------------------------------------------------
    def init(self, session, weights) -> None:
        """Load the weights (per core its panels) and the scalars: host phases."""
        cfg, nr, fmt = self.cfg, self.cfg.nr, self.cfg.fmt
        per = self.core_weights(weights)
        scal = {"nlr": self.neg_lr}
        if self.mlp.loss == "mse":
            scal["m1"] = int(fmt.from_float(np.array([-1.0]))[0])
        if "one" in self.regions:                      # the paged W^T d's accumulation
            scal["one"] = int(fmt.from_float(np.array([1.0]))[0])
        smx = softmax_const_items(cfg, self.regions, self.mlp.n_out) if self.softmax == "array" else []
        items = [[(self.regions[f"W{l}"], pack_matrix(per[k][l], nr)) for l in range(self.mlp.n_layers)
                  if l not in self.spad]
                 + [(self.regions[n], np.full((nr, nr, 1), v, dtype=fmt.np_uint)) for n, v in scal.items()]
                 + (smx if k == 0 else [])
                 for k in range(cfg.cores)]
        load_per_core(session, cfg, items, "init")
        for l, sp in self.spad.items():
            b = Builder(cfg)
            emit_spad_fill(b, cfg, sp.base, sp.beats(nr))
            b.halt()
            img = b.build().words()
            session.run([img] * cfg.cores, [spad_image(cfg, sp, pack_matrix(per[k][l], nr)) for k in range(cfg.cores)],
                        f"init-spad-W{l}")

    def unload_weights_phases(self) -> list:
        """Host phases unloading every weight panel: per layer ``(images, name)`` (one
        image per core); decode the phases' results with :meth:`decode_weights`."""
        cfg = self.cfg
        out = []
        for l in range(self.mlp.n_layers):
            b = Builder(cfg)
            if l in self.spad:
                emit_spad_drain(b, cfg, self.spad[l].base, self.spad[l].beats(cfg.nr))
            else:
                reg, n = self.regions[f"W{l}"], self.alloc.items[f"W{l}"].words
                emit_unload(b, cfg, reg.bank, reg.base, n, loop="uw")
            b.halt()
            out.append(([b.build().words()] * cfg.cores, f"unload-W{l}"))
        return out

    def decode_weights(self, results, padded: bool = False) -> list:
        """Global weights from the per-core results (objects with ``.data``: the output
        beats) of each :meth:`unload_weights_phases` phase."""
        cfg, c = self.cfg, self.cfg.cores

        def local(l, res):
            if l in self.spad:
                return spad_local(cfg, self.spad[l], [x.data if hasattr(x, "data") else int(x) for x in res.data])
            return decode_unload(cfg, res.data, self.alloc.items[f"W{l}"].words)
        return [self.join_panels(l, [unpack_matrix(local(l, per_core[k]), self.P[l], self.N[l]) for k in range(c)],
                                 padded)
                for l, per_core in enumerate(results)]

    def weights_from_session(self, session, padded: bool = False) -> list:
        """The global weights as they are in the cores' memories (bit patterns;
        ``padded``: the cores' padded panels together, padding included)."""
        out = []
        for l in range(self.mlp.n_layers):
            if l in self.spad:
                sp = self.spad[l]
                local = [spad_local(self.cfg, sp, session.scratchpad(k, sp.base, sp.beats(self.cfg.nr)))
                         for k in range(self.cfg.cores)]
            else:
                reg, words = self.regions[f"W{l}"], self.alloc.items[f"W{l}"].words
                local = [session.memory(k, reg.bank)[:, :, reg.base:reg.base + words] for k in range(self.cfg.cores)]
            out.append(self.join_panels(l, [unpack_matrix(x, self.P[l], self.N[l]) for x in local], padded))
        return out


def _check(cfg, mlp, P, N):
    c, nr = cfg.cores, cfg.nr
    if c < 2:
        raise TrainCompileError(f"SGD across cores needs a chip (cfg.cores >= 2), got cores={c}; use "
                                f"sw.train.compile_sgd for one core")
    if nr < 2:
        raise TrainCompileError(f"the kernels need nr >= 2, got nr = {nr}")
    if mlp.batch != 1:
        raise TrainCompileError(f"SGD across cores is batch 1, got MLP.batch = {mlp.batch}")
    lim = (1 << cfg.loop_bits) - 1
    for n in N:
        if local_len(n, nr) + 3 >= lim:
            raise TrainCompileError(f"a {n}-wide layer input exceeds the loop trip-count range ({lim})")


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


def plan_chip_sgd(cfg, mlp: MLP, P: list, N: list, out_map: str, softmax: str | None, fused: list, spad=None,
                  page_rows: int | None = None) -> tuple:
    """Where the weight panels of an SGD step live: ``(wbanks, allocator, {layer:
    SpadPanel})`` (:func:`plan_panels` with :func:`_allocate`; every layer but an output
    layer split by columns can be paged). Raises :class:`sw.train.TrainCompileError` with
    the sizes when nothing fits."""
    nl = mlp.n_layers
    pageable = [l for l in range(nl) if not (out_map == "cols" and l == nl - 1)]

    def fail(al):
        L = lambda n: local_len(n, cfg.nr)           # noqa: E731
        wsz = ", ".join(f"W{l} panel {P[l]}x{N[l]}: {L(P[l]) * L(N[l])}" for l in range(nl))
        return (f"MLP {'-'.join(map(str, mlp.sizes))} does not fit {cfg.cores} cores of {cfg.nr}x{cfg.nr} PEs: each "
                f"core needs {al.used('a') + al.used('b')} words per PE (MEM A {al.used('a')}, MEM B "
                f"{al.used('b')}; weights per PE: {wsz}), a PE has MEM A {cfg.mem_a_words} + MEM B "
                f"{cfg.mem_b_words} words of {cfg.fmt}; no assignment of the weight panels to the banks fits, " + (
                    f"nor with the largest panels paged from the {cfg.spad_depth}-beat scratchpad (all row panels "
                    f"need {sum(cfg.nr * L(P[l]) * L(N[l]) for l in pageable)} beats, and the rest must fit with a "
                    f"page buffer)" if cfg.spad_kib else "and there is no scratchpad (cfg.spad_kib = 0)"))
    return plan_panels(cfg, P, N, lambda wb, pages: _allocate(cfg, mlp, wb, P, N, out_map, softmax, fused, pages),
                       pageable, spad, page_rows, fail)


def compile_chip_sgd(cfg, mlp: MLP, out_map: str = "auto", softmax: str = "auto",
                     backward: str = "auto", overlap: bool = True, spad=None,
                     page_rows: int | None = None) -> ChipSGDProgram:
    """Compile batch-1 SGD of ``mlp`` across the ``cfg.cores`` cores (row panels of every
    layer per core, the output layer by rows or columns, :func:`resolve_out_map`; see the
    module docstring). The weight panels go to bank A when everything fits so, else to
    the first assignment of panels to banks that fits. ``softmax`` (``softmax_ce``):
    :func:`sw.train.resolve_softmax`; on the array it needs the logits on one core
    (``out_map="cols"``), else ``"auto"`` keeps it on the host. ``backward``: per layer
    ``l >= 1``, the fused backward step or the separate kernels
    (:func:`sw.train.backward_plan` on the panel shapes; recorded in
    :attr:`ChipSGDProgram.fused`). ``overlap``: run the first rows of each separate
    rank-1 update in the free slots of the reduce-scatter before it
    (:func:`_rs_with_rank1`; the same operations, so the same bits; recorded in
    ``meta["overlap"]``). When no assignment of the panels to the banks fits, the largest
    panels are kept in the scratchpad and paged (:func:`plan_chip_sgd`; ``spad`` /
    ``page_rows`` force it): each weight of a paged panel crosses the scratchpad port
    three times per step (loaded for the forward pass, loaded and stored for the
    backward pass).

    Raises :class:`sw.train.TrainCompileError` when the panels do not fit the PE memories
    and the scratchpad (with the sizes), a program does not fit the microcode, ``-lr`` is not
    representable, or a panel is too tall for the register reduce-scatter."""
    if not isinstance(mlp, MLP):
        raise TypeError(f"mlp must be an sw.mlp.MLP, got {type(mlp).__name__}")
    c = cfg.cores
    if c >= 2:
        out_map = resolve_out_map(cfg, mlp, out_map)
    P, N = chip_shapes(cfg, mlp, out_map)
    _check(cfg, mlp, P, N)
    smx = resolve_softmax(cfg, mlp, softmax, why_not=softmax_why_not(out_map))
    fused = backward_plan(cfg, mlp, backward, shapes=list(zip(P, N)))
    fmt = cfg.fmt
    nlr = fmt.from_float(np.array([-mlp.lr]))[0]
    v = float(fmt.to_float(np.array([nlr]))[0])
    if v == 0.0 or not np.isfinite(v):
        raise TrainCompileError(f"learning rate {mlp.lr:g} is {'zero' if v == 0 else 'not finite'} in {fmt}")
    wbanks, al, panels = plan_chip_sgd(cfg, mlp, P, N, out_map, smx, fused, spad, page_rows)
    pol = "a" if set(wbanks) == {"a"} else "search"
    parts_ops = {}
    if mlp.loss == "mse" or smx == "array":
        parts_ops["step"] = [_chip_ops(cfg, mlp, al, P, N, k, "step", out_map, smx, fused, overlap, panels)
                             for k in range(c)]
    else:
        parts_ops["forward"] = [_chip_ops(cfg, mlp, al, P, N, k, "forward", out_map, spad=panels) for k in range(c)]
        parts_ops["backward"] = [_chip_ops(cfg, mlp, al, P, N, k, "backward", out_map, fused=fused,
                                           overlap=overlap, spad=panels) for k in range(c)]
    parts_ops["predict"] = [_chip_ops(cfg, mlp, al, P, N, k, "forward", out_map, spad=panels) for k in range(c)]
    parts, images = _place_parts(cfg, parts_ops)
    tp = ChipSGDProgram(cfg, mlp, wbanks, al, P, N, parts, images, int(nlr),
                        {"lr_stored": -v, "policy": pol, "out_map": out_map,
                         "overlap": [op.info for ops in parts_ops.values() for op in ops[0] if op.info],
                         "spad_layers": sorted(panels), "pages": {l: len(sp.pages) for l, sp in panels.items()}},
                        out_map=out_map, softmax=smx, fused=fused, spad=panels)
    tp._place_host()
    return tp


def softmax_why_not(out_map: str) -> str | None:
    """Why a chip step cannot compute the softmax on the array with this output mapping."""
    if out_map != "cols":
        return "the logits are spread over the cores (output layer by rows); the kernel needs them on one core"
    return None
