"""``gc_paused``: run a function with Python's cyclic garbage collector paused.

The compilers and the fast engine allocate many short-lived containers (instruction
texts, a region's value nodes and reads) that reference counting frees; the cyclic
collector would otherwise be triggered by the allocations again and again, promote those
containers and walk the whole heap each time.
"""

from __future__ import annotations

import functools
import gc

__all__ = ["gc_paused"]


def gc_paused(f):
    """``f`` with the cyclic garbage collector paused while it runs (and resumed after,
    if it was on; nested calls leave it to the outermost)."""
    @functools.wraps(f)
    def run(*args, **kwargs):
        if not gc.isenabled():
            return f(*args, **kwargs)
        gc.disable()
        try:
            return f(*args, **kwargs)
        finally:
            gc.enable()
    return run
