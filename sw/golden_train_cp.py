"""Golden model of the continuous-propagation pipeline: the array's steps bit for bit.

:class:`GoldenChipCP` keeps what every core of :func:`sw.train_cp.compile_chip_cp`'s
mapping holds (its padded weight panel; the input vector ``ain``; the history of inputs;
its slice of the incoming delta ``din``; the partial ``e`` of ``W^T d``; the output
slice ``z``) and performs each step's operations in the array's order with the
per-kernel golden models of :mod:`sw.golden`: the head (GEMV, ReLU, transposed GEMV,
mask and rank-1 update with the input of the sample whose backward pass it is, which the
array has copied from the history into ``vnext``; on the output core the loss gradient
in between), the tail (copy of the input into the history), then the chains: the input copied to
every core of the first group, the activations concatenated in core order into every
core of the next group, the deltas summed over the next group's cores in ring order
(``acc = p[0]``, then ``acc * 1 + p[h]``, each rounded) and sliced into the group's cores.
Its weights after every step must equal the PE memories' (padding included).
"""

from __future__ import annotations

import numpy as np

from pe.fp_golden import mac_bits
from sw import golden
from sw.golden_train import pad_vector
from sw.layout import local_len
from sw.mlp import MLP
from sw.softmax import golden_softmax_grad
from sw.train import mse_loss, one_hot, resolve_softmax, softmax_ce_loss, weight_bits
from sw.train_cp import cp_mapping, cp_shapes, cp_spad_plan, cp_stage_of

__all__ = ["GoldenChipCP", "cp_forward", "golden_chains", "group_weights"]


def group_weights(cores: list, mlp: MLP, N: list, padded: bool) -> list:
    """The global weights from the goldens' per-core panels (``W``, stacked in group
    order; ``padded``: ``(g_l P_l, N_l)``, else ``(m, n)``)."""
    out = []
    for l in range(mlp.n_layers):
        G = np.concatenate([st["W"] for st in cores if st["l"] == l])
        m, n = mlp.shape(l)
        out.append(G[:, :N[l]] if padded else G[:m, :n])
    return out


def golden_chains(fmt, cores: list, nl: int, x, P: list, din: str, gathered, part, cut) -> None:
    """The chains of a CP step on the goldens' per-core states (dicts with ``l``, ``i``,
    ``z``, ``e``, ``ain`` and ``din``), all computed from the values before any lands:
    ``x`` into every ``ain`` of the first group; the ``z`` of group ``l`` concatenated in
    core order (``gathered(a)``: as stored) into every ``ain`` of group ``l + 1``; the
    ``e`` of group ``l + 1`` (``part(e, rows of a)``) summed in ring order (``acc = p[0]``,
    then ``acc * 1 + p[h]``, each rounded) and sliced into group ``l``'s ``din`` (``cut(acc,
    lo, hi)``: rows or columns ``i P .. (i + 1) P``)."""
    one = fmt.from_float(np.array([1.0]))[0]
    group = lambda l: [st for st in cores if st["l"] == l]          # noqa: E731
    new_ain, new_din = {}, {}
    for st in group(0):
        new_ain[id(st)] = x.copy()
    for l in range(nl - 1):
        a = np.concatenate([st["z"] for st in group(l)])
        for st in group(l + 1):
            new_ain[id(st)] = gathered(a)
        parts = [part(st["e"], len(a)) for st in group(l + 1)]
        acc = parts[0]
        for p in parts[1:]:
            acc = mac_bits(fmt, acc, np.full(acc.shape, one, dtype=fmt.np_uint), p)
        for st in group(l):
            new_din[id(st)] = cut(acc, st["i"] * P[l], (st["i"] + 1) * P[l]).copy()
    for st in cores:
        st["ain"] = new_ain[id(st)]
        if id(st) in new_din:
            st[din] = new_din[id(st)]


def cp_forward(cfg, P: list, N: list, weights, x, reduce: str = "tree") -> np.ndarray:
    """The output layer's values (floats; the first ``n_out`` are the network's outputs,
    the rest padding rows) for input ``x`` as the pipeline's forward passes
    compute it (each core's GEMV of its panel, ReLU, the gathered activations in core
    order), from the global weights with the mapping's padding (``P``, ``N`` of
    :func:`sw.train_cp.cp_shapes`; ``weights``: each layer's ``(g_l P_l, N_l)`` bit
    patterns, as :meth:`sw.train_cp.ChipCPProgram.weights_from_session` gives them with
    ``padded=True``). A GEMV's rows do not depend on which core computes them, so one
    GEMV over a group's stacked panels is every core's."""
    fmt, nr = cfg.fmt, cfg.nr
    xb = np.asarray(x)
    if xb.dtype != fmt.np_uint:
        xb = fmt.from_float(xb.astype(np.float64)).astype(fmt.np_uint)
    a = pad_vector(fmt, nr, xb)
    for l, G in enumerate(weights):
        z = golden.gemv(fmt, nr, G, a, reduce)[:G.shape[0]]
        if l < len(weights) - 1:
            z = golden.relu(fmt, z)
            a = pad_vector(fmt, nr, z)
            if len(z) != N[l + 1]:
                raise ValueError(f"layer {l} gives {len(z)} values, layer {l + 1}'s panels take {N[l + 1]}")
    return fmt.to_float(z)


class GoldenChipCP:
    """Bit-exact model of the compiled CP pipeline (initial weights as global ``(m, n)``
    bit patterns or floats; ``groups`` as for :func:`sw.train_cp.compile_chip_cp`;
    ``fused``: per layer, whether its backward step is the fused kernel (pass
    :attr:`sw.train_cp.ChipCPProgram.fused`; None: the compiler's automatic choice)."""

    def __init__(self, cfg, mlp: MLP, weights, groups=None, softmax: str = "auto", reduce: str = "tree",
                 fused=None, spad=None, page_rows: int | None = None):
        self.cfg, self.mlp, self.fmt, self.nr = cfg, mlp, cfg.fmt, cfg.nr
        self.reduce = reduce
        self.softmax = resolve_softmax(cfg, mlp, "array" if softmax == "auto" and mlp.loss == "softmax_ce"
                                       else softmax)
        self.groups, plan = cp_mapping(cfg, mlp, groups)
        self.fused = [bool(f) for f in (plan if fused is None else fused)]
        if len(self.fused) != mlp.n_layers or self.fused[0]:
            raise ValueError(f"fused must have {mlp.n_layers} flags, the first False (layer 0 has no W^T d), "
                             f"got {fused}")
        self.P, self.N = cp_shapes(cfg, mlp, self.groups)
        self.stages = cp_stage_of(self.groups, cfg.cores)
        #: layer -> row pages ``((first row, rows), ...)`` of the panels paged from the scratchpad
        self.pages = {l: sp.row_pages(cfg.nr) for l, sp in cp_spad_plan(
            cfg, mlp, self.P, self.N, self.groups, self.fused, self.softmax, spad, page_rows).items()}
        nl = mlp.n_layers
        self.V = 2 * (nl - 1)
        fmt, nr = self.fmt, self.nr
        self.neg_lr = fmt.from_float(np.array([-mlp.lr]))[0]
        self.m1 = fmt.from_float(np.array([-1.0]))[0]
        z = lambda n: np.zeros(n, dtype=fmt.np_uint)          # noqa: E731
        pw = lambda n: local_len(n, nr) * nr                   # noqa: E731
        self.cores = []
        for l, Wl in enumerate(weight_bits(mlp, fmt, weights)):
            m, n = mlp.shape(l)
            G = np.zeros((self.groups[l] * self.P[l], pw(self.N[l])), dtype=fmt.np_uint)
            G[:m, :n] = Wl
            for i in range(self.groups[l]):
                st = {"l": l, "i": i, "W": G[i * self.P[l]:(i + 1) * self.P[l]].copy(),
                      "ain": z(pw(self.N[l])), "z": z(self.P[l]), "din": z(self.P[l]),
                      "e": z(pw(self.N[l])), "hist": [z(pw(self.N[l])) for _ in range(self.V)]}
                self.cores.append(st)
        self.xin = z(pw(self.N[0]))
        self.step_index = 0

    def weights(self, padded: bool = False) -> list:
        """The global weights (``padded``: with the panels' padding rows and columns)."""
        return group_weights(self.cores, self.mlp, self.N, padded)

    def _update(self, l, W, d, v):
        """``W += -lr d v^T`` as layer ``l``'s kernel rounds it: ``(-lr d) v`` (rank-1) or
        ``d (-lr v)`` (the fused backward step)."""
        f = golden.rank1_scaled_v if self.fused[l] else golden.rank1
        return f(self.fmt, self.nr, W, d, v, self.neg_lr)

    def _group(self, l):
        return [st for st in self.cores if st["l"] == l]

    def step(self, x, t) -> dict:
        """One pipeline step (the arguments of :meth:`sw.train_cp.ChipCPProgram.run_step`)."""
        fmt, nr, mlp = self.fmt, self.nr, self.mlp
        nl, no, V, s = mlp.n_layers, mlp.n_out, self.V, self.step_index
        if x is None:
            xb = np.zeros(mlp.n_in, dtype=fmt.np_uint)
        else:
            xb = np.asarray(x)
            if xb.dtype != fmt.np_uint:
                xb = fmt.from_float(xb.astype(np.float64)).astype(fmt.np_uint)
        if t is None:
            tf, tb = None, np.zeros(no, dtype=fmt.np_uint)
        else:
            if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
                t = one_hot(no, t)
            tb = np.asarray(t)
            tf = fmt.to_float(tb) if tb.dtype == fmt.np_uint else tb.astype(np.float64)
            if tb.dtype != fmt.np_uint:
                tb = fmt.from_float(tf).astype(fmt.np_uint)
        # host: x into core 0's xin (the output core's t below)
        self.xin = pad_vector(fmt, nr, xb)
        # head
        for st in self.cores:
            l = st["l"]
            st["z"] = golden.gemv(fmt, nr, st["W"], st["ain"], self.reduce)[:self.P[l]]
            if l < nl - 1:
                st["z"] = golden.relu(fmt, st["z"])
                hb = st["hist"][(s - 2 * (nl - 1 - l)) % V]      # the array's vnext
                if l >= 1:
                    e = golden.gemv_t_paged(fmt, nr, st["W"], pad_vector(fmt, nr, st["din"]),
                                            self.pages.get(l, ((0, self.P[l]),)), self.reduce)
                    st["e"] = golden.mask(fmt, e, hb)
                st["W"] = self._update(l, st["W"], pad_vector(fmt, nr, st["din"]), hb)
                continue
            tp = pad_vector(fmt, nr, tb)[:self.P[l]]
            if mlp.loss == "mse":
                d = golden.axpy(fmt, self.m1, tp, st["z"])
                st["z"] = d
            else:
                d = pad_vector(fmt, nr, golden_softmax_grad(self.cfg, st["z"][:no], tb))[:self.P[l]]
            e = golden.gemv_t(fmt, nr, st["W"], pad_vector(fmt, nr, d), self.reduce)
            st["e"] = golden.mask(fmt, e, st["ain"])
            st["W"] = self._update(l, st["W"], pad_vector(fmt, nr, d), st["ain"])
        out_z = self._group(nl - 1)[0]["z"][:no]
        # tail
        for st in self.cores:
            l = st["l"]
            if l == nl - 1:
                continue
            st["hist"][s % V] = st["ain"].copy()
        golden_chains(fmt, self.cores, nl, self.xin, self.P, "din", lambda a: pad_vector(fmt, nr, a),
                      lambda acc, n: acc[:n], lambda acc, lo, hi: acc[lo:hi])
        self.step_index += 1
        zf = fmt.to_float(out_z)
        if tf is None:
            return {"loss": None, "output": zf, "raw": out_z}
        if mlp.loss == "mse":
            return {"loss": mse_loss(zf), "output": zf + tf, "raw": out_z}
        return {"loss": softmax_ce_loss(zf, tf), "output": zf, "raw": out_z}
