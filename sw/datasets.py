"""Training data without downloads: scikit-learn's bundled digits, MNIST IDX files a
user already has, and a deterministic synthetic set for tests.

Every loader returns a :class:`Dataset` of float64 inputs in ``[0, 1]`` (one row per
sample) and integer class labels, split into train and test sets.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Dataset", "load_digits", "load_mnist_idx", "read_idx", "synthetic", "load_dataset"]


@dataclass
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int

    @property
    def n_in(self) -> int:
        return self.x_train.shape[1]

    def describe(self) -> str:
        return (f"{self.name}: {len(self.x_train)} train / {len(self.x_test)} test samples, "
                f"{self.n_in} inputs, {self.n_classes} classes")


def _split(name, x, y, n_classes, test_frac, seed):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(x))
    nt = int(round(len(x) * test_frac))
    te, tr = idx[:nt], idx[nt:]
    return Dataset(name, x[tr], y[tr], x[te], y[te], n_classes)


def load_digits(test_frac: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's bundled 8x8 digits (1797 samples, 64 inputs 0..16 scaled to
    [0, 1], 10 classes; shipped with the package, no download)."""
    try:
        from sklearn.datasets import load_digits as _ld
    except ImportError:                        # pragma: no cover - sklearn is a dependency
        raise RuntimeError("the digits data set needs scikit-learn (pip install scikit-learn)") from None
    d = _ld()
    return _split("digits", d.data.astype(np.float64) / 16.0, d.target.astype(np.int64), 10, test_frac, seed)


def read_idx(path) -> np.ndarray:
    """Read an IDX file (MNIST's format; ``.gz`` accepted): magic ``0x0000TTDD`` (type,
    dimensions), big-endian dimensions, then the data."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic)")
    types = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in types:
        raise ValueError(f"{path}: unknown IDX data type {raw[2]:#x}")
    nd = raw[3]
    dims = struct.unpack(f">{nd}I", raw[4:4 + 4 * nd])
    dt = np.dtype(types[raw[2]])
    need = int(np.prod(dims)) * dt.itemsize
    body = raw[4 + 4 * nd:]
    if len(body) != need:
        raise ValueError(f"{path}: {len(body)} data bytes, dimensions {dims} need {need}")
    return np.frombuffer(body, dtype=dt).reshape(dims)


def load_mnist_idx(directory, limit_train: int | None = None, limit_test: int | None = None) -> Dataset:
    """MNIST from the four standard IDX files in ``directory`` (``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``,
    optionally ``.gz``): 784 inputs scaled to [0, 1], 10 classes. Nothing is downloaded."""
    d = Path(directory)

    def find(stem):
        for cand in (d / stem, d / f"{stem}.gz", d / stem.replace("-idx", ".idx")):
            if cand.exists():
                return cand
        raise FileNotFoundError(f"{d}: no {stem} (or {stem}.gz); MNIST is not downloaded, give the "
                                f"directory holding the IDX files")

    xtr = read_idx(find("train-images-idx3-ubyte"))
    ytr = read_idx(find("train-labels-idx1-ubyte"))
    xte = read_idx(find("t10k-images-idx3-ubyte"))
    yte = read_idx(find("t10k-labels-idx1-ubyte"))
    if xtr.shape[0] != ytr.shape[0] or xte.shape[0] != yte.shape[0]:
        raise ValueError(f"{d}: image and label counts differ")
    xtr, ytr = xtr[:limit_train], ytr[:limit_train]
    xte, yte = xte[:limit_test], yte[:limit_test]
    f = lambda a: a.reshape(a.shape[0], -1).astype(np.float64) / 255.0   # noqa: E731
    return Dataset("mnist", f(xtr), ytr.astype(np.int64), f(xte), yte.astype(np.int64), 10)


def synthetic(n_in: int = 16, n_classes: int = 4, n: int = 400, seed: int = 0, test_frac: float = 0.25) -> Dataset:
    """Separable Gaussian blobs in ``[0, 1]^n_in`` (for tests and quick runs)."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0.2, 0.8, size=(n_classes, n_in))
    y = rng.integers(n_classes, size=n)
    x = np.clip(centers[y] + rng.normal(0, 0.08, size=(n, n_in)), 0, 1)
    return _split("synthetic", x, y.astype(np.int64), n_classes, test_frac, seed)


def load_dataset(name: str, mnist_dir=None, **kw) -> Dataset:
    if name == "digits":
        return load_digits(**kw)
    if name == "mnist":
        if not mnist_dir:
            raise ValueError("the mnist data set needs --mnist-dir (a directory with the IDX files)")
        return load_mnist_idx(mnist_dir, **kw)
    if name == "synthetic":
        return synthetic(**kw)
    raise ValueError(f"unknown data set {name!r}; allowed: digits, mnist, synthetic")
