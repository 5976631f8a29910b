# amaranth: UnusedElaboratable=no
# (test_latency_bounds builds units only to check their parameters)
"""RTL tests of the FP multiplier and adder (cocotb through sim.harness.run_cocotb).

The design under test is an :class:`FPLanes`: groups of independent FPMul and FPAdd
units with separate ports per lane, so the testbench (``tb_fp_units.py``) feeds
``lanes`` operand pairs per op per cycle; every unit gets a new pair every cycle.
Operands are generated here (``fp_vectors.gen_operands``, seed logged), written
atomically to an ``.npz`` file in ``build/sim/fp_vectors`` and read by the simulator
process, which checks every result bit for bit against the numpy golden model (or the
results of a TestFloat file).

All standard configurations live in ONE design (:data:`STANDARD_GROUPS`), so Verilator
compiles it once (~30 s of its build is fixed C++ work) and each test drives only its
group. Converting that design to Verilog takes seconds of Python, so its Verilog is
reused (``run_cocotb``'s ``design_key``: the groups).

Environment:

* ``FP_NVEC``: vectors per op for the main tests (default 40000);
* ``FP_SEED``: replay a seed;
* ``FP_VECTORS=<file> FP_OP=mul|add FP_FMT=binary16|bfloat16|binary32``: run a Berkeley
  TestFloat ``testfloat_gen`` file through the RTL (``test_testfloat_file``); ``SIM``
  picks the simulator for it (default icarus).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tests.fp_vectors import gen_operands, new_seed, read_testfloat, sample_path, save_vectors
from pe.fp_add import FPAdd
from pe.fp_mul import FPMul
from arch.fpformat import BFLOAT16, BINARY16, BINARY32, FPFormat, get_format
from sim.harness import run_cocotb

FORMATS = ("binary16", "bfloat16", "binary32")
SIMS = ("icarus", "verilator")
OPS = ("mul", "add")
N_VEC = int(os.environ.get("FP_NVEC", "40000"))


@dataclass(frozen=True)
class Group:
    """``lanes`` FPMul + FPAdd units of one format and latency pair."""

    tag: str
    fmt: FPFormat
    lanes: int = 8
    mul_latency: int = 2
    add_latency: int = 3

    def latency(self, op):
        return self.mul_latency if op == "mul" else self.add_latency


STANDARD_GROUPS = (
    Group("h", BINARY16), Group("bf", BFLOAT16), Group("s", BINARY32),
    Group("hl", BINARY16, 2, 3, 5), Group("bfl", BFLOAT16, 2, 4, 4), Group("sl", BINARY32, 2, 5, 6),
)
STANDARD = {(g.fmt.name, g.mul_latency, g.add_latency): g for g in STANDARD_GROUPS}


class FPLanes(wiring.Component):
    """Test wrapper: groups of independent FPMul / FPAdd lanes, separate ports per lane.

    For each :class:`Group` ``g``, op in ``("mul", "add")`` and ``i < g.lanes``: ports
    ``<g.tag>_<op>_a<i>``, ``<g.tag>_<op>_b<i>`` (In) and ``<g.tag>_<op>_o<i>`` (Out),
    wired straight to one unit (no extra registers).
    """

    def __init__(self, groups):
        self.groups = tuple(groups)
        self.design_key = repr(self.groups)   # the design (run_cocotb's Verilog reuse)
        sig = {}
        for g in self.groups:
            for op in OPS:
                for i in range(g.lanes):
                    sig[f"{g.tag}_{op}_a{i}"] = In(g.fmt.width)
                    sig[f"{g.tag}_{op}_b{i}"] = In(g.fmt.width)
                    sig[f"{g.tag}_{op}_o{i}"] = Out(g.fmt.width)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        for g in self.groups:
            for op in OPS:
                for i in range(g.lanes):
                    unit = FPMul(g.fmt, g.mul_latency) if op == "mul" else FPAdd(g.fmt, g.add_latency)
                    m.submodules[f"{g.tag}_{op}{i}"] = unit
                    p = f"{g.tag}_{op}_"
                    m.d.comb += [unit.a.eq(getattr(self, p + f"a{i}")), unit.b.eq(getattr(self, p + f"b{i}")),
                                 getattr(self, p + f"o{i}").eq(unit.o)]
        return m


def run_fp(sim: str, jobs: dict, *, groups=STANDARD_GROUPS, seed=None, tag: str = "fp") -> dict:
    """Run vectors through groups of ``FPLanes(groups)``, all streams concurrently.

    ``jobs`` maps a :class:`Group` to ``{"mul": (a, b[, expected]), "add": ...}``.
    """
    groups = tuple(groups)
    arrays, streams = {}, []
    for g, ops in jobs.items():
        assert g in groups, g
        for op, vec in ops.items():
            key = f"{g.tag}_{op}_"
            arrays[key + "a"], arrays[key + "b"] = vec[0], vec[1]
            if len(vec) > 2:
                arrays[key + "expected"] = vec[2]
            streams.append({"group": g.tag, "op": op, "lanes": g.lanes, "latency": g.latency(op),
                            "fmt": {"name": g.fmt.name, "exp_bits": g.fmt.exp_bits, "frac_bits": g.fmt.frac_bits}})
    path = save_vectors(f"{tag}-{sim}", arrays)
    params = {"vectors": str(path), "streams": streams, "seed": seed}
    t0 = time.perf_counter()
    desc = "; ".join(f"{s['fmt']['name']} {s['op']} lat {s['latency']} x{s['lanes']}: "
                     f"{len(arrays[s['group'] + '_' + s['op'] + '_a'])}" for s in streams)
    try:
        lanes = FPLanes(groups)
        res = run_cocotb(lanes, "fp_lanes", "tests.benches.tb_fp_units", sim=sim, params=params, design_key=lanes.design_key)
    finally:
        print(f"[fp] {sim} [{desc}] seed={seed}: {time.perf_counter() - t0:.1f} s (build + sim)")
    path.unlink(missing_ok=True)
    return res


def _random_jobs(group, n, seed):
    return {group: {op: gen_operands(group.fmt, op, n, seed) for op in OPS}}


def _seed():
    seed = new_seed()
    print(f"[fp] seed {seed} (replay with FP_SEED={seed})")
    return seed


# -- parameter checks (no simulator) ------------------------------------------------------------
def test_latency_bounds():
    with pytest.raises(ValueError):
        FPMul(BINARY16, 1)
    with pytest.raises(ValueError):
        FPAdd(BINARY16, 2)
    with pytest.raises(ValueError):
        FPMul(BINARY16, True)
    assert FPMul("bf16").latency == 2 and FPAdd("fp32").latency == 3
    u = FPAdd(BINARY16, 5)
    assert len(u.a) == len(u.b) == len(u.o) == 16


@pytest.mark.parametrize("fmt_name,latency", [("binary16", 3), ("binary16", 6), ("binary16", 7),
                                              ("binary16", 9), ("bfloat16", 5), ("binary32", 5)])
def test_add_o_next(fmt_name, latency):
    """``o_next`` is the sum one cycle before ``o`` (the D input of ``o``'s register):
    during cycle ``t + latency - 1`` it is ``a + b`` of cycle ``t`` (golden model), with
    and without the adder's plain output delay registers (latency >= 7); ``o_next_nan``
    / ``o_next_pos`` say whether that sum is a NaN / greater than zero (from its bits)."""
    from amaranth.sim import Simulator

    from pe.fp_golden import add_bits
    fmt = get_format(fmt_name)
    seed = _seed()
    dut = FPAdd(fmt, latency)
    a, b = gen_operands(fmt, "add", 400, seed)
    want = add_bits(fmt, a, b)
    got = {"o": [], "o_next": [], "o_next_nan": [], "o_next_pos": []}

    async def tb(ctx):
        for x, y in zip(a, b):
            ctx.set(dut.a, int(x))
            ctx.set(dut.b, int(y))
            for port in got:
                got[port].append(ctx.get(getattr(dut, port)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    w, F = fmt.width, fmt.frac_bits
    def is_nan(x):
        return (x >> F) & fmt.exp_max == fmt.exp_max and x & ((1 << F) - 1) != 0
    classes = {"o_next_nan": is_nan,
               "o_next_pos": lambda x: not x >> (w - 1) and x != 0 and not is_nan(x)}
    seen = {port: set() for port in classes}
    for port, lat in (("o", latency), ("o_next", latency - 1)):
        for t in range(len(a) - lat):
            assert got[port][t + lat] == want[t], \
                f"{port}, operands of cycle {t} (seed {seed}): {got[port][t + lat]:#x}, expected {int(want[t]):#x}"
    for port, cls in classes.items():
        for t in range(len(a) - latency + 1):
            x = int(want[t])
            assert got[port][t + latency - 1] == cls(x), f"{port} of {x:#x} (seed {seed})"
            seen[port].add(cls(x))
    assert all(v == {False, True} for v in seen.values()), seen    # both classes were met


# -- main random tests ---------------------------------------------------------------------------
#: every format on Icarus; on Verilator binary16 in ``make test``, the others ``slow``
#: (the same units, whose Verilator build binary16 checks)
# Verilator slow: the PE-level Verilator run (tests/pe/test_pe.py, b16_bus) builds the
# same units, and the Icarus cases check their results here
RANDOM_CASES = [pytest.param(sim, f, marks=[pytest.mark.verilator, pytest.mark.slow] if sim == "verilator" else [])
                for sim in SIMS for f in FORMATS]


@pytest.mark.parametrize("sim,fmt_name", RANDOM_CASES)
def test_fp_units_random(sim, fmt_name):
    """N_VEC biased random vectors per op, a new pair every cycle in every lane."""
    seed = _seed()
    run_fp(sim, _random_jobs(STANDARD[fmt_name, 2, 3], N_VEC, seed), seed=seed, tag="rand")


LATENCY_CASES = [pytest.param(sim, g.fmt.name, g.mul_latency, g.add_latency,
                              marks=[pytest.mark.verilator, pytest.mark.slow] if sim == "verilator" else [])
                 for sim in SIMS for g in STANDARD_GROUPS if (g.mul_latency, g.add_latency) != (2, 3)]
LATENCY_CASES += [pytest.param("icarus", "binary16", 8, 8, marks=pytest.mark.slow),   # deeper than 3-5: test-all
                  ("icarus", "bfloat16", 2, 7), ("icarus", "binary32", 6, 3)]


@pytest.mark.parametrize("sim,fmt_name,mul_latency,add_latency", LATENCY_CASES)
def test_fp_units_latency(sim, fmt_name, mul_latency, add_latency):
    """Deeper pipelines: same results, ``latency`` cycles later, one op per cycle."""
    seed = _seed()
    n = max(1000, N_VEC // 10)
    g = STANDARD.get((fmt_name, mul_latency, add_latency))
    if g is not None:
        run_fp(sim, _random_jobs(g, n, seed), seed=seed, tag="lat")
    else:
        g = Group("x", get_format(fmt_name), 2, mul_latency, add_latency)
        run_fp(sim, _random_jobs(g, n, seed), groups=(g,), seed=seed, tag="lat")


CUSTOM = [  # (exp_bits, frac_bits, vectors per op or None for exhaustive)
    (2, 1, None), (3, 2, None), (4, 3, None), (6, 4, 20000), (11, 52, 20000),
]


def test_fp_units_custom_formats(require_simulator):
    """Other FPFormats against the exact integer reference: exhaustive (every operand
    pair) for the 4-, 6- and 8-bit formats, biased random for 11- and 64-bit ones."""
    require_simulator("icarus")
    seed = _seed()
    groups, jobs = [], {}
    for E, F, n in CUSTOM:
        fmt = FPFormat(f"e{E}m{F}", E, F)
        g = Group(f"c{E}m{F}", fmt, 2)
        groups.append(g)
        if n is None:
            x = np.arange(1 << fmt.width, dtype=fmt.np_uint)
            a, b = (v.reshape(-1).astype(fmt.np_uint) for v in np.meshgrid(x, x))
            jobs[g] = {op: (a, b) for op in OPS}
        else:
            jobs.update(_random_jobs(g, n, seed))
    run_fp("icarus", jobs, groups=groups, seed=seed, tag="custom")


# -- TestFloat vectors ------------------------------------------------------------------------------
def _testfloat(path, fmt):
    a, b, r, _flags = read_testfloat(path, fmt)
    assert len(a), f"{path} holds no vectors"
    return a, b, r


def test_testfloat_samples(require_simulator):
    """The SoftFloat-generated sample files in tests/data (TestFloat format) through the
    RTL on Icarus, all formats and ops at once, results compared with the files."""
    require_simulator("icarus")
    jobs = {}
    for name in FORMATS:
        g = STANDARD[name, 2, 3]
        jobs[g] = {op: _testfloat(sample_path(name, op), g.fmt) for op in OPS}
    run_fp("icarus", jobs, tag="tfs")


def test_testfloat_file(require_simulator):
    """``FP_VECTORS=<testfloat_gen output> FP_OP=mul|add FP_FMT=<format>``: run it."""
    path = os.environ.get("FP_VECTORS")
    if not path:
        pytest.skip("set FP_VECTORS=<file> FP_OP=mul|add FP_FMT=binary16|bfloat16|binary32")
    op = os.environ.get("FP_OP", "").strip().lower()
    if op not in OPS:
        pytest.fail(f"FP_OP must be mul or add, got {op!r}")
    fmt = get_format(os.environ.get("FP_FMT", "binary16"))
    sim = os.environ.get("SIM", "icarus").strip().lower() or "icarus"
    require_simulator(sim)
    g = STANDARD[fmt.name, 2, 3]
    run_fp(sim, {g: {op: _testfloat(path, fmt)}}, tag="tf")


def test_testbench_reports_mismatches(require_simulator):
    """The checker is not vacuous: corrupted expected results must fail, with operands."""
    require_simulator("icarus")
    g = STANDARD["binary16", 2, 3]
    a, b, r = (x[:200] for x in _testfloat(sample_path("binary16", "mul"), g.fmt))
    r = r.copy()
    r[[3, 77]] ^= 1
    with pytest.raises(AssertionError, match="results differ"):
        run_fp("icarus", {g: {"mul": (a, b, r)}}, tag="neg")
