"""Power/area model: technology-table validation and the arithmetic of a report."""

import json

import pytest

from rtl.config import ArchConfig
from rtl.perf_counters import counter_names
from sim.power import DEFAULT_TECH, TechError, area_of_core, load_tech, report_from_counters


def _counters(cfg, cycles=1000, fma=900, **kw):
    c = dict.fromkeys(counter_names(cfg), 0)
    c.update(cycles=cycles, instructions=cycles - cfg.fpu_latency - 2)
    for p in range(cfg.n_pes):
        c[f"fma[{p}]"] = fma
    c.update(kw)
    return c


def test_default_table_uses_reference_numbers():
    assert DEFAULT_TECH.fpu_pj_per_fma["binary16"] == 2.63
    assert DEFAULT_TECH.local_sram_pj_per_16b == 3.5
    assert DEFAULT_TECH.spad_pj_per_16b == 16.0
    raw = json.loads((load_tech.__globals__["TECH_DIR"] / "45nm.json").read_text())
    for key, entry in raw.items():
        if isinstance(entry, dict) and "value" in entry:
            assert entry["source"].strip(), key
        elif isinstance(entry, dict):
            for fmt, e in entry.items():
                assert e["source"].strip(), (key, fmt)


def test_fpu_only_ceiling_matches_reference_estimate():
    """Only FMAs, every PE busy every cycle: 2 FLOP / 2.63 pJ = 760 GFLOPS/W (reference scope)."""
    cfg = ArchConfig()
    rep = report_from_counters(cfg, _counters(cfg, cycles=1000, fma=1000))
    assert rep.utilization == 1.0
    assert rep.gflops_per_w_reference_scope == pytest.approx(2 / 2.63e-12 / 1e9, rel=1e-9)
    assert rep.gflops == pytest.approx(16 * 2 * 1.0, rel=1e-9)  # 16 PEs x 2 FLOP x 1 GHz


def test_energy_categories_add_up():
    cfg = ArchConfig()
    c = _counters(cfg, mem_a_rd=5000, mem_b_wr=300, rf_rd=7000, rf_wr=2000,
                  **{"row_hops[0]": 40, "col_hops[3]": 12})
    rep = report_from_counters(cfg, c)
    e = rep.energy_pj
    assert e["sram"] == pytest.approx(5300 * 3.5)
    assert e["rf"] == pytest.approx(9000 * 0.12)
    pitch = rep.geometry["pe_pitch_mm"]
    assert e["bus"] == pytest.approx(52 * 16 * pitch * 0.18)
    total = sum(e.values())
    assert rep.pj_per_flop["total"] == pytest.approx(total / rep.flops)
    assert rep.gflops_per_w == pytest.approx(rep.flops / total * 1e3)
    assert rep.watts == pytest.approx(total * 1e-12 / rep.seconds)


def test_binary32_scales_memory_energy_by_width():
    c16, c32 = ArchConfig(), ArchConfig(fmt="binary32")
    r16 = report_from_counters(c16, _counters(c16, mem_a_rd=100))
    r32 = report_from_counters(c32, _counters(c32, mem_a_rd=100))
    assert r32.energy_pj["sram"] == pytest.approx(2 * r16.energy_pj["sram"])
    assert r32.energy_pj["fpu"] / r16.energy_pj["fpu"] == pytest.approx(4.6 / 2.63)


def test_area_of_default_core():
    a = area_of_core(ArchConfig())
    assert a["sram"] == pytest.approx(16 * 0.0617)
    assert a["fpu"] == pytest.approx(16 * 0.0056)


def test_workload_flops_override():
    cfg = ArchConfig()
    rep = report_from_counters(cfg, _counters(cfg), flops=12345)
    assert rep.flops == 12345 and rep.flops_source == "workload mathematics"


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.pop("rf_pj_per_16b"), "missing entries"),
    (lambda d: d["rf_pj_per_16b"].update(value=-1), "finite number >= 0"),
    (lambda d: d["rf_pj_per_16b"].update(source=""), "has no 'source'"),
    (lambda d: d.update(fpu_pj_per_fma={}), "must map format names"),
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
    del d["fpu_pj_per_fma"]["bfloat16"]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d))
    cfg = ArchConfig(fmt="bfloat16")
    with pytest.raises(TechError, match="no fpu_pj_per_fma entry for format 'bfloat16'"):
        report_from_counters(cfg, _counters(cfg), tech=load_tech(p))


def test_report_identical_from_rtl_and_fast_model_counters():
    """The same kernel run on the RTL (Icarus) and on the fast model gives the same
    counters, hence the same report."""
    import numpy as np

    from conftest import require_sim
    from noc.collectives import Region
    from sim.core_run import Phase, run_session
    from sw.asm import Builder
    from sw.kernels import emit_gemv
    from sw.layout import pack_matrix, pack_vector
    from sw.transfer import emit_load, load_beats_for

    require_sim("icarus")
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
