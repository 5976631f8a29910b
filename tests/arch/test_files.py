"""arch.files: atomic writes that leave nothing behind, all-or-nothing outputs, output
paths checked before work, text input errors that name the file."""

import os
import stat

import pytest

from arch.errors import InputError, UsageError
from arch.files import Outputs, atomic_write, check_output, read_text


def _names(d):
    return sorted(p.name for p in d.iterdir())


def test_atomic_write_onto_a_directory_leaves_no_temporary(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path / "d", "x")
    assert _names(tmp_path) == ["d"] and _names(tmp_path / "d") == []


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    f = tmp_path / "f.txt"
    f.write_text("old")

    def boom(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(f, "new")
    assert f.read_text() == "old" and _names(tmp_path) == ["f.txt"]


def test_atomic_write_permissions_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "f", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o640


def test_outputs_all_or_nothing(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.png"
    with pytest.raises(RuntimeError):
        with Outputs() as outs:
            outs.write_text(a, "{}")
            outs.stage(b).write_bytes(b"png")
            raise RuntimeError("the second output failed")
    assert _names(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):
        with Outputs() as outs:
            outs.write_text(a, "{}")
            raise KeyboardInterrupt
    assert _names(tmp_path) == []
    with Outputs() as outs:
        outs.write_text(a, "{}")
        outs.stage(b).write_bytes(b"png")
        assert not a.exists() and not b.exists()              # nothing in place before the end
    assert a.read_text() == "{}" and b.read_bytes() == b"png" and _names(tmp_path) == ["a.json", "b.png"]


def test_outputs_refuse_a_directory_target_and_keep_the_others(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        with Outputs() as outs:
            outs.write_text(tmp_path / "a.json", "{}")
            outs.write_text(tmp_path / "d", "x")
    assert _names(tmp_path) == ["d"]


@pytest.mark.parametrize("rel,words", [("d", "is a directory"), ("missing/x", "does not exist"),
                                       ("f/x", "is not a directory"), ("", "not a file name")])
def test_check_output(tmp_path, rel, words):
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match=words):
        check_output(str(tmp_path / rel) if rel else "", "--json")
    assert check_output(tmp_path / "new.json", "--json") == tmp_path / "new.json"


def test_read_text_names_the_file(tmp_path):
    (tmp_path / "b").write_bytes(b"\xff\xfe")
    for rel, words in (("b", "not UTF-8"), ("none", "no such file"), (".", "is a directory")):
        with pytest.raises(InputError, match=words) as e:
            read_text(tmp_path / rel, "program")
        assert str(e.value).startswith("program ")
