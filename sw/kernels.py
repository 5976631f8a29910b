"""Linear-algebra kernels of MLP training as microprogram generators.

Each ``emit_*`` function takes the configuration, the shapes and a memory map (a
:class:`~sw.collectives.Region` per operand: SRAM bank and base address, the same on
every PE; matrices in the 2D round-robin layout of :mod:`sw.layout`, vectors in the
layout named by the argument), appends the kernel to a :class:`~sw.asm.Builder` (or a
:class:`~sw.collectives.Frag`) and returns a :class:`KernelInfo` with the exact
instruction count, the useful MAC count and the blocking it chose. :mod:`sw.golden` has a
bit-exact numpy model of each kernel (same operations in the same order). The mapping
of every kernel onto the array, its cycle-cost formula and measured utilization are in
``docs/kernels.md``.

Kernels:

* :func:`emit_gemv` ``y = W x`` and, with ``trans=True``, ``y = W^T x`` (``W`` used in
  place): output-stationary MAC chains in registers, the reused ``x`` element in a
  register, ``W`` streamed from SRAM, partial sums reduced along the buses by the tree
  (or sequential) reduction of :mod:`sw.collectives`;
* :func:`emit_rank1` ``W += alpha u v^T`` with the FMA writing back into SRAM in place;
* :func:`emit_gemm` ``Y = W X`` for a minibatch ``X`` (``n x b``): a sequence of rank-1
  updates of register-resident blocks of ``Y``, ``W`` and ``X`` elements broadcast over
  the row and column buses; ``accumulate=True``: ``Y += alpha W X`` (the minibatch
  weight update, with :func:`sw.collectives.emit_transpose` supplying ``X^T``);
* elementwise :func:`emit_relu`, :func:`emit_relu_mask` (``delta * relu'(z)``),
  :func:`emit_axpy` (``y += a x``) and :func:`emit_scale` (``x *= a``).

Conventions (shared with :mod:`sw.collectives` and :mod:`sw.transfer`): ``ar0`` is 0
(its reset value; nothing changes it); kernels are emitted at the top level of a
program (they use loop levels 0..2 and AGUs ``g0``..``g3``); kernels may use every
register. Scalars (``alpha``) are words stored at the same address in every PE
(:class:`Scalar`).

:func:`sim.core_run.run_kernel` runs a kernel between a load phase and an unload phase
on the core model or the RTL (used by the tests and the benchmark).
"""

from __future__ import annotations

from dataclasses import dataclass, field


from sw.collectives import BusDir, CollectiveError, Frag, Region, reduce_plan, reg, step_slots
from sw.asm import add, cdrv, fma, mac, mask, mov, mul, pred, rdrv, relu
from sw.layout import local_len

__all__ = [
    "KernelError", "KernelInfo", "Scalar", "Region",
    "emit_gemv", "emit_gemv_t_rank1", "emit_rank1", "rank1_lines", "emit_gemm", "emit_relu", "emit_copy", "emit_relu_mask", "emit_axpy", "emit_scale",
    "gemv_cost", "gemv_t_rank1_cost", "rank1_cost", "gemm_cost", "elementwise_cost",
]


class KernelError(CollectiveError):
    """A kernel cannot be generated for these arguments (memory map, shapes, config)."""


@dataclass(frozen=True)
class Scalar:
    """A scalar stored at ``addr`` of ``bank`` in every PE."""

    bank: str
    addr: int

    @property
    def region(self) -> Region:
        return Region(self.bank, self.addr)


@dataclass
class KernelInfo:
    """What a kernel generator produced.

    ``instructions``: instructions the kernel issues (its cycles; a program made of the
    kernel and a HALT runs ``instructions + cfg.run_overhead`` cycles);
    ``useful_macs``: the workload's multiply-adds (``m * n`` for a GEMV);
    ``params``: the blocking it chose.
    """

    name: str
    instructions: int
    useful_macs: int = 0
    params: dict = field(default_factory=dict)

    def cycles_standalone(self, cfg) -> int:
        return self.instructions + cfg.run_overhead


def _finish(b, f: Frag):
    if isinstance(b, Frag):
        b.extend(f)
    else:
        f.emit(b)


def _need(cond, msg):
    if not cond:
        raise KernelError(msg)


def _lat(cfg):
    """(F, A): issue distance for a driver/operand read of an FMA result, for a late c read."""
    return cfg.fpu_latency - 1, cfg.acc_reuse_distance


# ======================================================================================
# GEMV and transposed GEMV
# ======================================================================================
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


def gemv_cost(cfg, m: int, n: int, *, trans: bool = False, reduce: str = "tree") -> dict:
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
    return {"instructions": ins, "B": B, "L": L, "Lc": Lc, "P": P, "S": S, "gap": gap0,
            "nchain": nchain, "nstream": nstream, "mac_cycles": B * Lc * nstream,
            "reduce_cycles": B * S * P}


def emit_gemv(b, cfg, m: int, n: int, W: Region, x: Region, y: Region, *, trans: bool = False,
              reduce: str = "tree", x_layout: str | None = None, x_copy: Region | None = None,
              agus=("g0", "g1", "g2"), name: str = "gv") -> KernelInfo:
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
    _need(x.bank != W.bank, "x must not be in W's bank (both are read by every MAC instruction)")
    W.check(cfg, mp * np_, "W")
    x.check(cfg, nstream, "x")
    y.check(cfg, nchain, "y")
    W, x, y = W.bind(cfg), x.bind(cfg), y.bind(cfg)
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

    def x_load_bus(s, agu):
        """Slots loading x[s] into xr over the bus from the diagonal (and into x_copy)."""
        return [x.rd(s, agu=agu, gate=xdir.gate), xdir.drive(x.src, diag=0), mov(xr, xdir.bus),
                x_copy.wr(xdir.bus, s, agu=agu)]

    def x_load(s, agu):
        """Slots loading x[s] into xr from SRAM (x, or x_copy after the first block)."""
        return [xs.rd(s, agu=agu), mov(xr, xs.src)]

    def step(s, bofs, agu_w, start, load, moves, agu_x=None):
        """One stream step: the L MACs of stream index s (plus NOPs up to Lc)."""
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
            ins.append(f.ins(*sl))
        return ins

    def stream(bofs, first_block):
        """All stream steps of one block; returns the first step's instructions."""
        agu0 = None if first_block else gW
        dl = diag_x and first_block
        if nstream == 1:
            return step(0, bofs, agu0, True, None, not first_block)
        load = x_load_bus if dl else x_load
        first = step(0, bofs, agu0, True, load, not first_block)
        n_mid = nstream - 2 if dl else nstream - 1
        if n_mid > 0:
            f.open_loop(first[-1], f"{name}s", n_mid, LS)
            step(1, bofs, gW, False, load, False, agu_x=gX)
            f.close_loop()
        if dl:
            step(nstream - 1, bofs, None, False, None, False)
        return first

    def reduce_section():
        ins = f.nops(gap0)
        for st in steps:
            for k in range(P):
                ins.append(f.ins(*step_slots(rdir, st, k)) if k < L else f.ins())
        return ins

    # setup: x[0] into x0 (and into x_copy[0])
    if diag_x:
        setup = f.ins(x.rd(0, gate=xdir.gate), xdir.drive(x.src, diag=0), mov(x0, xdir.bus),
                      x_copy.wr(xdir.bus, 0))
    else:
        setup = f.ins(x.rd(0), mov(x0, x.src))
    first = stream(0, True)
    f.attach(("agu_base", gW, 0), [setup] + first[:-1])
    f.attach(("agu_stride", gW, LS, sstride), [setup] + first[:-1])
    f.attach(("agu_base", gX, 0), [setup] + first[:-1])
    f.attach(("agu_stride", gX, LS, 1), [setup] + first[:-1])
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
    cost = gemv_cost(cfg, m, n, trans=trans, reduce=reduce)
    assert f.count() == cost["instructions"], (f.count(), cost)
    return KernelInfo("gemv_t" if trans else "gemv", f.count(), m * n,
                      {k: cost[k] for k in ("B", "L", "Lc", "P", "S", "gap")} | {"reduce": reduce})


# ======================================================================================
# fused backward step: transposed GEMV and rank-1 update in one pass over W
# ======================================================================================
def _bu_temps_ok(cfg, T: int, L: int, Lc2: int) -> bool:
    """Rotating temporaries (column ``k`` uses ``k mod T``) are safe when every temp is
    rewritten only after the late ``c`` read of its previous value: consecutive writers
    ``>= 1 + mul_latency`` instructions apart, cyclically over a row of ``Lc2``
    instructions (``A_k`` at position ``2k``)."""
    need = 1 + cfg.mul_latency
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


# ======================================================================================
# rank-1 update
# ======================================================================================
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


# ======================================================================================
# GEMM
# ======================================================================================
def _divisors(k):
    return [d for d in range(1, k + 1) if k % d == 0]


def gemm_cost(cfg, m: int, n: int, bsz: int, Li: int | None = None, Lc: int | None = None, *,
              alpha: bool = False) -> dict:
    """Exact instruction count of :func:`emit_gemm` for block ``Li x Lc`` (default: the
    block it chooses). With ``G = max(L, acc_reuse_distance)`` instructions per ``j``
    (``L = Li * Lc`` accumulators), ``E = L + max(0, fpu_latency - 1 - G)`` store
    instructions per block, ``Bi = mp / Li``, ``Bc = bp / Lc`` blocks:

    ``instructions = setup + Bi * Bc * (nr * np * G + E) + (Bi if Bi > 1 and Bc > 1)``

    where ``setup`` is one instruction per AGU control (3 bases plus the strides of the
    loop levels in use) plus the outer block loop's instruction. ``alpha``: the kernel
    keeps a scale factor in a register (accumulating form), one register fewer for the
    block.
    """
    nr = cfg.nr
    mp, np_, bp = local_len(m, nr), local_len(n, nr), local_len(bsz, nr)
    F, A = _lat(cfg)
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
              block: tuple | None = None, agus=("g0", "g1", "g2"), name: str = "mm") -> KernelInfo:
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
    W, X, Y = W.bind(cfg), X.bind(cfg), Y.bind(cfg)
    use_alpha = alpha is not None
    cost = gemm_cost(cfg, m, n, bsz, *(block or (None, None)), alpha=use_alpha)
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


# ======================================================================================
# elementwise kernels
# ======================================================================================
def _stream(f: Frag, n: int, k: int, elem, ctls, level: int, name: str) -> None:
    """``n`` elements of ``k`` instructions each (``elem(i, agu)`` -> ``k`` slot lists,
    ``agu`` the AGU name to add to addresses or None). The first elements are emitted
    straight with immediate addresses and carry the control items ``ctls``, the next
    one's last instruction is the loop instruction, the rest run in a zero-overhead loop
    whose body is one element. Exactly ``n * k`` instructions."""
    e0 = -(-len(ctls) // k)
    if n < e0 + 2:
        for i in range(n):
            for sl in elem(i, None):
                f.ins(*sl)
        return
    free = []
    for i in range(e0 + 1):
        free += [f.ins(*sl) for sl in elem(i, None)]
    for c in ctls:
        f.attach(c, free[:-1])
    f.open_loop(free[-1], name, n - e0 - 1, level)
    for sl in elem(e0 + 1, ctls[0][1]):
        f.ins(*sl)
    f.close_loop()


def _ew_common(cfg, n, regions, layout):
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(n >= 1, "empty operand")
    for what, r in regions.items():
        if r is not None:
            r.check(cfg, n, what)
    _need(layout in (None, "all", "diag"), f"layout must be None/'all' (every PE) or 'diag', got {layout!r}")
    pr = [pred("diag", 0)] if layout == "diag" else []
    gate = "pred" if pr else "all"
    return pr, gate


def elementwise_cost(kind: str, n: int, *, two_banks: bool = True) -> int:
    """Exact instruction count of the elementwise kernels for ``n`` local words:
    ``relu`` and ``copy``: ``n + 1``; ``relu_mask``: ``k * n + 1``; ``axpy``: ``1 + k * n``;
    ``scale``: ``1 + n``, with ``k = 1`` when the two streamed operands are in different
    banks (``two_banks``), else 2."""
    k = 1 if two_banks else 2
    return {"relu": n + 1, "copy": n + 1, "relu_mask": k * n + 1, "axpy": 1 + k * n, "scale": 1 + n}[kind]


def _unary(b, cfg, n: int, src: Region, dst: Region, layout, agu: str, name: str, kind: str, unit) -> KernelInfo:
    """``dst[i] = unit(src[i])`` on the move unit (``relu`` or ``mov``): read and
    operate, write of the previous element; ``n + 1`` instructions."""
    pr, gate = _ew_common(cfg, n, {"src": src, "dst": dst}, layout)
    src, dst = src.bind(cfg), dst.bind(cfg)
    f = Frag()

    def elem(i, agu_):
        sl = [src.rd(i, agu=agu_, gate=gate), unit("r0", src.src)] + pr
        if i >= 1:
            sl.append(dst.wr("r0", i - 1, agu=agu_))
        return [sl]

    _stream(f, n, 1, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    f.ins(dst.wr("r0", n - 1), *pr)
    _finish(b, f)
    return KernelInfo(kind, f.count(), 0, {"k": 1})


def emit_relu(b, cfg, n: int, src: Region, dst: Region, *, layout: str | None = None, agu: str = "g0",
              name: str = "relu") -> KernelInfo:
    """``dst[i] = relu(src[i])`` for the ``n`` local words of every PE (``layout="diag"``:
    of the diagonal PEs only, for a vector in the diag layout). In place when
    ``dst == src``. One element per instruction on the move unit (read, ReLU, write of the
    previous element), ``n + 1`` instructions."""
    return _unary(b, cfg, n, src, dst, layout, agu, name, "relu", relu)


def emit_copy(b, cfg, n: int, src: Region, dst: Region, *, layout: str | None = None, agu: str = "g0",
              name: str = "copy") -> KernelInfo:
    """``dst[i] = src[i]`` for the ``n`` local words of every PE (``layout="diag"``: of the
    diagonal PEs only), bit for bit (the move unit). ``dst`` must not overlap ``src``
    unless equal. One element per instruction, ``n + 1`` instructions, as :func:`emit_relu`."""
    return _unary(b, cfg, n, src, dst, layout, agu, name, "copy", mov)


def emit_relu_mask(b, cfg, n: int, delta: Region, z: Region, dst: Region, *, layout: str | None = None,
                   agu: str = "g0", name: str = "rmask") -> KernelInfo:
    """``dst[i] = delta[i] if z[i] > 0 else +0`` (backpropagation through a ReLU:
    ``delta * relu'(z)``; ``z`` the pre-activation or the activation). One element per
    instruction when ``delta`` and ``z`` are in different banks, else two. ``n * k + 1``
    instructions."""
    pr, gate = _ew_common(cfg, n, {"delta": delta, "z": z, "dst": dst}, layout)
    delta, z, dst = delta.bind(cfg), z.bind(cfg), dst.bind(cfg)
    k = 1 if delta.bank != z.bank else 2
    f = Frag()

    def elem(i, agu_):
        wr = [dst.wr("r0", i - 1, agu=agu_)] if i >= 1 else []
        if k == 1:
            return [[delta.rd(i, agu=agu_, gate=gate), z.rd(i, agu=agu_, gate=gate),
                     mask("r0", delta.src, z.src)] + wr + pr]
        return [[z.rd(i, agu=agu_, gate=gate), mov("r1", z.src)] + pr,
                [delta.rd(i, agu=agu_, gate=gate), mask("r0", delta.src, "r1")] + wr + pr]

    _stream(f, n, k, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    f.ins(dst.wr("r0", n - 1), *pr)
    _finish(b, f)
    return KernelInfo("relu_mask", f.count(), 0, {"k": k})


def _load_scalar(f, cfg, alpha: Scalar, r, pr):
    sreg = alpha.region.bind(cfg)
    return f.ins(sreg.rd(0), mov(r, sreg.src), *pr)


def emit_axpy(b, cfg, n: int, alpha: Scalar, x: Region, y: Region, *, layout: str | None = None,
              agu: str = "g0", name: str = "axpy") -> KernelInfo:
    """``y[i] = alpha * x[i] + y[i]`` (``mac``: the product rounded, then the sum) for the
    ``n`` local words; the FMA writes ``y`` back in place. One element per instruction
    when ``x`` and ``y`` are in different banks, else two; plus one instruction loading
    ``alpha``."""
    pr, gate = _ew_common(cfg, n, {"x": x, "y": y}, layout)
    x, y = x.bind(cfg), y.bind(cfg)
    k = 1 if x.bank != y.bank else 2
    f = Frag()
    _load_scalar(f, cfg, alpha, "r2", pr)

    def elem(i, agu_):
        if k == 1:
            return [[x.rd(i, agu=agu_, gate=gate), y.rd(i, agu=agu_, gate=gate), mac(y.src, "r2", x.src)] + pr]
        return [[x.rd(i, agu=agu_, gate=gate), mov("r1", x.src)] + pr,
                [y.rd(i, agu=agu_, gate=gate), mac(y.src, "r2", "r1")] + pr]

    _stream(f, n, k, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    _finish(b, f)
    return KernelInfo("axpy", f.count(), 0, {"k": k})


def emit_scale(b, cfg, n: int, alpha: Scalar, x: Region, dst: Region | None = None, *,
               layout: str | None = None, agu: str = "g0", name: str = "scale") -> KernelInfo:
    """``dst[i] = x[i] * alpha`` (``dst`` defaults to ``x``: in place; otherwise ``dst``
    must be in the other bank). One element per instruction (the FMA writes the product
    back to SRAM), plus one instruction loading ``alpha``."""
    dst = x if dst is None else dst
    pr, gate = _ew_common(cfg, n, {"x": x, "dst": dst}, layout)
    _need(dst == x or dst.bank != x.bank, "an out-of-place scale needs dst in the other bank")
    x, dst = x.bind(cfg), dst.bind(cfg)
    f = Frag()
    _load_scalar(f, cfg, alpha, "r2", pr)

    def elem(i, agu_):
        if dst == x:
            return [[x.rd(i, agu=agu_, gate=gate), mul(x.src, x.src, "r2")] + pr]
        return [[x.rd(i, agu=agu_, gate=gate), dst.rd(i, agu=agu_, read=False), mul(dst.src, x.src, "r2")] + pr]

    _stream(f, n, 1, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    _finish(b, f)
    return KernelInfo("scale", f.count(), 0, {"k": 1})


# ======================================================================================
# running a kernel between a load and an unload phase
# ======================================================================================
