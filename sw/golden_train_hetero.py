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

from pe.fp_golden import convert_bits as _convert
from sw import golden
from sw.golden_train import pad_matrix, pad_vector
from sw.mlp import MLP
from sw.train_hetero_ring import ring_path
from sw.train_host import mse_loss, weight_bits
from sw.train_vectors import vector_bits

__all__ = ["GoldenHetero"]


class GoldenHetero:
    def __init__(self, hcfg, mlp: MLP, cores: list, weights, transfers: str = "ring"):
        self.mlp, self.ring, self.hcfg, self.cores = mlp, transfers == "ring", hcfg, list(cores)
        self.cfgs = [hcfg.core_cfg(k) for k in cores]
        self.W = [pad_matrix(c.fmt, c.nr, W) for c, W in
                  zip(self.cfgs, (weight_bits(mlp, c.fmt, weights)[l] for l, c in enumerate(self.cfgs)))]

    def _cross(self, c, real, padded, src: int, dst: int):
        """The vector as layer ``dst`` (kind ``c``) receives it from layer ``src`` (see
        the module docstring); over the ring every crossing on the way converts it."""
        if not self.ring or padded is None:
            return pad_vector(c.fmt, c.nr, real)
        n = -(-len(real) // c.nr) * c.nr
        s, r = self.cores[src], self.cores[dst]
        path = ring_path(self.hcfg, s, r) if s != r else [s]
        v = padded
        for a, b in zip(path, path[1:]):
            fa, fb = self.hcfg.core_cfg(a).fmt, self.hcfg.core_cfg(b).fmt
            if fa != fb:
                v = np.array([_convert(fa, fb, int(x)) for x in v], dtype=fb.np_uint)
        out = np.zeros(n, dtype=c.fmt.np_uint)
        out[:min(n, len(v))] = v[:n]
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
            a = self._cross(c, a_real, a_pad if l else None, l - 1, l)
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
                d = self._cross(c, g_real, g_pad, l + 1, l)
            if l >= 1:
                e = golden.gemv_t(c.fmt, c.nr, self.W[l], d, "tree")
                g_pad = golden.mask(c.fmt, e, ins[l])
                g_real = g_pad[:mlp.shape(l)[1]]
            self.W[l] = golden.rank1(c.fmt, c.nr, self.W[l], d, ins[l], neg_lr)
        return out


class GoldenHeteroSplit:
    """Golden trainer of :mod:`sw.train_hetero_split`: every layer's row panels on their
    cores (``parts``: ``SplitTrainProgram.parts``), each at its kind's ``nr`` and format;
    a vector between layers assembled from the panels as the ring delivers them (each
    panel's padded segment, zero-extended to a whole number of the widest kind's beats,
    converted at every crossing of its path); ``W^T d`` as the panels' partials added in
    panel order (``axpy(1, sum so far, partial)``, one rounding each). ``pages``: per
    ``(layer, panel)`` paged from the scratchpad its row pages
    (``SplitTrainProgram.page_rows``): its partial of ``W^T d`` is the pages' partials,
    added from the last page to the first (:func:`sw.golden.gemv_t_paged`)."""

    def __init__(self, hcfg, mlp: MLP, parts: list, weights, pages: dict | None = None):
        self.hcfg, self.mlp, self.parts = hcfg, mlp, [list(p) for p in parts]
        self.pages = dict(pages or {})
        self.W = []
        for l, ps in enumerate(self.parts):
            c = hcfg.core_cfg(ps[0][0])
            wb = weight_bits(mlp, c.fmt, weights)[l]
            self.W.append([pad_matrix(c.fmt, c.nr, wb[r0:r0 + rows]) for _, r0, rows in ps])

    def _move(self, v, s: int, r: int, n: int):
        """``v`` (padded at ``s``) as ``r`` holds it: zero-extended to ``n`` elements,
        converted along the ring from ``s`` to ``r``."""
        out = np.zeros(n, dtype=v.dtype)
        out[:min(n, len(v))] = v[:n]
        if s == r:
            return out
        path = ring_path(self.hcfg, s, r)
        for a, b in zip(path, path[1:]):
            fa, fb = self.hcfg.core_cfg(a).fmt, self.hcfg.core_cfg(b).fmt
            if fa != fb:
                out = np.array([_convert(fa, fb, int(x)) for x in out], dtype=fb.np_uint)
        return out

    def _gather(self, panels, l: int, r: int):
        """Layer ``l``'s input on core ``r`` from layer ``l - 1``'s output panels."""
        from sw.train_hetero_ring import padded_len

        c = self.hcfg.core_cfg(r)
        n = self.mlp.shape(l)[1]
        full = np.zeros(max(padded_len(self.hcfg, n), -(-n // c.nr) * c.nr), dtype=c.fmt.np_uint)
        for (s, r0, rows), z in zip(self.parts[l - 1], panels):
            P = padded_len(self.hcfg, rows)
            full[r0:r0 + P] = self._move(z, s, r, P)
        return full[:-(-n // c.nr) * c.nr]

    def weights(self, padded: bool = False) -> list:
        out = []
        for l, ps in enumerate(self.parts):
            n = self.mlp.shape(l)[1]
            out.append(np.concatenate([W if padded else W[:rows, :n] for W, (_, _, rows) in zip(self.W[l], ps)]))
        return out

    def step(self, x, t) -> dict:
        from sw.train_hetero_ring import padded_len

        mlp, nl, h = self.mlp, self.mlp.n_layers, self.hcfg
        ins, panels = [], None
        for l in range(nl):
            ps = self.parts[l]
            c = h.core_cfg(ps[0][0])
            if l == 0:
                a = {k: pad_vector(c.fmt, c.nr, vector_bits(c.fmt, x, mlp.n_in)) for k, _, _ in ps}
            else:
                a = {k: self._gather(panels, l, k) for k, _, _ in ps}
            ins.append(a)
            zs = [golden.gemv(c.fmt, c.nr, W, a[k], "tree") for W, (k, _, _) in zip(self.W[l], ps)]
            panels = [golden.relu(c.fmt, z) for z in zs] if l < nl - 1 else zs
        (k, _, _), = self.parts[-1]
        c = h.core_cfg(k)
        fmt, no, z = c.fmt, mlp.n_out, zs[0]
        m1 = fmt.from_float(np.array([-1.0]))[0]
        tb = vector_bits(fmt, t, no)
        d = golden.axpy(fmt, m1, pad_vector(fmt, c.nr, tb), z)
        df = fmt.to_float(d[:no])
        out = {"loss": mse_loss(df), "output": df + fmt.to_float(tb), "d": d[:no].copy()}
        dm, dm_core, ds = None, None, None
        for l in range(nl - 1, -1, -1):
            ps = self.parts[l]
            c = h.core_cfg(ps[0][0])
            neg_lr = c.fmt.from_float(np.array([-mlp.lr]))[0]
            one = c.fmt.from_float(np.array([1.0]))[0]
            if l == nl - 1:
                ds = [d]
            else:
                ds = []
                for k, r0, rows in ps:
                    P = padded_len(h, rows)
                    ext = np.zeros(max(len(dm), r0 + P), dtype=dm.dtype)
                    ext[:len(dm)] = dm
                    ds.append(self._move(ext[r0:r0 + P], dm_core, k, -(-rows // c.nr) * c.nr))
            if l >= 1:
                acc = None
                for j, (W, g) in enumerate(zip(self.W[l], ds)):
                    pg = self.pages.get((l, j))
                    e = (golden.gemv_t_paged(c.fmt, c.nr, W, g, tuple(reversed(pg)), "tree") if pg else
                         golden.gemv_t(c.fmt, c.nr, W, g, "tree"))
                    acc = e if acc is None else golden.axpy(c.fmt, one, acc, e)
                dm_core = ps[-1][0]
                dm = golden.mask(c.fmt, acc, ins[l][dm_core])
            self.W[l] = [golden.rank1(c.fmt, c.nr, W, g, ins[l][k], neg_lr)
                         for W, g, (k, _, _) in zip(self.W[l], ds, ps)]
        return out
