"""Continuous propagation across cores (sw/train_cp.py, sw/chain.py): the pipeline
bit for bit against its golden model (sw/golden_train_cp.py) on both chip engines and
the RTL, through filling, steady state and draining; cycles as predicted; learning;
errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.simulators import engine_matrix
from tests.sw.test_train_chip import check_spad_errors
from tests.sw.test_train import _eq_weights as _eq
from tests.sw.test_train import _seed
from sw.chain import Hop, Stream, schedule
from sw.ring import RingError
from arch.config import ArchConfig, PRESETS
from sw.golden_train import Float64SGD
from sw.golden_train_cp import GoldenChipCP
from sw.golden_train_cp_mb import GoldenChipMBCP
from sw.mlp import MLP
from sw.train import TrainCompileError, init_weights
from sim.sessions import ChipSession
from sw.train_cp import compile_chip_cp, cp_groups

TINY, SMALL = PRESETS["chip-tiny"], PRESETS["chip-small"]
SIX = ArchConfig(nr=2, cores=6, mem_a_words=256, mem_b_words=256)


def _data(rng, mlp, n):
    if mlp.batch > 1:                        # minibatch CP: n minibatches (softmax: class indices)
        X = rng.normal(size=(n, mlp.n_in, mlp.batch))
        if mlp.loss == "softmax_ce":
            return X, rng.integers(0, mlp.n_out, (n, mlp.batch))
        return X, rng.normal(size=(n, mlp.n_out, mlp.batch)) * 0.5
    X = rng.normal(size=(n, mlp.n_in))
    if mlp.loss == "softmax_ce":
        return X, rng.integers(0, mlp.n_out, n)
    return X, rng.normal(size=(n, mlp.n_out)) * 0.5


def run_cp(cfg, mlp, n, backend, seed, groups=None, record=False, backward="auto", spad=None, page_rows=None,
           shared=None, **kw):
    """``n`` samples (minibatch CP: minibatches) through the pipeline and out again (``n +
    2L`` steps): loss, output and every weight bit equal to the golden's
    (:class:`GoldenChipCP`, :class:`GoldenChipMBCP`) after every step; cycles as
    predicted. ``spad`` / ``page_rows``: panels paged from the scratchpad (batch 1);
    ``shared``: layers on the core of the layer before; ``kw``: more of
    :func:`compile_chip_cp`'s options."""
    rng = np.random.default_rng(seed)
    pg = {} if spad is None and page_rows is None else {"spad": spad, "page_rows": page_rows}
    tp = compile_chip_cp(cfg, mlp, groups=groups, backward=backward, shared=shared, **pg, **kw)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = ChipSession(cfg, backend, record=record)
    tp.init(sess, W0)
    if mlp.batch > 1:
        gold = GoldenChipMBCP(cfg, mlp, W0, groups=groups, **pg)
        assert gold.groups == tp.groups
    else:
        gold = GoldenChipCP(cfg, mlp, W0, groups=tp.groups, fused=tp.fused, **pg, hide=kw.get("chain_overlap", True))
        if backward == "auto" and shared is None:           # the golden's own choice is the compiler's
            assert (GoldenChipCP(cfg, mlp, W0, groups=groups).groups, gold.fused) == (tp.groups, tp.fused)
    _eq(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), "init")
    X, T = _data(rng, mlp, n)
    L = tp.latency_steps()
    results = []
    for s in range(n + 2 * L):
        x = X[s] if s < n else None
        t = T[s - L] if 0 <= s - L < n else None
        r = tp.run_step(sess, x, t)          # checks each chip RUN's cycles, conflicts and stalls
        g = gold.step(x, t)
        assert np.array_equal(r.raw["out"], g["raw"]), s
        assert r.loss == g["loss"], (s, r.loss, g["loss"])
        _eq(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), f"step {s}")
        assert r.cycles == tp.step_cycles()
        results.append(r)
    # the pipeline saw every sample: each loss reported exactly once
    assert sum(r.loss is not None for r in results) == n
    return tp, sess, gold, results


_CP_CASES = {
    "tiny-mse": (TINY, (6, 5, 3), "mse", None),                 # one core per layer: the delta chain is the wrap-around
    "tiny-smx": (TINY, (5, 7, 4), "softmax_ce", None),          # the softmax kernel on the output core
    "small-smx": (SMALL, (9, 14, 7, 4), "softmax_ce", None),    # a 2-core group: gather, reduce, scatter
    "six-mse": (SIX, (7, 9, 6, 3), "mse", None),                # groups [2, 3, 1]: x chain, 3-core reduce
    "six-idle": (SIX, (5, 6, 3), "mse", [1, 1]),                # four idle cores relaying the deltas
}


#: the per-cycle engine of small-smx in make test-all (its counters equal the fast
#: engine's on the six-core chip in test_cp_engines_agree_counter_for_counter)
@pytest.mark.parametrize("cfg,sizes,loss,groups,backend", engine_matrix(_CP_CASES, slow_model={"small-smx"}))
def test_cp_matches_golden(cfg, sizes, loss, groups, backend):
    mlp = MLP(sizes, loss, 0.125 if loss == "mse" else 0.25)
    tp, *_ = run_cp(cfg, mlp, 5, backend, _seed(), groups)
    if groups:
        assert tp.groups == groups and tp.stages[2:] == [None] * 4
    assert tp.V == 2 * (mlp.n_layers - 1)
    assert (tp.softmax == "array") == (loss == "softmax_ce")


@pytest.mark.parametrize("cfg,sizes,loss", [
    (TINY, (6, 5, 3), "mse"),
    (SMALL, (9, 14, 7, 4), "softmax_ce"),
    (SIX, (7, 9, 6, 3), "mse"),
], ids=["tiny-mse", "small-smx", "six-mse"])
def test_cp_backward_separate_and_fused(cfg, sizes, loss):
    """Both backward steps bit-exact (the auto choice runs above): transposed GEMV +
    mask + rank-1 (``(-lr d) v`` rounding, ``e`` in W's bank, a rows copy of ``din``),
    and the fused kernel on every layer ``l >= 1`` (``d (-lr v)`` rounding)."""
    mlp = MLP(sizes, loss, 0.1 if loss == "mse" else 0.3)   # not powers of 2: the two roundings differ
    seed = _seed()
    sep, *_ = run_cp(cfg, mlp, 3, "fast", seed, backward="separate")
    fus, *_ = run_cp(cfg, mlp, 3, "fast", seed, backward="fused")
    assert sep.fused == [False] * mlp.n_layers and fus.fused == [False] + [True] * (mlp.n_layers - 1)
    assert "dc" in sep.allocs[sep.cores_of(1)[0]].items if mlp.n_layers > 2 else True
    assert all("dc" not in fus.allocs[k].items for k in range(cfg.cores))
    kinds = {op.kind for ops in fus.head for op in ops}
    assert "gemv_t_rank1" in kinds and "gemv_t" not in kinds
    assert "gemv_t_rank1" not in {op.kind for ops in sep.head for op in ops}


@pytest.mark.slow
def test_cp_backward_auto_choice_at_s():
    """``auto`` fuses every layer when the step gets at most FUSED_TOLERANCE longer
    (configuration S: no longer, with one core moved between the groups; ``slow``: two
    compilations at S, the rule itself runs in make test in
    :func:`test_cp_backward_auto_choice`)."""
    from sw.train import FUSED_TOLERANCE
    from sw.train_cp import cp_mapping

    S = PRESETS["S"]
    big = MLP((784, 500, 500, 500, 10), "softmax_ce", 0.01)
    g, f = cp_mapping(S, big)
    gs, fs = cp_mapping(S, big, backward="separate")
    assert f == [False, True, True, True] and fs == [False] * 4
    tf, ts = (compile_chip_cp(S, big, backward=b) for b in ("auto", "separate"))
    assert tf.groups == g and tf.fused == f and ts.groups == gs
    assert tf.step_cycles() <= (1 + FUSED_TOLERANCE) * ts.step_cycles()


def test_cp_backward_auto_choice():
    """``auto`` fuses a layer only where the step does not get more than FUSED_TOLERANCE
    longer (chip-small's 32-64-64-10: fusing the 10-output layer too makes the step 5.3 %
    longer, so it stays separate; the middle layer is off the critical path, fused)."""
    from sw.train_cp import cp_mapping

    small = MLP((32, 64, 64, 10), "softmax_ce", 0.01)
    a, s, fz = (compile_chip_cp(SMALL, small, backward=b) for b in ("auto", "separate", "fused"))
    assert fz.step_cycles() > s.step_cycles()       # the compute (heads + tails) grows by more than the tolerance
    assert a.fused == [False, True, False] and a.step_cycles() == s.step_cycles()
    with pytest.raises(TrainCompileError, match="unknown backward"):
        cp_mapping(SMALL, small, backward="both")


def test_cp_engines_agree_counter_for_counter():
    mlp = MLP((7, 9, 6, 3), "mse", 0.125)
    seed = _seed()
    _, _, _, fast = run_cp(SIX, mlp, 3, "fast", seed)
    _, _, _, model = run_cp(SIX, mlp, 3, "model", seed)
    for a, b in zip(fast, model):
        assert a.core_counters == b.core_counters


_SHARED_CASES = {
    "auto": ((8, 24, 20, 6, 4, 3), "mse", None, [1, 3, 1, 1, 1]),   # the cost model's choice: layers 3+4 on one core
    "three-smx": ((7, 9, 6, 5, 4), "softmax_ce", (2, 3), [3, 1, 1, 1]),   # three layers on one core, its softmax
    "hidden": ((7, 9, 6, 5, 3), "mse", (1,), [1, 1, 3, 1]),            # two hidden layers on one core
}


#: the per-cycle engine on "hidden" in make test, on the others in make test-all (the
#: engines' counters agree in test_cp_shared_core_engines_agree_and_cost_model)
@pytest.mark.parametrize("sizes,loss,shared,groups,backend",
                         engine_matrix(_SHARED_CASES, slow_model={"auto", "three-smx"}))
def test_cp_shared_core_matches_golden(sizes, loss, shared, groups, backend):
    """Layers on one core (sw/train_cp_shared.py) through filling, steady state and
    draining: outputs, losses and every weight bit equal to the golden's after every
    step, every RUN the predicted cycles."""
    mlp = MLP(sizes, loss, 0.125 if loss == "mse" else 0.25)
    tp, *_ = run_cp(SIX, mlp, 4, backend, _seed(), shared=shared)
    want = shared or (4,)
    assert tp.shared == want and tp.groups == groups
    run = [l for l, _ in tp.core_layers[tp.cores_of(want[0])[0]]]
    assert run == [want[0] - 1] + list(want)
    assert not {f"a{l}" for l in want} & set(tp.chains.starts)         # no chains inside the core


def test_cp_shared_core_engines_agree_and_cost_model():
    """The chip engines' counters equal on a shared core; the compiler chose the
    placement with the shortest step compute of those it tried, and says so; the delta
    chains pass the shared core at the head's start without GEMV rows (its head runs two
    layers), beside GEMV rows on the others."""
    mlp = MLP((8, 24, 20, 6, 4, 3), "mse", 0.125)
    seed = _seed()
    tp, _, _, fast = run_cp(SIX, mlp, 2, "fast", seed)
    _, _, _, model = run_cp(SIX, mlp, 2, "model", seed)
    for a, b in zip(fast, model):
        assert a.core_counters == b.core_counters
    k = tp.cores_of(4)[0]
    assert tp.meta["chain_overlap"] and max(tp.meta["rows_merged"]) > 0
    assert tp.meta["rows_merged"][k] == 0 and tp.head[k][0].name == "chains_d"
    tried = {tuple(sh): (g, c) for sh, g, _, c in tp.meta["placements"]}
    assert tried[()][0] == [1, 2, 1, 1, 1] and tried[(4,)][0] == tp.groups
    assert min(tried.values(), key=lambda t: t[1]) == tried[(4,)] and tried[(4,)][1] < tried[()][1]
    text = tp.describe()
    assert "placement: layers 3+4 on core 5" in text and "every layer on its own cores: groups [1, 2, 1, 1, 1]" in text
    assert "core 5 (layers 3, 4 on one core" in text
    ops = [n for n, _, _ in tp.breakdown(5)]           # layer 4's head first, then layer 3's; d3 copied in the tail
    assert ops.index("L4.gemv") < ops.index("L3.gemv") < ops.index("d3") < ops.index("chains")


def test_cp_shared_errors():
    mlp = MLP((7, 9, 6, 5, 3), "mse", 0.125)
    with pytest.raises(TrainCompileError, match="layer 1 cannot share the core of layer 0"):
        compile_chip_cp(SIX, mlp, groups=[2, 2, 1, 1], shared=(1,))
    with pytest.raises(TrainCompileError, match="need 7 cores"):
        compile_chip_cp(SIX, mlp, groups=[2, 3, 1, 1], shared=())
    with pytest.raises(TrainCompileError, match="minibatch CP keeps each layer"):
        compile_chip_cp(SIX, MLP((7, 9, 6, 5, 3), "mse", 0.125, batch=2), shared=(3,))
    with pytest.raises(TrainCompileError, match=r"layers \[1, 2\] do not fit one core"):
        compile_chip_cp(replace(SIX, mem_a_words=64, mem_b_words=64), MLP((7, 30, 20, 3), "mse", 0.125),
                        shared=(2,))


def test_cp_groups_and_describe():
    mlp = MLP((784, 500, 500, 500, 10), "softmax_ce", 0.01)
    S = PRESETS["S"]
    g = cp_groups(S, mlp)
    assert len(g) == 4 and g[-1] == 1 and sum(g) == S.cores and min(g) >= 1
    # balance: the two 500x500 layers (3 passes each) get the same number of cores, give or take one
    assert abs(g[1] - g[2]) <= 1
    assert cp_groups(S, mlp, [8, 11, 11, 1]) == [8, 11, 11, 1]
    tp = compile_chip_cp(SMALL, MLP((9, 14, 7, 4), "softmax_ce", 0.25))
    text = tp.describe()
    assert "cores per layer" in text and "tail variants" in text and "chains" in text


def test_cp_learns_like_float64():
    """A regression task: the binary16 pipeline's loss falls like float64 SGD's over the
    same samples (CP's stale weights cost little at this learning rate)."""
    mlp = MLP((8, 12, 4), "mse", 0.05)
    cfg = replace(TINY, mem_a_words=512, mem_b_words=512)
    rng = np.random.default_rng(7)
    A = rng.normal(size=(4, 8)) * 0.4
    X = rng.normal(size=(120, 8))
    T = np.tanh(X @ A.T)
    W0 = init_weights(mlp, cfg.fmt, 3)
    tp = compile_chip_cp(cfg, mlp)
    sess = ChipSession(cfg, "fast")
    tp.init(sess, W0)
    ref = Float64SGD(mlp, [cfg.fmt.to_float(w) for w in W0])
    L = tp.latency_steps()
    cp_loss, f64 = [], []
    for s in range(len(X) + L):
        r = tp.run_step(sess, X[s] if s < len(X) else None, T[s - L] if s >= L else None)
        if r.loss is not None:
            cp_loss.append(r.loss)
    for x, t in zip(X, T):
        f64.append(ref.step(x, t)["loss"])
    first, last = np.mean(cp_loss[:20]), np.mean(cp_loss[-20:])
    assert last < 0.5 * first, (first, last)
    assert last < 1.5 * np.mean(f64[-20:]) + 1e-3, (last, np.mean(f64[-20:]))


def test_cp_errors():
    with pytest.raises(TrainCompileError, match="cores >= 3"):
        compile_chip_cp(TINY, MLP((4, 5, 5, 3), "mse", 0.1))
    with pytest.raises(TrainCompileError, match="softmax kernel is batch 1"):      # minibatch CP: on the host
        compile_chip_cp(TINY, MLP((4, 5, 3), "softmax_ce", 0.1, batch=2), softmax="array")
    with pytest.raises(TrainCompileError, match="hidden layer"):
        compile_chip_cp(TINY, MLP((4, 3), "mse", 0.1))
    with pytest.raises(TrainCompileError, match="softmax='host'"):
        compile_chip_cp(TINY, MLP((4, 5, 3), "softmax_ce", 0.1), softmax="host")
    with pytest.raises(TrainCompileError, match="1 for the output"):
        compile_chip_cp(SIX, MLP((4, 5, 3), "mse", 0.1), groups=[1, 2])
    with pytest.raises(TrainCompileError, match="need 7 cores"):
        compile_chip_cp(SIX, MLP((4, 5, 5, 3), "mse", 0.1), groups=[3, 3, 1])
    with pytest.raises(TrainCompileError, match="does not fit the CP mapping"):
        compile_chip_cp(TINY, MLP((60, 60, 3), "mse", 0.1))
    with pytest.raises(TrainCompileError, match="ucode_depth"):
        compile_chip_cp(replace(TINY, ucode_depth=64), MLP((6, 5, 3), "mse", 0.1))
    with pytest.raises(TrainCompileError, match="learning rate"):
        compile_chip_cp(TINY, MLP((6, 5, 3), "mse", 1e-12))


# -- panels paged from the scratchpad ----------------------------------------------------
@pytest.mark.parametrize("backward", ["fused", "separate"])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
@pytest.mark.parametrize("spad,page_rows", [([0, 1], 4), ([1], 8), ([0], None)],
                         ids=["both-4-row-pages", "layer1-8-row-pages", "layer0-whole"])
def test_cp_spad_matches_golden(spad, page_rows, loss, backward):
    """Hidden layers' panels paged from the scratchpads (every core of the layer: a
    2-core group too), both losses and backward steps, through filling, steady state and
    draining, bit for bit against the golden after every step; every step loads and
    stores each paged panel once (the head does the page's forward rows, its part of
    ``W^T d``, summed over the pages, and its update while it is in the buffer)."""
    cfg = replace(SMALL, spad_kib=4)
    mlp = MLP((9, 30, 24, 4), loss, 0.3)
    tp, sess, gold, res = run_cp(cfg, mlp, 3, "fast", _seed(), backward=backward, spad=spad, page_rows=page_rows)
    assert sorted(tp.spad) == spad == tp.meta["spad_layers"] and gold.pages.keys() == tp.spad.keys()
    if page_rows:
        assert all(n * cfg.nr <= page_rows for sp in tp.spad.values() for _, n in sp.pages)
    assert any(len(sp.pages) > 1 for sp in tp.spad.values()) == (page_rows is not None)
    for r in res:
        for k, ctr in enumerate(r.core_counters):
            sp = tp._paged(k)
            beats = sp.beats(cfg.nr) if sp else 0
            assert (ctr["spad_rd_beats"], ctr["spad_wr_beats"]) == (beats, beats), k
    assert "spad" in {kd for _, kd, _ in tp.breakdown(tp.cores_of(spad[0])[0])}
    assert "scratchpad beats 0.." in tp.describe()


@pytest.mark.parametrize("backend", ["fast", "model"])
def test_cp_page_swap(backend):
    """Each page's update stores it while it loads the next page (``page_swap``, the
    pages in alternating bus orders): bit for bit against the golden through filling,
    steady state and draining (``run_cp``), the same scratchpad traffic as the pages'
    own loads and stores, one load op (the first page's) and one swap per page, and a
    shorter step than with the moves in their own loops (same mapping). The per-cycle
    model runs it too."""
    cfg = replace(SMALL, spad_kib=4)
    mlp = MLP((9, 30, 24, 4), "mse", 0.3)
    kw = dict(backward="separate", spad=[0, 1], page_rows=4, groups=[1, 2, 1])
    seed = _seed()
    on, *_, r_on = run_cp(cfg, mlp, 2 if backend == "fast" else 1, backend, seed, **kw)
    assert on.meta["page_swap"] == [0, 1] and all(sp.order == "alt" for sp in on.spad.values())
    if backend == "model":
        return
    off, *_, r_off = run_cp(cfg, mlp, 2, backend, seed, page_swap=False, **kw)
    assert off.meta["page_swap"] == [] and on.groups == off.groups
    for l, sp in on.spad.items():
        k = on.cores_of(l)[0]
        kinds = [op.kind for op in on.head[k]]
        assert kinds.count("spad+rank1") == len(sp.pages) and kinds.count("spad") == 1
        assert [a.core_counters[k]["spad_rd_beats"] for a in r_on] == [b.core_counters[k]["spad_rd_beats"]
                                                                       for b in r_off]
    assert on.step_cycles() < 0.75 * off.step_cycles()
    assert "while the next page loads in its place" in on.describe()
    assert "while the next page loads in its place" not in off.describe()


def test_cp_spad_when_pe_memory_is_short():
    """A hidden layer's cores short of PE memory: the compiler moves the layer's input
    history to the scratchpad by itself, which leaves the PE memories room for the whole
    panel (the golden follows the same plan); without a scratchpad, or with too small a
    one for a larger panel, it fails with the sizes; explicit choices are checked."""
    mlp = MLP((64, 64, 8, 4), "mse", 0.05)
    cfg = replace(SMALL, mem_a_words=128, mem_b_words=128, spad_kib=4)
    with pytest.raises(TrainCompileError, match="does not fit the CP mapping .* there is no scratchpad"):
        compile_chip_cp(replace(cfg, spad_kib=0), mlp, shared=())
    # the planner's way out without a scratchpad: layers 1 and 2 on one core, W0 on three
    tp = compile_chip_cp(replace(cfg, spad_kib=0), mlp)
    assert (tp.groups, tp.shared, tp.spad) == ([3, 1, 1], (2,), {})
    tp, *_ = run_cp(cfg, mlp, 2, "fast", _seed(), shared=())
    assert tp.groups == [2, 1, 1] and tp.meta["spad_layers"] == [0] and tp.meta["pages"] == {0: 0}
    assert tp.spad[0].hist >= 0 and tp.spad[0].lead == 8 and "hist_spad" in tp.allocs[0].meta
    # the mapping's cost model prices the stage with its history in the scratchpad (the
    # tail's moves included), not as "does not fit"
    from sw.train_cp import _stage_cost

    head, tail = _stage_cost(cfg, mlp, (2, 1, 1), 0, False, {})
    assert head == tp.meta["head_lengths"][0] and tail > _stage_cost(
        replace(cfg, mem_a_words=1024, mem_b_words=1024), mlp, (2, 1, 1), 0, False, {})[1]
    with pytest.raises(TrainCompileError, match="nor with the panel paged from the 256-beat scratchpad"):
        compile_chip_cp(replace(cfg, spad_kib=2), MLP((80, 64, 8, 4), "mse", 0.05), shared=())
    check_spad_errors(compile_chip_cp, mlp, 2, r"\[0, 1\] \(the hidden layers\)")


def test_cp_spad_engines_agree():
    """Paged panels: the fast chip engine and the per-cycle chip model give the same
    counters (scratchpad beats included) on every core."""
    mlp = MLP((7, 9, 6, 3), "mse", 0.125)
    seed = _seed()
    cfg = replace(SIX, spad_kib=1)
    _, _, _, fast = run_cp(cfg, mlp, 2, "fast", seed, spad=[0, 1], page_rows=2)
    _, _, _, model = run_cp(cfg, mlp, 2, "model", seed, spad=[0, 1], page_rows=2)
    for a, b in zip(fast, model):
        assert a.core_counters == b.core_counters


def test_chain_errors_and_schedule():
    cfg = SMALL
    def pair(name, k):
        return Stream(name, 2, (Hop(k, ("send", "send"), src=("a", 0)), Hop(k + 1, ("keep", "keep"), dst=("b", 0))))

    ok = pair("s", 0)
    sch = schedule(cfg, [pair("s1", 0), pair("s2", 0), pair("s3", 2)])
    assert all(len(x) == sch.slots for x in sch.lines)
    # two streams on the same cores never interleave: the second starts after the first's
    # window (sends in T, T+1; setup of the next in T+2); a stream on other cores overlaps
    assert sch.starts["s1"] == 3 and sch.starts["s2"] == sch.starts["s1"] + 3
    assert sch.starts["s3"] == sch.starts["s1"]
    bad = [
        (Stream("gap", 1, (Hop(0, ("send",), src=("a", 0)), Hop(2, ("keep",), dst=("b", 0)))), "does not follow"),
        (Stream("lost", 1, (Hop(0, ("send",), src=("a", 0)), Hop(1, ("relay",)))), "no core takes it"),
        (Stream("ghost", 1, (Hop(0, ("keep",), dst=("a", 0)),)), "not sent to it"),
        (Stream("nosrc", 1, (Hop(0, ("send",)), Hop(1, ("keep",), dst=("b", 0)))), "no src"),
        (Stream("role", 1, (Hop(0, ("fly",), src=("a", 0)),)), "unknown role"),
        (Stream("far", 1, (Hop(9, ("send",), src=("a", 0)),)), "not a core"),
    ]
    for st, msg in bad:
        with pytest.raises(RingError, match=msg):
            schedule(cfg, [st])
    with pytest.raises(RingError, match="chip"):
        schedule(PRESETS["tiny"], [ok])


#: 2 cores of 2 x 2 PEs with a 256-word microcode (tests/sw/test_train_chip.py's CHIP2_SMX: one simulator build)
CHIP2_SMX = replace(TINY, mem_a_words=128, mem_b_words=128, ucode_depth=256)


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=[pytest.mark.verilator, pytest.mark.slow])])
def test_cp_rtl(sim):
    """Three samples through a 2-layer MSE pipeline (filling, steady state, draining: 7
    steps; the softmax variant needs more microcode than this configuration's 256 words,
    and runs on the per-cycle model above) recorded on the per-cycle chip
    model, replayed on the chip RTL (every beat and counter compared per core); the
    weights read back from the RTL equal the golden's."""
    rtl_replay(CHIP2_SMX, *run_cp(CHIP2_SMX, MLP((5, 6, 3), "mse", 0.125), 3, "model", _seed(), record=True),
               sim, "chip-cp")


#: 4 cores of 2 x 2 with a 512-word microcode (tests/sw/test_train_cp_mb.py too: one simulator build)
CHIP4 = replace(TINY, cores=4, mem_a_words=256, mem_b_words=256, ucode_depth=512)


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=[pytest.mark.verilator, pytest.mark.slow])])
def test_cp_rtl_groups(sim):
    """Groups [1, 2, 1] on 4 cores: a gather and a reduce over two cores, and the chains
    storing each input into ``ain`` and the history slot in one instruction (two write
    ports, ``wr [ar3]``); the delta chains at the head's start with GEMV rows in their
    free slots on every core (``chain_overlap``); a sample through the pipeline and out
    (7 steps), replayed on the chip RTL, the weights read back equal to the golden's."""
    run = run_cp(CHIP4, MLP((5, 6, 4, 3), "mse", 0.125), 1, "model", _seed(), groups=[1, 2, 1], record=True)
    tp = run[0]
    assert tp.meta["chain_overlap"] and min(tp.meta["rows_merged"]) > 0
    assert all(ops[0].kind == "ring+gemv" for ops in tp.head) and "d0" in tp.meta["head_chains"].starts
    assert any("[ar3]++" in ln for ln in tp.chains.lines[1])           # core 1 stores its input twice
    assert all(op.name != "keep_a" for op in tp.tails[0][1])          # no copy ain -> hist on core 1
    rtl_replay(CHIP4, *run, sim, "chip-cp4")


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=[pytest.mark.verilator, pytest.mark.slow])])
def test_cp_spad_rtl(sim):
    """Both hidden layers' panels paged from the scratchpads in 2-row pages (the 2-core
    group's ``W^T d`` summed over its pages; layer 0's updates swap its pages), a sample
    through the pipeline and out,
    replayed on the chip RTL (``CHIP4``: one simulator build with the test above), the
    weights read back from the RTL's scratchpads equal to the golden's."""
    run = run_cp(CHIP4, MLP((5, 6, 8, 3), "mse", 0.125), 1, "model", _seed(), groups=[1, 2, 1], record=True,
                 spad=[0, 1], page_rows=2)
    assert all(len(sp.pages) > 1 for sp in run[0].spad.values())
    assert run[0].meta["page_swap"] == [0]          # layer 0's updates swap its pages, layer 1's are fused
    rtl_replay(CHIP4, *run, sim, "chip-cp4")


def rtl_replay(cfg, tp, sess, gold, results, sim, name) -> None:
    """Replay a recorded pipeline run (``run_cp(..., record=True)``) on the chip RTL
    (every beat and counter of every core against the per-cycle model), unload the
    weights: equal to the golden's; every head RUN took the predicted cycles."""
    from sim.chip_run import ChipPhase, run_chip_session

    un = tp.unload_weights_phases()
    phases = sess.phases + [ChipPhase(imgs, None, n) for imgs, n in un]
    res = run_chip_session(cfg, phases, backend="rtl", sim=sim, name=name)
    _eq(tp.decode_weights(res[-1:], padded=True), gold.weights(padded=True), "rtl")
    heads = [i for i, p in enumerate(sess.phases) if p.name == "cp-head"]
    assert len(heads) == len(results)
    for i in heads:
        assert max(c.counters["cycles"] for c in res[i]) == tp.run_cycles("head")


def test_cp_forward_is_the_pipelines_forward():
    """:func:`cp_forward` on the weights read back gives, bit for bit, the output the
    pipeline computes for a sample: the output unloaded ``L`` steps after it entered
    (no target: MSE's ``d = z``) is computed before any of that sample's updates, and the
    pipeline's other samples are zeros, whose updates change no weight."""
    from sw.golden_train_cp import cp_forward

    mlp = MLP((7, 9, 6, 3), "mse", 0.125)
    tp = compile_chip_cp(SIX, mlp)
    W0 = init_weights(mlp, SIX.fmt, 2)
    sess = ChipSession(SIX, "fast")
    tp.init(sess, W0)
    x = np.random.default_rng(_seed()).uniform(0, 1, mlp.n_in)
    want = cp_forward(SIX, tp.P, tp.N, tp.weights_from_session(sess, padded=True), x)[:mlp.n_out]
    L = tp.latency_steps()
    for s in range(L + 1):
        r = tp.run_step(sess, x if s == 0 else None, None)
    assert np.array_equal(r.output, want), (r.output, want)


def test_cli_train_cp(tmp_path):
    """``caterpillar train --method cp``: golden-checked pipeline steps, the figures of a
    steady-state step equal to the compiler's prediction; clear errors for a one-core
    configuration and a fused minibatch step; minibatch CP with the host's softmax."""
    import json

    from cli.main import main

    js = tmp_path / "cp.json"
    rc = main(["train", "--data", "synthetic", "--hidden", "6", "--epochs", "2", "--lr", "0.1", "--method", "cp",
               "--config", "chip-tiny", "--golden-steps", "30", "--max-train", "40", "--max-test", "40",
               "--json", str(js)])
    assert rc == 0
    res = json.loads(js.read_text())
    tp = compile_chip_cp(TINY, MLP((16, 6, 4), "softmax_ce", 0.1))
    assert res["method"] == "cp" and res["golden_checked_steps"] == 30 and res["groups"] == tp.groups
    assert res["step"]["cycles"] == tp.step_cycles() and res["steps"] == 2 * (40 + 2 * tp.latency_steps())
    assert len(res["epochs"]) == 2 and 0 <= res["epochs"][-1]["test_accuracy"] <= 1
    assert main(["train", "--data", "synthetic", "--hidden", "6", "--method", "cp"]) == 2          # one core
    assert main(["train", "--data", "synthetic", "--hidden", "6", "--method", "cp", "--config", "chip-tiny",
                 "--batch", "4", "--backward", "fused"]) == 2                                  # minibatch: no fused step
    # minibatch CP with the softmax on the host: golden-checked, the turnaround reported
    rc = main(["train", "--data", "synthetic", "--hidden", "6", "--epochs", "1", "--lr", "0.1", "--method", "cp",
               "--config", "chip-tiny", "--batch", "4", "--golden-steps", "8", "--max-train", "40",
               "--max-test", "20", "--json", str(js)])
    res = json.loads(js.read_text())
    assert rc == 0 and res["batch"] == 4 and res["golden_checked_steps"] == 8
    assert res["step"]["host_turnaround_cycles"] == 1000
    assert res["step"]["mac_utilization_with_host"] < res["step"]["mac_utilization"]
    assert main(["train", "--data", "synthetic", "--hidden", "6", "--groups", "1,1"]) == 2         # not cp


def test_cli_train_cp_with_panels_in_the_scratchpad(tmp_path, capsys):
    """``caterpillar train --method cp --describe`` on a chip whose PE memories do not
    hold a hidden layer's panels beside its input history: the compiler moves the history
    to the scratchpads (or pages the panels from there), the steps are golden-checked
    (the golden follows the same plan), the description names the scratchpad."""
    import json

    from cli.main import main

    js = tmp_path / "t.json"
    cfg = '{"preset": "chip-small", "mem_a_words": 128, "mem_b_words": 128, "spad_kib": 4}'
    rc = main(["train", "--method", "cp", "--data", "synthetic", "--hidden", "96,16", "--epochs", "1", "--lr", "0.05",
               "--config", cfg, "--golden-steps", "3", "--max-train", "12", "--max-test", "8", "--json", str(js),
               "--describe"])
    out = capsys.readouterr().out
    assert rc == 0 and "in scratchpad beats" in out and "W1 panels: resident in the PE memories, the first" in out
    assert json.loads(js.read_text())["golden_checked_steps"] == 3


@pytest.mark.parametrize("rx", [False, True], ids=["bus", "rx"])
@pytest.mark.parametrize("cfg,sizes,loss", [(SMALL, (9, 14, 7, 4), "softmax_ce"), (SIX, (7, 9, 6, 3), "mse")],
                         ids=["small-smx", "six-mse"])
def test_cp_exec_stage(cfg, sizes, loss, rx):
    """Continuous propagation (delta chains, ring reductions) with the execute stage on
    every core and the distribution stage (ring look-ahead), against the golden; with
    the receive stage as well (SRAM reads see a write three micro-ops later: one more NOP
    between a kernel's last store and a read of it, ``sw.train.kernel_gap``)."""
    cfg = cfg.replace(exec_stage=True, bus_stage=True, dist_stage=True, fetch_stage=True, addr_stage=True,
                      read_stage=True, rx_stage=rx)
    run_cp(cfg, MLP(sizes, loss, 0.125 if loss == "mse" else 0.25), 3, "fast", _seed(), None)
