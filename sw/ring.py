"""Core-level collectives over the ring, as per-core programs, with numpy goldens and
exact cycle costs.

The ring links of a chip (``docs/chip.md``) carry *beats* of ``nr`` values. Every
collective here moves *segments* of ``m`` beats kept in the ``diag`` layout of
:mod:`sw.collectives`: beat ``j`` of a segment at SRAM address ``base + j`` of the
diagonal PEs, lane ``i`` in PE ``(i, i)``. A diagonal PE sits on row bus ``i`` and on
column bus ``i``, so a core can send a beat on one bus direction (``rdrv ... @diag=0 |
rout row``) while it receives another on the other (``rin col | @diag=0 wr... = col``):
send and receive overlap in every instruction.

Timing: a ``rout`` issued in cycle ``t`` can be taken by a ``rin`` issued in cycle
``t + 3`` on the next core (:data:`arch.config.RING_HOP_CYCLES`). The programs are
stall-free by construction: SPMD collectives (every core runs the same instruction
structure) receive exactly 3 slots after they send; the broadcast chain is aligned by
:func:`sim.ring_programs.align` from the chip model's issue traces. Each emitter returns one microcode image per core;
:func:`sim.chip_model.ChipModel` (both engines) and the chip RTL run them.

Collectives (``c`` cores, segments of ``m`` beats, ``L = cfg.fpu_latency``):

* :func:`emit_pass_along`: every core sends a segment to the next core. ``m + 3``
  cycles of traffic.
* :func:`broadcast_images`: core ``root``'s segment to every core; the others take and
  forward in one instruction (aligned by :func:`sim.ring_programs.emit_broadcast`). ``m + 3 (c - 1)`` cycles from the first send to the last
  take (the pipeline latency of ``c - 1`` hops).
* :func:`emit_all_gather`: every core's segment to every core, in one continuous stream
  per link: ``(c - 1) m`` beats per link, ``(c - 1) m + 3`` cycles (segments of at
  least 5 beats; shorter ones send ``m`` beats per 5 slots, ``(c - 2) 5 + m + 3``).
  The reference design's all-gather costs ``(n b - n b / c) / nr = (c - 1) m`` cycles.
* :func:`emit_reduce_scatter`: every core holds ``c`` partial segments; core ``k`` ends
  with the sum of segment ``k`` over all cores. ``c - 1`` steps of ``P = max(m + 3,
  L + 5)`` cycles: step ``t`` sends the segment summed in step ``t - 1`` while it adds the
  incoming one to its own partial (FMA write-back into SRAM, in place); banks alternate
  between steps so the send read and the add read never share a bank.

* :func:`emit_reduce`: the sum over all cores of one segment, at core ``root``: a chain
  from core ``root + 1`` round the ring; each core takes a beat, adds its own partial
  (FMA into a register) and passes the sum on ``L - 1`` cycles later, straight from the
  register; ``root`` writes the total back into its SRAM in place. ``m + (c - 1)(L + 2)``
  cycles from the first send to the last add (pipelined: a hop costs the link's 3 cycles
  plus the FMA's ``L - 1``).

Layouts (per core ``k``, addresses relative to ``base``) are given by
:func:`all_gather_layout` and :func:`reduce_scatter_layout`; the goldens
(:func:`golden_all_gather`, :func:`golden_reduce_scatter`) perform the array's additions
in the array's order.
"""

from __future__ import annotations

import numpy as np

from sw.asm import assemble
from arch.config import RING_HOP_CYCLES
from arch.errors import InputError

__all__ = ["RingError", "emit_pass_along", "broadcast_images", "emit_all_gather",
           "emit_reduce_scatter", "emit_reduce", "golden_reduce", "reduce_lines", "reduce_slots", "all_gather_layout", "reduce_scatter_layout", "golden_all_gather",
           "golden_reduce_scatter", "ag_min_stream", "fill_diag_program", "read_diag_program",
           "segment_beats", "beats_segment", "ring_text", "broadcast_lines", "broadcast_slots",
           "all_gather_lines", "all_gather_slots", "reduce_scatter_vec_lines", "reduce_scatter_vec_slots",
           "reduce_scatter_vec_check", "rsv_chunk", "gemv_ring_check", "reduce_stream_lines",
           "reduce_stream_slots", "reduce_stream_check", "reduce_stream_accs", "golden_reduce_stream"]

def ag_min_stream(cfg) -> int:
    """All-gather segments of at least this many beats run as one continuous stream: a
    forwarded beat arrives 3 slots after its predecessor sent it (the ring hop) and is
    read back from SRAM ``cfg.sram_read_distance`` slots after it was written (5; 6 with
    the receive stage)."""
    return 3 + cfg.sram_read_distance


class RingError(InputError):
    """A collective that does not fit the configuration."""


# -- program text -------------------------------------------------------------------------
def ring_text(cfg, lines: list[str], loop: str = "i") -> str:
    """Instruction texts (one per issue slot) -> assembly text without a HALT, runs of
    equal texts folded into zero-overhead loops (named ``loop``); it issues exactly
    ``len(lines)`` instructions. For embedding a collective in a larger program
    (:meth:`sw.asm.Builder.text`)."""
    return "\n".join(_fold(cfg, lines, loop))


def _fold(cfg, lines: list[str], loop: str = "i") -> list[str]:
    out = []
    limit = (1 << cfg.loop_bits) - 1
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j] == lines[i]:
            j += 1
        n = j - i
        text = lines[i]
        while n > 0:
            if n == 1:
                out.append(text)
                n = 0
            else:
                k = min(n - 1, limit)
                out.append(f"{text} | loop {loop} {k} {{")
                out.append(text)
                out.append("}")
                n -= k + 1
        i = j
    return out


def _emit(cfg, lines: list[str]) -> list[int]:
    """Instruction texts (one per slot) -> microcode; runs of equal texts become loops."""
    out = _fold(cfg, lines)
    out.append("halt")
    if len([x for x in out if x != "}"]) > cfg.ucode_depth:
        raise RingError(f"the collective's program needs more than ucode_depth={cfg.ucode_depth} instructions")
    return assemble("\n".join(out), cfg).words()


def _rd(bank: str, ar: int, extra: str = "") -> str:
    return f"rd{bank} [ar{ar}]++{extra}"


def _setup(pairs) -> list[str]:
    """Address-register setup, one instruction per register: ``ar = base``, stride 1."""
    lines = []
    for ar, base in pairs:
        lines.append(f"ar{ar} = {base}")
        lines.append(f"stride ar{ar} = 1")
    return lines


def _check_bank(cfg, bank: str, base: int, n: int, what: str):
    depth = cfg.mem_a_words if bank == "a" else cfg.mem_b_words
    if base < 0 or base + n > depth:
        raise RingError(f"{what}: {n} beats at {base} do not fit SRAM {bank.upper()} ({depth} words)")


def _need_chip(cfg):
    if cfg.cores < 2:
        raise RingError(f"ring collectives need a chip (cfg.cores >= 2), got cores={cfg.cores}")


def _send(bank: str, ar: int) -> str:
    return f"{_rd(bank, ar, ' gate=rdrv')} | rdrv mem{bank} @diag=0 | rout row"


def _recv(bank: str, ar: int, fwd: bool = False) -> str:
    return f"rin col | @diag=0 | wr{bank} [ar{ar}]++ = col" + (" | rout col" if fwd else "")


def _join(*parts) -> str:
    return " | ".join(p for p in parts if p) or "nop"


# -- pass-along ---------------------------------------------------------------------------
def emit_pass_along(cfg, m: int, src: tuple[str, int] = ("a", 0), dst: tuple[str, int] = ("b", 0)):
    """Every core sends segment ``src`` (bank, base) to the next core, which stores it at
    ``dst``. Returns one image per core (all the same)."""
    _need_chip(cfg)
    (sb, s0), (db, d0) = src, dst
    _check_bank(cfg, sb, s0, m, "pass-along source")
    _check_bank(cfg, db, d0, m, "pass-along destination")
    if sb == db and s0 < d0 + m and d0 < s0 + m:
        raise RingError("pass-along: source and destination overlap")
    lines = _setup([(1, s0), (2, d0)])
    for q in range(m + 3):
        lines.append(_join(_send(sb, 1) if q < m else "", _recv(db, 2) if q >= 3 else ""))
    return [_emit(cfg, lines)] * cfg.cores


# -- broadcast ----------------------------------------------------------------------------
def broadcast_images(cfg, m: int, root: int = 0, src: tuple[str, int] = ("a", 0),
                     dst: tuple[str, int] = ("a", 0), waits=None) -> list:
    """Core ``root``'s segment ``src`` to ``dst`` on every other core (take, store and
    forward in one instruction): one image per core, core ``k`` waiting ``waits[k]``
    slots (no-ops) before its first ring instruction. :func:`sim.ring_programs.emit_broadcast`
    finds the waits that make it stall-free."""
    _need_chip(cfg)
    c = cfg.cores
    if not 0 <= root < c:
        raise RingError(f"broadcast root {root} is not a core (cores={c})")
    (sb, s0), (db, d0) = src, dst
    _check_bank(cfg, sb, s0, m, "broadcast source")
    _check_bank(cfg, db, d0, m, "broadcast destination")
    waits = waits or [0] * c
    imgs = []
    for k in range(c):
        h = (k - root) % c
        lines = _setup([(1, s0)]) if h == 0 else _setup([(2, d0)])
        lines += ["nop"] * waits[k]
        if h == 0:
            lines += [_send(sb, 1)] * m
        else:
            lines += [_recv(db, 2, fwd=h < c - 1)] * m
        imgs.append(_emit(cfg, lines))
    return imgs


# -- all-gather ---------------------------------------------------------------------------
def all_gather_layout(cfg, k: int, m: int, base: int = 0) -> dict[int, int]:
    """Core ``k``: segment index -> SRAM A address of its first beat. Core ``k``'s own
    segment is at ``base``; after the all-gather, segment ``(k - t) mod c`` is at
    ``base + t m`` (step order: the ring brings them in that order)."""
    c = cfg.cores
    return {(k - t) % c: base + t * m for t in range(c)}


def emit_all_gather(cfg, m: int, base: int = 0):
    """All-gather of one ``m``-beat segment per core, in SRAM A of the diagonal PEs at
    :func:`all_gather_layout`. Returns one image per core (all the same)."""
    return [_emit(cfg, all_gather_lines(cfg, m, "a", base))] * cfg.cores


def _ag_slots(cfg, m: int, n: int) -> list[int]:
    """Send slot of stream beat ``j < n``: ``m`` beats per period of ``max(m,
    ag_min_stream(cfg))`` slots (a forwarded beat is read back from SRAM
    ``sram_read_distance`` slots after its write or later, which is 3 slots after it
    arrived: ``S(j + m) >= S(j) + 3 + sram_read_distance``)."""
    P = max(m, ag_min_stream(cfg))
    return [(j // m) * P + j % m for j in range(n)]


def golden_all_gather(segments: list[np.ndarray]) -> list[np.ndarray]:
    """Per core, the gathered beats in its step order (``[c * m, nr]`` each)."""
    c = len(segments)
    return [np.concatenate([segments[(k - t) % c] for t in range(c)]) for k in range(c)]


# -- reduce-scatter -----------------------------------------------------------------------
def _rs_banks(t: int) -> str:
    """Bank of the partials added (in place) in step ``t``."""
    return "a" if t % 2 == 0 else "b"


def rs_period(cfg, m: int) -> int:
    return max(m + 3, cfg.fpu_latency + 5)


def reduce_scatter_layout(cfg, k: int, m: int, base: int = 0) -> dict[int, tuple[str, int]]:
    """Core ``k``: segment index -> (bank, address) of its partial before the
    reduce-scatter. The step-``t`` segment ``(k - 1 - t) mod c`` is at ``base + t m``; the
    one sent first (``t = 0``) in bank B, the others in the bank their step adds into.
    After the run, the sum of segment ``k`` is at the last entry (segment ``k``)."""
    c = cfg.cores
    out = {}
    for t in range(c):
        s = (k - 1 - t) % c
        out[s] = ("b" if t == 0 else _rs_banks(t - 1), base + t * m)
    return out


def emit_reduce_scatter(cfg, m: int, base: int = 0):
    """Reduce-scatter of ``c`` partial segments per core (:func:`reduce_scatter_layout`).
    Returns one image per core (all the same)."""
    _need_chip(cfg)
    c = cfg.cores
    for bank in ("a", "b"):
        _check_bank(cfg, bank, base, c * m, "reduce-scatter")
    P = rs_period(cfg, m)
    lines = _setup([(1, base), (2, base + m)])
    for t in range(c - 1):
        sb = "b" if t == 0 else _rs_banks(t - 1)     # what step t sends
        wb = _rs_banks(t)                             # where step t adds
        assert sb != wb
        add = f"rd{wb} [ar2]++ gate=pred | @diag=0 | mac mem{wb} += col * 1 | rin col"
        for q in range(P):
            lines.append(_join(_send(sb, 1) if q < m else "", add if 3 <= q < m + 3 else ""))
    return [_emit(cfg, lines)] * c


def golden_reduce_scatter(cfg, partials: list[list[np.ndarray]]) -> list[np.ndarray]:
    """``partials[k][s]``: core ``k``'s partial of segment ``s`` (format bit patterns,
    ``[m, nr]``). Returns, per core ``k``, the sum of segment ``k`` as the ring forms it:
    ``acc = p[k+1][k]``, then ``acc = fmt(acc + p[j][k])`` for ``j = k+2, ..., k+c``
    (mod ``c``), each addition an FMA ``acc * 1 + p``."""
    from pe.fp_golden import mac_bits

    fmt = cfg.fmt
    c = len(partials)
    one = np.full(partials[0][0].shape, int(fmt.from_float(np.array([1.0]))[0]), dtype=partials[0][0].dtype)
    out = []
    for k in range(c):
        acc = partials[(k + 1) % c][k]
        for h in range(2, c + 1):
            acc = mac_bits(fmt, acc, one, partials[(k + h) % c][k])
        out.append(acc)
    return out


# -- reduce -------------------------------------------------------------------------------
def emit_reduce(cfg, m: int, root: int = 0, base: int = 0, bank: str = "a"):
    """Sum of every core's segment at ``(bank, base)``, left in place at core ``root``
    (other cores' segments unchanged). Returns one image per core (:func:`reduce_lines`
    and a HALT): stall-free, :func:`reduce_slots` slots."""
    return [_emit(cfg, reduce_lines(cfg, k, m, bank, base, root)) for k in range(cfg.cores)]


def _reduce_cores(cfg, root: int, k: int) -> int:
    """The chip's core count, after checking that ``root`` and ``k`` are cores of it."""
    _need_chip(cfg)
    c = cfg.cores
    if not 0 <= root < c:
        raise RingError(f"reduce root {root} is not a core (cores={c})")
    if not 0 <= k < c:
        raise RingError(f"core {k} is not a core of the chip (cores={c})")
    return c


def reduce_lines(cfg, k: int, m: int, bank: str, base: int, root: int = 0) -> list[str]:
    """Core ``k``'s slots of a reduce of ``m`` beats (diag layout) at ``(bank, base)`` onto
    ``root``, in place (the other cores' segments are unchanged), as a chain from core
    ``root + 1``: it sends beat ``q`` in slot ``2 + q``; the core ``h`` hops on takes it in
    ``R_h + q`` (``R_1 = 5``, ``R_{h+1} = R_h + L + 2``), adds its own partial into ``r0``
    (one register: the sum of slot ``q`` is sent ``L - 1`` slots later, the next add's
    result lands one slot after that) and sends the sum; ``root`` adds with an FMA writing
    back in place. One beat per slot (beats arrive on the column buses, leave on the row
    buses). Additions in the order of :func:`golden_reduce`. :func:`reduce_slots` slots
    on every core (the sum is in SRAM when they end); uses ``ar1``/``ar2`` and ``r0``."""
    c = _reduce_cores(cfg, root, k)
    if m < 1:
        raise RingError(f"a reduce needs at least one beat, got {m}")
    _check_bank(cfg, bank, base, m, "reduce")
    lat = cfg.fpu_latency - 1          # an FMA result is a source this many slots after its issue
    h = (k - root - 1) % c             # hops from the chain's origin (root + 1); root is h = c - 1
    total = reduce_slots(cfg, m)
    if h == 0:
        lines = _setup([(1, base)]) + [_send(bank, 1)] * m
    else:
        lines = _setup([(2, base)]) + ["nop"] * (3 + (h - 1) * (lat + 3))
        rd = f"rin col | rd{bank} [ar2]++ gate=pred | @diag=0"
        if h == c - 1:
            lines += [f"{rd} | mac mem{bank} += col * 1"] * m
        else:
            lines += [_join(f"{rd} | add r0 = col + mem{bank}" if q < m else "",
                            "rdrv r0 @diag=0 | rout row" if q >= lat else "") for q in range(m + lat)]
    return lines + ["nop"] * (total - len(lines))


def reduce_slots(cfg, m: int) -> int:
    """``2 + 3 + (c - 2)(L + 2) + m - 1 + L``: setup, the chain's hops, ``m`` beats, and
    the root's last FMA (``L = fpu_latency``)."""
    c, L = cfg.cores, cfg.fpu_latency
    return 2 + 3 + (c - 2) * (L + 2) + m - 1 + L


def reduce_stream_check(cfg, m: int) -> str | None:
    """Why :func:`reduce_stream_lines` cannot reduce ``m`` beats on ``cfg``, or None: the
    root needs :func:`reduce_stream_accs` registers per beat, and a core forwarding a
    continuous stream keeps up to ``m - 2`` beats in its receive FIFO."""
    if cfg.cores < 2:
        return f"a ring needs cores >= 2, got {cfg.cores}"
    if m < 1:
        return f"a reduce needs at least one beat, got {m}"
    if reduce_stream_accs(cfg, m) * m > cfg.n_regs:
        return f"{m} beats need {reduce_stream_accs(cfg, m) * m} registers at the root, the PE has {cfg.n_regs}"
    if m + 2 > cfg.ring_fifo_depth:
        return f"{m}-beat partials need a receive FIFO of {m + 2} beats, it has {cfg.ring_fifo_depth}"
    return None


def reduce_stream_accs(cfg, m: int) -> int:
    """Accumulators per beat at the root of :func:`reduce_stream_lines`: the partials of
    one beat arrive ``max(m, 3)`` slots apart, an add's result is a source
    ``fpu_latency - 1`` slots after its issue; at most ``c - 1``."""
    return min(-(-(cfg.fpu_latency - 1) // max(m, RING_HOP_CYCLES)), cfg.cores - 1)


def _stream_slot(m: int, i: int) -> int:
    """Send slot of beat ``i`` of a core's outgoing stream (own ``m`` beats, then the
    predecessor's stream as it arrives): continuous for ``m >= 3``."""
    return i % m + max(m, RING_HOP_CYCLES) * (i // m)


def reduce_stream_lines(cfg, k: int, m: int, bank: str, base: int, root: int = 0) -> list[str]:
    """Core ``k``'s slots of a reduce of ``m`` beats (diag layout) at ``(bank, base)`` onto
    ``root``, in place, as one stream: every other core sends its own partial and then
    passes on (``rin col | rout col``) the stream of its predecessor, so the root takes
    the ``c - 1`` partials one beat per slot (:func:`_stream_slot`), the nearest first,
    and adds each into one of ``K`` register accumulators per beat
    (:func:`reduce_stream_accs`, the first ``K`` partials moved in); it then adds the
    accumulators into the first and that into its own partial with an FMA writing back in
    place. Additions in the order of :func:`golden_reduce_stream`. The same number of
    slots on every core (:func:`reduce_stream_slots`); uses ``ar1``/``ar2`` and the
    root's registers ``r0 .. r(K m - 1)``. Stall-free when :func:`reduce_stream_check`
    passes (it raises :class:`RingError` otherwise)."""
    c = _reduce_cores(cfg, root, k)
    why = reduce_stream_check(cfg, m)
    if why:
        raise RingError(f"stream reduce: {why}")
    _check_bank(cfg, bank, base, m, "reduce")
    F, K, n_in = cfg.fpu_latency - 1, reduce_stream_accs(cfg, m), (c - 1) * m
    last = _stream_slot(m, n_in - 1) + RING_HOP_CYCLES          # the root's last take
    D = max(m, F)
    total = reduce_stream_slots(cfg, m)
    h = (k - root - 1) % c
    body = [""] * (total - 2)
    if h < c - 1:
        for i in range((h + 1) * m):
            body[_stream_slot(m, i)] = _send(bank, 1) if i < m else "rin col | rout col"
        return _setup([(1, base)]) + [x or "nop" for x in body]
    for i in range(n_in):
        a, q = divmod(i, m)
        r = f"r{(a % K) * m + q}"
        body[_stream_slot(m, i) + RING_HOP_CYCLES] = (f"rin col | mov {r} = col" if a < K else
                                                     f"rin col | add {r} = col + {r}")
    for j in range(1, K):
        for q in range(m):
            body[last + F + (j - 1) * D + q] = f"add r{q} = r{j * m + q} + r{q}"
    for q in range(m):
        body[last + F + (K - 1) * D + q] = f"rd{bank} [ar2]++ gate=pred | @diag=0 | mac mem{bank} += r{q} * 1"
    return _setup([(2, base)]) + [x or "nop" for x in body]


def reduce_stream_slots(cfg, m: int) -> int:
    """Slots of :func:`reduce_stream_lines`: setup, the stream (the root's last take
    ``(c - 2) max(m, 3) + m - 1 + 3``), ``fpu_latency - 1`` for its add, ``K - 1``
    rounds of adding the accumulators (``max(m, fpu_latency - 1)`` apart), the ``m``
    final FMAs."""
    F, K = cfg.fpu_latency - 1, reduce_stream_accs(cfg, m)
    last = _stream_slot(m, (cfg.cores - 1) * m - 1) + RING_HOP_CYCLES
    return 2 + last + F + (K - 1) * max(m, F) + m


def golden_reduce_stream(cfg, segments: list[np.ndarray], root: int = 0) -> np.ndarray:
    """The root's total as :func:`reduce_stream_lines` forms it: the partials of cores
    ``root - 1, root - 2, ..`` (mod ``c``) in turn into accumulator ``a mod K`` (the
    first ``K`` moved in, then ``acc = fmt(p * 1 + acc)``), ``T = acc_0``, ``T =
    fmt(acc_j * 1 + T)`` for ``j = 1 .. K - 1``, the total ``fmt(T * 1 + p[root])``."""
    from pe.fp_golden import mac_bits

    fmt, c = cfg.fmt, len(segments)
    one = np.full(segments[0].shape, int(fmt.from_float(np.array([1.0]))[0]), dtype=segments[0].dtype)
    K = reduce_stream_accs(cfg, -(-segments[0].size // cfg.nr))          # m beats of nr values
    acc = [None] * K
    for a in range(c - 1):
        p = segments[(root - 1 - a) % c]
        acc[a % K] = p if acc[a % K] is None else mac_bits(fmt, p, one, acc[a % K])
    T = acc[0]
    for j in range(1, K):
        T = mac_bits(fmt, acc[j], one, T)
    return mac_bits(fmt, T, one, segments[root])


def golden_reduce(cfg, segments: list[np.ndarray], root: int = 0) -> np.ndarray:
    """The root's total: ``acc = p[root+1]``, then ``acc = fmt(acc * 1 + p[root+h])`` for
    ``h = 2 .. c`` (mod ``c``; the root's own partial last)."""
    from pe.fp_golden import mac_bits

    fmt = cfg.fmt
    c = len(segments)
    one = np.full(segments[0].shape, int(fmt.from_float(np.array([1.0]))[0]), dtype=segments[0].dtype)
    acc = segments[(root + 1) % c]
    for h in range(2, c + 1):
        acc = mac_bits(fmt, acc, one, segments[(root + h) % c])
    return acc


# -- host side: segments in and out of the diag layout ------------------------------------
def fill_diag_program(cfg, bank: str, base: int, n: int) -> list[int]:
    """Microcode: ``n`` host beats -> ``bank[base .. base+n-1]`` of the diagonal PEs (lane
    ``i`` -> PE ``(i, i)``)."""
    return assemble(f"ar0 = {base}\nstride ar0 = 1\nloop i {n} {{\n hin row | @diag=0 | "
                    f"wr{bank} [ar0]++ = row\n}}\nhalt", cfg).words()


def read_diag_program(cfg, bank: str, base: int, n: int) -> list[int]:
    """Microcode: ``bank[base .. base+n-1]`` of the diagonal PEs -> ``n`` host beats."""
    return assemble(f"ar0 = {base}\nstride ar0 = 1\nloop i {n} {{\n rd{bank} [ar0]++ gate=rdrv | "
                    f"rdrv mem{bank} @diag=0 | hout row\n}}\nhalt", cfg).words()


def segment_beats(cfg, seg) -> list[int]:
    """A segment ``[m, nr]`` of bit patterns -> ``m`` beats (lane ``i`` = column ``i``)."""
    w = cfg.fmt.width
    return [sum(int(v) << (i * w) for i, v in enumerate(row)) for row in seg]


def beats_segment(cfg, beats) -> np.ndarray:
    """Beats (ints or objects with ``.data``) -> a segment ``[m, nr]`` of bit patterns."""
    w, mask = cfg.fmt.width, (1 << cfg.fmt.width) - 1
    data = [int(getattr(b, "data", b)) for b in beats]
    return np.array([[(d >> (i * w)) & mask for i in range(cfg.nr)] for d in data], dtype=cfg.fmt.np_uint)


# -- fragments of larger programs (training steps) -----------------------------------------
# The functions below return a core's instruction texts, one per issue slot, for a
# collective embedded in a longer program (``ring_text`` folds them into loops for
# :meth:`sw.asm.Builder.text`). Every core reaches the fragment in the same cycle (the
# instructions before it issue the same number of slots on every core) and every
# fragment issues the same number of slots on every core, so a program can chain them.
# They use PE address registers ``ar1``/``ar2`` (the kernels use ``ar0`` + AGUs) and, for
# the reduce-scatter, registers ``r0 .. r{2s-1}``.
def broadcast_lines(cfg, k: int, m: int, src: tuple[str, int], dst: tuple[str, int], root: int = 0) -> list[str]:
    """Core ``k``'s slots of a broadcast of ``m`` beats (diag layout) from ``src`` on core
    ``root`` to ``dst`` on every other core: ``2 + 3 (c - 1) + m`` slots on every core. The
    core ``h`` hops after the root waits ``3 h`` slots, takes (and, unless it is the last,
    forwards) ``m`` beats, then waits ``3 (c - 1 - h)`` slots."""
    _need_chip(cfg)
    c = cfg.cores
    h = (k - root) % c
    (sb, s0), (db, d0) = src, dst
    _check_bank(cfg, sb, s0, m, "broadcast source")
    _check_bank(cfg, db, d0, m, "broadcast destination")
    if h == 0:
        return _setup([(1, s0)]) + [_send(sb, 1)] * m + ["nop"] * (3 * (c - 1))
    return _setup([(2, d0)]) + ["nop"] * (3 * h) + [_recv(db, 2, fwd=h < c - 1)] * m + ["nop"] * (3 * (c - 1 - h))


def broadcast_slots(cfg, m: int) -> int:
    return 2 + 3 * (cfg.cores - 1) + m


def all_gather_lines(cfg, m: int, bank: str, base: int) -> list[str]:
    """The all-gather (the same on every core) in ``bank``: own segment at ``base``, the
    gathered ones in step order after it (:func:`all_gather_layout`). Beat ``q`` of the
    outgoing stream (the own segment, then the forwarded ones read back from SRAM) is
    sent at slot ``S(q)`` and the beat from the predecessor taken at ``S(q) + 3`` and
    stored at ``base + m + q``; ``S`` is continuous for ``m >= M`` and leaves ``M - m``
    empty slots per ``m`` beats for shorter segments (``M =``
    :func:`ag_min_stream`, :func:`_ag_slots`).
    :func:`all_gather_slots` slots."""
    _need_chip(cfg)
    c = cfg.cores
    _check_bank(cfg, bank, base, c * m, "all-gather")
    lines = _setup([(1, base), (2, base + m)])
    S = _ag_slots(cfg, m, (c - 1) * m)
    send, recv = set(S), {t + 3 for t in S}
    for q in range(S[-1] + 4):
        lines.append(_join(_send(bank, 1) if q in send else "", _recv(bank, 2) if q in recv else ""))
    return lines


def all_gather_slots(cfg, m: int) -> int:
    """``4 + (c - 1) m + 3`` for ``m >= M``; shorter segments ``4 + (c - 2) M + m + 3``
    (``M =`` :func:`ag_min_stream`)."""
    c = cfg.cores
    return 4 + _ag_slots(cfg, m, (c - 1) * m)[-1] + 4


def gemv_ring_check(cfg, m: int, lc: int) -> str | None:
    """Why an all-gather of ``m``-beat segments cannot run inside the GEMV that consumes
    it (``x_ring`` of :func:`sw.kernels.emit_gemv`, ``lc`` instructions per stream
    step), or None. The GEMV loads beat ``j`` of the gathered input at its instruction
    ``j lc`` (from the diagonal for the own segment, ``rin`` after it) and sends it on in
    the same instruction (``rout col``); the next core loads it as its beat ``m + j``,
    ``m lc`` slots later: at least the hop (:data:`arch.config.RING_HOP_CYCLES`), and the
    ``m`` beats in flight per link (plus the pop and the pushes under way) within the
    receive FIFO's credit."""
    if cfg.cores < 2:
        return f"a ring needs cores >= 2, got {cfg.cores}"
    if m * lc < RING_HOP_CYCLES:
        return f"{m} beats of {lc} instructions each are shorter than the ring hop ({RING_HOP_CYCLES} cycles)"
    if m + 3 > cfg.ring_fifo_depth:
        return f"{m}-beat segments need a receive FIFO of {m + 3} beats, it has {cfg.ring_fifo_depth}"
    return None


def _rsv_timing(cfg, s: int) -> tuple[int, int, int]:
    """(first add slot of step 0, period of step 0, period of the later steps)."""
    a0 = max(3, s)
    return a0, a0 + max(s, cfg.fpu_latency - 1), max(s + 3, cfg.fpu_latency + 2)


def rsv_chunk(cfg) -> int:
    """Most beats per segment one register reduce-scatter pass handles: ``2 r``
    registers, and the ``r - 3`` beats step 0 leaves waiting in the ring FIFO."""
    return max(1, min(cfg.n_regs // 2, cfg.ring_fifo_depth - 1))


def reduce_scatter_vec_check(cfg, s: int) -> None:
    """Raise :class:`RingError` unless :func:`reduce_scatter_vec_lines` supports ``s``."""
    if s < 1:
        raise RingError(f"reduce-scatter segments need at least one beat, got {s}")
    if cfg.n_regs < 2:
        raise RingError(f"a register reduce-scatter needs 2 registers, the PE has n_regs={cfg.n_regs}")


def _chunks(cfg, s: int, chunk: int | None = None) -> list[tuple[int, int]]:
    r = rsv_chunk(cfg) if chunk is None else max(1, min(chunk, rsv_chunk(cfg)))
    n = -(-s // r)
    sizes = [s // n + (1 if i < s % n else 0) for i in range(n)]
    out, off = [], 0
    for z in sizes:
        out.append((off, z))
        off += z
    return out


def reduce_scatter_vec_lines(cfg, s: int, bank: str, base: int, chunk: int | None = None) -> list[str]:
    """Reduce-scatter of a vector of ``c`` segments of ``s`` beats (diag layout) held by
    every core in one region, in the step order of :func:`all_gather_layout` (on core
    ``k`` segment ``(k - t) mod c`` at ``base + t s``): core ``k`` ends with the sum over
    the cores of segment ``k`` at ``base`` (in place; the rest of the region keeps
    partials). Step ``t`` (``c - 1`` steps) sends segment ``(k - 1 - t) mod c`` (its own
    partial from SRAM in step 0, after that the sum it formed in registers in step
    ``t - 1``) while it adds the incoming beats of segment ``(k - 2 - t) mod c`` to its
    own partial into registers (``add r = col + mem``, two register sets alternating by
    step); the last step adds with an FMA writing the total back into SRAM. Segments
    longer than :func:`rsv_chunk` beats (or ``chunk``, when smaller: it uses registers
    ``r0 .. r(2 chunk - 1)``) run as several passes over chunks of them.
    Order of the additions: that of :func:`golden_reduce_scatter` (any chunking).
    :func:`reduce_scatter_vec_slots` slots; uses registers ``r0 ..``."""
    _need_chip(cfg)
    reduce_scatter_vec_check(cfg, s)
    _check_bank(cfg, bank, base, cfg.cores * s, "reduce-scatter")
    lines = []
    for off, z in _chunks(cfg, s, chunk):
        lines += _rsv_pass(cfg, z, s, bank, base + off)
    return lines


def _rsv_pass(cfg, s: int, stride: int, bank: str, base: int) -> list[str]:
    """One pass: ``c`` segments of ``s`` beats at ``base + t stride``."""
    c = cfg.cores
    a0, p0, p = _rsv_timing(cfg, s)

    def seg(t):                                 # address of the step-t add's segment
        return base + ((t + 2) % c) * stride

    # ar1: the step-0 send (segment k - 1 at base + stride); ar2: the adds, set per step
    lines = _setup([(1, base + stride), (2, seg(0))])
    for t in range(c - 1):
        last = t == c - 2
        first_add = a0 if t == 0 else 3
        period = first_add + s if last else (p0 if t == 0 else p)
        for q in range(period):
            parts = []
            if q < s:
                parts.append(_send(bank, 1) if t == 0 else f"rdrv r{((t - 1) % 2) * s + q} @diag=0 | rout row")
            if t > 0 and q == 0 and seg(t) != seg(t - 1) + s:
                parts.append(f"ar2 = {seg(t)}")
            j = q - first_add
            if 0 <= j < s:
                rd = f"rin col | rd{bank} [ar2]++ gate=pred | @diag=0"
                parts.append(f"{rd} | mac mem{bank} += col * 1" if last else
                             f"{rd} | add r{(t % 2) * s + j} = col + mem{bank}")
            lines.append(_join(*parts))
    return lines


def reduce_scatter_vec_slots(cfg, s: int, chunk: int | None = None) -> int:
    """Slots of :func:`reduce_scatter_vec_lines`: per pass its setup, step 0, the middle
    steps, and the last step up to its last add."""
    c, tot = cfg.cores, 0
    for _, z in _chunks(cfg, s, chunk):
        a0, p0, p = _rsv_timing(cfg, z)
        tot += 4 + (a0 + z if c == 2 else p0 + (c - 3) * p + 3 + z)
    return tot
