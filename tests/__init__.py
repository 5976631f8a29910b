"""The test suite, one folder per package it tests (``tests/sim`` tests ``sim``, ...;
``tests/project``: the repository as a whole), the cocotb benches in ``tests/benches``.

Every folder is a package under ``tests``, so a test module or helper is imported by its
full name (``tests.rtl.test_chip``, ``tests.simulators``) from the project root, which
is the only test directory on ``sys.path``: the folders share their names with the
packages they test and must never shadow them (so ``tests/`` itself is never put on
``sys.path``).
"""
