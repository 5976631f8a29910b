"""Minibatch GD across the cores of a chip (sw/train_chip_mb.py): bit-exact against the
golden trainer (sw/golden_train_chip_mb.py) on both chip engines and the RTL, cycles as
predicted, the network's function independently of the golden, learning like float64
minibatch GD, errors."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np
import pytest

from tests.simulators import REPLAY_SIM_PARAMS, golden_matrix
from tests.sw.test_train import _eq_weights as _eq
from tests.sw.test_train_chip import check_engines_agree, check_spad_errors, check_spad_traffic
from tests.sw.test_train_chip import run_and_check as chip_run_and_check
from tests.sw.test_train import _seed
from arch.config import PRESETS
from sw.golden_train_chip_mb import GoldenChipMBGD
from sw.golden_train_mb import Float64MBGD
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, TrainCompileError, init_weights
from sim.sessions import ChipSession
from sw.train_chip_mb import compile_chip_mbgd
from sw.transfer import load_cost

TINY, SMALL = PRESETS["chip-tiny"], PRESETS["chip-small"]


def _batch(rng, mlp):
    X = rng.uniform(-1, 1, (mlp.n_in, mlp.batch))
    if mlp.loss == "softmax_ce":
        return X, rng.integers(0, mlp.n_out, mlp.batch)
    return X, rng.uniform(-1, 1, (mlp.n_out, mlp.batch))


def run_and_check(cfg, mlp, steps, backend, seed, record=False, out_map="auto"):
    """``test_train_chip``'s check loop with the minibatch compiler, golden and batches."""
    return chip_run_and_check(cfg, mlp, steps, backend, seed, record, compile=compile_chip_mbgd,
                              golden=GoldenChipMBGD, sample=_batch, out_map=out_map)


_MBGD_CASES = {"tiny-2layer-b3": (TINY, (5, 6, 3), 3), "tiny-3layer-b4": (TINY, (7, 9, 4, 3), 4),
               "small-3layer-b5": (SMALL, (20, 30, 17, 5), 5), "small-full-panels-b8": (SMALL, (20, 32, 32, 16), 8)}


#: the per-cycle engine of the small-chip cases: the MSE loss of the 3-layer case in make
#: test (the counters against the fast engine's: test_chip_mbgd_spad_engines_agree), the
#: others in make test-all (their fast-engine twins and the tiny cases' model runs cover
#: the same compiler paths)
@pytest.mark.parametrize("cfg,sizes,b,loss,backend,out_map",
                         golden_matrix(_MBGD_CASES, ("small-3layer-b5", "mse", "cols")))
def test_chip_mbgd_matches_golden(cfg, sizes, b, loss, backend, out_map):
    """Both mappings of the output layer (row panels; split by columns, reduced onto
    core 0). ``small-full-panels``: every core holds real rows of every layer, so every
    reduce-scatter (and the output reduce) adds non-zero partials from all cores and the
    ring's addition order shows in the rounding (padded panels contribute exact zeros)."""
    run_and_check(cfg, MLP(sizes, loss, 0.05, batch=b), 2, backend, _seed(), out_map=out_map)


def test_chip_mbgd_out_map_choice():
    """``auto`` splits the output layer by columns when it has at most ``cores * nr`` rows
    and a hidden layer feeds it; the split saves the padded rows' work and the output
    layer's all-gathers and reduce-scatter."""
    from sw.train_chip import resolve_out_map

    assert resolve_out_map(SMALL, MLP((20, 30, 16), "mse", 0.1, batch=2)) == "cols"
    assert resolve_out_map(SMALL, MLP((20, 30, 17), "mse", 0.1, batch=2)) == "rows"
    assert resolve_out_map(SMALL, MLP((20, 5), "mse", 0.1, batch=2)) == "rows"
    with pytest.raises(TrainCompileError, match="needs a hidden layer"):
        compile_chip_mbgd(SMALL, MLP((20, 5), "mse", 0.1, batch=2), out_map="cols")
    with pytest.raises(TrainCompileError, match="out_map must be one of auto, rows, cols"):
        compile_chip_mbgd(SMALL, MLP((20, 30, 5), "mse", 0.1, batch=2), out_map="diag")
    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=8)
    rows, cols = (compile_chip_mbgd(SMALL, mlp, out_map=m) for m in ("rows", "cols"))
    assert cols.step_cycles() < rows.step_cycles()
    ops = {op for op, _, _ in cols.breakdown()}
    assert {"reduce_Z", "bcast_G"} <= ops and not {"ag2", "rs2", "agT2"} & ops
    rops = {op for op, _, _ in rows.breakdown()}
    assert "rs2" in rops and ("ag2" in rops) != (2 in rows.meta["ring_fw"])         # or inside gemm2
    assert ("agT2" in rops) != (2 in rows.meta["ring_up"])                             # or inside update2
    assert cols.out_cores == 1 and rows.out_cores == 2


def test_chip_mbgd_engines_agree_counter_for_counter():
    """The fast chip engine and the per-cycle chip model: same counters on every core;
    the programs are reloaded between RUNs, aligned (the LOADs and the alignment JUMPs of
    test_chip_mbgd_reloaded_programs_aligned on both engines)."""
    check_engines_agree(run_and_check, MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=8))


def test_chip_mbgd_binary32_and_more_cores():
    cfg = replace(SMALL, fmt="binary32", cores=6)
    run_and_check(cfg, MLP((9, 30, 7), "mse", 0.05, batch=6), 2, "fast", _seed())


def test_chip_mbgd_x_t_from_the_ring_or_the_host():
    """With a scratchpad (a write predicate for the root) the ring transposes core 0's X
    into every core's X^T and the host loads X only; without one, the host loads X^T
    too and a plain broadcast sends it: both bit for bit against the same golden, the
    host phase ``in`` longer by X^T's load cost."""
    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=6)
    plain = replace(SMALL, spad_kib=0)
    seed = _seed()
    in_cycles = {}
    for cfg, host in ((SMALL, False), (plain, True)):
        tp = compile_chip_mbgd(cfg, mlp)
        assert ("core 0 loads it" in tp.alloc.items["XT"].what) is host
        in_cycles[host] = dict(tp.host_phase_cycles())["in"]
        run_and_check(cfg, mlp, 2, "fast", seed)       # the run's cycles = the prediction
    assert in_cycles[True] - in_cycles[False] == load_cost(SMALL, tp._words("XT"))


def test_chip_mbgd_batch_1_and_odd_shapes():
    """b = 1 (every batch column padding but one) and sizes nr does not divide."""
    run_and_check(SMALL, MLP((3, 7, 2), "mse", 0.1, batch=1), 2, "fast", _seed())
    run_and_check(TINY, MLP((1, 3, 2), "softmax_ce", 0.1, batch=7), 2, "fast", _seed())


@pytest.mark.parametrize("cfg", [SMALL, replace(SMALL, cores=6)], ids=["4cores", "6cores"])
def test_chip_mbgd_forward_is_the_network(cfg):
    """Independent of the golden trainer: the chip's forward pass computes the network's
    function, within binary16 rounding of a float64 forward pass with the same weights
    (catches a wrong gather order or a wrong panel placement)."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=6)
    tp = compile_chip_mbgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = ChipSession(cfg, "fast")
    tp.init(sess, W0)
    ref = Float64MBGD(mlp, [cfg.fmt.to_float(np.asarray(w)) for w in W0])
    X = cfg.fmt.to_float(cfg.fmt.from_float(rng.uniform(-1, 1, (mlp.n_in, mlp.batch))))
    got, want = tp.predict(sess, X), ref.predict(X)
    assert np.allclose(got, want, rtol=0.02, atol=0.02 * np.abs(want).max()), (got, want)


def test_chip_mbgd_learns_like_float64():
    """60 minibatch steps on a learnable problem: the array's loss falls like float64
    minibatch GD's from the same weights on the same batches."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    mlp = MLP((8, 16, 4), "softmax_ce", 0.4, batch=8)
    cfg = SMALL
    tp = compile_chip_mbgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = ChipSession(cfg, "fast")
    tp.init(sess, W0)
    ref = Float64MBGD(mlp, [cfg.fmt.to_float(np.asarray(w)) for w in W0])
    centers = rng.uniform(-1, 1, (4, 8))
    la, lr = [], []
    for _ in range(60):
        c = rng.integers(0, 4, mlp.batch)
        X = (centers[c] + 0.1 * rng.standard_normal((mlp.batch, 8))).T
        la.append(tp.run_step(sess, X, c).loss)
        lr.append(ref.step(X, c)["loss"])
    a0, a1, r1 = np.mean(la[:10]), np.mean(la[-10:]), np.mean(lr[-10:])
    print(f"loss {a0:.3f} -> {a1:.3f} (float64 {r1:.3f})")
    assert a1 < 0.5 * a0 and abs(a1 - r1) < 0.05 + 0.1 * r1


def test_chip_mbgd_cycle_accounting():
    """The step's cycles are its chip RUNs plus the host phases (back to back) plus the
    microcode LOADs between its RUNs (its programs need several images here) plus the
    softmax turnaround once per minibatch; every chip RUN issues the same instructions on
    every core; the breakdown adds up."""
    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=8)
    tp = compile_chip_mbgd(SMALL, mlp)
    chip = sum(tp.part_cycles(p) for p in tp.chip_parts())
    host = sum(c for _, c in tp.host_phase_cycles())
    assert len(tp.images) > 1 and tp.reload_cycles() > 0
    assert tp.step_cycles() == chip + host + tp.reload_cycles() + HOST_LATENCY_CYCLES
    assert sum(i for _, _, i in tp.breakdown()) == chip       # ops, gaps, HALT + drain per RUN
    kinds = {k for _, k, _ in tp.breakdown()}
    assert {"gemm", "gemm_acc", "transpose", "ring", "relu", "relu_mask"} <= kinds
    assert "minibatch GD step" in tp.describe()


def test_chip_mbgd_errors():
    with pytest.raises(TrainCompileError, match="needs a chip"):
        compile_chip_mbgd(PRESETS["small"], MLP((8, 8, 4), "mse", 0.1, batch=4))
    with pytest.raises(TrainCompileError, match="does not fit 2 cores of 2x2 PEs"):
        compile_chip_mbgd(TINY, MLP((100, 100, 4), "mse", 0.1, batch=16))
    with pytest.raises(TrainCompileError, match="zero"):
        compile_chip_mbgd(TINY, MLP((8, 8, 4), "mse", 1e-7, batch=4))
    tp = compile_chip_mbgd(TINY, MLP((5, 6, 3), "mse", 0.1, batch=3))
    with pytest.raises(ValueError, match="5 x 3 matrix"):
        tp.run_step(ChipSession(TINY, "fast"), np.zeros((5, 4)), np.zeros((3, 3)))


@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_chip_mbgd_rtl(sim):
    """Minibatch steps (MSE with the output layer by rows, softmax with it split by
    columns; b = 3) on 4 cores of 2 x 2 PEs with a 128-word
    microcode, recorded on the per-cycle chip model and replayed on the RTL (every beat
    and counter of every core compared); the weights read back from the RTL equal the
    golden trainer's. The collectives run inside the GEMMs (the broadcast of X; with row
    panels the all-gather of A1 too, forced: the compiler would leave it out for the
    microcode reloads its text adds at 128 words, and the all-gather of A1^T's blocks
    inside W1's update; ``sw/ring_mat_gemm.py``); the softmax step's programs are
    reloaded with their collectives in the resident region (a JUMP there and back). The
    configuration is ``tests/rtl/test_chip.py``'s ``CHIP4`` (one simulator build)."""
    from sim.chip_run import ChipPhase, run_chip_session
    from tests.rtl.test_chip import CHIP4

    seed = _seed()
    for loss, out_map in (("mse", "rows"), ("softmax_ce", "cols")):
        mlp = MLP((5, 6, 3), loss, 0.125, batch=3)
        ring = [0, 1] if out_map == "rows" else [0]
        tp, sess, gold, results = chip_run_and_check(
            CHIP4, mlp, 1, "model", seed, True, golden=GoldenChipMBGD, sample=_batch, out_map=out_map,
            compile=partial(compile_chip_mbgd, ring_layers=ring, ring_updates=ring[1:]))
        assert tp.meta["ring_fw"] == ring and tp.meta["ring_up"] == ([1] if out_map == "rows" else [])
        assert not {"bcast_X", "ag1", "agT1"} & {op for op, _, _ in tp.breakdown()}
        # the softmax program's collectives run in the resident region (reloaded programs)
        assert any(p.calls for p in tp.chip_parts()) == (loss == "softmax_ce")
        un = tp.unload_weights_phases()
        phases = sess.phases + [ChipPhase(imgs, None, name) for imgs, name in un]
        res = run_chip_session(CHIP4, phases, backend="rtl", sim=sim, name=f"chip-mbgd-{loss}")
        got = tp.decode_weights(res[-len(un):], padded=True)
        _eq(got, gold.weights(padded=True), f"rtl {loss}")
        print(f"{sim} {loss}: {res[-1][0].info}")


# -- weight panels in the scratchpad ---------------------------------------------------
def run_spad(cfg, mlp, steps, backend, seed, spad=None, page_rows=None, out_map="auto", record=False):
    """:func:`run_and_check` with the panels of layers ``spad`` (None: the compiler's
    choice) in the scratchpad, paged by at most ``page_rows`` rows."""
    return chip_run_and_check(cfg, mlp, steps, backend, seed, record,
                              compile=partial(compile_chip_mbgd, spad=spad, page_rows=page_rows),
                              golden=partial(GoldenChipMBGD, spad=spad, page_rows=page_rows), sample=_batch,
                              out_map=out_map)


@pytest.mark.parametrize("loss,out_map", [("mse", "rows"), ("softmax_ce", "cols")])
@pytest.mark.parametrize("spad,page_rows", [([0, 1, 2], 4), ([1], 8), ([0, 2], None)],
                         ids=["all-4-row-pages", "one-layer-2-pages", "whole-panels"])
def test_chip_mbgd_spad_matches_golden(spad, page_rows, loss, out_map):
    """Panels in the scratchpad, paged through the page buffer: full panels on every
    core (every page's partial of ``dX^T`` non-zero, so the page-by-page accumulation
    shows in the rounding), both output mappings (the split output layer stays in PE
    memory), bit-exact against the golden trainer after every step, cycles as predicted;
    the scratchpad traffic is three panel transfers per step but for the last paged
    layer's last page (still in the page buffer when the backward pass reaches it). (Fast chip engine; the
    per-cycle model runs paged panels in the engines-agree and RTL tests.)"""
    if out_map == "cols":
        spad = [l for l in spad if l < 2] or [1]
    cfg = replace(SMALL, spad_kib=4)
    mlp = MLP((20, 32, 32, 16), loss, 0.05, batch=8)
    tp, sess, gold, res = run_spad(cfg, mlp, 2, "fast", _seed(), spad, page_rows, out_map)
    assert sorted(tp.spad) == sorted(spad)
    if page_rows:
        assert all(n * cfg.nr <= page_rows for sp in tp.spad.values() for _, n in sp.pages)
    check_spad_traffic(tp, res[-1])


def test_chip_mbgd_spad_when_pe_memory_is_short():
    """PE memories too small for the panels: the compiler moves the largest panels to the
    scratchpad by itself (the golden trainer follows the same plan); with too small a
    scratchpad it fails with the sizes; explicit choices are checked."""
    mlp = MLP((40, 128, 32, 5), "mse", 0.05, batch=4)
    cfg = replace(SMALL, mem_a_words=128, mem_b_words=128, spad_kib=4)
    with pytest.raises(TrainCompileError, match="does not fit .* there is no scratchpad"):
        compile_chip_mbgd(replace(cfg, spad_kib=0), mlp)
    tp, *_ = run_spad(cfg, mlp, 2, "fast", _seed())
    assert sorted(tp.spad) == [0] and tp.meta["spad_layers"] == [0] and tp.meta["pages"] == {0: 2}
    with pytest.raises(TrainCompileError, match="nor with the largest panels in the 256-beat scratchpad"):
        compile_chip_mbgd(replace(cfg, spad_kib=2), mlp, acts="resident")
    assert compile_chip_mbgd(replace(cfg, spad_kib=2), mlp).meta["acts"] == "reuse"   # the activations reused
    check_spad_errors(compile_chip_mbgd, mlp, 3, r"\[0, 1\] \(the row-panel layers\)")


def test_chip_mbgd_spad_engines_agree():
    """The fast chip engine and the per-cycle chip model with paged panels: the same
    counters (scratchpad beats included) on every core."""
    check_engines_agree(partial(run_spad, spad=[0], page_rows=4), MLP((12, 40, 6), "softmax_ce", 0.05, batch=4))


@pytest.mark.parametrize("loss,out_map", [("mse", "rows"), ("softmax_ce", "cols")])
def test_chip_mbgd_page_overlap(loss, out_map):
    """``page_overlap``: a paged panel whose GEMMs can (at least 3 local columns of the
    minibatch) is stored in word order, and each page's forward GEMM but the last loads
    the next page in place as it runs (blocks of one local row). Bit for bit against the
    golden trainer, the same scratchpad traffic and FMAs, fewer cycles by the hidden
    loads (each costs the GEMM the blocking and the pointer), on both chip engines
    counter for counter; a minibatch of 2 local columns keeps the row order."""
    cfg = replace(SMALL, spad_kib=4)
    mlp = MLP((20, 32, 24, 16), loss, 0.05, batch=12)
    seed = _seed()
    spad = [0, 1] if out_map == "rows" else [0]
    runs = {on: chip_run_and_check(cfg, mlp, 2, "fast", seed, compile=partial(
        compile_chip_mbgd, spad=spad, page_rows=4, page_overlap=on), golden=partial(
        GoldenChipMBGD, spad=spad, page_rows=4), sample=_batch, out_map=out_map) for on in (True, False)}
    (tp, _, _, res), (tp0, _, _, res0) = runs[True], runs[False]
    assert tp.meta["page_overlap"] == spad and tp0.meta["page_overlap"] == []
    assert {sp.order for sp in tp.spad.values()} == {"words"} and {sp.order for sp in tp0.spad.values()} == {"rows"}
    names = [n for n, _, _ in tp.breakdown()]
    pages = {l: len(sp.pages) for l, sp in tp.spad.items()}
    assert [n for n in names if n.startswith("ld")] == [f"ld{l}_0" for l in spad]
    assert [n for n in names if "+ld" in n] == [f"gemm{l}_{p}+ld{p + 1}" for l in spad for p in range(pages[l] - 1)]
    for key in ("spad_rd_beats", "spad_wr_beats", "fma[0]"):
        assert sum(c[key] for c in res[-1].core_counters) == sum(c[key] for c in res0[-1].core_counters), key
    check_spad_traffic(tp, res[-1])
    cyc0 = dict((n, c) for n, _, c in tp0.breakdown())
    cyc = dict((n, c) for n, _, c in tp.breakdown())
    for l in spad:
        for p in range(pages[l] - 1):
            # the load's op is gone; the GEMM took at most a few instructions more
            assert 0 <= cyc[f"gemm{l}_{p}+ld{p + 1}"] - cyc0[f"gemm{l}_{p}"] <= 12
    hidden = sum(cyc0[f"ld{l}_{p}"] for l in spad for p in range(1, pages[l]))
    assert res0[-1].cycles - res[-1].cycles >= hidden - 12 * sum(pages.values())
    b = chip_run_and_check(cfg, mlp, 2, "model", seed, compile=partial(compile_chip_mbgd, spad=spad, page_rows=4),
                           golden=partial(GoldenChipMBGD, spad=spad, page_rows=4), sample=_batch,
                           out_map=out_map)[3]
    for ra, rb in zip(res, b):
        assert ra.core_counters == rb.core_counters
    small_b = compile_chip_mbgd(cfg, MLP((20, 32, 24, 16), loss, 0.05, batch=8), spad=spad, page_rows=4,
                                out_map=out_map)
    assert small_b.meta["page_overlap"] == [] and "words" not in {sp.order for sp in small_b.spad.values()}


@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_chip_mbgd_spad_rtl(sim):
    """Paged panels on the RTL: 2 cores of 2 x 2 PEs with a 256-beat scratchpad
    (``test_train_chip``'s ``CHIP2_SMX``, one simulator build), both layers in the
    scratchpad in pages of 2 rows, each page's forward GEMM loading the next (a minibatch
    of 6: 3 local columns); recorded on the per-cycle model against the golden
    trainer, replayed on the RTL (every beat and counter compared), the weights read back
    from the RTL's scratchpads equal the golden trainer's."""
    from sim.chip_run import ChipPhase, run_chip_session
    from tests.sw.test_train_chip import CHIP2_SMX

    mlp = MLP((5, 9, 6), "mse", 0.125, batch=6)
    tp, sess, gold, _ = run_spad(CHIP2_SMX, mlp, 2, "model", _seed(), [0, 1], 2, "rows", record=True)
    assert all(len(sp.pages) > 1 for sp in tp.spad.values()) and tp.meta["page_overlap"] == [0, 1]
    un = tp.unload_weights_phases()
    phases = sess.phases + [ChipPhase(imgs, None, name) for imgs, name in un]
    res = run_chip_session(CHIP2_SMX, phases, backend="rtl", sim=sim, name="chip-mbgd-spad")
    _eq(tp.decode_weights(res[-len(un):], padded=True), gold.weights(padded=True), "rtl spad")


@pytest.mark.parametrize("config,out_map", [("tiny", "auto"), ("chip-tiny", "auto"), ("chip-tiny", "rows")])
def test_cli_train_minibatch(tmp_path, config, out_map):
    """``caterpillar train --batch 4 [--out-map rows]``: minibatch GD on one core or
    across a chip's cores, golden-checked steps, JSON and PNG written, the step figures
    equal the compiler's."""
    import json

    from cli.main import main
    from sw.train_mb import compile_mbgd

    js, png = tmp_path / "t.json", tmp_path / "t.png"
    rc = main(["train", "--data", "synthetic", "--hidden", "6", "--epochs", "1", "--lr", "0.2", "--batch", "4",
               "--config", config, "--golden-steps", "5", "--max-train", "60", "--max-test", "40",
               "--json", str(js), "--png", str(png), "--out-map", out_map])
    assert rc == 0 and png.stat().st_size > 0
    res = json.loads(js.read_text())
    cfg, mlp = PRESETS[config], MLP((16, 6, 4), "softmax_ce", 0.2, batch=4)
    tp = compile_chip_mbgd(cfg, mlp, out_map=out_map) if cfg.cores > 1 else compile_mbgd(cfg, mlp)
    if cfg.cores > 1:
        assert tp.out_map == ("cols" if out_map == "auto" else out_map)
    assert res["golden_checked_steps"] == 5 and res["steps"] == 15 and res["batch"] == 4
    assert res["step"]["cycles"] == tp.step_cycles()


def test_cli_train_minibatch_with_panels_in_the_scratchpad(tmp_path, capsys):
    """``caterpillar train --batch 4 --describe`` on a chip whose PE memories do not hold
    the second layer's panel: the compiler pages it through the scratchpad, the steps
    are golden-checked, the description names the scratchpad region."""
    import json

    from cli.main import main

    js = tmp_path / "t.json"
    cfg = '{"preset": "chip-small", "mem_a_words": 128, "mem_b_words": 128, "spad_kib": 4}'
    rc = main(["train", "--data", "synthetic", "--hidden", "128,64", "--epochs", "1", "--lr", "0.05", "--batch", "4",
               "--loss", "mse", "--config", cfg, "--golden-steps", "3", "--max-train", "12", "--max-test", "8",
               "--json", str(js), "--describe"])
    out = capsys.readouterr().out
    assert rc == 0 and "scratchpad beats 0.." in out and "W1 panel, 2 page(s)" in out
    assert json.loads(js.read_text())["golden_checked_steps"] == 3


def test_chip_mbgd_exec_stage():
    """Chip minibatch GD with the execute, distribution and fetch stages on every core, against
    the golden."""
    cfg = PRESETS["chip-small"].replace(exec_stage=True, bus_stage=True, dist_stage=True, fetch_stage=True, read_stage=True)
    run_and_check(cfg, MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=3), 2, "fast", _seed())


def test_chip_mbgd_reloaded_programs_aligned(monkeypatch):
    """Programs reloaded between RUNs (they do not fit the microcode together), placed
    three ways: each core's ops packed; every op at the same address on every core, an
    alignment JUMP after the ops whose length differs between cores
    (``sw.train_chip_place._assemble_aligned``); and, the compiler's choice, aligned with
    the ring collectives (mostly each core's own words) in the resident region at the
    bottom of the microcode, which every image holds unchanged, run through a JUMP there
    and one back (``sw.train_chip_place._resident``). The LOADs broadcast the shared
    words and patch the rest: each placement LOADs fewer beats a step than the one
    before, and the JUMPs are in the breakdown and the step's cycles (bit for bit against
    the golden on both engines, counter for counter:
    test_chip_mbgd_engines_agree_counter_for_counter)."""
    import sw.train_chip_mb as tcm

    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05, batch=8)
    tp = compile_chip_mbgd(SMALL, mlp)
    parts = tp.chip_parts()
    base = min(p.origin for p in parts)
    assert len(tp.images) > 1 and base > 0 and any(p.calls for p in parts)
    assert all(img[k][:base] == tp.images[0][k][:base] for img in tp.images for k in range(SMALL.cores))
    assert len({tuple(tp.images[0][k][:base]) for k in range(SMALL.cores)}) > 1      # each core's own code
    rows = tp.breakdown()
    assert rows.count(("call", "jump", 1)) == rows.count(("return", "jump", 1)) == sum(len(p.calls) for p in parts)
    assert rows.count(("align", "jump", 1)) == sum(len(p.jumps) for p in parts)
    assert f"resident region: microcode words 0..{base - 1}, loaded once" in tp.describe()
    with monkeypatch.context() as m:
        m.setattr(tcm, "_place_parts", partial(tcm._place_parts, resident=False))
        aligned = compile_chip_mbgd(SMALL, mlp)
        m.setattr(tcm, "_place_parts", partial(tcm._place_parts, align=False))
        packed = compile_chip_mbgd(SMALL, mlp)
    assert any(p.jumps for p in aligned.chip_parts()) and not any(p.calls for p in aligned.chip_parts())
    assert not any(p.jumps or p.calls for p in packed.chip_parts())

    def shared(prog):                    # words that every core holds alike, over the images
        return sum(len(set(ws)) == 1 for img in prog.images for ws in zip(*img))
    assert shared(aligned) > 2 * shared(packed)
    assert tp.reload_cycles() < aligned.reload_cycles() < packed.reload_cycles()
