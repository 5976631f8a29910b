"""Sequencer RTL vs SequencerModel under cocotb, on Icarus and Verilator.

One simulator run per (simulator, configuration) runs ``tests/benches/tb_sequencer.py``: directed
programs (nested loops ending on one instruction, single-instruction bodies, AGU walks,
jumps, origins at both ends of the microcode, restart while running) and random
loop-nest programs from a seeded generator (``tests/benches/seq_programs.py``; every third one
with mutated control words), each under a different random stall pattern; the issued
``(pc, uop, hin, hout, hlast, halted)`` stream is compared cycle by cycle.

The seed is printed; override it with ``SEQ_SEED=<n>``, the number of random programs
per run with ``SEQ_RANDOM_PROGRAMS=<n>``.
"""

from __future__ import annotations

import os

import pytest

from arch.config import ArchConfig
from tests.simulators import sim_matrix
from sim.harness import run_cocotb

CONFIGS = {
    "default": ArchConfig(),
    "l3a2d64": ArchConfig(n_loops=3, n_agus=2, ucode_depth=64, nr=2, mem_a_words=256,
                          mem_b_words=512, loop_bits=12),
    # the fetch stage (head instruction in a register, RAM one instruction ahead)
    "fetch": ArchConfig(fetch_stage=True),
    "fetch_l3a2d64": ArchConfig(n_loops=3, n_agus=2, ucode_depth=64, nr=2, mem_a_words=256,
                                mem_b_words=512, loop_bits=12, fetch_stage=True),
    # the address stage (the RAM reads a register: the scan runs two instructions ahead)
    "addr": ArchConfig(fetch_stage=True, addr_stage=True),
    "addr_l3a2d64": ArchConfig(n_loops=3, n_agus=2, ucode_depth=64, nr=2, mem_a_words=256,
                               mem_b_words=512, loop_bits=12, fetch_stage=True, addr_stage=True),
}
N_RANDOM = int(os.environ.get("SEQ_RANDOM_PROGRAMS", "50"))
BASE_SEED = int(os.environ.get("SEQ_SEED", "1"))


@pytest.mark.parametrize("cfg_name,sim", sim_matrix(CONFIGS, verilator={"fetch_l3a2d64"}))
def test_sequencer_rtl_matches_model(cfg_name, sim):
    from rtl.sequencer import Sequencer

    cfg = CONFIGS[cfg_name]
    seed = BASE_SEED + list(CONFIGS).index(cfg_name) + (100 if sim == "verilator" else 0)
    print(f"sequencer {cfg_name} on {sim}: seed={seed}, {N_RANDOM} random programs")
    run_cocotb(Sequencer(cfg), f"sequencer_{cfg_name}", "tests.benches.tb_sequencer", sim=sim, config=cfg, design_key=cfg.to_json(),
               params={"seed": seed, "n_random": N_RANDOM, "chaos_every": 3})
