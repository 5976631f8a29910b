"""SequencerModel against hand-computed traces (loops, AGUs, jumps, halts, re-arming)."""

import itertools

import pytest

from arch.microop import MicroOp
from arch.config import ArchConfig
from sim.seq_model import ProgramError, RunawayError, SequencerModel
from arch.isa import Instruction, SeqOp

CFG = ArchConfig()
SMALL = ArchConfig(n_loops=3, n_agus=2, ucode_depth=16, mem_a_words=256, mem_b_words=256)

NEXT, LOOP, BASE, STRIDE, JUMP, HALT = (SeqOp.NEXT, SeqOp.LOOP, SeqOp.AGU_BASE, SeqOp.AGU_STRIDE,
                                        SeqOp.JUMP, SeqOp.HALT)


def I(op=NEXT, uop=None, **ctl):  # noqa: E743
    return Instruction(uop, op=op, **ctl)


def pcs(prog, cfg=CFG, start=0, addr=0, **kw):
    m = SequencerModel(cfg)
    m.load(prog, addr)
    return [x.pc for x in m.run(start, **kw)]


def test_straight_line_and_halt():
    assert pcs([I(), I(), I(HALT), I()]) == [0, 1, 2]


def test_single_loop():
    prog = [I(LOOP, lvl=0, target=2, imm=3), I(), I(), I(HALT)]
    assert pcs(prog) == [0] + [1, 2] * 3 + [3]


def test_single_instruction_body():
    assert pcs([I(LOOP, lvl=0, target=1, imm=4), I(), I(HALT)]) == [0, 1, 1, 1, 1, 2]


def test_trip_count_one_and_zero_run_once():
    for n in (0, 1):
        assert pcs([I(LOOP, lvl=0, target=1, imm=n), I(), I(HALT)]) == [0, 1, 2]


def test_nested_loops_ending_on_same_instruction():
    prog = [I(LOOP, lvl=0, target=3, imm=2), I(LOOP, lvl=1, target=3, imm=3), I(), I(), I(HALT)]
    assert pcs(prog) == [0] + ([1] + [2, 3] * 3) * 2 + [4]


def test_three_levels_single_instruction_shared_end():
    prog = [I(LOOP, lvl=0, target=3, imm=2), I(LOOP, lvl=1, target=3, imm=2),
            I(LOOP, lvl=2, target=3, imm=2), I(), I(HALT)]
    inner = [2, 3, 3]
    assert pcs(prog) == [0] + ([1] + inner * 2) * 2 + [4]


def test_sibling_loops_reuse_a_level():
    prog = [I(LOOP, lvl=0, target=5, imm=2),      # outer body 1..5
            I(LOOP, lvl=1, target=2, imm=2), I(),  # j: body 2
            I(LOOP, lvl=1, target=5, imm=3), I(), I(),  # k: body 4..5
            I(HALT)]
    assert pcs(prog) == [0] + ([1, 2, 2, 3] + [4, 5] * 3) * 2 + [6]


def test_jump_skips_and_halt_in_loop_body():
    assert pcs([I(), I(JUMP, target=3), I(), I(HALT)]) == [0, 1, 3]
    # HALT inside a body stops at once
    assert pcs([I(LOOP, lvl=0, target=3, imm=5), I(), I(HALT), I()]) == [0, 1, 2]


def test_jump_at_loop_end_takes_precedence():
    # the assembler rejects it; the model defines it: JUMP wins, the loop state is untouched
    m = SequencerModel(CFG)
    m.load([I(LOOP, lvl=0, target=1, imm=3), I(JUMP, target=2), I(HALT)])
    assert [x.pc for x in m.run()] == [0, 1, 2]
    assert m.cnt[0] == 3


def test_state_after_loop_finishes_is_rearmed():
    prog = [I(STRIDE, agu=0, lvl=0, imm=5), I(LOOP, lvl=0, target=2, imm=3), I(), I(), I(HALT)]
    m = SequencerModel(CFG)
    m.load(prog)
    m.run()
    assert m.armed[0] and m.cnt[0] == m.trip[0] == 3 and m.off[0][0] == 0 and m.agu_values()[0] == 0


def test_pc_wraps_around_microcode():
    m = SequencerModel(SMALL)
    m.load([I(HALT)], 0)
    m.load([I(), I()], 14)
    assert [x.pc for x in m.run(14)] == [14, 15, 0]


def test_runaway_program_raises():
    m = SequencerModel(SMALL)
    m.load([I(), I(JUMP, target=0)])
    with pytest.raises(RunawayError, match="no HALT within 50 instructions"):
        m.run(0, max_instructions=50)


@pytest.mark.parametrize("lvl", [0, 1, 3])    # the armed level itself, another, out of range
def test_loop_at_the_end_of_an_armed_loop_raises(lvl):
    """A LOOP as the last instruction of a loop body (improper nesting) is not a program:
    the model raises before changing anything, whether the loop branches back or finishes,
    and the fast model's issue trace raises the same."""
    from sim.fast_trace import issue_trace
    for trip in (3, 1):
        prog = [I(LOOP, lvl=0, target=2, imm=trip), I(), I(LOOP, lvl=lvl, target=3, imm=2), I(), I(HALT)]
        m = SequencerModel(SMALL)
        m.load(prog)
        m.start(0)
        m.step()
        m.step()
        state = (m.pc, list(m.cnt), list(m.armed), list(m.lend))
        with pytest.raises(ProgramError, match="LOOP at microcode address 2 is the last instruction "
                                               "of the armed loop body of level 0"):
            m.step()
        assert (m.pc, list(m.cnt), list(m.armed), list(m.lend)) == state
        with pytest.raises(ProgramError):
            issue_trace(m, 0)
    # ... and at the end of a nested body, which the fast trace would otherwise plan
    nested = [I(LOOP, lvl=0, target=3, imm=2), I(LOOP, lvl=1, target=2, imm=2), I(LOOP, lvl=lvl, target=4, imm=2),
              I(), I(HALT)]
    m = SequencerModel(SMALL)
    m.load(nested)
    with pytest.raises(ProgramError, match="address 2 .* level 1"):
        m.run(0)
    with pytest.raises(ProgramError, match="address 2 .* level 1"):
        issue_trace(m, 0)
    # reached by a JUMP after the loop finished (the level stays armed): the same
    prog = [I(LOOP, lvl=0, target=2, imm=1), I(), I(BASE, agu=0, imm=1), I(JUMP, target=5), I(HALT),
            I(LOOP, lvl=1, target=6, imm=1), I(), I(HALT)]
    m = SequencerModel(SMALL)
    m.load(prog)
    assert [x.pc for x in m.run(0)] == [0, 1, 2, 3, 5, 6, 7]
    prog[2] = I(LOOP, lvl=1, target=3, imm=1)
    m.load(prog)
    with pytest.raises(ProgramError, match="address 2"):
        m.run(0)


def test_start_resets_state_between_runs():
    prog = [I(BASE, agu=1, imm=7, ag_ra=2), I(ag_ra=2), I(HALT)]
    m = SequencerModel(CFG)
    m.load(prog)
    for _ in range(2):   # the second run sees base 0 again at pc 0
        assert [x.instr.uop.ra_off for x in m.run()] == [0, 7, 0]


def walk(cfg, trips, strides, base, agu=0, fld="ra"):
    """Loop nest with one body instruction selecting ``agu`` on ``fld``; returns offsets."""
    n = len(trips)
    sel = {f"ag_{fld}": agu + 1}
    prog = [I(BASE, agu=agu, imm=base & ((1 << cfg.loop_bits) - 1))]
    for lv, s in enumerate(strides):
        prog.append(I(STRIDE, agu=agu, lvl=lv, imm=s & ((1 << cfg.loop_bits) - 1)))
    first = len(prog)
    body = first + n
    for lv, t in enumerate(trips):
        prog.append(I(LOOP, lvl=lv, target=body, imm=t))
    prog.append(I(uop=MicroOp(**{f"{fld}_off": 3}), **sel))
    prog.append(I(HALT, **sel))
    m = SequencerModel(cfg)
    m.load(prog)
    got = [x.instr.uop.f.get(f"{fld}_off", 0) for x in m.run() if x.pc == body]
    mask = (1 << cfg.addr_bits) - 1
    want = [(base + 3 + sum(i * s for i, s in zip(idx, strides))) & mask
            for idx in itertools.product(*[range(t) for t in trips])]
    return got, want


@pytest.mark.parametrize("trips,strides,base", [
    ((4,), (2,), 10),
    ((3, 4), (100, 1), 5),
    ((2, 3, 4), (64, -8, 1), 1000),
    ((2, 2, 3, 3), (-1000, 333, -7, 2), 4095),
])
@pytest.mark.parametrize("fld", ["ra", "rb", "wa", "wb"])
def test_agu_affine_walks(trips, strides, base, fld):
    got, want = walk(CFG, trips, strides, base, agu=len(trips) - 1, fld=fld)
    assert got == want


def test_agu_offset_wraps_modulo_addr_bits():
    got, want = walk(SMALL, (3,), (-200,), 100)
    assert got == want and SMALL.addr_bits == 8
    assert got == [103, (103 - 200) % 256, (103 - 400) % 256]


def test_agu_values_see_state_before_the_instruction():
    m = SequencerModel(CFG)
    m.load([I(BASE, agu=0, imm=9, ag_wb=1), I(ag_wb=1, uop=MicroOp(wb_off=1)), I(HALT)])
    assert [x.instr.uop.wb_off for x in m.run()] == [0, 10, 0]


def test_stride_change_takes_effect_from_next_instruction():
    # body: pc 2 uses g0; pc 3 (the loop end) sets the level-0 stride from 1 to 10: its own
    # back-edge still advances by the old stride (reads see the state before it)
    prog = [I(STRIDE, agu=0, lvl=0, imm=1), I(LOOP, lvl=0, target=3, imm=3),
            I(ag_ra=1), I(STRIDE, agu=0, lvl=0, imm=10), I(HALT)]
    m = SequencerModel(CFG)
    m.load(prog)
    assert [x.instr.uop.ra_off for x in m.run() if x.pc == 2] == [0, 1, 11]


def test_out_of_range_fields_are_ignored():
    # SMALL: 3 loops (lvl field 2 bits), 2 AGUs (agu field 1 bit, selector 2 bits)
    prog = [I(LOOP, lvl=3, target=1, imm=5), I(), I(7), I(6),
            I(BASE, agu=0, imm=4), I(ag_ra=3, ag_rb=1, uop=MicroOp(ra_off=1, rb_off=1)), I(HALT)]
    m = SequencerModel(SMALL)
    m.load(prog)
    out = m.run()
    assert [x.pc for x in out] == list(range(7))
    assert (out[5].instr.uop.ra_off, out[5].instr.uop.rb_off) == (1, 5)


def test_issued_record_and_load_forms():
    prog = [I(LOOP, lvl=0, target=1, imm=2, hin=1, hout=2, hlast=1), I(HALT, ag_ra=1)]
    a, b = SequencerModel(CFG), SequencerModel(CFG)
    a.load(prog)
    b.load([p.encode(CFG) for p in prog])
    ra, rb = a.run(), b.run()
    assert ra == rb
    x = ra[0]
    assert (x.pc, x.op, x.hin, x.hout, x.hlast) == (0, LOOP, 1, 2, 1)
    assert x.instr == prog[0] and ra[-1].op == HALT
    with pytest.raises(ValueError, match="does not fit"):
        a.load([I()] * 2, CFG.ucode_depth - 1)


def test_stepping_interface_and_head_needs():
    m = SequencerModel(CFG)
    m.load([I(hin=2), I(HALT, hout=1)])
    m.start(0)
    assert m.head_needs == (2, 0) and m.head == I(hin=2)
    m.step()
    assert m.head_needs == (0, 1)
    m.step()
    assert not m.running
    with pytest.raises(RuntimeError, match="not running"):
        m.step()


ADDR = ArchConfig(fetch_stage=True, addr_stage=True)


@pytest.mark.parametrize("rule,prog,match", [
    # 1. a body longer than one instruction while an armed loop ends at the next address
    (1, [I(LOOP, lvl=0, target=2, imm=2), I(LOOP, lvl=1, target=4, imm=2), I(), I(), I(), I(HALT)],
     r"LOOP at microcode address 1 \(level 1, target 4\): the armed loop of level 0 ends at the next"),
    # 2. a one-instruction body that is also the end of an armed loop of a higher level
    (2, [I(LOOP, lvl=1, target=2, imm=2), I(LOOP, lvl=0, target=2, imm=3), I(), I(HALT)],
     r"address 1 \(level 0, target 2\): its one-instruction body 2 is also the end of .* level 1"),
    # 3. one trip, re-arming its level whose loop ends at the body and still counts
    (3, [I(LOOP, lvl=0, target=2, imm=3), I(LOOP, lvl=0, target=2, imm=1), I(), I(HALT)],
     r"address 1 \(level 0, target 2\): re-arms its level with one trip .* still counts 3"),
], ids=["longer-body", "higher-level", "one-trip"])
def test_addr_stage_undefined_loops_raise(rule, prog, match):
    """With the address stage three improperly nested LOOP placements are not defined (the
    scan of the instruction after a LOOP runs before the LOOP is decoded): the model
    raises before changing anything; without the stage the same LOOP issues."""
    plain = SequencerModel(ArchConfig(fetch_stage=True))
    plain.load(prog)
    plain.start(0)
    assert [plain.step().pc for _ in range(3)] == [0, 1, 2]
    m = SequencerModel(ADDR)
    m.load(prog)
    m.start(0)
    m.step()
    state = (m.pc, list(m.cnt), list(m.armed), list(m.lend))
    with pytest.raises(ProgramError, match=match):
        m.step()
    assert (m.pc, list(m.cnt), list(m.armed), list(m.lend)) == state


def test_addr_stage_allows_a_nest_run_again():
    """A one-instruction loop armed again inside an outer loop (its level still armed
    with the same end, its count back at the trip), with one trip or several, and a LOOP
    whose body ends two ahead: defined with the address stage, the same issue stream as
    without it."""
    for imm in (4, 1):
        prog = [I(LOOP, lvl=0, target=3, imm=3), I(LOOP, lvl=1, target=2, imm=imm), I(), I(),
                I(LOOP, lvl=2, target=6, imm=2), I(), I(), I(HALT)]
        want = pcs(prog, ArchConfig(fetch_stage=True))
        assert pcs(prog, ADDR) == want
        assert want.count(2) == 3 * imm
