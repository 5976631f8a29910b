"""Tests of ``pe``."""
