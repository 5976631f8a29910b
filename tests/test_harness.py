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


class _FakeRunner:
    """Stands in for cocotb's runner: a build writes what Verilator's make leaves behind."""

    def __init__(self):
        self.builds = 0

    def build(self, *, build_dir, hdl_toplevel, **kw):
        self.builds += 1
        for name in ("Vtop.cpp", "Vtop.o", "Vtop__pch.h.fast.gch", "Vtop__ALL.a", hdl_toplevel):
            (build_dir / name).write_text("x")
        (build_dir / "build.log").write_text("log")


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_build_once_keeps_only_the_binary_and_skips_finished_builds(tmp_path, sim):
    from sim.harness import _build_once

    runner = _FakeRunner()
    (tmp_path / "run").mkdir()
    _build_once(runner, sim, tmp_path / "top.v", "top", tmp_path, False, [])
    _build_once(runner, sim, tmp_path / "top.v", "top", tmp_path, False, [])
    left = sorted(p.name for p in tmp_path.iterdir())
    if sim == "icarus":          # cocotb's own up-to-date check decides; nothing is deleted
        assert runner.builds == 2 and "Vtop.o" in left
        return
    assert runner.builds == 1
    assert left == [".complete", "build.log", "run", "top"]
    (tmp_path / "top").unlink()  # a stamp without its binary is not a finished build
    _build_once(runner, sim, tmp_path / "top.v", "top", tmp_path, False, [])
    assert runner.builds == 2 and (tmp_path / "top").is_file()
