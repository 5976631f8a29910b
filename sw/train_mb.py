"""Compile minibatch gradient descent (batch ``b``) of an MLP for one core, and run it.

``compile_mbgd(cfg, mlp) -> MBProgram`` is the minibatch counterpart of
:func:`sw.train.compile_sgd`. Activations of a minibatch are matrices ``n x b`` (one
sample per column) in the 2D round-robin layout (:func:`sw.layout.pack_matrix`), so every
layer is a GEMM and the backward pass needs transposes (``docs/kernels.md``, "The
minibatch backward pass"). One step (``loss="mse"``, one microprogram)::

    load X (n0 x b), T (nL x b)           sw.transfer.emit_load: nr beats per local word
    for l = 0 .. L-1:                     forward
        Z_{l+1} = W_l A_l                 emit_gemm (A_0 = X)
        A_{l+1} = relu(Z_{l+1})           emit_relu in place over the local words (hidden)
    D = Z_L - T                           emit_axpy(alpha = -1) in place over the local words
    for l = L-1 .. 0:                     backward
        if l >= 1:
            D^T = transpose(D)            emit_transpose (stage)
            dX^T = D^T W_l                emit_gemm(m = b, n = n_{l+1}, bsz = n_l)
            E_l = transpose(dX^T)         emit_transpose
            E_l = E_l * relu'(A_l)        emit_relu_mask in place over the local words
        A_l^T = transpose(A_l)            emit_transpose
        W_l += (-lr/b) D A_l^T            emit_gemm(accumulate=True, alpha=Scalar -lr/b),
                                          after the dX^T GEMM, which needs the old W_l
        D = E_l
    unload D_L = Z_L - T                  sw.transfer.emit_unload (the host computes the loss)

``loss="softmax_ce"``: two RUNs, as in :mod:`sw.train`: the first ends by unloading the
logits ``Z_L``; the host computes ``G = fmt(softmax(z) - t)`` per column
(:func:`sw.train.host_softmax_grad`) and the second RUN loads ``G`` and runs the backward
pass. The host turnaround is counted as :data:`sw.train.HOST_LATENCY_CYCLES` idle core
cycles per step (one turnaround per minibatch).

Reused from :mod:`sw.train` (imported, not copied): :class:`~sw.train.Allocator`,
:func:`~sw.train.map_layers`, :class:`~sw.train.Op`, :func:`~sw.train.kernel_gap` (the
NOPs between kernels), the private program splitting/placement helpers
``_split_ops``/``_place``, :class:`~sim.sessions.CoreSession`, :class:`~sw.train.StepResult`,
and :class:`~sw.train.TrainProgram` (``MBProgram`` subclasses it: weight/scalar loading,
weight read-back, predicted cycles and the breakdown are the same; the scalar region
``nlr`` holds ``-lr/b`` here). :mod:`sw.golden_train_mb` is the bit-exact numpy model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from sw.collectives import cost_transpose, emit_transpose
from sw.kernels import Scalar, emit_axpy, emit_gemm, emit_relu, emit_relu_mask
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.train import (HOST_LATENCY_CYCLES, Allocator, Op, StepResult, TrainCompileError, TrainProgram,
                      breakdown_lines,
                      _other, _place, _split_ops, host_softmax_grad, map_layers, mse_loss, softmax_ce_loss)
from sw.transfer import decode_unload, emit_load, emit_unload, load_beats_for, load_cost, unload_cost  # noqa: F401

__all__ = ["compile_mbgd", "MBProgram", "load_cost", "unload_cost", "allocate_mb", "mb_ops"]


# ======================================================================================
# memory allocation
# ======================================================================================
def allocate_mb(cfg, mlp: MLP, wbanks: list) -> Allocator:
    """All regions of one minibatch step (see ``docs/training.md``, "Minibatch GD on one
    core"). Bank rules: a GEMM's two operands in different banks (forward ``W_l`` vs
    ``A_l``; backward ``D^T`` vs ``W_l``; update ``D`` vs ``A_l^T``); the two streamed
    operands of the axpy and of the ReLU mask in different banks (one instruction per
    element). The transposed copies ``D^T`` and ``A_l^T``, the GEMM output ``dX^T`` and
    the transpose stage are scratch shared by all layers (one region per bank a role
    needs, sized for the largest layer)."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    S, nl, b = mlp.sizes, mlp.n_layers, mlp.batch
    al = Allocator(cfg)
    for l in range(nl):
        m, n = mlp.shape(l)
        al.alloc(f"W{l}", L(m) * L(n), f"weights of layer {l} ({m} x {n})", bank=wbanks[l])
    al.alloc("X", L(S[0]) * L(b), f"input minibatch A0 ({S[0]} x {b}, loaded per step)", forbid={wbanks[0]})
    for i in range(1, nl + 1):
        hidden = i < nl
        al.alloc(f"Z{i}", L(S[i]) * L(b), f"A{i} = relu(W{i - 1} A{i - 1}) ({S[i]} x {b}, ReLU in place)" if hidden
                 else f"output Z{i} ({S[i]} x {b}); MSE: D = Z - T in place",
                 forbid={wbanks[i]} if hidden else ())
    zb = al.items[f"Z{nl}"].region.bank
    if mlp.loss == "mse":
        al.alloc("T", L(S[nl]) * L(b), f"targets ({S[nl]} x {b}, loaded per step)", bank=_other(zb))
        al.alloc("m1", 1, "scalar -1 (every PE)")
        dbank = {nl - 1: zb}
    else:
        g = al.alloc("G", L(S[nl]) * L(b), f"output gradient softmax(Z) - T ({S[nl]} x {b}, loaded per step)")
        dbank = {nl - 1: g.bank}
    for l in range(nl - 1, 0, -1):
        ab = al.items[f"Z{l}"].region.bank
        e = al.alloc(f"E{l}", L(S[l]) * L(b), f"delta of layer {l}: (W{l}^T D{l + 1}) * relu'(A{l}) "
                     f"({S[l]} x {b})", prefer=_other(ab))
        dbank[l - 1] = e.bank
    al.alloc("nlr", 1, "scalar -lr/b (every PE)")
    # shared scratch: sized per (role, bank) for the layers that need that bank
    need: dict = {}
    for l in range(nl):
        m, n = mlp.shape(l)
        if l >= 1:
            key = ("DT", _other(wbanks[l]))          # D^T is the first GEMM operand, W_l the second
            need[key] = max(need.get(key, 0), L(b) * L(m))
        key = ("XT", _other(dbank[l]))               # the update's D and A_l^T in different banks
        need[key] = max(need.get(key, 0), L(b) * L(n))
    for (role, bank), words in sorted(need.items()):
        what = "D^T (transpose of the layer's output delta)" if role == "DT" else "A^T (transposed layer input)"
        al.alloc(f"{role}_{bank}", words, what + ", shared by the layers", bank=bank)
    ext = max([L(b) * L(S[l]) for l in range(1, nl)], default=0)
    if ext:
        al.alloc("EXT", ext, "dX^T = D^T W (backward GEMM output), shared")
    tk = [L(b) * L(s) for s in S]
    al.alloc("stage", max(tk), "transpose stage (diagonal PEs), shared")
    return al


# ======================================================================================
# the ops of one step
# ======================================================================================
def mb_ops(cfg, mlp: MLP, al: Allocator, wbanks: list, predict: bool = False) -> list:
    """The ops of one minibatch step in order (``predict``: forward pass only, ending
    with the unload of the output)."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    S, nl, b = mlp.sizes, mlp.n_layers, mlp.batch
    R = {k: v.region for k, v in al.items.items()}
    W = {k: v.words for k, v in al.items.items()}
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    ops: list = []

    def load(name, key):
        reg, n = R[name], W[name]
        ops.append(Op(f"load_{name}", "load", lambda bl, reg=reg, n=n, k=len(ops):
                      (emit_load(bl, cfg, reg.bank, reg.base, n, loop=f"ld{k}_"), load_cost(cfg, n))[1],
                      writes=[(reg, n)], data=key, words=n))

    def unload(name, key):
        reg, n = R[name], W[name]
        ops.append(Op(f"unload_{name}", "unload", lambda bl, reg=reg, n=n, k=len(ops):
                      (emit_unload(bl, cfg, reg.bank, reg.base, n, loop=f"ul{k}_"), unload_cost(cfg, n))[1],
                      reads=[(reg, n)], data=key, words=n))

    def kern(name, kind, fn, reads, writes, fma_wb=False):
        ops.append(Op(name, kind, lambda bl, fn=fn: fn(bl).instructions, reads=reads, writes=writes,
                      fma_wb=fma_wb, stores=not fma_wb))

    def transpose(name, r, c, src, dst):
        k = L(r) * L(c)
        st = R["stage"]
        ops.append(Op(name, "transpose", lambda bl, r=r, c=c, src=src, dst=dst, nm=name:
                      (emit_transpose(bl, cfg, r, c, src, dst, st, name=nm + "_"),
                       cost_transpose(cfg, r, c).instructions)[1],
                      reads=[(src, k), (st, k)], writes=[(dst, k), (st, k)]))

    # ---- forward ------------------------------------------------------------------------
    load("X", "X")
    if mlp.loss == "mse" and not predict:
        load("T", "T")
    A = [R["X"]]
    for l in range(nl):
        m, n = mlp.shape(l)
        Wl, X, Y = R[f"W{l}"], A[l], R[f"Z{l + 1}"]
        kern(f"gemm{l}", "gemm", lambda bl, l=l, m=m, n=n, Wl=Wl, X=X, Y=Y:
             emit_gemm(bl, cfg, m, n, b, Wl, X, Y, name=f"fw{l}_"),
             [(Wl, L(m) * L(n)), (X, L(n) * L(b))], [(Y, L(m) * L(b))])
        if l < nl - 1:
            k = L(m) * L(b)
            kern(f"relu{l + 1}", "relu", lambda bl, Y=Y, k=k, l=l: emit_relu(bl, cfg, k, Y, Y, name=f"re{l}_"),
                 [(Y, k)], [(Y, k)])
        A.append(Y)
    zo, ko = R[f"Z{nl}"], L(S[nl]) * L(b)
    if predict:
        unload(f"Z{nl}", "Z")
        return ops
    # ---- loss gradient ------------------------------------------------------------------
    if mlp.loss == "mse":
        m1 = Scalar(R["m1"].bank, R["m1"].base)
        kern("loss_grad", "axpy", lambda bl: emit_axpy(bl, cfg, ko, m1, R["T"], zo, name="lg_"),
             [(R["T"], ko), (zo, ko), (R["m1"], 1)], [(zo, ko)], fma_wb=True)
        D = zo
    else:
        unload(f"Z{nl}", "logits")
        ops.append(Op("host_softmax", "host"))
        load("G", "G")
        D = R["G"]
    # ---- backward and updates -----------------------------------------------------------
    for l in range(nl - 1, -1, -1):
        m, n = mlp.shape(l)
        Wl = R[f"W{l}"]
        wn = L(m) * L(n)
        dn = L(m) * L(b)
        if l >= 1:
            DT = R[f"DT_{_other(wbanks[l])}"]
            E, EXT = R[f"E{l}"], R["EXT"]
            transpose(f"tpD{l}", m, b, D, DT)
            kern(f"gemm_bw{l}", "gemm", lambda bl, l=l, m=m, n=n, DT=DT, Wl=Wl, EXT=EXT:
                 emit_gemm(bl, cfg, b, m, n, DT, Wl, EXT, name=f"bw{l}_"),
                 [(DT, L(b) * L(m)), (Wl, wn)], [(EXT, L(b) * L(n))])
            transpose(f"tpE{l}", b, n, EXT, E)
            ke = L(n) * L(b)
            kern(f"mask{l}", "relu_mask", lambda bl, l=l, E=E, a=A[l], ke=ke:
                 emit_relu_mask(bl, cfg, ke, E, a, E, name=f"mk{l}_"), [(E, ke), (A[l], ke)], [(E, ke)])
        XT = R[f"XT_{_other(D.bank)}"]
        transpose(f"tpA{l}", n, b, A[l], XT)
        kern(f"update{l}", "gemm_acc", lambda bl, l=l, m=m, n=n, D=D, XT=XT, Wl=Wl:
             emit_gemm(bl, cfg, m, b, n, D, XT, Wl, accumulate=True, alpha=nlr, name=f"up{l}_"),
             [(D, dn), (XT, L(b) * L(n)), (Wl, wn), (R["nlr"], 1)], [(Wl, wn)], fma_wb=True)
        if l >= 1:
            D = R[f"E{l}"]
    if mlp.loss == "mse":
        unload(f"Z{nl}", "D")
    return ops


# ======================================================================================
# the compiled program and its host side
# ======================================================================================
@dataclass
class MBProgram(TrainProgram):
    """A compiled minibatch step. Reuses :class:`sw.train.TrainProgram`'s weight and
    scalar loading (:meth:`init`), weight read-back, :meth:`predicted_cycles`,
    :meth:`step_cycles`, :meth:`breakdown`; ``neg_lr`` is the bit pattern of ``-lr/b``."""

    def describe(self) -> str:
        cfg = self.cfg
        lines = [f"minibatch GD step of {self.mlp.describe()} on one {cfg.nr}x{cfg.nr} {cfg.fmt} core",
                 f"  weights in bank(s) {', '.join(x.upper() for x in self.wbanks)}; "
                 f"{len(self.programs)} step microprogram(s) of "
                 f"{', '.join(str(len(p.words)) for p in self.programs)} words (+ predict "
                 f"{sum(len(p.words) for p in self.predict_programs)}) in {len(self.images)} microcode image(s); "
                 f"{sum(self.predicted_cycles())} RUN cycles per step"
                 + (f" + {self.host_cycles()} host cycles" if self.host_cycles() else ""),
                 "", self.alloc.table(), ""] + breakdown_lines(self.breakdown())
        return "\n".join(lines)

    # -- host data ----------------------------------------------------------------------
    def _mat(self, x, n, what):
        fmt, b = self.cfg.fmt, self.mlp.batch
        x = np.asarray(x)
        if x.shape != (n, b):
            raise ValueError(f"{what} must be a {n} x {b} matrix (one sample per column), got shape {x.shape}")
        if x.dtype == fmt.np_uint:
            return x
        return fmt.from_float(x.astype(np.float64)).astype(fmt.np_uint)

    def targets(self, T) -> np.ndarray:
        """Targets as an ``n_out x b`` float64 matrix: for ``softmax_ce`` a vector of
        ``b`` class indices is turned into one-hot columns."""
        mlp, fmt = self.mlp, self.cfg.fmt
        T = np.asarray(T)
        if mlp.loss == "softmax_ce" and T.ndim == 1:
            if T.shape != (mlp.batch,):
                raise ValueError(f"expected {mlp.batch} class indices, got shape {T.shape}")
            out = np.zeros((mlp.n_out, mlp.batch))
            out[T.astype(np.int64), np.arange(mlp.batch)] = 1.0
            return out
        if T.shape != (mlp.n_out, mlp.batch):
            raise ValueError(f"targets must be a {mlp.n_out} x {mlp.batch} matrix, got shape {T.shape}")
        return fmt.to_float(T) if T.dtype == fmt.np_uint else T.astype(np.float64)

    def run_step(self, session, X, T, *, host_latency: int = HOST_LATENCY_CYCLES,
                 check_cycles: bool = True) -> StepResult:
        """One minibatch step on ``session``: ``X`` the ``n_in x b`` inputs (one sample
        per column; floats or bit patterns), ``T`` the ``n_out x b`` targets (or for
        ``softmax_ce`` ``b`` class indices). ``loss`` is the mean of the samples' losses,
        ``output`` the ``n_out x b`` network output (floats)."""
        cfg, fmt, mlp, nr = self.cfg, self.cfg.fmt, self.mlp, self.cfg.nr
        no, b = mlp.n_out, mlp.batch
        mats = {"X": self._mat(X, mlp.n_in, "X")}
        tf = self.targets(T)
        if mlp.loss == "mse":
            mats["T"] = self._mat(T, no, "T")
        raw, ctrs, lc = {}, [], 0
        for i, p in enumerate(self.programs):
            data = []
            for op in p.loads():
                if op.data == "G":
                    mats["G"] = np.stack([host_softmax_grad(fmt, raw["logits"][:, c], tf[:, c])
                                          for c in range(b)], axis=1)
                data += load_beats_for(cfg, pack_matrix(mats[op.data], nr))
            res = session.run(self.images[p.image], data, f"step-{p.name}", p.origin)
            lc += getattr(session, "last_load_cycles", 0)
            c = res.counters
            if check_cycles and c["cycles"] != self.predicted_cycles()[i]:
                raise AssertionError(f"program {i}: {c['cycles']} cycles, predicted {self.predicted_cycles()[i]}")
            if c["mem_conflict"] or c["rf_conflict"]:
                raise AssertionError(f"program {i}: {c['mem_conflict']} SRAM and {c['rf_conflict']} register "
                                     f"write conflicts")
            ctrs.append(c)
            pos = 0
            for op in p.unloads():
                beats = res.data[pos:pos + nr * op.words]
                raw[op.data] = unpack_matrix(decode_unload(cfg, beats, op.words), no, b)
                pos += nr * op.words
        if mlp.loss == "mse":
            d = fmt.to_float(raw["D"])
            loss = float(np.mean([mse_loss(d[:, c]) for c in range(b)]))
            out = d + tf
        else:
            z = fmt.to_float(raw["logits"])
            loss = float(np.mean([softmax_ce_loss(z[:, c], tf[:, c]) for c in range(b)]))
            out = z
        cyc = sum(c["cycles"] for c in ctrs) + lc
        return StepResult(loss, out, ctrs, cyc, self.host_cycles(host_latency), raw, lc)

    def predict(self, session, X) -> np.ndarray:
        """The network outputs (``n_out x b`` floats) for the ``n_in x b`` inputs ``X``
        computed on the array (forward pass only)."""
        cfg, nr = self.cfg, self.cfg.nr
        res = None
        for i, p in enumerate(self.predict_programs):
            data = load_beats_for(cfg, pack_matrix(self._mat(X, self.mlp.n_in, "X"), nr)) if i == 0 else []
            res = session.run(self.images[p.image], data, p.name, p.origin)
        self._resume(session)
        op = self.predict_programs[-1].unloads()[-1]
        z = unpack_matrix(decode_unload(cfg, res.data[-nr * op.words:], op.words), self.mlp.n_out, self.mlp.batch)
        return cfg.fmt.to_float(z)


def _sizes_message(cfg, mlp, al, wbanks) -> str:
    nr, fmt = cfg.nr, cfg.fmt
    wsz = ", ".join(f"W{l} {mlp.shape(l)[0]}x{mlp.shape(l)[1]}: "
                    f"{local_len(mlp.shape(l)[0], nr) * local_len(mlp.shape(l)[1], nr)}"
                    for l in range(mlp.n_layers))
    act = sum(it.words for k, it in al.items.items() if not k.startswith("W"))
    return (f"MLP {'-'.join(map(str, mlp.sizes))} with minibatch {mlp.batch} does not fit one {nr}x{nr} core: "
            f"it needs {al.used('a') + al.used('b')} words per PE (MEM A {al.used('a')}, MEM B {al.used('b')} "
            f"with weights in {'/'.join(x.upper() for x in wbanks)}; weights per PE: {wsz}; activations, "
            f"deltas, transposed copies and scratch: {act}), the configuration has MEM A {cfg.mem_a_words} + "
            f"MEM B {cfg.mem_b_words} words of {fmt} per PE ({cfg.pe_sram_bytes} bytes); no assignment of "
            f"the weight matrices to the banks fits")


def compile_mbgd(cfg, mlp: MLP, *, policy: str = "auto") -> MBProgram:
    """Compile minibatch gradient descent of ``mlp`` (``mlp.batch`` samples per step; the
    update is ``W -= (lr / b) sum over the batch``) for one core of ``cfg``. ``policy``:
    the weight-to-bank mapping (:func:`sw.train.map_layers`; ``"auto"`` tries all-in-A,
    balanced, then every assignment for up to 10 layers).

    Raises :class:`sw.train.TrainCompileError` when the network and its minibatch do not
    fit the PE memories (with the sizes), a kernel does not fit the microcode, ``-lr/b``
    is not representable, a local size exceeds the loop counters, or ``nr < 2``."""
    if not isinstance(mlp, MLP):
        raise TypeError(f"mlp must be an sw.mlp.MLP, got {type(mlp).__name__}")
    if cfg.nr < 2:
        raise TrainCompileError(f"the kernels need nr >= 2, got nr = {cfg.nr}")
    fmt, b = cfg.fmt, mlp.batch
    nlr = fmt.from_float(np.array([-mlp.lr / b]))[0]
    v = float(fmt.to_float(np.array([nlr]))[0])
    if v == 0.0 or not np.isfinite(v):
        raise TrainCompileError(f"learning rate / batch = {mlp.lr:g} / {b} is {'zero' if v == 0 else 'not finite'} "
                                f"in {fmt}")
    lim = (1 << cfg.loop_bits) - 1
    for s in mlp.sizes:
        k = local_len(s, cfg.nr) * local_len(b, cfg.nr)
        if k + 2 > lim:
            raise TrainCompileError(f"a {s} x {b} activation has {k} words per PE, beyond the loop trip-count "
                                    f"range ({lim}) of the configuration")
    cands = [(p, map_layers(cfg, mlp, p)) for p in (["a", "balanced"] if policy == "auto" else [policy])]
    if policy == "auto" and mlp.n_layers <= 10:
        cands += [("search", list(c)) for c in itertools.product("ab", repeat=mlp.n_layers)]
    al = None
    for pol, wbanks in cands:
        al = allocate_mb(cfg, mlp, wbanks)
        if al.fits():
            break
    if not al.fits():
        pol, wbanks = cands[1] if len(cands) > 1 else cands[0]
        raise TrainCompileError(_sizes_message(cfg, mlp, allocate_mb(cfg, mlp, wbanks), wbanks))
    ops = mb_ops(cfg, mlp, al, wbanks)
    groups = [(f"step{i}", g) for i, g in enumerate(_split_ops(cfg, ops))]
    pgroups = [(f"predict{i}", g) for i, g in enumerate(_split_ops(cfg, mb_ops(cfg, mlp, al, wbanks, predict=True)))]
    progs, images = _place(cfg, groups + pgroups)
    return MBProgram(cfg, mlp, wbanks, al, ops, progs[:len(groups)], progs[len(groups):], images, int(nlr),
                     {"lr_stored": v * b, "neg_lr_over_b": v, "policy": pol}, [False] * mlp.n_layers)
