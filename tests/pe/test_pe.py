"""PE RTL vs the PE reference model, every cycle, under cocotb (Icarus and Verilator).

One simulator run per (simulator, configuration) for the suites of ``make test``, and one
per slow suite; the testbench is ``tests/benches/tb_pe.py``, the design
``tests/benches/pe_top.PETop`` (a lone PE whose buses resolve like a 1x1 core). Random
programs log their seed; a different base seed can be given with ``PE_SEED=<n>``, a
longer random run with ``PE_RANDOM_PROGRAMS=<n>``.
"""

from __future__ import annotations

import json
import os

import pytest

from arch.config import ArchConfig
from tests.simulators import sim_matrix
from sim.harness import run_cocotb

# name -> (config, row, col): formats, odd sizes, latencies and PE positions
#: b16_nr4 and b16_dist: cores with a scratchpad, so their micro-op has the write predicate
CONFIGS = {
    "b16_nr4": (ArchConfig(nr=4, mem_a_words=256, mem_b_words=256, spad_kib=4), 1, 2),
    "b32_nr2": (ArchConfig(fmt="binary32", nr=2, mem_a_words=256, mem_b_words=128), 0, 0),
    "bf16_nr4": (ArchConfig(fmt="bfloat16", nr=4, n_regs=14, n_ar=3, mem_a_words=128,
                            mem_b_words=256), 3, 0),
    "b16_lat": (ArchConfig(nr=3, mul_latency=3, add_latency=5, mem_a_words=128,
                           mem_b_words=128), 2, 1),
    # the execute stage (FPGA timing) with the FPGA preset's FP latencies
    "b16_exec": (ArchConfig(nr=4, exec_stage=True, mul_latency=4, add_latency=5,
                            mem_a_words=128, mem_b_words=128), 2, 3),
    # the execute stage with the shortest multiplier (the early late-c read from its
    # first stage) and fewer registers than codes
    "bf16_exec_r13": (ArchConfig(fmt="bfloat16", nr=2, exec_stage=True, n_regs=13,
                                 mem_a_words=128, mem_b_words=128), 1, 0),
    # + the bus stage
    "b16_bus": (ArchConfig(nr=4, exec_stage=True, bus_stage=True, mul_latency=4, add_latency=5,
                           mem_a_words=128, mem_b_words=128), 1, 3),
    # + the read stage
    "b16_read": (ArchConfig(nr=4, exec_stage=True, bus_stage=True, read_stage=True, mul_latency=4,
                            add_latency=5, mem_a_words=128, mem_b_words=128), 2, 0),
    # + the receive stage (the buses registered at the receivers), without and with the
    # read stage (bf16_rx_read: preset fpga's PE timing)
    "b16_rx": (ArchConfig(nr=4, exec_stage=True, bus_stage=True, rx_stage=True, mul_latency=4,
                          add_latency=5, mem_a_words=128, mem_b_words=128), 3, 1),
    "bf16_rx_read": (ArchConfig(fmt="bfloat16", nr=2, exec_stage=True, bus_stage=True, rx_stage=True,
                                read_stage=True, n_regs=13, mem_a_words=128, mem_b_words=128), 1, 1),
    # + the distribution stage: the PE as such a core builds it (its issue decode from a
    # register beside the micro-op's)
    "b16_dist": (ArchConfig(nr=4, exec_stage=True, bus_stage=True, rx_stage=True, read_stage=True,
                            dist_stage=True, mul_latency=4, add_latency=5, mem_a_words=128,
                            mem_b_words=128, spad_kib=4), 2, 1),
}
N_RANDOM = int(os.environ.get("PE_RANDOM_PROGRAMS", "10"))
SUITES = {
    "directed": {},
    "random": {"n_programs": N_RANDOM, "cycles": 300},
    # make test-all: 20 random programs more per configuration (the next seeds)
    "random_more": {"suite": "random", "n_programs": 20, "first": N_RANDOM, "cycles": 300},
    "gemv": {},
}
BASE_SEED = int(os.environ.get("PE_SEED", "1"))


#: (configuration, suite) pairs in make test-all only: the second batch of random programs,
#: and the GEMV suite of the configurations between no pipeline stage (b16_nr4) and every
#: stage (b16_dist) and of the latencies' (their directed and random suites run in make
#: test). Verilator runs in make test-all: it repeats what
#: Icarus checks on the same RTL, and make test builds the PEs with Verilator inside a
#: core (tests/rtl/test_core.py, nr2_fp16_fan)
SLOW_SUITES = {("b16_exec", "gemv"), ("b16_bus", "gemv"), ("b16_read", "gemv"), ("b16_rx", "gemv"),
               ("b16_lat", "gemv"), *((c, "random_more") for c in CONFIGS)}


def _pe_cases():
    """Per configuration and simulator, one run of the suites of ``make test`` (directed,
    random and, outside :data:`SLOW_SUITES`, GEMV: one simulator start and one model
    import), and one run per suite of :data:`SLOW_SUITES` (``slow``)."""
    out = []
    for p in sim_matrix(CONFIGS, verilator=set()):
        cfg_name, sim = p.values
        fast = "+".join(s for s in SUITES if (cfg_name, s) not in SLOW_SUITES)
        out.append(pytest.param(cfg_name, sim, fast, id=f"{cfg_name}-{sim}-{fast}", marks=p.marks))
        for suite in SUITES:
            if (cfg_name, suite) in SLOW_SUITES:
                out.append(pytest.param(cfg_name, sim, suite, id=f"{cfg_name}-{sim}-{suite}",
                                        marks=[*p.marks, pytest.mark.slow]))
    return out


@pytest.mark.parametrize("cfg_name,sim,suite", _pe_cases())
def test_pe_rtl_matches_model(cfg_name, sim, suite):
    from tests.benches.pe_top import PETop

    cfg, row, col = CONFIGS[cfg_name]
    seed = BASE_SEED + sorted(CONFIGS).index(cfg_name)
    params = {"row": row, "col": col, "suite": suite, "seed": seed,
              **({"parts": {s: SUITES[s] for s in suite.split("+")}} if "+" in suite else SUITES[suite])}
    print(f"PE ({row}, {col}) {cfg_name} suite={suite} seed={seed}")
    res = run_cocotb(PETop(cfg, row, col), f"pe_top_{cfg_name}", "tests.benches.tb_pe", sim=sim, config=cfg,
                     params=params, design_key=f"{cfg.to_json()} {row} {col}")
    stats = json.loads((res["log"].parent / "pe_stats.json").read_text())
    print(f"{sim} {cfg_name} {suite}: {stats['cycles']} cycles, "
          f"{stats['cycles_per_s']:.0f} simulated cycles/s")
