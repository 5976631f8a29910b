"""Random valid core programs for the differential tests of the fast model.

:func:`random_case` builds, from a seed, a complete core job: microcode words (loops on
several levels, AGU bases and strides, forward jumps, host input/output, random valid
micro-ops over the whole ISA), the host data beats its ``hin`` instructions consume,
and a random initial architectural state (register files, both SRAM banks, address and
stride registers) that the test preloads into both models.

Three styles (picked by the seed, or forced):

``random``  every micro-op drawn over the whole ISA (like ``tests/benches/pe_programs.py``):
            predicates and segments, FMA with write-back to SRAM, moves, segmented
            drivers, gated reads, writes, AR updates; loop structure and control words
            like ``tests/benches/seq_programs.py`` (with ``chaos``: out-of-range levels, op codes
            6/7, LOOPs at odd places - the sequencer model defines every word).
``kernel``  loop nests shaped like the kernels: accumulators (``mac r += a*b`` with
            ``c = dst``) over memory streams and broadcast operands, rank-1 updates
            writing back into SRAM, stores of results a random number of cycles after
            the last MAC (sometimes too early: hazards are part of the semantics),
            reductions over segmented buses, host loads/unloads in loops. Most loop
            bodies are accepted by the loop-level engine; some are not (the fallback).
``mixed``   kernel-shaped loops with random instructions between them.

Every returned program halts within ``max_issued`` instructions (checked with
:class:`sim.seq_model.SequencerModel`; others are regenerated).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from arch.microop import ArOp, FmaWb, Gate, MicroOp, MvOp, PredMode, Src
from sim.seq_model import ProgramError, RunawayError, SequencerModel
from arch.isa import AGU_FIELDS, Instruction, SeqOp

__all__ = ["Case", "random_case", "random_state", "preload", "STYLES", "random_value"]

STYLES = ("random", "kernel", "mixed")


@dataclass
class Case:
    seed: int
    style: str
    words: list
    data: list
    state: dict
    issued: int
    meta: dict = field(default_factory=dict)
    #: beats the ``rin`` instructions consume (programs made with ``ring=True``)
    ring: list = field(default_factory=list)


def random_value(rng: random.Random, fmt) -> int:
    """Mostly moderate numbers; some zeros, infinities, NaNs, subnormals, raw patterns."""
    r = rng.random()
    if r < 0.1:
        return rng.choice([0, fmt.neg_zero, fmt.inf, fmt.sign_mask | fmt.inf, fmt.qnan, fmt.inf | 1,
                           fmt.max_finite, fmt.sign_mask | fmt.max_finite, 1, fmt.sign_mask | 1, 3,
                           fmt.one, fmt.sign_mask | fmt.one])
    if r < 0.17:
        return rng.getrandbits(fmt.width)
    x = rng.uniform(-4.0, 4.0) * 2.0 ** rng.randint(-3, 3)
    return int(fmt.from_float(x))


def random_state(cfg, rng: random.Random) -> dict:
    """Random initial state of every PE: RF, SRAM banks, ARs (small), strides."""
    nr, fmt = cfg.nr, cfg.fmt
    P = nr * nr
    ut = fmt.np_uint
    vals = lambda n: np.array([random_value(rng, fmt) for _ in range(n)], ut)  # noqa: E731
    uniform_ar = rng.random() < 0.6
    ar = np.array([rng.randrange(16) for _ in range(cfg.n_ar)] * P, np.int64).reshape(P, cfg.n_ar)
    if not uniform_ar:
        ar = np.array([rng.randrange(16) for _ in range(P * cfg.n_ar)], np.int64).reshape(P, cfg.n_ar)
    am = (1 << cfg.addr_bits) - 1
    stride = np.array([rng.choice([0, 1, 1, 1, 2, 3, am]) for _ in range(cfg.n_ar)] * P, np.int64).reshape(P, -1)
    return {"rf": vals(P * cfg.n_regs).reshape(P, cfg.n_regs),
            "mem_a": vals(P * cfg.mem_a_words).reshape(P, -1),
            "mem_b": vals(P * cfg.mem_b_words).reshape(P, -1),
            "ar": ar, "stride": stride}


def random_spad(cfg, rng: random.Random, n: int = 32) -> np.ndarray:
    """Random contents of the first ``n`` scratchpad beats, ``[spad_depth, nr]``."""
    sp = np.zeros((cfg.spad_depth, cfg.nr), cfg.fmt.np_uint)
    for a in range(min(n, cfg.spad_depth)):
        sp[a] = [random_value(rng, cfg.fmt) for _ in range(cfg.nr)]
    return sp


def preload(model, state: dict) -> None:
    """Put ``state`` into a :class:`~sim.fast_model.FastModel` or a CoreModel (``state``
    may hold ``spad``, the scratchpad as ``[spad_depth, nr]`` lanes)."""
    from sim.fast_model import FastModel

    if "spad" in state:
        if isinstance(model, FastModel):
            model.state.spad[:] = state["spad"]
        else:
            w = model.cfg.fmt.width
            model.spad = [sum(int(v) << (i * w) for i, v in enumerate(row)) for row in state["spad"]]
    if isinstance(model, FastModel):
        st = model.state
        st.rf[:] = state["rf"]
        st.mem_a[:] = state["mem_a"]
        st.mem_b[:] = state["mem_b"]
        st.ar = state["ar"].copy()
        st.stride = state["stride"].copy()
        return
    nr = model.cfg.nr
    for r in range(nr):
        for c in range(nr):
            p = r * nr + c
            pe = model.pes[r][c]
            pe.rf = [int(v) for v in state["rf"][p]]
            pe.mem_a = [int(v) for v in state["mem_a"][p]]
            pe.mem_b = [int(v) for v in state["mem_b"][p]]
            pe.ar = [int(v) for v in state["ar"][p]]
            pe.stride = [int(v) for v in state["stride"][p]]


class _Gen:
    def __init__(self, cfg, rng: random.Random, style: str, chaos: bool):
        self.cfg, self.rng, self.style, self.chaos = cfg, rng, style, chaos
        self.nr = cfg.nr
        self.am = (1 << cfg.addr_bits) - 1
        self.kmax = 1 << cfg.sel_bits
        self.prog: list[Instruction] = []
        self.srcs = [int(s) for s in list(range(cfg.n_regs)) + [Src.MEMA, Src.MEMB, Src.ROW, Src.COL, Src.ZERO,
                                                                  Src.NZERO, Src.ONE]]
        self.dsrcs = [s for s in self.srcs if s not in (Src.ROW, Src.COL)]
        nreg = cfg.n_regs
        self.acc = list(range(0, min(4, nreg)))
        self.opr = list(range(4, min(8, nreg)))
        self.tmp = list(range(8, nreg))

    # -- micro-op pieces ----------------------------------------------------------------------
    def off(self, v):
        return v & self.am

    def small_off(self):
        r = self.rng
        return self.off(r.randint(-3, 12) if r.random() < 0.9 else r.randrange(1 << self.cfg.addr_bits))

    def pred(self, f, p=0.35):
        r = self.rng
        if r.random() < p:
            mode = r.randrange(1, 4)
            seg = r.choice([0, 0, 0, 1, 2])
            k = r.randrange(min(1 << seg, self.kmax)) if seg else r.randrange(self.nr if r.random() < 0.9 else self.kmax)
            f.update(pred_mode=mode, pred_seg=seg, pred_k=k)
            if self.cfg.uop_key[2] and r.random() < 0.25:
                f["wp_en"] = 1

    def driver(self, f, d, src=None):
        r = self.rng
        seg = r.choice([0, 0, 0, 1, 2]) if self.nr > 1 else 0
        dg = 0 if seg else r.randrange(2)
        k = r.randrange(min(1 << seg, self.kmax)) if seg else r.randrange(self.nr)
        f.update({f"{d}_en": 1, f"{d}_diag": dg, f"{d}_seg": seg, f"{d}_k": k,
                  f"{d}_src": src if src is not None else r.choice(self.dsrcs)})

    def read(self, f, port, gate=None, inc=None):
        r = self.rng
        f.update({f"{port}_en": 1, f"{port}_gate": gate if gate is not None else r.choice([0, 0, 0, 1, 2, 3]),
                  f"{port}_ar": r.randrange(self.cfg.n_ar), f"{port}_off": self.small_off(),
                  f"{port}_inc": int(r.random() < 0.4) if inc is None else inc})

    def write(self, f, port, src):
        r = self.rng
        f.update({f"{port}_en": 1, f"{port}_src": src, f"{port}_ar": r.randrange(self.cfg.n_ar),
                  f"{port}_off": self.small_off(), f"{port}_inc": int(r.random() < 0.3)})

    def arop(self, f):
        r = self.rng
        op = r.randrange(1, 4)
        imm = {ArOp.SET: r.randrange(24), ArOp.STRIDE: r.choice([0, 1, 1, 2, 3, -1]), ArOp.ADD: r.randint(-6, 6)}[op]
        f.update(ar_op=op, ar_idx=r.randrange(self.cfg.n_ar if r.random() < 0.95 else 4), ar_imm=self.off(imm))

    def random_uop(self) -> MicroOp:
        """Any valid micro-op (fields over the whole ISA)."""
        r = self.rng
        f = {}
        self.pred(f, 0.4)
        if r.random() < 0.55:
            c = r.choice(self.srcs) if r.random() < 0.6 else None
            dst = r.randrange(self.cfg.n_regs)
            f.update(fpu_en=1, fpu_a=r.choice(self.srcs), fpu_b=r.choice(self.srcs),
                     fpu_c=dst if c is None else c, fpu_dst=dst, fpu_wb=r.choice([0, 0, 0, 0, 1, 2, 3]))
        if r.random() < 0.45:
            f.update(mv_op=r.randrange(1, 4), mv_src=r.choice(self.srcs), mv_msk=r.choice(self.srcs),
                     mv_dst=r.randrange(self.cfg.n_regs))
        for d in ("rdrv", "cdrv"):
            if r.random() < 0.4:
                self.driver(f, d)
        for p in ("ra", "rb"):
            if r.random() < 0.55:
                self.read(f, p)
            elif r.random() < 0.3:
                f.update({f"{p}_ar": r.randrange(self.cfg.n_ar), f"{p}_off": self.small_off(),
                          f"{p}_inc": int(r.random() < 0.3)})
        for p in ("wa", "wb"):
            if r.random() < 0.3:
                self.write(f, p, r.choice(self.srcs))
        if r.random() < 0.2:
            self.arop(f)
        if self.chaos and r.random() < 0.1:
            # codes the assembler rejects but the hardware defines
            fld = r.choice(["fpu_a", "mv_src", "rdrv_src", "wa_src", "fpu_c"])
            f[fld] = r.choice([20, 23, 27, 31, Src.ROW, Src.COL] + list(range(self.cfg.n_regs, 16)))
            if f.get("rdrv_src") in (Src.ROW, Src.COL):
                f["rdrv_en"] = 1
        return MicroOp(**f)

    # -- kernel-shaped micro-ops ----------------------------------------------------------------
    def operand(self):
        r = self.rng
        return r.choice(self.opr + [int(Src.MEMA), int(Src.MEMB), int(Src.ROW), int(Src.COL), int(Src.ONE)]
                        if self.opr else self.srcs)

    def kernel_uop(self, acc_reg=None) -> MicroOp:
        r = self.rng
        f = {}
        self.pred(f, 0.15)
        kind = r.random()
        if acc_reg is not None or kind < 0.45:
            # MAC into an accumulator, operands from memory / buses / operand registers
            d = acc_reg if acc_reg is not None else r.choice(self.acc)
            a, b = self.operand(), self.operand()
            f.update(fpu_en=1, fpu_a=a, fpu_b=b, fpu_c=d, fpu_dst=d)
            if Src.MEMA in (a, b) or r.random() < 0.5:
                self.read(f, "ra", gate=r.choice([0, 0, 1]), inc=int(r.random() < 0.8))
            if Src.MEMB in (a, b):
                self.read(f, "rb", gate=r.choice([0, 0, 1]), inc=int(r.random() < 0.8))
            if Src.ROW in (a, b) and r.random() < 0.8:
                self.driver(f, "rdrv", src=r.choice(self.opr + [int(Src.MEMB)] if self.opr else self.dsrcs))
                if f["rdrv_src"] == Src.MEMB and "rb_en" not in f:
                    self.read(f, "rb", gate=Gate.RDRV, inc=int(r.random() < 0.5))
            if Src.COL in (a, b) and r.random() < 0.8:
                self.driver(f, "cdrv", src=r.choice(self.opr or self.dsrcs))
        elif kind < 0.6:
            # rank-1 update in SRAM: mem[x] = mem[x] + u * v
            bank = r.choice(["a", "b"])
            port = "ra" if bank == "a" else "rb"
            self.read(f, port, gate=0, inc=int(r.random() < 0.8))
            f[f"{port}_off"] = self.off(r.randint(32, 40))
            me = int(Src.MEMA if bank == "a" else Src.MEMB)
            f.update(fpu_en=1, fpu_a=r.choice(self.opr or self.srcs), fpu_b=r.choice(self.opr + [int(Src.ROW)]
                                                                                   if self.opr else self.srcs),
                     fpu_c=me if r.random() < 0.8 else r.choice(self.opr or self.srcs),
                     fpu_dst=0, fpu_wb=FmaWb.MEMA if bank == "a" else FmaWb.MEMB)
            if f["fpu_b"] == Src.ROW:
                self.driver(f, "rdrv", src=r.choice(self.opr or self.dsrcs))
        elif kind < 0.75:
            # load an operand register from a bus or memory
            dst = r.choice(self.opr or self.acc)
            src = r.choice([int(Src.ROW), int(Src.COL), int(Src.MEMA), int(Src.MEMB)])
            f.update(mv_op=MvOp.MOV if r.random() < 0.8 else r.choice([MvOp.RELU, MvOp.MASK]), mv_src=src,
                     mv_msk=r.choice(self.srcs), mv_dst=dst)
            if src == Src.ROW:
                self.driver(f, "rdrv", src=r.choice([int(Src.MEMA), int(Src.MEMB)] + self.tmp[:2]))
                port = "ra" if f["rdrv_src"] == Src.MEMA else "rb"
                if f["rdrv_src"] in (Src.MEMA, Src.MEMB):
                    self.read(f, port, gate=r.choice([Gate.RDRV, Gate.ALL]), inc=int(r.random() < 0.7))
            elif src == Src.COL:
                self.driver(f, "cdrv", src=r.choice([int(Src.MEMB)] + self.tmp[:2]))
                if f["cdrv_src"] == Src.MEMB:
                    self.read(f, "rb", gate=r.choice([Gate.CDRV, Gate.ALL]), inc=int(r.random() < 0.7))
            else:
                self.read(f, "ra" if src == Src.MEMA else "rb", gate=0, inc=int(r.random() < 0.7))
        elif kind < 0.85:
            # store a result (accumulator or operand) into the upper half of a bank
            src = r.choice(self.acc + self.opr + [int(Src.ROW)])
            port = r.choice(["wa", "wb"])
            self.write(f, port, src)
            f[f"{port}_off"] = self.off(r.randint(40, 60))
            if src == Src.ROW:
                self.driver(f, "rdrv", src=r.choice(self.acc or self.dsrcs), )
        elif kind < 0.93:
            # reduction step over a segmented row bus: sum += row
            seg = r.randint(1, max(1, (self.nr - 1).bit_length()))
            d = r.choice(self.acc)
            f.update(rdrv_en=1, rdrv_seg=seg, rdrv_k=r.randrange(min(1 << seg, self.kmax)), rdrv_src=r.choice(self.acc),
                     fpu_en=1, fpu_a=int(Src.ROW), fpu_b=int(Src.ONE), fpu_c=d, fpu_dst=d,
                     pred_mode=PredMode.COL, pred_seg=seg, pred_k=r.randrange(min(1 << seg, self.kmax)))
        else:
            self.arop(f)
        if r.random() < 0.15 and "ar_op" not in f:
            f.update(ar_op=ArOp.STRIDE, ar_idx=r.randrange(self.cfg.n_ar), ar_imm=self.off(r.choice([1, 1, 2, -1])))
        return MicroOp(**f)

    # -- control --------------------------------------------------------------------------------
    def ctl_rand(self, ctl, host_p=0.12):
        r = self.rng
        for fld in AGU_FIELDS:
            if r.random() < 0.35:
                ctl[f"ag_{fld}"] = r.randint(1, self.cfg.n_agus)
        if self.spad:
            host_p *= 2     # scratchpad programs: more stream slots, half of them sin / sout
        if r.random() < host_p:
            ctl["hin"] = r.randint(1, 2)
            if self.spad and r.random() < 0.5:
                ctl["sin"] = 1
            elif self.ring and r.random() < 0.4:
                ctl["rin"] = 1
        if r.random() < host_p:
            ctl["hout"] = r.randint(1, 2)
            if self.spad and r.random() < 0.5:
                ctl["sout"] = 1
            elif self.ring and r.random() < 0.4:
                ctl["rout"] = 1
            else:
                ctl["hlast"] = r.randint(0, 1)

    def uop(self, in_loop):
        if self.style == "random":
            return self.random_uop()
        if self.style == "kernel" or (in_loop and self.rng.random() < 0.8):
            return self.kernel_uop()
        return self.random_uop()

    def plain(self, in_loop=False):
        r = self.rng
        ctl = {}
        self.ctl_rand(ctl, 0.15 if self.style == "random" else 0.06)
        x = r.random()
        if x < 0.08:
            ctl.update(op=SeqOp.AGU_BASE, agu=r.randrange(self.cfg.n_agus), imm=r.randrange(40))
        elif x < 0.2:
            ctl.update(op=SeqOp.AGU_STRIDE, agu=r.randrange(self.cfg.n_agus), lvl=r.randrange(self.cfg.n_loops),
                       imm=r.choice([1, 1, 2, 3, 4, self.am]))
        elif self.spad and x < 0.3:
            # scratchpad pointers: a few addresses, so reads meet earlier writes
            ctl.update(op=SeqOp.SPAD_PTR, lvl=r.randint(1, 3), imm=r.randrange(min(16, self.cfg.spad_depth)))
        self.prog.append(Instruction(self.uop(in_loop), **ctl))

    def kernel_body(self, level, weight):
        """A loop body with interleaved accumulators: B instructions, MACs into L regs."""
        r = self.rng
        L = r.randint(1, max(1, len(self.acc)))
        B = r.randint(L, L + 3)
        for i in range(B):
            ctl = {}
            self.ctl_rand(ctl, 0.04)
            if i < L and r.random() < 0.85:
                u = self.kernel_uop(acc_reg=self.acc[i])
            else:
                u = self.kernel_uop()
            self.prog.append(Instruction(u, **ctl))
        if level + 1 < self.cfg.n_loops and r.random() < 0.3 and len(self.prog) < self.max_len - 8:
            self.loop(level + 1, weight, kernel=True)

    def loop(self, level, weight, kernel=False):
        r = self.rng
        lv = level if r.random() < 0.85 or self.style != "random" else min(self.cfg.n_loops - 1, level + 1)
        if lv >= self.cfg.n_loops:
            self.plain(True)
            return
        trip = r.choice([1, 2, 3, 4, 5, 8, 12]) if kernel else r.choice([1, 2, 2, 3, 4, 5])
        if weight * trip > self.budget:
            trip = max(1, self.budget // weight)
        at = len(self.prog)
        ctl = {}
        self.ctl_rand(ctl, 0.05)
        # agu strides for this level, set before the loop
        self.prog.append(Instruction(self.uop(True), op=SeqOp.LOOP, lvl=lv, imm=trip, **ctl))
        if kernel:
            self.kernel_body(lv, weight * trip)
        else:
            self.block(lv + 1, weight * trip)
        end = len(self.prog) - 1
        if self.prog[end].op in (SeqOp.JUMP, SeqOp.HALT):
            self.plain(True)
            end += 1
        self.prog[at].ctl["target"] = end

    def block(self, level, weight):
        r = self.rng
        n_items = r.randint(3, 7) if level == 0 else r.randint(1, 4)
        for _ in range(n_items):
            if len(self.prog) >= self.max_len - 4:
                break
            x = r.random()
            if x < 0.4 and level < self.cfg.n_loops and len(self.prog) < self.max_len - 10:
                kernel = self.style != "random" and r.random() < 0.75
                if r.random() < 0.5:
                    ctl = {}
                    self.prog.append(Instruction(self.uop(level > 0), op=SeqOp.AGU_STRIDE,
                                                 agu=r.randrange(self.cfg.n_agus), lvl=min(level, self.cfg.n_loops - 1),
                                                 imm=r.choice([1, 2, 4, self.am]), **ctl))
                self.loop(level, weight, kernel=kernel)
            elif x < 0.48 and len(self.prog) < self.max_len - 6:
                j = len(self.prog)
                ctl = {}
                self.ctl_rand(ctl)
                self.prog.append(Instruction(self.uop(level > 0), op=SeqOp.JUMP, **ctl))
                for _ in range(r.randint(1, 2)):
                    self.plain(level > 0)
                self.prog[j].ctl["target"] = len(self.prog)
                self.plain(level > 0)
            else:
                self.plain(level > 0)
        if not self.prog or self.prog[-1].op == SeqOp.LOOP:
            self.plain(level > 0)

    def generate(self, max_len, budget):
        self.max_len = max_len
        self.budget = budget
        self.prog = []
        self.block(0, 1)
        ctl = {}
        self.ctl_rand(ctl)
        self.prog.append(Instruction(self.uop(False), op=SeqOp.HALT, **ctl))
        if self.chaos:
            r = self.rng
            lvl_max = (1 << max(1, (self.cfg.n_loops - 1).bit_length())) - 1
            for ins in self.prog[:-1]:
                x = r.random()
                if x < 0.04:
                    ins.ctl["lvl"] = r.randint(0, lvl_max)
                elif x < 0.06:
                    ins.ctl["op"] = r.choice([6, 7])
                elif x < 0.08 and ins.op == SeqOp.LOOP:
                    ins.ctl["target"] = r.randrange(len(self.prog))
                elif x < 0.09:
                    ins.ctl.update(op=SeqOp.LOOP, lvl=r.randint(0, lvl_max), imm=r.randint(0, 3),
                                   target=r.randrange(len(self.prog)))
        return self.prog


def random_case(cfg, seed: int, *, style: str | None = None, max_issued: int = 300, chaos: bool | None = None,
                max_len: int | None = None, ring: bool = False, spad: bool = False) -> Case:
    """A seeded random job (see the module doc). ``style`` None: chosen by the seed.
    ``ring``: some stream slots are ring slots (``rin`` / ``rout``; a lone core's ring
    input then comes from :attr:`Case.ring`). ``spad`` (a configuration with a
    scratchpad): more stream slots, half of them scratchpad slots (``sin`` / ``sout``),
    pointer settings among the plain instructions, and random scratchpad contents in
    :attr:`Case.state` (``spad``). Without ``spad`` the programs are the same as before
    the scratchpad existed (the random draws are unchanged)."""
    rng = random.Random(seed)
    style = style or rng.choice(STYLES)
    chaos = (rng.random() < 0.15) if chaos is None else chaos
    max_len = max_len or min(cfg.ucode_depth, 40)
    model = SequencerModel(cfg)
    gen = _Gen(cfg, rng, style, chaos)
    gen.ring = ring
    if spad and not cfg.spad_kib:
        raise ValueError("spad=True needs a configuration with a scratchpad (cfg.spad_kib > 0)")
    gen.spad = spad
    for _ in range(200):
        prog = gen.generate(max_len, budget=max(8, max_issued // 4))
        model.mem = [0] * cfg.ucode_depth
        model._dec = [None] * cfg.ucode_depth
        words = [ins.encode(cfg) for ins in prog]
        model.load(words, 0)
        try:
            issued = model.run(0, max_instructions=max_issued)
        except (RunawayError, ProgramError):
            continue
        fmt = cfg.fmt

        def beats(n):
            out = []
            for _ in range(n):
                beat = 0
                for lane in range(cfg.nr):
                    beat |= random_value(rng, fmt) << (lane * fmt.width)
                out.append(beat)
            return out

        data = beats(sum(1 for i in issued if i.hin and not i.rin and not i.sin))
        ring_data = beats(sum(1 for i in issued if i.hin and i.rin))
        state = random_state(cfg, rng)
        meta = {"chaos": chaos, "len": len(words), "ring": ring}
        if spad:
            state["spad"] = random_spad(cfg, rng)
            meta["spad"] = True
        return Case(seed, style, words, data, state, len(issued), meta, ring_data)
    raise RuntimeError(f"could not generate a terminating program (seed {seed})")
