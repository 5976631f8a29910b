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
