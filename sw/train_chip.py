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

from dataclasses import replace

import numpy as np

from arch.gc_pause import gc_paused
from sw.kernels import page_load_why_not
from sw.layout import local_len
from sw.mlp import MLP
from sw.train import backward_plan
from sw.train_alloc import Allocator, _other
from sw.train_chip_map import (OUT_MAPS, PanelMap, chip_shapes, column_order, panel_rows,  # noqa: F401
                               resolve_out_map, resolve_out_reduce, softmax_why_not)
from sw.train_chip_ops import _at, _chip_ops, _rs_with_rank1, fused_backward_op, page_sum_op, ring_in_layers  # noqa: F401
from sw.train_chip_place import ChipPart, _build_ops, _place_parts  # noqa: F401
from sw.train_chip_program import ChipSGDProgram, ChipStepResult, PhaseLog, load_per_core  # noqa: F401
from sw.train_dram import stream_parts
from sw.train_host import TrainCompileError, resolve_softmax
from sw.train_paging import (SpadPanel, check_page_rows, largest, page_split, plan_panels, spad_choice,  # noqa: F401
                             spad_image, spad_local, spad_op)
from sw.train_softmax import alloc_softmax

__all__ = ["compile_chip_sgd", "host_in_applies", "overlap_options", "ChipSGDProgram", "PanelMap", "PhaseLog",
           "panel_rows", "column_order", "ChipStepResult", "chip_shapes", "resolve_out_map", "OUT_MAPS"]


# ======================================================================================
# memory allocation (the same on every core)
# ======================================================================================
def _allocate(cfg, mlp: MLP, wbanks: list, P: list, N: list, out_map: str = "rows",
              softmax: str | None = None, fused: list | None = None, pages: dict | None = None,
              host_in: bool = False) -> Allocator:
    """The regions of every core (the same on all); ``fused[l]``: layer ``l``'s backward
    step is the fused kernel (``e_l`` out of ``W_l``'s bank, which takes its updates; no
    rows copy of its ``d``). ``pages``: layer -> local rows per page of the panels kept in
    the scratchpad (:func:`plan_panels`): they share one page buffer ``WP`` in their
    common bank instead of panel regions; a paged layer ``l >= 1`` accumulates its
    ``W^T d`` page by page through ``ep`` (the next page's partial) and the scalar 1.
    ``host_in`` with layer 0 resident: no ``x`` region (the first GEMV takes ``x`` from
    the host stream and keeps only its cols copy ``xc``)."""
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
        # one page buffer per bank the paged panels use (WP: the first paged layer's bank)
        ls = sorted(pages)
        for j, bk in enumerate(dict.fromkeys(wbanks[l] for l in ls)):
            lb = [l for l in ls if wbanks[l] == bk]
            nm = "WP" if j == 0 else f"WP_{bk}"
            al.alloc(nm, max(pages[l] * L(N[l]) for l in lb),
                     "page buffer of the panels in the scratchpad (" + ", ".join(
                         f"W{l}: {pages[l] * cfg.nr} of {P[l]} rows" for l in lb) + " per page)", bank=bk)
            if j:
                for l in lb:
                    al.items[f"WP{l}"] = al.items[nm]
    if not (host_in and 0 not in pages):
        al.alloc("x", L(N[0]), "input sample (diag; core 0 loads it, the ring broadcasts it)", forbid={wbanks[0]})
    al.alloc("xc", L(N[0]) + 1, "cols copy of x (GEMV broadcast; rank-1 v)", forbid={wbanks[0]})
    for i in range(1, nl):
        al.alloc(f"a{i}", segs[i] * s[i - 1], f"a{i}: own panel z, the pre-activation (rows) at 0" + (
                 ", then the all-gather (diag, step order)" if segs[i] > 1 else " (not gathered: the output layer "
                 "is split by columns)"), forbid={wbanks[i]})
        al.alloc(f"c{i}", L(N[i]) + 1, f"cols copy of relu(a{i}) (GEMV broadcast; rank-1 v)", forbid={wbanks[i]})
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
    # e_i lives from layer i's transposed GEMV to its mask, so the e's that prefer a bank
    # share one region there (the mask reads e_i and a_i: one instruction per element
    # when they are in different banks); a fused layer's e_i keeps a region of its own
    ewords = {i: segs[i] * s[i - 1] for i in range(1, nl)}
    epref = {i: _other(al.items[f"a{i}"].region.bank) for i in range(1, nl)}
    shared = {i for i in ewords if not fused[i]}
    pool = {}                                   # preferred bank -> the region its e's share
    for i in range(nl - 1, 0, -1):
        what = (f"W{i}^T d partial (cols), reduce-scattered in place: own panel at 0" if segs[i] > 1 else
                f"W{i}^T d (cols): the own panel (the split output layer needs no reduce-scatter)")
        if i in shared and epref[i] in pool:
            al.alias(f"e{i}", pool[epref[i]], ewords[i], what + f" (in {pool[epref[i]]}'s words)")
        elif i in shared:
            share = [j for j in sorted(shared) if epref[j] == epref[i]]
            al.alloc(f"e{i}", max(ewords[j] for j in share), what + (
                     " (its words shared with " + ", ".join(f"e{j}" for j in share if j != i) + ")"
                     if len(share) > 1 else ""), prefer=epref[i])
            pool[epref[i]] = f"e{i}"
        else:
            al.alloc(f"e{i}", ewords[i], what, prefer=epref[i], forbid={wbanks[i]})
        al.alloc(f"dm{i}", s[i - 1], f"delta panel of layer {i}: e{i} * relu'(a{i}) (diag)", forbid={wbanks[i - 1]})
        if i + 1 < nl and not fused[i]:
            al.alloc(f"dc{i + 1}", s[i] + 1, f"rows copy of dm{i + 1} (transposed-GEMV broadcast)",
                     forbid={wbanks[i]})
    acc = [l for l in sorted(pages) if l >= 1 and len(page_split(L(P[l]), pages[l])) > 1]
    if acc:
        # the partial W^T d of a page after the first, added to e (the axpy streams the two
        # from different banks when it can; the fused kernel writes it out of W's bank)
        eb = al.items[f"e{acc[0]}"].region.bank
        fb = {wbanks[l] for l in acc if fused[l]}
        al.alloc("ep", max(L(N[l]) for l in acc) + (1 << 30 if len(fb) > 1 else 0),   # (never fits)
                 "W^T d partial of one page (cols), added to e page by page: " + ", ".join(f"W{l}" for l in acc),
                 prefer=_other(eb), forbid=fb if len(fb) == 1 else ())
        al.alloc("one", 1, "scalar 1 (every PE)")
    al.alloc("nlr", 1, "scalar -lr (every PE)")
    return al


# ======================================================================================
# compile
# ======================================================================================
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


def host_in_applies(mlp: MLP, softmax: str | None, P: list, host_in: bool = True, bcast_overlap: bool = True) -> bool:
    """Whether a step takes its host input in its first RUN (:func:`compile_chip_sgd`'s
    ``host_in``), layer 0's residence aside: only with the broadcast of ``x`` inside the
    first GEMV and where core 0 takes all of it, ``x`` and the target when the step has
    one (the host stream serves one core at a time while the cores run)."""
    one_run = mlp.loss == "mse" or softmax == "array"
    return bool(host_in) and bool(bcast_overlap) and (not one_run or local_len(mlp.n_out, P[-1]) == 1)


def plan_chip_sgd(cfg, mlp: MLP, P: list, N: list, out_map: str, softmax: str | None, fused: list, spad=None,
                  page_rows: int | None = None, dram=None, host_in: bool = False) -> tuple:
    """Where the weight panels of an SGD step live: ``(wbanks, allocator, {layer:
    SpadPanel})`` (:func:`plan_panels` with :func:`_allocate`; every layer but an output
    layer split by columns can be paged; ``host_in``: :func:`host_in_applies`, no ``x``
    region when layer 0 is resident). Raises :class:`sw.train.TrainCompileError` with
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
                    f"page buffer)" + (f" or streamed from the {cfg.dram_mib} MiB DRAM" if cfg.dram_mib else "")
                    if cfg.spad_kib else "and there is no scratchpad (cfg.spad_kib = 0)"))
    return plan_panels(cfg, P, N, lambda wb, pages: _allocate(cfg, mlp, wb, P, N, out_map, softmax, fused, pages,
                                                              host_in),
                       pageable, spad, page_rows, fail, dram, split_wp=True)


def fewer_slots_if_shorter(build, panels: dict):
    """``build(panels)`` (a step's program from its panels), and when a DRAM panel has
    more than two staging slots (:func:`sw.train_dram.place_dram`), the same ops staged
    through its first two, if that step is shorter: a page's transfer started further
    ahead may hold up, in the engine's queue, a store the next slot waits for.
    ``meta["dram_slots"]``: the step cycles with each number of slots."""
    tp = build(panels)
    many = {l: sp for l, sp in panels.items() if len(getattr(sp, "stage", ())) > 2}
    if not many:
        return tp
    two = build({l: replace(sp, stage=sp.stage[:2]) if l in many else sp for l, sp in panels.items()})
    k = max(len(sp.stage) for sp in many.values())
    tp.meta["dram_slots"] = two.meta["dram_slots"] = {k: tp.step_cycles(), 2: two.step_cycles()}
    return two if two.step_cycles() < tp.step_cycles() else tp


def page_overlap_why_not(cfg, sp, n_in: int) -> str | None:
    """Why the forward GEMVs of the paged panel ``sp`` (``n_in`` inputs) cannot load the
    next page as they stream (:func:`compile_chip_sgd`'s ``page_overlap``), or None."""
    if not sp.one_row_pages:
        return "not several pages of one local row each (SpadPanel.one_row_pages)"
    return page_load_why_not(cfg, cfg.nr, n_in)


def overlap_options(on: bool = True) -> dict:
    """:func:`compile_chip_sgd`'s (and :func:`sw.train_chip_mb.compile_chip_mbgd`'s)
    switches that run collectives beside compute, all ``on`` or all off: the updates'
    first rows in the reduce-scatters (``overlap``), the all-gathers and the broadcast of
    ``x`` inside the GEMVs / GEMMs (``ag_overlap``, ``bcast_overlap``; for SGD the host
    input and output inside the step's programs go with the broadcast, ``host_in``). Each
    keeps the bits of the step; only its cycles change. (CP's one switch is
    ``chain_overlap``.)"""
    return {"overlap": on, "ag_overlap": on, "bcast_overlap": on}


@gc_paused
def compile_chip_sgd(cfg, mlp: MLP, out_map: str = "auto", softmax: str = "auto",
                     backward: str = "auto", overlap: bool = True, spad=None,
                     page_rows: int | None = None, dram=None, ag_overlap: bool = True,
                     bcast_overlap: bool = True, out_reduce: str = "auto",
                     page_overlap: bool = True, host_in: bool = True, page_swap: bool = True) -> ChipSGDProgram:
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
    ``meta["overlap"]``). ``ag_overlap``: the all-gather of each hidden activation runs
    inside the next layer's forward GEMV, which loads the beats from the ring as its
    stream reaches them (:func:`sw.train_chip_ops.ring_in_layers`; the same operations,
    the all-gather's cycles saved; the layers in ``meta["ring_in"]``). ``bcast_overlap``:
    the broadcast of ``x`` likewise inside the first layer's GEMV, each core ``3`` cycles
    (a ring hop) after its predecessor, waiting as long at its end
    (:func:`sw.train_chip_ops._forward_ops`; ``meta["bcast_in"]``). ``out_reduce``: how the
    split output layer's partials are reduced onto core 0 (:func:`resolve_out_reduce`:
    the chain or the stream, another order of the additions, which
    :class:`sw.golden_train_chip.GoldenChipSGD` follows; ``meta["out_reduce"]``). When no assignment of the panels to the banks fits, the largest
    panels are kept in the scratchpad and paged (:func:`plan_chip_sgd`; ``spad`` /
    ``page_rows`` force it): each weight of a paged panel crosses the scratchpad port
    three times per step (loaded for the forward pass, loaded and stored for the
    backward pass). ``page_overlap``: a paged panel whose pages are one local row per PE
    (:func:`page_overlap_why_not`) is stored in word order, and each page's forward GEMV
    loads the next page in place as it streams (:func:`sw.train_chip_ops._paged_forward`;
    the same operations, so the same bits; the panels in ``meta["page_overlap"]``).
    ``page_swap`` (a panel of several pages and a separate update, unless
    ``page_overlap`` is off where it applies): the pages alternate the two bus
    orders, and each backward update stores its page as it computes it while it loads the
    page visited next (:func:`sw.train_paging.rank1_swap_op`; ``meta["page_swap"]``); the
    step is also compiled without, and the shorter kept (``meta["swap_or_not"]``: a
    panel streamed from DRAM may wait longer for the engine).
    ``host_in`` (with ``bcast_overlap``, layer 0 resident in the PE memories, the target
    on core 0 alone): the step's first chip program takes its host input itself, core 0
    loading ``x``'s beats from the host stream as its first GEMV broadcasts them and the
    target panel before it, so no host phase precedes the step
    (:func:`sw.train_chip_ops._chip_ops`; ``meta["host_in"]``).

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
    hx = host_in_applies(mlp, smx, P, host_in, bcast_overlap)
    wbanks, al, panels = plan_chip_sgd(cfg, mlp, P, N, out_map, smx, fused, spad, page_rows, dram, hx)
    if page_overlap:
        panels = {l: replace(sp, order="words") if page_overlap_why_not(cfg, sp, N[l]) is None else sp
                  for l, sp in panels.items()}
    overlapped = sorted(l for l, sp in panels.items() if sp.order == "words")
    if page_swap:                      # the backward updates store their pages and load the next
        panels = {l: replace(sp, order="alt") if len(sp.pages) > 1 and not (l >= 1 and fused[l]) and (
            sp.order == "words" or page_overlap_why_not(cfg, sp, N[l]) is not None) else sp
            for l, sp in panels.items()}
    pol = "a" if set(wbanks) == {"a"} else "search"
    rin = ring_in_layers(cfg, mlp, P, N, out_map, panels) if ag_overlap else []
    bx = bool(bcast_overlap)
    hx = hx and 0 not in panels
    red = resolve_out_reduce(cfg, P[-1] // cfg.nr, out_reduce) if out_map == "cols" else None
    kw = dict(ring_in=rin, bcast_in=bx, out_reduce=red, host_in=hx)
    parts_ops = {}
    if mlp.loss == "mse" or smx == "array":
        parts_ops["step"] = [_chip_ops(cfg, mlp, al, P, N, k, "step", out_map, smx, fused, overlap, panels, **kw)
                             for k in range(c)]
    else:
        parts_ops["forward"] = [_chip_ops(cfg, mlp, al, P, N, k, "forward", out_map, spad=panels, **kw)
                                for k in range(c)]
        parts_ops["backward"] = [_chip_ops(cfg, mlp, al, P, N, k, "backward", out_map, fused=fused,
                                           overlap=overlap, spad=panels) for k in range(c)]
    parts_ops["predict"] = [_chip_ops(cfg, mlp, al, P, N, k, "forward", out_map, spad=panels, **kw)
                            for k in range(c)]
    def build(panels):
        parts, images = _place_parts(cfg, stream_parts(cfg, parts_ops, panels))
        tp = ChipSGDProgram(cfg, mlp, wbanks, al, P, N, parts, images, int(nlr),
                            {"lr_stored": -v, "policy": pol, "out_map": out_map,
                             "overlap": [op.info for ops in parts_ops.values() for op in ops[0]
                                         if "rows_merged" in op.info],
                             "spad_layers": sorted(panels),
                             "page_overlap": overlapped,
                             "page_swap": sorted(l for l, sp in panels.items() if sp.order == "alt"),
                             "ring_in": rin, "bcast_in": bx, "out_reduce": red, "host_in": hx,
                             "pages": {l: len(sp.pages) for l, sp in panels.items()}},
                            out_map=out_map, softmax=smx, fused=fused, spad=panels)
        tp._place_host()
        return tp
    tp = fewer_slots_if_shorter(build, panels)
    if tp.meta["page_swap"]:           # the swaps shorten the page moves, but may wait longer for DRAM
        off = compile_chip_sgd(cfg, mlp, out_map, softmax, backward, overlap, spad, page_rows, dram, ag_overlap,
                               bcast_overlap, out_reduce, page_overlap, host_in, page_swap=False)
        tp.meta["swap_or_not"] = off.meta["swap_or_not"] = {"swap": tp.step_cycles(), "not": off.step_cycles()}
        if off.step_cycles() < tp.step_cycles():
            return off
    return tp
