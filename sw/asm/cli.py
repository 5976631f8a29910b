"""Command line of the assembler: ``python -m sw.asm prog.s -o prog.hex``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arch.isa import instr_layout

from sw.asm.builder import assemble
from sw.asm.disasm import disassemble
from sw.asm.errors import AsmError
from sw.asm.program import read_hex, write_hex


def main(argv=None) -> int:
    from arch.config import config_from_arg

    ap = argparse.ArgumentParser(prog="python -m sw.asm", description="CATERPILLAR core assembler")
    ap.add_argument("source", help="assembly file (or a .hex file with --disasm)")
    ap.add_argument("-o", "--output", help="output hex file (default: print words)")
    ap.add_argument("--config", help="preset name, JSON file or inline JSON")
    ap.add_argument("--origin", type=int, default=0)
    ap.add_argument("--disasm", action="store_true", help="disassemble a hex file")
    a = ap.parse_args(argv)
    cfg = config_from_arg(a.config)
    try:
        if a.disasm:
            text = disassemble(read_hex(a.source, cfg), cfg, origin=a.origin)
            if a.output:
                Path(a.output).write_text(text)
            else:
                sys.stdout.write(text)
            return 0
        prog = assemble(Path(a.source).read_text(), cfg, origin=a.origin, file=a.source)
    except AsmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.output:
        write_hex(a.output, prog, cfg)
        print(f"{len(prog)} instructions -> {a.output}")
    else:
        digits = (instr_layout(cfg).size + 3) // 4
        for w in prog.words():
            print(f"{w:0{digits}x}")
    return 0
