"""``caterpillar share``: job files checked with one-line errors, right-sizing and buddy
packing, a concurrent run on a small chip (each job's step in its group equal to its run
alone), a faulty job stopped while the other finishes."""

import json

import pytest

from arch.config import ArchConfig
from arch.errors import InputError
from cli.main import main
from share import schedule
from share.jobs import parse_jobs
from share.schedule import Profile, pack, right_size, share

CHIP = ArchConfig.from_dict({"preset": "chip-small"})
JOBS = [{"name": "a", "network": [16, 32, 4], "steps": 2},
        {"name": "b", "network": [16, 16, 4], "method": "mbgd:4", "steps": 2}]


@pytest.mark.parametrize("job,msg", [
    ({"network": "resnet", "steps": 1}, "unknown network 'resnet'"),
    ({"network": "digits", "steps": 1, "cores": 64}, "more cores than the chip has"),
    ({"network": "digits", "steps": 1, "cores": 3}, "power of two"),
    ({"network": "digits", "steps": 1, "lr": -1}, "lr -1"),
    ({"network": "digits", "steps": 1, "method": "mbgd:1"}, "batch must be"),
    ({"network": "digits", "steps": 0}, "steps 0"),
    ({"network": "digits"}, "one of steps or epochs"),
    ({"network": "digits", "epochs": 1}, "epochs need a data set"),
    ({"network": "digits", "steps": 1, "bogus": 1}, "unknown field"),
])
def test_bad_jobs_one_line_errors(job, msg):
    with pytest.raises(InputError, match=msg) as e:
        parse_jobs([job], 32)
    assert "\n" not in str(e.value)


def test_cli_bad_job_file_exit_code(tmp_path, capsys):
    f = tmp_path / "jobs.json"
    f.write_text(json.dumps([{"network": "nope", "steps": 1}]))
    assert main(["share", str(f), "--config", "chip-small", "--progress", "off"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown network" in err[0]
    f.write_text("[")
    assert main(["share", str(f), "--config", "chip-small", "--progress", "off"]) == 1
    assert main(["share", str(f), "--slowdown", "0.5", "--progress", "off"]) == 2


def test_right_size_and_buddy_pack():
    p = Profile({2: (900, 0, 1), 4: (500, 0, 1), 8: (400, 0, 1), 16: None})
    job = parse_jobs([{"network": "digits", "steps": 1}], 16)[0]
    assert p.exclusive() == (8, 400) and right_size(job, p, 1.3) == 4 and right_size(job, p, 3) == 2
    sizes, part = pack(16, [2, 8, 4, 2])
    assert part.groups == ((12, 2), (0, 8), (8, 4), (14, 2))
    sizes, part = pack(8, [8, 4], shrink=lambda s: 0)
    assert sizes == [4, 4] and part.groups == ((0, 4), (4, 4))
    with pytest.raises(InputError, match="need at least 12 cores"):
        pack(8, [8, 4])


def test_share_runs_groups_as_alone(tmp_path):
    """Two jobs on the 4-core chip: each gets a group of 2; its step in the group is its
    profiled step alone on a 2-core chip; the JSON report is written."""
    f = tmp_path / "jobs.json"
    f.write_text(json.dumps(JOBS))
    out = tmp_path / "share.json"
    assert main(["share", str(f), "--config", "chip-small", "--slowdown", "1.5", "--json", str(out),
                 "--progress", "off"]) == 0
    rep = json.loads(out.read_text())
    assert [r["cores"] for r in rep["jobs"]] == [2, 2] and rep["partition"] == [[0, 2], [2, 2]]
    for r in rep["jobs"]:
        assert r["step_cycles"] == r["profile_step_cycles"]["2"] and r["error"] is None
    assert rep["shared"]["cycles"] == max(r["cycles"] for r in rep["jobs"])
    assert rep["time_sharing"]["cycles"] == sum(r["exclusive_step_cycles"] * r["steps"] for r in rep["jobs"])


def test_faulty_job_is_stopped_other_finishes(monkeypatch):
    real = schedule._run_job

    def run_job(cfg, job, sess, steps, progress=None):
        if job.name == "a":          # its program deadlocks on the ring in its group
            from sim.chip_model import RingDeadlock
            raise RingDeadlock("ring deadlock at cycle 40: core 0 at pc 3 waits on rin (empty FIFO)")
        return real(cfg, job, sess, steps, progress)

    monkeypatch.setattr(schedule, "_run_job", run_job)
    rep = share(CHIP, parse_jobs(JOBS, 4), log=lambda *_: None)
    a, b = rep["jobs"]
    assert "RingDeadlock" in a["error"] and b["error"] is None and rep["failed"] == ["a"]
    assert b["step_cycles"] == b["profile_step_cycles"]["2"]
