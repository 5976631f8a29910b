"""GEMM ``Y = W X`` of a minibatch, plain or accumulating ``Y += alpha W X``
(:func:`emit_gemm`), and its cost model (:func:`gemm_cost`)."""

from __future__ import annotations

from sw.asm import add, cdrv, mac, mov, mul, pred, rdrv, sin, spad
from sw.collectives import Frag, Region, reg
from sw.kernels.common import KernelError, KernelInfo, Scalar, _finish, _lat, _need
from sw.layout import local_len


def _divisors(k):
    return [d for d in range(1, k + 1) if k % d == 0]


def gemm_page_load_why_not(cfg, bsz: int, *, accumulate: bool = False) -> str | None:
    """Why :func:`emit_gemm` cannot load the next page of ``W`` in place as it runs
    (``page_load``) with a minibatch of ``bsz``, or None. It needs blocks of one local
    row of ``W`` and every local column of ``X`` (``Li = 1``, ``Lc = ceil(bsz / nr)``: each ``W`` word is read once,
    in address order, into a register), at least 3 columns (an instruction per word that
    neither reads the row bus nor comes before that read), the plain form (the
    accumulating one writes ``Y`` in the cycles a beat would take) and the register
    file for the block."""
    nr = cfg.nr
    bp = local_len(bsz, nr)
    if accumulate:
        return "the accumulating form writes Y back where the beats would go"
    if bp < 3:
        return f"{bp} local column(s) of X per PE: a word's group has no free row-bus slot after its read (3 needed)"
    if bp + 1 > cfg.n_regs:
        return f"a block of 1 x {bp} accumulators needs more than {cfg.n_regs} registers"
    return None


def gemm_cost(cfg, m: int, n: int, bsz: int, Li: int | None = None, Lc: int | None = None, *,
              alpha: bool = False, page_load: bool = False) -> dict:
    """Exact instruction count of :func:`emit_gemm` for block ``Li x Lc`` (default: the
    block it chooses). With ``G = max(L, acc_reuse_distance)`` instructions per ``j``
    (``L = Li * Lc`` accumulators), ``E = L + max(0, fpu_latency - 1 - G)`` store
    instructions per block, ``Bi = mp / Li``, ``Bc = bp / Lc`` blocks:

    ``instructions = setup + Bi * Bc * (nr * np * G + E) + (Bi if Bi > 1 and Bc > 1)``

    where ``setup`` is one instruction per AGU control (3 bases plus the strides of the
    loop levels in use) plus the outer block loop's instruction. ``alpha``: the kernel
    keeps a scale factor in a register (accumulating form), one register fewer for the
    block. ``page_load``: the block ``1 x ceil(bsz/nr)`` and one instruction more (the
    scratchpad pointer), :func:`emit_gemm`'s ``page_load``.
    """
    nr = cfg.nr
    mp, np_, bp = local_len(m, nr), local_len(n, nr), local_len(bsz, nr)
    F, A = _lat(cfg)
    if page_load:
        c = gemm_cost(cfg, m, n, bsz, 1, bp, alpha=alpha)
        return {**c, "instructions": c["instructions"] + 1, "setup": c["setup"] + 1}
    if Li is None or Lc is None:
        best = None
        for li in _divisors(mp):
            for lc in _divisors(bp):
                L = li * lc
                if L + (li if lc > 1 else 0) + (1 if alpha else 0) > cfg.n_regs:
                    continue
                c = gemm_cost(cfg, m, n, bsz, li, lc)
                key = (c["instructions"], -L)
                if best is None or key < best[0]:
                    best = (key, c)
        if best is None:
            raise KernelError(f"no GEMM blocking fits {cfg.n_regs} registers")
        return best[1]
    L = Li * Lc
    G = max(L, A)
    E = L + max(0, F - G)
    Bi, Bc = mp // Li, bp // Lc
    n_ctl = 3 + 3 + (3 if Bi > 1 else 0) + (3 if Bc > 1 else 0)   # bases, jj strides, bi strides, bc strides
    outer = 1 if (Bi > 1 or Bc > 1) else 0
    inner = Bi if (Bi > 1 and Bc > 1) else 0
    ins = n_ctl + outer + inner + Bi * Bc * (nr * np_ * G + E)
    return {"instructions": ins, "Li": Li, "Lc": Lc, "L": L, "G": G, "E": E, "Bi": Bi, "Bc": Bc,
            "setup": n_ctl + outer, "mac_cycles": Bi * Bc * nr * np_ * G}


def emit_gemm(b, cfg, m: int, n: int, bsz: int, W: Region, X: Region, Y: Region, *,
              accumulate: bool = False, alpha: Scalar | None = None,
              block: tuple | None = None, agus=("g0", "g1", "g2"), name: str = "mm",
              page_load: int | None = None) -> KernelInfo:
    """``Y = W X`` (``W`` ``m x n``, ``X`` ``n x bsz``: a minibatch of ``bsz`` column
    vectors; ``Y`` ``m x bsz``), all 2D round-robin. ``W`` and ``X`` in different banks;
    ``Y`` anywhere (not overlapping them).

    ``accumulate=True``: ``Y += alpha * (W X)`` (``alpha`` a :class:`Scalar`, or None for
    1): each output's product chain is computed as above, then one FMA per output reads
    ``Y`` from SRAM and writes ``alpha * chain + Y`` back in place (``fpu.wb``), in the
    cycles that otherwise store the block: same instruction count. The minibatch weight
    update ``W += (-lr/b) dY X^T`` is this form with ``dY`` as the first operand and
    ``X^T`` (:func:`sw.collectives.emit_transpose`) as the second; the backward pass
    ``dX^T = dY^T W`` is the plain form with ``dY^T`` first and ``W`` second.

    Mapping (a sequence of rank-1 updates, as SUMMA on the LAC): for ``j = 0 .. n-1`` PE
    column ``j mod nr`` drives ``W[:, j]`` along the row buses and PE row ``j mod nr``
    drives ``X[j, :]`` along the column buses; every PE adds ``W[i, j] * X[j, c]`` into
    its local outputs. The outputs of a PE are computed in blocks of ``Li x Lc`` local
    (row, column) pairs held in ``L = Li * Lc`` accumulators; each ``W`` element of the
    block is latched into a register (``Li`` of them) from the row bus and reused ``Lc``
    times, each ``X`` element is read straight from the column bus (its driver
    re-reads it for every use). One MAC per instruction; a block ends with ``E`` store
    instructions. ``block=(Li, Lc)`` forces a blocking (``Li`` divides ``ceil(m/nr)``,
    ``Lc`` divides ``ceil(bsz/nr)``); the default minimizes :func:`gemm_cost`.

    ``page_load`` (a scratchpad beat address; :func:`gemm_page_load_why_not` says when
    it applies): ``W``'s region is overwritten in place with the next page, ``nr * mp *
    np`` beats from that address in :func:`sw.transfer.emit_page_move`'s word order
    (beat ``nr a + k``: PE column ``k``'s word ``a``, lane ``i`` over row bus ``i``). The
    blocks are one local row (``Li = 1``, ``Lc = ceil(bsz/nr)``), so the words are read
    in address order, each once, into a register; the group of ``j`` with ``k = j mod
    nr`` writes beat ``nr a + k`` of the word it uses (``sin row | @col=k writes``, in its
    second instruction: the first one of a block reads the row bus, the last one the
    next word). The same MACs; one instruction more (the scratchpad pointer).
    """
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(min(m, n, bsz) >= 1, f"bad shape {m} x {n} x {bsz}")
    _need(W.bank != X.bank, "W and X must be in different banks (both are read in every MAC instruction)")
    mp, np_, bp = local_len(m, nr), local_len(n, nr), local_len(bsz, nr)
    _need(alpha is None or accumulate, "alpha scales the product only with accumulate=True")
    W.check(cfg, mp * np_, "W")
    X.check(cfg, np_ * bp, "X")
    Y.check(cfg, mp * bp, "Y")
    for R, nw, what in ((W, mp * np_, "W"), (X, np_ * bp, "X")):
        _need(not (R.bank == Y.bank and R.base < Y.base + mp * bp and Y.base < R.base + nw),
              f"Y overlaps {what}")
    if page_load is not None:
        why = gemm_page_load_why_not(cfg, bsz, accumulate=accumulate)
        _need(why is None, f"page_load: {why}")
        _need(block is None or tuple(block) == (1, bp), f"page_load needs the block 1 x {bp}, got {block}")
        block = (1, bp)
    W, X, Y = W.bind(cfg), X.bind(cfg), Y.bind(cfg)
    use_alpha = alpha is not None
    cost = gemm_cost(cfg, m, n, bsz, *(block or (None, None)), alpha=use_alpha, page_load=page_load is not None)
    Li, Lc, L, G, E, Bi, Bc = (cost[k] for k in ("Li", "Lc", "L", "G", "E", "Bi", "Bc"))
    _need(mp % Li == 0 and bp % Lc == 0, f"block {Li} x {Lc} does not divide the local {mp} x {bp} outputs")
    _need(L + (Li if Lc > 1 else 0) + use_alpha <= cfg.n_regs,
          f"block {Li} x {Lc} needs more than {cfg.n_regs} registers")
    F, A = _lat(cfg)
    gW, gX, gY = agus
    LI, LC, LJ = 0, 1, 2
    acc = lambda i, c: reg(i * Lc + c)          # noqa: E731
    wreg = lambda i: reg(L + i)                 # noqa: E731
    ra = reg(L + (Li if Lc > 1 else 0))         # alpha (accumulating form)
    f = Frag()

    def group(jj, k, first, looped):
        """The MACs of j = jj*nr + k (jj relative to the jj loop index when ``looped``)."""
        nxt_k, nxt_jj = (k + 1, jj) if k + 1 < nr else (0, jj + 1)
        ins = []
        for p in range(G):
            sl = []
            if p < L:
                i, c = divmod(p, Lc)
                sl += [X.rd(jj * bp + c, agu=gX, gate="cdrv"), cdrv(X.src, row=k)]
                if Lc == 1 or (first and c == 0):
                    # W[i, j] straight from the row bus (and latched for the other columns)
                    sl += [W.rd(i * np_ + jj, agu=gW, gate="rdrv"), rdrv(W.src, col=k)]
                    a = "row"
                    if Lc > 1:
                        sl.append(mov(wreg(i), "row"))
                else:
                    a = wreg(i)
                sl.append(mul(acc(i, c), a, "col") if first else mac(acc(i, c), a, "col"))
                if Lc > 1 and c == Lc - 1:
                    # latch W[i, j+1] for the next group (this MAC still reads the old value)
                    sl += [W.rd(i * np_ + nxt_jj, agu=gW, gate="rdrv"), rdrv(W.src, col=nxt_k),
                           mov(wreg(i), "row")]
                if page_load is not None and c == 1:
                    # the next page's word over the one latched: PE column k's beat
                    sl += [sin("row"), pred("col", k, writes=True), W.wr("row", i * np_ + jj, agu=gW)]
            ins.append(f.ins(*sl))
        return ins

    def block_body():
        last = None
        for k in range(nr):
            last = group(0, k, k == 0, False)[-1]
        if np_ > 1:
            f.open_loop(last, f"{name}j", np_ - 1, LJ)
            for k in range(nr):
                group(1, k, False, True)
            f.close_loop()
        f.nops(E - L)
        for p in range(L):
            i, c = divmod(p, Lc)
            if not accumulate:
                f.ins(Y.wr(acc(i, c), i * bp + c, agu=gY))
            elif use_alpha:      # Y = alpha * acc + Y, written back in place
                f.ins(Y.rd(i * bp + c, agu=gY), mac(Y.src, ra, acc(i, c)))
            else:                # Y = acc * 1 + Y
                f.ins(Y.rd(i * bp + c, agu=gY), add(Y.src, acc(i, c), Y.src))

    ctls = [("agu_base", gW, 0), ("agu_base", gX, 0), ("agu_base", gY, 0),
            ("agu_stride", gW, LJ, 1), ("agu_stride", gX, LJ, bp), ("agu_stride", gY, LJ, 0)]
    if Bi > 1:
        ctls += [("agu_stride", gW, LI, Li * np_), ("agu_stride", gX, LI, 0), ("agu_stride", gY, LI, Li * bp)]
    if Bc > 1:
        ctls += [("agu_stride", gW, LC, 0), ("agu_stride", gX, LC, Lc), ("agu_stride", gY, LC, Lc)]
    if page_load is not None:
        f.ins(spad("rd", page_load))
    for c in ctls:
        f.ins().ctl = c
    if use_alpha:
        sreg = alpha.region.bind(cfg)
        f.add(f.items[0], sreg.rd(0), mov(ra, sreg.src))     # rides on the first AGU setting
    if Bi > 1 or Bc > 1:
        lvl, cnt, nm = (LI, Bi, "i") if Bi > 1 else (LC, Bc, "c")
        f.open_loop(f.ins(), f"{name}{nm}", cnt, lvl)
        if Bi > 1 and Bc > 1:
            f.open_loop(f.ins(), f"{name}c", Bc, LC)
            block_body()
            f.close_loop()
        else:
            block_body()
        f.close_loop()
    else:
        block_body()
    _finish(b, f)
    assert f.count() == cost["instructions"], (f.count(), cost)
    return KernelInfo("gemm_acc" if accumulate else "gemm", f.count(), m * n * bsz,
                      {k: cost[k] for k in ("Li", "Lc", "L", "G", "E", "Bi", "Bc", "setup")})
