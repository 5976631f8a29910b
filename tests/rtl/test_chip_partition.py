"""Partitions on the chip RTL: two groups of a 4-core chip of 2 x 2 PEs, each closed on
itself by the host-written group registers, under cocotb. One group deadlocks (and its
tail core sends beats that would reach the other group on the whole ring); the other
finishes with every output beat and counter of its run alone; the faulty group is
stopped and then runs a good job."""

import pytest

from arch.partition import Partition
from sim.chip_run import ChipPhase
from sim.partition_run import partition_session, run_partition_session
from tests.rtl.test_chip import CHIP4, _asm, roundtrip_phases
from tests.simulators import require_sim

SUB = CHIP4.replace(cores=2)


def _faulty():
    """Core 0 takes 4 beats, core 1 sends 3 then waits for one: a ring deadlock."""
    return [ChipPhase([_asm(SUB, "loop i 4 {\n rin row | mov r1 = row\n }\nhalt"),
                       _asm(SUB, "loop i 3 {\n rdrv r1 @col=0 | rout row\n }\nrin row | mov r2 = row\nhalt")],
                      name="deadlock")]


def test_partition_session_model_side():
    """The host frames configure both groups, select a group before each broadcast, and
    stop the faulty group; the expected streams of the good group are its run alone."""
    from rtl.chip import broadcast_dest, config_dest
    from sim.chip_run import run_chip_session

    host, good = roundtrip_phases(SUB, 5, seed=7, delays=(0, 3, 8))
    part = Partition.of(4, [(0, 2), (2, 2)])
    frames, streams, errors = partition_session(CHIP4, part, [_faulty(), good])
    assert errors[0] is not None and "RingDeadlock" in errors[0] and errors[1] is None
    alone = run_chip_session(SUB, good, backend="model")
    assert _holds([(b.data, b.last) for b in streams[2]], [b.data for b in alone[1][0].data])
    assert not streams[0] and not streams[1]
    dests = [f[0] for f in frames if f[0] != "wait"]
    assert config_dest(CHIP4) in dests and broadcast_dest(CHIP4) in dests
    assert frames[-1][0] == config_dest(CHIP4)        # the STOP


@pytest.mark.parametrize("sim", ["icarus"])
def test_chip_rtl_two_groups_one_faulty(sim):
    require_sim(sim)
    host, good = roundtrip_phases(SUB, 5, seed=7, delays=(0, 3, 8))
    host2, again = roundtrip_phases(SUB, 4, seed=8, delays=(0, 3, 8))
    part = Partition.of(4, [(0, 2), (2, 2)])
    r = run_partition_session(CHIP4, part, [_faulty(), good], recover=[again, None], sim=sim)
    assert "RingDeadlock" in r["errors"][0] and r["errors"][1] is None
    # the testbench checked every beat of every core against each group's model alone;
    # group 1's round trip came back unchanged, and so did group 0's after its STOP
    assert _holds(r["streams"][2], host) and _holds(r["streams"][0], host2)


def _holds(stream, beats):
    d = [x for x, _ in stream]
    return any(d[i:i + len(beats)] == beats for i in range(len(d) - len(beats) + 1))


#: make test-all: make test checks a group's isolation from a deadlocked one on the chip RTL
#: (test_chip_rtl_two_groups_one_faulty) and the chip SGD step on the RTL alone
#: (tests/sw/test_train_chip.py::test_chip_sgd_rtl)
@pytest.mark.slow
@pytest.mark.parametrize("sim", ["icarus"])
def test_chip_rtl_sgd_job_beside_faulty_group(sim):
    """An SGD step of a small network compiled for 2 cores, and the read-back of its
    weights, in group 1 of a 4-core chip of 2 x 2 PEs while group 0 deadlocks: every
    beat (the weights read back and the counters included) equals the job's run alone,
    whose weights equal the golden trainer's bit for bit."""
    import numpy as np

    from arch.config import ArchConfig
    from sim.chip_run import run_chip_session
    from sim.sessions import ChipSession
    from sw.golden_train_chip import GoldenChipSGD
    from sw.mlp import MLP
    from sw.train import init_weights
    from sw.train_chip import compile_chip_sgd

    require_sim(sim)
    sub = ArchConfig(nr=2, mem_a_words=512, mem_b_words=512, cores=2)
    chip = sub.replace(cores=4)
    mlp = MLP((8, 6, 3), "softmax_ce", 0.05)
    tp = compile_chip_sgd(sub, mlp)
    W0 = init_weights(mlp, sub.fmt, 0)
    sess = ChipSession(sub, "model", record=True)
    tp.init(sess, W0)
    gold = GoldenChipSGD(sub, mlp, W0)
    x = np.random.default_rng(3).uniform(0, 1, mlp.n_in)
    tp.run_step(sess, x, 1)
    gold.step(x, 1)
    un = tp.unload_weights_phases()
    phases = sess.phases + [ChipPhase(imgs, None, n) for imgs, n in un]
    alone = run_chip_session(sub, phases, backend="model")
    got = tp.decode_weights(alone[-len(un):], padded=True)
    assert all(np.array_equal(a, w) for a, w in zip(got, gold.weights(padded=True)))
    faulty = [ChipPhase([_asm(sub, "loop i 4 {\n rin row | mov r1 = row\n }\nhalt"),
                         _asm(sub, "loop i 3 {\n rdrv r1 @col=0 | rout row\n }\nrin row | mov r2 = row\nhalt")],
                        name="deadlock")]
    r = run_partition_session(chip, Partition.of(4, [(0, 2), (2, 2)]), [faulty, phases], sim=sim,
                              name="chip_partition_sgd")
    assert "RingDeadlock" in r["errors"][0] and r["errors"][1] is None
    # the testbench compared every beat of cores 2 and 3 with the job alone; decode the
    # weights from the RTL's own beats too
    rtl = _split(sub, [r["streams"][2], r["streams"][3]], alone)
    got_rtl = tp.decode_weights(rtl[-len(un):], padded=True)
    assert all(np.array_equal(a, w) for a, w in zip(got_rtl, gold.weights(padded=True)))
    assert [[q.counters for q in ph] for ph in rtl] == [[q.counters for q in ph] for ph in alone]


def _split(cfg, streams, like):
    """Per phase, per core: JobResults cut from measured streams with the lengths of
    ``like`` (data beats, the done beat, the counter beats)."""
    from arch.counters import counter_names
    from sim.core_model import Beat
    from sim.core_run import JobResult
    from sw.host_protocol import decode_counters

    n_ctr = -(-64 // cfg.host_width) * len(counter_names(cfg))
    pos = [0] * len(streams)
    out = []
    for ph in like:
        row = []
        for k, ref in enumerate(ph):
            nd = len(ref.data)
            chunk = [Beat(int(d), bool(last)) for d, last in streams[k][pos[k]:pos[k] + nd + 1 + n_ctr]]
            pos[k] += nd + 1 + n_ctr
            row.append(JobResult(chunk[:nd], chunk[nd], decode_counters(cfg, [(b.data, b.last) for b in chunk[nd + 1:]]),
                                 "rtl"))
        out.append(row)
    assert pos == [len(s) for s in streams]
    return out
