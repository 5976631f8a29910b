# amaranth: UnusedElaboratable=no
# (test_mul_dsp_parameters builds units only to check their parameters)
"""The multiplier as an ECP5 MULT18X18D with the block's own registers
(``FPMul(dsp="ecp5")``, what a PE elaborated for an ECP5 board uses; pe/fp_mul.py).

* RTL (cocotb, ``tb_fp_mul_dsp.py``): the instance, simulated with the behavioural
  model ``sim/models/MULT18X18D.v``, beside the fabric multiplier, both under one random
  enable with resets in between; equal every cycle and equal to the numpy golden model.
  Latencies 2-3 put the product register in the block (its output register), 4 and more
  the significands' registers (its input registers; the product register is a fabric
  flip-flop).
* Elaboration: the PE chooses the instance on an ECP5 platform only (a core's netlist,
  as ``caterpillar build`` elaborates it). That a core's PEs give their DSPs their own
  enables is simulated in test_core.py (the freeze test with ``board``).
* Parameter checks: unknown ``dsp`` values and formats wider than one MULT18X18D.
"""

from __future__ import annotations

import os
import re

import pytest
from amaranth.hdl import EnableInserter, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tests.simulators import REPLAY_SIM_PARAMS
from tests.fp_vectors import gen_operands, new_seed, save_vectors
from pe.fp_mul import FPMul, mul_dsp
from arch.fpformat import BFLOAT16, BINARY16, BINARY32, get_format
from sim.harness import MODELS, run_cocotb

#: (tag, format, latency) of the pairs in the one design
PAIRS = (("h4", BINARY16, 4), ("h2", BINARY16, 2), ("bf4", BFLOAT16, 4), ("bf3", BFLOAT16, 3),
         ("h6", BINARY16, 6))
N_VEC = int(os.environ.get("FP_DSP_NVEC", "20000"))


class MulDspPairs(wiring.Component):
    """Test wrapper: per ``(tag, fmt, latency)`` of ``pairs`` an ``FPMul(fmt, latency)``
    (``<tag>_ref``) and an ``FPMul(fmt, latency, dsp="ecp5")`` (``<tag>_dsp``) on the same
    operands ``<tag>_a`` / ``<tag>_b``, all under ``EnableInserter(en)``, the DSP's clock
    enable wired to ``en`` as a PE wires it."""

    def __init__(self, pairs=PAIRS):
        self.pairs = tuple(pairs)
        self.design_key = repr([(t, f.name, lat) for t, f, lat in self.pairs])
        sig = {"en": In(1)}
        for tag, fmt, _ in self.pairs:
            sig.update({f"{tag}_a": In(fmt.width), f"{tag}_b": In(fmt.width),
                        f"{tag}_ref": Out(fmt.width), f"{tag}_dsp": Out(fmt.width)})
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        for tag, fmt, lat in self.pairs:
            ref, dsp = FPMul(fmt, lat), FPMul(fmt, lat, dsp="ecp5")
            m.submodules[f"{tag}_ref"] = EnableInserter(self.en)(ref)
            m.submodules[f"{tag}_dsp"] = EnableInserter(self.en)(dsp)
            a, b = getattr(self, f"{tag}_a"), getattr(self, f"{tag}_b")
            m.d.comb += [ref.a.eq(a), ref.b.eq(b), dsp.a.eq(a), dsp.b.eq(b), dsp.ce.eq(self.en),
                         getattr(self, f"{tag}_ref").eq(ref.o), getattr(self, f"{tag}_dsp").eq(dsp.o)]
        return m


@pytest.mark.parametrize("sim", REPLAY_SIM_PARAMS)
def test_mul_dsp_matches_fabric_and_golden(sim):
    seed = new_seed()
    print(f"[fp-dsp] seed {seed} (replay with FP_SEED={seed})")
    arrays = {}
    for tag, fmt, _ in PAIRS:
        arrays[f"{tag}_a"], arrays[f"{tag}_b"] = gen_operands(fmt, "mul", N_VEC, seed)
    path = save_vectors(f"dsp-{sim}", arrays)
    params = {"vectors": str(path), "seed": seed,
              "pairs": [{"tag": t, "latency": lat, "fmt": {"name": f.name, "exp_bits": f.exp_bits,
                                                           "frac_bits": f.frac_bits}} for t, f, lat in PAIRS]}
    try:
        top = MulDspPairs()
        run_cocotb(top, "mul_dsp_pairs", "tests.benches.tb_fp_mul_dsp", sim=sim, params=params,
                   design_key=top.design_key, extra_sources=[MODELS / "MULT18X18D.v"])
    finally:
        path.unlink(missing_ok=True)


def test_mul_dsp_parameters():
    with pytest.raises(ValueError, match="dsp must be one of"):
        FPMul(BINARY16, 4, dsp="ice40")
    with pytest.raises(ValueError, match="at most 18 bits.*binary32 has 24"):
        FPMul(BINARY32, 4, dsp="ecp5")
    u = FPMul(BINARY16, 4, dsp="ecp5")
    assert u.dsp == "ecp5" and len(u.ce) == 1 and u.ce.init == 1
    assert not hasattr(FPMul(BINARY16, 4), "ce")


def test_mul_dsp_choice():
    """The PE's choice: the instance on an ECP5 platform when the significand fits."""
    from rtl.fpga import get_platform

    ecp5 = get_platform("ulx3s-85f")
    assert mul_dsp(ecp5, BINARY16) == "ecp5" and mul_dsp(ecp5, get_format("bfloat16")) == "ecp5"
    assert mul_dsp(ecp5, BINARY32) is None
    assert mul_dsp(None, BINARY16) is None


def test_core_dsps_hold_the_multiplier_registers():
    """A 2 x 2 ``fpga``-preset core elaborated for an ECP5 board (as ``caterpillar build``
    does): one MULT18X18D per PE holding the operand registers (input registers on the
    clock; the product register is a fabric flip-flop behind it), its clock enable a port
    of the multiplier; elaborated without a platform, no instance. (That the enables are the
    PEs' own is checked by simulation: test_core's freeze test with ``board``.)"""
    from amaranth.back import rtlil

    from arch.config import PRESETS
    from rtl.core import Core
    from rtl.fpga import get_platform

    cfg = PRESETS["fpga"].replace(nr=2, mem_a_words=64, mem_b_words=64, ucode_depth=128)
    text = rtlil.convert(Core(cfg), name="core", platform=get_platform("ulx3s-85f"), emit_src=False)
    cells = re.findall(r"cell \\MULT18X18D \S+\n(.*?)\n\s*end\n", text, re.S)
    assert len(cells) == cfg.nr * cfg.nr, f"{len(cells)} MULT18X18D cells"
    for body in cells:
        for reg, clk in (("INPUTA", "CLK0"), ("INPUTB", "CLK0"), ("OUTPUT", "NONE"), ("PIPELINE", "NONE")):
            assert f'parameter \\REG_{reg}_CLK "{clk}"' in body, body[:600]
        assert "connect \\CE0 \\ce [0]" in body and "connect \\CLK0 \\clk [0]" in body
    assert "MULT18X18D" not in rtlil.convert(Core(cfg), name="core", emit_src=False)
