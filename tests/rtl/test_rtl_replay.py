"""The replay harness (rtl/replay.py, sim/tb_replay.py): the same beats and counters as the
cocotbext-axi testbench and the fast model, and a check that fails on a wrong beat."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from arch.config import ArchConfig
from rtl.replay import _Pauses, lfsr_pauses
from sim.core_model import Beat
from sim.core_run import job_beats, run_job, run_kernel
from sim.fast_model import FastModel
from sim.replay_run import run_replay
from tests.simulators import REPLAY_SIM_PARAMS
from sw.collectives import Region
from sw.kernels import Scalar, emit_gemv, emit_rank1
from sw.layout import local_len, pack_matrix, pack_vector
from tests.sw.test_collectives import rand_bits
from tests.rtl.test_core import CONFIGS, fill_and_compute_program, random_lane_beats

TINY = CONFIGS["nr2_fp16"]          # its Icarus / Verilator builds are shared with test_core
TIMING = ("cycles", "stall_cycles")  # the counters stream pauses change


def _seed():
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    return seed


def _gemv_rank1_session(cfg, rng, m, n):
    """GEMV then a rank-1 update of the same matrix: ``(loads, kernels, unloads)``."""
    nr, fmt = cfg.nr, cfg.fmt
    mp, np_ = local_len(m, nr), local_len(n, nr)
    Wg, xg, ug, vg = (rand_bits(fmt, rng, s) for s in ((m, n), (n,), (m,), (n,)))
    al = fmt.from_float(np.array([-0.25]))[0]
    W, x, y = Region("a", 0), Region("b", 0), Region("b", np_)
    u, v, s = Region("b", np_ + mp), Region("b", np_ + 2 * mp), Region("b", 2 * np_ + 2 * mp)
    loads = [(W, pack_matrix(Wg, nr)), (x, pack_vector(xg, nr, "cols")), (u, pack_vector(ug, nr, "rows")),
             (v, pack_vector(vg, nr, "cols")), (s, np.full((nr, nr, 1), al, dtype=fmt.np_uint))]
    kernels = [lambda b: emit_gemv(b, cfg, m, n, W, x, y),
               lambda b: emit_rank1(b, cfg, m, n, W, u, v, alpha=Scalar("b", s.base))]
    return loads, kernels, [(y, mp), (W, mp * np_)]


def _same_outputs(a, b):
    assert len(a) == len(b) and all((x == y).all() for x, y in zip(a, b))


def _same_counters(got, want, skip=()):
    for g, w in zip(got, want):
        assert {k: v for k, v in g.counters.items() if k not in skip} == \
            {k: v for k, v in w.counters.items() if k not in skip}


def test_pause_generator_is_lfsr_pauses():
    """The RTL pause generator decides as :func:`rtl.replay.lfsr_pauses` says, cycle by cycle."""
    dut = _Pauses()
    got = []

    async def tb(ctx):
        for seed, thr in ((0x1D0F, 64), (0, 128), (0xACE1, 256), (0x1234, 0)):
            ctx.set(dut.seed, seed)
            ctx.set(dut.threshold, thr)
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            seq = []
            for _ in range(300):
                seq.append(bool(ctx.get(dut.pause)))
                await ctx.tick()
            got.append((seq, lfsr_pauses(seed, thr, 300)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    for seq, want in got:
        assert seq == want
    assert 50 < sum(got[0][0]) < 100 and not any(got[3][0]) and all(got[2][0])


#: make test-all: make test runs a kernel session through the replay harness against the
#: fast model and a job against the cocotbext-axi testbench, both with pauses
#: (test_replay_with_pauses)
@pytest.mark.slow
@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_replay_session_equals_axi_and_fast(sim):
    """A kernel session (loads, GEMV, rank-1 update, unloads) through the replay harness:
    the unloaded results, every phase's counters and the cycle count are those of the
    cocotbext-axi testbench and of the fast model."""
    cfg = TINY
    loads, kernels, unloads = _gemv_rank1_session(cfg, np.random.default_rng(_seed()), 6, 7)
    f_out, f_res = run_kernel(cfg, loads, kernels, unloads, backend="fast")
    a_out, a_res = run_kernel(cfg, loads, kernels, unloads, backend="rtl", sim=sim, name="replay-axi")
    r_out, r_res = run_kernel(cfg, loads, kernels, unloads, backend="rtl", sim=sim, name="replay",
                              stream="replay")
    _same_outputs(r_out, f_out)
    _same_outputs(r_out, a_out)
    _same_counters(r_res, f_res)
    _same_counters(r_res, a_res)
    assert r_res[0].info["stream"] == "replay" and r_res[0].info["sim_cycles"] == a_res[0].info["sim_cycles"]


def test_replay_with_pauses(require_simulator):
    """LFSR pauses on both streams: a job's beats and a kernel session's results equal the
    model's, and every counter but the two cycle counts; the pauses did stall the core."""
    require_simulator("icarus")
    cfg = TINY
    rng = np.random.default_rng(_seed())
    words = fill_and_compute_program(cfg, 4)
    data = random_lane_beats(cfg, rng, 2 * cfg.nr * 4)
    want = run_job(cfg, words, data)
    got = run_job(cfg, words, data, backend="rtl", sim="icarus", name="replay-pause", stream="replay",
                  pause_in=0.3, pause_out=0.3, seed=3)
    assert got.data == want.data and got.done == want.done
    _same_counters([got], [want], skip=TIMING)
    assert got.counters["stall_cycles"] > 0 and got.counters["cycles"] > want.counters["cycles"]
    axi = run_job(cfg, words, data, backend="rtl", sim="icarus", name="replay-pause-axi", pause_in=0.3,
                  pause_out=0.3, seed=3)
    assert axi.data == got.data
    loads, kernels, unloads = _gemv_rank1_session(cfg, rng, 5, 6)
    f_out, f_res = run_kernel(cfg, loads, kernels, unloads, backend="fast")
    r_out, r_res = run_kernel(cfg, loads, kernels, unloads, backend="rtl", sim="icarus", name="replay-pause",
                              stream="replay", pause_in=0.25, pause_out=0.4, seed=1)
    _same_outputs(r_out, f_out)
    _same_counters(r_res, f_res, skip=TIMING)


def _job(cfg):
    words = fill_and_compute_program(cfg, 2)
    data = random_lane_beats(cfg, np.random.default_rng(5), 2 * cfg.nr * 2)
    beats = job_beats(cfg, words, data)
    return beats, FastModel(cfg).process(beats)


@pytest.mark.parametrize("fault", ["data", "last", "missing", "extra"])
def test_replay_check_fails_on_a_wrong_beat(require_simulator, fault):
    """A corrupted expected beat (a data bit, ``tlast``), one beat more than the core
    sends (cycle limit) or one fewer (an extra beat): the harness's check fails."""
    require_simulator("icarus")
    cfg = TINY
    beats, expected = _job(cfg)
    k = len(expected) // 2
    bad = list(expected)
    if fault == "data":
        bad[k] = Beat(bad[k].data ^ 1 << 7, bad[k].last)
        match = rf"output beat {k} of {len(bad)}: got data={expected[k].data:#x}"
    elif fault == "last":
        bad[k] = Beat(bad[k].data, not bad[k].last)
        match = rf"output beat {k} of .* last={expected[k].last}, model .* last={not expected[k].last}"
    elif fault == "missing":
        bad.append(Beat(0, True))
        match = rf"cycle limit 2000 hit: {len(expected)} of {len(bad)} output beats"
    else:
        bad.pop()
        match = "core sent 1 more beats than the model"
    with pytest.raises(AssertionError, match=match):
        run_replay(cfg, beats, bad, sim="icarus", name=f"replay-fault-{fault}", max_cycles=2000)


def test_verilator_public_control_file():
    """The control file that makes only the testbench's signals reachable in a Verilator
    build (read-write or read-only), content-addressed."""
    from sim.harness import verilator_public

    p = verilator_public("top_x", {"done": "rd", "clk": "rw"})
    assert p.read_text() == ('`verilator_config\npublic_flat_rw -module "top_x" -var "clk"\n'
                             'public_flat_rd -module "top_x" -var "done"\n')
    assert verilator_public("top_x", {"clk": "rw", "done": "rd"}) == p
    with pytest.raises(ValueError, match="'rw' or 'rd'"):
        verilator_public("top_x", {"clk": "wr"})


@pytest.mark.slow
@pytest.mark.verilator
def test_replay_4x4_session_verilator(require_simulator):
    """The default 4 x 4 core on Verilator: a GEMV and rank-1 session through the replay
    harness, with and without pauses, against the fast model."""
    require_simulator("verilator")
    cfg = ArchConfig(nr=4)
    loads, kernels, unloads = _gemv_rank1_session(cfg, np.random.default_rng(_seed()), 32, 24)
    f_out, f_res = run_kernel(cfg, loads, kernels, unloads, backend="fast")
    for pause in (0.0, 0.3):
        r_out, r_res = run_kernel(cfg, loads, kernels, unloads, backend="rtl", sim="verilator", reference="fast",
                                  name="replay-4x4", stream="replay", pause_in=pause, pause_out=pause)
        _same_outputs(r_out, f_out)
        _same_counters(r_res, f_res, skip=TIMING if pause else ())
