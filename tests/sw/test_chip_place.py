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


def test_resident_region_chosen_by_its_loads_and_errors_stay_clear(monkeypatch):
    """The compiler keeps the placement whose step LOADs the fewest beats, the resident
    region's or the one without it (here with the region, at two microcode sizes); a
    region so large that an op has no room beside it is not taken; a program that cannot
    fit the microcode fails with one line."""
    from functools import partial

    import sw.train_chip_mb as tcm
    from sw.ring import RingError
    from sw.train import TrainCompileError

    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=8)
    for depth in (256, 1024):
        cfg = PRESETS["chip-small"].replace(ucode_depth=depth)
        tp = compile_chip_mbgd(cfg, mlp)
        with monkeypatch.context() as m:
            m.setattr(tcm, "_place_parts", partial(tcm._place_parts, resident=False))
            plain = compile_chip_mbgd(cfg, mlp)
        assert any(p.calls for p in tp.chip_parts()) and tp.reload_cycles() < plain.reload_cycles()
    monkeypatch.setattr(place, "RESIDENT_SHARE", 1.0)        # every candidate, whatever room it leaves
    tp = compile_chip_mbgd(PRESETS["chip-small"].replace(ucode_depth=256), mlp)
    assert tp.chip_parts()
    for depth in (32, 64):
        with pytest.raises((TrainCompileError, RingError), match=r"needs \d+ microcode words") as e:
            compile_chip_mbgd(PRESETS["chip-small"].replace(ucode_depth=depth), mlp)
        assert "\n" not in str(e.value)
