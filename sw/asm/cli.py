"""Command line of the assembler: ``python -m sw.asm prog.s -o prog.hex``.

Errors are one line, ``python -m sw.asm: error: <what and where>`` (exit 2 for bad
options, 1 for a bad program or file); the output is written atomically."""

from __future__ import annotations

import argparse
import sys

from arch.errors import CaterpillarError, UsageError
from arch.files import atomic_write, check_output, read_text
from arch.isa import instr_layout

from sw.asm.builder import assemble
from sw.asm.disasm import disassemble
from sw.asm.program import read_hex, write_hex

PROG = "python -m sw.asm"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see {PROG} --help)")


def _run(a) -> int:
    from arch.config import config_from_arg

    cfg = config_from_arg(a.config)
    if a.output:
        check_output(a.output, "-o/--output")
    if a.disasm:
        text = disassemble(read_hex(a.source, cfg), cfg, origin=a.origin)
        if a.output:
            atomic_write(a.output, text, make_parents=False)
        else:
            sys.stdout.write(text)
        return 0
    prog = assemble(read_text(a.source, "source"), cfg, origin=a.origin, file=a.source)
    if a.output:
        write_hex(a.output, prog, cfg, make_parents=False)
        print(f"{len(prog)} instructions -> {a.output}")
    else:
        digits = (instr_layout(cfg).size + 3) // 4
        for w in prog.words():
            print(f"{w:0{digits}x}")
    return 0


def main(argv=None) -> int:
    ap = _Parser(prog=PROG, description="CATERPILLAR core assembler")
    ap.add_argument("source", help="assembly file (or a .hex file with --disasm)")
    ap.add_argument("-o", "--output", help="output hex file (default: print words)")
    ap.add_argument("--config", help="preset name, JSON file or inline JSON")
    ap.add_argument("--origin", type=int, default=0)
    ap.add_argument("--disasm", action="store_true", help="disassemble a hex file")
    try:
        return _run(ap.parse_args(argv))
    except CaterpillarError as e:
        print(f"{PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        print(f"{PROG}: error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
