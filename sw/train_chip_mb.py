"""Compile minibatch gradient descent of an MLP across the cores of a chip, and run it.

``compile_chip_mbgd(cfg, mlp) -> ChipMBProgram`` is the minibatch counterpart of
:func:`sw.train_chip.compile_chip_sgd`, mapped as in the reference design: core ``k``
holds row panel ``k`` of every weight matrix (``P_l = nr ceil(m_l / (c nr))`` rows, the
last panels padded with zero rows), activations are ``n x b`` matrices (one sample per
column) in the 2D round-robin layout, every layer is a GEMM on the panels (the kernels
of :mod:`sw.train_mb`), and the ring joins them with the matrix collectives of
:mod:`sw.ring_mat` (``docs/training.md``, "Minibatch GD across the cores of a chip").
One step (``loss="mse"``)::

    host: X (n0 x b) and X^T -> core 0; T panel k -> output core k
    broadcast X, X^T from core 0                            mat_broadcast (row-bus chain)
    for l = 0 .. L-1:
        Z_k = W_l[k] A_l                                     emit_gemm, into A_{l+1}'s segment k
        hidden: relu (own segment), all-gather A_{l+1}       mat_all_gather: every core gets
                                                             all of A_{l+1} (N_{l+1} x b)
    D_k = Z_k - T_k                                          emit_axpy on the output panel
    for l = L-1 .. 0:
        l >= 1: D^T = transpose(D_k)                         emit_transpose (P_l x b, small)
                dX^T = D^T W_l[k]                            emit_gemm: a partial of b x N_l
                reduce-scatter dX^T by column segments       mat_reduce_scatter: core k gets
                                                             the sum of its P_{l-1} columns
                E_k = transpose(that segment)                emit_transpose(src_ld=...)
                E_k = E_k * relu'(A_l segment k)             emit_relu_mask
        A_l^T = X^T (l = 0), else each core transposes its   emit_transpose(dst_ld=...)
                segment of A_l into its column block of A^T,
                and the blocks are all-gathered              mat_all_gather
        W_l[k] += (-lr/b) D_k A_l^T                          emit_gemm(accumulate=True)
        D_k = E_k
    host: D panel k <- output core k

Unlike batch-1 SGD across cores, gathered activations sit in the global order on every
core (each collective stores every segment at its own place), so the weight columns
are not permuted. ``loss="softmax_ce"``: the forward chip RUN ends with the logits
unloaded from the output cores, the host computes ``G = fmt(softmax(z) - t)`` per
column and loads its panels, and the backward pass runs in a second chip RUN; the
turnaround is counted as :data:`sw.train.HOST_LATENCY_CYCLES` once per minibatch.
:class:`sw.golden_train_chip_mb.GoldenChipMBGD` is the bit-exact model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from sw.collectives import emit_transpose
from sw.ring_mat import MatBlock, mat_all_gather, mat_broadcast, mat_reduce, mat_reduce_scatter
from sw.ring_mat_t import mat_broadcast_t
from sw.train_chip_mb_ring import cheapest, ring_fw_layers, ring_gemm, ring_up_layers, ring_update
from sw.asm import Builder
from sw.kernels import Scalar, emit_axpy, emit_gemm, emit_relu, emit_relu_mask, gemm_page_load_why_not
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.train import (HOST_LATENCY_CYCLES, Allocator, Op, TrainCompileError, _other, host_softmax_grad, mse_loss,
                      softmax_ce_loss)
from sw.train_chip import (ChipSGDProgram, ChipStepResult, PhaseLog, _at, _place_parts, chip_shapes,
                           fewer_slots_if_shorter, plan_panels, resolve_out_map, spad_op)
from sw.train_chip_mb_acts import acts_lines, allocate_chip_mb_reuse, xt_from_host, xt_source, xt_spad_beats
from sw.train_dram import stream_parts
from sw.train_mb import MBProgram
from sw.transfer import decode_unload, emit_load, emit_unload, load_beats_for, load_cost, unload_cost

__all__ = ["compile_chip_mbgd", "ChipMBProgram", "allocate_chip_mb", "mb_page_overlap_why_not"]


# ======================================================================================
# memory allocation (the same addresses on every core)
# ======================================================================================
def allocate_chip_mb(cfg, mlp: MLP, wbanks: list, P: list, N: list, out_map: str = "rows",
                     pages: dict | None = None) -> Allocator:
    """Every region of the step (``out_map``: :func:`sw.train_chip.chip_shapes`).
    ``pages``: layer -> local rows per page of the layers whose panels live in the
    scratchpad; they share one page buffer ``WP`` (in their common bank ``wbanks[l]``)
    instead of a panel region. Bank rules: each GEMM's two operands in different banks
    (forward ``W_l`` vs ``A_l``; backward ``D^T`` vs ``W_l``; update ``D_l`` vs
    ``A_l^T``), the axpy's and the mask's streamed operands in different banks. ``D^T``,
    ``A^T`` (one region per bank the rules need), ``dX^T`` and the transpose stage are
    scratch shared by the layers."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    nl, b = mlp.n_layers, mlp.batch
    Lb = L(b)
    al = Allocator(cfg)
    cols = out_map == "cols"
    pages = pages or {}
    for l in range(nl):
        if l in pages:
            continue
        what = (f"column panel of W{l} ({P[l]} rows x {N[l]} of {mlp.shape(l)[1]} columns)"
                if cols and l == nl - 1 else f"row panel of W{l} ({P[l]} of {mlp.shape(l)[0]} rows x {N[l]})")
        al.alloc(f"W{l}", L(P[l]) * L(N[l]), what, bank=wbanks[l])
    if pages:
        ls = sorted(pages)
        al.alloc("WP", max(pages[l] * L(N[l]) for l in ls),
                 "page buffer of the panels in the scratchpad (" + ", ".join(
                     f"W{l}: {pages[l] * cfg.nr} of {P[l]} rows" for l in ls) + " per page)", bank=wbanks[ls[0]])
    al.alloc("X", L(N[0]) * Lb, f"input minibatch A0 ({N[0]} x {b}; core 0 loads it, the ring broadcasts it)",
             forbid={wbanks[0]})
    for i in range(1, nl):
        what = (f"own segment of A{i} = relu(W{i - 1} A{i - 1}) ({N[i]} x {b}; not gathered: the output layer "
                f"is split by columns)" if cols and i == nl - 1 else
                f"A{i} = relu(W{i - 1} A{i - 1}) gathered ({N[i]} x {b}; own segment computed, the others by the "
                f"all-gather)")
        al.alloc(f"A{i}", L(N[i]) * Lb, what, forbid={wbanks[i]})
    z = al.alloc("Z", L(P[-1]) * Lb, f"output partial ({P[-1]} x {b}), reduced onto core 0; MSE: D = Z - T in "
                 f"place, broadcast from core 0" if cols else f"output panel ({P[-1]} x {b}); MSE: D = Z - T in place")
    if mlp.loss == "mse":
        al.alloc("T", L(P[-1]) * Lb, f"target panel ({P[-1]} x {b}, loaded per step)", bank=_other(z.bank))
        al.alloc("m1", 1, "scalar -1 (every PE)")
        dbank = {nl - 1: z.bank}
    else:
        where = "(core 0 loads it, the ring broadcasts it) " if cols else "panel "
        g = al.alloc("G", L(P[-1]) * Lb, f"output gradient {where}softmax(Z) - T ({P[-1]} x {b}, loaded per step)")
        dbank = {nl - 1: g.bank}
    for i in range(nl - 1, 0, -1):
        a = al.items[f"A{i}"].region
        e = al.alloc(f"E{i}", L(P[i - 1]) * Lb, f"delta panel of A{i}: (W{i}^T D{i + 1}) * relu'(A{i}) "
                     f"({P[i - 1]} x {b})", forbid={a.bank})
        dbank[i - 1] = e.bank
    al.alloc("XT", Lb * L(N[0]), f"X^T ({b} x {N[0]}; {xt_source(cfg)})",
             forbid={dbank[0]})
    need: dict = {}
    for l in range(1, nl):
        for key, words in ((("DT", _other(wbanks[l])), Lb * L(P[l])), (("AT", _other(dbank[l])), Lb * L(N[l]))):
            need[key] = max(need.get(key, 0), words)
    for (role, bank), words in sorted(need.items()):
        what = "D^T (transposed output delta panel)" if role == "DT" else "A^T (transposed gathered layer input)"
        al.alloc(f"{role}_{bank}", words, what + ", shared by the layers", bank=bank)
    if nl > 1:
        al.alloc("EXT", max(Lb * L(N[l]) for l in range(1, nl)),
                 "dX^T = D^T W partial (b x N), reduce-scattered by column segments; shared")
        st = max(max(L(P[l]) * Lb, Lb * L(P[l - 1])) for l in range(1, nl))
        al.alloc("stage", st, "transpose stage (diagonal PEs), shared")
    al.alloc("nlr", 1, "scalar -lr/b (every PE)")
    return al


def plan_chip_mb(cfg, mlp: MLP, P: list, N: list, out_map: str = "rows", spad=None,
                 page_rows: int | None = None, dram=None, acts: str = "auto") -> tuple:
    """Where the weight panels and activations live: ``(wbanks, allocator, {layer:
    SpadPanel})`` (:func:`sw.train_chip.plan_panels`; the row-panel layers can be paged).
    ``acts``: ``"resident"`` (:func:`allocate_chip_mb`, every gathered activation kept),
    ``"reuse"`` (:func:`sw.train_chip_mb_acts.allocate_chip_mb_reuse`: two activation
    buffers, ``X^T`` in the scratchpad, each bank its page buffer), ``"auto"``: resident
    when some plan fits so, else reuse (``allocator.meta["acts"]``). Raises
    :class:`sw.train.TrainCompileError` with the sizes when nothing fits."""
    if acts not in ("auto", "resident", "reuse"):
        raise TrainCompileError(f"acts must be 'auto', 'resident' or 'reuse', got {acts!r}")
    nl = mlp.n_layers
    pageable = [l for l in range(nl) if not (out_map == "cols" and l == nl - 1)]
    err = None
    if acts != "reuse":
        try:
            wb, al, panels = plan_panels(
                cfg, P, N, lambda wb, pages: allocate_chip_mb(cfg, mlp, wb, P, N, out_map, pages), pageable, spad,
                page_rows, fail=lambda al: _sizes_message(cfg, mlp, al, P, N), dram=dram)
            al.meta["acts"] = "resident"
            return wb, al, panels
        except TrainCompileError as e:
            if acts == "resident":
                raise
            err = e

    def fail(al):
        msg = (f"with the activations reused (two buffers, X^T in the scratchpad) each core needs MEM A "
               f"{al.used('a')} + MEM B {al.used('b')} words per PE with every panel resident, and no paged plan fits "
               f"either (MEM A {cfg.mem_a_words} + MEM B {cfg.mem_b_words})")
        first = err if err is not None else \
            _sizes_message(cfg, mlp, allocate_chip_mb(cfg, mlp, ["a"] * nl, P, N, out_map), P, N)
        return f"{first}; {msg}"          # acts="reuse": the resident plan's sizes first
    return plan_panels(cfg, P, N, lambda wb, pages: allocate_chip_mb_reuse(cfg, mlp, wb, P, N, out_map, pages),
                       pageable, spad, page_rows, fail=fail, dram=dram, split_wp=True,
                       reserve=xt_spad_beats(cfg, mlp, N), grow=True)


# ======================================================================================
# the ops of one step on core k
# ======================================================================================
def _issued(res) -> int:
    """Instructions a kernel issued: a :class:`sw.kernels.KernelInfo` or a collective's
    :class:`sw.collectives.Frag`."""
    return res.instructions if hasattr(res, "instructions") else res.count()


def _emit_frag(frag):
    return lambda b, f=frag: (b.text(f.text), f.slots)[1]


def _ring_op(name, frag, reads, writes, fma_wb=False):
    return Op(name, "ring", _emit_frag(frag), reads=reads, writes=writes, fma_wb=fma_wb, stores=not fma_wb,
              per_core=True)


class _CoreOps:
    """The ops of core ``k`` as :func:`chip_mb_ops` builds them (:attr:`ops`, in order),
    with the region lookups they share."""

    def __init__(self, cfg, mlp: MLP, al: Allocator, P: list, N: list, k: int, out_map: str, spad: dict | None,
                 ring_fw=(), ring_up=()):
        self.cfg, self.mlp, self.P, self.N, self.k = cfg, mlp, P, N, k
        self.ring_fw, self.ring_up = set(ring_fw), set(ring_up)
        self.split = out_map == "cols"
        self.spad = spad or {}
        self.Lb = local_len(mlp.batch, cfg.nr)
        self.R = {n: v.region for n, v in al.items.items()}
        self.Wn = {n: v.words for n, v in al.items.items()}
        self.nlr = Scalar(self.R["nlr"].bank, self.R["nlr"].base)
        self.xt_spad = al.meta.get("xt_spad")
        self.ops: list = []

    def wp(self, l):
        """Layer ``l``'s page buffer."""
        return self.R.get(f"WP{l}", self.R.get("WP"))

    def seg(self, l):
        """This core's own segment of ``A_l`` as the backward pass reads it, in the
        gathered ``A_l`` or its copy ``S_l`` (compact allocation): ``(address, (region,
        words))``, the second declared for the hazards (the whole region: the same on
        every core)."""
        L = lambda n: local_len(n, self.cfg.nr)                    # noqa: E731
        if f"S{l}" in self.R:
            return self.R[f"S{l}"], self.whole(f"S{l}")
        return _at(self.R[f"A{l}"], self.own(l) * L(self.P[l - 1]) * self.Lb), self.whole(f"A{l}")

    def own(self, l):
        """This core's segment index in A_l (0 where only the own segment is stored)."""
        return 0 if self.split and l == self.mlp.n_layers - 1 else self.k

    def kern(self, name, kind, fn, reads, writes, fma_wb=False, per_core=False):
        self.ops.append(Op(name, kind, lambda bl, fn=fn: _issued(fn(bl)), reads=reads, writes=writes,
                           fma_wb=fma_wb, stores=not fma_wb, per_core=per_core))

    def whole(self, name):
        return (self.R[name], self.Wn[name])

    def forward(self, part: str) -> None:
        """Broadcast ``X`` (and ``X^T`` but for ``predict``), then per layer its GEMM
        (page by page for a paged panel), a hidden layer's ReLU and all-gather, or the
        reduction of a column-split output layer's partial products."""
        cfg, P, N, k, R, spad = self.cfg, self.P, self.N, self.k, self.R, self.spad
        L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
        nl, b, Lb, split = self.mlp.n_layers, self.mlp.batch, self.Lb, self.split
        kern, whole, own, ops = self.kern, self.whole, self.own, self.ops
        names = ([] if 0 in self.ring_fw else ["X"]) + ([] if part == "predict" else ["XT"])
        blks = {nm: MatBlock(R[nm].bank, R[nm].base, cols, 0, rows, 0, cols)
                for nm, (rows, cols) in (("X", (L(N[0]), Lb)), ("XT", (Lb, L(N[0]))))}
        for nm in names:
            if nm == "XT" and not xt_from_host(cfg):
                # X^T: the transpose of core 0's X, made by the ring on the way
                frag = mat_broadcast_t(cfg, k, blks["X"], blks["XT"], root=0, name="bcXT_")
                ops.append(_ring_op("bcast_XT", frag, [whole("X")], [whole("XT")]))
                continue
            blk = blks[nm]
            ops.append(_ring_op(f"bcast_{nm}", mat_broadcast(cfg, k, blk, blk, root=0, name=f"bc{nm}_"),
                                [whole(nm)], [whole(nm)]))
        if "XTb" in R and part != "predict":       # X^T waits in the scratchpad for W0's update
            ops.append(spad_op(cfg, "stXT", True, R["XT"], self.Wn["XT"], self.xt_spad))
        for l in range(nl):
            W, xin = R.get(f"W{l}"), R["X"] if l == 0 else R[f"A{l}"]
            hidden = l < nl - 1
            yname = f"A{l + 1}" if hidden else "Z"
            y = _at(R[yname], own(l + 1) * L(P[l]) * Lb) if hidden else R["Z"]
            if l in spad:
                self.paged_forward(l, xin, y, yname, hidden)
            elif l in self.ring_fw:
                # the broadcast of X (l = 0) or the all-gather of A_l inside the GEMM
                ops.append(Op(f"gemm{l}", "gemm", _emit_frag(ring_gemm(cfg, k, l, P, N, b, W, xin, y)),
                              reads=[whole(f"W{l}"), (xin, L(N[l]) * Lb)], writes=[whole(yname)], per_core=True))
            else:
                kern(f"gemm{l}", "gemm", lambda bl, l=l, W=W, xin=xin, y=y:
                     emit_gemm(bl, cfg, P[l], N[l], b, W, xin, y, name=f"fw{l}_"),
                     [whole(f"W{l}"), (xin, L(N[l]) * Lb)], [whole(yname)], per_core=hidden)
            if hidden:
                n = L(P[l]) * Lb
                kern(f"relu{l + 1}", "relu", lambda bl, y=y, n=n, l=l: emit_relu(bl, cfg, n, y, y, name=f"re{l}_"),
                     [whole(yname)], [whole(yname)], per_core=True)
                sn = f"S{l + 1}"
                if sn in R and R[sn] != R[yname]:
                    # the own segment kept for the backward pass (ReLU is idempotent: a copy)
                    kern(f"keep{l + 1}", "relu", lambda bl, y=y, n=n, l=l, S=R[sn]:
                         emit_relu(bl, cfg, n, y, S, name=f"ke{l}_"), [whole(yname)], [whole(sn)], per_core=True)
                A = R[yname]
                seg = (lambda s, A=A, l=l: MatBlock(A.bank, A.base, Lb, s * L(P[l]), L(P[l]), 0, Lb))
                if not (split and l == nl - 2) and l + 1 not in self.ring_fw:
                    ops.append(_ring_op(f"ag{l + 1}", mat_all_gather(cfg, k, seg, name=f"ag{l + 1}_"),
                                        [whole(yname)], [whole(yname)]))
            elif split:
                Z = R["Z"]
                blk = MatBlock(Z.bank, Z.base, Lb, 0, L(P[l]), 0, Lb)
                ops.append(_ring_op("reduce_Z", mat_reduce(cfg, k, blk, root=0, name="rz_"), [whole("Z")],
                                    [whole("Z")], fma_wb=True))

    def paged_forward(self, l, xin, y, yname, hidden) -> None:
        """Layer ``l``'s forward GEMM page by page: each page's load, then its rows of
        the output. With ``order == "words"`` a page's GEMM loads the next page in place
        as it runs (:func:`sw.kernels.emit_gemm`'s ``page_load``): one op, whose
        ``info["spad"]`` is that load's and ``info["respad"]`` rebuilds it for another
        scratchpad address (:func:`sw.train_dram.stream_parts`)."""
        cfg, N, b, Lb, nr = self.cfg, self.N, self.mlp.batch, self.Lb, self.cfg.nr
        sp, WP = self.spad[l], self.wp(l)
        reads_x = (xin, local_len(N[l], nr) * Lb)
        loaded = False
        for p, (r0, n) in enumerate(sp.pages):
            w = sp.page_words(p)
            if not loaded:
                self.ops.append(spad_op(cfg, f"ld{l}_{p}", False, WP, w, sp.page_addr(nr, p), sp.order))
            loaded = sp.order == "words" and p + 1 < len(sp.pages) and sp.page_words(p + 1) == w

            def op(addr, p=p, n=n, yp=_at(y, r0 * Lb), w=w, load=loaded):
                def emit(bl):
                    return emit_gemm(bl, cfg, n * nr, N[l], b, WP, xin, yp, name=f"fw{l}_{p}_",
                                     page_load=addr if load else None).instructions
                kw = dict(reads=[(WP, w), reads_x], writes=[self.whole(yname)], stores=True, per_core=hidden)
                if not load:
                    return Op(f"gemm{l}_{p}", "gemm", emit, **kw)
                return Op(f"gemm{l}_{p}+ld{p + 1}", "gemm+spad", emit, **(kw | {"writes": kw["writes"] + [(WP, w)]}),
                          info={"spad": (False, WP, w, addr), "order": sp.order, "respad": op})
            self.ops.append(op(sp.page_addr(nr, p + 1) if loaded else None))

    def loss_grad(self):
        """MSE: ``D = Z - T`` in place (an axpy with -1); returns ``D``'s region."""
        cfg, R, whole = self.cfg, self.R, self.whole
        m1 = Scalar(R["m1"].bank, R["m1"].base)
        kz = self.Wn["Z"]
        self.kern("loss_grad", "axpy", lambda bl: emit_axpy(bl, cfg, kz, m1, R["T"], R["Z"], name="lg_"),
                  [whole("T"), whole("Z"), whole("m1")], [whole("Z")], fma_wb=True)
        return R["Z"]

    def backward(self, part: str, D) -> None:
        """From the output delta ``D`` (broadcast first when the output layer is split
        by columns), per layer from the last: ``dX^T``, its reduce-scatter, transpose and
        mask (``l >= 1``), ``A^T`` and the update (page by page for a paged panel)."""
        cfg, P, N, k, R, spad = self.cfg, self.P, self.N, self.k, self.R, self.spad
        L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
        nl, b, Lb, split = self.mlp.n_layers, self.mlp.batch, self.Lb, self.split
        kern, whole, nlr = self.kern, self.whole, self.nlr
        if split:
            nm = "Z" if part == "step" else "G"
            blk = MatBlock(D.bank, D.base, Lb, 0, L(P[-1]), 0, Lb)
            self.ops.append(_ring_op(f"bcast_{nm}", mat_broadcast(cfg, k, blk, blk, root=0, name="bD_"), [whole(nm)],
                                     [whole(nm)]))
        for l in range(nl - 1, -1, -1):
            W, paged = R.get(f"W{l}"), l in spad
            if l >= 1:
                DT, EXT, E = R[f"DT_{_other(W.bank if W else self.wp(l).bank)}"], R["EXT"], R[f"E{l}"]
                st = R["stage"]
                kd = L(P[l]) * Lb
            if l == 0:
                AT = R.get("XTb", R["XT"])
                if "XTb" in R:
                    self.ops.append(spad_op(cfg, "ldXT", False, AT, self.Wn["XTb"], self.xt_spad))
            else:
                AT = R[f"AT_{_other(D.bank)}"]
            if paged:
                # A^T first, then page by page: dX^T += D_p^T W_p (old weights), W_p += (-lr/b) D_p A^T
                if l >= 1:
                    self.at_ops(l, AT)
                self.paged_backward(l, D, AT, DT if l >= 1 else None, EXT if l >= 1 else None,
                                    st if l >= 1 else None)
                if l >= 1:
                    self.reduce_ops(l, EXT, E, st)
            else:
                if l >= 1:
                    kern(f"tpD{l}", "transpose", lambda bl, l=l, D=D, DT=DT, st=st:
                         emit_transpose(bl, cfg, P[l], b, D, DT, st, name=f"td{l}_"),
                         [(D, kd), (st, kd)], [(DT, kd), (st, kd)])
                    kern(f"gemm_bw{l}", "gemm", lambda bl, l=l, DT=DT, W=W, EXT=EXT:
                         emit_gemm(bl, cfg, b, P[l], N[l], DT, W, EXT, name=f"bw{l}_"),
                         [(DT, kd), whole(f"W{l}")], [(EXT, Lb * L(N[l]))])
                    self.reduce_ops(l, EXT, E, st)
                    self.at_ops(l, AT)
                if l in self.ring_up:
                    # the all-gather of A^T's column blocks inside the update
                    fr = ring_update(cfg, k, l, P, N, b, D, AT, W, nlr)
                    self.ops.append(Op(f"update{l}", "gemm_acc", _emit_frag(fr), reads=[
                        (D, L(P[l]) * Lb), (AT, Lb * L(N[l])), whole(f"W{l}"), whole("nlr")], writes=[whole(f"W{l}")],
                        fma_wb=True, stores=False, wb_tail=3, per_core=True))
                    D = R[f"E{l}"]
                    continue
                kern(f"update{l}", "gemm_acc", lambda bl, l=l, D=D, AT=AT, W=W:
                     emit_gemm(bl, cfg, P[l], b, N[l], D, AT, W, accumulate=True, alpha=nlr, name=f"up{l}_"),
                     [(D, L(P[l]) * Lb), (AT, Lb * L(N[l])), whole(f"W{l}"), whole("nlr")], [whole(f"W{l}")],
                     fma_wb=True)
            if l >= 1:
                D = R[f"E{l}"]

    def at_ops(self, l, AT) -> None:
        """``A^T``: every core transposes its own segment of ``A_l`` into its column block
        of ``A^T``, then the column blocks are all-gathered (cheaper than transposing all
        of ``A_l`` on every core)."""
        cfg, P, k, R, Lb, b = self.cfg, self.P, self.k, self.R, self.Lb, self.mlp.batch
        L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
        st = R["stage"]
        ka, sp, ld = L(self.N[l]) * Lb, L(P[l - 1]), L(self.N[l])
        o = self.own(l)
        src, decl = self.seg(l)
        self.kern(f"tpA{l}", "transpose", lambda bl, l=l, src=src, AT=AT, st=st, sp=sp, ld=ld, o=o:
                  emit_transpose(bl, cfg, P[l - 1], b, src, _at(AT, o * sp), st, dst_ld=ld,
                                 name=f"ta{l}_"),
                  [decl, (st, sp * Lb)], [(AT, ka), (st, sp * Lb)], per_core=True)
        if not (self.split and l == self.mlp.n_layers - 1) and l not in self.ring_up:
            seg = (lambda s, AT=AT, ld=ld, sp=sp: MatBlock(AT.bank, AT.base, ld, 0, Lb, s * sp, sp))
            self.ops.append(_ring_op(f"agT{l}", mat_all_gather(cfg, k, seg, name=f"agT{l}_"), [(AT, ka)],
                                     [(AT, ka)]))

    def reduce_ops(self, l, EXT, E, st) -> None:
        """The reduce-scatter of ``dX^T`` (not for a column-split output layer: each core
        computed its own segment), the transpose of this core's segment into ``E_l`` and
        its ReLU mask."""
        cfg, P, k, Lb, b, own = self.cfg, self.P, self.k, self.Lb, self.mlp.batch, self.own
        L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
        ld, sp = L(self.N[l]), L(P[l - 1])
        seg = (lambda s, EXT=EXT, ld=ld, sp=sp: MatBlock(EXT.bank, EXT.base, ld, 0, Lb, s * sp, sp))
        if not (self.split and l == self.mlp.n_layers - 1):
            self.ops.append(_ring_op(f"rs{l}", mat_reduce_scatter(cfg, k, seg, name=f"rs{l}_"),
                                     [(EXT, Lb * ld)], [(EXT, Lb * ld)], fma_wb=True))
        ke = Lb * sp
        self.kern(f"tpE{l}", "transpose", lambda bl, l=l, EXT=EXT, E=E, st=st, ld=ld, sp=sp:
                  emit_transpose(bl, cfg, b, P[l - 1], _at(EXT, own(l) * sp), E, st, src_ld=ld, name=f"te{l}_"),
                  [(EXT, Lb * ld), (st, ke)], [(E, ke), (st, ke)], per_core=True)
        oseg, decl = self.seg(l)
        self.kern(f"mask{l}", "relu_mask", lambda bl, l=l, E=E, oseg=oseg, ke=ke:
                  emit_relu_mask(bl, cfg, ke, E, oseg, E, name=f"mk{l}_"),
                  [(E, ke), decl], [(E, ke)], per_core=True)

    def paged_backward(self, l, D, AT, DT, EXT, st) -> None:
        """Layer ``l``'s paged panel, last page first (the last paged layer's last page is
        still in ``WP`` from the forward pass): load the page, ``l >= 1``: its part of
        ``dX^T`` (accumulated over the pages), its update, store it back."""
        cfg, N, spad, Lb, b, nlr = self.cfg, self.N, self.spad, self.Lb, self.mlp.batch, self.nlr
        L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
        nr, kern, ops = cfg.nr, self.kern, self.ops
        ld = L(N[l])
        spn, WP = spad[l], self.wp(l)
        last = len(spn.pages) - 1
        for p in range(last, -1, -1):
            r0, n = spn.pages[p]
            w, Dp, kp, acc = spn.page_words(p), _at(D, r0 * Lb), n * Lb, p != last
            if not (l == max(spad) and p == last):
                ops.append(spad_op(cfg, f"lb{l}_{p}", False, WP, w, spn.page_addr(nr, p), spn.order))
            if l >= 1:
                kern(f"tpD{l}_{p}", "transpose", lambda bl, n=n, Dp=Dp, DT=DT, st=st, l=l, p=p:
                     emit_transpose(bl, cfg, n * nr, b, Dp, DT, st, name=f"td{l}_{p}_"),
                     [(Dp, kp), (st, kp)], [(DT, kp), (st, kp)])
                kern(f"gemm_bw{l}_{p}", "gemm_acc" if acc else "gemm",
                     lambda bl, n=n, DT=DT, EXT=EXT, l=l, p=p, acc=acc:
                     emit_gemm(bl, cfg, b, n * nr, N[l], DT, WP, EXT, accumulate=acc, name=f"bw{l}_{p}_"),
                     [(DT, kp), (WP, w)] + ([(EXT, Lb * ld)] if acc else []), [(EXT, Lb * ld)], fma_wb=acc)
            kern(f"update{l}_{p}", "gemm_acc", lambda bl, n=n, Dp=Dp, AT=AT, l=l, p=p:
                 emit_gemm(bl, cfg, n * nr, b, N[l], Dp, AT, WP, accumulate=True, alpha=nlr, name=f"up{l}_{p}_"),
                 [(Dp, kp), (AT, Lb * L(N[l])), (WP, w), self.whole("nlr")], [(WP, w)], fma_wb=True)
            ops.append(spad_op(cfg, f"st{l}_{p}", True, WP, w, spn.page_addr(nr, p), spn.order))


def chip_mb_ops(cfg, mlp: MLP, al: Allocator, P: list, N: list, k: int, part: str, out_map: str = "rows",
                spad: dict | None = None, ring_fw=(), ring_up=()) -> list:
    """Ops of core ``k``: ``part`` = ``"step"`` (MSE: the whole step), ``"forward"``
    (softmax: up to the logits), ``"backward"`` (softmax: from the loaded gradient),
    ``"predict"`` (forward without ``X^T``). Regions that differ per core (the own
    segment of a gathered matrix) are declared as the whole region, so the NOPs between
    ops are the same on every core. ``out_map="cols"``: the output layer is split by
    columns (:func:`sw.train_chip.chip_shapes`): its input is not gathered, its partial products
    are reduced onto core 0 and its gradient is broadcast from there. ``spad``: layer ->
    :class:`sw.train_chip.SpadPanel`, the panels paged through ``WP``: per page a load,
    the page's rows of the forward GEMM; in the backward pass ``A^T`` first, then per page
    from the last to the first a load (not for the last paged layer's last page, still in
    ``WP``), its part of ``dX^T`` (accumulated over the pages), its update and a store.
    ``ring_fw``: the layers whose forward GEMM takes its input from the ring
    (:func:`ring_fw_layers`), without the collective before it; ``ring_up``: the layers
    whose update takes the all-gather of ``A^T``'s blocks off the ring (:func:`ring_up_layers`)."""
    c = _CoreOps(cfg, mlp, al, P, N, k, out_map, spad, ring_fw, ring_up)
    if part in ("step", "forward", "predict"):
        c.forward(part)
        if part in ("forward", "predict"):
            return c.ops
        D = c.loss_grad()
    else:
        D = c.R["G"]
    c.backward(part, D)
    return c.ops


# ======================================================================================
# the compiled program and its host side
# ======================================================================================
@dataclass
class ChipMBProgram(ChipSGDProgram):
    """A compiled minibatch step across the cores. Weight loading and read-back, chip
    RUNs, placement of the host programs and the cycle accounting are
    :class:`sw.train_chip.ChipSGDProgram`'s; the columns of the weight panels are in the
    natural order (the collectives keep the global order), ``neg_lr`` is ``-lr/b``."""

    def _cols(self, l, k):
        return None

    # -- figures ------------------------------------------------------------------------
    def _words(self, name) -> int:
        return self.alloc.items[name].words

    def host_phase_cycles(self) -> list:
        """``(name, cycles)`` of the step's host phases: the RUNs of their active cores
        back to back (:func:`sw.train_mb.load_cost` / ``unload_cost`` instructions, plus
        HALT, start latency and drain)."""
        cfg = self.cfg
        run = cfg.run_overhead
        K, kz = self.out_cores, self._words("Z")
        x = load_cost(cfg, self._words("X")) + (load_cost(cfg, self._words("XT")) if xt_from_host(cfg) else 0)
        out = K * (unload_cost(cfg, kz) + run)
        if self.mlp.loss == "mse":
            t = load_cost(cfg, kz)
            # core 0 loads X, X^T (and its T panel); the other output cores their T panel
            return [("in", x + run + (K - 1) * (t + run) + t), ("d", out)]
        return [("in", x + run), ("logits", out), ("g", K * (load_cost(cfg, kz) + run))]

    def _title(self) -> str:
        return "minibatch GD step"

    def describe(self) -> str:
        """:meth:`ChipSGDProgram.describe` with where the activations live."""
        lines = super().describe().split("\n")
        at = next((i for i, ln in enumerate(lines) if ln.startswith(("W0 panel", "scratchpad beats"))), len(lines))
        return "\n".join(lines[:at] + acts_lines(self.cfg, self.alloc, self.mlp) + self._schedule_lines() + lines[at:])

    def _schedule_lines(self) -> list:
        """Which forward collectives run inside the GEMMs, and why the others do not."""
        rfw, why = self.meta.get("ring_fw", []), self.meta.get("ring_fw_why", {})
        name = lambda l: "broadcast of X" if l == 0 else f"all-gather of A{l}"      # noqa: E731
        out = [f"forward collectives inside the GEMMs: {', '.join(f'{name(l)} in W{l} A' for l in rfw) or 'none'}"]
        out += [f"  {name(l)} before the GEMM of W{l}: {w}" for l, w in sorted(why.items())]
        up, uw = self.meta.get("ring_up", []), self.meta.get("ring_up_why", {})
        out.append("backward collectives inside the GEMMs: " + (", ".join(
            f"all-gather of A{l}^T in the update of W{l}" for l in up) or "none"))
        out += [f"  all-gather of A{l}^T before the update of W{l}: {w}" for l, w in sorted(uw.items())]
        return out

    # -- host programs ------------------------------------------------------------------
    def _host_programs(self, what: str, origin: int) -> list:
        """Per core the program of a host phase: ``in`` (X, X^T on core 0; MSE: T panels
        on the output cores), ``in_x`` (X only), ``unload`` (Z / D panels of the output
        cores), ``g`` (gradient panels)."""
        cfg, R = self.cfg, self.regions
        imgs = []
        for k in range(cfg.cores):
            b = Builder(cfg, origin=origin)
            out = k < self.out_cores
            loads = []
            if what in ("in", "in_x") and k == 0:
                loads += ["X"] + (["XT"] if what == "in" and xt_from_host(cfg) else [])
            if what == "in" and out and self.mlp.loss == "mse":
                loads.append("T")
            if what == "g" and out:
                loads.append("G")
            for i, nm in enumerate(loads):
                emit_load(b, cfg, R[nm].bank, R[nm].base, self._words(nm), loop=f"h{i}_")
            if what == "unload" and out:
                emit_unload(b, cfg, R["Z"].bank, R["Z"].base, self._words("Z"), loop="hz_")
            b.halt()
            imgs.append(b.build().words())
        return imgs

    # -- host data ----------------------------------------------------------------------
    _mat = MBProgram._mat
    targets = MBProgram.targets

    def _panel_m(self, M, k):
        p, b = self.P[-1], self.mlp.batch
        pad = np.zeros((self.cfg.cores * p, b), dtype=self.cfg.fmt.np_uint)
        pad[:M.shape[0]] = M
        return pad[k * p:(k + 1) * p]

    def _run_host(self, session, what, mats=None, name=""):
        cfg, nr = self.cfg, self.cfg.nr
        data = [[] for _ in range(cfg.cores)]
        for k in self._active(what):
            if what in ("in", "in_x") and k == 0:
                data[k] += load_beats_for(cfg, pack_matrix(mats["X"], nr))
                if what == "in" and xt_from_host(cfg):
                    data[k] += load_beats_for(cfg, pack_matrix(mats["X"].T, nr))
            if what == "in" and self.mlp.loss == "mse":
                data[k] += load_beats_for(cfg, pack_matrix(self._panel_m(mats["T"], k), nr))
            if what == "g":
                data[k] += load_beats_for(cfg, pack_matrix(self._panel_m(mats["G"], k), nr))
        imgs, org = self._host_images(what)
        return session.run(imgs, data, name, org, active=self._active(what))

    def _outputs(self, res) -> np.ndarray:
        cfg, kz = self.cfg, self._words("Z")
        vals = [unpack_matrix(decode_unload(cfg, res[k].out, kz), self.P[-1], self.mlp.batch)
                for k in range(self.out_cores)]
        return np.concatenate(vals)[:self.mlp.n_out]

    def _check_host(self, name, session, res, cyc):
        """The host phase's cycles as predicted (``cyc`` less the LOADs before it)."""
        exp = dict(self.host_phase_cycles())[name]
        loads = getattr(session, "loads", None)
        if cyc - (loads.last_cycles if loads is not None else 0) != exp:
            raise AssertionError(f"host phase {name}: {cyc} cycles, predicted {exp}")
        return res, cyc

    # -- steps --------------------------------------------------------------------------
    def run_step(self, session, X, T, *, host_latency: int = HOST_LATENCY_CYCLES) -> ChipStepResult:
        """One minibatch step: ``X`` the ``n_in x b`` inputs (one sample per column),
        ``T`` the ``n_out x b`` targets (``softmax_ce``: or ``b`` class indices).
        ``loss`` is the mean of the samples' losses, ``output`` the ``n_out x b`` network
        output (floats)."""
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        b = mlp.batch
        tf = self.targets(T)
        mats = {"X": self._mat(X, mlp.n_in, "X")}
        if mlp.loss == "mse":
            mats["T"] = self._mat(T, mlp.n_out, "T")
        log = PhaseLog(cfg.cores, session)
        note = log.note

        note("in", "host", *self._check_host("in", session, *self._run_host(session, "in", mats, "step-in")))
        raw = {}
        if mlp.loss == "mse":
            for part in self.parts["step"]:
                note(part.name, "chip", *self._run_part(session, part, part.name))
            res, cyc = self._check_host("d", session, *self._run_host(session, "unload", name="step-out"))
            note("d", "host", res, cyc)
            raw["D"] = self._outputs(res)
            d = fmt.to_float(raw["D"])
            loss = float(np.mean([mse_loss(d[:, c]) for c in range(b)]))
            out = d + tf
        else:
            for part in self.parts["forward"]:
                note(part.name, "chip", *self._run_part(session, part, part.name))
            res, cyc = self._check_host("logits", session, *self._run_host(session, "unload", name="logits"))
            note("logits", "host", res, cyc)
            raw["logits"] = self._outputs(res)
            mats["G"] = np.stack([host_softmax_grad(fmt, raw["logits"][:, c], tf[:, c]) for c in range(b)], axis=1)
            note("g", "host", *self._check_host("g", session, *self._run_host(session, "g", mats, "g")))
            for part in self.parts["backward"]:
                note(part.name, "chip", *self._run_part(session, part, part.name))
            z = fmt.to_float(raw["logits"])
            loss = float(np.mean([softmax_ce_loss(z[:, c], tf[:, c]) for c in range(b)]))
            out = z
        return log.result(loss, out, self.host_cycles(host_latency), raw)

    def predict(self, session, X) -> np.ndarray:
        """The network outputs (``n_out x b`` floats) for ``X`` computed on the chip."""
        self._run_host(session, "in_x", {"X": self._mat(X, self.mlp.n_in, "X")}, "predict-in")
        for part in self.parts["predict"]:
            self._run_part(session, part, part.name)
        res, _ = self._run_host(session, "unload", name="predict-out")
        self._resume(session)
        return self.cfg.fmt.to_float(self._outputs(res))


def _sizes_message(cfg, mlp, al, P, N) -> str:
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    wsz = ", ".join(f"W{l} panel {P[l]}x{N[l]}: {L(P[l]) * L(N[l])}" for l in range(mlp.n_layers))
    act = sum(it.words for k, it in al.items.items() if not k.startswith("W"))
    nr_beats = sum(cfg.nr * L(P[l]) * L(N[l]) for l in range(mlp.n_layers))
    return (f"MLP {'-'.join(map(str, mlp.sizes))} with minibatch {mlp.batch} does not fit {cfg.cores} cores of "
            f"{cfg.nr}x{cfg.nr} PEs: each core needs {al.used('a') + al.used('b')} words per PE (MEM A "
            f"{al.used('a')}, MEM B {al.used('b')}; weights per PE: {wsz}; activations, deltas, transposed "
            f"copies and scratch: {act}), a PE has MEM A {cfg.mem_a_words} + MEM B {cfg.mem_b_words} words of "
            f"{cfg.fmt}; no assignment of the weight panels to the banks fits, " + (
                f"nor with the largest panels in the {cfg.spad_depth}-beat scratchpad (paged: {nr_beats} beats for "
                f"all row panels, and the rest must fit with a page buffer)" + (
                    f" or streamed from the {cfg.dram_mib} MiB DRAM (the activations alone need {act} words)"
                    if cfg.dram_mib else "") if cfg.spad_kib else
                "and there is no scratchpad (cfg.spad_kib = 0)") + " (a smaller minibatch or more cores would)")


def mb_page_overlap_why_not(cfg, sp, bsz: int) -> str | None:
    """Why the forward GEMMs of a paged panel ``sp`` cannot load its next page as they
    run with a minibatch of ``bsz`` (:func:`compile_chip_mbgd`'s ``page_overlap``), or
    None."""
    if len(sp.pages) < 2:
        return "one page: no next page to load"
    return gemm_page_load_why_not(cfg, bsz)


def compile_chip_mbgd(cfg, mlp: MLP, out_map: str = "auto", spad=None, page_rows: int | None = None,
                      dram=None, acts: str = "auto", overlap: bool = True, ag_overlap: bool = True,
                      bcast_overlap: bool = True, ring_layers: list | None = None,
                      ring_updates: list | None = None, page_overlap: bool = True) -> ChipMBProgram:
    """Compile minibatch GD of ``mlp`` (``mlp.batch`` samples per step, ``W -= (lr / b)
    sum over the batch``) across the ``cfg.cores`` cores (row panels of every layer per
    core, the output layer by rows or columns, :func:`resolve_out_map`; see the module
    docstring). The weight panels go to bank A when everything fits so, else to the
    first assignment of panels to banks that fits, else the largest panels go to the
    scratchpad and are paged (:func:`plan_chip_mb`; ``spad`` / ``page_rows`` force it).
    ``ag_overlap``: the all-gather of each hidden activation runs inside the GEMM that
    reads it, ``bcast_overlap``: the broadcast of ``X`` inside the first layer's GEMM
    (:func:`ring_fw_layers`, :mod:`sw.ring_mat_gemm`; the same operations in the same
    order, so the same bits; ``meta["ring_fw"]``; when the longer text adds microcode
    reloads, the fewest cycles of all those layers, each alone, or none; ``ring_layers``
    forces the layers, tests). ``ag_overlap`` also runs the all-gather of ``A_l^T``'s
    column blocks inside layer ``l``'s update (:func:`ring_up_layers`,
    ``meta["ring_up"]``; ``ring_updates`` forces the layers). ``overlap`` (the third key of
    :func:`sw.train_chip.overlap_options`) switches nothing in minibatch GD yet: its
    backward collectives run between the kernels either way. ``page_overlap``: a paged
    panel of several pages whose GEMMs can load the next page in place
    (:func:`mb_page_overlap_why_not`) is stored in word order, and each page's forward
    GEMM but the last loads the next page as it runs (the same operations, so the same
    bits; the panels in ``meta["page_overlap"]``).

    Raises :class:`sw.train.TrainCompileError` when the panels and activations do not
    fit the PE memories (with the sizes), a program does not fit the microcode,
    ``-lr/b`` is not representable, a local size exceeds the loop counters, ``nr < 2``
    or the configuration is not a chip."""
    if not isinstance(mlp, MLP):
        raise TypeError(f"mlp must be an sw.mlp.MLP, got {type(mlp).__name__}")
    c, nr, fmt, b = cfg.cores, cfg.nr, cfg.fmt, mlp.batch
    if c < 2:
        raise TrainCompileError(f"minibatch GD across cores needs a chip (cfg.cores >= 2), got cores={c}; use "
                                f"sw.train_mb.compile_mbgd for one core")
    if nr < 2:
        raise TrainCompileError(f"the kernels need nr >= 2, got nr = {nr}")
    nlr = fmt.from_float(np.array([-mlp.lr / b]))[0]
    v = float(fmt.to_float(np.array([nlr]))[0])
    if v == 0.0 or not np.isfinite(v):
        raise TrainCompileError(f"learning rate / batch = {mlp.lr:g} / {b} is {'zero' if v == 0 else 'not finite'} "
                                f"in {fmt}")
    out_map = resolve_out_map(cfg, mlp, out_map)
    P, N = chip_shapes(cfg, mlp, out_map)
    lim = (1 << cfg.loop_bits) - 1
    for n in N:
        if local_len(n, nr) * local_len(b, nr) + 3 >= lim:
            raise TrainCompileError(f"a {n} x {b} activation exceeds the loop trip-count range ({lim})")
    wbanks, al, panels = plan_chip_mb(cfg, mlp, P, N, out_map, spad, page_rows, dram, acts)
    if page_overlap:
        panels = {l: replace(sp, order="words") if mb_page_overlap_why_not(cfg, sp, b) is None else sp
                  for l, sp in panels.items()}
    why = {"f": ring_fw_layers(cfg, mlp, al, P, N, out_map, panels, ag_overlap, bcast_overlap),
           "u": ring_up_layers(cfg, mlp, al, P, N, out_map, panels, ag_overlap, words := {}, gains := {})}
    items = []
    for t, forced in (("f", ring_layers), ("u", ring_updates)):
        ok = sorted(l for l, w in why[t].items() if w is None)
        bad = sorted(l for l in set(forced or ()) - set(ok) if not str(why[t].get(l)).startswith("no faster"))
        if bad:
            raise TrainCompileError(f"{'ring_layers' if t == 'f' else 'ring_updates'} {bad}: cannot take their "
                                    f"input off the ring (" + "; ".join(
                                        f"layer {l}: {why[t].get(l) or 'its input is not gathered'}" for l in bad) + ")")
        items += [(t, l) for l in (ok if forced is None else sorted(forced))]
        for l in forced or ():
            why[t][l] = None

    def build(items, panels=panels):
        fw, up = (sorted(l for t, l in items if t == x) for x in ("f", "u"))
        parts_ops = {}
        names = ["step"] if mlp.loss == "mse" else ["forward", "backward"]
        for nm in names + ["predict"]:          # predict: the old schedule, the shorter text
            parts_ops[nm] = [chip_mb_ops(cfg, mlp, al, P, N, k, nm, out_map, panels, fw if nm != "predict" else (),
                                         up) for k in range(c)]
        parts, images = _place_parts(cfg, stream_parts(cfg, parts_ops, panels))
        tp = ChipMBProgram(cfg, mlp, wbanks, al, P, N, parts, images, int(nlr),
                           {"lr_stored": v * b, "neg_lr_over_b": v, "policy": "a" if set(wbanks) == {"a"} else "search",
                            "out_map": out_map, "spad_layers": sorted(panels), "acts": al.meta["acts"],
                            "pages": {l: len(sp.pages) for l, sp in panels.items()}, "ring_fw": fw, "ring_up": up,
                            "page_overlap": sorted(l for l, sp in panels.items() if sp.order == "words"),
                            "ring_fw_why": {l: w for l, w in why["f"].items() if w is not None},
                            "ring_up_why": {l: w for l, w in why["u"].items() if w is not None}}, out_map=out_map,
                           softmax="host" if mlp.loss == "softmax_ce" else None,   # per column on the host
                           spad=panels)
        tp._place_host()
        return tp

    forced = ring_layers is not None or ring_updates is not None
    tp = cheapest(build, items, forced, words, cfg.ucode_depth, gains)
    chosen = [("f", l) for l in tp.meta["ring_fw"]] + [("u", l) for l in tp.meta["ring_up"]]
    return fewer_slots_if_shorter(lambda pn: tp if pn is panels else build(chosen, pn), panels)
