"""Golden trainer for SGD across the cores of a chip: the array's step bit for bit.

:class:`GoldenChipSGD` performs the operations of the step that
:func:`sw.train_chip.compile_chip_sgd` emits, core by core, in the same order, with the
per-kernel golden models of :mod:`sw.golden` on each core's padded row panels (columns
in the core's ring step order, :func:`sw.train_chip.column_order`), and the ring
collectives as the array computes them: the all-gather concatenates the panels in each
core's step order, the reduce-scatter adds the partials of a segment in the ring's order
(``acc = p[k+1]``, then ``acc * 1 + p[k+2]``, ..., ``+ p[k]``, each rounded: the FMA
``add``). With the output layer split by columns (``out_map="cols"``), core ``k``
multiplies its column panel by its own panel of the last hidden activation, the
partials are reduced onto core 0 (``out_reduce``, as the compiler resolves it: the
chain ``acc = p[1]``, ``+ p[2]``, ..., ``+ p[0]``, or the stream's register
accumulators, :func:`sw.ring.golden_reduce_stream`), the
output gradient is the same on every core (a broadcast is a copy) and its ``W^T d`` is
the own panel already (no reduce-scatter); a softmax gradient is then computed on core 0
(:func:`sw.softmax.golden_softmax_grad`) unless ``softmax="host"``. The float64 reference is :class:`sw.golden_train.Float64SGD` (the algorithm
does not depend on the number of cores).
"""

from __future__ import annotations

import numpy as np

from sw.ring import golden_reduce, golden_reduce_stream
from sw import golden
from sw.golden_train import pad_matrix, pad_vector
from sw.mlp import MLP
from sw.softmax import golden_softmax_grad
from sw.train import backward_plan, host_softmax_grad, mse_loss, one_hot, resolve_softmax, softmax_ce_loss
from sw.train_chip import (PanelMap, chip_shapes, host_in_applies, plan_chip_sgd, resolve_out_map, resolve_out_reduce,
                           softmax_why_not)
from sw.train_chip_ops import paged_accumulate

__all__ = ["GoldenChipSGD"]


class GoldenChipSGD(PanelMap):
    """Bit-exact model of the compiled SGD step across ``cfg.cores`` cores (initial
    weights as global ``(m, n)`` bit patterns). ``fused``: per layer, whether its backward
    step is the fused kernel, updating ``W += d (-lr a)^T`` (:func:`sw.golden.rank1_scaled_v`)
    instead of ``(-lr d) a^T`` (pass :attr:`sw.train_chip.ChipSGDProgram.fused`; None: the
    compiler's automatic choice)."""

    def __init__(self, cfg, mlp: MLP, weights, reduce: str = "tree", out_map: str = "auto", softmax: str = "auto",
                 fused=None, spad=None, page_rows: int | None = None, out_reduce: str = "auto"):
        self.cfg, self.mlp, self.fmt, self.nr, self.c = cfg, mlp, cfg.fmt, cfg.nr, cfg.cores
        self.reduce = reduce
        self.out_map = resolve_out_map(cfg, mlp, out_map)
        self.softmax = resolve_softmax(cfg, mlp, softmax, why_not=softmax_why_not(self.out_map))
        self.P, self.N = chip_shapes(cfg, mlp, self.out_map)
        self.out_reduce = resolve_out_reduce(cfg, self.P[-1] // self.nr, out_reduce) if self.out_map == "cols" else None
        self.fused = [bool(f) for f in (backward_plan(cfg, mlp, shapes=list(zip(self.P, self.N))) if fused is None
                                        else fused)]
        if len(self.fused) != mlp.n_layers or self.fused[0]:
            raise ValueError(f"fused must have {mlp.n_layers} flags, the first False (layer 0 has no W^T d), "
                             f"got {fused}")
        #: layer -> row pages ``((first row, rows), ...)`` of the panels in the scratchpad
        plan = plan_chip_sgd(cfg, mlp, self.P, self.N, self.out_map, self.softmax, self.fused, spad, page_rows,
                             host_in=host_in_applies(mlp, self.softmax, self.P))
        self.pages = {l: sp.row_pages(self.nr) for l, sp in plan[2].items()}
        #: the paged layers whose W^T d is accumulated row by row and reduced once
        self.accumulated = {l for l, sp in plan[2].items() if l and paged_accumulate(sp, self.fused[l])}
        fmt = self.fmt
        self.neg_lr = fmt.from_float(np.array([-mlp.lr]))[0]
        self.m1 = fmt.from_float(np.array([-1.0]))[0]
        #: W[k][l]: core k's padded panel of layer l, columns in its order
        self.W = [[pad_matrix(fmt, self.nr, panel) for panel in panels] for panels in self.core_weights(weights)]

    @classmethod
    def for_program(cls, tp, weights) -> "GoldenChipSGD":
        """The golden of the compiled :class:`sw.train_chip.ChipSGDProgram` ``tp``: its
        output mapping, softmax, backward plan, output reduce and scratchpad pages."""
        g = cls(tp.cfg, tp.mlp, weights, out_map=tp.out_map, softmax=tp.softmax or "auto", fused=tp.fused,
                out_reduce=tp.meta.get("out_reduce") or "auto")
        g.pages = {l: sp.row_pages(g.nr) for l, sp in tp.spad.items()}
        g.accumulated = {l for l, sp in tp.spad.items() if l and paged_accumulate(sp, g.fused[l])}
        return g

    # -- helpers ------------------------------------------------------------------------
    def _bits(self, v, n):
        fmt = self.fmt
        v = np.asarray(v)
        if v.dtype != fmt.np_uint:
            v = fmt.from_float(v.astype(np.float64)).astype(fmt.np_uint)
        assert v.shape == (n,), (v.shape, n)
        return v

    def _panels(self, v, p):
        pad = np.zeros(self.c * p, dtype=self.fmt.np_uint)
        pad[:len(v)] = v
        return [pad[k * p:(k + 1) * p] for k in range(self.c)]

    def _gather(self, panels):
        c = self.c
        return [np.concatenate([panels[(k - t) % c] for t in range(c)]) for k in range(c)]

    def _gemv_t(self, l, W, d):
        """``W^T d`` of a panel as the core computes it: in one kernel, or page by page
        from the last page to the first (:func:`sw.golden.gemv_t_paged`), or with pages
        of one local row each PE's chain over its rows last to first, then the reduction
        (:func:`sw.train_chip_ops.paged_accumulate`, :func:`sw.golden.gemv_t_reversed`)."""
        if l in self.accumulated:
            return golden.gemv_t_reversed(self.fmt, self.nr, W, d, self.reduce)[:self.N[l]]
        pages = reversed(self.pages.get(l, ((0, W.shape[0]),)))
        return golden.gemv_t_paged(self.fmt, self.nr, W, d, tuple(pages), self.reduce)[:self.N[l]]

    def _reduce_scatter(self, partials, p):
        """Core ``k``: the sum over the cores of segment ``k`` in the ring's order."""
        c = self.c

        def seg(j, g):                      # segment g in core j's order
            t = (j - g) % c
            return partials[j][t * p:(t + 1) * p]

        return [golden_reduce(self.cfg, [seg(j, k) for j in range(c)], k) for k in range(c)]

    # -- the network --------------------------------------------------------------------
    def weights(self, padded: bool = False) -> list:
        """Global weights (``padded``: the cores' padded panels together)."""
        return [self.join_panels(l, [self.W[k][l] for k in range(self.c)], padded)
                for l in range(self.mlp.n_layers)]

    def forward(self, x) -> tuple:
        """``(inputs, outputs)``: per layer, per core the input vector (core order,
        padded) and the output panel (after the ReLU for hidden layers)."""
        fmt, nr, nl, c = self.fmt, self.nr, self.mlp.n_layers, self.c
        xp = pad_vector(fmt, nr, self._bits(x, self.mlp.n_in))
        ins, outs = [[xp] * c], []
        for l in range(nl):
            z = [golden.gemv(fmt, nr, self.W[k][l], ins[l][k], self.reduce)[:self.P[l]] for k in range(c)]
            if self._split_cols(l):
                red = golden_reduce_stream if self.out_reduce == "stream" else golden_reduce
                z = [red(self.cfg, z, 0)]                             # onto core 0
            if l < nl - 1:
                z = [golden.relu(fmt, v) for v in z]
                ins.append(z if self._split_cols(l + 1) else self._gather(z))
            outs.append(z)
        return ins, outs

    def predict(self, x) -> np.ndarray:
        _, outs = self.forward(x)
        return self.fmt.to_float(np.concatenate(outs[-1])[:self.mlp.n_out])

    def step(self, x, t) -> dict:
        fmt, nr, mlp, c = self.fmt, self.nr, self.mlp, self.c
        nl, no = mlp.n_layers, mlp.n_out
        if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(no, t)
        tb = np.asarray(t)
        tf = fmt.to_float(tb) if tb.dtype == fmt.np_uint else tb.astype(np.float64)
        ins, outs = self.forward(x)
        z = outs[-1]
        if mlp.loss == "mse":
            tp = self._panels(self._bits(t, no), self.P[-1])
            d = [golden.axpy(fmt, self.m1, tp[k], z[k]) for k in range(len(z))]
            df = fmt.to_float(np.concatenate(d)[:no])
            loss, out = mse_loss(df), df + tf
        else:
            zl = np.concatenate(z)[:no]
            if self.softmax == "array":
                g = golden_softmax_grad(self.cfg, zl, fmt.from_float(tf).astype(fmt.np_uint))
            else:
                g = host_softmax_grad(fmt, zl, tf)
            d = self._panels(g, self.P[-1])
            zf = fmt.to_float(zl)
            loss, out = softmax_ce_loss(zf, tf), zf
        if self.out_map == "cols":
            d = d[:1] * c                              # computed on core 0, broadcast
        for l in range(nl - 1, -1, -1):
            if l >= 1:
                e = [self._gemv_t(l, self.W[k][l], pad_vector(fmt, nr, d[k])) for k in range(c)]
                es = e if self._split_cols(l) else self._reduce_scatter(e, self.P[l - 1])
                dm = [golden.mask(fmt, es[k], outs[l - 1][k]) for k in range(c)]
            for k in range(c):
                upd = golden.rank1_scaled_v if self.fused[l] else golden.rank1
                self.W[k][l] = upd(fmt, nr, self.W[k][l], pad_vector(fmt, nr, d[k]), ins[l][k], self.neg_lr)
            if l >= 1:
                d = dm
        return {"loss": loss, "output": out}
