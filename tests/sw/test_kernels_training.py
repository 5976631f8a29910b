"""The kernels of the training steps' own paths on the core model: the fused backward
step (transposed GEMV and rank-1 update in one pass), a GEMV loading the next page in
place as it streams, and paged SGD's one-row accumulation of ``W^T d``."""

import numpy as np
import pytest

from arch.config import ArchConfig
from sim.core_run import run_kernel
from sw import golden
from sw.asm import Builder
from sw.collectives import Frag, Region
from sw.kernels import (KernelError, Scalar, emit_axpy, emit_gemv, emit_gemv_t_rank1, gemv_cost, gemv_t_rank1_cost,
                        rank1_cost)
from sw.layout import local_len, pack_matrix, pack_vector, unpack_vector
from tests.sw.test_collectives import rand_bits
from tests.sw.test_kernels import SHAPES, FORMATS, Mem, _cfg, _eq, _seed, _shapes, gemv_t_rank1_case, run_cases


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("nr", [2, 3, 4])
def test_gemv_t_rank1_model(nr, fmt):
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = _cfg(nr, fmt)
    shapes = SHAPES + _shapes(rng)
    for i, (m, n) in enumerate(shapes):
        for dl, red in (("diag", "tree"), ("rows", "seq")):
            print(f"shape {m}x{n} d {dl} reduce {red}")
            run_cases(cfg, [gemv_t_rank1_case(cfg, rng, Mem(cfg), m, n, d_layout=dl, reduce=red)])


def test_gemv_t_rank1_blockings_and_latencies_model():
    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = _cfg(2, "binary16")
    for block in (1, 2, 3, 4, 5):
        run_cases(cfg, [gemv_t_rank1_case(cfg, rng, Mem(cfg), 9, 19, block=block)])
    slow = ArchConfig(nr=3, mem_a_words=256, mem_b_words=256, mul_latency=4, add_latency=5)
    for m, n in ((4, 40), (13, 7), (1, 1)):
        run_cases(slow, [gemv_t_rank1_case(slow, rng, Mem(slow), m, n)])


def test_gemv_t_rank1_cost_and_energy_events():
    """Cost formula = fragment for many shapes; for 256 x 256 on a 4x4 core the fused
    step is as fast as GEMV^T + rank-1 within 1 % and reads W once."""
    for nr in (2, 4, 8):
        cfg = ArchConfig(nr=nr, mem_a_words=8192, mem_b_words=8192)
        for m, n in [(1, 1), (5, 3), (17, 13), (64, 64), (256, 256), (100, 7), (7, 100)]:
            if local_len(m, nr) * local_len(n, nr) > 4096:
                continue
            info = emit_gemv_t_rank1(Frag(), cfg, m, n, Region("a", 0), Region("b", 0), Region("b", 3000),
                                     Region("b", 6000), alpha=Scalar("b", 8000))
            assert info.instructions == gemv_t_rank1_cost(cfg, m, n)["instructions"]
    cfg = ArchConfig()
    fused = gemv_t_rank1_cost(cfg, 256, 256)["instructions"]
    sep = gemv_cost(cfg, 256, 256, trans=True)["instructions"] + rank1_cost(cfg, 256, 256)["instructions"]
    assert fused <= 1.01 * sep, (fused, sep)



def _page_load_case(request, backend, nr, m, n):
    """The setup of a page-load kernel test: the simulator for ``rtl``, the seeded
    generator, the core's configuration, the current and the next page (``m x n``)."""
    if backend == "rtl":
        request.getfixturevalue("require_simulator")("icarus")
    rng = np.random.default_rng(_seed())
    cfg = ArchConfig(nr=nr, mem_a_words=256, mem_b_words=256, ucode_depth=256, spad_kib=1)
    return cfg, rng, rand_bits(cfg.fmt, rng, (m, n)), rand_bits(cfg.fmt, rng, (m, n))


def _run_page_load(cfg, backend, name, W, W0, W1, operand, out, out_words, emit, bus="row"):
    """A kernel loading the next page of ``W`` in place, on ``backend``: ``W0`` (``m x n``)
    into ``W``'s region (bank a), ``operand`` (``(region, local array)``, bank b), the
    next page ``W1`` into the scratchpad from beat 40 in word order (over ``bus``); then ``emit(builder)``
    (the kernel, ``page_load=40``); then ``out`` (``out_words`` per PE) and ``W``'s region
    unloaded. Returns ``(kernel info, the kernel phase's result, out's local words,
    W's local words)``."""
    from sim.core_run import Phase, run_session
    from sw.transfer import decode_unload, emit_load, emit_spad_fill, emit_unload, load_beats_for, page_beats_for

    nr = cfg.nr
    nw = pack_matrix(W0, nr).shape[2]
    region, local = operand
    b1 = Builder(cfg)
    emit_load(b1, cfg, "a", W.base, nw, loop="w")
    emit_load(b1, cfg, "b", region.base, local.shape[2], loop="x")
    emit_spad_fill(b1, cfg, 40, nr * nw)
    b1.halt()
    data = load_beats_for(cfg, pack_matrix(W0, nr)) + load_beats_for(cfg, local) + page_beats_for(
        cfg, pack_matrix(W1, nr), bus)
    b2 = Builder(cfg)
    info = emit(b2)
    b2.halt()
    b3 = Builder(cfg)
    emit_unload(b3, cfg, "b", out.base, out_words, loop="y")
    emit_unload(b3, cfg, "a", W.base, nw, loop="v")
    b3.halt()
    _, r2, r3 = run_session(cfg, [Phase(b1.build().words(), data), Phase(b2.build().words()),
                                  Phase(b3.build().words())], backend=backend,
                            **({"sim": "icarus", "name": name} if backend == "rtl" else {}))
    no = nr * out_words
    return info, r2, decode_unload(cfg, r3.data[:no], out_words), decode_unload(cfg, r3.data[no:], nw)


#: (nr, m, n, x layout, the next page's bus)
PAGE_LOAD = {"nr4": (4, 4, 37, None, "row"), "nr4_pad": (4, 3, 9, None, "row"), "nr2_diag": (2, 2, 21, "diag", "row"),
             "nr3": (3, 3, 14, None, "row"), "nr4_col": (4, 4, 37, None, "col"),
             "nr2_diag_col": (2, 2, 21, "diag", "col")}


#: the RTL case in make test-all: make test replays GEMVs with a page load inside on the
#: chip RTL (tests/sw/test_train_chip.py::test_chip_sgd_spad_rtl, ``gemv0_1+lf2``)
@pytest.mark.parametrize("backend,case", [(b, c) for b in ("model", "fast") for c in PAGE_LOAD]
                         + [pytest.param("rtl", "nr4", marks=pytest.mark.slow)])
def test_gemv_page_load_model(backend, case, request):
    """``emit_gemv(..., page_load=addr)``: the sums are the plain GEMV's, bit for bit,
    ``W``'s region ends holding the next page (the scratchpad's beats from ``addr`` in
    :func:`sw.transfer.emit_page_move`'s word order, over the row or the column buses),
    and the kernel issues ``gemv_cost(page_load=True)`` instructions (the plain count plus the pointer and the
    last word's beats beyond the FMA gap). ``rtl``: the core RTL on Icarus at ``nr = 4``
    (every output beat and counter checked against the core model)."""
    nr, m, n, x_layout, bus = PAGE_LOAD[case]
    cfg, rng, W0, W1 = _page_load_case(request, backend, nr, m, n)
    fmt = cfg.fmt
    xg = rand_bits(fmt, rng, (n,))
    W, x, xc, y = Region("a", 3), Region("b", 0), Region("b", 100), Region("b", 200)
    info, r2, yl, Wl = _run_page_load(
        cfg, backend, "gemv_page_load", W, W0, W1, (x, pack_vector(xg, nr, x_layout or "cols")), y, 1,
        lambda b: emit_gemv(b, cfg, m, n, W, x, y, x_layout=x_layout, x_copy=xc if x_layout else None, page_load=40,
                            page_bus=bus), bus)
    nw = local_len(n, nr)
    _eq(unpack_vector(yl, m, "rows"), golden.gemv(fmt, nr, W0, xg, "tree"), "y")
    _eq(Wl, pack_matrix(W1, nr), "next page")
    assert info.instructions == gemv_cost(cfg, m, n, page_load=True)["instructions"] == r2.counters["instructions"] - 1
    c = gemv_cost(cfg, m, n)
    assert info.instructions == c["instructions"] + 1 + nr - min(nr, c["gap"])
    assert r2.counters["spad_rd_beats"] == nr * nw


def test_page_load_why_not():
    """Where a GEMV cannot load the next page as it streams, the reason (and
    ``emit_gemv`` refuses)."""
    from sw.kernels import page_load_why_not

    cfg4 = ArchConfig(nr=4, spad_kib=1)
    assert page_load_why_not(cfg4, 4, 40) is None
    assert "transposed" in page_load_why_not(cfg4, 4, 40, trans=True)
    assert "ring" in page_load_why_not(cfg4, 4, 40, x_ring=(1, 0))
    assert "2 local rows" in page_load_why_not(cfg4, 8, 40)
    assert "copy" in page_load_why_not(cfg4, 4, 40, diag_x=True)
    assert page_load_why_not(ArchConfig(nr=2, spad_kib=1), 2, 40, diag_x=True) is None
    assert "fewer than the 8 beats" in page_load_why_not(ArchConfig(nr=8, spad_kib=1), 8, 40)
    with pytest.raises(KernelError, match="page_load: 2 local rows"):
        emit_gemv(Builder(cfg4), cfg4, 8, 40, Region("a", 0), Region("b", 0), Region("b", 100), page_load=0)


#: (nr, m, n, bsz): one local row, several (one block each), padding in every dimension
GEMM_PAGE_LOAD = {"nr4": (4, 4, 23, 16), "nr4_rows": (4, 12, 9, 12), "nr3_pad": (3, 7, 10, 8),
                  "nr2": (2, 4, 5, 6)}


@pytest.mark.parametrize("backend,case", [(b, c) for b in ("model", "fast") for c in GEMM_PAGE_LOAD]
                         + [("rtl", "nr3_pad")])
def test_gemm_page_load_model(backend, case, request):
    """``emit_gemm(..., page_load=addr)``: ``Y`` is the plain GEMM's, bit for bit, ``W``'s
    region ends holding the next page (the scratchpad's beats from ``addr`` in
    :func:`sw.transfer.emit_page_move`'s word order), and the kernel issues
    ``gemm_cost(page_load=True)`` instructions: those of the block ``1 x ceil(bsz/nr)``
    plus the pointer. ``rtl``: the core RTL on Icarus (every output beat and counter
    checked against the core model)."""
    nr, m, n, bsz = GEMM_PAGE_LOAD[case]
    from sw.kernels import emit_gemm, gemm_cost

    cfg, rng, W0, W1 = _page_load_case(request, backend, nr, m, n)
    fmt = cfg.fmt
    mp, np_, bp = local_len(m, nr), local_len(n, nr), local_len(bsz, nr)
    Xg = rand_bits(fmt, rng, (n, bsz))
    W, X, Y = Region("a", 3), Region("b", 0), Region("b", 120)
    info, r2, Yl, Wl = _run_page_load(cfg, backend, "gemm_page_load", W, W0, W1, (X, pack_matrix(Xg, nr)), Y,
                                      mp * bp, lambda b: emit_gemm(b, cfg, m, n, bsz, W, X, Y, page_load=40))
    _eq(Yl, pack_matrix(golden.gemm(fmt, nr, W0, Xg), nr), "Y")
    _eq(Wl, pack_matrix(W1, nr), "next page")
    assert info.instructions == gemm_cost(cfg, m, n, bsz, page_load=True)["instructions"] \
        == gemm_cost(cfg, m, n, bsz, 1, bp)["instructions"] + 1 == r2.counters["instructions"] - 1
    assert (info.params["Li"], info.params["Lc"]) == (1, bp)
    assert r2.counters["spad_rd_beats"] == nr * mp * np_


def test_gemm_page_load_why_not():
    """Where a GEMM cannot load the next page as it runs, the reason (and ``emit_gemm``
    refuses)."""
    from sw.kernels import emit_gemm, gemm_page_load_why_not

    cfg4 = ArchConfig(nr=4, spad_kib=1)
    assert gemm_page_load_why_not(cfg4, 16) is None
    assert "2 local column(s)" in gemm_page_load_why_not(cfg4, 8)
    assert "accumulating" in gemm_page_load_why_not(cfg4, 16, accumulate=True)
    assert "registers" in gemm_page_load_why_not(ArchConfig(nr=2, n_regs=8, spad_kib=1), 16)
    with pytest.raises(KernelError, match="page_load: 2 local column"):
        emit_gemm(Builder(cfg4), cfg4, 8, 40, 8, Region("a", 0), Region("b", 0), Region("b", 500), page_load=0)
    with pytest.raises(KernelError, match="page_load needs the block 1 x 4"):
        emit_gemm(Builder(cfg4), cfg4, 8, 40, 16, Region("a", 0), Region("b", 0), Region("b", 500), page_load=0,
                  block=(2, 4))


@pytest.mark.parametrize("ep_bank", ["a", "b"], ids=["same_bank", "other_bank"])
def test_paged_accumulate_matches_gemv_t_reversed(ep_bank):
    """SGD's backward over pages of one local row (:func:`sw.train_chip_ops.paged_accumulate`):
    ``d`` broadcast to the rows layout, ``ep = d_r W_r`` (``emit_axpy(accumulate=False)``)
    for the last local row, ``ep = d_r W_r + ep`` for the others, last to first, then the
    tree reduction down the PE columns into the cols layout: bit for bit
    :func:`sw.golden.gemv_t_reversed` (signed zeros and subnormals included), and not
    the ascending chain of :func:`sw.golden.gemv_t`."""
    from sw.collectives import emit_broadcast, emit_reduce

    seed = _seed()
    rng = np.random.default_rng(seed)
    cfg = _cfg(4, "binary16", 256)
    fmt, nr, m, n = cfg.fmt, 4, 12, 22
    ml, nl = local_len(m, nr), local_len(n, nr)
    W, d = rand_bits(fmt, rng, (m, n), special=0.2), rand_bits(fmt, rng, (m,), special=0.2)
    WA, D, DC, EP, E = Region("a", 0), Region("b", 0), Region("b", 10), Region(ep_bank, 100), Region("b", 50)
    ks = [lambda b: emit_broadcast(b, cfg, "row", ml, D, DC, name="bd")]
    for i, r in enumerate(reversed(range(ml))):
        ks.append(lambda b, i=i, r=r: emit_axpy(b, cfg, nl, Scalar("b", DC.base + r), Region("a", r * nl), EP,
                                                name=f"ax{i}", accumulate=i > 0))
    ks.append(lambda b: emit_reduce(b, cfg, "col", nl, EP, E, dst_layout="cols", name="re"))
    outs, _ = run_kernel(cfg, [(WA, pack_matrix(W, nr)), (D, pack_vector(d, nr, "diag"))], ks, [(E, nl)])
    want = golden.gemv_t_reversed(fmt, nr, W, d)
    for w in range(nr):
        _eq(unpack_vector(outs[0], n, "cols", which=w), want, f"copy {w}")
    # the order shows: 1 + 2^-11 + 2^-11 is 1 ascending (ties to even), 1 + 2^-10 descending
    W3 = fmt.from_float(np.array([[1.0], [0.0], [0.0], [0.0], [2.0 ** -11], [0], [0], [0], [2.0 ** -11], [0], [0], [0]]))
    one = fmt.from_float(np.ones(12))
    assert fmt.to_float(golden.gemv_t(fmt, nr, W3, one))[0] == 1.0
    assert fmt.to_float(golden.gemv_t_reversed(fmt, nr, W3, one))[0] == 1.0 + 2.0 ** -10
