"""The assembler, the Builder API, the disassembler and microcode files (pure Python).

Every syntax form, loop/label resolution, round trips (text -> program -> text ->
program, Builder == text, seeded random programs over the whole micro-op), every error
message with its line, and the assembled programs' behaviour on the SequencerModel.
"""

import itertools
from pathlib import Path
import random
import re

import pytest

from arch.microop import ArOp, Gate, MicroOp, MvOp, PredMode, Src
from arch.config import ArchConfig
from sim.seq_model import SequencerModel
from sw import asm
from sw.asm import AsmError, Builder, assemble, disassemble
from arch.isa import HostDir, Instruction, SeqOp

CFG = ArchConfig()
SMALL = ArchConfig(nr=2, n_regs=8, n_ar=2, mem_a_words=256, mem_b_words=512, ucode_depth=16,
                   n_loops=3, n_agus=2, loop_bits=12)
AM = (1 << CFG.addr_bits) - 1          # 13-bit offsets / immediates
LM = (1 << CFG.loop_bits) - 1


def one(text, cfg=CFG):
    """The first instruction of ``text`` followed by a halt."""
    return assemble(text + "\nhalt", cfg)[0]


def U(**f):
    return Instruction(MicroOp(**f))


# ---------------------------------------------------------------------------------------
# every slot form
# ---------------------------------------------------------------------------------------
FORMS = [
    ("nop", U()),
    ("@all", U()),
    ("@col=2", U(pred_mode=PredMode.COL, pred_k=2)),
    ("@row=3", U(pred_mode=PredMode.ROW, pred_k=3)),
    ("@diag=1", U(pred_mode=PredMode.DIAG, pred_k=1)),
    ("@col=1 mov r1 = r2", U(pred_mode=PredMode.COL, pred_k=1, mv_op=MvOp.MOV, mv_src=2, mv_dst=1)),
    ("fma r0 = mema * r3 + r0 | rda [ar0]",
     U(fpu_en=1, fpu_a=Src.MEMA, fpu_b=3, fpu_c=0, fpu_dst=0, ra_en=1)),
    ("mac r2 += r1 * r3", U(fpu_en=1, fpu_a=1, fpu_b=3, fpu_c=2, fpu_dst=2)),
    ("mul r1 = r2 * r3", U(fpu_en=1, fpu_a=2, fpu_b=3, fpu_c=Src.NZERO, fpu_dst=1)),
    ("add r1 = r2 + r3", U(fpu_en=1, fpu_a=2, fpu_b=Src.ONE, fpu_c=3, fpu_dst=1)),
    ("fma r15 = 1 * -0 + 0", U(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.NZERO, fpu_c=Src.ZERO, fpu_dst=15)),
    ("fma r1 = one * nzero + zero", U(fpu_en=1, fpu_a=Src.ONE, fpu_b=Src.NZERO, fpu_c=Src.ZERO, fpu_dst=1)),
    ("mov r1 = r2", U(mv_op=MvOp.MOV, mv_src=2, mv_dst=1)),
    ("relu r4 = r9", U(mv_op=MvOp.RELU, mv_src=9, mv_dst=4)),
    ("mask r2 = r1 if r5", U(mv_op=MvOp.MASK, mv_src=1, mv_msk=5, mv_dst=2)),
    ("rdrv r3 @col=2", U(rdrv_en=1, rdrv_k=2, rdrv_src=3)),
    ("rdrv r3 @diag=1", U(rdrv_en=1, rdrv_diag=1, rdrv_k=1, rdrv_src=3)),
    ("cdrv memb @row=0 | rdb [ar1]", U(cdrv_en=1, cdrv_src=Src.MEMB, rb_en=1, rb_ar=1)),
    ("cdrv r1 @diag=3", U(cdrv_en=1, cdrv_diag=1, cdrv_k=3, cdrv_src=1)),
    ("rda [ar1]", U(ra_en=1, ra_ar=1)),
    ("rda [ar1 + 5]++", U(ra_en=1, ra_ar=1, ra_off=5, ra_inc=1)),
    ("rda [5 + ar1]", U(ra_en=1, ra_ar=1, ra_off=5)),
    ("rdb [ar3 - 2]", U(rb_en=1, rb_ar=3, rb_off=-2 & AM)),
    ("rdb [ar3 - -2]", U(rb_en=1, rb_ar=3, rb_off=2)),
    ("rda [ar2 + g1 - 3]++ gate=pred",
     Instruction(MicroOp(ra_en=1, ra_ar=2, ra_off=-3 & AM, ra_inc=1, ra_gate=Gate.PRED), ag_ra=2)),
    ("rda [g3 + ar0] gate=all", Instruction(MicroOp(ra_en=1), ag_ra=4)),
    ("rdb [ar0]++ gate=rdrv | rdrv memb @col=1",
     U(rb_en=1, rb_inc=1, rb_gate=Gate.RDRV, rdrv_en=1, rdrv_k=1, rdrv_src=Src.MEMB)),
    ("rda [ar0] gate=cdrv | cdrv mema @row=3",
     U(ra_en=1, ra_gate=Gate.CDRV, cdrv_en=1, cdrv_k=3, cdrv_src=Src.MEMA)),
    ("wra [ar0]++ = r1", U(wa_en=1, wa_inc=1, wa_src=1)),
    ("wrb [ar3 + g0 + 2*4] = row | hin row",
     Instruction(MicroOp(wb_en=1, wb_ar=3, wb_off=8, wb_src=Src.ROW), ag_wb=1, hin=HostDir.ROW)),
    ("wra [ar1 + g2] = col | cdrv r0 @row=1",
     Instruction(MicroOp(wa_en=1, wa_ar=1, wa_src=Src.COL, cdrv_en=1, cdrv_k=1), ag_wa=3)),
    ("ar1 = 12", U(ar_op=ArOp.SET, ar_idx=1, ar_imm=12)),
    ("ar1 += 4", U(ar_op=ArOp.ADD, ar_idx=1, ar_imm=4)),
    ("ar1 -= 4", U(ar_op=ArOp.ADD, ar_idx=1, ar_imm=-4 & AM)),
    ("ar3 = -1", U(ar_op=ArOp.SET, ar_idx=3, ar_imm=AM)),
    ("stride ar2 = -1", U(ar_op=ArOp.STRIDE, ar_idx=2, ar_imm=AM)),
    ("hin row", Instruction(hin=HostDir.ROW)),
    ("hin col", Instruction(hin=HostDir.COL)),
    ("hout row | rdrv r1 @col=0", Instruction(MicroOp(rdrv_en=1, rdrv_src=1), hout=HostDir.ROW)),
    ("hout col last | hin col", Instruction(hout=HostDir.COL, hlast=1, hin=HostDir.COL)),
    ("agu g1 = 100", Instruction(op=SeqOp.AGU_BASE, agu=1, imm=100)),
    ("agu g1 = -1", Instruction(op=SeqOp.AGU_BASE, agu=1, imm=LM)),
    ("agu g0 stride level 2 = 5", Instruction(op=SeqOp.AGU_STRIDE, agu=0, lvl=2, imm=5)),
    ("agu g3 stride level 1 = -16", Instruction(op=SeqOp.AGU_STRIDE, agu=3, lvl=1, imm=-16 & LM)),
    ("raw mv_msk=3", U(mv_msk=3)),
    ("raw lvl=1 target=5, imm=7 ra_inc=1", Instruction(MicroOp(ra_inc=1), lvl=1, target=5, imm=7)),
    ("raw ra_off=-1", U(ra_off=AM)),
    ("rda [ar0 + 0x10 + 0b101 + 1_0]", U(ra_en=1, ra_off=16 + 5 + 10)),
    ("rda [ar0 + (3 + 4) * 2 - 8 / 3 + 7 % 4 + (1 << 3) + (64 >> 2)]",
     U(ra_en=1, ra_off=14 - 2 + 3 + 8 + 16)),
    ("mov r1 = row | hin row | wra [ar0] = r2 | rdb [ar1] | mul r2 = memb * 1 | @row=1",
     Instruction(MicroOp(mv_op=MvOp.MOV, mv_src=Src.ROW, mv_dst=1, wa_en=1, wa_src=2, rb_en=1, rb_ar=1,
                         fpu_en=1, fpu_a=Src.MEMB, fpu_b=Src.ONE, fpu_c=Src.NZERO, fpu_dst=2,
                         pred_mode=PredMode.ROW, pred_k=1), hin=HostDir.ROW)),
]


#: a core with a scratchpad: its micro-op has the write predicate
WP_CFG = ArchConfig(spad_kib=4)
WP_FORMS = [
    ("@row=3 writes | wra [ar0] = r1 | mov r2 = r3",
     U(pred_mode=PredMode.ROW, pred_k=3, wp_en=1, wa_en=1, wa_src=1, mv_op=MvOp.MOV, mv_src=3, mv_dst=2)),
    ("@diag=2 writes wrb [ar1 + 2] = r4", U(pred_mode=PredMode.DIAG, pred_k=2, wp_en=1, wb_en=1, wb_ar=1, wb_off=2,
                                            wb_src=4)),
]


@pytest.mark.parametrize("text,want", WP_FORMS, ids=[f[0] for f in WP_FORMS])
def test_write_predicate_forms(text, want):
    """The write predicate on a core with a scratchpad (round trip included); a core
    without one has no such field, and says so."""
    assert assemble(text + "\nhalt", WP_CFG)[0] == want
    prog = assemble(text + "\nhalt", WP_CFG)
    assert assemble(disassemble(prog, WP_CFG), WP_CFG) == prog
    with pytest.raises(AsmError, match=r"a write predicate \('writes'\) needs a scratchpad"):
        assemble(text + "\nhalt", CFG)


@pytest.mark.parametrize("text,want", FORMS, ids=[f[0] for f in FORMS])
def test_slot_forms(text, want):
    got = one(text)
    assert got == want
    # and every form survives a disassembly round trip
    prog = assemble(text + "\nhalt", CFG)
    assert assemble(disassemble(prog, CFG), CFG) == prog


def test_halt_and_jump_carry_slots():
    p = assemble("top: mov r1 = r2 | jump top", CFG)
    assert p == [Instruction(MicroOp(mv_op=MvOp.MOV, mv_src=2, mv_dst=1), op=SeqOp.JUMP, target=0)]
    p = assemble("hout row last | rdrv r0 @diag=0 | halt", CFG)
    assert p[0].op == SeqOp.HALT and p[0].hout == 1 and p[0].hlast == 1


def test_constants_aliases_comments_continuations():
    src = """
    ; a comment line
    .equ N 8            ; trailing comment
    .equ M = N * 2 + 1
    .equ acc r3
    .equ acc2 acc
    .equ W ar2
    .equ G g1
    .equ M2 M
        rda [W + G + M]++ |       ; continues
            mac acc += mema * r1 |
            mov acc2 = r0
        ar2 = M2 | halt
    """
    p = assemble(src, CFG)
    assert p[0] == Instruction(MicroOp(ra_en=1, ra_ar=2, ra_off=17, ra_inc=1, fpu_en=1, fpu_a=Src.MEMA,
                                       fpu_b=1, fpu_c=3, fpu_dst=3, mv_op=MvOp.MOV, mv_src=0, mv_dst=3), ag_ra=2)
    assert p[1] == Instruction(MicroOp(ar_op=ArOp.SET, ar_idx=2, ar_imm=17), op=SeqOp.HALT)
    assert p.lines == [10, 13]
    q = assemble("ar0 = K | halt", CFG, equ={"K": 5})
    assert q[0].uop.ar_imm == 5


def test_labels_and_jumps():
    src = """
    start:
        nop
    a: b:
        nop
        jump c
    c:  jump start
    """
    p = assemble(src, CFG, origin=10)
    assert p.labels == {"start": 10, "a": 11, "b": 11, "c": 13}
    assert [i.target for i in p] == [0, 0, 13, 10]


HAS_SEG = all(f in asm._ctx(CFG).uop for f in ("pred_seg", "rdrv_seg", "cdrv_seg", "fpu_wb"))
needs_seg = pytest.mark.skipif(not HAS_SEG, reason="micro-op layout without segment / write-back fields")

SEG_FORMS = [
    ("@col%2=1", U(pred_mode=PredMode.COL, pred_k=1, pred_seg=1)),
    ("@diag%4=3 | nop", U(pred_mode=PredMode.DIAG, pred_k=3, pred_seg=2)),
    ("rdrv r1 @col%2=0", U(rdrv_en=1, rdrv_src=1, rdrv_seg=1)),
    ("cdrv mema @row%4=2 | rda [ar0]", U(cdrv_en=1, cdrv_src=Src.MEMA, cdrv_k=2, cdrv_seg=2, ra_en=1)),
    ("fma mema = r1 * r2 + r3 | rda [ar0 + 5] noread",
     U(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=3, fpu_wb=1, ra_off=5)),
    ("mac memb += r1 * r2 | rdb [ar1 + g0]++",
     Instruction(MicroOp(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=Src.MEMB, fpu_wb=2, rb_en=1, rb_ar=1,
                         rb_inc=1), ag_rb=1)),
    ("mul mema = r1 * r2 | rda [ar0]", U(fpu_en=1, fpu_a=1, fpu_b=2, fpu_c=Src.NZERO, fpu_wb=1, ra_en=1)),
    ("add memb = r1 + r2 | rdb [ar2] noread gate=pred",
     U(fpu_en=1, fpu_a=1, fpu_b=Src.ONE, fpu_c=2, fpu_wb=2, rb_ar=2, rb_gate=Gate.PRED)),
    ("rda [ar1]++ noread", U(ra_ar=1, ra_inc=1)),
]


@needs_seg
@pytest.mark.parametrize("text,want", SEG_FORMS, ids=[f[0] for f in SEG_FORMS])
def test_segment_and_writeback_forms(text, want):
    test_slot_forms(text, want)


@needs_seg
@pytest.mark.parametrize("src,msg", [
    ("@col%3=1", r"index modulus 3 must be a power of two in 2..128"),
    ("@col%256=1", r"index modulus 256 must be a power of two"),
    ("rdrv r1 @diag%2=0", r"a segmented rdrv selects its drivers by col index, not diag"),
    ("cdrv r1 @diag%2=0", r"a segmented cdrv selects its drivers by row index, not diag"),
    ("@col%2=2", r"predicate index 2 modulo 2 selects no PE \(use 0..1\)"),
    ("rdrv r0 @col%2=3", r"row-bus driver index 3 modulo 2 selects no PE"),
    ("fma mema = r1 * r2 + r3", r"fma to mema writes at this instruction's rda address: add rda"),
    ("mac memb += r1 * r2 | rdb [ar0] noread", r"source memb needs an SRAM B read"),
    ("raw fpu_en=1 fpu_wb=3", r"fpu_wb=3 is not a write-back target"),
])
def test_segment_and_writeback_errors(src, msg):
    with pytest.raises(AsmError, match=msg) as e:
        assemble(src + "\nhalt", CFG)
    assert e.value.line == 1


@needs_seg
def test_segment_builder_forms():
    b = Builder(CFG)
    b.emit(asm.pred("row", 1, mod=2), asm.rdrv("r1", col=0, mod=4), asm.fma("mema", 1, 2, 3),
           asm.rda(1, 3, read=False))
    b.emit(asm.mac("memb", "r1", "r2"), asm.rdb(0, inc=True))
    b.halt()
    assert b.build() == assemble("@row%2=1 | rdrv r1 @col%4=0 | fma mema = r1 * r2 + r3 | "
                                 "rda [ar1 + 3] noread\nmac memb += r1 * r2 | rdb [ar0]++\nhalt", CFG)
    with pytest.raises(AsmError, match="@all takes no index modulus"):
        asm.pred("all", 0, mod=2)
    with pytest.raises(AsmError, match="selects its drivers by row index"):
        asm.cdrv(1, diag=0, mod=2)


# ---------------------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------------------
NEST = """
    agu g0 stride j = 1
    agu g0 stride i = 100
    agu g1 stride k = 7
    loop i 3 {
        mov r1 = r2 | loop j 4 {
            rda [ar0 + g0]
            loop k 2 {
                wrb [ar1 + g1] = r1
            }
        }
        loop j2 2 level=3 {
            nop
        }
    }
    halt
"""


def test_loop_levels_targets_and_counts():
    p = assemble(NEST, CFG)
    loops = {lp.name: lp for lp in p.loops}
    assert {n: (lp.level, lp.pc, lp.end, lp.count) for n, lp in loops.items()} == {
        "i": (0, 3, 9, 3), "j": (1, 4, 7, 4), "k": (2, 6, 7, 2), "j2": (3, 8, 9, 2)}
    assert p[4] == Instruction(MicroOp(mv_op=MvOp.MOV, mv_src=2, mv_dst=1), op=SeqOp.LOOP, lvl=1,
                               target=7, imm=4)
    assert [(x.op, x.agu, x.lvl, x.imm) for x in p[:3]] == [
        (SeqOp.AGU_STRIDE, 0, 1, 1), (SeqOp.AGU_STRIDE, 0, 0, 100), (SeqOp.AGU_STRIDE, 1, 2, 7)]
    assert loops["k"].parent is loops["j"] and loops["j"].parent is loops["i"]


def test_loop_nest_runs_on_the_model():
    p = assemble(NEST, CFG)
    m = SequencerModel(CFG)
    m.load(p)
    out = m.run()
    pcs = [x.pc for x in out]
    want = [0, 1, 2, 3]
    for _ in range(3):
        want += [4]
        for _ in range(4):
            want += [5, 6, 7, 7]
        want += [8, 9, 9]
    assert pcs == want + [10]
    offs = [x.instr.uop.ra_off for x in out if x.pc == 5]
    assert offs == [i * 100 + j for i in range(3) for j in range(4)]
    assert [x.instr.uop.wb_off for x in out if x.pc == 7] == [0, 7] * 12


def test_nested_loops_ending_together_and_single_instruction_bodies():
    src = """
    loop i 2 {
        loop j 3 {
            loop k 2 {
                nop
            }
        }
    }
    halt
    """
    p = assemble(src, CFG)
    assert [(x.lvl, x.target) for x in p[:3]] == [(0, 3), (1, 3), (2, 3)]
    m = SequencerModel(CFG)
    m.load(p)
    assert len(m.run()) == 1 + 2 * (1 + 3 * (1 + 2)) + 1


def test_sibling_loops_share_a_level_and_names_can_repeat():
    src = """
    loop i 2 {
        loop j 2 { nop
        }
        loop j 3 {
            nop
        }
    }
    agu g0 stride j = 1
    halt
    """
    with pytest.raises(AsmError, match="'{' must end a loop line|unexpected"):
        assemble(src, CFG)
    src = src.replace("{ nop", "{\n nop")
    p = assemble(src, CFG)
    assert [lp.level for lp in p.loops] == [0, 1, 1] and p[5].lvl == 1


# ---------------------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------------------
def test_disassembly_is_readable_and_round_trips():
    p = assemble(NEST, CFG)
    text = disassemble(p, CFG)
    assert "loop i 3 {" in text and "loop l 2 level=3 {" in text
    assert "agu g0 stride j = 1" in text and "agu g1 stride k = 7" in text
    assert assemble(text, CFG) == p
    assert assemble(disassemble(p, CFG, pcs=False), CFG) == p
    assert assemble(disassemble(p.words(), CFG), CFG) == p
    assert p.disassemble() == text


def test_round_trip_with_origin_and_jumps():
    src = "x: nop\nloop i 2 {\n jump y\n y: nop\n}\njump x"
    p = assemble(src, CFG, origin=100)
    text = disassemble(p, CFG)
    assert "L100:" in text and "L103:" in text
    assert assemble(text, CFG, origin=100) == p


def _random_slots(rng, cfg):
    """Random valid slots over the whole micro-op (as builder slot objects)."""
    n = cfg.n_regs
    regs = list(range(n))
    slots = []
    have = set()

    def src(exclude=()):
        pool = regs + [Src.ZERO, Src.NZERO, Src.ONE]
        if "ra" in have:
            pool.append(Src.MEMA)
        if "rb" in have:
            pool.append(Src.MEMB)
        if "rowbus" in have and "row" not in exclude:
            pool.append(Src.ROW)
        if "colbus" in have and "col" not in exclude:
            pool.append(Src.COL)
        return rng.choice(pool)

    def addr(bank):
        depth = cfg.mem_a_words if bank == "a" else cfg.mem_b_words
        return dict(ar=rng.randrange(cfg.n_ar), off=rng.randint(-depth + 1, depth - 1),
                    inc=rng.random() < 0.5, agu=rng.choice([None, rng.randrange(cfg.n_agus)]))

    if rng.random() < 0.5:
        slots.append(asm.rda(**addr("a"), gate=rng.choice(["all", "pred"])))
        have.add("ra")
    if rng.random() < 0.5:
        slots.append(asm.rdb(**addr("b")))
        have.add("rb")
    host_in = rng.choice([None, None, "row", "col"])
    if host_in:
        slots.append(asm.hin(host_in))
        have.add(host_in + "bus")
    if host_in != "row" and rng.random() < 0.4:
        k = rng.randrange(cfg.nr)
        if HAS_SEG and rng.random() < 0.3:
            slots.append(asm.rdrv(src(("row", "col")), col=k % 2, mod=2))
        else:
            slots.append(asm.rdrv(src(("row", "col")), **({"col": k} if rng.random() < 0.5 else {"diag": k})))
        have.add("rowbus")
    if host_in != "col" and rng.random() < 0.4:
        k = rng.randrange(cfg.nr)
        slots.append(asm.cdrv(src(("row", "col")), **({"row": k} if rng.random() < 0.5 else {"diag": k})))
        have.add("colbus")
    r = rng.random()
    d = rng.randrange(n)
    if HAS_SEG and rng.random() < 0.2:
        if "ra" not in have and "rb" not in have:
            slots.append(asm.rda(**addr("a"), read=False))
            have.add("ra_addr")
        d = "mema" if ("ra" in have or "ra_addr" in have) else "memb"
    if r < 0.2:
        slots.append(asm.fma(d, src(), src(), src()))
    elif r < 0.35 and (isinstance(d, int) or "r" + d[-1] in have):
        slots.append(asm.mac(d, src(), src()))
    elif r < 0.45:
        slots.append(asm.mul(d, src(), src()))
    elif r < 0.55:
        slots.append(asm.add(d, src(), src()))
    r = rng.random()
    if r < 0.15:
        slots.append(asm.mov(rng.randrange(n), src()))
    elif r < 0.25:
        slots.append(asm.relu(rng.randrange(n), src()))
    elif r < 0.35:
        slots.append(asm.mask(rng.randrange(n), src(), src()))
    if rng.random() < 0.3:
        slots.append(asm.wra(src(), **addr("a")))
    if rng.random() < 0.3:
        slots.append(asm.wrb(src(), **addr("b")))
    r = rng.random()
    lim = (1 << cfg.addr_bits) - 1
    if r < 0.3:
        f = rng.choice([asm.ar_set, asm.ar_add, asm.ar_stride])
        slots.append(f(rng.randrange(cfg.n_ar), rng.randint(-lim, lim)))
    if rng.random() < 0.3:
        mod = rng.choice([None, None, 2, 4]) if HAS_SEG else None
        k = rng.randrange(min(cfg.nr, mod or cfg.nr))
        slots.append(asm.pred(rng.choice(["col", "row", "diag"]), k, mod=mod,
                              writes=cfg.uop_key[2] and rng.random() < 0.3))
    if rng.random() < 0.2:
        if "rowbus" in have and rng.random() < 0.5:
            slots.append(asm.hout("row", last=rng.random() < 0.5))
        elif "colbus" in have:
            slots.append(asm.hout("col", last=rng.random() < 0.5))
    if rng.random() < 0.05:
        slots.append(asm.raw(mv_msk=rng.randrange(32)) if not any(s.kind == "mask" for s in slots)
                     else asm.nop())
    rng.shuffle(slots)
    return slots


def random_builder_program(cfg, seed):
    rng = random.Random(seed)
    b = Builder(cfg)
    budget = [min(cfg.ucode_depth, 60) - 2]
    names = itertools.count()
    labels = []

    def block(level):
        for _ in range(rng.randint(1, 4)):
            if budget[0] <= 2:
                break
            r = rng.random()
            if r < 0.3 and level < cfg.n_loops and budget[0] > 4:
                budget[0] -= 1
                name = f"L{next(names)}"
                with b.loop(name, rng.randint(1, 9), *_random_slots(rng, cfg)):
                    block(level + 1)
                    budget[0] -= 1
                    b.emit(*_random_slots(rng, cfg))
            elif r < 0.4:
                budget[0] -= 1
                b.agu_base(rng.randrange(cfg.n_agus), rng.randint(-100, 100), *_random_slots(rng, cfg))
            elif r < 0.5:
                budget[0] -= 1
                b.agu_stride(rng.randrange(cfg.n_agus), rng.randrange(cfg.n_loops), rng.randint(-9, 9),
                             *_random_slots(rng, cfg))
            elif r < 0.55 and level == 0:
                budget[0] -= 2
                lab = f"skip{len(labels)}"
                labels.append(lab)
                b.jump(lab, *_random_slots(rng, cfg))
                b.label(lab)
                b.emit(*_random_slots(rng, cfg))
            else:
                budget[0] -= 1
                b.emit(*_random_slots(rng, cfg))

    b.label("top")
    block(0)
    b.halt(*_random_slots(rng, cfg))
    return b.build()


@pytest.mark.parametrize("cfg", [CFG, SMALL, ArchConfig(nr=3, n_loops=8, n_agus=7, fmt="binary32", spad_kib=4)],
                         ids=["default", "small", "nr3_l8_a7_spad"])
def test_random_programs_round_trip(cfg):
    seed0 = 1234
    print(f"seed base {seed0}")
    for k in range(150):
        p = random_builder_program(cfg, seed0 + k)
        text = disassemble(p, cfg)
        try:
            q = assemble(text, cfg)
        except AsmError as e:  # pragma: no cover - diagnostic
            raise AssertionError(f"seed {seed0 + k}: {e}\n{text}") from None
        assert q == p, f"seed {seed0 + k}\n{text}"
        assert disassemble(q, cfg) == text
        assert asm.decode_words(p.words(), cfg) == p


def test_builder_matches_text():
    text = assemble(NEST, CFG)
    b = Builder(CFG)
    b.agu_stride("g0", "j", 1)
    b.agu_stride(0, "i", 100)
    b.agu_stride("g1", "k", 7)
    with b.loop("i", 3):
        with b.loop("j", 4, asm.mov("r1", "r2")):
            b.emit(asm.rda("ar0", agu="g0"))
            with b.loop("k", 2):
                b.emit("wrb [ar1 + g1] = r1")
        with b.loop("j2", 2, level=3):
            b.nop()
    b.halt()
    assert b.build() == text


def test_builder_text_and_equ():
    b = Builder(CFG, origin=4)
    b.equ("acc", "r5")
    b.equ("N", 3)
    b.label("top")
    assert b.emit("rda [ar0 + N]++ | mac acc += mema * r1", asm.pred("col", 1)) == 4
    b.text("loop i N {\n  nop\n}\n")
    b.jump("top")
    p = b.build()
    assert p[0] == Instruction(MicroOp(ra_en=1, ra_off=3, ra_inc=1, fpu_en=1, fpu_a=Src.MEMA, fpu_b=1,
                                       fpu_c=5, fpu_dst=5, pred_mode=PredMode.COL, pred_k=1))
    assert p[1] == Instruction(op=SeqOp.LOOP, target=6, imm=3) and p[3].target == 4


def test_builder_errors_name_the_python_line():
    b = Builder(CFG)
    b.emit(asm.mov(1, 2), asm.relu(2, 3)); line = test_builder_errors_name_the_python_line.__code__.co_firstlineno + 2  # noqa: E702,E501
    b.halt()
    with pytest.raises(AsmError) as e:
        b.build()
    assert e.value.line == line and e.value.slot == 2 and e.value.file == __file__
    assert "conflicts with 'mov r1 = r2'" in str(e.value)
    b = Builder(CFG)
    with pytest.raises(AsmError, match="still open"):
        with b.loop("i", 2):
            b.build()
    with pytest.raises(AsmError, match="not a slot"):
        Builder(CFG).emit(42)
    for bad, msg in [(lambda: asm.rdrv(1), "exactly one"), (lambda: asm.cdrv(1, row=1, diag=1), "exactly one"),
                     (lambda: asm.pred("any"), "unknown predicate"), (lambda: asm.rda(gate="x"), "unknown read gate"),
                     (lambda: asm.hin("up"), "row or col"), (lambda: asm.hout("up"), "row or col"),
                     (lambda: asm.mov("x1", 2), "invalid register"), (lambda: asm.mov(1, "r99"), "invalid source"),
                     (lambda: asm.mov(1, True), "invalid source"), (lambda: asm.rda(ar="a1"), "address register"),
                     (lambda: asm.rda(agu="x1"), "invalid address generator")]:
        with pytest.raises(AsmError, match=msg):
            bad()


# ---------------------------------------------------------------------------------------
# errors: (source, line, message regex); the program gets "halt" appended when it
# does not end with one
# ---------------------------------------------------------------------------------------
ERRORS = [
    # tokens and syntax
    ("nop $", 1, r"unexpected character '\$'"),
    ("rda [ar0 + 0x_]", 1, r"invalid number '0x_'"),
    ("frob r1", 1, r"unknown operation 'frob'"),
    ("mov r1 =", 1, r"unexpected end of slot: expected a source operand"),
    ("mov r1 r2", 1, r"expected '=', got 'r2'"),
    ("mov r1 = r2 r3", 1, r"unexpected 'r3' at the end of the slot"),
    ("mov r1 = r2 |", 1, r"continuation with no next line"),
    ("mov r1 = r2 | | nop", 1, r"empty slot"),
    ("mov r1 = 2", 1, r"unknown source operand '2'"),
    ("mov r1 = foo", 1, r"unknown source operand 'foo'"),
    ("mov r1 = r16", 1, r"register r16 does not exist"),
    ("mov x = r1", 1, r"expected a destination register r0..r15, got 'x'"),
    ("mov r20 = r1", 1, r"register r20 does not exist"),
    ("mask r1 = r2 r3", 1, r"expected 'if'"),
    ("mac r1 = r2 * r3", 1, r"expected '\+=', got '='"),
    ("add r1 = r2 * r3", 1, r"expected '\+', got '\*'"),
    ("@any=1", 1, r"unknown predicate @any"),
    ("@col 1", 1, r"expected '=', got '1'"),
    ("rdrv r1 @row=1", 1, r"rdrv selects its driver with @col=k or @diag=k, not @row"),
    ("cdrv r1 @col=1", 1, r"cdrv selects its driver with @row=k or @diag=k, not @col"),
    ("rdrv r1 col=1", 1, r"expected @col=k or @diag=k"),
    ("rda ar0", 1, r"expected '\[' \(an address"),
    ("rda [g0 + 1]", 1, r"the address needs an address register"),
    ("rda [ar0 + ar1]", 1, r"an address has one address register"),
    ("rda [ar0 + g0 + g1]", 1, r"at most one address generator"),
    ("rda [ar0 - g0]", 1, r"cannot subtract g0"),
    ("rda [- ar0]", 1, r"cannot subtract ar0"),
    ("rda [ar0 3]", 1, r"expected '\+', '-' or '\]' in the address"),
    ("rda [ar0] gate=some", 1, r"unknown read gate 'some'"),
    ("rda [ar0 + N]", 1, r"undefined constant 'N'"),
    ("rda [ar0 + 4/0]", 1, r"division by zero"),
    ("rda [ar0 + (1 << -1)]", 1, r"negative shift count"),
    ("rda [ar0 + (1 + 2]", 1, r"expected '\)'"),
    ("wra [ar0] r1", 1, r"expected '=', got 'r1'"),
    ("ar0 * 3", 1, r"expected '=', '\+=' or '-=' after ar0"),
    ("ar0 = )", 1, r"expected a number, got '\)'"),
    ("cdrv r1 @row=4", 1, r"column-bus driver index 4 out of range 0..3"),
    ("hout up", 1, r"hout direction must be row or col, got 'up'"),
    ("stride r0 = 1", 1, r"expected an address register, got 'r0'"),
    ("hin up", 1, r"hin direction must be row or col, got 'up'"),
    ("hout row first | rdrv r0 @col=0", 1, r"unexpected 'first'"),
    ("raw", 1, r"raw needs field=value pairs"),
    ("raw mv_msk=1 mv_msk=2", 1, r"raw sets mv_msk twice"),
    ("agu g0 += 3", 1, r"expected '=' or 'stride'"),
    ("agu x0 = 3", 1, r"expected an address generator g0..g6, got 'x0'"),
    ("jump 3", 1, r"expected a label, got '3'"),
    (".org 5", 1, r"unknown directive '.org'"),
    (".equ", 1, r".equ needs a name and a value"),
    (".equ N", 1, r".equ needs a name and a value"),
    (".equ N =", 1, r".equ N has no value"),
    (".equ N 1\n.equ N 2", 2, r"duplicate .equ 'N'"),
    (".equ r3 5", 1, r"reserved name 'r3'"),
    (".equ loop 5", 1, r"reserved name 'loop'"),
    (".equ A B", 1, r"undefined constant or operand 'B'"),
    (".equ A r1\nar0 = A", 2, r"'A' is an operand alias \(r1\), not a number"),
    ("nop }", 1, r"'}' must be on a line of its own"),
    ("{", 1, r"'\{' without a loop"),
    ("nop {", 1, r"'\{' without a loop slot on the line"),
    ("loop i 3", 1, r"a loop line must end with '\{'"),
    ("loop i 3 { nop", 1, r"unexpected '\{' \('\{' must end a loop line\)"),
    ("mov r1 = r2 : nop", 1, r"unexpected ':'"),
    ("loop level 3 {\nnop\n}", 1, r"'level' is reserved"),
    # structure
    ("}", 1, r"unbalanced '}': no loop is open"),
    ("loop i 3 {\nnop", 1, r"loop 'i' opened on line 1 is never closed"),
    ("loop i 3 {\n}", 1, r"loop 'i' has an empty body"),
    ("loop i 3 {\nnop\nhalt\n}", 3, r"loop 'i' \(line 1\) ends on a halt"),
    ("x: loop i 3 {\nnop\njump x\n}", 3, r"loop 'i' \(line 1\) ends on a jump"),
    ("loop i 0 {\nnop\n}", 1, r"loop 'i': trip count 0 out of range 1..65535"),
    ("loop i 65536 {\nnop\n}", 1, r"trip count 65536 out of range"),
    ("loop i 2 {\nloop i 2 {\nnop\n}\n}", 2, r"loop 'i' is nested inside a loop of the same name"),
    ("loop a 2 {\nloop b 2 {\nloop c 2 {\nloop d 2 {\nloop e 2 {\nnop\n}\n}\n}\n}\n}", 5,
     r"loop nesting deeper than the sequencer's 4 loop levels \(cfg.n_loops\): loop 'e' would need level 4"),
    ("loop a 2 level=4 {\nnop\n}", 1, r"loop level 4 out of range 0..3"),
    ("loop a 2 level=2 {\nloop b 2 level=1 {\nnop\n}\n}", 2,
     r"loop 'b' at level 1 must use a higher level than the enclosing loop 'a' \(level 2\)"),
    ("loop a 2 level=3 {\nloop b 2 {\nnop\n}\n}", 2, r"loop nesting deeper"),
    ("loop a 2 | halt {\nnop\n}", 1, r"halt conflicts with loop \(slot 1\): one loop/agu/jump/halt per instruction"),
    ("x: nop\nx: nop", 2, r"duplicate label 'x' \(first defined on line 1\)"),
    ("jump nowhere", 1, r"undefined label 'nowhere'"),
    ("jump end\nhalt\nend:", 1, r"label 'end' \(line 3\) marks no instruction"),
    ("jump in\nloop i 2 {\nin: nop\nnop\n}", 1,
     r"jump to 'in' enters the body of loop 'i' \(line 2\) from outside"),
    ("nop", 1, None),  # placeholder replaced below (falls off the end)
    ("", 1, r"empty program"),
    ("agu g0 stride q = 1", 1, r"unknown loop 'q' in agu stride"),
    ("loop i 2 {\nnop\n}\nloop a 2 {\nloop i 2 {\nnop\n}\n}\nagu g0 stride i = 1", 9,
     r"loop name 'i' is ambiguous \(levels \[0, 1\]\)"),
    ("agu g0 stride level 4 = 1", 1, r"loop level 4 out of range 0..3"),
    ("agu g4 = 1", 1, r"address generator g4 does not exist \(cfg.n_agus=4\)"),
    ("agu g0 = 4096", 1, r"agu value 4096 out of range -4095..4095 \(an SRAM address, addr_bits=12\)"),
    # fields and operands
    ("mov r1 = r2 | relu r3 = r4", 1, r"'relu r3 = r4' conflicts with 'mov r1 = r2' \(slot 1\): both use the move unit"),
    ("rda [ar0] | rda [ar1]", 1, r"both use the SRAM A read port"),
    ("@col=1 | @row=1", 1, r"both use the predicate"),
    ("hout row | hout col | rdrv r0 @col=0 | cdrv r0 @row=0", 1, r"both use the stream output"),
    ("raw op=1", 1, r"raw cannot set the sequencer op"),
    ("raw bogus=1", 1, r"unknown field 'bogus'"),
    ("x: raw target=3 | jump x", 1, r"'raw target=3' \(slot 1\) sets target, which jump uses"),
    ("raw mv_op=4", 1, r"raw mv_op=4 does not fit in 2 bits"),
    ("raw ra_off=-2049", 1, r"raw ra_off=-2049 does not fit in 12 bits"),
    ("rda [ar0 + 4096]", 1, r"offset 4096 is outside SRAM bank A \(4096 words\): use -4095..4095"),
    ("wrb [ar0 - 4096] = r1", 1, r"offset -4096 is outside SRAM bank B"),
    ("ar0 = 4096", 1, r"address-register immediate 4096 out of range -4095..4095"),
    ("@col=4", 1, r"predicate index 4 out of range 0..3 for a 4x4 core"),
    ("@all writes | wra [ar0] = r1", 1, r"@all writes selects every PE: drop 'writes'"),
    ("rdrv r1 @diag=5", 1, r"row-bus driver index 5 out of range 0..3"),
    ("rda [ar0 + g4]", 1, r"address generator g4 does not exist"),
    ("raw hin=3", 1, r"hin=3 is not a host direction"),
    ("mov r1 = mema", 1, r"source mema needs an SRAM A read \(rda\) in the same instruction"),
    ("mul r1 = r2 * memb | rda [ar0]", 1, r"source memb needs an SRAM B read \(rdb\)"),
    ("mov r1 = row", 1, r"source row: nothing drives the row bus in this instruction"),
    ("wra [ar0] = col", 1, r"source col: nothing drives the column bus"),
    ("rdrv row @col=0 | hin row", 1, r"a bus driver cannot forward a bus \(row\)"),
    ("cdrv row @row=0 | hin row", 1, r"a bus driver cannot forward a bus \(row\)"),
    ("hin row | rdrv r1 @col=0", 1, r"row bus conflict: hin/rin row and rdrv drive it in the same instruction"),
    ("hin col | cdrv r1 @row=0", 1, r"column bus conflict: hin/rin col and cdrv"),
    ("rda [ar0] gate=rdrv", 1, r"gate=rdrv reads in no PE: this instruction has no rdrv"),
    ("rdb [ar0] gate=cdrv", 1, r"gate=cdrv reads in no PE: this instruction has no cdrv"),
    ("hout row", 1, r"hout row: nothing drives the row bus"),
    ("hout col last | rdrv r1 @col=0", 1, r"hout col: nothing drives the column bus"),
    ("raw hlast=1", 1, r"hlast without hout"),
    ("raw fpu_en=1 fpu_a=21", 1, r"invalid source code 21 in fpu_a"),
]
ERRORS = [e for e in ERRORS if e[2] is not None] + [
    ("nop", 1, r"the program falls off its end: the last instruction must be halt or jump"),
    ("loop i 2 {\nnop\n}", 2, r"the program falls off its end"),
]
# sources taken as they are (no "halt" appended)
AS_IS = {"continuation with no next line", "marks no instruction", "empty program", "falls off its end"}

SMALL_ERRORS = [  # SMALL: nr=2, n_regs=8, n_ar=2, banks 256/512, ucode 16, 3 loops, 2 AGUs
    ("mov r8 = r1", 1, r"register r8 does not exist \(cfg.n_regs=8\)"),
    ("mov r1 = r9", 1, r"register r9 does not exist \(cfg.n_regs=8\)"),
    ("rda [ar2]", 1, r"address register ar2 does not exist \(cfg.n_ar=2\)"),
    ("raw ra_inc=1 ra_ar=3", 1, r"address register ar3 does not exist"),
    ("ar3 += 1", 1, r"address register ar3 does not exist"),
    ("rda [ar0 + 256]", 1, r"offset 256 is outside SRAM bank A \(256 words\): use -255..255"),
    ("rdb [ar0 + 511]", 1, None),
    ("@row=2", 1, r"predicate index 2 out of range 0..1 for a 2x2 core"),
    ("agu g2 = 0", 1, r"address generator g2 does not exist \(cfg.n_agus=2\)"),
    ("loop i 4096 {\nnop\n}", 1, r"trip count 4096 out of range 1..4095 \(cfg.loop_bits=12\)"),
    ("loop a 2 {\nloop b 2 {\nloop c 2 {\nloop d 2 {\nnop\n}\n}\n}\n}", 4, r"deeper than the sequencer's 3"),
    ("nop\n" * 16, 17, r"program does not fit in the microcode: instruction 17 is at address 16"),
]


def _with_halt(src):
    return src if src.rstrip().endswith(("halt", "jump x", "jump nowhere")) or "falls" in src else src + "\nhalt"


@pytest.mark.parametrize("src,line,msg", ERRORS, ids=[e[2][:50] for e in ERRORS])
def test_error_messages(src, line, msg):
    text = src if any(k in msg for k in AS_IS) else src + "\nhalt"
    with pytest.raises(AsmError) as e:
        assemble(text, CFG)
    assert re.search(msg, e.value.msg), e.value
    if msg == "empty program":
        assert e.value.line is None
        return
    assert e.value.line == line, e.value
    assert str(e.value).startswith(f"line {line}")


@pytest.mark.parametrize("src,line,msg", SMALL_ERRORS, ids=[str(e[2])[:50] for e in SMALL_ERRORS])
def test_error_messages_small_config(src, line, msg):
    text = src + "halt" if src.endswith("\n") else src + "\nhalt"
    if msg is None:
        assemble(text, SMALL)
        return
    with pytest.raises(AsmError) as e:
        assemble(text, SMALL)
    assert re.search(msg, e.value.msg), e.value
    assert e.value.line == line, e.value


def test_error_positions_columns_slots_and_file():
    line = "  mov r1 = r2 |   wra [ar0] = r1 | mul r1 = mema * 1"
    with pytest.raises(AsmError) as e:
        assemble(f"nop\n{line}\nhalt", CFG, file="k.s")
    err = e.value
    col = line.index("mul") + 1
    assert (err.line, err.col, err.slot, err.file) == (2, col, 3, "k.s")
    assert str(err).startswith(f"k.s:2:{col} (slot 3): source mema needs")
    with pytest.raises(AsmError) as e:       # a slot on a continuation line
        assemble("nop |\n   mov r1 = mema\nhalt", CFG)
    assert (e.value.line, e.value.col, e.value.slot) == (2, 4, 2)
    with pytest.raises(AsmError) as e:       # token column
        assemble("mov r1 = bogus\nhalt", CFG)
    assert (e.value.line, e.value.col, e.value.slot) == (1, 10, 1)


def test_assembler_origin_errors():
    with pytest.raises(AsmError, match="origin 16 is outside"):
        assemble("halt", SMALL, origin=16)
    with pytest.raises(AsmError, match="does not fit"):
        assemble("nop\nhalt", SMALL, origin=15)


# ---------------------------------------------------------------------------------------
# disassembler corner cases
# ---------------------------------------------------------------------------------------
def test_disassembler_raw_fields_and_levels():
    prog = [Instruction(MicroOp(mv_op=MvOp.MOV, mv_src=1, mv_dst=2, mv_msk=7, fpu_a=3, ra_inc=1, ra_ar=1),
                        ag_wb=2, lvl=1),
            Instruction(op=SeqOp.AGU_STRIDE, agu=1, lvl=3, imm=LM),
            Instruction(op=SeqOp.LOOP, lvl=2, target=3, imm=5),
            Instruction(op=SeqOp.HALT, uop=None) if False else Instruction(),
            Instruction(op=SeqOp.HALT)]
    text = disassemble(prog, CFG)
    first = text.splitlines()[0].split(";")[0].strip().split(" | ")
    assert first[:2] == ["rda [ar1]++ noread", "mov r2 = r1"] and first[2].startswith("raw ")
    assert sorted(first[2].split()[1:]) == sorted("mv_msk=7 fpu_a=3 ag_wb=2 lvl=1".split())
    assert "agu g1 stride level 3 = -1" in text and "loop k 5 level=2 {" in text
    assert assemble(text, CFG) == prog


@pytest.mark.parametrize("prog,msg", [
    ([Instruction(op=SeqOp.LOOP, target=0, imm=2), Instruction(op=SeqOp.HALT)], "empty or outside"),
    ([Instruction(op=SeqOp.LOOP, target=5, imm=2), Instruction(op=SeqOp.HALT)], "empty or outside"),
    ([Instruction(op=SeqOp.LOOP, target=2, imm=2), Instruction(op=SeqOp.LOOP, lvl=1, target=3, imm=2),
      Instruction(), Instruction(), Instruction(op=SeqOp.HALT)], "overlaps the end"),
    ([Instruction(op=SeqOp.LOOP, lvl=1, target=2, imm=2), Instruction(op=SeqOp.LOOP, lvl=1, target=2, imm=2),
      Instruction(), Instruction(op=SeqOp.HALT)], "not above the enclosing"),
    ([Instruction(op=SeqOp.JUMP, target=9)], "jump target 9 is outside"),
    ([Instruction(op=7), Instruction(op=SeqOp.HALT)], "sequencer op 7 has no assembly form"),
])
def test_disassembler_errors(prog, msg):
    with pytest.raises(AsmError, match=msg):
        disassemble(prog, CFG)


def test_disassembler_level_beyond_n_loops():
    with pytest.raises(AsmError, match="loop level 3 >= cfg.n_loops=3"):
        disassemble([Instruction(op=SeqOp.LOOP, lvl=3, target=1, imm=2), Instruction(),
                     Instruction(op=SeqOp.HALT)], SMALL)


# ---------------------------------------------------------------------------------------
# microcode files
# ---------------------------------------------------------------------------------------
def test_hex_files_round_trip_atomically(tmp_path):
    p = assemble(NEST, CFG)
    f = asm.write_hex(tmp_path / "sub" / "prog.hex", p, CFG)
    lines = f.read_text().splitlines()
    digits = (asm.instr_layout(CFG).size + 3) // 4
    assert len(lines) == len(p) and all(len(x) == digits for x in lines)
    assert [int(x, 16) for x in lines] == p.words()
    assert asm.read_hex(f, CFG) == p.words()
    assert asm.decode_words(asm.read_hex(f, CFG), CFG) == p
    assert [x.name for x in f.parent.iterdir()] == ["prog.hex"]   # no temporary left behind
    f.write_text("// header\n" + f.read_text() + "\n; trailing comment\n# another\n")
    assert asm.read_hex(f, CFG) == p.words()


def test_hex_file_errors(tmp_path):
    f = tmp_path / "bad.hex"
    f.write_text("00\nxyz\n")
    with pytest.raises(AsmError, match=r"invalid hex word 'xyz'") as e:
        asm.read_hex(f, CFG)
    assert e.value.line == 2 and e.value.file == str(f)
    f.write_text("1" + "0" * ((asm.instr_layout(CFG).size + 3) // 4) + "\n")
    bits = asm.instr_layout(CFG).size
    with pytest.raises(AsmError, match=f"does not fit in {bits} bits") as e:
        asm.read_hex(f, CFG)
    assert e.value.line == 1
    f.write_text("0\n" * 17)
    with pytest.raises(AsmError, match="more than ucode_depth=16 words") as e:
        asm.read_hex(f, SMALL)
    assert e.value.line == 17


def test_command_line(tmp_path, capsys):
    src = tmp_path / "p.s"
    src.write_text(NEST)
    out = tmp_path / "p.hex"
    assert asm.main([str(src), "-o", str(out)]) == 0
    assert "instructions ->" in capsys.readouterr().out
    assert asm.read_hex(out, CFG) == assemble(NEST, CFG).words()
    assert asm.main([str(out), "--disasm"]) == 0
    assert assemble(capsys.readouterr().out, CFG) == assemble(NEST, CFG)
    src.write_text("nop\nbogus\n")
    assert asm.main([str(src)]) == 1
    assert f"{src}:2:1" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# the language reference: every asm block assembles; the GEMV example computes GEMV
# ---------------------------------------------------------------------------------------
DOC = Path(__file__).resolve().parents[2] / "docs" / "isa.md"


def _doc_blocks():
    return re.findall(r"```asm\n(.*?)```", DOC.read_text(), re.S)


@needs_seg
def test_every_segment_doc_example_assembles():
    blocks = re.findall(r"```asm-seg\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 3
    for text in blocks:
        p = assemble(text, CFG)
        assert assemble(disassemble(p, CFG), CFG) == p


def test_every_doc_example_assembles():
    blocks = _doc_blocks()
    assert len(blocks) >= 12
    for text in blocks:
        p = assemble(text, CFG)
        assert assemble(disassemble(p, CFG), CFG) == p


def test_gemv_example_is_bit_exact_on_the_pe_model():
    np = pytest.importorskip("numpy")
    from pe import fp_golden
    from pe.pe_model import PEModel

    src = next(b for b in _doc_blocks() if b.startswith("; gemv.s"))
    L, J, B, Y = 4, 16, 3, 1024
    p = assemble(src, CFG)
    m = SequencerModel(CFG)
    m.load(p)
    issued = m.run()
    assert len(issued) == 3 + B * (4 * J + 6) + 1
    rng = np.random.default_rng(7)
    fmt = CFG.fmt
    W = rng.uniform(-2, 2, (B, J, L)).astype(np.float16).view(np.uint16)
    x = rng.uniform(-2, 2, J).astype(np.float16).view(np.uint16)
    pe = PEModel(CFG, 0, 0)     # column 0: the PE that drives x on its row bus
    pe.mem_a[:B * J * L] = [int(v) for v in W.reshape(-1)]
    pe.mem_b[:J] = [int(v) for v in x]
    for it in issued:
        pe.step(it.uop)
    for _ in range(CFG.fpu_latency):
        pe.step(0)
    acc = np.full((B, L), fmt.neg_zero, dtype=np.uint16)
    for j in range(J):
        acc = fp_golden.mac_bits(fmt, W[:, j, :], np.broadcast_to(x[j], (B, L)), acc)
    got = np.array(pe.mem_b[Y:Y + B * L], dtype=np.uint16).reshape(B, L)
    assert (got == acc).all()


def test_layout_without_optional_fields(monkeypatch):
    """Older micro-op layouts (no segments, no SRAM write-back): plain forms still work,
    the new forms name the missing field."""
    import copy

    cx = copy.copy(asm._ctx(CFG))
    drop = ("pred_seg", "rdrv_seg", "cdrv_seg", "fpu_wb")
    cx.uop = {k: v for k, v in cx.uop.items() if k not in drop}
    cx.widths = {k: v for k, v in cx.widths.items() if k not in drop}
    monkeypatch.setattr("sw.asm.encode._ctx", lambda cfg: cx)      # the back end reads the tables
    assert assemble("@col=1 | rdrv r1 @col=0 | mac r2 += row * r1\nhalt", CFG)[0].uop.rdrv_en == 1
    for src, field in [("@col%2=1", "pred_seg"), ("rdrv r1 @col%2=0", "rdrv_seg"),
                       ("fma mema = r1 * r2 + r3 | rda [ar0]", "fpu_wb")]:
        with pytest.raises(AsmError, match=f"this configuration's micro-op has no field {field}"):
            assemble(src + "\nhalt", CFG)


def test_docstring_examples():
    src = asm.__doc__.split("::\n")[1].split("Three entry")[0]
    text = "\n".join(line[4:] for line in src.splitlines())
    assert len(assemble(text, CFG)) == 6
    code = asm.Builder.__doc__.split("::\n")[1].split("Every method")[0]
    ns = {k: getattr(asm, k) for k in asm.__all__}
    ns["cfg"] = CFG
    exec("\n".join(line[8:] for line in code.splitlines()), ns)
    assert assemble(disassemble(ns["prog"], CFG), CFG) == ns["prog"]
