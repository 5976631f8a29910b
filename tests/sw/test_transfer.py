"""Layout pack/unpack and host <-> PE transfers, on the core model and the RTL."""

import random

import numpy as np
import pytest

from arch.config import ArchConfig
from sim.core_run import run_job
from sw.asm import Builder, hout, sin
from sw.layout import pack_matrix, pack_vector, unpack_matrix, unpack_vector
from sw.transfer import TransferError, decode_unload, emit_load, emit_unload, load_beats_for


@pytest.mark.parametrize("m,n,nr", [(7, 5, 2), (8, 8, 4), (1, 9, 4), (13, 3, 3)])
def test_matrix_pack_roundtrip(m, n, nr):
    a = np.arange(1, m * n + 1, dtype=np.uint16).reshape(m, n)
    loc = pack_matrix(a, nr)
    assert loc.shape == (nr, nr, -(-m // nr) * -(-n // nr))
    assert (unpack_matrix(loc, m, n) == a).all()
    # element (i, j) in PE (i % nr, j % nr) at local (i // nr, j // nr)
    np_ = -(-n // nr)
    i, j = m - 1, n - 1
    assert loc[i % nr, j % nr, (i // nr) * np_ + j // nr] == a[i, j]
    assert loc.sum() == a.sum()  # padding is zero


@pytest.mark.parametrize("layout", ["diag", "cols", "rows"])
def test_vector_pack_roundtrip(layout):
    x = np.arange(1, 12, dtype=np.uint16)
    loc = pack_vector(x, 4, layout)
    assert (unpack_vector(loc, 11, layout) == x).all()
    # x[10] (value 11): index 10 -> lane 10 % 4 = 2, local word 10 // 4 = 2
    holders = {(r, c) for r in range(4) for c in range(4) if loc[r, c, 2] == 11}
    assert holders == {"diag": {(2, 2)}, "cols": {(r, 2) for r in range(4)},
                       "rows": {(2, c) for c in range(4)}}[layout]


def _roundtrip_job(cfg, n, rng):
    loc_a = rng.integers(0, 1 << cfg.fmt.width, size=(cfg.nr, cfg.nr, n), dtype=np.uint64)
    loc_b = rng.integers(0, 1 << cfg.fmt.width, size=(cfg.nr, cfg.nr, n), dtype=np.uint64)
    b = Builder(cfg)
    emit_load(b, cfg, "a", 3, n)
    emit_load(b, cfg, "b", 0, n, loop="xb")
    emit_unload(b, cfg, "b", 0, n, last=False)
    emit_unload(b, cfg, "a", 3, n, loop="ya")
    b.halt()
    words = b.build().words()
    data = load_beats_for(cfg, loc_a) + load_beats_for(cfg, loc_b)
    return words, data, loc_a, loc_b


@pytest.mark.parametrize("backend,sim,exec_stage", [("model", None, False), ("rtl", "icarus", False),
                                                    ("model", None, True), ("fast", None, True)])
def test_load_unload_roundtrip(backend, sim, exec_stage):
    """Transfers schedule nothing hazard-sensitive: they run with the execute stage too."""
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, exec_stage=exec_stage)
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    words, data, loc_a, loc_b = _roundtrip_job(cfg, 5, np.random.default_rng(seed))
    res = run_job(cfg, words, data, backend=backend, sim=sim, name="xfer")
    n = 5
    got_b = decode_unload(cfg, res.data[:cfg.nr * n], n)
    got_a = decode_unload(cfg, res.data[cfg.nr * n:], n)
    assert (got_a == loc_a).all() and (got_b == loc_b).all()
    assert res.data[-1].last and not any(b.last for b in res.data[:-1])
    assert res.counters["host_in_beats"] == len(data)


def test_transfer_errors():
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64)
    with pytest.raises(TransferError, match="do not fit SRAM bank A"):
        emit_load(Builder(cfg), cfg, "a", 60, 5)
    with pytest.raises(TransferError, match="unknown SRAM bank"):
        emit_load(Builder(cfg), cfg, "c", 0, 5)


def test_session_keeps_memory_between_phases():
    from sim.core_run import Phase, run_session

    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)
    rng = np.random.default_rng(5)
    loc = rng.integers(0, 1 << 16, size=(2, 2, 6), dtype=np.uint64)
    b1 = Builder(cfg)
    emit_load(b1, cfg, "b", 10, 6)
    b1.halt()
    b2 = Builder(cfg)
    emit_unload(b2, cfg, "b", 10, 6)
    b2.halt()
    r1, r2 = run_session(cfg, [Phase(b1.build().words(), load_beats_for(cfg, loc)), Phase(b2.build().words())])
    assert r1.data == [] and r1.counters["host_in_beats"] == 12
    assert (decode_unload(cfg, r2.data, 6) == loc).all()
    assert r2.counters["host_in_beats"] == 0 and r2.counters["host_out_beats"] == 12


@pytest.mark.parametrize("exec_stage", [False, True], ids=["", "exec"])
@pytest.mark.parametrize("backend", ["model", "fast"])
def test_spad_page_roundtrip_in_unload_order(backend, exec_stage):
    """A region unloaded to the scratchpad loads back unchanged with ``lanes="cols"``
    (the weight pages of minibatch GD), and a scratchpad filled with
    ``unload_beats_for`` loads as the local words; ``lanes="rows"`` would place them
    transposed over the PEs. Costs: ``load_cost + 1`` instructions each way."""
    from sim.core_run import Phase, run_session
    from sw.transfer import emit_spad_fill, load_cost, unload_beats_for

    cfg = ArchConfig(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=256, spad_kib=1, exec_stage=exec_stage)
    rng = np.random.default_rng(7)
    n = 6
    loc = rng.integers(0, 1 << 16, size=(4, 4, n), dtype=np.uint64)
    b1 = Builder(cfg)
    emit_spad_fill(b1, cfg, 20, 4 * n)
    b1.halt()
    b2 = Builder(cfg)
    emit_load(b2, cfg, "b", 5, n, source="spad", spad_addr=20, lanes="cols")       # spad -> B
    emit_unload(b2, cfg, "b", 5, n, dest="spad", spad_addr=100)                    # B -> spad 100
    emit_load(b2, cfg, "a", 0, n, source="spad", spad_addr=100, lanes="cols")      # spad 100 -> A
    emit_load(b2, cfg, "a", 30, n, source="spad", spad_addr=100, lanes="rows")     # transposed placement
    b2.halt()
    b3 = Builder(cfg)
    emit_unload(b3, cfg, "a", 0, n, loop="u0")
    emit_unload(b3, cfg, "a", 30, n, loop="u1")
    b3.halt()
    r1, r2, r3 = run_session(cfg, [Phase(b1.build().words(), unload_beats_for(cfg, loc)), Phase(b2.build().words()),
                                   Phase(b3.build().words())], backend=backend)
    assert (decode_unload(cfg, r3.data[:4 * n], n) == loc).all()
    assert (decode_unload(cfg, r3.data[4 * n:], n) == loc.transpose(1, 0, 2)).all()
    assert r2.counters["spad_rd_beats"] == 3 * 4 * n and r2.counters["spad_wr_beats"] == 4 * n
    assert r2.counters["cycles"] >= 4 * (load_cost(cfg, n) + 1)
    with pytest.raises(TransferError, match="lanes must be 'rows' or 'cols'"):
        emit_load(Builder(cfg), cfg, "a", 0, n, source="spad", lanes="diag")


@pytest.mark.parametrize("backend", ["model", "fast"])
def test_spad_vector_roundtrip(backend):
    """A ``"cols"`` vector (the same words in every PE row) stored to the scratchpad from
    PE row 0, one beat per word, and loaded back into every row of another region; the
    other rows' copies are never read; :func:`spad_vector_cost` instructions each way."""
    from sim.core_run import Phase, run_session
    from sw.transfer import emit_spad_vector, spad_vector_cost

    cfg = ArchConfig(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=256, spad_kib=1)
    rng = np.random.default_rng(11)
    n = 5
    loc = rng.integers(0, 1 << 16, size=(4, 4, n), dtype=np.uint64)
    vec = np.broadcast_to(loc[:1], loc.shape).copy()            # row 0's words in every row
    garbage = loc.copy()
    garbage[0] = vec[0]                                          # rows 1.. differ: a store must not read them
    b1 = Builder(cfg)
    emit_load(b1, cfg, "a", 3, n)
    b1.halt()
    b2 = Builder(cfg)
    emit_spad_vector(b2, cfg, "a", 3, n, True, 40)
    emit_spad_vector(b2, cfg, "b", 10, n, False, 40, loop="v2")
    b2.halt()
    b3 = Builder(cfg)
    emit_unload(b3, cfg, "b", 10, n)
    b3.halt()
    r1, r2, r3 = run_session(cfg, [Phase(b1.build().words(), load_beats_for(cfg, garbage)),
                                   Phase(b2.build().words()), Phase(b3.build().words())], backend=backend)
    assert (decode_unload(cfg, r3.data, n) == vec).all()
    assert r2.counters["spad_rd_beats"] == r2.counters["spad_wr_beats"] == n
    assert r2.counters["instructions"] == 2 * spad_vector_cost(n) + 1          # and the halt


@pytest.mark.parametrize("backend", ["model", "fast"])
def test_spad_page_roundtrip_in_word_order(backend):
    """The word-order page moves (:func:`emit_page_move`, the SGD pages a GEMV loads as it
    streams): a scratchpad filled with :func:`page_beats_for` loads as the local words,
    stores back the same beats (:func:`decode_page` inverts them), and each way issues
    :func:`page_move_cost` instructions; with ``nr = 3`` (not a power of two) too."""
    from sim.core_run import Phase, run_session
    from sw.transfer import decode_page, emit_page_move, emit_spad_fill, page_beats_for, page_move_cost

    for nr, n in ((4, 7), (3, 5)):
        cfg = ArchConfig(nr=nr, mem_a_words=64, mem_b_words=64, ucode_depth=256, spad_kib=1)
        loc = np.random.default_rng(nr).integers(0, 1 << 16, size=(nr, nr, n), dtype=np.uint64)
        beats = page_beats_for(cfg, loc)
        assert (decode_page(cfg, beats, n) == loc).all()
        b1 = Builder(cfg)
        emit_spad_fill(b1, cfg, 20, nr * n)
        b1.halt()
        b2 = Builder(cfg)
        emit_page_move(b2, cfg, "b", 5, n, False, 20)                # spad 20 -> B
        emit_page_move(b2, cfg, "b", 5, n, True, 100, loop="p2")     # B -> spad 100
        b2.halt()
        b3 = Builder(cfg)
        emit_unload(b3, cfg, "b", 5, n)
        b3.halt()
        b4 = Builder(cfg)
        b4.spad("rd", 100)
        with b4.loop("d", nr * n):
            b4.emit(sin("row"), hout("row"))
        b4.halt()
        r1, r2, r3, r4 = run_session(cfg, [Phase(b1.build().words(), beats), Phase(b2.build().words()),
                                           Phase(b3.build().words()), Phase(b4.build().words())], backend=backend)
        assert (decode_unload(cfg, r3.data, n) == loc).all()
        assert [int(getattr(x, "data", x)) for x in r4.data] == beats
        assert r2.counters["instructions"] == 2 * page_move_cost(cfg, n) + 1          # and the halt
        assert r2.counters["spad_rd_beats"] == r2.counters["spad_wr_beats"] == nr * n
