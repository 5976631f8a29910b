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

:class:`Float64CP` is the same pipeline schedule in textbook float64 arithmetic (no
padding, no format rounding, the softmax in float64): the reference that separates CP's
stale weights from the array's numerics.
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

__all__ = ["GoldenChipCP", "Float64CP", "cp_forward", "golden_chains", "group_weights"]


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
    :attr:`sw.train_cp.ChipCPProgram.fused`; None: the compiler's automatic choice).
    Layers sharing a core (:mod:`sw.train_cp_shared`) do the arithmetic of their own
    cores, so the model does not depend on the placement (``groups`` may then need more
    cores than the chip has). ``spad``, ``page_rows``, ``dram`` and ``hide`` as given to
    the compiler (``hide``: its ``chain_overlap``)."""

    @classmethod
    def for_program(cls, tp, weights) -> "GoldenChipCP":
        """The model of a program compiled with the automatic page plan
        (:func:`sw.train_cp.compile_chip_cp` without ``spad`` / ``page_rows`` / ``dram``)."""
        return cls(tp.cfg, tp.mlp, weights, groups=tp.groups, fused=tp.fused, hide=tp.meta.get("hide_pages", True))

    def __init__(self, cfg, mlp: MLP, weights, groups=None, softmax: str = "auto", reduce: str = "tree",
                 fused=None, spad=None, page_rows: int | None = None, dram=None, hide: bool = True):
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
            cfg, mlp, self.P, self.N, self.groups, self.fused, self.softmax, spad, page_rows, dram, hide).items()}
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


class Float64CP:
    """Batch-1 continuous propagation in float64 with the schedule of :class:`GoldenChipCP`.

    Per step ``s`` layer ``l`` (``L`` layers) does the forward pass of the sample that
    entered at step ``s - 1 - l`` with its weights as they are then, and the backward
    pass and update of the sample that entered at step ``s - 2L + 1 + l``:
    ``e = (W_l^T d_l) * [a_l > 0]`` with the current (pre-update) ``W_l``, then ``W_l -=
    lr d_l a_l^T`` with the input ``a_l`` kept from that sample's forward pass
    (``2 (L - 1 - l)`` steps earlier; ``V = 2 (L - 1)`` history slots). The output layer
    does forward, loss gradient (``y - t`` or ``softmax(y) - t``), backward and update of
    one sample in the same step. Between steps the activations move one layer forward and
    the deltas one layer back. The pipeline starts with zero vectors; a missing input or
    target counts as zeros, as in the golden (a zero input's updates are zero).

    Parameters
    ----------
    mlp : MLP
        ``batch`` 1 (:class:`sw.golden_train_cp_mb.Float64MBCP` for minibatches).
    weights : list of arrays
        Initial global ``(m, n)`` weights as floats (e.g. ``fmt.to_float`` of the array's).
    lr : float, optional
        Learning rate; default ``mlp.lr`` (the array's is rounded to its format: the
        program's ``meta["lr_stored"]``).
    """

    def __init__(self, mlp: MLP, weights, lr: float | None = None):
        self._check_batch(mlp)
        self.mlp = mlp
        self.W = [np.array(W, dtype=np.float64) for W in weights]
        if len(self.W) != mlp.n_layers or any(W.shape != mlp.shape(l) for l, W in enumerate(self.W)):
            raise ValueError(f"expected {mlp.n_layers} weight matrices of shapes "
                             f"{[mlp.shape(l) for l in range(mlp.n_layers)]}, got {[W.shape for W in self.W]}")
        nl, b = mlp.n_layers, mlp.batch
        if nl < 2:
            raise ValueError("continuous propagation pipelines layers: the network needs a hidden layer")
        self.V = 2 * (nl - 1)
        self.lr = (mlp.lr if lr is None else float(lr)) / b
        z = lambda n: np.zeros((n, b))                 # noqa: E731
        self.ain = [z(mlp.sizes[l]) for l in range(nl)]
        self.din = [z(mlp.sizes[l + 1]) for l in range(nl - 1)]
        self.hist = [[z(mlp.sizes[l]) for _ in range(self.V)] for l in range(nl - 1)]
        self.step_index = 0

    @staticmethod
    def _check_batch(mlp: MLP) -> None:
        if mlp.batch != 1:
            raise ValueError("Float64CP models batch-1 CP: use Float64MBCP for MLP.batch > 1")

    def _cols(self, x) -> np.ndarray:
        """The entering input as an ``n_in x b`` float matrix (None: zeros)."""
        n = self.mlp.n_in
        return np.zeros((n, 1)) if x is None else np.array(x, dtype=np.float64).reshape(n, 1)

    def _targets(self, t) -> np.ndarray:
        """The target as an ``n_out x b`` float matrix (None: zeros)."""
        mlp = self.mlp
        if t is None:
            return np.zeros((mlp.n_out, 1))
        if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(mlp.n_out, t)
        return np.asarray(t, dtype=np.float64).reshape(mlp.n_out, 1)

    def _out(self, Y):
        return Y[:, 0].copy()

    def weights(self) -> list:
        """The global ``(m, n)`` weights (copies)."""
        return [W.copy() for W in self.W]

    def predict(self, x):
        """The network's output for ``x`` with the current weights (the pipeline's
        forward pass of a sample, as :func:`cp_forward` for the array's weights); the
        pipeline's state does not change."""
        a = self._cols(x)
        for l, W in enumerate(self.W):
            a = W @ a
            if l < len(self.W) - 1:
                a = np.maximum(a, 0.0)
        return self._out(a)

    def _grad(self, Y, T) -> np.ndarray:
        """The loss gradient of the output ``Y`` (per column)."""
        if self.mlp.loss == "mse":
            return Y - T
        E = np.exp(Y - Y.max(axis=0))
        return E / E.sum(axis=0) - T

    def _loss(self, Y, T) -> float:
        """The mean over the columns of the samples' losses."""
        f = (lambda c: mse_loss(Y[:, c] - T[:, c])) if self.mlp.loss == "mse" else \
            (lambda c: softmax_ce_loss(Y[:, c], T[:, c]))
        return float(np.mean([f(c) for c in range(Y.shape[1])]))

    def step(self, x, t) -> dict:
        """One pipeline step: ``x`` enters (None: zeros, to drain), ``t`` is the target of
        the sample now at the output layer, the one that entered ``L`` steps earlier
        (None: none, while filling or draining). Returns ``loss`` (None without ``t``)
        and ``output`` (the output layer's values for that sample)."""
        nl, V, s = self.mlp.n_layers, self.V, self.step_index
        X, T = self._cols(x), self._targets(t)
        z, e = [None] * nl, [None] * nl
        for l in range(nl):
            W, a = self.W[l], self.ain[l]
            z[l] = W @ a
            if l < nl - 1:
                z[l] = np.maximum(z[l], 0.0)
                d, h = self.din[l], self.hist[l][(s - 2 * (nl - 1 - l)) % V]
            else:
                d, h = self._grad(z[l], T), a
            if l >= 1:
                e[l] = (W.T @ d) * (h > 0)
            self.W[l] = W - self.lr * (d @ h.T)
        for l in range(nl - 1):
            self.hist[l][s % V] = self.ain[l]
        self.ain = [X] + z[:-1]
        self.din = e[1:]
        self.step_index += 1
        Y = z[-1]
        return {"loss": None if t is None else self._loss(Y, T), "output": self._out(Y)}
