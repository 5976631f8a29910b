"""Random sequencer programs (microcode words) for the model and RTL tests.

:func:`random_program` builds a seeded random loop-nest program directly as
:class:`~arch.isa.Instruction` words (no assembler involved): nested loops on increasing
levels (several ending on the same instruction, single-instruction bodies), sibling loops
reusing a level, AGU base/stride settings for random levels, forward jumps, host fields,
random micro-op bits with random AGU selectors, and a final ``HALT``. With ``chaos`` it
also mutates some control words (random levels, targets, op codes 6/7, out-of-range
``lvl``/``agu``/selectors, backward jumps, ``LOOP`` on an armed level at its own end): the
model defines every word but a ``LOOP`` at the end of an armed loop, so RTL and model must
still agree. Programs that do not halt within ``max_issued`` instructions, or that execute
such a ``LOOP`` (:class:`sim.seq_model.ProgramError`), are discarded and regenerated, so
every returned program terminates.
"""

from __future__ import annotations

import random

from sim.seq_model import ProgramError, RunawayError, SequencerModel
from arch.isa import AGU_FIELDS, Instruction, SeqOp, instr_layout
from arch.microop import MicroOp

__all__ = ["random_program", "random_uop"]


def random_uop(rng: random.Random, cfg) -> MicroOp:
    """A micro-op with uniformly random bits (the sequencer treats it as opaque)."""
    lay = instr_layout(cfg)
    word = rng.getrandbits(lay["uop"].shape.size)
    return MicroOp.decode(word, *cfg.uop_key)


def _ctl_rand(rng, cfg, ins_ctl):
    """Random AGU selectors and host fields on an instruction's ctl dict."""
    sel_max = (1 << cfg.n_agus.bit_length()) - 1
    for f in AGU_FIELDS:
        if rng.random() < 0.5:
            ins_ctl[f"ag_{f}"] = rng.randint(1, cfg.n_agus)
        elif rng.random() < 0.05:
            ins_ctl[f"ag_{f}"] = rng.randint(0, sel_max)
    if rng.random() < 0.2:
        ins_ctl["hin"] = rng.randint(1, 2)
    if rng.random() < 0.2:
        ins_ctl["hout"] = rng.randint(1, 2)
        ins_ctl["hlast"] = rng.randint(0, 1)


def _gen(cfg, rng, max_len, chaos):
    lvl_max = (1 << max(1, (cfg.n_loops - 1).bit_length())) - 1
    agu_max = (1 << max(1, (cfg.n_agus - 1).bit_length())) - 1
    imm_mask = (1 << cfg.loop_bits) - 1
    prog: list[Instruction] = []

    def plain():
        ctl = {}
        _ctl_rand(rng, cfg, ctl)
        r = rng.random()
        if r < 0.12:
            ctl.update(op=SeqOp.AGU_BASE, agu=rng.randrange(cfg.n_agus), imm=rng.getrandbits(cfg.loop_bits))
        elif r < 0.3:
            ctl.update(op=SeqOp.AGU_STRIDE, agu=rng.randrange(cfg.n_agus), lvl=rng.randrange(cfg.n_loops),
                       imm=rng.choice([rng.getrandbits(cfg.loop_bits), rng.randint(1, 5), imm_mask]))
        prog.append(Instruction(random_uop(rng, cfg), **ctl))

    def block(level, room, weight):
        # emits at least one instruction; returns when done
        n_items = rng.randint(3, 8) if level == 0 else rng.randint(1, 4)
        for _ in range(n_items):
            if len(prog) >= max_len - 3:
                break
            r = rng.random()
            if r < 0.45 and level < cfg.n_loops and len(prog) < max_len - 6:
                lv = rng.randint(level, min(cfg.n_loops - 1, level + (1 if rng.random() < 0.8 else 2)))
                trip = rng.choice([1, 2, 2, 3, 4, 5])
                if weight * trip > 60:
                    trip = max(1, 60 // weight)
                at = len(prog)
                ctl = {}
                _ctl_rand(rng, cfg, ctl)
                prog.append(Instruction(random_uop(rng, cfg), op=SeqOp.LOOP, lvl=lv, imm=trip, **ctl))
                block(lv + 1, room, weight * trip)
                end = len(prog) - 1
                if prog[end].op in (SeqOp.JUMP, SeqOp.HALT):   # a loop must not end on them
                    plain()
                    end += 1
                prog[at].ctl["target"] = end
            elif r < 0.55 and len(prog) < max_len - 6:
                # forward jump over 1..2 plain instructions at this level
                skip = rng.randint(1, 2)
                ctl = {}
                _ctl_rand(rng, cfg, ctl)
                j = len(prog)
                prog.append(Instruction(random_uop(rng, cfg), op=SeqOp.JUMP, **ctl))
                for _ in range(skip):
                    plain()
                prog[j].ctl["target"] = len(prog)
                plain()        # the jump target (keeps the jump from ending a loop body)
            else:
                plain()
        if not prog or prog[-1].op == SeqOp.LOOP:
            plain()

    block(0, max_len, 1)
    prog.append(Instruction(random_uop(rng, cfg), op=SeqOp.HALT))
    if chaos:
        for ins in prog[:-1]:
            r = rng.random()
            if r < 0.05:
                ins.ctl["lvl"] = rng.randint(0, lvl_max)
            elif r < 0.08:
                ins.ctl["agu"] = rng.randint(0, agu_max)
            elif r < 0.10:
                ins.ctl["op"] = rng.choice([6, 7])
            elif r < 0.13 and ins.op == SeqOp.LOOP:
                ins.ctl["target"] = rng.randrange(len(prog))
            elif r < 0.15:
                ins.ctl.update(op=SeqOp.JUMP, target=rng.randrange(len(prog)))
            elif r < 0.17:
                ins.ctl.update(op=SeqOp.LOOP, lvl=rng.randint(0, lvl_max), imm=rng.randint(0, 3),
                               target=rng.randrange(len(prog)))
    return prog


def random_program(cfg, seed: int, *, max_len: int | None = None, max_issued: int = 300,
                   chaos: bool = False, origin: int | None = None):
    """A seeded random terminating program.

    Returns ``(instructions, origin, issued)``: the program is meant to be loaded at
    microcode address ``origin`` and started there; ``issued`` is the model's issued list.
    """
    rng = random.Random(seed)
    max_len = max_len or min(cfg.ucode_depth, 48)
    model = SequencerModel(cfg)
    for _ in range(1000):
        prog = _gen(cfg, rng, max_len, chaos)
        org = origin if origin is not None else rng.randint(0, cfg.ucode_depth - len(prog))
        # targets are absolute: relocate
        for ins in prog:
            if ins.op in (SeqOp.LOOP, SeqOp.JUMP):
                ins.ctl["target"] = (ins.ctl.get("target", 0) + org) % cfg.ucode_depth
        model.mem = [0] * cfg.ucode_depth
        model._dec = [None] * cfg.ucode_depth
        model.load(prog, org)
        try:
            issued = model.run(org, max_instructions=max_issued)
        except (RunawayError, ProgramError):
            continue
        return prog, org, issued
    raise RuntimeError(f"could not generate a terminating program (seed {seed})")
