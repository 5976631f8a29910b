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


# the parameter is not named ``sim``: a fake runner, no simulator needed (tests/conftest.py)
@pytest.mark.parametrize("kind", ["verilator", "icarus"])
def test_build_once_keeps_only_the_binary_and_skips_finished_builds(tmp_path, kind):
    from sim.harness import _build_once

    runner = _FakeRunner()
    (tmp_path / "run").mkdir()
    _build_once(runner, kind, [tmp_path / "top.v"], "top", tmp_path, False, [])
    _build_once(runner, kind, [tmp_path / "top.v"], "top", tmp_path, False, [])
    left = sorted(p.name for p in tmp_path.iterdir())
    if kind == "icarus":         # cocotb's own up-to-date check decides; nothing is deleted
        assert runner.builds == 2 and "Vtop.o" in left
        return
    assert runner.builds == 1
    assert left == [".complete", "build.log", "run", "top"]
    (tmp_path / "top").unlink()  # a stamp without its binary is not a finished build
    _build_once(runner, kind, [tmp_path / "top.v"], "top", tmp_path, False, [])
    assert runner.builds == 2 and (tmp_path / "top").is_file()


class _Counted:
    """A tiny design that counts its elaborations."""

    def __init__(self, width):
        from amaranth.lib import wiring
        from amaranth.lib.wiring import In, Out

        outer = self

        class Top(wiring.Component):
            def __init__(self):
                super().__init__({"a": In(width), "y": Out(width)})

            def elaborate(self, platform):
                from amaranth.hdl import Module
                outer.elaborations += 1
                m = Module()
                m.d.comb += self.y.eq(~self.a)
                return m

        self.elaborations = 0
        self.make = Top


def test_keyed_verilog_is_converted_once(monkeypatch, recwarn):
    """``design_key``: the Verilog is converted once per key, name and RTL sources, then
    read back (no elaboration and no unused-elaboratable warning); another key, another
    name or changed sources convert again; without a key every call converts."""
    import uuid

    import rtl.verilog as h

    d = _Counted(4)
    name = f"keytest_{uuid.uuid4().hex[:8]}"
    try:
        t1, p1 = h.write_verilog(d.make(), name, design_key="w4")
        t2, p2 = h.write_verilog(d.make(), name, design_key="w4")
        assert (t1, p1) == (t2, p2) and d.elaborations == 1 and p1.read_text() == t1
        h.write_verilog(_Counted(5).make(), name, design_key="w5")    # another key
        h.write_verilog(d.make(), name)                               # no key: converts
        assert d.elaborations == 2
        monkeypatch.setattr(h, "rtl_source_digest", lambda: "changed-sources")
        h.write_verilog(d.make(), name, design_key="w4")
        assert d.elaborations == 3
        import gc
        gc.collect()
        assert not [w for w in recwarn if "never used" in str(w.message)]
    finally:
        for f in h.VERILOG_DIR.rglob(f"{name}-*"):
            f.unlink()


def test_keyed_verilog_follows_the_class_source(tmp_path, monkeypatch):
    """A design class outside the RTL packages (a test's wrapper): editing its file
    converts the design again; a deleted Verilog file is converted again too."""
    import importlib
    import uuid

    import rtl.verilog as h

    mod = f"keymod_{uuid.uuid4().hex[:8]}"
    src = tmp_path / f"{mod}.py"
    src.write_text("from amaranth.hdl import Module\nfrom amaranth.lib import wiring\n"
                   "from amaranth.lib.wiring import In, Out\nN = [0]\n\n"
                   "class Top(wiring.Component):\n    def __init__(self):\n"
                   "        super().__init__({'a': In(4), 'y': Out(4)})\n\n"
                   "    def elaborate(self, platform):\n        N[0] += 1\n        m = Module()\n"
                   "        m.d.comb += self.y.eq(~self.a)\n        return m\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    m = importlib.import_module(mod)
    name = f"keytest_{mod}"
    try:
        _, p = h.write_verilog(m.Top(), name, design_key="k")
        h.write_verilog(m.Top(), name, design_key="k")
        assert m.N[0] == 1
        src.write_text(src.read_text() + "# edited\n")
        h.write_verilog(m.Top(), name, design_key="k")
        assert m.N[0] == 2
        p.unlink()
        _, p2 = h.write_verilog(m.Top(), name, design_key="k")
        assert m.N[0] == 3 and p2 == p and p.exists()
    finally:
        for f in h.VERILOG_DIR.rglob(f"{name}-*"):
            f.unlink()


def test_rtl_source_digest_covers_the_rtl_packages(tmp_path, monkeypatch):
    import rtl.verilog as h

    assert set(h.RTL_PACKAGES) == {"arch", "rtl", "pe", "noc"}
    assert h.rtl_source_digest() == h.rtl_source_digest() and len(h.rtl_source_digest()) == 16
    # every .py file of the packages counts, with its contents
    for pkg in h.RTL_PACKAGES:
        (tmp_path / pkg).mkdir()
    (tmp_path / "pe" / "x.py").write_text("a = 1\n")
    monkeypatch.setattr(h, "ROOT", tmp_path)
    digest = h.rtl_source_digest.__wrapped__
    d1 = digest()
    (tmp_path / "pe" / "x.py").write_text("a = 2\n")
    d2 = digest()
    (tmp_path / "noc" / "y.py").write_text("")
    assert len({d1, d2, digest()}) == 3


def test_sim_matrix_marks():
    """Every case on Icarus in ``make test``; on Verilator only the chosen ones, the others
    ``slow``; a chosen case that does not exist is an error."""
    from tests.simulators import sim_matrix

    params = {p.id: {m.name for m in p.marks} for p in sim_matrix(["a", "b"], verilator={"b"})}
    assert params == {"a-icarus": set(), "a-verilator": {"verilator", "slow"},
                      "b-icarus": set(), "b-verilator": {"verilator"}}
    with pytest.raises(ValueError, match=r"\['c'\] are not among the cases"):
        sim_matrix(["a", "b"], verilator={"c"})
    # ``slow``: slow on both simulators
    params = {p.id: {m.name for m in p.marks} for p in sim_matrix(["a", "b"], verilator={"b"}, slow={"b"})}
    assert params["b-icarus"] == {"slow"} and params["b-verilator"] == {"verilator", "slow"}
    assert params["a-icarus"] == set()
    with pytest.raises(ValueError, match=r"\['d'\] are not among the cases"):
        sim_matrix(["a", "b"], verilator=set(), slow={"d"})


def test_primitive_models_and_missing_extra_sources(tmp_path):
    """An ECP5 platform brings the models of its primitives (existing files); a missing
    extra source is an error that names it, before anything is built."""
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from rtl.fpga import get_platform
    from sim.harness import MODELS, primitive_models, run_cocotb

    models = primitive_models(get_platform("ulx3s-85f"))
    assert [p.name for p in models] == ["MULT18X18D.v", "DCCA.v"] and all(p.is_file() for p in models)
    assert all(p.parent == MODELS for p in models) and primitive_models(None) == []

    class Tiny(wiring.Component):
        def __init__(self):
            super().__init__({"a": In(1), "o": Out(1)})

        def elaborate(self, platform):
            m = Module()
            r = Signal()
            m.d.sync += r.eq(self.a)
            m.d.comb += self.o.eq(r)
            return m

    with pytest.raises(FileNotFoundError, match="nope.v does not exist"):
        run_cocotb(Tiny(), "tiny", "no_such_tb", sim="icarus", extra_sources=[tmp_path / "nope.v"])
