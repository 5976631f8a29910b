"""Host <-> PE memory transfers as microprogram fragments.

Loading streams beats from the host into PE SRAM: one ``hin row`` beat carries one word
for each PE row (lane ``r`` on row bus ``r``) and is written by the PEs of one column
(predicate ``col = k``), so a core of ``nr x nr`` PEs takes ``nr`` beats per local word
address. Unloading drives one PE per column onto the column buses (``cdrv row = k``) and
pushes the column buses to the host (``hout col``): ``nr`` beats per local word address.
Both are zero-overhead hardware loops over the words (one AGU walks the addresses).

Cycle cost of each: ``nr * L`` instructions for ``L`` words per PE (plus one setup
instruction per column for the loop and AGU).

Cores with a scratchpad (``cfg.spad_kib > 0``): the same loops move PE memory from / to
the scratchpad instead of the host (``emit_load(..., source="spad")``,
``emit_unload(..., dest="spad")``: the beats are the same, read / written at consecutive
scratchpad addresses), and :func:`emit_spad_fill` / :func:`emit_spad_drain` copy host
beats into the scratchpad and back (one beat per instruction).
"""

from __future__ import annotations

import numpy as np

from arch.lanes import LaneBeats, pack_beats, unpack_beats
from sw.asm import Builder, cdrv, hin, hout, pred, rda, rdb, rdrv, sin, sout, wra, wrb
from arch.errors import InputError

__all__ = ["emit_load", "emit_spad_vector", "spad_vector_cost", "load_programs", "emit_unload", "load_beats_for",
           "load_lanes_for", "unload_beats_for", "decode_unload", "TransferError", "emit_spad_fill", "emit_spad_drain",
           "emit_page_move", "page_move_cost", "page_beats_for", "decode_page"]


class TransferError(InputError):
    """A transfer does not fit the PE memories."""


def _bank_words(cfg, bank: str) -> int:
    if bank not in ("a", "b"):
        raise TransferError(f"unknown SRAM bank {bank!r}; allowed: 'a', 'b'")
    return cfg.mem_a_words if bank == "a" else cfg.mem_b_words


def _check(cfg, bank, base, n):
    depth = _bank_words(cfg, bank)
    if n < 1 or base < 0 or base + n > depth:
        raise TransferError(f"{n} words at address {base} do not fit SRAM bank {bank.upper()} "
                            f"({depth} words)")
    if n >= (1 << cfg.loop_bits):
        raise TransferError(f"{n} words exceed the loop trip-count range ({(1 << cfg.loop_bits) - 1})")


def _check_spad(cfg, base, n):
    if not cfg.spad_kib:
        raise TransferError("this configuration has no scratchpad (cfg.spad_kib = 0)")
    if n < 1 or base < 0 or base + n > cfg.spad_depth:
        raise TransferError(f"{n} beats at address {base} do not fit the scratchpad ({cfg.spad_depth} beats)")


def emit_load(b: Builder, cfg, bank: str, base: int, n: int, agu: str = "g0", loop: str = "xfer",
              source: str = "host", spad_addr: int = 0, lanes: str = "rows") -> None:
    """Emit a loop nest that writes ``n`` host words per PE into ``bank[base:base+n]``.

    Consumes ``nr * n`` input beats in the order produced by :func:`load_beats_for`,
    from the host (``source="host"``) or from the scratchpad (``"spad"``: the beats at
    ``spad_addr .. spad_addr + nr*n - 1``; the read pointer is set here).
    ``lanes="cols"``: the beats in the order :func:`emit_unload` produces
    (:func:`unload_beats_for`; lane ``c`` of beat ``k*n + a`` over column bus ``c`` into
    PE ``(k, c)``, predicate ``row = k``), so a region unloaded to the scratchpad loads
    back unchanged. Uses AGU ``agu`` (base and stride are set here) and AR 0 (must be 0).
    Issues :func:`load_cost` instructions (one more with ``source="spad"``).
    """
    _check(cfg, bank, base, n)
    if source not in ("host", "spad"):
        raise TransferError(f"source must be 'host' or 'spad', got {source!r}")
    if lanes not in ("rows", "cols"):
        raise TransferError(f"lanes must be 'rows' or 'cols', got {lanes!r}")
    wr = wra if bank == "a" else wrb
    src = hin
    if source == "spad":
        _check_spad(cfg, spad_addr, cfg.nr * n)
        b.spad("rd", spad_addr)
        src = sin
    bus, sel = ("row", "col") if lanes == "rows" else ("col", "row")
    b.agu_base(agu, base)
    for k in range(cfg.nr):
        b.agu_stride(agu, f"{loop}{k}", 1)
        with b.loop(f"{loop}{k}", n):
            b.emit(src(bus), pred(sel, k), wr(bus, 0, 0, agu=agu))


def load_programs(cfg, items) -> list[tuple[list, list]]:
    """Programs that load ``items`` (``(region, local words)`` pairs: a region's ``bank``
    and ``base``, its ``(nr, nr, n)`` local words) into the PE memories, as few as the
    microcode holds (``1 + 3 nr`` words per region plus a HALT): ``(words, beats)`` each."""
    per = 1 + 3 * cfg.nr
    groups, cur = [], []
    for it in items:
        if cur and (len(cur) + 1) * per > cfg.ucode_depth - 1:
            groups.append(cur)
            cur = []
        cur.append(it)
    groups.append(cur)
    out = []
    for grp in groups:
        b = Builder(cfg)
        data = []
        for j, (reg, local) in enumerate(grp):
            emit_load(b, cfg, reg.bank, reg.base, local.shape[2], loop=f"w{j}_")
            data += load_beats_for(cfg, local)
        b.halt()
        out.append((b.build().words(), data))
    return out


def load_cost(cfg, n: int) -> int:
    """Instructions issued by :func:`emit_load` of ``n`` words per PE from the host: one
    AGU base, then per PE row / column one stride setting, the loop instruction and ``n``
    writes (from the scratchpad: one more, the pointer setting)."""
    return 1 + cfg.nr * (n + 2)


def unload_cost(cfg, n: int, last: bool = True) -> int:
    """Instructions issued by :func:`emit_unload` of ``n`` words per PE to the host (with
    ``last`` and ``n > 1`` the last column's final beat, with ``tlast``, is one more
    instruction after a new AGU base; to the scratchpad: ``load_cost + 1``)."""
    return 1 + cfg.nr * (n + 2) + (1 if last and n > 1 else 0)


def load_beats_for(cfg, local: np.ndarray) -> list[int]:
    """Host beats for :func:`emit_load` of ``local`` (``(nr, nr, n)`` bit patterns): beat
    ``k*n + a`` carries PE ``(r, k)``'s word ``a`` in lane ``r``."""
    return load_lanes_for(cfg, local).ints()


def load_lanes_for(cfg, local: np.ndarray) -> LaneBeats:
    """:func:`load_beats_for` as a :class:`arch.lanes.LaneBeats` (the ints made only when
    asked for)."""
    nr, w = cfg.nr, cfg.fmt.width
    local = np.asarray(local)
    if local.dtype.kind != "u":
        local = local.astype(np.uint64)
    if local.shape[:2] != (nr, nr):
        raise TransferError(f"local array must be (nr, nr, n) = ({nr}, {nr}, n), got {local.shape}")
    # [k, a, r]: column k, word a, lane r
    return LaneBeats(local.transpose(1, 2, 0).reshape(-1, nr), w)


def unload_beats_for(cfg, local: np.ndarray) -> list[int]:
    """Beats in the order :func:`emit_unload` produces them (decoded by
    :func:`decode_unload`) for ``local`` (``(nr, nr, n)`` bit patterns): beat ``k*n + a``
    carries PE ``(k, c)``'s word ``a`` in lane ``c``. The host fills a scratchpad region
    with these for :func:`emit_load` with ``lanes="cols"``."""
    nr, w = cfg.nr, cfg.fmt.width
    local = np.asarray(local, dtype=np.uint64)
    if local.shape[:2] != (nr, nr):
        raise TransferError(f"local array must be (nr, nr, n) = ({nr}, {nr}, n), got {local.shape}")
    # [k, a, c]: row k, word a, lane c
    return pack_beats(local.transpose(0, 2, 1).reshape(-1, nr), w)


def emit_unload(b: Builder, cfg, bank: str, base: int, n: int, agu: str = "g1", loop: str = "yfer",
                last: bool = True, dest: str = "host", spad_addr: int = 0) -> None:
    """Emit a loop nest that sends ``bank[base:base+n]`` of every PE to the host
    (``nr * n`` beats, decoded by :func:`decode_unload`). Only the driving PE reads.
    ``dest="spad"`` writes the same beats to the scratchpad at ``spad_addr ..
    spad_addr + nr*n - 1`` instead (the write pointer is set here; no ``last``)."""
    _check(cfg, bank, base, n)
    rd = rda if bank == "a" else rdb
    src = "mema" if bank == "a" else "memb"
    if dest not in ("host", "spad"):
        raise TransferError(f"dest must be 'host' or 'spad', got {dest!r}")
    if dest == "spad":
        _check_spad(cfg, spad_addr, cfg.nr * n)
        b.spad("wr", spad_addr)
        b.agu_base(agu, base)
        for k in range(cfg.nr):
            b.agu_stride(agu, f"{loop}{k}", 1)
            with b.loop(f"{loop}{k}", n):
                b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv(src, row=k), sout("col"))
        return
    b.agu_base(agu, base)
    for k in range(cfg.nr):
        b.agu_stride(agu, f"{loop}{k}", 1)
        if last and k == cfg.nr - 1 and n > 1:
            with b.loop(f"{loop}{k}", n - 1):
                b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv(src, row=k), hout("col"))
            # the final beat carries tlast: one more instruction at the last address
            b.agu_base(agu, base + n - 1)
            b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv(src, row=k), hout("col", last=True))
        else:
            with b.loop(f"{loop}{k}", n):
                b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv(src, row=k),
                       hout("col", last=last and k == cfg.nr - 1))


def emit_spad_vector(b: Builder, cfg, bank: str, base: int, n: int, store: bool, spad_addr: int,
                     agu: str = "g1", loop: str = "vfer") -> None:
    """Move a vector in the ``"cols"`` layout (``n`` words per PE, the same in every PE
    row) between ``bank[base:base+n]`` and scratchpad beats ``spad_addr ..
    spad_addr + n - 1``: a store sends PE row 0's words (lane ``c`` from PE ``(0, c)``
    over column bus ``c``); a load writes each beat's lane ``c`` into every PE of
    column ``c`` (no predicate). ``nr`` times fewer beats than :func:`emit_unload` /
    :func:`emit_load` of the same region. Issues :func:`spad_vector_cost` instructions."""
    _check(cfg, bank, base, n)
    _check_spad(cfg, spad_addr, n)
    b.spad("wr" if store else "rd", spad_addr)
    b.agu_base(agu, base)
    b.agu_stride(agu, loop, 1)
    with b.loop(loop, n):
        if store:
            rd = rda if bank == "a" else rdb
            b.emit(rd(0, 0, agu=agu, gate="cdrv"), cdrv("mema" if bank == "a" else "memb", row=0), sout("col"))
        else:
            b.emit(sin("col"), (wra if bank == "a" else wrb)("col", 0, 0, agu=agu))


def spad_vector_cost(n: int) -> int:
    """Instructions issued by :func:`emit_spad_vector`: the pointer, the AGU base and
    stride, the loop instruction and ``n`` moves."""
    return n + 4


def emit_page_move(b: Builder, cfg, bank: str, base: int, n: int, store: bool, spad_addr: int, agu: str = "g1",
                   loop: str = "pfer", bus: str = "row") -> None:
    """Move ``n`` words per PE between ``bank[base:base+n]`` and the scratchpad beats
    ``spad_addr .. spad_addr + nr*n - 1`` in word order (:func:`page_beats_for`): beat
    ``nr*a + k`` carries PE column ``k``'s word ``a``, lane ``i`` over row bus ``i`` from /
    to PE ``(i, k)`` (a store: ``rdrv @col=k``, ``sout row``; a load: ``sin row``,
    ``@col=k``). ``bus="col"``: over the column buses (beat ``nr*a + k``: PE row ``k``'s
    word ``a``, lane ``c`` from / to PE ``(k, c)``). A GEMV reading the words in this order
    can load the next page in place as it goes (:func:`sw.kernels.emit_gemv`,
    ``page_load``). Issues :func:`page_move_cost` instructions."""
    _check(cfg, bank, base, n)
    _check_spad(cfg, spad_addr, cfg.nr * n)
    if bus not in ("row", "col"):
        raise TransferError(f"bus must be 'row' or 'col', got {bus!r}")
    src = "mema" if bank == "a" else "memb"
    rd, wr = (rda, wra) if bank == "a" else (rdb, wrb)
    sel = "col" if bus == "row" else "row"
    drv = rdrv if bus == "row" else cdrv
    b.spad("wr" if store else "rd", spad_addr)
    b.agu_base(agu, base)
    b.agu_stride(agu, loop, 1)
    with b.loop(loop, n):
        for k in range(cfg.nr):
            if store:
                b.emit(rd(0, 0, agu=agu, gate=f"{bus[0]}drv"), drv(src, **{sel: k}), sout(bus))
            else:
                b.emit(sin(bus), pred(sel, k), wr(bus, 0, 0, agu=agu))


def page_move_cost(cfg, n: int) -> int:
    """Instructions issued by :func:`emit_page_move`: the pointer, the AGU base and
    stride, the loop instruction and ``nr * n`` moves."""
    return 4 + cfg.nr * n


def page_beats_for(cfg, local: np.ndarray, bus: str = "row") -> list[int]:
    """The beats of :func:`emit_page_move` for ``local`` (``(nr, nr, n)`` bit patterns):
    beat ``nr*a + k`` carries PE ``(i, k)``'s word ``a`` in lane ``i`` (``bus="col"``: PE
    ``(k, i)``'s)."""
    nr, w = cfg.nr, cfg.fmt.width
    local = np.asarray(local, dtype=np.uint64)
    if local.shape[:2] != (nr, nr):
        raise TransferError(f"local array must be (nr, nr, n) = ({nr}, {nr}, n), got {local.shape}")
    # [a, k, i]: word a, column k (row k over the column buses), lane i
    return pack_beats(local.transpose(2, 1, 0).reshape(-1, nr) if bus == "row" else
                      local.transpose(2, 0, 1).reshape(-1, nr), w)


def _lanes(cfg, beats, n: int) -> np.ndarray:
    """``nr * n`` beats (ints, beat objects with ``data`` or ``(data, last)`` pairs) ->
    their ``(nr * n, nr)`` lanes."""
    nr = cfg.nr
    data = [b.data if hasattr(b, "data") else (b[0] if isinstance(b, (tuple, list)) else int(b)) for b in beats]
    if len(data) != nr * n:
        raise TransferError(f"expected {nr * n} beats, got {len(data)}")
    return unpack_beats(data, nr, cfg.fmt.width, cfg.fmt.np_uint)


def decode_page(cfg, beats, n: int, bus: str = "row") -> np.ndarray:
    """``nr * n`` beats of :func:`page_beats_for` (with ``bus``) -> ``(nr, nr, n)`` bit
    patterns."""
    nr = cfg.nr
    # beat nr*a + k, lane i -> PE (i, k) (bus "col": PE (k, i)), word a
    lanes = _lanes(cfg, beats, n).reshape(n, nr, nr)
    return np.ascontiguousarray(lanes.transpose(2, 1, 0) if bus == "row" else lanes.transpose(1, 2, 0))


def decode_unload(cfg, beats, n: int) -> np.ndarray:
    """``nr * n`` beats of :func:`emit_unload` -> ``(nr, nr, n)`` bit patterns."""
    nr = cfg.nr
    # beat k*n + a, lane c -> PE (k, c), word a
    return np.ascontiguousarray(_lanes(cfg, beats, n).reshape(nr, n, nr).transpose(0, 2, 1))


def _chunks(cfg, n):
    step = (1 << cfg.loop_bits) - 1
    return [(i, min(step, n - i)) for i in range(0, n, step)]


def emit_spad_fill(b: Builder, cfg, base: int, n: int, loop: str = "sfill") -> None:
    """Emit a program fragment that copies the next ``n`` host input beats to scratchpad
    addresses ``base .. base + n - 1`` (``hin row | sout row``: a beat goes through
    unchanged, lane ``i`` over row bus ``i``). One instruction per beat plus the pointer."""
    _check_spad(cfg, base, n)
    b.spad("wr", base)
    for i, (_, m) in enumerate(_chunks(cfg, n)):
        with b.loop(f"{loop}{i}", m):
            b.emit(hin("row"), sout("row"))


def emit_spad_drain(b: Builder, cfg, base: int, n: int, last: bool = True, loop: str = "sdrain") -> None:
    """Emit a program fragment that sends scratchpad beats ``base .. base + n - 1`` to the
    host (``sin row | hout row``), ``tlast`` on the final beat when ``last``."""
    _check_spad(cfg, base, n)
    b.spad("rd", base)
    body = n - 1 if last else n
    for i, (_, m) in enumerate(_chunks(cfg, body) if body else []):
        with b.loop(f"{loop}{i}", m):
            b.emit(sin("row"), hout("row"))
    if last:
        b.emit(sin("row"), hout("row", last=True))
