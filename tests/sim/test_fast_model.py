"""Differential tests of the cycle-exact fast model (sim/fast_model.py).

* numeric building blocks: ``np.add.accumulate`` as used by the accumulation chains is
  bit-exact against sequential :func:`pe.fp_golden.add_bits` (all formats, subnormals,
  infinities, NaNs), and the vectorized arithmetic equals the golden / PE model's;
* the issue trace with structured-loop expansion equals the sequencer model's issue
  stream (random sequencer programs, chaos words included);
* random valid core programs (``tests/fast_programs.py``; loops, AGUs, jumps, host
  input/output, every micro-op field, random initial state), per configuration:
  the core model, the fast model's per-cycle engine alone (layer 1) and the fast model
  with the loop-level engine (layer 2; every other program also cut into regions at
  random cycles) must give the same output beats, every counter, and every PE's RF,
  SRAM, read ports, ARs and strides. ``FAST_N`` programs per configuration (default
  200), seeds ``FAST_SEED + i`` (``FAST_SEED`` random unless set; logged). A mismatch
  names the seed, the first differing beat / counter / address, and locates the cycle:
  the region whose loop-level result differs from the per-cycle engine's (verification
  mode), or the first cycle at which the per-cycle engine and the core model diverge;
* the MLP kernels and collectives of ``sw/kernels/`` / ``sw/collectives.py`` in whole
  sessions (load, kernels, unload): fast model vs core model beat for beat, and
  against the golden models, also at sizes the core model is too slow for;
* the fast model against the RTL directly (cocotb + Icarus): sessions of random and
  loop-heavy programs and a kernel, where the testbench compares every output beat
  and every phase's counters with the fast model's;
* ``sim.core_run`` backend ``fast`` and ``caterpillar run``.
"""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

from tests.simulators import SIM_PARAMS
from tests.fast_programs import STYLES, preload, random_case, random_value
from pe import fp_golden
from pe.pe_model import PEModel
from arch.config import PRESETS, ArchConfig
from sim.core_model import CoreModel
from sim.core_run import Phase, run_job, run_session, session_beats
from sim.fast_common import Arith
from sim.fast_flow import FlowRunner, RegionMismatch
from sim.fast_model import FastModel, core_state
from sim.fast_trace import issue_trace
from sim.seq_model import ProgramError, SequencerModel
from arch.isa import Instruction, SeqOp

#: nr2_fp16 and nr3_bf16_dist have a scratchpad, so their micro-op has the write predicate
CONFIGS = {
    "nr2_fp16": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, n_regs=12, n_ar=3, spad_kib=1),
    "nr4_fp32": ArchConfig(nr=4, fmt="binary32", mem_a_words=64, mem_b_words=64, ucode_depth=256, mul_latency=3,
                           add_latency=4),
    # the distribution stage alone: the loop-level engine runs, one cycle later
    "nr3_bf16_dist": ArchConfig(nr=3, fmt="bfloat16", mem_a_words=32, mem_b_words=64, ucode_depth=128,
                                dist_stage=True, spad_kib=1),
    # the FPGA timing (execute, bus, distribution, fetch and read stages): the per-cycle engine runs every cycle
    # two distribution levels (fan stage) with the execute and bus stages, no read stage
    "nr2_fp16_fan": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, exec_stage=True,
                               bus_stage=True, dist_stage=True, fan_stage=True, fetch_stage=True),
    "nr2_fp16_exec": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, n_regs=12, n_ar=3,
                                exec_stage=True, bus_stage=True, dist_stage=True, fetch_stage=True, read_stage=True, mul_latency=4, add_latency=5),
    # + the receive stage (three execute-queue entries, a third move-bypass point) and the
    # sequencer's address stage
    "nr3_fp16_rx": ArchConfig(nr=3, mem_a_words=64, mem_b_words=64, ucode_depth=128, exec_stage=True,
                              bus_stage=True, rx_stage=True, dist_stage=True, fetch_stage=True, addr_stage=True,
                              mul_latency=4, add_latency=5),
}
N_RANDOM = int(os.environ.get("FAST_N", "200"))
BASE_SEED = int(os.environ["FAST_SEED"]) if os.environ.get("FAST_SEED") else random.randrange(1 << 30)
CHUNK = 50


def max_issued(cfg):
    return 220 if cfg.nr >= 4 else 400


# ======================================================================================
# comparison and diagnosis
# ======================================================================================
def first_difference(res_a, st_a, res_b, st_b, names=("model", "fast")):
    """Text naming the first differing output beat, counter or state element (None: same)."""
    a_out = [(b.data, b.last) for b in res_a.out]
    b_out = [(b.data, b.last) for b in res_b.out]
    if a_out != b_out:
        k = next(i for i in range(max(len(a_out), len(b_out)))
                 if i >= len(a_out) or i >= len(b_out) or a_out[i] != b_out[i])
        ga = a_out[k] if k < len(a_out) else None
        gb = b_out[k] if k < len(b_out) else None
        return f"output beat {k}: {names[0]} {ga}, {names[1]} {gb} ({len(a_out)} vs {len(b_out)} beats)"
    if list(res_a.ring_out) != list(res_b.ring_out):
        return f"ring output beats: {names[0]} {len(res_a.ring_out)}, {names[1]} {len(res_b.ring_out)} differ"
    for name in res_a.counters:
        if res_a.counters[name] != res_b.counters.get(name):
            return f"counter {name}: {names[0]} {res_a.counters[name]}, {names[1]} {res_b.counters.get(name)}"
    return state_difference(st_a, st_b, names)


def state_difference(sa, sb, names=("model", "fast")):
    """First differing PE state element of two :func:`core_state` dicts (None: equal)."""
    for k in sa:
        if not np.array_equal(sa[k], sb[k]):
            idx = tuple(int(i) for i in np.argwhere(sa[k] != sb[k])[0])
            what = {"mem_a": "SRAM A [row, col, address]", "mem_b": "SRAM B [row, col, address]",
                    "rf": "RF [row, col, register]"}.get(k, k)
            return f"{what} {idx}: {names[0]} {sa[k][idx]:#x}, {names[1]} {sb[k][idx]:#x}"
    return None


def lockstep_first_cycle(cfg, case):
    """First cycle at which the per-cycle engine's state differs from the core model's
    (both stepped together over the same issued instructions); None if never."""
    from sim.fast_common import Counters

    cm = CoreModel(cfg)
    preload(cm, case.state)
    cm.load(case.words)
    fm = FastModel(cfg, engine="cycle")
    preload(fm, case.state)
    fm.load(case.words)
    trace = issue_trace(fm.seq, 0)
    allpcs, offs = fm._steps(trace)
    tm = fm._pc_tables(trace.pcs)[0]
    seq = SequencerModel(cfg)
    seq.load(case.words)
    stream = [None] + seq.run(0) + [None] * (cfg.fpu_latency + 1)
    hin_pos = 0
    ctr = Counters(cfg)
    out = []
    op = dict(hin=0, data=0, rseg=0, cseg=0)
    rseg_of, cseg_of = cm._field("rdrv_seg"), cm._field("cdrv_seg")
    nr, w = cfg.nr, cfg.fmt.width
    for t, iss in enumerate(stream):
        uop = 0 if iss is None else iss.uop
        hin = 0 if iss is None else iss.hin
        data = 0
        if hin:
            data = case.data[hin_pos]
            hin_pos += 1
        cm._cycle(uop, op["hin"], op["data"], op["rseg"], op["cseg"])
        op.update(hin=hin, data=data, rseg=rseg_of(uop), cseg=cseg_of(uop))
        lanes = np.array([(data >> (i * w)) & ((1 << w) - 1) for i in range(nr)], cfg.fmt.np_uint) if hin else None
        fm.cycle_engine.tick(fm.state, tm[allpcs[t]], offs[t], lanes, ctr, out)
        if state_difference(core_state(cm), core_state(fm)):
            return t
    return None


def check_case(cfg, case, cut_seed=None):
    """Run one random job on the three engines; return the fast model's stats."""
    cm = CoreModel(cfg)
    preload(cm, case.state)
    cm.load(case.words)
    r0 = cm.run(0, case.data, ring_in=case.ring)
    s0 = core_state(cm)
    f1 = FastModel(cfg, engine="cycle")
    preload(f1, case.state)
    f1.load(case.words)
    r1 = f1.run(0, case.data, ring_in=case.ring)
    d1 = first_difference(r0, s0, r1, core_state(f1), ("model", "per-cycle engine"))
    f2 = FastModel(cfg)
    if cut_seed is not None:
        rr = random.Random(cut_seed)
        f2._flow = FlowRunner(f2, cut=lambda x, y: [rr.randrange(x, y) for _ in range(rr.randint(0, 4))])
    preload(f2, case.state)
    f2.load(case.words)
    r2 = f2.run(0, case.data, ring_in=case.ring)
    d2 = first_difference(r0, s0, r2, core_state(f2), ("model", "fast model"))
    if d1 or d2:
        msg = [f"seed {case.seed} ({case.style}, {case.meta}, {case.issued} instructions, cuts {cut_seed}):"]
        if d1:
            msg.append(f"  per-cycle engine: {d1}; first diverging cycle {lockstep_first_cycle(cfg, case)}")
        if d2:
            msg.append(f"  fast model: {d2}")
            fv = FastModel(cfg, verify=True)
            preload(fv, case.state)
            fv.load(case.words)
            try:
                fv.run(0, case.data, ring_in=case.ring)
            except RegionMismatch as e:
                msg.append(f"  located: {e}")
        pytest.fail("\n".join(msg))
    return f2.stats


# ======================================================================================
# numeric building blocks
# ======================================================================================
def _rand_bits(fmt, rng, shape, kind):
    ut = fmt.np_uint
    if kind == 0:
        return rng.integers(0, 1 << fmt.width, size=shape, dtype=np.uint64).astype(ut)
    if kind == 1:   # tiny: subnormals and their neighbours, both signs
        x = rng.integers(0, 1 << (fmt.frac_bits + 2), size=shape, dtype=np.uint64).astype(ut)
        return (x | (rng.integers(0, 2, size=shape).astype(ut) << (fmt.width - 1))).astype(ut)
    if kind == 2:   # large: overflow to infinity
        x = fmt.from_float(rng.normal(size=shape) * 10.0 ** rng.integers(-2, 6, size=shape))
        return x
    return fmt.from_float(rng.normal(size=shape))


@pytest.mark.parametrize("fmt", ["binary16", "bfloat16", "binary32"])
def test_accumulate_is_sequential_rounding(fmt):
    """np.add.accumulate along an axis == sequential fp_golden.add_bits, bit for bit."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    f = ArchConfig(fmt=fmt).fmt
    A = Arith(f)
    with np.errstate(all="ignore"):
        for trial in range(120):
            shape = (int(rng.integers(1, 70)), int(rng.integers(1, 5)), int(rng.integers(1, 9)))
            x = _rand_bits(f, rng, shape, trial % 4)
            seq = x.copy()
            for k in range(1, shape[0]):
                seq[k] = fp_golden.add_bits(f, x[k], seq[k - 1])
            seq = fp_golden.canonicalize_nan(f, seq)
            assert np.array_equal(A.accumulate(x, axis=0), seq), f"trial {trial}, axis 0"
            xt = np.ascontiguousarray(np.moveaxis(x, 0, 1))
            assert np.array_equal(A.accumulate(xt, axis=1), np.moveaxis(seq, 0, 1)), f"trial {trial}, axis 1"
        # wide: many chains side by side (the step-by-step path), and ragged widths
        for trial, shape in enumerate([(40, 8, 16), (3, 64, 1), (90, 1, 256), (2, 1, 48)]):
            x = _rand_bits(f, rng, shape, trial % 4)
            seq = x.copy()
            for k in range(1, shape[0]):
                seq[k] = fp_golden.add_bits(f, x[k], seq[k - 1])
            assert np.array_equal(A.accumulate(x, axis=0), fp_golden.canonicalize_nan(f, seq)), shape
        # one long contiguous chain
        x = _rand_bits(f, rng, (3000,), 3)
        seq = x.copy()
        for k in range(1, len(x)):
            seq[k] = fp_golden.add_bits(f, x[k:k + 1], seq[k - 1:k])[0]
        assert np.array_equal(A.accumulate(x, axis=0), fp_golden.canonicalize_nan(f, seq))


@pytest.mark.parametrize("fmt", ["binary16", "bfloat16", "binary32"])
def test_arith_matches_golden_and_pe_model(fmt):
    rng = np.random.default_rng(7)
    f = ArchConfig(fmt=fmt).fmt
    A = Arith(f)
    pe = PEModel(ArchConfig(fmt=fmt, nr=1))
    with np.errstate(all="ignore"):
        for kind in range(4):
            a, b = _rand_bits(f, rng, (400,), kind), _rand_bits(f, rng, (400,), (kind + 1) % 4)
            assert np.array_equal(A.mul(a, b), fp_golden.mul_bits(f, a, b))
            assert np.array_equal(A.add(a, b), fp_golden.add_bits(f, a, b))
            assert [int(v) for v in A.relu(a)] == [pe.relu(int(v)) for v in a]
            assert [int(v) for v in A.mask(a, b)] == [pe.mask(int(v), int(m)) for v, m in zip(a, b)]


# ======================================================================================
# issue trace
# ======================================================================================
def _words_of(trace, seq, cfg):
    """Issued micro-op words rebuilt from a trace (pc, AGU values); the trace's bubbles
    after a JUMP (pc ``ucode_depth``, ``cfg.jump_delay`` of them) are left out."""
    from arch.isa import AGU_FIELDS, uop_offset_fields

    am = (1 << cfg.addr_bits) - 1
    offs = uop_offset_fields(cfg)
    out = []
    for pc, agu in zip(trace.pcs.tolist(), trace.agu.tolist()):
        if pc == seq.depth:
            continue
        d = seq._decode(pc)
        uop = d.uop
        for off, a in d.sels:
            v = (((uop >> off) & am) + agu[a]) & am
            uop = (uop & ~(am << off)) | (v << off)
        out.append((pc, uop))
    del AGU_FIELDS, offs
    return out


@pytest.mark.parametrize("chaos", [False, True], ids=["plain", "chaos"])
def test_issue_trace_equals_sequencer(chaos):
    """Structured-loop expansion gives the sequencer model's issue stream exactly."""
    from tests.benches.seq_programs import random_program

    base = random.randrange(1 << 30)
    print(f"seed base {base}")
    cfgs = [ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=64),
            ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, n_loops=3, n_agus=2),
            # the address stage: programs its model rejects are regenerated, and the plans
            # of the rest must agree with the model
            ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=64, fetch_stage=True, addr_stage=True)]
    expanded = 0
    for i in range(150):
        cfg = cfgs[i % 3]
        prog, org, issued = random_program(cfg, base + i, chaos=chaos, max_issued=600)
        seq = SequencerModel(cfg)
        seq.load(prog, org)
        tr = issue_trace(seq, org, 600)
        want = [(x.pc, x.uop) for x in issued]
        got = _words_of(tr, seq, cfg)
        assert got == want, f"seed {base + i}: first difference at instruction " \
                            f"{next(k for k, (a, b) in enumerate(zip(got + [None], want + [None])) if a != b)}"
        jumps = sum(x.op == SeqOp.JUMP for x in issued)
        assert int((tr.pcs == seq.depth).sum()) == cfg.jump_delay * jumps
        assert tr.last_pc == issued[-1].pc
        expanded += len(tr.spans)
    # kernel-shaped random core programs too (structured loops are expanded)
    for i in range(60):
        cfg = CONFIGS["nr2_fp16"]
        case = random_case(cfg, base + i, style="kernel")
        seq = SequencerModel(cfg)
        seq.load(case.words)
        ref = SequencerModel(cfg)
        ref.load(case.words)
        tr = issue_trace(seq, 0)
        assert _words_of(tr, seq, cfg) == [(x.pc, x.uop) for x in ref.run(0)], f"seed {base + i}"
        expanded += len(tr.spans)
    assert expanded > 50, "structured loop expansion was hardly exercised"


def test_issue_trace_addr_stage_undefined_loop_inside_a_plan():
    """With the address stage, a LOOP placement the model rejects inside a loop body the
    trace would expand (a level armed before the body, ending right after the body's
    LOOP of that level) raises ProgramError as stepping the model does; the same body
    with a defined LOOP is still expanded."""
    cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=64, fetch_stage=True, addr_stage=True)

    def I(op=SeqOp.NEXT, **ctl):  # noqa: E743
        return Instruction(None, op=op, **ctl)

    def trace(prog):
        seq = SequencerModel(cfg)
        seq.load(prog)
        return issue_trace(seq, 0)

    L = SeqOp.LOOP
    # level 1 armed (end 4, count 3), then a level-0 body [3, 5] whose LOOP of level 1 at
    # 3 has a longer body (rule 1: the armed end 4 lies inside it) or one trip (rule 3)
    rule1 = [I(L, lvl=1, target=4, imm=3), I(), I(L, lvl=0, target=6, imm=2), I(L, lvl=1, target=6, imm=2),
             I(), I(), I(), I(SeqOp.HALT)]
    rule3 = [I(L, lvl=1, target=4, imm=3), I(), I(L, lvl=0, target=5, imm=2), I(L, lvl=1, target=4, imm=1),
             I(), I(), I(SeqOp.HALT)]
    for prog, match in ((rule1, "address 3 .*armed loop of level 1 ends at the next address 4"),
                        (rule3, "address 3 .*re-arms its level with one trip .* still counts 3")):
        ref = SequencerModel(cfg)
        ref.load(prog)
        with pytest.raises(ProgramError, match=match):
            ref.run(0)
        with pytest.raises(ProgramError, match=match):
            trace(prog)
    # defined: two trips (rule 3 does not apply); the body is expanded and equals the model
    ok = list(rule3)
    ok[3] = I(L, lvl=1, target=4, imm=2)
    tr = trace(ok)
    ref = SequencerModel(cfg)
    ref.load(ok)
    assert tr.pcs.tolist() == [x.pc for x in ref.run(0)]
    assert tr.spans, "the level-0 body was not expanded"


# ======================================================================================
# random programs: core model vs per-cycle engine vs loop-level engine
# ======================================================================================
CHUNKS = [(name, c) for name in CONFIGS for c in range(-(-N_RANDOM // CHUNK))]
#: chunks of ``make test`` per configuration (the first 50 seeds); the others, the next
#: seeds of the same generator, in ``make test-all``
FAST_CHUNKS = 1


@pytest.mark.parametrize("cname,chunk", [pytest.param(n, c, id=f"{n}-{c}",
                                                      marks=[pytest.mark.slow] if c >= FAST_CHUNKS else [])
                                         for n, c in CHUNKS])
def test_random_programs(cname, chunk):
    cfg = CONFIGS[cname]
    lo = chunk * CHUNK
    hi = min(N_RANDOM, lo + CHUNK)
    print(f"FAST_SEED={BASE_SEED}: seeds {BASE_SEED + lo} .. {BASE_SEED + hi - 1} ({cname})")
    tot = {"flow_cycles": 0, "cycle_engine_cycles": 0}
    styles = dict.fromkeys(STYLES, 0)
    t0 = time.perf_counter()
    for i in range(lo, hi):
        seed = BASE_SEED + i
        # every third program also uses the ring slots (rin / rout)
        case = random_case(cfg, seed, max_issued=max_issued(cfg), ring=i % 3 == 1)
        styles[case.style] += 1
        stats = check_case(cfg, case, cut_seed=seed if i % 2 else None)
        for k in tot:
            tot[k] += stats.get(k, 0)
    share = tot["flow_cycles"] / max(1, sum(tot.values()))
    print(f"{hi - lo} programs {styles} in {time.perf_counter() - t0:.1f} s; cycles on the loop-level engine "
          f"{tot['flow_cycles']}, on the per-cycle engine {tot['cycle_engine_cycles']} ({share:.0%} loop-level)")
    if cfg.exec_stage:
        assert tot["flow_cycles"] == 0, "the loop-level engine ran with an execute stage"
    else:
        assert share > 0.25, "the loop-level engine ran too little of the random programs"


def test_random_bit_microops_anywhere():
    """Micro-ops with uniformly random bits (every field, also the combinations the
    assembler rejects), random control words (chaos: odd levels, op codes 6/7, LOOPs at
    odd places), programs at random microcode origins (pc wrap-around): the hardware
    defines all of them, and all engines must agree."""
    from tests.benches.seq_programs import random_program

    from tests.fast_programs import random_state

    print(f"FAST_SEED={BASE_SEED}")
    for i in range(120):
        # every fourth program with the execute stage, every other with the distribution stage,
        # every third with the fetch stage, half of those with the address stage too
        cfg = ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=64, exec_stage=i % 4 == 3,
                         dist_stage=i % 4 >= 2, fan_stage=i % 8 >= 6, fetch_stage=i % 3 == 1,
                         addr_stage=i % 6 == 4)
        seed = BASE_SEED + 3000 + i
        prog, org, issued = random_program(cfg, seed, chaos=i % 2 == 1, max_issued=300)
        rng = random.Random(seed)
        st = random_state(cfg, rng)
        data = [rng.getrandbits(32) for _ in range(sum(1 for x in issued if x.hin))]
        cm = CoreModel(cfg)
        preload(cm, st)
        cm.load(prog, org)
        r0 = cm.run(org, data)
        for engine in ("cycle", "auto"):
            fm = FastModel(cfg, engine=engine)
            preload(fm, st)
            fm.load(prog, org)
            d = first_difference(r0, core_state(cm), fm.run(org, data), core_state(fm))
            assert d is None, f"seed {seed} (origin {org}), engine {engine}: {d}"


def test_random_programs_in_sessions():
    """Several programs back to back on one model (state, pipelines and plan caches
    carried over, counters cleared per phase) through the host protocol."""
    cfg = CONFIGS["nr2_fp16"]
    print(f"FAST_SEED={BASE_SEED}")
    cases = [random_case(cfg, BASE_SEED + 1000 + i, style=("kernel", "mixed", "random")[i % 3]) for i in range(6)]
    phases = [Phase(c.words, c.data) for c in cases] + [Phase(cases[0].words, cases[0].data)]
    beats = session_beats(cfg, phases)
    cm, fm = CoreModel(cfg), FastModel(cfg)
    preload(cm, cases[0].state)
    preload(fm, cases[0].state)
    assert cm.process(beats) == fm.process(beats)
    d = state_difference(core_state(cm), core_state(fm))
    assert d is None, d


def test_verify_mode_and_long_loops():
    """Long loop nests (plans reused across outer iterations, regions split by size) in
    verification mode: every region re-run on the per-cycle engine."""
    cfg = CONFIGS["nr4_fp32"]
    for i in range(6):
        case = random_case(cfg, BASE_SEED + 2000 + i, style="kernel", max_issued=1500)
        f = FastModel(cfg, verify=True, max_region_elems=16 * 40)
        preload(f, case.state)
        f.load(case.words)
        f.run(0, case.data)
        cm = CoreModel(cfg)
        preload(cm, case.state)
        cm.load(case.words)
        f2 = FastModel(cfg, max_region_elems=16 * 40)
        preload(f2, case.state)
        f2.load(case.words)
        d = first_difference(cm.run(0, case.data), core_state(cm), f2.run(0, case.data), core_state(f2))
        assert d is None, f"seed {case.seed}: {d}"


# ======================================================================================
# kernels and collectives
# ======================================================================================
def _kernel_session(cfg, rng, shape=(9, 7, 5)):
    """Load phase, one phase per kernel / collective, unload phase; with the golden
    expectation of each unloaded region."""
    from sw.collectives import Region, emit_broadcast, emit_reduce, emit_transpose
    from sw import golden
    from sw.asm import Builder
    from sw.kernels import (Scalar, emit_axpy, emit_gemm, emit_gemv, emit_gemv_t_rank1, emit_rank1, emit_relu,
                            emit_relu_mask, emit_scale)
    from sw.layout import local_len, pack_matrix, pack_vector
    from sw.transfer import emit_load, emit_unload, load_beats_for

    fmt, nr = cfg.fmt, cfg.nr
    L = lambda k: local_len(k, nr)                          # noqa: E731

    def rnd(shape):
        return fmt.from_float(rng.uniform(-1, 1, size=shape)).astype(fmt.np_uint)

    m, n, bsz = shape
    nxt = {"a": 0, "b": 0}

    def reg_(bank, k):
        r = Region(bank, nxt[bank])
        nxt[bank] += k
        return r

    Wg, xg, x2g, ug, vg = rnd((m, n)), rnd((n,)), rnd((m,)), rnd((m,)), rnd((n,))
    Xg = rnd((n, bsz))
    W = reg_("a", L(m) * L(n))
    Y = reg_("a", L(m) * L(bsz))
    x, xc, y1 = reg_("b", L(n)), reg_("b", L(n) + 1), reg_("b", L(m))
    x2, y2 = reg_("b", L(m)), reg_("b", L(n))
    u, v, eta = reg_("b", L(m)), reg_("b", L(n)), reg_("b", 1)
    Xr = reg_("b", L(n) * L(bsz))
    e1, e2, e3 = reg_("b", L(m)), reg_("b", L(m)), reg_("b", L(m))
    red = reg_("b", L(n))
    XT, stage = reg_("a", L(n) * L(bsz)), reg_("b", L(n) * L(bsz))
    fd, fy = reg_("b", L(m) + 1), reg_("b", L(n))
    fdg = rnd((m,))
    al = fmt.from_float(np.array([-0.375]))[0]
    loads = [(W, pack_matrix(Wg, nr)), (x, pack_vector(xg, nr, "diag")), (x2, pack_vector(x2g, nr, "rows")),
             (u, pack_vector(ug, nr, "rows")), (v, pack_vector(vg, nr, "cols")),
             (eta, np.full((nr, nr, 1), al, fmt.np_uint)), (Xr, pack_matrix(Xg, nr)),
             (e1, pack_vector(rnd((m,)), nr, "diag")), (e2, pack_vector(rnd((m,)), nr, "diag")),
             (red, rnd((nr, nr, L(n)))), (fd, pack_vector(fdg, nr, "diag"))]
    kernels = [
        lambda b: emit_gemv(b, cfg, m, n, W, x, y1, x_layout="diag", x_copy=xc),
        lambda b: emit_gemv(b, cfg, m, n, W, x2, y2, trans=True, reduce="seq"),
        lambda b: emit_gemm(b, cfg, m, n, bsz, W, Xr, Y),
        lambda b: emit_gemm(b, cfg, m, n, bsz, W, Xr, Y, accumulate=True, alpha=Scalar("b", eta.base)),
        lambda b: emit_transpose(b, cfg, n, bsz, Xr, XT, stage),
        lambda b: emit_relu(b, cfg, L(m), e1, e3, layout="diag"),
        lambda b: emit_relu_mask(b, cfg, L(m), e1, e2, e2, layout="diag"),
        lambda b: emit_axpy(b, cfg, L(m), Scalar("b", eta.base), e1, e3),
        lambda b: emit_scale(b, cfg, L(m), Scalar("b", eta.base), e1),
        lambda b: emit_broadcast(b, cfg, "col", L(n), x, xc),
        lambda b: emit_reduce(b, cfg, "row", L(n), red, red),
        lambda b: emit_rank1(b, cfg, m, n, W, u, v, alpha=Scalar("b", eta.base)),
        lambda b: emit_gemv_t_rank1(b, cfg, m, n, W, fd, v, fy, alpha=Scalar("b", eta.base)),
    ]
    phases = []
    bl = Builder(cfg)
    data = []
    for r_, local in loads:
        emit_load(bl, cfg, r_.bank, r_.base, local.shape[2])
        data += load_beats_for(cfg, local)
    bl.halt()
    phases.append(Phase(bl.build().words(), data, "load"))
    for k in kernels:
        b = Builder(cfg)
        k(b)
        b.halt()
        phases.append(Phase(b.build().words(), [], "kernel"))
    bu = Builder(cfg)
    emit_unload(bu, cfg, y1.bank, y1.base, L(m), last=False)
    emit_unload(bu, cfg, W.bank, W.base, L(m) * L(n))
    bu.halt()
    phases.append(Phase(bu.build().words(), [], "unload"))
    want_y1 = golden.gemv(fmt, nr, Wg, xg)
    want_W = pack_matrix(golden.rank1_scaled_v(fmt, nr, golden.rank1(fmt, nr, Wg, ug, vg, al), fdg, vg, al), nr)
    return phases, (y1, L(m), want_y1, m), (W, want_W)


@pytest.mark.parametrize("nr,fmt", [(2, "binary16"), (3, "bfloat16"), (4, "binary32")])
def test_kernels_fast_vs_model(nr, fmt):
    """Every kernel and collective in one session: beat streams (results, done beats,
    every phase's counters) and final PE state equal; results equal the golden models."""
    from sw.layout import unpack_vector
    from sw.transfer import decode_unload

    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    cfg = ArchConfig(nr=nr, fmt=fmt, mem_a_words=1024, mem_b_words=1024)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        shape = tuple(int(v) for v in rng.integers(nr + 1, 7 * nr, size=2)) + (int(rng.integers(1, 3 * nr)),)
        print(f"shape m, n, batch = {shape}")
        phases, (y1, ny, want_y, m), (W, want_W) = _kernel_session(cfg, rng, shape)
        beats = session_beats(cfg, phases)
        cm, fm = CoreModel(cfg), FastModel(cfg)
        out_m = cm.process(beats)
        out_f = fm.process(beats)
        if out_m != out_f:
            k = next(i for i, (a, b) in enumerate(zip(out_m, out_f)) if a != b)
            pytest.fail(f"beat {k}: model {out_m[k]}, fast {out_f[k]}")
        d = state_difference(core_state(cm), core_state(fm))
        assert d is None, d
        # results of the unload phase (the last RUN's data beats)
        res = run_session(cfg, phases, backend="fast")
        data = res[-1].data
        yl = decode_unload(cfg, data[:nr * ny], ny)
        assert np.array_equal(unpack_vector(yl, m, "diag"), want_y)
        Wl = decode_unload(cfg, data[nr * ny:], want_W.shape[2])
        assert np.array_equal(Wl, want_W)
        assert fm.total_stats["flow_cycles"] > fm.total_stats["cycle_engine_cycles"]


def test_big_gemv_fast_vs_golden():
    """A 256 x 256 GEMV on a 4 x 4 core (the benchmark program), loaded directly into
    the PE memories: golden result, cycle count of the kernel's cost formula, all on
    the loop-level engine; the core model agrees on a 64 x 64 one."""
    from sw.collectives import Region
    from sw import golden
    from sw.asm import Builder
    from sw.kernels import emit_gemv, gemv_cost
    from sw.layout import pack_matrix, pack_vector, unpack_vector

    cfg = ArchConfig(nr=4)
    fmt = cfg.fmt
    rng = np.random.default_rng(3)
    for m, with_model in ((64, True), (256, False)):
        Wg = fmt.from_float(rng.uniform(-1, 1, (m, m)))
        xg = fmt.from_float(rng.uniform(-1, 1, m))
        rW, rx, ry = Region("a", 0), Region("b", 0), Region("b", 1024)
        b = Builder(cfg)
        emit_gemv(b, cfg, m, m, rW, rx, ry)
        b.halt()
        words = b.build().words()
        f = FastModel(cfg)
        f.load(words)
        f.set_memory("a", pack_matrix(Wg, 4))
        f.set_memory("b", pack_vector(xg, 4, "cols"))
        r = f.run(0)
        y = unpack_vector(f.memory("b")[:, :, 1024:1024 + m // 4], m, "diag")
        assert np.array_equal(y, golden.gemv(fmt, 4, Wg, xg))
        assert r.cycles == gemv_cost(cfg, m, m)["instructions"] + cfg.run_overhead
        assert f.stats["cycle_engine_cycles"] == 0
        if with_model:
            cm = CoreModel(cfg)
            cm.load(words)
            for i in range(4):
                for j in range(4):
                    cm.pes[i][j].mem_a = [int(v) for v in f.memory("a")[i, j]]
                    cm.pes[i][j].mem_b = [int(v) for v in pack_vector(xg, 4, "cols")[i, j]] + \
                        [0] * (cfg.mem_b_words - m // 4)
            f2 = FastModel(cfg)
            f2.load(words)
            f2.set_memory("a", pack_matrix(Wg, 4))
            f2.set_memory("b", pack_vector(xg, 4, "cols"))
            r2 = f2.run(0)
            d = first_difference(cm.run(0), core_state(cm), r2, core_state(f2))
            assert d is None, d


# ======================================================================================
# fast model vs RTL
# ======================================================================================
RTL_CONFIGS = {   # the configurations of tests/rtl/test_core.py (cached RTL builds)
    "nr2_fp16": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128),
    "nr4_fp32": ArchConfig(nr=4, fmt="binary32", mem_a_words=64, mem_b_words=64, ucode_depth=256),
    "nr2_fp32": ArchConfig(nr=2, fmt="binary32", mem_a_words=64, mem_b_words=64, ucode_depth=128),
    # test_core's two FPGA timings (one build each for both files): one distribution
    # level, and preset fpga (two levels, the receive, address and read stages)
    "nr2_fp16_fpga": ArchConfig(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128, exec_stage=True,
                                bus_stage=True, dist_stage=True, fetch_stage=True, mul_latency=4, add_latency=5),
    "nr2_fp16_fan": PRESETS["fpga"].replace(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128),
    # preset fpga at nr = 4, the board's array: segmented buses (segments of 2 PEs) with
    # the bus stage's per-receiver visibility registers, which nr = 2 cannot tell apart
    "nr4_fp16_fan": PRESETS["fpga"].replace(nr=4, mem_a_words=64, mem_b_words=64, ucode_depth=256),
}


def _rtl_phases(cfg, seed):
    from sw.collectives import Region
    from sw.asm import Builder
    from sw.kernels import emit_gemv
    from sw.transfer import emit_load, emit_unload, load_beats_for

    rng = random.Random(seed)
    nr = cfg.nr
    # fill both banks with random values over the host stream
    b = Builder(cfg)
    data = []
    n = 24 if nr >= 4 else 64
    for bank in ("a", "b"):
        emit_load(b, cfg, bank, 0, n)
        local = np.array([random_value(rng, cfg.fmt) for _ in range(nr * nr * n)], np.uint64).reshape(nr, nr, n)
        data += load_beats_for(cfg, local)
    b.halt()
    phases = [Phase(b.build().words(), data, "fill")]
    # each random phase is followed by a dump of every PE's register file (the random
    # programs' own hout beats rarely show what a PE received over a bus), the last one
    # by a dump of both SRAM banks' filled words as well
    for i, style in enumerate(("kernel", "kernel", "mixed", "random")):
        c = random_case(cfg, seed + i, style=style, max_issued=250 if nr >= 4 else 400)
        phases.append(Phase(c.words, c.data, f"random{i}"))
        d = Builder(cfg)
        for reg in range(cfg.n_regs):
            for k in range(nr):
                d.text(f"cdrv r{reg} @row={k} | hout col")
        if i == 3:
            for bank in ("a", "b"):
                emit_unload(d, cfg, bank, 0, n)
        d.halt()
        phases.append(Phase(d.build().words(), [], f"dump{i}"))
    bk = Builder(cfg)
    emit_gemv(bk, cfg, 2 * nr + 1, 3 * nr, Region("a", 0), Region("b", 0), Region("b", 40))
    bk.halt()
    phases.append(Phase(bk.build().words(), [], "gemv"))
    return phases


#: slow: nr4_fp16_fan, the longest (in make test, the RTL of its segmented buses at nr = 4
#: is checked against the fast model beat by beat by tests/rtl/test_core.py's
#: test_core_segmented_bus_transfers[nr4_fp16_fpga], and its pipeline stages by the
#: nr2_fp16_fan and nr2_fp16_fpga cases here); nr4_fp32 (in make test the binary32 core's
#: RTL runs the same programs at nr = 2, nr2_fp32, a quarter of the PEs, and nr = 4 runs
#: them in binary16, nr4_fp16 cases above and in tests/rtl/test_core.py)
FAST_VS_RTL = [pytest.param(c, marks=pytest.mark.slow) if c in ("nr4_fp16_fan", "nr4_fp32") else c
               for c in RTL_CONFIGS]


@pytest.mark.parametrize("sim", SIM_PARAMS[:1])
@pytest.mark.parametrize("cname", FAST_VS_RTL)
def test_fast_vs_rtl(cname, sim):
    """The RTL's output beats (results and every phase's counters) against the fast
    model's, checked beat by beat by the core testbench; the core model agrees too."""
    cfg = RTL_CONFIGS[cname]
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    phases = _rtl_phases(cfg, seed)
    res = run_session(cfg, phases, backend="rtl", sim=sim, reference="fast", name=f"fast-{cname}")
    fast = run_session(cfg, phases, backend="fast")
    for r, f in zip(res, fast):
        assert r.counters == f.counters and r.data == f.data
    model = run_session(cfg, phases, backend="model")
    for m_, f in zip(model, fast):
        assert m_.counters == f.counters and m_.data == f.data


# ======================================================================================
# backends and command line
# ======================================================================================
def test_core_run_fast_backend():
    cfg = CONFIGS["nr2_fp16"]
    case = random_case(cfg, BASE_SEED + 77, style="kernel")
    a = run_job(cfg, case.words, case.data, backend="model")
    b = run_job(cfg, case.words, case.data, backend="fast")
    assert (a.data, a.done, a.counters) == (b.data, b.done, b.counters)
    assert b.backend == "fast"
    with pytest.raises(ValueError, match="unknown backend"):
        run_job(cfg, case.words, backend="nope")


def test_cli_run(tmp_path, capsys):
    import json

    from cli.main import main

    src = tmp_path / "p.s"
    src.write_text("""
        stride ar0 = 1 | hin row | mov r1 = row
        loop i 6 {
            rda [ar0]++ | mac r0 += mema * r1
        }
        nop
        nop
        nop
        nop
        nop
        rdrv r0 @col=0 | hout row last | halt
    """)
    data = tmp_path / "d.txt"
    data.write_text("0x3c003c00\n")
    outs = {}
    for model in ("fast", "model"):
        out = tmp_path / f"out-{model}.txt"
        js = tmp_path / f"ctr-{model}.json"
        rc = main(["run", str(src), "--config", "tiny", "--model", model, "--data", str(data), "-o", str(out),
                   "--json", str(js)])
        assert rc == 0
        outs[model] = (out.read_text(), json.loads(js.read_text()))
        text = capsys.readouterr().out
        assert "cycles" in text
    assert outs["fast"][0] == outs["model"][0]
    assert outs["fast"][1]["counters"] == outs["model"][1]["counters"]
    # 14 instructions (setup, loop, 6 MACs, 5 nops, halt) + start latency + fpu_latency + 1
    assert outs["fast"][1]["counters"]["instructions"] == 14
    assert outs["fast"][1]["counters"]["cycles"] == 14 + 1 + 7 + 1
