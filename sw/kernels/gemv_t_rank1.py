"""The fused backward step of a layer: transposed GEMV and rank-1 update in one pass
over ``W`` (:func:`emit_gemv_t_rank1`) and its cost model (:func:`gemv_t_rank1_cost`)."""

from __future__ import annotations

from functools import lru_cache

from sw.asm import fma, mac, mov, mul, rdrv
from sw.collectives import BusDir, Frag, Region, reduce_plan, reg, step_slots
from sw.kernels.common import KernelError, KernelInfo, Scalar, _finish, _lat, _need
from sw.layout import local_len


def _bu_temps_ok(cfg, T: int, L: int, Lc2: int) -> bool:
    """Rotating temporaries (column ``k`` uses ``k mod T``) are safe when every temp is
    rewritten only after the late ``c`` read of its previous value: consecutive writers
    ``>= 1 + mul_latency`` instructions apart, cyclically over a row of ``Lc2``
    instructions (``A_k`` at position ``2k``)."""
    return _temps_ok(1 + cfg.mul_latency, T, L, Lc2)


@lru_cache(maxsize=None)
def _temps_ok(need: int, T: int, L: int, Lc2: int) -> bool:
    """:func:`_bu_temps_ok` for writers ``need`` instructions apart (memoized: the
    compilers' cost models ask for the same shapes many times)."""
    for t in range(T):
        pos = [2 * k for k in range(L) if k % T == t]
        if pos and min([b - a for a, b in zip(pos, pos[1:])] + [pos[0] + Lc2 - pos[-1]]) < need:
            return False
    return True


def _bu_block(cfg, L: int, nchain: int, S: int):
    """Shape of the blocking with ``L`` columns per block (``None`` if it does not fit
    the register file): full blocks, the partial last block and their timing."""
    F, A = _lat(cfg)
    full, rem = divmod(nchain, L)
    Lc2, P, gap0 = max(2 * L, A), max(L, F), max(0, F - max(2 * L, A) + L - 1)
    Lc2r, Pr, gapr = max(2 * rem, A), max(rem, F), max(0, F - max(2 * rem, A) + rem - 1)
    T = next((t for t in range(1, L + 1) if _bu_temps_ok(cfg, t, L, Lc2)
              and (rem == 0 or _bu_temps_ok(cfg, t, rem, Lc2r))), None)
    if T is None or 2 * L + 3 + T > cfg.n_regs:
        return None
    return {"L": L, "full": full, "rem": rem, "B": full + (rem > 0), "Lc2": Lc2, "P": P, "gap0": gap0,
            "Lc2_last": Lc2r, "P_last": Pr, "gap_last": gapr, "T": T, "S": S}


def gemv_t_rank1_cost(cfg, m: int, n: int, *, reduce: str = "tree", block: int | None = None) -> dict:
    """Exact instruction count of :func:`emit_gemv_t_rank1`.

    ``nchain = ceil(n/nr)`` local columns: ``full`` blocks of ``L`` and, when ``L`` does
    not divide ``nchain``, a last block of ``rem`` columns (its own code: dummy columns
    would update ``W``); ``nstream = ceil(m/nr)`` local rows. A block of ``l`` columns
    takes ``Lc2(l) = max(2l, acc_reuse_distance)`` instructions per row (``l`` MAC /
    update pairs), then its reduce section: the ``L`` scalings ``alpha * a`` of the next
    block (the first block when ``B > 1``, every block of the block loop), NOPs up to ``gap(l) = max(0, F - Lc2(l) + l - 1)``
    (the last MACs' results), ``S`` reduction steps of ``P(l) = max(l, F)``. Then the
    moves of the last block's sums (and of the previous block's sums that the partial
    block's first row had no room for): ``L`` instructions. With ``setup = max(2 + L, F +
    1)`` (alpha, ``d[0]``, the first block's scalings, waiting for them):

    ``setup + sum over blocks (Lc2 nstream + red) + L``

    ``L`` (``2L + 3 + T <= n_regs``, ``T`` rotating temporaries) minimizes the count
    unless ``block`` is given.
    """
    nr = cfg.nr
    mp, np_ = local_len(m, nr), local_len(n, nr)
    nchain, nstream = np_, mp
    S = len(reduce_plan(cfg, reduce)[0])
    F, A = _lat(cfg)
    best = None
    for L in ([block] if block else range(1, nchain + 1)):
        _need(1 <= L <= nchain, f"block {L} must be in 1..{nchain}")
        sh = _bu_block(cfg, L, nchain, S)
        if sh is None:
            if block:
                raise KernelError(f"block {L} needs more than {cfg.n_regs} registers")
            continue
        full, rem = sh["full"], sh["rem"]
        setup = max(2 + L, F + 1)

        def red(scale, gap, P):
            return (L if scale else 0) + max(0, gap - (L if scale else 0)) + S * P

        ins = setup + full * sh["Lc2"] * nstream
        # the block loop's reduce sections always scale (the last iteration's values are unused)
        ins += red(sh["B"] > 1, sh["gap0"], sh["P"]) + (full - 1) * red(True, sh["gap0"], sh["P"])
        if rem:
            ins += sh["Lc2_last"] * nstream + red(False, sh["gap_last"], sh["P_last"])
        ins += L
        c = dict(sh, instructions=ins, setup=setup, nchain=nchain, nstream=nstream)
        if best is None or (ins, sh["B"]) < (best["instructions"], best["B"]):
            best = c
    if best is None:
        raise KernelError(f"no blocking of the fused backward step fits {cfg.n_regs} registers")
    return best


def emit_gemv_t_rank1(b, cfg, m: int, n: int, W: Region, d: Region, a: Region, y: Region, *, alpha: Scalar,
                      d_layout: str = "diag", reduce: str = "tree", block: int | None = None,
                      agus=("g0", "g1", "g2", "g3"), name: str = "bu") -> KernelInfo:
    """The backward step of a layer in one pass over ``W`` (``m x n``):
    ``y = W^T d`` with the old ``W`` (as :func:`emit_gemv` ``trans=True``: same chains,
    same reduction) and the SGD update ``W[i, j] += d[i] * (alpha * a[j])``.

    ``d`` (length ``m``, the layer's output gradient) in the ``diag`` layout (each element
    travels over its row bus from the diagonal PE when needed) or ``rows``; ``a`` (length
    ``n``, the layer's input) in the ``cols`` layout, any bank; ``y`` (length ``n``) is
    written in the ``cols`` layout; ``alpha`` (``-learning rate``) a :class:`Scalar`. ``d``
    and ``y`` must not be in ``W``'s bank. The kernel reads up to ``L`` words past the end
    of ``a`` and one past ``d`` (addresses wrap; the values are not used).

    Mapping: blocks of ``L`` local columns; per local row ``i`` and column ``k`` of the
    block two instructions: ``A_k``: ``rda W[i, j_k] | mac acc_k += mema * d_i | mov t =
    mema`` (the GEMV^T chain, and the old ``W`` into a rotating temporary), ``B_k``: ``rda
    W[i, j_k] noread | fma mema = d_i * aa_k + t`` (the update, written back in place).
    ``aa_k = alpha * a[j_k]`` sit in registers for the whole block (computed by ``L``
    multiplies in the previous block's reduce section); ``d_i`` is loaded by the row's
    last instruction. ``W`` is read once and written once per element for two MACs (the
    separate kernels read it twice, write it once and read ``a`` once per element).
    Golden: :func:`sw.golden.gemv_t` and :func:`sw.golden.rank1_scaled_v`. Cost:
    :func:`gemv_t_rank1_cost`.
    """
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(m >= 1 and n >= 1, f"bad shape {m} x {n}")
    _need(d_layout in ("diag", "rows"), f"d must be in the 'diag' or 'rows' layout, got {d_layout!r}")
    _need(d.bank != W.bank, "d must not be in W's bank (it is read while W's port holds an address)")
    _need(y.bank != W.bank, "y must not be in W's bank (W's write port carries the updates)")
    mp, np_ = local_len(m, nr), local_len(n, nr)
    W.check(cfg, mp * np_, "W")
    d.check(cfg, mp, "d")
    a.check(cfg, np_, "a")
    y.check(cfg, np_, "y")
    W, d, a, y = W.bind(cfg), d.bind(cfg), a.bind(cfg), y.bind(cfg)
    cost = gemv_t_rank1_cost(cfg, m, n, reduce=reduce, block=block)
    B, L, T, full, rem = (cost[k] for k in ("B", "L", "T", "full", "rem"))
    nstream = mp
    steps, root = reduce_plan(cfg, reduce)
    rdir = BusDir("col")
    gW, gX, gY, gA = agus
    LS, LB = 1, 0
    acc = lambda k: reg(k)                     # noqa: E731
    aa = lambda k: reg(L + k)                  # noqa: E731
    x0, xr, ra = reg(2 * L), reg(2 * L + 1), reg(2 * L + 2)
    tmp = lambda k: reg(2 * L + 3 + k % T)     # noqa: E731
    sreg = alpha.region.bind(cfg)
    f = Frag()

    def d_load(dst, s, agu):
        if d_layout == "diag":
            return [d.rd(s, agu=agu, gate="rdrv"), rdrv(d.src, diag=0), mov(dst, "row")]
        return [d.rd(s, agu=agu), mov(dst, d.src)]

    def step(s, bofs, lc, Lc2, agu_w, start, moves, agu_x=None, mofs=None):
        """Row s of a block of lc columns at local column offset bofs: lc (A_k, B_k) pairs,
        NOPs up to Lc2; ``moves``: the previous block's sums moved out by the A_k (k < moves)
        to ``y[mofs + k]`` (``mofs`` None: ``y[gY + k]``)."""
        ins = []
        dv = x0 if start else xr
        for k in range(lc):
            addr = k + s * np_ + bofs
            sl = [W.rd(addr, agu=agu_w), mul(acc(k), W.src, dv) if start else mac(acc(k), W.src, dv),
                  mov(tmp(k), W.src)]
            if k < moves:
                sl += [root.drive(rdir, acc(k)),
                       y.wr(rdir.bus, k, agu=gY) if mofs is None else y.wr(rdir.bus, mofs + k)]
            ins.append(f.ins(*sl))
            sl = [W.rd(addr, agu=agu_w, read=False), fma(W.src, dv, aa(k), tmp(k))]
            if k == lc - 1:
                sl += d_load(xr, s + 1, agu_x)
            ins.append(f.ins(*sl))
        ins += f.nops(Lc2 - 2 * lc)
        return ins

    def stream(bofs, lc, Lc2, first_block, moves, mofs=None):
        agu0 = None if first_block else gW
        first = step(0, bofs, lc, Lc2, agu0, True, moves, mofs=mofs)
        if nstream > 1:
            f.open_loop(first[-1], f"{name}s", nstream - 1, LS)
            step(1, bofs, lc, Lc2, gW, False, 0, agu_x=gX)
            f.close_loop()
        return first

    def reduce_section(lc, gap, P, next_ofs=None, agu=None):
        ins = []
        if next_ofs is not None:
            for k in range(L):
                ins.append(f.ins(a.rd(next_ofs + k, agu=agu), mul(aa(k), a.src, ra)))
        ins += f.nops(max(0, gap - len(ins)))
        for st in steps:
            for k in range(P):
                ins.append(f.ins(*step_slots(rdir, st, k)) if k < lc else f.ins())
        return ins

    # setup: alpha, d[0], alpha * a[0 .. L-1]; NOPs until aa_0 is ready for the first B_0
    setup = [f.ins(sreg.rd(0), mov(ra, sreg.src)), f.ins(*d_load(x0, 0, None))]
    for k in range(L):
        setup.append(f.ins(a.rd(k), mul(aa(k), a.src, ra)))
    setup += f.nops(cost["setup"] - len(setup))
    first = stream(0, L, cost["Lc2"], True, 0)
    red = reduce_section(L, cost["gap0"], cost["P"], L if B > 1 else None)
    for c in (("agu_base", gW, 0), ("agu_stride", gW, LS, np_), ("agu_base", gX, 0), ("agu_stride", gX, LS, 1)):
        f.attach(c, setup + first[:-1])
    if full > 1:
        for c in (("agu_stride", gW, LB, L), ("agu_stride", gX, LB, 0), ("agu_base", gY, 0),
                  ("agu_stride", gY, LB, L), ("agu_base", gA, 0), ("agu_stride", gA, LB, L)):
            f.attach(c, setup + first[:-1] + red[:-1])
        f.open_loop(red[-1], f"{name}b", full - 1, LB)
        stream(L, L, cost["Lc2"], False, L)
        reduce_section(L, cost["gap0"], cost["P"], 2 * L, gA)
        f.close_loop()
    if rem:
        # the partial last block (own code: dummy columns would update W); its first row
        # moves out the previous block's first rem sums, the epilogue the others
        # (immediate addresses in the first row; the LB index is 0 outside the block loop)
        stream(full * L, rem, cost["Lc2_last"], True, rem, mofs=(full - 1) * L)
        reduce_section(rem, cost["gap_last"], cost["P_last"])
        for k in range(rem, L):
            f.ins(root.drive(rdir, acc(k)), y.wr(rdir.bus, (full - 1) * L + k))
        for k in range(rem):
            f.ins(root.drive(rdir, acc(k)), y.wr(rdir.bus, full * L + k))
    else:
        for k in range(L):
            f.ins(root.drive(rdir, acc(k)), y.wr(rdir.bus, (full - 1) * L + k))
    _finish(b, f)
    assert f.count() == cost["instructions"], (f.count(), cost)
    return KernelInfo("gemv_t_rank1", f.count(), 2 * m * n,
                      {k: cost[k] for k in ("B", "L", "rem", "Lc2", "P", "S", "gap0", "T")} | {"reduce": reduce})
