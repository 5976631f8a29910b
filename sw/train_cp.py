"""Continuous propagation (CP) across the cores of a chip: layers pipelined over groups of cores.

``compile_chip_cp(cfg, mlp) -> ChipCPProgram`` maps layer ``l`` of an MLP of ``L``
layers onto a *group* ``G_l`` of consecutive cores of the ring (row panels of ``W_l``,
``P_l`` rows per core; the output layer on one core), chosen by the compiler to balance
the work (:func:`cp_groups`), and compiles one pipeline *step* in which every group
works at once (``docs/training.md``, "Continuous propagation"):

* group ``l`` runs the **forward** pass of sample ``f = s - 1 - l`` (step ``s``) and the
  **backward** pass of sample ``b = s - 2L + 1 + l``, and updates ``W_l`` with that
  sample's gradient at once: forward of one sample overlaps backward of earlier ones,
  and the weights a sample sees are those updated by the samples whose backward pass
  went before (the staleness of CP, ``2 (L - 1 - l)`` steps at layer ``l``);
* the output core runs forward, loss gradient (MSE, or the softmax on the array),
  ``W^T d`` and the update of one sample in the same step;
* between steps, **chains** along the ring (:mod:`sw.chain`) move the activations one
  group forward (a gather through ``G_l`` continuing into ``G_{l+1}``, each core of which
  keeps the whole vector) and the deltas one group back (a reduce chain through
  ``G_{l+1}`` adding the cores' partials of ``W^T d``, then the long way round the
  unidirectional ring, then a scatter into ``G_l``: each core keeps its rows' slice).

A step is two chip RUNs, both started on every core together (three when the tails, each
with its own copy of the chains, do not fit the microcode: the chains then run once, as
a RUN of their own; :attr:`ChipCPProgram.split_chains`). A minibatch (``mlp.batch > 1``)
is pipelined the same way by the builders of :mod:`sw.train_cp_mb` (a :class:`Kit`);
for batch 1:

``head`` (the same program every step)::

    z = W_l ain                    emit_gemv (ain: the input received last step, cols)
    hidden: z = relu(z)            emit_relu (the slice of a_{l+1} this core sends)
    l >= 1: e = W_l^T din          emit_gemv(trans): a partial of W^T d over the group
    output core: loss gradient d; e = W^T d; e *= relu'(ain); W += -lr d ain^T

``tail`` (one of ``V = 2 (L - 1)`` variants, ``s mod V``: they differ only in which
history slot they read and write)::

    l >= 1: e *= relu'(hist[b])    emit_relu_mask (diag): this core's partial of d_{l-1}
    W += -lr din hist[b]^T         emit_rank1 (din: this core's slice of d_l, diag)
    hist[f] = ain                  emit_copy (the input is needed again 2 (L-1-l) steps later)
    (NOPs so every core starts the chains in the same cycle)
    chains                         x to G_0; a_{l+1} G_l -> G_{l+1}; d_l G_{l+1} -> G_l

The host loads ``x(s)`` into core 0 (``xin``) and the output core's target, and after the
tail unloads the output core's ``d`` (MSE) or logits (softmax) for the loss: host
phases, core by core, counted in the step's cycles. The pipeline starts empty (all
vectors 0): during the first ``2L - 1`` steps, and when it is drained with zero inputs,
the stages work on zero vectors, whose updates add signed zeros (exactly what the golden
trainer does; the weights' values do not change).

A hidden layer whose cores do not fit the PE memories keeps its panels in their
scratchpads (:func:`cp_spad_plan`): the head works page by page (load, the page's
forward rows, its part of ``W^T d``, its update, store), so each paged weight crosses the
scratchpad port twice per step.

:class:`sw.golden_train_cp.GoldenChipCP` is the bit-exact model of the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from sw.chain import Hop, Stream, schedule
from sw.ring import ring_text
from sw.collectives import Region
from sw.asm import AsmError, Builder
from sw.kernels import Scalar, emit_axpy, emit_copy, emit_gemv, emit_rank1, emit_relu, emit_relu_mask
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.softmax import softmax_supported
from sw.train import (FUSED_TOLERANCE, Allocator, Op, StepResult, TrainCompileError, _gaps, alloc_softmax, decode_diag_beats,
                      emit_load_vector, emit_unload_diag, mse_loss, one_hot, resolve_softmax, softmax_ce_loss,
                      softmax_const_items, softmax_op, vector_beats, vector_bits, weight_bits)
from sw.train_chip import (PhaseLog, SpadPanel, _at, _build_ops, check_page_rows, fused_backward_op, largest, load_per_core, page_split, page_sum_op, spad_choice, spad_image, spad_local, spad_op)

__all__ = ["compile_chip_cp", "ChipCPProgram", "cp_groups", "cp_shapes", "cp_stage_of", "cp_mapping",
           "CP_HOST_PHASES"]

#: host phases of a step: load (x to core 0, t to the output core), unload (d or logits)
CP_HOST_PHASES = ("in", "out")


# ======================================================================================
# mapping
# ======================================================================================
def _panel(cfg, m: int, g: int) -> int:
    return cfg.nr * local_len(m, g * cfg.nr)


def _work(cfg, mlp: MLP, l: int, g: int) -> int:
    """MACs per core of layer ``l`` on ``g`` cores (padded rows): forward, ``W^T d``
    (not layer 0) and the update."""
    m, n = mlp.shape(l)
    return _panel(cfg, m, g) * n * (2 if l == 0 else 3)


def cp_groups(cfg, mlp: MLP, groups=None, backward: str = "auto") -> list:
    """Cores per layer (:func:`cp_mapping`'s first result)."""
    return cp_mapping(cfg, mlp, groups, backward)[0]


def _check_groups(cfg, mlp: MLP, groups) -> list:
    L, c = mlp.n_layers, cfg.cores
    groups = [int(g) for g in groups]
    if len(groups) != L or any(g < 1 for g in groups) or groups[-1] != 1:
        raise TrainCompileError(f"groups must give >= 1 core for each of the {L} layers, 1 for the output "
                                f"layer, got {groups}")
    if sum(groups) > c:
        raise TrainCompileError(f"groups {groups} need {sum(groups)} cores, the chip has {c}")
    return groups


def _balance(cfg, mlp: MLP) -> list:
    """The output layer on one core, each other layer at least one, then core by core to
    the layer whose per-core work (:func:`_work`) is the largest, while it shrinks that
    layer's panel. Cores left over (more cores than useful) stay idle and only relay."""
    L, c = mlp.n_layers, cfg.cores
    if c < L:
        raise TrainCompileError(f"continuous propagation maps each of the {L} layers to its own cores: it needs "
                                f"cores >= {L}, got cores={c}")
    g = [1] * L
    for _ in range(c - L):
        cand = [(l, _work(cfg, mlp, l, g[l])) for l in range(L - 1)]
        cand = [(l, w) for l, w in cand if _work(cfg, mlp, l, g[l] + 1) < w]
        if not cand:
            break
        l = max(cand, key=lambda t: t[1])[0]
        g[l] += 1
    return g


def cp_mapping(cfg, mlp: MLP, groups=None, backward: str = "auto") -> tuple:
    """``(groups, fused)``: cores per layer, and per layer whether its backward step is
    the fused kernel (:func:`sw.kernels.emit_gemv_t_rank1`: ``W^T d`` with the old
    weights and the update in one pass over ``W``, reading and writing each weight once
    for two MACs) instead of the transposed GEMV and the rank-1 update. Layer 0 has no
    ``W^T d``: never fused.

    ``groups`` as given (checked), or :func:`_balance`'s then :func:`_refine`'s for the
    plan. ``backward``: ``"separate"`` or ``"fused"`` (every layer ``l >= 1``), or
    ``"auto"``: fused everywhere when the step's compute (:func:`_cost`) is at most
    ``1 + FUSED_TOLERANCE`` times the separate plan's (each with its own groups), else
    separate except on the layers where fusing does not lengthen it."""
    if backward not in ("auto", "fused", "separate"):
        raise TrainCompileError(f"unknown backward {backward!r}; allowed: auto, fused, separate")
    L = mlp.n_layers
    given = None if groups is None else _check_groups(cfg, mlp, groups)
    start = given or _balance(cfg, mlp)
    cache: dict = {}

    def mapped(plan):
        plan = tuple(plan)
        g = given or _refine(cfg, mlp, start, plan, cache)
        return list(g), list(plan), _cost(cfg, mlp, tuple(g), plan, cache)

    sep, fus = (False,) * L, (False,) + (True,) * (L - 1)
    if mlp.batch > 1:
        if backward == "fused":
            raise TrainCompileError("minibatch CP has no fused backward step (its update is a GEMM): "
                                    "backward='auto' or 'separate'")
        return mapped(sep)[:2]
    if backward != "auto":
        return mapped(fus if backward == "fused" else sep)[:2]
    gs, ps, cs = mapped(sep)
    gf, pf, cf = mapped(fus)
    if cf <= (1 + FUSED_TOLERANCE) * cs:
        return gf, pf
    for l in range(1, L):
        trial = list(ps)
        trial[l] = True
        if _cost(cfg, mlp, tuple(gs), tuple(trial), cache) <= cs:
            ps = trial
    return gs, ps


def _smx(cfg, mlp: MLP):
    return "array" if mlp.loss == "softmax_ce" and softmax_supported(cfg, mlp.n_out) is None else None


def _stage_cost(cfg, mlp: MLP, groups: tuple, l: int, fused: bool, cache: dict) -> tuple:
    """``(head, tail)`` instructions of a core of layer ``l`` (its kernels' exact counts
    and gaps; the tail without the chains); ``fused``: its backward step is the fused
    kernel. A hidden layer whose regions do not fit is costed with its panel paged from
    the scratchpad (:func:`cp_spad_plan`'s pages, the transfers included); ``(2^30, 0)``
    when even that does not fit."""
    key = (l, groups[l - 1] if l else 0, groups[l], fused)
    if key not in cache:
        P, N = cp_shapes(cfg, mlp, list(groups))
        V, smx, kit = 2 * (mlp.n_layers - 1), _smx(cfg, mlp), _kit(mlp)

        def alloc(page=None):
            return kit.allocate(cfg, mlp, P, N, (l, 0), V, smx, fused, page=page)
        al, sp = alloc(), None
        if not al.fits() and l < mlp.n_layers - 1:
            sp = _layer_pages(cfg, P, N, l, alloc)
            if sp is not None:
                al = alloc(sp.pages[0][1])
        if not al.fits():
            cache[key] = (1 << 30, 0)
        else:
            cache[key] = (_length(cfg, kit.head(cfg, mlp, al, P, N, (l, 0), smx, fused, sp=sp)),
                          _length(cfg, kit.tail(cfg, mlp, al, P, N, (l, 0), 0, V, list(groups), True)))
    return cache[key]


def _cost(cfg, mlp: MLP, groups: tuple, plan: tuple, cache: dict) -> int:
    """The step's compute: the longest head plus the longest tail (without the chains)."""
    hc = [_stage_cost(cfg, mlp, groups, l, plan[l], cache) for l in range(mlp.n_layers)]
    return max(h for h, _ in hc) + max(t for _, t in hc)


def _refine(cfg, mlp: MLP, g: list, plan: tuple, cache: dict) -> list:
    """Move single cores between the hidden layers' groups while the step's compute
    (:func:`_cost`, from the kernels' exact instruction counts) gets shorter."""
    L = mlp.n_layers
    g = tuple(g)
    best = _cost(cfg, mlp, g, plan, cache)
    improved = True
    while improved:
        improved = False
        for a in range(L - 1):
            for b in range(L - 1):
                if a == b or g[a] <= 1:
                    continue
                cand = list(g)
                cand[a] -= 1
                cand[b] += 1
                cand = tuple(cand)
                cc = _cost(cfg, mlp, cand, plan, cache)
                if cc < best:
                    g, best, improved = cand, cc, True
    return list(g)


def cp_shapes(cfg, mlp: MLP, groups: list) -> tuple:
    """``(P, N)``: rows of each layer's panel per core, ``P_l = nr ceil(m_l / (g_l nr))``,
    and columns: ``N_0 = n_in``, ``N_l = g_{l-1} P_{l-1}`` (the gathered input, padding
    included)."""
    L = mlp.n_layers
    P = [_panel(cfg, mlp.shape(l)[0], groups[l]) for l in range(L)]
    N = [mlp.n_in] + [groups[l - 1] * P[l - 1] for l in range(1, L)]
    return P, N


def cp_stage_of(groups: list, cores: int) -> list:
    """Per core: ``(layer, index in its group)``, or None for an idle core."""
    out, k = [], 0
    for l, g in enumerate(groups):
        out += [(l, i) for i in range(g)]
        k += g
    return out + [None] * (cores - k)


# ======================================================================================
# memory allocation (per core: its stage's regions)
# ======================================================================================
def _allocate(cfg, mlp: MLP, P: list, N: list, stage, V: int, softmax, fused: bool = False,
              page: int | None = None) -> Allocator:
    """The regions of a core of ``stage`` (``fused``: its layer's backward step is the
    fused kernel, which writes ``e`` while ``W``'s bank takes the updates: ``e`` in the
    other bank, and no rows copy of ``din``). ``page``: the panel is kept in the
    scratchpad and moved through a page buffer ``WP`` of ``page`` local rows; a layer
    ``l >= 1`` with several pages sums its ``W^T d`` through ``ep`` and the scalar 1."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    al = Allocator(cfg)
    if stage is None:
        return al
    l, i = stage
    nl = mlp.n_layers
    s = P[l] // cfg.nr
    if page is None:
        al.alloc("W", L(P[l]) * L(N[l]), f"row panel {i} of W{l} ({P[l]} x {N[l]})", bank="a")
    else:
        al.alloc("WP", page * L(N[l]), f"page buffer of row panel {i} of W{l} ({P[l]} x {N[l]}, in the scratchpad; "
                 f"{page * cfg.nr} rows per page)", bank="a")
    al.alloc("ain", L(N[l]), f"a{l}: the next forward input (cols, written by the chains)", bank="b")
    if l == nl - 1:
        al.alloc("z", s, "logits z (rows); MSE: d = z - t in place", bank="b")
        if mlp.loss == "mse":
            al.alloc("t", s, "target (rows, loaded per step)", bank="a")
            al.alloc("m1", 1, "scalar -1 (every PE)", bank="a")
        elif softmax == "array":
            alloc_softmax(al, cfg, mlp.n_out, s, {"a"}, "rows", "rows, loaded per step")
        al.alloc("e", L(N[l]), f"W{l}^T d, then masked by relu'(ain) (cols; diag sent)", bank="b" if fused else "a")
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
        if page is not None and l >= 1 and L(P[l]) > page:
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


def _nops(cfg, name: str, n: int) -> Op:
    """``n`` NOPs (folded into a loop by :func:`sw.ring.ring_text`), for alignment."""
    text = ring_text(cfg, ["nop"] * n, loop=f"{name}_")

    def emit(b, text=text, n=n):
        b.text(text)
        return n

    return Op(name, "nop", emit, stores=False)


def _ring_op(lines, reads, writes, text: str) -> Op:
    """The chains of a core: ``text`` (``lines`` folded into loops) issuing ``len(lines)``
    instructions."""
    n = len(lines)

    def emit(b, text=text, n=n):
        b.text(text)
        return n

    return Op("chains", "ring", emit, reads=reads, writes=writes, stores=True)


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
    work row by row but for ``W^T din``'s sum."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    nr = cfg.nr
    l, _ = stage
    if l == mlp.n_layers - 1:                           # pragma: no cover - the planner never pages it
        raise TrainCompileError("the output layer's core is not paged")
    R = {k: v.region for k, v in al.items.items()}
    s, nw = P[l] // nr, L(N[l])
    WP, ain, z, din, vn = R["WP"], R["ain"], R["z"], R["din"], R["vnext"]
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    ops = []
    for p, (r0, n) in enumerate(sp.pages):
        w, zp, dp = sp.page_words(p), _at(z, r0), _at(din, r0)
        ops.append(spad_op(cfg, f"ld_{p}", False, WP, w, sp.page_addr(nr, p)))
        ops.append(_kern(f"gemv_{p}", "gemv", lambda b, n=n, zp=zp, p=p:
                         emit_gemv(b, cfg, n * nr, N[l], WP, ain, zp, name=f"fw{p}_"),
                         [(WP, w), (ain, nw)], [(zp, n)]))
        if l >= 1:
            e = R["e"] if p == 0 else R["ep"]
            if fused:
                ops.append(fused_backward_op(cfg, f"bwup_{p}", n * nr, N[l], WP, dp, vn, e, R["nlr"], "diag",
                                             f"bu{p}_"))
            else:
                dc = _at(R["dc"], r0)
                ops.append(_kern(f"gemv_t_{p}", "gemv_t", lambda b, n=n, dp=dp, e=e, dc=dc, p=p:
                                 emit_gemv(b, cfg, n * nr, N[l], WP, dp, e, trans=True, x_layout="diag", x_copy=dc,
                                           name=f"bw{p}_"),
                                 [(WP, w), (dp, n)], [(e, nw), (dc, n + 1)]))
            if p:
                ops.append(page_sum_op(cfg, f"acc_{p}", nw, R["ep"], R["e"], R["one"], f"ac{p}_"))
        if not (l >= 1 and fused):
            ops.append(_kern(f"rank1_{p}", "rank1", lambda b, n=n, dp=dp, p=p:
                             emit_rank1(b, cfg, n * nr, N[l], WP, dp, vn, alpha=nlr, u_layout="diag",
                                        v_layout="cols", name=f"up{p}_"),
                             [(WP, w), (dp, n), (vn, nw), (R["nlr"], 1)], [(WP, w)], fma_wb=True))
        ops.append(spad_op(cfg, f"st_{p}", True, WP, w, sp.page_addr(nr, p)))
    ops.append(_kern("relu", "relu", lambda b: emit_relu(b, cfg, s, z, z, name="re_"), [(z, s)], [(z, s)]))
    if l >= 1:
        e = R["e"]
        ops.append(_kern("mask", "relu_mask", lambda b: emit_relu_mask(b, cfg, nw, e, vn, e, layout="diag",
                                                                        name="mk_"),
                         [(e, nw), (vn, nw)], [(e, nw)]))
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
    ain, hist, vn = R["ain"], R["hist"], R["vnext"]
    D = 2 * (nl - 1 - l)
    hf = Region(hist.bank, hist.base + (j % V) * nw)
    hn = Region(hist.bank, hist.base + ((j + 1 - D) % V) * nw)
    keep = [] if dual and _dual(cfg, al, stage, groups) else [
        _kern("keep_a", "copy", lambda b: emit_copy(b, cfg, nw, ain, hf, name="cp_"), [(ain, nw)], [(hf, nw)])]
    return keep + [_kern("next_a", "copy", lambda b: emit_copy(b, cfg, nw, hn, vn, name="cn_"),
                         [(hn, nw)], [(vn, nw)])] + (
        [_kern("take_x", "copy", lambda b: emit_copy(b, cfg, nw, R["xin"], ain, name="cx_"),
               [(R["xin"], nw)], [(ain, nw)])] if l == 0 and "xin" in R and groups[0] == 1 else [])


def chain_streams(cfg, mlp, allocs, groups, *, x_m: int, seg_m, d_m, scatter, din: str, layout: str = "cols",
                  din_layout: str = "diag", ain2=None) -> list:
    """The chains of a step (:mod:`sw.chain`), for both CP flavours: ``x_m`` beats of
    the input from core 0 through ``G_0`` (``xin`` -> every ``ain``); per layer ``l``, a
    gather of ``seg_m(l)`` beats per core of ``G_l`` (``z``) into every ``ain`` of
    ``G_{l+1}``, and ``d_m(l)`` beats of ``e`` reduced over ``G_{l+1}`` (ring order), round
    the ring, scattered into ``G_l`` (``scatter(l, i)``: the roles of core ``i`` there,
    stored at ``din``). ``layout``: of the hops (``"mat"`` for matrix words), ``din_layout``:
    of the scatter's stores. ``ain2(k)``: a second ``(bank, base)`` core ``k`` stores its
    input into (or None)."""
    c, nl = cfg.cores, mlp.n_layers
    ain2 = ain2 or (lambda k: None)
    first = [sum(groups[:l]) for l in range(nl)]
    R = [{k: v.region for k, v in al.items.items()} for al in allocs]
    rb = lambda k, name: (R[k][name].bank, R[k][name].base)        # noqa: E731
    out = []
    if groups[0] > 1:
        hops = [Hop(0, ("send_keep",) * x_m, src=rb(0, "xin"), dst=rb(0, "ain"), layout=layout, dst2=ain2(0))]
        for i in range(1, groups[0]):
            k = first[0] + i
            hops.append(Hop(k, ("keep_relay" if i < groups[0] - 1 else "keep",) * x_m, dst=rb(k, "ain"),
                            layout=layout, dst2=ain2(k)))
        out.append(Stream("x", x_m, tuple(hops)))
    for l in range(nl - 1):
        g, gn, seg = groups[l], groups[l + 1], seg_m(l)
        m = g * seg
        # forward: gather a_{l+1} through G_l, into every core of G_{l+1}
        hops = []
        for i in range(g):
            k = first[l] + i
            roles = ("relay",) * (i * seg) + ("send",) * seg + (None,) * (m - (i + 1) * seg)
            hops.append(Hop(k, roles, src=rb(k, "z"), layout=layout))
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
            hops.append(Hop(first[l] + i, tuple(scatter(l, i)), dst=rb(first[l] + i, din), layout=din_layout))
        out.append(Stream(f"d{l}", m, tuple(hops)))
    return out


def _streams(cfg, mlp, allocs, P, N, groups, j: int | None = None) -> list:
    """The chains of a step: vectors, one word per beat; each core of ``G_l`` keeps its
    slice of ``d_l`` (diag) and relays the rest. ``j``: tail variant ``j``'s chains, which
    also store each core's next input into its history slot ``(j + 1) mod V`` where
    :func:`_dual` allows (None: no second store)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    stages = cp_stage_of(groups, cfg.cores)
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
                         scatter=scatter, din="din", ain2=ain2)


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


def _kit(mlp: MLP) -> Kit:
    if mlp.batch > 1:
        from sw.train_cp_mb import MB_KIT

        return MB_KIT
    return Kit(_allocate, _head_ops, _tail_ops, _streams, _ring_rw, _host_programs, _vec_ring_text,
               ChipCPProgram)


def _count(cfg, op) -> int:
    b = Builder(replace(cfg, ucode_depth=1 << 16))
    return op.emit(b)


def _length(cfg, ops) -> int:
    return sum(_count(cfg, op) for op in ops) + sum(_gaps(cfg, ops))


# ======================================================================================
# the compiled program
# ======================================================================================
@dataclass
class ChipCPProgram:
    """A compiled CP pipeline step (see the module docstring)."""

    cfg: object
    mlp: MLP
    groups: list                  #: cores per layer
    stages: list                  #: per core: (layer, index in group) or None
    P: list
    N: list
    V: int                        #: tail variants (history slots)
    allocs: list                  #: per core: Allocator
    head: list                    #: per core: ops of the head RUN
    tails: list                   #: per variant, per core: ops of the tail RUN
    image: list                   #: per core: microcode words
    origins: dict                 #: "head", ("tail", j), ["chains",] "in", "out" -> origin
    instructions: dict            #: "head" / "tail" [/ "chains"] -> instructions issued per RUN (every core)
    neg_lr: int
    softmax: str | None = None
    fused: list = field(default_factory=list)   #: per layer: backward step fused (emit_gemv_t_rank1)
    chains: object = None         #: the sw.chain.ChainSchedule of the tail
    #: the chains are a RUN of their own (the tails with a copy each did not fit the microcode)
    split_chains: bool = False
    meta: dict = field(default_factory=dict)
    step_index: int = 0           #: the next step's number (selects the tail variant)
    #: layer -> :class:`sw.train_chip.SpadPanel`: the panels of the layer's cores kept in
    #: their scratchpads (:func:`cp_spad_plan`)
    spad: dict = field(default_factory=dict)

    # -- layout -------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return self.mlp.n_layers

    @property
    def out_core(self) -> int:
        return sum(self.groups) - 1

    def regions(self, k: int) -> dict:
        return {n: v.region for n, v in self.allocs[k].items.items()}

    def cores_of(self, l: int) -> list:
        return [k for k, st in enumerate(self.stages) if st is not None and st[0] == l]

    # -- figures ------------------------------------------------------------------------
    def run_cycles(self, what: str) -> int:
        return self.instructions[what] + self.cfg.run_overhead

    def host_phase_cycles(self) -> list:
        cfg = self.cfg
        run = cfg.run_overhead
        xw, so = local_len(self.N[0], cfg.nr), self.P[-1] // cfg.nr
        return [("in", (xw + run) + (so + run)), ("out", so + run)]

    def chip_runs(self) -> list:
        """The chip RUNs of a step: head, tail (and chains)."""
        return ["head", "tail"] + (["chains"] if self.split_chains else [])

    def step_cycles(self) -> int:
        return sum(self.run_cycles(w) for w in self.chip_runs()) + sum(c for _, c in self.host_phase_cycles())

    def host_cycles(self, host_latency: int = 0) -> int:
        """Host turnaround cycles per step (as :meth:`sw.train_chip.ChipSGDProgram.host_cycles`):
        none; the softmax runs on the output core, and the host phases are part of
        :meth:`step_cycles`."""
        return 0

    def latency_steps(self) -> int:
        """Steps from a sample's input to its loss: ``L`` (forward through every group;
        the host's load is one step ahead)."""
        return self.n_layers

    def breakdown(self, k: int | None = None) -> list:
        """``(op, kind, instructions)`` of the chip RUNs on core ``k`` (default: the core
        of the group with the longest compute), alignment NOPs included."""
        k = self.meta["critical_core"] if k is None else k
        out = []
        halt = ("halt+drain", "halt", self.cfg.run_overhead)
        for ops in (self.head[k], self.tails[0][k]):
            for op, g in zip(ops, _gaps(self.cfg, ops)):
                if g:
                    out.append(("gap", "nop", g))
                out.append((op.name, op.kind, _count(self.cfg, op)))
            out.append(halt)
        if self.split_chains:
            out += [("chains", "ring", self.chains.slots), halt]
        return out

    def describe(self) -> str:
        cfg = self.cfg
        lines = [f"CP pipeline step of {self.mlp.describe()} on {cfg.cores} cores of {cfg.nr}x{cfg.nr} {cfg.fmt} PEs",
                 f"  cores per layer {self.groups} (row panels of {self.P} rows; inputs {self.N}); "
                 f"{self.V} tail variants; {self.step_cycles()} cycles per step (head {self.run_cycles('head')}, "
                 + (f"tail {self.run_cycles('tail')}, chains {self.run_cycles('chains')}; host " if self.split_chains
                    else f"tail {self.run_cycles('tail')} of which chains {self.chains.slots}; host ")
                 + ", ".join(f"{n} {c}" for n, c in self.host_phase_cycles()) + ")"
                 + (f"; softmax gradient on the array (output core {self.out_core})" if self.softmax else ""),
                 "  backward step per layer: " + ", ".join(f"{l} {'fused' if f else 'separate'}"
                                                           for l, f in enumerate(self.fused) if l),
                 f"  microcode per core: {max(len(w) for w in self.image)} of {cfg.ucode_depth} words"]
        for l, sp in sorted(self.spad.items()):
            lines.append(f"  scratchpad beats 0..{sp.beats(cfg.nr) - 1} of each core of layer {l}: its W{l} panel, "
                         f"{len(sp.pages)} page(s) of up to {max(n for _, n in sp.pages) * cfg.nr} rows through WP, "
                         f"loaded and stored once per step")
        for l in range(self.n_layers):
            k = self.cores_of(l)[0]
            lines += ["", f"core {k} (layer {l}, {len(self.cores_of(l))} core(s)):", self.allocs[k].table()]
        lines += ["", f"critical core {self.meta['critical_core']}:"]
        lines += [f"{'op':<14} {'kind':<10} {'cycles':>7}"] + [f"{n:<14} {kd:<10} {i:>7}"
                                                               for n, kd, i in self.breakdown()]
        return "\n".join(lines)

    # -- running ------------------------------------------------------------------------
    def _vec(self, v, n):
        if v is None:
            return np.zeros(n, dtype=self.cfg.fmt.np_uint)
        return vector_bits(self.cfg.fmt, v, n)

    def _target(self, t):
        no, fmt = self.mlp.n_out, self.cfg.fmt
        if t is None:
            return None, np.zeros(no, dtype=fmt.np_uint)
        if self.mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(no, t)
        tb = np.asarray(t)
        tf = fmt.to_float(tb) if tb.dtype == fmt.np_uint else tb.astype(np.float64)
        if tf.shape != (no,):
            raise ValueError(f"target must have {no} values, got shape {tf.shape}")
        return tf, self._vec(t, no)

    def _runs(self, session, data: list, log: PhaseLog):
        """A step's RUNs: the host's input phase (``data``: per core its beats), the chip
        RUNs, the output phase; returns the output core's result of the last."""
        cfg = self.cfg
        act = sorted({0, self.out_core})
        res, _ = session.run([self.image[k] for k in range(cfg.cores)], data, "cp-in", self.origins["in"],
                             active=act)
        log.note("in", "host", res, sum(res[k].cycles for k in act))
        self._run_chip(session, log)
        res, _ = session.run([self.image[k] for k in range(cfg.cores)], None, "cp-out", self.origins["out"],
                             active=[self.out_core])
        log.note("out", "host", res, res[self.out_core].cycles)
        return res[self.out_core]

    def _run_chip(self, session, log: PhaseLog, runs=None) -> None:
        """The step's chip RUNs (head, the tail of this step's variant; ``runs``: some of
        :meth:`chip_runs`), each checked: cycles as predicted on every core, no SRAM or
        register write conflict, no stall."""
        cfg = self.cfg
        for what in (self.chip_runs() if runs is None else runs):
            org = self.origins[("tail", self.step_index % self.V) if what == "tail" else what]
            res, cyc = session.run([self.image[k] for k in range(cfg.cores)], None, f"cp-{what}", org)
            exp = self.run_cycles(what)
            for k, r in enumerate(res):
                ctr = r.counters
                if r.cycles != exp or ctr.get("mem_conflict") or ctr.get("rf_conflict") or ctr.get("stall_cycles"):
                    raise AssertionError(f"CP {what} RUN on core {k}: {r.cycles} cycles (predicted {exp}), "
                                         f"{ctr.get('mem_conflict')} SRAM / {ctr.get('rf_conflict')} register write "
                                         f"conflicts, {ctr.get('stall_cycles')} stall cycles")
            log.note(what, "chip", res, cyc)

    def run_step(self, session, x, t) -> StepResult:
        """One pipeline step: ``x`` enters (None: zeros, to drain), ``t`` is the target of
        the sample now at the output layer (the one that entered ``L`` steps earlier;
        None while the pipeline fills). Returns that sample's loss (None without ``t``)
        and output, with the step's cycles and every core's counters."""
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        tf, tb = self._target(t)
        xb = self._vec(x, mlp.n_in)
        log = PhaseLog(cfg.cores)
        data = [[] for _ in range(cfg.cores)]
        data[0] = vector_beats(cfg, xb, local_len(self.N[0], cfg.nr))
        if mlp.loss == "mse" or self.softmax == "array":
            data[self.out_core] += vector_beats(cfg, tb, self.P[-1] // cfg.nr)
        out = self._runs(session, data, log)
        raw = decode_diag_beats(cfg, out.out, mlp.n_out)
        v = fmt.to_float(raw)
        self.step_index += 1
        if tf is None:
            loss, out = None, v
        elif mlp.loss == "mse":
            loss, out = mse_loss(v), v + tf
        else:
            loss, out = softmax_ce_loss(v, tf), v
        return log.result(loss, out, 0, {"out": raw})

    # -- weights ------------------------------------------------------------------------
    def _panel_rows(self, l: int, i: int) -> slice:
        return slice(i * self.P[l], (i + 1) * self.P[l])

    def init(self, session, weights) -> None:
        """Load every core's weight panel (into its scratchpad when paged) and scalars,
        and zero the pipeline's vectors (host phases); resets the step counter."""
        from sw.transfer import emit_spad_fill

        cfg, nr, fmt = self.cfg, self.cfg.nr, self.cfg.fmt
        items = [[] for _ in range(cfg.cores)]
        spad = [[] for _ in range(cfg.cores)]              # per core the scratchpad beats of a paged panel
        for l, W in enumerate(weight_bits(self.mlp, fmt, weights)):
            m, n = self.mlp.shape(l)
            G = np.zeros((self.groups[l] * self.P[l], self.N[l]), dtype=fmt.np_uint)
            G[:m, :n] = W
            for k in self.cores_of(l):
                local = pack_matrix(G[self._panel_rows(l, self.stages[k][1])], nr)
                if l in self.spad:
                    spad[k] = spad_image(cfg, self.spad[l], local)
                else:
                    items[k].append((self.regions(k)["W"], local))
        scalars = {"nlr": self.neg_lr, "m1": int(fmt.from_float(np.array([-1.0]))[0]),
                   "one": int(fmt.from_float(np.array([1.0]))[0])}
        for k in range(cfg.cores):
            R = self.regions(k)
            for name, it in self.allocs[k].items.items():
                if name != "W" and not name.startswith("smx_"):
                    items[k].append((R[name], np.full((nr, nr, it.words), scalars.get(name, 0), dtype=fmt.np_uint)))
            if self.softmax == "array" and k == self.out_core:
                items[k] += softmax_const_items(cfg, R, self.mlp.n_out)
        load_per_core(session, cfg, items, "cp-init")
        if self.spad:
            imgs = []
            for k in range(cfg.cores):
                b = Builder(cfg)
                if spad[k]:
                    emit_spad_fill(b, cfg, 0, len(spad[k]))
                b.halt()
                imgs.append(b.build().words())
            session.run(imgs, spad, "cp-init-spad")
        self.step_index = 0

    def _paged(self, k: int):
        """Core ``k``'s :class:`sw.train_chip.SpadPanel`, or None when its panel is in PE memory."""
        st = self.stages[k]
        return None if st is None else self.spad.get(st[0])

    def weights_from_session(self, session, padded: bool = False) -> list:
        """The global weights as they are in the cores' memories (bit patterns)."""
        out = []
        for l in range(self.n_layers):
            G = np.zeros((self.groups[l] * self.P[l], self.N[l]), dtype=self.cfg.fmt.np_uint)
            for k in self.cores_of(l):
                sp = self._paged(k)
                if sp is not None:
                    local = spad_local(self.cfg, sp, session.scratchpad(k, sp.base, sp.beats(self.cfg.nr)))
                else:
                    reg, words = self.regions(k)["W"], self.allocs[k].items["W"].words
                    local = session.memory(k, reg.bank)[:, :, reg.base:reg.base + words]
                G[self._panel_rows(l, self.stages[k][1])] = unpack_matrix(local, self.P[l], self.N[l])
            m, n = self.mlp.shape(l)
            out.append(G if padded else G[:m, :n])
        return out

    def unload_weights_phases(self) -> list:
        """One chip phase unloading every core's weight panel: ``[(images, name)]``;
        decode its per-core results with :meth:`decode_weights`."""
        from sw.transfer import emit_spad_drain, emit_unload

        cfg = self.cfg
        imgs = []
        for k in range(cfg.cores):
            b = Builder(cfg)
            sp = self._paged(k)
            if sp is not None:
                emit_spad_drain(b, cfg, sp.base, sp.beats(cfg.nr))
            elif "W" in self.allocs[k].items:
                reg = self.regions(k)["W"]
                emit_unload(b, cfg, reg.bank, reg.base, self.allocs[k].items["W"].words, loop="uw")
            b.halt()
            imgs.append(b.build().words())
        return [(imgs, "cp-unload-W")]

    def decode_weights(self, results, padded: bool = False) -> list:
        """Global weights from the per-core results of :meth:`unload_weights_phases`."""
        from sw.transfer import decode_unload

        per_core = results[0]
        out = []
        for l in range(self.n_layers):
            G = np.zeros((self.groups[l] * self.P[l], self.N[l]), dtype=self.cfg.fmt.np_uint)
            for k in self.cores_of(l):
                sp = self._paged(k)
                if sp is not None:
                    local = spad_local(self.cfg, sp, [x.data if hasattr(x, "data") else int(x)
                                                      for x in per_core[k].data])
                else:
                    local = decode_unload(self.cfg, per_core[k].data, self.allocs[k].items["W"].words)
                G[self._panel_rows(l, self.stages[k][1])] = unpack_matrix(local, self.P[l], self.N[l])
            m, n = self.mlp.shape(l)
            out.append(G if padded else G[:m, :n])
        return out


# ======================================================================================
# compile
# ======================================================================================
def cp_spad_plan(cfg, mlp: MLP, P: list, N: list, groups: list, fused: list, softmax, spad=None,
                 page_rows: int | None = None) -> dict:
    """The hidden layers whose panels are kept in the scratchpad: ``{layer:
    SpadPanel}``, the same on every core of the layer (beats from 0 of each core's
    scratchpad). ``spad=None``: the layers whose cores' regions do not fit the PE
    memories, when the scratchpad holds their panel and the rest fits with a page buffer
    (else ``{}``: the caller reports the sizes); ``spad``: the layers to page (tests).
    Pages of at most ``page_rows`` rows (a multiple of ``nr``; default: the largest the
    PE memories leave room for)."""
    nl = mlp.n_layers
    V = 2 * (nl - 1)
    hidden = list(range(nl - 1))

    kit = _kit(mlp)

    def alloc(l, page=None):
        return kit.allocate(cfg, mlp, P, N, (l, 0), V, softmax, fused[l], page=page)
    if spad is None:
        layers = [l for l in range(nl) if not alloc(l).fits()]
        if not layers or not cfg.spad_kib or nl - 1 in layers:
            return {}
    else:
        layers = spad_choice(cfg, spad, hidden, "the hidden layers")
    check_page_rows(cfg, page_rows)
    out = {}
    for l in layers:
        sp = _layer_pages(cfg, P, N, l, lambda page, l=l: alloc(l, page), page_rows)
        if sp is None:
            return {}
        out[l] = sp
    return out


def _layer_pages(cfg, P: list, N: list, l: int, alloc, page_rows: int | None = None):
    """Layer ``l``'s panel paged from the scratchpad with the largest pages that fit
    (``alloc(page)``: a core's allocator with ``page`` local rows per page): a
    :class:`sw.train_chip.SpadPanel`, or None when the scratchpad does not hold the
    panel or not even one-row pages fit."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    nr, lim = cfg.nr, (1 << cfg.loop_bits) - 2
    lp, ln = L(P[l]), L(N[l])
    cap = max(1, min(lp, page_rows // nr if page_rows else lp, lim // ln))
    if not cfg.spad_kib or nr * lp * ln > cfg.spad_depth or not alloc(1).fits():
        return None
    return SpadPanel(0, lp, ln, page_split(lp, largest(lambda t: alloc(t).fits(), cap)))


def compile_chip_cp(cfg, mlp: MLP, groups=None, softmax: str = "auto", backward: str = "auto", spad=None,
                    page_rows: int | None = None) -> ChipCPProgram:
    """Compile a continuous-propagation pipeline step of ``mlp`` across the chip (see
    the module docstring). ``groups``: cores per layer (default :func:`cp_groups`).
    ``backward``: ``"auto"``, ``"fused"`` or ``"separate"``: whether the layers
    ``l >= 1`` run their backward step and update as one pass over ``W``
    (:func:`cp_mapping`; recorded in :attr:`ChipCPProgram.fused`).
    ``softmax`` (``softmax_ce``): ``"auto"`` or ``"array"``: the output core computes it
    (:mod:`sw.softmax`); ``"host"`` is not supported (the pipeline has no host turnaround).

    A hidden layer whose cores' regions do not fit the PE memories keeps its panels in
    the scratchpads and pages them through a page buffer (:func:`cp_spad_plan`; ``spad``
    / ``page_rows`` force it): each paged weight is loaded and stored once per step (the
    head does the page's forward rows, its part of ``W^T d`` and its update while the
    page is in the buffer).

    Raises :class:`sw.train.TrainCompileError` for a network the pipeline cannot take
    (fewer cores than layers, no hidden layer), panels that do not fit a PE's memory nor
    the scratchpad (with the sizes), or a program that does not fit the microcode."""
    if not isinstance(mlp, MLP):
        raise TypeError(f"mlp must be an sw.mlp.MLP, got {type(mlp).__name__}")
    c, nr, nl = cfg.cores, cfg.nr, mlp.n_layers
    if c < 2:
        raise TrainCompileError(f"continuous propagation needs a chip (cfg.cores >= 2), got cores={c}")
    if nr < 2:
        raise TrainCompileError(f"the kernels need nr >= 2, got nr = {nr}")
    if nl < 2:
        raise TrainCompileError("continuous propagation pipelines layers: the network needs a hidden layer")
    if softmax == "host" and mlp.loss == "softmax_ce" and mlp.batch == 1:
        raise TrainCompileError("continuous propagation computes the softmax on the output core: softmax='host' "
                                "is not supported (a host turnaround would stall every stage)")
    kit = _kit(mlp)
    if mlp.batch > 1:
        from sw.train_cp_mb import check

        check(cfg, mlp, softmax)
        smx = "host" if mlp.loss == "softmax_ce" else None
    else:
        smx = resolve_softmax(cfg, mlp, "array" if softmax == "auto" and mlp.loss == "softmax_ce" else softmax)
    groups, fused = cp_mapping(cfg, mlp, groups, backward)
    P, N = cp_shapes(cfg, mlp, groups)
    lim = (1 << cfg.loop_bits) - 1
    for n in N:
        if local_len(n, nr) + 3 >= lim:
            raise TrainCompileError(f"a {n}-wide layer input exceeds the loop trip-count range ({lim})")
    fmt = cfg.fmt
    nlr = fmt.from_float(np.array([-mlp.lr / mlp.batch]))[0]
    v = float(fmt.to_float(np.array([nlr]))[0])
    if v == 0.0 or not np.isfinite(v):
        raise TrainCompileError(f"learning rate {mlp.lr:g}" + (f" / batch {mlp.batch}" if mlp.batch > 1 else "")
                                + f" is {'zero' if v == 0 else 'not finite'} in {fmt}")
    V = 2 * (nl - 1)
    stages = cp_stage_of(groups, c)
    spads = cp_spad_plan(cfg, mlp, P, N, groups, fused, smx, spad, page_rows)

    def page(st):
        return None if st is None or st[0] not in spads else spads[st[0]].pages[0][1]
    allocs = [kit.allocate(cfg, mlp, P, N, st, V, smx, st is not None and fused[st[0]], page=page(st))
              for st in stages]
    for k, al in enumerate(allocs):
        if not al.fits():
            l = stages[k][0]
            sp_why = ("; nor with the panel paged from the scratchpad: the output layer's core is never paged"
                      if l == mlp.n_layers - 1 else
                      f"; nor with the panel paged from the {cfg.spad_depth}-beat scratchpad "
                      f"({nr * local_len(P[l], nr) * local_len(N[l], nr)} beats) through a one-row page buffer"
                      if cfg.spad_kib else "; there is no scratchpad (cfg.spad_kib = 0)")
            raise TrainCompileError(
                f"MLP {'-'.join(map(str, mlp.sizes))} does not fit the CP mapping {groups} on {c} cores of "
                f"{nr}x{nr} PEs: a core of layer {l} (panel {P[l]} x {N[l]}) needs MEM A {al.used('a')} + MEM B "
                f"{al.used('b')} words per PE, a PE has MEM A {cfg.mem_a_words} + MEM B {cfg.mem_b_words} words "
                f"of {fmt}{sp_why} (more cores for that layer, or a bigger PE memory)")
    out = sum(groups) - 1
    head2 = ([kit.head2(cfg, mlp, allocs[k], P, N, stages[k]) for k in range(c)]
             if smx == "host" and kit.head2 is not None else None)
    # head: every core's compute, padded to the longest
    head = [kit.head(cfg, mlp, allocs[k], P, N, stages[k], smx, stages[k] is not None and fused[stages[k][0]],
                     sp=spads.get(stages[k][0]) if stages[k] else None)
            for k in range(c)]
    hl = [_length(cfg, ops) for ops in head]
    H = max(hl)
    head = [ops + ([_nops(cfg, "hpad", H - n)] if H - n else []) for ops, n in zip(head, hl)]
    # tails: pre-chain ops, alignment, the chains. Inline (a copy of the chains in every
    # tail variant), variant j's chains also store the next input into history slot
    # j + 1 (no copy ain -> hist); split (one chains RUN), they cannot.
    def orders(sts):
        return [list(sts), sts[::-1], sorted(sts, key=lambda st: -len(st.hops))]

    streams = kit.streams(cfg, mlp, allocs, P, N, groups, None)
    pick = min(range(3), key=lambda o: (schedule(cfg, orders(streams)[o]).slots, o))
    rw = [kit.ring_rw(cfg, mlp, allocs[k], P, N, stages[k]) for k in range(c)]

    def rings(sch):
        return [_ring_op(sch.lines[k], *rw[k], text=kit.ring_text(cfg, sch.lines[k], mlp, P, N))
                for k in range(c)]

    def tails_for(split: bool) -> tuple:
        """``(tails, chains schedule, chains ops of the split RUN)``: per variant, per
        core, the tail's ops (with the chains unless ``split``)."""
        out = []
        if split:
            sch = schedule(cfg, orders(streams)[pick])
            for j in range(V):
                pre = [kit.tail(cfg, mlp, allocs[k], P, N, stages[k], j, V, groups, False) for k in range(c)]
                plen = [_length(cfg, ops) for ops in pre]
                out.append([ops + ([_nops(cfg, "tpad", max(plen) - n)] if max(plen) - n else [])
                            for ops, n in zip(pre, plen)])
            return out, sch, rings(sch)
        for j in range(V):
            sch = schedule(cfg, orders(kit.streams(cfg, mlp, allocs, P, N, groups, j))[pick])
            ring = rings(sch)
            pre = [kit.tail(cfg, mlp, allocs[k], P, N, stages[k], j, V, groups, True) for k in range(c)]
            plen = [_length(cfg, ops + [ring[k]]) - len(sch.lines[k]) for k, ops in enumerate(pre)]
            out.append([ops + ([_nops(cfg, "align", max(plen) - n)] if max(plen) - n else []) + [ring[k]]
                        for k, (ops, n) in enumerate(zip(pre, plen))])
        return out, sch, None

    # microcode: head, V tails, (the chains,) host programs; every segment at the same
    # origin on every core
    def layout(acfg, tails, ring):
        image = [[] for _ in range(c)]
        origins, ins = {}, {}
        org = 0

        def place(key, words):
            nonlocal org
            size = max(len(w) for w in words)
            for k in range(c):
                image[k].extend(words[k] + [0] * (size - len(words[k])))
            origins[key] = org
            org += size

        segs = [("head", head)] + [(("tail", j), tails[j]) for j in range(V)]
        if ring is not None:
            segs.append(("chains", [[r] for r in ring]))
        for key, per_core_ops in segs:
            built = [_build_ops(acfg, ops, origin=org) for ops in per_core_ops]
            n = {i for _, i in built}
            assert len(n) == 1, f"CP {key}: cores issue different instruction counts {n}"
            ins[key if isinstance(key, str) else key[0]] = n.pop()
            place(key, [w for w, _ in built])
        if head2 is not None:               # the output core's RUN after the host's softmax
            built = [_build_ops(acfg, ops, origin=org) for ops in head2]
            ins["head2"] = built[out][1]
            place("head2", [w for w, _ in built])
        for what in CP_HOST_PHASES + (("logits", "g") if head2 is not None else ()):
            place(what, kit.host(acfg, allocs, P, N, out, what, org))
        return image, origins, ins

    # the chains in every tail variant (one RUN fewer per step), or, when that does not
    # fit the microcode, once, as a third RUN
    for split in (False, True):
        tails, sch, ring = tails_for(split)
        try:
            image, origins, ins = layout(cfg, tails, ring)
            break
        except AsmError:                 # a program ran past ucode_depth
            if split:                    # measure the total for the message
                used = len(layout(replace(cfg, ucode_depth=1 << 16), tails, ring)[0][0])
                if used <= cfg.ucode_depth:  # pragma: no cover - another assembler error
                    raise
                raise TrainCompileError(f"the CP step's programs need {used} microcode words per core (head, {V} "
                                        f"tail variants, the chains, host programs), the core holds "
                                        f"{cfg.ucode_depth} (ArchConfig.ucode_depth)") from None
    crit = max(range(c), key=lambda k: (hl[k], -k))
    return kit.program(cfg, mlp, groups, stages, P, N, V, allocs, head, tails, image, origins, ins, int(nlr),
                       softmax=smx, fused=fused, chains=sch, split_chains=split,
                       meta={"lr_stored": -v, "critical_core": crit, "head_lengths": hl,
                             "spad_layers": sorted(spads), "pages": {l: len(sp.pages) for l, sp in spads.items()}},
                       spad=spads)
