"""Fast pure-Python tests of the PE reference model (pe.pe_model.PEModel).

Directed programs (tests/pe_programs.py) carry hand-computed expectations on bus outputs
and events at exact cycles; the GEMV loop is checked against numpy; a few properties
(two-phase bus sharing, determinism) are checked directly. Both PE timings run: the
reference timing and the execute stage (``ArchConfig.exec_stage``: the ``*_exec``
configurations, and the timing tests parametrized over it with the distances written out).
"""

from __future__ import annotations

import pytest

from pe.microop import ArOp, FmaWb, Gate, MicroOp, MvOp, PredMode, Src
from pe.pe_model import EVENT_FIELDS, PEEvents, PEModel
from rtl.config import ArchConfig

import pe_programs as pp

CONFIGS = {
    "b16_nr4_r1c2": (ArchConfig(nr=4, mem_a_words=256, mem_b_words=256), 1, 2),
    "b16_nr4_r3c0": (ArchConfig(nr=4, mem_a_words=256, mem_b_words=256), 3, 0),
    "b32_nr2_r0c0": (ArchConfig(fmt="binary32", nr=2, mem_a_words=256, mem_b_words=128), 0, 0),
    "bf16_nr3_lat": (ArchConfig(fmt="bfloat16", nr=3, n_regs=14, n_ar=3, mem_a_words=128,
                                mem_b_words=256, mul_latency=3, add_latency=5), 2, 1),
    "b16_nr1_nar1": (ArchConfig(nr=1, n_ar=1, mem_a_words=64, mem_b_words=64), 0, 0),
    # the execute stage (FPGA timing): with the FPGA preset's FP latencies, odd sizes with
    # the minimum latencies, a lone PE
    "b16_nr4_exec": (ArchConfig(nr=4, exec_stage=True, mul_latency=4, add_latency=5,
                                mem_a_words=256, mem_b_words=256), 2, 3),
    "bf16_nr3_exec": (ArchConfig(fmt="bfloat16", nr=3, n_regs=14, n_ar=3, exec_stage=True,
                                 mem_a_words=128, mem_b_words=256), 1, 2),
    "b16_nr1_exec": (ArchConfig(nr=1, n_ar=1, exec_stage=True, mem_a_words=64,
                                mem_b_words=64), 0, 0),
}

FIELDS = ("row_out", "row_oe", "col_out", "col_oe")


def run_checked(cfg, row, col, prog: pp.Program, model: PEModel | None = None):
    model = model or PEModel(cfg, row, col)
    trace = model.run(prog.uops, prog.row_ins, prog.col_ins)
    errors = []
    for cyc, name, want in prog.expect:
        drv, ev = trace[cyc]
        got = drv[FIELDS.index(name)] if name in FIELDS else getattr(ev, name)
        if got != want:
            errors.append(f"{prog.name}: cycle {cyc} {name}: expected {want:#x}, got {got:#x}")
    assert not errors, "\n".join(errors[:20])
    return model, trace


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("prog_name", pp.DIRECTED)
def test_directed(cfg_name, prog_name):
    cfg, row, col = CONFIGS[cfg_name]
    prog = pp.DIRECTED[prog_name](cfg, row, col)
    assert prog.expect, "directed programs carry expectations"
    run_checked(cfg, row, col, prog)


@pytest.mark.parametrize("cfg_name", ["b16_nr4_r1c2", "bf16_nr3_lat", "b16_nr4_exec",
                                      "bf16_nr3_exec"])
def test_directed_back_to_back(cfg_name):
    """Directed programs are self-contained: they pass when run one after the other."""
    cfg, row, col = CONFIGS[cfg_name]
    run_checked(cfg, row, col, pp.concat(pp.directed_programs(cfg, row, col)))


def test_event_fields_match_rtl_layout():
    pe_mod = pytest.importorskip("pe.pe")
    assert tuple((n, f.width) for n, f in pe_mod.EVENT_LAYOUT) == EVENT_FIELDS
    ev = PEEvents(fma=1, rf_rd=9, rf_wr=2, rf_conflict=1)
    assert PEEvents.unpack(ev.pack()) == ev
    assert pe_mod.EVENT_LAYOUT.size == sum(w for _, w in EVENT_FIELDS)


# -- timing ------------------------------------------------------------------------------
# Distances written out per timing (not taken from the config's derived properties, which
# are checked against them): a micro-op issued at t reads its sources at t+1 (operand
# stage) and executes (move, SRAM writes, multiplier entry) at t+1, or at t+2 with the
# execute stage.
EXEC = pytest.mark.parametrize("exec_stage", [False, True], ids=["noexec", "exec"])


def _tcfg(exec_stage, **kw):
    kw = {"nr": 1, "mem_a_words": 16, "mem_b_words": 16, **kw}
    return ArchConfig(exec_stage=exec_stage, **kw)


def _step(m: PEModel, evs: dict, uop, row: int = 0, col: int = 0):
    """One lone-PE step, its events recorded under the cycle in which it ran."""
    c = m.cycle
    drv, evs[c] = m.step(uop, row, col)
    return drv


def _nonzero_cycles(evs: dict, name: str) -> dict:
    return {c: getattr(e, name) for c, e in evs.items() if getattr(e, name)}


@EXEC
def test_derived_distances(exec_stage):
    cfg = _tcfg(exec_stage, mul_latency=4, add_latency=5)
    assert cfg.exec_delay == (1 if exec_stage else 0)
    assert cfg.mv_read_distance == (2 if exec_stage else 1)
    assert cfg.sram_read_distance == (3 if exec_stage else 2)
    assert cfg.fpu_latency == (12 if exec_stage else 11)
    assert cfg.acc_reuse_distance == 6


@EXEC
@pytest.mark.parametrize("mul,add", [(2, 3), (3, 4), (8, 8)])
def test_fma_result_cycle(mul, add, exec_stage):
    """RF[dst] changes exactly at the start of t + fpu_latency (t + 2 + mul + add, one more
    with the execute stage); RF reads of a, b at t+1, FMA at t+1+exec, late read of c at
    t+1+exec+mul, write-back at t+1+exec+mul+add."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage, nr=2, mul_latency=mul, add_latency=add)
    m = PEModel(cfg, 0, 1)
    two = int(cfg.fmt.from_float(2.0))
    m.step(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=3), 0)
    m.step(MicroOp(), two)          # operand stage of the MOV: row = 2
    for _ in range(x):
        assert m.rf[3] == 0         # the move is executed one cycle later
        m.step(MicroOp())
    assert m.rf[3] == two
    t = m.cycle
    evs = {}
    _step(m, evs, MicroOp(fpu_en=1, fpu_a=3, fpu_b=3, fpu_c=3, fpu_dst=4))
    seen = None
    for k in range(1, cfg.fpu_latency + 3):
        if m.rf[4] != 0 and seen is None:
            seen = m.cycle
        _step(m, evs, MicroOp())
    assert seen == t + cfg.fpu_latency == t + 2 + x + mul + add
    assert m.rf[4] == int(cfg.fmt.from_float(6.0))
    assert _nonzero_cycles(evs, "fma") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "rf_rd") == {t + 1: 2, t + 1 + x + mul: 1}   # late read of c
    assert _nonzero_cycles(evs, "rf_wr") == {t + 1 + x + mul + add: 1}


@EXEC
def test_fma_operands_read_at_operand_stage(exec_stage):
    """Every source, buses and a non-RF c included, is read in the operand stage t+1: the
    bus values of the execute stage t+2 (with exec_stage) are not used."""
    cfg = _tcfg(exec_stage, nr=2)
    m = PEModel(cfg, 0, 0)
    f = lambda v: int(cfg.fmt.from_float(v))  # noqa: E731
    m.step(MicroOp(fpu_en=1, fpu_a=Src.ROW, fpu_b=Src.COL, fpu_c=Src.ROW, fpu_dst=1,
                   mv_op=MvOp.MOV, mv_src=Src.COL, mv_dst=2,
                   wa_en=1, wa_off=3, wa_src=Src.ROW, wb_en=1, wb_off=4, wb_src=Src.COL))
    m.step(MicroOp(), f(2.0), f(3.0))           # operand stage
    m.step(MicroOp(), f(100.0), f(1000.0))      # execute stage with exec_stage
    for _ in range(cfg.fpu_latency):
        m.step(MicroOp(), f(-1.0), f(-1.0))
    assert m.rf[1] == f(8.0) and m.rf[2] == f(3.0)
    assert m.mem_a[3] == f(2.0) and m.mem_b[4] == f(3.0)


@EXEC
def test_sram_write_visibility(exec_stage):
    """An SRAM write (wa / wb) issued at t lands at the end of t+1 (t+2 with the execute
    stage): reads issued up to then see the old word, the read issued at t+2 (t+3) the new."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage)
    assert cfg.sram_read_distance == 2 + x
    m = PEModel(cfg)
    one = cfg.fmt.one
    t = m.cycle
    evs = {}
    _step(m, evs, MicroOp(wa_en=1, wa_off=3, wa_src=Src.ONE, wb_en=1, wb_off=5, wb_src=Src.ONE))
    assert m.mem_a[3] == 0 and m.mem_b[5] == 0
    for k in range(1, 2 + x):                   # reads issued at t+1 .. t+1+x: old word
        _step(m, evs, MicroOp(ra_en=1, ra_off=3, rb_en=1, rb_off=5))
        assert m.rd_a == 0 and m.rd_b == 0
        landed = k == 1 + x                     # the write lands at the end of t+1+x
        assert (m.mem_a[3], m.mem_b[5]) == ((one, one) if landed else (0, 0))
    _step(m, evs, MicroOp(ra_en=1, ra_off=3, rb_en=1, rb_off=5))   # issued at t+2+x
    assert m.rd_a == one and m.rd_b == one
    assert _nonzero_cycles(evs, "mem_a_wr") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "mem_b_wr") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "mem_a_rd") == {t + k: 1 for k in range(1, 3 + x)}


@EXEC
def test_move_result_visibility(exec_stage):
    """A move issued at t writes at the end of t+1 (t+2 with the execute stage): readable by
    the micro-op issued at t+1 (t+2), not by the one issued at t+1 with the execute stage."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage)
    assert cfg.mv_read_distance == 1 + x
    m = PEModel(cfg)
    two = int(cfg.fmt.from_float(2.0))
    m.step(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=0), 0)
    for _ in range(cfg.mv_read_distance + 1):
        m.step(MicroOp(), two)
    assert m.rf[0] == two
    t = m.cycle
    outs, evs = {}, {}
    uops = [MicroOp(mv_op=MvOp.RELU, mv_src=Src.ONE, mv_dst=0)] + \
        [MicroOp(rdrv_en=1, rdrv_src=0)] * 3 + [MicroOp()]
    for u in uops:
        c = m.cycle
        outs[c] = _step(m, evs, u)[:2]
    # the driver issued at t+k shows RF[0] of the start of t+k+1 at t+k+1
    assert outs[t + 1] == (0, 0)                                     # the RELU's operand stage
    for k in (1, 2, 3):
        want = cfg.fmt.one if k >= 1 + x else two
        assert outs[t + k + 1] == (want, 1), k
    assert _nonzero_cycles(evs, "mv") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "rf_wr") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "rf_rd") == {t + 2: 1, t + 3: 1, t + 4: 1}


@EXEC
def test_event_cycles(exec_stage):
    """One micro-op using every unit: each event at its stage and nowhere else."""
    x = int(exec_stage)
    mul, add = 3, 4
    cfg = _tcfg(exec_stage, nr=2, mul_latency=mul, add_latency=add)
    m = PEModel(cfg, 1, 1)
    for r in range(4):
        m.step(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=r))
    for _ in range(cfg.fpu_latency):
        m.step(MicroOp())
    t = m.cycle
    evs = {}
    _step(m, evs, MicroOp(fpu_en=1, fpu_a=0, fpu_b=1, fpu_c=2, fpu_dst=3,
                          mv_op=MvOp.MASK, mv_src=0, mv_msk=1, mv_dst=5,
                          rdrv_en=1, rdrv_k=1, rdrv_src=3, cdrv_en=1, cdrv_k=1, cdrv_src=2,
                          wa_en=1, wa_src=0, wb_en=1, wb_src=1,
                          ra_en=1, rb_en=1, rb_gate=Gate.CDRV))
    for _ in range(cfg.fpu_latency + 2):
        _step(m, evs, MicroOp())
    L = cfg.fpu_latency
    assert L == 2 + x + mul + add
    want = {
        "mem_a_rd": {t: 1}, "mem_b_rd": {t: 1},                      # issue
        "row_drv": {t + 1: 1}, "col_drv": {t + 1: 1},                # operand stage
        "rf_rd": {t + 1: 8, t + 1 + x + mul: 1},                     # operand stage, late c
        "fma": {t + 1 + x: 1}, "mv": {t + 1 + x: 1},                 # execute stage
        "mem_a_wr": {t + 1 + x: 1}, "mem_b_wr": {t + 1 + x: 1},
        "rf_wr": {t + 1 + x: 1, t + L - 1: 1},                       # move, FMA write-back
        "rf_conflict": {}, "mem_conflict": {},
    }
    assert {n: _nonzero_cycles(evs, n) for n, _ in EVENT_FIELDS} == want


@EXEC
@pytest.mark.parametrize("bank", ["a", "b"])
def test_mem_conflict_at_execute_stage(exec_stage, bank):
    """An FMA SRAM write-back (end of t + fpu_latency - 1) displaces the operand write of
    the same bank executed in that cycle: issued at t + fpu_latency - 2 (t + fpu_latency - 3
    with the execute stage)."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage)
    L = cfg.fpu_latency
    one, two = cfg.fmt.one, int(cfg.fmt.from_float(2.0))
    wbk = FmaWb.MEMA if bank == "a" else FmaWb.MEMB
    for d in (-1, 0, 1):              # the operand write executes d cycles after the write-back
        m = PEModel(cfg)
        t = m.cycle
        prog = {0: MicroOp(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_wb=wbk,
                           ra_off=2, rb_off=2)}
        tw = L - 2 - x + d
        prog[tw] = (MicroOp(wa_en=1, wa_off=7, wa_src=Src.ONE) if bank == "a"
                    else MicroOp(wb_en=1, wb_off=7, wb_src=Src.ONE))
        evs = {t + k: m.step(prog.get(k, MicroOp()))[1] for k in range(L + 4)}
        mem = m.mem_a if bank == "a" else m.mem_b
        wr = f"mem_{bank}_wr"
        assert mem[2] == two
        if d == 0:
            assert _nonzero_cycles(evs, "mem_conflict") == {t + L - 1: 1}
            assert _nonzero_cycles(evs, wr) == {t + L - 1: 1}
            assert mem[7] == 0                  # the displaced write is lost
        else:
            assert _nonzero_cycles(evs, "mem_conflict") == {}
            assert _nonzero_cycles(evs, wr) == {t + L - 1: 1, t + L - 1 + d: 1}
            assert mem[7] == one


@EXEC
def test_rf_conflict_at_execute_stage(exec_stage):
    """A move executed in the cycle of an FMA write-back to the same register (issued at
    t + fpu_latency - 2, or - 3 with the execute stage) loses; rf_conflict then."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage)
    L = cfg.fpu_latency
    for d in (-1, 0, 1):
        m = PEModel(cfg)
        prog = {0: MicroOp(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_dst=4),
                L - 2 - x + d: MicroOp(mv_op=MvOp.MOV, mv_src=Src.NZERO, mv_dst=4)}
        evs = {k: m.step(prog.get(k, MicroOp()))[1] for k in range(L + 4)}
        assert _nonzero_cycles(evs, "mv") == {L - 1 + d: 1}
        if d == 0:
            assert _nonzero_cycles(evs, "rf_conflict") == {L - 1: 1}
            assert _nonzero_cycles(evs, "rf_wr") == {L - 1: 2}
        else:
            assert _nonzero_cycles(evs, "rf_conflict") == {}
        assert m.rf[4] == (cfg.fmt.neg_zero if d > 0 else int(cfg.fmt.from_float(2.0)))


# -- AR rules -----------------------------------------------------------------------------
def test_ar_update_priority_direct():
    cfg = ArchConfig(nr=1, n_ar=4, mem_a_words=256, mem_b_words=256)
    m = PEModel(cfg)
    amod = 1 << cfg.addr_bits
    for op in [MicroOp(ar_op=ArOp.SET, ar_idx=2, ar_imm=10),
               MicroOp(ar_op=ArOp.STRIDE, ar_idx=2, ar_imm=4, ra_inc=1, ra_ar=2)]:
        m.step(op)
    assert m.ars()[2] == 10 and m.strides()[2] == 4              # stride applies next micro-op
    m.step(MicroOp(ar_op=ArOp.ADD, ar_idx=2, ar_imm=3, ra_inc=1, ra_ar=2, wb_inc=1, wb_ar=2))
    assert m.ars()[2] == 17                                      # ADD + one stride
    m.step(MicroOp(ar_op=ArOp.SET, ar_idx=2, ar_imm=1, rb_inc=1, rb_ar=2))
    assert m.ars()[2] == 1                                       # SET wins
    m.step(MicroOp(ar_op=ArOp.ADD, ar_idx=2, ar_imm=(-3) % amod))
    assert m.ars()[2] == amod - 2                                # modulo 2**addr_bits
    m.step(MicroOp(ra_inc=1, ra_ar=2, pred_mode=PredMode.ROW, pred_k=1))
    assert m.ars()[2] == amod - 2                                # predicate false (nr=1, row 0)
    m.step(MicroOp(ar_op=ArOp.STRIDE, ar_idx=1, ar_imm=5, ra_inc=1, ra_ar=2))
    assert m.ars() == [0, 0, 2, 0] and m.strides() == [0, 5, 4, 0]


def test_invalid_ar_index_is_ignored():
    cfg = ArchConfig(nr=1, n_ar=2, mem_a_words=16, mem_b_words=16)
    m = PEModel(cfg)
    m.step(MicroOp(ar_op=ArOp.SET, ar_idx=3, ar_imm=7, ra_inc=1, ra_ar=3))
    m.step(MicroOp(ar_op=ArOp.STRIDE, ar_idx=2, ar_imm=7))
    assert m.ars() == [0, 0] and m.strides() == [0, 0]


# -- move unit ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["binary16", "bfloat16", "binary32"])
def test_relu_mask_values(fmt):
    m = PEModel(ArchConfig(fmt=fmt, nr=1, mem_a_words=16, mem_b_words=16))
    f = m.fmt
    pos, neg = int(f.from_float(1.5)), int(f.from_float(-1.5))
    assert m.relu(pos) == pos and m.relu(neg) == 0
    assert m.relu(0) == 0 and m.relu(f.neg_zero) == 0            # relu(-0) = +0
    assert m.relu(f.inf) == f.inf and m.relu(f.sign_mask | f.inf) == 0
    assert m.relu(f.inf | 1) == f.qnan and m.relu(f.sign_mask | f.qnan) == f.qnan
    assert m.relu(1) == 1 and m.relu(f.sign_mask | 1) == 0       # subnormals
    assert m.mask(neg, pos) == neg and m.mask(neg, neg) == 0
    assert m.mask(neg, 0) == 0 and m.mask(neg, f.neg_zero) == 0
    assert m.mask(neg, f.qnan) == 0                              # NaN m selects +0
    assert m.mask(f.inf | 1, pos) == f.qnan                      # kept NaN canonical
    assert m.mask(f.inf | 1, neg) == 0
    assert m.mask(f.neg_zero, 1) == f.neg_zero                   # -0 kept as -0


# -- two-phase step: PEs sharing buses ----------------------------------------------------------
def test_two_phase_core_of_models():
    """A 2x2 core of models: PE (r, k) drives row r, every PE reads it the same cycle."""
    cfg = ArchConfig(nr=2, mem_a_words=16, mem_b_words=16)
    pes = {(r, c): PEModel(cfg, r, c) for r in range(2) for c in range(2)}
    vals = {(r, c): int(cfg.fmt.from_float(1 + 2 * r + c)) for r in range(2) for c in range(2)}
    for (r, c), p in pes.items():    # preload r0 = 1 + 2r + c through a lone step
        p.clock(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=0), 0, 0)
        p.clock(MicroOp(), vals[r, c], 0)
    prog = [MicroOp(rdrv_en=1, rdrv_k=1, rdrv_src=0, cdrv_en=1, cdrv_diag=1, cdrv_k=0, cdrv_src=0,
                    mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=1),
            MicroOp(mv_op=MvOp.MOV, mv_src=Src.COL, mv_dst=2),   # nobody drives col: 0
            MicroOp()]
    col_seen = {}
    for cyc, u in enumerate(prog):
        drives = {rc: p.drive() for rc, p in pes.items()}
        row_bus = {r: next((d[0] for (rr, _), d in drives.items() if rr == r and d[1]), 0)
                   for r in range(2)}
        col_bus = {c: next((d[2] for (_, cc), d in drives.items() if cc == c and d[3]), 0)
                   for c in range(2)}
        if cyc == 1:
            col_seen = dict(col_bus)
        for (r, c), p in pes.items():
            p.clock(u, row_bus[r], col_bus[c])
    for (r, c), p in pes.items():
        assert p.rf[1] == vals[r, 1]                 # the row driver is the PE in column 1
    # column drivers: the diagonal PE of each column ((c - r) mod 2 == 0)
    assert col_seen == {0: vals[0, 0], 1: vals[1, 1]}


# -- random programs and GEMV --------------------------------------------------------------------
@pytest.mark.parametrize("cfg_name", list(CONFIGS))
def test_random_programs_run_deterministically(cfg_name):
    cfg, row, col = CONFIGS[cfg_name]
    seed = 1234
    print(f"seed={seed}")
    p1 = pp.random_program(cfg, row, col, seed, n_cycles=200)
    p2 = pp.random_program(cfg, row, col, seed, n_cycles=200)
    assert p1.uops == p2.uops and p1.row_ins == p2.row_ins
    t1 = PEModel(cfg, row, col).run(p1.uops, p1.row_ins, p1.col_ins)
    t2 = PEModel(cfg, row, col).run(p2.uops, p2.row_ins, p2.col_ins)
    assert t1 == t2
    # the program exercises the whole ISA: every event fires at least once
    fired = {name for _, ev in t1 for name, v in ev._asdict().items() if v}
    want = {n for n, _ in EVENT_FIELDS} - {"rf_conflict"}
    assert want <= fired, want - fired


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
def test_state_dump_shows_state(cfg_name):
    """The black-box dump program drives exactly the model's state."""
    cfg, row, col = CONFIGS[cfg_name]
    prog = pp.random_program(cfg, row, col, 7, n_cycles=150)
    m = PEModel(cfg, row, col)
    m.run(prog.uops, prog.row_ins, prog.col_ins)
    rf, ma, mb, ars, strides = m.regs(), m.memory("a"), m.memory("b"), m.ars(), m.strides()
    dump = pp.state_dump(cfg, row, col, ars)
    tr = m.run(dump.uops, dump.row_ins, dump.col_ins)
    rows = [d[0] for d, _ in tr if d[1]]
    cols = [d[2] for d, _ in tr if d[3]]
    n = cfg.n_regs
    assert rows[:n] == rf
    da, db = cfg.mem_a_words, cfg.mem_b_words
    assert rows[n:n + da] == list(ma)
    assert cols[:db] == list(mb)
    probe_r = rows[n + da:]
    probe_c = cols[db:]
    for i in range(cfg.n_ar):
        assert probe_r[2 * i] == ars[i] % da
        assert probe_r[2 * i + 1] == (ars[i] + strides[i]) % (1 << cfg.addr_bits) % da
        assert probe_c[2 * i] == ars[i] % db


@pytest.mark.parametrize("cfg_name", ["b16_nr4_r1c2", "b32_nr2_r0c0", "bf16_nr3_lat",
                                      "b16_nr4_exec", "bf16_nr3_exec"])
@pytest.mark.parametrize("L_extra", [0, 2])
def test_gemv_matches_numpy(cfg_name, L_extra):
    cfg, row, col = CONFIGS[cfg_name]
    L = cfg.acc_reuse_distance + L_extra
    J = min(16, cfg.mem_a_words // L)
    prog = pp.gemv_program(cfg, row, col, L=L, J=J, seed=3)
    model, trace = run_checked(cfg, row, col, prog)
    assert model.regs()[:L] == [int(v) for v in prog.meta["golden"]]
    fmas = sum(ev.fma for _, ev in trace)
    assert fmas == L * J == prog.meta["fma_cycles"]
    # one FMA per cycle throughout the loop: the first MAC issued mv_read_distance after
    # the first loop micro-op (the load of x[0]), each executed exec_delay after its
    # operand stage
    t0, t_fma0 = prog.meta["t0"], prog.meta["t_fma0"]
    assert t_fma0 == t0 + cfg.mv_read_distance
    first = t_fma0 + 1 + cfg.exec_delay
    assert [t for t, (_, ev) in enumerate(trace) if ev.fma] == list(range(first, first + L * J))


@pytest.mark.parametrize("exec_stage", [False, True], ids=["noexec", "exec"])
def test_gemv_utilization_report(capsys, exec_stage):
    cfg = ArchConfig(nr=4, mem_a_words=1024, mem_b_words=1024, exec_stage=exec_stage)
    prog = pp.gemv_program(cfg, 1, 2, L=cfg.acc_reuse_distance, J=64, seed=5)
    run_checked(cfg, 1, 2, prog)
    u = prog.meta["utilization"]
    with capsys.disabled():
        print(f"\nGEMV L={cfg.acc_reuse_distance} J=64 exec_stage={exec_stage}: "
              f"{prog.meta['fma_cycles']} FMAs in {prog.meta['loop_cycles']} cycles incl. "
              f"drain -> MAC utilization {u:.3f}")
    # the loop: the load of x[0], mv_read_distance - 1 NOPs, 256 MACs, the drain
    assert u == 256 / (256 + cfg.fpu_latency + cfg.mv_read_distance - 1)
    assert u > (0.96 if exec_stage else 0.97)


def test_gemv_needs_two_ars():
    cfg = ArchConfig(nr=1, n_ar=1, mem_a_words=256, mem_b_words=256)
    with pytest.raises(ValueError):
        pp.gemv_program(cfg, 0, 0)


def test_gemv_needs_enough_accumulators():
    cfg = ArchConfig(nr=1, mem_a_words=256, mem_b_words=256)
    with pytest.raises(ValueError):
        pp.gemv_program(cfg, 0, 0, L=cfg.acc_reuse_distance - 1)
