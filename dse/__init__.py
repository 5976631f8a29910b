"""Design-space exploration: search the ArchConfig space for the best training
accelerator under area and power limits (``caterpillar dse``; docs/dse.md).

Layer: above :mod:`sim` (it measures points with the fast chip engine), below :mod:`cli`.
"""
