"""Where a CP layer's weight panel and input history live when its cores' PE memories do
not hold both (batch 1 and minibatch CP): the scratchpad pages, the DRAM streams, the
rows kept resident in both banks and the history moved to the scratchpad, each
placement ranked by the words it moves per step (:func:`cp_spad_plan`, used by
:func:`sw.train_cp.compile_chip_cp`, its cost model and the golden trainers)."""

from __future__ import annotations

from dataclasses import replace

from sw.layout import local_len
from sw.mlp import MLP
from sw.train_cp_program import _kit
from sw.train_host import TrainCompileError
from sw.train_paging import SpadPanel, check_page_rows, largest, page_split, spad_choice

__all__ = ["cp_spad_plan", "page_moves", "MIXED_MAX_PAGES", "UCODE_WORDS_PER_PAGE"]


def cp_spad_plan(cfg, mlp: MLP, P: list, N: list, groups: list, fused: list, softmax, spad=None,
                 page_rows: int | None = None, dram=None, hide: bool = True, swap: bool = True) -> dict:
    """The hidden layers whose panels are kept in the scratchpad: ``{layer:
    SpadPanel}``, the same on every core of the layer (beats from 0 of each core's
    scratchpad). ``spad=None``: the layers whose cores' regions do not fit the PE
    memories, when the scratchpad holds their panel and the rest fits with a page buffer
    (else ``{}``: the caller reports the sizes); ``spad``: the layers to page (tests).
    Pages of at most ``page_rows`` rows (a multiple of ``nr``; default: the largest the
    PE memories leave room for). A panel the scratchpad does not hold is streamed from
    the core's DRAM (:class:`sw.train_dram.DramPanel`; ``dram``: the paged layers to
    stream, tests). ``hide`` (batch 1): a panel paged from the scratchpad beside rows
    resident in the PE memories has its page moves inside their forward GEMV
    (:attr:`SpadPanel.hide`, :mod:`sw.train_cp_hide`); ``swap`` (batch 1): the other
    paged panels of a separate update store each page as the update computes it and load
    the next one in its place (:func:`page_moves`)."""
    nl = mlp.n_layers
    V = 2 * (nl - 1)
    hidden = list(range(nl - 1))

    kit = _kit(mlp)

    def alloc(l, page=None, hist=-1, res=0, resb=0):
        return kit.allocate(cfg, mlp, P, N, (l, 0), V, softmax, fused[l], page=page, **_hist_kw(hist, res, resb))
    if spad is None:
        layers = [l for l in range(nl) if not alloc(l).fits()]
        if not layers or not cfg.spad_kib or nl - 1 in layers:
            return {}
    else:
        layers = spad_choice(cfg, spad, hidden, "the hidden layers")
    check_page_rows(cfg, page_rows)
    dram = set() if dram is None else set(int(l) for l in dram)
    if dram and (not dram <= set(layers)):
        raise TrainCompileError(f"dram layers must be a non-empty subset of the paged layers {layers}, got "
                                f"{sorted(dram)}")
    if dram and not cfg.dram_mib:
        raise TrainCompileError("weights in DRAM need it: this configuration has none (cfg.dram_mib = 0)")
    out = {}
    for l in layers:
        sp = _layer_pages(cfg, P, N, l, lambda page, hist, res=0, resb=0, l=l: alloc(l, page, hist, res, resb),
                          page_rows, l in dram, _hist_beats(cfg, mlp, N, l), choose=spad is None)
        if sp is None:
            return {}
        out[l] = page_moves(mlp, sp, fused[l], hide, swap)
    return out


def page_moves(mlp: MLP, sp, fused: bool, hide: bool = True, swap: bool = True):
    """How the head moves the pages of ``sp`` (batch 1; unchanged otherwise):
    ``hide``: a panel paged from the scratchpad beside rows resident in the PE memories
    moves its pages inside their forward GEMV (:attr:`SpadPanel.hide`); else ``swap``:
    a panel of a separate update (layer 0, or not ``fused``) has its pages in
    alternating bus orders (``order="alt"``), so that each page's update stores it while
    it loads the next page (:func:`sw.train_paging.rank1_swap_op`)."""
    if mlp.batch > 1 or sp is None or not sp.pages:
        return sp
    if hide and type(sp) is SpadPanel and sp.res:
        return replace(sp, hide=True)
    return replace(sp, order="alt") if swap and not fused else sp


def _hist_kw(hist: int, res: int = 0, resb: int = 0) -> dict:
    """The allocator's keywords for a history in the scratchpad and resident rows of a
    paged panel, in bank A and in bank B (batch 1 only)."""
    return ({} if hist < 0 else {"hist": hist}) | ({"res": res} if res else {}) | ({"resb": resb} if resb else {})


def _hist_beats(cfg, mlp: MLP, N: list, l: int) -> int:
    """Scratchpad beats of layer ``l``'s input history (batch 1; 0: it stays in the PE
    memories): one beat per local word of each of its ``2 (L - 1)`` inputs
    (:func:`sw.train_paging.spad_vector_op`)."""
    return 0 if mlp.batch > 1 else 2 * (mlp.n_layers - 1) * local_len(N[l], cfg.nr)


def _layer_pages(cfg, P: list, N: list, l: int, alloc, page_rows: int | None = None, dram: bool = False,
                 hist_beats: int = 0, choose: bool = True):
    """Layer ``l``'s panel paged from the scratchpad with the largest pages that fit
    (``alloc(page)``: a core's allocator with ``page`` local rows per page): a
    :class:`sw.train_chip.SpadPanel`; a :class:`sw.train_dram.DramPanel` when the
    scratchpad does not hold the panel (or ``dram``) and the core has DRAM (pages small
    enough for two staging slots in the scratchpad); None when neither holds it or not
    even one-row pages fit. ``hist_beats`` (batch 1): the input history may move to the
    scratchpad's top (``alloc(page, hist)``: ``hist`` its first beat, -1 in the PE
    memories; :attr:`SpadPanel.hist`), which frees its words for resident rows, up to
    the whole panel (no page left, :func:`_all_resident`). Of the placements that fit,
    the one moving the fewest words per step (:func:`_move_cost`); with ``page_rows`` or
    ``dram`` given, or not ``choose`` (the layers to page given), the history moves only
    when even one-row pages do not fit beside it."""
    if not cfg.spad_kib:
        return None
    hists = [-1] if alloc(1, -1).fits() else []
    top = cfg.spad_depth - hist_beats
    free = choose and page_rows is None and not dram
    if hist_beats and top >= 0 and (not hists or free) and alloc(1, top).fits():
        hists.append(top)
    cands = [sp for h in hists for sp in (_pages_with(cfg, P, N, l, alloc, page_rows, dram, hist_beats, h),
                                          None if h < 0 or not free else
                                          _all_resident(cfg, P, N, l, alloc, h)) if sp is not None]
    return min(cands, key=lambda sp: _move_cost(cfg, sp)) if cands else None


def _move_cost(cfg, sp) -> int:
    """Cycles a panel placement spends moving words per step, as the planner ranks them:
    its paged rows through the scratchpad port (``nr`` beats per local word, each way),
    the DRAM beats of its streamed pages, 64 per page (setup, prologues), and its input
    history's store and load (a beat per local word) when the history is in the
    scratchpad."""
    nr = cfg.nr
    cost = 2 * nr * sp.words + 64 * len(sp.pages)
    if hasattr(sp, "dram_beats"):
        cost += sp.dram_beats(nr)
    return cost + (2 * sp.ncols if sp.hist >= 0 else 0)


def _all_resident(cfg, P: list, N: list, l: int, alloc, hist: int):
    """Every row of layer ``l``'s panel resident in the PE memories, in bank A (``WR``)
    and bank B (``WB``), with the input history in the scratchpad from beat ``hist``: a
    :class:`SpadPanel` with no page (nothing of the panel in the scratchpad), or None
    when the rows do not fit both banks."""
    lp, ln = local_len(P[l], cfg.nr), local_len(N[l], cfg.nr)
    if alloc(0, hist, lp).fits():
        return SpadPanel(0, 0, ln, (), hist=hist, res=lp)
    ra = next((r for r in range(lp - 1, 0, -1) if alloc(0, hist, r, 1).fits()), 0)
    for r in range(ra, max(0, ra - 8), -1):            # bank B's rows read copies that bank A holds
        if alloc(0, hist, r, lp - r).fits():
            return SpadPanel(0, 0, ln, (), hist=hist, res=r, resb=lp - r)
    return None


def _pages_with(cfg, P: list, N: list, l: int, alloc, page_rows: int | None, dram: bool, hist_beats: int,
                hist: int):
    """:func:`_layer_pages`'s panel with the input history at ``hist`` (-1: in the PE
    memories), or None."""
    from sw.train_dram import place_dram
    L = lambda n: local_len(n, cfg.nr)                 # noqa: E731
    nr, lim = cfg.nr, (1 << cfg.loop_bits) - 2
    lp, ln = L(P[l]), L(N[l])
    cap = max(1, min(lp, page_rows // nr if page_rows else lp, lim // ln))
    room = cfg.spad_depth - (hist_beats if hist >= 0 else 0)
    to_dram = dram or nr * lp * ln > room
    if to_dram:
        cap = min(cap, room // (2 * nr * ln))
    if to_dram and (not cap or not (cfg.dram_mib or (hist_beats and not dram))):
        return None
    top = largest(lambda t: alloc(t, hist).fits(), cap)
    sp = SpadPanel(0, lp, ln, page_split(lp, top))
    if to_dram and not cfg.dram_mib:           # no DRAM: the rows the PE memories hold resident, the rest paged
        sp = _best_mixed(cfg, l, sp, room, top, alloc, hist, dram_ok=False)
        return None if sp is None else replace(sp, hist=hist)
    if to_dram:
        sp = place_dram(cfg, {l: sp}, [l], cfg.spad_depth - room)[l]
        if not dram:                           # the leading pages the scratchpad holds stay there
            sp = _best_mixed(cfg, l, sp, room, top, alloc if hist_beats else None, hist)
    return replace(sp, hist=hist)


#: the page sizes tried for a panel split across the scratchpad and DRAM: smaller pages
#: need smaller staging slots and leave more of the panel in the scratchpad, but cost
#: per page (the moves' setup, the kernels' prologues, microcode); at most this many pages,
#: and one per :data:`UCODE_WORDS_PER_PAGE` words of microcode (the head is unrolled)
MIXED_MAX_PAGES = 48
UCODE_WORDS_PER_PAGE = 320


def _best_mixed(cfg, l: int, sp, room: int, top: int, alloc=None, hist: int = -1, dram_ok: bool = True):
    """The mixed panel (:func:`_mixed`) of the page size, ``top`` local rows or fewer
    (halving), that moves the fewest words per step (:func:`_move_cost`; at most
    :data:`MIXED_MAX_PAGES` pages, fewer with a small microcode). ``alloc(page, hist, res, resb)`` (batch 1):
    the leading rows the PE memories hold beside a page buffer of that size stay resident,
    first in bank A (:attr:`SpadPanel.res`), then in bank B (:attr:`SpadPanel.resb`),
    only the rest is paged. ``dram_ok`` False (no DRAM): only placements whose paged rows
    the scratchpad holds, None when there is none."""
    from sw.train_dram import place_dram
    best, t, lp = None, top, sp.lrows
    while t >= 1:
        res = resb = 0
        if alloc is not None:
            res = largest(lambda r1, t=t: alloc(t, hist, r1 - 1).fits(), lp) - 1
            res, resb = _two_banks(alloc, t, hist, res, lp)
        rows = lp - res - resb
        part = SpadPanel(0, rows, sp.ncols, page_split(rows, min(t, rows)))
        if cfg.nr * rows * sp.ncols <= room:       # the rest fits the scratchpad
            cand = {l: part}
        elif not dram_ok:
            cand = None
        else:
            cand = place_dram(cfg, {l: part}, [l], cfg.spad_depth - room)
            cand = cand and {l: _mixed(cfg, cand[l], room)}
        if cand and len(cand[l].pages) <= min(MIXED_MAX_PAGES, cfg.ucode_depth // UCODE_WORDS_PER_PAGE):
            m = replace(cand[l], res=res, resb=resb)
            cost = _move_cost(cfg, m)
            if best is None or cost < best[0]:
                best = (cost, m)
        t //= 2
    return best[1] if best else _mixed(cfg, sp, room) if dram_ok else None


def _two_banks(alloc, t: int, hist: int, res: int, lp: int) -> tuple:
    """``(res, resb)``: the resident local rows in bank A and in bank B with the most in
    all (``res``: the most bank A holds alone; rows in bank B need copies of the vectors
    in bank A, which may take a few of its rows); at least one row left to page."""
    best = (res, 0)
    for r in range(res, max(0, res - 8), -1):
        if not alloc(t, hist, r, 1).fits():
            continue
        rb = largest(lambda r1, r=r: r1 == 1 or alloc(t, hist, r, r1 - 1).fits(), lp - r) - 1
        if r + rb > sum(best):
            best = (r, rb)
    return best


def _mixed(cfg, sp, room: int):
    """``sp`` (all in DRAM) with its leading pages in the scratchpad after the staging
    slots, as many as ``room`` beats hold (:class:`sw.train_dram.MixedPanel`)."""
    from sw.train_dram import MixedPanel
    nr, at, split = cfg.nr, 2 * sp.slot, 0
    while split < len(sp.pages) - 1 and at + nr * sp.page_words(split) <= room:
        at += nr * sp.page_words(split)
        split += 1
    return MixedPanel(0, sp.lrows, sp.ncols, sp.pages, sp.stage, sp.slot, spad_base=2 * sp.slot, split=split)


# ======================================================================================
# compile
# ======================================================================================
