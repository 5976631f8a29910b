"""The DRAM tier of the weight panels: panels too large for the PE memories and the
scratchpad live in the core's DRAM and are streamed through a double-buffered staging
area in the scratchpad (``docs/training.md``, "Weight panels in DRAM").

A :class:`DramPanel` is a :class:`sw.train_paging.SpadPanel` whose pages sit in DRAM;
the training compilers emit its page moves as for a scratchpad panel (``spad_op`` with
:meth:`DramPanel.page_addr`, a virtual address past every scratchpad), and
:func:`stream_parts` rewrites each such move to a staging slot and adds the DMA
transfers: the first page's load at the program's start, the next page's load right
after a page has left its slot for ``WP`` (so it runs during that page's compute; right
before, when the next page's move runs inside a GEMV, ``info["respad"]``), a
``dma wait`` just before a page is read from its slot, and after a page is written
back to its slot its store to DRAM. :func:`dma_timeline` predicts the stalls this
costs (the engine runs its transfers one after another; a start stalls the core while
``cfg.dma_queue`` are outstanding, a ``dma wait K`` while more than ``K`` are) from the
ops' issue cycles, so every part's cycles stay predicted exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sw.asm import Builder, dma
from sw.dram import dma_chunks, emit_dma_copy
from sw.train_host import TrainCompileError
from sw.train_ops import Op
from sw.train_paging import SpadPanel, spad_op
from sw.transfer import emit_spad_drain, emit_spad_fill

__all__ = ["panel_tier", "restore_microcode", "MixedPanel", "VIRT", "DramPanel", "place_dram", "stream_parts",
           "dma_timeline", "dram_traffic", "dram_init", "dram_read", "dram_unload_program", "tier_lines"]

#: virtual scratchpad address of DRAM beat 0 in the page moves the compilers emit
VIRT = 1 << 40


@dataclass(frozen=True)
class DramPanel(SpadPanel):
    """A weight panel in the core's DRAM (``base``: its first DRAM beat), its pages
    staged through the scratchpad slots ``stage`` (two, each ``slot`` beats)."""

    stage: tuple = (0, 0)
    slot: int = 0

    def page_addr(self, nr: int, p: int) -> int:
        return VIRT + self.dram_addr(nr, p)

    def dram_addr(self, nr: int, p: int) -> int:
        return self.base + nr * self.pages[p][0] * self.ncols

    def dram_pages(self) -> range:
        """The pages in DRAM (all)."""
        return range(len(self.pages))

    def dram_beats(self, nr: int) -> int:
        return self.beats(nr)


@dataclass(frozen=True)
class MixedPanel(DramPanel):
    """A panel whose first ``split`` pages stay in the scratchpad (from beat
    ``spad_base``, after the staging slots) and the rest in DRAM (from DRAM beat
    ``base``): the page moves of the first ones are plain scratchpad moves, only the
    others are streamed."""

    spad_base: int = field(default=0, kw_only=True)
    split: int = field(default=0, kw_only=True)

    def _r0(self) -> int:
        return self.pages[self.split][0] if self.split < len(self.pages) else self.lrows

    def page_addr(self, nr: int, p: int) -> int:
        if p < self.split:
            return self.spad_base + nr * self.pages[p][0] * self.ncols
        return VIRT + self.dram_addr(nr, p)

    def dram_addr(self, nr: int, p: int) -> int:
        return self.base + nr * (self.pages[p][0] - self._r0()) * self.ncols

    def dram_pages(self) -> range:
        return range(self.split, len(self.pages))

    def spad_beats(self, nr: int) -> int:
        return nr * self._r0() * self.ncols

    def dram_beats(self, nr: int) -> int:
        return self.beats(nr) - self.spad_beats(nr)


def panel_tier(sp) -> str:
    """Where a layer's weights live, for tables: ``"PE memory"`` (``sp`` None, or a
    panel with no page), else the tiers of its pages (``"scratchpad"``, ``"DRAM"``,
    ``"scratchpad + DRAM"``), after ``"PE memory + "`` when some rows stay resident."""
    if sp is None or not sp.pages:
        return "PE memory"
    t = ("scratchpad + DRAM" if isinstance(sp, MixedPanel) and sp.split else
         "DRAM" if isinstance(sp, DramPanel) else "scratchpad")
    return "PE memory + " + t if sp.lead else t


def place_dram(cfg, panels: dict, force=None, reserve: int = 0, max_slots: int = 2) -> dict | None:
    """Keep the panels of ``panels`` (layer -> :class:`SpadPanel`, all in the
    scratchpad) in the scratchpad if they fit, else move the largest to DRAM until the
    rest and two staging slots (each the largest DRAM page) fit; ``force``: the layers to
    put in DRAM (an explicit choice, e.g. to test streaming on small networks);
    ``reserve``: beats at the scratchpad's top kept for other data. Up to ``max_slots``
    staging slots where the scratchpad has room for more after the panels it keeps (the
    pages' transfers then start further ahead, :func:`stream_parts`). None when
    nothing fits the scratchpad; raises :class:`TrainCompileError` when the DRAM panels
    exceed the DRAM, or for a bad ``force``."""
    nr = cfg.nr
    order = sorted(panels, key=lambda l: (-panels[l].words, l))
    if force is not None:
        dl = sorted(set(int(l) for l in force))
        if not dl or any(l not in panels for l in dl):
            raise TrainCompileError(f"dram layers must be a non-empty subset of the paged layers {sorted(panels)}, "
                                    f"got {sorted(force)}")
        if not cfg.dram_mib:
            raise TrainCompileError("weights in DRAM need it: this configuration has none (cfg.dram_mib = 0)")
        order = dl + [l for l in order if l not in dl]
    for j in range(len(force) if force is not None else 0, len(order) + 1):
        dl = set(order[:j])
        slot = max((nr * max(n for _, n in panels[l].pages) * panels[l].ncols for l in dl), default=0)
        spad_beats = sum(panels[l].beats(nr) for l in panels if l not in dl) + 2 * slot
        if spad_beats > cfg.spad_depth - reserve:
            if force is not None:
                raise TrainCompileError(f"the scratchpad panels and two staging slots of {slot} beats need "
                                        f"{spad_beats} beats, the scratchpad has {cfg.spad_depth}"
                                        + (f" less {reserve} reserved" if reserve else ""))
            continue
        if j and not cfg.dram_mib:
            return None
        extra = 0 if not slot else max(0, min(max_slots - 2, (cfg.spad_depth - reserve - spad_beats) // slot))
        stage = (0, slot) + tuple(spad_beats + i * slot for i in range(extra))
        out, at, dat = {}, 2 * slot, 0
        for l in sorted(panels):
            sp = panels[l]
            if l in dl:
                out[l] = DramPanel(dat, sp.lrows, sp.ncols, sp.pages, stage, slot, order=sp.order)
                dat += sp.beats(nr)
            else:
                out[l] = SpadPanel(at, sp.lrows, sp.ncols, sp.pages, order=sp.order)
                at += sp.beats(nr)
        if dat > cfg.dram_depth:
            raise TrainCompileError(f"the weight panels in DRAM ({', '.join(f'W{l}' for l in sorted(dl))}) need "
                                    f"{dat} beats per core, the DRAM has {cfg.dram_depth} (cfg.dram_mib = "
                                    f"{cfg.dram_mib})")
        return out
    return None


# ======================================================================================
# streaming: the DMA transfers around the page moves
# ======================================================================================
def _pages_of(panels: dict, nr: int) -> dict:
    """Virtual address -> (panel, page) of every DRAM page."""
    return {sp.page_addr(nr, p): (sp, p) for sp in panels.values() if isinstance(sp, DramPanel)
            for p in sp.dram_pages()}


def _copy_layout(cfg, dram: int, n: int) -> tuple:
    """The instructions :func:`sw.dram.emit_dma_copy` (no wait) issues: ``([(offset,
    beats) of each start], count)``: the two pointers, then per run of equal transfers
    one start, or a loop instruction and the start once per iteration."""
    chunks = dma_chunks(cfg, dram, n)
    starts, at, i = [], 2, 0
    while i < len(chunks):
        j = i
        while j < len(chunks) and chunks[j] == chunks[i]:
            j += 1
        at += j - i > 1
        for m in chunks[i:j]:
            starts.append((at, m))
            at += 1
        i = j
    return starts, at


class _Frag:
    """DMA instructions put in front of an op: ``items`` ``(kind, dram, spad, beats)``
    with kind ``load`` / ``store`` / ``wait`` (a wait's ``beats``: the transfers it keeps
    outstanding, ``dma wait K``)."""

    def __init__(self):
        self.items = []

    def emit(self, cfg, b: Builder, tag: str) -> int:
        n = 0
        for i, (kind, dram, spad, beats) in enumerate(self.items):
            if kind == "wait":
                b.emit(dma("wait", beats))       # keeping ``beats`` transfers outstanding
                n += 1
            else:
                emit_dma_copy(b, cfg, kind, dram, spad, beats, wait=False, loop=f"{tag}d{i}_")
                n += _copy_layout(cfg, dram, beats)[1]
        return n

    def offsets(self, cfg) -> list:
        """``(instruction offset, kind, beats)`` of every start and wait."""
        out, at = [], 0
        for kind, dram, _spad, beats in self.items:
            if kind == "wait":
                out.append((at, "wait", beats))
                at += 1
                continue
            starts, n = _copy_layout(cfg, dram, beats)
            out += [(at + o, kind, m) for o, m in starts]
            at += n
        return out


def _moves(op: Op) -> list:
    """The page moves of an op: ``(store, buffer, words, scratchpad beat)`` each (a
    :func:`sw.train_paging.rank1_swap_op` has a store and maybe a load)."""
    if "swap" in op.info:
        return [m[:4] for m in op.info["swap"]]
    return [op.info["spad"]] if "spad" in op.info else []


def _stream_one(cfg, ops: list, pages: dict) -> list:
    """:func:`stream_parts` for one core's ops."""
    nr = cfg.nr
    idx = [i for i, op in enumerate(ops) if any(mv[3] in pages for mv in _moves(op))]
    if not idx:
        return ops
    loads = [(i, mv[3]) for i in idx for mv in _moves(ops[i]) if not mv[0] and mv[3] in pages]
    K = min(len(sp.stage) for sp, _ in pages.values())     # staging slots: K - 1 loads ahead
    slot_of_load = {ld: j % K for j, ld in enumerate(loads)}
    pre = [_Frag() for _ in range(len(ops) + 1)]
    new = list(ops)
    # (kind, slot, transfers) of the page copies started and maybe not done (a copy is
    # sw.dram.dma_chunks' transfers; every start waits for the transfer cfg.dma_queue
    # starts before it)
    opened: list = []
    pending = set()                     # slots holding a page loaded but not yet moved to WP
    page_slot = {}

    def start(at, kind, slot, sp, p):
        dram, beats = sp.dram_addr(nr, p), nr * sp.page_words(p)
        pre[at].items.append((kind, dram, sp.stage[slot], beats))
        opened.append((kind, slot, len(dma_chunks(cfg, dram, beats))))
        while sum(x[2] for x in opened[1:]) >= cfg.dma_queue:
            opened.pop(0)
        if kind == "load":
            pending.add(slot)

    def wait_for(i, hit):
        """Before op ``i``: a wait for the latest open copy ``hit`` takes (and those
        before it), keeping the later copies' transfers outstanding."""
        nonlocal opened
        js = [j for j, x in enumerate(opened) if hit(*x[:2])]
        if js:
            pre[i].items.append(("wait", 0, 0, sum(x[2] for x in opened[js[-1] + 1:])))
            opened = opened[js[-1] + 1:]

    for j, (_, addr) in enumerate(loads[:K - 1]):
        sp, p = pages[addr]
        start(0, "load", j, sp, p)
    for i in idx:
        at = {}                          # scratchpad beat of each DRAM page moved -> its slot's
        after = []                       # the copies started after the op
        for store, WP, words, addr in _moves(ops[i]):
            if addr not in pages:
                continue
            sp, p = pages[addr]
            if store:
                pref = page_slot.get(addr, 0)
                free = [x for x in [pref] + [x for x in range(K) if x != pref] if x not in pending]
                if not free:            # pragma: no cover - a page is consumed before the next store
                    raise AssertionError(f"{ops[i].name}: no free staging slot")
                s = free[0]
                wait_for(i, lambda kind, slot, s=s: slot == s)                     # its sout writes the slot
                after.append((i + 1, "store", s, sp, p))
            else:
                s = slot_of_load[(i, addr)]
                wait_for(i, lambda kind, slot, s=s: kind == "load" and slot == s)  # its sin reads it
                pending.discard(s)
                j = loads.index((i, addr)) + K - 1          # the load whose slot this one frees
                if j < len(loads):
                    ni, naddr = loads[j]
                    nsp, np_ = pages[naddr]
                    # a load inside a GEMV (``respad``) takes its page while the op before it
                    # runs: that page's transfer starts before that op, once the slot is free
                    early = "respad" in ops[ni].info and j % K not in pending
                    after.append((i if early else i + 1, "load", j % K, nsp, np_))
            at[addr] = sp.stage[s]
            page_slot[addr] = s
        for x in after:
            start(*x)
        new[i] = replace(_restaged(cfg, ops[i], at), per_core=ops[i].per_core)
    if opened or pre[len(ops)].items:
        pre[len(ops)].items.append(("wait", 0, 0, 0))
    out = []
    for i, op in enumerate(new):
        out.append(_merge(cfg, pre[i], op, f"{op.name}_") if pre[i].items else op)
    if pre[len(ops)].items:
        f = pre[len(ops)]
        out.append(Op("dma_end", "dma", lambda b, f=f: f.emit(cfg, b, "dend_"), reads=[], writes=[], stores=False,
                      info={"dma": f.offsets(cfg)}))
    return out


def _restaged(cfg, op: Op, at: dict) -> Op:
    """``op`` with its page moves at the staging slots ``at`` (scratchpad beat -> slot
    beat) instead."""
    if "swap" in op.info:
        out, *ld = [m[3] for m in op.info["swap"]]
        return op.info["reswap"](at.get(out, out), at.get(ld[0], ld[0]) if ld else None)
    store, WP, words, addr = op.info["spad"]
    remake = op.info.get("respad")
    return remake(at[addr]) if remake else spad_op(cfg, op.name, store, WP, words, at[addr],
                                                     op.info.get("order", "rows"))


def _merge(cfg, frag: _Frag, op: Op, tag: str) -> Op:
    """``op`` with the DMA instructions of ``frag`` in front (the op's reads come later,
    so the NOPs computed for it before stay enough)."""
    return replace(op, emit=lambda b, f=frag, e=op.emit: f.emit(cfg, b, tag) + e(b),
                   info={**op.info, "dma": frag.offsets(cfg)})


def stream_parts(cfg, parts_ops: dict, panels: dict) -> dict:
    """``parts_ops`` (part -> per core ops) with the page moves of the DRAM panels of
    ``panels`` rewritten to the staging slots and the DMA transfers added (module
    docstring); unchanged without DRAM panels."""
    pages = _pages_of(panels, cfg.nr)
    if not pages:
        return parts_ops
    return {nm: [_stream_one(cfg, ops, pages) for ops in pco] for nm, pco in parts_ops.items()}


def dma_timeline(cfg, ops: list, gaps: list, jumps=(), calls=()) -> dict:
    """The DMA of one program (its ops, the NOPs before each, the alignment JUMPs after
    the ops ``jumps`` names and the JUMPs to and from the resident region around those
    ``calls`` names, :class:`sw.train_chip_place.ChipPart`): ``stall`` (cycles the
    core waits for the engine), ``busy`` (cycles the engine works), ``hidden`` (busy
    cycles under issued instructions), ``tail`` (cycles the RUN's end waits for the
    engine after the HALT's drain: 0 when the program ends with a wait, but a part split
    into several programs may leave a transfer running at a program's end), the beats
    read and written (``rd``, ``wr``)."""
    t, stall, busy, rd, wr = 0, 0, 0, 0, 0
    ends = [-1]                         # the transfers' last busy cycles (after a -1)
    q = cfg.dma_queue
    b = Builder(cfg)
    jumps, calls = set(jumps), set(calls)
    for i, (op, g) in enumerate(zip(ops, gaps)):
        t += g + (i in calls)
        base, shift = t, 0
        for off, kind, beats in op.info.get("dma", ()):
            at = base + off + shift
            # a wait issues once the engine is idle, a start once the transfer dma_queue
            # starts before it is done (sim.dma_model.dma_schedule)
            if kind == "wait":               # keeping ``beats`` transfers outstanding
                need = ends[-1 - beats] if len(ends) > 1 + beats else -1
            else:
                need = ends[-q] if len(ends) > q else -1
            if at <= need:
                s = need + 1 - at
                shift += s
                stall += s
                at += s
            if kind != "wait":
                d = cfg.dma_cycles(beats, kind == "store")
                ends.append(max(at, ends[-1]) + d)
                busy += d
                rd, wr = (rd + beats, wr) if kind == "load" else (rd, wr + beats)
        t = base + op.emit(b) + shift + (i in jumps) + (i in calls)
    # a transfer still running at the HALT (a part split into programs) holds the RUN's end
    tail = max(0, ends[-1] + 2 - t - cfg.run_overhead)
    return {"stall": stall, "busy": busy, "hidden": busy - stall - tail, "rd": rd, "wr": wr, "tail": tail}


def dram_traffic(programs: list, cfg) -> dict:
    """:func:`dma_timeline` summed over ``programs`` (``(ops, gaps)`` or ``(ops, gaps,
    jumps[, calls])``)."""
    tot = {"stall": 0, "busy": 0, "hidden": 0, "rd": 0, "wr": 0, "tail": 0}
    for ops, gaps, *jumps in programs:
        for k, v in dma_timeline(cfg, ops, gaps, *jumps).items():
            tot[k] += v
    return tot


# ======================================================================================
# host side: weights into DRAM and back through the staging slot
# ======================================================================================
def _page_beats(cfg, sp: DramPanel, p: int) -> int:
    return cfg.nr * sp.page_words(p)


def dram_init(session, cfg, sp: DramPanel, images: list, name: str) -> None:
    """Load a DRAM panel: per page a RUN filling staging slot 0 from the host and storing
    it to DRAM (``images``: per core the panel's beats, :func:`sw.train_paging.spad_image`)."""
    at = 0
    for p in range(len(sp.pages)):
        n = _page_beats(cfg, sp, p)
        b = Builder(cfg)
        emit_spad_fill(b, cfg, sp.stage[0], n)
        emit_dma_copy(b, cfg, "store", sp.dram_addr(cfg.nr, p), sp.stage[0], n)
        b.halt()
        img = b.build().words()
        session.run([img] * cfg.cores, [im[at:at + n] for im in images], f"{name}-p{p}")
        at += n


def dram_read(session, cfg, sp: DramPanel) -> list:
    """Per core the beats of a DRAM panel, page by page through staging slot 0 (RUNs that
    change only the staging slot)."""
    out = [[] for _ in range(cfg.cores)]
    held = list(getattr(session, "loaded", []))
    for p in range(len(sp.pages)):
        n = _page_beats(cfg, sp, p)
        b = Builder(cfg)
        emit_dma_copy(b, cfg, "load", sp.dram_addr(cfg.nr, p), sp.stage[0], n)
        b.halt()
        session.run([b.build().words()] * cfg.cores, None, f"read-dram-p{p}")
        for k in range(cfg.cores):
            out[k] += [int(x) for x in session.scratchpad(k, sp.stage[0], n)]
    restore_microcode(session, held)
    return out


def restore_microcode(session, held) -> None:
    """LOAD back the images the cores ``held`` before a read-back (the read-back's
    cost, so the next step reloads only what a step does)."""
    if held and all(h is not None for h in held) and hasattr(session, "load"):
        session.load(held)


def dram_unload_program(cfg, sp: DramPanel) -> list:
    """One program sending a DRAM panel to the host page by page (DRAM -> staging slot 0
    -> host), ``tlast`` on the last beat."""
    b = Builder(cfg)
    last = len(sp.pages) - 1
    for p in range(last + 1):
        n = _page_beats(cfg, sp, p)
        emit_dma_copy(b, cfg, "load", sp.dram_addr(cfg.nr, p), sp.stage[0], n, loop=f"ul{p}_")
        emit_spad_drain(b, cfg, sp.stage[0], n, last=p == last, loop=f"ud{p}_")
    b.halt()
    return b.build().words()


def tier_lines(cfg, P: list, N: list, panels: dict, traffic: dict, step_cycles: int) -> list:
    """The describe() lines: per layer where its panel lives and why, the DRAM traffic
    and the DMA cycles hidden and exposed per step."""
    from sw.layout import local_len
    nr = cfg.nr
    out = []
    for l in range(len(P)):
        w = local_len(P[l], nr) * local_len(N[l], nr)
        sp = panels.get(l)
        if sp is None:
            out.append(f"W{l} panel: resident in the PE memories ({w} words per PE)")
        elif isinstance(sp, DramPanel):
            out.append(f"W{l} panel: streamed from DRAM beats {sp.base}..{sp.base + sp.beats(nr) - 1} ({sp.beats(nr)} beats; "
                       f"the PE memories and the scratchpad hold the rest), {len(sp.pages)} page(s) of up to "
                       f"{max(n for _, n in sp.pages) * nr} rows through scratchpad slots "
                       f"{' / '.join(map(str, sp.stage))} ({sp.slot} beats each, "
                       + ("double-buffered" if len(sp.stage) == 2 else f"{len(sp.stage) - 1} pages ahead")
                       + ") and WP")
        else:
            out.append(f"scratchpad beats {sp.base}..{sp.base + sp.beats(nr) - 1}: W{l} panel, {len(sp.pages)} "
                       f"page(s) of up to {max(n for _, n in sp.pages) * nr} rows through WP (paged from the "
                       f"scratchpad: the PE memories do not hold it)")
        if sp is not None and sp.order in ("words", "alt"):
            out[-1] += ("; in word order: a page's forward kernel loads the next page in place as it runs, where "
                        "it can")
        if sp is not None and sp.order == "alt":
            out[-1] += ("; the pages alternate the row and the column buses' orders, and each backward update "
                        "stores its page as it computes it while the next page loads in its place")
    if traffic and traffic["busy"]:
        out.append(f"DRAM per step and core: {traffic['rd']} beats read, {traffic['wr']} written "
                   f"({(traffic['rd'] + traffic['wr']) * cfg.spad_beat_bytes} bytes); DMA busy {traffic['busy']} "
                   f"cycles, {traffic['hidden']} hidden under compute, {traffic['stall'] + traffic['tail']} exposed "
                   f"({traffic['stall']} stalls, {traffic['tail']} at RUN ends; "
                   f"{(traffic['stall'] + traffic['tail']) / max(1, step_cycles) * 100:.1f}% of the step's "
                   f"{step_cycles} cycles)")
    return out
