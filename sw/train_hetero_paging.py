"""Memory of the cores of a split heterogeneous step (:mod:`sw.train_hetero_split`), with
weight panels that do not fit a core's PE memories kept in its scratchpad and paged
through a page buffer, as SGD across the cores of a one-kind chip pages them
(``docs/hybrid.md``, "Panels paged from the scratchpad").

:func:`allocate` gives each core its regions: every panel in the PE memories when they
fit (bank A while it has room, else B); otherwise :func:`sw.train_paging.plan_panels`
chooses the banks and moves the largest panels of the core that each fit its scratchpad
there, one more at a time, until the rest fits beside a page buffer ``WP``. The ops of a paged panel are
the single-kind compiler's: per page a :func:`sw.train_paging.spad_op` load and the
page's rows of the forward GEMV (:func:`paged_forward_ops`); backward
:func:`sw.train_chip_ops._paged_backward` (last page first: load, the page's part of
``W^T d`` added to the pages after it, its rows of the update, store).
:class:`sw.golden_train_hetero.GoldenHeteroSplit` adds the pages' partials in the same
order (:func:`sw.golden.gemv_t_paged`).
"""

from __future__ import annotations

from dataclasses import replace

from sw.asm import Builder
from sw.kernels import emit_gemv
from sw.layout import local_len
from sw.mlp import MLP
from sw.train_alloc import Allocator, _other
from sw.train_hetero_ring import padded_len
from sw.train_host import TrainCompileError
from sw.train_ops import Op
from sw.train_paging import page_split, plan_panels, spad_image, spad_op
from sw.transfer import emit_spad_fill

__all__ = ["allocate", "paged_forward_ops", "fill_spad"]


def _at(reg, words):
    return replace(reg, base=reg.base + words)


def _core_alloc(hcfg, mlp: MLP, parts, c: int, mine: list, wbanks: dict | None = None,
                pages: dict | None = None) -> Allocator:
    """Core ``c``'s regions for its panels ``mine`` (``(layer, panel, rows)``).
    ``wbanks``: layer -> bank of its weights (None: bank A while it has room, else B);
    ``pages``: layer -> local rows per page of the panels kept in the scratchpad (they
    share a page buffer ``WP`` in their bank)."""
    nl, cfg = mlp.n_layers, hcfg.core_cfg(c)
    L = lambda n: local_len(n, cfg.nr)                        # noqa: E731
    T = lambda n: max(L(n), padded_len(hcfg, n) // cfg.nr)    # noqa: E731
    pages = pages or {}
    al = Allocator(cfg)
    wbank = {}
    for l, j, P in mine:
        if l in pages:
            continue
        n = mlp.shape(l)[1]
        wb = wbanks[l] if wbanks else ("a" if al.next["a"] + L(P) * L(n) <= al.depth("a") else "b")
        wbank[l] = al.alloc(f"W{l}", L(P) * L(n), f"weights of layer {l}, panel {j}", bank=wb).bank
    if pages:
        pb = wbanks[min(pages)]
        al.alloc("WP", max(pages[l] * L(mlp.shape(l)[1]) for l in pages), "page buffer of the panels in the "
                 "scratchpad (" + ", ".join(f"W{l}: {pages[l]} local rows per page" for l in sorted(pages)) + ")",
                 bank=pb)
        wbank.update({l: pb for l in pages})
    for l, j, P in mine:
        n = mlp.shape(l)[1]
        f = {wbank[l]}
        al.alloc(f"a{l}", L(n) if l == 0 else T(n), f"input of layer {l}", forbid=f)
        if l >= 1:
            al.alloc(f"c{l}", L(n) + 1, f"cols copy of a{l}", forbid=f)
        al.alloc(f"z{l}", T(P) if l < nl - 1 else L(P), f"output panel of layer {l}", forbid=f)
        if l == nl - 1:
            zb = al.items[f"z{l}"].region.bank
            al.alloc("t", L(P), "target (rows, loaded)", bank=_other(zb))
            al.alloc("m1", 1, "scalar -1")
    for l, j, P in sorted(mine, reverse=True):
        n = mlp.shape(l)[1]
        f = {wbank[l]}
        if l < nl - 1:
            al.alloc(f"g{l}", T(P), f"delta panel of layer {l}", forbid=f)
            if l >= 1:
                al.alloc(f"dc{l}", L(P) + 1, f"rows copy of g{l}", forbid=f)
        if l >= 1:
            eb = al.alloc(f"e{l}", T(n), f"W{l}^T d partial", forbid=f).bank
            if j >= 1:
                al.alloc(f"er{l}", T(n), f"partial W{l}^T d from the previous core", bank=_other(eb))
            if j == len(parts[l]) - 1:
                al.alloc(f"dm{l}", T(n), f"e{l} * relu'(a{l}) (diag)", forbid=f)
    acc = [l for l, _, P in mine if l in pages and l >= 1 and len(page_split(L(P), pages[l])) > 1]
    if acc:
        al.alloc("ep", max(L(mlp.shape(l)[1]) for l in acc), "W^T d partial of one page, added to e page by page",
                 prefer=_other(al.items[f"e{acc[0]}"].region.bank), forbid={wbank[acc[0]]})
    al.alloc("nlr", 1, "scalar -lr")
    al.alloc("one", 1, "scalar 1")
    return al


def allocate(hcfg, mlp: MLP, parts) -> tuple:
    """``(allocs, spad)``: per core its :class:`Allocator`, and per core the panels it
    keeps in its scratchpad (layer -> :class:`sw.train_paging.SpadPanel`; empty when
    everything fits its PE memories). Raises :class:`TrainCompileError` (one line, with
    the sizes) when a core's panels fit neither."""
    from sw.train_dram import DramPanel

    nl = mlp.n_layers
    allocs, spad = {}, {}
    for c in sorted({k for ps in parts for k, _, _ in ps}):
        cfg = hcfg.core_cfg(c)
        mine = [(l, j, P) for l in range(nl) for j, (k, _, P) in enumerate(parts[l]) if k == c]
        al = _core_alloc(hcfg, mlp, parts, c, mine)
        spad[c] = {}
        if not al.fits():
            ls = [l for l, _, _ in mine]
            Ps, Ns = [P for _, _, P in mine], [mlp.shape(l)[1] for l in ls]
            L = lambda n: local_len(n, cfg.nr)                # noqa: E731

            def fail(a, c=c, cfg=cfg, mine=mine, Ps=Ps, Ns=Ns, L=L):
                return (f"core {c} ({cfg.nr}x{cfg.nr}): panels {[(l, j) for l, j, _ in mine]} need {a.next['a']} + "
                        f"{a.next['b']} words per PE, it has {cfg.mem_a_words} + {cfg.mem_b_words}" + (
                            f", nor with the largest paged from its {cfg.spad_depth}-beat scratchpad (the panels "
                            f"need {sum(cfg.nr * L(P) * L(n) for P, n in zip(Ps, Ns))} beats; the rest must fit "
                            f"beside a page buffer)" if cfg.spad_kib else " and no scratchpad"))
            _, al, panels = plan_panels(
                cfg, Ps, Ns, lambda wb, pg, c=c, mine=mine, ls=ls: _core_alloc(
                    hcfg, mlp, parts, c, mine, dict(zip(ls, wb)), {ls[i]: r for i, r in (pg or {}).items()}),
                [i for i in range(len(mine)) if cfg.nr * L(Ps[i]) * L(Ns[i]) <= cfg.spad_depth], fail=fail)
            if any(isinstance(p, DramPanel) for p in panels.values()):
                raise TrainCompileError(f"core {c}: its panels need DRAM streaming, which the heterogeneous "
                                        f"compiler does not compile")
            spad[c] = {ls[i]: p for i, p in panels.items()}
        allocs[c] = al
    return allocs, spad


def paged_forward_ops(cfg, al: Allocator, l: int, n: int, sp) -> list:
    """The forward GEMV of layer ``l``'s panel (``n`` columns) page by page: load the
    page into ``WP``, its rows of ``z`` (layer 0 reads the loaded cols input; a later
    layer's first page reads the diag input and makes its cols copy, the other pages
    read the copy)."""
    nr, L = cfg.nr, (lambda x: local_len(x, cfg.nr))
    R = {k: v.region for k, v in al.items.items()}
    WP, a, z = R["WP"], R[f"a{l}"], R[f"z{l}"]
    c = R.get(f"c{l}")
    ops = []
    for p, (r0, rows) in enumerate(sp.pages):
        w = sp.page_words(p)
        ops.append(spad_op(cfg, f"lf{l}_{p}", False, WP, w, sp.page_addr(nr, p)))
        diag = l >= 1 and p == 0
        xi, zp = (c if l >= 1 and p > 0 else a), _at(z, r0)
        ops.append(Op(f"gemv{l}_{p}", "gemv", lambda b, rows=rows, xi=xi, zp=zp, p=p, diag=diag: emit_gemv(
            b, cfg, rows * nr, n, WP, xi, zp, x_layout="diag" if diag else None, x_copy=c if diag else None,
            name=f"fw{l}_{p}_").instructions,
            reads=[(WP, w), (xi, L(n))], writes=[(zp, rows)] + ([(c, L(n) + 1)] if diag else []), stores=True))
    return ops


def fill_spad(model, cfg, k: int, panels: dict, local: dict) -> None:
    """Write core ``k``'s scratchpad panels (layer -> :class:`SpadPanel`) from the host:
    ``local[l]``, the panel's ``(nr, nr, words)`` local words."""
    for l, sp in panels.items():
        b = Builder(cfg)
        emit_spad_fill(b, cfg, sp.base, sp.beats(cfg.nr))
        b.halt()
        model.load(list(b.build().words()), 0, core=k)
        model.cores[k].run(0, spad_image(cfg, sp, local[l]), ring_in=())

