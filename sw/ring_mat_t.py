"""The transposed broadcast: core ``root`` sends a 2D-layout block and every core, the
root included, stores its transpose (:func:`mat_broadcast_t`).

A beat of :class:`sw.ring_mat.MatBlock` ``src`` carries PE column ``q``'s word, lane
``i`` from PE ``(i, q)``: element ``(nr r + i, nr cc + q)`` of the matrix for local word
``(r, cc)``. Its transpose's element ``(nr cc + q, nr r + i)`` belongs in PE ``(q, i)`` at
local word ``(cc, r)``. A receiver therefore takes the beat on the *column* buses (lane
``i`` on column bus ``i``) and lets PE row ``q`` write it: the ring transposes the
matrix on the way, with no extra instruction. A minibatch step sends its input ``X``
this way instead of having the host load ``X^T`` as well (``sw/train_chip_mb.py``).

* root, send: ``rd [ar1 - q]++ gate=rdrv | rdrv mem @col=q | rout row``
* receiver: ``rin col | rout col | @row=q | wr [ar1]++ = col`` (every receiver passes
  the beat on; the last one passes it back to the root)
* root, receive (its own transpose, ``3 c`` slots after it sent the beat, often in the
  instruction that sends a later one): ``rin col | @row=q writes | wr [ar2 + o]++ = col``

The root's two address streams share instructions whose PE sets differ (PE column
``q`` reads, PE row ``q'`` writes), so the root uses no PE predicate: a *write
predicate* (``@row=q writes``, cores with a scratchpad) gates its writes only, and
``ar1`` / ``ar2`` step in every PE at every beat. Each stream adds its jump to the next
word once per word (``ar1`` on the word's last beat, ``ar2`` on a beat where ``ar1``
does not jump) and a constant offset per beat puts the access on the word. Receivers
step ``ar1`` by ``dst.ld`` (consecutive source columns are consecutive destination
rows) in PE row ``q`` only, as :mod:`sw.ring_mat` does by columns.

Slots: :func:`mat_broadcast_t_slots`, ``4 + 3 c + m`` on every core (four setup slots),
stall-free (every beat is taken exactly ``RING_HOP_CYCLES`` slots after it is sent).
"""

from __future__ import annotations

import numpy as np

from arch.config import RING_HOP_CYCLES
from sw.ring import RingError
from sw.ring_mat import MatBlock, RingFrag, _copy, _fold_text, _need, _periods

__all__ = ["mat_broadcast_t", "mat_broadcast_t_slots", "golden_mat_broadcast_t", "broadcast_t_why_not",
           "T_SETUP_SLOTS"]

#: setup slots: ``ar1 = ..``, ``stride ar1 = ..`` (and on the root ``ar2`` likewise)
T_SETUP_SLOTS = 4
HOP = RING_HOP_CYCLES


def mat_broadcast_t_slots(cfg, m: int) -> int:
    """``4 + 3 c + m``: setup, ``c`` hops (the last one back to the root), ``m`` beats."""
    return T_SETUP_SLOTS + HOP * cfg.cores + m


def _t_words(src: MatBlock, dst: MatBlock) -> list[int]:
    """``dst``'s address of the transpose of each of ``src``'s words, in beat-word order."""
    return [dst.base + (dst.r0 + cc) * dst.ld + dst.c0 + r for r in range(src.nrows) for cc in range(src.ncols)]


def broadcast_t_why_not(cfg) -> str | None:
    """Why the chip ``cfg`` cannot run :func:`mat_broadcast_t`, or None."""
    if cfg.cores < 2:
        return f"ring collectives need a chip (cfg.cores >= 2), got cores={cfg.cores}"
    if cfg.n_ar < 3:
        return f"a transposed broadcast uses address registers ar1 and ar2: n_ar={cfg.n_ar} is too few"
    if not cfg.spad_kib:
        return ("a transposed broadcast needs a write predicate on the root, which only cores with a scratchpad "
                "have (spad_kib > 0)")
    return None


def _check(cfg, k: int, src: MatBlock, dst: MatBlock, root: int) -> int:
    c = _need(cfg, k)
    why = broadcast_t_why_not(cfg)
    if why:
        raise RingError(why)
    if not 0 <= root < c:
        raise RingError(f"transposed broadcast root {root} is not a core (cores={c})")
    src.check(cfg, "transposed broadcast source")
    dst.check(cfg, "transposed broadcast destination")
    if dst.shape != (src.ncols, src.nrows):
        raise RingError(f"transposed broadcast: destination {dst.shape[0]} x {dst.shape[1]} local words is not the "
                        f"transpose of the source's {src.shape[0]} x {src.shape[1]}")
    if src.bank == dst.bank and set(src.words()) & set(_t_words(src, dst)):
        raise RingError("transposed broadcast: the destination overlaps the source")
    return c


def _stream(addrs: list[int], nr: int, fix_q: int) -> list[tuple[int, int]]:
    """Per beat ``(offset, jump)`` of an address register stepped by 1 at every beat,
    starting at ``addrs[0]``: the access is ``[ar + offset]``; on beat ``fix_q`` of each
    word ``ar += jump`` brings it to the next word's address by the word's end."""
    out, ar = [], addrs[0]
    for w, a in enumerate(addrs):
        jump = (addrs[w + 1] - a - nr) if w + 1 < len(addrs) else 0
        for q in range(nr):
            out.append((a - ar, jump if q == fix_q else 0))
            ar += 1 + (jump if q == fix_q else 0)
    return out


def _addr(ar: str, off: int) -> str:
    return f"[{ar}]" if off == 0 else f"[{ar} {'+' if off > 0 else '-'} {abs(off)}]"


def mat_broadcast_t(cfg, k: int, src: MatBlock, dst: MatBlock, root: int = 0, name: str = "mt") -> RingFrag:
    """Core ``k``'s part of a transposed broadcast (module docstring): after it every core,
    ``root`` included, holds at ``dst`` the transpose of ``root``'s ``src`` (``dst`` is
    ``src.ncols x src.nrows`` local words, not overlapping ``src``). The core ``h`` hops
    after the root takes beat ``j`` in slot ``4 + 3 h + j``, the root its own in ``4 +
    3 c + j``. :func:`mat_broadcast_t_slots` slots."""
    c = _check(cfg, k, src, dst, root)
    nr, mask = cfg.nr, (1 << cfg.addr_bits) - 1
    m = src.beats(nr)
    total = mat_broadcast_t_slots(cfg, m)
    lines = ["nop"] * total
    sb, db = src.bank, dst.bank
    taddr = _t_words(src, dst)
    h = (k - root) % c
    if h == 0:
        back = T_SETUP_SLOTS + HOP * c
        fix2 = (nr - 2 - back + T_SETUP_SLOTS) % nr         # ar2 jumps where ar1 does not
        lines[:T_SETUP_SLOTS] = [f"ar1 = {src.first}", "stride ar1 = 1", f"ar2 = {taddr[0]}", "stride ar2 = 1"]
        for j, (off, jump) in enumerate(_stream(src.words(), nr, nr - 1)):
            q = j % nr
            t = f"rd{sb} {_addr('ar1', off)}++ gate=rdrv | rdrv mem{sb} @col={q} | rout row"
            lines[T_SETUP_SLOTS + j] = t + (f" | ar1 += {jump & mask}" if jump & mask else "")
        for j, (off, jump) in enumerate(_stream(taddr, nr, fix2)):
            q = j % nr
            t = f"rin col | @row={q} writes | wr{db} {_addr('ar2', off)}++ = col"
            t += f" | ar2 += {jump & mask}" if jump & mask else ""
            s = back + j
            lines[s] = t if lines[s] == "nop" else f"{lines[s]} | {t}"
    else:
        lines[:2] = [f"ar1 = {taddr[0]}", f"stride ar1 = {dst.ld}"]
        nw = len(taddr)
        for j in range(m):
            w, q = divmod(j, nr)
            jump = (taddr[w + 1] - taddr[w] - dst.ld) if w + 1 < nw else 0
            t = f"rin col | rout col | @row={q} | wr{db} [ar1]++ = col"
            lines[T_SETUP_SLOTS + HOP * h + j] = t + (f" | ar1 += {jump & mask}" if jump & mask else "")
    return RingFrag(_fold_text(cfg, lines, _periods(nr, src), name), total)


def golden_mat_broadcast_t(cfg, mems, src: MatBlock, dst: MatBlock, root: int = 0):
    """Every core's ``dst`` (the root's too) gets the transpose of the root's ``src``: the
    value of PE ``(i, q)`` at ``src``'s word ``(r, cc)`` goes to PE ``(q, i)`` at ``dst``'s
    word ``(cc, r)``."""
    out = _copy(mems)
    vals = np.transpose(src.get(mems[root][src.bank]), (1, 0, 2))
    addrs = _t_words(src, dst)
    for k in range(len(mems)):
        out[k][dst.bank][:, :, addrs] = vals
    return out
