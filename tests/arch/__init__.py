"""Tests of ``arch``."""
