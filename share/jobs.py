"""Job files of ``caterpillar share``: a JSON list of training jobs, checked before any
work (each error one line naming the job and the field).

A job::

    {"name": "a", "network": "paper-small" | [784, 500, 10], "method": "sgd" | "mbgd:8" | "cp",
     "lr": 0.03, "loss": "softmax_ce", "steps": 20 | "epochs": 1, "data": "random" | "digits" ...,
     "cores": 8}

``cores`` (optional) asks for a group of that many cores (a power of two, at least 2)
instead of right-sizing; ``epochs`` need a data set (``steps`` = epochs x training
samples / batch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from arch.errors import InputError
from sw.mlp import MLP, MLPError

__all__ = ["Job", "NETWORKS", "METHODS", "load_jobs", "parse_jobs"]

#: named networks (layer sizes, inputs first)
NETWORKS = {
    "digits": (64, 64, 64, 10),
    "digits-wide": (64, 256, 10),
    "mnist-mlp": (784, 256, 10),
    "paper-small": (784, 500, 500, 500, 10),
    "paper-large": (784, 2500, 2000, 1500, 1000, 500, 10),
}
METHODS = ("sgd", "mbgd:B", "cp")
#: data a job can name ("random": uniform inputs and random classes, for timing)
DATA = ("random", "digits", "mnist-sample", "synthetic")
_KEYS = {"name", "network", "method", "lr", "loss", "steps", "epochs", "data", "cores", "seed"}


@dataclass(frozen=True)
class Job:
    """One training job of a share file."""

    name: str
    mlp: MLP
    method: str            #: "sgd", "mbgd" or "cp" (the batch is ``mlp.batch``)
    steps: int | None
    epochs: int | None
    data: str
    cores: int | None
    seed: int = 0

    def describe(self) -> str:
        m = f"mbgd:{self.mlp.batch}" if self.method == "mbgd" else self.method
        return f"{self.name}: {'-'.join(map(str, self.mlp.sizes))} {m}"


def _bad(i, name, msg):
    return InputError(f"job {i + 1} ({name}): {msg}")


def _int(v, lo):
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _job(i: int, d, chip_cores: int) -> Job:
    if not isinstance(d, dict):
        raise InputError(f"job {i + 1}: expected an object, got {type(d).__name__}")
    name = str(d.get("name", f"job{i + 1}"))
    extra = sorted(set(d) - _KEYS)
    if extra:
        raise _bad(i, name, f"unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(_KEYS))}")
    net = d.get("network")
    if isinstance(net, str):
        if net not in NETWORKS:
            raise _bad(i, name, f"unknown network {net!r}; named networks: {', '.join(NETWORKS)} "
                                f"(or a list of layer sizes)")
        sizes = NETWORKS[net]
    elif isinstance(net, list):
        sizes = tuple(net)
    else:
        raise _bad(i, name, "network: a named network or a list of layer sizes is required")
    method = str(d.get("method", "sgd"))
    kind, _, b = method.partition(":")
    if kind not in ("sgd", "mbgd", "cp") or (kind == "mbgd") != bool(b):
        raise _bad(i, name, f"method {method!r}: expected sgd, mbgd:B (B the batch) or cp")
    batch = 1
    if b:
        try:
            batch = int(b)
        except ValueError:
            batch = 0
        if not 2 <= batch <= 1024:
            raise _bad(i, name, f"method {method!r}: the batch must be an integer in 2..1024")
    lr = d.get("lr", 0.03)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 10:
        raise _bad(i, name, f"lr {lr!r}: expected a number in (0, 10]")
    try:
        mlp = MLP(sizes, loss=d.get("loss", "softmax_ce"), lr=float(lr), batch=batch)
    except MLPError as e:
        raise _bad(i, name, str(e)) from None
    steps, epochs = d.get("steps"), d.get("epochs")
    if (steps is None) == (epochs is None):
        raise _bad(i, name, "give one of steps or epochs")
    if steps is not None and not (_int(steps, 1) and steps <= 1_000_000):
        raise _bad(i, name, f"steps {steps!r}: expected an integer in 1..1000000")
    if epochs is not None and not (_int(epochs, 1) and epochs <= 1000):
        raise _bad(i, name, f"epochs {epochs!r}: expected an integer in 1..1000")
    data = str(d.get("data", "random"))
    if data not in DATA:
        raise _bad(i, name, f"data {data!r}: expected one of {', '.join(DATA)}")
    if epochs is not None and data == "random":
        raise _bad(i, name, "epochs need a data set (data), or give steps")
    cores = d.get("cores")
    if cores is not None:
        if not _int(cores, 2) or cores & (cores - 1):
            raise _bad(i, name, f"cores {cores!r}: expected a power of two >= 2")
        if cores > chip_cores:
            raise _bad(i, name, f"cores {cores}: more cores than the chip has ({chip_cores})")
    seed = d.get("seed", i)
    if not _int(seed, 0):
        raise _bad(i, name, f"seed {seed!r}: expected a non-negative integer")
    return Job(name, mlp, kind, steps, epochs, data, cores, seed)


def parse_jobs(obj, chip_cores: int, where: str = "jobs") -> list[Job]:
    """Jobs from a decoded JSON value (a list, or ``{"jobs": [...]}``)."""
    if isinstance(obj, dict) and "jobs" in obj:
        obj = obj["jobs"]
    if not isinstance(obj, list) or not obj:
        raise InputError(f"{where}: expected a non-empty list of jobs")
    jobs = [_job(i, d, chip_cores) for i, d in enumerate(obj)]
    names = [j.name for j in jobs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{where}: job names must be unique: {', '.join(dup)}")
    return jobs


def load_jobs(path, chip_cores: int) -> list[Job]:
    """Read and check a job file (one-line :class:`InputError` otherwise)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such job file")
    try:
        obj = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: not JSON ({e.msg} at line {e.lineno})") from None
    return parse_jobs(obj, chip_cores, str(p))
