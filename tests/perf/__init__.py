"""Tests of ``perf``: the characterization and the performance model."""
