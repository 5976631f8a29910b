"""Continuous propagation with weight panels in DRAM: the head of a core whose panel is
streamed (:func:`stream_head`), its weights into DRAM and back (per-core programs, as
each core streams its own layer's panel), and the ``describe()`` lines.

A hidden layer whose panel exceeds the core's scratchpad keeps it in the core's DRAM
(:func:`sw.train_dram.place_dram`, one panel per core): the head's page moves go through
two staging slots with the next page's transfer started as soon as a page has left its
slot (:func:`sw.train_dram.stream_parts`), so the page loads of the head overlap the
previous page's GEMV, transposed GEMV and update. The stalls the engine causes are
predicted by :func:`sw.train_dram.dma_timeline`; the head RUN of every core is padded to
the same *cycles* (instructions plus stalls), so the step's cycles stay exact.
"""

from __future__ import annotations

from sw.asm import Builder
from sw.train import _gaps
from sw.dram import emit_dma_copy
from sw.train_dram import DramPanel, MixedPanel, dma_timeline, dram_unload_program, restore_microcode, stream_parts
from sw.transfer import emit_spad_drain, emit_spad_fill

__all__ = ["stream_head", "head_dma", "cp_dram_init", "cp_dram_read", "cp_dram_unload", "cp_tier_lines"]

_NO_DMA = {"stall": 0, "busy": 0, "hidden": 0, "rd": 0, "wr": 0, "tail": 0}


def stream_head(cfg, ops: list, sp) -> list:
    """A core's head ops with the page moves of its DRAM panel ``sp`` streamed (unchanged
    when ``sp`` is not a :class:`sw.train_dram.DramPanel`)."""
    if not isinstance(sp, DramPanel):
        return ops
    return stream_parts(cfg, {"head": [ops]}, {0: sp})["head"][0]


def head_dma(cfg, ops: list) -> dict:
    """The DMA of a head (:func:`sw.train_dram.dma_timeline`)."""
    if not any("dma" in op.info for op in ops):
        return dict(_NO_DMA)
    return dma_timeline(cfg, ops, _gaps(cfg, ops))


def _page_runs(cfg, panels: list):
    """Per index ``j`` of a DRAM page the cores holding one: ``[(j, {core: (panel, page,
    beats)})]``."""
    pages = [list(sp.dram_pages()) if sp is not None else [] for sp in panels]
    for j in range(max(len(p) for p in pages)):
        yield j, {k: (sp, pages[k][j], cfg.nr * sp.page_words(pages[k][j])) for k, sp in enumerate(panels)
                  if j < len(pages[k])}


def _spad_part(sp, nr: int) -> int:
    """Beats of the panel's pages kept in the scratchpad (a :class:`MixedPanel`)."""
    return sp.spad_beats(nr) if isinstance(sp, MixedPanel) else 0


def cp_dram_init(session, cfg, panels: list, images: list, name: str) -> None:
    """Load the DRAM panels (``panels[k]``: core ``k``'s DramPanel or None; ``images[k]``
    its beats, :func:`sw.train_paging.spad_image`): per page a RUN filling staging slot 0
    of the cores that have that page from the host and storing it to DRAM."""
    at = [0 if sp is None else _spad_part(sp, cfg.nr) for sp in panels]
    if any(at):                                  # the pages kept in the scratchpad
        imgs = []
        for k, sp in enumerate(panels):
            b = Builder(cfg)
            if at[k]:
                emit_spad_fill(b, cfg, sp.spad_base, at[k])
            b.halt()
            imgs.append(b.build().words())
        session.run(imgs, [images[k][:at[k]] for k in range(cfg.cores)], f"{name}-spad")
    for j, cores in _page_runs(cfg, panels):
        imgs, data = [], []
        for k in range(cfg.cores):
            b = Builder(cfg)
            if k in cores:
                sp, p, n = cores[k]
                emit_spad_fill(b, cfg, sp.stage[0], n)
                emit_dma_copy(b, cfg, "store", sp.dram_addr(cfg.nr, p), sp.stage[0], n)
                data.append(images[k][at[k]:at[k] + n])
                at[k] += n
            else:
                data.append([])
            b.halt()
            imgs.append(b.build().words())
        session.run(imgs, data, f"{name}-p{j}")


def cp_dram_read(session, cfg, panels: list) -> list:
    """Per core the beats of its DRAM panel (empty for the others), page by page through
    staging slot 0."""
    out = [[] if sp is None else [int(x) for x in session.scratchpad(k, sp.spad_base, _spad_part(sp, cfg.nr))]
           if _spad_part(sp, cfg.nr) else [] for k, sp in enumerate(panels)]
    held = list(getattr(session, "loaded", []))
    for j, cores in _page_runs(cfg, panels):
        imgs = []
        for k in range(cfg.cores):
            b = Builder(cfg)
            if k in cores:
                sp, p, n = cores[k]
                emit_dma_copy(b, cfg, "load", sp.dram_addr(cfg.nr, p), sp.stage[0], n)
            b.halt()
            imgs.append(b.build().words())
        session.run(imgs, None, f"cp-read-dram-p{j}")
        for k, (sp, p, n) in cores.items():
            out[k] += [int(x) for x in session.scratchpad(k, sp.stage[0], n)]
    restore_microcode(session, held)
    return out


def cp_dram_unload(cfg, sp) -> list:
    """The program sending a core's DRAM panel to the host (a :class:`MixedPanel`: its
    scratchpad pages first)."""
    if not isinstance(sp, MixedPanel):
        return dram_unload_program(cfg, sp)
    b = Builder(cfg)
    ds = list(sp.dram_pages())
    if sp.split:
        emit_spad_drain(b, cfg, sp.spad_base, sp.spad_beats(cfg.nr), last=not ds, loop="us_")
    for p in ds:
        n = cfg.nr * sp.page_words(p)
        emit_dma_copy(b, cfg, "load", sp.dram_addr(cfg.nr, p), sp.stage[0], n, loop=f"ul{p}_")
        emit_spad_drain(b, cfg, sp.stage[0], n, last=p == ds[-1], loop=f"ud{p}_")
    b.halt()
    return b.build().words()


def cp_tier_lines(cfg, P: list, N: list, groups: list, spads: dict, dma: list, stages: list, step: int) -> list:
    """Per hidden layer where its panels live, and the DMA per step of one of its cores."""
    from sw.layout import local_len
    nr = cfg.nr
    out = []
    for l in range(len(P)):
        sp = spads.get(l)
        w = local_len(P[l], nr) * local_len(N[l], nr)
        if sp is None:
            out.append(f"W{l} panels: resident in the PE memories ({w} words per PE)")
            continue
        hist = (f"; the input history ({cfg.spad_depth - sp.hist} beats) in scratchpad beats {sp.hist}.."
                f"{cfg.spad_depth - 1} (a store and a load per step in the tail)" if sp.hist >= 0 else "")
        if not sp.pages:
            out.append(f"W{l} panels: resident in the PE memories, the first {sp.res * nr} rows in bank A (WR)"
                       + (f" and the other {sp.resb * nr} in bank B (WB)" if sp.resb else "") + hist
                       + ", which leaves them room")
            continue
        pages = ((f"the first {sp.res * nr} rows resident in the PE memories (WR"
                  + (f" in bank A, and the next {sp.resb * nr} in bank B: WB" if sp.resb else "")
                  + "), the other rows in " if sp.res else "")
                 + f"{len(sp.pages)} page(s) of up to {max(n for _, n in sp.pages) * nr} rows")
        if isinstance(sp, DramPanel):
            k = next(k for k, st in enumerate(stages) if st is not None and st[0] == l)
            d = dma[k]
            sb = _spad_part(sp, nr)
            kept = (f"the first {sp.split} in scratchpad beats {sp.spad_base}..{sp.spad_base + sb - 1}, the other "
                    f"{len(sp.pages) - sp.split} " if sb else "")
            out.append(f"W{l} panels: {pages} through WP, {kept}streamed from each core's DRAM (beats {sp.base}.."
                       f"{sp.base + sp.dram_beats(nr) - 1}: the panel exceeds the {cfg.spad_depth}-beat scratchpad) "
                       f"through scratchpad slots {sp.stage[0]} / {sp.stage[1]} ({sp.slot} beats each, "
                       f"double-buffered); per step and core {d['rd']} DRAM beats read, {d['wr']} written, DMA busy "
                       f"{d['busy']} cycles, {d['hidden']} hidden under the head's compute, {d['stall'] + d['tail']} "
                       f"exposed ({(d['stall'] + d['tail']) / max(1, step) * 100:.1f}% of the step)" + _swaps(sp)
                       + hist)
        else:
            held = " all" if sp.lead else ""
            out.append(f"W{l} panels: scratchpad beats {sp.base}..{sp.base + sp.beats(nr) - 1} of each core of the "
                       f"layer (the PE memories do not hold them{held}), {pages} through WP, loaded and stored once "
                       f"per step" + (", the pages before the resident rows, each load and store inside straight-line "
                                      "blocks of the resident rows' forward GEMV (the loads under a write predicate)"
                                      if sp.hide else "") + _swaps(sp) + hist)
    return out


def _swaps(sp) -> str:
    """The tier line's words on the page swaps (``sp.order == "alt"``)."""
    return ("; each page's update stores it as it computes it while the next page loads in its place (pages in "
            "alternating bus orders)" if sp.order == "alt" else "")
