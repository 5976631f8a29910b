"""benchmarks/compare.py: figures must match; machine measurements are skipped."""

import json

from benchmarks.compare import diff, main, volatile


def test_volatile_keys():
    for k in ("seconds", "wall_s", "compile_s", "fast cold ms", "Verilator PE-cycles/s", "date", "machine",
              "peak_rss_mb_process_so_far", "ratio warm"):
        assert volatile(k), k
    for k in ("cycles", "steps", "GFLOPS/W compared", "energy_pj", "mac_util", "status", "ratio"):
        assert not volatile(k), k


def test_diff_finds_changed_figures_only():
    a = {"rows": [{"cycles": 10, "wall_s": 1.0}], "seconds": 5, "note": "x"}
    b = {"rows": [{"cycles": 10, "wall_s": 2.0}], "seconds": 9, "note": "x"}
    assert diff(a, b) == []
    b["rows"][0]["cycles"] = 11
    assert diff(a, b) == ["/rows[0]/cycles: 10 before, 11 after"]
    assert diff({"x": [1]}, {"x": [1, 2]}) == ["/x: 1 items before, 2 after"]


def test_main_exit_codes(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "k.json").write_text(json.dumps({"v": 1, "seconds": 3}))
    (tmp_path / "b" / "k.json").write_text(json.dumps({"v": 1, "seconds": 4}))
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "k: identical" in capsys.readouterr().out
    (tmp_path / "b" / "k.json").write_text(json.dumps({"v": 2}))
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
