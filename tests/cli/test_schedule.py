"""``caterpillar schedule``: the placement and why, a run checked against the golden
trainer, JSON output, and one-line errors."""

from __future__ import annotations

import json

import pytest

from cli.main import main


def test_describe_and_run(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["schedule", "--hetero", "hetero-tiny", "--network", "12-10-9-5", "--describe", "--run", "1",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "why: least energy per sample" in text and "layer 0 (10 x 12)" in text
    assert "weights = golden bit for bit" in text
    doc = json.loads(out.read_text())
    assert doc["run"]["steps"][0]["golden_bit_exact"] and "schedule" in doc


def test_given_placement_on_the_cycle_engine(capsys):
    for tr in ("ring", "host"):
        assert main(["schedule", "--hetero", "hetero-tiny", "--network", "6-5-3", "--placement", "0,1", "--run", "1",
                     "--engine", "cycle", "--transfers", tr]) == 0
        text = capsys.readouterr().out
        assert "placement 0,1 (given)" in text and "golden bit for bit" in text


def test_given_split_placement(capsys):
    assert main(["schedule", "--hetero", "hetero-tiny", "--network", "12-10-9-5", "--placement", "1:2,0:2,1",
                 "--run", "1"]) == 0
    text = capsys.readouterr().out
    assert "placement 1:2,0:2,1 (given)" in text and "golden bit for bit" in text


@pytest.mark.parametrize("argv, msg", [
    (["--hetero", "hetero-tiny", "--network", "12-10-9-5", "--placement", "1,1,1:2"], "output layer runs on one"),
    (["--hetero", "nope"], "neither a heterogeneous preset"),
    (["--hetero", "hetero-tiny", "--network", "6-x"], "expected layer sizes"),
    (["--hetero", "hetero-tiny", "--network", "6-3"], "at least an input, a hidden"),
    (["--hetero", "hetero-tiny", "--schedule", "throughput"], "needs --energy-budget"),
    (["--hetero", "hetero-tiny", "--energy-budget", "1"], "goes with --schedule throughput"),
    (["--hetero", "hetero-tiny", "--network", "6-5-3", "--placement", "0,1,1"], "placement has 3 layers"),
    (["--hetero", "hetero-tiny", "--network", "6-5-3", "--placement",
      '{"layers": [{"forward": 0, "backward": 1, "update": 0}, 1]}'], "copied between the groups"),
    (["--hetero", "hetero-tiny-fmt", "--network", "6-5-3", "--placement", "0,1", "--transfers", "host"],
     "different number formats"),
    (["--hetero", "hetero-tiny", "--network", "6-5-3", "--schedule", "throughput", "--energy-budget", "1e-15"],
     "no placement meets"),
    (["--hetero", "hetero-tiny", "--network", "200-200-10"], "no placement of 200-200-10 fits the chip's memories"),
])
def test_bad_input_is_one_line(argv, msg, capsys):
    assert main(["schedule"] + argv) != 0
    err = capsys.readouterr().err.strip()
    assert msg in err and "\n" not in err and err.startswith("caterpillar: error:")
