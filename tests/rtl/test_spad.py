"""The off-core scratchpad: configuration, ISA and assembler, RTL (Icarus and Verilator)
against the per-cycle core model and the fast model, read-after-write timing, counters,
random differential programs with scratchpad slots, chip persistence, power model."""

import os
import random

import numpy as np
import pytest

from tests.simulators import REPLAY_SIM_PARAMS
from tests.fast_programs import preload, random_case
from arch.config import PRESETS, ArchConfig, ConfigError
from arch.counters import counter_names
from sim.core_model import CoreModel
from sim.core_run import Phase, run_session
from sim.fast_model import FastModel, core_state
from sim.power import DEFAULT_TECH, area_of_core, report_from_counters
from sim.seq_model import SpadPointers, Issued, spad_pointer_trace
from sw.asm import AsmError, Builder, assemble, disassemble, sin, sout
from arch.isa import SeqOp, instr_layout
from sw.transfer import decode_unload, emit_load, emit_spad_drain, emit_spad_fill, emit_unload, load_beats_for

TINY = PRESETS["tiny"]                     # nr=2 binary16, 2 KiB scratchpad = 512 beats
#: binary32 nr=3 (non-power-of-two beat), 4 KiB: 341 beats fit, 256 used
ODD = ArchConfig(nr=3, fmt="binary32", mem_a_words=64, mem_b_words=64, ucode_depth=128, spad_kib=4)


def spad_of(model):
    """The scratchpad as ``[depth, nr]`` lanes, from a CoreModel or a FastModel."""
    if isinstance(model, FastModel):
        return model.scratchpad()
    cfg = model.cfg
    w = cfg.fmt.width
    return np.array([[(b >> (i * w)) & ((1 << w) - 1) for i in range(cfg.nr)] for b in model.spad],
                    cfg.fmt.np_uint).reshape(cfg.spad_depth, cfg.nr)


# ======================================================================================
# configuration and ISA
# ======================================================================================
def test_config_field_depth_and_presets():
    assert ArchConfig().spad_kib == 0 and ArchConfig().spad_depth == 0
    assert PRESETS["S"].spad_kib == 512 and PRESETS["S"].spad_depth == 512 * 1024 // 8
    for name in ("tiny", "small", "chip-tiny", "chip-small"):
        assert 1 <= PRESETS[name].spad_kib <= 4, name
    assert TINY.spad_depth == 512 and TINY.spad_addr_bits == 9
    assert ArchConfig(nr=4, fmt="binary32", spad_kib=512).spad_depth == 32768
    assert ODD.spad_depth == 256           # 4096 / 12 = 341 -> 256
    assert ArchConfig.from_dict({"preset": "tiny", "fmt": "binary32"}).spad_kib == 2


@pytest.mark.parametrize("kw,needle", [
    ({"spad_kib": 3}, r"spad_kib must be 0 or a power of two in 1..16384, got 3"),
    ({"spad_kib": -1}, r"spad_kib must be an integer in 0..16384, got -1"),
    ({"spad_kib": 32768}, r"spad_kib must be an integer in 0..16384"),
    ({"spad_kib": True}, r"spad_kib must be an integer"),
    ({"spad_kib": 16384, "nr": 1, "loop_bits": 8, "ucode_depth": 16, "mem_a_words": 256, "mem_b_words": 256},
     r"spad_kib=16384 needs 23-bit scratchpad addresses, more than loop_bits \+ pc_bits = 12"),
])
def test_config_errors_name_field_and_range(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        ArchConfig(**kw)


def test_layout_unchanged_without_scratchpad():
    """Configurations without a scratchpad keep the instruction layout bit for bit; with
    one the control field gains the two flags and the micro-op the write predicate
    (``wp.en``, last, so the other fields keep their places)."""
    a, b = ArchConfig(nr=2), ArchConfig(nr=2, spad_kib=2)
    names_a = [n for n, _ in instr_layout(a)["ctl"].shape]
    assert "sin" not in names_a and "sin" in [n for n, _ in instr_layout(b)["ctl"].shape]
    ua, ub = ([n for n, _ in instr_layout(c)["uop"].shape] for c in (a, b))
    assert ub == ua + ["wp"]
    assert instr_layout(b).size == instr_layout(a).size + 3
    assert "spad_rd_beats" not in counter_names(a)
    assert counter_names(b)[-2:] == ["spad_rd_beats", "spad_wr_beats"]


SRC = """
        spad rd = 300 | hin row | sout row
        spad wr = 5
        spad rw = 511 | sin col | @diag=0 | wra [ar0]++ = col
        sin row | hout row last
        rdrv r1 @col=0 | sout row
        loop i 4 {
            sin row | sout row
        }
        halt
"""


def test_assembler_forms_and_disassembler():
    p = assemble(SRC, TINY)
    ins = p.instrs if hasattr(p, "instrs") else list(p)
    first = ins[0]
    assert first.op == SeqOp.SPAD_PTR and first.lvl == 1 and first.imm == 300 and first.sin == 0
    assert first.sout == 1 and first.hin == 1 and first.hout == 1
    text = disassemble(p, TINY)
    assert "sin col" in text and "sout row" in text and "spad rw = 511" in text
    assert assemble(text, TINY).words() == p.words()
    # addresses above 2^loop_bits use the target field
    cfg = ArchConfig(nr=1, loop_bits=8, mem_a_words=256, mem_b_words=256, spad_kib=64)
    q = assemble("spad wr = 30000\nhalt", cfg)
    assert disassemble(q, cfg).splitlines()[0].startswith("spad wr = 30000")
    # the Builder
    b = Builder(TINY)
    b.spad("rd", 300, sout("row"), "hin row")
    b.emit(sin("col"), "hout col")
    b.halt()
    assert b.build().words()[:2] == assemble("spad rd = 300 | hin row | sout row\nsin col | hout col\nhalt",
                                             TINY).words()[:2]


@pytest.mark.parametrize("src,needle", [
    ("hin row | sin row", r"both use the stream input \(hin/rin/sin\)"),
    ("rin row | sin col", r"both use the stream input"),
    ("hout row | sout row | hin row", r"both use the stream output \(hout/rout/sout\)"),
    ("rdrv r1 @col=0 | rout row | sout row", r"both use the stream output"),
    ("sin row | rdrv r1 @col=0", r"row bus conflict"),
    ("sout col", r"hout col: nothing drives the column bus"),
    ("hin row | sout row last", r"unexpected 'last'"),
    ("hin row | raw sout=1 hout=1 hlast=1", r"sout has no tlast"),
    ("raw sin=1", r"sin flag without a direction"),
    ("spad rd = 512", r"scratchpad address 512 out of range 0..511"),
    ("spad rd = -1", r"scratchpad address -1 out of range"),
    ("spad xy = 1", r"spad pointer must be rd, wr or rw"),
    ("spad rd = 1 | agu g0 = 1", r"conflicts with"),
])
def test_assembler_errors(src, needle):
    with pytest.raises(AsmError, match=needle):
        assemble(src + "\nhalt", TINY)


@pytest.mark.parametrize("src", ["sin row | mov r1 = row", "hin row | sout row", "spad rd = 0"])
def test_assembler_rejects_scratchpad_without_one(src):
    with pytest.raises(AsmError, match=r"needs a scratchpad: this configuration has none \(cfg.spad_kib = 0\)"):
        assemble(src + "\nhalt", ArchConfig(nr=2))


def test_pointer_trace_matches_stepping():
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(0, 40)
        acc = [rng.random() < 0.5 for _ in range(n)]
        sel = [rng.random() < 0.15 for _ in range(n)]
        val = [rng.randrange(16) for _ in range(n)]
        ptr = SpadPointers(ArchConfig(nr=4, spad_kib=1))     # 128 beats
        ptr.mask = 15
        ref = []
        for a, s, v in zip(acc, sel, val):
            i = Issued(0, 0, 0, SeqOp.SPAD_PTR if s else 0, 1, 0, 0, None, sin=int(a), spad_sel=int(s), spad_val=v)
            ref.append(ptr.rd)
            ptr.step(i)
        assert spad_pointer_trace(acc, sel, val, 15).tolist() == ref


# ======================================================================================
# programs: host -> scratchpad -> PE memory -> scratchpad -> host, read-after-write
# ======================================================================================
def roundtrip_phases(cfg, rng, n=5):
    """Fill the scratchpad from the host, load PE memory A from it, unload A into another
    scratchpad region, send that region back to the host."""
    local = np.array([[[int(cfg.fmt.from_float(rng.uniform(-4, 4))) for _ in range(n)] for _ in range(cfg.nr)]
                      for _ in range(cfg.nr)], np.uint64)
    beats = load_beats_for(cfg, local)
    b = Builder(cfg)
    emit_spad_fill(b, cfg, 10, len(beats))
    b.halt()
    fill = b.build().words()
    b = Builder(cfg)
    emit_load(b, cfg, "a", 3, n, source="spad", spad_addr=10)
    emit_unload(b, cfg, "a", 3, n, dest="spad", spad_addr=100)
    b.halt()
    move = b.build().words()
    b = Builder(cfg)
    emit_spad_drain(b, cfg, 100, cfg.nr * n)
    b.halt()
    drain = b.build().words()
    return [Phase(fill, beats, "fill"), Phase(move, [], "move"), Phase(drain, [], "drain")], local


#: read-after-write at the boundary: a sout in cycle t, then sin of the same word in t+1
#: (old word), t+2 (new word); each case writes a fresh word
RAW = """
        spad rw = 200
        hin row | sout row                  ; t: writes X to 200
        sin row | hout row                  ; t+1 reads 200: the old word (read during the write)
        spad rw = 210
        hin row | sout row                  ; t: writes Y to 210
        spad rd = 210
        sin row | hout row                  ; t+2 reads 210: Y
        spad wr = 220
        hin col | sout col | spad rd = 220  ; t: writes Z to 220 (the pointer set is for later)
        nop
        nop
        sin col | hout col last             ; t+3: Z
        halt
"""


def raw_phase(cfg):
    w = cfg.fmt.width
    vals = [sum((0x1000 + 16 * k + i) << (i * w) for i in range(cfg.nr)) for k in range(3)]
    return Phase(assemble(RAW, cfg).words(), vals, "raw"), vals


def test_roundtrip_and_timing_models():
    cfg = TINY
    phases, local = roundtrip_phases(cfg, random.Random(1))
    raw, vals = raw_phase(cfg)
    results = {}
    for backend in ("model", "fast"):
        results[backend] = run_session(cfg, phases + [raw], backend=backend)
    a, b = results["model"], results["fast"]
    for ra, rb in zip(a, b):
        assert ra.data == rb.data and ra.counters == rb.counters
    assert np.array_equal(decode_unload(cfg, a[2].data, 5), local)
    n = cfg.nr * 5
    assert a[0].counters["spad_wr_beats"] == n and a[0].counters["host_in_beats"] == n
    assert a[1].counters["spad_rd_beats"] == n and a[1].counters["spad_wr_beats"] == n
    assert a[1].counters["host_in_beats"] == 0 and a[1].counters["host_out_beats"] == 0
    assert a[2].counters["spad_rd_beats"] == n and a[2].counters["host_out_beats"] == n
    assert [x.data for x in a[3].data] == [0, vals[1], vals[2]]
    assert a[3].counters["spad_rd_beats"] == 3 and a[3].counters["spad_wr_beats"] == 3


@pytest.mark.parametrize("gap", [1, 2, 3])
def test_read_after_write_gap(gap):
    """A sout issued in cycle t is seen by a sin issued in t+2 or later, not t+1."""
    cfg = TINY
    src = "spad rw = 7\nhin row | sout row\n" + "nop\n" * (gap - 1) + "sin row | hout row\nhalt\n"
    words = assemble(src, cfg).words()
    for m in (CoreModel(cfg), FastModel(cfg), FastModel(cfg, engine="cycle")):
        m.load(words)
        res = m.run(0, [0x12345678])
        assert [x.data for x in res.out] == [0 if gap == 1 else 0x12345678], type(m)


DEP_LOOP = """
        spad rw = 5
        loop i 20 {
            hin row | sout row
            nop
            rda [ar0] | rdrv mema @col=0 | sout row
            sin row | @col=1 | wra [ar1]++ = row | hout row
        }
        spad rd = 3
        loop j 10 {
            sin col | hout col | @row=0 | wrb [ar2]++ = col
        }
        sin row | hout row last
        halt
"""


@pytest.mark.parametrize("cfg", [TINY, ODD], ids=["tiny", "nr3_fp32"])
def test_fast_model_reads_back_in_loops(cfg):
    """Reads of words written earlier in the same run, inside loops: the fast model
    cuts its regions at them and equals the core model (beats, counters, state)."""
    rng = random.Random(3)
    words = assemble(DEP_LOOP, cfg).words()
    data = [rng.getrandbits(cfg.nr * cfg.fmt.width) for _ in range(20)]
    cm = CoreModel(cfg)
    cm.load(words)
    r0 = cm.run(0, data)
    for eng in ("auto", "cycle"):
        fm = FastModel(cfg, engine=eng)
        fm.load(words)
        r1 = fm.run(0, data)
        assert [(x.data, x.last) for x in r1.out] == [(x.data, x.last) for x in r0.out]
        assert r1.counters == r0.counters
        assert np.array_equal(spad_of(fm), spad_of(cm))
        for k, v in core_state(cm).items():
            assert np.array_equal(v, core_state(fm)[k]), k
        if eng == "auto":
            assert fm.stats["flow_cycles"] > 0
    assert r0.counters["spad_rd_beats"] == 31 and r0.counters["spad_wr_beats"] == 40


# ======================================================================================
# random differential programs with scratchpad slots
# ======================================================================================
SEED = int(os.environ["FAST_SEED"]) if os.environ.get("FAST_SEED") else random.randrange(1 << 30)
N_RANDOM = int(os.environ.get("SPAD_N", "60"))


@pytest.mark.parametrize("cfg", [TINY.replace(ucode_depth=128), ODD], ids=["tiny", "nr3_fp32"])
def test_random_programs_with_scratchpad(cfg):
    """Random valid programs (tests/fast_programs.py with spad=True) on the core model,
    the per-cycle engine and the loop-level engine: beats, counters, PE state and the
    scratchpad equal. Rerun with FAST_SEED=<seed>."""
    print(f"FAST_SEED={SEED}")
    used = 0
    for i in range(N_RANDOM):
        case = random_case(cfg, SEED + i, spad=True, max_issued=300)
        cm = CoreModel(cfg)
        preload(cm, case.state)
        cm.load(case.words)
        r0 = cm.run(0, case.data)
        used += r0.counters["spad_rd_beats"] + r0.counters["spad_wr_beats"]
        for eng in ("cycle", "auto"):
            fm = FastModel(cfg, engine=eng)
            preload(fm, case.state)
            fm.load(case.words)
            r1 = fm.run(0, case.data)
            tag = f"seed {case.seed} ({case.style}, {case.meta}), engine {eng}"
            assert [(x.data, x.last) for x in r1.out] == [(x.data, x.last) for x in r0.out], tag
            assert r1.counters == r0.counters, tag
            assert np.array_equal(spad_of(fm), spad_of(cm)), tag
            s0, s1 = core_state(cm), core_state(fm)
            for k in s0:
                assert np.array_equal(s0[k], s1[k]), f"{tag}: {k}"
    assert used > 0


def test_random_programs_unchanged_without_spad():
    """spad=False draws the same programs as before the scratchpad existed."""
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)
    a = random_case(cfg, 1234)
    b = random_case(cfg.replace(spad_kib=2), 1234)
    assert [w for w in a.data] == [w for w in b.data] and a.issued == b.issued
    assert "spad" not in b.state


# ======================================================================================
# RTL
# ======================================================================================
@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_rtl_scratchpad_session(sim):
    """RTL (tiny preset) under cocotb: the round trip host -> scratchpad -> PE memory ->
    scratchpad -> host, the read-after-write boundary cases and a loop reading back its
    own writes; every output beat and counter checked against the core model by the
    testbench, and the counters of every phase equal the fast model's."""
    cfg = TINY
    rng = random.Random(7)
    phases, local = roundtrip_phases(cfg, rng, n=4)
    raw, vals = raw_phase(cfg)
    dep = Phase(assemble(DEP_LOOP, cfg).words(), [rng.getrandbits(32) for _ in range(20)], "dep")
    phases += [raw, dep]
    rtl = run_session(cfg, phases, backend="rtl", sim=sim, name=f"spad-{sim}")
    fast = run_session(cfg, phases, backend="fast")
    for r, f in zip(rtl, fast):
        assert r.data == f.data and r.counters == f.counters
    assert np.array_equal(decode_unload(cfg, rtl[2].data, 4), local)
    assert [x.data for x in rtl[3].data] == [0, vals[1], vals[2]]


# ======================================================================================
# chip: the scratchpad persists across RUNs, on both engines
# ======================================================================================
def test_chip_scratchpad_persists_across_runs():
    from sim.chip_model import ChipModel

    cfg = PRESETS["chip-tiny"]
    # run 1: every core writes two beats of its own PE values; run 2: each core sends
    # them round the ring and writes what it receives next to them
    p1 = assemble("""
        spad wr = 4
        rda [ar0] | rdrv mema @col=0 | sout row
        rda [ar0 + 1] | cdrv mema @row=1 | sout col
        halt
    """, cfg).words()
    p2 = assemble("""
        spad rd = 4
        spad wr = 6
        sin row | rout row
        sin col | rout col
        nop
        rin row | sout row
        rin row | sout row
        halt
    """, cfg).words()
    out = {}
    for eng in ("cycle", "fast"):
        chip = ChipModel(cfg, eng)
        rng = np.random.default_rng(0)
        for k in range(cfg.cores):
            m = chip.cores[k]
            data = rng.integers(0, 1 << 14, size=(cfg.nr, cfg.nr, 2)).astype(cfg.fmt.np_uint)
            if isinstance(m, FastModel):
                m.set_memory("a", data)
            else:
                for r in range(cfg.nr):
                    for c in range(cfg.nr):
                        m.pes[r][c].mem_a[:2] = [int(v) for v in data[r, c]]
        for k in range(cfg.cores):
            chip.cores[k].load(p1)
        chip.run([0] * cfg.cores)
        for k in range(cfg.cores):
            chip.cores[k].load(p2)
        res = chip.run([0] * cfg.cores)
        out[eng] = ([spad_of(m)[4:8].copy() for m in chip.cores], res.counters)
    for k in range(cfg.cores):
        assert np.array_equal(out["cycle"][0][k], out["fast"][0][k])
        prev = out["cycle"][0][(k - 1) % cfg.cores]
        assert np.array_equal(out["cycle"][0][k][2:4], prev[0:2])
    assert out["cycle"][1] == out["fast"][1]
    assert out["cycle"][1]["spad_rd_beats"] == 2 * cfg.cores


# ======================================================================================
# power model
# ======================================================================================
@pytest.mark.parametrize("cfg", [TINY, PRESETS["S"], ArchConfig(nr=4, fmt="binary32", spad_kib=128)],
                         ids=["tiny", "S", "fp32"])
def test_power_spad_energy_and_area(cfg):
    cm = CoreModel(cfg)
    cm.load(assemble("spad rw = 1\nhin row | sout row\nsin row | hout row last\nhalt", cfg).words())
    res = cm.run(0, [3])
    ctr = res.counters
    assert ctr["spad_rd_beats"] == 1 and ctr["spad_wr_beats"] == 1
    rep = report_from_counters(cfg, ctr)
    per_beat = DEFAULT_TECH.spad_pj_per_16b * cfg.nr * cfg.fmt.width / 16     # 16 pJ per 2 bytes
    assert rep.energy_pj["spad"] == pytest.approx(2 * per_beat)
    area = area_of_core(cfg)
    assert area["spad"] == pytest.approx(1.948 * cfg.spad_kib / 512)
    assert rep.area_mm2["spad"] == pytest.approx(area["spad"])
    assert "spad" not in area_of_core(ArchConfig())


def test_isa_doc_scratchpad_examples_assemble():
    """Every ``asm-spad`` block of docs/isa.md assembles (tiny preset) and round-trips
    through the disassembler."""
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "isa.md"
    blocks = re.findall(r"```asm-spad\n(.*?)```", doc.read_text(), re.S)
    assert blocks
    for src in blocks:
        p = assemble(src, TINY)
        assert assemble(disassemble(p, TINY), TINY).words() == p.words()


def test_rtl_scratchpad_with_stalls(require_simulator):
    """Host stream pauses stall the core (whole-core freeze): the scratchpad's read data
    and write must freeze with the PEs, so every output beat still equals the core
    model's (cycles and stall counts differ; the counter tail is not compared)."""
    from sim.core_run import run_job

    require_simulator("icarus")
    cfg = TINY
    rng = random.Random(11)
    # back-to-back host beats (every stall lands next to a scratchpad access), reads of
    # words written two instructions earlier
    words = assemble("""
        spad rw = 5
        loop i 16 {
            hin row | sout row
            hin col | sout col
            sin row | hout row
        }
        loop j 16 {
            sin col | hout col
        }
        halt
    """, cfg).words()
    data = [rng.getrandbits(32) for _ in range(32)]
    ref = run_job(cfg, words, data, backend="model")
    got = run_job(cfg, words, data, backend="rtl", sim="icarus", name="spad-stalls", pause_in=0.5, pause_out=0.5,
                  seed=3)
    assert got.data == ref.data
    assert got.counters["stall_cycles"] > 0
    for k in ("spad_rd_beats", "spad_wr_beats", "instructions", "host_in_beats", "host_out_beats"):
        assert got.counters[k] == ref.counters[k], k
