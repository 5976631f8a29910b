"""Chip programs assembled op by op (sw.train_chip_place): each distinct op assembled
once and moved to its address on every core gives the words of assembling each core's
whole program."""

import pytest

from arch.config import PRESETS
from sw.asm import Builder
from sw.mlp import MLP
from sw.train_chip import compile_chip_sgd
from sw.train_chip_mb import compile_chip_mbgd
import sw.train_chip_place as place
from sw.train_chip_place import _relocate


@pytest.mark.parametrize("preset,method,loss", [("chip-small", "sgd", "softmax_ce"), ("chip-small", "sgd", "mse"),
                                                 ("chip-small", "mbgd", "mse"), ("S", "sgd", "softmax_ce")])
def test_op_by_op_equals_whole_program(monkeypatch, preset, method, loss):
    cfg = PRESETS[preset]
    sizes = (64, 64, 64, 10) if preset == "chip-small" else (784, 500, 500, 500, 10)

    def compile_():
        if method == "sgd":
            return compile_chip_sgd(cfg, MLP(sizes, loss, 0.01))
        return compile_chip_mbgd(cfg, MLP(sizes, loss, 0.01, batch=4))

    fast = compile_()
    monkeypatch.setattr(place, "_assemble_ops", lambda *a: None)      # every core's whole program
    whole = compile_()
    assert fast.images == whole.images
    assert [(p.name, p.instructions, p.origin) for ps in fast.parts.values() for p in ps] == \
        [(p.name, p.instructions, p.origin) for ps in whole.parts.values() for p in ps]


def test_relocate_moves_loop_and_jump_targets_only():
    cfg = PRESETS["S"]

    def prog(origin):
        b = Builder(cfg, origin=origin)
        b.spad("rd", 40000)        # a pointer, not an address: not moved
        b.label("top")
        with b.loop("i", 3):
            b.nop()
            b.nop()
        b.jump("top")
        b.nop()
        b.halt()
        return b.build().words()

    assert _relocate(cfg, prog(0), 37) == prog(37)
