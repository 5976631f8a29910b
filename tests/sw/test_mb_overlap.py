"""Minibatch GD across cores with the forward collectives inside the GEMMs
(sw/ring_mat_gemm.py): the broadcast of X and the all-gathers of the hidden activations
taken off the ring by the GEMMs that read them. Weights bit for bit against
GoldenChipMBGD and the old schedule, both chip engines counter for counter, fewer
cycles, the switch, the describe() text, paged layers kept on the old schedule, and
mutations of the fragment (a wrong operand, a beat taken before it arrives) caught."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np
import pytest

from arch.config import PRESETS
from sim.chip_model import RingStallError
from sim.sessions import ChipSession
from sw import ring_mat_gemm
from sw.golden_train_chip_mb import GoldenChipMBGD
from sw.mlp import MLP
from sw.collectives import Region
from sw.ring import RingError
from sw.ring_mat_gemm import gemm_ring_frag, gemm_ring_plan, gemm_ring_update_plan
from sw.train import TrainCompileError, init_weights
from sw.train_chip import overlap_options
from sw.train_chip_mb import compile_chip_mbgd
from tests.sw.test_train import _eq_weights as _eq
from tests.sw.test_train import _seed
from tests.sw.test_train_chip import run_and_check as chip_run_and_check
from tests.sw.test_train_chip_mb import _batch

TINY = PRESETS["chip-tiny"]
#: chip-small (4 cores of 4 x 4) with a microcode that holds the step's programs (no reloads)
SMALL = PRESETS["chip-small"].replace(ucode_depth=4096)


def _run(cfg, mlp, steps, backend, seed, out_map="auto", **kw):
    return chip_run_and_check(cfg, mlp, steps, backend, seed, compile=partial(compile_chip_mbgd, **kw),
                              golden=partial(GoldenChipMBGD, **{k: v for k, v in kw.items() if k in
                                                                ("spad", "page_rows", "acts")}),
                              sample=_batch, out_map=out_map)


@pytest.mark.parametrize("loss,out_map,acts", [("mse", "rows", "resident"), ("softmax_ce", "cols", "resident"),
                                               ("softmax_ce", "rows", "reuse")])
def test_mb_overlap_matches_golden_and_old_schedule(loss, out_map, acts):
    """Three steps on 4 cores of 4 x 4 (full panels: every core's segment non-zero, so a
    beat from the wrong core or in the wrong order shows), weights bit for bit against
    the golden after every step and equal to the old schedule's, cycles as predicted
    and fewer."""
    cfg = replace(SMALL, spad_kib=4)
    mlp = MLP((20, 32, 32, 16), loss, 0.05, batch=8)
    seed = _seed()
    hidden = [1, 2] if out_map == "rows" else [1]
    tp, sess, gold, _ = _run(cfg, mlp, 3, "fast", seed, out_map, acts=acts, ring_updates=hidden)
    old, osess, *_ = _run(cfg, mlp, 3, "fast", seed, out_map, acts=acts, **overlap_options(False))
    assert tp.meta["ring_fw"] == [0] + hidden and old.meta["ring_fw"] == []
    assert tp.meta["ring_up"] == hidden and old.meta["ring_up"] == []
    _eq(tp.weights_from_session(sess, padded=True), old.weights_from_session(osess, padded=True), "old schedule")
    assert tp.step_cycles() < old.step_cycles()
    ops = {op for op, _, _ in tp.breakdown()}
    moved = {"bcast_X"} | {f"ag{l}" for l in hidden} | {f"agT{l}" for l in hidden}
    assert not moved & ops and "bcast_XT" in ops
    assert moved <= {op for op, _, _ in old.breakdown()}


def test_mb_overlap_engines_agree():
    """The fast chip engine and the per-cycle chip model, two steps with a broadcast and
    an all-gather inside the GEMMs: the same counters on every core."""
    mlp, seed = MLP((12, 20, 10, 6), "mse", 0.05, batch=4), _seed()
    a = _run(SMALL, mlp, 2, "fast", seed, "rows", ring_updates=[1, 2])
    b = _run(SMALL, mlp, 2, "model", seed, "rows", ring_updates=[1, 2])
    assert a[0].meta["ring_fw"] == [0, 1, 2] and a[0].meta["ring_up"] == [1, 2]
    for ra, rb in zip(a[3], b[3]):
        assert ra.core_counters == rb.core_counters and ra.phases == rb.phases


def test_mb_overlap_paged_layers_keep_the_old_schedule():
    """A paged panel's pages re-read the gathered input, so its GEMM keeps the collective
    before it; the other layers take theirs off the ring; describe() says which."""
    cfg = replace(SMALL, spad_kib=4)
    mlp = MLP((20, 32, 32, 16), "mse", 0.05, batch=8)
    tp, *_ = _run(cfg, mlp, 2, "fast", _seed(), "rows", spad=[1], page_rows=4, ring_updates=[2])
    assert tp.meta["ring_fw"] == [0, 2] and "paged" in tp.meta["ring_fw_why"][1]
    assert tp.meta["ring_up"] == [2] and "paged" in tp.meta["ring_up_why"][1]
    text = tp.describe()
    assert "forward collectives inside the GEMMs: broadcast of X in W0 A, all-gather of A2 in W2 A" in text
    assert "all-gather of A1 before the GEMM of W1: paged panel" in text
    assert "backward collectives inside the GEMMs: all-gather of A2^T in the update of W2" in text
    with pytest.raises(TrainCompileError, match=r"ring_updates \[1\]: .*layer 1: paged panel"):
        compile_chip_mbgd(cfg, mlp, out_map="rows", spad=[1], page_rows=4, ring_updates=[1])
    off = compile_chip_mbgd(cfg, mlp, out_map="rows", ag_overlap=False)
    assert off.meta["ring_fw"] == [0] and off.meta["ring_fw_why"] == {1: "switched off", 2: "switched off"}
    assert off.meta["ring_up"] == [] and off.meta["ring_up_why"] == {1: "switched off", 2: "switched off"}
    assert "forward collectives inside the GEMMs: none" in compile_chip_mbgd(
        cfg, mlp, out_map="rows", **overlap_options(False)).describe()


def test_mb_overlap_falls_back_when_reloads_cost_more():
    """With chip-small's 1024-word microcode the longer text adds microcode reloads worth
    more than some collectives: the compiler keeps the fewest cycles of every collective
    inside its GEMM, the forward and the update ones apart, each alone and none, and says
    why for the others; ``ring_layers`` / ``ring_updates`` force a choice."""
    mlp = MLP((20, 32, 32, 16), "mse", 0.05, batch=8)
    cfg = PRESETS["chip-small"]
    tp = compile_chip_mbgd(cfg, mlp, out_map="rows")
    full = compile_chip_mbgd(SMALL, mlp, out_map="rows")      # the whole text in one image
    assert full.meta["ring_fw"] == [0, 1, 2] and full.reload_cycles() == 0
    assert all(full.meta["ring_up_why"][l].startswith("no faster") for l in {1, 2} - set(full.meta["ring_up"]))
    assert tp.reload_cycles() > 0 and len(tp.meta["ring_fw"] + tp.meta["ring_up"]) < 5
    assert all("microcode reloads" in tp.meta["ring_fw_why"][l] for l in {0, 1, 2} - set(tp.meta["ring_fw"]))
    assert all(w.startswith(("no faster", "the longer", "the updates' texts")) for w in tp.meta["ring_up_why"].values())
    forced = compile_chip_mbgd(cfg, mlp, out_map="rows", ring_layers=[0, 1, 2], ring_updates=[])
    assert forced.meta["ring_fw"] == [0, 1, 2] and forced.reload_cycles() > 0
    with pytest.raises(TrainCompileError, match=r"ring_layers \[2\]: .*layer 2: paged panel"):
        compile_chip_mbgd(SMALL.replace(spad_kib=4), mlp, out_map="rows", spad=[2], page_rows=4, ring_layers=[2])
    assert tp.step_cycles() <= compile_chip_mbgd(cfg, mlp, out_map="rows", **overlap_options(False)).step_cycles()


def test_mb_overlap_plan_and_errors():
    """The blocking: accumulators and ``xr`` within the registers, every MAC slot used when
    ``Li Lc`` covers the accumulator reuse distance; the fragment's errors."""
    cfg = PRESETS["S"]
    pl = gemm_ring_plan(cfg, 16, 16, 4, list(range(32)))
    assert pl["Li"] * pl["Lc"] + 1 <= cfg.n_regs and pl["p"] == pl["Li"]
    assert pl["macs"] == 4 * 4 * 512                    # the GEMM's MACs per PE
    up = gemm_ring_update_plan(cfg, 16, 16, 512, 4)     # W += D A^T: 16 x 512 per core, b = 16
    assert up["Li"] * up["Lc"] + 2 <= cfg.n_regs and up["p"] == up["Li"] and len(up["passes"]) == 512 // 4 // up["Lc"]
    assert [o for _, _, o in up["passes"]] == sorted(o for _, _, o in up["passes"])   # one owner after another
    W, X = Region("a", 0), Region("b", 0)
    with pytest.raises(RingError, match="different banks"):
        gemm_ring_frag(cfg, 0, 16, 512, 16, W, Region("a", 100), Region("b", 900), list(range(32)))
    with pytest.raises(RingError, match="do not split"):
        gemm_ring_frag(cfg, 0, 16, 500, 16, W, X, Region("b", 900), list(range(32)))
    with pytest.raises(RingError, match="core 40"):
        gemm_ring_frag(cfg, 40, 16, 512, 16, W, X, Region("b", 900), list(range(32)))


def _mutated(monkeypatch, fn):
    orig = ring_mat_gemm._pass_ring
    monkeypatch.setattr(ring_mat_gemm, "_pass_ring", lambda *a: [fn(t) for t in orig(*a)])


@pytest.mark.parametrize("what", ["operand", "timing", "update"])
def test_mb_overlap_mutations_are_caught(monkeypatch, what):
    """A wrong overlap fails the checks: the first product taken with ``W`` for ``X``
    (weights differ from the golden's), the stream scheduled with a 2-slot ring hop
    (beats taken before they arrive: the fast engine refuses the stalling schedule), or
    an update accumulator not reset between passes (weights differ)."""
    if what == "operand":
        _mutated(monkeypatch, lambda t: t.replace("= row * col", "= row * row"))
    elif what == "update":
        fold = ring_mat_gemm._fold_text
        drop = lambda t: " | ".join(x for x in t.split(" | ") if x != "mov r0 = -0") or "nop"     # noqa: E731
        monkeypatch.setattr(ring_mat_gemm, "_fold_text", lambda cfg, lines, per, name: fold(
            cfg, [drop(t) if name.startswith("ur") else t for t in lines], per, name))
    else:
        monkeypatch.setattr(ring_mat_gemm, "HOP", 2)
    mlp = MLP((12, 20, 10, 6), "mse", 0.05, batch=4)
    with pytest.raises(RingStallError if what == "timing" else AssertionError):
        _run(SMALL, mlp, 1, "fast", _seed(), "rows", ring_updates=[1, 2])


def test_mb_overlap_step_one_engine_direct():
    """The switch reaches the compiler through ``overlap_options`` and both schedules run
    from the same initial weights to the same weights (fast engine, MSE, 2 cores)."""
    mlp = MLP((7, 9, 4, 3), "mse", 0.05, batch=4)
    seed = _seed()
    W0 = init_weights(mlp, TINY.fmt, seed)
    rng = np.random.default_rng(seed)
    X, T = _batch(rng, mlp)
    outs = []
    for on in (True, False):
        tp = compile_chip_mbgd(TINY, mlp, out_map="rows", **overlap_options(on))
        sess = ChipSession(TINY, "fast")
        tp.init(sess, W0)
        tp.run_step(sess, X, T)
        outs.append((tp.meta["ring_fw"], tp.weights_from_session(sess, padded=True)))
    assert outs[0][0] == [0, 1, 2] and outs[1][0] == []
    _eq(outs[0][1], outs[1][1], "on vs off")


@pytest.mark.parametrize("acts", ["resident", "reuse"])
def test_mb_overlap_with_panels_in_dram(acts):
    """W0 paged from the scratchpad and W1 streamed from DRAM keep the old schedule; W2's
    GEMM takes the all-gather of A2 off the ring: three steps bit for bit on the fast
    engine, every core's DRAM counters as predicted (``test_mb_acts``'s check)."""
    from tests.sw.test_mb_acts import CFG, NET, PAGED
    from tests.sw.test_mb_acts import _run as run_dram

    mlp = MLP(NET, "softmax_ce", 0.05, batch=4)
    tp, _ = run_dram(CFG.replace(ucode_depth=4096), mlp, "fast", 3,
                     dict(out_map="rows", acts=acts, dram=[1], ring_updates=[2], **PAGED),
                     dict(out_map="rows", acts=acts, **PAGED))
    assert tp.meta["ring_fw"] == [2] and sorted(tp.meta["ring_fw_why"]) == [0, 1] and tp.meta["acts"] == acts
    assert tp.meta["ring_up"] == [2]
    assert "streamed from DRAM" in tp.describe()


class _Built:
    """A stand-in for a compiled program in :func:`sw.train_chip_mb_ring.cheapest`: one
    image per core of ``base + words`` of the items, the cycles ``base_cycles`` minus
    the items' savings, microcode reloads when an image exceeds the depth."""

    def __init__(self, items, words, saved, depth=100):
        self.items = items
        self.images = [[[0] * (40 + sum(words.get(it, 0) for it in items))]]
        self.over = len(self.images[0][0]) > depth
        self.cycles = 1000 - sum(saved.get(it, 0) for it in items) + (500 if self.over else 0)
        self.meta = {"ring_fw": [l for t, l in items if t == "f"], "ring_up": [l for t, l in items if t == "u"],
                     "ring_fw_why": {}, "ring_up_why": {}}

    def reload_cycles(self):
        return 500 if self.over else 0

    def step_cycles(self):
        return self.cycles


def test_mb_overlap_keeps_the_updates_that_fit():
    """When the updates' fragments do not all fit the microcode beside the rest, the
    compiler keeps those that fit together on every core with the most slots saved (if
    that program is faster), and says why for the others; a kept set that would reload
    the microcode or run slower is dropped."""
    from sw.train_chip_mb_ring import _fitting, cheapest

    items = [("f", 0), ("u", 1), ("u", 2), ("u", 3)]
    core0 = {("u", 1): 30, ("u", 2): 20, ("u", 3): 25}               # core 0's words: all fit by them
    gains = {("u", 1): (50, 40), ("u", 2): (30, 25), ("u", 3): (28, 30)}   # (slots saved, most words on a core)
    saved = {it: g[0] for it, g in gains.items()}
    assert _fitting([("u", 1), ("u", 2), ("u", 3)], gains, 60) == [("u", 2), ("u", 3)]   # 58 beats 50
    assert _fitting([("u", 1), ("u", 2)], gains, 20) == []
    words = {("u", 1): 40, ("u", 2): 25, ("u", 3): 30}
    tp = cheapest(lambda its: _Built(its, words, saved), items, False, words, 100, gains)
    assert tp.meta["ring_up"] == [2, 3] and tp.step_cycles() == 1000 - 58
    assert "layers [2, 3] fit" in tp.meta["ring_up_why"][1]
    # every update fits by core 0's words: all are built, and the reload fallback decides
    tp = cheapest(lambda its: _Built(its, words, saved, 200), items, False, core0, 200, gains)
    assert tp.meta["ring_up"] == [1, 2, 3] and tp.meta["ring_up_why"] == {}
    # the kept set's real images exceed the microcode (reloads): none
    big = {("u", 1): 40, ("u", 2): 45, ("u", 3): 50}
    tp = cheapest(lambda its: _Built(its, big, saved), items, False, words, 100, gains)
    assert tp.meta["ring_up"] == [] and tp.reload_cycles() == 0
    # the kept set runs slower than none (its fragments cost more than they save): none
    slow = {it: -5 for it in saved}
    tp = cheapest(lambda its: _Built(its, words, slow), items, False, words, 100, gains)
    assert tp.meta["ring_up"] == [] and set(tp.meta["ring_up_why"]) == {1, 2, 3}
