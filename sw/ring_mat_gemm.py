"""A minibatch GEMM that takes its right operand from the ring as the stream reaches it:
the all-gather (or the broadcast) of a 2D-layout matrix merged into the GEMM that
consumes it (``docs/training.md``, "Minibatch GD across the cores of a chip").

``Y = W X`` (``W`` ``m x n`` in this core's SRAM, ``X`` ``n x b``, ``Y`` ``m x b``, all 2D
round-robin), where ``X``'s local rows are split into *segments*, each held by one core
(its *origin*): every row of an all-gathered activation ``A_l`` (segment ``s`` on core
``s``), or the whole input ``X`` on core 0 (a broadcast). :func:`sw.kernels.emit_gemm`
drives ``X[j, :]`` on the column buses from PE row ``j mod nr`` (one beat: the word's PE
row); here that beat comes off the ring on the column buses instead, and the same
instruction passes it on:

* origin: ``rd [ar2 + cc] gate=cdrv | cdrv mem @row=q | rout col``
* relay: ``rin col | rout col`` (the last core of the chain: ``rin col``)

with, in the same instruction, the first of the ``Li`` MACs the beat feeds (``rd [ar1 +
ii ld] gate=rdrv | rdrv mem @col=q | mac r = row * col``, ``W[i, j]`` from the row buses
as in ``emit_gemm``) and ``mov xr = col``; the other ``Li - 1`` MACs read ``xr``. No
instruction is predicated, so the MACs run on every PE; a receiving core does not store
``X`` (only the GEMM reads it whole: the backward pass reads the own segment only).

The outputs are computed in passes of ``Li x Lc`` accumulators (local rows ``bi Li ..``,
local columns ``bc Lc ..``); each pass streams the ``Lc`` columns of every segment, in
the global row order on every core, so every output is the chain ``W[i, 0] X[0, c] +
W[i, 1] X[1, c] + ...`` in ``j`` order, first product ``mul``: the operations and their
order of :func:`sw.kernels.emit_gemm`, so the same bits. A beat takes ``p = max(Li,
ceil(A / Lc))`` slots (``A``: the accumulator reuse distance). Segment ``s`` of a pass
starts at ``T_s`` (``T_0 = 0``, ``T_{s+1} = T_s + m p + 3``: its origin sends it after
passing on the previous one); the core ``h`` hops on takes beat ``j`` in ``T_s + 3 h + j
p``, exactly one ring hop after it was sent (stall-free). A core waits ``3 k`` slots
before its first beat of a pass, and ``3 c`` after its own segment (an all-gather); a
pass ends when the last core's last beat is in, then ``F`` slots and the ``Li Lc``
stores. Address registers ``ar1`` (``W``), ``ar2`` (the own segment), ``ar3`` (``Y``).
"""

from __future__ import annotations

from arch.config import RING_HOP_CYCLES
from sw.layout import local_len
from sw.ring import RingError
from sw.ring_mat import RingFrag, _fold_text

__all__ = ["gemm_ring_plan", "gemm_ring_frag", "gemm_ring_check", "gemm_ring_update_plan", "gemm_ring_update_frag"]

HOP = RING_HOP_CYCLES


def _starts(cfg, origins: list, m: int, p: int) -> list:
    """Per segment the slot its origin sends its first beat in (pass-relative)."""
    T = [0]
    for s in range(1, len(origins)):
        T.append(T[-1] + m * p + HOP * ((origins[s] - origins[s - 1]) % cfg.cores))
    return T


def _ring_len(cfg, origins: list, m: int, p: int) -> int:
    c, T = cfg.cores, _starts(cfg, origins, m, p)
    return max(T[s] + HOP * h + m * p for s in range(len(origins)) for h in range(c))


def _pass_len(cfg, origins, m, p, L) -> int:
    F = cfg.fpu_latency - 1
    return _ring_len(cfg, origins, m, p) + F + L + 3


def gemm_ring_plan(cfg, m: int, bsz: int, seg_rows: int, origins: list) -> dict:
    """The blocking of :func:`gemm_ring_frag`: ``Li`` (divides ``ceil(m / nr)``), ``Lc``
    (divides ``ceil(bsz / nr)``), ``p``, the passes and the slots, the one with the
    fewest slots among those whose ``Li Lc`` accumulators and ``xr`` fit the registers.
    ``seg_rows``: local rows of ``X`` per segment; ``origins``: each segment's core."""
    nr, A = cfg.nr, cfg.acc_reuse_distance
    mp, bp = local_len(m, nr), local_len(bsz, nr)
    best = None
    for li in (d for d in range(1, mp + 1) if mp % d == 0):
        for lc in (d for d in range(1, bp + 1) if bp % d == 0):
            if li * lc + (li > 1) > cfg.n_regs:
                continue
            p = max(li, -(-A // lc))
            beats = seg_rows * lc * nr
            passes = (mp // li) * (bp // lc)
            slots = 5 + passes * _pass_len(cfg, origins, beats, p, li * lc)
            if best is None or slots < best["slots"]:
                best = {"Li": li, "Lc": lc, "p": p, "Bi": mp // li, "Bc": bp // lc, "beats": beats,
                        "slots": slots, "macs": passes * len(origins) * beats * li}
    if best is None:
        raise RingError(f"no GEMM blocking of {mp} x {bp} local outputs fits {cfg.n_regs} registers")
    return best


def gemm_ring_check(cfg, W, X, Y) -> str | None:
    """Why :func:`gemm_ring_frag` cannot run these operands, or None."""
    if cfg.cores < 2:
        return f"a ring needs cores >= 2, got {cfg.cores}"
    if cfg.n_ar < 4:
        return f"the ring GEMM uses ar1..ar3: n_ar={cfg.n_ar} is too few"
    if W.bank == X.bank:
        return "W and X must be in different banks (both are read in the originating instructions)"
    return None


def _prologue(cfg, k: int, W, X, Y) -> tuple:
    """``(nr, cores)`` once the operands and the core are checked (:class:`RingError`)."""
    why = gemm_ring_check(cfg, W, X, Y)
    if why:
        raise RingError(why)
    if not 0 <= k < cfg.cores:
        raise RingError(f"core {k} is not a core of the chip (cores={cfg.cores})")
    return cfg.nr, cfg.cores


def _add(cfg, r: int, d: int) -> str:
    d &= (1 << cfg.addr_bits) - 1
    return f"ar{r} += {d}" if d else "nop"


def _stream(cfg, ring: list, t0: int, h: int, beats: int, pl: dict, ldw: int, banks, first: bool) -> None:
    """Place into ``ring`` the slot texts of one segment's ``beats`` on the core ``h`` hops
    from its origin, beat ``j`` at ``t0 + j p``: the beat's way in and on, its ``Li``
    MACs (``first``: the segment starts every chain, ``mul``); ``ldw``: the local words
    per row of the left operand (its ``Li`` rows are read at ``ar1 + ii ldw``)."""
    nr, c = cfg.nr, cfg.cores
    Li, Lc, p = pl["Li"], pl["Lc"], pl["p"]
    wb, xb = banks
    xr = f"r{Li * Lc}"
    for j in range(beats):
        jr, rest = divmod(j, nr * Lc)
        q, cc = divmod(rest, Lc)
        end = rest == nr * Lc - 1                 # the last beat of a local row of X
        one = first and jr == 0 and q == 0
        if h == 0:
            head = (f"rd{xb} [ar2{f' + {cc}' if cc else ''}]{'++' if end else ''} gate=cdrv | "
                    f"cdrv mem{xb} @row={q} | rout col")
        else:
            head = "rin col | rout col" if h < c - 1 else "rin col"
        for ii in range(Li):
            a = ii * ldw
            w = (f"rd{wb} [ar1{f' + {a}' if a else ''}]{'++' if end and ii == Li - 1 else ''} "
                 f"gate=rdrv | rdrv mem{wb} @col={q}")
            acc, src = f"r{ii * Lc + cc}", "col" if ii == 0 else xr
            fma = f"mul {acc} = row * {src}" if one else f"mac {acc} += row * {src}"
            txt = f"{w} | {fma}"
            if ii == 0:
                txt = f"{head} | {txt}" + (f" | mov {xr} = col" if Li > 1 else "")
            t = t0 + j * p + ii
            if ring[t] != "nop":                     # pragma: no cover - a schedule bug
                raise AssertionError(f"two beats in slot {t}")
            ring[t] = txt


def _pass_ring(cfg, k: int, origins: list, pl: dict, Ln: int, banks) -> list:
    """Core ``k``'s slot texts of one pass's stream (every pass issues the same ones:
    the address registers carry the pass's bases)."""
    beats, p = pl["beats"], pl["p"]
    T = _starts(cfg, origins, beats, p)
    ring = ["nop"] * _ring_len(cfg, origins, beats, p)
    for s, o in enumerate(origins):
        h = (k - o) % cfg.cores
        _stream(cfg, ring, T[s] + HOP * h, h, beats, pl, Ln, banks, s == 0)
    return ring


def gemm_ring_frag(cfg, k: int, m: int, n: int, bsz: int, W, X, Y, origins: list,
                   name: str = "gr") -> RingFrag:
    """Core ``k``'s ``Y = W X`` with ``X`` (``n x bsz``, local row stride ``ceil(bsz /
    nr)``) arriving over the ring: ``origins[s]`` holds segment ``s`` (local rows ``s n_s
    .. (s + 1) n_s - 1``, ``n_s = ceil(n / nr) / len(origins)``) in SRAM; ``Y`` (``m x
    bsz``) is written on every core. Every core issues the same number of slots
    (:func:`gemm_ring_plan`). Raises :class:`sw.ring.RingError` for operands
    :func:`gemm_ring_check` rejects or a text longer than the microcode."""
    nr, c = _prologue(cfg, k, W, X, Y)
    Ln, Lb = local_len(n, nr), local_len(bsz, nr)
    if Ln % len(origins):
        raise RingError(f"{Ln} local rows of X do not split into {len(origins)} equal segments")
    sr = Ln // len(origins)
    pl = gemm_ring_plan(cfg, m, bsz, sr, origins)
    Li, Lc, p = pl["Li"], pl["Lc"], pl["p"]
    L, F, yb = Li * Lc, cfg.fpu_latency - 1, Y.bank
    own = [s for s, o in enumerate(origins) if o == k]
    x0 = X.base + own[0] * sr * Lb if own else None
    lines = ["stride ar1 = 1", f"stride ar2 = {Lb}", f"ar1 = {W.base}", f"ar3 = {Y.base}",
             f"ar2 = {x0}" if own else "nop"]
    ring = _pass_ring(cfg, k, origins, pl, Ln, (W.bank, X.bank))
    for bi in range(pl["Bi"]):
        for bc in range(pl["Bc"]):
            lines += ring + ["nop"] * F
            lines += [f"wr{yb} [ar3{f' + {i * Lb + cc}' if i * Lb + cc else ''}] = r{i * Lc + cc}"
                      for i in range(Li) for cc in range(Lc)]
            # the next pass's bases, by the same increments from pass to pass where they can be
            nbc = bc + 1 < pl["Bc"]
            d1 = -Ln if nbc else Li * Ln - Ln
            d3 = Lc if nbc else Li * Lb - (pl["Bc"] - 1) * Lc
            d2 = Lc - sr * Lb if nbc else -sr * Lb - (pl["Bc"] - 1) * Lc
            lines += [_add(cfg, 1, d1), _add(cfg, 3, d3), _add(cfg, 2, d2) if own else "nop"]
    assert len(lines) == pl["slots"], (len(lines), pl)
    pass_len = len(ring) + F + L + 3
    per = sorted({p, Lc * p, nr * Lc * p, sr * nr * Lc * p, 2 * sr * nr * Lc * p, pass_len, pl["Bc"] * pass_len})
    return RingFrag(_fold_text(cfg, lines, per, name), len(lines))


# -- the update: Y += alpha W X, X's column blocks from their owners -----------------------
def gemm_ring_update_plan(cfg, m: int, n: int, bsz: int, seg_cols: int) -> dict:
    """The blocking of :func:`gemm_ring_update_frag` with the fewest slots: ``Li``
    (divides ``ceil(m / nr)``), ``Lc`` (divides ``seg_cols``, so a pass's columns have one
    owner), ``p``, the passes in order (``(bi, bc, origin)``, column blocks outer), each
    pass's start at its origin and the slots."""
    nr, A, c = cfg.nr, cfg.acc_reuse_distance, cfg.cores
    mp, Ln, F = local_len(m, nr), local_len(n, nr), cfg.fpu_latency - 1
    bp = local_len(bsz, nr)
    best = None
    for li in (d for d in range(1, mp + 1) if mp % d == 0):
        for lc in (d for d in range(1, seg_cols + 1) if seg_cols % d == 0):
            if li * lc + (li > 1) + 1 > cfg.n_regs:
                continue
            p = max(li, -(-A // lc))
            beats = Ln * lc * nr
            blk = beats * p + F + li * lc + 3
            passes = [(bi, bc, bc * lc // seg_cols) for bc in range(bp // lc) for bi in range(mp // li)]
            S = [0]
            for (_, _, o0), (_, _, o1) in zip(passes, passes[1:]):
                S.append(S[-1] + blk + HOP * ((o1 - o0) % c))
            slots = 7 + li * lc + max(S[t] + HOP * h for t in range(len(passes)) for h in range(c)) + blk
            if best is None or (slots, mp // li) < (best["slots"], best["Bi"]):
                best = {"Li": li, "Lc": lc, "p": p, "beats": beats, "block": blk, "passes": passes, "S": S,
                        "slots": slots, "Bi": mp // li}
    if best is None:
        raise RingError(f"no GEMM blocking of {mp} x {seg_cols}-column passes fits {cfg.n_regs} registers")
    return best


def gemm_ring_update_frag(cfg, k: int, m: int, n: int, bsz: int, W, X, Y, alpha, seg_cols: int,
                          name: str = "gu") -> RingFrag:
    """Core ``k``'s ``Y += alpha (W X)`` (``W`` ``m x n`` and ``Y`` ``m x bsz`` in its SRAM,
    ``alpha`` a :class:`sw.kernels.Scalar`) with ``X`` (``n x bsz``) arriving over the
    ring: core ``s`` holds its local columns ``s seg_cols ..`` (an all-gather of column
    blocks, as ``A^T``'s for the minibatch update). Each pass (``Li x Lc`` outputs, its
    columns one core's) is a broadcast from that core; the passes follow each other at
    their origin as soon as it has written the previous one back (``fpu_latency - 1``
    slots, the ``Li Lc`` FMAs ``Y = alpha acc + Y`` in place, 3 address steps), each core
    taking a beat one ring hop after its predecessor. Every output is the chain of
    :func:`sw.kernels.emit_gemm` (``accumulate=True``): the same bits."""
    nr, c = _prologue(cfg, k, W, X, Y)
    Ln, LN = local_len(n, nr), local_len(bsz, nr)
    if seg_cols * c != LN:
        raise RingError(f"{LN} local columns of X are not {c} segments of {seg_cols}")
    pl = gemm_ring_update_plan(cfg, m, n, bsz, seg_cols)
    Li, Lc, L, F = pl["Li"], pl["Lc"], pl["Li"] * pl["Lc"], cfg.fpu_latency - 1
    ra, yb, ab = f"r{L + 1}", Y.bank, alpha.region.bank
    passes, S = pl["passes"], pl["S"]
    lines = ["nop"] * pl["slots"]
    # the accumulators start at -0, so every product is a mac (-0 + x = x: mul's bits)
    # and the passes have the same text
    lines[:7 + L] = ["stride ar1 = 1", f"stride ar2 = {LN}", f"ar3 = {alpha.region.base}",
                     f"rd{ab} [ar3] | mov {ra} = mem{ab}", f"ar1 = {W.base}", f"ar3 = {Y.base}",
                     f"ar2 = {X.base + k * seg_cols}"] + [f"mov r{i} = -0" for i in range(L)]
    for t, (bi, bc, o) in enumerate(passes):
        h = (k - o) % c
        t0 = 7 + L + S[t] + HOP * h
        _stream(cfg, lines, t0, h, pl["beats"], pl, Ln, (W.bank, X.bank), False)
        wb = t0 + pl["beats"] * pl["p"] + F
        for i in range(Li):
            for cc in range(Lc):
                off, a = i * LN + cc, i * Lc + cc
                lines[wb + a] = f"rd{yb} [ar3{f' + {off}' if off else ''}] | mac mem{yb} += {ra} * r{a}"
                if a:
                    lines[wb + a] += f" | mov r{a - 1} = -0"
        lines[wb + L] = f"mov r{L - 1} = -0"
        if t + 1 < len(passes):
            nbi, nbc, no = passes[t + 1]
            lines[wb + L] += " | " + _add(cfg, 1, (nbi - bi) * Li * Ln - Ln) if (nbi - bi) * Li * Ln != Ln else ""
            lines[wb + L + 1] = _add(cfg, 3, (nbi - bi) * Li * LN + (nbc - bc) * Lc)
            if h == 0 and no == o:
                lines[wb + L + 2] = _add(cfg, 2, (nbc - bc) * Lc - Ln * LN)
    per = sorted({pl["p"], Lc * pl["p"], nr * Lc * pl["p"], pl["block"], 2 * pl["block"], pl["Bi"] * pl["block"]})
    return RingFrag(_fold_text(cfg, lines, per, name), len(lines))
