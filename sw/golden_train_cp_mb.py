"""Golden model of the minibatch-CP pipeline (:mod:`sw.train_cp_mb`): the array's steps
bit for bit.

:class:`GoldenChipMBCP` keeps what every core holds, as padded global matrices (``P``
panel rows, ``N`` inputs padded to ``nr``, ``b`` columns padded to ``nr``): the weight
panel, the input ``Ain`` (``N x b``), the transposed inputs of the last ``V`` steps and
the one being updated (``VT``), the incoming ``D^T`` slice (``DinT``), the partial ``E``
of ``(W^T D)^T``, the output ``Z``; and performs each step's operations in the array's
order with the per-kernel golden models of :mod:`sw.golden` (GEMM chains, the
accumulating GEMM ``W += (-lr/b)(D V^T)``, transposes, ReLU, masks, MSE's ``Z - T``),
then the chains: the input copied into the first group, the activations concatenated
in core order, the partials of ``E`` summed over the next group in ring order (``acc =
p[0]``, then ``acc * 1 + p[h]``) and each core's columns kept. Its weights after every
step must equal the PE memories' (padding included).

:class:`Float64MBCP` is the same pipeline schedule in textbook float64 arithmetic
(``W -= (lr / b) D A^T``, the softmax in float64).
"""

from __future__ import annotations

import numpy as np

from sw import golden
from sw.layout import local_len
from sw.mlp import MLP
from sw.train import host_softmax_grad, mse_loss, softmax_ce_loss, weight_bits
from sw.train_mb import MBProgram
from sw.golden_train_mb import one_hot_cols
from sw.golden_train_cp import Float64CP, golden_chains, group_weights
from sw.train_cp import cp_mapping, cp_shapes, cp_spad_plan

__all__ = ["GoldenChipMBCP", "Float64MBCP", "cp_forward_mb"]


def cp_forward_mb(cfg, weights, X) -> np.ndarray:
    """The output layer's values (floats, ``P_{L-1}`` padded rows x the padded batch) for
    the minibatch ``X`` (``n_in x b``) as the minibatch pipeline's forward passes compute
    them (each core's GEMM of its panel, ReLU, the gathered activations in core order),
    from the global weights with the mapping's padding (``weights``: each layer's
    ``(g_l P_l, N_l)`` bit patterns, as :meth:`sw.train_cp.ChipCPProgram.weights_from_session`
    gives them with ``padded=True``). A GEMM's outputs are independent chains, so one GEMM
    over a group's stacked panels is every core's, and a column does not depend on the
    others."""
    fmt, nr = cfg.fmt, cfg.nr
    a = np.asarray(X)
    if a.dtype != fmt.np_uint:
        a = fmt.from_float(a.astype(np.float64)).astype(fmt.np_uint)
    for l, G in enumerate(weights):
        z = golden.gemm(fmt, nr, G, a)[:G.shape[0]]
        if l < len(weights) - 1:
            a = golden.relu(fmt, z)
    return fmt.to_float(z)


class GoldenChipMBCP:
    """Bit-exact model of the compiled minibatch-CP pipeline (``mlp.batch > 1``, MSE;
    initial weights as global ``(m, n)`` bit patterns or floats; ``groups`` as for
    :func:`sw.train_cp.compile_chip_cp`)."""

    def __init__(self, cfg, mlp: MLP, weights, groups=None, spad=None, page_rows: int | None = None):
        if mlp.batch < 2:
            raise ValueError("GoldenChipMBCP models minibatch CP: MLP.batch > 1")
        self.cfg, self.mlp, self.fmt, self.nr = cfg, mlp, cfg.fmt, cfg.nr
        self.groups, fused = cp_mapping(cfg, mlp, groups)
        self.P, self.N = cp_shapes(cfg, mlp, self.groups)
        #: layer -> row pages ``((first row, rows), ...)`` of the panels paged from the scratchpad
        self.pages = {l: sp.row_pages(cfg.nr) for l, sp in cp_spad_plan(
            cfg, mlp, self.P, self.N, self.groups, fused, None, spad, page_rows).items()}
        nl, fmt, nr = mlp.n_layers, cfg.fmt, cfg.nr
        self.V = 2 * (nl - 1)
        self.neg_lr = fmt.from_float(np.array([-mlp.lr / mlp.batch]))[0]
        self.m1 = fmt.from_float(np.array([-1.0]))[0]
        self.Bp = local_len(mlp.batch, nr) * nr
        z = lambda r, c: np.zeros((r, c), dtype=fmt.np_uint)       # noqa: E731
        self.cores = []
        for l, Wl in enumerate(weight_bits(mlp, fmt, weights)):
            m, n = mlp.shape(l)
            Np = self._np(l)
            G = z(self.groups[l] * self.P[l], Np)
            G[:m, :n] = Wl
            for i in range(self.groups[l]):
                self.cores.append({"l": l, "i": i, "W": G[i * self.P[l]:(i + 1) * self.P[l]].copy(),
                                   "ain": z(Np, self.Bp), "z": z(self.P[l], self.Bp), "VT": z(self.Bp, Np),
                                   "dint": z(self.Bp, self.P[l]), "e": z(self.Bp, Np),
                                   "hist": [z(self.Bp, Np) for _ in range(self.V)]})
        self.step_index = 0

    def _np(self, l):
        return local_len(self.N[l], self.nr) * self.nr

    def weights(self, padded: bool = False) -> list:
        """The global weights (``padded``: with the panels' padding rows and columns)."""
        return group_weights(self.cores, self.mlp, self.N, padded)

    def _group(self, l):
        return [st for st in self.cores if st["l"] == l]

    def _mat(self, v, rows, prows):
        fmt, b = self.fmt, self.mlp.batch
        out = np.zeros((prows, self.Bp), dtype=fmt.np_uint)
        if v is not None:
            a = np.asarray(v)
            out[:rows, :b] = a if a.dtype == fmt.np_uint else fmt.from_float(a.astype(np.float64))
        return out

    def _backward(self, l, DT, W):
        """``DT W`` of one core's panel (page by page, first to last, for a paged panel:
        the first page's ``gemm``, then ``gemm_acc`` of each further page)."""
        fmt, nr = self.fmt, self.nr
        acc = None
        for r0, n in self.pages.get(l, ((0, W.shape[0]),)):
            DTp, Wp = DT[:, r0:r0 + n], W[r0:r0 + n]
            acc = golden.gemm(fmt, nr, DTp, Wp) if acc is None else golden.gemm_acc(fmt, nr, DTp, Wp, acc)
        return acc

    def step(self, x, t) -> dict:
        """One pipeline step (the arguments of :meth:`sw.train_cp_mb.ChipMBCPProgram.run_step`)."""
        fmt, nr, mlp = self.fmt, self.nr, self.mlp
        nl, no, b, V, s = mlp.n_layers, mlp.n_out, mlp.batch, self.V, self.step_index
        X = self._mat(x, mlp.n_in, self._np(0))
        smx = mlp.loss == "softmax_ce"
        if smx:                                       # class indices or an n_out x b matrix; None: zeros
            tf = np.zeros((no, b)) if t is None else MBProgram.targets(self, t)
        else:
            T = self._mat(t, no, self.P[-1])
        tp = lambda M: golden.transpose(fmt, nr, M)        # noqa: E731
        out = None
        for st in self.cores:                             # head
            l = st["l"]
            st["z"] = golden.gemm(fmt, nr, st["W"], st["ain"])
            if l < nl - 1:
                st["z"] = golden.relu(fmt, st["z"])
                if l >= 1:
                    st["e"] = golden.mask(fmt, self._backward(l, st["dint"], st["W"]), st["VT"])
                d = tp(st["dint"])
            else:
                if smx:                               # logits out, the host's G in (replacing z)
                    out = st["z"][:no, :b].copy()
                    G = np.zeros_like(st["z"])
                    G[:no, :b] = np.stack([host_softmax_grad(fmt, out[:, c], tf[:, c]) for c in range(b)], axis=1)
                    st["z"] = G
                else:
                    st["z"] = golden.axpy(fmt, self.m1, T, st["z"])
                st["VT"] = tp(st["ain"])
                st["e"] = golden.mask(fmt, golden.gemm(fmt, nr, tp(st["z"]), st["W"]), st["VT"])
                d = st["z"]
            st["W"] = golden.gemm_acc(fmt, nr, d, st["VT"], st["W"], self.neg_lr)
        if not smx:
            out = self._group(nl - 1)[0]["z"][:no, :b].copy()
        for st in self.cores:                             # tail
            if st["l"] < nl - 1:
                D = 2 * (nl - 1 - st["l"])
                st["hist"][s % V] = tp(st["ain"])
                st["VT"] = st["hist"][(s + 1 - D) % V].copy()
        golden_chains(fmt, self.cores, nl, X, self.P, "dint", lambda a: a.copy(), lambda e, n: e,
                      lambda acc, lo, hi: acc[:, lo:hi])
        self.step_index += 1
        d = fmt.to_float(out)
        if t is None:
            return {"loss": None, "output": d, "raw": out}
        if smx:
            return {"loss": float(np.mean([softmax_ce_loss(d[:, c], tf[:, c]) for c in range(b)])), "output": d,
                    "raw": out}
        tf = fmt.to_float(T[:no, :b])
        return {"loss": float(np.mean([mse_loss(d[:, c]) for c in range(b)])), "output": d + tf, "raw": out}


class Float64MBCP(Float64CP):
    """Minibatch continuous propagation in float64 with the schedule of
    :class:`GoldenChipMBCP`: :class:`sw.golden_train_cp.Float64CP` with a minibatch of
    ``b`` samples (``n x b`` matrices) in every pipeline slot, the update ``W -= (lr / b)
    D A^T`` (the gradient of the mean of the samples' losses) and the loss the mean of
    theirs. ``x``: ``n_in x b``; ``t``: ``n_out x b`` (softmax: or ``b`` class indices);
    :meth:`predict` takes and returns ``n x b`` matrices."""

    @staticmethod
    def _check_batch(mlp: MLP) -> None:
        if mlp.batch < 2:
            raise ValueError("Float64MBCP models minibatch CP: MLP.batch > 1 (Float64CP for batch 1)")

    def _cols(self, x) -> np.ndarray:
        n, b = self.mlp.n_in, self.mlp.batch
        if x is None:
            return np.zeros((n, b))
        X = np.array(x, dtype=np.float64)
        if X.shape != (n, b):
            raise ValueError(f"expected a {n} x {b} input, got shape {X.shape}")
        return X

    def _targets(self, t) -> np.ndarray:
        mlp = self.mlp
        if t is None:
            return np.zeros((mlp.n_out, mlp.batch))
        T = np.asarray(t)
        if mlp.loss == "softmax_ce" and T.ndim == 1:
            return one_hot_cols(mlp.n_out, T)
        if T.shape != (mlp.n_out, mlp.batch):
            raise ValueError(f"targets must be a {mlp.n_out} x {mlp.batch} matrix, got shape {T.shape}")
        return T.astype(np.float64)

    def _out(self, Y):
        return Y.copy()
