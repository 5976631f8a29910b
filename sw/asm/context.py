"""Configuration-dependent field tables of the assembler (widths, signedness, banks)."""

from __future__ import annotations

from functools import lru_cache

from arch.isa import instr_layout
from arch.microop import uop_fields


class _Ctx:
    def __init__(self, cfg):
        self.cfg = cfg
        self.uop = {n: w for n, _, w in uop_fields(*cfg.uop_key)}
        lay = instr_layout(cfg)
        self.ctl = {n: f.width for n, f in lay["ctl"].shape}
        self.signed = {n for n in self.uop if n.endswith("_off") or n == "ar_imm"} | {"imm"}
        self.widths = {**self.uop, **self.ctl}
        self.amod = 1 << cfg.addr_bits
        self.bank = {"a": cfg.mem_a_words, "b": cfg.mem_b_words}


@lru_cache(maxsize=64)
def _ctx(cfg) -> _Ctx:
    return _Ctx(cfg)
