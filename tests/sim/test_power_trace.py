"""Per-window counters (sim.power_trace): the fast chip engine's samples equal the
per-cycle chip model's at every window boundary; a traced step's windows add up to the
step's counters."""

import numpy as np
import pytest

from arch.config import PRESETS
from sim.power_trace import (TracingSession, add_counters, cycle_window_counters, fast_window_counters,
                             leakage_watts, window_watts)
from sim.sessions import ChipSession
from sim.step_measure import compile_method
from sw.mlp import MLP
from sw.train import init_weights

CFG = PRESETS["chip-small"]


def _sessions(method, b, tp=None):
    mlp = MLP((24, 16, 10), "softmax_ce", 0.01, batch=b)
    tp = tp or compile_method(method, CFG, mlp)
    W0 = init_weights(mlp, CFG.fmt, 0)
    out = []
    for backend in ("fast", "model"):
        s = ChipSession(CFG, backend)
        tp.init(s, W0)
        out.append(s)
    return mlp, tp, out


def _load(s, images):
    for k in range(CFG.cores):
        s.model.load(images[k], 0, core=k)
    s.model.clear_counters()


@pytest.mark.parametrize("method,b,every", [("sgd", 1, 37), ("mbgd", 4, 23)])
def test_chip_phase_windows_equal_the_cycle_engine(method, b, every):
    mlp, tp, (fast, ref) = _sessions(method, b)
    part = tp.chip_parts()[0]
    images = [tp.images[part.image][k] for k in range(CFG.cores)]
    pcs, hin = [part.origin] * CFG.cores, [()] * CFG.cores
    if getattr(tp, "host_in", False):       # the step's first RUN takes x and t from the host
        vecs = {"x": tp._vec(np.linspace(0, 1, 24), 24), "t": tp._vec(np.eye(10)[2], 10)}
        hin = tp._in_data(vecs, part)
        assert hin[0]
    pts = range(every, 10 ** 5, every)
    _load(fast, images)
    rr, got, cuts = fast_window_counters(fast.model, pcs, hin, pts)
    _load(ref, images)
    want, wcuts, _ = cycle_window_counters(ref.model, pcs, hin, pts)
    assert cuts == wcuts and len(cuts) > 5
    for g, w, c in zip(got, want, cuts):
        assert g == w, f"cycle {c}: " + str({k: (g[k], w.get(k)) for k in g if g[k] != w.get(k)})
    assert got[-1] == {**rr.counters, "cycles": rr.cycles}      # the last sample is the run's counters


def test_host_phase_windows_equal_the_cycle_engine():
    """Host input and output beats: the step's input phase and the logits' unload, every
    core at once (no ring traffic), sampled every 5 cycles (a step compiled with its host
    phases: ``host_in=False``)."""
    from sw.train_chip import compile_chip_sgd

    tp = compile_chip_sgd(CFG, MLP((24, 16, 10), "softmax_ce", 0.01), host_in=False)
    mlp, tp, (fast, ref) = _sessions("sgd", 1, tp)
    rng = np.random.default_rng(3)
    vecs = {"x": tp._vec(rng.uniform(0, 1, 24), 24), "t": tp._vec(np.eye(10)[2], 10)}
    for what in ("in", "unload"):
        images, org = tp._host_images(what)
        data = [[] for _ in range(CFG.cores)]
        if what == "in":          # the beats the host sends, as _run_host builds them
            from sw.train_vectors import vector_beats
            from sw.layout import local_len
            data[0] = vector_beats(CFG, vecs["x"], local_len(tp.N[0], CFG.nr))
            for k in range(tp.out_cores):
                data[k] = data[k] + vector_beats(CFG, tp._panel(vecs["t"], k), tp.P[-1] // CFG.nr)
        pcs = [org] * CFG.cores
        _load(fast, images)
        _, got, cuts = fast_window_counters(fast.model, pcs, data, range(5, 10 ** 4, 5))
        _load(ref, images)
        want, wcuts, _ = cycle_window_counters(ref.model, pcs, data, range(5, 10 ** 4, 5))
        assert cuts == wcuts and got == want
        assert got[-1]["host_in_beats" if what == "in" else "host_out_beats"] > 0


def test_traced_steps_add_up_and_idle_leaks():
    mlp = MLP((24, 16, 10), "softmax_ce", 0.01)
    tp = compile_method("sgd", CFG, mlp)
    s = TracingSession(CFG, 100, bin=30)
    tp.init(s, init_weights(mlp, CFG.fmt, 0))
    s.begin()
    x, t = np.full(24, 0.5), 3
    r = tp.run_step(s, x, t)
    s.idle(250)
    r2 = tp.run_step(s, x, t)
    assert s.t == r.cycles + 250 + r2.cycles
    wins, lens = s.window_list()
    tot, step = {}, {}
    for w in wins:
        add_counters(tot, w)
    for pc in r.core_counters + r2.core_counters:
        add_counters(step, pc)
    assert all(tot.get(k, 0) == v for k, v in step.items() if k != "cycles")
    watts = window_watts(CFG, wins, lens, CFG.cores)
    leak = leakage_watts(CFG, CFG.cores)
    idle = [i for i in range(len(wins)) if r.cycles <= i * 100 and (i + 1) * 100 <= r.cycles + 250]
    assert idle and all(abs(watts[i] - leak) < 1e-12 for i in idle)
    assert max(watts) > 2 * leak


def test_scratchpad_paging_windows_equal_the_cycle_engine():
    """A step whose weights are paged through the scratchpad (small PE memories): the
    scratchpad beats per window too."""
    cfg = CFG.replace(spad_kib=16, mem_a_words=256, mem_b_words=256)
    mlp = MLP((128, 128, 10), "softmax_ce", 0.01)
    tp = compile_method("sgd", cfg, mlp)
    assert tp.spad
    W0 = init_weights(mlp, cfg.fmt, 0)
    part = tp.chip_parts()[0]
    got = []
    for backend in ("fast", "model"):
        s = ChipSession(cfg, backend)
        tp.init(s, W0)
        for k in range(cfg.cores):
            s.model.load(tp.images[part.image][k], 0, core=k)
        s.model.clear_counters()
        f = fast_window_counters if backend == "fast" else cycle_window_counters
        r = f(s.model, [part.origin] * cfg.cores, [()] * cfg.cores, range(211, 10 ** 5, 211))
        got.append(r[1:] if backend == "fast" else r[:2])
    (fs, fc), (cs, cc) = got
    assert fc == cc and fs == cs
    assert fs[-1]["spad_rd_beats"] > 0 and fs[-1]["spad_wr_beats"] > 0


def test_a_paused_steps_timeline_equals_the_cycle_engines():
    """Whole steps of a paused program (waits, host phases one core after another, the
    chip phases) on one timeline: every window's counters and every RUN's bins from the
    fast engine equal the per-cycle chip model's."""
    from sw.throttle import pause, segments

    mlp = MLP((24, 16, 10), "softmax_ce", 0.01)
    tp = compile_method("sgd", CFG, mlp)
    segs = segments(tp)
    tq = pause(tp, {segs[0]: 31, segs[3]: 57, segs[-1]: 12}, cut_all=True)
    W0 = init_weights(mlp, CFG.fmt, 0)
    out = []
    for backend in ("fast", "model"):
        s = TracingSession(CFG, 97, bin=41, backend=backend)
        tq.init(s, W0)
        s.begin()
        for _ in range(2):
            tq.run_step(s, np.full(24, 0.25), 7)
        out.append((s.window_list(), s.runs, s.t))
    assert out[0] == out[1]
    assert out[0][2] == 2 * tq.step_cycles() and len(out[0][0][0]) > 10
