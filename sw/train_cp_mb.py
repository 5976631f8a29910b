"""Minibatch continuous propagation: the CP pipeline of :mod:`sw.train_cp` with a
minibatch of ``b`` samples in every pipeline slot.

The mapping, the schedule of a step (group ``l`` runs the forward pass of minibatch
``s - 1 - l`` and the backward pass and update of minibatch ``s - 2L + 1 + l``), the two
chip RUNs (head, ``V`` tail variants) and the chains are those of batch-1 CP; every
vector becomes a ``b``-column matrix in the 2D round-robin layout (:mod:`sw.layout`),
every GEMV a GEMM (:func:`sw.kernels.emit_gemm`), every rank-1 update the accumulating
GEMM ``W += (-lr / b) D A^T`` (the gradient summed over the minibatch), and the chains
carry matrix words (``layout="mat"`` in :mod:`sw.chain`). Per core of layer ``l``
(``P`` panel rows, ``N`` inputs; ``X^T``: the transpose, by
:func:`sw.collectives.emit_transpose`)::

    head  Z = W Ain                        emit_gemm (Ain: N x b, from the chains)
          hidden: Z = relu(Z)              this core's rows of A_{l+1}
            l >= 1: E = DinT W             emit_gemm: a partial of (W^T D)^T, b x N
                    E *= relu'(VT)         emit_relu_mask, VT = A_l^T of the minibatch updated
            Din = DinT^T                   emit_transpose (DinT: b x P, from the chains)
            W += (-lr/b) Din VT            emit_gemm(accumulate=True)
          output (MSE): D = Z - T; VT = Ain^T; DT = D^T; E = DT W; E *= relu'(VT);
                        W += (-lr/b) D VT
    tail  hist[s mod V] = Ain^T            emit_transpose (kept for the update 2 (L-1-l) steps later)
          VT = hist[(s + 1 - D_l) mod V]   emit_copy
          chains: X to G_0; A_{l+1}: G_l -> G_{l+1} (gather); E_{l+1} reduced over
                  G_{l+1} and scattered into G_l: core i keeps columns [i P, (i+1) P)
                  of every row, its DinT

The reduce chains transpose every word at every add (taking on one bus, sending on
the other), at one beat per slot. The softmax loss runs on the host (the kernel is batch 1):
the output core's head stops at ``Z``, the host reads the logits and loads ``G``, and the
output core's ``head2`` RUN does the rest (:meth:`ChipMBCPProgram.run_step`). The golden model is
:class:`sw.golden_train_cp_mb.GoldenChipMBCP`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sw.collectives import emit_transpose
from sw.ring_mat import _fold_text
from sw.asm import Builder
from sw.kernels import Scalar, emit_axpy, emit_copy, emit_gemm, emit_relu, emit_relu_mask
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.train import (HOST_LATENCY_CYCLES, Allocator, Op, TrainCompileError, host_softmax_grad, mse_loss,
                      softmax_ce_loss)
from sw.train_mb import MBProgram
from sw.train_chip import PhaseLog, _at, spad_op
from sw.train_cp import ChipCPProgram, Kit, _kern, _ring_rw, chain_streams
from sw.transfer import decode_unload, emit_load, emit_unload, load_beats_for

__all__ = ["MB_KIT", "ChipMBCPProgram", "check"]


def _tp(cfg, name, r, c, src, dst, stage, what):
    """``dst = src^T`` (``src``: ``r x c``)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    k = L(r) * L(c)
    return Op(name, "transpose", lambda b: emit_transpose(b, cfg, r, c, src, dst, stage, name=what).count(),
              reads=[(src, k), (stage, k)], writes=[(dst, k), (stage, k)])


# ======================================================================================
# memory
# ======================================================================================
def allocate(cfg, mlp, P, N, stage, V: int, softmax=None, fused: bool = False, page: int | None = None) -> Allocator:
    """The regions of a core of ``stage``; ``page``: the panel is kept in the scratchpad
    and moved through a page buffer ``WP`` of ``page`` local rows (a layer ``l >= 1``
    also needs ``DTp``, the transposed rows of ``D`` of one page)."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    al = Allocator(cfg)
    if stage is None:
        return al
    l, i = stage
    nl, b = mlp.n_layers, mlp.batch
    s, nw, Lb = P[l] // cfg.nr, L(N[l]), L(b)
    if page is None:
        al.alloc("W", s * nw, f"row panel {i} of W{l} ({P[l]} x {N[l]})", bank="a")
    else:
        al.alloc("WP", page * nw, f"page buffer of row panel {i} of W{l} ({P[l]} x {N[l]}, in the scratchpad; "
                 f"{page * cfg.nr} rows per page)", bank="a")
        if l >= 1:
            al.alloc("DTp", Lb * page, "D^T of one page's rows (b x rows; the backward GEMM's left operand)",
                     bank="b")
    al.alloc("VT", Lb * nw, f"A{l}^T of the minibatch being updated (b x N; update, mask)", bank="a")
    al.alloc("ain", nw * Lb, f"A{l}: the next forward input (N x b, written by the chains)", bank="b")
    al.alloc("z", s * Lb, "Z = W Ain (P x b)" + ("; MSE: D = Z - T in place; softmax: the host's G = softmax(Z) "
                                                     "- T replaces it" if l == nl - 1 else
                                                     ", relu in place: this core's rows of A_{l+1}"), bank="b")
    if l >= 1:
        al.alloc("e", Lb * nw, f"(W{l}^T D)^T partial, masked (b x N; sent by the chains)", bank="b")
    st_words = max(Lb * nw, s * Lb)
    if l == nl - 1:
        if mlp.loss == "mse":
            al.alloc("t", s * Lb, "target (P x b, loaded per step)", bank="a")
            al.alloc("m1", 1, "scalar -1 (every PE)", bank="a")
        al.alloc("dt", Lb * s, "D^T (b x P)", bank="b")
    else:
        al.alloc("dint", Lb * s, f"this core's columns of (W{l + 1}^T D)^T: D{l}^T (b x P, written by the chains)",
                 bank="b")
        al.alloc("din", s * Lb, f"D{l} (P x b): the update's left operand", bank="b")
        for j in range(V):
            al.alloc(f"hist{j}", Lb * nw, f"A{l}^T of the minibatch of step s = {j} mod {V} (b x N)")
        if l == 0 and i == 0:
            al.alloc("xin", nw * Lb, "the next input minibatch (N x b, loaded by the host)", bank="b")
    al.alloc("stage", st_words, "transpose staging (diagonal PEs)")
    al.alloc("nlr", 1, "scalar -lr/b (every PE)", bank="b")
    return al


# ======================================================================================
# ops
# ======================================================================================
def head_ops(cfg, mlp, al, P, N, stage, softmax=None, fused: bool = False, sp=None) -> list:
    """The head's ops of a core (``sp``: its panel's :class:`sw.train_chip.SpadPanel`
    when it is paged from the scratchpad, :func:`_paged_head`)."""
    if stage is None:
        return []
    if sp is not None:
        return _paged_head(cfg, mlp, al, P, N, stage, sp)
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    l, _ = stage
    nl, b = mlp.n_layers, mlp.batch
    R = {k: v.region for k, v in al.items.items()}
    s, nw, Lb, wn = P[l] // cfg.nr, L(N[l]), L(b), (P[l] // cfg.nr) * L(N[l])
    W, ain, z, VT, st = R["W"], R["ain"], R["z"], R["VT"], R["stage"]
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    ops = [_kern("gemm", "gemm", lambda bl: emit_gemm(bl, cfg, P[l], N[l], b, W, ain, z, name="fw_"),
                 [(W, wn), (ain, nw * Lb)], [(z, s * Lb)])]
    if l < nl - 1:
        ops.append(_kern("relu", "relu", lambda bl: emit_relu(bl, cfg, s * Lb, z, z, name="re_"),
                         [(z, s * Lb)], [(z, s * Lb)]))
        dint, din = R["dint"], R["din"]
        if l >= 1:
            ops += _backward(cfg, R, P, N, l, b, dint)
        ops.append(_tp(cfg, "tp_din", b, P[l], dint, din, st, "tdi_"))
        d = din
    elif mlp.loss == "softmax_ce":
        return ops                                      # the rest after the host's softmax: head2_ops
    else:
        m1 = Scalar(R["m1"].bank, R["m1"].base)
        ops.append(_kern("loss_grad", "axpy", lambda bl: emit_axpy(bl, cfg, s * Lb, m1, R["t"], z, name="lg_"),
                         [(R["t"], s * Lb), (z, s * Lb), (R["m1"], 1)], [(z, s * Lb)], fma_wb=True))
        ops += _output_backward(cfg, mlp, R, P, N, l)
        d = z
    ops.append(_kern("update", "gemm_acc", lambda bl: emit_gemm(bl, cfg, P[l], b, N[l], d, VT, W, accumulate=True,
                                                                alpha=nlr, name="up_"),
                     [(d, s * Lb), (VT, Lb * nw), (W, wn), (R["nlr"], 1)], [(W, wn)], fma_wb=True))
    return ops


def _paged_head(cfg, mlp, al, P, N, stage, sp) -> list:
    """The head of a hidden layer's core whose panel is in the scratchpad: ``Din =
    DinT^T`` first, then page by page (first to last): load the page into ``WP``; its
    rows of ``Z = W Ain``; ``l >= 1``: ``DTp`` = the page's rows of ``Din`` transposed,
    ``E = DTp W_p`` (first page) or ``E += DTp W_p`` (``gemm_acc``); its rows of the
    update ``W += (-lr/b) Din VT``; store it back. Then the ReLU of ``Z`` and the mask
    of ``E``."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    nr = cfg.nr
    l, _ = stage
    b = mlp.batch
    R = {k: v.region for k, v in al.items.items()}
    s, nw, Lb = P[l] // nr, L(N[l]), L(b)
    WP, ain, z, VT, st = R["WP"], R["ain"], R["z"], R["VT"], R["stage"]
    dint, din = R["dint"], R["din"]
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    ops = [_tp(cfg, "tp_din", b, P[l], dint, din, st, "tdi_")]
    for p, (r0, n) in enumerate(sp.pages):
        w, zp, dp, kp = sp.page_words(p), _at(z, r0 * Lb), _at(din, r0 * Lb), n * Lb
        ops.append(spad_op(cfg, f"ld_{p}", False, WP, w, sp.page_addr(nr, p)))
        ops.append(_kern(f"gemm_{p}", "gemm", lambda bl, n=n, zp=zp, p=p:
                         emit_gemm(bl, cfg, n * nr, N[l], b, WP, ain, zp, name=f"fw{p}_"),
                         [(WP, w), (ain, nw * Lb)], [(zp, kp)]))
        if l >= 1:
            DTp, e, acc = R["DTp"], R["e"], p > 0
            ops.append(_tp(cfg, f"tp_d{p}", n * nr, b, dp, DTp, st, f"td{p}_"))
            ops.append(_kern(f"gemm_bw{p}", "gemm_acc" if acc else "gemm", lambda bl, n=n, p=p, acc=acc:
                             emit_gemm(bl, cfg, b, n * nr, N[l], DTp, WP, e, accumulate=acc, name=f"bw{p}_"),
                             [(DTp, kp), (WP, w)] + ([(e, Lb * nw)] if acc else []), [(e, Lb * nw)], fma_wb=acc))
        ops.append(_kern(f"update_{p}", "gemm_acc", lambda bl, n=n, dp=dp, p=p:
                         emit_gemm(bl, cfg, n * nr, b, N[l], dp, VT, WP, accumulate=True, alpha=nlr, name=f"up{p}_"),
                         [(dp, kp), (VT, Lb * nw), (WP, w), (R["nlr"], 1)], [(WP, w)], fma_wb=True))
        ops.append(spad_op(cfg, f"st_{p}", True, WP, w, sp.page_addr(nr, p)))
    ops.append(_kern("relu", "relu", lambda bl: emit_relu(bl, cfg, s * Lb, z, z, name="re_"),
                     [(z, s * Lb)], [(z, s * Lb)]))
    if l >= 1:
        e = R["e"]
        ops.append(_kern("mask", "relu_mask", lambda bl: emit_relu_mask(bl, cfg, Lb * nw, e, VT, e, name="mk_"),
                         [(e, Lb * nw), (VT, Lb * nw)], [(e, Lb * nw)]))
    return ops


def _output_backward(cfg, mlp, R, P, N, l) -> list:
    """The output core's backward pass from its gradient ``D`` (in ``z``): ``VT =
    Ain^T``, ``DT = D^T``, ``E = DT W``, the mask (the update follows)."""
    b, z, st = mlp.batch, R["z"], R["stage"]
    return ([_tp(cfg, "tp_a", N[l], b, R["ain"], R["VT"], st, "tva_"), _tp(cfg, "tp_d", P[l], b, z, R["dt"], st, "tdt_")]
            + _backward(cfg, R, P, N, l, b, R["dt"]))


def head2_ops(cfg, mlp, al, P, N, stage) -> list:
    """``loss="softmax_ce"``: the output core's ops after the host has replaced ``Z`` by
    ``G = softmax(Z) - T`` (its own RUN, :meth:`ChipMBCPProgram.run_step`): the backward
    pass and the update ``W += (-lr/b) G VT``; nothing on the other cores."""
    if stage is None or stage[0] != mlp.n_layers - 1 or mlp.loss != "softmax_ce":
        return []
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    l = stage[0]
    R = {k: v.region for k, v in al.items.items()}
    s, nw, Lb, wn = P[l] // cfg.nr, L(N[l]), L(mlp.batch), (P[l] // cfg.nr) * L(N[l])
    W, z, VT = R["W"], R["z"], R["VT"]
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    return _output_backward(cfg, mlp, R, P, N, l) + [
        _kern("update", "gemm_acc", lambda bl: emit_gemm(bl, cfg, P[l], mlp.batch, N[l], z, VT, W, accumulate=True,
                                                         alpha=nlr, name="up_"),
              [(z, s * Lb), (VT, Lb * nw), (W, wn), (R["nlr"], 1)], [(W, wn)], fma_wb=True)]


def _backward(cfg, R, P, N, l, b, dt) -> list:
    """``E = DT W`` (``b x N``: this core's partial of ``(W^T D)^T``), ``E *= relu'(VT)``."""
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    W, e, VT = R["W"], R["e"], R["VT"]
    s, nw, Lb = P[l] // cfg.nr, L(N[l]), L(b)
    return [_kern("gemm_bw", "gemm", lambda bl: emit_gemm(bl, cfg, b, P[l], N[l], dt, W, e, name="bw_"),
                  [(dt, Lb * s), (W, s * nw)], [(e, Lb * nw)]),
            _kern("mask", "relu_mask", lambda bl: emit_relu_mask(bl, cfg, Lb * nw, e, VT, e, name="mk_"),
                  [(e, Lb * nw), (VT, Lb * nw)], [(e, Lb * nw)])]


def tail_ops(cfg, mlp, al, P, N, stage, j: int, V: int, groups: list, dual: bool = False) -> list:
    """The variant-``j`` ops before the chains (``dual`` is for vectors: the history here
    holds transposed inputs, which a chain cannot store)."""
    if stage is None:
        return []
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    l, _ = stage
    nl, b = mlp.n_layers, mlp.batch
    if l == nl - 1:
        return []
    R = {k: v.region for k, v in al.items.items()}
    nw, Lb = L(N[l]), L(b)
    D = 2 * (nl - 1 - l)
    hf, hn = R[f"hist{j % V}"], R[f"hist{(j + 1 - D) % V}"]
    ops = [_tp(cfg, "keep_a", N[l], b, R["ain"], hf, R["stage"], "tka_"),
           _kern("next_a", "copy", lambda bl: emit_copy(bl, cfg, Lb * nw, hn, R["VT"], name="cn_"),
                 [(hn, Lb * nw)], [(R["VT"], Lb * nw)])]
    if l == 0 and "xin" in R and groups[0] == 1:
        ops.append(_kern("take_x", "copy", lambda bl: emit_copy(bl, cfg, nw * Lb, R["xin"], R["ain"], name="cx_"),
                         [(R["xin"], nw * Lb)], [(R["ain"], nw * Lb)]))
    return ops


def streams(cfg, mlp, allocs, P, N, groups, j: int | None = None) -> list:
    """The chains of a step: matrix words, ``nr`` beats each (``layout="mat"``); ``E_{l+1}``
    (``b x N_{l+1}``, ``N_{l+1} = g P_l``) is scattered by columns: core ``i`` of ``G_l``
    keeps its ``s`` words of every local row (its ``DinT``) and relays the later ones."""
    nr = cfg.nr
    L = lambda n: local_len(n, nr)                     # noqa: E731
    Lb = L(mlp.batch)

    def scatter(l, i):
        s, nw, last = P[l] // nr, L(N[l + 1]), i == groups[l] - 1
        row = [None] * (i * s) + ["keep"] * s + [None if last else "relay"] * (nw - (i + 1) * s)
        return tuple(r for _ in range(Lb) for r in row for _ in range(nr))

    return chain_streams(cfg, mlp, allocs, groups, x_m=L(N[0]) * Lb * nr, seg_m=lambda l: (P[l] // nr) * Lb * nr,
                         d_m=lambda l: Lb * L(N[l + 1]) * nr, scatter=scatter, din="dint", layout="mat",
                         din_layout="mat")


def ring_text(cfg, lines: list, mlp, P, N) -> str:
    """Fold a core's chain slots into loops (periods of matrix words, of their rows)."""
    nr = cfg.nr
    per = {1, nr, 2 * nr}
    Lb = local_len(mlp.batch, nr)
    for l in range(mlp.n_layers):
        nw = local_len(N[l], nr)
        per |= {nw * nr, (P[l] // nr) * Lb * nr}
    return _fold_text(cfg, lines, sorted(per), "ch")


def host_programs(cfg, allocs, P, N, out_core: int, what: str, origin: int) -> list:
    """Per core the program of a host phase: ``in`` (``X`` into core 0's ``xin``; MSE:
    ``T`` into the output core), ``out`` (the output core's ``D = Z - T``), softmax:
    ``logits`` (the output core's ``Z``) and ``g`` (``G`` into its ``z``)."""
    imgs = []
    for k in range(cfg.cores):
        b = Builder(cfg, origin=origin)
        al = allocs[k]
        R = {n: v.region for n, v in al.items.items()}
        if what == "in" and k == 0:
            emit_load(b, cfg, R["xin"].bank, R["xin"].base, al.items["xin"].words, loop="ldx")
        if what == "in" and k == out_core and "t" in R:
            emit_load(b, cfg, R["t"].bank, R["t"].base, al.items["t"].words, loop="ldt")
        if what in ("out", "logits") and k == out_core:
            emit_unload(b, cfg, R["z"].bank, R["z"].base, al.items["z"].words, loop="ulz")
        if what == "g" and k == out_core:
            emit_load(b, cfg, R["z"].bank, R["z"].base, al.items["z"].words, loop="ldg")
        b.halt()
        imgs.append(b.build().words())
    return imgs


# ======================================================================================
# the program: the host side of a minibatch step
# ======================================================================================
@dataclass
class ChipMBCPProgram(ChipCPProgram):
    """A compiled minibatch-CP step: as :class:`sw.train_cp.ChipCPProgram`, with
    ``x`` an ``n_in x b`` minibatch and ``t`` an ``n_out x b`` target; the loss is
    the mean of the samples' MSE losses, the output ``n_out x b``."""

    def host_phase_cycles(self) -> list:
        """``(name, cycles)`` of the step's host phases (softmax: the logits out, ``G``
        in, and the output core's ``head2`` RUN between the head and the tail)."""
        from sw.train_mb import load_cost, unload_cost

        cfg = self.cfg
        run = cfg.run_overhead
        xw = self.allocs[0].items["xin"].words
        zw = self.allocs[self.out_core].items["z"].words
        if self.softmax == "host":
            return [("in", load_cost(cfg, xw) + run), ("logits", unload_cost(cfg, zw) + run),
                    ("g", load_cost(cfg, zw) + run), ("head2", self.instructions["head2"] + run)]
        return [("in", load_cost(cfg, xw) + run + load_cost(cfg, zw) + run), ("out", unload_cost(cfg, zw) + run)]

    def host_cycles(self, host_latency: int = HOST_LATENCY_CYCLES) -> int:
        """The host's softmax turnaround per step (:data:`sw.train.HOST_LATENCY_CYCLES`,
        not in :meth:`step_cycles`); 0 for MSE."""
        return host_latency if self.softmax == "host" else 0

    def _mat(self, v, rows: int, prows: int) -> np.ndarray:
        """``rows x b`` values (or None: zeros) -> padded bit patterns ``prows x (Lb nr)``."""
        cfg, b = self.cfg, self.mlp.batch
        fmt = cfg.fmt
        out = np.zeros((prows, local_len(b, cfg.nr) * cfg.nr), dtype=fmt.np_uint)
        if v is not None:
            a = np.asarray(v)
            if a.shape != (rows, b):
                raise ValueError(f"expected a {rows} x {b} matrix, got shape {a.shape}")
            out[:rows, :b] = a if a.dtype == fmt.np_uint else fmt.from_float(a.astype(np.float64))
        return out

    def run_step(self, session, x, t):
        """One pipeline step with minibatch ``x`` (``n_in x b``; None: zeros, to
        drain) entering and ``t`` (``n_out x b``; None while filling) the target of
        the minibatch now at the output layer."""
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        nr, b = cfg.nr, mlp.batch
        X = self._mat(x, mlp.n_in, local_len(self.N[0], nr) * nr)
        if mlp.loss == "softmax_ce":
            return self._softmax_step(session, X, t)
        T = self._mat(t, mlp.n_out, self.P[-1])
        log = PhaseLog(cfg.cores, session)
        data = [[] for _ in range(cfg.cores)]
        data[0] = load_beats_for(cfg, pack_matrix(X, nr))
        data[self.out_core] = data[self.out_core] + load_beats_for(cfg, pack_matrix(T, nr))
        out = self._runs(session, data, log)
        zw = self.allocs[self.out_core].items["z"].words
        D = unpack_matrix(decode_unload(cfg, out.out, zw), self.P[-1], local_len(b, nr) * nr)
        raw = D[:mlp.n_out, :b]
        d = fmt.to_float(raw)
        self.step_index += 1
        if t is None:
            return log.result(None, d, 0, {"out": raw})
        tf = np.asarray(t, dtype=np.float64) if np.asarray(t).dtype != fmt.np_uint else fmt.to_float(t)
        loss = float(np.mean([mse_loss(d[:, c]) for c in range(b)]))
        return log.result(loss, d + tf, 0, {"out": raw})


    targets = MBProgram.targets

    def _phase(self, session, what, data, log, active):
        cfg = self.cfg
        res, counted = session.run([self.image[k] for k in range(cfg.cores)], data, f"cp-{what}", self.origins[what],
                                   active=active)
        cyc = sum(res[k].cycles for k in active)
        exp = dict(self.host_phase_cycles())[what]
        if cyc != exp:
            raise AssertionError(f"minibatch CP {what} phase: {cyc} cycles, predicted {exp}")
        log.note(what, "host", res, counted)
        return res

    def _softmax_step(self, session, X, t):
        """A softmax step: ``X`` in; the head RUN; the output core's logits out; the host
        computes ``G = fmt(softmax(z) - t)`` per column (:func:`sw.train.host_softmax_grad`;
        ``t`` None: zeros, as the golden does while the pipeline fills) and loads it;
        the output core's ``head2`` RUN; the tail RUN(s)."""
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        nr, b, no, o = cfg.nr, mlp.batch, mlp.n_out, self.out_core
        tf = np.zeros((no, b)) if t is None else self.targets(t)
        log = PhaseLog(cfg.cores, session)
        data = [[] for _ in range(cfg.cores)]
        data[0] = load_beats_for(cfg, pack_matrix(X, nr))
        self._phase(session, "in", data, log, [0])
        chip = self.chip_runs()
        self._run_chip(session, log, chip[:1])
        res = self._phase(session, "logits", None, log, [o])
        zw = self.allocs[o].items["z"].words
        Bp = local_len(b, nr) * nr
        Z = unpack_matrix(decode_unload(cfg, res[o].out, zw), self.P[-1], Bp)
        raw = Z[:no, :b].copy()
        G = np.zeros((self.P[-1], Bp), dtype=fmt.np_uint)
        G[:no, :b] = np.stack([host_softmax_grad(fmt, raw[:, c], tf[:, c]) for c in range(b)], axis=1)
        data = [[] for _ in range(cfg.cores)]
        data[o] = load_beats_for(cfg, pack_matrix(G, nr))
        self._phase(session, "g", data, log, [o])
        self._phase(session, "head2", None, log, [o])
        self._run_chip(session, log, chip[1:])
        self.step_index += 1
        z = fmt.to_float(raw)
        loss = None if t is None else float(np.mean([softmax_ce_loss(z[:, c], tf[:, c]) for c in range(b)]))
        return log.result(loss, z, self.host_cycles(), {"out": raw})


def check(cfg, mlp, softmax: str = "auto") -> None:
    """Minibatch CP's own restrictions (clear errors): its softmax runs on the host."""
    if mlp.loss == "softmax_ce" and softmax == "array":
        raise TrainCompileError("the softmax kernel is batch 1: minibatch CP computes the softmax on the host "
                                "(softmax='auto' or 'host'; batch-1 CP computes it on the array)")


#: the builders of minibatch CP (:func:`sw.train_cp.compile_chip_cp` with ``mlp.batch > 1``)
MB_KIT = Kit(allocate, head_ops, tail_ops, streams, _ring_rw, host_programs, ring_text, ChipMBCPProgram, head2_ops)
