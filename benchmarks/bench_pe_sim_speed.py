"""Simulated cycles per second of the PE testbench (RTL compared with the model every
cycle) on Icarus and Verilator, for the GEMV and random-program suites."""

from __future__ import annotations

import json

from arch.config import ArchConfig
from sim.harness import SimulatorMissing, find_simulator, run_cocotb
from tests.benches.pe_top import PETop  # test infrastructure, shared with tests/pe/test_pe.py


def run() -> dict:
    cfg = ArchConfig(nr=4, mem_a_words=256, mem_b_words=256)
    rows = []
    for sim in ("icarus", "verilator"):
        try:
            find_simulator(sim)
        except SimulatorMissing as e:
            rows.append({"simulator": sim, "suite": "-", "cycles": 0, "cycles/s": f"missing: {e}"})
            continue
        for suite, extra in (("gemv", {}), ("random", {"n_programs": 10, "cycles": 1000})):
            res = run_cocotb(PETop(cfg, 1, 2), "pe_top_bench", "tests.benches.tb_pe", sim=sim, config=cfg,
                             params={"row": 1, "col": 2, "suite": suite, "seed": 7, **extra})
            stats = json.loads((res["log"].parent / "pe_stats.json").read_text())
            rows.append({"simulator": sim, "suite": suite, "cycles": stats.get("cycles"),
                         "cycles/s": round(stats.get("cycles_per_s", 0))})
    return {"title": "PE testbench speed (RTL vs model compared every cycle)",
            "note": "binary16 PE of a 4x4 core, 256-word banks; Python drives and checks every cycle, "
                    "so the testbench, not the simulator, bounds Verilator's speed.",
            "rows": rows}
