"""Weight panels kept in a core's scratchpad and paged through a PE-memory page buffer:
:class:`SpadPanel`, the planner deciding which panels go there (:func:`plan_panels`),
the op moving a page (:func:`spad_op`) and a panel's scratchpad image."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from sw.collectives import Region
from sw.layout import local_len
from sw.train_host import TrainCompileError
from sw.train_ops import Op
from sw.transfer import (decode_page, decode_unload, emit_load, emit_page_move, emit_spad_vector, emit_unload,
                         load_cost, page_beats_for, page_move_cost, spad_vector_cost, unload_beats_for)

__all__ = ["SpadPanel", "page_split", "spad_choice", "check_page_rows", "largest", "plan_panels", "spad_op",
           "spad_image", "spad_local", "spad_vector_op", "swap_next", "rank1_swap_op", "page_swap_op", "BUS"]

#: staging slots of the DRAM pages of SGD and minibatch GD, where the scratchpad has room
#: (:func:`sw.train_dram.place_dram`): the loads start up to three pages ahead
DRAM_SLOTS = 4

#: the bus of each word order (:func:`sw.transfer.emit_page_move`)
BUS = {"words": "row", "cwords": "col"}


@dataclass(frozen=True)
class SpadPanel:
    """A weight panel kept in the core's scratchpad and moved through a PE-memory page
    buffer in row pages (:func:`plan_panels`). The panel's local words
    (``lrows x ncols`` per PE, the 2D round-robin layout) are stored page after page in
    the beat order of :func:`sw.transfer.emit_unload` (a page unloaded to the scratchpad
    loads back unchanged with ``emit_load(..., lanes="cols")``), or with ``order="words"``
    in the word order of :func:`sw.transfer.emit_page_move` (the order in which a GEMV
    loads the next page while it streams the current one)."""

    base: int                     #: first scratchpad beat
    lrows: int                    #: local rows of the whole panel per PE (``L(P_l)``)
    ncols: int                    #: local columns per PE (``L(N_l)``): words of one local row
    pages: tuple                  #: ``((first local row, local rows), ...)``
    #: CP: first scratchpad beat of the layer's input history (-1: in the PE memories)
    hist: int = field(default=-1, kw_only=True)
    #: CP: local rows of the panel resident in the PE memories before the paged ones
    #: (``lrows`` and ``pages`` count the paged rows only), in the page buffer's bank
    res: int = field(default=0, kw_only=True)
    #: CP: local rows resident in the other bank after those (``WB``; the head gives their
    #: kernels copies of the vectors in the page buffer's bank)
    resb: int = field(default=0, kw_only=True)
    #: CP: the pages are visited before the resident rows, their loads and stores inside
    #: the resident rows' forward GEMV (:mod:`sw.train_cp_hide`)
    hide: bool = field(default=False, kw_only=True)
    #: the beat order of the pages: ``"rows"`` (:func:`sw.transfer.emit_unload`'s),
    #: ``"words"`` (:func:`sw.transfer.emit_page_move`'s, over the row buses), or
    #: ``"alt"``: the pages alternate between ``"words"`` (even pages) and ``"cwords"``
    #: (odd pages: ``emit_page_move``'s order over the column buses), so one page can be
    #: stored while the next one is loaded (:func:`sw.kernels.emit_rank1_swap`)
    order: str = field(default="rows", kw_only=True)

    def page_order(self, p: int) -> str:
        """The beat order of page ``p``: ``"rows"``, ``"words"`` or ``"cwords"``."""
        if self.order == "alt":
            return "cwords" if p % 2 else "words"
        return self.order

    @property
    def one_row_pages(self) -> bool:
        """Several pages, one local row per PE each, no resident rows: the page shape
        SGD's page overlap and one-row accumulation take."""
        return len(self.pages) > 1 and not self.lead and all(n == 1 for _, n in self.pages)

    @property
    def lead(self) -> int:
        """Local rows resident in the PE memories (both banks), before the paged ones."""
        return self.res + self.resb

    @property
    def words(self) -> int:
        return self.lrows * self.ncols

    def page_words(self, p: int) -> int:
        return self.pages[p][1] * self.ncols

    def page_addr(self, nr: int, p: int) -> int:
        """First scratchpad beat of page ``p`` (``nr`` beats per local word)."""
        return self.base + nr * self.pages[p][0] * self.ncols

    def beats(self, nr: int) -> int:
        return nr * self.words

    def row_pages(self, nr: int) -> tuple:
        """The pages in rows of the padded panel, in the order the head visits them:
        ``((first row, rows), ...)``, the resident rows (``res``, then ``resb``) each as a
        page of their own, first (after the pages with ``hide``)."""
        res = ((((0, self.res * nr),) if self.res else ())
               + (((self.res * nr, self.resb * nr),) if self.resb else ()))
        pages = tuple(((r0 + self.lead) * nr, n * nr) for r0, n in self.pages)
        return pages + res if self.hide else res + pages


def page_split(lrows: int, per: int) -> tuple:
    """Row pages ``((first local row, local rows), ...)`` of ``lrows`` local rows, at most
    ``per`` per page."""
    return tuple((r, min(per, lrows - r)) for r in range(0, lrows, per))


def spad_choice(cfg, spad, allowed: list, what: str) -> list:
    """An explicit choice of layers to page from the scratchpad, checked: sorted, a
    non-empty subset of ``allowed`` (``what`` names them), and the configuration has a
    scratchpad. Raises :class:`sw.train.TrainCompileError`."""
    layers = sorted(set(int(l) for l in spad))
    if not layers or any(l not in allowed for l in layers):
        raise TrainCompileError(f"spad layers must be a non-empty subset of {allowed} ({what}), got {sorted(spad)}")
    if not cfg.spad_kib:
        raise TrainCompileError("weights in the scratchpad need one: this configuration has none (cfg.spad_kib = 0)")
    return layers


def check_page_rows(cfg, page_rows) -> None:
    """``page_rows`` is None or a positive multiple of ``nr``, else
    :class:`sw.train.TrainCompileError`."""
    if page_rows is not None and (page_rows < cfg.nr or page_rows % cfg.nr):
        raise TrainCompileError(f"page_rows must be a positive multiple of nr = {cfg.nr}, got {page_rows}")


def largest(fits, hi: int) -> int:
    """The largest ``t`` in ``1 .. hi`` with ``fits(t)``, for ``fits`` true at 1 and
    monotone (binary search)."""
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def plan_panels(cfg, P: list, N: list, alloc, pageable: list, spad=None, page_rows: int | None = None,
                fail=None, dram=None, split_wp: bool = False, reserve: int = 0, grow: bool = False) -> tuple:
    """Where the weight panels live: ``(wbanks, allocator, {layer: SpadPanel})``, shared by
    SGD and minibatch GD across cores.

    ``alloc(wbanks, pages)`` returns the step's :class:`sw.train.Allocator` for a bank per
    panel and ``pages`` (layer -> local rows per page of the panels in the scratchpad, or
    None). Every panel in the PE memories when some assignment of the panels to the banks
    fits (``spad=None``); otherwise the largest ``pageable`` panels move to the core's
    scratchpad, one more at a time, until the rest fits with a page buffer ``WP`` (the
    paged panels share a bank). ``spad``: the layers to keep in the scratchpad (an
    explicit choice, e.g. to test paging on small networks). Pages are row pages of at
    most ``page_rows`` rows (a multiple of ``nr``; default: as many as the buffer holds,
    the buffer taking what the PE memories have left), the bank assignment with the
    fewest pages, the paged panels in one bank; ``split_wp`` (the allocator gives each
    bank its page buffer): when that finds nothing, a second search lets them span both. When the paged panels exceed the scratchpad and the core has DRAM, the
    largest go to DRAM and are streamed (:func:`sw.train_dram.place_dram`; ``dram``: the
    layers to put there, an explicit choice among the paged ones). ``reserve``: beats at
    the scratchpad's top kept for other data. ``grow``: after the common page size, each
    layer's pages grow on their own while the buffers fit (layers of different widths
    sharing a buffer, or in different buffers). Raises :class:`sw.train.TrainCompileError` (``fail(allocator)``: the
    message, with the sizes) when nothing fits."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    nl, nr = len(P), cfg.nr
    cands = [list(x) for x in itertools.islice(itertools.product("ab", repeat=nl), 1024)]
    if spad is None:
        for wb in cands:
            al = alloc(wb, None)
            if al.fits():
                return wb, al, {}
        order = sorted(pageable, key=lambda l: (-L(P[l]) * L(N[l]), l))
        sets = [sorted(order[:j]) for j in range(1, len(order) + 1)] if cfg.spad_kib else []
    else:
        sets = [spad_choice(cfg, spad, pageable, "the row-panel layers")]
    check_page_rows(cfg, page_rows)
    cap = (page_rows // nr) if page_rows else max(L(p) for p in P)
    lim = (1 << cfg.loop_bits) - 2
    for S, split in [(S, False) for S in sets] + ([(S, True) for S in sets] if split_wp else []):
        beats = sum(nr * L(P[l]) * L(N[l]) for l in S)
        if beats > cfg.spad_depth - reserve and not cfg.dram_mib:
            continue                               # more layers in the scratchpad only need more
        best = None

        def per(t, S=S):                           # local rows per page with at most t per page
            return {l: max(1, min(L(P[l]), t, cap, lim // L(N[l]))) for l in S}
        for wb in cands:
            if len({wb[l] for l in S}) != 1 and not split:
                continue
            if not alloc(wb, per(1)).fits():
                continue
            rows = per(largest(lambda t, wb=wb: alloc(wb, per(t)).fits(), max(L(P[l]) for l in S)))
            if grow:
                for l in sorted(S, key=lambda l: -L(P[l]) * L(N[l])):
                    top = max(1, min(L(P[l]), cap, lim // L(N[l])))
                    rows[l] = largest(lambda t, wb=wb, l=l: t <= rows[l] or alloc(wb, {**rows, l: t}).fits(), top)
            npages = sum(-(-L(P[l]) // rows[l]) for l in S)
            if best is None or npages < best[0]:
                best = (npages, wb, rows)
        if best is not None:
            _, wb, rows = best
            al = alloc(wb, rows)
            panels, at = {}, 0
            for l in S:
                panels[l] = SpadPanel(at, L(P[l]), L(N[l]), page_split(L(P[l]), rows[l]))
                at += panels[l].beats(nr)
            if at > cfg.spad_depth - reserve or dram is not None:
                from sw.train_dram import place_dram
                # the largest panels in DRAM, streamed
                panels = place_dram(cfg, panels, dram, reserve, max_slots=DRAM_SLOTS)
                if panels is None:
                    continue
            return wb, al, panels
    raise TrainCompileError(fail(alloc(cands[0], None)))


def spad_op(cfg, name: str, store: bool, WP: Region, words: int, addr: int, order: str = "rows") -> Op:
    """Move a page between the scratchpad (beats ``addr ..``) and the page buffer ``WP``
    (``words`` per PE): :func:`sw.transfer.emit_load` with ``lanes="cols"`` /
    :func:`sw.transfer.emit_unload` to the scratchpad, ``nr`` beats per word; with
    ``order="words"`` / ``"cwords"`` :func:`sw.transfer.emit_page_move` over the row /
    column buses (:meth:`SpadPanel.page_order`)."""
    if order in ("words", "cwords"):
        bus = "row" if order == "words" else "col"
        return Op(name, "spad", lambda bl: (emit_page_move(bl, cfg, WP.bank, WP.base, words, store, addr,
                                                           loop=f"{name}_", bus=bus), page_move_cost(cfg, words))[1],
                  reads=[(WP, words)] if store else [], writes=[] if store else [(WP, words)],
                  stores=not store, info={"spad": (store, WP, words, addr), "order": order})
    n = load_cost(cfg, words) + 1
    if store:
        return Op(name, "spad", lambda bl: (emit_unload(bl, cfg, WP.bank, WP.base, words, loop=f"{name}_",
                                                        dest="spad", spad_addr=addr), n)[1],
                  reads=[(WP, words)], writes=[], stores=False, info={"spad": (store, WP, words, addr)})
    return Op(name, "spad", lambda bl: (emit_load(bl, cfg, WP.bank, WP.base, words, loop=f"{name}_", source="spad",
                                                  spad_addr=addr, lanes="cols"), n)[1],
              reads=[], writes=[(WP, words)], info={"spad": (store, WP, words, addr)})


def swap_next(cfg, sp: SpadPanel, step: int = 1) -> dict:
    """``{page q: page q + step}`` for the pages of ``sp`` (``order="alt"``) whose update
    stores them while it loads the next page visited (:func:`rank1_swap_op`; ``step=-1``:
    the pages visited last to first): the kernel has registers for the page's rows
    (:func:`sw.kernels.rank1_swap_why_not`)."""
    from sw.kernels import rank1_swap_why_not
    if sp.order != "alt":
        return {}
    return {q: q + step for q in range(len(sp.pages)) if 0 <= q + step < len(sp.pages)
            and rank1_swap_why_not(cfg, sp.pages[q][1] * cfg.nr, sp.pages[q + step][1]) is None}


def page_swap_op(cfg, name: str, sp: SpadPanel, p: int, swaps: dict, n_in: int, WP: Region, u: Region, v: Region,
                 nlr: Region, u_layout: str = "diag") -> Op | None:
    """The update of page ``p`` of ``sp`` (``u`` the page's rows of the output gradient)
    as a :func:`rank1_swap_op` storing it and loading page ``swaps.get(p)`` (None: none),
    or None when the page's update cannot swap (``sp.order`` not ``"alt"``, or too many
    rows for the kernel's registers)."""
    from sw.kernels import rank1_swap_why_not
    nr, rows = cfg.nr, sp.pages[p][1]
    if sp.order != "alt" or rank1_swap_why_not(cfg, rows * nr) is not None:
        return None
    q = swaps.get(p)
    load = None if q is None else (sp.pages[q][1], sp.page_addr(nr, q), sp.page_order(q))
    return rank1_swap_op(cfg, name, rows * nr, n_in, WP, u, v, nlr, (sp.page_addr(nr, p), sp.page_order(p)), load,
                         u_layout=u_layout)


def rank1_swap_op(cfg, name: str, m: int, n: int, WP: Region, u: Region, v: Region, nlr: Region, out: tuple,
                  load: tuple | None = None, u_layout: str = "diag") -> Op:
    """The update ``W += nlr u v^T`` of a page of ``m`` rows (``u`` in ``u_layout``, ``v`` cols) that
    stores it to the scratchpad as it runs and loads the next page in its place
    (:func:`sw.kernels.emit_rank1_swap`): ``out = (addr, order)``, ``load = (local rows,
    addr, order)`` or None. ``info["swap"]``: its moves as :func:`spad_op`'s ``info["spad"]``
    with the order; ``info["reswap"](out_addr, in_addr)``: the op with the moves at other
    scratchpad beats (DRAM staging slots, :func:`sw.train_dram.stream_parts`)."""
    from sw.kernels import Scalar, emit_rank1_swap
    nr = cfg.nr
    mp, nw = local_len(m, nr), local_len(n, nr)
    w, wi = mp * nw, (load[0] * nw if load else 0)

    def make(out_addr: int, in_addr: int | None = None) -> Op:
        ld = None if load is None else (load[0], BUS[load[2]], load[1] if in_addr is None else in_addr)
        moves = [(True, WP, w, out_addr, out[1])] + ([(False, WP, wi, ld[2], load[2])] if ld else [])
        return Op(name, "spad+rank1", lambda b: emit_rank1_swap(
            b, cfg, m, n, WP, u, v, Scalar(nlr.bank, nlr.base), out_bus=BUS[out[1]], out_addr=out_addr, load=ld,
            u_layout=u_layout, name=f"{name}_").instructions,
            reads=[(WP, w), (u, mp), (v, nw), (nlr, 1)], writes=[(WP, wi)] if ld else [], stores=ld is not None,
            info={"swap": moves, "reswap": make})
    return make(out[0])


def spad_vector_op(cfg, name: str, store: bool, R: Region, words: int, addr: int) -> Op:
    """Move a ``"cols"`` vector ``R`` (``words`` per PE) between the PE memories and
    scratchpad beats ``addr ..`` (:func:`sw.transfer.emit_spad_vector`: one beat per
    word, PE row 0's copy stored, every row written by a load)."""
    return Op(name, "spad", lambda bl: (emit_spad_vector(bl, cfg, R.bank, R.base, words, store, addr,
                                                         loop=f"{name}_"), spad_vector_cost(words))[1],
              reads=[(R, words)] if store else [], writes=[] if store else [(R, words)], stores=not store)


def spad_image(cfg, panel: SpadPanel, local) -> list:
    """The scratchpad beats of a panel (``(nr, nr, words)`` local words), page by page."""
    out, c = [], panel.ncols
    for p, (r0, n) in enumerate(panel.pages):
        out += _page_beats(cfg, panel.page_order(p), local[:, :, (r0 + panel.lead) * c:(r0 + panel.lead + n) * c])
    return out


def _page_beats(cfg, order: str, local) -> list:
    """The beats of one page's ``local`` words in beat order ``order``."""
    if order == "rows":
        return unload_beats_for(cfg, local)
    return page_beats_for(cfg, local, "row" if order == "words" else "col")


def spad_local(cfg, panel: SpadPanel, beats) -> np.ndarray:
    """Inverse of :func:`spad_image`: the panel's ``(nr, nr, words)`` local words (of the
    paged rows: without the resident ones)."""
    if not panel.pages:                     # every row resident (CP, the history in the scratchpad)
        return np.zeros((cfg.nr, cfg.nr, 0), dtype=cfg.fmt.np_uint)
    out, at = [], 0
    for p, (_, n) in enumerate(panel.pages):
        w, order = n * panel.ncols, panel.page_order(p)
        part = beats[at:at + cfg.nr * w]
        out.append(decode_unload(cfg, part, w) if order == "rows" else
                   decode_page(cfg, part, w, "row" if order == "words" else "col"))
        at += cfg.nr * w
    return np.concatenate(out, axis=2)
