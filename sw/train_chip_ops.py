"""The ops of one core in an SGD step across cores (:func:`_chip_ops`): the single-core
kernels on its panels joined by the ring collectives, panels paged from the scratchpad
where they do not fit, and the first rows of an update merged into a reduce-scatter's
free slots; with the ops continuous propagation shares (the fused backward step, a
page's ``W^T d`` accumulation)."""

from __future__ import annotations

from sw.collectives import Region, cost_broadcast, cost_reduce, emit_broadcast, emit_reduce
from sw.kernels import (Scalar, emit_axpy, emit_gemv, emit_gemv_t_rank1, emit_rank1, emit_relu_mask,
                        gemv_cost, page_load_why_not, rank1_cost, rank1_lines)
from sw.layout import local_len
from sw.mlp import MLP
from sw.overlap import merge_rows
from sw.ring import (all_gather_lines, broadcast_lines, gemv_ring_check, reduce_lines, reduce_scatter_vec_lines,
                     reduce_stream_lines, ring_text)
from sw.train_alloc import Allocator
from sw.train_ops import Op, _fused_tail
from sw.train_paging import BUS, SpadPanel, page_swap_op, spad_op, swap_next
from sw.train_softmax import softmax_op
from sw.train_vectors import emit_load_vector, emit_unload_diag

__all__ = ["fused_backward_op", "page_sum_op", "ring_in_layers"]


#: ring lines and texts by their arguments (pure functions of them; the cores of a chip
#: ask for the same ones): :func:`_memo`
_LINES_MEMO: dict = {}


def _memo(fn, *args, **kw):
    """``fn(*args, **kw)``, computed once per distinct arguments (a list result handed out
    as a copy: callers may not change the memo)."""
    key = (fn.__name__, tuple(tuple(a) if isinstance(a, list) else a for a in args), tuple(sorted(kw.items())))
    hit = _LINES_MEMO.get(key)
    if hit is None:
        if len(_LINES_MEMO) >= 256:
            _LINES_MEMO.pop(next(iter(_LINES_MEMO)))
        hit = _LINES_MEMO[key] = fn(*args, **kw)
    return list(hit) if isinstance(hit, list) else hit


def _ring_op(cfg, name, lines, reads, writes, fma_wb=False, per_core=False, kind="ring", info=None):
    text = _memo(ring_text, cfg, lines, loop=f"{name}_")
    n = len(lines)

    def emit(b, text=text, n=n):
        b.text(text)
        return n

    return Op(name, kind, emit, reads=reads, writes=writes, fma_wb=fma_wb, stores=not fma_wb, per_core=per_core,
              info=info or {})


def _host_io_op(name: str, kind: str, n: int, out: bool, emit_io, **kw) -> Op:
    """An op of ``n`` instructions moving ``n`` host beats (``emit_io(builder)``) on a
    core with host traffic (``out``), as many NOPs elsewhere, so every core issues the
    same instructions."""
    def emit(b):
        if out:
            return emit_io(b)
        for _ in range(n):
            b.nop()
        return n

    return Op(name, kind, emit, per_core=True, words=n, **kw)


def host_target_op(cfg, t: Region, n: int, out: bool) -> Op:
    """The target panel ``t`` (``n`` local words, ``rows`` layout) from the host stream on
    an output core (``out``), one beat per word (:func:`sw.train_vectors.emit_load_vector`)."""
    return _host_io_op("in_t", "load", n, out, lambda b: emit_load_vector(b, cfg, t, n, "rows", "ldt"),
                       writes=[(t, n)], data="t", info={"host_in": "t"})


def host_out_op(cfg, z: Region, n: int, out: bool) -> Op:
    """The output panel ``z`` (``n`` local words, diag) to the host stream on an output
    core (``out``), one beat per word (:func:`sw.train_vectors.emit_unload_diag`)."""
    return _host_io_op("out_z", "unload", n, out, lambda b: emit_unload_diag(b, cfg, z, n, "ulz"),
                       reads=[(z, n)], data="z")


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


def paged_accumulate(sp: "SpadPanel", fused: bool) -> bool:
    """Whether the paged panel ``sp``'s ``W^T d`` (the separate backward step, not
    ``fused``) is accumulated in every PE across its pages, one row at a time, and
    reduced down the PE columns once (:func:`_paged_backward`): pages of one local row."""
    return not fused and sp.one_row_pages


def _accumulate_op(cfg, name: str, first: bool, words: int, WP, dr: Region, ep) -> Op:
    """``ep = d_r * W_p`` (``first``) or ``ep = d_r * W_p + ep``
    (:func:`sw.kernels.emit_axpy`): one local row's products of ``W^T d``, ``d_r`` the PE's
    element of ``d`` at ``dr``."""
    alpha = Scalar(dr.bank, dr.base)
    return Op(name, "axpy", lambda b: emit_axpy(b, cfg, words, alpha, WP, ep, name=f"{name}_",
                                                accumulate=not first).instructions,
              reads=[(WP, words), (dr, 1)] + ([] if first else [(ep, words)]), writes=[(ep, words)], fma_wb=True,
              stores=False)


def _paged_backward(cfg, l, sp: "SpadPanel", R: dict, P, N, d, dlay, dcopy, v, fused: bool,
                    resident: bool = False, accumulate: bool = False) -> list:
    """Ops of layer ``l``'s backward step with its panel in the scratchpad, page by page
    from the last page to the first: load the page into ``WP`` (not the last page when
    ``resident``: the forward pass left it there); ``l >= 1``: its part of ``e = W_l^T d``
    (the old weights; the first page visited into ``e``, each further one into ``ep`` and
    added to ``e`` by an axpy with 1); its rows of the update (fused: the same pass);
    store the page back. ``accumulate`` (:func:`paged_accumulate`): instead, ``d`` in the
    rows layout first (``dcopy``, broadcast from the diagonal), every page's products
    ``d_r W_p`` accumulated in ``ep`` (each PE's chain over its local rows, last to
    first), and after the last page one reduction of ``ep`` down the PE columns into
    ``e`` (:func:`sw.golden.gemv_t_reversed`)."""
    nr, L = cfg.nr, (lambda x: local_len(x, cfg.nr))
    WP, ln = R.get(f"WP{l}", R.get("WP")), L(N[l])
    ops = []
    last = len(sp.pages) - 1
    acc = accumulate and l >= 1
    drows = d
    if acc and dlay == "diag":
        drows, lr = dcopy, sp.lrows
        ops.append(Op(f"bcd{l}", "bcast", lambda b: (emit_broadcast(b, cfg, "row", lr, d, dcopy, name=f"bd{l}_"),
                                                     cost_broadcast(cfg, lr, "row").instructions)[1],
                      reads=[(d, lr)], writes=[(dcopy, lr)]))
    # pages in alternating bus orders, the update separate: each page's update stores it
    # while it loads the page visited next (sw.train_paging.rank1_swap_op)
    swaps = {} if l >= 1 and fused else swap_next(cfg, sp, -1)
    for p in range(last, -1, -1):
        r0, n = sp.pages[p]
        w, dp = sp.page_words(p), _at(d, r0)
        if not (resident and p == last) and p + 1 not in swaps:
            ops.append(spad_op(cfg, f"lb{l}_{p}", False, WP, w, sp.page_addr(nr, p), sp.page_order(p)))
        if acc:
            ops.append(_accumulate_op(cfg, f"acc{l}_{p}", p == last, w, WP, _at(drows, r0), R["ep"]))
        elif l >= 1:
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
        swap = None if l >= 1 and fused else page_swap_op(cfg, f"rs{l}_{p}", sp, p, swaps, N[l], WP, dp, v, R["nlr"],
                                                           dlay)
        if swap is not None:
            ops.append(swap)
            continue
        if not (l >= 1 and fused):
            ops.append(_rank1_op(cfg, l, n * nr, N[l], WP, dp, dlay, v, R["nlr"], tag=f"_{p}"))
        ops.append(spad_op(cfg, f"sb{l}_{p}", True, WP, w, sp.page_addr(nr, p), sp.page_order(p)))
    if acc:
        e, ep = R[f"e{l}"], R["ep"]
        ops.append(Op(f"red{l}", "reduce", lambda b: (emit_reduce(b, cfg, "col", ln, ep, e, dst_layout="cols",
                                                                  name=f"re{l}_"),
                                                      cost_reduce(cfg, ln, "tree", "col").instructions)[1],
                      reads=[(ep, ln)], writes=[(e, ln)]))
    return ops


def ring_in_layers(cfg, mlp: MLP, P: list, N: list, out_map: str, spad: dict | None = None) -> list:
    """The layers ``l >= 1`` whose forward GEMV can take its gathered input from the ring
    as the stream reaches it (the all-gather merged into the GEMV,
    :func:`sw.ring.gemv_ring_check`): those whose input is gathered (all but the split
    output layer's); a paged layer's first page does it."""
    s, spad = [p // cfg.nr for p in P], spad or {}
    out = []
    for l in range(1, mlp.n_layers):
        if out_map == "cols" and l == mlp.n_layers - 1:
            continue
        rows = spad[l].pages[0][1] * cfg.nr if l in spad else P[l]
        if gemv_ring_check(cfg, s[l - 1], gemv_cost(cfg, rows, N[l])["Lc"]) is None:
            out.append(l)
    return out


def _paged_forward(cfg, l: int, sp: "SpadPanel", WP, n_in: int, xin, xc, y, rin) -> list:
    """Layer ``l``'s forward GEMV page by page (:func:`_forward_ops`): each page's load,
    then its rows of ``z`` (the first page broadcasts the input from the diagonal and
    keeps its cols copy, the others read the copy). With ``sp.order == "words"`` a
    page's GEMV loads the next page in place as it streams
    (:func:`sw.kernels.emit_gemv`'s ``page_load``, where :func:`page_load_why_not`
    allows it): one op, whose ``info["spad"]`` is that load's and ``info["respad"]``
    rebuilds it for another scratchpad address (:func:`sw.train_dram.stream_parts`)."""
    nr, L = cfg.nr, (lambda x: local_len(x, cfg.nr))
    ops, loaded = [], False
    for p, (r0, n) in enumerate(sp.pages):
        w = sp.page_words(p)
        if not loaded:
            ops.append(spad_op(cfg, f"lf{l}_{p}", False, WP, w, sp.page_addr(nr, p), sp.page_order(p)))
        xi, yp = (xin if p == 0 else xc), _at(y, r0)
        xr = rin if p == 0 else None
        reads = [(WP, w), (xi, xr[0] if xr and l else L(n_in))]
        writes = [(yp, n)] + ([(xc, L(n_in) + 1)] if p == 0 else [])
        loaded = (sp.order in ("words", "alt") and p + 1 < len(sp.pages) and sp.page_words(p + 1) == w
                  and page_load_why_not(cfg, n * nr, n_in, x_ring=xr, diag_x=p == 0) is None)
        nxt = sp.page_order(p + 1) if loaded else None

        def op(addr, p=p, n=n, xi=xi, yp=yp, xr=xr, reads=reads, writes=writes, load=loaded, nxt=nxt):
            def emit(b):
                return emit_gemv(b, cfg, n * nr, n_in, WP, xi, yp, x_layout="diag" if p == 0 else None,
                                 x_copy=xc if p == 0 else None, name=f"fw{l}_{p}_", x_ring=xr,
                                 page_load=addr if load else None, x_relu=p == 0 and l > 0,
                                 page_bus=BUS.get(nxt, "row")).instructions
            if not load:
                return Op(f"gemv{l}_{p}", "gemv", emit, reads=reads, writes=writes)
            return Op(f"gemv{l}_{p}+lf{p + 1}", "gemv+spad", emit, reads=reads, writes=writes + [(WP, w)],
                      info={"spad": (False, WP, w, addr), "order": nxt, "respad": op})
        ops.append(op(sp.page_addr(nr, p + 1) if loaded else None))
    return ops


def _forward_ops(cfg, mlp: MLP, R: dict, P: list, N: list, k: int, split: bool, spad: dict, ring_in: set,
                 bcast_in: bool, out_reduce: str = "chain", host_in: bool = False) -> list:
    """The forward pass of core ``k`` (:func:`_chip_ops`): the broadcast of ``x``, per
    layer the GEMV (page by page for a paged panel) and the all-gather (or the reduce of
    the split output layer). A hidden layer's output stays a pre-activation ``z`` in
    SRAM: the next layer's GEMV applies the ReLU as it loads its input (``x_relu`` of
    :func:`sw.kernels.emit_gemv`), so its cols copy (the rank-1 update's ``v``) holds
    ``relu(z)``, and the backward mask reads ``z`` (``z > 0`` exactly when ``relu(z) >
    0``). ``ring_in``: layers whose GEMV takes the
    all-gather in (``x_ring``). ``bcast_in``: the broadcast of ``x`` inside the first
    layer's GEMV (page): core ``k`` loads ``x``'s beats from the ring (core 0 from its
    diagonal) and sends them on as it loads them (but the last core), ``3 k`` slots
    after core 0 (the ring hop): ``bcast_x`` waits ``3 k`` slots before it,
    ``bcast_x_sync`` ``3 (c - 1 - k)`` after it, so every core leaves it together.
    ``out_reduce``: the split output layer's reduce, ``"chain"`` or ``"stream"``
    (:func:`sw.train_chip_map.resolve_out_reduce`). ``host_in`` (with ``bcast_in``, layer 0
    resident): core 0 takes ``x``'s beats from the host stream instead of its diagonal
    (``x_host`` of :func:`sw.kernels.emit_gemv`) as its first GEMV loads them and sends
    them on."""
    nr, nl, L, c = cfg.nr, mlp.n_layers, (lambda n: local_len(n, cfg.nr)), cfg.cores
    s = [p // nr for p in P]
    ops = []

    def kern(name, kind, fn, reads, writes, fma_wb=False):
        ops.append(Op(name, kind, lambda b, fn=fn: fn(b).instructions, reads=reads, writes=writes, fma_wb=fma_wb,
                      stores=not fma_wb))

    x = R.get("x")
    if not bcast_in:
        ops.append(_ring_op(cfg, "bcast_x", broadcast_lines(cfg, k, L(N[0]), (x.bank, x.base), (x.bank, x.base)),
                            [(x, L(N[0]))], [(x, L(N[0]))]))
    for l in range(nl):
        xin, xc = (x, R["xc"]) if l == 0 else (R[f"a{l}"], R[f"c{l}"])
        y = R[f"a{l + 1}"] if l < nl - 1 else R["z"]
        # the all-gather of a_l runs inside this GEMV: own segment from the diagonal,
        # the others from the ring, all but the last core's sent on as they are loaded
        rin = (s[l - 1], (c - 1) * s[l - 1]) if l in ring_in else None
        if l == 0 and bcast_in:
            rin = (L(N[0]) if k == 0 else 0, L(N[0]) if k < c - 1 else 0)
        if l in spad:
            ops += _paged_forward(cfg, l, spad[l], R.get(f"WP{l}", R.get("WP")), N[l], xin, xc, y, rin)
        else:
            W = R[f"W{l}"]
            wn = L(P[l]) * L(N[l])
            xh = l == 0 and host_in and k == 0            # x from the host stream, not the diagonal
            kern(f"gemv{l}", "gemv", lambda b, l=l, W=W, xin=xin, xc=xc, y=y, rin=rin, xh=xh:
                 emit_gemv(b, cfg, P[l], N[l], W, None if xh else xin, y, x_layout="diag", x_copy=xc,
                           name=f"fw{l}_", x_ring=rin, x_relu=l > 0, x_host=xh),
                 [(W, wn)] + ([] if l == 0 and host_in else [(xin, rin[0] if rin and l else L(N[l]))]),
                 [(y, s[l]), (xc, L(N[l]) + 1)])
            if xh:
                ops[-1].info["host_in"] = "x"
        if rin:
            g = next(o for o in ops if o.name in (f"gemv{l}", f"gemv{l}_0"))
            g.info["ring_in"] = l
            if l == 0:
                # the wait takes the GEMV's reads (the gap before it), the sync its writes
                # as stores (the gap after it)
                g.per_core = True
                i = ops.index(g)
                ops[i:i + 1] = [_ring_op(cfg, "bcast_x", ["nop"] * (3 * k), list(g.reads), [], per_core=True), g,
                                _ring_op(cfg, "bcast_x_sync", ["nop"] * (3 * (c - 1 - k)), [], list(g.writes),
                                         per_core=True)]
        if l < nl - 1:
            if not (split and l == nl - 2) and l + 1 not in ring_in:
                ops.append(_ring_op(cfg, f"ag{l + 1}", _memo(all_gather_lines, cfg, s[l], y.bank, y.base),
                                    [(y, cfg.cores * s[l])], [(y, cfg.cores * s[l])]))
        elif split:
            red = reduce_stream_lines if out_reduce == "stream" else reduce_lines
            ops.append(_ring_op(cfg, "reduce_z", red(cfg, k, s[l], y.bank, y.base, 0),
                                [(y, s[l])], [(y, s[l])], fma_wb=True, per_core=True))
    return ops


def _chip_ops(cfg, mlp: MLP, al: Allocator, P: list, N: list, k: int, part: str, out_map: str = "rows",
              softmax: str | None = None, fused: list | None = None, overlap: bool = False,
              spad: dict | None = None, ring_in: list | None = None, bcast_in: bool = False,
              out_reduce: str = "chain", host_in: bool = False) -> list:
    """Ops of core ``k``: ``part`` = ``"step"`` (MSE: the whole step), ``"forward"``
    (softmax: up to the logits; also the predict pass), ``"backward"`` (softmax: from
    the loaded gradient). ``out_map="cols"``: the output layer is split by columns
    (:func:`sw.train_chip.chip_shapes`): its input is each core's own panel (no all-gather), its
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
    overlap: the update is done by then). ``ring_in``: the layers whose forward GEMV
    takes its input from the ring instead of an all-gather before it
    (:func:`ring_in_layers`; ``x_ring`` of :func:`sw.kernels.emit_gemv`); ``bcast_in``:
    the broadcast of ``x`` likewise inside the first layer's GEMV (:func:`_forward_ops`);
    ``host_in``: the step takes its host input itself, ``x`` in core 0's first GEMV
    (:func:`_forward_ops`) and, in a ``"step"`` part, first the target panel on core 0,
    the only output core (:func:`host_target_op`); and sends its output itself, the
    output panels (the logits, or MSE's ``d``) as soon as they are final
    (:func:`host_out_op`)."""
    nr, nl, L = cfg.nr, mlp.n_layers, (lambda n: local_len(n, cfg.nr))
    ring_in = set(ring_in or ())
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
        if host_in and part == "step":
            ops.append(host_target_op(cfg, R["t"], s[nl - 1], k < local_len(mlp.n_out, P[-1])))
        ops += _forward_ops(cfg, mlp, R, P, N, k, split, spad, ring_in, bcast_in, out_reduce, host_in)
        out = host_out_op(cfg, R["z"], s[nl - 1], k < local_len(mlp.n_out, P[-1])) if host_in else None
        if part == "forward":
            return ops + ([out] if out else [])
        if softmax == "array":
            if out:
                ops.append(out)                        # the logits
            ops.append(softmax_op(cfg, R, al, mlp.n_out, R["z"], z_layout="diag", core=k))
            d, dlay, dcopy = R["g"], "rows", None
        else:
            m1 = Scalar(R["m1"].bank, R["m1"].base)
            z, so = R["z"], s[nl - 1]
            kern("loss_grad", "axpy", lambda b: emit_axpy(b, cfg, so, m1, R["t"], z, name="lg_"),
                 [(R["t"], so), (z, so), (R["m1"], 1)], [(z, so)], fma_wb=True)
            if out:
                ops.append(out)                        # d = z - t
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
            ops += _paged_backward(cfg, l, spad[l], R, P, N, d, dlay, dcopy, v, fused[l], resident=l == max(spad),
                                   accumulate=paged_accumulate(spad[l], fused[l]))
            if l >= 1:
                e, a, dm = R[f"e{l}"], R[f"a{l}"], R[f"dm{l}"]
                if not (split and l == nl - 1):
                    ops.append(_ring_op(cfg, f"rs{l}", _memo(reduce_scatter_vec_lines, cfg, s[l - 1], e.bank, e.base),
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
                rs = _memo(reduce_scatter_vec_lines, cfg, s[l - 1], e.bank, e.base)
                chunk = (cfg.n_regs - 3) // 2          # the reduce-scatter's registers below the update's
                op = None
                if overlap and not fused[l] and chunk >= 1:
                    # in smaller chunks (other passes) only when the default ones need the update's registers
                    rs_ov = _memo(reduce_scatter_vec_lines, cfg, s[l - 1], e.bank, e.base, chunk=chunk)
                    op, rest = _rs_with_rank1(cfg, l, rs_ov, P[l], N[l], W, d, dlay, v, R["nlr"], e, s[l - 1])
                    if op.info["instructions"] + op.info["rest_instructions"] >= \
                            len(rs) + rank1_cost(cfg, P[l], N[l], alpha=True)["instructions"]:
                        op, rest = None, None              # the overlap would not shorten the step
                if op is not None:
                    ops.append(op)
                else:
                    ops.append(_ring_op(cfg, f"rs{l}", rs, [(e, L(N[l]))], [(e, s[l - 1])], fma_wb=True))
            # the update (or its rows left from the reduce-scatter) before the mask: it
            # does not read e_l, so it needs no wait for the reduce-scatter's last adds,
            # and the mask's store is what the next transposed GEMV waits for
            if rest is not None:
                if rest:
                    ops.append(rest)
            elif not fused[l]:
                ops.append(_rank1_op(cfg, l, P[l], N[l], W, d, dlay, v, R["nlr"]))
            kern(f"mask{l}", "relu_mask", lambda b, l=l, e=e, a=a, dm=dm:
                 emit_relu_mask(b, cfg, s[l - 1], e, a, dm, layout="diag", name=f"mk{l}_"),
                 [(e, s[l - 1]), (a, s[l - 1])], [(dm, s[l - 1])])
            continue
        if not fused[l]:
            ops.append(_rank1_op(cfg, l, P[l], N[l], W, d, dlay, v, R["nlr"]))
    return ops


#: _rs_with_rank1's results by its arguments: the cores of a chip merge the same rows into
#: the same reduce-scatter (their ops are shared: they are not modified once built)
_RS_MEMO: dict = {}


def _rs_with_rank1(cfg, l, rs, m, n, W, d, dlay, v, nlr, e, seg) -> tuple:
    """:func:`_merge_rs_rank1`, computed once per distinct arguments (every core of a
    chip asks for the same merge)."""
    key = (cfg, l, tuple(rs), m, n, W, d, dlay, v, nlr, e, seg)
    hit = _RS_MEMO.get(key)
    if hit is None:
        if len(_RS_MEMO) >= 64:
            _RS_MEMO.pop(next(iter(_RS_MEMO)))
        hit = _RS_MEMO[key] = _merge_rs_rank1(cfg, l, rs, m, n, W, d, dlay, v, nlr, e, seg)
    return hit


def _merge_rs_rank1(cfg, l, rs, m, n, W, d, dlay, v, nlr, e, seg) -> tuple:
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
