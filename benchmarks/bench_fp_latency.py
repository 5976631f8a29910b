"""FP unit latency and throughput, measured on the RTL (Amaranth simulator), per format."""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from pe.fp_add import FPAdd
from pe.fp_golden import add_bits, mul_bits
from pe.fp_mul import FPMul
from arch.fpformat import FORMATS
from arch.config import ArchConfig

N_OPS = 16


def measure(unit_cls, golden, fmt, latency) -> tuple[int, float]:
    """Return (latency, ops per cycle): feed N_OPS distinct operations back to back and
    record in which cycle each result appears at ``o``."""
    dut = unit_cls(fmt, latency=latency)
    rng = np.random.default_rng(1)
    a = fmt.from_float(rng.uniform(-4, 4, N_OPS))
    b = fmt.from_float(rng.uniform(-4, 4, N_OPS))
    want = golden(fmt, a, b)
    outs = []

    async def bench(ctx):
        for cyc in range(N_OPS + 16):
            if cyc < N_OPS:
                ctx.set(dut.a, int(a[cyc]))
                ctx.set(dut.b, int(b[cyc]))
            outs.append(ctx.get(dut.o))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    for lat in range(1, 16):
        if all(outs[i + lat] == int(want[i]) for i in range(N_OPS)):
            return lat, N_OPS / N_OPS  # every cycle produced the next result
    return -1, 0.0


def run() -> dict:
    rows = []
    cfg = ArchConfig()
    for fmt in FORMATS.values():
        for unit, cls, gold, lat in (("mul", FPMul, mul_bits, cfg.mul_latency),
                                     ("add", FPAdd, add_bits, cfg.add_latency)):
            got, thr = measure(cls, gold, fmt, lat)
            rows.append({"format": fmt.name, "unit": unit, "configured latency": lat,
                         "measured latency (cycles)": got, "throughput (ops/cycle)": thr})
    return {"title": "FP unit latencies (default configuration)",
            "note": f"Measured by feeding {N_OPS} back-to-back operations and finding the cycle offset at "
                    f"which every result appears. MAC issue-to-readable latency = 2 + mul + add = "
                    f"{cfg.fpu_latency} cycles; accumulator reuse distance = add + 1 = {cfg.acc_reuse_distance}.",
            "rows": rows}
