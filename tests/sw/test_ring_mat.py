"""Ring collectives on 2D-layout matrices (sw/ring_mat.py): bit-exact against the goldens
on both chip engines, stall-free, slot counts equal to the formulas and equal on every
core, microcode folded into loops, errors; and one RTL session with all three."""

from dataclasses import replace

import numpy as np
import pytest

from tests.simulators import REPLAY_SIM_PARAMS
from tests.sw.test_train import _seed
from sw.ring import RingError
from sw.ring_mat import (MatBlock, golden_mat_all_gather, golden_mat_broadcast, golden_mat_reduce,
                          golden_mat_reduce_scatter, mat_all_gather, mat_all_gather_slots, mat_broadcast,
                          mat_broadcast_slots, mat_reduce, mat_reduce_scatter, mat_reduce_scatter_slots,
                          mat_reduce_slots)
from arch.config import PRESETS, ArchConfig
from sim.chip_model import ChipModel
from sim.seq_model import SequencerModel
from sw.asm import Builder, assemble

TINY, SMALL = PRESETS["chip-tiny"], PRESETS["chip-small"]
SIX32 = ArchConfig(nr=2, cores=6, fmt="binary32", mem_a_words=256, mem_b_words=256)
CFGS = [TINY, SMALL, SIX32]
CFG_IDS = ["tiny", "small", "six-b32"]


def rand_mems(cfg, rng):
    """Per core {bank: [nr, nr, words]} random bit patterns."""
    nr = cfg.nr
    return [{b: cfg.fmt.from_float(rng.uniform(-2, 2, (nr, nr, cfg.mem_a_words if b == "a" else cfg.mem_b_words)))
             .astype(cfg.fmt.np_uint) for b in "ab"} for _ in range(cfg.cores)]


def set_mem(core, bank, local):
    if hasattr(core, "set_memory"):            # fast engine
        core.set_memory(bank, local)
        return
    nr = local.shape[0]
    for i in range(nr):
        for j in range(nr):
            mem = core.pes[i][j].mem_a if bank == "a" else core.pes[i][j].mem_b
            mem[:] = [int(v) for v in local[i, j]]


def get_mem(core, bank):
    if hasattr(core, "set_memory"):
        return core.memory(bank)
    return np.array([[pe.memory(bank) for pe in row] for row in core.pes])


def issued(cfg, text):
    seq = SequencerModel(cfg)
    seq.load(assemble(text + "\nhalt", cfg).words(), 0)
    return sum(1 for _ in seq.iter_run(0)) - 1


def run_frags(cfg, frags, mems, engine):
    """Load each core's fragment (+ halt) and memories, run, return (result, memories)."""
    ch = ChipModel(cfg, engine)
    for k in range(cfg.cores):
        ch.load(assemble(frags[k].text + "\nhalt", cfg).words(), core=k)
        for b in "ab":
            set_mem(ch.core(k), b, mems[k][b])
    r = ch.run()
    return r, [{b: get_mem(ch.core(k), b) for b in "ab"} for k in range(cfg.cores)]


def check(cfg, frags, mems, want, slots):
    """Both engines: results == golden, no stall, equal counters; slots as the formula on
    every core (the texts issue exactly that many instructions)."""
    assert all(f.slots == slots for f in frags)
    for f in frags:
        assert issued(cfg, f.text) == slots
    res = {}
    for eng in ("fast", "cycle"):
        r, got = run_frags(cfg, frags, mems, eng)
        assert r.counters["stall_cycles"] == 0, eng
        assert r.cycles == slots + cfg.run_overhead, eng         # + halt, start, drain
        for k in range(cfg.cores):
            for b in "ab":
                assert np.array_equal(got[k][b], want[k][b]), (eng, k, b)
        res[eng] = r
    for k in range(cfg.cores):
        assert res["fast"].cores[k].counters == res["cycle"].cores[k].counters, k
    return res["fast"]


def seg_cases(cfg):
    """Segment layouts: (name, seg) with c segments each."""
    c = cfg.cores
    return [
        # row panels of a region (contiguous: ncols == ld), bank A
        ("contig", lambda s: MatBlock("a", 3, 3, 2 * s, 2, 0, 3)),
        # column panels (strided), bank B
        ("strided", lambda s: MatBlock("b", 1, 2 * c + 1, 1, 3, 2 * s, 2)),
        # one local row per segment, strided region
        ("one-row", lambda s: MatBlock("b", 0, 7, s, 1, 2, 4)),
        # one local column per segment
        ("one-col", lambda s: MatBlock("a", 2, c, 0, 2, s, 1)),
        # single words, irregular bases (not equally spaced)
        ("word", lambda s: MatBlock("a" if s % 2 else "b", 5 * s + (s * s) % 3, 1, 0, 1, 0, 1)),
    ]


@pytest.mark.parametrize("case", range(5), ids=["contig", "strided", "one-row", "one-col", "word"])
@pytest.mark.parametrize("cfg", CFGS, ids=CFG_IDS)
def test_all_gather(cfg, case):
    seed = _seed()
    rng = np.random.default_rng(seed)
    name, seg = seg_cases(cfg)[case]
    mems = rand_mems(cfg, rng)
    m = seg(0).beats(cfg.nr)
    frags = [mat_all_gather(cfg, k, seg) for k in range(cfg.cores)]
    r = check(cfg, frags, mems, golden_mat_all_gather(cfg, mems, seg), mat_all_gather_slots(cfg, m))
    for k in range(cfg.cores):
        assert r.cores[k].counters["ring_out_beats"] == (cfg.cores - 1) * m


@pytest.mark.parametrize("case", range(5), ids=["contig", "strided", "one-row", "one-col", "word"])
@pytest.mark.parametrize("cfg", CFGS, ids=CFG_IDS)
def test_reduce_scatter(cfg, case):
    seed = _seed()
    rng = np.random.default_rng(seed)
    name, seg = seg_cases(cfg)[case]
    mems = rand_mems(cfg, rng)
    m = seg(0).beats(cfg.nr)
    frags = [mat_reduce_scatter(cfg, k, seg, reg=3) for k in range(cfg.cores)]
    r = check(cfg, frags, mems, golden_mat_reduce_scatter(cfg, mems, seg), mat_reduce_scatter_slots(cfg, m))
    # one FMA per element of every segment, c - 1 additions each
    fmas = sum(v for k in range(cfg.cores) for n, v in r.cores[k].counters.items() if n.startswith("fma["))
    assert fmas == (cfg.cores - 1) * cfg.cores * m * cfg.nr


@pytest.mark.parametrize("cfg", CFGS, ids=CFG_IDS)
def test_broadcast(cfg):
    seed = _seed()
    rng = np.random.default_rng(seed)
    mems = rand_mems(cfg, rng)
    c = cfg.cores
    for root, src, dst in [(0, MatBlock("a", 0, 4, 1, 3, 0, 4), MatBlock("b", 50, 4, 0, 3, 0, 4)),
                           (c - 1, MatBlock("b", 7, 9, 2, 2, 3, 5), MatBlock("b", 100, 5, 1, 2, 0, 5)),
                           (c // 2, MatBlock("a", 9, 1, 0, 1, 0, 1), MatBlock("a", 9, 1, 0, 1, 0, 1))]:
        m = src.beats(cfg.nr)
        frags = [mat_broadcast(cfg, k, src, dst, root) for k in range(c)]
        check(cfg, frags, mems, golden_mat_broadcast(cfg, mems, src, dst, root), mat_broadcast_slots(cfg, m))


@pytest.mark.parametrize("cfg", CFGS, ids=CFG_IDS)
def test_reduce(cfg):
    """Reduce to a root (every root, contiguous and strided blocks): the root gets the sum
    in ring order from root + 1, the other cores keep their partials; c - 1 additions per
    element."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    mems = rand_mems(cfg, rng)
    c = cfg.cores
    for root in range(c):
        blk = [MatBlock("a", 5, 3, 1, 2, 0, 3), MatBlock("b", 2, 7, 0, 3, 2, 4),
               MatBlock("a", 9, 1, 0, 1, 0, 1)][root % 3]
        m = blk.beats(cfg.nr)
        frags = [mat_reduce(cfg, k, blk, root, reg=2) for k in range(c)]
        r = check(cfg, frags, mems, golden_mat_reduce(cfg, mems, blk, root), mat_reduce_slots(cfg, m))
        fmas = sum(v for k in range(c) for n, v in r.cores[k].counters.items() if n.startswith("fma["))
        assert fmas == (c - 1) * m * cfg.nr
        assert r.cores[root].counters["ring_out_beats"] == (0 if c > 1 else m)


def test_slot_formulas_and_folding():
    """Closed forms; long segments fold into a few loop words per core, in programs
    that chain fragments (unique loop names per fragment)."""
    cfg = PRESETS["S"]
    c, L = cfg.cores, cfg.fpu_latency
    for m in (64, 128):
        assert mat_broadcast_slots(cfg, m) == 2 + 3 * (c - 1) + m
        assert mat_all_gather_slots(cfg, m) == 2 + c * m + 6 * (c - 1)
        assert mat_reduce_scatter_slots(cfg, m) == c * m + 24 * c - 25
        assert mat_reduce_slots(cfg, m) == 2 * m + 10 * c - 10
    seg = lambda s: MatBlock("a", 0, 8, 4 * s, 4, 0, 8)         # noqa: E731 - 128 beats per segment
    for k in (0, 13, c - 1):
        b = Builder(cfg)
        parts = [mat_all_gather(cfg, k, seg, "ag"), mat_reduce_scatter(cfg, k, seg, "rs"),
                 mat_broadcast(cfg, k, seg(3), seg(3), 3, "bc"), mat_reduce(cfg, k, seg(5), 5, "rd")]
        for f in parts:
            b.text(f.text)
        b.halt()
        assert len(b.build().words()) < 200
        assert all(f.words < 100 for f in parts)
    assert L == 7


def test_errors():
    cfg = SMALL
    good = lambda s: MatBlock("a", 0, 4, s, 1, 0, 4)            # noqa: E731
    with pytest.raises(RingError, match="cores >= 2"):
        mat_all_gather(PRESETS["small"], 0, good)
    with pytest.raises(RingError, match="core 4 is not"):
        mat_all_gather(cfg, 4, good)
    with pytest.raises(RingError, match="equal shapes"):
        mat_all_gather(cfg, 0, lambda s: MatBlock("a", 0, 4, s, 1, 0, 4 if s else 3))
    with pytest.raises(RingError, match="do not fit SRAM B"):
        mat_reduce_scatter(cfg, 0, lambda s: MatBlock("b", 1000, 4, 2 * s, 2, 0, 4))
    with pytest.raises(RingError, match="exceed the region's ld"):
        mat_reduce_scatter(cfg, 0, lambda s: MatBlock("b", 0, 4, s, 1, 2, 3))
    with pytest.raises(RingError, match="overlap"):
        mat_all_gather(cfg, 0, lambda s: MatBlock("a", 0, 4, 0, 1, 0, 4))
    with pytest.raises(RingError, match="bank must be"):
        mat_all_gather(cfg, 0, lambda s: MatBlock("c", 0, 4, s, 1, 0, 4))
    with pytest.raises(RingError, match="at least one"):
        mat_all_gather(cfg, 0, lambda s: MatBlock("a", 0, 4, s, 0, 0, 4))
    with pytest.raises(RingError, match="not a MatBlock"):
        mat_all_gather(cfg, 0, lambda s: (0, 4))
    with pytest.raises(RingError, match="r15, r16 do not exist"):
        mat_reduce_scatter(cfg, 0, good, reg=15)
    with pytest.raises(RingError, match="root 5"):
        mat_broadcast(cfg, 0, good(0), good(1), root=5)
    with pytest.raises(RingError, match="reduce root 4"):
        mat_reduce(cfg, 0, good(0), root=4)
    with pytest.raises(RingError, match="r16 does not exist"):
        mat_reduce(cfg, 0, good(0), reg=16)
    with pytest.raises(RingError, match="reduce block: words"):
        mat_reduce(cfg, 0, MatBlock("b", 1020, 4, 0, 2, 0, 4))
    with pytest.raises(RingError, match="differ in shape"):
        mat_broadcast(cfg, 0, good(0), MatBlock("a", 0, 4, 0, 2, 0, 2))
    with pytest.raises(RingError, match="n_ar=1"):
        mat_all_gather(replace(cfg, n_ar=1), 0, good)
    with pytest.raises(RingError, match="ucode_depth"):
        # single-word segments at irregular addresses do not fold: 64 cores need > 128 words
        big = ArchConfig(nr=2, cores=64, mem_a_words=512, mem_b_words=512, ucode_depth=128)
        mat_reduce_scatter(big, 5, lambda s: MatBlock("a", 7 * s + s * s % 5, 1, 0, 1, 0, 1))


# -- RTL -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_mat_collectives_rtl(sim):
    """All-gather, reduce-scatter, broadcast and reduce in one chip RUN on the 4-core chip of 2 x 2
    PEs (tests/rtl/test_chip.py's CHIP4, one simulator build): every core's beats and counters
    equal the per-cycle chip model's; the memories read back equal the chained goldens."""
    from sim.chip_run import ChipPhase, run_chip_session
    from sw.transfer import decode_unload, emit_load, emit_unload, load_beats_for
    from tests.rtl.test_chip import CHIP4

    cfg = CHIP4
    c, W = cfg.cores, cfg.mem_a_words
    seed = _seed()
    mems = rand_mems(cfg, np.random.default_rng(seed))
    ag = lambda s: MatBlock("a", 0, 4, s, 1, 0, 4)              # noqa: E731 - contiguous, bank A
    rs = lambda s: MatBlock("b", 8, 8, 0, 2, 2 * s, 2)          # noqa: E731 - strided, bank B
    src, dst, root = MatBlock("a", 32, 3, 0, 2, 0, 3), MatBlock("b", 40, 3, 0, 2, 0, 3), 2
    red = MatBlock("a", 48, 5, 0, 2, 1, 3)                        # strided, root 1

    def xfer(load):
        b = Builder(cfg)
        b.text("ar0 = 0")
        for bank in "ab":
            (emit_load if load else emit_unload)(b, cfg, bank, 0, W, loop=f"x{bank}", **({} if load else {"last": bank == "b"}))
        b.halt()
        return b.build().words()

    imgs = []
    for k in range(c):
        b = Builder(cfg)
        for f in (mat_all_gather(cfg, k, ag), mat_reduce_scatter(cfg, k, rs), mat_broadcast(cfg, k, src, dst, root),
                  mat_reduce(cfg, k, red, 1, name="rd")):
            b.text(f.text)
        b.halt()
        imgs.append(b.build().words())
    phases = [ChipPhase(xfer(True), [load_beats_for(cfg, mems[k]["a"]) + load_beats_for(cfg, mems[k]["b"])
                                     for k in range(c)], "fill"),
              ChipPhase(imgs, name="collectives"),
              ChipPhase(xfer(False), name="read")]
    res = run_chip_session(cfg, phases, backend="rtl", sim=sim, name="ring_mat")
    ref = run_chip_session(cfg, phases, backend="model")
    for p, (pr, pm) in enumerate(zip(res, ref)):
        for k, (a, b) in enumerate(zip(pr, pm)):
            assert a.data == b.data and a.counters == b.counters, (phases[p].name, k)
    assert sum(r.counters["stall_cycles"] for r in res[1]) == 0
    want = golden_mat_all_gather(cfg, mems, ag)
    want = golden_mat_reduce_scatter(cfg, want, rs)
    want = golden_mat_broadcast(cfg, want, src, dst, root)
    want = golden_mat_reduce(cfg, want, red, 1)
    for k in range(c):
        beats = res[2][k].data
        for i, bank in enumerate("ab"):
            got = decode_unload(cfg, beats[i * cfg.nr * W:(i + 1) * cfg.nr * W], W)
            assert np.array_equal(got, want[k][bank]), (k, bank)
