"""The geometry of a continuous-propagation mapping: the row panels of a layer on its
group of cores (:func:`cp_shapes`), every core's stage (:func:`cp_stage_of`), and the
balanced first guess of the cores per layer that :func:`sw.train_cp.cp_mapping` refines."""

from __future__ import annotations

from sw.layout import local_len
from sw.mlp import MLP
from sw.train_host import TrainCompileError

__all__ = ["cp_shapes", "cp_stage_of", "cp_core_layers", "min_cores"]


def _panel(cfg, m: int, g: int) -> int:
    return cfg.nr * local_len(m, g * cfg.nr)


def _work(cfg, mlp: MLP, l: int, g: int) -> int:
    """MACs per core of layer ``l`` on ``g`` cores (padded rows): forward, ``W^T d``
    (not layer 0) and the update."""
    m, n = mlp.shape(l)
    return _panel(cfg, m, g) * n * (2 if l == 0 else 3)


def min_cores(groups) -> int:
    """The fewest cores ``groups`` take: every run of consecutive one-core layers may
    share one core (:func:`cp_core_layers`)."""
    return sum(groups) - sum(1 for l in range(1, len(groups)) if groups[l] == groups[l - 1] == 1)


def _check_groups(cfg, mlp: MLP, groups, shared=None) -> list:
    """``groups`` as ints, checked: ``shared`` (layers on the core of the layer before)
    given, the cores they leave must be enough; else some sharing must make them enough
    (:func:`min_cores`)."""
    L, c = mlp.n_layers, cfg.cores
    groups = [int(g) for g in groups]
    if len(groups) != L or any(g < 1 for g in groups) or groups[-1] != 1:
        raise TrainCompileError(f"groups must give >= 1 core for each of the {L} layers, 1 for the output "
                                f"layer, got {groups}")
    if shared is not None:
        _check_shared(groups, shared)
    need = min_cores(groups) if shared is None else sum(groups) - len(shared)
    if need > c:
        raise TrainCompileError(f"groups {groups} need {need} cores, the chip has {c}")
    return groups


def _check_shared(groups: list, shared) -> None:
    bad = [l for l in shared if not (1 <= l < len(groups) and groups[l] == groups[l - 1] == 1)]
    if bad:
        raise TrainCompileError(f"shared layers {sorted(shared)}: layer {bad[0]} cannot share the core of layer "
                                f"{bad[0] - 1} (both need one core, groups {groups})")


def _balance(cfg, mlp: MLP, shared=()) -> list:
    """The output layer on one core, each other layer at least one, then core by core to
    the layer whose per-core work (:func:`_work`) is the largest, while it shrinks that
    layer's panel. Cores left over (more cores than useful) stay idle and only relay.
    ``shared``: layers on the core of the layer before (those two keep one core)."""
    L, c = mlp.n_layers, cfg.cores
    if c < L - len(shared):
        raise TrainCompileError(f"continuous propagation maps each of the {L} layers to its own cores: it needs "
                                f"cores >= {L}, got cores={c}")
    fixed = set(shared) | {l - 1 for l in shared}
    g = [1] * L
    for _ in range(c - L + len(shared)):
        cand = [(l, _work(cfg, mlp, l, g[l])) for l in range(L - 1) if l not in fixed]
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


def cp_core_layers(groups: list, cores: int, shared=()) -> list:
    """Per core the stages ``(layer, index in its group)`` it runs: one, several
    (``shared``: the layers on the core of the layer before), or none (idle)."""
    out = []
    for l, g in enumerate(groups):
        if l in shared:
            out[-1].append((l, 0))
        else:
            out += [[(l, i)] for i in range(g)]
    return out + [[] for _ in range(cores - len(out))]


def cp_stage_of(groups: list, cores: int, shared=()) -> list:
    """Per core: ``(layer, index in its group)`` (a core of several layers: its first),
    or None for an idle core."""
    return [st[0] if st else None for st in cp_core_layers(groups, cores, shared)]
