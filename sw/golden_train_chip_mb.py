"""Golden trainer for minibatch GD across the cores of a chip: the array's step bit for
bit in numpy.

:class:`GoldenChipMBGD` performs exactly the operations of the step that
:func:`sw.train_chip_mb.compile_chip_mbgd` emits, core by core, in the same order: the
per-kernel golden models of :mod:`sw.golden` (``gemm``, ``relu``, ``axpy``,
``transpose``, ``mask``, ``gemm_acc``) on each core's padded panels; the broadcast and
the all-gather are exact copies (a gathered matrix is the concatenation of the cores'
panels in the global order); the reduce-scatter adds the partials of segment ``s`` in
the ring's order, starting at core ``s + 1`` (``acc = p[s+1]``, then ``acc =
fmt(acc * 1 + p[s+h])`` for ``h = 2 .. c``), as :func:`sw.ring.golden_reduce_scatter`.
With the output layer split by columns (``out_map="cols"``), core ``k`` multiplies its
column panel by its own segment of the last hidden activation, the partials are reduced
onto core 0 in the ring's order from core 1 (``acc = p[1]``, ``acc = fmt(acc * 1 +
p[h])`` for ``h = 2 .. c - 1``, then ``+ p[0]``), and the output gradient is the same on
every core (the broadcast is a copy).
Panels kept in the scratchpad (:func:`sw.train_chip_mb.plan_chip_mb`) are computed page
by page: the forward GEMM and the update are unchanged (each output row and each weight
depends on its own row only), the backward partial ``dX^T = D^T W`` is the first page's
``gemm`` and then ``gemm_acc`` (``alpha = 1``: ``fmt(chain + acc)``) of each further page,
from the last page to the first.
Its weights after each step must equal the PE memories' (padding rows included).
The float64 reference is :class:`sw.golden_train_mb.Float64MBGD` (the algorithm does not
depend on the core count).
"""

from __future__ import annotations

import numpy as np

from sw.ring import golden_reduce
from sw import golden
from sw.golden_train import pad_matrix
from sw.golden_train_mb import GoldenMBGD
from sw.mlp import MLP
from sw.train import host_softmax_grad, mse_loss, softmax_ce_loss
from sw.train_chip import PanelMap, chip_shapes, resolve_out_map

__all__ = ["GoldenChipMBGD"]


class GoldenChipMBGD(PanelMap):
    """Bit-exact model of the compiled minibatch step across ``cfg.cores`` cores
    (initial weights as global ``(m, n)`` bit patterns or floats)."""

    def __init__(self, cfg, mlp: MLP, weights, out_map: str = "auto", spad=None, page_rows: int | None = None,
                 acts: str = "auto"):
        from sw.train_chip_mb import plan_chip_mb

        self.cfg, self.mlp, self.fmt, self.nr, self.c = cfg, mlp, cfg.fmt, cfg.nr, cfg.cores
        fmt = cfg.fmt
        self.out_map = resolve_out_map(cfg, mlp, out_map)
        self.P, self.N = chip_shapes(cfg, mlp, self.out_map)
        #: layer -> row pages ``((first row, rows), ...)`` of the panels in the scratchpad
        plan = plan_chip_mb(cfg, mlp, self.P, self.N, self.out_map, spad, page_rows, acts=acts)
        self.pages = {l: sp.row_pages(self.nr) for l, sp in plan[2].items()}
        self.neg_lr = fmt.from_float(np.array([-mlp.lr / mlp.batch]))[0]
        self.m1 = fmt.from_float(np.array([-1.0]))[0]
        #: W[k][l]: core k's padded panel of layer l
        self.W = [[pad_matrix(fmt, self.nr, panel) for panel in panels] for panels in self.core_weights(weights)]

    # -- helpers ------------------------------------------------------------------------
    def _cols(self, l, k):
        return None                                    # the global order on every core

    _bits = GoldenMBGD._bits
    _targets = GoldenMBGD._targets

    def _panels(self, M, p):
        """Row panels of ``p`` rows of a (padded-column) matrix, padded with zero rows."""
        pad = np.zeros((self.c * p, M.shape[1]), dtype=self.fmt.np_uint)
        pad[:M.shape[0]] = M
        return [pad[k * p:(k + 1) * p] for k in range(self.c)]

    def _reduce_scatter(self, partials, p):
        """Core ``s``: the sum over the cores of column segment ``s`` (``p`` columns) of
        the partials, in the ring's order."""
        c = self.c
        return [golden_reduce(self.cfg, [P[:, s * p:(s + 1) * p] for P in partials], s) for s in range(c)]

    def _backward(self, l, D, W):
        """``dX^T = D^T W`` of one core's panel (page by page for a paged panel)."""
        fmt, nr = self.fmt, self.nr
        pages = self.pages.get(l, ((0, W.shape[0]),))
        acc = None
        for r0, n in reversed(pages):                 # last page first, as the cores
            DT, Wp = golden.transpose(fmt, nr, D[r0:r0 + n]), W[r0:r0 + n]
            acc = golden.gemm(fmt, nr, DT, Wp) if acc is None else golden.gemm_acc(fmt, nr, DT, Wp, acc)
        return acc

    # -- the network --------------------------------------------------------------------
    def weights(self, padded: bool = False) -> list:
        """Global weights (``padded``: the cores' padded panels together, padding
        included)."""
        return [self.join_panels(l, [self.W[k][l] for k in range(self.c)], padded)
                for l in range(self.mlp.n_layers)]

    def forward(self, X) -> tuple:
        """``(inputs, outputs)``: per layer the gathered input (padded, the same on every
        core) and per core the output panel (after the ReLU for hidden layers); with the
        output layer split by columns, its output is ``[Z]``, the reduced sum on core 0."""
        fmt, nr, nl, c = self.fmt, self.nr, self.mlp.n_layers, self.c
        A = [pad_matrix(fmt, nr, self._bits(X, self.mlp.n_in))]
        outs = []
        for l in range(nl):
            if self._split_cols(l):
                q = self.N[l]
                Z = [golden_reduce(self.cfg, [golden.gemm(fmt, nr, self.W[k][l], A[l][k * q:(k + 1) * q])
                                                  for k in range(c)], 0)]        # onto core 0
            else:
                Z = [golden.gemm(fmt, nr, self.W[k][l], A[l]) for k in range(c)]
            if l < nl - 1:
                Z = [golden.relu(fmt, z) for z in Z]
                A.append(np.concatenate(Z))
            outs.append(Z)
        return A, outs

    def predict(self, X) -> np.ndarray:
        _, outs = self.forward(X)
        return self.fmt.to_float(np.concatenate(outs[-1])[:self.mlp.n_out, :self.mlp.batch])

    def step(self, X, T) -> dict:
        """One minibatch step; returns ``loss`` (mean over the samples), ``output``
        (``n_out x b`` floats) and ``D`` (per core the padded output-gradient panel)."""
        fmt, nr, mlp, c = self.fmt, self.nr, self.mlp, self.c
        nl, no, b = mlp.n_layers, mlp.n_out, mlp.batch
        tf = self._targets(T)
        A, outs = self.forward(X)
        Z = outs[-1]
        z = np.concatenate(Z)
        if mlp.loss == "mse":
            Tp = self._panels(pad_matrix(fmt, nr, self._bits(T, no)), self.P[-1])
            D = [golden.axpy(fmt, self.m1, Tp[k], Z[k]) for k in range(len(Z))]      # Z - T
            d = fmt.to_float(np.concatenate(D)[:no, :b])
            loss, out = float(np.mean([mse_loss(d[:, j]) for j in range(b)])), d + tf
        else:
            zf = fmt.to_float(z[:no, :b])
            G = np.stack([host_softmax_grad(fmt, z[:no, j], tf[:, j]) for j in range(b)], axis=1)
            D = self._panels(pad_matrix(fmt, nr, G), self.P[-1])
            loss, out = float(np.mean([softmax_ce_loss(zf[:, j], tf[:, j]) for j in range(b)])), zf
        if self.out_map == "cols":
            D = D[:1] * c                              # computed on core 0, broadcast
        D_out = [d.copy() for d in D]
        AT0 = golden.transpose(fmt, nr, A[0])          # X^T as the host loads it (padding +0)
        for l in range(nl - 1, -1, -1):
            split = self._split_cols(l)
            if l >= 1:
                own = [A[l][k * self.P[l - 1]:(k + 1) * self.P[l - 1]] for k in range(c)]
                EXT = [self._backward(l, D[k], self.W[k][l]) for k in range(c)]
                S = EXT if split else self._reduce_scatter(EXT, self.P[l - 1])
                Dn = [golden.mask(fmt, golden.transpose(fmt, nr, S[k]), own[k]) for k in range(c)]
            ATg = AT0 if l == 0 else golden.transpose(fmt, nr, A[l])
            for k in range(c):
                AT = golden.transpose(fmt, nr, own[k]) if split else ATg
                self.W[k][l] = golden.gemm_acc(fmt, nr, D[k], AT, self.W[k][l], self.neg_lr)
            if l >= 1:
                D = Dn
        return {"loss": loss, "output": out, "D": D_out}
