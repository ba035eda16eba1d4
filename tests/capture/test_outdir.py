"""The capture folder: what may be replaced, the swap on success, the failed run kept aside."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tracekit.capture import files, outdir
from tracekit.errors import InputError
from tracekit.results.capture import CAPTURE_SCHEMA


def make_capture(folder: Path, tag: str) -> None:
    folder.mkdir(parents=True)
    (folder / files.SUMMARY).write_text(json.dumps({"schema": CAPTURE_SCHEMA, "tag": tag}))
    (folder / files.trace_name(0)).write_text(tag)
    (folder / files.phases_name(0)).write_text(tag)
    (folder / files.CONFIG).write_text(tag)
    (folder / files.LOG).write_text(tag)


def test_own_outputs_are_recognized() -> None:
    own = ["summary.json", "capture_config.json", "capture.log", "capture.nsys-rep", "rank12.pt.trace.json.gz"]
    own += ["phases.rank3.json", "cycle1", ".rank0.error.txt", ".rank7.exit", ".rank2.1234.json", ".summary.json.9.tmp"]
    assert all(files.is_own_output(name) for name in own)
    theirs = ["notes.txt", "report.html", "a.tracekit.json", "summary.json.bak", "cycle", "rank0.json", ".git"]
    theirs += ["capture.py", "capture.ipynb", ".notes.tmp"]
    assert not any(files.is_own_output(name) for name in theirs)


def test_what_may_be_replaced(tmp_path: Path) -> None:
    assert outdir.check(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    (tmp_path / "empty").mkdir()
    assert outdir.check(tmp_path / "empty") == tmp_path / "empty"
    make_capture(tmp_path / "old", "a")
    (tmp_path / "old" / "report.html").write_text("mine")  # a capture with the user's report in it
    assert outdir.check(tmp_path / "old") == tmp_path / "old"
    (tmp_path / "leftovers").mkdir()  # only tracekit's files, no summary (a run that failed long ago)
    (tmp_path / "leftovers" / files.LOG).write_text("x")
    assert outdir.check(tmp_path / "leftovers") == tmp_path / "leftovers"


def test_a_folder_of_other_files_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("b.txt", "a.txt", "c", "d"):
        (mine / name).write_text("keep")
    (mine / files.SUMMARY).write_text('{"not": "ours"}')
    with pytest.raises(InputError, match=r"not a tracekit capture \(summary\.json, a\.txt, b\.txt, \.\.\.\); .* never"):
        outdir.check(mine)
    only = tmp_path / "only"  # nothing but a summary.json of something else: not tracekit's to delete
    only.mkdir()
    (only / files.SUMMARY).write_text("{}")
    with pytest.raises(InputError, match=r"not a tracekit capture \(summary\.json\)"):
        outdir.check(only)


def test_files_and_folders_that_cannot_be_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="out_dir is an existing file"):
        outdir.check(tmp_path / "f")
    with pytest.raises(InputError, match=r"out_dir cannot be created: .*/f is a file"):
        outdir.check(tmp_path / "f" / "sub")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    for where in (".", tmp_path / "here", tmp_path):
        with pytest.raises(InputError, match=r"is \(or holds\) the current folder"):
            outdir.check(where)


def test_a_read_only_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ro").mkdir()
    make_capture(tmp_path / "ro2", "a")
    read_only = {tmp_path / "ro", tmp_path / "ro2"}
    real_access = os.access
    # chmod does not stop root (these tests may run as root): ask os.access, as check does
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) not in read_only and real_access(path, mode))
    with pytest.raises(InputError, match=r"not writable \(.*/ro is read-only"):
        outdir.check(tmp_path / "ro" / "out")
    with pytest.raises(InputError, match=r"not writable \(.*/ro2 is read-only"):
        outdir.check(tmp_path / "ro2")


def test_commit_replaces_the_previous_capture_and_keeps_the_users_files(tmp_path: Path) -> None:
    target = tmp_path / "out"
    make_capture(target, "old")
    (target / "report.html").write_text("mine")
    (target / "cycle0").mkdir()  # an old capture's cycle folder is tracekit's: replaced
    new = outdir.staging(target)
    assert new.parent == tmp_path and new.name.startswith("out.tracekit-tmp-")
    assert stat.S_IMODE(new.stat().st_mode) == 0o777 & ~_umask()  # the usual permissions, not 0700
    make_capture(new / "x", "new")
    for path in (new / "x").iterdir():
        path.rename(new / path.name)
    (new / "x").rmdir()
    outdir.commit(new, target)
    written = ["summary.json", "rank0.pt.trace.json.gz", "phases.rank0.json", "capture_config.json", "capture.log"]
    assert sorted(p.name for p in target.iterdir()) == sorted([*written, "report.html"])
    assert (target / files.trace_name(0)).read_text() == "new" and (target / "report.html").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging or old folder left


def test_commit_into_a_new_folder(tmp_path: Path) -> None:
    target = tmp_path / "a" / "out"
    new = outdir.staging(target)
    (new / files.SUMMARY).write_text("{}")
    outdir.commit(new, target)
    assert (target / files.SUMMARY).exists() and not new.exists()


def test_a_failed_run_is_kept_aside_replacing_the_last_failed_one(tmp_path: Path) -> None:
    target = tmp_path / "out"
    first = outdir.staging(target)
    (first / files.LOG).write_text("first")
    kept = outdir.keep_failed(first, target)
    assert kept == tmp_path / "out.tracekit-failed" and (kept / files.LOG).read_text() == "first"
    second = outdir.staging(target)
    (second / files.LOG).write_text("second")
    assert outdir.keep_failed(second, target) == kept and (kept / files.LOG).read_text() == "second"
    (kept / "mine.txt").write_text("not tracekit's")  # never deleted: the new failed run keeps its own name
    third = outdir.staging(target)
    assert outdir.keep_failed(third, target) == third and (kept / "mine.txt").exists()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_folders_of_killed_runs_are_cleared(tmp_path: Path) -> None:
    target = tmp_path / "out"
    killed = outdir.staging(target)  # a capture killed (kill -9) while its ranks wrote here
    (killed / files.trace_name(0)).write_text("partial")
    old = tmp_path / ".out.tracekit-old-a_b9x2k1"  # killed between the two renames of a commit
    old.mkdir()
    kept = [
        tmp_path / "out.tracekit-tmp-mine",  # not a name tracekit makes
        tmp_path / "other.tracekit-tmp-0123abcd",  # another folder's
        tmp_path / "out.tracekit-failed",  # a failed run's, named in its error: kept for the user
    ]
    for folder in kept:
        folder.mkdir()
    (tmp_path / "out.tracekit-tmp-89abcdef").write_text("a file, not a folder tracekit made")
    assert sorted(outdir.clear_stale(target)) == sorted([killed, old])
    assert not killed.exists() and not old.exists()
    assert all(folder.is_dir() for folder in kept) and (tmp_path / "out.tracekit-tmp-89abcdef").is_file()


def test_the_next_capture_clears_a_killed_capture_s_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracekit.capture import launcher
    from tracekit.capture.config import CaptureConfig

    target = tmp_path / "out"
    killed = outdir.staging(target)
    started: list[Path] = []

    def launch(_config: object, folder: Path, **_kw: object) -> None:
        started.append(folder)
        raise KeyboardInterrupt  # stop the run here: only what happened before launching matters

    monkeypatch.setattr(launcher, "_launch", launch)
    with pytest.raises(KeyboardInterrupt):
        launcher._capture_into(CaptureConfig(out_dir=str(target)), target)
    assert not killed.exists() and started and started[0] != killed
