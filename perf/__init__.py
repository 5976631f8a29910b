"""Offline characterization of every operation class the compilers emit, per core kind,
and the performance model fitted to it (``caterpillar characterize``; docs/perf.md).

Layer: above :mod:`sim` (it measures on the fast core model and the fast chip engine),
below :mod:`dse` and :mod:`cli`.
"""
