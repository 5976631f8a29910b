"""The float64 continuous-propagation baselines (sw/golden_train_cp.py ``Float64CP``,
sw/golden_train_cp_mb.py ``Float64MBCP``): the pipeline schedule of the golden models
(``GoldenChipCP``, ``GoldenChipMBCP``) run at binary32, where the only difference left is
rounding, so the weights agree to a tight relative tolerance; a wrong schedule (SGD, an
off-by-one history slot) misses it by orders of magnitude. Corner cases (draining,
bubbles, the forward of ``predict``) and ``train_cp``'s report of the baseline."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.sw.test_train import _seed
from arch.config import PRESETS
from sw.golden_train import Float64SGD
from sw.golden_train_cp import Float64CP, GoldenChipCP, cp_forward
from sw.golden_train_cp_mb import Float64MBCP, GoldenChipMBCP
from sw.golden_train_mb import Float64MBGD
from sw.mlp import MLP
from sw.train import init_weights

TINY32 = PRESETS["chip-tiny"].replace(fmt="binary32")
SMALL32 = PRESETS["chip-small"].replace(fmt="binary32")
#: relative tolerance of the weights: binary32 rounding over a few hundred steps stays
#: near 1e-6; a different schedule is off by 1e-2 or more
RTOL = 2e-5


def _rel(got, want) -> float:
    """The largest weight difference over the layers, relative to the layer's largest
    weight (inf when ``got`` has diverged)."""
    if not all(np.all(np.isfinite(g)) for g in got):
        return np.inf
    return max(float(np.max(np.abs(g - w)) / np.max(np.abs(w))) for g, w in zip(got, want))


def _data(rng, mlp, n):
    """``n`` samples (minibatches): inputs, targets (softmax: class indices)."""
    shape = (n, mlp.n_in) if mlp.batch == 1 else (n, mlp.n_in, mlp.batch)
    X = rng.normal(size=shape)
    if mlp.loss == "softmax_ce":
        return X, rng.integers(0, mlp.n_out, n if mlp.batch == 1 else (n, mlp.batch))
    tshape = (n, mlp.n_out) if mlp.batch == 1 else (n, mlp.n_out, mlp.batch)
    return X, rng.normal(size=tshape) * 0.5


def _pipeline(cfg, mlp, n, seed, models, holes=()):
    """``n`` samples through the pipeline and out again (``n + 2L`` steps) into every
    model of ``models`` (``name -> model`` with ``step(x, t)``); the samples in
    ``holes`` enter as None (bubbles, no target). Returns ``{name: [loss, ...]}`` (the
    steps with a loss) and the samples."""
    X, T = _data(np.random.default_rng(seed), mlp, n)
    L = mlp.n_layers
    losses = {k: [] for k in models}
    for s in range(n + 2 * L):
        x = X[s] if s < n and s not in holes else None
        t = T[s - L] if 0 <= s - L < n and s - L not in holes else None
        for k, m in models.items():
            r = m.step(x, t)
            assert (r["loss"] is None) == (t is None), (k, s)
            if r["loss"] is not None:
                losses[k].append(r["loss"])
    return losses, X, T


def _floats(cfg, gold):
    return [cfg.fmt.to_float(W) for W in gold.weights()]


def _models(cfg, mlp, seed):
    """The golden pipeline at ``cfg`` and the float64 CP from the same initial weights."""
    W0 = init_weights(mlp, cfg.fmt, seed)
    Wf = [cfg.fmt.to_float(W) for W in W0]
    if mlp.batch > 1:
        return GoldenChipMBCP(cfg, mlp, W0), Float64MBCP(mlp, Wf), Wf
    return GoldenChipCP(cfg, mlp, W0), Float64CP(mlp, Wf), Wf


class _OffByOne(list):
    """A history whose reads return the next slot: the update uses the input of the
    sample one step later (a wrong schedule)."""

    def __getitem__(self, i):
        return list.__getitem__(self, (i + 1) % len(self))


class _Wrong:
    """``model`` with its history read one slot off (it may diverge: no warnings)."""

    def __init__(self, model):
        model.hist = [_OffByOne(h) for h in model.hist]
        self.model = model

    def step(self, x, t):
        with np.errstate(all="ignore"):
            return self.model.step(x, t)

    def weights(self):
        return self.model.weights()


#: batch-1 learning rates small enough that training on random data does not turn
#: chaotic (amplifying rounding differences) nor diverge; minibatch CP uses twice them
CASES = [(TINY32, (6, 5, 3), "mse", 0.0625), (TINY32, (5, 7, 4), "softmax_ce", 0.125),
         (SMALL32, (9, 14, 7, 4), "softmax_ce", 0.125), (SMALL32, (9, 14, 7, 4), "mse", 0.03125)]
IDS = ["tiny-mse", "tiny-smx", "small-smx", "small-mse"]


@pytest.mark.parametrize("cfg,sizes,loss,lr", CASES, ids=IDS)
def test_float64_cp_has_the_golden_schedule(cfg, sizes, loss, lr):
    """Batch 1: after every sample has drained, the float64 CP's weights equal the binary32
    golden pipeline's to ``RTOL`` and its losses to 1e-4; float64 SGD on the same samples
    and a float64 CP reading the wrong history slot miss by far."""
    seed = _seed()
    mlp = MLP(sizes, loss, lr)
    gold, f64, Wf = _models(cfg, mlp, seed)
    wrong = _Wrong(Float64CP(mlp, Wf))
    n = 150
    losses, X, T = _pipeline(cfg, mlp, n, seed, {"gold": gold, "f64": f64, "wrong": wrong})
    assert len(losses["f64"]) == n
    np.testing.assert_allclose(losses["f64"], losses["gold"], rtol=1e-4, atol=1e-6)
    err = _rel(f64.weights(), _floats(cfg, gold))
    assert err < RTOL, (seed, err)
    sgd = Float64SGD(mlp, Wf)
    for x, t in zip(X, T):
        sgd.step(x, t)
    for name, W in (("SGD", sgd.W), ("off-by-one history", wrong.weights())):
        bad = _rel(W, _floats(cfg, gold))
        assert bad > 100 * RTOL, (seed, name, bad, err)


@pytest.mark.parametrize("cfg,sizes,loss,lr", CASES, ids=IDS)
def test_float64_mbcp_has_the_golden_schedule(cfg, sizes, loss, lr):
    """Minibatch CP: the float64 minibatch CP against the binary32 golden minibatch
    pipeline (the update ``(lr / b) D A^T``, the mean loss); float64 minibatch GD and a
    wrong history slot miss by far."""
    seed = _seed()
    mlp = MLP(sizes, loss, 2 * lr, batch=4)
    gold, f64, Wf = _models(cfg, mlp, seed)
    wrong = _Wrong(Float64MBCP(mlp, Wf))
    n = 50
    losses, X, T = _pipeline(cfg, mlp, n, seed, {"gold": gold, "f64": f64, "wrong": wrong})
    assert len(losses["f64"]) == n
    np.testing.assert_allclose(losses["f64"], losses["gold"], rtol=1e-4, atol=1e-6)
    err = _rel(f64.weights(), _floats(cfg, gold))
    assert err < RTOL, (seed, err)
    mbgd = Float64MBGD(mlp, Wf)
    for x, t in zip(X, T):
        mbgd.step(x, t)
    for name, W in (("MBGD", mbgd.W), ("off-by-one history", wrong.weights())):
        bad = _rel(W, _floats(cfg, gold))
        assert bad > 100 * RTOL, (seed, name, bad, err)


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_float64_cp_drains_and_skips_bubbles(loss, batch):
    """Bubbles (None inputs, no target) in the stream keep the schedule of the golden;
    once drained, more None steps change no weight and report no loss."""
    seed = _seed()
    mlp = MLP((6, 8, 5, 3), loss, 0.0625 * batch, batch=batch)
    gold, f64, _ = _models(SMALL32, mlp, seed)
    n, holes = 40, {3, 4, 17, 39}
    losses, _, _ = _pipeline(SMALL32, mlp, n, seed, {"gold": gold, "f64": f64}, holes=holes)
    assert len(losses["f64"]) == n - len(holes)
    np.testing.assert_allclose(losses["f64"], losses["gold"], rtol=1e-4, atol=1e-6)
    assert _rel(f64.weights(), _floats(SMALL32, gold)) < RTOL, seed
    W = f64.weights()
    for _ in range(2 * mlp.n_layers):
        assert f64.step(None, None)["loss"] is None
    assert all(np.array_equal(a, b) for a, b in zip(W, f64.weights()))


@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_float64_cp_predict_is_the_pipelines_forward(loss):
    """``predict`` is the pipeline's forward pass: a lone sample's output ``L`` steps
    after it entered (no target; the zeros around it update nothing) equals it exactly,
    and :func:`cp_forward` on the binary32 golden's weights agrees to rounding."""
    seed = _seed()
    mlp = MLP((7, 9, 6, 3), loss, 0.0625)
    _, f64, _ = _models(SMALL32, mlp, seed)
    rng = np.random.default_rng(seed)
    for _ in range(10):                                  # train a little first
        f64.step(rng.uniform(-1, 1, mlp.n_in), rng.uniform(-0.5, 0.5, mlp.n_out) if loss == "mse" else 1)
    for _ in range(2 * mlp.n_layers):
        f64.step(None, None)
    x = rng.normal(size=mlp.n_in)
    want = f64.predict(x)
    gw = GoldenChipCP(SMALL32, mlp, f64.weights())                # the weights rounded to binary32
    got = cp_forward(SMALL32, gw.P, gw.N, gw.weights(padded=True), x)[:mlp.n_out]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    r = [f64.step(x if s == 0 else None, None) for s in range(mlp.n_layers + 1)]
    assert np.array_equal(r[-1]["output"], want), (seed, r[-1]["output"], want)


def test_float64_cp_targets_and_errors():
    """Class indices and one-hot targets are the same; the batch and shapes are checked."""
    rng = np.random.default_rng(0)
    for b in (1, 3):
        mlp = MLP((4, 5, 3), "softmax_ce", 0.1, batch=b)
        W = [SMALL32.fmt.to_float(w) for w in init_weights(mlp, SMALL32.fmt, 0)]
        cls = Float64CP if b == 1 else Float64MBCP
        a, c = cls(mlp, W), cls(mlp, W)
        x = rng.normal(size=(4,) if b == 1 else (4, b))
        k = 2 if b == 1 else np.array([2, 0, 1])
        oh = np.eye(3)[k] if b == 1 else np.eye(3)[k].T
        for s in range(4):
            ra, rc = a.step(x, k if s >= 2 else None), c.step(x, oh if s >= 2 else None)
            assert ra["loss"] == rc["loss"]
        assert all(np.array_equal(p, q) for p, q in zip(a.weights(), c.weights()))
    mlp1, mlp4 = MLP((4, 5, 3), "mse", 0.1), MLP((4, 5, 3), "mse", 0.1, batch=4)
    W = [np.zeros((5, 4)), np.zeros((3, 5))]
    with pytest.raises(ValueError, match="Float64MBCP"):
        Float64CP(mlp4, W)
    with pytest.raises(ValueError, match="batch > 1"):
        Float64MBCP(mlp1, W)
    with pytest.raises(ValueError, match="shapes"):
        Float64CP(mlp1, W[::-1])
    with pytest.raises(ValueError, match="hidden layer"):
        Float64CP(MLP((4, 3), "mse", 0.1), [np.zeros((3, 4))])
    with pytest.raises(ValueError, match="4 x 4 input"):
        Float64MBCP(mlp4, W).step(np.zeros((4, 3)), None)


@pytest.mark.parametrize("batch", [1, 4])
def test_train_cp_reports_the_float64_cp_baseline(tmp_path, batch):
    """``train_cp`` at binary32 runs the float64 CP on the array's samples in the array's
    order: its losses agree with the array's to rounding (float64 SGD's do not); the
    per-epoch keys, ``baselines``, ``compact`` and the plot."""
    from sim.train_driver import compact, plot_curves, train_cp
    from sw.datasets import load_dataset

    data = load_dataset("synthetic")
    mlp = MLP((data.n_in, 6, data.n_classes), "softmax_ce", 0.125, batch=batch)
    res = train_cp(SMALL32, mlp, data, epochs=2, seed=3, log=lambda *_: None, max_train=48, max_test=40)
    assert res["baselines"] == {"float64": "float64 SGD" if batch == 1 else "float64 minibatch GD",
                                "float64_cp": "float64 CP, same schedule"}
    a, cp, sgd = (np.array(res[k]) for k in ("losses", "losses_float64_cp", "losses_float64"))
    assert len(a) == len(cp) == len(sgd) == 2 * 48 // batch
    np.testing.assert_allclose(cp, a, rtol=1e-4, atol=1e-6)
    assert np.max(np.abs(sgd - a)) > 1e-3
    for e in res["epochs"]:
        assert {"test_accuracy_float64_cp", "train_loss_float64_cp", "test_accuracy_float64"} <= set(e)
        assert abs(e["test_accuracy_float64_cp"] - e["test_accuracy"]) <= 1 / 40
    c = compact(res, every=4)
    assert "losses_float64_cp" not in c and len(c["losses_float64_cp_mean4"]) == len(a) // 4
    json.dumps(c)
    png = tmp_path / "cp.png"
    plot_curves(res, png, window=5)
    assert png.stat().st_size > 0
