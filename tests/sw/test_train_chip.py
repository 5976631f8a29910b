"""SGD across the cores of a chip (sw/train_chip.py): bit-exact against the golden trainer
(sw/golden_train_chip.py) on both chip engines and the RTL, cycles as predicted, the
register reduce-scatter on its own, errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.simulators import REPLAY_SIM_PARAMS, engine_matrix, golden_matrix
from tests.sw.test_ring import diag_read, diag_write
from tests.sw.test_train import _eq_weights as _eq
from tests.sw.test_train import _sample, _seed
from arch.config import PRESETS
from sw.golden_train import Float64SGD
from sw.golden_train_chip import GoldenChipSGD
from sw.mlp import MLP
from sw.train import HOST_LATENCY_CYCLES, TrainCompileError, backward_plan, init_weights
from sw.train_chip import chip_shapes, column_order, compile_chip_sgd, overlap_options, panel_rows
from sim.sessions import ChipSession

TINY, SMALL = PRESETS["chip-tiny"], PRESETS["chip-small"]




def run_and_check(cfg, mlp, steps, backend, seed, record=False, *, compile=compile_chip_sgd, golden=GoldenChipSGD,
                  sample=_sample, out_map="auto"):
    """``steps`` steps of ``compile(cfg, mlp, out_map=...)`` on a chip session against
    ``golden``: loss, output and weights after every step, cycles as predicted (the
    minibatch tests pass their compiler, golden and ``sample(rng, mlp)``)."""
    rng = np.random.default_rng(seed)
    tp = compile(cfg, mlp, out_map=out_map)
    if out_map != "auto":
        assert tp.out_map == out_map and tp.meta["out_map"] == out_map
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = ChipSession(cfg, backend, record=record)
    tp.init(sess, W0)
    gold = golden(cfg, mlp, W0, out_map=out_map)
    _eq(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), "init")
    results = []
    for k in range(steps):
        x, t = sample(rng, mlp)
        r = tp.run_step(sess, x, t)          # checks each chip RUN's cycles, conflicts and stalls
        g = gold.step(x, t)
        assert r.loss == g["loss"] and np.array_equal(r.output, g["output"]), (k, r.loss, g["loss"])
        _eq(tp.weights_from_session(sess, padded=True), gold.weights(padded=True), f"step {k}")
        assert r.cycles + r.host_cycles == tp.step_cycles()
        results.append(r)
    return tp, sess, gold, results


_SGD_NETS = {"tiny-2layer": (TINY, (5, 6, 3)), "tiny-3layer": (TINY, (7, 9, 4, 3)),
             "small-3layer": (SMALL, (20, 30, 17, 5)), "small-full-panels": (SMALL, (20, 32, 32, 16))}


#: the per-cycle engine of the small nets: the softmax on the array over full panels in
#: make test (the engines' counters agree in test_chip_sgd_engines_agree_counter_for_counter,
#: and the chip RTL replays run the per-cycle engine), the others in make test-all
@pytest.mark.parametrize("cfg,sizes,loss,backend,out_map",
                         golden_matrix(_SGD_NETS, ("small-full-panels", "softmax_ce", "cols")))
def test_chip_sgd_matches_golden(cfg, sizes, loss, backend, out_map):
    """Both mappings of the output layer (row panels; split by columns, reduced onto core
    0). ``small-full-panels``: every core holds real rows, so every reduction adds
    non-zero partials from all cores and the ring's addition order shows. A softmax
    split by columns computes its gradient on core 0 (sw/softmax.py) in the one RUN."""
    tp, *_ = run_and_check(cfg, MLP(sizes, loss, 0.05), 3, backend, _seed(), out_map=out_map)
    assert tp.softmax == (None if loss == "mse" else "array" if out_map == "cols" else "host")
    assert ("forward" in tp.parts) == (tp.softmax == "host") and tp.one_run == (tp.softmax != "host")
    assert tp.host_cycles() == (HOST_LATENCY_CYCLES if tp.softmax == "host" else 0)


@pytest.mark.parametrize("backward", ["fused", "separate"])
@pytest.mark.parametrize("out_map", ["rows", "cols"])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_chip_sgd_backward_steps(backward, out_map, loss):
    """Both backward steps on every layer ``l >= 1`` (the automatic choice runs above),
    bit for bit: the fused kernel (``W^T d`` with the old panel, ``W += d (-lr a)^T``,
    before the reduce-scatter) and the separate kernels (``(-lr d) a^T`` after the mask),
    with a learning rate whose two roundings differ."""
    from functools import partial

    mlp = MLP((7, 9, 4, 3), loss, 0.3)
    flags = [False] + [backward == "fused"] * 2
    tp, *_ = run_and_check(TINY, mlp, 3, "fast", _seed(), out_map=out_map,
                           compile=partial(compile_chip_sgd, backward=backward),
                           golden=partial(GoldenChipSGD, fused=flags))
    assert tp.fused == flags
    kinds = {kind for _, kind, _ in tp.breakdown()}
    assert ("gemv_t_rank1" in kinds, "gemv_t" in kinds) == ((True, False) if backward == "fused" else (False, True))
    assert ("dc2" in tp.alloc.items) == (backward == "separate")


#: the per-cycle engine on the tiny chip in make test; on the small ones in make test-all
#: (their fast runs stay, and the engines' counters agree in test_chip_sgd_spad_engines_agree)
@pytest.mark.parametrize("cfg,sizes,out_map,backend", engine_matrix(
    {"tiny-rows": (TINY, (7, 9, 4, 3), "rows"), "small-cols": (SMALL, (20, 32, 32, 16), "cols"),
     "small-8regs-rows": (replace(SMALL, n_regs=8), (20, 48, 48, 16), "rows")},
    slow_model={"small-cols", "small-8regs-rows"}))
def test_chip_sgd_overlap(cfg, sizes, out_map, backend):
    """The reduce-scatters with the rank-1 updates in their free slots
    (``overlap=True``, the default) against the ops one after the other: both bit for bit
    against the same golden trainer after every step (the same operations in the same
    order), the overlapped step shorter by what the merge saved. With 8 registers the
    reduce-scatter runs in smaller chunks to leave the update its three."""
    from functools import partial

    mlp = MLP(sizes, "mse", 0.3)
    flags = [False] * mlp.n_layers
    gold = partial(GoldenChipSGD, fused=flags)
    seed = _seed()
    tps = [run_and_check(cfg, mlp, 2, backend, seed, out_map=out_map, golden=gold,
                         compile=partial(compile_chip_sgd, backward="separate", overlap=ov))[0] for ov in (False, True)]
    seq, ovl = tps
    assert seq.meta["overlap"] == [] and ovl.meta["overlap"]
    kinds = {kind for _, kind, _ in ovl.breakdown()}
    assert "ring+rank1" in kinds
    assert ovl.step_cycles() < seq.step_cycles()


@pytest.mark.parametrize("out_map", ["rows", "cols"])
@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_chip_sgd_collectives_in_gemvs(loss, out_map):
    """The all-gathers inside the next layer's forward GEMV (``ag_overlap``) and the
    broadcast of ``x`` inside the first layer's (``bcast_overlap``; both the default:
    beats loaded from the ring as the stream reaches them) against the collectives on
    their own, each switch alone and both: bit for bit against the same golden trainer
    after every step, cycles as predicted, the default on both chip engines with the same
    counters on every core. The GEMVs issue the same instructions, so the step is shorter
    by at least the all-gathers' slots and the broadcast's beats."""
    from functools import partial

    mlp = MLP((20, 32, 32, 16), loss, 0.05)
    seed = _seed()
    run = lambda ag, bx, backend="fast": run_and_check(   # noqa: E731
        SMALL, mlp, 2, backend, seed, out_map=out_map,
        compile=partial(compile_chip_sgd, ag_overlap=ag, bcast_overlap=bx))
    seq, ag_only, bx_only = (run(*f)[0] for f in ((False, False), (True, False), (False, True)))
    ovl, _, _, fast = run(True, True)
    model = run(True, True, "model")[3]
    for ra, rb in zip(fast, model):
        assert ra.core_counters == rb.core_counters and ra.phases == rb.phases
    assert seq.meta["ring_in"] == bx_only.meta["ring_in"] == [] and not seq.meta["bcast_in"]
    assert ovl.meta["ring_in"] == ag_only.meta["ring_in"] == ([1, 2] if out_map == "rows" else [1])
    assert ovl.meta["bcast_in"] and bx_only.meta["bcast_in"] and not ag_only.meta["bcast_in"]
    a, b = ({n: i for n, _, i in tp.breakdown()} for tp in (seq, ovl))
    ags = [f"ag{l}" for l in ovl.meta["ring_in"]]
    assert all(g in a and g not in b for g in ags)
    assert all(a[g] == b[g] for g in a if g.startswith("gemv"))
    assert (b["bcast_x"], b["bcast_x_sync"]) == (0, 3 * (SMALL.cores - 1))        # core 0's program
    saved_bx = a["bcast_x"] - b["bcast_x_sync"]
    assert saved_bx >= 20 // SMALL.nr
    assert seq.step_cycles() - ovl.step_cycles() >= sum(a[g] for g in ags) + saved_bx
    assert seq.step_cycles() > ag_only.step_cycles() > ovl.step_cycles()
    assert seq.step_cycles() > bx_only.step_cycles() > ovl.step_cycles()


@pytest.mark.parametrize("loss", ["mse", "softmax_ce"])
def test_chip_sgd_out_reduce(loss):
    """The split output layer's partials reduced onto core 0 as one stream into register
    accumulators (``out_reduce="stream"``, the automatic choice when shorter) or by the
    chain: each bit for bit against the golden trainer following the same order of
    additions, the stream on both chip engines with the same counters, shorter; a stream
    that does not fit, or an unknown choice, is a clear error."""
    from functools import partial

    from sw.ring import reduce_slots, reduce_stream_slots

    mlp = MLP((20, 32, 32, 16), loss, 0.05)
    seed = _seed()
    run = lambda red, backend="fast": run_and_check(    # noqa: E731
        SMALL, mlp, 2, backend, seed, out_map="cols", compile=partial(compile_chip_sgd, out_reduce=red),
        golden=partial(GoldenChipSGD, out_reduce=red))
    chain = run("chain")[0]
    stream, _, _, fast = run("stream")
    for ra, rb in zip(fast, run("stream", "model")[3]):
        assert ra.core_counters == rb.core_counters and ra.phases == rb.phases
    assert (chain.meta["out_reduce"], stream.meta["out_reduce"]) == ("chain", "stream")
    assert compile_chip_sgd(SMALL, mlp).meta["out_reduce"] == "stream"
    m = stream.P[-1] // SMALL.nr
    assert chain.step_cycles() - stream.step_cycles() == reduce_slots(SMALL, m) - reduce_stream_slots(SMALL, m) > 0
    assert compile_chip_sgd(SMALL, mlp, out_map="rows").meta["out_reduce"] is None
    with pytest.raises(TrainCompileError, match="out_reduce='stream': .* receive FIFO"):
        compile_chip_sgd(replace(SMALL, ring_fifo_depth=4), mlp, out_map="cols", out_reduce="stream")
    with pytest.raises(TrainCompileError, match="out_reduce must be one of"):
        compile_chip_sgd(SMALL, mlp, out_reduce="tree")


@pytest.mark.parametrize("backend", ["fast", "model"])
def test_chip_sgd_split_softmax_on_host(backend):
    """``softmax="host"`` with the split output layer: two chip phases and the turnaround."""
    from functools import partial

    tp, *_ = run_and_check(SMALL, MLP((20, 32, 32, 16), "softmax_ce", 0.05), 2, backend, _seed(), out_map="cols",
                           compile=partial(compile_chip_sgd, softmax="host"),
                           golden=partial(GoldenChipSGD, softmax="host"))
    assert tp.softmax == "host" and [p.name for p in tp.chip_parts()][:1] == ["forward"]
    with pytest.raises(TrainCompileError, match="logits are spread over the cores"):
        compile_chip_sgd(SMALL, MLP((20, 32, 32, 16), "softmax_ce", 0.05), out_map="rows", softmax="array")


def test_chip_sgd_out_map():
    """The split output layer: a column panel per core (natural column order), one
    output core, no all-gather / reduce-scatter for that layer, fewer cycles."""
    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05)
    rows, cols = (compile_chip_sgd(SMALL, mlp, out_map=m) for m in ("rows", "cols"))
    assert cols.P == [8, 8, 8] and cols.N == [20, 32, 8] and cols.out_cores == 1
    assert cols._gshape(2) == (8, 32) and cols._cols(2, 1) is None and cols._cols(1, 1) is not None
    ops = {op for op, _, _ in cols.breakdown()}
    assert {"reduce_z", "bcast_g"} <= ops and "ag2" not in ops and not any(o.startswith("rs2") for o in ops)
    ops = {op for op, _, _ in rows.breakdown()}
    assert "rs2_up2" in ops                           # the reduce-scatter with the update overlapped
    assert "ag2" not in ops and rows.meta["ring_in"] == [1, 2] and cols.meta["ring_in"] == [1]   # in the GEMVs
    assert cols.step_cycles() < rows.step_cycles()
    assert compile_chip_sgd(SMALL, mlp).out_map == "cols"
    with pytest.raises(TrainCompileError, match="out_map must be one of"):
        compile_chip_sgd(SMALL, mlp, out_map="tree")


def check_engines_agree(run, mlp):
    """Two steps of ``run`` (a ``run_and_check``) on the fast chip engine and the per-cycle
    chip model: the same counters on every core and the same phases."""
    seed = _seed()
    a = run(SMALL, mlp, 2, "fast", seed)[3]
    b = run(SMALL, mlp, 2, "model", seed)[3]
    for ra, rb in zip(a, b):
        assert ra.core_counters == rb.core_counters
        assert ra.phases == rb.phases


def test_chip_sgd_engines_agree_counter_for_counter():
    """The fast chip engine and the per-cycle chip model: same counters on every core."""
    check_engines_agree(run_and_check, MLP((12, 10, 6), "softmax_ce", 0.05))


def test_chip_sgd_binary32_and_more_cores():
    cfg = replace(SMALL, fmt="binary32", cores=6)
    run_and_check(cfg, MLP((9, 30, 7), "mse", 0.05), 2, "fast", _seed())


def test_chip_sgd_predict_and_layout():
    seed = _seed()
    cfg, mlp = SMALL, MLP((20, 30, 17, 5), "softmax_ce", 0.05)
    tp, sess, gold, _ = run_and_check(cfg, mlp, 1, "fast", seed, out_map="rows")
    x = np.random.default_rng(seed).uniform(-1, 1, mlp.n_in)
    assert np.array_equal(tp.predict(sess, x), gold.predict(x))
    # panels: 30 rows on 4 cores of 4x4 -> 8 rows each; the gathered order of core 1
    assert tp.P == [8, 8, 4] and tp.N == [20, 32, 32]
    assert panel_rows(cfg, 30) == 8
    assert column_order(cfg, 1, 8).tolist()[:10] == [8, 9, 10, 11, 12, 13, 14, 15, 0, 1]
    assert tp.out_cores == 2
    assert "all-gather of a1 inside W1's forward GEMV" in tp.describe() and "ag1" not in tp.describe()


def test_chip_sgd_learns_like_float64():
    """200 steps on a learnable problem: the array's loss falls like float64 SGD's."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    mlp = MLP((8, 16, 4), "softmax_ce", 0.1)
    cfg = SMALL
    tp = compile_chip_sgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = ChipSession(cfg, "fast")
    tp.init(sess, W0)
    ref = Float64SGD(mlp, [cfg.fmt.to_float(np.asarray(w)) for w in W0])
    centers = rng.uniform(-1, 1, (4, 8))
    la, lr = [], []
    for _ in range(200):
        c = int(rng.integers(4))
        x = centers[c] + 0.1 * rng.standard_normal(8)
        la.append(tp.run_step(sess, x, c).loss)
        lr.append(ref.step(x, c)["loss"])
    a0, a1, r1 = np.mean(la[:40]), np.mean(la[-40:]), np.mean(lr[-40:])
    print(f"loss {a0:.3f} -> {a1:.3f} (float64 {r1:.3f})")
    assert a1 < 0.5 * a0 and a1 < r1 + 0.1


def test_chip_sgd_errors():
    with pytest.raises(TrainCompileError, match="needs a chip"):
        compile_chip_sgd(PRESETS["small"], MLP((8, 8, 4), "mse", 0.1))
    with pytest.raises(TrainCompileError, match="does not fit 2 cores of 2x2 PEs"):
        compile_chip_sgd(TINY, MLP((300, 200, 4), "mse", 0.1))
    with pytest.raises(TrainCompileError, match="batch 1"):
        compile_chip_sgd(TINY, MLP((8, 8, 4), "mse", 0.1, batch=2))
    with pytest.raises(TrainCompileError, match="zero"):
        compile_chip_sgd(TINY, MLP((8, 8, 4), "mse", 1e-12))


# -- the register reduce-scatter on its own ------------------------------------------------
@pytest.mark.parametrize("engine", ["fast", "cycle"])
@pytest.mark.parametrize("cfg,s", [(TINY, 1), (TINY, 4), (SMALL, 2), (SMALL, 5), (SMALL, 7), (SMALL, 16),
                                   (replace(SMALL, cores=6), 3), (replace(TINY, n_regs=4), 5)])
def test_reduce_scatter_vec(cfg, s, engine):
    from sw.ring import reduce_scatter_vec_lines, reduce_scatter_vec_slots, ring_text
    from pe.fp_golden import mac_bits
    from sim.chip_model import ChipModel
    from sw.asm import assemble

    seed = _seed()
    rng = np.random.default_rng(seed)
    c, nr, fmt = cfg.cores, cfg.nr, cfg.fmt
    base = 3
    vals = [fmt.from_float(rng.uniform(-2, 2, (c * s, nr))).astype(fmt.np_uint) for _ in range(c)]
    ch = ChipModel(cfg, engine)
    lines = reduce_scatter_vec_lines(cfg, s, "b", base)
    assert len(lines) == reduce_scatter_vec_slots(cfg, s)
    ch.load(assemble(ring_text(cfg, lines) + "\nhalt", cfg).words())
    for k in range(c):
        diag_write(ch.core(k), "b", base, vals[k])
    r = ch.run()
    assert r.cycles == len(lines) + cfg.run_overhead
    one = np.full(nr, int(fmt.from_float(np.array([1.0]))[0]), dtype=fmt.np_uint)
    for k in range(c):
        def seg(j, g):
            t = (j - g) % c
            return vals[j][t * s:(t + 1) * s]
        acc = seg((k + 1) % c, k)
        for h in range(2, c + 1):
            acc = np.stack([mac_bits(fmt, acc[q], one, seg((k + h) % c, k)[q]) for q in range(s)])
        got = diag_read(ch.core(k), "b", base, s, nr)
        assert np.array_equal(got, acc), (k, got, acc)


# -- RTL ---------------------------------------------------------------------------------
@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_chip_sgd_rtl(sim):
    """Two MSE steps (the output layer split by columns) and one softmax step (by rows)
    on 4 cores of 2 x 2 PEs with a 128-word
    microcode (the programs do not fit one image: reloaded per RUN; the MSE step splits
    into several chip RUNs), recorded on the per-cycle chip
    model and replayed on the RTL (every beat and counter compared per core); the weights
    read back from the RTL equal the golden trainer's. The broadcast of ``x`` and the
    all-gathers run inside the forward GEMVs (the defaults). The configuration is
    ``tests/rtl/test_chip.py``'s ``CHIP4`` (one simulator build)."""
    from tests.rtl.test_chip import CHIP4

    seed = _seed()
    tp = _chip_rtl(sim, CHIP4, MLP((5, 6, 3), "mse", 0.125), 2, seed, "cols")
    assert len(tp.images) > 1 and tp.fused == [False, True]     # programs reloaded between RUNs
    assert tp.meta["out_reduce"] == "stream"                    # the output layer's partials as one stream
    assert tp.host_in and "in" not in dict(tp.host_phase_cycles())   # x and t in the step's first RUN
    # separate backward steps: both reduce-scatters run with the rank-1 updates in their free slots
    tp = _chip_rtl(sim, CHIP4, MLP((5, 6, 7, 3), "softmax_ce", 0.125), 1, seed, "rows", backward="separate")
    assert [o["layer"] for o in tp.meta["overlap"]] == [2, 1]
    assert tp.meta["ring_in"] == [1, 2] and tp.meta["bcast_in"]   # the collectives in the forward GEMVs
    assert tp.host_in                                             # x in the forward RUN


#: 2 cores of 2 x 2 PEs with room in the microcode for the softmax kernel
CHIP2_SMX = replace(TINY, mem_a_words=128, mem_b_words=128, ucode_depth=256)


@pytest.mark.slow
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)])
def test_chip_sgd_rtl_softmax_on_array(sim):
    """The split output layer's softmax gradient computed on core 0 (the other core waiting
    in its NOP loop), then broadcast: two steps on the chip RTL (``slow``: in ``make test``
    the softmax kernel runs on a core's RTL in tests/sw/test_train.py's
    ``test_sgd_rtl_softmax_on_array``, the chip's broadcasts in ``test_chip_sgd_rtl``, and
    this schedule bit-exact on both engines)."""
    tp = _chip_rtl(sim, CHIP2_SMX, MLP((5, 6, 3), "softmax_ce", 0.125), 2, _seed(), "auto")
    assert tp.out_map == "cols" and tp.softmax == "array" and tp.host_cycles() == 0


def _chip_rtl(sim, cfg, mlp, steps, seed, out_map, backward="auto", spad=None, page_rows=None):
    """``steps`` steps recorded on the per-cycle chip model (against the golden), replayed
    on the RTL: every core's beats and counters compared, the weights read back (from the
    scratchpads for the panels of layers ``spad``)."""
    from functools import partial

    from sim.chip_run import ChipPhase, run_chip_session

    loss = mlp.loss
    pg = dict(spad=spad, page_rows=page_rows)
    tp, sess, gold, results = run_and_check(cfg, mlp, steps, "model", seed, record=True, out_map=out_map,
                                            compile=partial(compile_chip_sgd, backward=backward, **pg),
                                            golden=partial(GoldenChipSGD, fused=backward_plan(
                                                cfg, mlp, backward, shapes=list(zip(*chip_shapes(cfg, mlp, out_map)))),
                                                **pg))
    un = tp.unload_weights_phases()
    phases = sess.phases + [ChipPhase(imgs, None, name) for imgs, name in un]
    res = run_chip_session(cfg, phases, backend="rtl", sim=sim, name=f"chip-sgd-{loss}-{cfg.cores}x{cfg.nr}")
    got = tp.decode_weights(res[-len(un):], padded=True)
    _eq(got, gold.weights(padded=True), f"rtl {loss}")
    # the step's chip RUNs: RTL counters == the model's, per core
    names = [p.name for p in sess.phases]
    for i, r in enumerate(results):
        for name, kind, cyc in r.phases:
            if kind == "chip":
                j = [q for q, n in enumerate(names) if n == name][i]
                assert max(c.counters["cycles"] for c in res[j]) == cyc
    print(f"{sim} {loss}: {res[-1][0].info}")
    return tp


@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_chip_sgd_spad_rtl(sim):
    """Panels paged from the scratchpad on the RTL (``CHIP2_SMX``'s 256-beat
    scratchpads): both layers in pages of 2 rows (the hidden layer's ``W^T d``
    accumulated over its pages, the fused backward step), one step with the output layer
    by rows; then a 3-layer network with separate backward steps, only the middle layer
    paged; the separate updates swap their pages (``page_swap``). Recorded on the per-cycle model against the golden trainer, replayed on the
    RTL, the weights read back from the RTL's scratchpads and PE memories."""
    seed = _seed()
    tp = _chip_rtl(sim, CHIP2_SMX, MLP((5, 9, 6), "mse", 0.125), 1, seed, "rows", backward="fused", spad=[0, 1],
                   page_rows=2)
    assert all(len(sp.pages) > 1 for sp in tp.spad.values()) and tp.fused == [False, True]
    assert tp.meta["ring_in"] == [1]           # the all-gather inside the first page's GEMV
    assert tp.meta["page_swap"] == [0]         # layer 0's updates swap its pages (layer 1's are fused)
    tp = _chip_rtl(sim, CHIP2_SMX, MLP((5, 6, 7, 3), "mse", 0.125), 1, seed, "rows", backward="separate",
                   spad=[1], page_rows=2)
    assert sorted(tp.spad) == [1] and len(tp.spad[1].pages) == 2 and "ep" in tp.alloc.items
    assert tp.meta["page_swap"] == [1]


# -- weight panels in the scratchpad ---------------------------------------------------
def run_spad(cfg, mlp, steps, backend, seed, spad=None, page_rows=None, out_map="auto", backward="auto"):
    """:func:`run_and_check` with the panels of layers ``spad`` (None: the compiler's
    choice) in the scratchpad, paged by at most ``page_rows`` rows."""
    from functools import partial

    fused = None if backward == "auto" else [False] + [backward == "fused"] * (mlp.n_layers - 1)
    return run_and_check(cfg, mlp, steps, backend, seed, out_map=out_map,
                         compile=partial(compile_chip_sgd, spad=spad, page_rows=page_rows, backward=backward),
                         golden=partial(GoldenChipSGD, spad=spad, page_rows=page_rows, fused=fused))


def check_spad_traffic(tp, result) -> None:
    """A step of SGD or minibatch GD across cores with paged panels (``tp.spad``) moved
    each paged panel three times per core (two loads, one store) but for the last paged
    layer's last page (still in the page buffer from the forward pass); the breakdown
    names the transfers."""
    cfg = tp.cfg
    beats = sum(sp.beats(cfg.nr) for sp in tp.spad.values())
    step_rd = sum(c["spad_rd_beats"] for c in result.core_counters) // cfg.cores
    step_wr = sum(c["spad_wr_beats"] for c in result.core_counters) // cfg.cores
    top = tp.spad[max(tp.spad)]
    saved = cfg.nr * top.page_words(len(top.pages) - 1)
    assert (step_rd, step_wr) == (2 * beats - saved, beats)
    assert "spad" in {k for _, k, _ in tp.breakdown()}


def check_spad_errors(compile, mlp, bad_layer: int, allowed: str) -> None:
    """A compiler's errors for explicit page plans: a layer it cannot page (``allowed``:
    the regex of the allowed list), page rows not a multiple of ``nr`` (4), no
    scratchpad."""
    with pytest.raises(TrainCompileError, match=f"spad layers must be a non-empty subset of {allowed}"):
        compile(SMALL, mlp, spad=[bad_layer])
    with pytest.raises(TrainCompileError, match="page_rows must be a positive multiple of nr = 4"):
        compile(replace(SMALL, spad_kib=4), mlp, spad=[0], page_rows=6)
    with pytest.raises(TrainCompileError, match="has none"):
        compile(replace(SMALL, spad_kib=0), mlp, spad=[0])


@pytest.mark.parametrize("backward", ["fused", "separate"])
@pytest.mark.parametrize("loss,out_map", [("mse", "rows"), ("softmax_ce", "cols"), ("softmax_ce", "rows")])
@pytest.mark.parametrize("spad,page_rows", [([0, 1, 2], 4), ([1], 8), ([0, 2], None)],
                         ids=["all-4-row-pages", "one-layer-whole", "two-layers-whole"])
def test_chip_sgd_spad_matches_golden(spad, page_rows, loss, out_map, backward):
    """Panels paged from the scratchpad: full panels on every core (each page's partial
    of ``W^T d`` is non-zero, so the page-by-page accumulation shows in the rounding),
    both output mappings (the split output layer stays in PE memory), both backward
    steps, bit for bit against the golden trainer after every step, cycles as predicted;
    every paged weight crosses the scratchpad port three times per step, but for the last
    paged layer's last page (the backward pass visits the pages last to first and finds
    it in the page buffer)."""
    if out_map == "cols":
        spad = [l for l in spad if l < 2] or [1]
    cfg = replace(SMALL, spad_kib=4)
    mlp = MLP((20, 32, 32, 16), loss, 0.3)
    tp, sess, gold, res = run_spad(cfg, mlp, 2, "fast", _seed(), spad, page_rows, out_map, backward)
    assert sorted(tp.spad) == sorted(spad) == tp.meta["spad_layers"]
    if page_rows:
        assert all(n * cfg.nr <= page_rows for sp in tp.spad.values() for _, n in sp.pages)
    assert ("ep" in tp.alloc.items) == any(len(sp.pages) > 1 for l, sp in tp.spad.items() if l >= 1)
    check_spad_traffic(tp, res[-1])
    from sw.train_chip_ops import paged_accumulate

    # pages of one local row, separate step: W^T d accumulated row by row, reduced once
    names = [n for n, _, _ in tp.breakdown()]
    acc = [l for l, sp in tp.spad.items() if l and paged_accumulate(sp, tp.fused[l])]
    assert [l for l in tp.spad if f"red{l}" in names] == acc
    if spad == [0, 1, 2] and backward == "separate" and out_map == "rows":
        assert acc == [1, 2] if len(tp.spad[2].pages) > 1 else acc == [1]
    assert all(o["layer"] not in tp.spad for o in tp.meta["overlap"])     # paged: updated before the reduce-scatter
    x = np.random.default_rng(1).uniform(-1, 1, mlp.n_in)
    assert np.array_equal(tp.predict(sess, x), gold.predict(x), equal_nan=True)     # lr 0.3 may diverge
    assert "scratchpad beats 0.." in tp.describe()


def test_chip_sgd_spad_when_pe_memory_is_short():
    """PE memories too small for the panels: the compiler pages the largest panel from the
    scratchpad by itself (the golden trainer follows the same plan); with too small a
    scratchpad, or none, it fails with the sizes; explicit choices are checked."""
    mlp = MLP((40, 128, 32, 5), "mse", 0.05)
    cfg = replace(SMALL, mem_a_words=128, mem_b_words=128, spad_kib=4)
    with pytest.raises(TrainCompileError, match="does not fit .* there is no scratchpad"):
        compile_chip_sgd(replace(cfg, spad_kib=0), mlp)
    tp, *_ = run_spad(cfg, mlp, 2, "fast", _seed())
    assert tp.meta["spad_layers"] == [0] and tp.meta["pages"] == {0: 4}
    with pytest.raises(TrainCompileError, match="nor with the largest panels paged from the 128-beat scratchpad"):
        compile_chip_sgd(replace(cfg, spad_kib=1), mlp)
    # the output layer split by columns (the automatic mapping here) is not pageable
    check_spad_errors(compile_chip_sgd, mlp, 2, r"\[0, 1\] \(the row-panel layers\)")
    with pytest.raises(TrainCompileError, match=r"spad layers must be a non-empty subset of \[0, 1, 2\]"):
        compile_chip_sgd(SMALL, mlp, spad=[3], out_map="rows")


def test_chip_sgd_spad_engines_agree():
    """The fast chip engine and the per-cycle chip model with paged panels: the same
    counters (scratchpad beats included) on every core."""
    from functools import partial

    check_engines_agree(partial(run_spad, spad=[0, 1], page_rows=4, out_map="rows"),
                        MLP((12, 40, 6), "softmax_ce", 0.05))


@pytest.mark.parametrize("out_map", ["auto", "rows"])
def test_cli_train_chip(tmp_path, out_map):
    """``caterpillar train --config chip-tiny [--out-map rows]`` trains across the chip's
    cores: golden-checked steps, the step figures equal the chip compiler's prediction."""
    import json

    from cli.main import main

    js = tmp_path / "t.json"
    rc = main(["train", "--data", "synthetic", "--hidden", "6", "--epochs", "1", "--lr", "0.1",
               "--config", "chip-tiny", "--golden-steps", "10", "--max-train", "60", "--max-test", "40",
               "--json", str(js), "--out-map", out_map])
    assert rc == 0
    res = json.loads(js.read_text())
    tp = compile_chip_sgd(TINY, MLP((16, 6, 4), "softmax_ce", 0.1), out_map=out_map)
    assert tp.out_map == ("cols" if out_map == "auto" else out_map)
    assert res["step"]["cores"] == 2 and res["golden_checked_steps"] == 10
    assert res["step"]["run_cycles"] == tp.step_cycles() - tp.host_cycles()
    assert res["step"]["cycles"] == tp.step_cycles()
    # the chip step's run record reports again: both cores, the step's cycles
    rep = tmp_path / "r.json"
    assert main(["report", str(js), "--json", str(rep)]) == 0
    r = json.loads(rep.read_text())
    assert r["cores"] == 2 and r["pes"] == 8 and r["cycles"] == tp.step_cycles()
    assert r["flops"] == MLP((16, 6, 4), "softmax_ce", 0.1).flops_per_step()


def test_cli_train_chip_no_overlap(tmp_path, capsys):
    """``--no-overlap`` runs every collective apart from compute: the reduce-scatters and
    the updates one after the other, the all-gathers and the broadcast of x before the
    GEMVs (the compiler's prediction with every overlap off, golden-checked); minibatch GD
    and CP compile with their collectives apart too; it is refused on one core."""
    import json

    from cli.main import main

    js = tmp_path / "t.json"
    args = ["train", "--data", "synthetic", "--hidden", "9,5", "--epochs", "1", "--lr", "0.1", "--config",
            "chip-tiny", "--backward", "separate", "--out-map", "rows", "--max-train", "20", "--max-test", "10"]
    assert main(args + ["--golden-steps", "5", "--json", str(js), "--no-overlap"]) == 0
    mlp = MLP((16, 9, 5, 4), "softmax_ce", 0.1)
    seq, ovl = (compile_chip_sgd(TINY, mlp, out_map="rows", backward="separate", **overlap_options(o))
                for o in (False, True))
    assert ovl.meta["overlap"] and ovl.step_cycles() < seq.step_cycles()
    assert not seq.meta["overlap"] and not seq.meta["ring_in"] and not seq.meta["bcast_in"]
    assert json.loads(js.read_text())["step"]["cycles"] == seq.step_cycles()
    capsys.readouterr()
    short = ["--max-train", "8", "--describe", "--progress", "off"]
    base = ["train", "--data", "synthetic", "--hidden", "9,5", "--epochs", "1", "--lr", "0.1", "--config",
            "chip-tiny", "--max-test", "4", "--golden-steps", "2"] + short
    assert main(base + ["--no-overlap", "--batch", "4"]) == 0
    assert "forward collectives inside the GEMMs: none" in capsys.readouterr().out
    assert main(base[:4] + ["9"] + base[5:] + ["--method", "cp", "--no-overlap"]) == 0
    assert "chains: every chain in the tail, after every core's kernels (chain_overlap: off)" in capsys.readouterr().out
    assert main(["train", "--data", "synthetic", "--hidden", "9", "--no-overlap"]) != 0
    assert "--no-overlap applies to chip configurations" in capsys.readouterr().err


@pytest.mark.parametrize("cfg", [SMALL, replace(SMALL, cores=6)], ids=["4cores", "6cores"])
def test_chip_forward_is_the_network(cfg):
    """Independent of the golden trainer (which shares the compiler's column order): the
    chip's forward pass computes the network's function, within binary16 rounding of a
    float64 forward pass with the same weights."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    mlp = MLP((20, 30, 17, 5), "softmax_ce", 0.05)
    tp = compile_chip_sgd(cfg, mlp)
    W0 = init_weights(mlp, cfg.fmt, seed)
    sess = ChipSession(cfg, "fast")
    tp.init(sess, W0)
    ref = Float64SGD(mlp, [cfg.fmt.to_float(np.asarray(w)) for w in W0])
    for _ in range(3):
        x = cfg.fmt.to_float(cfg.fmt.from_float(rng.uniform(-1, 1, mlp.n_in)))
        got, want = tp.predict(sess, x), ref.predict(x)
        assert np.allclose(got, want, rtol=0.02, atol=0.02 * np.abs(want).max()), (got, want)


def test_chip_microcode_reloads_are_counted():
    """A step whose programs do not share one microcode image LOADs images between its
    RUNs every step: the session counts the LOAD beats in the phases' cycles (phases of
    kind "load"), ``step_cycles`` includes them (:meth:`reload_cycles`) and equals every
    step's, the first too (``init`` leaves the images a step ends with), a prediction
    between steps changes nothing; ``describe`` states them. A step that fits the
    microcode LOADs nothing."""
    from sw.host_protocol import load_beat_count
    from tests.rtl.test_chip import CHIP4

    mlp = MLP((5, 6, 3), "mse", 0.125)
    split = compile_chip_sgd(CHIP4, mlp, host_in=False)       # with host programs, in an image of their own
    assert len(split.images) > 1 and split.reload_words_per_step() >= sum(
        max(len(x) for x in split.images[p.image]) for p in split.chip_parts()[:1])
    rc = split.reload_cycles()
    runs = split.step_runs()
    # at least one LOAD per RUN whose images change (the step has several)
    assert rc >= sum(load_beat_count(CHIP4, 1) for i in range(len(runs)) if runs[i] != runs[i - 1]) > 0
    # the host programs' image holds a chip image's words below them: switching LOADs
    # only the words that differ
    hi, org = split.host_at["in"]
    chip = {p.image for p in split.chip_parts()}
    assert hi not in chip and any(all(split.images[hi][k][:org] == split.images[i][k][:org]
                                      for k in range(CHIP4.cores)) for i in chip)
    assert split.step_cycles() == (sum(split.part_cycles(p) for p in split.chip_parts())
                                   + sum(c for _, c in split.host_phase_cycles()) + rc)
    assert f"{rc} cycles in the step's" in split.describe() and "LOADs" in split.describe()
    rng = np.random.default_rng(3)
    W0 = init_weights(mlp, CHIP4.fmt, 3)
    sess = ChipSession(CHIP4, "fast")
    split.init(sess, W0)
    gold = GoldenChipSGD(CHIP4, mlp, W0, out_map=split.out_map)
    for k in range(3):
        if k == 2:
            split.predict(sess, rng.uniform(0, 1, mlp.n_in))
        x, t = rng.uniform(0, 1, mlp.n_in), rng.uniform(-1, 1, mlp.n_out)
        r = split.run_step(sess, x, t)
        g = gold.step(x, t)
        assert r.loss == g["loss"]
        assert r.cycles + r.host_cycles == split.step_cycles() and r.load_cycles == rc
        assert sum(c for _, kind, c in r.phases if kind == "load") == rc
        assert sum(c.get("ucode_wr_words", 0) for c in r.core_counters) == split._reload()[1] > 0
    whole = compile_chip_sgd(SMALL, mlp)
    assert len(whole.images) == 1 and whole.reload_words_per_step() == 0 and whole.reload_cycles() == 0
    assert "LOADs" not in whole.describe()
    sess = ChipSession(SMALL, "fast")
    whole.init(sess, W0)
    r = whole.run_step(sess, rng.uniform(0, 1, mlp.n_in), rng.uniform(-1, 1, mlp.n_out))
    assert r.load_cycles == 0 and not any(kind == "load" for _, kind, _ in r.phases)
    assert all("ucode_wr_words" not in c for c in r.core_counters)
    assert r.cycles + r.host_cycles == whole.step_cycles()


def test_cli_train_chip_sgd_with_panels_in_the_scratchpad(tmp_path, capsys):
    """``caterpillar train --describe`` (SGD) on a chip whose PE memories do not hold the
    panels: the compiler pages the largest through the scratchpad, the steps are
    golden-checked (the golden trainer follows the same plan), the description names
    the scratchpad region."""
    import json

    from cli.main import main

    js = tmp_path / "t.json"
    cfg = '{"preset": "chip-small", "mem_a_words": 128, "mem_b_words": 128, "spad_kib": 4}'
    rc = main(["train", "--data", "synthetic", "--hidden", "128,64", "--epochs", "1", "--lr", "0.05",
               "--loss", "mse", "--config", cfg, "--golden-steps", "3", "--max-train", "12", "--max-test", "8",
               "--json", str(js), "--describe"])
    out = capsys.readouterr().out
    assert rc == 0 and "scratchpad beats 0.." in out and "page(s) of up to" in out
    assert json.loads(js.read_text())["golden_checked_steps"] == 3


@pytest.mark.parametrize("rx", [False, True], ids=["bus", "rx"])
@pytest.mark.parametrize("out_map", ["rows", "cols"])
def test_chip_sgd_exec_stage(out_map, rx):
    """Chip SGD (ring collectives, softmax on the array for ``cols``) with the execute
    stage and the distribution stage (ring look-ahead) on every core, against the golden
    chip trainer; with the receive stage as well (SRAM reads see a write three micro-ops
    later: the all-gather's forwarded beats wait one slot more)."""
    cfg = SMALL.replace(exec_stage=True, bus_stage=True, dist_stage=True, fetch_stage=True, addr_stage=True,
                        read_stage=True, rx_stage=rx)
    run_and_check(cfg, MLP((20, 30, 17, 5), "softmax_ce", 0.05), 2, "fast", _seed(), out_map=out_map)


@pytest.mark.parametrize("loss,out_map,backend", [("softmax_ce", "cols", "fast"), ("softmax_ce", "cols", "model"),
                                                  ("softmax_ce", "rows", "fast"), ("mse", "cols", "fast"),
                                                  ("mse", "rows", "fast")])
def test_chip_sgd_host_io_in_the_step(loss, out_map, backend):
    """``host_in`` (the default): core 0 takes the target and ``x`` from the host stream
    in the step's first RUN (``x`` as its first GEMV broadcasts it) and the output cores
    send the logits (MSE: ``d``) as soon as they are final, so the step has no host
    phase but the host softmax's gradient; the same losses, outputs and weights as the
    step compiled with its host phases, bit for bit, on both chip engines (the per-cycle
    one for the softmax on the array). The chip
    programs grow by the target's and the output's words (one instruction per local
    word, and at most one NOP), the step shrinks by the host phases. MSE by rows has two
    output cores: the host stream cannot feed two cores while they run, so it keeps
    its host phases."""
    seed = _seed()
    mlp = MLP((20, 30, 17, 5), loss, 0.05)
    runs = {h: run_and_check(SMALL, mlp, 2, backend, seed, out_map=out_map,
                             compile=lambda c, m, out_map, h=h: compile_chip_sgd(c, m, out_map=out_map, host_in=h))
            for h in (True, False)}
    on, off = runs[True][0], runs[False][0]
    for a, b in zip(runs[True][3], runs[False][3]):
        assert a.loss == b.loss and np.array_equal(a.output, b.output)
    _eq(on.weights_from_session(runs[True][1], padded=True), off.weights_from_session(runs[False][1], padded=True),
        "host_in on / off")
    chip = lambda tp: sum(tp.part_cycles(p) for p in tp.chip_parts())     # noqa: E731
    so = on.P[-1] // SMALL.nr
    if loss == "mse" and out_map == "rows":
        assert not on.host_in and on.step_cycles() == off.step_cycles()
        return
    assert on.host_in and not off.host_in and "x" not in on.regions
    assert [n for n, _ in on.host_phase_cycles()] == (["g"] if on.softmax == "host" else [])
    grow = chip(on) - chip(off)
    assert (so if on.one_run else 0) + so <= grow <= (so if on.one_run else 0) + so + 1
    assert on.step_cycles() == off.step_cycles() - sum(c for n, c in off.host_phase_cycles() if n != "g") + grow
    assert on.step_cycles() < off.step_cycles()


def test_large_net_at_l_shares_the_transposed_gemv_partials():
    """At L the W^T d partials of layers 2, 3 and 4 share one region of bank A (each lives
    from its transposed GEMV to its mask), so every mask reads ``e`` and ``a`` from
    different banks (one instruction per element; layer 5's e is the fused kernel's, out
    of W5's bank A, beside a5); a hidden layer's output stays a
    pre-activation, its ReLU taken by the next GEMV's input load (no ReLU kernel)."""
    from sim.paper import NETS

    cfg = PRESETS["L"]
    tp = compile_chip_sgd(cfg, MLP(NETS["large"], "softmax_ce", 0.01))
    R = tp.regions
    assert R["e2"] == R["e3"] == R["e4"] and R["e2"].bank == "a"
    assert all(R[f"e{l}"].bank != R[f"a{l}"].bank for l in range(1, 5))
    kinds = {k for _, k, _ in tp.breakdown()}
    assert "relu" not in kinds and "relu_mask" in kinds
    masks = {n: c for n, k, c in tp.breakdown() if k == "relu_mask"}
    assert [masks[f"mask{l}"] for l in range(1, 5)] == [tp.P[l - 1] // cfg.nr + 1 for l in range(1, 5)]
