"""Canonical assembly text of micro-op field groups.

:func:`_group_text` prints one field group of an instruction (predicate, SRAM ports,
FMA, move, bus drivers, address-register update, stream slots); the disassembler joins
them into instructions and :meth:`sw.asm.Slot.__str__` uses them for slots built
without text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arch.isa import HostDir
from arch.microop import ArOp, Gate, MvOp, PredMode, Src

from sw.asm.operands import _src_text

if TYPE_CHECKING:
    from sw.asm.slots import Slot


def _fmt_addr(port, f, ag):
    terms = [f"ar{f.get(port + '_ar', 0)}"]
    sel = f.get(f"ag_{port}", 0)
    if sel:
        terms.append(f"g{sel - 1}")
    off = f.get(port + "_off", 0)
    s = " + ".join(terms)
    if off > 0:
        s += f" + {off}"
    elif off < 0:
        s += f" - {-off}"
    return f"[{s}]" + ("++" if f.get(port + "_inc") else "")


def _mod_text(seg):
    return f"%{1 << seg}" if seg else ""


def _group_text(g, f, cx) -> tuple[str | None, set]:
    """Canonical text of one field group of a decoded instruction and the fields it claims.

    ``f`` has signed offsets/immediates already. Returns (None, set()) when the group
    is inactive or not printable canonically.
    """
    S = _src_text
    if g == "pred":
        mode = f.get("pred_mode", 0)
        if mode == PredMode.ALL:
            return None, set()
        name = {PredMode.COL: "col", PredMode.ROW: "row", PredMode.DIAG: "diag"}[mode]
        seg = f.get("pred_seg", 0)
        wr = " writes" if f.get("wp_en") else ""
        return (f"@{name}{_mod_text(seg)}={f.get('pred_k', 0)}{wr}",
                {"pred_mode", "pred_k", "pred_seg"} | ({"wp_en"} if wr else set()))
    if g == "fpu":
        if not f.get("fpu_en"):
            return None, set()
        wb = f.get("fpu_wb", 0)
        d, a, b, c = (f.get(k, 0) for k in ("fpu_dst", "fpu_a", "fpu_b", "fpu_c"))
        claimed = {"fpu_en", "fpu_a", "fpu_b", "fpu_c", "fpu_wb"}
        if wb == 0:
            dt, acc = f"r{d}", d
            claimed.add("fpu_dst")
        elif wb in (1, 2):
            dt = "mema" if wb == 1 else "memb"
            acc = Src.MEMA if wb == 1 else Src.MEMB
        else:
            return None, set()
        if c == Src.NZERO:
            t = f"mul {dt} = {S(a)} * {S(b)}"
        elif b == Src.ONE:
            t = f"add {dt} = {S(a)} + {S(c)}"
        elif c == acc:
            t = f"mac {dt} += {S(a)} * {S(b)}"
        else:
            t = f"fma {dt} = {S(a)} * {S(b)} + {S(c)}"
        return t, claimed
    if g == "mv":
        op = f.get("mv_op", 0)
        if not op:
            return None, set()
        d, s = f.get("mv_dst", 0), S(f.get("mv_src", 0))
        if op == MvOp.MASK:
            return f"mask r{d} = {s} if {S(f.get('mv_msk', 0))}", {"mv_op", "mv_src", "mv_msk", "mv_dst"}
        return f"{'mov' if op == MvOp.MOV else 'relu'} r{d} = {s}", {"mv_op", "mv_src", "mv_dst"}
    if g in ("rdrv", "cdrv"):
        if not f.get(f"{g}_en"):
            return None, set()
        seg = f.get(f"{g}_seg", 0)
        if seg and f.get(f"{g}_diag"):
            return None, set()
        sel = "diag" if f.get(f"{g}_diag") else ("col" if g == "rdrv" else "row")
        return (f"{g} {S(f.get(g + '_src', 0))} @{sel}{_mod_text(seg)}={f.get(g + '_k', 0)}",
                {f"{g}_en", f"{g}_diag", f"{g}_k", f"{g}_src", f"{g}_seg"})
    if g in ("ra", "rb"):
        if not any(f.get(k) for k in (f"{g}_en", f"{g}_ar", f"{g}_inc", f"{g}_off", f"ag_{g}", f"{g}_gate")):
            return None, set()
        t = f"rd{g[1]} {_fmt_addr(g, f, cx)}" + ("" if f.get(f"{g}_en") else " noread")
        gate = f.get(f"{g}_gate", 0)
        if gate:
            t += f" gate={Gate(gate).name.lower()}"
        return t, {f"{g}_en", f"{g}_gate", f"{g}_ar", f"{g}_inc", f"{g}_off", f"ag_{g}"}
    if g in ("wa", "wb"):
        if not f.get(f"{g}_en"):
            return None, set()
        return (f"wr{g[1]} {_fmt_addr(g, f, cx)} = {S(f.get(g + '_src', 0))}",
                {f"{g}_en", f"{g}_ar", f"{g}_inc", f"{g}_off", f"{g}_src", f"ag_{g}"})
    if g == "ar":
        op = f.get("ar_op", 0)
        if not op:
            return None, set()
        i, v = f.get("ar_idx", 0), f.get("ar_imm", 0)
        if op == ArOp.SET:
            t = f"ar{i} = {v}"
        elif op == ArOp.STRIDE:
            t = f"stride ar{i} = {v}"
        else:
            t = f"ar{i} += {v}" if v >= 0 else f"ar{i} -= {-v}"
        return t, {"ar_op", "ar_idx", "ar_imm"}
    if g == "hin":
        v = f.get("hin", 0)
        if v not in (HostDir.ROW, HostDir.COL):
            return None, set()
        if f.get("rin") and f.get("sin"):
            return None, set()
        src = "sin " if f.get("sin") else "rin " if f.get("rin") else "hin "
        return src + HostDir(v).name.lower(), {"hin", "rin", "sin"}
    if g == "hout":
        v = f.get("hout", 0)
        if v not in (HostDir.ROW, HostDir.COL):
            return None, set()
        if f.get("rout") and f.get("sout"):
            return None, set()
        if f.get("rout") and not f.get("hlast"):
            return f"rout {HostDir(v).name.lower()}", {"hout", "rout"}
        if f.get("sout") and not f.get("hlast"):
            return f"sout {HostDir(v).name.lower()}", {"hout", "sout"}
        if f.get("rout") or f.get("sout"):
            return None, set()
        return f"hout {HostDir(v).name.lower()}" + (" last" if f.get("hlast") else ""), {"hout", "hlast"}
    raise ValueError(g)


_GROUPS = ("pred", "ra", "rb", "fpu", "mv", "rdrv", "cdrv", "wa", "wb", "ar", "hin", "hout")


def _slot_text(s: Slot) -> str:
    """Canonical text of a slot built without text (Builder slot objects)."""
    if s.ctl:
        k = s.ctl[0]
        if k == "loop":
            return f"loop {s.ctl[1]} {s.ctl[2]}"
        if k == "agu_base":
            return f"agu g{s.ctl[1]} = {s.ctl[2]}"
        if k == "agu_stride":
            return f"agu g{s.ctl[1]} stride {s.ctl[2]} = {s.ctl[3]}"
        if k in ("spad", "dma"):
            return f"{k} {s.ctl[1]} = {s.ctl[2]}"
        return " ".join(str(x) for x in s.ctl)
    if s.kind == "dma":
        op = s.fields["dma"]
        return "dma wait" if op == 3 else f"dma {'load' if op == 1 else 'store'} {s.fields['dma_n'] + 1}"
    if s.kind == "raw":
        return "raw " + " ".join(f"{k}={v}" for k, v in s.fields.items())
    if s.kind == "pred" and not s.fields.get("pred_mode"):
        return "@all"
    for g in _GROUPS:
        try:
            t, _ = _group_text(g, s.fields, None)
        except (ValueError, KeyError):
            t = None
        if t:
            return t
    return s.kind
