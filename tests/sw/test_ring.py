"""Core-level collectives over the ring (sw/ring.py): data against the numpy goldens bit
for bit, the per-cycle chip model against the fast chip model (data, cycles, counters),
stall-free schedules, costs against the reference design's formulas, and the RTL."""

from dataclasses import replace

import numpy as np
import pytest

from tests.simulators import REPLAY_SIM_PARAMS
from sw.ring import (RingError, all_gather_layout, beats_segment, fill_diag_program, read_diag_program,
                      segment_beats, emit_all_gather, emit_pass_along,
                      emit_reduce_scatter, golden_all_gather, golden_reduce_scatter, reduce_scatter_layout,
                      rs_period)
from arch.config import ArchConfig
from sim.chip_model import ChipModel
from sim.ring_programs import emit_broadcast

SEED = 20261123


def chip(nr=2, cores=4, fmt="binary16", words=128):
    # the 4-core RTL configuration is test_chip.CHIP4 (one Verilator build for both files)
    return ArchConfig(nr=nr, cores=cores, fmt=fmt, mem_a_words=words, mem_b_words=words, ucode_depth=128)


def rand_seg(cfg, rng, m):
    return cfg.fmt.from_float(rng.uniform(-2, 2, size=(m, cfg.nr)))


def diag_write(model, bank, base, seg):
    """Put segment ``seg`` [m, nr] at ``base`` of the diagonal PEs of a core model."""
    cur = model.memory(bank) if hasattr(model, "set_memory") else None
    nr = seg.shape[1]
    if cur is not None and hasattr(model, "set_memory"):
        mem = cur.copy()
        for i in range(nr):
            mem[i, i, base:base + len(seg)] = seg[:, i]
        model.set_memory(bank, mem)
        return
    for i in range(nr):
        mem = model.pes[i][i].mem_a if bank == "a" else model.pes[i][i].mem_b
        for j, v in enumerate(seg[:, i]):
            mem[base + j] = int(v)


def diag_read(model, bank, base, m, nr):
    if hasattr(model, "set_memory"):
        mem = model.memory(bank)
        return np.stack([mem[i, i, base:base + m] for i in range(nr)], axis=1)
    return np.array([[model.pes[i][i].memory(bank)[base + j] for i in range(nr)] for j in range(m)])


def run_both(cfg, imgs, setup):
    """Run on both engines after ``setup(model_k, k)``; check equal; return (cycle chip, result)."""
    out = []
    for eng in ("cycle", "fast"):
        ch = ChipModel(cfg, eng)
        for k in range(cfg.cores):
            ch.load(imgs[k], core=k)
            setup(ch.cores[k], k)
        out.append((ch, ch.run()))
    (a, ra), (b, rb) = out
    assert ra.cycles == rb.cycles
    for k in range(cfg.cores):
        assert ra.cores[k].counters == rb.cores[k].counters, k
        for bank in ("a", "b"):
            assert np.array_equal(diag_read(a.cores[k], bank, 0, cfg.mem_a_words, cfg.nr),
                                  diag_read(b.cores[k], bank, 0, cfg.mem_a_words, cfg.nr)), (k, bank)
    assert ra.counters["stall_cycles"] == 0
    return a, ra


@pytest.mark.parametrize("cores,m", [(2, 3), (4, 7)])
def test_pass_along(cores, m):
    cfg = chip(cores=cores)
    rng = np.random.default_rng(SEED)
    segs = [rand_seg(cfg, rng, m) for _ in range(cores)]
    ch, r = run_both(cfg, emit_pass_along(cfg, m, ("a", 0), ("b", 8)),
                     lambda mod, k: diag_write(mod, "a", 0, segs[k]))
    for k in range(cores):
        assert np.array_equal(diag_read(ch.cores[k], "b", 8, m, cfg.nr), segs[(k - 1) % cores])
        assert r.cores[k].counters["ring_out_beats"] == m


@pytest.mark.parametrize("cores,root,m", [(2, 0, 4), (4, 2, 6), (6, 5, 3)])
def test_broadcast(cores, root, m):
    cfg = chip(cores=cores)
    rng = np.random.default_rng(SEED + root)
    seg = rand_seg(cfg, rng, m)
    ch, r = run_both(cfg, emit_broadcast(cfg, m, root, ("a", 0), ("b", 16)),
                     lambda mod, k: diag_write(mod, "a", 0, seg) if k == root else None)
    for k in range(cores):
        if k != root:
            assert np.array_equal(diag_read(ch.cores[k], "b", 16, m, cfg.nr), seg)
    # pipelined: the whole broadcast takes m + 3 (c - 1) cycles of traffic plus fixed costs
    assert r.cycles <= m + 3 * (cores - 1) + 16


@pytest.mark.parametrize("cores,m,fmt,nr", [(2, 5, "binary16", 2), (4, 6, "binary16", 2), (4, 2, "binary32", 2),
                                            (4, 9, "binary16", 4)])
def test_all_gather(cores, m, fmt, nr):
    cfg = chip(nr=nr, cores=cores, fmt=fmt)
    rng = np.random.default_rng(SEED + m)
    segs = [rand_seg(cfg, rng, m) for _ in range(cores)]
    ch, r = run_both(cfg, emit_all_gather(cfg, m, 4), lambda mod, k: diag_write(mod, "a", 4, segs[k]))
    want = golden_all_gather(segs)
    for k in range(cores):
        lay = all_gather_layout(cfg, k, m, 4)
        got = diag_read(ch.cores[k], "a", 4, cores * m, cfg.nr)
        assert np.array_equal(got, want[k])
        for s, addr in lay.items():
            assert np.array_equal(diag_read(ch.cores[k], "a", addr, m, cfg.nr), segs[s])
        assert r.cores[k].counters["ring_out_beats"] == (cores - 1) * m
    if m >= 5:
        # one continuous stream: the reference design's (c - 1) m cycles plus the hop,
        # the setup (4 instructions), the halt, start latency and drain
        assert r.cycles == (cores - 1) * m + 3 + 4 + 1 + 1 + cfg.fpu_latency + 1   # + halt


@pytest.mark.parametrize("cores,m,fmt,nr", [(2, 4, "binary16", 2), (4, 10, "binary16", 2), (4, 3, "binary32", 2),
                                            (4, 5, "bfloat16", 4)])
def test_reduce_scatter(cores, m, fmt, nr):
    cfg = chip(nr=nr, cores=cores, fmt=fmt)
    rng = np.random.default_rng(SEED + 7 * m)
    parts = [[rand_seg(cfg, rng, m) for _ in range(cores)] for _ in range(cores)]

    def setup(mod, k):
        for s, (bank, addr) in reduce_scatter_layout(cfg, k, m, 0).items():
            diag_write(mod, bank, addr, parts[k][s])

    ch, r = run_both(cfg, emit_reduce_scatter(cfg, m, 0), setup)
    want = golden_reduce_scatter(cfg, parts)
    for k in range(cores):
        bank, addr = reduce_scatter_layout(cfg, k, m, 0)[k]
        assert np.array_equal(diag_read(ch.cores[k], bank, addr, m, cfg.nr), want[k]), k
        # one FMA per lane per beat per step, on the diagonal PEs only
        assert sum(r.cores[k].counters[f"fma[{p}]"] for p in range(nr * nr)) == (cores - 1) * m * nr
    assert r.cycles == (cores - 1) * rs_period(cfg, m) + 4 + 1 + 1 + cfg.fpu_latency + 1   # + halt


def test_errors():
    with pytest.raises(RingError, match="cores >= 2"):
        emit_all_gather(ArchConfig(nr=2), 4)
    cfg = chip(cores=4, words=16)
    with pytest.raises(RingError, match="do not fit SRAM A"):
        emit_all_gather(cfg, 5)
    with pytest.raises(RingError, match="root 4"):
        emit_broadcast(cfg, 2, root=4)


# -- RTL -----------------------------------------------------------------------------------
@pytest.mark.parametrize("nr", [2, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_collectives_rtl(sim, nr):
    """All-gather, reduce-scatter, then a reduce to core 2, on the 4-core chip RTL: every
    core's beats and counters equal the chip model's; the results read back equal the
    goldens."""
    from sw.ring import emit_reduce, golden_reduce

    from sim.chip_run import ChipPhase, run_chip_session

    cfg = chip(nr=nr, cores=4, words=64)     # nr = 4: 4 cores of 4 x 4 PEs (slow; nr = 2 covers the logic)
    c, m_ag, m_rs = 4, 5, 3
    rng = np.random.default_rng(SEED + 99)
    segs = [rand_seg(cfg, rng, m_ag) for _ in range(c)]
    parts = [[rand_seg(cfg, rng, m_rs) for _ in range(c)] for _ in range(c)]
    ph = [ChipPhase(fill_diag_program(cfg, "a", 0, m_ag), [segment_beats(cfg, s) for s in segs], "fill ag"),
          ChipPhase(emit_all_gather(cfg, m_ag, 0), name="all-gather"),
          ChipPhase(read_diag_program(cfg, "a", 0, c * m_ag), name="read ag")]
    # reduce-scatter partials at base 32: one fill per (bank, position) (same program on every core)
    lays = [reduce_scatter_layout(cfg, k, m_rs, 32) for k in range(c)]
    for t in range(c):
        bank, addr = next((b, a) for s, (b, a) in lays[0].items() if a == 32 + t * m_rs)
        data = []
        for k in range(c):
            s = next(s for s, (b, a) in lays[k].items() if a == 32 + t * m_rs)
            assert lays[k][s][0] == bank
            data.append(segment_beats(cfg, parts[k][s]))
        ph.append(ChipPhase(fill_diag_program(cfg, bank, addr, m_rs), data, f"fill rs {t}"))
    ph.append(ChipPhase(emit_reduce_scatter(cfg, m_rs, 32), name="reduce-scatter"))
    ph.append(ChipPhase([read_diag_program(cfg, lays[k][k][0], lays[k][k][1], m_rs) for k in range(c)], name="read rs"))
    # reduce of the gathered segment 0..m_ag-1 of bank A to core 2
    ph.append(ChipPhase(emit_reduce(cfg, m_ag, 2, 0), name="reduce"))
    ph.append(ChipPhase(read_diag_program(cfg, "a", 0, m_ag), name="read reduce"))
    res = run_chip_session(cfg, ph, backend="rtl", sim=sim, name="ring_collectives")
    ref = run_chip_session(cfg, ph, backend="model")
    for p, (pr, pm) in enumerate(zip(res, ref)):
        for k, (a, b) in enumerate(zip(pr, pm)):
            assert a.data == b.data and a.counters == b.counters, (ph[p].name, k)
    want_ag = golden_all_gather(segs)
    want_rs = golden_reduce_scatter(cfg, parts)
    for k in range(c):
        assert np.array_equal(beats_segment(cfg, res[2][k].data), want_ag[k])
        assert np.array_equal(beats_segment(cfg, res[-3][k].data), want_rs[k])
    assert np.array_equal(beats_segment(cfg, res[-1][2].data), golden_reduce(cfg, segs, 2))
    for p in (1, len(ph) - 4, len(ph) - 2):
        assert sum(r.counters["stall_cycles"] for r in res[p]) == 0, ph[p].name


@pytest.mark.parametrize("cores,root,m,fmt", [(2, 0, 3, "binary16"), (4, 1, 9, "binary16"), (6, 5, 4, "binary32")])
def test_reduce(cores, root, m, fmt):
    from sw.ring import emit_reduce, golden_reduce

    cfg = chip(cores=cores, fmt=fmt)
    rng = np.random.default_rng(SEED + 31 * m)
    segs = [rand_seg(cfg, rng, m) for _ in range(cores)]
    ch, r = run_both(cfg, emit_reduce(cfg, m, root, 8), lambda mod, k: diag_write(mod, "a", 8, segs[k]))
    assert np.array_equal(diag_read(ch.cores[root], "a", 8, m, cfg.nr), golden_reduce(cfg, segs, root))
    for k in range(cores):
        if k != root:
            assert np.array_equal(diag_read(ch.cores[k], "a", 8, m, cfg.nr), segs[k])
    # pipelined: m + (c - 1) hops of 3 + (L - 1) cycles, plus fixed costs; the same slots
    # on every core (a fragment of a longer program)
    from sw.ring import reduce_lines, reduce_slots

    L = cfg.fpu_latency
    assert reduce_slots(cfg, m) == 2 + 3 + (cores - 2) * (L + 2) + m - 1 + L
    assert r.cycles == reduce_slots(cfg, m) + 1 + L + 2           # + halt, start latency, drain
    assert all(len(reduce_lines(cfg, k, m, "a", 8, root)) == reduce_slots(cfg, m) for k in range(cores))
    with pytest.raises(RingError, match="root 9"):
        reduce_lines(cfg, 0, m, "a", 8, root=9)
    with pytest.raises(RingError, match="at least one beat"):
        reduce_lines(cfg, 0, 0, "a", 8)


@pytest.mark.parametrize("cores,root,m,fmt", [(2, 0, 3, "binary16"), (4, 1, 1, "binary16"), (6, 3, 4, "binary32"),
                                              (8, 0, 3, "binary16")])
def test_reduce_stream(cores, root, m, fmt):
    """The reduce as one stream into the root's register accumulators: the total in
    place on the root (the other cores' partials unchanged) equal to
    ``golden_reduce_stream``, on both chip engines with the same counters, stall-free in
    ``reduce_stream_slots`` slots on every core; shorter than the chain for more than 2
    cores."""
    from sw.ring import (golden_reduce_stream, reduce_slots, reduce_stream_check, reduce_stream_lines,
                         reduce_stream_slots)
    from sw.ring import _emit

    cfg = chip(cores=cores, fmt=fmt)
    rng = np.random.default_rng(SEED + 17 * m + cores)
    segs = [rand_seg(cfg, rng, m) for _ in range(cores)]
    lines = [reduce_stream_lines(cfg, k, m, "a", 8, root) for k in range(cores)]
    assert {len(x) for x in lines} == {reduce_stream_slots(cfg, m)}
    ch, r = run_both(cfg, [_emit(cfg, x) for x in lines], lambda mod, k: diag_write(mod, "a", 8, segs[k]))
    got = diag_read(ch.cores[root], "a", 8, m, cfg.nr)
    assert np.array_equal(got, golden_reduce_stream(cfg, segs, root))
    for k in range(cores):
        assert r.cores[k].counters["stall_cycles"] == 0
        if k != root:
            assert np.array_equal(diag_read(ch.cores[k], "a", 8, m, cfg.nr), segs[k])
    assert r.cycles == reduce_stream_slots(cfg, m) + 1 + cfg.fpu_latency + 2
    if cores > 2:
        assert reduce_stream_slots(cfg, m) < reduce_slots(cfg, m)
    assert reduce_stream_check(cfg, m) is None
    assert "registers" in reduce_stream_check(replace(cfg, n_regs=4), 5)
    with pytest.raises(RingError, match="stream reduce: .*receive FIFO"):
        reduce_stream_lines(replace(cfg, ring_fifo_depth=4), 0, 3, "a", 8)


def test_gemv_ring_check():
    """When an all-gather can run inside the GEMV that consumes it: beat ``j`` sent at the
    GEMV's instruction ``j Lc`` is loaded by the next core ``m Lc`` slots later (at least
    the 3-cycle hop), with ``m`` beats waiting in the receive FIFO."""
    from sw.ring import gemv_ring_check

    cfg = chip(cores=4)
    assert gemv_ring_check(cfg, 4, 4) is None and gemv_ring_check(cfg, 1, 3) is None
    assert "shorter than the ring hop" in gemv_ring_check(cfg, 1, 2)
    assert "receive FIFO of 9 beats" in gemv_ring_check(cfg, 6, 4)
    assert gemv_ring_check(replace(cfg, ring_fifo_depth=9), 6, 4) is None
    assert "cores >= 2" in gemv_ring_check(replace(cfg, cores=1), 4, 4)
