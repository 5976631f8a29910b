"""The core's microprogrammed sequencer: microcode RAM, zero-overhead loops, AGUs.

Specified in ``docs/core.md`` (section "The sequencer"); :class:`sim.seq_model.SequencerModel`
is the executable reference and the RTL tests compare the two cycle by cycle.
"""

from __future__ import annotations

from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from pe.layouts import instr_layout, uop_layout
from rtl.fpga import global_net
from arch.isa import AGU_FIELDS, SeqOp

__all__ = ["Sequencer"]


def _gt(x, k: int):
    """``x > k`` for a small constant ``k``: an OR of the bits above ``k``'s and a compare of
    the bits below (LUT logic; Yosys maps a ``>`` of a wide signal to a carry chain)."""
    b = k.bit_length()
    hi = x[b:].any() if len(x) > b else Const(0)
    return hi | (x[:b] > k) if b else x.any()


class Sequencer(wiring.Component):
    """Microprogrammed sequencer issuing one instruction per cycle.

    Parameters
    ----------
    cfg : ArchConfig
        Uses ``ucode_depth`` (microcode words), ``n_loops``, ``n_agus``, ``loop_bits``,
        ``pc_bits``, ``addr_bits``, ``sel_bits``, ``fetch_stage``, ``addr_stage``.

    Attributes
    ----------
    load_addr : In(pc_bits)
    load_data : In(instr_bits)
    load_en : In(1)
        Microcode write port: ``load_data`` (an :func:`arch.isa.instr_layout` word as plain
        bits) given in a cycle with ``load_en`` is written to ``load_addr`` at the end of
        the next cycle (the write port takes a register), so a start two cycles after the
        last ``load_en`` or later runs the words loaded (the host interface's RUN header
        and start pulse take two). Meant for command mode; writing the word under the head
        while running has no defined effect on the running program.
    start : In(1)
        Pulse: (re)start at ``start_pc``. All loop and AGU state returns to its reset
        value (nothing armed, AGU bases, strides and offsets 0). ``start`` has priority:
        while running it aborts the program (the instruction at the head is not issued).
    start_pc : In(pc_bits)
    stall : In(1)
        While high (and running), the instruction at the head does not issue and no
        sequencer state changes; the next cycle's outputs are a bubble (``issue = 0``).
        The core computes it from ``need_hin`` / ``need_hout`` and its stream state.
    running : Out(1)
        High from the cycle after ``start`` (two cycles after it with the fetch stage,
        three with the address stage) up to and including the cycle in which the ``HALT``
        is at the head and issues, except (fetch stage) the ``cfg.jump_delay`` cycles
        after a ``JUMP`` issues, which refill the head.
        ``running & ~stall`` = the head issues.
    need_hin, need_hout : Out(1)
        Combinational: ``running`` and the head instruction has ``hin`` / ``hout`` not
        ``NONE`` on the host stream (the core raises ``stall`` if the host stream cannot
        serve it).
    need_rin, need_rout : Out(1)
        The same for the ring (``rin`` / ``rout``: ``hin`` / ``hout`` with the ring flag).
    issue : Out(1)
        Registered: the outputs below carry an instruction issued to the PEs this cycle.
        When 0 they are all zero (a NOP micro-op).
    uop : Out(uop_layout(addr_bits, sel_bits))
        Registered: the issued micro-op with AGU ``k-1``'s value added to ``ra.off`` /
        ``rb.off`` / ``wa.off`` / ``wb.off`` when ``ag_ra`` / ... = ``k`` (mod
        ``2^addr_bits``); all-zero (a NOP) when ``issue`` is 0, except in the cycle after
        a stall, when it holds the stalled head's micro-op (the core freezes its PE side
        in that cycle, so it is never executed; no stall decision drives its bits).
    uop_next : Out(uop_layout(addr_bits, sel_bits))
        Combinational: the value ``uop`` takes at the end of this cycle (``uop`` is this
        signal registered with its reset), for copies of the register elsewhere (the
        core's distribution tree, ``cfg.dist_stage``).
    hin, hout : Out(2)
    hlast, rin, rout : Out(1)
        Registered: stream fields of the issued instruction (``rin`` / ``rout``: the beat
        comes from / goes to the ring).
    sin, sout : Out(1)
        (``cfg.spad_kib > 0`` only) Registered: the issued instruction's stream input
        comes from / its stream output goes to the scratchpad (then ``rin`` / ``rout``
        are 0: the scratchpad flags take precedence).
    spad_raddr, spad_waddr : Out(spad_addr_bits)
        (``cfg.spad_kib > 0`` only) Registered: the scratchpad read / write pointer as
        the issued instruction sees it (its ``sin`` / ``sout`` address). The pointers
        are 0 after ``start``, post-increment (mod ``spad_depth``) on each ``sin`` /
        ``sout`` issued, and a ``SPAD_PTR`` sets them (``lvl`` bit 0: read, bit 1:
        write) to ``imm | target << loop_bits`` after its own increments.
    pc : Out(pc_bits)
        Registered: microcode address of the issued instruction.
    halted : Out(1)
        Registered pulse: the issued instruction is the ``HALT`` (same cycle as its
        ``issue``; ``running`` is already 0). The core then drains the FP pipelines.

    Notes
    -----
    Pipeline (one stage between RAM and outputs, so the RAM output -> PE path is cut by a
    register)::

        cycle t    start=1: RAM read address = start_pc
        cycle t+1  head = RAM output (instruction at start_pc), running=1; if ~stall it
                   issues: next pc computed, RAM read address = next pc, loop/AGU state
                   updated at the end of the cycle, output registers loaded
        cycle t+2  issue=1, uop/pc/hin/... of the start_pc instruction; next head decides

    So the first ``issue`` is ``cfg.start_latency = 2`` cycles after the ``start`` pulse, and
    then one instruction issues every cycle while running and not stalled, across loop
    back-edges, nested loop ends and jumps (single-instruction loop bodies included).
    ``uop`` and the other issue outputs are registered; ``need_hin``/``need_hout``/
    ``running`` describe the head (decision) stage, one cycle before its issue.

    The next-pc logic uses only registers (head pc, loop ends, counters) except for the
    ``JUMP`` target and op, so the RAM-output -> RAM-address path is one mux deep.

    **Fetch stage** (``cfg.fetch_stage``): the head is a register loaded from the RAM
    output when the head issues, so the decision path (stream needs -> ``stall`` ->
    ``go`` -> the loads of every issue and state register) starts at flip-flops, not at
    the RAM's clock-to-output. The RAM then holds the instruction *behind* the head (at
    ``pc_f``); its next pc is computed from the loop state as the head's issue leaves it
    (the head's own loop-end update or ``LOOP`` write forwarded), so the RAM stays one
    instruction ahead across back-edges, nested loop ends, single-instruction bodies and
    loop ends. A ``LOOP`` at the head is followed by its pc + 1 (a ``LOOP`` at the end of
    an armed loop is not a program: :class:`sim.seq_model.ProgramError`), so its
    one-instruction-body test (``target == pc_f``) is a bit stored beside each microcode
    word, computed at the write port (``target == load_addr + 1``). A start fills the
    stage first: ``start`` at t, RAM output at t+1 (loaded into the head), the head
    decides at t+2, issue at t+3 (``cfg.start_latency = 3``).
    A ``JUMP`` is resolved at the head, not behind it, so no path runs from the RAM's
    output to its own address: when a ``JUMP`` issues the RAM reads its target (an
    address from the head register), and the next cycle refills the head like a start
    (``running`` low, no issue: one bubble per ``JUMP``, ``cfg.jump_delay``); everything
    else is cycle for cycle as without the stage.
    **Address stage** (``cfg.addr_stage``, with the fetch stage): the RAM reads a
    register, ``pc_a``, the instruction two ahead of the head, whose successor the scan
    decides with the loop state after the head's issue and the next one's; a LOOP acts
    on the scan only when it is at the head (a repeating one-instruction body makes the
    RAM read the body again). A start loads ``pc_a`` (``cfg.start_latency = 4``) and a
    ``JUMP`` loads its target there (two bubbles, ``cfg.jump_delay``); ``docs/core.md``,
    "The address stage", gives the three LOOP placements this leaves undefined.
    Out-of-range ``lvl`` / ``agu`` / selector values are ignored (see
    :class:`sim.seq_model.SequencerModel`).
    """

    #: Bits of the fetch stage's head register per copy of its load enable.
    HEAD_CHUNK = 36
    #: Bits of loop and AGU state per copy of the issue's load enable (fetch stage).
    GO_CHUNK = 64

    def __init__(self, cfg):
        self.cfg = cfg
        self._ilay = instr_layout(cfg)
        super().__init__({
            "load_addr": In(cfg.pc_bits),
            "load_data": In(self._ilay.size),
            "load_en": In(1),
            "start": In(1),
            "start_pc": In(cfg.pc_bits),
            "stall": In(1),
            "running": Out(1),
            "need_hin": Out(1),
            "need_hout": Out(1),
            "need_rin": Out(1),
            "need_rout": Out(1),
            "issue": Out(1),
            "uop": Out(uop_layout(cfg.addr_bits, cfg.sel_bits)),
            "uop_next": Out(uop_layout(cfg.addr_bits, cfg.sel_bits)),
            "hin": Out(2),
            "hout": Out(2),
            "hlast": Out(1),
            "rin": Out(1),
            "rout": Out(1),
            "pc": Out(cfg.pc_bits),
            "halted": Out(1),
            **({"sin": Out(1), "sout": Out(1), "spad_raddr": Out(cfg.spad_addr_bits),
                "spad_waddr": Out(cfg.spad_addr_bits)} if cfg.spad_kib else {}),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        nl, na = cfg.n_loops, cfg.n_agus
        pcw, lw, aw = cfg.pc_bits, cfg.loop_bits, cfg.addr_bits

        fetch = cfg.fetch_stage

        shared_en = {}

        def enable_copy(name, expr, net):
            """A copy of a load-enable gate in a submodule of its own (``name``; the FPGA
            build keeps these modules, rtl.fpga.keep_enable_copies, so synthesis does not
            merge the copies back into one gate). On an ECP5 build the first copy drives
            a global network instead (:func:`rtl.fpga.global_net`; ``net`` names it),
            which every later copy of the same enable shares."""
            if net in shared_en:
                return shared_en[net]
            em = Module()
            en = Signal(name="en")
            em.d.comb += en.eq(expr)
            m.submodules[name] = em
            g = global_net(m, platform, en, f"seq_{net}")
            if g is not en:
                shared_en[net] = g
            return g
        astage = cfg.addr_stage               # (requires fetch: ArchConfig checks it)
        isz = self._ilay.size
        # With the fetch stage each microcode word carries one bit beside the instruction,
        # computed as it is loaded: its target is the next address (a LOOP with a
        # one-instruction body), so the next-pc scan does not compare the head's target
        # with pc_f (see the class notes; 212-215 bits + 1 still fill 12 block RAMs).
        # With the address stage four bits, so that the head's decode registers load
        # straight from the RAM (its clock-to-output and the route to the sequencer's
        # logic leave no time for a decode): a LOOP of a level in range with a
        # one-instruction body, a target two ahead (target == load_addr + 2, the scan's
        # match for a LOOP at the head's level), imm > 1 and imm > 2.
        n_pre = 4 if astage else int(fetch)
        m.submodules.ucode = mem = Memory(shape=isz + n_pre, depth=cfg.ucode_depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port()
        wp_data = Signal.like(wp.data, name="ucode_wp_data")     # the word and its bits, as loaded
        # The write port takes a register: the host interface's load (address, word and
        # the bits computed beside it) lands one cycle later, from flip-flops, so no path
        # runs from the host stream's state through those bits across the die into the
        # block RAMs (the preset 2 x 2 core's critical path, docs/fpga.md, "Timing").
        # A START follows a LOAD's last word by two cycles at least (the RUN header,
        # then the start pulse), so a start still reads every word loaded.
        w_addr = Signal.like(wp.addr, name="ucode_w_addr")
        w_en = Signal(name="ucode_w_en")
        w_data = Signal.like(wp.data, name="ucode_w_data")
        m.d.sync += [w_addr.eq(self.load_addr), w_en.eq(self.load_en)]
        with m.If(self.load_en):
            m.d.sync += w_data.eq(wp_data)
        m.d.comb += [wp.addr.eq(w_addr), wp.en.eq(w_en), wp.data.eq(w_data)]
        # The microcode is written only while the sequencer reads none of it (a LOAD is
        # taken only between runs, and a start follows its last write by a cycle): the
        # FPGA build declares the read port collision-undefined on that ground
        # (rtl.fpga.sram_reads_collision_free); tests check it cycle by cycle.
        self._ucode_probe = (wp.en, rp.en)
        if fetch:
            ld_target = data.View(self._ilay, self.load_data).ctl.target
            ld_t1 = ld_target == (self.load_addr + 1)[:pcw]
            if astage:
                ld = data.View(self._ilay, self.load_data).ctl
                ld_loop = (ld.op == SeqOp.LOOP) & (ld.lvl < nl)
                m.d.comb += wp_data.eq(Cat(self.load_data, ld_loop & ld_t1, ld_target == (self.load_addr + 2)[:pcw],
                                           _gt(ld.imm, 1), _gt(ld.imm, 2)))
            else:
                m.d.comb += wp_data.eq(Cat(self.load_data, ld_t1))
            # the head instruction in a register loaded from the RAM (the fetch stage): the
            # RAM's output is the instruction behind the head
            head_word = Signal(isz + n_pre, name="head_word")
            head = data.View(self._ilay, head_word[:isz])
            head_t1 = None if astage else head_word[isz]   # the head's target is its pc + 1
            head_t2 = head_word[isz + 1] if astage else None   # ... its pc + 2
        else:
            m.d.comb += wp_data.eq(self.load_data)
            head = data.View(self._ilay, rp.data)
        ctl = head.ctl

        # -- state -------------------------------------------------------------------------
        running = Signal()
        pc = Signal(pcw)                      # pc of the head instruction
        # pc + 1 (a LOOP's body start): a register loaded beside pc with the fetch stage,
        # so the LOOP-at-the-head forwarding into the next-pc scan has no adder
        pc_inc = Signal(pcw, init=1, name="pc_inc") if fetch else pc + 1
        lstart = [Signal(pcw, name=f"loop{lv}_start") for lv in range(nl)]
        lend = [Signal(pcw, name=f"loop{lv}_end") for lv in range(nl)]
        trip = [Signal(lw, name=f"loop{lv}_trip") for lv in range(nl)]
        cnt = [Signal(lw, name=f"loop{lv}_cnt") for lv in range(nl)]
        # The state a start clears (armed flags, AGU bases, strides, offsets and values) is
        # reset by ``start`` only, not by the domain's reset: nothing reads it before a
        # start, and the FPGA build can then use the flip-flops' own synchronous reset
        # (an ECP5 slice has one, LSR, taken by the domain reset otherwise) for ``start``,
        # instead of a LUT ``start | go`` in front of every load enable (the 2 x 2 preset
        # core's critical path, docs/fpga.md, "Timing").
        armed = [Signal(name=f"loop{lv}_armed", reset_less=True) for lv in range(nl)]
        base = [Signal(aw, name=f"agu{a}_base", reset_less=True) for a in range(na)]
        stride = [[Signal(aw, name=f"agu{a}_stride{lv}", reset_less=True) for lv in range(nl)] for a in range(na)]
        off = [[Signal(aw, name=f"agu{a}_off{lv}", reset_less=True) for lv in range(nl)] for a in range(na)]

        go = Signal()                         # the head issues this cycle
        live = Signal()                       # the head holds an instruction (fetch stage:
                                              # not while it refills after a start or JUMP)
        spad = bool(cfg.spad_kib)
        def spad_flags(c):
            """Stream input / output from / to the scratchpad of an instruction with control
            fields ``c`` (0 without a scratchpad)."""
            if not spad:
                return Const(0), Const(0)
            return c.sin & (c.hin != 0), c.sout & (c.hout != 0)

        h_sin = Signal()                      # the head's scratchpad flags
        h_sout = Signal()
        m.d.comb += [x.eq(v) for x, v in zip((h_sin, h_sout), spad_flags(ctl))]
        h_rin = Signal()
        h_rout = Signal()
        m.d.comb += [h_rin.eq(ctl.rin & ~h_sin), h_rout.eq(ctl.rout & ~h_sout)]

        def stream_needs(c):
            """The stream needs (host in, host out, ring in, ring out) of an instruction
            with control fields ``c``; the scratchpad flags take precedence over the ring."""
            sin, sout = spad_flags(c)
            rin, rout = c.rin & ~sin, c.rout & ~sout
            return ((c.hin != 0) & ~rin & ~sin, (c.hout != 0) & ~rout & ~sout,
                    (c.hin != 0) & rin, (c.hout != 0) & rout)

        if fetch:
            filling = Signal()                # the head refills from the RAM output this cycle
            if astage:
                # ``filling`` stays high for two cycles after a start or a JUMP: in the
                # first (``fill_f``) the RAM reads the address register and nothing is
                # behind the head; in the second the RAM's output is behind the head
                fill_f = Signal(name="fill_f")
            # the head's stream needs decoded as it is loaded (flip-flops beside head_word):
            # the stall decision (needs -> stall -> go -> every load enable) then starts
            # one LUT from these registers, not behind a decode of the head's fields
            needs = [Signal(name=f"head_need_{n}") for n in ("hin", "hout", "rin", "rout")]
        else:
            needs = stream_needs(ctl)
        m.d.comb += [
            live.eq(running & ~filling if fetch else running),
            go.eq(live & ~self.stall),
            self.running.eq(live),
            self.need_hin.eq(live & needs[0]),
            self.need_hout.eq(live & needs[1]),
            self.need_rin.eq(live & needs[2]),
            self.need_rout.eq(live & needs[3]),
        ]
        if fetch:
            # the head's op decoded as it is loaded (flip-flops beside head_word), so the
            # next-pc scan does not start with a decode of the head register; likewise
            # its trip count's compare and, per loop level, the counters' compares
            # (registers beside cnt / trip, loaded with the same values)
            is_loop, is_jump, is_halt = (Signal(name=f"head_is_{n}") for n in ("loop", "jump", "halt"))
            head_loop_lv = [Signal(name=f"head_loop{lv}") for lv in range(nl)]
            head_imm_gt1 = Signal(name="head_imm_gt1")
            # ... and its AGU_BASE / AGU_STRIDE writes, per AGU (and level)
            head_base = [Signal(name=f"head_agu{a}_base") for a in range(na)]
            head_stride = [[Signal(name=f"head_agu{a}_stride{lv}") for lv in range(nl)] for a in range(na)]
            cnt_gt1 = [Signal(name=f"loop{lv}_cnt_gt1") for lv in range(nl)]
            cnt_gt2 = [Signal(name=f"loop{lv}_cnt_gt2") for lv in range(nl)]
            trip_gt1 = [Signal(name=f"loop{lv}_trip_gt1") for lv in range(nl)]
            if astage:
                # the address stage's scan sees a count after two issues (head and the
                # instruction behind it): compares of the count up to 3 and the trip up to 2
                cnt_gt3 = [Signal(name=f"loop{lv}_cnt_gt3") for lv in range(nl)]
                trip_gt2 = [Signal(name=f"loop{lv}_trip_gt2") for lv in range(nl)]
                head_imm_gt2 = Signal(name="head_imm_gt2")
                # the head is a LOOP (level in range) with a one-instruction body, and one
                # whose body repeats (imm > 1): the RAM then reads that body again
                head_t1loop = Signal(name="head_t1loop")
                head_rep = Signal(name="head_rep")
        else:
            is_loop = ctl.op == SeqOp.LOOP
            is_jump = ctl.op == SeqOp.JUMP
            is_halt = ctl.op == SeqOp.HALT

        def loop_scan(at, match, gt1, st_lstart, tag):
            """Loop-end scan of the instruction at ``at``, given per level whether it ends
            the armed loop (``match``) and whether the loop's count is above 1 (``gt1``):
            the levels that branch back (``win``) and finish (``fin``), and the next pc
            without a ``JUMP``."""
            cand = [Signal(name=f"{tag}loop{lv}_cand") for lv in range(nl)]
            win = [Signal(name=f"{tag}loop{lv}_branch") for lv in range(nl)]
            fin = [Signal(name=f"{tag}loop{lv}_finish") for lv in range(nl)]
            for lv in range(nl):
                m.d.comb += cand[lv].eq(match[lv] & gt1[lv])
            for lv in range(nl):
                higher = Cat(*cand[lv + 1:]).any() if lv + 1 < nl else Const(0)
                m.d.comb += [
                    win[lv].eq(cand[lv] & ~higher),
                    fin[lv].eq(match[lv] & ~cand[lv] & ~higher),
                ]
            # the branching level is one-hot: its start is an AND-OR of the levels' starts
            # (not a priority chain of muxes), selected against at + 1 by any candidate
            nxt = Signal(pcw, name=f"{tag}loop_next")
            back = reduce(lambda x, y: x | y, [Mux(win[lv], st_lstart[lv], 0) for lv in range(nl)])
            m.d.comb += nxt.eq(Mux(Cat(*cand).any(), back, at + 1))
            return win, fin, nxt

        # -- loop-end scan of the head ------------------------------------------------------
        if fetch:
            # done when the head was the instruction behind it (below), kept in registers
            win = [Signal(name=f"loop{lv}_branch") for lv in range(nl)]
            fin = [Signal(name=f"loop{lv}_finish") for lv in range(nl)]
        else:
            # registers only: head pc, loop ends, counters
            win, fin, loop_next = loop_scan(pc, [armed[lv] & (lend[lv] == pc) for lv in range(nl)],
                                            [_gt(cnt[lv], 1) for lv in range(nl)], lstart, "")
            next_pc = Signal(pcw)
            m.d.comb += next_pc.eq(Mux(is_jump, ctl.target, loop_next))

        # -- the loop state as the head's issue leaves it ------------------------------------
        # (the LOOP write wins over a loop-end update of its own level)
        lstart_n = [Signal(pcw, name=f"loop{lv}_start_next") for lv in range(nl)]
        lend_n = [Signal(pcw, name=f"loop{lv}_end_next") for lv in range(nl)]
        trip_n = [Signal(lw, name=f"loop{lv}_trip_next") for lv in range(nl)]
        cnt_n = [Signal(lw, name=f"loop{lv}_cnt_next") for lv in range(nl)]
        armed_n = [Signal(name=f"loop{lv}_armed_next") for lv in range(nl)]
        loop_lv = [Signal(name=f"loop{lv}_write") for lv in range(nl)]   # the head arms a level
        # The head's issue at a loop end of level lv: it branches back (``upd_win``: the
        # count decrements, the AGU offsets step by their strides) or finishes
        # (``upd_fin``: the count reloads); ``clr`` clears the level's AGU offsets (a
        # finish, or a LOOP of that level). A JUMP or HALT updates no loop end it meets.
        # With the fetch stage these are flip-flops loaded with the head (below), so the
        # loop and AGU state's next values start one LUT from registers, not behind a
        # gate of the head's decoded op fanned out to every level's counter and offsets
        # (the preset cores' critical path into the AGU values, docs/fpga.md, "Timing").
        # They, ``loop_lv`` and ``jump_head`` (below) are not gated with
        # ``live``: the head's decoded op (``is_jump``, ``head_loop<lv>``), its scan
        # (``win`` / ``fin``) and these are cleared whenever the head holds no
        # instruction (at a start and when a JUMP issues, until the head refills; after
        # a HALT only a start reads the RAM), so they are 0 then anyway, and the next-pc
        # scan into the microcode RAM's address starts at these flip-flops instead of
        # behind a gate with ``running`` and ``filling`` (the 4 x 4 core's critical path).
        # The loop state they compute is loaded only when the head issues.
        if fetch:
            upd_win = [Signal(name=f"loop{lv}_step_branch") for lv in range(nl)]
            upd_fin = [Signal(name=f"loop{lv}_step_finish") for lv in range(nl)]
            clr = [Signal(name=f"loop{lv}_agu_clear") for lv in range(nl)]
        else:
            upd = live & ~is_jump & ~is_halt
            upd_win = [upd & win[lv] for lv in range(nl)]
            upd_fin = [upd & fin[lv] for lv in range(nl)]
            clr = [upd_fin[lv] | (is_loop & (ctl.lvl == lv)) for lv in range(nl)]
        for lv in range(nl):
            m.d.comb += [loop_lv[lv].eq(head_loop_lv[lv] if fetch else live & is_loop & (ctl.lvl == lv)),
                         lstart_n[lv].eq(lstart[lv]), lend_n[lv].eq(lend[lv]), trip_n[lv].eq(trip[lv]),
                         cnt_n[lv].eq(cnt[lv]), armed_n[lv].eq(armed[lv])]
            with m.If(upd_win[lv]):
                m.d.comb += cnt_n[lv].eq(cnt[lv] - 1)
            with m.If(upd_fin[lv]):
                m.d.comb += cnt_n[lv].eq(trip[lv])
            with m.If(loop_lv[lv]):
                m.d.comb += [lstart_n[lv].eq(pc_inc), lend_n[lv].eq(ctl.target), trip_n[lv].eq(ctl.imm),
                             cnt_n[lv].eq(ctl.imm), armed_n[lv].eq(1)]

        if fetch:
            # the instruction behind the head (RAM output, at pc_f) and its next pc, with
            # the loop state after the head's issue: so the RAM is always one instruction
            # ahead of the head, across loop back-edges. The scan compares registers first
            # and selects by the head's effect after (``cnt_next > 1`` as a choice of
            # register compares, not a compare of the chosen count), and its result is
            # kept for when this instruction is the head. A JUMP is not decoded behind the
            # head (that would put the RAM's output in front of its own address): at the
            # head, its issue reads the target and the head refills (``filling``), as
            # after a start.
            pc_f = Signal(pcw)
            advance = Signal()
            jump_head = Signal()              # the head is a JUMP: read its target
            pc_f_inc = Signal(pcw, name="pc_f_inc")
            m.d.comb += [
                jump_head.eq(is_jump),            # (0 while the head refills: above)
                advance.eq(filling | go),
                pc_f_inc.eq(pc_f + 1),
            ]
            if astage:
                # The address stage: the RAM reads ``pc_a``, a register, so no path runs from
                # the scan into the RAM's address (its cells sit across the die). pc_a is the
                # instruction two ahead of the head: at each advance the scan decides its
                # successor with the loop state after the head's issue and after the issue
                # of the instruction behind it (its scan result, ``f_win`` / ``f_fin``,
                # registers). The one thing it cannot see is a LOOP behind the head (the RAM
                # output's decode would sit in front of the address register); its effect
                # on the scan of the next instruction is applied when the LOOP is at the
                # head:
                # * a LOOP with a one-instruction body that repeats (``head_rep``): the RAM
                #   reads the body again (pc_f instead of pc_a: one mux with a registered
                #   select) and the scan decides the successor of the body's second issue
                #   (``x_*``) instead of pc_a's;
                # * any other LOOP: the scan of pc_a (pc + 2) sees the LOOP's level end at
                #   pc_a by a second bit stored with each word (``target == address + 2``).
                # What the scan of the body (while the LOOP was behind the head) assumed
                # is right in every other case, which sim.seq_model checks
                # (ProgramError: a LOOP whose next address is the end of another armed
                # loop, docs/core.md).
                pc_a = Signal(pcw, name="pc_a")
                pc_a_inc = Signal(pcw, name="pc_a_inc")
                m.d.comb += pc_a_inc.eq(pc_a + 1)
                f_win = [Signal(name=f"f_loop{lv}_branch") for lv in range(nl)]
                f_fin = [Signal(name=f"f_loop{lv}_finish") for lv in range(nl)]
                at_end_f = [Signal(name=f"f_loop{lv}_end_at_pc_f") for lv in range(nl)]
                at_end_a = [Signal(name=f"a_loop{lv}_end_at_pc_a") for lv in range(nl)]

                def gt1_after_two(lv):
                    """The count of level ``lv`` after the head's and the next issue, > 1."""
                    one = Mux(win[lv], cnt_gt2[lv], Mux(fin[lv], trip_gt1[lv], cnt_gt1[lv]))
                    two = Mux(win[lv], cnt_gt3[lv], Mux(fin[lv], trip_gt2[lv], cnt_gt2[lv]))
                    return Mux(f_fin[lv], trip_gt1[lv], Mux(f_win[lv], two, one))

                a_match = [Mux(loop_lv[lv], head_t2, armed[lv] & at_end_a[lv]) for lv in range(nl)]
                a_gt1 = [Mux(loop_lv[lv], head_imm_gt1, gt1_after_two(lv)) for lv in range(nl)]
                a_win, a_fin, a_next = loop_scan(pc_a, a_match, a_gt1, lstart_n, "a_")
                # the repeating body's second issue: the LOOP's level ends there, the
                # first issue branched back on that level (no other level changes)
                x_match = [Mux(loop_lv[lv], 1, armed[lv] & at_end_f[lv]) for lv in range(nl)]
                x_gt1 = [Mux(loop_lv[lv], head_imm_gt2, cnt_gt1[lv]) for lv in range(nl)]
                x_win, x_fin, x_next = loop_scan(pc_f, x_match, x_gt1, lstart_n, "x_")
                n_win = [Mux(head_rep, x, a) for x, a in zip(x_win, a_win)]
                n_fin = [Mux(head_rep, x, a) for x, a in zip(x_fin, a_fin)]
                n_next = Mux(head_rep, x_next, a_next)
                n_inc = Mux(head_rep, pc_f_inc, pc_a_inc)
                m.d.comb += [
                    rp.addr.eq(Mux(head_rep, pc_f, pc_a)),
                    rp.en.eq(advance),
                ]

                def at_next(v):
                    """``v`` == the next pc_a, as the AND-OR of ``v``'s compares with the
                    candidate addresses."""
                    back = reduce(lambda x, y: x | y, [n_win[k] & (v == lstart_n[k]) for k in range(nl)])
                    return Mux(jump_head, v == ctl.target, Mux(Cat(*n_win).any(), back, v == n_inc))

                with m.If(self.start):
                    m.d.sync += [pc_a.eq(self.start_pc), fill_f.eq(1)]
                    m.d.sync += [x.eq(0) for x in f_win + f_fin]
                with m.Elif(advance):
                    m.d.sync += [pc_f.eq(rp.addr), pc_a.eq(Mux(jump_head, ctl.target, n_next)),
                                 fill_f.eq(go & is_jump)]
                    m.d.sync += [at_end_a[lv].eq(at_next(lend_n[lv])) for lv in range(nl)]
                    m.d.sync += [at_end_f[lv].eq(Mux(head_rep, Mux(loop_lv[lv], 1, at_end_f[lv]),
                                                     Mux(loop_lv[lv], head_t2, at_end_a[lv])))
                                 for lv in range(nl)]
                    # (cleared when a JUMP issues: below)
                    m.d.sync += [x.eq(v) for x, v in zip(f_win + f_fin, n_win + n_fin)]
                # the head's scan result when the instruction behind it moves up: the scan
                # made while it was two ahead, or, behind a LOOP with a one-instruction
                # body, the LOOP's level's branch or finish (and, if it repeats, no other
                # level's: the LOOP's level has the priority)
                up_win = [Mux(head_t1loop, Mux(loop_lv[lv], head_imm_gt1, ~head_rep & f_win[lv]), f_win[lv])
                          for lv in range(nl)]
                up_fin = [Mux(head_t1loop, Mux(loop_lv[lv], ~head_imm_gt1, ~head_rep & f_fin[lv]), f_fin[lv])
                          for lv in range(nl)]
            else:
                # The scan's loop-end compares are flip-flops: ``at_end[lv]`` holds
                # ``lend[lv] == pc_f``, loaded with pc_f from the compares of the next loop
                # ends with each candidate next address (registers only), selected like the
                # address (below). A LOOP at the head compares its target with pc_f here: the
                # same compare made from the RAM's output before the head is loaded is
                # slower (the block RAM's clock to output, then the compare and the select;
                # docs/fpga.md, "Timing").
                at_end = [Signal(name=f"f_loop{lv}_end_at_pc_f") for lv in range(nl)]
                # (a LOOP at the head is followed by pc + 1 = pc_f: a LOOP at the end of an
                # armed loop is not a valid program, sim.seq_model.ProgramError; so its
                # target == pc_f is the bit stored with it, not a compare on this path)
                f_match = [Mux(loop_lv[lv], head_t1, armed[lv] & at_end[lv]) for lv in range(nl)]
                f_gt1 = [Mux(loop_lv[lv], head_imm_gt1,
                             Mux(upd_win[lv], cnt_gt2[lv], Mux(upd_fin[lv], trip_gt1[lv], cnt_gt1[lv])))
                         for lv in range(nl)]
                f_win, f_fin, f_loop_next = loop_scan(pc_f, f_match, f_gt1, lstart_n, "f_")
                m.d.comb += [
                    rp.addr.eq(Mux(self.start, self.start_pc, Mux(jump_head, ctl.target, f_loop_next))),
                    rp.en.eq(self.start | advance),
                ]

                def at_next(v, v_start):
                    """``v == rp.addr``, as the AND-OR of ``v``'s compares with the candidate
                    addresses (``v_start`` in place of ``v`` at a start)."""
                    back = reduce(lambda x, y: x | y, [f_win[k] & (v == lstart_n[k]) for k in range(nl)])
                    return Mux(self.start, v_start == self.start_pc,
                               Mux(jump_head, v == ctl.target, Mux(Cat(*f_win).any(), back, v == pc_f_inc)))

                with m.If(self.start | advance):
                    m.d.sync += pc_f.eq(rp.addr)      # the address being read (one mux fewer)
                    # loop ends change only when the head issues (lend_next), never at a start
                    m.d.sync += [at_end[lv].eq(at_next(lend_n[lv], lend[lv])) for lv in range(nl)]
            # the head's decode and scan that the next-pc scan reads ungated (above)
            scan_regs = ([is_jump, *head_loop_lv, *win, *fin, *upd_win, *upd_fin, *clr]
                         + ([head_rep, head_t1loop] if astage else []))
            with m.If(self.start):
                m.d.sync += filling.eq(1)
                m.d.sync += [x.eq(0) for x in scan_regs]
            with m.Elif(advance):
                m.d.sync += [pc.eq(pc_f), pc_inc.eq(pc_f + 1),
                             filling.eq((go & is_jump) | fill_f if astage else go & is_jump)]
                nctl = data.View(self._ilay, rp.data[:isz]).ctl
                m.d.sync += [is_loop.eq(nctl.op == SeqOp.LOOP), is_jump.eq(nctl.op == SeqOp.JUMP),
                             is_halt.eq(nctl.op == SeqOp.HALT),
                             head_imm_gt1.eq(rp.data[isz + 2] if astage else _gt(nctl.imm, 1))]
                n_loop_lv = [(nctl.op == SeqOp.LOOP) & (nctl.lvl == lv) for lv in range(nl)]
                m.d.sync += [head_loop_lv[lv].eq(n_loop_lv[lv]) for lv in range(nl)]
                m.d.sync += [x.eq(v) for x, v in zip(needs, stream_needs(nctl))]
                # the head's scan, and its effect when it issues (upd_win / upd_fin / clr)
                h_win, h_fin = (up_win, up_fin) if astage else (f_win, f_fin)
                n_upd = (nctl.op != SeqOp.JUMP) & (nctl.op != SeqOp.HALT)
                m.d.sync += [x.eq(y) for x, y in zip(win + fin, h_win + h_fin)]
                m.d.sync += [upd_win[lv].eq(h_win[lv] & n_upd) for lv in range(nl)]
                m.d.sync += [upd_fin[lv].eq(h_fin[lv] & n_upd) for lv in range(nl)]
                m.d.sync += [clr[lv].eq(h_fin[lv] & n_upd | n_loop_lv[lv]) for lv in range(nl)]
                # the head's AGU_BASE / AGU_STRIDE writes, decoded as it is loaded
                m.d.sync += [head_base[a].eq((nctl.op == SeqOp.AGU_BASE) & (nctl.agu == a)) for a in range(na)]
                m.d.sync += [head_stride[a][lv].eq((nctl.op == SeqOp.AGU_STRIDE) & (nctl.agu == a) & (nctl.lvl == lv))
                             for a in range(na) for lv in range(nl)]
                if astage:                    # (the bits stored beside the word)
                    m.d.sync += [head_imm_gt2.eq(rp.data[isz + 3]), head_t1loop.eq(rp.data[isz]),
                                 head_rep.eq(rp.data[isz] & rp.data[isz + 2])]
                    # nothing was behind the head (the cycle after a start or a JUMP): the
                    # head stays empty
                    with m.If(fill_f):
                        m.d.sync += [x.eq(0) for x in scan_regs]
                # a JUMP issues (advance with is_jump: the head was live, so it went): the
                # head refills next cycle, holding no instruction until then
                with m.If(is_jump):
                    m.d.sync += [x.eq(0) for x in scan_regs]
                    if astage:                # ... and so does the stage behind it
                        m.d.sync += [x.eq(0) for x in f_win + f_fin]
            with m.If(filling & ~self.start):
                m.d.sync += running.eq(1)
            # The head register loads with ``~start & advance`` in chunks of HEAD_CHUNK
            # bits (about two block RAMs' outputs), each chunk's enable computed by its own
            # copy of that gate (submodule ``head_en<k>``; the FPGA build keeps each copy
            # a separate module so synthesis does not merge them): the stall decision
            # then fans out to a few gates instead of every head bit across the
            # microcode's block RAMs (a 2 x 2 build's critical endpoints). Same values;
            # written from flip-flops and ``stall`` (one LUT4), not from ``advance``,
            # which would put a shared gate back in front of the copies.
            for k in range(0, len(head_word), self.HEAD_CHUNK):
                hi = min(k + self.HEAD_CHUNK, len(head_word))
                en = enable_copy(f"head_en{k // self.HEAD_CHUNK}",
                                 ~self.start & (filling | (running & ~filling & ~self.stall)), "head_en")
                with m.If(en):
                    m.d.sync += head_word[k:hi].eq(rp.data[k:hi])
        else:
            m.d.comb += [
                rp.addr.eq(Mux(self.start, self.start_pc, next_pc)),
                rp.en.eq(self.start | go),
            ]

        # -- AGU state as the head's issue leaves it, and the AGU values ---------------------
        # The value of AGU a (base + sum of its offsets) is a register, loaded at every
        # issue with the sum of the next base and offsets: the head's AGU add starts at a
        # flip-flop, not behind the offset adder tree (same values, one cycle earlier).
        # Loop ends step the offsets (a loop end that branches back adds the stride, one
        # that finishes clears them); a LOOP clears its level's offsets after that, and
        # AGU_BASE / AGU_STRIDE writes take effect with the head's issue. Each offset's
        # stepped value (offset + stride) is a register too, loaded beside the offset with
        # the next offset plus the next stride, so a branching loop end selects it instead
        # of adding (one adder fewer in front of the values' adder tree). With the fetch
        # stage the AGU writes are decoded as the head is loaded (``head_base`` /
        # ``head_stride``) and the loop-end effects are flip-flops (``upd_win`` / ``clr``).
        base_n = [Signal(aw, name=f"agu{a}_base_next") for a in range(na)]
        off_n = [[Signal(aw, name=f"agu{a}_off{lv}_next") for lv in range(nl)] for a in range(na)]
        off_p = [[Signal(aw, name=f"agu{a}_off{lv}_stepped", reset_less=True) for lv in range(nl)] for a in range(na)]
        stride_n = [[Signal(aw, name=f"agu{a}_stride{lv}_next") for lv in range(nl)] for a in range(na)]
        if not fetch:
            head_base = [(ctl.op == SeqOp.AGU_BASE) & (ctl.agu == a) for a in range(na)]
            head_stride = [[(ctl.op == SeqOp.AGU_STRIDE) & (ctl.agu == a) & (ctl.lvl == lv) for lv in range(nl)]
                           for a in range(na)]
        for a in range(na):
            m.d.comb += base_n[a].eq(Mux(head_base[a], ctl.imm, base[a]))
            for lv in range(nl):
                m.d.comb += stride_n[a][lv].eq(Mux(head_stride[a][lv], ctl.imm[:aw], stride[a][lv]))
                m.d.comb += off_n[a][lv].eq(off[a][lv])
                with m.If(upd_win[lv]):
                    m.d.comb += off_n[a][lv].eq(off_p[a][lv])
                with m.If(clr[lv]):
                    m.d.comb += off_n[a][lv].eq(0)

        def csa_sum(xs):
            """Sum mod 2^aw: carry-save adders (three operands to two, one LUT level per bit)
            down to two operands, then one adder (carry chain), instead of a tree of
            adders (one carry chain per level)."""
            while len(xs) > 2:
                nxt = []
                for i in range(0, len(xs) - 2, 3):
                    a, b, c = xs[i:i + 3]
                    nxt += [(a ^ b ^ c)[:aw], Cat(Const(0, 1), (a & b) | (a & c) | (b & c))[:aw]]
                xs = nxt + xs[len(xs) - len(xs) % 3:]      # (the operands left over)
            return (xs[0] + xs[1])[:aw] if len(xs) == 2 else xs[0]

        agu = [Signal(aw, name=f"agu{a}_value", reset_less=True) for a in range(na)]
        new_uop = Signal(self.uop.shape())
        m.d.comb += new_uop.eq(head.uop)
        for fld in AGU_FIELDS:
            sel = ctl[f"ag_{fld}"]
            add = Signal(aw, name=f"agu_add_{fld}")
            with m.Switch(sel):
                for a in range(na):
                    with m.Case(a + 1):
                        m.d.comb += add.eq(agu[a])
            m.d.comb += new_uop[fld].off.eq(head.uop[fld].off + add)

        # -- sequential behaviour --------------------------------------------------------
        # The micro-op register is cleared at its input when the head is empty (gating it
        # with ``issue`` at the output instead puts a LUT in front of the distribution
        # copies' die-wide fan-out, the 4 x 4 core's critical path at 18.4 ns) and loaded
        # whenever the head holds an instruction (``live``, flip-flops only), stall or
        # not: after a stall the core freezes the whole PE side for the bubble cycle, so
        # what it holds then is never executed, and the stall decision drives no clear or
        # enable of its bits (a 2 x 2 build's critical endpoints; docs/fpga.md, "Timing").
        issue_regs = [self.issue, self.hin, self.hout, self.hlast, self.rin, self.rout, self.pc, self.halted]
        m.d.comb += self.uop_next.eq(Mux(self.start | ~live, 0, new_uop))
        m.d.sync += self.uop.eq(self.uop_next)
        if spad:
            issue_regs += [self.sin, self.sout, self.spad_raddr, self.spad_waddr]
            rptr = Signal(cfg.spad_addr_bits)
            wptr = Signal(cfg.spad_addr_bits)
            ptr_val = Signal(cfg.spad_addr_bits)
            m.d.comb += ptr_val.eq(Cat(ctl.imm, ctl.target))
        with m.If(self.start):
            if spad:
                m.d.sync += [rptr.eq(0), wptr.eq(0)]
            m.d.sync += running.eq(0 if fetch else 1)
            if not fetch:
                m.d.sync += pc.eq(self.start_pc)
            m.d.sync += [r.eq(0) for r in issue_regs]
        with m.Elif(go):
            m.d.sync += [
                self.issue.eq(1),
                self.hin.eq(ctl.hin),
                self.hout.eq(ctl.hout),
                self.hlast.eq(ctl.hlast),
                self.rin.eq(h_rin),
                self.rout.eq(h_rout),
                self.pc.eq(pc),
                self.halted.eq(is_halt),
            ]
            if not fetch:
                m.d.sync += pc.eq(next_pc)
            if spad:
                m.d.sync += [self.sin.eq(h_sin), self.sout.eq(h_sout),
                             self.spad_raddr.eq(rptr), self.spad_waddr.eq(wptr)]
                is_ptr = ctl.op == SeqOp.SPAD_PTR
                with m.If(is_ptr & ctl.lvl[0]):
                    m.d.sync += rptr.eq(ptr_val)
                with m.Elif(h_sin):
                    m.d.sync += rptr.eq(rptr + 1)
                with m.If(is_ptr & ctl.lvl[1]):
                    m.d.sync += wptr.eq(ptr_val)
                with m.Elif(h_sout):
                    m.d.sync += wptr.eq(wptr + 1)
            with m.If(is_halt):
                m.d.sync += running.eq(0)
        with m.Else():
            m.d.sync += [r.eq(0) for r in issue_regs]

        # -- the loop and AGU state loads when the head issues -------------------------------
        loads = list(zip(lstart + lend + trip + cnt + armed, lstart_n + lend_n + trip_n + cnt_n + armed_n))
        if fetch:
            # the next count's and trip's compares, chosen like the next count from
            # compares of the registers (a decremented count ``cnt - 1 > k`` is
            # ``cnt > k + 1``: a level branches back only with ``cnt > 1``), not made
            # after the decrement and the choice
            def cnt_next_gt(lv, k):
                return Mux(loop_lv[lv], _gt(ctl.imm, k),
                           Mux(upd_win[lv], _gt(cnt[lv], k + 1),
                               Mux(upd_fin[lv], _gt(trip[lv], k), _gt(cnt[lv], k))))

            def trip_next_gt(lv, k):
                return Mux(loop_lv[lv], _gt(ctl.imm, k), _gt(trip[lv], k))

            loads += [(x, v) for lv in range(nl) for x, v in
                      ((cnt_gt1[lv], cnt_next_gt(lv, 1)), (cnt_gt2[lv], cnt_next_gt(lv, 2)),
                       (trip_gt1[lv], trip_next_gt(lv, 1)))]
            if astage:
                loads += [(x, v) for lv in range(nl) for x, v in
                          ((cnt_gt3[lv], cnt_next_gt(lv, 3)), (trip_gt2[lv], trip_next_gt(lv, 2)))]
        loads += list(zip(base, base_n))
        for a in range(na):
            loads += [(off[a][lv], off_n[a][lv]) for lv in range(nl)]
            loads += [(off_p[a][lv], off_n[a][lv] + stride_n[a][lv]) for lv in range(nl)]
            loads += [(stride[a][lv], stride_n[a][lv]) for lv in range(nl)]
            loads += [(agu[a], csa_sum([base_n[a], *off_n[a]]))]
        if fetch:
            # Loaded when the head issues, with an enable gate per GO_CHUNK bits of state
            # (submodules ``go_en<k>``, kept separate by the FPGA build like ``head_en<k>``):
            # the stall decision then fans out to a few gates, each near its registers,
            # instead of to the clock enables of a thousand flip-flops. The same ``~start &
            # go``, from flip-flops and ``stall`` (one LUT4). (A start has priority: above.)
            chunks, cur, width = [], [], 0
            for x, v in loads:
                cur.append((x, v))
                width += len(x)
                if width >= self.GO_CHUNK:
                    chunks.append(cur)
                    cur, width = [], 0
            chunks += [cur] if cur else []
            for k, chunk in enumerate(chunks):
                en = enable_copy(f"go_en{k}", ~self.start & running & ~filling & ~self.stall, "go_en")
                with m.If(en):
                    m.d.sync += [x.eq(v) for x, v in chunk]
        else:
            with m.If(~self.start & go):
                m.d.sync += [x.eq(v) for x, v in loads]
        # a start clears this state (after the loads, which it excludes anyway, so the
        # clear is the outermost choice of each flip-flop's input: a synchronous reset)
        with m.If(self.start):
            m.d.sync += [x.eq(0) for x in armed + base + agu]
            m.d.sync += [x.eq(0) for row in stride + off + off_p for x in row]
        return m
