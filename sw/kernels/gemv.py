"""GEMV ``y = W x`` and transposed GEMV ``y = W^T x`` (:func:`emit_gemv`) and their
cost model (:func:`gemv_cost`)."""

from __future__ import annotations

from sw.asm import mac, mov, mul, pred, relu, sin, spad
from sw.collectives import BusDir, Frag, Region, reduce_plan, reg, step_slots
from sw.kernels.common import KernelInfo, _finish, _lat, _need
from sw.layout import local_len


def _gemv_blocking(cfg, nchain, nstream, S):
    """(B, L): blocks of L accumulators (L <= n_regs - 2) minimizing the cost (dummy
    chains in the last block count as work); ties go to fewer blocks."""
    lmax = cfg.n_regs - 2
    _need(lmax >= 1, "GEMV needs n_regs >= 3")
    F, A = _lat(cfg)
    best = None
    for L in range(1, min(lmax, nchain) + 1):
        B = -(-nchain // L)
        cyc = B * (max(L, A) * nstream + max(0, F - max(L, A)) + S * max(L, F)) + (nchain - (B - 1) * L)
        if best is None or (cyc, B) < best[0]:
            best = ((cyc, B), (B, L))
    return best[1]


def _runs(n_mid: int, bounds=()) -> list:
    """``(a, z)``: the runs of stream steps ``a .. z - 1`` (of ``1 .. n_mid``) with the same
    kind of x load: one, or cut where the step loading beat ``j`` of ``bounds`` starts
    (``x_ring``). The first run loops on step 0's last instruction, each further one on
    its own first step (unrolled)."""
    cuts = sorted({1, 1 + n_mid} | {min(max(j - 1, 1), 1 + n_mid) for j in bounds})
    return list(zip(cuts, cuts[1:]))


def page_load_why_not(cfg, m: int, n: int, trans: bool = False, x_ring=None, diag_x: bool = False) -> str | None:
    """Why :func:`emit_gemv` cannot load the next page of ``W`` in place as it streams
    (``page_load``), or None: it needs one local output per PE (one chain, every stream
    step reading one word of ``W``), at least ``nr`` instructions per stream step (the
    ``nr`` beats of a word), the forward GEMV, no input from the ring (its ``rin`` is
    the stream input the scratchpad's ``sin`` needs) and, with ``x`` in the diagonal
    layout, a stream step longer than ``nr`` (the copy of ``x`` is written in every PE by
    the step's last instruction, which a beat's write predicate would gate)."""
    if trans:
        return "the transposed GEMV reads several words of W per stream step"
    if x_ring is not None:
        return "the input comes from the ring (one stream input per instruction)"
    c = gemv_cost(cfg, m, n)
    if diag_x and c["Lc"] <= cfg.nr:
        return "x's copy is written in every PE by the step's last instruction, which a beat would predicate"
    if c["nchain"] != 1:
        return f"{c['nchain']} local rows per PE (one is needed)"
    if c["Lc"] < cfg.nr:
        return f"{c['Lc']} instructions per stream step, fewer than the {cfg.nr} beats of a word"
    return None


def gemv_cost(cfg, m: int, n: int, *, trans: bool = False, reduce: str = "tree", page_load: bool = False) -> dict:
    """Cycle-cost model of :func:`emit_gemv` (exact instruction count and its terms).

    With ``nchain`` = local outputs per PE (``ceil(m/nr)``, transposed ``ceil(n/nr)``),
    ``nstream`` = local inputs per PE, ``B`` blocks of ``L`` accumulators (``L <=
    n_regs - 2`` chosen to minimize this count; ``B * L >= nchain``, the surplus chains
    of the last block are computed and dropped), ``Lc =
    max(L, acc_reuse_distance)`` instructions per stream step, ``F = fpu_latency - 1``,
    ``P = max(L, F)`` instructions per reduction step, ``S`` reduction steps
    (``ceil(log2 nr)`` tree, ``nr - 1`` sequential):

    ``instructions = 1 + B * (Lc * nstream + max(0, F - Lc) + S * P) + (nchain - (B - 1) * L)``

    (one setup instruction loading ``x[0]``, per block the MAC stream, a gap when the
    block is too short for the FMA latency, the reduction steps; the moves of each block's
    sums to the output hide in the next block's first MAC instructions, only the last
    block's are an epilogue).

    ``page_load``: ``1 + nr - min(nr, gap)`` more (the scratchpad pointer, and the last
    word's ``nr`` beats after the stream, which cover the gap).
    """
    nr = cfg.nr
    mp, np_ = local_len(m, nr), local_len(n, nr)
    nchain, nstream = (np_, mp) if trans else (mp, np_)
    S = len(reduce_plan(cfg, reduce)[0])
    B, L = _gemv_blocking(cfg, nchain, nstream, S)
    F, A = _lat(cfg)
    Lc = max(L, A)
    P = max(L, F)
    gap0 = max(0, F - Lc)
    ins = 1 + B * (Lc * nstream + gap0 + S * P) + (nchain - (B - 1) * L)
    if page_load:
        ins += 1 + nr - min(nr, gap0)
    return {"instructions": ins, "B": B, "L": L, "Lc": Lc, "P": P, "S": S, "gap": gap0,
            "nchain": nchain, "nstream": nstream, "mac_cycles": B * Lc * nstream,
            "reduce_cycles": B * S * P}


def emit_gemv(b, cfg, m: int, n: int, W: Region, x: Region, y: Region, *, trans: bool = False,
              reduce: str = "tree", x_layout: str | None = None, x_copy: Region | None = None,
              agus=("g0", "g1", "g2"), name: str = "gv", x_ring: tuple | None = None,
              page_load: int | None = None, x_relu: bool = False, x_host: bool = False,
              page_bus: str = "row") -> KernelInfo:
    """``y = W x`` (``trans=False``) or ``y = W^T x`` (``trans=True``), ``W`` ``m x n``.

    Memory map: ``W`` 2D round-robin (``mp * np`` words per PE). ``x`` (length ``n``,
    transposed ``m``) in the ``cols`` layout (transposed: ``rows``), or with
    ``x_layout="diag"`` in the diagonal layout: it is then broadcast over the column
    (row) buses inside the first block's MAC stream, at no cost, and stored in the
    ``cols`` (``rows``) layout into ``x_copy``. ``x`` and ``x_copy`` must not be in
    ``W``'s bank. ``y`` (length ``m``, transposed ``n``) is written in the ``rows``
    layout (transposed: ``cols``), which includes the ``diag`` layout.

    Mapping: each PE computes the partial sums of its local outputs, ``L`` at a time in
    registers ``r0..r{L-1}`` (blocks of ``L <= n_regs - 2`` local rows; transposed:
    columns), streaming over its local inputs: one instruction per MAC, ``x`` element in
    a register (``x[0]`` stays in ``r{L}`` for the chain starts, the current one in
    ``r{L+1}``, loaded by the last MAC instruction of each stream step). The partial
    sums are then reduced along the rows (transposed: columns) by ``reduce`` (``tree`` or
    ``seq``, :mod:`sw.collectives`); the final move of each sum to the output hides in
    the next block's first MAC instructions. Cost: :func:`gemv_cost`.

    ``x_ring = (own, fwd)`` (``x`` diag, not ``trans``): beats ``j >= own`` come from the
    ring (``rin col``) where the first block loads them (instruction ``j * Lc``), beats
    ``j < fwd`` are sent on as loaded (``rout col``); the same count (:mod:`sw.ring`).

    ``page_load`` (a scratchpad beat address; :func:`page_load_why_not` says when it
    applies): while streaming, ``W``'s region is overwritten in place with the next page,
    ``nr * m * n / nr^2`` beats from that address in :func:`sw.transfer.emit_page_move`'s
    word order: stream step ``s >= 1`` writes word ``s - 1`` (read one step before), beat
    ``k`` in its instruction ``k`` (``sin row | @col=k writes``: the write predicate
    leaves the MAC in every PE), the last word after the stream, in the instructions
    that wait for the last MAC. ``page_bus="col"``: the next page in ``emit_page_move``'s
    order over the column buses (``sin col | @row=k writes``).

    ``x_relu`` (``x`` diag, not ``trans``): the GEMV computes ``W relu(x)``, ``x`` being a
    pre-activation (the previous layer's GEMV output, its ReLU not applied): every PE
    takes ``relu`` of the bus word as it loads it (the move unit's ReLU in place of its
    move) and writes that register to ``x_copy`` one stream step later, in the next load's
    instruction (``x_copy`` thus holds ``relu(x)``); beats sent on over the ring stay
    raw, the next core applying the ReLU itself. The same instruction count.

    ``x_host`` (``x_layout="diag"``, not ``trans``): the beats the diagonal would drive
    (all, or with ``x_ring`` those below ``own``) come from the host stream instead
    (``hin col``: lane ``q`` on column bus ``q``, the word of diagonal PE ``(q, q)``,
    :func:`sw.train_vectors.vector_beats`) where the first block loads them, so the host
    input of a step rides in its first GEMV; ``x`` may be None (only ``x_copy`` keeps
    the sample). The same instruction count.
    """
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(m >= 1 and n >= 1, f"bad shape {m} x {n}")
    mp, np_ = local_len(m, nr), local_len(n, nr)
    if not trans:
        nchain, nstream, kstride, sstride = mp, np_, np_, 1
        rdir, xdir = BusDir("row"), BusDir("col")
    else:
        nchain, nstream, kstride, sstride = np_, mp, 1, np_
        rdir, xdir = BusDir("col"), BusDir("row")
    want_x = xdir.layout
    x_layout = x_layout or want_x
    _need(x_layout in (want_x, "diag"), f"x must be in the {want_x!r} or 'diag' layout, got {x_layout!r}")
    diag_x = x_layout == "diag"
    if diag_x:
        _need(x_copy is not None, "x in the diag layout needs an x_copy region for its broadcast copy")
        _need(x_copy.bank != W.bank, "x_copy must not be in W's bank")
        x_copy.check(cfg, nstream + 1, "x_copy")
        x_copy = x_copy.bind(cfg)
    _need(not x_host or (diag_x and not trans), "x_host needs x in the diag layout, not trans")
    # x is read unless every beat of it comes from the host or the ring
    if not diag_x or (not x_host and (x_ring is None or x_ring[0] > 0)):
        _need(x is not None, "x is needed unless its beats come from the host (x_host) or the ring")
        _need(x.bank != W.bank, "x must not be in W's bank (both are read by every MAC instruction)")
        x.check(cfg, nstream, "x")
    W.check(cfg, mp * np_, "W")
    y.check(cfg, nchain, "y")
    W, y = W.bind(cfg), y.bind(cfg)
    x = x.bind(cfg) if x is not None else None
    xs = x_copy if diag_x else x                   # where blocks >= 1 read x
    gW, gX, gY = agus
    steps, root = reduce_plan(cfg, reduce)
    S = len(steps)
    B, L = _gemv_blocking(cfg, nchain, nstream, S)
    F, A = _lat(cfg)
    Lc, P = max(L, A), max(L, F)
    gap0 = max(0, F - Lc)
    x0, xr = reg(L), reg(L + 1)
    LS, LB = 1, 0                                  # loop levels: stream loops, block loop
    f = Frag()

    def own_src(s, agu):
        """Slots putting x[s] on the buses: from the diagonal, or from the host stream."""
        return ["hin col"] if x_host else [x.rd(s, agu=agu, gate=xdir.gate), xdir.drive(x.src, diag=0)]

    def x_load_bus(s, agu):
        """Slots loading x[s] into xr over the bus from the diagonal or the host (and into
        x_copy)."""
        return [*own_src(s, agu), take(xr, xdir.bus), *copy_slots(s, xdir.bus, agu)]
    own, fwd = x_ring if x_ring is not None else (nstream, 0)
    _need(x_ring is None or (diag_x and not trans and own >= 0), "x_ring needs x in the diag layout, not trans")
    _need(not x_relu or (diag_x and not trans), "x_relu needs x in the diag layout, not trans")
    take = relu if x_relu else mov                 # how a loaded x word enters its register

    def copy_slots(s, bus_word, agu):
        """The x_copy write of the load of ``x[s]``: the bus word as it is loaded, or with
        ``x_relu`` the register loaded one step earlier (``x[s - 1]``; ``x[0]`` from ``x0``)."""
        if not x_relu:
            return [x_copy.wr(bus_word, s, agu=agu)]
        return [x_copy.wr(x0 if s == 1 else xr, s - 1, agu=agu)]
    if page_load is not None:
        why = page_load_why_not(cfg, m, n, trans, x_ring, diag_x) or (
            "x comes from the host stream (one stream input per instruction)" if x_host else None)
        _need(why is None, f"page_load: {why}")

    _need(page_bus in ("row", "col"), f"page_bus must be 'row' or 'col', got {page_bus!r}")

    def page_beat(k, word, agu):
        """Beat ``k`` of the next page's ``word``: into PE column ``k``'s ``W`` word (row k's
        over the column buses)."""
        return [sin(page_bus), pred("col" if page_bus == "row" else "row", k, writes=True),
                W.wr(page_bus, word, agu=agu)]

    def x_load_ring(s, agu):      # from the diagonal or the ring; sent on if s < fwd
        out = x_load_bus(s, agu) if s < own else ["rin col", take(xr, xdir.bus), *copy_slots(s, xdir.bus, agu)]
        return out + (["rout col"] if s < fwd else [])

    def x_load(s, agu):
        """Slots loading x[s] into xr from SRAM (x, or x_copy after the first block)."""
        return [xs.rd(s, agu=agu), mov(xr, xs.src)]

    def step(s, bofs, agu_w, start, load, moves, agu_x=None, last_copy=False):
        """One stream step: the L MACs of stream index s (plus NOPs up to Lc);
        ``last_copy``: the last x_copy write of an ``x_relu`` first block (no load)."""
        ins = []
        for k in range(Lc):
            sl = []
            if k < L:
                sl.append(W.rd(k * kstride + s * sstride + bofs, agu=agu_w))
                sl.append(mul(reg(k), W.src, x0) if start else mac(reg(k), W.src, xr))
                if moves:
                    sl += [root.drive(rdir, reg(k)), y.wr(rdir.bus, k, agu=gY)]
            if k == Lc - 1 and load is not None:
                sl += load(s + 1, agu_x)
            if k == Lc - 1 and last_copy:
                sl += copy_slots(s + 1, None, None)
            if page_load is not None and s >= 1 and k < nr:
                sl += page_beat(k, s - 1 + bofs, agu_w)
            ins.append(f.ins(*sl))
        return ins

    def stream(bofs, first_block):
        """All stream steps of one block; returns the first step's instructions."""
        agu0 = None if first_block else gW
        dl = diag_x and first_block
        if nstream == 1:
            return step(0, bofs, agu0, True, None, not first_block, last_copy=dl and x_relu)
        load = (x_load_ring if x_ring is not None else x_load_bus) if dl else x_load
        first = step(0, bofs, agu0, True, load, not first_block)
        n_mid = nstream - 2 if dl else nstream - 1
        last = first
        for a, z in _runs(n_mid, (own, fwd) if dl and x_ring else ()):
            if a > 1:
                last = step(a, bofs, None, False, load, False)
                a += 1
            if z > a:
                f.open_loop(last[-1], f"{name}s", z - a, LS)
                step(a, bofs, gW, False, load, False, agu_x=gX)
                f.close_loop()
        if dl:
            step(nstream - 1, bofs, None, False, None, False, last_copy=x_relu)
        return first

    def reduce_section(gap=gap0):
        ins = f.nops(gap)
        for st in steps:
            for k in range(P):
                ins.append(f.ins(*step_slots(rdir, st, k)) if k < L else f.ins())
        return ins

    if page_load is not None:
        f.ins(spad("rd", page_load))
    # setup: x[0] into x0 (and into x_copy[0])
    if diag_x:
        src = own_src(0, None) if own > 0 else ["rin col"]
        setup = f.ins(*src, take(x0, xdir.bus), None if x_relu else x_copy.wr(xdir.bus, 0),
                      "rout col" if fwd > 0 else None)
    else:
        setup = f.ins(x.rd(0), mov(x0, x.src))
    first = stream(0, True)
    f.attach(("agu_base", gW, 0), [setup] + first[:-1])
    f.attach(("agu_stride", gW, LS, sstride), [setup] + first[:-1])
    f.attach(("agu_base", gX, 0), [setup] + first[:-1])
    f.attach(("agu_stride", gX, LS, 1), [setup] + first[:-1])
    if page_load is not None:               # the last word's beats (B == 1), in the gap
        for k in range(nr):
            f.ins(*page_beat(k, nstream - 1, None))
        red = reduce_section(max(0, gap0 - nr))
    else:
        red = reduce_section()
    if B > 1:
        _need(len(red) >= 5, "internal: no room for the block-loop controls")
        for c in (("agu_stride", gW, LB, L * kstride), ("agu_stride", gX, LB, 0),
                  ("agu_base", gY, 0), ("agu_stride", gY, LB, L)):
            f.attach(c, red[:-1])
        f.open_loop(red[-1], f"{name}b", B - 1, LB)
        stream(L * kstride, False)
        reduce_section()
        f.close_loop()
    last_real = nchain - (B - 1) * L
    for k in range(last_real):
        f.ins(root.drive(rdir, reg(k)), y.wr(rdir.bus, (B - 1) * L + k))
    _finish(b, f)
    cost = gemv_cost(cfg, m, n, trans=trans, reduce=reduce, page_load=page_load is not None)
    assert f.count() == cost["instructions"], (f.count(), cost)
    return KernelInfo("gemv_t" if trans else "gemv", f.count(), m * n,
                      {k: cost[k] for k in ("B", "L", "Lc", "P", "S", "gap")} | {"reduce": reduce})
