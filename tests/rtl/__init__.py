"""Tests of ``rtl``."""
