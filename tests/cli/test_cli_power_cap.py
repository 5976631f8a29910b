"""`caterpillar train --power-cap` / `dse --power-cap`: bad values are one-line errors;
a small chip run reports the capped and naive schedules and writes the trace."""

import json

import pytest

from cli.main import main


@pytest.mark.parametrize("argv,msg", [
    (["--power-cap", "0"], "the cap must be a positive number of watts"),
    (["--power-cap", "-3"], "the cap must be a positive number of watts"),
    (["--power-cap", "x"], "expected watts"),
    (["--power-cap", "1", "--power-window", "0"], "the window must be at least 1 cycle"),
    (["--power-window", "100"], "--power-window applies to --power-cap"),
    (["--config", "tiny", "--power-cap", "1"], "configuration has one core"),
])
def test_bad_power_cap_options(argv, msg, capsys):
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_cap_below_leakage_is_one_line(capsys):
    assert main(["train", "--config", "chip-small", "--hidden", "16", "--max-train", "8", "--max-test", "4",
                 "--epochs", "1", "--power-cap", "0.01", "--progress", "off"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "leakage floor" in err[-1] and err[-1].startswith("caterpillar: error:")


def test_cp_cap_below_leakage_is_one_line(capsys):
    assert main(["train", "--config", "chip-small", "--method", "cp", "--hidden", "16", "--max-train", "8",
                 "--max-test", "4", "--epochs", "1", "--power-cap", "0.01", "--progress", "off"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "leakage floor" in err[0] and err[0].startswith("caterpillar: error:")


def test_train_cp_under_a_cap(tmp_path, capsys):
    js = tmp_path / "r.json"
    assert main(["train", "--config", "chip-small", "--method", "cp", "--hidden", "16", "--max-train", "16",
                 "--max-test", "8", "--epochs", "1", "--power-cap", "0.3", "--power-window", "2000",
                 "--progress", "off", "--json", str(js)]) == 0
    assert "capped schedule / naive duty cycling" in capsys.readouterr().out
    d = json.loads(js.read_text())["power_cap"]
    assert d["method"] == "cp" and d["window_cycles"] == 2000
    assert max(d["runs"]["capped"]["watts"]) <= 0.3 and max(d["runs"]["naive"]["watts"]) <= 0.3


def test_dse_refuses_a_window_without_a_cap(capsys):
    assert main(["dse", "--power-window", "10"]) == 2
    assert "--power-window applies to --power-cap" in capsys.readouterr().err


def test_train_under_a_cap(tmp_path, capsys):
    js, png = tmp_path / "r.json", tmp_path / "p.png"
    assert main(["train", "--config", "chip-small", "--hidden", "16", "--max-train", "16", "--max-test", "8",
                 "--epochs", "1", "--power-cap", "0.3", "--power-window", "2000", "--progress", "off",
                 "--json", str(js), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "capped schedule / naive duty cycling" in out
    d = json.loads(js.read_text())["power_cap"]
    assert d["window_cycles"] == 2000 and d["cap_watts"] == 0.3
    assert max(d["runs"]["capped"]["watts"]) <= 0.3 and max(d["runs"]["naive"]["watts"]) <= 0.3
    assert png.stat().st_size > 1000


def test_dse_best_design_under_a_cap(tmp_path, capsys):
    js = tmp_path / "d.json"
    assert main(["dse", "--base", "chip-small", "--workloads", "24-16-10", "--space", "cores=4", "--engine", "local",
                 "--references", "none", "--cache", str(tmp_path / "c.jsonl"), "--power-cap", "0.3",
                 "--power-window", "2000", "--json", str(js), "--progress", "off"]) == 0
    d = json.loads(js.read_text())["power_cap"]
    assert d["workload"] == "24-16-10" and max(d["runs"]["capped"]["watts"]) <= 0.3
    assert "capped schedule / naive duty cycling" in capsys.readouterr().out


def test_dse_cp_design_under_a_cap(tmp_path, capsys):
    js = tmp_path / "d.json"
    assert main(["dse", "--base", "chip-small", "--workloads", "24-16-10", "--space", "cores=4", "method=cp",
                 "--engine", "local", "--references", "none", "--cache", str(tmp_path / "c.jsonl"), "--power-cap",
                 "0.3", "--power-window", "2000", "--json", str(js), "--progress", "off"]) == 0
    d = json.loads(js.read_text())["power_cap"]
    assert d["method"] == "cp" and max(d["runs"]["capped"]["watts"]) <= 0.3
    assert max(d["runs"]["naive"]["watts"]) <= 0.3
    assert "capped schedule / naive duty cycling" in capsys.readouterr().out
