"""cocotb testbench of the ECP5 DSP multiplier (runs inside the simulator; see
tests/rtl/test_fp_mul_dsp.py).

The design is a :class:`test_fp_mul_dsp.MulDspPairs`: for each pair ``<tag>``, ports
``<tag>_a``, ``<tag>_b`` (In), ``<tag>_ref`` and ``<tag>_dsp`` (Out), all pairs under one
enable ``en`` (In) and the ``sync`` reset ``rst``. Parameters (:func:`sim.harness.tb_params`):

``vectors``  ``.npz`` with ``<tag>_a`` / ``<tag>_b`` (bit patterns) per pair
``pairs``    list of ``{"tag", "latency", "fmt": {"name", "exp_bits", "frac_bits"}}``
``seed``     the enable / reset pattern's seed (logged with any failure)

Every cycle (falling edge) each pair gets the next operand pair, ``en`` a random value
(high 3/4 of the time, in runs) and, at a few chosen cycles, ``rst`` a pulse. Checked
every cycle: ``<tag>_dsp == <tag>_ref`` (the MULT18X18D instance with its own registers
against the fabric multiplier, both frozen by ``en``), and, once ``latency`` enabled
edges have passed since the last reset, ``<tag>_dsp`` against the numpy golden product
of the operands sampled ``latency`` enabled edges earlier.
"""

from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from pe import fp_golden
from arch.fpformat import FPFormat
from sim.harness import tb_params

MAX_REPORT = 20


@cocotb.test()
async def mul_dsp_matches_fabric(dut):
    p = tb_params()
    data = np.load(p["vectors"])
    seed = p["seed"]
    rng = random.Random(seed)
    pairs = []
    for spec in p["pairs"]:
        f = spec["fmt"]
        fmt = FPFormat(f["name"], f["exp_bits"], f["frac_bits"])
        a = data[spec["tag"] + "_a"].astype(fmt.np_uint)
        b = data[spec["tag"] + "_b"].astype(fmt.np_uint)
        pairs.append({
            "tag": spec["tag"], "lat": int(spec["latency"]), "a": a.tolist(), "b": b.tolist(),
            "golden": fp_golden.mul_bits(fmt, a, b).tolist(),
            "ports": [getattr(dut, spec["tag"] + s) for s in ("_a", "_b", "_ref", "_dsp")],
        })
    n = min(len(q["a"]) for q in pairs)
    resets = {n // 3, (2 * n) // 3, (2 * n) // 3 + 1}
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.en.value = 0
    for q in pairs:
        q["ports"][0].value = 0
        q["ports"][1].value = 0
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0

    errors = []
    hist = []                # operand indices sampled at enabled edges since the last reset
    en, cycles_en, i = 1, 0, 0
    for t in range(n + 8):
        # outputs after the edges so far (the design's state is settled at the falling edge)
        for q in pairs:
            pa, pb, pref, pdsp = q["ports"]
            ref, dsp = int(pref.value), int(pdsp.value)
            if ref != dsp:
                errors.append(f"cycle {t} {q['tag']}: dsp {dsp:#x} != ref {ref:#x}")
            L = q["lat"]
            if len(hist) >= L:
                k = hist[-L]
                if dsp != q["golden"][k]:
                    errors.append(f"cycle {t} {q['tag']}: dsp {dsp:#x} != golden {q['golden'][k]:#x} "
                                  f"(a {q['a'][k]:#x}, b {q['b'][k]:#x})")
        if len(errors) > MAX_REPORT:
            break
        # inputs for the next rising edge
        rst = t in resets
        if rng.random() < 0.2:
            en = int(rng.random() < 0.75)
        dut.rst.value = int(rst)
        dut.en.value = en
        idx = min(i, n - 1)
        for q in pairs:
            q["ports"][0].value = q["a"][idx]
            q["ports"][1].value = q["b"][idx]
        await FallingEdge(dut.clk)
        if rst:
            hist = []
        elif en:
            hist.append(idx)
            cycles_en += 1
        i += 1
    assert not errors, f"seed {seed}: " + "\n".join(errors[:MAX_REPORT])
    assert cycles_en > n // 2, f"the enable pattern (seed {seed}) enabled only {cycles_en} of {n} cycles"
