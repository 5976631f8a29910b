"""Tests of ``sw``."""
