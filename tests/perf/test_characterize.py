"""Offline characterization and the performance model (perf/, docs/perf.md): the points
are the fast engines' measurements, the model fits its grid and predicts held-out shapes,
the ``caterpillar characterize`` command writes its outputs and refuses bad options."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from arch.config import PRESETS
from arch.errors import InputError, UsageError
from perf.characterize import CLASSES, CORE_CLASSES, RING_CLASSES, aggregate_counters, characterize, measure, \
    parse_classes, point_grid
from perf.model import PerfModel
from sim.power import EVERYTHING, report_from_counters

SMALL, CHIP = PRESETS["small"], PRESETS["chip-small"]
#: a subset of the classes that covers every kind of schedule term (blocked kernels,
#: GEMM blockings, a transpose, a chain and an every-core ring collective, the register
#: reduce-scatter's passes)
SUBSET = ["gemv", "fused_backward", "gemm_acc", "transpose", "bus_reduce", "ring_broadcast", "ring_reduce_scatter",
          "mat_all_gather"]


def test_point_is_a_run_kernel_measurement():
    """A core class's point: the counters of the kernel's phase of run_kernel (fast
    model) with real operands, its cycles the compiler's exact cost, its energies the
    power model's of those counters."""
    from sim.core_run import run_kernel
    from sw.collectives import Region
    from sw.kernels import gemv_cost
    from sw.layout import local_len, pack_matrix, pack_vector

    m, n = 23, 42
    p = measure(SMALL, "gemv", {"m": m, "n": n})
    rng = np.random.default_rng(1)
    fmt, nr = SMALL.fmt, SMALL.nr
    W = fmt.from_float(rng.uniform(-1, 1, (m, n))).astype(fmt.np_uint)
    x = fmt.from_float(rng.uniform(-1, 1, n)).astype(fmt.np_uint)
    kernel = CLASSES["gemv"].build(SMALL, {"m": m, "n": n})
    _, res = run_kernel(SMALL, [(Region("a", 0), pack_matrix(W, nr)), (Region("b", 0), pack_vector(x, nr, "diag"))],
                        [kernel], [(Region("b", 2 * local_len(n, nr) + 1), local_len(m, nr))], backend="fast")
    ctr = res[0].counters
    assert p["counters"] == aggregate_counters(ctr)
    assert p["cycles"] == ctr["cycles"] == gemv_cost(SMALL, m, n)["instructions"] + SMALL.run_overhead
    rep = report_from_counters(SMALL, ctr)
    assert p["energy_pj"] == pytest.approx(rep.energy_pj)
    assert set(p["energy_pj"]) == set(EVERYTHING)
    assert p["work"] == m * n and p["schedule"]["B"] >= 1
    assert measure(SMALL, "gemv", {"m": m, "n": n}) == p                 # deterministic


def test_ring_point_is_a_chip_engine_measurement():
    """A ring class's point: the fast chip engine's run of the collective on every core;
    its cycles the all-gather's slot formula, c (c - 1) m ring beats over the chip."""
    from sw.ring import all_gather_slots

    c, m = 4, 8
    p = measure(CHIP, "ring_all_gather", {"cores": c, "m": m})
    cfg = CHIP.replace(cores=c)
    assert p["cycles"] == all_gather_slots(cfg, m) + cfg.run_overhead
    assert p["counters"]["ring_out_beats"] == c * (c - 1) * m
    assert p["counters"]["stall_cycles"] == 0
    assert p["energy_pj"]["ring"] > 0 and p["work"] == c * (c - 1) * m
    # another ring size than the kind's own
    p6 = measure(CHIP, "ring_all_gather", {"cores": 6, "m": m})
    assert p6["counters"]["ring_out_beats"] == 6 * 5 * m


def test_grids_fit_the_kind_and_held_out_shapes_are_new():
    for name, cls in CLASSES.items():
        if name.startswith("dram"):
            continue
        grid = point_grid(SMALL, cls, quick=True)
        held = point_grid(SMALL, cls, quick=True, held_out=True)
        assert grid and held, name
        assert not {tuple(s.items()) for s in grid} & {tuple(s.items()) for s in held}, name
    odd = [s for s in point_grid(SMALL, CLASSES["gemv"], quick=True, held_out=True) if s["m"] % SMALL.nr]
    assert odd
    # no scratchpad, no scratchpad classes; no DRAM, no DRAM copies
    assert point_grid(SMALL.replace(spad_kib=0), CLASSES["spad_load"], quick=True) == []
    assert point_grid(SMALL, CLASSES["dram_store"], quick=True) == []


def test_dram_copy_points_and_model():
    """On a kind with DRAM: a DMA copy moves its beats, its engine is busy for the copy's
    time on an idle engine, the DRAM energy is a category of its own; the model predicts
    held-out lengths (partial transfers) within 0.5 %."""
    from sw.dram import dma_copy_cycles

    cfg = SMALL.replace(dram_mib=1)
    p = measure(cfg, "dram_load", {"n": 100})
    assert p["counters"]["dram_rd_beats"] == 100 and p["counters"]["dram_wr_beats"] == 0
    assert p["counters"]["dma_busy_cycles"] == dma_copy_cycles(cfg, "load", 0, 100)
    assert p["energy_pj"]["dram"] > 0
    doc = characterize({"dram": cfg}, ["dram_load", "dram_store"], grid="quick")
    held = PerfModel.fit(doc).evaluate(doc)["dram"]
    for c in ("dram_load", "dram_store"):
        assert held[c]["points"] >= 2 and held[c]["cycles"]["max"] < 0.005 and held[c]["energy"]["max"] < 0.005


@pytest.fixture(scope="module")
def quick():
    doc = characterize({"small": SMALL}, SUBSET, grid="quick")
    return doc, PerfModel.fit(doc)


def test_model_fits_the_grid_and_predicts_held_out_shapes(quick):
    """On the quick grid: cycles fitted exactly (the schedules are static, the terms are
    the schedule's), held-out cycles within 0.5 % and total energy within 3 %."""
    doc, model = quick
    assert set(doc["kinds"]["small"]["classes"]) == set(SUBSET)
    grid, held = model.evaluate(doc, "grid")["small"], model.evaluate(doc, "held_out")["small"]
    for c in SUBSET:
        assert grid[c]["cycles"]["max"] < 1e-6, c
        assert held[c]["points"] >= 2, c
        assert held[c]["cycles"]["max"] < 0.005, (c, held[c]["cycles"])
        assert held[c]["energy"]["max"] < 0.03, (c, held[c]["energy"])
    # a held-out prediction, directly
    p = doc["kinds"]["small"]["classes"]["gemv"]["held_out"][0]
    q = model.predict("small", "gemv", p["shape"])
    assert q["cycles"] == pytest.approx(p["cycles"], rel=0.005)
    assert set(q["energy_pj"]) == set(EVERYTHING)


def test_model_round_trip_and_errors(quick):
    doc, model = quick
    again = PerfModel.from_dict(json.loads(json.dumps(model.to_dict())))
    s = {"cores": 6, "m": 11}
    assert again.predict("small", "ring_broadcast", s) == model.predict("small", "ring_broadcast", s)
    with pytest.raises(InputError, match="kind"):
        model.predict("L", "gemv", {"m": 8, "n": 8})
    with pytest.raises(InputError, match="rank1"):
        model.predict("small", "rank1", {"m": 8, "n": 8})
    with pytest.raises(InputError, match="missing n"):
        model.predict("small", "gemv", {"m": 8})
    with pytest.raises(InputError, match="characterization"):
        PerfModel.fit({"format": "x"})


def test_parse_classes():
    assert parse_classes("all") == list(CLASSES)
    assert parse_classes("core") == list(CORE_CLASSES)
    assert parse_classes("ring,gemv") == list(RING_CLASSES) + ["gemv"]
    for bad in ("bogus", "gemv,", ""):
        with pytest.raises(UsageError, match="--classes"):
            parse_classes(bad)


def _cli(args):
    from cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def test_cli_writes_json_and_png(tmp_path):
    j, png = tmp_path / "c.json", tmp_path / "c.png"
    code, out, err = _cli(["characterize", "--configs", "small", '{"nr": 2, "mem_a_words": 256, "mem_b_words": 256}',
                           "--classes", "gemv,ring_pass_along", "--grid", "quick", "--json", str(j), "--png", str(png),
                           "--progress", "off"])
    assert code == 0, err
    assert "held-out" in out and "gemv" in out and "kind kind2" in out
    doc = json.loads(j.read_text())
    assert set(doc["kinds"]) == {"small", "kind2"}
    assert doc["kinds"]["kind2"]["config"]["nr"] == 2
    assert doc["model"]["format"] == "caterpillar-perf-model/1"
    assert doc["errors"]["held_out"]["small"]["gemv"]["cycles"]["max"] < 0.005
    assert "energy_convention" in doc and doc["grid"] == "quick"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args,names", [
    (["--configs", "nosuch"], "--configs"), (["--configs", '{"nr": 0}'], "nr"),
    (["--configs", "small", "small"], "twice"), (["--classes", "bogus"], "bogus"),
    (["--grid", "huge"], "--grid"), (["--json", "{tmp}"], "--json"), (["--png", "{tmp}/missing/c.png"], "missing"),
    (["--json", "{tmp}/c.json", "--png", "{tmp}/c.json"], "same file"), (["--progress", "maybe"], "--progress"),
])
def test_cli_bad_options(tmp_path, args, names):
    code, out, err = _cli(["characterize", "--configs", "small"] + [a.replace("{tmp}", str(tmp_path)) for a in args])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("caterpillar: error: "), err
    assert names in lines[0], lines[0]
    assert "Traceback" not in err and not list(tmp_path.iterdir())
