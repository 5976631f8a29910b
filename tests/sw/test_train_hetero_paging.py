"""Panels paged from the scratchpad in a split heterogeneous step
(sw/train_hetero_paging.py): small chips whose panels do not fit their cores' PE memories,
weights bit for bit against GoldenHeteroSplit after every step, cycles as the compiler
predicts, the per-cycle engine counter for counter with the fast one, and the one-line
error when the panels fit neither."""

from __future__ import annotations

import pytest

from arch.hetero import HETERO_PRESETS, CoreGroup, HeteroConfig
from perf.hybrid_run import run_placement
from perf.schedule import model_for
from perf.schedule_split import predict_split
from sw.mlp import MLP
from sw.train_hetero_place import placement_from_arg
from sw.train_hetero_split import compile_split
from sw.train_host import TrainCompileError

TINY = HETERO_PRESETS["hetero-tiny"]
#: hetero-tiny with 4 KiB scratchpads on its 2 x 2 cores (1024 beats: 512 words per PE)
TINY_SPAD = HeteroConfig((CoreGroup(2, TINY.group_cfgs[0].replace(spad_kib=4)), TINY.groups[1]))


@pytest.mark.parametrize("chip, sizes, place, paged", [
    (TINY, (40, 40, 9, 5), "0:2,0:2,0", {0: 0, 1: 0}),             # layer 0 on both cores, one page after another
    (TINY, (12, 40, 40, 5), "0:2,0:2,0", {1: 1}),                  # a hidden layer: W^T d added page by page
    (TINY_SPAD, (12, 20, 40, 48), "0:2,0:2,0", {1: 2}),            # the output layer, its last page resident
])
def test_paged_bit_exact_and_cycles(chip, sizes, place, paged):
    mlp, pl = MLP(sizes, "mse", 0.05), placement_from_arg(place)
    prog = compile_split(chip, mlp, pl)
    assert {c: l for c, d in prog.spad.items() for l in d} == paged
    pred = predict_split(chip, mlp, pl, *model_for(chip))
    assert pred.fits
    r = run_placement(chip, mlp, pl, steps=2, predicted=pred.to_dict())   # raises unless bit for bit, cycles
    assert r["cycles"] == prog.step_cycles()
    assert abs(r["model_cycles_err"]) < 0.08 and abs(r["model_energy_err"]) < 0.10
    assert any(v for c in r["step_counters"] for k, v in c.items() if k.startswith("spad_rd"))


def test_paged_engines_agree():
    mlp, pl = MLP((12, 20, 40, 48), "mse", 0.05), placement_from_arg("0:2,0:2,0")
    fast, cyc = (run_placement(TINY_SPAD, mlp, pl, steps=1, engine=e) for e in ("fast", "cycle"))
    assert fast["step_counters"] == cyc["step_counters"] and fast["cycles"] == cyc["cycles"]


def test_too_large_for_memories_and_scratchpad():
    with pytest.raises(TrainCompileError) as e:
        compile_split(TINY, MLP((12, 16, 36, 36), "mse", 0.05), placement_from_arg("0:2,0:2,0"))
    msg = str(e.value)
    assert "\n" not in msg and "words per PE" in msg and "scratchpad" in msg
