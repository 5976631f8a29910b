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

    chains d_l of the step before  with the GEMV's first rows in their free slots
                                   (chain_overlap, :mod:`sw.train_cp_overlap`)
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
    chains                         x to G_0; a_{l+1} G_l -> G_{l+1} (chain_overlap=False:
                                   d_l G_{l+1} -> G_l too)

The host loads ``x(s)`` into core 0 (``xin``) and the output core's target, and after the
tail unloads the output core's ``d`` (MSE) or logits (softmax) for the loss: host
phases, core by core, counted in the step's cycles. The pipeline starts empty (all
vectors 0): during the first ``2L - 1`` steps, and when it is drained with zero inputs,
the stages work on zero vectors, whose updates add signed zeros (exactly what the golden
trainer does; the weights' values do not change).

A hidden layer whose cores do not fit the PE memories moves its input history to their
scratchpads, or keeps part of its panels there, whichever moves fewer words per step
(:func:`sw.train_cp_pages.cp_spad_plan`): the head works page by page (load, the page's
forward rows, its part of ``W^T d``, its update, store), so each paged weight crosses the
scratchpad port twice per step, and the tail stores and loads one history input.

:class:`sw.golden_train_cp.GoldenChipCP` is the bit-exact model of the pipeline.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from sw.asm import AsmError
from sw.chain import schedule
from sw.layout import local_len
from sw.mlp import MLP
from sw.ring import ring_text
from sw.softmax import softmax_supported
from sw.train import FUSED_TOLERANCE
from sw.train_chip_place import _build_ops
from sw.train_cp_map import _balance, _check_groups, cp_core_layers, cp_shapes, cp_stage_of
from sw.train_cp_ops import Kit, _kern, _length, _ring_rw, chain_streams  # noqa: F401
from sw.train_cp_dram import head_dma, stream_head
from sw.train_cp_overlap import chains_with_gemv, is_delta
from sw.train_cp_pages import _hist_beats, _hist_kw, _layer_pages, cp_spad_plan, page_moves
from sw.train_cp_program import ChipCPProgram, _kit
from sw.train_cp_shared import SharedKit, allocate_shared
from sw.train_host import TrainCompileError, resolve_softmax
from sw.train_ops import Op
from sw.train_dram import DramPanel

__all__ = ["compile_chip_cp", "ChipCPProgram", "cp_groups", "cp_shapes", "cp_stage_of", "cp_mapping", "cp_plan",
           "CP_HOST_PHASES"]

#: host phases of a step: load (x to core 0, t to the output core), unload (d or logits)
CP_HOST_PHASES = ("in", "out")


# ======================================================================================
# mapping: cores per layer, the fused plan, the paged layers
# ======================================================================================
def cp_groups(cfg, mlp: MLP, groups=None, backward: str = "auto") -> list:
    """Cores per layer (:func:`cp_mapping`'s first result)."""
    return cp_mapping(cfg, mlp, groups, backward)[0]


def cp_mapping(cfg, mlp: MLP, groups=None, backward: str = "auto") -> tuple:
    """``(groups, fused)`` of :func:`cp_plan`."""
    return cp_plan(cfg, mlp, groups, backward)[:2]


def cp_plan(cfg, mlp: MLP, groups=None, backward: str = "auto", shared=None) -> tuple:
    """``(groups, fused, shared, tried)``: :func:`_mapping`'s groups and fused plan for
    the placement whose step compute (:func:`_cost`) is the shortest, ``shared`` its
    layers on the core of the layer before (:mod:`sw.train_cp_shared`; ties: the fewest),
    ``tried`` every placement's ``(shared, groups, fused, cost)``. ``shared`` given: that
    placement. Else (batch 1) every layer on its own cores, and each run of consecutive
    layers whose panels may fit one core's PE memories on one core (its cores go to the
    other layers); given ``groups``, each layer on its own cores, or when they need more
    cores than the chip has, the runs of one-core layers that make them fit."""
    L, c = mlp.n_layers, cfg.cores
    if shared is not None:
        shared = tuple(sorted(int(l) for l in shared))
        if shared and mlp.batch > 1:
            raise TrainCompileError("minibatch CP keeps each layer on its own cores: shared must be empty")
        options = [shared]
    elif mlp.batch > 1 or c < L:
        options = [()]
    elif groups is not None:
        g = [int(x) for x in groups]
        options = [()] if len(g) != L or sum(g) <= c else [sh for sh in _runs(cfg, mlp, g) if sum(g) - len(sh) <= c]
        options = options or [()]
    else:
        options = [()] + _runs(cfg, mlp)
    cache: dict = {}
    tried, err = [], None
    for sh in options:
        try:
            g, f, cost = _mapping(cfg, mlp, groups, backward, sh, cache)
        except TrainCompileError as e:
            err = err or e
            continue
        tried.append((sh, g, f, cost))
    if not tried:
        raise err
    fit = [t for t in tried if t[3] < 1 << 30]                 # the placements whose regions fit
    sh, g, f, _ = min(fit, key=lambda t: (t[3], len(t[0]))) if fit else tried[0]
    tried = fit or tried
    return g, f, sh, tried


def _runs(cfg, mlp: MLP, groups=None) -> list:
    """The placements with one run of two or more consecutive layers on one core (as
    ``shared``: the run's layers after its first), whose panels (unpadded inputs) may
    fit one core's PE memories; with ``groups``, only runs of one-core layers."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    words = [L(m) * L(n) for m, n in (mlp.shape(l) for l in range(mlp.n_layers))]
    out = []
    for a in range(mlp.n_layers - 1):
        for b in range(a + 1, mlp.n_layers):
            if sum(words[a:b + 1]) > cfg.mem_a_words + cfg.mem_b_words:
                break
            if groups is None or all(groups[l] == 1 for l in range(a, b + 1)):
                out.append(tuple(range(a + 1, b + 1)))
    return out


def _mapping(cfg, mlp: MLP, groups, backward: str, shared: tuple, cache: dict) -> tuple:
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
    given = None if groups is None else _check_groups(cfg, mlp, groups, shared)
    start = given or _balance(cfg, mlp, shared)

    def mapped(plan):
        plan = tuple(plan)
        g = given or _refine(cfg, mlp, start, plan, cache, shared)
        return list(g), list(plan), _cost(cfg, mlp, tuple(g), plan, cache, shared)

    sep, fus = (False,) * L, (False,) + (True,) * (L - 1)
    if mlp.batch > 1:
        if backward == "fused":
            raise TrainCompileError("minibatch CP has no fused backward step (its update is a GEMM): "
                                    "backward='auto' or 'separate'")
        return mapped(sep)
    if backward != "auto":
        return mapped(fus if backward == "fused" else sep)
    gs, ps, cs = mapped(sep)
    gf, pf, cf = mapped(fus)
    if cf <= (1 + FUSED_TOLERANCE) * cs:
        return gf, pf, cf
    for l in range(1, L):
        trial = list(ps)
        trial[l] = True
        ct = _cost(cfg, mlp, tuple(gs), tuple(trial), cache, shared)
        if ct <= cs:
            ps, cs = trial, ct
    return gs, ps, cs


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

        def alloc(page=None, hist=-1, res=0, resb=0):
            return kit.allocate(cfg, mlp, P, N, (l, 0), V, smx, fused, page=page, **_hist_kw(hist, res, resb))
        al, sp = alloc(), None
        if not al.fits() and l < mlp.n_layers - 1:
            try:
                sp = page_moves(mlp, _layer_pages(cfg, P, N, l, alloc, hist_beats=_hist_beats(cfg, mlp, N, l)),
                                fused, hide=False)
            except TrainCompileError:          # the panel exceeds the DRAM
                sp = None
            if sp is not None:
                al = alloc(sp.pages[0][1] if sp.pages else 0, sp.hist, sp.res, sp.resb)
        if not al.fits():
            cache[key] = (1 << 30, 0)
        else:
            sp = _swap_or_not(cfg, mlp, kit, al, P, N, (l, 0), smx, fused, sp)
            cache[key] = (_head_cycles(cfg, mlp, kit, al, P, N, (l, 0), smx, fused, sp),
                          _length(cfg, kit.tail(cfg, mlp, al, P, N, (l, 0), 0, V, list(groups), True)))
    return cache[key]


def _head_cycles(cfg, mlp: MLP, kit, al, P: list, N: list, stage, smx, fused: bool, sp) -> int:
    """Cycles of a core's head: its instructions and the DMA's stalls."""
    head = stream_head(cfg, kit.head(cfg, mlp, al, P, N, stage, smx, fused, sp=sp), sp)
    d = head_dma(cfg, head)
    return _length(cfg, head) + d["stall"] + d["tail"]


def _swap_or_not(cfg, mlp: MLP, kit, al, P: list, N: list, stage, smx, fused: bool, sp):
    """``sp`` with the updates' page swaps (``order="alt"``, :func:`sw.train_cp_pages.page_moves`)
    when they shorten the head, else with its pages moved by their own loops: a panel
    streamed from DRAM may wait for the engine longer once the swaps shorten the page
    period (the next page's transfer starts once the page before has left its slot)."""
    if sp is None or sp.order != "alt":
        return sp
    plain = replace(sp, order="rows")
    swapped = _head_cycles(cfg, mlp, kit, al, P, N, stage, smx, fused, sp)
    return sp if swapped <= _head_cycles(cfg, mlp, kit, al, P, N, stage, smx, fused, plain) else plain


def _shared_cost(cfg, mlp: MLP, groups: tuple, layers: tuple, plan: tuple, cache: dict) -> tuple:
    """``(head, tail)`` instructions of a core of several ``layers``
    (:mod:`sw.train_cp_shared`; the tail without the chains); ``(2^30, 0)`` when their
    regions do not fit its PE memories."""
    a = layers[0]
    key = ("shared", layers, groups[a - 1] if a else 0, tuple(plan[l] for l in layers))
    if key not in cache:
        P, N = cp_shapes(cfg, mlp, list(groups))
        V, smx, kit = 2 * (mlp.n_layers - 1), _smx(cfg, mlp), SharedKit(_kit(mlp))
        al = allocate_shared(kit, cfg, mlp, P, N, list(layers), V, smx, plan)
        cache[key] = ((1 << 30, 0) if not al.fits() else
                      (_length(cfg, kit.head(cfg, mlp, al, P, N, (a, 0), smx)),
                       _length(cfg, kit.tail(cfg, mlp, al, P, N, (a, 0), 0, V, list(groups), True))))
    return cache[key]


def _cost(cfg, mlp: MLP, groups: tuple, plan: tuple, cache: dict, shared: tuple = ()) -> int:
    """The step's compute: the longest head plus the longest tail (without the chains);
    a core of several layers (``shared``) counts their ops together."""
    runs = [[l] for l in range(mlp.n_layers) if l not in shared]
    for l in shared:
        next(r for r in runs if r[-1] == l - 1 or l - 1 in r).append(l)
    hc = [_stage_cost(cfg, mlp, groups, r[0], plan[r[0]], cache) if len(r) == 1 else
          _shared_cost(cfg, mlp, groups, tuple(r), plan, cache) for r in runs]
    return max(h for h, _ in hc) + max(t for _, t in hc)


def _refine(cfg, mlp: MLP, g: list, plan: tuple, cache: dict, shared: tuple = ()) -> list:
    """Move single cores between the hidden layers' groups (not those sharing a core,
    ``shared``) while the step's compute (:func:`_cost`, from the kernels' exact
    instruction counts) gets shorter."""
    L = mlp.n_layers
    g = tuple(g)
    fixed = set(shared) | {l - 1 for l in shared}
    best = _cost(cfg, mlp, g, plan, cache, shared)
    improved = True
    while improved:
        improved = False
        for a in range(L - 1):
            for b in range(L - 1):
                if a == b or g[a] <= 1 or a in fixed or b in fixed:
                    continue
                cand = list(g)
                cand[a] -= 1
                cand[b] += 1
                cand = tuple(cand)
                cc = _cost(cfg, mlp, cand, plan, cache, shared)
                if cc < best:
                    g, best, improved = cand, cc, True
    return list(g)


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


#: chains of at most this many streams are scheduled in every order (else three orders)
ALL_ORDERS = 5


def _orders(sts) -> list:
    """The stream orders the chains' scheduler is tried with: every one for a few
    streams (:data:`ALL_ORDERS`), else as given, reversed and the longest paths first."""
    if len(sts) <= ALL_ORDERS:
        return [list(p) for p in itertools.permutations(sts)]
    return [list(sts), sts[::-1], sorted(sts, key=lambda st: -len(st.hops))]


class _StepImage:
    """A CP step's programs being assembled for every core (:func:`compile_chip_cp`): the
    tail variants, with or without their own copy of the chains, and the microcode image
    holding the head, the tails, (the chains,) the output core's second head and the host
    programs, every segment at the same origin on every core."""

    def __init__(self, cfg, mlp: MLP, kit, groups: list, stages: list, P: list, N: list, allocs: list, head: list,
                 head2, stalls: list | None = None, keep=None):
        self.cfg, self.mlp, self.kit, self.groups, self.stages = cfg, mlp, kit, groups, stages
        #: which streams the tail runs (None: all; with chain_overlap the others run in the head)
        self.keep = keep or (lambda st: True)
        #: per core the head's predicted DMA stall cycles (its instructions are fewer by as many)
        self.stalls = stalls or [0] * cfg.cores
        self.P, self.N, self.allocs, self.head, self.head2 = P, N, allocs, head, head2
        self.c, self.V = cfg.cores, 2 * (mlp.n_layers - 1)
        self.out = next(k for k in range(self.c) if stages[k] is not None
                        and mlp.n_layers - 1 in allocs[k].meta.get("layers", [stages[k][0]]))
        self.streams = self.tail_streams(None)
        orders = _orders(self.streams)
        self.pick = min(range(len(orders)), key=lambda o: (schedule(cfg, orders[o]).slots, o))
        self.rw = [kit.ring_rw(cfg, mlp, allocs[k], P, N, stages[k]) for k in range(self.c)]

    def tail_streams(self, j) -> list:
        """The streams of the tail (variant ``j``; None: without the history stores)."""
        return [st for st in self.kit.streams(self.cfg, self.mlp, self.allocs, self.P, self.N, self.groups, j)
                if self.keep(st)]

    def rings(self, sch) -> list:
        """Per core the chains op of the schedule ``sch``."""
        cfg, kit, mlp, P, N = self.cfg, self.kit, self.mlp, self.P, self.N
        return [_ring_op(sch.lines[k], *self.rw[k], text=kit.ring_text(cfg, sch.lines[k], mlp, P, N))
                for k in range(self.c)]

    def tails(self, split: bool) -> tuple:
        """``(tails, chains schedule, chains ops of the split RUN)``: per variant, per
        core, the tail's ops (with the chains unless ``split``). Inline, variant ``j``'s
        chains also store the next input into history slot ``j + 1`` (no copy ain ->
        hist); split (one chains RUN), they cannot."""
        cfg, mlp, kit, allocs, P, N = self.cfg, self.mlp, self.kit, self.allocs, self.P, self.N
        stages, groups, V, c = self.stages, self.groups, self.V, self.c
        out = []
        if split:
            sch = schedule(cfg, _orders(self.streams)[self.pick])
            for j in range(V):
                pre = [kit.tail(cfg, mlp, allocs[k], P, N, stages[k], j, V, groups, False) for k in range(c)]
                plen = [_length(cfg, ops) for ops in pre]
                out.append([ops + ([_nops(cfg, "tpad", max(plen) - n)] if max(plen) - n else [])
                            for ops, n in zip(pre, plen)])
            return out, sch, self.rings(sch)
        for j in range(V):
            sch = schedule(cfg, _orders(self.tail_streams(j))[self.pick])
            ring = self.rings(sch)
            pre = [kit.tail(cfg, mlp, allocs[k], P, N, stages[k], j, V, groups, True) for k in range(c)]
            plen = [_length(cfg, ops + [ring[k]]) - len(sch.lines[k]) for k, ops in enumerate(pre)]
            out.append([ops + ([_nops(cfg, "align", max(plen) - n)] if max(plen) - n else []) + [ring[k]]
                        for k, (ops, n) in enumerate(zip(pre, plen))])
        return out, sch, None

    def layout(self, acfg, tails, ring) -> tuple:
        """``(image, origins, instructions)``: the microcode of every core (head, ``V``
        tails, the chains when ``ring``, head2, host programs)."""
        c, V, out, head2 = self.c, self.V, self.out, self.head2
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

        segs = [("head", self.head)] + [(("tail", j), tails[j]) for j in range(V)]
        if ring is not None:
            segs.append(("chains", [[r] for r in ring]))
        for key, per_core_ops in segs:
            built = [_build_ops(acfg, ops, origin=org) for ops in per_core_ops]
            extra = self.stalls if key == "head" else [0] * c
            n = {i + x for (_, i), x in zip(built, extra)}
            assert len(n) == 1, f"CP {key}: cores issue different instruction counts {n}"
            ins[key if isinstance(key, str) else key[0]] = n.pop()
            place(key, [w for w, _ in built])
        if head2 is not None:               # the output core's RUN after the host's softmax
            built = [_build_ops(acfg, ops, origin=org) for ops in head2]
            ins["head2"] = built[out][1]
            place("head2", [w for w, _ in built])
        for what in CP_HOST_PHASES + (("logits", "g") if head2 is not None else ()):
            place(what, self.kit.host(acfg, self.allocs, self.P, self.N, out, what, org))
        return image, origins, ins


def _delta_chains(cfg, mlp: MLP, kit, allocs, stages, multi, P, N, groups, head) -> tuple:
    """``(why not, head, schedule, rows merged)``: the heads with the delta chains first
    (:func:`sw.train_cp_overlap.chains_with_gemv`: beside the forward GEMV's first rows on
    a core of one layer), their :class:`sw.chain.ChainSchedule` and per core the GEMV rows
    merged, when the longest head plus the tail's chains is shorter so (``why not`` None);
    else the reason and the heads unchanged."""
    sts = kit.streams(cfg, mlp, allocs, P, N, groups, None)
    back = [st for st in sts if is_delta(st)]
    if not back:
        return "no delta chain", head, None, None

    def slots(streams):
        return min((schedule(cfg, o) for o in _orders(streams)), key=lambda s: s.slots)
    sch = slots(back)
    out, merged = [], []
    for k, ops in enumerate(head):
        it = allocs[k].items
        rw = ([(v.region, v.words) for n, v in it.items() if n.split("@")[0] == "e"],
              [(v.region, v.words) for n, v in it.items() if n.split("@")[0] == "din"])
        gv = None
        if stages[k] is not None and k not in multi and ops and ops[0].name == "gemv":
            l = stages[k][0]
            gv = (P[l], N[l], it["W"].region, it["ain"].region, it["z"].region)
        first = chains_with_gemv(cfg, sch.lines[k], rw, gv)
        merged.append(first[0].info.get("rows_merged", 0))
        out.append(first + (ops[1:] if gv else ops))
    before = max(_length(cfg, ops) for ops in head) + slots(sts).slots
    after = max(_length(cfg, ops) for ops in out) + slots([st for st in sts if not is_delta(st)]).slots
    if after >= before:
        return f"not shorter ({after} against {before} cycles of head and chains)", head, None, None
    return None, out, sch, merged


def _check(cfg, mlp: MLP, softmax: str):
    """The checks before mapping; returns where the softmax gradient is computed."""
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
    if mlp.batch > 1:
        from sw.train_cp_mb import check

        check(cfg, mlp, softmax)
        return "host" if mlp.loss == "softmax_ce" else None
    return resolve_softmax(cfg, mlp, "array" if softmax == "auto" and mlp.loss == "softmax_ce" else softmax)


def _fit_message(cfg, mlp: MLP, groups: list, P: list, N: list, l: int, al) -> str:
    """Why a core of layer ``l`` (allocator ``al``) does not fit, with the sizes."""
    nr = cfg.nr
    sp_why = ("; nor with the panel paged from the scratchpad: the output layer's core is never paged"
              if l == mlp.n_layers - 1 else
              f"; nor with the panel paged from the {cfg.spad_depth}-beat scratchpad "
              f"({nr * local_len(P[l], nr) * local_len(N[l], nr)} beats) through a one-row page buffer"
              if cfg.spad_kib else "; there is no scratchpad (cfg.spad_kib = 0)")
    return (f"MLP {'-'.join(map(str, mlp.sizes))} does not fit the CP mapping {groups} on {cfg.cores} cores of "
            f"{nr}x{nr} PEs: a core of layer {l} (panel {P[l]} x {N[l]}) needs MEM A {al.used('a')} + MEM B "
            f"{al.used('b')} words per PE, a PE has MEM A {cfg.mem_a_words} + MEM B {cfg.mem_b_words} words "
            f"of {cfg.fmt}{sp_why} (more cores for that layer, or a bigger PE memory)")


def compile_chip_cp(cfg, mlp: MLP, groups=None, softmax: str = "auto", backward: str = "auto", spad=None,
                    page_rows: int | None = None, dram=None, shared=None, chain_overlap: bool = True,
                    page_swap: bool = True, hide_pages: bool | None = None) -> ChipCPProgram:
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
    page is in the buffer). A panel larger than the scratchpad is streamed from the
    core's DRAM through two staging slots (:mod:`sw.train_cp_dram`; ``dram``: the paged
    layers to stream, tests).

    Consecutive layers may share one core (:mod:`sw.train_cp_shared`; ``shared``: the
    layers on the core of the layer before, default :func:`cp_plan`'s choice by the cost
    model, recorded in :attr:`ChipCPProgram.shared` and ``meta["placements"]``; with
    ``spad`` or ``dram`` given, none).

    ``chain_overlap`` (batch 1, no paged panel): the delta chains run at the start of the
    next head, beside the forward GEMV (:mod:`sw.train_cp_overlap`), the activation
    chains in the tail; False, or a minibatch or paged pipeline: every chain in the tail
    (``meta["chain_overlap"]``). It also moves the pages of a panel paged beside resident
    rows inside their forward GEMV (batch 1, :mod:`sw.train_cp_hide`;
    ``meta["hide_pages"]``, which :meth:`GoldenChipCP.for_program` follows: the sums of
    ``W^T d`` are added pages first). ``page_swap`` (batch 1): the other paged panels of
    a separate update store each page as its update computes it while the next page
    loads in its place (:func:`sw.train_cp_pages.page_moves`, ``meta["page_swap"]``; the
    cost model choosing the mapping assumes it). Where both apply, the step is compiled
    both ways and the shorter kept (``meta["hide_or_swap"]``: the step cycles of each;
    ``hide_pages`` False: the swaps, True: the GEMV, when both apply).

    Raises :class:`sw.train.TrainCompileError` for a network the pipeline cannot take
    (fewer cores than layers, no hidden layer), panels that do not fit a PE's memory nor
    the scratchpad (with the sizes), or a program that does not fit the microcode."""
    given = dict(groups=groups, softmax=softmax, backward=backward, spad=spad, page_rows=page_rows, dram=dram,
                 shared=shared, page_swap=page_swap, hide_pages=hide_pages)
    smx = _check(cfg, mlp, softmax)
    c, nr, nl = cfg.cores, cfg.nr, mlp.n_layers
    kit = SharedKit(_kit(mlp))
    if shared is None and (spad is not None or dram is not None):
        shared = ()                   # an explicit page plan: every layer on its own cores
    groups, fused, shared, tried = cp_plan(cfg, mlp, groups, backward, shared)
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
    stages = cp_stage_of(groups, c, shared)
    hide = chain_overlap if hide_pages is None else hide_pages and chain_overlap
    spads = cp_spad_plan(cfg, mlp, P, N, groups, fused, smx, spad, page_rows, dram, hide=hide, swap=page_swap)
    paged = sorted(set(spads) & ({l - 1 for l in shared} | set(shared)))
    if paged:
        raise TrainCompileError(f"layers {paged} share a core (shared {list(shared)}): their panels must stay in the "
                                f"PE memories, not paged from the scratchpad")
    multi = {k: [l for l, _ in sts] for k, sts in enumerate(cp_core_layers(groups, c, shared)) if len(sts) > 1}

    def page(st):
        sp = None if st is None else spads.get(st[0])
        return None if sp is None else sp.pages[0][1] if sp.pages else 0

    def hist(st):
        sp = None if st is None else spads.get(st[0])
        return {} if sp is None else _hist_kw(sp.hist, sp.res, sp.resb)
    allocs = [allocate_shared(kit, cfg, mlp, P, N, multi[k], V, smx, fused) if k in multi else
              kit.allocate(cfg, mlp, P, N, st, V, smx, st is not None and fused[st[0]], page=page(st), **hist(st))
              for k, st in enumerate(stages)]
    for k, al in enumerate(allocs):
        if not al.fits():
            if k in multi:
                raise TrainCompileError(f"layers {multi[k]} do not fit one core of {nr}x{nr} PEs: they need MEM A "
                                        f"{al.used('a')} + MEM B {al.used('b')} words per PE, a PE has MEM A "
                                        f"{cfg.mem_a_words} + MEM B {cfg.mem_b_words} (share fewer layers)")
            raise TrainCompileError(_fit_message(cfg, mlp, groups, P, N, stages[k][0], al))
    head2 = ([kit.head2(cfg, mlp, allocs[k], P, N, stages[k]) for k in range(c)]
             if smx == "host" and kit.head2 is not None else None)
    for l, sp in list(spads.items()):        # the swaps only where they shorten the head
        k = next(k for k, st in enumerate(stages) if st is not None and st[0] == l)
        spads[l] = _swap_or_not(cfg, mlp, kit, allocs[k], P, N, stages[k], smx, fused[l], sp)
    # head: every core's compute, padded to the longest
    sps = [spads.get(stages[k][0]) if stages[k] else None for k in range(c)]
    head = [stream_head(cfg, kit.head(cfg, mlp, allocs[k], P, N, stages[k], smx,
                                      stages[k] is not None and fused[stages[k][0]], sp=sps[k]), sps[k])
            for k in range(c)]
    ov = "off" if not chain_overlap else "minibatch" if mlp.batch > 1 else "paged panels" if spads else None
    dsch = merged = None
    if ov is None:
        ov, head, dsch, merged = _delta_chains(cfg, mlp, kit, allocs, stages, multi, P, N, groups, head)
    dma = [head_dma(cfg, ops) for ops in head]
    # the head's cycles: instructions plus the DMA stalls; every core padded to the longest
    hl = [_length(cfg, ops) + d["stall"] + d["tail"] for ops, d in zip(head, dma)]
    H = max(hl)
    head = [ops + ([_nops(cfg, "hpad", H - n)] if H - n else []) for ops, n in zip(head, hl)]
    step = _StepImage(cfg, mlp, kit, groups, stages, P, N, allocs, head, head2,
                      [d["stall"] + d["tail"] for d in dma], keep=None if ov else (lambda st: not is_delta(st)))
    # the chains in every tail variant (one RUN fewer per step), or, when that does not
    # fit the microcode, once, as a third RUN
    for split in (False, True):
        tails, sch, ring = step.tails(split)
        try:
            image, origins, ins = step.layout(cfg, tails, ring)
            break
        except AsmError:                 # a program ran past ucode_depth
            if split:                    # measure the total for the message
                used = len(step.layout(replace(cfg, ucode_depth=1 << 16), tails, ring)[0][0])
                if used <= cfg.ucode_depth:  # pragma: no cover - another assembler error
                    raise
                # the straight-line GEMV rows (the chains', the hidden pages' hosts) cost
                # microcode: every chain in the tail, every page move in its loop
                if chain_overlap and (ov is None or any(sp.hide for sp in spads.values())):
                    tp = compile_chip_cp(cfg, mlp, **given, chain_overlap=False)
                    tp.meta["chain_overlap_off"] = f"microcode ({used} words per core with it)"
                    return tp
                raise TrainCompileError(f"the CP step's programs need {used} microcode words per core (head, {V} "
                                        f"tail variants, the chains, host programs), the core holds "
                                        f"{cfg.ucode_depth} (ArchConfig.ucode_depth)") from None
    crit = max(range(c), key=lambda k: (hl[k], -k))
    tp = kit.program(cfg, mlp, groups, stages, P, N, V, allocs, head, tails, image, origins, ins, int(nlr),
                       softmax=smx, fused=fused, chains=sch, split_chains=split, shared=tuple(shared),
                       meta={"lr_stored": -v, "critical_core": crit, "head_lengths": hl,
                             "placements": [(list(sh), g, f, cst) for sh, g, f, cst in tried],
                             "spad_layers": sorted(spads), "pages": {l: len(sp.pages) for l, sp in spads.items()},
                             "dram_layers": sorted(l for l, sp in spads.items() if isinstance(sp, DramPanel)),
                             "head_dma": dma, "chain_overlap": ov is None, "chain_overlap_off": ov,
                             "head_chains": dsch, "rows_merged": merged, "hide_pages": hide,
                             "page_swap": sorted(l for l, sp in spads.items() if sp.order == "alt")},
                       spad=spads)
    if hide_pages is None and page_swap and any(sp.hide and not fused[l] for l, sp in spads.items()):
        # the pages moved inside the resident rows' GEMV, or stored and loaded by the updates
        alt = compile_chip_cp(cfg, mlp, **{**given, "hide_pages": False}, chain_overlap=chain_overlap)
        tp.meta["hide_or_swap"] = alt.meta["hide_or_swap"] = {"hide": tp.step_cycles(), "swap": alt.step_cycles()}
        if alt.step_cycles() < tp.step_cycles():
            return alt
    return tp
