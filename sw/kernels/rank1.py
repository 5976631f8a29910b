"""The rank-1 update ``W += alpha u v^T`` (:func:`emit_rank1`), its cost model
(:func:`rank1_cost`) and its straight-line form for merging (:func:`rank1_lines`)."""

from __future__ import annotations

from sw.asm import cdrv, mac, mov, mul, rdrv
from sw.collectives import Frag, Region
from sw.kernels.common import KernelInfo, Scalar, _finish, _lat, _need
from sw.layout import local_len


def rank1_cost(cfg, m: int, n: int, *, alpha: bool = True, v_layout: str = "cols") -> dict:
    """Exact instruction count of :func:`emit_rank1`:
    ``setup + mp * (1 + pad + np)`` with ``setup = 9`` (``8`` when ``v`` is broadcast
    from the diagonal in the first row; at least ``fpu_latency - 1 - pad`` with
    ``alpha``) and ``pad = max(0, fpu_latency - 1 - np)`` when
    ``alpha`` is given (the scaled ``u`` element must leave the FMA pipeline before the
    row ends), else 0."""
    nr = cfg.nr
    mp, np_ = local_len(m, nr), local_len(n, nr)
    F, _ = _lat(cfg)
    pad = max(0, F - np_) if alpha else 0
    # 8 instructions hold the AGU settings (+1: the row loop's instruction when row 0 is
    # not peeled); with alpha, alpha * u[0] (instruction 1) must be ready for row 0's first MAC
    setup = max(8 if v_layout == "diag" else 9, F - pad if alpha else 0)
    return {"instructions": setup + mp * (1 + pad + np_), "setup": setup, "pad": pad, "mp": mp, "np": np_}


def emit_rank1(b, cfg, m: int, n: int, W: Region, u: Region, v: Region, *, alpha: Scalar | None = None,
               u_layout: str = "rows", v_layout: str = "cols", v_copy: Region | None = None,
               agus=("g0", "g1", "g2"), name: str = "r1") -> KernelInfo:
    """``W += alpha * u v^T`` in place (``W`` ``m x n``; SGD's weight update with
    ``alpha = -learning rate``, ``u`` = the layer's output gradient, ``v`` its input).

    ``u`` (length ``m``) in the ``rows`` layout, or ``diag`` (each element is then taken
    over the row bus from the diagonal PE when it is needed). ``v`` (length ``n``) in the
    ``cols`` layout, or ``diag``: then broadcast over the column buses inside the first
    row's MACs and kept in the ``cols`` layout in ``v_copy``. ``v`` / ``v_copy`` must not be
    in ``W``'s bank. ``alpha``: a :class:`Scalar` or None (1).

    Mapping: row by row of the local block, one instruction per element,
    ``W[i, j] = (alpha * u[i]) * v[j] + W[i, j]`` (``mac mema += au * memb``: one SRAM
    read of ``W``, one of ``v``, the FMA writes the result back to ``W``'s address). The
    scaled ``au = alpha * u[i + 1]`` for the next row is computed by one extra
    instruction per row into a staging register and moved into the MAC operand register
    by the row's last MAC (the move unit is free). Cost: :func:`rank1_cost`.
    """
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(m >= 1 and n >= 1, f"bad shape {m} x {n}")
    _need(u_layout in ("rows", "diag"), f"u must be in the 'rows' or 'diag' layout, got {u_layout!r}")
    _need(v_layout in ("cols", "diag"), f"v must be in the 'cols' or 'diag' layout, got {v_layout!r}")
    mp, np_ = local_len(m, nr), local_len(n, nr)
    _need(v.bank != W.bank, "v must not be in W's bank (both are read by every MAC instruction)")
    W.check(cfg, mp * np_, "W")
    u.check(cfg, mp, "u")
    v.check(cfg, np_, "v")
    diag_v = v_layout == "diag"
    if diag_v:
        _need(v_copy is not None and v_copy.bank != W.bank, "v in the diag layout needs a v_copy region "
              "outside W's bank")
        v_copy.check(cfg, np_, "v_copy")
        v_copy = v_copy.bind(cfg)
    W, u, v = W.bind(cfg), u.bind(cfg), v.bind(cfg)
    vs = v_copy if diag_v else v                 # where rows >= 1 (all rows) read v
    gW, gV, gU = agus
    F, _ = _lat(cfg)
    pad = max(0, F - np_) if alpha is not None else 0
    au, st, ra = "r0", "r1", "r2"
    LR, LJ = 0, 1
    f = Frag()

    def u_val(dst, off, agu):
        """Slots putting (alpha *) u[off] into register ``dst``."""
        if u_layout == "diag":
            sl, val = [u.rd(off, agu=agu, gate="rdrv"), rdrv(u.src, diag=0)], "row"
        else:
            sl, val = [u.rd(off, agu=agu)], u.src
        return sl + [mul(dst, val, ra) if alpha is not None else mov(dst, val)]

    def mac_slots(li, lj, bcast):
        """MAC of local (li, lj) (+ AGUs: row index on gW's LR level, lj on the LJ level)."""
        wsl = W.rd(li * np_ + lj, agu=gW)
        if bcast:   # first row with v in the diag layout: v[lj] over the column bus
            return [wsl, v.rd(lj, agu=gV, gate="cdrv"), cdrv(v.src, diag=0), mac(W.src, au, "col"),
                    v_copy.wr("col", lj, agu=gV)]
        return [wsl, vs.rd(lj, agu=gV), mac(W.src, au, vs.src)]

    def row(li, bcast):
        """One row: X (the next u element into st), pad, the np MACs; the last MAC moves
        st into au for the next row. Returns the row's last instruction."""
        f.ins(*u_val(st, li + 1, gU))
        f.nops(pad)
        if np_ == 1:
            return f.ins(*mac_slots(li, 0, bcast), mov(au, st))
        first = f.ins(*mac_slots(li, 0, bcast))
        if np_ > 2:
            f.open_loop(first, f"{name}j", np_ - 2, LJ)
            f.ins(*mac_slots(li, 1, bcast))
            f.close_loop()
        return f.ins(*mac_slots(li, np_ - 1, bcast), mov(au, st))

    # setup: alpha, au = (alpha *) u[0] (immediate addresses), NOPs holding the AGU controls
    setup = []
    if alpha is not None:
        sreg = alpha.region.bind(cfg)
        setup.append(f.ins(sreg.rd(0), mov(ra, sreg.src)))
    setup.append(f.ins(*u_val(au, 0, None)))
    n_setup = rank1_cost(cfg, m, n, alpha=alpha is not None, v_layout=v_layout)["setup"]
    while len(setup) < n_setup:
        setup.append(f.ins())
    for c in (("agu_base", gW, 0), ("agu_stride", gW, LR, np_), ("agu_stride", gW, LJ, 1),
              ("agu_base", gV, 0), ("agu_stride", gV, LR, 0), ("agu_stride", gV, LJ, 1),
              ("agu_base", gU, 0), ("agu_stride", gU, LR, 1)):
        f.attach(c, setup)
    if diag_v:
        last = row(0, True)
        if mp > 1:
            f.open_loop(last, f"{name}i", mp - 1, LR)
            row(1, False)
            f.close_loop()
    else:
        f.open_loop(setup[-1], f"{name}i", mp, LR)
        row(0, False)
        f.close_loop()
    _finish(b, f)
    cost = rank1_cost(cfg, m, n, alpha=alpha is not None, v_layout=v_layout)
    assert f.count() == cost["instructions"], (f.count(), cost)
    return KernelInfo("rank1", f.count(), m * n, {"pad": pad, "setup": cost["setup"]})


def rank1_lines(cfg, m: int, n: int, W: Region, u: Region, v: Region, alpha: Scalar, *,
                u_layout: str = "rows", regs=None) -> list:
    """:func:`emit_rank1`'s update (``v`` in the ``cols`` layout, ``alpha`` given) as
    straight-line instruction texts, one list per local row of ``W`` (the first list
    also holds the setup), for :func:`sw.overlap.merge_rows`: the same FMAs in the same
    order (``au = alpha * u[i]`` rounded once, ``W[i, j] = au * v[j] + W[i, j]``), with
    immediate addresses (``ar0``, no AGUs, no loops) and the registers ``regs``
    (``(alpha, au, staging)``, default the top three). Row ``i`` computes ``alpha u[i + 1]``
    into the staging register first and moves it into ``au`` with its last MAC (the
    last row does not); ``max(0, F - np)`` NOPs after it as in :func:`emit_rank1`
    (``F = fpu_latency - 1``). Rows may be run with NOPs or other instructions between
    their instructions (distances only grow)."""
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(u_layout in ("rows", "diag"), f"u must be in the 'rows' or 'diag' layout, got {u_layout!r}")
    _need(v.bank != W.bank, "v must not be in W's bank (both are read by every MAC instruction)")
    mp, np_ = local_len(m, nr), local_len(n, nr)
    W.check(cfg, mp * np_, "W")
    u.check(cfg, mp, "u")
    v.check(cfg, np_, "v")
    W, u, v = W.bind(cfg), u.bind(cfg), v.bind(cfg)
    ra, au, st = regs or tuple(f"r{cfg.n_regs - 3 + i}" for i in range(3))
    F, _ = _lat(cfg)
    pad = max(0, F - np_)
    sreg = alpha.region.bind(cfg)

    def line(*slots):
        return " | ".join(str(x) for x in slots)

    def u_val(dst, i):
        if u_layout == "diag":
            return line(u.rd(i, gate="rdrv"), rdrv(u.src, diag=0), mul(dst, "row", ra))
        return line(u.rd(i), mul(dst, u.src, ra))

    rows = []
    for i in range(mp):
        r = [line(sreg.rd(0), mov(ra, sreg.src)), u_val(au, 0)] + ["nop"] * (F - 1) if i == 0 else []
        nxt = i + 1 < mp
        if nxt:
            r.append(u_val(st, i + 1))
            r += ["nop"] * pad
        for j in range(np_):
            sl = [W.rd(i * np_ + j), v.rd(j), mac(W.src, au, v.src)]
            if nxt and j == np_ - 1:
                sl.append(mov(au, st))
            r.append(line(*sl))
        rows.append(r)
    return rows
