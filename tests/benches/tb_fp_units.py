"""cocotb testbench of the FP units (runs inside the simulator; see tests/pe/test_fp_units.py).

The design is a :class:`tests.pe.test_fp_units.FPLanes`: groups of independent
:class:`~pe.fp_mul.FPMul` / :class:`~pe.fp_add.FPAdd` lanes with separate ports per lane,
``<group>_<op>_a<i>``, ``<group>_<op>_b<i>``, ``<group>_<op>_o<i>``. Parameters arrive
through :func:`sim.harness.tb_params`:

``vectors``  path of an ``.npz`` file; for each stream ``<group>_<op>_a`` and
             ``<group>_<op>_b`` (bit patterns) and optionally ``<group>_<op>_expected``
             (TestFloat results: any NaN then matches any NaN)
``streams``  list of ``{"group", "op", "lanes", "latency", "fmt": {"name",
             "exp_bits", "frac_bits"}, "source"}``; all streams run concurrently
``seed``     logged with any failure

Every lane of a stream gets a new operand pair every cycle; the output read ``latency``
cycles later is compared bit for bit with the numpy golden model (:mod:`pe.fp_golden`)
or the file's results. Inputs change on the falling edge and outputs are read on the
falling edge: the pair written at falling edge ``t`` is sampled by the next rising edge
and its result is on ``o`` at falling edge ``t + latency``.
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from pe import fp_golden
from arch.fpformat import FPFormat
from sim.harness import tb_params

MAX_REPORT = 20


def _reader(handle):
    """Fast integer read of a port (binary string -> int; X/Z raise ValueError)."""
    raw = getattr(handle, "_handle", None)
    if raw is not None and hasattr(raw, "get_signal_val_binstr"):
        get = raw.get_signal_val_binstr
        return lambda: int(get(), 2)
    return lambda: int(handle.value)


class _Stream:
    def __init__(self, dut, data, spec):
        self.group, self.op = spec["group"], spec["op"]
        f = spec["fmt"]
        self.fmt = FPFormat(f["name"], f["exp_bits"], f["frac_bits"])
        self.lanes, self.lat = int(spec["lanes"]), int(spec["latency"])
        key = f"{self.group}_{self.op}_"
        self.a = data[key + "a"].astype(self.fmt.np_uint)
        self.b = data[key + "b"].astype(self.fmt.np_uint)
        self.expected = data[key + "expected"].astype(self.fmt.np_uint) if key + "expected" in data.files else None
        self.n = len(self.a)
        self.cyc = -(-self.n // self.lanes)
        pad = np.zeros(self.cyc * self.lanes - self.n, np.uint64)
        self.A = np.concatenate([self.a.astype(np.uint64), pad]).reshape(self.cyc, self.lanes).tolist()
        self.B = np.concatenate([self.b.astype(np.uint64), pad]).reshape(self.cyc, self.lanes).tolist()
        self.ha = [getattr(dut, f"{key}a{i}") for i in range(self.lanes)]
        self.hb = [getattr(dut, f"{key}b{i}") for i in range(self.lanes)]
        self.ro = [_reader(getattr(dut, f"{key}o{i}")) for i in range(self.lanes)]
        self.out = [None] * self.cyc

    def step(self, c):
        k = c - self.lat                         # result of the pair written at cycle k
        if 0 <= k < self.cyc:
            try:
                self.out[k] = [r() for r in self.ro]
            except ValueError as e:              # X or Z on an output
                i = k * self.lanes
                raise AssertionError(
                    f"{self.fmt.name} {self.op} (group {self.group}): undefined output for pairs "
                    f"#{i}..#{i + self.lanes - 1} at cycle {c}: {e}") from None
        if c < self.cyc:
            for h, v in zip(self.ha, self.A[c]):
                h.value = v
            for h, v in zip(self.hb, self.B[c]):
                h.value = v

    def check(self, seed, path):
        """(report line, failure text or None)."""
        fmt = self.fmt
        got = np.array(self.out, dtype=np.uint64).reshape(-1)[:self.n].astype(fmt.np_uint)
        if self.expected is not None:            # TestFloat: any NaN matches any NaN
            exp = self.expected
            bad = (got != exp) & ~(fp_golden.is_nan_bits(fmt, got) & fp_golden.is_nan_bits(fmt, exp))
            src = "file"
        else:
            exp = (fp_golden.mul_bits if self.op == "mul" else fp_golden.add_bits)(fmt, self.a, self.b)
            bad = got != exp
            src = "golden model"
        idx = np.flatnonzero(bad)
        what = f"{fmt.name} {self.op} (group {self.group}, latency {self.lat}, {self.lanes} lanes)"
        line = f"{what}: {self.n} vectors, {len(idx)} mismatches against the {src}"
        if not len(idx):
            return line, None
        nd = (fmt.width + 3) // 4
        lines = [f"{what}: {len(idx)} of {self.n} results differ from the {src} (seed {seed}; vectors {path})"]
        for i in idx[:MAX_REPORT]:
            lines.append(f"  #{i} lane {i % self.lanes}: a={int(self.a[i]):0{nd}x} b={int(self.b[i]):0{nd}x} "
                         f"expected={int(exp[i]):0{nd}x} got={int(got[i]):0{nd}x}")
        return line, "\n".join(lines)


@cocotb.test()
async def fp_units(dut):
    p = tb_params()
    seed = p.get("seed")
    data = np.load(p["vectors"])
    streams = [_Stream(dut, data, s) for s in p["streams"]]
    assert streams, "no streams given"

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns", impl="gpi").start())
    dut.rst.value = 0
    total_cycles = max(s.cyc + s.lat for s in streams)
    fe = FallingEdge(dut.clk)
    t0 = time.perf_counter()
    for c in range(total_cycles):
        await fe
        for s in streams:
            s.step(c)
    dt = time.perf_counter() - t0
    n_all = sum(s.n for s in streams)
    dut._log.info(f"{n_all} vectors in {len(streams)} streams, {total_cycles} cycles: {dt:.2f} s, "
                  f"{total_cycles / dt:.0f} cycles/s, {n_all / dt:.0f} vectors/s; seed {seed}")
    failures = []
    for s in streams:
        line, fail = s.check(seed, p["vectors"])
        dut._log.info(line)
        if fail:
            dut._log.error(fail)
            failures.append(fail)
    assert not failures, "\n".join(failures)
