"""Performance counters: the PE event strobes and the core's counter names.

The order and meaning of the counters are specified in ``docs/core.md`` ("Performance
counters"); :func:`counter_names` is the one definition every layer uses (RTL readout,
core model, fast model, power model).
"""

from __future__ import annotations

__all__ = ["EVENT_FIELDS", "SUMMED_EVENTS", "counter_names"]

#: Per-cycle event strobes of a PE, ``(name, width)`` LSB first (the RTL's
#: :data:`pe.layouts.EVENT_LAYOUT`; see the Events table of the spec). ``fma``, ``mv``: an
#: FMA enters the multiplier / the move unit executes (operand stage); ``mem_a_rd``,
#: ``mem_b_rd``: an SRAM read is performed (issue); ``mem_a_wr``, ``mem_b_wr``: an SRAM
#: write is performed (operand stage); ``rf_rd`` (4 bits): RF read operations; ``rf_wr``
#: (2 bits): RF writes (move unit + FMA write-back); ``row_drv``, ``col_drv``: the PE
#: drives its row / column bus; ``mem_conflict``: an FMA write-back into SRAM displaced
#: the operand-stage write of the same bank; ``rf_conflict``: FMA write-back and move
#: unit write the same register.
EVENT_FIELDS = (
    ("fma", 1), ("mv", 1), ("mem_a_rd", 1), ("mem_b_rd", 1), ("mem_a_wr", 1),
    ("mem_b_wr", 1), ("rf_rd", 4), ("rf_wr", 2), ("row_drv", 1), ("col_drv", 1),
    ("rf_conflict", 1), ("mem_conflict", 1),
)

#: PE events summed over all PEs, in readout order
SUMMED_EVENTS = ("mv", "mem_a_rd", "mem_a_wr", "mem_b_rd", "mem_b_wr", "rf_rd", "rf_wr", "rf_conflict",
                 "mem_conflict")


def counter_names(cfg) -> list[str]:
    """Counter names in readout order for an :class:`~arch.config.ArchConfig`."""
    nr = cfg.nr
    names = ["cycles", "stall_cycles", "instructions"]
    names += [f"fma[{p}]" for p in range(nr * nr)]
    names += list(SUMMED_EVENTS)
    names += [f"row_hops[{r}]" for r in range(nr)] + [f"col_hops[{c}]" for c in range(nr)]
    names += ["host_in_beats", "host_out_beats"]
    names += ["ring_in_beats", "ring_out_beats"]
    if cfg.spad_kib:
        names += ["spad_rd_beats", "spad_wr_beats"]
    if cfg.dram_mib:
        # DMA engine: beats read from / written to DRAM, cycles it is busy, cycles the
        # sequencer stalls on it (a dma start or wait while busy; also in stall_cycles)
        names += ["dram_rd_beats", "dram_wr_beats", "dma_busy_cycles", "dma_stall_cycles"]
    return names
