"""Fast pure-Python tests of the PE reference model (pe.pe_model.PEModel).

Directed programs (tests/pe_programs.py) carry hand-computed expectations on bus outputs
and events at exact cycles; the GEMV loop is checked against numpy; a few properties
(two-phase bus sharing, determinism) are checked directly.
"""

from __future__ import annotations

import pytest

from pe.microop import ArOp, MicroOp, MvOp, PredMode, Src
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


@pytest.mark.parametrize("cfg_name", ["b16_nr4_r1c2", "bf16_nr3_lat"])
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
@pytest.mark.parametrize("mul,add", [(2, 3), (3, 4), (8, 8)])
def test_fma_result_cycle(mul, add):
    """RF[dst] changes exactly at the start of t + fpu_latency; events at t+1, t+1+mul,
    t+1+mul+add."""
    cfg = ArchConfig(nr=2, mem_a_words=16, mem_b_words=16, mul_latency=mul, add_latency=add)
    m = PEModel(cfg, 0, 1)
    two = int(cfg.fmt.from_float(2.0))
    m.step(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=3), 0)
    m.step(MicroOp(), two)          # operand stage of the MOV: row = 2
    assert m.rf[3] == two
    t = m.cycle
    evs = {}
    _, evs[t] = m.step(MicroOp(fpu_en=1, fpu_a=3, fpu_b=3, fpu_c=3, fpu_dst=4))
    seen = None
    for k in range(1, cfg.fpu_latency + 2):
        if m.rf[4] != 0 and seen is None:
            seen = m.cycle
        c = m.cycle
        evs[c] = m.step(MicroOp())[1]
    assert seen == t + cfg.fpu_latency == t + 2 + mul + add
    assert m.rf[4] == int(cfg.fmt.from_float(6.0))
    assert evs[t + 1].fma == 1 and evs[t + 1].rf_rd == 2
    assert evs[t + 1 + mul].rf_rd == 1                        # late read of c
    assert evs[t + 1 + mul + add].rf_wr == 1
    assert sum(e.fma for e in evs.values()) == 1


def test_sram_write_visible_two_cycles_after_issue():
    cfg = ArchConfig(nr=1, mem_a_words=16, mem_b_words=16)
    m = PEModel(cfg)
    one = cfg.fmt.one
    m.step(MicroOp(wa_en=1, wa_off=3, wa_src=Src.ONE))        # issue t
    assert m.mem_a[3] == 0
    m.step(MicroOp(ra_en=1, ra_off=3))                         # t+1: write lands at its end
    assert m.mem_a[3] == one and m.rd_a == 0                  # the read saw the old word
    m.step(MicroOp(ra_en=1, ra_off=3))
    assert m.rd_a == one


def test_move_readable_next_micro_op():
    cfg = ArchConfig(nr=1, mem_a_words=16, mem_b_words=16)
    m = PEModel(cfg)
    m.step(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ONE, mv_dst=0))   # t
    (ro, oe, _, _), _ = m.step(MicroOp(rdrv_en=1, rdrv_src=0))   # t+1: MOV writes at its end
    assert (ro, oe) == (0, 0)
    (ro, oe, _, _), _ = m.step(MicroOp())                        # operand stage of the driver
    assert (ro, oe) == (cfg.fmt.one, 1)


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


@pytest.mark.parametrize("cfg_name", ["b16_nr4_r1c2", "b32_nr2_r0c0", "bf16_nr3_lat"])
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
    # one FMA per cycle throughout the loop
    t0 = prog.meta["t0"]
    assert all(trace[t][1].fma for t in range(t0 + 2, t0 + 2 + L * J))


def test_gemv_utilization_report(capsys):
    cfg = ArchConfig(nr=4, mem_a_words=1024, mem_b_words=1024)
    prog = pp.gemv_program(cfg, 1, 2, L=cfg.acc_reuse_distance, J=64, seed=5)
    run_checked(cfg, 1, 2, prog)
    u = prog.meta["utilization"]
    with capsys.disabled():
        print(f"\nGEMV L={cfg.acc_reuse_distance} J=64: {prog.meta['fma_cycles']} FMAs in "
              f"{prog.meta['loop_cycles']} cycles incl. drain -> MAC utilization {u:.3f}")
    assert u == 256 / (256 + cfg.fpu_latency)
    assert u > 0.97


def test_gemv_needs_enough_accumulators():
    cfg = ArchConfig(nr=1, mem_a_words=256, mem_b_words=256)
    with pytest.raises(ValueError):
        pp.gemv_program(cfg, 0, 0, L=cfg.acc_reuse_distance - 1)
