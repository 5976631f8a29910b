"""What every ``caterpillar`` subcommand shares: the argument parser whose errors are
one line, typed argument values with ranges, output paths checked before work starts,
progress bars, and the one error path (:func:`run_command`)."""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from pathlib import Path

from arch.errors import CaterpillarError, UsageError
from arch.files import check_output

__all__ = ["Parser", "Progress", "check_outputs", "count", "nonneg_int", "positive_float", "run_command",
           "input_path", "EXIT_USAGE", "EXIT_RUNTIME", "EXIT_INTERRUPT"]

EXIT_RUNTIME, EXIT_USAGE, EXIT_INTERRUPT = 1, 2, 130


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise :class:`UsageError` (one line, exit 2)
    instead of printing a usage block; subparsers are of the same class."""

    def error(self, message: str):
        sub = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        raise UsageError(f"{sub + ': ' if sub else ''}{message} (see {self.prog} --help)")


def _int_arg(text: str, lo: int, what: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if v < lo:
        raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
    return v


def count(text: str) -> int:
    """A positive integer (a count: epochs, samples, batch size)."""
    return _int_arg(text, 1, "a positive integer")


def nonneg_int(text: str) -> int:
    """A non-negative integer (a latency in cycles, a seed, a start address)."""
    return _int_arg(text, 0, "a non-negative integer")


def positive_float(text: str) -> float:
    """A finite number above zero (a rate, a clock, a time limit)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def check_outputs(args, *dests: str) -> None:
    """Check the output paths in ``args.<dest>`` before any work (``-`` is stdout)."""
    for dest in dests:
        v = getattr(args, dest, None)
        if isinstance(v, str) and v != "-":
            check_output(v, "--" + dest.replace("_", "-") if dest != "output" else "-o/--output")


def write_json_png(args, json_text, plot) -> None:
    """Write ``--json`` (``json_text()``, called only when asked) and ``--png``
    (``plot(path)``) all or nothing (:class:`arch.files.Outputs`), then name each file
    written on stderr."""
    from arch.files import Outputs

    with Outputs() as outs:
        if args.json:
            outs.write_text(args.json, json_text())
        if args.png:
            plot(outs.stage(args.png))
    for name in (args.json, args.png):
        if name:
            print(f"wrote {name}", file=sys.stderr)


def input_path(path: str, option: str, *, directory: bool = False) -> Path:
    """An existing input file (or directory) named by ``option``; else a usage error."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{option} {p}: no such {'directory' if directory else 'file'}")
    if directory and not p.is_dir():
        raise UsageError(f"{option} {p}: not a directory")
    if not directory and p.is_dir():
        raise UsageError(f"{option} {p}: is a directory, expected a file")
    return p


class Progress:
    """A progress bar on stderr (tqdm) fed by the ``progress(done, total)`` callbacks of
    the long runs (with an estimate of the time left); its :meth:`log` prints lines above
    the bar. It closes when ``done`` reaches ``total``, or when used as a context manager.

    ``mode``: ``"on"``, ``"off"`` or ``"auto"`` (on when stderr is a terminal)."""

    def __init__(self, desc: str, unit: str = "step", mode: str = "auto"):
        from tqdm import tqdm

        disable = {"on": False, "off": True}.get(mode)          # auto: None, tqdm's own tty test
        self._bar = tqdm(desc=desc, unit=unit, disable=disable, file=sys.stderr, dynamic_ncols=True,
                         mininterval=0.5)

    def __call__(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.total = total
        self._bar.update(done - self._bar.n)
        if done >= total:                              # finished: the bar stays as its last line
            self._bar.close()

    def advance(self, postfix: str | None = None) -> None:
        """One more item done (a total that is not known in advance), with a status text."""
        self._bar.update(1)
        if postfix is not None:
            self._bar.set_postfix_str(postfix, refresh=False)

    def log(self, msg: str) -> None:
        from tqdm import tqdm

        if self._bar.disable:
            print(msg, flush=True)
        else:
            tqdm.write(msg, file=sys.stdout)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self._bar.close()


def _one_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return "; ".join(s.strip() for s in text.splitlines() if s.strip())


def run_command(fn, args, debug: bool = False) -> int:
    """Run ``fn(args)``: the one error path of the command line.

    A :class:`CaterpillarError` prints ``caterpillar: error: <message>`` and exits with
    its code (2 for usage, 1 for runtime); an OS error names the file; an interrupt
    exits 130; anything else is a bug, reported in one line as such. ``debug``: the
    traceback too."""
    try:
        return fn(args)
    except BrokenPipeError:                       # output piped into `head` and closed: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("caterpillar: interrupted", file=sys.stderr)
        return EXIT_INTERRUPT
    except CaterpillarError as e:
        err, msg, code = e, _one_line(e), e.exit_code
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        err, msg, code = e, f"{where}{e.strerror or _one_line(e)}", EXIT_RUNTIME
    except Exception as e:                        # noqa: BLE001 - the last line of defence
        err, code = e, EXIT_RUNTIME
        msg = (f"internal error, please report it: {type(e).__name__}: {_one_line(e)}"
               f"{'' if debug else ' (--debug shows the traceback)'}")
    if debug:
        traceback.print_exception(err, file=sys.stderr)
    print(f"caterpillar: error: {msg}", file=sys.stderr)
    return code

