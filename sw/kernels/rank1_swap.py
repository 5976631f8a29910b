"""The rank-1 update of a page that leaves for the scratchpad as it is computed, while the
next page comes in (:func:`emit_rank1_swap`), its cost model (:func:`rank1_swap_cost`)
and when it applies (:func:`rank1_swap_why_not`).

A page moves through the scratchpad port one beat (``nr`` values) a cycle, so a page of
``w`` words per PE takes ``nr w`` cycles each way, while its rank-1 update takes about
``w``. Here the update's FMAs write their results to a register, not back to ``W``
(:func:`sw.kernels.emit_rank1` writes them back), and every updated word goes from that
register onto the buses and out to the scratchpad; the word's address is then free, and
the next page's beat for it is written there. The store and the load of a word share
instructions, one over the row buses and one over the column buses (an instruction has
one stream input and one stream output), so the two pages must be in the two bus orders
of :func:`sw.transfer.emit_page_move` (``bus="row"`` / ``"col"``; the CP paged head
alternates them, :meth:`sw.train_paging.SpadPanel.page_order`).

Schedule: iteration ``a`` (4 instructions when ``nr = 4``; ``nr`` in general) issues the
FMA of word ``a`` (``rX = au_i * v[j] + W[a]``, the FMA :func:`emit_rank1` issues:
``au_i = alpha * u[i]`` rounded once, one rounding per word), the move ``rH = rX`` of a
word ``F / nr`` iterations earlier (``F = fpu_latency - 1``: the first cycle a move may
read the FMA's result), the ``nr`` output beats of the word moved before (PE column /
row ``m`` drives ``rH``, ``sout``) and the ``nr`` input beats of word ``a - 1`` (``sin``,
``@col=m writes`` / ``@row=m writes``). So a page of ``w`` words per PE is updated,
stored and replaced in about ``nr w`` cycles, the time of one of its moves.
"""

from __future__ import annotations

from sw.asm import cdrv, fma, mov, mul, pred, rdrv, sin, sout
from sw.collectives import Frag, Region
from sw.kernels.common import KernelInfo, Scalar, _finish, _lat, _need
from sw.layout import local_len

__all__ = ["emit_rank1_swap", "rank1_swap_cost", "rank1_swap_why_not"]

_BUSES = ("row", "col")


def rank1_swap_why_not(cfg, m: int, load_rows: int = 0) -> str | None:
    """Why :func:`emit_rank1_swap` cannot update an ``m``-row page (and load
    ``load_rows`` local rows after it, of any number), or None: it keeps ``alpha u[i]``
    of every local row in a register, beside three others."""
    mp = local_len(m, cfg.nr)
    if mp + 3 > cfg.n_regs:
        return f"{mp} local rows per page need {mp + 3} registers, a PE has {cfg.n_regs}"
    if not cfg.spad_kib:
        return "the configuration has no scratchpad"
    return None


def _timing(cfg, mp: int, np_: int, load_rows: int) -> tuple:
    """``(prologue, iterations, F)``: the prologue's instructions (alpha and the scaled
    ``u`` elements, at least ``F`` before the first FMA, and room for the control
    settings) and the iterations of ``nr`` instructions."""
    nr = cfg.nr
    F, _ = _lat(cfg)
    w, wi = mp * np_, load_rows * np_
    prologue = max(1 + mp, 1 + F, 6)
    last_out = w - 1 + (F + nr) // nr           # the iteration of the last output beat
    return prologue, max(last_out, wi) + 1, F


def rank1_swap_cost(cfg, m: int, n: int, load_rows: int = 0) -> dict:
    """Exact instruction count of :func:`emit_rank1_swap`: ``prologue + nr * iterations``
    (about ``nr`` per word of the page)."""
    mp, np_ = local_len(m, cfg.nr), local_len(n, cfg.nr)
    pro, its, _ = _timing(cfg, mp, np_, load_rows)
    return {"instructions": pro + cfg.nr * its, "prologue": pro, "iterations": its}


def emit_rank1_swap(b, cfg, m: int, n: int, W: Region, u: Region, v: Region, alpha: Scalar, *,
                    out_bus: str, out_addr: int, load: tuple | None = None, u_layout: str = "diag",
                    agus=("g0", "g1", "g2"), name: str = "rs") -> KernelInfo:
    """``W + alpha u v^T`` (``W`` ``m x n``, as :func:`sw.kernels.emit_rank1` with ``v``
    in the ``cols`` layout and ``alpha`` given) stored to the scratchpad from beat
    ``out_addr`` in :func:`sw.transfer.emit_page_move`'s order over ``out_bus``, not
    written back to ``W``; ``load = (rows, bus, addr)``: the next page's ``rows`` local
    rows loaded into ``W``'s region in place from beat ``addr``, in the order over the
    other bus (module docstring; a longer page's last words after the update, in a
    loop). ``u`` in the ``rows`` or ``diag`` layout; ``v`` not in ``W``'s bank. Cost:
    :func:`rank1_swap_cost`."""
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(m >= 1 and n >= 1, f"bad shape {m} x {n}")
    _need(out_bus in _BUSES, f"out_bus must be 'row' or 'col', got {out_bus!r}")
    _need(u_layout in ("rows", "diag"), f"u must be in the 'rows' or 'diag' layout, got {u_layout!r}")
    _need(v.bank != W.bank, "v must not be in W's bank (both are read by every FMA)")
    mp, np_ = local_len(m, nr), local_len(n, nr)
    li, in_bus, in_addr = load if load is not None else (0, None, 0)
    why = rank1_swap_why_not(cfg, m, li)
    _need(why is None, f"rank-1 swap: {why}")
    _need(load is None or in_bus in _BUSES and in_bus != out_bus,
          f"the loaded page must use the other bus than the stored one ({out_bus!r}), got {in_bus!r}")
    w, wi = mp * np_, li * np_
    W.check(cfg, max(w, wi), "W")
    u.check(cfg, mp, "u")
    v.check(cfg, np_, "v")
    W, u, v, sreg = W.bind(cfg), u.bind(cfg), v.bind(cfg), alpha.region.bind(cfg)
    pro, its, F = _timing(cfg, mp, np_, li)
    ra, rx, rh = "r0", "r1", "r2"
    au = [f"r{3 + i}" for i in range(mp)]
    gA, gV, gI = agus
    out_sel = "col" if out_bus == "row" else "row"
    drive = rdrv if out_bus == "row" else cdrv
    in_sel = "col" if in_bus == "row" else "row"
    f = Frag()

    # prologue: alpha, au_i = alpha * u[i] (row i's FMAs come F or more cycles later)
    first = [f.ins(sreg.rd(0), mov(ra, sreg.src))]
    for i in range(mp):
        if u_layout == "diag":
            first.append(f.ins(u.rd(i, gate="rdrv"), rdrv(u.src, diag=0), mul(au[i], "row", ra)))
        else:
            first.append(f.ins(u.rd(i), mul(au[i], u.src, ra)))
    first += f.nops(pro - len(first))
    for c in ([("spad", "wr", out_addr)] + ([("spad", "rd", in_addr)] if load is not None else [])
              + [("agu_stride", g, 0, 1) for g in (gA, gV, gI)]):
        f.attach(c, first)

    def events(a: int) -> list:
        """Per position in iteration ``a``: ``(kind, word)`` events."""
        pos = [[] for _ in range(nr)]
        if a < w:
            pos[0].append(("fma", a))
        for m_ in range(nr):                       # output beat m_ of word a - lag
            lag, p = divmod(F + 1 + m_, nr)
            if 0 <= a - lag < w:
                pos[p].append(("out", m_))
        lag, p = divmod(F, nr)
        if 0 <= a - lag < w:
            pos[p].append(("mov", a - lag))
        if 1 <= a <= wi:
            for m_ in range(nr):
                pos[m_].append(("in", m_))
        return pos

    def slots(ev: list, a: int, agu: bool) -> list:
        """The slots of one instruction of iteration ``a`` (``agu``: addresses from the
        row's generators, else immediate)."""
        out = []
        for kind, x in ev:
            if kind == "fma":
                i, j = divmod(a, np_)
                out += [W.rd(0, agu=gA) if agu else W.rd(a), v.rd(0, agu=gV) if agu else v.rd(j),
                        fma(rx, au[i], v.src, W.src)]
            elif kind == "mov":
                out.append(mov(rh, rx))
            elif kind == "out":
                out += [drive(rh, **{out_sel: x}), sout(out_bus)]
            else:
                out += [sin(in_bus), pred(in_sel, x, writes=True),
                        W.wr(in_bus, 0, agu=gI) if agu else W.wr(in_bus, a - 1)]
        return out

    lag_max = (F + nr) // nr
    a = 0
    tail = w + lag_max                 # from here on an iteration only loads (a longer next page)
    while a < its:
        if a >= w:
            if wi - tail >= 2 and a <= tail:        # the load's rest as a loop
                ins = [f.ins(*slots(ev, x, False)) for x in range(a, tail + 1) for ev in events(x)]
                f.attach(("agu_base", gI, tail), ins[:-1])
                f.open_loop(ins[-1], f"{name}t", wi - tail, 0)
                for ev in events(tail + 1):
                    f.ins(*slots(ev, tail + 1, True))
                f.close_loop()
                a = wi + 1
            else:
                for x in range(a, its):
                    for ev in events(x):
                        f.ins(*slots(ev, x, False))
                a = its
            continue
        i = a // np_
        row_end = min((i + 1) * np_, its)
        # straight-line iterations: the first of each row (it sets the row's generators and
        # arms its loop), the page's first lag_max ones (no earlier word to store yet)
        peel = [a]
        while peel[-1] + 1 < row_end and (peel[-1] + 1 < lag_max or nr * len(peel) < 4):  # room: 3 bases, loop
            peel.append(peel[-1] + 1)
        # the rest of the row is uniform: every event but the loads is there from
        # iteration lag_max on, and the loads end at a row's first iteration (the next
        # page is whole rows)
        body_from = peel[-1] + 1
        body_to = row_end
        ins = [f.ins(*slots(ev, x, False)) for x in peel for ev in events(x)]
        if body_to > body_from:
            for c in (("agu_base", gA, body_from), ("agu_base", gV, body_from - i * np_),
                      ("agu_base", gI, body_from - 1)):
                f.attach(c, ins[:-1])
            f.open_loop(ins[-1], f"{name}j", body_to - body_from, 0)
            for ev in events(body_from):
                f.ins(*slots(ev, body_from, True))
            f.close_loop()
        a = body_to
    _finish(b, f)
    cost = rank1_swap_cost(cfg, m, n, li)
    assert f.count() == cost["instructions"], (f.count(), cost)
    return KernelInfo("rank1_swap", f.count(), m * n, {"load_rows": li, "iterations": its})
