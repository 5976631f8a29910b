"""Tests of ``sim``."""
