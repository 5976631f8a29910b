"""The per-core builders of a batch-1 CP step: a core's regions (:func:`_allocate`), its
head and tail ops, the chains between the groups (:func:`chain_streams`, shared with
minibatch CP), the host programs, and :class:`Kit`, which bundles one CP flavour's
builders."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sw.asm import Builder
from sw.chain import Hop, Stream
from sw.collectives import Region
from sw.kernels import Scalar, emit_axpy, emit_copy, emit_gemv, emit_rank1, emit_relu, emit_relu_mask
from sw.layout import local_len
from sw.mlp import MLP
from sw.ring import ring_text
from sw.train import _gaps
from sw.train_alloc import Allocator
from sw.train_chip_ops import _at, fused_backward_op, page_sum_op
from sw.train_host import TrainCompileError
from sw.train_ops import Op
from sw.train_paging import page_swap_op, spad_op, spad_vector_op, swap_next
from sw.train_softmax import alloc_softmax, softmax_op
from sw.train_cp_map import cp_core_layers, cp_stage_of
from sw.train_vectors import emit_load_vector, emit_unload_diag

__all__ = ["Kit", "chain_streams", "rname", "shared_of"]


def rname(al, l, name: str) -> str:
    """The name of layer ``l``'s region ``name`` in a core's allocator: as is, but for
    the layers after the first on a core of several (``al.meta["layers"]``), ``name@l``."""
    layers = al.meta.get("layers")
    return name if not layers or l is None or l == layers[0] else f"{name}@{l}"


def shared_of(allocs) -> tuple:
    """The layers on the core of the layer before, from the cores' allocators."""
    return tuple(sorted(l for al in allocs for l in al.meta.get("layers", ())[1:]))


def _allocate(cfg, mlp: MLP, P: list, N: list, stage, V: int, softmax, fused: bool = False,
              page: int | None = None, hist: int = -1, res: int = 0, resb: int = 0, into=None,
              copy_in: bool = False) -> Allocator:
    """The regions of a core of ``stage`` (``fused``: its layer's backward step is the
    fused kernel, which writes ``e`` while ``W``'s bank takes the updates: ``e`` in the
    other bank, and no rows copy of ``din``). ``page``: the panel is kept in the
    scratchpad and moved through a page buffer ``WP`` of ``page`` local rows; a layer
    ``l >= 1`` with several pages sums its ``W^T d`` through ``ep`` and the scalar 1.
    ``hist >= 0``: the input history is in the scratchpad from beat ``hist``
    (``al.meta["hist_spad"]``), not in the PE memories. ``res``: local rows of the paged
    panel kept resident (``WR``, before the paged rows); ``resb``: the local rows after
    those kept resident in bank B (``WB``), whose kernels read copies of the input, the
    history's next input and ``din`` in bank A (``ainA``, ``vnA``, ``dinA``; the GEMV and
    the update read them in the cycles that read ``W``, so never from ``W``'s bank; the
    fused backward step reads ``vnext`` from either bank, so it has no ``vnA``) and
    write their part of ``W^T din`` into ``epA`` (and the separate step's rows copy of
    ``din`` into ``dcA``). ``into``: allocate into this allocator (a core of several
    layers, :mod:`sw.train_cp_shared`); ``copy_in``: ``ain`` is the broadcast copy of a
    GEMV reading the previous layer's ``z`` on the same core (one word more)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    al = Allocator(cfg) if into is None else into
    if stage is None:
        return al
    l, i = stage
    nl = mlp.n_layers
    s = P[l] // cfg.nr
    if page is None:
        al.alloc("W", L(P[l]) * L(N[l]), f"row panel {i} of W{l} ({P[l]} x {N[l]})", bank="a")
    else:
        if res:
            al.alloc("WR", res * L(N[l]), f"the first {res * cfg.nr} rows of row panel {i} of W{l}, resident" + (
                     " (the other rows paged)" if page else ""), bank="a")
        if page:
            al.alloc("WP", page * L(N[l]), f"page buffer of row panel {i} of W{l} ({P[l]} x {N[l]}, in the scratchpad; "
                     f"{page * cfg.nr} rows per page)", bank="a")
        if resb:
            al.alloc("WB", resb * L(N[l]), f"the next {resb * cfg.nr} rows of row panel {i} of W{l}, resident in "
                     f"bank B", bank="b")
            al.alloc("ainA", L(N[l]), f"a{l}: copy of ain for the rows in bank B (cols)", bank="a")
            if l == 0 or not fused:          # the fused kernel reads vnext from either bank
                al.alloc("vnA", L(N[l]), f"a{l}: copy of vnext for the rows in bank B (cols)", bank="a")
            al.alloc("dinA", s, "copy of din for the rows in bank B (diag)", bank="a")
            if l >= 1:
                al.alloc("epA", L(N[l]), f"W{l}^T din partial of the rows in bank B (cols)", bank="a")
                if not fused:
                    al.alloc("dcA", s + 1, "rows copy of dinA (transposed-GEMV broadcast)", bank="a")
    al.alloc("ain", L(N[l]) + copy_in, f"a{l}: the forward input (cols, " + (
        f"the GEMV's copy of z of layer {l - 1} on this core)" if copy_in else "written by the chains)"), bank="b")
    if l == nl - 1:
        al.alloc("z", s, "logits z (rows); MSE: d = z - t in place", bank="b")
        if mlp.loss == "mse":
            al.alloc("t", s, "target (rows, loaded per step)", bank="a")
            al.alloc("m1", 1, "scalar -1 (every PE)", bank="a")
        elif softmax == "array":
            alloc_softmax(al, cfg, mlp.n_out, s, {"a"}, "rows", "rows, loaded per step")
        al.alloc("e", L(N[l]), f"W{l}^T d, then masked by relu'(ain) (cols; diag sent)", bank="b" if fused else "a")
    else:
        if hist >= 0:
            al.meta["hist_spad"] = hist
        else:
            al.alloc("hist", V * L(N[l]), f"a{l} of the last {V} samples (cols; in A when it fits: the chains "
                     f"store the input there too)", prefer="a")
        al.alloc("vnext", L(N[l]), f"a{l} of the sample whose backward pass is next (cols; rank-1 v, mask)",
                 bank="b")
        al.alloc("z", s, f"z = W ain, relu in place: this core's slice of a{l + 1} (rows; diag sent)", bank="b")
        al.alloc("din", s, f"this core's slice of d{l} (diag, written by the chains)", bank="b")
        if l >= 1:
            if not fused:
                al.alloc("dc", s + 1, "rows copy of din (transposed-GEMV broadcast)", bank="b")
            al.alloc("e", L(N[l]), f"W{l}^T din partial, masked in place (cols; diag sent)",
                     bank="b" if fused else "a")
        if l == 0 and i == 0:
            al.alloc("xin", L(N[0]), "the next input sample (cols, loaded by the host)", bank="b")
        if page is not None and l >= 1 and (L(P[l]) > page or res or resb):
            al.alloc("ep", L(N[l]), f"W{l}^T din partial of one page (cols), added to e page by page", bank="b")
            al.alloc("one", 1, "scalar 1 (every PE)", bank="b")
    al.alloc("nlr", 1, "scalar -lr (every PE)", bank="b")
    return al


# ======================================================================================
# ops
# ======================================================================================
def _kern(name, kind, fn, reads, writes, fma_wb=False):
    return Op(name, kind, lambda b, fn=fn: fn(b).instructions, reads=reads, writes=writes, fma_wb=fma_wb,
              stores=not fma_wb)


def _head_ops(cfg, mlp, al, P, N, stage, softmax, fused: bool = False, sp=None) -> list:
    """The head's ops of a core (``sp``: its panel's :class:`sw.train_chip.SpadPanel`
    when it is paged from the scratchpad, :func:`_paged_head`)."""
    if stage is None:
        return []
    if sp is not None:
        return _paged_head(cfg, mlp, al, P, N, stage, fused, sp)
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    l, _ = stage
    nl = mlp.n_layers
    R = {k: v.region for k, v in al.items.items()}
    s, nw, wn = P[l] // cfg.nr, L(N[l]), L(P[l]) * L(N[l])
    W, ain, z = R["W"], R["ain"], R["z"]
    ops = [_kern("gemv", "gemv", lambda b: emit_gemv(b, cfg, P[l], N[l], W, ain, z, name="fw_"),
                 [(W, wn), (ain, nw)], [(z, s)])]
    if l < nl - 1:
        din, vn = R["din"], R["vnext"]
        ops.append(_kern("relu", "relu", lambda b: emit_relu(b, cfg, s, z, z, name="re_"), [(z, s)], [(z, s)]))
        if l == 0:
            return ops + _mask_update(cfg, R, P, N, l, din, "diag", vn)
        if fused:
            return ops + _fused_backward(cfg, R, P, N, l, din, "diag", vn)
        dc, e = R["dc"], R["e"]
        ops.append(_kern("gemv_t", "gemv_t", lambda b: emit_gemv(b, cfg, P[l], N[l], W, din, e, trans=True,
                                                                 x_layout="diag", x_copy=dc, name="bw_"),
                         [(W, wn), (din, s)], [(e, nw), (dc, s + 1)]))
        return ops + _mask_update(cfg, R, P, N, l, din, "diag", vn, e)
    if mlp.loss == "mse":
        m1 = Scalar(R["m1"].bank, R["m1"].base)
        ops.append(_kern("loss_grad", "axpy", lambda b: emit_axpy(b, cfg, s, m1, R["t"], z, name="lg_"),
                         [(R["t"], s), (z, s), (R["m1"], 1)], [(z, s)], fma_wb=True))
        d = z
    elif softmax == "array":
        ops.append(softmax_op(cfg, R, al, mlp.n_out, z, z_layout="rows"))
        d = R["g"]
    else:                                               # pragma: no cover - resolve_softmax never gives "host" here
        raise TrainCompileError("continuous propagation computes the softmax on the array")
    if fused:
        return ops + _fused_backward(cfg, R, P, N, l, d, "rows", ain)
    e = R["e"]
    ops.append(_kern("gemv_t", "gemv_t", lambda b: emit_gemv(b, cfg, P[l], N[l], W, d, e, trans=True, name="bw_"),
                     [(W, wn), (d, s)], [(e, nw)]))
    return ops + _mask_update(cfg, R, P, N, l, d, "rows", ain, e)


def _paged_head(cfg, mlp, al, P, N, stage, fused: bool, sp) -> list:
    """The head of a hidden layer's core whose panel is in the scratchpad, page by page
    (first to last): load the page into ``WP``; its rows of ``z = W ain``; ``l >= 1``:
    its part of ``e = W^T din`` (old weights; the first page into ``e``, the others into
    ``ep``, added by an axpy with 1); its rows of the update ``W += -lr din vnext^T``
    (fused: with ``W^T din`` in one pass); store it back. Then the ReLU of ``z`` and the
    mask of ``e``. The same operations on every row as :func:`_head_ops`, whose kernels
    work row by row but for ``W^T din``'s sum. With ``sp.hide`` the pages come first,
    their moves inside the resident rows' forward GEMV (:mod:`sw.train_cp_hide`)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    nr = cfg.nr
    l, _ = stage
    if l == mlp.n_layers - 1:                           # pragma: no cover - the planner never pages it
        raise TrainCompileError("the output layer's core is not paged")
    R = {k: v.region for k, v in al.items.items()}
    s, nw = P[l] // nr, L(N[l])
    ain, z, din, vn = R["ain"], R["z"], R["din"], R["vnext"]
    ops = []
    # (buffer, first row, rows, page or None, in bank B): the resident rows first, without moves
    parts = (([(R["WR"], 0, sp.res, None, False)] if sp.res else [])
             + ([(R["WB"], sp.res, sp.resb, None, True)] if sp.resb else [])
             + [(R["WP"], r0 + sp.lead, n, q, False) for q, (r0, n) in enumerate(sp.pages)])
    if sp.resb:                          # the rows in bank B read copies of the vectors in bank A
        if not sp.res:                   # pragma: no cover - the planner fills bank A first
            raise TrainCompileError("rows resident in bank B need rows resident in bank A before them")
        copies = [("cp_ain", ain, R["ainA"], nw), ("cp_din", din, R["dinA"], s)]
        for name, src, dst, n in copies + ([("cp_vn", vn, R["vnA"], nw)] if "vnA" in R else []):
            ops.append(_kern(name, "copy", lambda b, src=src, dst=dst, n=n, name=name:
                             emit_copy(b, cfg, n, src, dst, name=f"{name}_"), [(src, n)], [(dst, n)]))
    if sp.hide:
        from sw.train_cp_hide import hidden_pages_head
        ops += hidden_pages_head(cfg, R, N[l], sp, parts,
                                 lambda p, part, **kw: _part_ops(cfg, R, P, N, l, fused, sp, p, part, **kw))
    else:
        swaps = {} if l >= 1 and fused else swap_next(cfg, sp)
        for p, part in enumerate(parts):
            ops += _part_ops(cfg, R, P, N, l, fused, sp, p, part, swaps=swaps)
    ops.append(_kern("relu", "relu", lambda b: emit_relu(b, cfg, s, z, z, name="re_"), [(z, s)], [(z, s)]))
    if l >= 1:
        e = R["e"]
        ops.append(_kern("mask", "relu_mask", lambda b: emit_relu_mask(b, cfg, nw, e, vn, e, layout="diag",
                                                                        name="mk_"),
                         [(e, nw), (vn, nw)], [(e, nw)]))
    return ops


def _part_ops(cfg, R, P, N, l, fused: bool, sp, p: int, part: tuple, forward: bool = True,
              moves: bool = True, swaps: dict | None = None) -> list:
    """The ops of part ``p`` of a paged head (:func:`_paged_head`; ``part = (buffer,
    first local row, local rows, page or None, in bank B)``): a page's load, its rows of
    ``z = W ain`` (``forward``), its part of ``e = W^T din`` (``l >= 1``; part 0 into
    ``e``, the others into ``ep``, added by an axpy with 1), its rows of the update, a
    page's store (``moves``: the load and the store). Pages in alternating bus orders
    (``sp.order == "alt"``, a separate update) store the updated page as the update
    computes it, and the pages in ``swaps`` (:func:`sw.train_paging.swap_next`) load the
    next page in its place (:func:`sw.train_paging.rank1_swap_op`; that page then has no
    load of its own)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    nr = cfg.nr
    nw = L(N[l])
    WP, r0, n, q, alt = part
    ain, vn, din = (R["ainA"], R.get("vnA", R["vnext"]), R["dinA"]) if alt else (R["ain"], R["vnext"], R["din"])
    w, zp, dp = n * nw, _at(R["z"], r0), _at(din, r0)
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    ops = []
    swap = (None if q is None or not moves or swaps is None or (l >= 1 and fused) else
            page_swap_op(cfg, f"rs_{p}", sp, q, swaps, N[l], WP, dp, vn, R["nlr"]))
    if q is not None and moves and not (swaps and q - 1 in swaps):      # else the page before loaded it
        ops.append(spad_op(cfg, f"ld_{p}", False, WP, w, sp.page_addr(nr, q), sp.page_order(q)))
    if forward:
        ops.append(_kern(f"gemv_{p}", "gemv", lambda b: emit_gemv(b, cfg, n * nr, N[l], WP, ain, zp, name=f"fw{p}_"),
                         [(WP, w), (ain, nw)], [(zp, n)]))
    if l >= 1:
        e = R["e"] if p == 0 else (R["epA"] if alt else R["ep"])
        if fused:
            ops.append(fused_backward_op(cfg, f"bwup_{p}", n * nr, N[l], WP, dp, vn, e, R["nlr"], "diag", f"bu{p}_"))
        else:
            dc = _at(R["dcA"], r0) if alt else _at(R["dc"], r0)
            ops.append(_kern(f"gemv_t_{p}", "gemv_t", lambda b: emit_gemv(
                b, cfg, n * nr, N[l], WP, dp, e, trans=True, x_layout="diag", x_copy=dc, name=f"bw{p}_"),
                [(WP, w), (dp, n)], [(e, nw), (dc, n + 1)]))
        if p:
            ops.append(page_sum_op(cfg, f"acc_{p}", nw, R["epA"] if alt else R["ep"], R["e"], R["one"], f"ac{p}_"))
    if swap:
        return ops + [swap]
    if not (l >= 1 and fused):
        ops.append(_kern(f"rank1_{p}", "rank1", lambda b: emit_rank1(b, cfg, n * nr, N[l], WP, dp, vn, alpha=nlr,
                                                                     u_layout="diag", v_layout="cols",
                                                                     name=f"up{p}_"),
                         [(WP, w), (dp, n), (vn, nw), (R["nlr"], 1)], [(WP, w)], fma_wb=True))
    if q is not None and moves:
        ops.append(spad_op(cfg, f"st_{p}", True, WP, w, sp.page_addr(nr, q), sp.page_order(q)))
    return ops


def _fused_backward(cfg, R, P, N, l, d, d_layout, v) -> list:
    """``e = W^T d`` (old ``W``) and ``W += d (-lr v)^T`` in one pass
    (:func:`sw.train_chip.fused_backward_op`, which states its hazards), then
    ``e *= relu'(v)`` (diag)."""
    nw, e = local_len(N[l], cfg.nr), R["e"]
    return [fused_backward_op(cfg, "bwup", P[l], N[l], R["W"], d, v, e, R["nlr"], d_layout, "bu_"),
            _kern("mask", "relu_mask", lambda b: emit_relu_mask(b, cfg, nw, e, v, e, layout="diag", name="mk_"),
                  [(e, nw), (v, nw)], [(e, nw)])]


def _mask_update(cfg, R, P, N, l, d, u_layout, v, e=None) -> list:
    """``e *= relu'(v)`` (diag; when ``e`` is given) and ``W += -lr d v^T`` (``d`` in
    ``u_layout``, ``v`` the layer's input, cols)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    W, nlr = R["W"], Scalar(R["nlr"].bank, R["nlr"].base)
    s, nw, wn = P[l] // cfg.nr, L(N[l]), L(P[l]) * L(N[l])
    ops = []
    if e is not None:
        ops.append(_kern("mask", "relu_mask", lambda b: emit_relu_mask(b, cfg, nw, e, v, e, layout="diag",
                                                                        name="mk_"),
                         [(e, nw), (v, nw)], [(e, nw)]))
    ops.append(_kern("rank1", "rank1", lambda b: emit_rank1(b, cfg, P[l], N[l], W, d, v, alpha=nlr, u_layout=u_layout,
                                                            v_layout="cols", name="up_"),
                     [(W, wn), (d, s), (v, nw), (R["nlr"], 1)], [(W, wn)], fma_wb=True))
    return ops


def _dual(cfg, al, stage, groups) -> bool:
    """Whether the chains that deliver this core's next input also store it into the
    history slot (second write port: the history in the other bank than ``ain``, and
    ``ar3``), so that the tail needs no copy ``ain -> hist``."""
    if stage is None or "hist" not in al.items or cfg.n_ar < 4:
        return False
    l, _ = stage
    chained = l >= 1 or groups[0] > 1                # core 0 alone in G_0 copies xin -> ain in its tail
    return chained and al.items["hist"].region.bank != al.items["ain"].region.bank


def _tail_ops(cfg, mlp, al, P, N, stage, j: int, V: int, groups: list, dual: bool = False) -> list:
    """The variant-``j`` ops before the chains (``dual``: the chains store the input into
    the history too, :func:`_dual`)."""
    if stage is None:
        return []
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    l, i = stage
    nl = mlp.n_layers
    if l == nl - 1:
        return []
    R = {k: v.region for k, v in al.items.items()}
    nw = L(N[l])
    D = 2 * (nl - 1 - l)
    take_x = [_kern("take_x", "copy", lambda b: emit_copy(b, cfg, nw, R["xin"], R["ain"], name="cx_"),
                    [(R["xin"], nw)], [(R["ain"], nw)])] if l == 0 and "xin" in R and groups[0] == 1 else []
    if "hist_spad" in al.meta:                 # the history in the scratchpad: a store and a load
        h = al.meta["hist_spad"]
        return [spad_vector_op(cfg, "keep_a", True, R["ain"], nw, h + (j % V) * nw),
                spad_vector_op(cfg, "next_a", False, R["vnext"], nw, h + ((j + 1 - D) % V) * nw)] + take_x
    ain, hist, vn = R["ain"], R["hist"], R["vnext"]
    hf = Region(hist.bank, hist.base + (j % V) * nw)
    hn = Region(hist.bank, hist.base + ((j + 1 - D) % V) * nw)
    keep = [] if dual and _dual(cfg, al, stage, groups) else [
        _kern("keep_a", "copy", lambda b: emit_copy(b, cfg, nw, ain, hf, name="cp_"), [(ain, nw)], [(hf, nw)])]
    return keep + [_kern("next_a", "copy", lambda b: emit_copy(b, cfg, nw, hn, vn, name="cn_"),
                         [(hn, nw)], [(vn, nw)])] + take_x


def chain_streams(cfg, mlp, allocs, groups, *, x_m: int, seg_m, d_m, scatter, din: str, layout: str = "cols",
                  din_layout: str = "diag", ain2=None, shared=()) -> list:
    """The chains of a step (:mod:`sw.chain`), for both CP flavours: ``x_m`` beats of
    the input from core 0 through ``G_0`` (``xin`` -> every ``ain``); per layer ``l``, a
    gather of ``seg_m(l)`` beats per core of ``G_l`` (``z``) into every ``ain`` of
    ``G_{l+1}``, and ``d_m(l)`` beats of ``e`` reduced over ``G_{l+1}`` (ring order), round
    the ring, scattered into ``G_l`` (``scatter(l, i)``: the roles of core ``i`` there,
    stored at ``din``). ``layout``: of the hops (``"mat"`` for matrix words), ``din_layout``:
    of the scatter's stores. ``ain2(k)``: a second ``(bank, base)`` core ``k`` stores its
    input into (or None). ``shared``: layers on the core of the layer before
    (:mod:`sw.train_cp_shared`): no chains into them nor out of them to that layer."""
    c, nl = cfg.cores, mlp.n_layers
    ain2 = ain2 or (lambda k: None)
    cl = cp_core_layers(groups, c, shared)
    first = [next(k for k, sts in enumerate(cl) if (l, 0) in sts) for l in range(nl)]

    def rb(k, name, l=None):
        r = allocs[k].items[rname(allocs[k], l, name)].region
        return r.bank, r.base
    out = []
    if groups[0] > 1:
        hops = [Hop(0, ("send_keep",) * x_m, src=rb(0, "xin"), dst=rb(0, "ain"), layout=layout, dst2=ain2(0))]
        for i in range(1, groups[0]):
            k = first[0] + i
            hops.append(Hop(k, ("keep_relay" if i < groups[0] - 1 else "keep",) * x_m, dst=rb(k, "ain"),
                            layout=layout, dst2=ain2(k)))
        out.append(Stream("x", x_m, tuple(hops)))
    for l in range(nl - 1):
        if l + 1 in shared:
            continue
        g, gn, seg = groups[l], groups[l + 1], seg_m(l)
        m = g * seg
        # forward: gather a_{l+1} through G_l, into every core of G_{l+1}
        hops = []
        for i in range(g):
            k = first[l] + i
            roles = ("relay",) * (i * seg) + ("send",) * seg + (None,) * (m - (i + 1) * seg)
            hops.append(Hop(k, roles, src=rb(k, "z", l), layout=layout))
        for i in range(gn):
            k = first[l + 1] + i
            hops.append(Hop(k, ("keep_relay" if i < gn - 1 else "keep",) * m, dst=rb(k, "ain"), layout=layout,
                            dst2=ain2(k)))
        out.append(Stream(f"a{l + 1}", m, tuple(hops)))
        # backward: reduce d_l over G_{l+1}, round the ring, scatter into G_l
        m = d_m(l)
        hops = [Hop(first[l + 1] + i, ("send" if i == 0 else "add",) * m, src=rb(first[l + 1] + i, "e"),
                    layout=layout) for i in range(gn)]
        k = (first[l + 1] + gn) % c
        while k != first[l]:
            hops.append(Hop(k, ("relay",) * m, layout=layout))
            k = (k + 1) % c
        for i in range(g):
            hops.append(Hop(first[l] + i, tuple(scatter(l, i)), dst=rb(first[l] + i, din, l), layout=din_layout))
        out.append(Stream(f"d{l}", m, tuple(hops)))
    return out


def _streams(cfg, mlp, allocs, P, N, groups, j: int | None = None) -> list:
    """The chains of a step: vectors, one word per beat; each core of ``G_l`` keeps its
    slice of ``d_l`` (diag) and relays the rest. ``j``: tail variant ``j``'s chains, which
    also store each core's next input into its history slot ``(j + 1) mod V`` where
    :func:`_dual` allows (None: no second store)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    shared = shared_of(allocs)
    stages = cp_stage_of(groups, cfg.cores, shared)
    V = 2 * (mlp.n_layers - 1)

    def ain2(k):
        if j is None or not _dual(cfg, allocs[k], stages[k], groups):
            return None
        h = allocs[k].items["hist"].region
        return h.bank, h.base + ((j + 1) % V) * L(N[stages[k][0]])
    sl = lambda l: P[l] // cfg.nr                      # noqa: E731

    def scatter(l, i):
        s, m = sl(l), groups[l] * sl(l)
        roles = (None,) * (i * s) + ("keep",) * s + (("relay",) * (m - (i + 1) * s) if i < groups[l] - 1 else ())
        return roles + (None,) * (m - len(roles))

    return chain_streams(cfg, mlp, allocs, groups, x_m=L(N[0]), seg_m=sl, d_m=lambda l: groups[l] * sl(l),
                         scatter=scatter, din="din", ain2=ain2, shared=shared)


def _ring_rw(cfg, mlp, al, P, N, stage) -> tuple:
    """``(reads, writes)`` of the chains on a core (for the gaps before them), both CP
    flavours: they read ``z`` (hidden layers), ``e``, ``xin`` and write ``ain``, ``din`` /
    ``dint`` and (batch 1) the history, whole regions."""
    if stage is None:
        return [], []
    it = al.items
    words = lambda n: (it[n].region, it[n].words)      # noqa: E731
    reads = [words(n) for n in ("z", "e", "xin") if n in it and (n != "z" or stage[0] < mlp.n_layers - 1)]
    writes = [words(n) for n in ("ain", "din", "dint", "hist") if n in it]
    return reads, writes


def _host_programs(cfg, allocs, P, N, out_core: int, what: str, origin: int) -> list:
    """Per core the program of a host phase at ``origin``: ``in`` (``x`` into core 0's
    ``xin``, the target into the output core), ``out`` (the output core's ``z``)."""
    imgs = []
    for k in range(cfg.cores):
        b = Builder(cfg, origin=origin)
        R = {n: v.region for n, v in allocs[k].items.items()}
        if k == out_core:                   # the output layer's regions (the last layer of its core)
            R |= {n: R[rname(allocs[k], len(P) - 1, n)] for n in ("t", "z") if rname(allocs[k], len(P) - 1, n) in R}
        if what == "in" and k == 0:
            emit_load_vector(b, cfg, R["xin"], local_len(N[0], cfg.nr), "cols", "ldx")
        if what == "in" and k == out_core and "t" in R:
            emit_load_vector(b, cfg, R["t"], P[-1] // cfg.nr, "rows", "ldt")
        if what == "out" and k == out_core:
            emit_unload_diag(b, cfg, R["z"], P[-1] // cfg.nr, "ulz")
        b.halt()
        imgs.append(b.build().words())
    return imgs


@dataclass(frozen=True)
class Kit:
    """The per-core builders of one CP flavour: batch 1 (this module) or minibatch
    (:data:`sw.train_cp_mb.MB_KIT`), with the program class of its host side."""

    allocate: object      #: (cfg, mlp, P, N, stage, V, softmax, fused) -> Allocator
    head: object          #: (cfg, mlp, al, P, N, stage, softmax, fused) -> ops
    tail: object          #: (cfg, mlp, al, P, N, stage, j, V, groups, dual) -> ops before the chains
    streams: object       #: (cfg, mlp, allocs, P, N, groups, j) -> [sw.chain.Stream] (j: variant, or None)
    ring_rw: object       #: (cfg, mlp, al, P, N, stage) -> (reads, writes) of the chains
    host: object          #: (cfg, allocs, P, N, out_core, what, origin) -> images
    ring_text: object     #: (cfg, lines, mlp, P, N) -> the chains' text, folded into loops
    program: object       #: the ChipCPProgram class
    #: (cfg, mlp, al, P, N, stage) -> ops of the output core after the host's softmax (or None)
    head2: object = None


def _vec_ring_text(cfg, lines, mlp, P, N) -> str:
    return ring_text(cfg, lines, loop="ch_")


def _count(cfg, op) -> int:
    if "issues" in op.info:             # straight-line text of a known length (sw.train_cp_overlap)
        return op.info["issues"]
    b = Builder(replace(cfg, ucode_depth=1 << 16))
    return op.emit(b)


def _length(cfg, ops) -> int:
    return sum(_count(cfg, op) for op in ops) + sum(_gaps(cfg, ops))
