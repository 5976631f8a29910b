"""sw.throttle: a step paused between RUNs (phases cut at op boundaries) trains bit for
bit as the compiled one, and counts its waits into the step's cycles."""

import numpy as np
import pytest

from arch.config import PRESETS
from sim.sessions import ChipSession
from sim.step_measure import _check_weights, _golden, _inputs, compile_method
from sw.mlp import MLP
from sw.throttle import Paused, pause, segments
from sw.train import init_weights

CFG = PRESETS["chip-small"]


@pytest.mark.parametrize("method,b", [("sgd", 1), ("mbgd", 4)])
def test_paused_step_is_bit_exact(method, b):
    mlp = MLP((24, 16, 10), "softmax_ce", 0.01, batch=b)
    tp = compile_method(method, CFG, mlp)
    segs = segments(tp)
    if method == "sgd":       # the step takes x and sends its logits itself: no host phase to pause at
        assert tp.host_in and segs[0] == ("step", 0) and not any(g == "host" for g, _ in segs)
    else:
        assert segs[0] == ("host", "in") and ("host", "unload") in segs
    waits = {s: (7 * i) % 40 for i, s in enumerate(segs)}
    for cut_all in (False, True):
        tq = pause(tp, waits, cut_all=cut_all)
        assert isinstance(tq, Paused) and not isinstance(tp, Paused)
        n_ops = sum(len(p.ops) for p in tq.chip_parts())
        assert n_ops == sum(len(p.ops) for p in tp.chip_parts())
        if cut_all:       # a RUN per pause point: every op but those joined to a skewed op (bcast_x)
            assert len(tq.chip_parts()) == sum(1 for g, _ in segs if g != "host")
            assert n_ops - len(tq.chip_parts()) == (2 if method == "sgd" else 0)
        W0 = init_weights(mlp, CFG.fmt, 0)
        sess = ChipSession(CFG, "fast")
        tq.init(sess, W0)
        gold = _golden(method, CFG, mlp, tq, W0)
        rng = np.random.default_rng(1)
        for step in range(2):
            x, t = _inputs(mlp, rng)
            r = tq.run_step(sess, x, t)
            gold.step(x, t)
            _check_weights(tq, sess, gold, f"{method} step {step}")
        assert tq.pause_cycles() == sum(waits.values())
        assert r.cycles + r.host_cycles == tq.step_cycles()
        assert ("pause", "idle", sum(waits.values())) in r.phases


def test_no_waits_changes_nothing_and_bad_points_are_refused():
    mlp = MLP((24, 16, 10), "softmax_ce", 0.01)
    tp = compile_method("sgd", CFG, mlp)
    tq = pause(tp, {})
    assert tq.step_cycles() == tp.step_cycles()
    assert [p.instructions for p in tq.chip_parts()] == [p.instructions for p in tp.chip_parts()]
    with pytest.raises(ValueError, match="no such pause point"):
        pause(tp, {("backward", 0): 5})
    with pytest.raises(ValueError, match="negative"):
        pause(tp, {("step", 0): -1})


@pytest.mark.parametrize("b", [1, 4])
def test_paused_cp_step_is_bit_exact(b):
    """A CP step (batch 1 and minibatch CP) paused before each of its RUNs trains bit for
    bit as the golden CP trainer, and counts its waits into the step's cycles."""
    mlp = MLP((24, 16, 10), "softmax_ce", 0.01, batch=b)
    tp = compile_method("cp", CFG, mlp)
    segs = segments(tp)
    assert segs[0] == ("host", "in") and segs[1] == ("chip", "head") and ("chip", "tail") in segs
    waits = {s: 11 * (i + 1) for i, s in enumerate(segs)}
    tq = pause(tp, waits)
    assert isinstance(tq, Paused) and not isinstance(tp, Paused)
    assert pause(tq, {}).step_cycles() == tp.step_cycles()
    W0 = init_weights(mlp, CFG.fmt, 0)
    sess = ChipSession(CFG, "fast")
    tq.init(sess, W0)
    gold = _golden("cp", CFG, mlp, tq, W0)
    rng = np.random.default_rng(1)
    for step in range(2 * tp.latency_steps() + 1):
        x, t = _inputs(mlp, rng)
        r = tq.run_step(sess, x, t)
        gold.step(x, t)
        _check_weights(tq, sess, gold, f"CP step {step}")
    assert tq.pause_cycles() == sum(waits.values())
    assert r.cycles == tq.step_cycles() == tp.step_cycles() + sum(waits.values())
    assert r.host_cycles == tp.host_cycles()
    assert ("pause", "idle", sum(waits.values())) in r.phases
    with pytest.raises(ValueError, match="no such pause point"):
        pause(tp, {("forward", 0): 5})
