"""The delta chains of a CP step beside the next head's forward GEMV (``chain_overlap``).

The reduce chains ``d_l`` (:func:`sw.train_cp_ops.chain_streams`) read the masked
partials ``e`` the head computes last and write the slices ``din`` the backward kernels
read after the forward GEMV; the forward GEMV reads ``W`` and ``ain`` and writes ``z``.
So the delta chains of step ``s`` can run at the start of the head of step ``s + 1``,
beside its GEMV: every core's head starts with the delta chains' slot texts
(:func:`sw.chain.schedule`, the same slots on every core, so the chains stay aligned),
and :func:`sw.overlap.merge_rows` puts the first ``k`` local rows of the GEMV, written as
straight-line instructions (:func:`gemv_lines`), into the chains' free slots; the other
rows run as :func:`sw.kernels.emit_gemv` after them. Each row's sum is the one
``emit_gemv`` computes (the same products in the same order, the same reduction
tree), so the golden is unchanged. The tail keeps the chains of the activations (``x``,
``a_{l+1}``), which read ``z`` of this head and write the ``ain`` the next GEMV reads.
"""

from __future__ import annotations

from functools import lru_cache

from sw.asm import mac, mov, mul
from sw.collectives import BusDir, Region, reduce_plan, step_slots
from sw.kernels import emit_gemv, gemv_cost
from sw.kernels.common import _lat
from sw.layout import local_len
from sw.overlap import merge_rows
from sw.train_ops import Op

__all__ = ["is_delta", "gemv_lines", "chains_with_gemv", "CHAIN_SPILL"]

#: instructions of the merged GEMV allowed past the chains' end, as a fraction of the
#: chains' slots (they are straight-line microcode)
CHAIN_SPILL = 0.25
#: ... but at least this many (short chains)
CHAIN_SPILL_MIN = 64


def is_delta(stream) -> bool:
    """Whether ``stream`` (:class:`sw.chain.Stream`) is a reduce chain ``d_l``."""
    return stream.name.startswith("d")


@lru_cache(maxsize=256)
def gemv_lines(cfg, k: int, n: int, W: Region, x: Region, y: Region, base: int) -> tuple:
    """The first ``k`` local rows of :func:`sw.kernels.emit_gemv`'s ``y = W x`` (``x`` in
    the cols layout, ``W`` with ``local_len(n)`` words per local row, ``y`` rows) as
    straight-line instruction texts: accumulators ``r{base} .. r{base + k - 1}``, ``x[0]``
    in ``r{base + k}``, the current ``x`` element in ``r{base + k + 1}``; per stream step
    ``max(k, A)`` instructions (the first multiplies, the others accumulate; the last one
    loads the next ``x`` element), then the tree reduction along the rows and the moves
    to ``y``. Immediate addresses, no AGUs, no loops: instructions may be spread out
    (distances only grow). A tuple (cached: the cores of a layer merge the same rows)."""
    nr = cfg.nr
    np_ = local_len(n, nr)
    F, A = _lat(cfg)
    Lc, P = max(k, A), max(k, F)
    W, x, y = W.bind(cfg), x.bind(cfg), y.bind(cfg)
    x0, xr = f"r{base + k}", f"r{base + k + 1}"
    rdir = BusDir("row")
    steps, root = reduce_plan(cfg, "tree")

    def line(*slots):
        return " | ".join(str(s) for s in slots) or "nop"
    out = [line(x.rd(0), mov(x0, x.src))]
    for s in range(np_):
        for c in range(Lc):
            sl = []
            if c < k:
                sl += [W.rd(c * np_ + s), mul(f"r{base + c}", W.src, x0) if s == 0 else
                       mac(f"r{base + c}", W.src, xr)]
            if c == Lc - 1 and s + 1 < np_:
                sl += [x.rd(s + 1), mov(xr, x.src)]
            out.append(line(*sl))
    out += ["nop"] * max(0, F - Lc)
    for st in steps:
        out += [line(*step_slots(rdir, st, base + c)) if c < k else "nop" for c in range(P)]
    out += [line(root.drive(rdir, f"r{base + c}"), y.wr(rdir.bus, c)) for c in range(k)]
    return tuple(out)


def _at(r: Region, off: int) -> Region:
    return Region(r.bank, r.base + off)


def chains_with_gemv(cfg, lines: list, rw: tuple, gemv=None) -> list:
    """A head's first ops: the delta chains' slot texts ``lines`` (this core's, of
    :func:`sw.chain.schedule`) with the first rows of the forward GEMV in their free
    slots, then the GEMV's other rows; ``rw``: the chains' ``(reads, writes)``.
    ``gemv = (m, n, W, ain, z)``: the GEMV (None: the chains alone). The number of rows
    merged minimizes the two ops' instructions, with at most :data:`CHAIN_SPILL` of the
    chains' slots (:data:`CHAIN_SPILL_MIN` instructions) past their end."""
    from sw.ring import ring_text

    reads, writes = rw

    def op(name, kind, text, n, rd, wr):
        def emit(b, text=text, n=n):
            b.text(text)
            return n
        return Op(name, kind, emit, reads=rd, writes=wr, stores=True, per_core=True, info={"issues": n})

    if gemv is None:
        return [op("chains_d", "ring", ring_text(cfg, lines, loop="chd_"), len(lines), reads, writes)]
    m, n, W, ain, z = gemv
    nr = cfg.nr
    mp, np_ = local_len(m, nr), local_len(n, nr)

    def rest(k):
        return gemv_cost(cfg, (mp - k) * nr, n)["instructions"] if k < mp else 0
    best = (len(lines) + rest(0), 0, list(lines))
    for k in range(1, min(mp, cfg.n_regs - 3) + 1):
        merged, _ = merge_rows(lines, [gemv_lines(cfg, k, n, W, ain, z, cfg.n_regs - k - 2)])
        if len(merged) - len(lines) > max(CHAIN_SPILL * len(lines), CHAIN_SPILL_MIN):
            break
        if (len(merged) + rest(k), k) < best[:2]:
            best = (len(merged) + rest(k), k, merged)
    _, k, merged = best
    rd = reads + [(W, k * np_), (ain, np_)] if k else reads
    wr = writes + [(z, k)] if k else writes
    ops = [op("chains_d" + (f"+gemv{k}" if k else ""), "ring+gemv" if k else "ring",
              ring_text(cfg, merged, loop="chd_"), len(merged), rd, wr)]
    ops[0].info["rows_merged"] = k
    if k < mp:
        W2, z2, m2 = _at(W, k * np_), _at(z, k), (mp - k) * nr
        ops.append(Op("gemv", "gemv", lambda b: emit_gemv(b, cfg, m2, n, W2, ain, z2, name="fw_").instructions,
                      reads=[(W2, (mp - k) * np_), (ain, np_)], writes=[(z2, mp - k)], stores=True))
    return ops
