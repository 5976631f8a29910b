"""Tests of ``dse``."""
