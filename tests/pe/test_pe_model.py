"""Fast pure-Python tests of the PE reference model (pe.pe_model.PEModel).

Directed programs (tests/benches/pe_programs.py) carry hand-computed expectations on bus outputs
and events at exact cycles; the GEMV loop is checked against numpy; a few properties
(two-phase bus sharing, determinism) are checked directly. Both PE timings run: the
reference timing and the execute stage (``ArchConfig.exec_stage``: the ``*_exec``
configurations, and the timing tests parametrized over it with the distances written out).
"""

from __future__ import annotations

import pytest

from arch.microop import ArOp, FmaWb, Gate, MicroOp, MvOp, PredMode, Src
from arch.counters import EVENT_FIELDS
from pe.pe_model import PEEvents, PEModel
from arch.config import ArchConfig

from tests.benches import pe_programs as pp

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
    # + the bus stage, and with the minimum latencies
    "b16_nr4_bus": (ArchConfig(nr=4, exec_stage=True, bus_stage=True, mul_latency=4, add_latency=5,
                               mem_a_words=256, mem_b_words=256), 3, 1),
    "bf16_nr3_bus": (ArchConfig(fmt="bfloat16", nr=3, n_regs=14, n_ar=3, exec_stage=True, bus_stage=True,
                                mem_a_words=128, mem_b_words=256), 0, 2),
    # + the receive stage (preset fpga's PE timing; the read stage changes no model timing)
    "b16_nr4_rx": (ArchConfig(nr=4, exec_stage=True, bus_stage=True, rx_stage=True, mul_latency=4,
                              add_latency=5, mem_a_words=256, mem_b_words=256), 2, 1),
    "bf16_nr3_rx": (ArchConfig(fmt="bfloat16", nr=3, n_regs=14, n_ar=3, exec_stage=True, bus_stage=True,
                               rx_stage=True, mem_a_words=128, mem_b_words=256), 1, 0),
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
                                      "bf16_nr3_exec", "b16_nr4_rx"])
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
# execute stage. With the execute stage two bypasses keep the default read distances: an
# operand-stage RF read of the register the move unit writes in that cycle gets the
# move's result (the FMA's in a conflict), and an SRAM read issued in the cycle an
# operand-stage write lands on its address gets the written word. FMA results (RF or
# SRAM write-back), a displaced SRAM write and the late read of an RF `c` are not
# bypassed: the FMA distances are fpu_latency - 1 (RF) and fpu_latency (SRAM) with either
# timing, fpu_latency being one larger with the stage.
# exec_stage 0: default timing, 1: execute stage, 2: execute and bus stages, 3: execute,
# bus and receive stages (int(exec_stage) is then cfg.exec_delay)
EXEC = pytest.mark.parametrize("exec_stage", [0, 1, 2, 3], ids=["noexec", "exec", "bus", "rx"])


def _tcfg(exec_stage, **kw):
    kw = {"nr": 1, "mem_a_words": 16, "mem_b_words": 16, **kw}
    return ArchConfig(exec_stage=bool(exec_stage), bus_stage=exec_stage >= 2, rx_stage=exec_stage == 3, **kw)


def _step(m: PEModel, evs: dict, uop, row: int = 0, col: int = 0):
    """One lone-PE step, its events recorded under the cycle in which it ran."""
    c = m.cycle
    drv, evs[c] = m.step(uop, row, col)
    return drv


def _nonzero_cycles(evs: dict, name: str) -> dict:
    return {c: getattr(e, name) for c, e in evs.items() if getattr(e, name)}


def _fv(cfg, x: float) -> int:
    return int(cfg.fmt.from_float(x))


def _preload_reg(m: PEModel, reg: int, value: int):
    """RF[reg] = value through a ROW move, then a drained pipeline."""
    m.step(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=reg))
    m.step(MicroOp(), value)
    for _ in range(m.cfg.fpu_latency):
        m.step(MicroOp())
    assert m.rf[reg] == value


@EXEC
def test_derived_distances(exec_stage):
    x = int(exec_stage)
    cfg = _tcfg(exec_stage, mul_latency=4, add_latency=5)
    assert cfg.exec_delay == x
    assert cfg.mv_read_distance == 1                 # both timings (the move bypass)
    # the SRAM bypass: 2 but with the receive stage (the bypass keeps its two points)
    assert cfg.sram_read_distance == (3 if x == 3 else 2)
    assert cfg.fpu_latency == 11 + x
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
    two = _fv(cfg, 2.0)
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
    assert m.rf[4] == _fv(cfg, 6.0)
    assert _nonzero_cycles(evs, "fma") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "rf_rd") == {t + 1: 2, t + 1 + x + mul: 1}   # late read of c
    assert _nonzero_cycles(evs, "rf_wr") == {t + 1 + x + mul + add: 1}


# every kind of operand-stage RF read of register `r`: move source and mask, FMA a and b
# (into r6; c = -0 keeps the product), SRAM write sources (A[1], B[1]), both drivers
def _read_all(r: int, **kw) -> MicroOp:
    return MicroOp(mv_op=MvOp.MASK, mv_src=r, mv_msk=r, mv_dst=5,
                   fpu_en=1, fpu_a=r, fpu_b=Src.ONE, fpu_c=Src.NZERO, fpu_dst=6,
                   wa_en=1, wa_off=1, wa_src=r, wb_en=1, wb_off=1, wb_src=r,
                   rdrv_en=1, rdrv_k=0, rdrv_src=r, cdrv_en=1, cdrv_k=0, cdrv_src=r, **kw)


def _check_read_all(m: PEModel, drv, want: int, want_drv: int | None = None):
    """What the `_read_all` micro-op read (``drv``: the drive of its operand stage; the
    pipeline drained since): ``want`` everywhere (positive, so MASK keeps it); the
    drivers ``want_drv`` if given."""
    want_drv = want if want_drv is None else want_drv
    assert drv == (want_drv, 1, want_drv, 1)
    assert (m.rf[5], m.rf[6], m.mem_a[1], m.mem_b[1]) == (want,) * 4


@EXEC
@pytest.mark.parametrize("mul,add", [(2, 3), (4, 5)])
def test_fma_rf_result_visibility(exec_stage, mul, add):
    """An FMA issued at t writes the RF at the end of t + fpu_latency - 1 (t + 1 + exec +
    mul + add): every RF read of the micro-op issued at t + fpu_latency - 1 sees it, those
    of the micro-op issued one cycle earlier, whose operand stage is the write cycle, the
    old value: with the execute stage FMA results are not bypassed either."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage, mul_latency=mul, add_latency=add)
    L = cfg.fpu_latency
    first = L - 1
    assert first == 1 + x + mul + add
    old, new = _fv(cfg, 1.5), _fv(cfg, 6.0)
    for k in (first - 1, first, first + 1):
        m = PEModel(cfg)
        _preload_reg(m, 4, old)
        t = m.cycle
        prog = {t: MicroOp(fpu_en=1, fpu_a=Src.ROW, fpu_b=Src.COL, fpu_c=Src.ZERO, fpu_dst=4),
                t + k: _read_all(4)}
        evs, drvs, rf4 = {}, {}, {}
        for c in range(t, t + k + L + 3):
            rf4[c] = m.rf[4]
            bus = (_fv(cfg, 2.0), _fv(cfg, 3.0)) if c == t + 1 else (0, 0)
            drvs[c] = _step(m, evs, prog.get(c, MicroOp()), *bus)
        # the write-back (and the MASK's move when it executes in the same cycle)
        assert evs[t + L - 1].rf_wr == 1 + (k + 1 + x == L - 1)
        want = new if k >= first else old
        _check_read_all(m, drvs[t + k + 1], want)
        assert rf4[t + k + 1] == want        # the RF at the start of its operand stage


@EXEC
@pytest.mark.parametrize("mul,add", [(2, 3), (4, 5)])
@pytest.mark.parametrize("bank", ["a", "b"])
def test_fma_sram_writeback_visibility(exec_stage, mul, add, bank):
    """An FMA write-back into SRAM lands at the end of t + fpu_latency - 1 (t + 1 + exec +
    mul + add, with the RF write-back's mem_*_wr event): the reads issued at t +
    fpu_latency and later see it; the read issued in the write cycle gets the old word
    without the execute stage, the written one with it (the SRAM bypass)."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage, mul_latency=mul, add_latency=add)
    L = cfg.fpu_latency
    first = L - bool(exec_stage)
    assert L == 2 + x + mul + add
    old, new = _fv(cfg, -4.0), _fv(cfg, 2.0)
    m = PEModel(cfg)
    p = "ra" if bank == "a" else "rb"
    w = "wa" if bank == "a" else "wb"
    m.step(MicroOp(**{f"{w}_en": 1, f"{w}_off": 2, f"{w}_src": Src.ROW}))
    m.step(MicroOp(), old)
    for _ in range(3):
        m.step(MicroOp())
    mem = m.mem_a if bank == "a" else m.mem_b
    assert mem[2] == old
    t = m.cycle
    evs, rd, arr = {}, {}, {}
    _step(m, evs, MicroOp(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_dst=4,
                          fpu_wb=FmaWb.MEMA if bank == "a" else FmaWb.MEMB,
                          ra_off=2, rb_off=2))
    for c in range(t + 1, t + L + 3):
        arr[c] = mem[2]
        _step(m, evs, MicroOp(**{f"{p}_en": 1, f"{p}_off": 2}))
        rd[c] = m.rd_a if bank == "a" else m.rd_b      # read by the micro-op issued at c
    assert rd == {c: new if c >= t + first else old for c in rd}
    assert _nonzero_cycles(evs, f"mem_{bank}_wr") == {t + L - 1: 1}
    assert _nonzero_cycles(evs, "rf_wr") == {}
    assert arr[t + L] == new and arr[t + L - 1] == old
    assert m.rf[4] == 0


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
    """An SRAM write (wa / wb) issued at t lands at the end of t+1 (t+1+exec_delay with
    the execute stage): the read issued at t+1 sees the old word, the read issued at t+2
    the new one with the reference timing, the execute stage and the bus stage (with the
    execute stage issued in the write cycle or the one before it: the word comes through
    the SRAM bypass, the bank still holds the old one); with the receive stage the write
    lands a cycle later still and the bypass keeps its two points, so the read issued at
    t+3 is the first to see it (``sram_read_distance`` 3)."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage)
    d = cfg.sram_read_distance
    assert d == (3 if x == 3 else 2)
    m = PEModel(cfg)
    one = cfg.fmt.one
    t = m.cycle
    evs = {}
    rd = MicroOp(ra_en=1, ra_off=3, rb_en=1, rb_off=5)
    _step(m, evs, MicroOp(wa_en=1, wa_off=3, wa_src=Src.ONE, wb_en=1, wb_off=5, wb_src=Src.ONE))
    assert m.mem_a[3] == 0 and m.mem_b[5] == 0
    for k in range(1, 5):                           # the read issued at t+k
        _step(m, evs, rd)
        assert (m.rd_a, m.rd_b) == ((one, one) if k >= d else (0, 0)), k
        # the bank holds the word from the end of the write cycle t+1+x on
        assert (m.mem_a[3], m.mem_b[5]) == ((one, one) if k >= 1 + x else (0, 0)), k
    assert _nonzero_cycles(evs, "mem_a_wr") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "mem_b_wr") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "mem_a_rd") == {t + 1: 1, t + 2: 1, t + 3: 1, t + 4: 1}


@EXEC
def test_move_result_visibility(exec_stage):
    """A move issued at t writes at the end of t+1 (t+2 with the execute stage): the
    micro-op issued at t+1 reads it with either timing (with the execute stage through the
    bypass: its operand stage t+2 is the write cycle, the RF still holds the old value);
    a driver of the move's own micro-op (operand stage t+1) reads the old value."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage)
    assert cfg.mv_read_distance == 1
    m = PEModel(cfg)
    two = _fv(cfg, 2.0)
    _preload_reg(m, 0, two)
    t = m.cycle
    outs, evs, rf0 = {}, {}, {}
    uops = [MicroOp(mv_op=MvOp.RELU, mv_src=Src.ONE, mv_dst=0, rdrv_en=1, rdrv_src=0)] + \
        [MicroOp(rdrv_en=1, rdrv_src=0)] * 3 + [MicroOp()]
    for u in uops:
        c = m.cycle
        rf0[c] = m.rf[0]
        outs[c] = _step(m, evs, u)[:2]
    # the driver issued at t+k shows RF[0] of its operand stage t+k+1, the move's result
    # from k = cfg.mv_drive_distance on (2 with the bus stage: the driven value is
    # registered before the move executes)
    assert outs[t + 1] == (two, 1)                     # the RELU's own operand stage
    for k in (1, 2, 3):
        assert outs[t + k + 1] == (cfg.fmt.one if k >= cfg.mv_drive_distance else two, 1), k
    assert rf0[t + 2] == (two if exec_stage else cfg.fmt.one)
    assert _nonzero_cycles(evs, "mv") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "rf_wr") == {t + 1 + x: 1}
    assert _nonzero_cycles(evs, "rf_rd") == {t + 1: 1, t + 2: 1, t + 3: 1, t + 4: 1}


@EXEC
@pytest.mark.parametrize("op", [MvOp.MOV, MvOp.RELU, MvOp.MASK])
def test_move_result_every_operand_read(exec_stage, op):
    """Every RF read of the micro-op after a move (move source and mask, FMA a / b, SRAM
    write sources, both drivers) sees its result; with the execute stage all through the
    bypass, the RF still holding the old value. Chains of moves too (each reading the one
    before)."""
    cfg = _tcfg(exec_stage)
    old, new = _fv(cfg, 0.5), _fv(cfg, 3.25)
    m = PEModel(cfg)
    _preload_reg(m, 4, old)
    _preload_reg(m, 7, old)
    t = m.cycle
    evs, drvs = {}, {}
    msk = dict(mv_msk=Src.ONE) if op == MvOp.MASK else {}
    prog = [MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=7),       # r7 = new (row)
            MicroOp(mv_op=op, mv_src=7, mv_dst=4, **msk),            # r4 = r7
            _read_all(4)]
    for k, u in enumerate(prog + [MicroOp()] * (cfg.fpu_latency + 2)):
        if k == 3 and exec_stage:
            # _read_all's operand stage (with the bus stage r7's move lands at its end too)
            assert m.rf[4] == old and m.rf[7] == (old if exec_stage >= 2 else new)
        drvs[t + k] = _step(m, evs, u, new if k == 1 else 0)
    # the drivers see the move one micro-op later with the bus stage (mv_drive_distance)
    _check_read_all(m, drvs[t + 3], new, new if cfg.mv_drive_distance == 1 else old)
    assert m.rf[4] == new and m.rf[7] == new


@EXEC
@pytest.mark.parametrize("mul,add", [(2, 3), (3, 4), (4, 5)])
def test_rf_c_is_not_bypassed(exec_stage, mul, add):
    """An RF `c` is read late, when the product reaches the adder (t + 1 + exec + mul),
    directly from the RF: no bypass with either timing. A MAC chain on one accumulator at
    the distance add_latency reads it in the first MAC's write-back cycle and gets the old
    value (the first MAC is lost); at acc_reuse_distance (and later) the new one. A move
    whose write lands in the late-read cycle (issued at t + mul) is not seen either, one
    a cycle earlier is."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage, mul_latency=mul, add_latency=add)
    L = cfg.fpu_latency
    assert cfg.acc_reuse_distance == add + 1
    mac = MicroOp(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=0, fpu_dst=0)
    for d, want in ((add - 1, 2.0), (add, 2.0), (add + 1, 3.0), (add + 2, 3.0)):
        m = PEModel(cfg)
        _preload_reg(m, 0, cfg.fmt.one)
        t = m.cycle
        evs = {}
        for k in range(d + L + 2):
            _step(m, evs, mac if k in (0, d) else MicroOp())
        assert m.rf[0] == _fv(cfg, want), d
        late_rd = t + d + 1 + x + mul                 # the second MAC's read of c
        assert _nonzero_cycles(evs, "rf_rd") == {t + 1 + x + mul: 1, late_rd: 1}
        assert _nonzero_cycles(evs, "rf_wr") == {t + L - 1: 1, t + d + L - 1: 1}
        assert (late_rd == t + L - 1) == (d == add)   # read in the write-back cycle
    for mv_at, want in ((mul - 1, 11.0), (mul, 2.0)):
        m = PEModel(cfg)
        _preload_reg(m, 7, cfg.fmt.one)
        t = m.cycle
        evs = {}
        prog = {0: MicroOp(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=7, fpu_dst=8),
                mv_at: MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=7)}
        for k in range(mv_at + L + 2):
            _step(m, evs, prog.get(k, MicroOp()), _fv(cfg, 10.0) if k == mv_at + 1 else 0)
        assert _nonzero_cycles(evs, "mv") == {t + mv_at + 1 + x: 1}
        assert (t + mv_at + 1 + x == t + 1 + x + mul) == (mv_at == mul)
        assert m.rf[8] == _fv(cfg, want), mv_at


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
    with the execute stage). A read of the operand write's address issued in its landing
    cycle gets the old word without the execute stage, the new one with it (SRAM bypass),
    but not a displaced write's (the old word); a read of the FMA's address issued in the
    write-back cycle gets the old word without the execute stage, the written one with it."""
    x = int(exec_stage)
    cfg = _tcfg(exec_stage)
    L = cfg.fpu_latency
    one, two = cfg.fmt.one, _fv(cfg, 2.0)
    wbk = FmaWb.MEMA if bank == "a" else FmaWb.MEMB
    p, w = ("ra", "wa") if bank == "a" else ("rb", "wb")
    for d in (-1, 0, 1):              # the operand write executes d cycles after the write-back
        m = PEModel(cfg)
        t = m.cycle
        prog = {0: dict(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_wb=wbk,
                        ra_off=2, rb_off=2)}
        tw = L - 2 - x + d
        prog[tw] = {f"{w}_en": 1, f"{w}_off": 7, f"{w}_src": Src.ONE}
        # reads: the operand write's address in its landing cycle, the FMA's address in the
        # write-back cycle (when that is another cycle) and after it
        reads = {L - 1 + d: 7, L: 2} if d == 0 else {L - 1 + d: 7, L - 1: 2, L + 1: 2}
        for k, a in reads.items():
            prog.setdefault(k, {}).update({f"{p}_en": 1, f"{p}_off": a})
        evs, rd = {}, {}
        for k in range(L + 4):
            evs[t + k] = m.step(MicroOp(**prog.get(k, {})))[1]
            rd[k] = m.rd_a if bank == "a" else m.rd_b
        mem = m.mem_a if bank == "a" else m.mem_b
        wr = f"mem_{bank}_wr"
        assert mem[2] == two
        if d == 0:
            assert _nonzero_cycles(evs, "mem_conflict") == {t + L - 1: 1}
            assert _nonzero_cycles(evs, wr) == {t + L - 1: 1}
            assert mem[7] == 0                  # the displaced write is lost
            assert rd[L - 1] == 0               # ... and not bypassed
            assert rd[L] == two
        else:
            assert _nonzero_cycles(evs, "mem_conflict") == {}
            assert _nonzero_cycles(evs, wr) == {t + L - 1: 1, t + L - 1 + d: 1}
            assert mem[7] == one
            assert rd[L - 1 + d] == (one if exec_stage else 0)
            assert rd[L - 1] == (two if exec_stage else 0) and rd[L + 1] == two


@EXEC
def test_rf_conflict_at_execute_stage(exec_stage):
    """A move executed in the cycle of an FMA write-back to the same register (issued at
    t + fpu_latency - 2, or - 3 with the execute stage) loses; rf_conflict then. The
    micro-op after the move reads the FMA's value then (with the execute stage through
    the move bypass, in the write cycle), the move's otherwise. (The reader is a driver,
    so with the bus stage it is issued two after the move, cfg.mv_drive_distance.)"""
    x = int(exec_stage)
    D = _tcfg(exec_stage).mv_drive_distance
    cfg = _tcfg(exec_stage)
    L = cfg.fpu_latency
    two = _fv(cfg, 2.0)
    for d in (-1, 0, 1):
        m = PEModel(cfg)
        tm = L - 2 - x + d
        prog = {0: MicroOp(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.ONE, fpu_c=Src.ONE, fpu_dst=4),
                tm: MicroOp(mv_op=MvOp.MOV, mv_src=Src.NZERO, mv_dst=4),
                tm + D: MicroOp(rdrv_en=1, rdrv_src=4)}
        evs, drv, rf4 = {}, {}, {}
        for k in range(L + 4):
            rf4[k] = m.rf[4]
            drv[k], evs[k] = m.step(prog.get(k, MicroOp()))
        assert _nonzero_cycles(evs, "mv") == {L - 1 + d: 1}
        if d == 0:
            assert _nonzero_cycles(evs, "rf_conflict") == {L - 1: 1}
            assert _nonzero_cycles(evs, "rf_wr") == {L - 1: 2}
        else:
            assert _nonzero_cycles(evs, "rf_conflict") == {}
        assert m.rf[4] == (cfg.fmt.neg_zero if d > 0 else two)
        assert drv[tm + D + 1][:2] == (two if d == 0 else cfg.fmt.neg_zero, 1)
        if exec_stage:       # read in the move's write cycle: the RF still holds the old value
            assert tm + D + 1 == L - 1 + d and rf4[tm + D + 1] == (0 if d <= 0 else two)


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
    # one FMA per cycle throughout the loop: the first MAC issued right after the first
    # loop micro-op (the load of x[0], with the execute stage read through the move
    # bypass), each executed exec_delay after its operand stage
    t0, t_fma0 = prog.meta["t0"], prog.meta["t_fma0"]
    assert t_fma0 == t0 + 1
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
    # the loop: the load of x[0], 256 MACs, the drain
    assert u == 256 / (256 + cfg.fpu_latency)
    assert u > (0.96 if exec_stage else 0.97)


def test_gemv_needs_two_ars():
    cfg = ArchConfig(nr=1, n_ar=1, mem_a_words=256, mem_b_words=256)
    with pytest.raises(ValueError):
        pp.gemv_program(cfg, 0, 0)


def test_gemv_needs_enough_accumulators():
    cfg = ArchConfig(nr=1, mem_a_words=256, mem_b_words=256)
    with pytest.raises(ValueError):
        pp.gemv_program(cfg, 0, 0, L=cfg.acc_reuse_distance - 1)
