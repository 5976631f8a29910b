"""Host command codes of a core's AXI4-Stream interface (``docs/core.md``, "Host
interface (AXI4-Stream)"): the ``cmd`` field of a command beat, and ``ERROR`` in a reply."""

from __future__ import annotations

__all__ = ["Cmd"]


class Cmd:
    LOAD = 1
    RUN = 2
    COUNTERS = 3
    CLEAR = 4
    #: chip configuration commands, sent to ``tdest`` :func:`rtl.chip.config_dest`
    #: (``docs/chip.md``, "Partitions"): ``arg0`` a core, ``arg1`` a group level; each
    #: acts on the aligned block of ``2**arg1`` cores holding core ``arg0``
    GROUP = 5      # set the block's cores' group register to arg1 (their ring closes on the block)
    SELECT = 6     # a broadcast (tdest all ones) reaches the block's cores only
    STOP = 7       # reset the block's cores (memories and microcode kept)
    ERROR = 15
