"""Continuous propagation with two layers on one core (:mod:`sw.train_cp_shared`) on the
chip RTL: a sample through the pipeline and out (filling and draining), recorded on the
per-cycle model against the golden trainer, replayed on the RTL (Icarus); every beat and
counter equal to the per-cycle model's, the weights unloaded from the RTL (both layers'
panels of the shared core in one phase) equal to the golden's."""

from __future__ import annotations

from sw.mlp import MLP
from tests.sw.test_train import _seed
from tests.sw.test_train_cp import CHIP4, rtl_replay, run_cp


def test_cp_two_layers_on_one_core_rtl(require_simulator):
    require_simulator("icarus")
    run = run_cp(CHIP4, MLP((5, 6, 4, 3), "mse", 0.125), 1, "model", _seed(), record=True, shared=(2,))
    tp = run[0]
    assert tp.shared == (2,) and tp.core_layers[tp.out_core] == [(1, 0), (2, 0)]
    assert not {"a2", "d1"} & set(tp.chains.starts)                  # no chains inside the core
    rtl_replay(CHIP4, *run, "icarus", "chip-cp4")
