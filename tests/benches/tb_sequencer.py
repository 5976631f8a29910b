"""cocotb testbench: rtl.sequencer.Sequencer against sim.seq_model.SequencerModel.

Parameters (``sim.harness.tb_params``): ``seed``, ``n_random`` (random programs),
``chaos_every`` (every n-th random program also has mutated control words).

Protocol: inputs are driven and outputs sampled at the falling clock edge (after the
rising edge has settled). Each program is written through the load port, started with a
one-cycle ``start`` pulse, and then, every cycle, with a random ``stall``:

* ``issue`` must be 1 exactly in the cycles after a cycle with ``running & ~stall``, and
  then ``pc``/``uop``/``hin``/``hout``/``hlast``/``halted`` must equal the model's next
  issued instruction (so a stall is a bubble and changes nothing else); in the cycle
  after a stall ``uop`` holds the stalled head's micro-op (the core freezes its PE side
  then), in every other cycle without an issue it is a NOP;
* ``running`` must be high from cycle ``cfg.start_latency - 1`` after ``start`` until the
  HALT issues, except in the ``cfg.jump_delay`` cycles after a ``JUMP`` issued (fetch and
  address stages: the head refills);
* ``need_hin``/``need_hout`` must describe the model's next instruction (the head);
* the first issue is exactly ``cfg.start_latency`` cycles after the ``start`` pulse.
"""

from __future__ import annotations

import itertools
import random
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from tests.benches import seq_programs as sp
from sim.harness import tb_config, tb_params
from sim.seq_model import SequencerModel
from arch.isa import Instruction, SeqOp

I = Instruction  # noqa: E741


class Bench:
    def __init__(self, dut, cfg):
        self.dut, self.cfg = dut, cfg
        self.model = SequencerModel(cfg)   # mirrors the RTL microcode memory
        self.cycles = 0
        self.issued = 0

    async def init(self):
        d = self.dut
        Clock(d.clk, 10, unit="ns").start()
        for s in (d.load_en, d.start, d.stall, d.load_addr, d.load_data, d.start_pc):
            s.value = 0
        d.rst.value = 1
        await FallingEdge(d.clk)
        await FallingEdge(d.clk)
        d.rst.value = 0
        await FallingEdge(d.clk)

    async def load(self, prog, addr, backwards=False):
        """Write ``prog`` at ``addr`` (``backwards``: the last address first), one word per
        cycle, and wait the cycle the last word takes to land."""
        d = self.dut
        words = [p.encode(self.cfg) if isinstance(p, Instruction) else p for p in prog]
        for i, w in (reversed(list(enumerate(words))) if backwards else enumerate(words)):
            d.load_addr.value = addr + i
            d.load_data.value = w
            d.load_en.value = 1
            await FallingEdge(d.clk)
        d.load_en.value = 0
        # the last word lands at the end of the next cycle: the start comes after it, as
        # from the host interface (a start one cycle after load_en would read the old word)
        await FallingEdge(d.clk)
        self.model.load(words, addr)
        self.cycles += len(words) + 1

    async def run(self, start_pc, stall_fn, expected=None, tag="", prefix=None):
        """Start at ``start_pc`` and check every cycle until the HALT has issued.

        ``stall_fn(cycle) -> bool`` gives the stall input of each cycle after the start.
        Returns the number of cycles from the start pulse to the HALT issue. With
        ``prefix = n`` (a program that does not halt: ``expected`` is the model's first
        issues, more than ``n``), stop after the first ``n`` issues, the program still
        running (the next start aborts it).
        """
        d = self.dut
        exp = expected if expected is not None else self.model.run(start_pc, max_instructions=100_000)
        n = len(exp)
        if prefix is not None:
            assert len(exp) > prefix + 2, "a prefix run needs the model's issues beyond the prefix"
            n = prefix
        d.start_pc.value = start_pc
        d.start.value = 1
        await FallingEdge(d.clk)
        d.start.value = 0
        k_head = k_out = 0
        lat = self.cfg.start_latency      # the head decides in cycle lat - 1 after the start
        prev_go = False
        prev_stalled = False              # the previous cycle's head stalled
        refill = 0                        # cycles the head still refills after a JUMP
                                          # (cfg.jump_delay: fetch and address stages)
        cyc = 0
        while True:
            cyc += 1
            issue = int(d.issue.value)
            running = int(d.running.value)
            where = f"{tag} cycle {cyc} after start (head #{k_head}, issued {k_out}/{n})"
            assert issue == prev_go, f"{where}: issue={issue}, expected {int(prev_go)}"
            if issue:
                e = exp[k_out]
                got = (int(d.pc.value), int(d.uop.value), int(d.hin.value), int(d.hout.value),
                       int(d.hlast.value), int(d.halted.value))
                want = (e.pc, e.uop, e.hin, e.hout, e.hlast, int(e.op == SeqOp.HALT))
                if got != want:
                    raise AssertionError(
                        f"{where}: issued (pc, uop, hin, hout, hlast, halted) = "
                        f"({got[0]}, {got[1]:#x}, {got[2]}, {got[3]}, {got[4]}, {got[5]}), expected "
                        f"({want[0]}, {want[1]:#x}, {want[2]}, {want[3]}, {want[4]}, {want[5]}) "
                        f"= {e.instr!r}")
                if k_out == 0:
                    assert cyc >= lat
                    if not stall_fn(lat - 1):
                        assert cyc == lat, f"{where}: first issue after {cyc} cycles"
                k_out += 1
                if k_out == n:
                    assert prefix is not None or not running, f"{where}: running still high after the HALT issued"
                    break
            elif prev_stalled:
                # the bubble after a stall: the core freezes its PE side in this cycle, and
                # the micro-op register holds the stalled head's micro-op (not a NOP)
                assert int(d.uop.value) == exp[k_head].uop and int(d.halted.value) == 0, \
                    f"{where}: bubble after a stall does not hold the head's micro-op"
            else:
                assert int(d.uop.value) == 0 and int(d.halted.value) == 0, f"{where}: empty cycle not a NOP"
            assert running == (k_head < len(exp) and cyc >= lat - 1 and not refill), f"{where}: running={running}"
            if running:
                e = exp[k_head]
                nh, no = int(d.need_hin.value), int(d.need_hout.value)
                assert (nh, no) == (int(e.hin != 0), int(e.hout != 0)), \
                    f"{where}: need_hin/need_hout = {nh}/{no} for head {e.instr!r}"
            else:
                assert int(d.need_hin.value) == 0 and int(d.need_hout.value) == 0
            stall = bool(stall_fn(cyc))
            d.stall.value = int(stall)
            go = bool(running) and not stall
            prev_stalled = bool(running) and stall
            if refill:
                refill -= 1
            elif go and exp[k_head].op == SeqOp.JUMP:
                refill = self.cfg.jump_delay
            if go:
                k_head += 1
            prev_go = go
            await FallingEdge(d.clk)
            if cyc > 20 * n + 1000:
                raise AssertionError(f"{where}: timeout")
        d.stall.value = 0
        if prefix is None:            # (a prefix run is still running: the next start aborts it)
            # idle after the HALT: bubbles, not running
            await FallingEdge(d.clk)
            assert int(d.issue.value) == 0 and int(d.running.value) == 0 and int(d.halted.value) == 0
        self.cycles += cyc + (2 if prefix is None else 0)
        self.issued += n
        return cyc


def stall_pattern(rng: random.Random, kind: str):
    if kind == "none":
        return lambda c: False
    if kind == "always_first":   # stall the first few cycles, then none
        k = rng.randint(1, 6)
        return lambda c: c <= k
    p = {"light": 0.1, "heavy": 0.6}.get(kind, 0.3)
    if kind == "bursty":
        bursts = set()
        c = 0
        while c < 5000:
            c += rng.randint(1, 20)
            for i in range(rng.randint(1, 8)):
                bursts.add(c + i)
        return lambda c: c in bursts
    table = {}

    def f(c):
        if c not in table:
            table[c] = rng.random() < p
        return table[c]
    return f


@cocotb.test()
async def directed(dut):
    cfg = tb_config()
    b = Bench(dut, cfg)
    await b.init()
    L, J, H, B, S = SeqOp.LOOP, SeqOp.JUMP, SeqOp.HALT, SeqOp.AGU_BASE, SeqOp.AGU_STRIDE
    # nested loops ending on one instruction, single-instruction body, AGU walk, jump
    progs = {
        "nest_shared_end": [I(op=S, agu=0, lvl=0, imm=16), I(op=S, agu=0, lvl=1, imm=1),
                            I(op=L, lvl=0, target=6, imm=3), I(op=L, lvl=1, target=6, imm=4),
                            I(ag_ra=1, hin=1), I(op=L, lvl=2, target=6, imm=2, ag_wa=1),
                            I(ag_wb=1, hout=2, hlast=1), I(op=H)],
        # one-instruction bodies, a LOOP right after a loop end, a loop ending where the
        # next LOOP's body starts
        "single_body": [I(op=L, lvl=0, target=1, imm=5), I(ag_rb=1), I(op=L, lvl=1, target=3, imm=3),
                        I(ag_ra=1), I(op=L, lvl=0, target=5, imm=2), I(ag_rb=1, hin=1),
                        I(op=J, target=8), I(), I(op=H, ag_ra=1)],
    }
    for name, prog in progs.items():
        for org in (0, cfg.ucode_depth - len(prog)):
            prog_rel = [I(p.uop, **p.ctl) for p in prog]
            for p in prog_rel:
                if p.op in (L, J):
                    p.ctl["target"] += org
            await b.load(prog_rel, org)
            for kind in ("none", "always_first", "heavy"):
                cyc = await b.run(org, stall_pattern(random.Random(1), kind), tag=f"{name}@{org}/{kind}")
                if kind == "none":
                    exp = b.model.run(org)
                    jumps = sum(e.op == SeqOp.JUMP for e in exp)
                    assert cyc == cfg.start_latency + len(exp) - 1 + cfg.jump_delay * jumps
    # A LOOP clears its level's AGU offsets: the only programs where they are not 0
    # already do not halt (a level stepped by its loop end, then its LOOP reached again
    # through the end of a loop armed before it, inside its body), so the model's first
    # issues are checked and the next start aborts the run
    prog = [I(op=S, agu=0, lvl=1, imm=5), I(op=L, lvl=0, target=4, imm=2), I(op=L, lvl=1, target=5, imm=2),
            I(ag_ra=1), I(ag_ra=1), I(ag_ra=1), I(op=H)]
    await b.load(prog, 0)
    exp = list(itertools.islice(b.model.iter_run(0, 1000), 40))
    assert [e.pc for e in exp[9:14]] == [3, 4, 2, 3, 4] and exp[9].uop and exp[10].uop \
        and not exp[12].uop and not exp[13].uop, "the program no longer re-arms a stepped level"
    for kind in ("none", "heavy"):
        await b.run(0, stall_pattern(random.Random(2), kind), expected=exp, prefix=30, tag=f"rearm/{kind}")
    # the word at the start address loaded last, the start two cycles after its load_en
    # (as the host interface gives it): the start reads it
    prog = [I(op=B, agu=0, imm=3), I(ag_rb=1, hin=1), I(op=H)]
    await b.load(prog, 0, backwards=True)
    await b.run(0, lambda c: False, tag="loaded_last")
    # start while running aborts and restarts with fresh state
    d = dut
    prog = [I(op=B, agu=0, imm=5), I(op=L, lvl=0, target=2, imm=100), I(ag_ra=1), I(op=H)]
    await b.load(prog, 0)
    d.start_pc.value = 0
    d.start.value = 1
    await FallingEdge(d.clk)
    d.start.value = 0
    for _ in range(10):
        await FallingEdge(d.clk)
    assert int(d.running.value) == 1 and int(d.issue.value) == 1
    # restart at pc 2: base is 0 again (state reset), the loop is not armed -> 2, 3
    exp = b.model.run(2)
    assert [x.pc for x in exp] == [2, 3]
    await b.run(2, lambda c: False, expected=exp, tag="restart")
    # stall and load while idle change nothing
    d.stall.value = 1
    for _ in range(3):
        await FallingEdge(d.clk)
        assert int(d.issue.value) == 0 and int(d.running.value) == 0
    d.stall.value = 0
    dut._log.info("directed: %d cycles, %d instructions issued", b.cycles, b.issued)


@cocotb.test()
async def random_programs(dut):
    cfg = tb_config()
    prm = tb_params()
    seed = int(prm.get("seed", 1))
    n = int(prm.get("n_random", 50))
    chaos_every = int(prm.get("chaos_every", 3))
    dut._log.info("random programs: seed=%d n=%d config=%s", seed, n, cfg.to_json())
    b = Bench(dut, cfg)
    await b.init()
    rng = random.Random(seed)
    kinds = ["none", "light", "mid", "heavy", "bursty", "always_first"]
    t0 = time.perf_counter()
    n_loops_seen = 0
    for k in range(n):
        pseed = seed * 100_003 + k
        chaos = chaos_every > 0 and k % chaos_every == chaos_every - 1
        prog, org, issued = sp.random_program(cfg, pseed, chaos=chaos)
        n_loops_seen += sum(p.op == SeqOp.LOOP for p in prog)
        await b.load(prog, org)
        exp = b.model.run(org, max_instructions=10_000)
        assert exp == issued, f"program seed {pseed}: model with loaded memory differs from generator"
        kind = kinds[k % len(kinds)]
        await b.run(org, stall_pattern(rng, kind), expected=exp,
                    tag=f"random program {k} (seed {pseed}, chaos={chaos}, stalls={kind}, origin={org})")
    dt = time.perf_counter() - t0
    dut._log.info("random: %d programs, %d LOOP words, %d instructions issued, %d cycles, "
                  "%.0f cycles/s", n, n_loops_seen, b.issued, b.cycles, b.cycles / max(dt, 1e-9))
