"""The scheduler's prices of placements with layers split across a group's cores
(:mod:`sw.train_hetero_split`, ``docs/hybrid.md``).

A split placement's step is a sequence of sections (chip RUNs), each priced as follows:

* a compute section: the longest of its cores' parts (:func:`perf.schedule.layer_costs`
  at the core's panel rows; a panel copied on a core in two consecutive layers as the
  ``relu`` class at its words) plus one RUN overhead; its dynamic energy the sum over its
  cores;
* a ring section: the transfer's static schedule (exact cycles) and its energy per hop
  (:func:`perf.schedule._transfer`); a broadcast as a transfer to its farthest receiver;
* the reduction of ``W^T d``: per further core, a transfer of the partial and an ``axpy``
  (the ``relu`` class at the input's words), the mask on the last core.

:func:`split_options` lists the core counts tried: per group, the powers of two up to
the group's cores and the group's cores, the same for every hidden layer of the group
(capped where a layer's rows do not fill the panels); the output layer on one core.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

from sw.layout import local_len
from sw.train_hetero_place import LayerPlace, Placement, PlacementError
from sw.train_hetero_ring import farthest, padded_len
from sw.train_hetero_split import _allocate, layer_parts
from sw.train_host import TrainCompileError

__all__ = ["split_options", "predict_split", "paging_costs"]


def _counts(n: int) -> list:
    out, k = [], 2
    while k < n:
        out.append(k)
        k *= 2
    return out + [n] if n > 1 else []


def _fits_k(hcfg, m: int, k: int) -> bool:
    w = max(c.nr for c in hcfg.group_cfgs)
    P = -(-m // (k * w)) * w
    return (k - 1) * P < m


def split_options(hcfg, mlp, groups: list) -> list:
    """The split placements of the uniform placement ``groups`` (a group per layer) the
    scheduler prices: per group used, a core count for its hidden layers."""
    used = sorted(set(groups[:-1]))
    opts = [[1] + _counts(hcfg.groups[g].count) for g in used]
    out = []
    for ks in itertools.product(*opts):
        if all(k == 1 for k in ks):
            continue
        kg = dict(zip(used, ks))
        layers = []
        for l, g in enumerate(groups):
            k = kg.get(g, 1) if l < mlp.n_layers - 1 else 1
            m = mlp.shape(l)[0]
            while k > 1 and not _fits_k(hcfg, m, k):
                k -= 1
            layers.append(LayerPlace(g, g, g, 0 if k > 1 else None, k))
        pl = Placement(tuple(layers))
        if pl not in out and any(p.cores > 1 for p in layers):
            out.append(pl)
    return out


def paging_costs(model, kind: str, cfg, mlp, l: int, sp, resident: bool = False) -> tuple:
    """What paging layer ``l``'s panel (:class:`sw.train_paging.SpadPanel` ``sp``) from
    the scratchpad adds to its forward and to its backward and update: ``((cycles, pJ),
    (cycles, pJ))``. Per page a ``spad_load`` (forward; backward, but the resident last
    page of the output layer) and a ``spad_store`` (backward) of its words, the GEMV,
    transposed GEMV and rank-1 classes at the page's rows less those at the panel's, and
    per further page of a layer ``l >= 1`` an ``axpy`` of ``W^T d`` (the ``relu`` class
    at the input's words). A kind characterized without the scratchpad classes prices
    them as ``relu`` at the same words."""
    nr, n = cfg.nr, mlp.shape(l)[1]
    L = lambda k: local_len(k, nr)                      # noqa: E731

    def op(cls, **shape):
        if cls.startswith("spad") and cls not in model.fits[kind]:
            cls = "relu"
        q = model.predict(kind, cls, shape)
        return q["cycles"] - cfg.run_overhead, q["energy_total_pj"] - q["energy_pj"].get("leakage", 0.0)

    def add(acc, x, k=1):
        return acc[0] + k * x[0], acc[1] + k * x[1]

    rows = [r * nr for _, r in sp.pages]
    whole = sp.lrows * nr
    fw, bw = (0.0, 0.0), (0.0, 0.0)
    for p, r in enumerate(rows):
        w = sp.page_words(p)
        fw = add(add(fw, op("spad_load", n=w)), op("gemv", m=r, n=n))
        if not (resident and p == len(rows) - 1):
            bw = add(bw, op("spad_load", n=w))
        bw = add(add(bw, op("spad_store", n=w)), op("rank1", m=r, n=n))
        if l >= 1:
            bw = add(bw, op("gemv_t", m=r, n=n))
            if p:
                bw = add(bw, op("relu", n=L(n)))
    fw = add(fw, op("gemv", m=whole, n=n), -1)
    bw = add(bw, op("rank1", m=whole, n=n), -1)
    if l >= 1:
        bw = add(bw, op("gemv_t", m=whole, n=n), -1)
    return fw, bw


def predict_split(hcfg, mlp, placement: Placement, model, kinds: list):
    """The model's step of a split placement (see the module docstring): a
    :class:`perf.schedule.Prediction`."""
    from perf.schedule import Prediction, _chip_leak, _transfer, layer_costs

    clock = hcfg.group_cfgs[0].clock_mhz * 1e6
    try:
        parts = layer_parts(hcfg, mlp, placement)
        _, spad = _allocate(hcfg, mlp, parts)
    except (PlacementError, TrainCompileError) as e:
        return Prediction(placement, float("inf"), float("inf"), 0.0, 0.0, 0.0, False, str(e))
    over = max(c.run_overhead for c in hcfg.group_cfgs)
    xing = {x.src: x for x in hcfg.crossings}
    nl = mlp.n_layers

    @lru_cache(maxsize=None)
    def xfer(s, r, size):
        return _transfer(hcfg, s, r, size, model, kinds, xing)

    @lru_cache(maxsize=None)
    def cost(l, c, rows):
        g = hcfg.group_of(c)
        return layer_costs(model, kinds[g], hcfg.group_cfgs[g], mlp, l, "ring", rows=rows).phases

    @lru_cache(maxsize=None)
    def vec(c, words):
        g = hcfg.group_of(c)
        q = model.predict(kinds[g], "relu", {"n": words})
        return q["cycles"] - hcfg.group_cfgs[g].run_overhead, q["energy_total_pj"] - q["energy_pj"].get("leakage", 0.0)

    @lru_cache(maxsize=None)
    def paging(c, l):
        """(forward, backward) extra (cycles, dynamic pJ) of a panel paged from the scratchpad."""
        sp = spad.get(c, {}).get(l)
        if sp is None:
            return (0.0, 0.0), (0.0, 0.0)
        g = hcfg.group_of(c)
        return paging_costs(model, kinds[g], hcfg.group_cfgs[g], mlp, l, sp, resident=l == nl - 1)

    cyc, dyn, xfers = 0.0, 0.0, []

    def ring(name, s, r, size):
        nonlocal cyc, dyn
        x = xfer(s, r, size)
        cyc += x["cycles"]
        dyn += x["dyn_pj"]
        xfers.append(dict(name=name, **x))

    def section(parts_cost):
        nonlocal cyc, dyn
        cyc += max(c for c, _ in parts_cost) + over
        dyn += sum(e for _, e in parts_cost)

    def moves(l, fwd):
        """Ring transfers into layer ``l``; per receiving core the copies' cost."""
        copies = {}
        srcs = parts[l - 1] if fwd else [(parts[l + 1][-1][0], r0, rows) for _, r0, rows in parts[l]]
        dsts = parts[l] if fwd else None
        for i, (s, r0, rows) in enumerate(srcs):
            far = []
            for r in ([c for c, _, _ in dsts] if fwd else [parts[l][i][0]]):
                P = padded_len(hcfg, rows)
                if s == r:
                    c, e = vec(r, P // hcfg.core_cfg(r).nr)
                    old = copies.get(r, (0.0, 0.0))
                    copies[r] = (old[0] + c, old[1] + e)
                else:
                    far.append(r)
            if far:                      # one broadcast: the path to the farthest receiver
                ring(f"{'Ta' if fwd else 'Tg'}{l}.{s}-{'.'.join(map(str, far))}", s, farthest(hcfg, s, far), rows)
        return copies

    for l in range(nl):
        copies = moves(l, True) if l >= 1 else {}
        pc = []
        for c, _, rows in parts[l]:
            ph = cost(l, c, rows)
            cc, ce = copies.get(c, (0.0, 0.0))
            f = ph["forward"]
            extra = ph["backward"] if l == nl - 1 else {"cycles": 0, "dyn_pj": 0}
            upd = ph["update"] if l == nl - 1 else {"cycles": 0, "dyn_pj": 0}
            (pf, pfe), (pb, pbe) = paging(c, l)
            if l < nl - 1:
                pb = pbe = 0.0
            pc.append((f["cycles"] - over + extra["cycles"] + upd["cycles"] + cc + pf + pb, f["dyn_pj"]
                       + extra["dyn_pj"] + upd["dyn_pj"] + ce + pfe + pbe))
        section(pc)
    for l in range(nl - 2, -1, -1):
        copies = moves(l, False)
        k, n = len(parts[l]), mlp.shape(l)[1]
        pc = []
        for c, _, rows in parts[l]:
            ph = cost(l, c, rows)
            cc, ce = copies.get(c, (0.0, 0.0))
            b, u = ph["backward"], ph["update"]
            mc, me = vec(c, local_len(n, hcfg.core_cfg(c).nr)) if (l >= 1 and k > 1) else (0.0, 0.0)
            _, (pb, pbe) = paging(c, l)
            pc.append((b["cycles"] - mc + u["cycles"] - over + cc + pb, b["dyn_pj"] - me + u["dyn_pj"] + ce + pbe))
        section(pc)
        if l >= 1:
            for j in range(1, k):
                s, r = parts[l][j - 1][0], parts[l][j][0]
                ring(f"R{l}.{j}", s, r, n)
                ac, ae = vec(r, local_len(n, hcfg.core_cfg(r).nr))
                section([(ac * (2 if j == k - 1 else 1), ae * (2 if j == k - 1 else 1))])
    leak = _chip_leak(hcfg) * cyc
    return Prediction(placement, cyc, dyn + leak, dyn, leak, clock / cyc, True, "", xfers)
