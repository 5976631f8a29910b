"""sim.power_cap: the capped schedule and naive duty cycling keep every window under the
cap (checked by running them), the capped one at least as fast; bad caps are refused."""

import pytest

from arch.config import PRESETS
from arch.errors import UsageError
from sim.power_cap import check_cap_args, power_cap
from sim.power_trace import leakage_watts
from sw.mlp import MLP

CFG = PRESETS["chip-small"]
MLP_ = MLP((24, 16, 10), "softmax_ce", 0.01)


def test_capped_and_naive_meet_the_cap():
    res = power_cap(CFG, MLP_, "sgd", window=2000, cap_fraction=0.6)
    cap = res["cap_watts"]
    runs = res["runs"]
    assert runs["uncapped"]["max_window_watts"] > cap
    for name in ("capped", "naive"):
        assert runs[name]["watts"] and max(runs[name]["watts"]) <= cap
        assert runs[name]["step_cycles"] > runs["uncapped"]["step_cycles"]
    assert res["throughput_ratio"] >= 1.0
    assert res["scope"] == "everything" and res["leakage_watts"] == pytest.approx(leakage_watts(CFG, CFG.cores))


def test_bad_caps_are_one_line_errors():
    leak = leakage_watts(CFG, CFG.cores)
    with pytest.raises(UsageError, match="leakage floor"):
        power_cap(CFG, MLP_, "sgd", cap=leak * 0.9, window=2000)
    with pytest.raises(UsageError, match="cannot meet"):
        power_cap(CFG, MLP_, "sgd", cap=leak * 1.05, window=50)
    with pytest.raises(UsageError, match="positive number of watts"):
        check_cap_args(0.0, 100)
    with pytest.raises(UsageError, match="positive number of cycles"):
        check_cap_args(1.0, 0)


@pytest.mark.parametrize("b", [1, 4])
def test_cp_capped_and_naive_meet_the_cap(b):
    """CP (batch 1 and minibatch CP, the softmax on the host between head and tail): every
    window under the cap, every step's weights the golden CP trainer's (run_schedule
    checks them), and the capped schedule at least as fast as duty cycling."""
    mlp = MLP((24, 16, 10), "softmax_ce", 0.01, batch=b)
    res = power_cap(CFG, mlp, "cp", window=2000 if b == 1 else 4000, cap_fraction=0.6 if b == 1 else 0.8)
    cap, runs = res["cap_watts"], res["runs"]
    assert res["method"] == "cp" and runs["uncapped"]["max_window_watts"] > cap
    for name in ("capped", "naive"):
        assert runs[name]["watts"] and max(runs[name]["watts"]) <= cap
        assert runs[name]["step_cycles"] > runs["uncapped"]["step_cycles"]
    assert res["throughput_ratio"] >= 1.0


def test_cp_cap_below_the_floor_is_refused():
    mlp = MLP((24, 16, 10), "softmax_ce", 0.01)
    with pytest.raises(UsageError, match="leakage floor"):
        power_cap(CFG, mlp, "cp", cap=leakage_watts(CFG, CFG.cores) * 0.99, window=2000)
    with pytest.raises(UsageError, match="a RUN cannot stop inside it"):
        power_cap(CFG, mlp, "cp", cap=leakage_watts(CFG, CFG.cores) * 1.05, window=200)
