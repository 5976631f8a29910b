"""Core-level collectives on the ring at the reference design's configuration S (32 cores
of 4 x 4 PEs), binary16: measured cycles against the reference design's formulas, link
utilization, ring energy per beat, and the fast chip model's speed.

Every figure is from a run of the collective's programs on the fast chip model
(:class:`sim.chip_model.ChipModel`, ``engine="fast"``), which the test suite proves equal
to the per-cycle chip model and the chip RTL (``tests/sw/test_ring.py``,
``tests/rtl/test_chip.py``). Cycles are the RUN cycles of the slowest core (setup, halt,
start latency and drain included); the reference design's all-gather / reduce-scatter
cost is ``(n b - n b / c) / nr = (c - 1) m`` cycles for ``m`` beats per core.
"""

from __future__ import annotations

import time

import numpy as np

from sim.ring_programs import emit_broadcast
from sw.ring import emit_all_gather, emit_pass_along, emit_reduce, emit_reduce_scatter
from arch.config import ArchConfig
from sim.chip_model import ChipModel
from sim.power import report_from_counters


def _run(cfg, imgs):
    ch = ChipModel(cfg, "fast")
    rng = np.random.default_rng(5)
    for k in range(cfg.cores):
        ch.load(imgs[k], core=k)
        st = ch.cores[k].state
        st.mem_a[:] = cfg.fmt.from_float(rng.uniform(-1, 1, st.mem_a.shape))
        st.mem_b[:] = cfg.fmt.from_float(rng.uniform(-1, 1, st.mem_b.shape))
    t0 = time.perf_counter()
    r = ch.run()
    return r, time.perf_counter() - t0


def run() -> dict:
    rows = []
    for cores in (4, 32):
        cfg = ArchConfig(nr=4, cores=cores)
        c = cores
        for m in (8, 64, 256):
            cases = [
                ("pass-along", lambda: emit_pass_along(cfg, m, ("a", 0), ("b", 0)), m + 3, m),
                ("broadcast", lambda: emit_broadcast(cfg, m, 0, ("a", 0), ("b", 0)), m + 3 * (c - 1), m),
                ("all-gather", lambda: emit_all_gather(cfg, m, 0), (c - 1) * m + 3, (c - 1) * m),
                ("reduce-scatter", lambda: emit_reduce_scatter(cfg, m, 0),
                 (c - 1) * max(m + 3, cfg.fpu_latency + 5), (c - 1) * m),
                ("reduce", lambda: emit_reduce(cfg, m, 0, 0), m + (c - 1) * (cfg.fpu_latency + 2), m),
            ]
            for name, emit, slots, ref in cases:
                if name in ("all-gather", "reduce-scatter") and c * m > cfg.mem_a_words:
                    continue      # c segments per core must fit a bank
                r, wall = _run(cfg, emit())
                ctr = r.counters
                beats = ctr["ring_out_beats"]
                rep = report_from_counters(cfg, ctr, n_cores=c)
                rows.append({
                    "cores": c, "collective": name, "m (beats/core)": m,
                    "cycles": r.cycles, "collective slots": slots,
                    "reference (c-1)m": ref if name in ("all-gather", "reduce-scatter") else "",
                    "vs reference": f"{slots / ref:.3f}" if name in ("all-gather", "reduce-scatter") else "",
                    "ring beats": beats, "stall cycles": ctr["stall_cycles"],
                    "ring pJ/beat": round(rep.energy_pj["ring"] / beats, 2) if beats else "",
                    "fast-model rounds": r.rounds, "fast-model s": round(wall, 3),
                })
    return {"title": "Ring collectives (fast chip model; config S = 32 cores of 4 x 4 PEs, binary16)",
            "note": ("'cycles' = the RUN cycles measured on the fast chip model (the collective's program "
                     "with its setup, HALT, start-latency cycle and drain; what `caterpillar demo` prints); "
                     "'collective slots' = the collective's cost formula of docs/chip.md, from its first "
                     "send to its last take or add, without the program around it; 'reference (c-1)m' = "
                     "the reference design's cost in the same unit; 'vs reference' = collective slots / "
                     "reference."),
            "rows": rows}
