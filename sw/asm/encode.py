"""The assembler's back end: layout, loops, labels, validation and encoding.

:func:`_assemble_items` places the parsed statements at microcode addresses, resolves
loops (levels, bodies), labels and AGU loop references, checks every slot and every
instruction against the configuration and encodes the :class:`~sw.asm.Program`.
"""

from __future__ import annotations

from dataclasses import dataclass

from arch.isa import HostDir, Instruction, SeqOp
from arch.microop import Gate, MicroOp, MvOp, Src

from sw.asm.context import _ctx, _Ctx
from sw.asm.errors import AsmError, Pos
from sw.asm.operands import _DMA_SEL, _SPAD_SEL, _SRC_HELP, _src_text
from sw.asm.program import LoopInfo, Program
from sw.asm.slots import Slot
from sw.asm.statements import _Item

#: the unit each field group belongs to (for the messages of slot conflicts)
_UNIT = {
    "pred": "the predicate", "fpu": "the FMA unit", "mv": "the move unit",
    "rdrv": "the row-bus driver", "cdrv": "the column-bus driver",
    "ra": "the SRAM A read port", "rb": "the SRAM B read port",
    "wa": "the SRAM A write port", "wb": "the SRAM B write port",
    "ar": "the address-register update", "hin": "the stream input (hin/rin/sin)",
    "hout": "the stream output (hout/rout/sout)", "hlast": "the stream output (hout/rout/sout)",
    "rin": "the stream input (hin/rin/sin)", "rout": "the stream output (hout/rout/sout)",
    "sin": "the stream input (hin/rin/sin)", "sout": "the stream output (hout/rout/sout)",
    "dma": "the DMA engine (dma load/store/wait)",
    "ctl": "the sequencer control (one loop/agu/jump/halt/spad per instruction)",
}


def _unit_of(fname):
    if fname.startswith("ag_"):
        return _UNIT[fname[3:]]
    if fname in ("op", "lvl", "agu", "target", "imm"):
        return _UNIT["ctl"]
    return _UNIT.get(fname.split("_")[0], fname)


@dataclass
class _Rec:
    pos: Pos
    slots: list
    pc: int
    ctl: tuple | None = None
    loop: LoopInfo | None = None


def _assemble_items(items: list[_Item], cfg, origin=0) -> Program:
    cx = _ctx(cfg)
    depth = cfg.ucode_depth
    if not 0 <= origin < depth:
        raise AsmError(f"origin {origin} is outside the microcode (ucode_depth={depth})")
    labels: dict[str, tuple[int, Pos]] = {}
    recs: list[_Rec] = []
    loops: list[LoopInfo] = []
    stack: list[LoopInfo] = []
    pc = origin
    for it in items:
        if it.kind == "label":
            if it.name in labels:
                first = labels[it.name][1]
                raise it.pos.err(f"duplicate label {it.name!r} (first defined on line {first.line})")
            labels[it.name] = (pc, it.pos)
        elif it.kind == "close":
            if not stack:
                raise it.pos.err("unbalanced '}': no loop is open")
            lp = stack.pop()
            lp.end = pc - 1
            if lp.end == lp.pc:
                raise AsmError(f"loop {lp.name!r} has an empty body", lp.line, None, None, it.pos.file)
            last = recs[-1]
            if last.ctl and last.ctl[0] in ("jump", "halt"):
                raise last.pos.err(f"loop {lp.name!r} (line {lp.line}) ends on a {last.ctl[0]}: a loop body "
                                   f"must not end with jump or halt (add an instruction after it)")
        else:
            if pc >= depth:
                raise it.pos.err(f"program does not fit in the microcode: instruction {pc - origin + 1} "
                                 f"is at address {pc} >= ucode_depth={depth}")
            ctls = [s for s in it.slots if s.ctl]
            if len(ctls) > 1:
                s = ctls[1]
                raise it.pos.err(f"{s.ctl[0]} conflicts with {ctls[0].ctl[0]} (slot {ctls[0].slot_no}): "
                                 f"one loop/agu/jump/halt per instruction", slot=s.slot_no, col=s.col)
            rec = _Rec(it.pos, it.slots, pc, ctls[0].ctl if ctls else None)
            recs.append(rec)
            if rec.ctl and rec.ctl[0] == "loop":
                _, name, count, level = rec.ctl
                s = ctls[0]
                parent = stack[-1] if stack else None
                if any(lp.name == name for lp in stack):
                    raise it.pos.err(f"loop {name!r} is nested inside a loop of the same name",
                                     slot=s.slot_no, col=s.col)
                default = parent.level + 1 if parent else 0
                if level is None:
                    if default >= cfg.n_loops:
                        raise it.pos.err(f"loop nesting deeper than the sequencer's {cfg.n_loops} loop "
                                         f"levels (cfg.n_loops): loop {name!r} would need level {default}",
                                         slot=s.slot_no, col=s.col)
                    level = default
                else:
                    if not 0 <= level < cfg.n_loops:
                        raise it.pos.err(f"loop level {level} out of range 0..{cfg.n_loops - 1} (cfg.n_loops)",
                                         slot=s.slot_no, col=s.col)
                    if parent and level <= parent.level:
                        raise it.pos.err(f"loop {name!r} at level {level} must use a higher level than the "
                                         f"enclosing loop {parent.name!r} (level {parent.level})",
                                         slot=s.slot_no, col=s.col)
                top = (1 << cfg.loop_bits) - 1
                if not 1 <= count <= top:
                    raise it.pos.err(f"loop {name!r}: trip count {count} out of range 1..{top} "
                                     f"(cfg.loop_bits={cfg.loop_bits})", slot=s.slot_no, col=s.col)
                lp = LoopInfo(name, level, count, pc, -1, it.pos.line, parent)
                rec.loop = lp
                loops.append(lp)
                stack.append(lp)
            pc += 1
    if stack:
        lp = stack[-1]
        raise AsmError(f"loop {lp.name!r} opened on line {lp.line} is never closed (missing '}}')",
                       lp.line, None, None, items[-1].pos.file if items else None)
    if not recs:
        raise AsmError("empty program: no instructions")
    last = recs[-1]
    if not (last.ctl and last.ctl[0] in ("halt", "jump")):
        raise last.pos.err("the program falls off its end: the last instruction must be halt or jump")

    # names of loops -> levels
    by_name: dict[str, set[int]] = {}
    for lp in loops:
        by_name.setdefault(lp.name, set()).add(lp.level)

    instrs = []
    for rec in recs:
        instrs.append(_encode_rec(rec, cx, labels, by_name, loops, origin, len(recs)))
    return Program(instrs, cfg, origin, {k: v[0] for k, v in labels.items()}, loops,
                   [r.pos.line for r in recs])


def _dma_ptr(rec, s, cfg) -> dict:
    """The ctl fields of ``dma dram|spad|both = N`` (a ``DMA_PTR``)."""
    if not cfg.dram_mib:
        raise _serr(rec, s, "dma needs DRAM: this configuration has none (cfg.dram_mib = 0)")
    which, v = rec.ctl[1], rec.ctl[2]
    sel = _DMA_SEL[which]
    for bit, depth, name in ((1, cfg.dram_depth, "DRAM"), (2, cfg.spad_depth, "scratchpad")):
        if sel & bit and not 0 <= v < depth:
            raise _serr(rec, s, f"dma {which}: {name} beat address {v} out of range 0..{depth - 1}")
    return {"op": SeqOp.DMA_PTR, "lvl": sel, "imm": v & ((1 << cfg.loop_bits) - 1), "target": v >> cfg.loop_bits}


def _serr(rec, s, msg) -> AsmError:
    """An error located at slot ``s`` of instruction ``rec``."""
    if s is None:
        return rec.pos.err(msg)
    line = s.pos.line if s.pos is not None and s.pos.line is not None else rec.pos.line
    return AsmError(msg, line, s.col, s.slot_no, rec.pos.file)


def _encode_rec(rec, cx, labels, by_name, loops, origin, n) -> Instruction:
    cfg = cx.cfg
    fields: dict[str, int] = {}
    owner: dict[str, Slot] = {}
    for s in rec.slots:
        for k, v in s.fields.items():
            if k in ("sin", "sout") and k not in cx.widths and v:
                raise _serr(rec, s, f"{k} needs a scratchpad: this configuration has none (cfg.spad_kib = 0)")
            if k == "wp_en" and k not in cx.widths and v:
                raise _serr(rec, s, "a write predicate ('writes') needs a scratchpad: this configuration has none "
                                    "(cfg.spad_kib = 0)")
            if k == "dma" and k not in cx.widths:
                raise _serr(rec, s, "dma needs DRAM: this configuration has none (cfg.dram_mib = 0)")
            if k not in cx.widths and not v and s.kind != "raw":
                continue     # an optional field this micro-op layout does not have, left 0
            if k not in cx.widths or k == "op":
                if k not in cx.widths and k in _OPTIONAL:
                    raise _serr(rec, s, f"this configuration's micro-op has no field {k} "
                                        f"({_OPTIONAL[k]})")
                if k == "op":
                    raise _serr(rec, s, "raw cannot set the sequencer op: use loop, agu, jump or halt")
                raise _serr(rec, s, f"unknown field {k!r} (micro-op fields: {', '.join(cx.uop)}; "
                                  f"ctl fields: {', '.join(n for n in cx.ctl if n != 'op')})")
            if k in fields:
                o = owner[k]
                raise _serr(rec, s, f"'{s}' conflicts with '{o}' (slot {o.slot_no}): both use "
                                  f"{_unit_of(k)} ({k})")
            fields[k] = v
            owner[k] = s
        _check_slot(s, rec, cx)
    # control
    if rec.ctl:
        s = next(s for s in rec.slots if s.ctl)
        kind = rec.ctl[0]
        ctl_f = {}
        if kind == "loop":
            lp = rec.loop
            ctl_f = {"op": SeqOp.LOOP, "lvl": lp.level, "target": lp.end, "imm": lp.count}
        elif kind == "agu_base" or kind == "agu_stride":
            k = rec.ctl[1]
            if not 0 <= k < cfg.n_agus:
                raise _serr(rec, s, f"address generator g{k} does not exist (cfg.n_agus={cfg.n_agus})")
            v = rec.ctl[-1]
            lim = cx.amod
            if not -lim < v < lim:
                raise _serr(rec, s, f"agu value {v} out of range {-lim + 1}..{lim - 1} (an SRAM address, "
                                  f"addr_bits={cfg.addr_bits})")
            ctl_f = {"op": SeqOp.AGU_BASE if kind == "agu_base" else SeqOp.AGU_STRIDE, "agu": k,
                     "imm": v & ((1 << cfg.loop_bits) - 1)}
            if kind == "agu_stride":
                ref = rec.ctl[2]
                if isinstance(ref, str):
                    lv = by_name.get(ref)
                    if not lv:
                        raise _serr(rec, s, f"unknown loop {ref!r} in agu stride")
                    if len(lv) > 1:
                        raise _serr(rec, s, f"loop name {ref!r} is ambiguous (levels {sorted(lv)}): rename "
                                          f"a loop or write 'level N'")
                    ref = next(iter(lv))
                elif not 0 <= ref < cfg.n_loops:
                    raise _serr(rec, s, f"loop level {ref} out of range 0..{cfg.n_loops - 1} (cfg.n_loops)")
                ctl_f["lvl"] = ref
        elif kind == "jump":
            label = rec.ctl[1]
            if label not in labels:
                raise _serr(rec, s, f"undefined label {label!r}")
            t = labels[label][0]
            if t >= origin + n:
                raise _serr(rec, s, f"label {label!r} (line {labels[label][1].line}) marks no instruction "
                                  f"(end of program)")
            for lp in loops:
                if lp.pc < t <= lp.end and not lp.pc < rec.pc <= lp.end:
                    raise _serr(rec, s, f"jump to {label!r} enters the body of loop {lp.name!r} (line "
                                      f"{lp.line}) from outside: enter a loop through its loop instruction")
            ctl_f = {"op": SeqOp.JUMP, "target": t}
        elif kind == "halt":
            ctl_f = {"op": SeqOp.HALT}
        elif kind == "spad":
            if not cfg.spad_kib:
                raise _serr(rec, s, "spad needs a scratchpad: this configuration has none (cfg.spad_kib = 0)")
            v = rec.ctl[2]
            if not 0 <= v < cfg.spad_depth:
                raise _serr(rec, s, f"scratchpad address {v} out of range 0..{cfg.spad_depth - 1} "
                                  f"(cfg.spad_depth beats)")
            ctl_f = {"op": SeqOp.SPAD_PTR, "lvl": _SPAD_SEL[rec.ctl[1]],
                     "imm": v & ((1 << cfg.loop_bits) - 1), "target": v >> cfg.loop_bits}
        elif kind == "dma":
            ctl_f = _dma_ptr(rec, s, cfg)
        for k, v in ctl_f.items():
            if k in fields:
                o = owner[k]
                raise _serr(rec, o, f"'{o}' (slot {o.slot_no}) sets {k}, which {kind} uses")
            fields[k] = int(v)
            owner[k] = s
    _check_instruction(fields, owner, rec, cx)
    uop, ctl = {}, {}
    for k, v in fields.items():
        if v:
            w = cx.widths[k]
            v &= (1 << w) - 1
            (uop if k in cx.uop else ctl)[k] = v
    return Instruction(MicroOp(**uop), **ctl)


_DST_FIELDS = ("mv_dst",)
#: fields of newer micro-op layouts that older ones lack
_OPTIONAL = {"pred_seg": "index modulus", "rdrv_seg": "segmented row bus",
             "cdrv_seg": "segmented column bus", "fpu_wb": "FMA write-back to SRAM"}
_K_FIELDS = {"pred_k": "predicate", "rdrv_k": "row-bus driver", "cdrv_k": "column-bus driver"}


def _check_slot(s: Slot, rec: _Rec, cx: _Ctx):
    """Field ranges of one slot (the error names the slot)."""
    cfg = cx.cfg

    def err(msg):
        return _serr(rec, s, msg)

    f = s.fields
    if "fpu_dst" in f and not f.get("fpu_wb") and not 0 <= f["fpu_dst"] < cfg.n_regs:
        raise err(f"register r{f['fpu_dst']} does not exist (cfg.n_regs={cfg.n_regs})")
    for k, v in f.items():
        if k not in cx.widths:
            continue
        w = cx.widths[k]
        lo = -(1 << (w - 1)) if k in cx.signed else 0
        if s.kind == "raw" and not lo <= v < (1 << w):
            raise err(f"raw {k}={v} does not fit in {w} bits")
        if k in _DST_FIELDS and not 0 <= v < cfg.n_regs:
            raise err(f"register r{v} does not exist (cfg.n_regs={cfg.n_regs})")
        if k in _K_FIELDS and not 0 <= v < cfg.nr:
            raise err(f"{_K_FIELDS[k]} index {v} out of range 0..{cfg.nr - 1} for a "
                      f"{cfg.nr}x{cfg.nr} core")
        if k in _K_FIELDS:
            seg = f.get(k[:-1] + "seg", 0)
            if seg and not v < 1 << seg:
                raise err(f"{_K_FIELDS[k]} index {v} modulo {1 << seg} selects no PE (use 0..{(1 << seg) - 1})")
        if k == "fpu_wb" and v not in (0, 1, 2):
            raise err(f"fpu_wb={v} is not a write-back target (0 register, 1 mema, 2 memb)")
        if k.endswith("_off"):
            bank = k[1]
            depth = cx.bank[bank]
            if not -depth < v < depth:
                raise err(f"offset {v} is outside SRAM bank {bank.upper()} ({depth} words): "
                          f"use {-depth + 1}..{depth - 1}")
        if k == "ar_imm":
            lim = cx.amod
            if not -lim < v < lim:
                raise err(f"address-register immediate {v} out of range {-lim + 1}..{lim - 1} "
                          f"(addr_bits={cfg.addr_bits})")
        if k.startswith("ag_") and not 0 <= v <= cfg.n_agus:
            raise err(f"address generator g{v - 1} does not exist (cfg.n_agus={cfg.n_agus})")
        if k in ("hin", "hout") and v not in (0, 1, 2):
            raise err(f"{k}={v} is not a host direction (0 none, 1 row, 2 col)")


def _check_instruction(f, owner, rec, cx):
    """Cross-slot checks on the merged fields."""
    cfg = cx.cfg

    def err(msg, key):
        return _serr(rec, owner.get(key), msg)

    used = []   # (field, code)
    if f.get("fpu_en"):
        used += [(k, f.get(k, 0)) for k in ("fpu_a", "fpu_b", "fpu_c")]
    mv = f.get("mv_op", 0)
    if mv:
        used.append(("mv_src", f.get("mv_src", 0)))
        if mv == MvOp.MASK:
            used.append(("mv_msk", f.get("mv_msk", 0)))
    for bus in ("rdrv", "cdrv"):
        if f.get(f"{bus}_en"):
            used.append((f"{bus}_src", f.get(f"{bus}_src", 0)))
    for port in ("wa", "wb"):
        if f.get(f"{port}_en"):
            used.append((f"{port}_src", f.get(f"{port}_src", 0)))
    for k, code in used:
        if not Src.is_valid(code, cfg.n_regs):
            if 0 <= code < 16:
                raise err(f"register r{code} does not exist (cfg.n_regs={cfg.n_regs})", k)
            raise err(f"invalid source code {code} in {k} (sources: {_SRC_HELP})", k)
        if code == Src.MEMA and not f.get("ra_en"):
            raise err("source mema needs an SRAM A read (rda) in the same instruction", k)
        if code == Src.MEMB and not f.get("rb_en"):
            raise err("source memb needs an SRAM B read (rdb) in the same instruction", k)
        if code == Src.ROW and not (f.get("rdrv_en") or f.get("hin") == HostDir.ROW):
            raise err("source row: nothing drives the row bus in this instruction (add rdrv, hin row or rin row)", k)
        if code == Src.COL and not (f.get("cdrv_en") or f.get("hin") == HostDir.COL):
            raise err("source col: nothing drives the column bus in this instruction (add cdrv, hin col or rin col)", k)
        if k in ("rdrv_src", "cdrv_src") and code in (Src.ROW, Src.COL):
            raise err(f"a bus driver cannot forward a bus ({_src_text(code)}): drive a register or "
                      f"SRAM data", k)
    if f.get("hin") == HostDir.ROW and f.get("rdrv_en"):
        raise err("row bus conflict: hin/rin row and rdrv drive it in the same instruction", "rdrv_en")
    if f.get("hin") == HostDir.COL and f.get("cdrv_en"):
        raise err("column bus conflict: hin/rin col and cdrv drive it in the same instruction", "cdrv_en")
    for port in ("ra", "rb"):
        if f.get(f"{port}_en"):
            g = f.get(f"{port}_gate", 0)
            if g == Gate.RDRV and not f.get("rdrv_en"):
                raise err("gate=rdrv reads in no PE: this instruction has no rdrv", f"{port}_gate")
            if g == Gate.CDRV and not f.get("cdrv_en"):
                raise err("gate=cdrv reads in no PE: this instruction has no cdrv", f"{port}_gate")
    for port in ("ra", "rb", "wa", "wb"):
        if (f.get(f"{port}_en") or f.get(f"{port}_inc")) and not f.get(f"{port}_ar", 0) < cfg.n_ar:
            raise err(f"address register ar{f[f'{port}_ar']} does not exist (cfg.n_ar={cfg.n_ar})",
                      f"{port}_ar")
    wb = f.get("fpu_wb", 0) if f.get("fpu_en") else 0
    if wb:
        port = "ra" if wb == 1 else "rb"
        if f"{port}_ar" not in owner:
            raise err(f"fma to mem{port[1]} writes at this instruction's rd{port[1]} address: add "
                      f"rd{port[1]} [...] (or rd{port[1]} [...] noread)", "fpu_wb")
        if not f.get(f"{port}_ar", 0) < cfg.n_ar:
            raise err(f"address register ar{f[f'{port}_ar']} does not exist (cfg.n_ar={cfg.n_ar})",
                      f"{port}_ar")
    if f.get("ar_op") and not f.get("ar_idx", 0) < cfg.n_ar:
        raise err(f"address register ar{f['ar_idx']} does not exist (cfg.n_ar={cfg.n_ar})", "ar_idx")
    if f.get("hout") == HostDir.ROW and not (f.get("rdrv_en") or f.get("hin") == HostDir.ROW):
        raise err("hout row: nothing drives the row bus in this instruction (add rdrv, hin row or rin row)", "hout")
    if f.get("hout") == HostDir.COL and not (f.get("cdrv_en") or f.get("hin") == HostDir.COL):
        raise err("hout col: nothing drives the column bus in this instruction (add cdrv, hin col or rin col)", "hout")
    if f.get("hlast") and not f.get("hout"):
        raise err("hlast without hout (write: hout row last)", "hlast")
    # ring (rin/rout) and scratchpad (sin/sout) flags redirect the hin/hout stream slots
    for src, out in (("rin", "rout"), ("sin", "sout")):
        if f.get("hlast") and f.get(out):
            raise err(f"{out} has no tlast (last belongs to hout)", "hlast")
        for flag, slot in ((src, "hin"), (out, "hout")):
            if f.get(flag) and not f.get(slot):
                raise err(f"{flag} flag without a direction (write: {flag} row or {flag} col)", flag)
    if f.get("sin") and f.get("rin"):
        raise err("one stream input per instruction: sin and rin both set", "sin")
    if f.get("sout") and f.get("rout"):
        raise err("one stream output per instruction: sout and rout both set", "sout")
