"""Heterogeneous chips on the chip models: crossings (gearbox, format conversion), both
engines equal, the credit rule, errors."""

import numpy as np
import pytest

from arch.config import ArchConfig
from arch.hetero import CoreGroup, HeteroConfig
from sim.chip_model import ChipModel, RingStallError
from sim.chip_run import ChipPhase
from sim.hetero_run import run_hetero_session
from tests.rtl.test_chip import fill_program, forwarder, lane_beats, sender

NARROW = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)
WIDE = ArchConfig(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=128)
#: 2 cores of 2 x 2 PEs, then 2 of 4 x 4 (binary16); the same with the 4 x 4 cores in binary32
MIX = HeteroConfig((CoreGroup(2, NARROW), CoreGroup(2, WIDE)))
MIX_FMT = HeteroConfig((CoreGroup(2, NARROW), CoreGroup(2, WIDE.replace(fmt="binary32"))))


def roundtrip(h, values, seed, waits):
    """Core 0 sends ``values`` values (``values / nr`` beats of its kind) around the whole
    ring through both crossings; each core keeps and forwards them; core 0 takes them back
    and returns them to the host. ``waits[k]`` (``k`` < cores): nops before core k's ring
    loop; ``waits[-1]``: core 0's nops between sending and taking the values back."""
    rng = np.random.default_rng(seed)
    cfgs = h.core_cfgs
    nb = [values // c.nr for c in cfgs]
    data = [lane_beats(cfgs[0], rng, nb[0])] + [lane_beats(c, rng, 1) for c in cfgs[1:]]
    fills = [fill_program(cfgs[0], nb[0])] + [fill_program(c, 1) for c in cfgs[1:]]
    ring = [sender(cfgs[0], nb[0], waits[0], back=nb[0], back_delay=waits[-1])]
    ring += [forwarder(c, nb[k], waits[k]) for k, c in enumerate(cfgs) if k]
    return data[0], [ChipPhase(fills, data, "fill"), ChipPhase(ring, name="ring")]


@pytest.mark.parametrize("h", [MIX, MIX_FMT], ids=["nr", "nr+fmt"])
def test_roundtrip_both_engines(h):
    seed = 11
    print("seed", seed)
    host, phases = roundtrip(h, 16, seed, [0, 6, 40, 50, 60])
    a = run_hetero_session(h, phases, backend="model")
    b = run_hetero_session(h, phases, backend="fast")
    assert [x.data for x in a[1][0].data] == host         # exact both ways (16 -> 32 -> 16 bits)
    for pa, pb in zip(a, b):
        for ra, rb in zip(pa, pb):
            assert ra.data == rb.data and ra.counters == rb.counters
    ring = a[1]
    assert [r.counters["ring_out_beats"] for r in ring] == [8, 8, 4, 4]
    assert [r.counters["ring_in_beats"] for r in ring] == [8, 8, 4, 4]


def _stalls(res):
    return sum(r.counters["stall_cycles"] for r in res)


@pytest.mark.parametrize("h", [MIX, MIX_FMT], ids=["nr", "nr+fmt"])
def test_fast_check_matches_cycle_engine_stalls(h):
    """Over receiver delays around the stall-free limit: the fast engine runs exactly the
    schedules on which the per-cycle engine never stalls (the crossings' visibility and
    credit rules are the same in both), with equal results."""
    seed = 5
    print("seed", seed)
    ok = bad = 0
    for w2 in (8, 16, 22, 26, 40):
        for w0 in (0, 20, 45):
            host, phases = roundtrip(h, 16, seed, [0, 6, w2, w2 + 4, w0])
            a = run_hetero_session(h, phases, backend="model")
            stalled = _stalls(a[1]) > 0
            if stalled:
                with pytest.raises(RingStallError):
                    run_hetero_session(h, phases, backend="fast")
                bad += 1
            else:
                b = run_hetero_session(h, phases, backend="fast")
                assert [[r.counters for r in p] for p in a] == [[r.counters for r in p] for p in b]
                ok += 1
            assert [x.data for x in a[1][0].data] == host
    assert ok and bad


def test_splitting_credit_stalls_sender_not_overflow():
    """A wide sender streaming into a narrow receiver that waits: the crossing's credit
    (room for ``k`` receiver beats per sender beat) stalls the sender; nothing is lost."""
    h = MIX
    host, phases = roundtrip(h, 32, 3, [0, 6, 60, 64, 0])
    a = run_hetero_session(h, phases, backend="model")
    assert [x.data for x in a[1][0].data] == host
    assert a[1][3].counters["stall_cycles"] > 0 or a[1][2].counters["stall_cycles"] > 0


def test_power_report_mixed_chip():
    """Per-group energy at each kind's per-event energies, summed; the crossings' energy
    from their senders' beats; one group of one kind gives the homogeneous report."""
    from sim.power import report_from_counters
    from sim.power import DEFAULT_TECH
    from sim.power_hetero import crossing_area_mm2, crossing_pj_per_beat, crossing_register_bits, hetero_report

    for h in (MIX, MIX_FMT):
        host, phases = roundtrip(h, 16, 2, [0, 6, 40, 50, 60])
        ring = run_hetero_session(h, phases, backend="model")[1]
        ctrs = [r.counters for r in ring]
        cyc = ring[0].info["chip_cycles"]
        rep = hetero_report(h, ctrs, cyc)
        xs = h.crossings
        assert [x["beats"] for x in rep.crossing_pj] == [8, 4]
        assert rep.energy_pj["crossing"] == pytest.approx(sum(c["beats"] * crossing_pj_per_beat(x)
                                                              for c, x in zip(rep.crossing_pj, xs)))
        assert rep.pes == 2 * 4 + 2 * 16 and rep.area_mm2["total"] > 0 and rep.gflops_per_w_all >= 0
        # the crossings' area: in the total, and leaking at the logic density over the run
        xa = [crossing_area_mm2(x) for x in xs]
        assert [c["area_mm2"] for c in rep.crossing_pj] == xa
        assert rep.area_mm2["crossings"] == pytest.approx(sum(a["total"] for a in xa)) and rep.area_mm2["crossings"] > 0
        assert rep.area_mm2["total"] == pytest.approx(sum(v for k, v in rep.area_mm2.items() if k != "total"))
        assert rep.energy_pj["leakage"] == pytest.approx(
            sum(g["energy_pj"]["leakage"] for g in rep.groups)
            + rep.area_mm2["crossings"] * DEFAULT_TECH.leakage_mw_per_mm2_logic * 1e-3 * rep.seconds * 1e12)
        assert "crossings: 2:" in rep.table()
        narrow = {k: sum(c.get(k, 0) for c in ctrs[:2]) for k in ctrs[0]}
        narrow["cycles"] = cyc
        g0 = report_from_counters(h.group_cfgs[0], narrow, n_cores=2)
        assert rep.groups[0]["energy_pj"] == g0.energy_pj
    # a format crossing costs its conversions, in energy and in area (nr_a lanes at the larger FPU's area)
    assert crossing_pj_per_beat(MIX_FMT.crossings[0]) > crossing_pj_per_beat(MIX.crossings[0])
    assert crossing_area_mm2(MIX.crossings[0])["converters"] == 0
    x = MIX_FMT.crossings[0]
    assert crossing_area_mm2(x)["converters"] == pytest.approx(
        x.a.nr * max(DEFAULT_TECH.fpu_area_mm2[x.a.fmt.name], DEFAULT_TECH.fpu_area_mm2[x.b.fmt.name]))
    # the register bits of the RTL: collecting k = 2 beats of 2 lanes into 4 (16 bits each)
    x = MIX.crossings[0]
    assert (x.widen, x.ratio, x.a.nr, x.b.nr) == (True, 2, 2, 4)
    assert crossing_register_bits(x) == 2 * 16 + 4 * 16 + 1 + 1
    # one kind: the homogeneous chip's figures
    one = HeteroConfig((CoreGroup(4, NARROW),))
    c = {"cycles": 100, "instructions": 50, "mv": 3, "mem_a_rd": 10, "mem_a_wr": 2, "mem_b_rd": 4, "mem_b_wr": 1,
         "rf_rd": 9, "rf_wr": 7, "fma[0]": 20, "ring_out_beats": 5, "ring_in_beats": 5}
    rep = hetero_report(one, [c] * 4, 100)
    ref = report_from_counters(NARROW.replace(cores=4), {k: (4 * v if k != "cycles" else v) for k, v in c.items()},
                               n_cores=4)
    assert rep.energy_pj.pop("crossing") == 0 and rep.area_mm2["crossings"] == 0
    assert rep.energy_pj == pytest.approx(ref.energy_pj)
    assert rep.area_mm2["total"] == pytest.approx(ref.area_mm2["total"])
    assert rep.gflops_per_w_all == pytest.approx(ref.gflops_per_w_all)


def _pass_along(cfg, n, wait):
    """Fill SRAM A of column 0 from the host (``n`` beats), send it to the next core,
    then take ``n`` beats from the previous core into SRAM B of column 1."""
    from sw.asm import assemble

    return assemble(f"""
        stride ar0 = 1
        stride ar1 = 1
        ar0 = 0
        loop f {n} {{
            hin row | @col=0 | wra [ar0]++ = row
        }}
        ar0 = 0
        loop i {n} {{
            rda [ar0]++ gate=rdrv | rdrv mema @col=0 | rout row
        }}
        loop d {wait} {{
            nop
        }}
        loop j {n} {{
            rin row | @col=1 | wrb [ar1]++ = row
        }}
        halt""", cfg).words()


def _values(model, engine, cfg, bank, col, n):
    """The value stream (beat-major) in SRAM ``bank`` of PE column ``col``, ``n`` beats."""
    if engine == "fast":
        mem = model.memory(bank)[:, col, :n]
    else:
        mem = np.array([model.pes[i][col].memory(bank)[:n] for i in range(cfg.nr)])
    return [int(v) for v in mem.T.reshape(-1)]


def test_pass_along_s_like_mix_both_engines():
    """Preset ``hetero-S`` (16 cores of 4 x 4 PEs, 2 of 16 x 16): every core sends 32
    values to the next (4:1 collecting and 1:4 splitting crossings); each core receives
    its predecessor's values in order, on both engines, with equal counters."""
    from arch.hetero import HETERO_PRESETS

    h = HETERO_PRESETS["hetero-S"]
    seed = 4
    print("seed", seed)
    rng = np.random.default_rng(seed)
    cfgs = h.core_cfgs
    host = [lane_beats(c, rng, 32 // c.nr) for c in cfgs]
    out = {}
    for engine in ("fast", "cycle"):
        m = ChipModel(h, engine)
        for k, c in enumerate(cfgs):
            m.load(_pass_along(c, 32 // c.nr, 40), core=k)
        res = m.run(host_in=host)
        sent = [_values(m.core(k), engine, c, "a", 0, 32 // c.nr) for k, c in enumerate(cfgs)]
        got = [_values(m.core(k), engine, c, "b", 1, 32 // c.nr) for k, c in enumerate(cfgs)]
        assert all(any(s) for s in sent) and all(got[k] == sent[k - 1] for k in range(h.cores))
        out[engine] = ([r.counters for r in res.cores], res.cycles, got)
    assert out["fast"] == out["cycle"]
