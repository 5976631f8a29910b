"""Power/area model: technology-table validation, the convention, scopes, leakage, area
and the arithmetic of a report."""

import json

import pytest

from arch.config import PRESETS, ArchConfig
from arch.counters import counter_names
from sim.power import (DEFAULT_TECH, EVERYTHING, LOGIC_BLOCKS, SRAM_BLOCKS, TechError, area_of_core, core_area,
                       load_tech, read_run_record, report_from_counters, run_record)


def _counters(cfg, cycles=1000, fma=900, **kw):
    c = dict.fromkeys(counter_names(cfg), 0)
    c.update(cycles=cycles, instructions=cycles - cfg.fpu_latency - 2)
    for p in range(cfg.n_pes):
        c[f"fma[{p}]"] = fma
    c.update(kw)
    return c


NO_LEAK = DEFAULT_TECH.replace(leakage_mw_per_mm2_logic=0.0, leakage_mw_per_mm2_sram=0.0)


def test_default_table_convention_and_sources():
    """FPU energy per FLOP from the reference design's own totals and split (docs/power.md),
    two FLOPs per FPU issue; every number cites a source."""
    assert DEFAULT_TECH.fpu_pj_per_flop["binary16"] == 2.36
    assert DEFAULT_TECH.flops_per_fpu_issue == 2
    assert DEFAULT_TECH.local_sram_pj_per_16b == 3.5
    assert DEFAULT_TECH.spad_pj_per_16b == 16.0
    assert DEFAULT_TECH.leakage_mw_per_mm2_logic > 0 and DEFAULT_TECH.leakage_mw_per_mm2_sram > 0
    # the derivation: the paper's three statements imply 2.26 / 2.45 / 2.37 pJ per FLOP
    implied = [1e3 / 177 / 2.5, 1e3 / 204 / 2, 1e3 / 211 / 2]
    assert sum(implied) / 3 == pytest.approx(2.36, abs=0.005)
    raw = json.loads((load_tech.__globals__["TECH_DIR"] / "45nm.json").read_text())
    for key, entry in raw.items():
        if isinstance(entry, dict) and "value" in entry:
            assert entry["source"].strip(), key
        elif isinstance(entry, dict):
            for fmt, e in entry.items():
                assert e["source"].strip(), (key, fmt)


def test_fpu_only_ceiling():
    """Only FPU issues, every PE busy every cycle, no leakage: 1 / 2.36 pJ = 424 GFLOPS/W
    (the reference design's FPU-only ceiling in this convention, ~380-440)."""
    cfg = ArchConfig()
    rep = report_from_counters(cfg, _counters(cfg, cycles=1000, fma=1000), tech=NO_LEAK)
    assert rep.utilization == 1.0
    assert rep.gflops_per_w_compared == pytest.approx(1 / 2.36e-12 / 1e9, rel=1e-9)
    assert rep.gflops == pytest.approx(16 * 2 * 1.0, rel=1e-9)  # 16 PEs x 2 FLOP x 1 GHz


def test_energy_categories_and_scopes_add_up():
    cfg = ArchConfig()
    c = _counters(cfg, mem_a_rd=5000, mem_b_wr=300, rf_rd=7000, rf_wr=2000,
                  **{"row_hops[0]": 40, "col_hops[3]": 12})
    rep = report_from_counters(cfg, c)
    e = rep.energy_pj
    assert tuple(e) == EVERYTHING
    assert e["fpu"] == pytest.approx(16 * 900 * 2 * 2.36)
    assert e["sram"] == pytest.approx(5300 * 3.5)
    assert e["rf"] == pytest.approx(9000 * 0.12)
    pitch = rep.geometry["pe_pitch_mm"]
    assert e["bus"] == pytest.approx(52 * 16 * pitch * 0.18)
    total = sum(e.values())
    assert rep.pj_per_flop["total"] == pytest.approx(total / rep.flops)
    assert rep.gflops_per_w_all == pytest.approx(rep.flops / total * 1e3)
    # the compared scope: the reference design's FPU and memories, and our buses
    assert rep.gflops_per_w_compared == pytest.approx(rep.flops / (e["fpu"] + e["sram"] + e["spad"] + e["bus"]) * 1e3)
    assert e["leakage"] > 0 and rep.gflops_per_w_all < rep.gflops_per_w_compared
    assert rep.watts == pytest.approx(total * 1e-12 / rep.seconds)
    assert rep.memory_over_fpu == pytest.approx((e["sram"] + e["spad"]) / e["fpu"])
    assert "compared" in rep.table() and "everything" in rep.table()


def test_leakage_is_area_times_density_times_time():
    """An idle core still leaks: logic blocks at the logic density, SRAMs at the SRAM
    density, for the run's time, on every core counted."""
    cfg = PRESETS["S"]
    c = _counters(cfg, cycles=2000, fma=0)
    rep = report_from_counters(cfg, c, n_cores=cfg.cores)
    a = area_of_core(cfg)
    assert a["ring"] > 0 and "ring" in LOGIC_BLOCKS          # the ring's receive FIFO: flip-flops
    mw = cfg.cores * (19.9 * sum(a.get(k, 0) for k in LOGIC_BLOCKS) + 45.8 * sum(a.get(k, 0) for k in SRAM_BLOCKS))
    assert rep.energy_pj["leakage"] == pytest.approx(mw * 1e-3 * 2e-6 * 1e12)
    # twice the time, twice the leakage; zero density, zero leakage
    assert report_from_counters(cfg, dict(c, cycles=4000), n_cores=cfg.cores).energy_pj["leakage"] == \
        pytest.approx(2 * rep.energy_pj["leakage"])
    assert report_from_counters(cfg, c, n_cores=cfg.cores, tech=NO_LEAK).energy_pj["leakage"] == 0


def test_binary32_scales_energy():
    c16, c32 = ArchConfig(), ArchConfig(fmt="binary32")
    r16 = report_from_counters(c16, _counters(c16, mem_a_rd=100))
    r32 = report_from_counters(c32, _counters(c32, mem_a_rd=100))
    assert r32.energy_pj["sram"] == pytest.approx(2 * r16.energy_pj["sram"])
    assert r32.energy_pj["fpu"] / r16.energy_pj["fpu"] == pytest.approx(7.24 / 2.36)


def test_area_reproduces_the_reference_design():
    """Per PE 0.0798 mm^2 and 1.948 mm^2 of scratchpad per core: S and L within 1 % of
    103.2 and 178.9 mm^2 (the microcode store is reported beside them)."""
    a = area_of_core(ArchConfig())
    assert a["sram"] == pytest.approx(16 * 0.0617)
    assert a["fpu"] == pytest.approx(16 * 0.0056)
    assert a["pe"] == pytest.approx(0.0798, abs=1e-4)
    for name, paper in (("S", 103.2), ("L", 178.9)):
        cfg = PRESETS[name]
        blocks = area_of_core(cfg, ucode_words=1024)
        ours = cfg.cores * sum(v for k, v in blocks.items() if k not in ("pe", "ucode"))
        assert ours == pytest.approx(paper, rel=0.01), name
    # the microcode store scales with the words it holds
    small, big = area_of_core(ArchConfig(), ucode_words=512), area_of_core(ArchConfig(), ucode_words=1024)
    assert big["ucode"] == pytest.approx(2 * small["ucode"])
    with pytest.raises(ValueError, match="ucode_words"):
        area_of_core(ArchConfig(), ucode_words=0)


def test_ring_fifo_area_grows_with_its_depth():
    """A chip core's ring receive FIFO: depth x nr lanes x width flip-flops at the
    register file's area per bit; a lone core has none; a core's area is its blocks (not
    the one-PE ``pe`` entry)."""
    cfg = PRESETS["S"]
    a8, a24 = area_of_core(cfg)["ring"], area_of_core(cfg.replace(ring_fifo_depth=24))["ring"]
    assert a8 == pytest.approx(8 * 4 * 16 * DEFAULT_TECH.rf_area_mm2_per_16x16b / 256)
    assert a24 == pytest.approx(3 * a8)
    assert "ring" not in area_of_core(cfg.replace(cores=1))
    assert core_area(cfg) == pytest.approx(sum(v for k, v in area_of_core(cfg).items() if k != "pe"))
    assert core_area(PRESETS["L"]) - core_area(PRESETS["L"].replace(ring_fifo_depth=8)) == pytest.approx(
        (24 - 8) * 16 * 16 * DEFAULT_TECH.rf_area_mm2_per_16x16b / 256)


def test_control_energy_grows_with_the_microcode_store():
    cfg = ArchConfig()
    c = _counters(cfg)
    small = report_from_counters(cfg, c, ucode_words=256).energy_pj["control"]
    big = report_from_counters(cfg, c, ucode_words=4096).energy_pj["control"]
    assert big > small


def test_workload_flops_override_and_bad_arguments():
    cfg = ArchConfig()
    rep = report_from_counters(cfg, _counters(cfg), flops=12345)
    assert rep.flops == 12345 and rep.flops_source == "workload mathematics"
    with pytest.raises(ValueError, match="flops"):
        report_from_counters(cfg, _counters(cfg), flops=-5)
    with pytest.raises(ValueError, match="non-negative integers"):
        report_from_counters(cfg, _counters(cfg, mem_a_rd=-1))
    with pytest.raises(ValueError, match="n_cores"):
        report_from_counters(cfg, _counters(cfg), n_cores=0)


def test_run_record_round_trip_and_errors():
    cfg = PRESETS["chip-small"]
    rep = report_from_counters(cfg, _counters(cfg), flops=999, n_cores=cfg.cores, ucode_words=300)
    rec = json.loads(json.dumps(run_record(rep)))
    got = read_run_record(rec)
    assert got["config"] == cfg.to_dict() and got["n_cores"] == 4 and got["flops"] == 999
    again = report_from_counters(ArchConfig.from_dict(got["config"]), got["counters"], flops=got["flops"],
                                 n_cores=got["n_cores"], ucode_words=got["ucode_words"])
    assert again.to_dict() == rep.to_dict()
    assert read_run_record({"run": rec, "losses": []})["n_cores"] == 4      # a train JSON
    for bad, needle in (([1, 2], "JSON object"), ({"x": 1}, "no 'counters'"),
                        ({"counters": {"cycles": -1}}, "non-negative"), ({"counters": {"a": 1}, "n_cores": 0}, "n_cores"),
                        ({"counters": {"a": 1}, "config": 3}, "config")):
        with pytest.raises(ValueError, match=needle):
            read_run_record(bad)


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.pop("rf_pj_per_16b"), "missing entries"),
    (lambda d: d["rf_pj_per_16b"].update(value=-1), "finite number >= 0"),
    (lambda d: d["rf_pj_per_16b"].update(source=""), "has no 'source'"),
    (lambda d: d.update(fpu_pj_per_flop={}), "must map format names"),
])
def test_bad_tech_tables(tmp_path, mutate, needle):
    d = json.loads((load_tech.__globals__["TECH_DIR"] / "45nm.json").read_text())
    mutate(d)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d))
    with pytest.raises(TechError, match=needle):
        load_tech(p)


def test_missing_and_malformed_tech_files(tmp_path):
    with pytest.raises(TechError, match="does not exist"):
        load_tech(tmp_path / "none.json")
    p = tmp_path / "bad.json"
    p.write_text("{")
    with pytest.raises(TechError, match="not valid JSON"):
        load_tech(p)


def test_unknown_format_in_table(tmp_path):
    d = json.loads((load_tech.__globals__["TECH_DIR"] / "45nm.json").read_text())
    del d["fpu_pj_per_flop"]["bfloat16"]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d))
    cfg = ArchConfig(fmt="bfloat16")
    with pytest.raises(TechError, match="no fpu_pj_per_flop entry for format 'bfloat16'"):
        report_from_counters(cfg, _counters(cfg), tech=load_tech(p))


def test_report_identical_from_rtl_and_fast_model_counters(require_simulator):
    """The same kernel run on the RTL (Icarus) and on the fast model gives the same
    counters, hence the same report."""
    import numpy as np

    from sw.collectives import Region
    from sim.core_run import Phase, run_session
    from sw.asm import Builder
    from sw.kernels import emit_gemv
    from sw.layout import pack_matrix, pack_vector
    from sw.transfer import emit_load, load_beats_for

    require_simulator("icarus")
    cfg = ArchConfig(nr=2, mem_a_words=128, mem_b_words=128, ucode_depth=256)
    rng = np.random.default_rng(11)
    m, n = 9, 7
    W = cfg.fmt.from_float(rng.uniform(-1, 1, (m, n)))
    x = cfg.fmt.from_float(rng.uniform(-1, 1, n))
    bl = Builder(cfg)
    locW, locx = pack_matrix(W, 2), pack_vector(x, 2, "cols")
    emit_load(bl, cfg, "a", 0, locW.shape[2])
    emit_load(bl, cfg, "b", 0, locx.shape[2], loop="xb")
    bl.halt()
    bk = Builder(cfg)
    emit_gemv(bk, cfg, m, n, Region("a", 0), Region("b", 0), Region("b", 64))
    bk.halt()
    phases = [Phase(bl.build().words(), load_beats_for(cfg, locW) + load_beats_for(cfg, locx)),
              Phase(bk.build().words())]
    rtl = run_session(cfg, phases, backend="rtl", sim="icarus", name="power-eq")[1]
    fast = run_session(cfg, phases, backend="fast")[1]
    assert rtl.counters == fast.counters
    r1 = report_from_counters(cfg, rtl.counters, flops=2 * m * n).to_dict()
    r2 = report_from_counters(cfg, fast.counters, flops=2 * m * n).to_dict()
    assert r1 == r2


def test_sram_energy_scales_with_bank_size_anchored_at_reference():
    from sim.power import sram_pj_per_access

    assert sram_pj_per_access(ArchConfig(), "a") == pytest.approx(3.5)          # 8 KB banks: Table 1
    big = ArchConfig(mem_a_words=16384, mem_b_words=1024)                     # 32 KB and 2 KB banks
    assert sram_pj_per_access(big, "a") == pytest.approx(7.0)
    assert sram_pj_per_access(big, "b") == pytest.approx(3.5 * 0.5)
