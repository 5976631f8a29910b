"""Golden trainers: the array's SGD step bit for bit in numpy, and float64 textbook SGD.

:class:`GoldenSGD` performs exactly the operations of the step that
:func:`sw.train.compile_sgd` emits, in the same order, by composing the per-kernel
golden models of :mod:`sw.golden` (``gemv``, ``relu``, ``axpy``, ``gemv_t``, ``mask``,
``rank1``, or ``rank1_scaled_v`` for a layer whose backward step is the fused kernel:
:attr:`sw.train.TrainProgram.fused`) and the host's :func:`sw.train.host_softmax_grad`. It works on the padded
matrices and vectors (``ceil(n / nr) * nr`` elements) because the array does: padding
positions of a vector hold what the kernels computed there (signed zeros), and they
enter the next kernel's chains, so only the padded computation is bit-exact in every
case. Its weights after each step must equal the PE memories' (padding included).

:class:`Float64SGD` is the textbook algorithm in float64 (same initial weights, same
samples, same losses): the reference the array's low-precision training is compared
with.
"""

from __future__ import annotations

import numpy as np

from sw import golden
from sw.layout import local_len
from sw.mlp import MLP
from sw.softmax import golden_softmax_grad
from sw.train import backward_plan, host_softmax_grad, mse_loss, one_hot, resolve_softmax, softmax_ce_loss

__all__ = ["GoldenSGD", "Float64SGD", "pad_matrix", "pad_vector"]


def pad_matrix(fmt, nr, W) -> np.ndarray:
    W = np.asarray(W, dtype=fmt.np_uint)
    m, n = W.shape
    out = np.zeros((local_len(m, nr) * nr, local_len(n, nr) * nr), dtype=fmt.np_uint)
    out[:m, :n] = W
    return out


def pad_vector(fmt, nr, v) -> np.ndarray:
    v = np.asarray(v, dtype=fmt.np_uint)
    out = np.zeros(local_len(len(v), nr) * nr, dtype=fmt.np_uint)
    out[:len(v)] = v
    return out


class GoldenSGD:
    """Bit-exact model of the compiled SGD step (``cfg``, ``mlp``, initial weights as
    global ``(m, n)`` bit patterns). :attr:`W` holds the padded weights.

    ``fused``: per layer, whether the program's backward step is the fused kernel (pass
    :attr:`sw.train.TrainProgram.fused`); None: :func:`sw.train.backward_plan`'s
    automatic choice, which :func:`sw.train.compile_sgd` makes by default. A fused layer
    updates ``W[i, j] += d[i] * (alpha * a[j])`` (``rank1_scaled_v``), a separate one
    ``(alpha * d[i]) * a[j]`` (``rank1``): the roundings differ."""

    def __init__(self, cfg, mlp: MLP, weights, reduce: str = "tree", fused=None, softmax: str = "auto"):
        self.cfg, self.mlp, self.fmt, self.nr = cfg, mlp, cfg.fmt, cfg.nr
        self.softmax = resolve_softmax(cfg, mlp, softmax)
        self.reduce = reduce
        self.fused = [bool(f) for f in (backward_plan(cfg, mlp) if fused is None else fused)]
        if len(self.fused) != mlp.n_layers or self.fused[0]:
            raise ValueError(f"fused must have {mlp.n_layers} flags, the first False (layer 0 has no W^T d), "
                             f"got {self.fused}")
        self.W = [pad_matrix(self.fmt, self.nr, W) for W in weights]
        fmt = self.fmt
        self.neg_lr = fmt.from_float(np.array([-mlp.lr]))[0]
        self.m1 = fmt.from_float(np.array([-1.0]))[0]

    def weights(self, padded: bool = False) -> list:
        if padded:
            return [W.copy() for W in self.W]
        return [W[:m, :n].copy() for W, (m, n) in zip(self.W, (self.mlp.shape(l) for l in range(self.mlp.n_layers)))]

    def _bits(self, v, n):
        fmt = self.fmt
        v = np.asarray(v)
        if v.dtype != fmt.np_uint:
            v = fmt.from_float(v.astype(np.float64)).astype(fmt.np_uint)
        assert v.shape == (n,)
        return v

    def forward(self, x) -> list:
        """Activations ``[a0 = x, a1, ..., z_L]`` (padded bit patterns)."""
        fmt, nr, nl = self.fmt, self.nr, self.mlp.n_layers
        a = [pad_vector(fmt, nr, self._bits(x, self.mlp.n_in))]
        for l in range(nl):
            z = golden.gemv(fmt, nr, self.W[l], a[-1], self.reduce)
            a.append(golden.relu(fmt, z) if l < nl - 1 else z)
        return a

    def predict(self, x) -> np.ndarray:
        """The network output (floats) as the array's forward pass computes it."""
        return self.fmt.to_float(self.forward(x)[-1][:self.mlp.n_out])

    def step(self, x, t) -> dict:
        """One SGD step; returns ``loss``, ``output`` (floats), ``d`` (bit patterns of
        the output gradient)."""
        fmt, nr, mlp = self.fmt, self.nr, self.mlp
        nl, no = mlp.n_layers, mlp.n_out
        if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(no, t)
        tb = np.asarray(t)
        tf = fmt.to_float(tb) if tb.dtype == fmt.np_uint else tb.astype(np.float64)
        a = self.forward(x)
        z = a[-1]
        if mlp.loss == "mse":
            d = golden.axpy(fmt, self.m1, pad_vector(fmt, nr, self._bits(t, no)), z)   # z - t
            df = fmt.to_float(d[:no])
            loss, out = mse_loss(df), df + tf
        else:
            if self.softmax == "array":
                g = golden_softmax_grad(self.cfg, z[:no], fmt.from_float(tf).astype(fmt.np_uint))
            else:
                g = host_softmax_grad(fmt, z[:no], tf)
            d = pad_vector(fmt, nr, g)
            zf = fmt.to_float(z[:no])
            loss, out = softmax_ce_loss(zf, tf), zf
        for l in range(nl - 1, -1, -1):
            if l >= 1:
                e = golden.gemv_t(fmt, nr, self.W[l], d, self.reduce)
                dm = golden.mask(fmt, e, a[l])
            if self.fused[l]:
                self.W[l] = golden.rank1_scaled_v(fmt, nr, self.W[l], d, a[l], self.neg_lr)
            else:
                self.W[l] = golden.rank1(fmt, nr, self.W[l], d, a[l], self.neg_lr)
            if l >= 1:
                d = dm
        return {"loss": loss, "output": out, "d": d}


class Float64SGD:
    """Textbook batch-1 SGD in float64: ``z_l = W_l a_{l-1}``, ``a_l = relu(z_l)``,
    output gradient ``y - t`` (MSE) or ``softmax(y) - t``, ``d_{l-1} = (W_l^T d_l) *
    [z_{l-1} > 0]``, ``W_l -= lr d_l a_{l-1}^T`` (the updates use the weights of the
    forward pass)."""

    def __init__(self, mlp: MLP, weights):
        self.mlp = mlp
        self.W = [np.array(W, dtype=np.float64) for W in weights]

    def forward(self, x) -> list:
        a = [np.asarray(x, dtype=np.float64)]
        for l, W in enumerate(self.W):
            z = W @ a[-1]
            a.append(np.maximum(z, 0.0) if l < len(self.W) - 1 else z)
        return a

    def predict(self, x) -> np.ndarray:
        return self.forward(x)[-1]

    def step(self, x, t) -> dict:
        mlp = self.mlp
        if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(mlp.n_out, t)
        t = np.asarray(t, dtype=np.float64)
        a = self.forward(x)
        y = a[-1]
        if mlp.loss == "mse":
            d = y - t
            loss = mse_loss(d)
        else:
            e = np.exp(y - y.max())
            d = e / e.sum() - t
            loss = softmax_ce_loss(y, t)
        for l in range(len(self.W) - 1, -1, -1):
            dn = (self.W[l].T @ d) * (a[l] > 0) if l >= 1 else None
            self.W[l] -= mlp.lr * np.outer(d, a[l])
            d = dn
        return {"loss": loss, "output": y}
