"""The architecture's ceiling on a training step's MAC utilization (:mod:`sim.arch_bound`):
hand-counted cases, the errors, and every Table 2 cell of ``benchmarks/results/paper.json``
at or under it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arch.config import PRESETS
from sim.arch_bound import architecture_bound, step_macs
from sim.paper import arch_bound_of, schedule_bound

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "paper.json"


def test_step_macs():
    # 8-4-2: forward 32 + 8, backward only layer 1 (8), update 40
    assert step_macs((8, 4, 2), "sgd") == 88 == step_macs((8, 4, 2), "cp")
    assert step_macs((8, 4, 2), "mbgd", 4) == 4 * 88
    with pytest.raises(ValueError, match="unknown training method 'adam'"):
        step_macs((8, 4, 2), "adam")


def test_fitting_weights_leave_only_the_fpu():
    b = architecture_bound(PRESETS["S"], (784, 500, 500, 500, 10), "sgd")
    assert b["bound"] == 1 and b["binding"] == "FPU" and b["loads"] == b["stores"] == b["dram_words"] == 0
    assert b["cycles"]["FPU"] == pytest.approx(step_macs((784, 500, 500, 500, 10), "sgd") / 512)


def test_paged_weights_hand_counted():
    # 2 cores of 2 x 2 PEs with 16 + 16 words each: 128 PE words per core; a 2 KiB scratchpad
    cfg = PRESETS["chip-tiny"].replace(mem_a_words=16, mem_b_words=16, spad_kib=2)
    sizes = (32, 16, 16)                           # W0 512, W1 256 words: per core W = 384, W' = 128
    host = cfg.host_width / cfg.fmt.width / 2      # each core's share of a host stream
    sgd = architecture_bound(cfg, sizes, "sgd", paper_util=0.5)
    assert (sgd["loads"], sgd["stores"]) == (256 + 0, 256)     # W' fits: layer 1 may stay, 256 words move
    fpu = step_macs(sizes, "sgd") / 8
    assert sgd["cycles"]["scratchpad loads"] == pytest.approx(256 / (2 + host))
    assert sgd["bound"] == pytest.approx(fpu / max(fpu, 256 / (2 + host)))
    assert sgd["port_words_needed"] == pytest.approx(256 * 0.5 / fpu)
    cp = architecture_bound(cfg, sizes, "cp")
    assert (cp["loads"], cp["stores"]) == (256, 256)
    big = architecture_bound(cfg, (32, 32, 32), "sgd")          # W = 1024, W' = 512 per core
    assert (big["loads"], big["stores"]) == (896 + 384, 896)
    mb = architecture_bound(cfg, (32, 32, 32), "mbgd", 8)
    assert mb["loads"] == big["loads"] and mb["cycles"]["FPU"] == 8 * big["cycles"]["FPU"]


def test_an_elementwise_loss_lets_the_output_layer_through():
    """With MSE the output layer's weights need not wait at the turn of the passes: the
    loads drop by its share, the stores stay those of the wait during layer 0."""
    cfg = PRESETS["chip-tiny"].replace(mem_a_words=16, mem_b_words=16, spad_kib=2)
    # per core W0 = 256, W1 = 128, W2 = 512 (the output layer): W = 896, W' = 640, C = 128
    smx = architecture_bound(cfg, (32, 16, 16, 64), "sgd")
    mse = architecture_bound(cfg, (32, 16, 16, 64), "sgd", loss="mse")
    assert (smx["loads"], smx["stores"]) == (768 + 512, 768)
    assert (mse["loads"], mse["stores"]) == (256 + 512, 512)
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        architecture_bound(cfg, (32, 16, 16, 64), "sgd", loss="hinge")


def test_dram_tier_and_errors():
    cfg = PRESETS["chip-tiny"].replace(mem_a_words=16, mem_b_words=16, spad_kib=1)   # 512 words of scratchpad
    with pytest.raises(ValueError, match=r"do not fit the PE memories and the scratchpad \(640 words\) and the "
                                         "configuration has no DRAM"):
        architecture_bound(cfg, (128, 64, 32), "cp")
    with pytest.raises(ValueError, match="the scratchpad and the DRAM"):
        architecture_bound(cfg.replace(dram_mib=1), (4096, 4096, 32), "cp")
    with pytest.raises(ValueError, match="no scratchpad"):
        architecture_bound(cfg.replace(spad_kib=0), (64, 32, 32), "sgd")
    d = architecture_bound(cfg.replace(dram_mib=1), (128, 64, 32), "cp")    # W = 5120 per core
    assert d["dram_words"] == 2 * (5120 - 128 - 512) and d["cycles"]["DRAM"] > 0


def test_table2_cells_under_the_bound():
    """Every cell that ran reaches at most the architecture's ceiling, and so does its
    own schedule's bound; the recomputed ceiling is the one recorded."""
    res = json.loads(RESULTS.read_text())
    ran = [r for r in res["cells"] if r["status"] == "ok"]
    assert len(ran) == 9
    for r in ran:
        a = arch_bound_of(r)["arch_bound"]
        assert r["mac_util"] <= a["bound"] and schedule_bound(r)["bound"] <= a["bound"] + 1e-9, r["network"]
        if "arch_bound" in r:
            assert r["arch_bound"]["bound"] == pytest.approx(a["bound"])
