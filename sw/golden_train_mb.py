"""Golden trainers for minibatch GD: the array's step bit for bit in numpy, and float64.

:class:`GoldenMBGD` performs exactly the operations of the step that
:func:`sw.train_mb.compile_mbgd` emits, in the same order, by composing the per-kernel
golden models of :mod:`sw.golden` (``gemm``, ``relu``, ``axpy``, ``transpose``,
``mask``, ``gemm_acc``) and the host's :func:`sw.train.host_softmax_grad` (per column).
It works on the padded matrices (``ceil(n / nr) * nr`` rows, ``ceil(b / nr) * nr``
columns) because the array does: the GEMMs write signed zeros into padding positions,
the elementwise kernels act on them, and they enter later chains; its weights after each
step must equal the PE memories' (padding included).

:class:`Float64MBGD` is textbook minibatch GD in float64 (``W -= (lr / b) D A^T``, the
gradient of the mean of the samples' losses; the backward pass uses the weights of the
forward pass).
"""

from __future__ import annotations

import numpy as np

from sw import golden
from sw.golden_train import pad_matrix
from sw.mlp import MLP
from sw.train import host_softmax_grad, mse_loss, softmax_ce_loss

__all__ = ["GoldenMBGD", "Float64MBGD", "one_hot_cols"]


def one_hot_cols(n_out: int, classes) -> np.ndarray:
    """``n_out x b`` one-hot columns for ``b`` class indices."""
    classes = np.asarray(classes, dtype=np.int64)
    out = np.zeros((n_out, len(classes)))
    out[classes, np.arange(len(classes))] = 1.0
    return out


class GoldenMBGD:
    """Bit-exact model of the compiled minibatch step (``cfg``, ``mlp`` with its
    ``batch``, initial weights as global ``(m, n)`` bit patterns). :attr:`W` holds the
    padded weights."""

    def __init__(self, cfg, mlp: MLP, weights):
        self.cfg, self.mlp, self.fmt, self.nr = cfg, mlp, cfg.fmt, cfg.nr
        fmt = self.fmt
        self.W = [pad_matrix(fmt, self.nr, W) for W in weights]
        self.neg_lr = fmt.from_float(np.array([-mlp.lr / mlp.batch]))[0]
        self.m1 = fmt.from_float(np.array([-1.0]))[0]

    def weights(self, padded: bool = False) -> list:
        if padded:
            return [W.copy() for W in self.W]
        return [W[:m, :n].copy() for W, (m, n) in zip(self.W, (self.mlp.shape(l) for l in range(self.mlp.n_layers)))]

    def _bits(self, M, n):
        fmt = self.fmt
        M = np.asarray(M)
        if M.dtype != fmt.np_uint:
            M = fmt.from_float(M.astype(np.float64)).astype(fmt.np_uint)
        assert M.shape == (n, self.mlp.batch), (M.shape, n, self.mlp.batch)
        return M

    def _targets(self, T):
        mlp, fmt = self.mlp, self.fmt
        T = np.asarray(T)
        if mlp.loss == "softmax_ce" and T.ndim == 1:
            return one_hot_cols(mlp.n_out, T)
        return fmt.to_float(T) if T.dtype == fmt.np_uint else T.astype(np.float64)

    def forward(self, X) -> list:
        """``[A0 = X, A1, ..., Z_L]`` (padded bit-pattern matrices)."""
        fmt, nr, nl = self.fmt, self.nr, self.mlp.n_layers
        A = [pad_matrix(fmt, nr, self._bits(X, self.mlp.n_in))]
        for l in range(nl):
            Z = golden.gemm(fmt, nr, self.W[l], A[-1])
            A.append(golden.relu(fmt, Z) if l < nl - 1 else Z)
        return A

    def predict(self, X) -> np.ndarray:
        return self.fmt.to_float(self.forward(X)[-1][:self.mlp.n_out, :self.mlp.batch])

    def step(self, X, T) -> dict:
        """One minibatch step; returns ``loss`` (mean over the samples), ``output``
        (``n_out x b`` floats) and ``D`` (padded bit patterns of the output gradient)."""
        fmt, nr, mlp = self.fmt, self.nr, self.mlp
        nl, no, b = mlp.n_layers, mlp.n_out, mlp.batch
        tf = self._targets(T)
        A = self.forward(X)
        Z = A[-1]
        if mlp.loss == "mse":
            D = golden.axpy(fmt, self.m1, pad_matrix(fmt, nr, self._bits(T, no)), Z)     # Z - T
            d = fmt.to_float(D[:no, :b])
            loss, out = float(np.mean([mse_loss(d[:, c]) for c in range(b)])), d + tf
        else:
            z = fmt.to_float(Z[:no, :b])
            G = np.stack([host_softmax_grad(fmt, Z[:no, c], tf[:, c]) for c in range(b)], axis=1)
            D = pad_matrix(fmt, nr, G)
            loss, out = float(np.mean([softmax_ce_loss(z[:, c], tf[:, c]) for c in range(b)])), z
        for l in range(nl - 1, -1, -1):
            if l >= 1:
                EXT = golden.gemm(fmt, nr, golden.transpose(fmt, nr, D), self.W[l])      # dX^T = D^T W (old W)
                Dn = golden.mask(fmt, golden.transpose(fmt, nr, EXT), A[l])
            self.W[l] = golden.gemm_acc(fmt, nr, D, golden.transpose(fmt, nr, A[l]), self.W[l], self.neg_lr)
            if l >= 1:
                D = Dn
        return {"loss": loss, "output": out, "D": D}


class Float64MBGD:
    """Textbook minibatch GD in float64: ``Z_l = W_l A_{l-1}``, ``A_l = relu(Z_l)``,
    output gradient ``Y - T`` (MSE) or ``softmax(Y) - T`` per column, ``D_{l-1} = (W_l^T
    D_l) * [Z_{l-1} > 0]``, ``W_l -= (lr / b) D_l A_{l-1}^T`` (the forward pass's
    weights)."""

    def __init__(self, mlp: MLP, weights):
        self.mlp = mlp
        self.W = [np.array(W, dtype=np.float64) for W in weights]

    def forward(self, X) -> list:
        A = [np.asarray(X, dtype=np.float64)]
        for l, W in enumerate(self.W):
            Z = W @ A[-1]
            A.append(np.maximum(Z, 0.0) if l < len(self.W) - 1 else Z)
        return A

    def predict(self, X) -> np.ndarray:
        return self.forward(X)[-1]

    def step(self, X, T) -> dict:
        mlp = self.mlp
        T = np.asarray(T)
        if mlp.loss == "softmax_ce" and T.ndim == 1:
            T = one_hot_cols(mlp.n_out, T)
        T = T.astype(np.float64)
        A = self.forward(X)
        Y = A[-1]
        b = Y.shape[1]
        if mlp.loss == "mse":
            D = Y - T
            loss = float(np.mean([mse_loss(D[:, c]) for c in range(b)]))
        else:
            E = np.exp(Y - Y.max(axis=0))
            D = E / E.sum(axis=0) - T
            loss = float(np.mean([softmax_ce_loss(Y[:, c], T[:, c]) for c in range(b)]))
        for l in range(len(self.W) - 1, -1, -1):
            Dn = (self.W[l].T @ D) * (A[l] > 0) if l >= 1 else None
            self.W[l] -= (mlp.lr / b) * (D @ A[l].T)
            D = Dn
        return {"loss": loss, "output": Y}
