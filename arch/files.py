"""Atomic file output: a reader never sees a half-written file."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "atomic_write", "atomic_savefig"]

#: the project's root directory (build products go to ``ROOT / "build"``)
ROOT = Path(__file__).resolve().parent.parent


def atomic_write(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def atomic_savefig(fig, path: Path | str, dpi: int = 110) -> Path:
    """Save a matplotlib figure to ``path`` (PNG) through a temporary file and a rename,
    and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    os.replace(tmp, path)
    return path
