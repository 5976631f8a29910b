"""The shared cocotb harness's configuration checks (no simulation)."""

import pytest

from sim.harness import VERILATOR_OPTS, simulator_build_args, verilator_cxx_opt


def test_verilator_opt_default_and_validation(monkeypatch):
    monkeypatch.delenv("VERILATOR_OPT", raising=False)
    assert verilator_cxx_opt() == "-Os"            # Verilator's own default outside the tests
    for opt in VERILATOR_OPTS:
        monkeypatch.setenv("VERILATOR_OPT", opt)
        assert verilator_cxx_opt() == opt
    monkeypatch.setenv("VERILATOR_OPT", "-O9")
    with pytest.raises(ValueError, match="VERILATOR_OPT must be one of -O0, .*got '-O9'"):
        verilator_cxx_opt()


def test_suite_compiles_verilator_models_at_O0():
    # tests/conftest.py: every RTL test simulates for seconds, the C++ compile dominates
    import os

    assert os.environ.get("VERILATOR_OPT") in VERILATOR_OPTS
    if os.environ["VERILATOR_OPT"] != "-O0":
        pytest.skip("VERILATOR_OPT set by the caller")


def test_verilator_builds_use_the_opt_level(monkeypatch):
    # the flag must reach Verilator's C++ compile (it also keys the build cache)
    monkeypatch.setenv("VERILATOR_OPT", "-O1")
    args = simulator_build_args("verilator")
    assert args[args.index("-CFLAGS") + 1] == "-O1"
    assert simulator_build_args("icarus") == ["-g2005"]
