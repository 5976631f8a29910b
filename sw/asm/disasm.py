"""The disassembler: assembly text that :func:`sw.asm.assemble` turns back into the
same program."""

from __future__ import annotations

from arch.isa import Instruction, SeqOp

from sw.asm.context import _ctx
from sw.asm.errors import AsmError
from sw.asm.fieldtext import _GROUPS, _group_text
from sw.asm.operands import _DMA_OPS, _DMA_SEL, _SPAD_SEL

LOOP_NAMES = "ijklmnop"   # names the disassembler gives to loop levels 0..7


def _signed(v, bits):
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _instr_fields(ins: Instruction, cx) -> dict:
    f = {k: v for k, v in ins.uop.f.items() if v}
    f.update({k: v for k, v in ins.ctl.items() if v})
    for k in list(f):
        if k in cx.signed:
            f[k] = _signed(f[k] & ((1 << cx.widths[k]) - 1), cx.widths[k])
    return f


def disassemble(prog, cfg, *, origin: int | None = None, pcs: bool = True) -> str:
    """Assembly text for ``prog`` (Instructions, integer words or a :class:`Program`).

    :func:`assemble` of the result (with the same ``origin``) gives back the same
    instructions. Loops are shown as nested blocks named after their level (``i`` for
    level 0, ``j`` for 1, ...), with ``level=N`` when a level is not the enclosing level
    plus one; jump targets get labels ``L<address>``; fields no syntax form expresses
    are printed as ``raw name=value``. ``pcs`` appends each instruction's address as a
    comment. Raises :class:`AsmError` for loop structures that blocks cannot express.
    """
    if origin is None:
        origin = getattr(prog, "origin", 0)
    cx = _ctx(cfg)
    instrs = [Instruction.decode(w, cfg) if isinstance(w, int) else w for w in prog]
    n = len(instrs)
    end_pc = origin + n - 1
    # loop structure
    loops = {}
    for i, ins in enumerate(instrs):
        if ins.op == SeqOp.LOOP:
            pc = origin + i
            if not pc < ins.target <= end_pc:
                raise AsmError(f"address {pc}: loop body {pc + 1}..{ins.target} is empty or outside "
                               f"the program ({origin}..{end_pc})")
            loops[pc] = ins
    levels = {}
    stack: list[int] = []
    for pc in sorted(loops):
        while stack and loops[stack[-1]].target < pc:
            stack.pop()
        lv = loops[pc].lvl
        if stack:
            par = loops[stack[-1]]
            if loops[pc].target > par.target:
                raise AsmError(f"address {pc}: loop body {pc + 1}..{loops[pc].target} overlaps the end of "
                               f"the enclosing loop body ..{par.target}: not a nested block")
            if lv <= par.lvl:
                raise AsmError(f"address {pc}: loop level {lv} is not above the enclosing loop's level {par.lvl}")
        if lv >= cfg.n_loops:
            raise AsmError(f"address {pc}: loop level {lv} >= cfg.n_loops={cfg.n_loops}")
        levels[pc] = lv
        stack.append(pc)
    level_names = {lv: LOOP_NAMES[lv] for lv in set(levels.values())}
    targets = {ins.target for ins in instrs if ins.op == SeqOp.JUMP}
    for t in targets:
        if not origin <= t <= end_pc:
            raise AsmError(f"jump target {t} is outside the program ({origin}..{end_pc})")
    out = []
    depth = 0
    open_ends: list[int] = []
    width = 0
    lines = []
    for i, ins in enumerate(instrs):
        pc = origin + i
        if pc in targets:
            lines.append((None, f"L{pc}:", None))
        text = _instr_text(ins, cx, level_names, loops, levels, pc)
        lines.append((depth, text, pc))
        if pc in loops:
            open_ends.append(loops[pc].target)
            depth += 1
        while open_ends and open_ends[-1] == pc:
            open_ends.pop()
            depth -= 1
            lines.append((depth, "}", None))
    for d, text, pc in lines:
        if d is not None and 4 * d + len(text) <= 72:
            width = max(width, 4 * d + len(text))
    for d, text, pc in lines:
        if d is None:
            out.append(text)
            continue
        s = "    " * d + text
        if pcs and pc is not None:
            s = s.ljust(width) + f"  ; {pc}"
        out.append(s)
    return "\n".join(out) + "\n"


def _dma_ptr_ok(ins, cfg) -> bool:
    """Whether a ``DMA_PTR``'s value is in range of every address it sets."""
    v = (ins.target << cfg.loop_bits) | ins.imm
    return (not ins.lvl & 1 or v < cfg.dram_depth) and (not ins.lvl & 2 or v < cfg.spad_depth)


def _instr_text(ins, cx, level_names, loops, levels, pc) -> str:
    cfg = cx.cfg
    f = _instr_fields(ins, cx)
    parts = []
    claimed = {"op"}
    for g in _GROUPS:
        try:
            t, c = _group_text(g, f, cx)
        except (ValueError, KeyError):
            t, c = None, set()
        if t:
            parts.append(t)
            claimed |= c
    op = f.get("op", 0)
    ctl = None
    if op == SeqOp.LOOP:
        lv = levels[pc]
        par = None
        for p in sorted(loops):
            if p < pc <= loops[p].target:
                par = p
        default = levels[par] + 1 if par is not None else 0
        ctl = f"loop {level_names[lv]} {ins.imm}" + (f" level={lv}" if lv != default else "") + " {"
        claimed |= {"lvl", "target", "imm"}
    elif op in (SeqOp.AGU_BASE, SeqOp.AGU_STRIDE):
        v = _signed(ins.imm, cfg.loop_bits)
        if op == SeqOp.AGU_BASE:
            ctl = f"agu g{ins.agu} = {v}"
            claimed |= {"agu", "imm"}
        else:
            ref = level_names.get(ins.lvl, f"level {ins.lvl}")
            ctl = f"agu g{ins.agu} stride {ref} = {v}"
            claimed |= {"agu", "imm", "lvl"}
    elif op == SeqOp.JUMP:
        ctl = f"jump L{ins.target}"
        claimed |= {"target"}
    elif op == SeqOp.HALT:
        ctl = "halt"
    elif op == SeqOp.SPAD_PTR and cfg.spad_kib and ins.lvl in (1, 2, 3) \
            and ((ins.target << cfg.loop_bits) | ins.imm) < cfg.spad_depth:
        which = {v: k for k, v in _SPAD_SEL.items()}[ins.lvl]
        ctl = f"spad {which} = {(ins.target << cfg.loop_bits) | ins.imm}"
        claimed |= {"lvl", "target", "imm"}
    elif op == SeqOp.DMA_PTR and cfg.dram_mib and ins.lvl in (1, 2, 3) and _dma_ptr_ok(ins, cfg):
        which = {v: k for k, v in _DMA_SEL.items()}[ins.lvl]
        ctl = f"dma {which} = {(ins.target << cfg.loop_bits) | ins.imm}"
        claimed |= {"lvl", "target", "imm"}
    elif op != SeqOp.NEXT:
        raise AsmError(f"address {pc}: sequencer op {op} has no assembly form")
    if f.get("dma") and cfg.dram_mib:
        what = {v: k for k, v in _DMA_OPS.items()}[f["dma"]]
        if what != "wait":
            parts.append(f"dma {what} {f.get('dma_n', 0) + 1}")
            claimed |= {"dma", "dma_n"}
        else:
            parts.append(f"dma wait {f['dma_n']}" if f.get("dma_n") else "dma wait")
            claimed |= {"dma", "dma_n"}
    rest = {k: v for k, v in f.items() if k not in claimed}
    if rest:
        parts.append("raw " + " ".join(f"{k}={v}" for k, v in rest.items()))
    if ctl:
        if ctl.endswith("{"):
            parts.append(ctl[:-2])
            return " | ".join(parts) + " {"
        parts.append(ctl)
    return " | ".join(parts) if parts else "nop"
