"""``caterpillar tune``: trials on the groups of a small chip with Optuna's sampler and
pruner; bad ranges give one-line errors."""

import pytest

from arch.config import ArchConfig
from arch.errors import InputError
from cli.main import main
from share.tune import tune
from sw.datasets import load_dataset

pytest.importorskip("optuna")
CHIP = ArchConfig.from_dict({"preset": "chip-small"})


def test_trials_share_the_groups_and_report():
    rep = tune(CHIP, (64, 16, 10), load_dataset("digits"), trials=4, group_cores=2, train_samples=48,
               batches=(1, 8), checkpoints=2, log=lambda *_: None)
    recs = rep["records"]
    assert len(recs) == 4 and {r["group"] for r in recs} == {0, 1}
    # a group runs one trial at a time: trials in a group follow each other in chip time
    for g in (0, 1):
        mine = sorted((r for r in recs if r["group"] == g), key=lambda r: r["start_cycle"])
        for a, b in zip(mine, mine[1:]):
            assert b["start_cycle"] == a["start_cycle"] + a["cycles"]
    assert rep["partitioned"]["cycles"] == max(sum(r["cycles"] for r in recs if r["group"] == g) for g in (0, 1))
    assert rep["sequential"]["cycles"] == sum(r["steps"] * r["exclusive_step_cycles"] for r in recs)
    assert 0 <= rep["best"]["accuracy"] <= 1 and 0 <= rep["best"]["accuracy_float64"] <= 1


@pytest.mark.parametrize("kw,msg", [({"lr_range": (0.1, 0.01)}, "learning-rate range"),
                                    ({"batches": (0,)}, "batch sizes"), ({"group_cores": 8}, "power of two")])
def test_bad_ranges(kw, msg):
    with pytest.raises(InputError, match=msg):
        tune(CHIP, (64, 16, 10), load_dataset("digits"), **{"trials": 1, "group_cores": 2, **kw})


def test_cli_bad_range_is_one_line(capsys):
    assert main(["tune", "--lr", "0.3:0.1"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
