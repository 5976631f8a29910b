"""Golden trainer of :mod:`sw.train_hetero`: the same operations in numpy, bit for bit.

Layer ``l`` is computed at its core kind's ``nr`` and format (:class:`GoldenHetero`
takes the chip and the cores the compiler chose, ``HeteroTrainProgram.cores``). A vector
crosses from one layer to the next with its real length and is zero-padded to the next
kind's ``nr``, as the host does; inside a phase the padded vectors are the kernels'
(padding positions included), as in :class:`sw.golden_train.GoldenSGD`.
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
    def __init__(self, hcfg, mlp: MLP, cores: list, weights):
        self.mlp = mlp
        self.cfgs = [hcfg.core_cfg(k) for k in cores]
        self.W = [pad_matrix(c.fmt, c.nr, W) for c, W in
                  zip(self.cfgs, (weight_bits(mlp, c.fmt, weights)[l] for l, c in enumerate(self.cfgs)))]

    def weights(self, padded: bool = False) -> list:
        if padded:
            return [W.copy() for W in self.W]
        return [W[:m, :n].copy() for W, (m, n) in zip(self.W, (self.mlp.shape(l) for l in range(self.mlp.n_layers)))]

    def step(self, x, t) -> dict:
        mlp, nl = self.mlp, self.mlp.n_layers
        fmt0 = self.cfgs[0].fmt
        a_real = vector_bits(fmt0, x, mlp.n_in)
        ins = []
        for l in range(nl):
            c = self.cfgs[l]
            a = pad_vector(c.fmt, c.nr, a_real)
            ins.append(a)
            z = golden.gemv(c.fmt, c.nr, self.W[l], a, "tree")
            if l < nl - 1:
                a_real = golden.relu(c.fmt, z)[:mlp.shape(l)[0]]
        c = self.cfgs[-1]
        fmt, no = c.fmt, mlp.n_out
        m1 = fmt.from_float(np.array([-1.0]))[0]
        tb = vector_bits(fmt, t, no)
        d = golden.axpy(fmt, m1, pad_vector(fmt, c.nr, tb), z)
        df = fmt.to_float(d[:no])
        out = {"loss": mse_loss(df), "output": df + fmt.to_float(tb), "d": d[:no].copy()}
        g_real = None
        for l in range(nl - 1, -1, -1):
            c = self.cfgs[l]
            neg_lr = c.fmt.from_float(np.array([-mlp.lr]))[0]
            if l < nl - 1:
                d = pad_vector(c.fmt, c.nr, g_real)
            if l >= 1:
                e = golden.gemv_t(c.fmt, c.nr, self.W[l], d, "tree")
                g_real = golden.mask(c.fmt, e, ins[l])[:mlp.shape(l)[1]]
            self.W[l] = golden.rank1(c.fmt, c.nr, self.W[l], d, ins[l], neg_lr)
        return out
