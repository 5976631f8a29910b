"""File input and output a user can trust.

- Output is atomic: a reader never sees a half-written file, and a failure or an
  interrupt leaves no temporary file behind (:func:`atomic_write`,
  :func:`atomic_savefig`).
- Several outputs of one command are all or nothing (:class:`Outputs`): each is
  staged in a temporary file beside its target and all are renamed into place
  together; on any failure every staged file is removed.
- Output paths are checked before any work starts (:func:`check_output`).
- Text input names the file in its errors (:func:`read_text`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

from arch.errors import InputError, UsageError

__all__ = ["ROOT", "Outputs", "atomic_savefig", "atomic_write", "check_output", "read_text"]

#: the project's root directory (build products go to ``ROOT / "build"``)
ROOT = Path(__file__).resolve().parent.parent


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temp_beside(path: Path, suffix: str = ".tmp") -> Path:
    """A new, empty temporary file in ``path``'s directory (hidden, unique name), with the
    permissions a plain ``open`` would give (``mkstemp`` makes it private)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    return Path(tmp)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _commit(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` onto ``path`` (removing ``tmp`` if that fails)."""
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory", str(path))
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def atomic_write(path: Path | str, text: str, *, make_parents: bool = True) -> Path:
    """Write ``text`` to ``path`` through a temporary file beside it and a rename.

    ``make_parents``: create missing parent directories (build products; a user's
    output path is checked with :func:`check_output` first instead). On any failure,
    interrupt included, the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_beside(path)
    try:
        tmp.write_text(text, encoding="utf-8")
    except BaseException:
        _unlink(tmp)
        raise
    _commit(tmp, path)
    return path


def atomic_savefig(fig, path: Path | str, dpi: int = 110, *, make_parents: bool = True) -> Path:
    """Save a matplotlib figure to ``path`` (PNG) through a temporary file and a rename,
    and close it (also on failure)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_beside(path, ".tmp.png")
    try:
        fig.savefig(tmp, dpi=dpi)
    except BaseException:
        _unlink(tmp)
        raise
    finally:
        plt.close(fig)
    _commit(tmp, path)
    return path


def check_output(path: Path | str, option: str) -> Path:
    """Check, before any work, that ``path`` can be written as a file.

    The parent directory must exist and be writable and ``path`` must not be a
    directory. Raises :class:`arch.errors.UsageError` naming ``option``."""
    p = Path(path)
    if str(path) == "" or p.name in ("", ".", ".."):
        raise UsageError(f"{option} {str(path)!r}: not a file name")
    if p.is_dir():
        raise UsageError(f"{option} {p}: is a directory (give a file name)")
    parent = p.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise UsageError(f"{option} {p}: directory {parent} {what}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {p}: directory {parent} is not writable")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{option} {p}: file is not writable")
    return p


def read_text(path: Path | str, what: str = "file") -> str:
    """The UTF-8 text of ``path``; errors (missing, a directory, unreadable, not
    UTF-8) are :class:`arch.errors.InputError` naming the file and ``what`` it is."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{what} {p}: is a directory") from None
    except PermissionError:
        raise InputError(f"{what} {p}: permission denied") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{what} {p}: not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r}); "
                         f"is it a binary file?") from None
    except OSError as e:
        raise InputError(f"{what} {p}: {e.strerror or e}") from None


class Outputs:
    """Several output files written all or nothing.

    Use as a context manager: :meth:`write_text` and :meth:`stage` stage each output
    in a temporary file beside its target; leaving the block normally renames them all
    into place, leaving it by an exception (``KeyboardInterrupt`` included) removes
    every staged file and leaves the targets untouched.
    """

    def __init__(self):
        self._staged: list[tuple[Path, Path]] = []

    def __enter__(self) -> Outputs:
        return self

    def write_text(self, path: Path | str, text: str) -> None:
        path = Path(path)
        tmp = _temp_beside(path)
        self._staged.append((tmp, path))
        tmp.write_text(text, encoding="utf-8")

    def stage(self, path: Path | str) -> Path:
        """A temporary file beside ``path`` (same suffix) for a writer that takes a
        path, such as a plot function; renamed onto ``path`` when the block ends."""
        path = Path(path)
        tmp = _temp_beside(path, ".tmp" + path.suffix)
        self._staged.append((tmp, path))
        return tmp

    def discard(self) -> None:
        for tmp, _ in self._staged:
            _unlink(tmp)
        self._staged.clear()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
            return
        try:
            for tmp, path in self._staged:
                if path.is_dir():
                    raise IsADirectoryError(21, "is a directory", str(path))
            for tmp, path in self._staged:
                os.replace(tmp, path)
        finally:
            self.discard()


@contextlib.contextmanager
def locked(path: Path | str):
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the ``with`` block:
    processes that would produce the same file (parallel pytest workers converting or
    building one design) take turns, and the later ones find the result."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
