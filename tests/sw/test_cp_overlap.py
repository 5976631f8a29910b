"""The delta chains of CP beside the next head's forward GEMV (sw/train_cp_overlap.py,
``compile_chip_cp(chain_overlap=)``): bit for bit against the golden on both chip
engines with the schedule on and off, counters equal; the straight-line GEMV rows;
the fallbacks; mutations of the overlap fail."""

from __future__ import annotations

from dataclasses import replace

import pytest

import sw.train_cp_overlap as ov
from tests.sw.test_train import _seed
from tests.sw.test_train_cp import SIX, SMALL, TINY, run_cp
from sw.mlp import MLP
from sw.train_cp import compile_chip_cp

CASES = [(TINY, (6, 5, 3), "mse"), (SMALL, (9, 14, 7, 4), "softmax_ce"), (SIX, (7, 9, 6, 3), "mse")]


@pytest.mark.parametrize("cfg,sizes,loss", CASES, ids=["tiny-mse", "small-smx", "six-mse"])
def test_cp_chain_overlap_matches_golden_on_both_engines(cfg, sizes, loss):
    """Every step's output, loss and weight bits equal to the golden's (:func:`run_cp`)
    on the fast and the per-cycle engine, counter for counter (off: the fast engine);
    the overlapped step is shorter, merges GEMV rows into the delta chains, and keeps
    only the activation chains in the tail."""
    mlp = MLP(sizes, loss, 0.125 if loss == "mse" else 0.25)
    seed = _seed()
    on, _, _, fast = run_cp(cfg, mlp, 2, "fast", seed)
    _, _, _, model = run_cp(cfg, mlp, 2, "model", seed)
    for a, b in zip(fast, model):
        assert a.core_counters == b.core_counters
    off, *_ = run_cp(cfg, mlp, 2, "fast", seed, chain_overlap=False)
    assert on.meta["chain_overlap"] and not off.meta["chain_overlap"]
    assert on.step_cycles() < off.step_cycles()
    assert max(on.meta["rows_merged"]) > 0
    assert set(on.meta["head_chains"].starts) == {s for s in off.chains.starts if s.startswith("d")}
    assert not any(s.startswith("d") for s in on.chains.starts)
    assert on.head[0][0].kind in ("ring", "ring+gemv") and on.head[0][0].name.startswith("chains_d")
    assert "chains: the deltas' at the head's start" in on.describe()
    assert "every chain in the tail, after every core's kernels (chain_overlap: off)" in off.describe()


def test_cp_chain_overlap_fallbacks():
    """Minibatch CP, paged panels and a step whose straight-line GEMV rows do not fit
    the microcode (chip-small with 256 words, where every chain in the tail fits) keep
    every chain in the tail, and say why."""
    mb = compile_chip_cp(SIX, MLP((7, 9, 6, 3), "mse", 0.125, batch=2))
    assert not mb.meta["chain_overlap"] and "(chain_overlap: minibatch)" in mb.describe()
    pg = compile_chip_cp(replace(SIX, spad_kib=1), MLP((7, 9, 6, 3), "mse", 0.125), spad=[0], page_rows=4)
    assert not pg.meta["chain_overlap"] and "(chain_overlap: paged panels)" in pg.describe()
    uc = compile_chip_cp(replace(SMALL, ucode_depth=256), MLP((64, 64, 64, 10), "mse", 0.125))
    assert not uc.meta["chain_overlap"] and "(chain_overlap: microcode (" in uc.describe()
    assert max(len(w) for w in uc.image) <= 256


def test_gemv_lines_are_emit_gemvs_rows():
    """The straight-line rows issue the MACs of emit_gemv's stream (one per row and local
    input), load every input element once, and use only the registers given."""
    cfg = SMALL
    from sw.collectives import Region

    lines = ov.gemv_lines(cfg, 3, 40, Region("a", 0), Region("b", 0), Region("b", 64), 9)
    text = "\n".join(lines)
    n = 40 // cfg.nr
    assert text.count("mul r") == 3 and text.count("mac r") == 3 * (n - 1)
    assert text.count("mov r13") == n - 1 and text.count("mov r12") == 1
    regs = {int(w[1:]) for ln in lines for w in ln.replace("=", " ").split() if w[:1] == "r" and w[1:].isdigit()}
    assert regs == set(range(9, 14))


def _shift_receivers(monkeypatch):
    """Mutation: on the cores that store a delta, the delta chains one slot earlier (a
    beat taken before it arrives)."""
    real = ov.chains_with_gemv

    def early(cfg, lines, rw, gemv=None):
        if rw[1]:
            lines = list(lines[1:]) + ["nop"]
        return real(cfg, lines, rw, gemv)
    monkeypatch.setattr("sw.train_cp.chains_with_gemv", early)


def _gemv_on_r0(monkeypatch):
    """Mutation: the merged GEMV rows use the chains' adding register r0."""
    real = ov.gemv_lines

    def low(cfg, k, n, W, x, y, base):
        return real(cfg, k, n, W, x, y, 0)
    monkeypatch.setattr(ov, "gemv_lines", low)


@pytest.mark.parametrize("backend", ["fast", "model"])
@pytest.mark.parametrize("mutate,match", [(_shift_receivers, "stall"), (_gemv_on_r0, None)], ids=["early", "r0"])
def test_cp_chain_overlap_mutations_fail(monkeypatch, mutate, match, backend):
    """Beats taken a slot early: the fast engine's ring-stall error, the per-cycle
    engine's stall (the RUN check); GEMV rows on the chains' register: the weights
    differ from the golden's (six samples: with three, about one seed in 40 hides it
    behind the ReLUs)."""
    from sim.chip_model import RingStallError

    mutate(monkeypatch)
    with pytest.raises((AssertionError, RingStallError), match=match):
        run_cp(SIX, MLP((7, 9, 6, 3), "mse", 0.125), 6, backend, _seed())
