"""Tests of the repository as a whole: the docs and their references, the import-layer contracts, the benchmark comparison."""
