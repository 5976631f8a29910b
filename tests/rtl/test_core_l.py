"""The reference design's configuration-L core (16 x 16 PEs, binary16) on Verilator.

One session runs a GEMV (one axis not a multiple of 16) and a GEMM block of batch 16,
each as its own phase: the outputs equal the golden models (``sw/golden.py``) bit for
bit, and every performance counter of each kernel phase (all of
:func:`rtl.perf_counters.counter_names`) equals the fast model's. The RTL's output beats
are also checked against the core model by the testbench as they come.
"""

import numpy as np
import pytest

# the benchmark's configuration and shapes (one Verilator build for both): preset L's
# core alone (cores=1, no scratchpad), PE memories and microcode just large enough
from benchmarks.bench_core_l import CFG as CFG_L16
from benchmarks.bench_core_l import GEMM_SHAPE, GEMV_SHAPE
from arch.counters import counter_names
from tests.sw.test_kernels import Mem, _seed, gemm_case, gemv_case, run_cases


def l16_cases(cfg, rng):
    mem = Mem(cfg)
    return [gemv_case(cfg, rng, mem, *GEMV_SHAPE, trans=False, reduce="tree", x_layout="diag"),
            gemm_case(cfg, rng, mem, *GEMM_SHAPE)]


def counter_diff(cfg, rtl, fast) -> dict:
    """``{name: (rtl, fast)}`` for every counter that differs."""
    names = counter_names(cfg)
    assert sorted(rtl) == sorted(names) == sorted(fast)
    return {k: (rtl[k], fast[k]) for k in names if rtl[k] != fast[k]}


@pytest.mark.slow
@pytest.mark.verilator
def test_core_l16_gemv_gemm_rtl(require_simulator):
    require_simulator("verilator")
    seed = _seed()
    cfg = CFG_L16
    assert cfg.nr == 16 and cfg.fmt.name == "binary16"
    cases = l16_cases(cfg, np.random.default_rng(seed))
    fast = run_cases(cfg, cases, backend="fast")
    rtl = run_cases(cfg, cases, backend="rtl", sim="verilator", name="core-l16")
    for c, r, f in zip(cases, rtl, fast):
        diff = counter_diff(cfg, r.counters, f.counters)
        assert not diff, f"{c.name}: counters differ (rtl, fast): {diff}"
        print(f"{c.name}: {r.counters['cycles']} cycles, {len(r.counters)} counters equal")
    print(f"verilator session: {rtl[0].info}")
