"""Bad invocations of every ``caterpillar`` subcommand: each must end in one line,
``caterpillar: error: <what and where>``, naming the offending option or file, with a
non-zero exit (2 for bad options, 1 for bad input found while working), no traceback,
and nothing left behind in the output directory or the temporary directory.

The corpus is a hand-written table (:data:`CASES`), a grid of out-of-range values for
every numeric option (:data:`GRID`), and hypothesis strategies over option values and
file contents. The runs that would do real work (training, Table 2, synthesis, builds,
the demo, design-space searches) are replaced by a tripwire: a bad invocation must fail before it reaches them.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main

ROOT = Path(__file__).resolve().parents[2]


class ReachedWork(AssertionError):
    """A bad invocation got past the checks into a long run."""


def _tripwire(*a, **kw):
    raise ReachedWork("a bad invocation reached the work it should have been refused before")


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A workspace of good and bad input files, and a private temporary directory."""
    w = tmp_path_factory.mktemp("corpus")
    (w / "tmp").mkdir()
    (w / "out").mkdir()
    (w / "ok.s").write_text("loop i 4 {\n    fma r0 = r1 * r2 + r0\n}\nhalt\n")
    (w / "hin.s").write_text("hin row\nhalt\n")
    (w / "bad.s").write_text("frob r0\nhalt\n")
    (w / "nohalt.s").write_text("fma r0 = r1 * r2 + r0\n")
    (w / "empty.s").write_text("")
    (w / "bin.s").write_bytes(bytes(range(128, 256)) * 4)
    (w / "bad.hex").write_text("xyz\n")
    (w / "wide.hex").write_text("f" * 100 + "\n")
    (w / "beats_bad.txt").write_text("1\nabc\n")
    (w / "beats_neg.txt").write_text("-3\n")
    (w / "beats_one.txt").write_text("7\n")
    (w / "list.json").write_text("[1, 2]")
    (w / "broken.json").write_text("{")
    (w / "nocounters.json").write_text(json.dumps({"config": {}, "x": 1}))
    (w / "noconfig.json").write_text(json.dumps({"counters": {"cycles": 10, "instructions": 1}}))
    (w / "negctr.json").write_text(json.dumps({"counters": {"cycles": -1}, "config": {"nr": 2}}))
    (w / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    (w / "cfg99.json").write_text(json.dumps({"nr": 99}))
    (w / "cfglist.json").write_text("[1]")
    (w / "cfgbad.json").write_text("{nope")
    (w / "tech_bad.json").write_text("{}")
    (w / "afile").write_text("not a directory")
    _mnist_dirs(w)
    _user_data(w)
    return w


def _idx(arr: np.ndarray, code: int = 0x08) -> bytes:
    return bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.astype(">u1").tobytes()


def _mnist_dirs(w: Path) -> None:
    good = {"train-images-idx3-ubyte": _idx(np.zeros((4, 2, 2))), "train-labels-idx1-ubyte": _idx(np.arange(4)),
            "t10k-images-idx3-ubyte": _idx(np.zeros((2, 2, 2))), "t10k-labels-idx1-ubyte": _idx(np.arange(2))}
    variants = {
        "mnist_trunc_header": {"train-images-idx3-ubyte": bytes([0, 0, 8, 3, 0, 0])},
        "mnist_trunc_body": {"train-images-idx3-ubyte": good["train-images-idx3-ubyte"][:-3]},
        "mnist_bad_magic": {"train-images-idx3-ubyte": b"\x01\x02\x03\x04" + bytes(20)},
        "mnist_labels_range": {"train-labels-idx1-ubyte": _idx(np.array([1, 2, 200, 3]))},
        "mnist_count_mismatch": {"train-labels-idx1-ubyte": _idx(np.arange(3))},
        "mnist_missing": {"t10k-labels-idx1-ubyte": None},
    }
    for name, change in variants.items():
        d = w / name
        d.mkdir()
        for f, data in {**good, **change}.items():
            if data is not None:
                (d / f).write_bytes(data)
    d = w / "mnist_trunc_gz"
    d.mkdir()
    for f, data in good.items():
        if f == "train-images-idx3-ubyte":
            (d / (f + ".gz")).write_bytes(gzip.compress(data)[:-6])
        else:
            (d / f).write_bytes(data)


def _user_data(w: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 1, (20, 5)), rng.integers(3, size=20)
    np.savez(w / "noy.npz", x=x)
    np.savez(w / "shape.npz", x=x.ravel(), y=y)
    np.savez(w / "rows.npz", x=x, y=y[:-2])
    np.savez(w / "nan.npz", x=np.where(np.eye(20, 5) > 0, np.nan, x), y=y)
    np.savez(w / "neglab.npz", x=x, y=y - 5)
    np.savez(w / "fraclab.npz", x=x, y=y + 0.5)
    np.savez(w / "strlab.npz", x=x, y=np.array(["a"] * 20))
    np.savez(w / "oneclass.npz", x=x, y=np.zeros(20, dtype=int))
    np.savez(w / "empty.npz", x=np.zeros((0, 5)), y=np.zeros(0))
    np.savez(w / "xtestonly.npz", x=x, y=y, x_test=x)
    np.savez(w / "huge.npz", x=x * 1e9, y=y)
    np.savez(w / "ok.npz", x=x, y=y)
    (w / "notnpz.npz").write_text("hello")
    (w / "ragged.csv").write_text("1,2,0\n3,1\n")
    (w / "word.csv").write_text("a,b,label\n1,2,0\n3,x,1\n")
    (w / "onecol.csv").write_text("1\n2\n")
    (w / "headeronly.csv").write_text("a,b,label\n")
    (w / "empty.csv").write_text("")
    (w / "latin1.csv").write_bytes("1,2,0\n\xe9,3,1\n".encode("latin-1"))
    (w / "fraclab.csv").write_text("1,2,0.5\n3,4,1\n")


T = "train --data synthetic"          # a train invocation whose data loads in milliseconds

#: (arguments, exit status, text the message must name); ``{w}`` is the workspace
CASES: list[tuple[str, int, str]] = [
    # --- no or unknown subcommand, unknown options
    ("", 2, "COMMAND"), ("nosuch", 2, "nosuch"), ("info --nosuch", 2, "--nosuch"),
    ("--nosuch info", 2, "--nosuch"), ("train --epochs", 2, "--epochs"), ("run", 2, "program"),
    ("report", 2, "input"), ("timing", 2, "build_dir"), ("pnr {w}", 2, "--out"), ("verilog", 2, "--output"),
    ("demo --sim nosim", 2, "--sim"), ("demo extra", 2, "extra"), ("paper extra", 2, "extra"),
    # --- configurations
    ("info --config nosuch", 2, "nosuch"), ("info --config {w}/cfg99.json", 2, "nr"),
    ("info --config {w}/cfglist.json", 2, "cfglist.json"), ("info --config {w}/cfgbad.json", 2, "cfgbad.json"),
    ("info --config {w}/bin.json", 2, "bin.json"), ("info --config {w}", 2, "directory"),
    ("info --config '{{\"nr\": 0}}'", 2, "nr"), ("info --config '{{\"fmt\": \"binary8\"}}'", 2, "binary8"),
    ("info --config '{{\"nr\": 2,'", 2, "JSON"), ("info --config '{{\"bogus\": 1}}'", 2, "bogus"),
    ("info --config '{{\"nr\": \"4\"}}'", 2, "nr"), ("info --config '{{\"nr\": true}}'", 2, "nr"),
    ("verilog --config nosuch -o {w}/out/x.v", 2, "nosuch"), ("run {w}/ok.s --config nosuch", 2, "nosuch"),
    (f"{T} --config nosuch", 2, "nosuch"), ("synth --config '{{\"nr\": 99}}'", 2, "nr"),
    ("build --config '{{\"nr\": 99}}'", 2, "nr"),
    # --- verilog / synth / build / pnr / timing
    ("verilog -o {w}/out", 2, "--output"), ("verilog -o {w}/missing/x.v", 2, "missing"),
    ("verilog -o {w}/afile/x.v", 2, "afile"), ("verilog --top nosuch -o {w}/out/x.v", 2, "--top"),
    ("verilog --config tiny --top chip -o {w}/out/x.v", 1, "cores"), ("verilog -o ''", 2, "--output"),
    ("synth --target nosuch", 2, "--target"), ("synth --device NOPE-1", 2, "--device"),
    ("synth --json {w}/out", 2, "--json"), ("synth --json {w}/missing/s.json", 2, "missing"),
    ("synth --top nosuch", 2, "--top"), ("build --board nope", 2, "--board"), ("build --clock-mhz 0", 2, "--clock-mhz"),
    ("build --clock-mhz -5", 2, "--clock-mhz"), ("build --clock-mhz nan", 2, "--clock-mhz"),
    ("build --clock-mhz inf", 2, "--clock-mhz"), ("build --baud 0", 2, "--baud"), ("build --seed -1", 2, "--seed"),
    ("build --timeout-min 0", 2, "--timeout-min"), ("build --timeout-min -1", 2, "--timeout-min"),
    ("build --router router9", 2, "--router"), ("build --top chip", 2, "--top"), ("build --out {w}/afile", 2, "afile"),
    ("build --out {w}/missing/b", 2, "missing"), ("build --top pe --no-floorplan", 2, "--no-floorplan"),
    ("pnr {w}/missing --out {w}/out/p", 2, "missing"), ("pnr {w}/afile --out {w}/out/p", 2, "afile"),
    ("pnr {w}/out --out {w}/afile", 2, "afile"), ("pnr {w}/out --out {w}/out/p", 1, "summary.json"),
    ("pnr {w}/out --out {w}/out/p --seed -3", 2, "--seed"), ("pnr {w}/out --out {w}/p --constrain-mhz 0", 2,
                                                               "--constrain-mhz"),
    ("timing {w}/missing", 2, "missing"), ("timing {w}/afile", 2, "afile"), ("timing {w}/out", 1, "top.report.json"),
    ("timing {w}/out --mhz 0", 2, "--mhz"), ("timing {w}/out --mhz -100", 2, "--mhz"),
    ("timing {w}/out --depth 0", 2, "--depth"), ("timing {w}/out --top 0", 2, "--top"),
    ("timing {w}/out --json {w}/out", 2, "--json"),
    # --- run
    ("run {w}/nofile.s", 2, "nofile.s"), ("run {w}", 2, "directory"), ("run {w}/bad.s", 1, "frob"),
    ("run {w}/bad.s --config tiny", 1, "bad.s:1"), ("run {w}/bin.s", 1, "bin.s"), ("run {w}/empty.s", 1, "empty.s"),
    ("run {w}/nohalt.s", 1, "nohalt.s"), ("run {w}/bad.hex", 1, "bad.hex"), ("run {w}/wide.hex", 1, "wide.hex"),
    ("run {w}/hin.s", 1, "--data"), ("run {w}/hin.s --data {w}/nofile.txt", 1, "nofile.txt"),
    ("run {w}/hin.s --data {w}/beats_bad.txt", 1, "beats_bad.txt:2"),
    ("run {w}/hin.s --data {w}/beats_neg.txt", 1, "beats_neg.txt:1"), ("run {w}/ok.s --data {w}/beats_one.txt", 1,
                                                                        "--data"),
    ("run {w}/hin.s --data {w}/bin.s", 1, "bin.s"), ("run {w}/ok.s --start -1", 2, "--start"),
    ("run {w}/ok.s --start x", 2, "--start"), ("run {w}/ok.s --start 99999", 2, "--start"),
    ("run {w}/ok.s --model nosuch", 2, "--model"), ("run {w}/ok.s --sim icarus", 2, "--sim"),
    ("run {w}/ok.s --model rtl --start 1", 2, "--start"), ("run {w}/ok.s -o {w}/out", 2, "--output"),
    ("run {w}/ok.s -o {w}/missing/o.txt", 2, "missing"), ("run {w}/ok.s --json {w}/out", 2, "--json"),
    ("run {w}/ok.s --json {w}/afile/r.json", 2, "afile"), ("run {w}/ok.s -o {w}/out/o.txt --json {w}/out", 2, "--json"),
    # --- report
    ("report {w}/nofile.json", 2, "nofile.json"), ("report {w}/list.json", 1, "list.json"),
    ("report {w}/broken.json", 1, "broken.json"), ("report {w}/nocounters.json", 1, "counters"),
    ("report {w}/noconfig.json", 1, "--config"), ("report {w}/negctr.json", 1, "cycles"),
    ("report {w}/bin.json", 1, "bin.json"), ("report {w}/bad.s", 1, "frob"), ("report {w}/hin.s", 1, "--data"),
    ("report {w}/ok.s --flops -5", 2, "--flops"), ("report {w}/ok.s --flops 0", 2, "--flops"),
    ("report {w}/ok.s --flops 1.5", 2, "--flops"), ("report {w}/ok.s --tech {w}/nofile.json", 1, "nofile.json"),
    ("report {w}/ok.s --tech {w}/tech_bad.json", 1, "tech_bad.json"), ("report {w}/ok.s --tech {w}/bin.json", 1,
                                                                        "bin.json"),
    ("report {w}/ok.s --json {w}/out", 2, "--json"), ("report {w}/ok.s --png {w}/missing/e.png", 2, "missing"),
    ("report {w}/ok.s --json {w}/out/r.json --png {w}/out", 2, "--png"),
    ("report {w}/noconfig.json --data {w}/beats_one.txt --config tiny", 2, "--data"),
    ("report {w}/ok.s --config nosuch", 2, "nosuch"),
    # --- paper
    ("paper --cells foo", 2, "foo"), ("paper --cells ''", 2, "--cells"), ("paper --cells ,", 2, "--cells"),
    ("paper --cells small-S-sgd,bogus", 2, "bogus"), ("paper --json {w}/out", 2, "--json"),
    ("paper --png {w}/missing/p.png", 2, "missing"), ("paper --progress sometimes", 2, "--progress"),
    # --- train: ranges
    (f"{T} --epochs 0", 2, "--epochs"), (f"{T} --epochs -1", 2, "--epochs"), (f"{T} --epochs 1.5", 2, "--epochs"),
    (f"{T} --max-train 0", 2, "--max-train"), (f"{T} --max-train -5", 2, "--max-train"),
    (f"{T} --max-test 0", 2, "--max-test"), (f"{T} --batch 0", 2, "--batch"), (f"{T} --batch 5000", 2, "--batch"),
    (f"{T} --batch 50 --max-train 20", 2, "--batch"), (f"{T} --host-latency -5000", 2, "--host-latency"),
    (f"{T} --golden-steps -1", 2, "--golden-steps"), (f"{T} --lr 0", 2, "--lr"), (f"{T} --lr -0.1", 2, "--lr"),
    (f"{T} --lr nan", 2, "--lr"), (f"{T} --lr x", 2, "--lr"), (f"{T} --seed -1", 2, "--seed"),
    (f"{T} --hidden 0", 2, "--hidden"), (f"{T} --hidden 8,x", 2, "--hidden"), (f"{T} --hidden 99999", 2, "--hidden"),
    (f"{T} --loss hinge", 2, "--loss"), (f"{T} --method adam", 2, "--method"), (f"{T} --model rtl", 2, "--model"),
    (f"{T} --progress maybe", 2, "--progress"),
    # --- train: options that do not apply
    ("train --data mnist", 2, "--mnist-dir"), ("train --data digits --mnist-dir {w}", 2, "--mnist-dir"), ("train --data mnist-sample --mnist-dir {w}", 2, "--mnist-dir"),
    (f"{T} --softmax array --loss mse", 2, "--softmax"), (f"{T} --softmax host --batch 4", 2, "--softmax"),
    (f"{T} --out-map rows", 2, "--out-map"), (f"{T} --config chip-tiny --method cp --out-map cols", 2, "--out-map"),
    (f"{T} --method cp", 2, "--method cp"), (f"{T} --groups 1,1", 2, "--groups"), (f"{T} --groups 0", 2, "--groups"),
    (f"{T} --batch 4 --backward fused", 2, "--backward"), (f"{T} --no-overlap", 2, "--no-overlap"),
    (f"{T} --out-reduce stream", 2, "--out-reduce"), (f"{T} --config chip-tiny --method cp --out-reduce chain", 2,
                                                       "--out-reduce"),
    (f"{T} --config chip-tiny --out-reduce tree", 2, "--out-reduce"),
    (f"{T} --config chip-tiny --method cp --host-latency 10", 2, "--host-latency"),
    (f"{T} --batch 4 --host-latency 10", 2, "--host-latency"),
    (f"{T} --config chip-tiny --method cp --softmax host", 2, "--softmax"),
    # --- train: outputs
    (f"{T} --json {{w}}/out", 2, "--json"), (f"{T} --json {{w}}/missing/t.json", 2, "missing"),
    (f"{T} --png {{w}}/afile/t.png", 2, "afile"), (f"{T} --json {{w}}/out --png {{w}}/out/t.png", 2, "--json"),
    (f"{T} --png {{w}}/out --json {{w}}/out/t.json", 2, "--png"),
    # --- train: data
    ("train --data nosuch", 2, "--data"), ("train --data npz:", 2, "--data"), ("train --data csv:", 2, "--data"),
    ("train --data xls:{w}/a", 2, "--data"), ("train --data npz:{w}/nofile.npz", 1, "nofile.npz"),
    ("train --data npz:{w}", 1, "directory"), ("train --data npz:{w}/notnpz.npz", 1, "notnpz.npz"),
    ("train --data npz:{w}/list.json", 1, "list.json"), ("train --data npz:{w}/noy.npz", 1, "noy.npz"),
    ("train --data npz:{w}/shape.npz", 1, "shape.npz"), ("train --data npz:{w}/rows.npz", 1, "rows.npz"),
    ("train --data npz:{w}/nan.npz", 1, "nan.npz"), ("train --data npz:{w}/neglab.npz", 1, "neglab.npz"),
    ("train --data npz:{w}/fraclab.npz", 1, "fraclab.npz"), ("train --data npz:{w}/strlab.npz", 1, "strlab.npz"),
    ("train --data npz:{w}/oneclass.npz", 1, "oneclass.npz"), ("train --data npz:{w}/empty.npz", 1, "empty.npz"),
    ("train --data npz:{w}/xtestonly.npz", 1, "xtestonly.npz"), ("train --data npz:{w}/huge.npz", 1, "huge.npz"),
    ("train --data npz:{w}/ok.npz --batch 100", 2, "--batch"),
    ("train --data csv:{w}/nofile.csv", 1, "nofile.csv"), ("train --data csv:{w}/ragged.csv", 1, "ragged.csv:2"),
    ("train --data csv:{w}/word.csv", 1, "word.csv:3"), ("train --data csv:{w}/onecol.csv", 1, "onecol.csv"),
    ("train --data csv:{w}/headeronly.csv", 1, "headeronly.csv"), ("train --data csv:{w}/empty.csv", 1, "empty.csv"),
    ("train --data csv:{w}/latin1.csv", 1, "latin1.csv"), ("train --data csv:{w}/fraclab.csv", 1, "fraclab.csv"),
    ("train --data csv:{w}/ok.npz", 1, "ok.npz"),
    ("train --data mnist --mnist-dir {w}/nofile", 1, "nofile"), ("train --data mnist --mnist-dir {w}/out", 1,
                                                                  "train-images"),
    ("train --data mnist --mnist-dir {w}/mnist_trunc_header", 1, "train-images"),
    ("train --data mnist --mnist-dir {w}/mnist_trunc_body", 1, "train-images"),
    ("train --data mnist --mnist-dir {w}/mnist_trunc_gz", 1, "train-images"),
    ("train --data mnist --mnist-dir {w}/mnist_bad_magic", 1, "train-images"),
    ("train --data mnist --mnist-dir {w}/mnist_labels_range", 1, "label 200"),
    ("train --data mnist --mnist-dir {w}/mnist_count_mismatch", 1, "labels"),
    ("train --data mnist --mnist-dir {w}/mnist_missing", 1, "t10k-labels"),
    ("train --data npz:{w}/ok.npz --config nosuch", 2, "nosuch"),
    # --- dse
    ("dse", 2, "--space"), ("dse --space bogus=1,2", 2, "bogus"), ("dse --space nr=4..2", 2, "nr"),
    ("dse --space nr=", 2, "nr"), ("dse --space fmt=binary8", 2, "binary8"), ("dse --space method=adam", 2, "adam"),
    ("dse --space nr=a", 2, "nr"), ("dse --space nr", 2, "nr"), ("dse --space {w}/list.json", 2, "list.json"),
    ("dse --space {w}/broken.json", 2, "broken.json"), ("dse --space nr=2,4 --workloads 784", 2, "--workloads"),
    ("dse --space nr=2,4 --workloads ''", 2, "--workloads"), ("dse --space nr=2,4 --workloads small*0", 2,
                                                               "--workloads"),
    ("dse --space nr=2,4 --area 0", 2, "--area"), ("dse --space nr=2,4 --power -1", 2, "--power"),
    ("dse --space nr=2,4 --budget 0", 2, "--budget"), ("dse --space nr=2,4 --workers 0", 2, "--workers"),
    ("dse --space nr=2,4 --objective speed", 2, "--objective"), ("dse --space nr=2,4 --search annealing", 2,
                                                                  "--search"),
    ("dse --space nr=2,4 --engine local --address 127.0.0.1:1", 2, "--address"),
    ("dse --space nr=2,4 --address 127.0.0.1:1", 1, "127.0.0.1:1"), ("dse --space nr=2,4 --address nowhere", 2,
                                                                     "--address"),
    ("dse --space nr=2,4 --search exhaustive --budget 1", 2, "--budget"),
    ("dse --space nr=2,4 --json {w}/out", 2, "--json"), ("dse --space nr=2,4 --png {w}/missing/d.png", 2, "missing"),
    ("dse --space nr=2,4 --cache {w}/out", 2, "--cache"), ("dse --space nr=2,4 --base nosuch", 2, "nosuch"),
    ("dse --describe abc --cache {w}/nofile.jsonl", 1, "nofile.jsonl"),
    ("dse --describe abc --cache {w}/list.json", 1, "abc"),
    # --- characterize
    ("characterize --configs nosuch", 2, "nosuch"), ("characterize --configs", 2, "--configs"),
    ("characterize --configs '{{\"nr\": 0}}'", 2, "nr"), ("characterize --configs small small", 2, "twice"),
    ("characterize --configs {w}/cfgbad.json", 2, "cfgbad.json"), ("characterize --classes bogus", 2, "bogus"),
    ("characterize --classes ''", 2, "--classes"), ("characterize --classes gemv,", 2, "--classes"),
    ("characterize --grid huge", 2, "--grid"), ("characterize --json {w}/out", 2, "--json"),
    ("characterize --png {w}/missing/c.png", 2, "missing"), ("characterize --progress maybe", 2, "--progress"),
    ("characterize --json {w}/out/c.json --png {w}/out/c.json", 2, "same file"), ("characterize extra", 2, "extra"),
]

#: numeric options and where they are: every value in BAD_INTS / BAD_FLOATS must be refused
INT_OPTIONS = [("train --data synthetic", o) for o in ("--epochs", "--batch", "--max-train", "--max-test")] + [
    ("timing {w}/out", "--depth"), ("timing {w}/out", "--top"), ("build", "--baud")]
NONNEG_OPTIONS = [("train --data synthetic", o) for o in ("--seed", "--host-latency", "--golden-steps")] + [
    ("run {w}/ok.s", "--start"), ("build", "--seed")]
FLOAT_OPTIONS = [("train --data synthetic", "--lr"), ("build", "--clock-mhz"), ("build", "--timeout-min"),
                 ("timing {w}/out", "--mhz")]
GRID = ([(f"{cmd} {opt} {v}", 2, opt) for cmd, opt in INT_OPTIONS for v in ("0", "-1", "-99999", "x", "2.5", "''")]
        + [(f"{cmd} {opt} {v}", 2, opt) for cmd, opt in NONNEG_OPTIONS for v in ("-1", "-5000", "one", "1e3")]
        + [(f"{cmd} {opt} {v}", 2, opt) for cmd, opt in FLOAT_OPTIONS for v in ("0", "-1", "nan", "inf", "fast")])


def test_the_corpus_is_large():
    assert len(CASES) + len(GRID) >= 200, len(CASES) + len(GRID)


@pytest.fixture
def guarded(monkeypatch, ws):
    """The long runs replaced by the tripwire; the temporary directory private."""
    import cli.demo
    import rtl.fpga
    import rtl.synth
    import sim.paper
    import sim.train_driver

    import dse.search

    for mod, names in ((sim.train_driver, ("train", "train_cp", "train_minibatch")), (sim.paper, ("table2",)),
                       (rtl.fpga, ("build", "reroute")), (rtl.synth, ("synthesize_top",)), (cli.demo, ("run_demo",))):
        for n in names:
            monkeypatch.setattr(mod, n, _tripwire)
    for n in list(dse.search.SEARCHES):
        monkeypatch.setitem(dse.search.SEARCHES, n, _tripwire)
    monkeypatch.setenv("TMPDIR", str(ws / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(ws / "tmp"))
    return ws


def _listing(w: Path) -> set[str]:
    return {str(p.relative_to(w)) for p in w.rglob("*")}


def invoke(w: Path, args: str) -> tuple[int, str, str]:
    """Run ``caterpillar`` in-process on ``args`` (``{w}`` replaced); exit status, stdout, stderr."""
    argv = shlex.split(args.format(w=w))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check_refused(w: Path, args: str, code: int | None, names: str) -> str:
    before = _listing(w)
    rc, out, err = invoke(w, args)
    lines = err.strip().splitlines()
    assert rc != 0, f"{args!r} was accepted"
    assert "Traceback" not in err + out, f"{args!r} printed a traceback"
    assert len(lines) == 1 and lines[0].startswith("caterpillar: error: "), f"{args!r}: {err!r}"
    assert "internal error" not in lines[0], f"{args!r}: {lines[0]}"
    if code is not None:
        assert rc == code, f"{args!r}: exit {rc}, expected {code}: {lines[0]}"
    assert names.format(w=w) in lines[0], f"{args!r}: the message does not name {names!r}: {lines[0]}"
    assert _listing(w) == before, f"{args!r} left files behind: {sorted(_listing(w) - before)}"
    return lines[0]


@pytest.mark.parametrize("args,code,names", CASES + GRID, ids=[c[0][:60] for c in CASES + GRID])
def test_bad_invocation(guarded, args, code, names):
    check_refused(guarded, args, code, names)


# --- generated cases --------------------------------------------------------------------------------

_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(opt=st.sampled_from(INT_OPTIONS), v=st.integers(max_value=0))
def test_generated_counts_below_one(guarded, opt, v):
    check_refused(guarded, f"{opt[0]} {opt[1]} {v}", 2, opt[1])


@_SETTINGS
@given(opt=st.sampled_from(NONNEG_OPTIONS + FLOAT_OPTIONS + INT_OPTIONS),
       v=st.text(alphabet="abcxyz.,;!-_", min_size=1, max_size=8).filter(lambda s: s.strip("-") != ""))
def test_generated_non_numbers(guarded, opt, v):
    check_refused(guarded, f"{opt[0]} {opt[1]} {shlex.quote(v)}", 2, opt[1])


@_SETTINGS
@given(raw=st.binary(min_size=1, max_size=200))
def test_generated_npz_files(guarded, raw):
    """Any bytes that are not a zip archive are not an .npz file."""
    f = guarded / "gen.npz"
    f.write_bytes(b"\x00" + raw)          # never a zip archive (those start with PK)
    try:
        check_refused(guarded, "train --data npz:{w}/gen.npz", 1, "gen.npz")
    finally:
        f.unlink()


@_SETTINGS
@given(rows=st.lists(st.lists(st.sampled_from(["1", "0.5", "2", "abc", "", "1e400x", "--"]), min_size=1,
                              max_size=4), min_size=1, max_size=5))
def test_generated_csv_files(guarded, rows):
    """Tables with a cell that is not a number below a numeric first row, or ragged rows,
    or too few columns."""
    body = [["1", "0.25", "1"]] + rows
    ok = all(len(r) == 3 and all(c in ("1", "0.5", "2") for c in r) for r in rows)
    if ok:
        body.append(["zz", "1", "0"])     # make it bad
    f = guarded / "gen.csv"
    f.write_text("\n".join(",".join(r) for r in body) + "\n")
    try:
        check_refused(guarded, "train --data csv:{w}/gen.csv", 1, "gen.csv")
    finally:
        f.unlink()


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                     max_leaves=8)


@_SETTINGS
@given(doc=_json.filter(lambda d: not (isinstance(d, dict) and isinstance(d.get("counters"), dict))))
def test_generated_run_records(guarded, doc):
    """JSON that is not a run record (no counters object) is refused, naming the file."""
    f = guarded / "gen.json"
    f.write_text(json.dumps(doc))
    try:
        check_refused(guarded, "report {w}/gen.json", 1, "gen.json")
    finally:
        f.unlink()


@_SETTINGS
@given(field=st.sampled_from(["nr", "mem_a_words", "mem_b_words", "cores", "host_width", "ucode_depth"]),
       v=st.one_of(st.integers(max_value=0), st.integers(min_value=1 << 20), st.text(max_size=3)))
def test_generated_configs(guarded, field, v):
    inline = shlex.quote(json.dumps({field: v})).replace("{", "{{").replace("}", "}}")
    check_refused(guarded, f"info --config {inline}", 2, field)


@_SETTINGS
@given(text=st.binary(min_size=1, max_size=64).filter(lambda b: _not_utf8(b)))
def test_generated_binary_programs(guarded, text):
    f = guarded / "gen.s"
    f.write_bytes(text)
    try:
        check_refused(guarded, "run {w}/gen.s", 1, "gen.s")
    finally:
        f.unlink()


def _not_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


# --- what happens after the checks ------------------------------------------------------------------

def test_interrupt_and_failure_leave_no_outputs(guarded, monkeypatch):
    """An interrupt during training exits 130; a failure while writing the outputs
    leaves neither of them (nor a temporary file)."""
    import sim.train_driver

    w = guarded
    args = f"{T} --json {{w}}/out/t.json --png {{w}}/out/t.png --epochs 1 --max-train 8 --max-test 4"
    before = _listing(w)

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(sim.train_driver, "train", interrupted)
    rc, _, err = invoke(w, args)
    assert rc == 130 and err.strip() == "caterpillar: interrupted" and _listing(w) == before
    monkeypatch.undo()
    monkeypatch.setenv("TMPDIR", str(w / "tmp"))

    def bad_json(res, every=10):
        raise TypeError("cannot serialize")

    monkeypatch.setattr(sim.train_driver, "compact", bad_json)
    rc, out, err = invoke(w, args)
    assert rc == 1 and "internal error" in err and "Traceback" not in err
    assert _listing(w) == before, sorted(_listing(w) - before)


def test_debug_shows_the_traceback(ws):
    rc, _, err = invoke(ws, "--debug run {w}/bad.s")
    assert rc == 1 and "Traceback" in err and err.strip().endswith("unknown operation 'frob'")


@pytest.mark.parametrize("args,code", [("run {w}/bad.s", 1), ("train --epochs 0", 2),
                                       ("report {w}/list.json", 1), ("info --config nosuch", 2)])
def test_console_script(ws, args, code):
    """The installed entry point (``python -m cli``): same one line, same status."""
    r = subprocess.run([sys.executable, "-m", "cli", *shlex.split(args.format(w=ws))], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "TMPDIR": str(ws / "tmp")})
    assert r.returncode == code and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("caterpillar: error: ") and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,names", [("{w}/bin.s", "bin.s"), ("{w}/bad.s", "frob"), ("{w}/nofile.s", "nofile.s"),
                                        ("{w}/ok.s -o {w}/out", "--output"), ("--nosuch {w}/ok.s", "--nosuch")])
def test_assembler_command_line(ws, args, names):
    """``python -m sw.asm`` on bad input: one line, no traceback."""
    r = subprocess.run([sys.executable, "-m", "sw.asm", *shlex.split(args.format(w=ws))], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and names in r.stderr, r.stderr
