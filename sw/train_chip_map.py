"""How SGD and minibatch GD across cores map the layers onto the cores: row panels of
``P_l`` rows per core (the output layer by rows or by columns, :func:`resolve_out_map`),
a core's column order after an all-gather, and :class:`PanelMap`, where each core's
panels sit in the global weight matrices."""

from __future__ import annotations

import numpy as np

from sw.layout import local_len
from sw.mlp import MLP
from sw.ring import reduce_slots, reduce_stream_check, reduce_stream_slots
from sw.train_host import TrainCompileError, weight_bits

__all__ = ["panel_rows", "column_order", "OUT_MAPS", "resolve_out_map", "chip_shapes", "softmax_why_not", "PanelMap",
           "OUT_REDUCES", "resolve_out_reduce"]


def panel_rows(cfg, m: int) -> int:
    """Rows of a layer with ``m`` outputs per core: ``nr ceil(m / (cores nr))``."""
    return cfg.nr * local_len(m, cfg.cores * cfg.nr)


def column_order(cfg, k: int, p: int) -> np.ndarray:
    """Core ``k``'s order of a gathered vector of ``cores`` segments of ``p`` values:
    position ``t p + i`` holds global element ``((k - t) mod c) p + i``."""
    c = cfg.cores
    return np.concatenate([((k - t) % c) * p + np.arange(p) for t in range(c)])


OUT_MAPS = ("auto", "rows", "cols")


def resolve_out_map(cfg, mlp: MLP, out_map: str = "auto") -> str:
    """``"rows"`` or ``"cols"`` for ``out_map``: ``"auto"`` splits the output layer by
    columns when it has at most ``cores * nr`` rows (row panels would be one block of
    ``nr`` rows per core, most of them padding) and the network has a hidden layer."""
    if out_map not in OUT_MAPS:
        raise TrainCompileError(f"out_map must be one of {', '.join(OUT_MAPS)}, got {out_map!r}")
    if out_map == "auto":
        return "cols" if mlp.n_layers >= 2 and mlp.n_out <= cfg.cores * cfg.nr else "rows"
    if out_map == "cols" and mlp.n_layers < 2:
        raise TrainCompileError("out_map='cols' needs a hidden layer (the split output layer takes each core's "
                                "own segment of the last hidden activation); this network has none")
    return out_map


OUT_REDUCES = ("auto", "stream", "chain")


def resolve_out_reduce(cfg, m: int, choice: str = "auto") -> str:
    """How the split output layer's ``m``-beat partials are reduced onto core 0:
    ``"chain"`` (:func:`sw.ring.reduce_lines`) or ``"stream"``
    (:func:`sw.ring.reduce_stream_lines`); ``"auto"`` takes the stream when it fits
    (:func:`sw.ring.reduce_stream_check`) and is shorter. The two add in different
    orders (the goldens :func:`sw.ring.golden_reduce` / ``golden_reduce_stream``)."""
    if choice not in OUT_REDUCES:
        raise TrainCompileError(f"out_reduce must be one of {', '.join(OUT_REDUCES)}, got {choice!r}")
    why = reduce_stream_check(cfg, m)
    if choice == "stream" and why:
        raise TrainCompileError(f"out_reduce='stream': {why}")
    if choice == "auto":
        return "stream" if why is None and reduce_stream_slots(cfg, m) < reduce_slots(cfg, m) else "chain"
    return choice


def chip_shapes(cfg, mlp: MLP, out_map: str = "rows") -> tuple:
    """``(P, N)``: rows and columns of each layer's panel per core. ``out_map="rows"``:
    every layer by row panels, ``P_l = nr ceil(m_l / (c nr))``, ``N_0 = n_in``, ``N_l = c
    P_{l-1}`` (the gathered input). ``"cols"``: the output layer by columns instead: core
    ``k`` holds columns ``k P_{L-2} .. (k + 1) P_{L-2} - 1`` of all its rows (``P_{L-1} =
    nr ceil(m_{L-1} / nr)``, ``N_{L-1} = P_{L-2}``: its own segment of the last hidden
    activation, which is never gathered)."""
    c = cfg.cores
    P = [panel_rows(cfg, mlp.shape(l)[0]) for l in range(mlp.n_layers)]
    N = [mlp.n_in] + [c * p for p in P[:-1]]
    if out_map == "cols":
        P[-1] = cfg.nr * local_len(mlp.n_out, cfg.nr)
        N[-1] = P[-2]
    return P, N


def softmax_why_not(out_map: str) -> str | None:
    """Why a chip step cannot compute the softmax on the array with this output mapping."""
    if out_map != "cols":
        return "the logits are spread over the cores (output layer by rows); the kernel needs them on one core"
    return None


class PanelMap:
    """Where each core's weight panels sit in the global matrices: row panels (columns in
    the core's order, :meth:`_cols`) or, for the output layer with ``out_map="cols"``, a
    column panel. Shared by the compiled programs and the golden trainers (attributes
    ``cfg``, ``mlp``, ``P``, ``N``, ``out_map``)."""

    def _cols(self, l, k):
        """Core ``k``'s order of the columns of layer ``l``'s panel (None: natural):
        the all-gather's step order for ``l >= 1`` (a column panel: natural)."""
        return column_order(self.cfg, k, self.P[l - 1]) if l >= 1 and not self._split_cols(l) else None

    def _split_cols(self, l) -> bool:
        """Whether layer ``l`` is split by columns (the output layer with ``out_map="cols"``)."""
        return self.out_map == "cols" and l == self.mlp.n_layers - 1

    def _gshape(self, l) -> tuple:
        """Shape of layer ``l``'s padded global matrix (the cores' panels together)."""
        if self._split_cols(l):
            return self.P[l], self.cfg.cores * self.N[l]
        return self.cfg.cores * self.P[l], self.N[l]

    def _panel_index(self, l, k) -> tuple:
        """Index of core ``k``'s panel in :meth:`_gshape`'s matrix: its rows, its columns
        in the core's order (a column panel: its own columns, in the natural order)."""
        if self._split_cols(l):
            return slice(None), slice(k * self.N[l], (k + 1) * self.N[l])
        cols = self._cols(l, k)
        return slice(k * self.P[l], (k + 1) * self.P[l]), slice(None) if cols is None else cols


    def core_weights(self, weights) -> list:
        """Per core, per layer: its panel (:meth:`_panel_index` of the padded global
        matrix; global ``(m, n)`` bit patterns or floats in)."""
        fmt, c = self.cfg.fmt, self.cfg.cores
        out = [[] for _ in range(c)]
        for l, W in enumerate(weight_bits(self.mlp, fmt, weights)):
            m, n = self.mlp.shape(l)
            G = np.zeros(self._gshape(l), dtype=fmt.np_uint)
            G[:m, :n] = W
            for k in range(c):
                rows, cols = self._panel_index(l, k)
                if isinstance(cols, slice):
                    out[k].append(G[rows, cols])
                else:
                    out[k].append(np.concatenate([G[rows, g] for _, g in _runs(cols)], axis=1))
        return out

    def join_panels(self, l, panels, padded: bool = False) -> np.ndarray:
        """Layer ``l``'s global matrix from the cores' panels (each ``P_l x N_l``, further
        padding ignored): ``(m, n)``, or with ``padded`` the whole :meth:`_gshape`."""
        G = np.zeros(self._gshape(l), dtype=self.cfg.fmt.np_uint)
        for k, panel in enumerate(panels):
            rows, cols = self._panel_index(l, k)
            panel = panel[:self.P[l], :self.N[l]]
            if isinstance(cols, slice):
                G[rows, cols] = panel
            else:
                for p, g in _runs(cols):
                    G[rows, g] = panel[:, p]
        m, n = self.mlp.shape(l)
        return G if padded else G[:m, :n]


def _runs(cols: np.ndarray) -> list:
    """``cols`` (distinct column indices) as runs of consecutive columns: ``[(positions,
    columns)]``, two slices each (block copies instead of a fancy index per element)."""
    brk = (np.flatnonzero(np.diff(cols) != 1) + 1).tolist()
    starts, ends = [0] + brk, brk + [len(cols)]
    return [(slice(s, e), slice(int(cols[s]), int(cols[s]) + e - s)) for s, e in zip(starts, ends)]
