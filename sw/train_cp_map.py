"""The geometry of a continuous-propagation mapping: the row panels of a layer on its
group of cores (:func:`cp_shapes`), every core's stage (:func:`cp_stage_of`), and the
balanced first guess of the cores per layer that :func:`sw.train_cp.cp_mapping` refines."""

from __future__ import annotations

from sw.layout import local_len
from sw.mlp import MLP
from sw.train_host import TrainCompileError

__all__ = ["cp_shapes", "cp_stage_of"]


def _panel(cfg, m: int, g: int) -> int:
    return cfg.nr * local_len(m, g * cfg.nr)


def _work(cfg, mlp: MLP, l: int, g: int) -> int:
    """MACs per core of layer ``l`` on ``g`` cores (padded rows): forward, ``W^T d``
    (not layer 0) and the update."""
    m, n = mlp.shape(l)
    return _panel(cfg, m, g) * n * (2 if l == 0 else 3)


def _check_groups(cfg, mlp: MLP, groups) -> list:
    L, c = mlp.n_layers, cfg.cores
    groups = [int(g) for g in groups]
    if len(groups) != L or any(g < 1 for g in groups) or groups[-1] != 1:
        raise TrainCompileError(f"groups must give >= 1 core for each of the {L} layers, 1 for the output "
                                f"layer, got {groups}")
    if sum(groups) > c:
        raise TrainCompileError(f"groups {groups} need {sum(groups)} cores, the chip has {c}")
    return groups


def _balance(cfg, mlp: MLP) -> list:
    """The output layer on one core, each other layer at least one, then core by core to
    the layer whose per-core work (:func:`_work`) is the largest, while it shrinks that
    layer's panel. Cores left over (more cores than useful) stay idle and only relay."""
    L, c = mlp.n_layers, cfg.cores
    if c < L:
        raise TrainCompileError(f"continuous propagation maps each of the {L} layers to its own cores: it needs "
                                f"cores >= {L}, got cores={c}")
    g = [1] * L
    for _ in range(c - L):
        cand = [(l, _work(cfg, mlp, l, g[l])) for l in range(L - 1)]
        cand = [(l, w) for l, w in cand if _work(cfg, mlp, l, g[l] + 1) < w]
        if not cand:
            break
        l = max(cand, key=lambda t: t[1])[0]
        g[l] += 1
    return g


def cp_shapes(cfg, mlp: MLP, groups: list) -> tuple:
    """``(P, N)``: rows of each layer's panel per core, ``P_l = nr ceil(m_l / (g_l nr))``,
    and columns: ``N_0 = n_in``, ``N_l = g_{l-1} P_{l-1}`` (the gathered input, padding
    included)."""
    L = mlp.n_layers
    P = [_panel(cfg, mlp.shape(l)[0], groups[l]) for l in range(L)]
    N = [mlp.n_in] + [groups[l - 1] * P[l - 1] for l in range(1, L)]
    return P, N


def cp_stage_of(groups: list, cores: int) -> list:
    """Per core: ``(layer, index in its group)``, or None for an idle core."""
    out, k = [], 0
    for l, g in enumerate(groups):
        out += [(l, i) for i in range(g)]
        k += g
    return out + [None] * (cores - k)
