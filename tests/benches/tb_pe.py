"""cocotb testbench: the PE RTL (tests/benches/pe_top.PETop) against pe.pe_model.PEModel.

Parameters (``sim.harness.tb_params``): ``row``, ``col`` (the PE's position), ``suite``
(``directed`` | ``random`` | ``gemv``, or several joined by ``+``, run back to back, each
with its parameters in ``parts``), ``seed``, ``n_programs``, ``first`` (the first random
program's index), ``cycles``.

The program of the suite runs first on the model (precomputing the expected outputs of
every cycle), followed by :func:`pe_programs.state_dump`, which drives every register,
SRAM word, AR and stride onto the buses. The RTL then runs the same micro-op words and
external bus inputs; every cycle its ``row_out``/``row_oe``/``col_out``/``col_oe`` and
every event field must equal the model's. A mismatch reports cycle, program, field,
expected, got, the seed and the micro-ops in flight (issue, operand and, with
``cfg.exec_stage``, execute stage). Speed (simulated cycles per second of the compare
loop) is written to ``pe_stats.json`` in the test directory.
"""

from __future__ import annotations

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from tests.benches import pe_programs as pp
from arch.microop import MicroOp
from pe.pe_model import PEEvents, PEModel
from tests.benches.pe_top import obs_fields
from sim.harness import tb_config, tb_params


def suite_programs(cfg, prm) -> list[pp.Program]:
    row, col, suite = prm["row"], prm["col"], prm["suite"]
    if "+" in suite:        # several suites in one run, each with its own parameters (``parts``)
        return [p for part in suite.split("+")
                for p in suite_programs(cfg, {**prm, **prm.get("parts", {}).get(part, {}), "suite": part})]
    seed = int(prm.get("seed", 1))
    if suite == "directed":
        return pp.directed_programs(cfg, row, col)
    if suite == "random":
        n, cycles, first = int(prm.get("n_programs", 20)), int(prm.get("cycles", 300)), int(prm.get("first", 0))
        return [pp.random_program(cfg, row, col, seed * 1000 + k, n_cycles=cycles) for k in range(first, first + n)]
    if suite == "gemv":
        ra = cfg.acc_reuse_distance
        out = []
        for k, L in enumerate(sorted({ra, min(ra + 3, cfg.n_regs - 1)})):
            J = min(16, cfg.mem_a_words // L, cfg.mem_b_words)
            out.append(pp.gemv_program(cfg, row, col, L=L, J=J, seed=seed + k))
        return out
    raise ValueError(f"unknown suite {suite!r}")


def pack_obs(cfg, drv, ev: PEEvents) -> int:
    w = cfg.fmt.width
    ro, roe, co, coe = drv
    return ro | roe << w | co << (w + 1) | coe << (2 * w + 1) | ev.pack() << (2 * w + 2)


def unpack_obs(cfg, word: int) -> dict:
    out = {}
    for name, off, width in obs_fields(cfg):
        v = (word >> off) & ((1 << width) - 1)
        if name == "ev":
            out.update(PEEvents.unpack(v)._asdict())
        else:
            out[name] = v
    return out


@cocotb.test()
async def pe_matches_model(dut):
    cfg = tb_config()
    prm = tb_params()
    row, col, seed = prm["row"], prm["col"], prm.get("seed")
    log = dut._log
    log.info("PE (%d, %d) suite=%s seed=%s config=%s", row, col, prm["suite"], seed, cfg.to_json())

    t_build = time.perf_counter()
    progs = suite_programs(cfg, prm)
    main = pp.concat(progs, prm["suite"])
    model = PEModel(cfg, row, col)
    trace = model.run(main.uops, main.row_ins, main.col_ins)
    dump = pp.state_dump(cfg, row, col, model.ars())
    trace += model.run(dump.uops, dump.row_ins, dump.col_ins)
    whole = pp.concat([main, dump])
    expected = [pack_obs(cfg, drv, ev) for drv, ev in trace]
    bounds, start = [], 0
    for p in progs + [dump]:
        bounds.append((start, start + len(p), p.name))
        start += len(p)
    checks: dict[int, list] = {}
    for cyc, name, val in whole.expect:
        checks.setdefault(cyc, []).append((name, val))
    for p in progs:
        if "utilization" in p.meta:
            log.info("%s: %d FMAs in %d cycles (incl. drain): MAC utilization %.3f", p.name,
                     p.meta["fma_cycles"], p.meta["loop_cycles"], p.meta["utilization"])
    log.info("%d programs, %d cycles (with the state dump), model ran in %.2f s",
             len(progs), len(whole), time.perf_counter() - t_build)

    def where(cyc):
        for a, b, name in bounds:
            if a <= cyc < b:
                return f"{name} +{cyc - a}"
        return "?"

    errors = []

    def uop_at(cyc):
        return MicroOp.decode(whole.uops[cyc], *cfg.uop_key) if cyc >= 0 else None

    def report(cyc, field, want, got):
        # the micro-ops in flight: issued now, in the operand stage and, with the execute
        # stage, in the execute stage (issued exec_delay cycles before the operand stage's)
        stages = f"issued={uop_at(cyc)!r} operand-stage={uop_at(cyc - 1)!r}"
        if cfg.exec_delay:
            stages += f" execute-stage={uop_at(cyc - 1 - cfg.exec_delay)!r}"
        errors.append(f"cycle {cyc} ({where(cyc)}): {field}: expected {want:#x}, got {got:#x} "
                      f"[seed={seed}] {stages}")

    uop_h, row_h, col_h, obs_h = dut.uop, dut.ext_row_in, dut.ext_col_in, dut.obs
    dut.rst.value = 0
    uop_h.value = 0
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start(start_high=False))

    # with the distribution stage (tests/benches/pe_top.PETop.lag) the PE issues a micro-op word
    # a cycle after it is written: its outputs of model cycle ``cyc`` come then
    lag = int(cfg.dist_stage)
    n = len(whole)
    t0 = time.perf_counter()
    for step in range(n + lag):
        if step < n:
            uop_h.value = whole.uops[step]
            row_h.value = whole.row_ins[step]
            col_h.value = whole.col_ins[step]
        else:
            uop_h.value = 0
        cyc = step - lag
        if cyc < 0:
            await RisingEdge(dut.clk)
            continue
        await ReadOnly()
        got = obs_h.value.to_unsigned()
        if got != expected[cyc]:
            g, e = unpack_obs(cfg, got), unpack_obs(cfg, expected[cyc])
            for k in e:
                if g[k] != e[k]:
                    report(cyc, k, e[k], g[k])
        if cyc in checks:
            g = unpack_obs(cfg, got)
            for name, val in checks[cyc]:
                if g[name] != val:
                    report(cyc, f"{name} (hand-computed expectation)", val, g[name])
        if len(errors) >= 20:
            break
        await RisingEdge(dut.clk)
    dt = time.perf_counter() - t0
    stats = {"cycles": cyc + 1, "seconds": dt, "cycles_per_s": (cyc + 1) / dt, "seed": seed,
             "suite": prm["suite"]}
    with open("pe_stats.json", "w") as fh:
        json.dump(stats, fh)
    log.info("compared %d cycles in %.2f s: %.0f cycles/s", cyc + 1, dt, (cyc + 1) / dt)
    assert not errors, f"{len(errors)} mismatches (first 20):\n" + "\n".join(errors)
