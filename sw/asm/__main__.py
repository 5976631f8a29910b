"""``python -m sw.asm``: the assembler's command line (:func:`sw.asm.cli.main`)."""

import sys

from sw.asm.cli import main

if __name__ == "__main__":
    sys.exit(main())
