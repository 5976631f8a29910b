"""Host command codes of a core's AXI4-Stream interface (``docs/core.md``, "Host
interface (AXI4-Stream)"): the ``cmd`` field of a command beat, and ``ERROR`` in a reply."""

from __future__ import annotations

__all__ = ["Cmd"]


class Cmd:
    LOAD = 1
    RUN = 2
    COUNTERS = 3
    CLEAR = 4
    ERROR = 15
