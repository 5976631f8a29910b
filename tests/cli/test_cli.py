"""The `caterpillar` command line: info, verilog, synth (smoke), report, errors."""

import json
import subprocess
import sys


from cli.main import main
from arch.config import PRESETS


def test_info_json(capsys):
    assert main(["info", "--config", "tiny", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["nr"] == 2 and d["fmt"] == "binary16" and d["fpu_latency"] == 7


def test_bad_config_is_a_clear_error(capsys):
    assert main(["info", "--config", '{"nr": 99}']) == 2
    assert "ArchConfig.nr must be an integer in 1..16, got 99" in capsys.readouterr().err


def test_verilog_written_atomically(tmp_path):
    out = tmp_path / "pe.v"
    assert main(["verilog", "--config", "tiny", "-o", str(out)]) == 0
    text = out.read_text()
    assert "module caterpillar_pe" in text and "mem_a" in text
    assert not list(tmp_path.glob(".*tmp"))


def test_verilog_of_the_chip(tmp_path, capsys):
    out = tmp_path / "chip.v"
    assert main(["verilog", "--config", "chip-tiny", "--top", "chip", "-o", str(out)]) == 0
    text = out.read_text()
    assert "module caterpillar_chip" in text and "s_axis_tdest" in text and "m_axis_tid" in text
    assert main(["verilog", "--config", "tiny", "--top", "chip", "-o", str(tmp_path / "x.v")]) != 0
    assert "cores >= 2" in capsys.readouterr().err


def test_run_and_report(tmp_path, capsys):
    prog = tmp_path / "p.s"
    prog.write_text("loop i 20 {\n    fma r0 = r1 * r2 + r0\n}\nhalt\n")
    run_json = tmp_path / "run.json"
    assert main(["run", str(prog), "--config", "tiny", "--model", "fast", "--json", str(run_json)]) == 0
    assert json.loads(run_json.read_text())["config"]["nr"] == 2      # the run stores its configuration
    rep_json, png = tmp_path / "rep.json", tmp_path / "e.png"
    # without --config the stored configuration is used
    assert main(["report", str(run_json), "--json", str(rep_json), "--png", str(png)]) == 0
    rep = json.loads(rep_json.read_text())
    # LOOP + 20 body + HALT = 22 instructions; cycles = instructions + fpu_latency + 2
    assert rep["fma"] == 20 * 4 and rep["cycles"] == 22 + 7 + 2 and rep["pes"] == 4
    assert png.read_bytes()[:4] == b"\x89PNG"
    # a program given directly runs on the fast model; same counters, same report
    assert main(["report", str(prog), "--config", "tiny", "--json", str(tmp_path / "rep2.json")]) == 0
    assert json.loads((tmp_path / "rep2.json").read_text())["energy_pj"] == rep["energy_pj"]
    # --config that agrees is accepted; one that contradicts the run is a one-line error
    assert main(["report", str(run_json), "--config", "tiny"]) == 0
    capsys.readouterr()
    assert main(["report", str(run_json), "--config", "default", "--json", str(tmp_path / "no.json")]) == 2
    err = capsys.readouterr().err
    assert "contradicts the run" in err and "nr 4 (run: 2)" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no.json").exists()


def test_report_of_a_chip_run(tmp_path, capsys):
    """A chip run's record (counters summed over its cores) reports all its PEs and area."""
    from arch.counters import counter_names
    from sim.power import report_from_counters, run_record

    cfg = PRESETS["chip-small"]
    c = dict.fromkeys(counter_names(cfg), 0)
    c.update(cycles=500, instructions=480, **{f"fma[{p}]": 400 for p in range(16)})
    rec = run_record(report_from_counters(cfg, c, n_cores=4, flops=4000))
    f = tmp_path / "chip.json"
    f.write_text(json.dumps({"run": rec, "losses": [0.1]}))
    out = tmp_path / "r.json"
    assert main(["report", str(f), "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["pes"] == 64 and r["cores"] == 4 and r["flops"] == 4000
    assert "64" in capsys.readouterr().out


def test_report_bad_input(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{")
    assert main(["report", str(bad)]) == 1
    assert "x.json: not JSON" in capsys.readouterr().err
    bad.write_text("[1, 2]")
    assert main(["report", str(bad)]) == 1
    assert "a run record is a JSON object, got a list" in capsys.readouterr().err
    bad.write_text(json.dumps({"counters": {"cycles": 10, "instructions": 1}}))
    assert main(["report", str(bad)]) == 1
    assert "stores no configuration; name it with --config" in capsys.readouterr().err


def test_console_script_installed():
    r = subprocess.run([sys.executable, "-m", "cli", "info"], capture_output=True, text=True)
    assert r.returncode == 0 and "nr" in r.stdout


def test_cp_too_few_samples_fails_before_training(capsys):
    """CP's step figures need a steady-state step: too few samples per epoch is refused
    before the first pipeline step, in one line."""
    rc = main(["train", "--config", "chip-tiny", "--method", "cp", "--data", "synthetic", "--hidden", "6",
               "--max-train", "2", "--progress", "off"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("caterpillar: error: CP figures need a steady-state step")
    assert "epoch 1" not in err


def test_cp_is_shown_beside_float64_cp(capsys):
    rc = main(["train", "--config", "chip-tiny", "--method", "cp", "--data", "synthetic", "--hidden", "6",
               "--max-train", "40", "--max-test", "20", "--epochs", "1", "--lr", "0.05", "--progress", "off"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "float64 CP with the same pipeline schedule" in out and "float64 SGD, no stale weights" in out


def test_chip_sgd_collective_options(capsys):
    """``--out-reduce stream`` and ``--no-overlap`` reach the compiler (``--describe``
    names the reduce; the all-gathers and the broadcast of x run apart) and the golden
    trainer follows the program (``--golden-steps``: bit for bit or an error)."""
    args = ["train", "--config", "chip-tiny", "--data", "synthetic", "--hidden", "6", "--max-train", "8",
            "--max-test", "8", "--epochs", "1", "--golden-steps", "4", "--progress", "off", "--describe"]
    assert main(args + ["--out-reduce", "stream", "--no-overlap"]) == 0
    out = capsys.readouterr().out
    assert "reduced onto core 0 by the stream" in out
    assert "broadcast of x inside" not in out
    assert main(args + ["--out-reduce", "chain"]) == 0
    out = capsys.readouterr().out
    assert "reduced onto core 0 by the chain" in out and "broadcast of x inside W0's forward GEMV" in out
