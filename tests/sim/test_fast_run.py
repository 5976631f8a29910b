"""The fast model's runs window by window (sim.fast_run.FastRun): cutting a run into
windows, rerunning a window from a snapshot and the chip engine's windows give the
results of one run from start to end (state, output beats, counters)."""

import numpy as np
import pytest

from arch.config import PRESETS
from sim.chip_model import ring_windows
from sim.fast_flow import clip_spans, state_diff
from sim.fast_run import copy_state
from sim.sessions import ChipSession
from sw.mlp import MLP
from sw.train import init_weights
from sw.train_chip import compile_chip_sgd
from sw.train_host import one_hot

CFG = PRESETS["chip-small"]


@pytest.fixture(scope="module")
def chip_step():
    """A chip-small softmax SGD step up to its chip phase: (session, start pc, per-core
    entry states, per-core ring input beats of the fixed point, per-core results)."""
    mlp = MLP((64, 64, 64, 10), "softmax_ce", 0.01)
    tp = compile_chip_sgd(CFG, mlp, host_in=False)      # the chip phase takes no host beat
    sess = ChipSession(CFG, "fast")
    tp.init(sess, init_weights(mlp, CFG.fmt, 0))
    rng = np.random.default_rng(5)
    vecs = {"x": tp._vec(rng.uniform(0, 1, mlp.n_in), mlp.n_in), "t": tp._vec(one_hot(mlp.n_out, 3), mlp.n_out)}
    tp._run_host(sess, "in", vecs, "in")
    part = tp.chip_parts()[0]
    ch = sess.model
    for k in range(CFG.cores):
        ch.load(tp.images[part.image][k], 0, core=k)
    entry = [copy_state(m.state) for m in ch.cores]
    res = ch.run(part.origin)
    ring_in = [res.cores[k - 1].ring_out for k in range(CFG.cores)]
    return ch, part.origin, entry, ring_in, res.cores, [copy_state(m.state) for m in ch.cores]


def _same(m, ref_state, r, ref):
    assert state_diff(ref_state, m.state, m.P) is None
    assert r.out == ref.out and r.ring_out == ref.ring_out and r.counters == ref.counters and r.cycles == ref.cycles


def test_clip_spans_keeps_whole_iterations(chip_step):
    ch, pc, *_ = chip_step
    m = ch.cores[1]
    run = m.start_run(pc, ring_in=None)
    spans = m._flow.spans
    rng = np.random.default_rng(0)

    def check(sp, a, b, pcs):
        last = a
        for s in sorted(sp, key=lambda s: s.start):
            assert last <= s.start and s.end <= b and s.n_iter >= 1
            last = s.end
            body = pcs[s.start:s.start + s.iter_len]
            for i in range(s.n_iter):
                assert np.array_equal(pcs[s.start + i * s.iter_len:s.start + (i + 1) * s.iter_len], body)
    for _ in range(200):
        a, b = sorted(rng.integers(0, run.T + 1, 2).tolist())
        check(clip_spans(spans, a, b), a, b, run.allpcs)
    assert clip_spans(spans, 0, run.T) == spans


@pytest.mark.parametrize("seed", [0, 1])
def test_run_in_windows_is_one_run(chip_step, seed):
    ch, pc, entry, ring_in, ref, final = chip_step
    rng = np.random.default_rng(seed)
    for k in (0, 2):
        m = ch.cores[k]
        m.state = copy_state(entry[k])
        run = m.start_run(pc, ring_in=ring_in[k])
        cuts = sorted(set(rng.integers(1, run.T, 12).tolist()))
        for b in cuts + [run.T]:
            run.advance(b)
        _same(m, final[k], run.finish(), ref[k])


def test_window_rerun_from_snapshot(chip_step):
    """A window run with wrong ring beats, then again from its snapshot with the right
    ones: the run ends as if the wrong beats had never been there."""
    ch, pc, entry, ring_in, ref, final = chip_step
    k = 1
    m = ch.cores[k]
    m.state = copy_state(entry[k])
    run = m.start_run(pc, ring_in=None)
    wins = ring_windows([run])
    assert len(wins) > 2
    for a, b in wins:
        i, j = run.ring_range(a, b)
        snap = run.snapshot()
        run.fill_ring(i, [x ^ 0x3c00 for x in ring_in[k][i:j]])
        run.advance(b)
        run.ring_out_now()
        run.restore(snap)
        run.fill_ring(i, ring_in[k][i:j])
        run.advance(b)
    _same(m, final[k], run.finish(), ref[k])


def test_plans_shared_across_addresses_and_unnamed_registers():
    """A region's plan depends on its micro-ops, not on where they sit in the microcode,
    nor on the address registers they do not name (those keep their values)."""
    from arch.config import ArchConfig
    from sim.fast_common import ar_columns
    from sim.fast_flow import clear_plan_cache
    from sim.fast_model import FastModel
    from sw.asm import Builder
    from sw.collectives import Region
    from sw.kernels import emit_gemv

    cfg = ArchConfig(nr=4)
    rng = np.random.default_rng(3)
    mem = [cfg.fmt.from_float(rng.uniform(-1, 1, (cfg.nr ** 2, w))).astype(cfg.fmt.np_uint)
           for w in (cfg.mem_a_words, cfg.mem_b_words)]

    def program(origin):
        b = Builder(cfg, origin=origin)
        emit_gemv(b, cfg, 32, 48, Region("a", 0), Region("b", 0), Region("b", 600))
        b.halt()
        return b.build().words()

    clear_plan_cache()
    runs = []
    for origin in (0, 37):
        m = FastModel(cfg)
        m.load(program(origin), origin)
        m.state.mem_a[:], m.state.mem_b[:] = mem
        tm = m._pc_tables(np.arange(origin, origin + len(program(0))))[0]
        named = ar_columns([t for t in tm if t is not None], cfg.n_ar)
        free = [i for i in range(cfg.n_ar) if i not in named]
        if origin and free:
            m.state.ar[:, free[0]] = 5
        runs.append((m, m.run(origin), free))
    (m0, r0, _), (m1, r1, free) = runs
    assert m1.stats["plans_compiled"] == 0 and m1.stats["plans_reused"] == m0.stats["plans_compiled"] > 0
    assert r1.out == r0.out and r1.counters == r0.counters
    assert np.array_equal(m1.state.mem_b, m0.state.mem_b) and np.array_equal(m1.state.rf, m0.state.rf)
    if free:
        assert (m1.state.ar[:, free[0]] == 5).all()


def test_chip_phase_regions_compile_whole_and_free(chip_step):
    """The chip phase of an SGD step (a fresh plan cache) runs every region at loop level,
    each core's straight and loop parts grouped into regions that compile whole (an SRAM
    read depends only on the writes it hits: no false cycle through the bank's other
    writers), and compiling leaves no reference cycles of the compiler behind (its
    structures are freed by reference counting, not by the cyclic collector)."""
    import gc

    from sim.fast_flow import clear_plan_cache

    ch, pc, entry, ring_in, ref, final = chip_step
    for k, m in enumerate(ch.cores):
        m.state = copy_state(entry[k])
    clear_plan_cache()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        res = ch.run(pc)
        gc.collect()
        left = [o for o in gc.garbage if type(o).__module__.startswith("sim.fast_flow")
                or getattr(getattr(o, "__code__", None), "co_filename", "").endswith(("fast_flow_compile.py",
                                                                                     "fast_trace.py"))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left, f"{len(left)} compile-time objects in reference cycles, e.g. {left[0]!r}"
    for k, m in enumerate(ch.cores):
        assert m._flow.stats["fallbacks"] == 0 and m._flow.stats["cycle_engine_cycles"] == 0, (k, m._flow.stats)
        _same(m, final[k], res.cores[k], ref[k])
