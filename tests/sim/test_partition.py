"""Partitions of the ring (spatial sharing): groups closed on themselves in both chip
engines, per-group counters and faults, and training jobs run in a group bit for bit as
alone on a chip of that many cores."""

import numpy as np
import pytest

from arch.config import ArchConfig
from arch.partition import Partition, PartitionError, mux_sources, whole_level
from sim.chip_model import ChipModel
from sim.sessions import ChipSession, SharedChip
from tests.rtl.test_chip import CHIP4, roundtrip_phases

CHIP8 = CHIP4.replace(cores=8)


def test_partition_checks_and_ring_order():
    p = Partition.of(8, [(0, 4), (4, 2), (6, 1)])
    assert [p.pred(k) for k in range(7)] == [3, 0, 1, 2, 5, 4, 6]
    assert [p.succ(k) for k in range(7)] == [1, 2, 3, 0, 5, 4, 6]
    assert p.levels() == [2, 2, 2, 2, 1, 1, 0, 0]
    assert Partition.whole(6).level(5) == whole_level(6) == 3
    assert len(mux_sources(0, 32)) == 6 and mux_sources(3, 8) == [3, 2]
    for bad, msg in [([(1, 2)], "multiple"), ([(0, 3)], "power of two"), ([(0, 2), (1, 1)], "two groups"),
                     ([(6, 4)], "does not fit")]:
        with pytest.raises(PartitionError, match=msg):
            Partition.of(8, bad)


def _load_phase(ch, ph, ks, n):
    for i, img in zip(ks, ph.images(n)):
        ch.load(img, core=i)


def _group_run(engine, groups, progs, cfg=CHIP8):
    """Run the fill and ring phases of ``progs[g]`` (roundtrip phases for a group of
    ``len`` cores) in each group of a partitioned chip: the chip model and its result."""
    part = Partition.of(cfg.cores, groups)
    ch = ChipModel(cfg, engine, part)
    for (a, s), (_, phases) in zip(groups, progs):
        fill, _ring = phases
        ks = list(range(a, a + s))
        _load_phase(ch, fill, ks, s)
        for i, k in enumerate(ks):
            ch.cores[k].run(0, fill.data[i], ring_in=())
        _load_phase(ch, _ring, ks, s)
    return ch, ch.run()


@pytest.mark.parametrize("engine", ["cycle", "fast"])
def test_groups_run_as_alone(engine):
    """A 4-core and two 2-core groups on 8 cores, each a round trip compiled for its size:
    each group's beats, counters and cycles equal those of a chip of its size alone."""
    groups = [(0, 4), (4, 2), (6, 2)]
    progs = [roundtrip_phases(CHIP4.replace(cores=s), 6, seed=20 + g, delays=(0, 3, 4 * s))
             for g, (_, s) in enumerate(groups)]
    _, rr = _group_run(engine, groups, progs)
    assert [g.error for g in rr.groups] == [None] * 3
    for (a, s), (host, phases), gr in zip(groups, progs, rr.groups):
        alone = ChipModel(CHIP4.replace(cores=s), engine)
        _load_phase(alone, phases[0], range(s), s)
        for k in range(s):
            alone.cores[k].run(0, phases[0].data[k], ring_in=())
        _load_phase(alone, phases[1], range(s), s)
        ra = alone.run()
        assert [b.data for b in gr.cores[0].out] == host
        assert gr.cycles == ra.cycles and gr.counters == ra.counters
        assert [r.ring_out for r in gr.cores] == [r.ring_out for r in ra.cores]
    assert rr.cycles == max(g.cycles for g in rr.groups)


@pytest.mark.parametrize("engine", ["cycle", "fast"])
def test_faulty_group_is_stopped_others_unchanged(engine):
    """Group 0 deadlocks (a rin nobody feeds; on the fast engine: an unbalanced link);
    group 1 finishes with the beats and counters of its run alone. A beat group 0 sends
    never reaches group 1 (its core 2 takes only from core 3)."""
    from tests.rtl.test_chip import _asm

    cfg = CHIP4
    ok_host, ok = roundtrip_phases(cfg.replace(cores=2), 5, seed=3, delays=(0, 3, 8))
    part = Partition.of(4, [(0, 2), (2, 2)])
    ch = ChipModel(cfg, engine, part)
    # core 0 sends 3 beats core 1 never takes, core 1 waits for a beat core 0 never sends
    ch.load(_asm(cfg, "loop i 3 {\n rdrv r1 @col=0 | rout row\n }\nhalt"), core=0)
    ch.load(_asm(cfg, "rin row | mov r1 = row\nhalt"), core=1)
    _load_phase(ch, ok[0], [2, 3], 2)
    for i, k in enumerate([2, 3]):
        ch.cores[k].run(0, ok[0].data[i], ring_in=())
    _load_phase(ch, ok[1], [2, 3], 2)
    rr = ch.run()
    bad, good = rr.groups
    assert bad.error is not None and rr.cores[0] is None and rr.cores[1] is None
    assert good.error is None and [b.data for b in good.cores[0].out] == ok_host
    alone = ChipModel(cfg.replace(cores=2), engine)
    _load_phase(alone, ok[0], [0, 1], 2)
    for k in range(2):
        alone.cores[k].run(0, ok[0].data[k], ring_in=())
    _load_phase(alone, ok[1], [0, 1], 2)
    ra = alone.run()
    assert good.counters == ra.counters and rr.counters == ra.counters
    assert [r.ring_out for r in good.cores] == [r.ring_out for r in ra.cores]


def test_training_job_in_group_is_bit_exact():
    """Two SGD jobs compiled for 2 cores (cfg.replace(cores=2) of the chip's config) run
    in the two groups of a 4-core chip: weights bit for bit those of each job alone."""
    from sw.mlp import MLP
    from sw.train import init_weights
    from sw.train_chip import compile_chip_sgd

    chip = ArchConfig.from_dict({"preset": "chip-small"})
    sub = chip.replace(cores=2)
    nets = [MLP((12, 16, 4), lr=0.05), MLP((8, 12, 12, 3), lr=0.03)]
    rng = np.random.default_rng(5)
    shared = SharedChip(chip, Partition.of(4, [(0, 2), (2, 2)]))
    outs = []
    for g, mlp in enumerate(nets):
        tp = compile_chip_sgd(sub, mlp)
        W0 = init_weights(mlp, sub.fmt, g)
        alone = ChipSession(sub, "fast")
        sess = shared.group(g)
        tp.init(alone, W0)
        tp.init(sess, W0)
        for _ in range(3):
            x = rng.uniform(-1, 1, mlp.n_in)
            t = np.eye(mlp.n_out)[rng.integers(mlp.n_out)]
            ra = tp.run_step(alone, x, t)
            rs = tp.run_step(sess, x, t)
            assert ra.cycles == rs.cycles
        outs.append((tp.weights_from_session(alone), tp.weights_from_session(sess)))
    for wa, ws in outs:
        assert all(np.array_equal(a, b) for a, b in zip(wa, ws))


@pytest.mark.parametrize("backend", ["fast", "model"])
def test_faulty_neighbour_leaves_job_bit_exact(backend):
    """Group 0 of a 4-core chip deadlocks (stopped, reported); the SGD job of group 1
    ends with the weights and per-step counters of its run alone, on both engines."""
    from sim.chip_model import RingDeadlock, RingStallError
    from sw.mlp import MLP
    from sw.train import init_weights
    from sw.train_chip import compile_chip_sgd
    from tests.rtl.test_chip import _asm

    chip = ArchConfig.from_dict({"preset": "chip-small"})
    sub = chip.replace(cores=2)
    mlp = MLP((8, 12, 3), lr=0.05)
    shared = SharedChip(chip, Partition.of(4, [(0, 2), (2, 2)]), backend)
    bad = shared.group(0)
    # the cycle engine finds the deadlock, the fast engine the unfed link
    with pytest.raises((RingDeadlock, RingStallError), match="core 0"):
        bad.run([_asm(sub, "rin row | mov r1 = row\nhalt"), _asm(sub, "rin row | mov r1 = row\nhalt")])
    tp = compile_chip_sgd(sub, mlp)
    W0 = init_weights(mlp, sub.fmt, 1)
    alone, sess = ChipSession(sub, backend), shared.group(1)
    tp.init(alone, W0)
    tp.init(sess, W0)
    rng = np.random.default_rng(2)
    for _ in range(2):
        x, t = rng.uniform(-1, 1, mlp.n_in), np.eye(mlp.n_out)[rng.integers(mlp.n_out)]
        ra, rs = tp.run_step(alone, x, t), tp.run_step(sess, x, t)
        assert ra.core_counters == rs.core_counters and ra.cycles == rs.cycles
    assert all(np.array_equal(a, b) for a, b in zip(tp.weights_from_session(alone), tp.weights_from_session(sess)))


def test_partition_energy_shares_leakage_by_cores_and_time():
    """Jobs without activity: each is charged the leakage of its cores over its time, the
    rest of the chip's cores x makespan is idle leakage, and they add up to the whole
    chip's leakage over the makespan."""
    from arch.counters import counter_names
    from sim.power import partition_energy, report_from_counters

    cfg = CHIP8
    zero = {n: 0 for n in counter_names(cfg)}
    jobs = [(dict(zero, cycles=1000), 4, 10), (dict(zero, cycles=400), 2, 10)]
    pe = partition_energy(cfg, jobs, 1000)
    whole = report_from_counters(cfg, dict(zero, cycles=1000), n_cores=8).energy_pj["leakage"]
    per = whole / 8000
    assert pe["jobs"][0].energy_pj["leakage"] == pytest.approx(per * 4000)
    assert pe["jobs"][1].energy_pj["leakage"] == pytest.approx(per * 800)
    assert pe["idle_leakage_pj"] == pytest.approx(per * (8000 - 4800))
    dyn = sum(sum(r.energy_pj.values()) - r.energy_pj["leakage"] for r in pe["jobs"])
    assert pe["total_pj"] == pytest.approx(whole + dyn)
