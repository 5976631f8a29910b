# amaranth: UnusedElaboratable=no
"""The chip's DRAM ports on the RTL (``rtl.chip.Chip`` with ``m_axi[k]``, one cocotbext-axi
``AxiRam`` per core, ``sim/tb_chip.py``, Icarus): an SGD step (also on Verilator, in
``make test-all``) and two minibatch GD steps with both weight panels streamed from each
core's DRAM (each page's forward GEMM loading the next from its staging slot), and CP steps with a hidden layer's panel streamed from its core's DRAM,
replayed from their recordings; every beat and counter equal to the chip models', the
DRAM and the weights equal to the golden trainer's (``docs/chip.md``, "DRAM ports")."""

from __future__ import annotations

import time

import numpy as np
import pytest

from arch.config import ArchConfig
from sim.chip_run import ChipPhase, run_chip_session
from sim.sessions import ChipSession
from sw.golden_train_chip import GoldenChipSGD
from sw.golden_train_chip_mb import GoldenChipMBGD
from sw.golden_train_cp import GoldenChipCP
from sw.layout import unpack_matrix
from sw.mlp import MLP
from sw.train import init_weights
from sw.train_chip import compile_chip_sgd
from sw.train_chip_mb import compile_chip_mbgd
from sw.train_cp import compile_chip_cp
from sw.train_dram import DramPanel
from sw.train_paging import spad_local
from tests.rtl.test_dram_rtl import AXIRAM_LATENCY
from sim.paper import DMA_QUEUE
from tests.simulators import REPLAY_SIM_PARAMS

#: 2 cores of 2 x 2 binary16 PEs, a 1 KiB scratchpad and 1 MiB of DRAM per core at one
#: beat (4 bytes) per cycle with AxiRam's latency, so the models' DMA timing is the RTL's;
#: the DMA queue of the Table 2 cells run off chip (sim.paper.DMA_QUEUE)
CFG = ArchConfig(nr=2, mem_a_words=128, mem_b_words=128, ucode_depth=256, cores=2, spad_kib=1, dram_mib=1,
                 dram_latency=AXIRAM_LATENCY, dram_gbps=4.0, dma_queue=DMA_QUEUE)
NET = (5, 9, 6)
#: both layers' panels in DRAM, pages of 2 local rows (3 pages for W0, 2 for W1)
PAGED = dict(spad=[0, 1], page_rows=2, dram=[0, 1])
#: CP's programs (head, tail variants, chains, host programs) need more microcode
CFG_CP = CFG.replace(ucode_depth=512)


def _record(seed: int, batch: int = 1, steps: int = 1):
    """``steps`` training steps recorded on the per-cycle chip model against the golden
    trainer, both layers' panels in DRAM (``batch == 1``: SGD, else minibatch GD of
    ``batch`` samples): ``(program, golden, recorded phases, each step's result)``."""
    if batch == 1:
        mlp = MLP(NET, "mse", 0.125)
        tp = compile_chip_sgd(CFG, mlp, out_map="rows", **PAGED)
        assert tp.meta["page_swap"] == [0, 1]     # the backward updates swap the pages through the staging slots
        gold = GoldenChipSGD(CFG, mlp, init_weights(mlp, CFG.fmt, seed), out_map="rows", spad=PAGED["spad"],
                             page_rows=PAGED["page_rows"])
    else:
        mlp = MLP(NET, "mse", 0.125, batch=batch)
        tp = compile_chip_mbgd(CFG, mlp, out_map="rows", **PAGED)
        gold = GoldenChipMBGD(CFG, mlp, init_weights(mlp, CFG.fmt, seed), out_map="rows", spad=PAGED["spad"],
                              page_rows=PAGED["page_rows"])
    assert all(isinstance(tp.spad[l], DramPanel) for l in (0, 1))
    assert all(len(tp.spad[l].stage) == 4 for l in (0, 1))      # four staging slots: loads three pages ahead
    sess = ChipSession(CFG, "model", record=True)
    tp.init(sess, init_weights(mlp, CFG.fmt, seed))
    rng = np.random.default_rng(seed)
    shape = (lambda n: (n, batch)) if batch > 1 else (lambda n: (n,))
    results = []
    for _ in range(steps):
        x, t = rng.uniform(0, 1, shape(NET[0])), rng.normal(size=shape(NET[-1])) * 0.5
        results.append(tp.run_step(sess, x, t))   # checks each chip RUN's cycles against the prediction
        g = gold.step(x, t)
        assert results[-1].loss == g["loss"] and np.array_equal(results[-1].output, g["output"])
    phases = list(sess.phases)
    got = tp.weights_from_session(sess, padded=True)       # (adds read-back RUNs to the session)
    assert all(np.array_equal(a, b) for a, b in zip(got, gold.weights(padded=True)))
    return tp, gold, phases, results


def _dram_weights(tp, dram):
    """The global padded weights of the DRAM panels, decoded from each core's DRAM beats
    (``dram[k][l]``: core ``k``'s beats of layer ``l``'s panel)."""
    cfg = tp.cfg
    return [tp.join_panels(l, [unpack_matrix(spad_local(cfg, tp.spad[l], dram[k][l]), tp.P[l], tp.N[l])
                               for k in range(cfg.cores)], padded=True)
            for l in range(tp.mlp.n_layers)]


def _replay(cfg, phases, ranges, name, sim="icarus"):
    """``phases`` on the chip RTL (beats checked against the per-cycle model in the
    testbench), the fast chip engine and the per-cycle model: per phase and core the same
    output beats and counters; the three DRAM read-backs of ``ranges`` equal. Returns the
    RTL's results and the seconds it took."""
    t0 = time.perf_counter()
    rtl = run_chip_session(cfg, phases, backend="rtl", sim=sim, name=name, dram_read=ranges)
    t1 = time.perf_counter()
    fast = run_chip_session(cfg, phases, backend="fast", dram_read=ranges)
    model = run_chip_session(cfg, phases, backend="model", dram_read=ranges)
    for p, (pr, pf, pm) in enumerate(zip(rtl, fast, model)):
        for k, (a, b, c) in enumerate(zip(pr, pf, pm)):
            assert a.data == b.data == c.data, (phases[p].name, k)
            assert a.counters == b.counters == c.counters, (phases[p].name, k)
    assert rtl[-1][0].info["dram"] == fast[-1][0].info["dram"] == model[-1][0].info["dram"]
    return rtl, t1 - t0


def _check_training_replay(tp, gold, phases, results, name, sim="icarus"):
    """The recorded ``phases`` of training steps with every panel in DRAM and the weights
    then sent to the host from DRAM, replayed on the chip RTL (:func:`_replay`): the
    steps' chip RUNs last the compiler's cycles; every core's DRAM beats read and
    written, DMA busy and (nonzero) stall cycles over the steps are the compiler's per
    step times the steps; the RTL's DRAM decodes to the golden trainer's weights, as do
    the weights the RTL sends back. Returns the replay's seconds."""
    unload = tp.unload_weights_phases()
    phases = phases + [ChipPhase(imgs, None, n) for imgs, n in unload]
    ranges = [[(tp.spad[l].base, tp.spad[l].beats(CFG.nr)) for l in range(tp.mlp.n_layers)]] * CFG.cores
    rtl, wall = _replay(CFG, phases, ranges, name, sim)

    names = [ph.name for ph in phases]
    runs = [(n, cyc) for r in results for n, kind, cyc in r.phases if kind == "chip"]
    at = [p for p, n in enumerate(names) if n in {n for n, _ in runs}]
    assert len(at) == len(runs) > len(results), (names, runs)
    for p, (n, cyc) in zip(at, runs):             # the steps' chip RUNs: the compiler's cycles
        assert names[p] == n and max(c.counters["cycles"] for c in rtl[p]) == cyc, (p, n)
    keys = ("dram_rd_beats", "dram_wr_beats", "dma_busy_cycles", "dma_stall_cycles")
    d = tp.dram_per_step()
    dma = tuple(len(results) * d[k] for k in ("rd", "wr", "busy", "stall"))
    assert min(dma) > 0, d
    for k in range(CFG.cores):                    # every core's DMA over the steps: as compiled
        got = tuple(sum(rtl[p][k].counters[c] for p, n in enumerate(names) if n.startswith("step")) for c in keys)
        assert got == dma, (k, got, dma)

    want = gold.weights(padded=True)
    assert all(np.array_equal(a, b) for a, b in zip(_dram_weights(tp, rtl[-1][0].info["dram"]), want))
    got = tp.decode_weights(rtl[-len(unload):], padded=True)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    info = rtl[-1][0].info
    print(f"RTL ({sim}) {wall:.1f} s ({info['sim_cycles']:.0f} cycles simulated in {info['wall_s']:.1f} s)")
    return wall


@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_chip_dram_sgd_step_rtl(sim):
    """Init (weights into each core's DRAM through the scratchpad and the DMA engines), one
    SGD step streaming every page (load, compute, store back), then the weights sent to
    the host from DRAM: replayed on the chip RTL with an AxiRam per core, on Icarus and
    on Verilator (``slow``: its cold C++ build takes most of a minute or more; the Icarus
    twin checks the same RTL in ``make test``). Every core's output beats and counters (DRAM beats, DMA busy and stall
    cycles, cycles) equal the per-cycle chip model's (checked beat by beat in the
    testbench) and the fast chip engine's, phase by phase; the step's chip RUNs last the
    compiler's cycles; the RTL's DRAM contents equal both models' and decode to the
    golden trainer's weights, as do the weights the RTL sends back."""
    _check_training_replay(*_record(3), "chip-dram-sgd", sim)


def test_chip_dram_mbgd_steps_rtl(require_simulator):
    """Minibatch GD (batch 6) with both layers' panels streamed from each core's DRAM in
    pages of 2 rows, each page's forward GEMM loading the next from its staging slot
    (each step's forward pass, backward pass and update in several chip programs): two
    steps, the second reading the pages the first stored back, recorded
    on the per-cycle model against the golden trainer and replayed on the chip RTL with
    the checks of the SGD replay (beats and counters per phase and core equal both
    engines', chip RUN cycles and DRAM reads per step as compiled, DRAM and the weights
    sent back equal to the golden's)."""
    require_simulator("icarus")
    tp, gold, phases, results = _record(4, batch=6, steps=2)
    assert tp.meta["pages"] == {0: 3, 1: 2} and tp.meta["page_overlap"] == [0, 1]
    _check_training_replay(tp, gold, phases, results, "chip-dram-mbgd")


#: (CP's streamed heads on both engines: tests/sw/test_cp_dram.py)
def test_chip_dram_cp_steps_rtl(require_simulator):
    """Continuous propagation on the 2 cores (one layer each), the hidden layer's panel
    streamed from core 0's DRAM in pages of 2 rows, each page's update storing it to its
    staging slot while it loads the next page from the other (``page_swap``, the pages in
    alternating bus orders): two samples through the pipeline and
    out (filling, steady state, draining: 6 steps) recorded on the per-cycle model
    against the golden trainer, replayed on the RTL. Beats and counters equal both
    engines' per phase; each step's head streams the whole panel (DRAM counters as the
    compiler predicts); the RTL's DRAM equals the models' and is what the RTL sends back
    as core 0's panel, whose decoded weights are the golden trainer's."""
    require_simulator("icarus")
    cfg = CFG_CP
    mlp = MLP(NET, "mse", 0.125)
    kw = dict(spad=[0], page_rows=2, dram=[0])
    tp = compile_chip_cp(cfg, mlp, **kw)
    sp = tp.spad[0]
    assert isinstance(sp, DramPanel) and sp.res == 0 and tp.cores_of(0) == [0]
    assert tp.meta["page_swap"] == [0] and sp.order == "alt"
    assert sum(op.kind == "spad+rank1" for op in tp.head[0]) == len(sp.pages)
    W0 = init_weights(mlp, cfg.fmt, 3)
    sess = ChipSession(cfg, "model", record=True)
    tp.init(sess, W0)
    gold = GoldenChipCP(cfg, mlp, W0, groups=tp.groups, fused=tp.fused, **kw)
    rng = np.random.default_rng(5)
    n, L = 2, tp.latency_steps()
    X, T = rng.normal(size=(n, mlp.n_in)), rng.normal(size=(n, mlp.n_out)) * 0.5
    for s in range(n + 2 * L):
        r = tp.run_step(sess, X[s] if s < n else None, T[s - L] if 0 <= s - L < n else None)
        g = gold.step(X[s] if s < n else None, T[s - L] if 0 <= s - L < n else None)
        assert np.array_equal(r.raw["out"], g["raw"]) and r.loss == g["loss"], s
        assert r.cycles == tp.step_cycles()
    phases = list(sess.phases)
    want = gold.weights(padded=True)
    assert all(np.array_equal(a, b) for a, b in zip(tp.weights_from_session(sess, padded=True), want))
    unload = tp.unload_weights_phases()
    phases += [ChipPhase(imgs, None, name) for imgs, name in unload]
    ranges = [[(sp.base, sp.dram_beats(cfg.nr))], []]
    rtl, wall = _replay(cfg, phases, ranges, "chip-dram-cp")

    heads = [p for p, ph in enumerate(phases) if ph.name == "cp-head"]
    d = tp.dram_per_step(0)
    assert len(heads) == n + 2 * L and d["rd"] == d["wr"] == sp.beats(cfg.nr) and d["stall"] > 0
    for p in heads:
        c = rtl[p][0].counters
        assert (c["dram_rd_beats"], c["dram_wr_beats"], c["dma_busy_cycles"], c["dma_stall_cycles"]) == (
            d["rd"], d["wr"], d["busy"], d["stall"]), p
        assert rtl[p][1].counters["dram_rd_beats"] == 0
    dram = rtl[-1][0].info["dram"]
    assert [b.data for b in rtl[-1][0].data] == dram[0][0]       # core 0 sends its panel from DRAM
    assert all(np.array_equal(a, b) for a, b in zip(tp.decode_weights(rtl[-len(unload):], padded=True), want))
    info = rtl[-1][0].info
    print(f"RTL {wall:.1f} s ({info['sim_cycles']:.0f} cycles simulated in {info['wall_s']:.1f} s)")


@pytest.mark.parametrize("cores", [2, 4])
def test_chip_dram_ports(cores):
    """The DRAM ports: with DRAM one AXI4 master per core (``m_axi_<k>_*`` at the Verilog
    top level, the core's widths); without DRAM none, the signature unchanged."""
    from rtl.chip import Chip
    from rtl.dma import AxiMaster, axi_master_members
    from rtl.streams import AxisTop

    cfg = CFG.replace(cores=cores)
    chip = Chip(cfg)
    assert chip.signature.members["m_axi"].dimensions == (cores,)
    assert chip.signature.members["m_axi"].signature == AxiMaster(cfg)
    ports = AxisTop(chip).signature.members
    for k in range(cores):
        for name, member in axi_master_members(cfg, f"m_axi_{k}").items():
            assert ports[name].flow == member.flow and ports[name].shape == member.shape, name
    bare = Chip(cfg.replace(dram_mib=0, spad_kib=0))
    assert set(bare.signature.members) == {"s_axis", "m_axis"}
    assert all("m_axi_" not in n for n in AxisTop(bare).signature.members)
