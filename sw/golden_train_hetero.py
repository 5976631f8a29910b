"""Golden trainer of :mod:`sw.train_hetero`: the same operations in numpy, bit for bit.

Layer ``l`` is computed at its core kind's ``nr`` and format (:class:`GoldenHetero`
takes the chip and the cores the compiler chose, ``HeteroTrainProgram.cores``). Between
layers, ``transfers="ring"``: the sender's padded vector (the kernels' padding positions
included), zero-extended, cut to the receiver's padded length (what the ring transfer
delivers, and what a layer on the same core reads); ``"host"``: the real elements,
zero-padded to the next kind's ``nr``. Inside a phase the padded vectors are the
kernels', as in :class:`sw.golden_train.GoldenSGD`.
"""

from __future__ import annotations

import numpy as np

from sw import golden
from sw.golden_train import pad_matrix, pad_vector
from sw.mlp import MLP
from sw.train_host import mse_loss, weight_bits
from sw.train_vectors import vector_bits

__all__ = ["GoldenHetero"]


class GoldenHetero:
    def __init__(self, hcfg, mlp: MLP, cores: list, weights, transfers: str = "ring"):
        self.mlp, self.ring = mlp, transfers == "ring"
        self.cfgs = [hcfg.core_cfg(k) for k in cores]
        self.W = [pad_matrix(c.fmt, c.nr, W) for c, W in
                  zip(self.cfgs, (weight_bits(mlp, c.fmt, weights)[l] for l, c in enumerate(self.cfgs)))]

    def _cross(self, c, real, padded):
        """The vector as layer of kind ``c`` receives it (see the module docstring)."""
        if not self.ring or padded is None:
            return pad_vector(c.fmt, c.nr, real)
        n = -(-len(real) // c.nr) * c.nr
        out = np.zeros(n, dtype=padded.dtype)
        out[:min(n, len(padded))] = padded[:n]
        return out

    def weights(self, padded: bool = False) -> list:
        if padded:
            return [W.copy() for W in self.W]
        return [W[:m, :n].copy() for W, (m, n) in zip(self.W, (self.mlp.shape(l) for l in range(self.mlp.n_layers)))]

    def step(self, x, t) -> dict:
        mlp, nl = self.mlp, self.mlp.n_layers
        fmt0 = self.cfgs[0].fmt
        a_real = vector_bits(fmt0, x, mlp.n_in)
        ins, a_pad = [], None
        for l in range(nl):
            c = self.cfgs[l]
            a = self._cross(c, a_real, a_pad if l else None)
            ins.append(a)
            z = golden.gemv(c.fmt, c.nr, self.W[l], a, "tree")
            if l < nl - 1:
                a_pad = golden.relu(c.fmt, z)
                a_real = a_pad[:mlp.shape(l)[0]]
        c = self.cfgs[-1]
        fmt, no = c.fmt, mlp.n_out
        m1 = fmt.from_float(np.array([-1.0]))[0]
        tb = vector_bits(fmt, t, no)
        d = golden.axpy(fmt, m1, pad_vector(fmt, c.nr, tb), z)
        df = fmt.to_float(d[:no])
        out = {"loss": mse_loss(df), "output": df + fmt.to_float(tb), "d": d[:no].copy()}
        g_real = g_pad = None
        for l in range(nl - 1, -1, -1):
            c = self.cfgs[l]
            neg_lr = c.fmt.from_float(np.array([-mlp.lr]))[0]
            if l < nl - 1:
                d = self._cross(c, g_real, g_pad)
            if l >= 1:
                e = golden.gemv_t(c.fmt, c.nr, self.W[l], d, "tree")
                g_pad = golden.mask(c.fmt, e, ins[l])
                g_real = g_pad[:mlp.shape(l)[1]]
            self.W[l] = golden.rank1(c.fmt, c.nr, self.W[l], d, ins[l], neg_lr)
        return out
