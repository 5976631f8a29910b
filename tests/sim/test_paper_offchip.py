"""Table 2's off-chip retry for CP (sim.paper.run_cell): a CP cell that does not fit the
chip runs with its panels streamed from DRAM, weights bit for bit, with the DRAM traffic
and the busiest core's DMA cycles."""

from __future__ import annotations

import pytest

from arch.config import PRESETS
from sim import paper


#: make test-all: the retry runs off chip in make test for minibatch GD
#: (tests/sim/test_paper.py::test_table2_cell_off_chip_with_dram), and CP with DRAM-streamed
#: panels is bit-exact on both engines in tests/sw/test_cp_dram.py
@pytest.mark.slow
def test_table2_cp_cell_off_chip_with_dram(monkeypatch):
    chip = PRESETS["chip-small"]
    monkeypatch.setattr(paper, "PRESETS", {"S": chip, "L": chip})
    monkeypatch.setattr(paper, "NETS", {"small": (64, 64, 64, 10), "large": (256, 256, 64, 10)})
    monkeypatch.setattr(paper, "dram_config", lambda name: chip.replace(spad_kib=4, dram_mib=1, ucode_depth=4096))
    r = paper.run_cell(paper.Cell("large", "S", "cp"))
    assert r["status"] == "ok" and r["offchip"].startswith("DRAM 1 MiB per core")
    assert any(v.endswith("DRAM") for v in r["weights"].values())
    assert r["dram_rd_beats"] > 0 and r["dram_wr_beats"] > 0
    assert r["dma_busy_cycles_per_core"] == r["dma_hidden_cycles_per_core"] + r["dma_exposed_cycles_per_core"]
