"""The rank-1 update that stores its page as it computes it and loads the next page in
place (:func:`sw.kernels.emit_rank1_swap`), on the core model, the fast model and the
core RTL."""

import numpy as np
import pytest

from arch.config import ArchConfig
from sw import golden
from sw.asm import Builder
from sw.collectives import Frag, Region
from sw.kernels import KernelError, Scalar, emit_rank1_swap, rank1_swap_cost, rank1_swap_why_not
from sw.layout import local_len, pack_matrix, pack_vector
from tests.sw.test_collectives import rand_bits
from tests.sw.test_kernels import _eq, _seed

#: (nr, m, n, local rows loaded, u layout, FPU latencies (mul, add)): one row, several,
#: padding, a shorter next page, no next page, a longer one, a longer FPU pipeline, nr = 2 and 3
CASES = {"nr4": (4, 4, 37, 1, "diag", None), "nr4_rows": (4, 20, 9, 5, "diag", None),
         "nr4_short": (4, 12, 10, 1, "rows", None), "nr4_store": (4, 8, 6, 0, "diag", None),
         "nr4_long": (4, 8, 10, 5, "diag", None), "nr3_long": (3, 3, 7, 2, "rows", None),
         "nr4_slow": (4, 8, 11, 2, "diag", (4, 5)), "nr3_pad": (3, 7, 10, 2, "diag", None),
         "nr2": (2, 5, 5, 3, "rows", None)}

OUT, IN = 8, 200           # scratchpad beats of the stored page and of the loaded one


def _run(cfg, backend, m, n, li, u_layout, out_bus, seed, name="rank1_swap"):
    """Load ``W0`` (bank a from word 3), ``u``, ``v``, ``alpha`` (bank b), the next page
    ``W1`` (``li`` local rows) into the scratchpad at :data:`IN` in the other bus's order;
    run the kernel; unload ``W``'s region and drain the stored page. Returns ``(info, the
    kernel's result, W's local words, the stored beats, the operands)``."""
    from sim.core_run import Phase, run_session
    from sw.transfer import emit_load, emit_spad_drain, emit_spad_fill, emit_unload, load_beats_for, page_beats_for

    rng = np.random.default_rng(seed)
    nr, fmt = cfg.nr, cfg.fmt
    mp, np_ = local_len(m, nr), local_len(n, nr)
    W0, ug, vg = rand_bits(fmt, rng, (m, n)), rand_bits(fmt, rng, (m,)), rand_bits(fmt, rng, (n,))
    W1 = rand_bits(fmt, rng, (li * nr, n)) if li else None
    alpha = fmt.from_float(np.array([-0.01]))[0]
    W, u, v, al = Region("a", 3), Region("b", 0), Region("b", 40), Region("b", 120)
    in_bus = "col" if out_bus == "row" else "row"
    ww = max(mp, li) * np_                 # W's region: the longer of the two pages
    b1 = Builder(cfg)
    emit_load(b1, cfg, "a", W.base, ww, loop="w")
    emit_load(b1, cfg, "b", u.base, mp, loop="u")
    emit_load(b1, cfg, "b", v.base, np_, loop="v")
    emit_load(b1, cfg, "b", al.base, 1, loop="al")
    W0p = np.zeros((nr, nr, ww), dtype=np.uint64)
    W0p[:, :, :mp * np_] = pack_matrix(W0, nr)
    data = (load_beats_for(cfg, W0p) + load_beats_for(cfg, pack_vector(ug, nr, u_layout))
            + load_beats_for(cfg, pack_vector(vg, nr, "cols"))
            + load_beats_for(cfg, np.full((nr, nr, 1), alpha, dtype=np.uint64)))
    if li:
        emit_spad_fill(b1, cfg, IN, nr * li * np_)
        data += page_beats_for(cfg, pack_matrix(W1, nr), in_bus)
    b1.halt()
    b2 = Builder(cfg)
    info = emit_rank1_swap(b2, cfg, m, n, W, u, v, Scalar("b", al.base), out_bus=out_bus, out_addr=OUT,
                           load=(li, in_bus, IN) if li else None, u_layout=u_layout)
    b2.halt()
    b3 = Builder(cfg)
    emit_unload(b3, cfg, "a", W.base, ww, loop="y", last=False)
    emit_spad_drain(b3, cfg, OUT, nr * mp * np_)
    b3.halt()
    _, r2, r3 = run_session(cfg, [Phase(b1.build().words(), data), Phase(b2.build().words()),
                                  Phase(b3.build().words())], backend=backend,
                            **({"sim": "icarus", "name": name} if backend == "rtl" else {}))
    from sw.transfer import decode_page, decode_unload
    nw = nr * ww
    Wl = decode_unload(cfg, r3.data[:nw], ww)
    stored = decode_page(cfg, r3.data[nw:], mp * np_, out_bus)
    return info, r2, Wl, stored, (W0, W1, ug, vg, alpha)


@pytest.mark.parametrize("backend,case,out_bus", [(b, c, o) for b in ("model", "fast") for c in CASES
                                                  for o in ("row", "col")]
                         + [("rtl", "nr4_rows", "row"), ("rtl", "nr4_long", "col"),
                            pytest.param("rtl", "nr3_pad", "col", marks=pytest.mark.slow)])
def test_rank1_swap(backend, case, out_bus, request):
    """The stored page is :func:`sw.golden.rank1`'s update bit for bit (in
    :func:`sw.transfer.emit_page_move`'s order over ``out_bus``); ``W``'s region holds
    the next page's words (the other bus's order; a longer one too), the rest the old
    words; the kernel
    issues :func:`rank1_swap_cost` instructions and moves one beat per word and PE row
    each way."""
    nr, m, n, li, u_layout, lat = CASES[case]
    if backend == "rtl":
        request.getfixturevalue("require_simulator")("icarus")
    seed = _seed()
    kw = {} if lat is None else {"mul_latency": lat[0], "add_latency": lat[1]}
    cfg = ArchConfig(nr=nr, mem_a_words=256, mem_b_words=256, ucode_depth=256, spad_kib=4, **kw)
    info, r2, Wl, stored, (W0, W1, ug, vg, alpha) = _run(cfg, backend, m, n, li, u_layout, out_bus, seed)
    fmt = cfg.fmt
    mp, np_ = local_len(m, nr), local_len(n, nr)
    new = pack_matrix(golden.rank1(fmt, nr, W0, ug, vg, alpha), nr)
    _eq(stored, new, "stored page")
    old = np.zeros((nr, nr, max(mp, li) * np_), dtype=np.uint64)
    old[:, :, :mp * np_] = pack_matrix(W0, nr)
    if li:
        old[:, :, :li * np_] = pack_matrix(W1, nr)
    _eq(Wl, old, "W after the swap")
    assert info.instructions == rank1_swap_cost(cfg, m, n, li)["instructions"] == r2.counters["instructions"] - 1
    assert r2.counters["spad_wr_beats"] == nr * mp * np_
    assert r2.counters["spad_rd_beats"] == nr * li * np_
    # nr instructions per word, and a constant: the prologue (alpha, the scaled u, the
    # FPU latency) and the last word's move and beats
    F = cfg.fpu_latency - 1
    assert info.instructions == max(1 + mp, 1 + F, 6) + nr * max(mp * np_ + (F + nr) // nr, li * np_ + 1)


def test_rank1_swap_why_not_and_errors():
    """Where the kernel does not apply, the reason; ``emit_rank1_swap`` refuses those
    cases and a load over the same bus as the store."""
    cfg = ArchConfig(nr=4, spad_kib=1)
    assert rank1_swap_why_not(cfg, 52) is None
    assert "registers" in rank1_swap_why_not(cfg, 56)
    assert rank1_swap_why_not(cfg, 8, 13) is None          # a longer next page: its last words after the update
    assert "no scratchpad" in rank1_swap_why_not(ArchConfig(nr=4), 8)
    W, u, v = Region("a", 0), Region("b", 0), Region("b", 100)
    with pytest.raises(KernelError, match="other bus"):
        emit_rank1_swap(Frag(), cfg, 8, 8, W, u, v, Scalar("b", 200), out_bus="row", out_addr=0,
                        load=(2, "row", 100))
    with pytest.raises(KernelError, match="registers"):
        emit_rank1_swap(Frag(), cfg, 60, 8, W, u, v, Scalar("b", 200), out_bus="row", out_addr=0)
    with pytest.raises(KernelError, match="W's bank"):
        emit_rank1_swap(Frag(), cfg, 8, 8, W, u, Region("a", 100), Scalar("b", 200), out_bus="row", out_addr=0)
