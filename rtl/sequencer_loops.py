"""The sequencer's loop and AGU logic: loop-end scans, the loop state as the head's issue
leaves it, the fetch and address stages' next-pc scans, and the AGU state and values.

These build parts of :meth:`rtl.sequencer.Sequencer.elaborate`. Each builder takes the
module ``m``, the :class:`arch.config.ArchConfig` and ``s``, the namespace of the
sequencer's nets (its fields are named as the nets they hold), reads the nets built
before it from ``s`` and adds the ones it builds. Specified in ``docs/core.md`` (section
"The sequencer"); the class notes of :class:`rtl.sequencer.Sequencer` describe the
stages.
"""

from __future__ import annotations

from functools import reduce

from amaranth.hdl import Cat, Const, Mux, Signal

from arch.isa import AGU_FIELDS, SeqOp

__all__ = ["gt_const", "loop_scan", "csa_sum", "head_scan", "loop_state_next", "fetch_scan", "agu_next"]


def gt_const(x, k: int):
    """``x > k`` for a small constant ``k``: an OR of the bits above ``k``'s and a compare of
    the bits below (LUT logic; Yosys maps a ``>`` of a wide signal to a carry chain)."""
    b = k.bit_length()
    hi = x[b:].any() if len(x) > b else Const(0)
    return hi | (x[:b] > k) if b else x.any()


def loop_scan(m, nl, pcw, at, match, gt1, st_lstart, tag):
    """Loop-end scan of the instruction at ``at``, given per level whether it ends
    the armed loop (``match``) and whether the loop's count is above 1 (``gt1``):
    the levels that branch back (``win``) and finish (``fin``), and the next pc
    without a ``JUMP``.

    Parameters
    ----------
    m : Module
    nl, pcw : int
        Loop levels and pc bits.
    at : Value
        The instruction's pc.
    match, gt1 : list of Value
        Per level (see above).
    st_lstart : list of Value
        The levels' loop starts (branch targets).
    tag : str
        Prefix of the nets' names (``<tag>loop<lv>_cand`` / ``_branch`` / ``_finish``,
        ``<tag>loop_next``).

    Returns
    -------
    win, fin : list of Signal
        Comb, one-hot over the levels (the innermost candidate wins).
    nxt : Signal
        Comb: the branching level's start, or ``at + 1``.
    """
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


def csa_sum(xs, aw):
    """Sum of ``xs`` mod 2^aw: carry-save adders (three operands to two, one LUT level per
    bit) down to two operands, then one adder (carry chain), instead of a tree of adders
    (one carry chain per level)."""
    while len(xs) > 2:
        nxt = []
        for i in range(0, len(xs) - 2, 3):
            a, b, c = xs[i:i + 3]
            nxt += [(a ^ b ^ c)[:aw], Cat(Const(0, 1), (a & b) | (a & c) | (b & c))[:aw]]
        xs = nxt + xs[len(xs) - len(xs) % 3:]      # (the operands left over)
    return (xs[0] + xs[1])[:aw] if len(xs) == 2 else xs[0]


def head_scan(m, cfg, s):
    """Build the loop-end scan of the head: ``s.win`` / ``s.fin`` per level (with the
    fetch stage registers, loaded by the head load; without it comb, from registers
    only) and, without the fetch stage, ``s.next_pc`` (comb: the ``JUMP`` target or the
    scan's next pc)."""
    nl, pcw = cfg.n_loops, cfg.pc_bits
    s.next_pc = None
    if s.fetch:
        # done when the head was the instruction behind it (below), kept in registers
        s.win = [Signal(name=f"loop{lv}_branch") for lv in range(nl)]
        s.fin = [Signal(name=f"loop{lv}_finish") for lv in range(nl)]
    else:
        armed, lend, cnt, pc = s.armed, s.lend, s.cnt, s.pc
        # registers only: head pc, loop ends, counters
        win, fin, loop_next = loop_scan(m, nl, pcw, pc, [armed[lv] & (lend[lv] == pc) for lv in range(nl)],
                                        [gt_const(cnt[lv], 1) for lv in range(nl)], s.lstart, "")
        next_pc = Signal(pcw)
        m.d.comb += next_pc.eq(Mux(s.is_jump, s.ctl.target, loop_next))
        s.win, s.fin, s.next_pc = win, fin, next_pc


def loop_state_next(m, cfg, s):
    """Build the loop state as the head's issue leaves it (comb ``loop<lv>_*_next``:
    start, end, trip, count, armed), the head's LOOP write per level (``loop_lv``) and
    the loop-end effects ``upd_win`` / ``upd_fin`` / ``clr`` (flip-flops with the fetch
    stage, loaded by the head load); all added to ``s``."""
    nl, pcw, lw = cfg.n_loops, cfg.pc_bits, cfg.loop_bits
    fetch, ctl = s.fetch, s.ctl
    lstart, lend, trip, cnt, armed = s.lstart, s.lend, s.trip, s.cnt, s.armed
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
        upd = s.live & ~s.is_jump & ~s.is_halt
        upd_win = [upd & s.win[lv] for lv in range(nl)]
        upd_fin = [upd & s.fin[lv] for lv in range(nl)]
        clr = [upd_fin[lv] | (s.is_loop & (ctl.lvl == lv)) for lv in range(nl)]
    for lv in range(nl):
        m.d.comb += [loop_lv[lv].eq(s.head_loop_lv[lv] if fetch else s.live & s.is_loop & (ctl.lvl == lv)),
                     lstart_n[lv].eq(lstart[lv]), lend_n[lv].eq(lend[lv]), trip_n[lv].eq(trip[lv]),
                     cnt_n[lv].eq(cnt[lv]), armed_n[lv].eq(armed[lv])]
        with m.If(upd_win[lv]):
            m.d.comb += cnt_n[lv].eq(cnt[lv] - 1)
        with m.If(upd_fin[lv]):
            m.d.comb += cnt_n[lv].eq(trip[lv])
        with m.If(loop_lv[lv]):
            m.d.comb += [lstart_n[lv].eq(s.pc_inc), lend_n[lv].eq(ctl.target), trip_n[lv].eq(ctl.imm),
                         cnt_n[lv].eq(ctl.imm), armed_n[lv].eq(1)]
    vars(s).update(lstart_n=lstart_n, lend_n=lend_n, trip_n=trip_n, cnt_n=cnt_n, armed_n=armed_n,
                   loop_lv=loop_lv, upd_win=upd_win, upd_fin=upd_fin, clr=clr)


def fetch_scan(m, cfg, s, seq):
    """Build the fetch stage's next-pc scan (``cfg.fetch_stage`` only): ``pc_f`` (the pc
    of the instruction behind the head, the RAM output), ``advance`` (the head moves up
    or refills), ``jump_head``, the microcode read port's address and enable, and (by
    :func:`_addr_stage_scan` or :func:`_fetch_stage_scan`) the scan of the instruction
    behind the head; adds ``scan_regs`` (the head's decode and scan, cleared while the
    head holds no instruction) to ``s``. ``seq`` is the :class:`Sequencer` (its ports)."""
    pcw = cfg.pc_bits
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
        jump_head.eq(s.is_jump),          # (0 while the head refills: above)
        advance.eq(s.filling | s.go),
        pc_f_inc.eq(pc_f + 1),
    ]
    vars(s).update(pc_f=pc_f, advance=advance, jump_head=jump_head, pc_f_inc=pc_f_inc)
    if s.astage:
        _addr_stage_scan(m, cfg, s, seq)
    else:
        _fetch_stage_scan(m, cfg, s, seq)
    # the head's decode and scan that the next-pc scan reads ungated (above)
    s.scan_regs = ([s.is_jump, *s.head_loop_lv, *s.win, *s.fin, *s.upd_win, *s.upd_fin, *s.clr]
                   + ([s.head_rep, s.head_t1loop] if s.astage else []))


def _addr_stage_scan(m, cfg, s, seq):
    """Build the address stage's scan (``cfg.addr_stage``): the address register ``pc_a``
    (two ahead of the head), the scan of its successor, the registered scan results of
    the instruction behind the head (``s.f_win`` / ``s.f_fin``) and the head's scan
    result when that instruction moves up (``s.up_win`` / ``s.up_fin``, comb)."""
    nl, pcw = cfg.n_loops, cfg.pc_bits
    rp, ctl, go, is_jump = s.rp, s.ctl, s.go, s.is_jump
    pc_f, advance, jump_head, pc_f_inc, fill_f = s.pc_f, s.advance, s.jump_head, s.pc_f_inc, s.fill_f
    win, fin, armed, lstart_n, lend_n, loop_lv = s.win, s.fin, s.armed, s.lstart_n, s.lend_n, s.loop_lv
    cnt_gt1, cnt_gt2, cnt_gt3, trip_gt1, trip_gt2 = s.cnt_gt1, s.cnt_gt2, s.cnt_gt3, s.trip_gt1, s.trip_gt2
    head_rep, head_t1loop, head_t2 = s.head_rep, s.head_t1loop, s.head_t2
    head_imm_gt1, head_imm_gt2 = s.head_imm_gt1, s.head_imm_gt2
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
    a_win, a_fin, a_next = loop_scan(m, nl, pcw, pc_a, a_match, a_gt1, lstart_n, "a_")
    # the repeating body's second issue: the LOOP's level ends there, the
    # first issue branched back on that level (no other level changes)
    x_match = [Mux(loop_lv[lv], 1, armed[lv] & at_end_f[lv]) for lv in range(nl)]
    x_gt1 = [Mux(loop_lv[lv], head_imm_gt2, cnt_gt1[lv]) for lv in range(nl)]
    x_win, x_fin, x_next = loop_scan(m, nl, pcw, pc_f, x_match, x_gt1, lstart_n, "x_")
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

    with m.If(seq.start):
        m.d.sync += [pc_a.eq(seq.start_pc), fill_f.eq(1)]
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
    vars(s).update(f_win=f_win, f_fin=f_fin, up_win=up_win, up_fin=up_fin)


def _fetch_stage_scan(m, cfg, s, seq):
    """Build the fetch stage's scan without the address stage: the loop-end compares
    with ``pc_f`` as flip-flops, the scan of the instruction behind the head
    (``s.f_win`` / ``s.f_fin``, comb) and the RAM's read address (the start pc, the
    head's ``JUMP`` target or the scan's next pc, comb)."""
    nl, pcw = cfg.n_loops, cfg.pc_bits
    rp, ctl, armed, lend, lstart_n, lend_n, loop_lv = s.rp, s.ctl, s.armed, s.lend, s.lstart_n, s.lend_n, s.loop_lv
    upd_win, upd_fin, cnt_gt1, cnt_gt2, trip_gt1 = s.upd_win, s.upd_fin, s.cnt_gt1, s.cnt_gt2, s.trip_gt1
    pc_f, advance, jump_head, pc_f_inc = s.pc_f, s.advance, s.jump_head, s.pc_f_inc
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
    f_match = [Mux(loop_lv[lv], s.head_t1, armed[lv] & at_end[lv]) for lv in range(nl)]
    f_gt1 = [Mux(loop_lv[lv], s.head_imm_gt1,
                 Mux(upd_win[lv], cnt_gt2[lv], Mux(upd_fin[lv], trip_gt1[lv], cnt_gt1[lv])))
             for lv in range(nl)]
    f_win, f_fin, f_loop_next = loop_scan(m, nl, pcw, pc_f, f_match, f_gt1, lstart_n, "f_")
    m.d.comb += [
        rp.addr.eq(Mux(seq.start, seq.start_pc, Mux(jump_head, ctl.target, f_loop_next))),
        rp.en.eq(seq.start | advance),
    ]

    def at_next(v, v_start):
        """``v == rp.addr``, as the AND-OR of ``v``'s compares with the candidate
        addresses (``v_start`` in place of ``v`` at a start)."""
        back = reduce(lambda x, y: x | y, [f_win[k] & (v == lstart_n[k]) for k in range(nl)])
        return Mux(seq.start, v_start == seq.start_pc,
                   Mux(jump_head, v == ctl.target, Mux(Cat(*f_win).any(), back, v == pc_f_inc)))

    with m.If(seq.start | advance):
        m.d.sync += pc_f.eq(rp.addr)      # the address being read (one mux fewer)
        # loop ends change only when the head issues (lend_next), never at a start
        m.d.sync += [at_end[lv].eq(at_next(lend_n[lv], lend[lv])) for lv in range(nl)]
    vars(s).update(f_win=f_win, f_fin=f_fin, up_win=None, up_fin=None)


def agu_next(m, cfg, s, uop_shape):
    """Build the AGU state as the head's issue leaves it (comb ``agu<a>_base_next``,
    ``agu<a>_off<lv>_next``, ``agu<a>_stride<lv>_next``), the stepped offsets
    ``agu<a>_off<lv>_stepped`` and the AGU values ``agu<a>_value`` (registers, loaded
    with the state) and ``new_uop`` (comb, of shape ``uop_shape``): the head's micro-op
    with the selected AGU values added to its offsets; all added to ``s``."""
    nl, na, aw = cfg.n_loops, cfg.n_agus, cfg.addr_bits
    ctl, head, base, stride, off = s.ctl, s.head, s.base, s.stride, s.off
    upd_win, clr, head_base, head_stride = s.upd_win, s.clr, s.head_base, s.head_stride
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
    if not s.fetch:
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

    agu = [Signal(aw, name=f"agu{a}_value", reset_less=True) for a in range(na)]
    new_uop = Signal(uop_shape)
    m.d.comb += new_uop.eq(head.uop)
    for fld in AGU_FIELDS:
        sel = ctl[f"ag_{fld}"]
        add = Signal(aw, name=f"agu_add_{fld}")
        with m.Switch(sel):
            for a in range(na):
                with m.Case(a + 1):
                    m.d.comb += add.eq(agu[a])
        m.d.comb += new_uop[fld].off.eq(head.uop[fld].off + add)
    vars(s).update(base_n=base_n, off_n=off_n, off_p=off_p, stride_n=stride_n, agu=agu, new_uop=new_uop)
