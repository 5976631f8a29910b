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

__all__ = ["gemm_ring_plan", "gemm_ring_frag", "gemm_ring_check"]

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


def _add(cfg, r: int, d: int) -> str:
    d &= (1 << cfg.addr_bits) - 1
    return f"ar{r} += {d}" if d else "nop"


def _pass_ring(cfg, k: int, origins: list, pl: dict, Ln: int, banks) -> list:
    """Core ``k``'s slot texts of one pass's stream (every pass issues the same ones:
    the address registers carry the pass's bases)."""
    nr, c = cfg.nr, cfg.cores
    Li, Lc, p, beats = pl["Li"], pl["Lc"], pl["p"], pl["beats"]
    wb, xb = banks
    xr = f"r{Li * Lc}"
    T = _starts(cfg, origins, beats, p)
    ring = ["nop"] * _ring_len(cfg, origins, beats, p)
    for s, o in enumerate(origins):
        h = (k - o) % c
        for j in range(beats):
            jr, rest = divmod(j, nr * Lc)
            q, cc = divmod(rest, Lc)
            end = rest == nr * Lc - 1                 # the last beat of a local row of X
            first = s == 0 and jr == 0 and q == 0
            if h == 0:
                head = (f"rd{xb} [ar2{f' + {cc}' if cc else ''}]{'++' if end else ''} gate=cdrv | "
                        f"cdrv mem{xb} @row={q} | rout col")
            else:
                head = "rin col | rout col" if h < c - 1 else "rin col"
            t0 = T[s] + HOP * h + j * p
            for ii in range(Li):
                a = ii * Ln
                w = (f"rd{wb} [ar1{f' + {a}' if a else ''}]{'++' if end and ii == Li - 1 else ''} "
                     f"gate=rdrv | rdrv mem{wb} @col={q}")
                acc, src = f"r{ii * Lc + cc}", "col" if ii == 0 else xr
                fma = f"mul {acc} = row * {src}" if first else f"mac {acc} += row * {src}"
                txt = f"{w} | {fma}"
                if ii == 0:
                    txt = f"{head} | {txt}" + (f" | mov {xr} = col" if Li > 1 else "")
                if ring[t0 + ii] != "nop":             # pragma: no cover - a schedule bug
                    raise AssertionError(f"two beats in slot {t0 + ii} of core {k}")
                ring[t0 + ii] = txt
    return ring


def gemm_ring_frag(cfg, k: int, m: int, n: int, bsz: int, W, X, Y, origins: list,
                   name: str = "gr") -> RingFrag:
    """Core ``k``'s ``Y = W X`` with ``X`` (``n x bsz``, local row stride ``ceil(bsz /
    nr)``) arriving over the ring: ``origins[s]`` holds segment ``s`` (local rows ``s n_s
    .. (s + 1) n_s - 1``, ``n_s = ceil(n / nr) / len(origins)``) in SRAM; ``Y`` (``m x
    bsz``) is written on every core. Every core issues the same number of slots
    (:func:`gemm_ring_plan`). Raises :class:`sw.ring.RingError` for operands
    :func:`gemm_ring_check` rejects or a text longer than the microcode."""
    why = gemm_ring_check(cfg, W, X, Y)
    if why:
        raise RingError(why)
    nr, c = cfg.nr, cfg.cores
    if not 0 <= k < c:
        raise RingError(f"core {k} is not a core of the chip (cores={c})")
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
