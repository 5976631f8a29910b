"""Tests of ``noc``."""
