"""A CP head whose paged panel also has resident rows (``SpadPanel.hide``): the pages'
scratchpad moves run inside the resident rows' forward GEMV.

A page moves through the scratchpad port one PE row at a time: a load writes PE row
``k`` of the page buffer from the column buses (``sin col | @row=k writes | wra``), a
store reads it onto them (``rda gate=cdrv | cdrv mema @row=k | sout col``). The forward
GEMV of the resident rows (``z = W ain``) multiplies in every PE and leaves the scratchpad
stream, the column buses and, in most instructions, the write ports free; a load's
predicate is a *write predicate* (``writes``: it gates the SRAM writes only), so the two
share instructions (:func:`sw.overlap.merge_rows`). The rows in bank A (``WR``) read their
weights from bank A in every MAC: they host the loads; the rows in bank B (``WB``) read
bank A only for their next ``x`` element: they host the stores (and the loads when the
rows in bank A run out).

The page buffer holds one page, so the head visits the pages first (load inside a block
of the forward GEMV, the page's own kernels, store inside another block), then runs the
resident rows' remaining forward rows and their backward kernels. The resident rows'
forward GEMV is written as straight-line blocks of up to ``n_regs - 2`` local rows
(:func:`sw.train_cp_overlap.gemv_lines`: each row's sum is :func:`sw.kernels.emit_gemv`'s,
the same products in the same order); only the blocks that host moves are straight-line,
the rows after them run as :func:`sw.kernels.emit_gemv`. The parts' sums of ``W^T d``
(``l >= 1``) are added in the new order, pages first: :meth:`SpadPanel.row_pages` gives
the golden trainers that order.
"""

from __future__ import annotations

from sw.asm import cdrv, pred, sin, sout
from sw.kernels import emit_gemv
from sw.layout import local_len
from sw.overlap import merge_rows
from sw.ring import ring_text
from sw.train_cp_overlap import _at, gemv_lines
from sw.train_ops import Op
from sw.train_paging import spad_op

__all__ = ["hidden_pages_head", "move_lines"]


def move_lines(cfg, WP, words: int, store: bool) -> list:
    """The straight-line instruction texts of one page move between the page buffer ``WP``
    (``words`` per PE) and the scratchpad, in :func:`sw.transfer.emit_load` /
    :func:`sw.transfer.emit_unload`'s beat order (beat ``k * words + a``: PE row ``k``'s
    word ``a``, lane ``c`` on column bus ``c``), without the pointer setting."""
    WP = WP.bind(cfg)

    def line(*slots):
        return " | ".join(str(s) for s in slots)
    if store:
        return [line(WP.rd(a, gate="cdrv"), cdrv(WP.src, row=k), sout("col"))
                for k in range(cfg.nr) for a in range(words)]
    return [line(sin("col"), pred("row", k, writes=True), WP.wr("col", a))
            for k in range(cfg.nr) for a in range(words)]


class _Blocks:
    """The forward GEMV of one resident part (``(buffer, first local row, local rows,
    None, in bank B)``) as straight-line blocks, handed out front to back."""

    def __init__(self, cfg, R, n_in: int, part: tuple):
        self.cfg, self.n_in = cfg, n_in
        self.W, self.r0, self.rows, _, alt = part
        self.x = R["ainA"] if alt else R["ain"]
        self.z = R["z"]
        self.nw = local_len(n_in, cfg.nr)
        self.k = max(1, cfg.n_regs - 2)
        self.done = 0                      # local rows handed out

    def take(self):
        """The next block: ``(lines, reads, writes)``, or None when no row is left."""
        if self.done >= self.rows:
            return None
        j, k = self.done, min(self.k, self.rows - self.done)
        W, y = _at(self.W, j * self.nw), _at(self.z, self.r0 + j)
        self.done += k
        return list(gemv_lines(self.cfg, k, self.n_in, W, self.x, y, 0)), [(W, k * self.nw)], [(y, k)]

    def rest(self, name: str):
        """The rows not handed out, as one :func:`sw.kernels.emit_gemv` op (None: none)."""
        n = self.rows - self.done
        if n <= 0:
            return None
        cfg, j = self.cfg, self.done
        W, y = _at(self.W, j * self.nw), _at(self.z, self.r0 + j)
        return Op(name, "gemv", lambda b: emit_gemv(b, cfg, n * cfg.nr, self.n_in, W, self.x, y,
                                                     name=f"{name}_").instructions,
                  reads=[(W, n * self.nw), (self.x, self.nw)], writes=[(y, n)], stores=True)


def _hosted(cfg, name: str, pools: list, moves: list, ptr: str, rw: tuple):
    """One page move (``moves``, after the pointer setting ``ptr``) inside as few forward
    blocks as hold it, taken from the first pool with rows left (``pools``): a
    straight-line op (None when no pool has rows left); ``rw``: the move's ``(reads,
    writes)``."""
    prim, reads, writes = [], list(rw[0]), list(rw[1])
    merged = list(moves)
    for pool in pools:
        while len(merged) > len(prim):         # moves left past the blocks' end
            blk = pool.take()
            if blk is None:
                break
            prim += blk[0]
            reads += blk[1] + [(pool.x, pool.nw)]
            writes += blk[2]
            merged = merge_rows(prim, [moves])[0]
    if not prim:
        return None
    lines = [ptr] + merged
    text = ring_text(cfg, lines, loop=f"{name}_")

    def emit(b, text=text, n=len(lines)):
        b.text(text)
        return n
    return Op(name, "spad+gemv", emit, reads=reads, writes=writes, stores=True,
              info={"issues": len(lines), "hosted": len(moves) - (len(merged) - len(prim))})


def hidden_pages_head(cfg, R: dict, n_in: int, sp, parts: list, part_ops) -> list:
    """The ops of a paged head with ``sp.hide`` (module docstring): ``parts`` as
    :func:`sw.train_cp_ops._paged_head` lists them (resident rows first), ``part_ops(p,
    part, forward=, moves=)`` its per-part ops (``p``: the part's place in the order the
    sums of ``W^T d`` are added)."""
    nr = cfg.nr
    nw = local_len(n_in, nr)
    pages = [pt for pt in parts if pt[3] is not None]
    resident = [pt for pt in parts if pt[3] is None]
    blocks = {pt[4]: _Blocks(cfg, R, n_in, pt) for pt in resident}
    in_a, in_b = blocks.get(False), blocks.get(True)
    load_pools = [b for b in (in_a, in_b) if b is not None]
    store_pools = [in_b] if in_b is not None else []
    ops = []
    for p, pt in enumerate(pages):
        WP, _, n, q, _ = pt
        w, addr = n * nw, sp.page_addr(nr, q)
        for store, pools in ((False, load_pools), (True, store_pools)):
            if store:
                ops += part_ops(p, pt, moves=False)
            name = f"{'st' if store else 'ld'}{p}"
            rw = ([(WP, w)], []) if store else ([], [(WP, w)])
            # no forward rows left to host it: the move's loop (sw.train_paging.spad_op)
            ops.append(_hosted(cfg, name, pools, move_lines(cfg, WP, w, store), f"spad {'wr' if store else 'rd'} = "
                               f"{addr}", rw) or spad_op(cfg, name, store, WP, w, addr))
    for i, pt in enumerate(resident):
        rest = blocks[pt[4]].rest(f"fwr{i}")
        if rest is not None:
            ops.append(rest)
    for i, pt in enumerate(resident):
        ops += part_ops(len(pages) + i, pt, forward=False)
    return ops
