"""The core's microprogrammed sequencer: microcode RAM, zero-overhead loops, AGUs.

Specified in ``docs/core.md`` (section "The sequencer"); :class:`sim.seq_model.SequencerModel`
is the executable reference and the RTL tests compare the two cycle by cycle.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from pe.layouts import instr_layout, uop_layout
from rtl.fpga import global_net
from rtl.sequencer_loops import agu_next, csa_sum, fetch_scan, gt_const, head_scan, loop_state_next
from arch.isa import DMA_N_BITS, DmaOp, SeqOp

__all__ = ["Sequencer"]


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
    uop : Out(uop_layout(*cfg.uop_key))
        Registered: the issued micro-op with AGU ``k-1``'s value added to ``ra.off`` /
        ``rb.off`` / ``wa.off`` / ``wb.off`` when ``ag_ra`` / ... = ``k`` (mod
        ``2^addr_bits``); all-zero (a NOP) when ``issue`` is 0, except in the cycle after
        a stall, when it holds the stalled head's micro-op (the core freezes its PE side
        in that cycle, so it is never executed; no stall decision drives its bits).
    uop_next : Out(uop_layout(*cfg.uop_key))
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
    need_dma, dma_waits : Out(1), dma_keep : Out(8)
        (``cfg.dram_mib > 0`` only) Combinational: ``running`` and the head is a DMA
        start or wait (the core stalls a start while its DMA engine's queue is full, a
        wait while more than ``dma_keep`` transfers are outstanding); ``dma_waits``: the
        head is a wait; ``dma_keep``: its ``dma_n`` field (``dma wait K``).
    dma_start, dma_store, dma_n, dma_dram, dma_spad : Out
        (``cfg.dram_mib > 0`` only) Registered: the issued instruction starts a DMA
        transfer (a store), of ``dma_n + 1`` beats at DRAM beat ``dma_dram`` and
        scratchpad beat ``dma_spad`` (the DMA address registers before its own update).
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
            "uop": Out(uop_layout(*cfg.uop_key)),
            "uop_next": Out(uop_layout(*cfg.uop_key)),
            "hin": Out(2),
            "hout": Out(2),
            "hlast": Out(1),
            "rin": Out(1),
            "rout": Out(1),
            "pc": Out(cfg.pc_bits),
            "halted": Out(1),
            **({"sin": Out(1), "sout": Out(1), "spad_raddr": Out(cfg.spad_addr_bits),
                "spad_waddr": Out(cfg.spad_addr_bits)} if cfg.spad_kib else {}),
            **({"need_dma": Out(1), "dma_waits": Out(1), "dma_keep": Out(DMA_N_BITS), "dma_start": Out(1), "dma_store": Out(1), "dma_n": Out(DMA_N_BITS),
                "dma_dram": Out(cfg.dram_addr_bits), "dma_spad": Out(cfg.spad_addr_bits)} if cfg.dram_mib else {}),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        # the nets shared by the builders below (and rtl.sequencer_loops), by name
        s = SimpleNamespace(fetch=cfg.fetch_stage, astage=cfg.addr_stage, spad=bool(cfg.spad_kib))
        enable_copy = self._enable_copier(m, platform)
        self._ucode(m, s)
        self._state(m, s)
        self._head_decode(m, s)
        # -- loop-end scan of the head ------------------------------------------------------
        head_scan(m, cfg, s)
        # -- the loop state as the head's issue leaves it ------------------------------------
        loop_state_next(m, cfg, s)
        if s.fetch:
            fetch_scan(m, cfg, s, self)
            self._head_load(m, s, enable_copy)
        else:
            m.d.comb += [
                s.rp.addr.eq(Mux(self.start, self.start_pc, s.next_pc)),
                s.rp.en.eq(self.start | s.go),
            ]
        # -- AGU state as the head's issue leaves it, and the AGU values ---------------------
        agu_next(m, cfg, s, self.uop.shape())
        self._issue(m, s)
        if cfg.dram_mib:
            self._dma_issue(m, s)
        self._state_loads(m, s, enable_copy)
        return m

    def _dma_issue(self, m, s):
        """(``cfg.dram_mib > 0``) ``need_dma`` (comb: the head is a DMA start or wait), the
        DMA address registers (0 after ``start``; a start advances both by its beats, a
        ``DMA_PTR`` sets the selected ones to ``imm | target << loop_bits``) and the
        registered transfer of the issued instruction (``dma_start`` ... ``dma_spad``)."""
        cfg = self.cfg
        ctl, go = s.ctl, s.go
        dptr = Signal(cfg.dram_addr_bits)
        sptr = Signal(cfg.spad_addr_bits)
        val = Signal(cfg.loop_bits + cfg.pc_bits)
        is_start = (ctl.dma == DmaOp.LOAD) | (ctl.dma == DmaOp.STORE)
        n1 = ctl.dma_n + 1
        m.d.comb += [val.eq(Cat(ctl.imm, ctl.target)), self.need_dma.eq(s.live & (ctl.dma != 0)),
                     self.dma_waits.eq(s.live & (ctl.dma == DmaOp.WAIT)), self.dma_keep.eq(ctl.dma_n)]
        regs = [self.dma_start, self.dma_store, self.dma_n, self.dma_dram, self.dma_spad]
        is_ptr = ctl.op == SeqOp.DMA_PTR
        with m.If(self.start):
            m.d.sync += [dptr.eq(0), sptr.eq(0)] + [r.eq(0) for r in regs]
        with m.Elif(go):
            m.d.sync += [self.dma_start.eq(is_start), self.dma_store.eq(ctl.dma == DmaOp.STORE),
                         self.dma_n.eq(ctl.dma_n), self.dma_dram.eq(dptr), self.dma_spad.eq(sptr)]
            with m.If(is_ptr & ctl.lvl[0]):
                m.d.sync += dptr.eq(val)
            with m.Elif(is_start):
                m.d.sync += dptr.eq(dptr + n1)
            with m.If(is_ptr & ctl.lvl[1]):
                m.d.sync += sptr.eq(val)
            with m.Elif(is_start):
                m.d.sync += sptr.eq(sptr + n1)
        with m.Else():
            m.d.sync += self.dma_start.eq(0)

    def _enable_copier(self, m, platform):
        """Return ``enable_copy(name, expr, net)``, which builds a copy of a load-enable
        gate ``expr`` in a submodule of its own (``name``; the FPGA build keeps these
        modules, rtl.fpga.keep_enable_copies, so synthesis does not merge the copies back
        into one gate) and returns its output. On an ECP5 build the first copy drives a
        global network instead (:func:`rtl.fpga.global_net`; ``net`` names it), which
        every later copy of the same enable shares."""
        shared_en = {}

        def enable_copy(name, expr, net):
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
        return enable_copy

    def _ucode(self, m, s):
        """Build the microcode RAM (submodule ``ucode``) with its registered write port
        (``load_*`` land one cycle later) and its read port ``s.rp`` (one cycle of
        latency), the bits stored beside each word (fetch / address stage),
        and the head instruction: ``s.head`` / ``s.ctl`` (the RAM output, or with the
        fetch stage the ``head_word`` register loaded from it)."""
        cfg = self.cfg
        fetch, astage = s.fetch, s.astage         # (astage requires fetch: ArchConfig checks it)
        nl, pcw = cfg.n_loops, cfg.pc_bits
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
        head_word = head_t1 = head_t2 = None
        if fetch:
            ld_target = data.View(self._ilay, self.load_data).ctl.target
            ld_t1 = ld_target == (self.load_addr + 1)[:pcw]
            if astage:
                ld = data.View(self._ilay, self.load_data).ctl
                ld_loop = (ld.op == SeqOp.LOOP) & (ld.lvl < nl)
                m.d.comb += wp_data.eq(Cat(self.load_data, ld_loop & ld_t1, ld_target == (self.load_addr + 2)[:pcw],
                                           gt_const(ld.imm, 1), gt_const(ld.imm, 2)))
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
        vars(s).update(isz=isz, rp=rp, head_word=head_word, head=head, head_t1=head_t1, head_t2=head_t2,
                       ctl=head.ctl)

    def _state(self, m, s):
        """Build the sequencer's state registers (``running``, the head's ``pc``, the loop
        levels' start / end / trip / count / armed, the AGUs' base / strides / offsets),
        ``go`` and ``live`` (declared; driven by :meth:`_head_decode`) and the head's
        stream flags ``h_sin`` / ``h_sout`` / ``h_rin`` / ``h_rout`` (comb); all added to
        ``s``."""
        cfg = self.cfg
        fetch, ctl = s.fetch, s.ctl
        nl, na = cfg.n_loops, cfg.n_agus
        pcw, lw, aw = cfg.pc_bits, cfg.loop_bits, cfg.addr_bits
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
        h_sin = Signal()                      # the head's scratchpad flags
        h_sout = Signal()
        m.d.comb += [x.eq(v) for x, v in zip((h_sin, h_sout), self._spad_flags(ctl))]
        h_rin = Signal()
        h_rout = Signal()
        m.d.comb += [h_rin.eq(ctl.rin & ~h_sin), h_rout.eq(ctl.rout & ~h_sout)]
        vars(s).update(running=running, pc=pc, pc_inc=pc_inc, lstart=lstart, lend=lend, trip=trip, cnt=cnt,
                       armed=armed, base=base, stride=stride, off=off, go=go, live=live, h_sin=h_sin,
                       h_sout=h_sout, h_rin=h_rin, h_rout=h_rout)

    def _spad_flags(self, c):
        """Stream input / output from / to the scratchpad of an instruction with control
        fields ``c`` (0 without a scratchpad)."""
        if not self.cfg.spad_kib:
            return Const(0), Const(0)
        return c.sin & (c.hin != 0), c.sout & (c.hout != 0)

    def _stream_needs(self, c):
        """The stream needs (host in, host out, ring in, ring out) of an instruction
        with control fields ``c``; the scratchpad flags take precedence over the ring."""
        sin, sout = self._spad_flags(c)
        rin, rout = c.rin & ~sin, c.rout & ~sout
        return ((c.hin != 0) & ~rin & ~sin, (c.hout != 0) & ~rout & ~sout,
                (c.hin != 0) & rin, (c.hout != 0) & rout)

    def _head_decode(self, m, s):
        """Build ``live``, ``go`` and the outputs ``running`` / ``need_*`` (comb), and the
        head's decode: its op (``is_loop`` / ``is_jump`` / ``is_halt``), its LOOP level,
        AGU writes and the loop counters' compares (flip-flops with the fetch stage,
        loaded by :meth:`_head_load`; comb decodes of the head without it); all added to
        ``s`` (None where a stage does not have them)."""
        cfg = self.cfg
        fetch, astage, ctl, live = s.fetch, s.astage, s.ctl, s.live
        nl, na = cfg.n_loops, cfg.n_agus
        filling = fill_f = None
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
            needs = self._stream_needs(ctl)
        m.d.comb += [
            live.eq(s.running & ~filling if fetch else s.running),
            s.go.eq(live & ~self.stall),
            self.running.eq(live),
            self.need_hin.eq(live & needs[0]),
            self.need_hout.eq(live & needs[1]),
            self.need_rin.eq(live & needs[2]),
            self.need_rout.eq(live & needs[3]),
        ]
        head_loop_lv = head_imm_gt1 = head_base = head_stride = cnt_gt1 = cnt_gt2 = trip_gt1 = None
        cnt_gt3 = trip_gt2 = head_imm_gt2 = head_t1loop = head_rep = None
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
        vars(s).update(filling=filling, fill_f=fill_f, needs=needs, is_loop=is_loop, is_jump=is_jump,
                       is_halt=is_halt, head_loop_lv=head_loop_lv, head_imm_gt1=head_imm_gt1, head_base=head_base,
                       head_stride=head_stride, cnt_gt1=cnt_gt1, cnt_gt2=cnt_gt2, trip_gt1=trip_gt1, cnt_gt3=cnt_gt3,
                       trip_gt2=trip_gt2, head_imm_gt2=head_imm_gt2, head_t1loop=head_t1loop, head_rep=head_rep)

    def _head_load(self, m, s, enable_copy):
        """Build the fetch stage's head loads: ``pc`` / ``pc_inc``, ``filling`` and
        ``running``, and the head's decode and scan registers, loaded from the RAM output
        (and the scan of the instruction behind the head) when the head advances, cleared
        at a start and when a ``JUMP`` issues; and the ``head_word`` register, loaded in
        ``HEAD_CHUNK``-bit chunks under copies of its enable (submodules
        ``head_en<k>``)."""
        nl, na = self.cfg.n_loops, self.cfg.n_agus
        astage, rp, isz, scan_regs, filling, fill_f = s.astage, s.rp, s.isz, s.scan_regs, s.filling, s.fill_f
        pc, pc_f, pc_inc, go, is_jump, running = s.pc, s.pc_f, s.pc_inc, s.go, s.is_jump, s.running
        head_loop_lv, head_base, head_stride, head_word = s.head_loop_lv, s.head_base, s.head_stride, s.head_word
        upd_win, upd_fin, clr = s.upd_win, s.upd_fin, s.clr
        with m.If(self.start):
            m.d.sync += filling.eq(1)
            m.d.sync += [x.eq(0) for x in scan_regs]
        with m.Elif(s.advance):
            m.d.sync += [pc.eq(pc_f), pc_inc.eq(pc_f + 1),
                         filling.eq((go & is_jump) | fill_f if astage else go & is_jump)]
            nctl = data.View(self._ilay, rp.data[:isz]).ctl
            m.d.sync += [s.is_loop.eq(nctl.op == SeqOp.LOOP), is_jump.eq(nctl.op == SeqOp.JUMP),
                         s.is_halt.eq(nctl.op == SeqOp.HALT),
                         s.head_imm_gt1.eq(rp.data[isz + 2] if astage else gt_const(nctl.imm, 1))]
            n_loop_lv = [(nctl.op == SeqOp.LOOP) & (nctl.lvl == lv) for lv in range(nl)]
            m.d.sync += [head_loop_lv[lv].eq(n_loop_lv[lv]) for lv in range(nl)]
            m.d.sync += [x.eq(v) for x, v in zip(s.needs, self._stream_needs(nctl))]
            # the head's scan, and its effect when it issues (upd_win / upd_fin / clr)
            h_win, h_fin = (s.up_win, s.up_fin) if astage else (s.f_win, s.f_fin)
            n_upd = (nctl.op != SeqOp.JUMP) & (nctl.op != SeqOp.HALT)
            m.d.sync += [x.eq(y) for x, y in zip(s.win + s.fin, h_win + h_fin)]
            m.d.sync += [upd_win[lv].eq(h_win[lv] & n_upd) for lv in range(nl)]
            m.d.sync += [upd_fin[lv].eq(h_fin[lv] & n_upd) for lv in range(nl)]
            m.d.sync += [clr[lv].eq(h_fin[lv] & n_upd | n_loop_lv[lv]) for lv in range(nl)]
            # the head's AGU_BASE / AGU_STRIDE writes, decoded as it is loaded
            m.d.sync += [head_base[a].eq((nctl.op == SeqOp.AGU_BASE) & (nctl.agu == a)) for a in range(na)]
            m.d.sync += [head_stride[a][lv].eq((nctl.op == SeqOp.AGU_STRIDE) & (nctl.agu == a) & (nctl.lvl == lv))
                         for a in range(na) for lv in range(nl)]
            if astage:                    # (the bits stored beside the word)
                m.d.sync += [s.head_imm_gt2.eq(rp.data[isz + 3]), s.head_t1loop.eq(rp.data[isz]),
                             s.head_rep.eq(rp.data[isz] & rp.data[isz + 2])]
                # nothing was behind the head (the cycle after a start or a JUMP): the
                # head stays empty
                with m.If(fill_f):
                    m.d.sync += [x.eq(0) for x in scan_regs]
            # a JUMP issues (advance with is_jump: the head was live, so it went): the
            # head refills next cycle, holding no instruction until then
            with m.If(is_jump):
                m.d.sync += [x.eq(0) for x in scan_regs]
                if astage:                # ... and so does the stage behind it
                    m.d.sync += [x.eq(0) for x in s.f_win + s.f_fin]
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

    def _issue(self, m, s):
        """Build the issue registers (outputs ``issue``, ``uop`` / ``uop_next``, ``hin``
        ... ``pc``, ``halted``, and with a scratchpad ``sin`` / ``sout`` and the pointers
        ``spad_raddr`` / ``spad_waddr``), loaded when the head issues and cleared at a
        start or a bubble; and ``running`` / ``pc`` without the fetch stage."""
        cfg = self.cfg
        fetch, spad, ctl, go, running, pc = s.fetch, s.spad, s.ctl, s.go, s.running, s.pc
        h_sin, h_sout, is_halt = s.h_sin, s.h_sout, s.is_halt
        # -- sequential behaviour --------------------------------------------------------
        # The micro-op register is cleared at its input when the head is empty (gating it
        # with ``issue`` at the output instead puts a LUT in front of the distribution
        # copies' die-wide fan-out, the 4 x 4 core's critical path at 18.4 ns) and loaded
        # whenever the head holds an instruction (``live``, flip-flops only), stall or
        # not: after a stall the core freezes the whole PE side for the bubble cycle, so
        # what it holds then is never executed, and the stall decision drives no clear or
        # enable of its bits (a 2 x 2 build's critical endpoints; docs/fpga.md, "Timing").
        issue_regs = [self.issue, self.hin, self.hout, self.hlast, self.rin, self.rout, self.pc, self.halted]
        m.d.comb += self.uop_next.eq(Mux(self.start | ~s.live, 0, s.new_uop))
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
                self.rin.eq(s.h_rin),
                self.rout.eq(s.h_rout),
                self.pc.eq(pc),
                self.halted.eq(is_halt),
            ]
            if not fetch:
                m.d.sync += pc.eq(s.next_pc)
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

    def _state_loads(self, m, s, enable_copy):
        """Build the loads of the loop and AGU state when the head issues (with the fetch
        stage also the counters' compare registers, in ``GO_CHUNK``-bit chunks under
        copies of the enable, submodules ``go_en<k>``) and the clear of the armed flags
        and AGU state at a start."""
        cfg = self.cfg
        nl, na, aw = cfg.n_loops, cfg.n_agus, cfg.addr_bits
        fetch, astage, ctl, running, filling = s.fetch, s.astage, s.ctl, s.running, s.filling
        lstart, lend, trip, cnt, armed = s.lstart, s.lend, s.trip, s.cnt, s.armed
        base, stride, off, off_p, agu = s.base, s.stride, s.off, s.off_p, s.agu
        base_n, off_n, stride_n, loop_lv, upd_win, upd_fin = s.base_n, s.off_n, s.stride_n, s.loop_lv, s.upd_win, s.upd_fin
        # -- the loop and AGU state loads when the head issues -------------------------------
        loads = list(zip(lstart + lend + trip + cnt + armed, s.lstart_n + s.lend_n + s.trip_n + s.cnt_n + s.armed_n))
        if fetch:
            # the next count's and trip's compares, chosen like the next count from
            # compares of the registers (a decremented count ``cnt - 1 > k`` is
            # ``cnt > k + 1``: a level branches back only with ``cnt > 1``), not made
            # after the decrement and the choice
            def cnt_next_gt(lv, k):
                return Mux(loop_lv[lv], gt_const(ctl.imm, k),
                           Mux(upd_win[lv], gt_const(cnt[lv], k + 1),
                               Mux(upd_fin[lv], gt_const(trip[lv], k), gt_const(cnt[lv], k))))

            def trip_next_gt(lv, k):
                return Mux(loop_lv[lv], gt_const(ctl.imm, k), gt_const(trip[lv], k))

            loads += [(x, v) for lv in range(nl) for x, v in
                      ((s.cnt_gt1[lv], cnt_next_gt(lv, 1)), (s.cnt_gt2[lv], cnt_next_gt(lv, 2)),
                       (s.trip_gt1[lv], trip_next_gt(lv, 1)))]
            if astage:
                loads += [(x, v) for lv in range(nl) for x, v in
                          ((s.cnt_gt3[lv], cnt_next_gt(lv, 3)), (s.trip_gt2[lv], trip_next_gt(lv, 2)))]
        loads += list(zip(base, base_n))
        for a in range(na):
            loads += [(off[a][lv], off_n[a][lv]) for lv in range(nl)]
            loads += [(off_p[a][lv], off_n[a][lv] + stride_n[a][lv]) for lv in range(nl)]
            loads += [(stride[a][lv], stride_n[a][lv]) for lv in range(nl)]
            loads += [(agu[a], csa_sum([base_n[a], *off_n[a]], aw))]
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
            with m.If(~self.start & s.go):
                m.d.sync += [x.eq(v) for x, v in loads]
        # a start clears this state (after the loads, which it excludes anyway, so the
        # clear is the outermost choice of each flip-flop's input: a synchronous reset)
        with m.If(self.start):
            m.d.sync += [x.eq(0) for x in armed + base + agu]
            m.d.sync += [x.eq(0) for row in stride + off + off_p for x in row]
