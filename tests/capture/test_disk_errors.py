"""A full disk (ENOSPC) or a read-only file system (EROFS) while writing: one line naming it and the file, exit 2."""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

import pytest

from tests.cli.test_errors import raising, run_main
from tracekit.atomic import write_text_atomically
from tracekit.capture import files
from tracekit.capture import sweep as capture_sweep
from tracekit.capture.ranks import RankState, failure
from tracekit.cli import commands
from tracekit.errors import InputError, os_reason
from tracekit.results.sweep import Sweep

if TYPE_CHECKING:
    from pathlib import Path

FULL = OSError(errno.ENOSPC, "No space left on device")
READ_ONLY = OSError(errno.EROFS, "Read-only file system")


def _fails(error: OSError) -> object:
    def fsync(fd: int) -> None:
        raise error

    return fsync


@pytest.mark.parametrize(("error", "named"), [(FULL, "ENOSPC"), (READ_ONLY, "EROFS")])
def test_the_capture_writers_name_the_cause_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, named: str
) -> None:
    monkeypatch.setattr(os, "fsync", _fails(error))
    with pytest.raises(InputError) as raised:
        files.write_json_atomic(tmp_path / "summary.json", {"a": 1})
    assert raised.value.path == str(tmp_path / "summary.json")
    assert f"({named}: " in raised.value.message
    assert not list(tmp_path.iterdir())  # no temporary file left


def test_the_trace_gzip_names_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / ".rank0.1.json"
    source.write_text("{}")
    real_open = open

    def full_open(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "w" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", full_open)
    with pytest.raises(InputError, match=r"rank0\.pt\.trace\.json\.gz: cannot write \(ENOSPC: no space left"):
        files.gzip_atomic(source, tmp_path / "rank0.pt.trace.json.gz")


def test_the_report_writers_name_the_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", _fails(READ_ONLY))
    with pytest.raises(InputError, match=r"out\.md: cannot write \(EROFS: read-only file system\)"):
        write_text_atomically(tmp_path / "out.md", "x")


def test_an_unwritable_folder_is_named_with_the_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", _fails(FULL))
    with pytest.raises(InputError) as raised:
        files.check_writable(tmp_path)
    assert raised.value.message == f"{tmp_path}: cannot write into this folder (ENOSPC: no space left on device)"
    assert not list(tmp_path.iterdir())


def test_a_rank_that_could_not_write_its_error_file_is_found_in_the_log(tmp_path: Path) -> None:
    headline = f"{tmp_path}/rank0.pt.trace.json.gz: cannot write (ENOSPC: no space left on device)"
    (tmp_path / files.LOG).write_text(f"noise\n{files.rank_error_line(0, headline)}\nTraceback ...\n")
    error = failure([RankState(0)], tmp_path, 1)
    assert isinstance(error, InputError)
    assert error.message.startswith(f"rank 0 failed first: {headline} (its output: ")


def test_ranks_that_left_nothing_on_a_full_disk_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / files.LOG).write_text("Traceback ...\n")
    monkeypatch.setattr(os, "fsync", _fails(FULL))
    message = failure([RankState(0)], tmp_path, 1).message
    assert message == (
        f"the ranks stopped and no file can be written: {tmp_path}: cannot write into this folder "
        "(ENOSPC: no space left on device)"
    )


def test_the_sweep_record_on_a_full_disk_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", _fails(FULL))
    record = Sweep(grid=[], cells=[])
    with pytest.raises(InputError, match=r"sweep\.json: cannot write \(ENOSPC: no space left on device\)"):
        capture_sweep._save(tmp_path, record)


@pytest.mark.parametrize(("error", "named"), [(FULL, "ENOSPC"), (READ_ONLY, "EROFS")])
def test_an_os_error_without_a_file_on_a_full_disk_is_not_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: OSError, named: str
) -> None:
    monkeypatch.setattr(commands, "run_report", raising(error))
    code, err = run_main(monkeypatch, capsys, "report", "x.json", "--md", "y.md")
    assert code == 2
    assert err == f"tracekit: error: cannot write ({os_reason(error)})\n"
    assert f"({named}: " in err


def test_an_os_error_naming_a_file_names_the_cause(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = OSError(errno.ENOSPC, "No space left on device", "/out/sweep.json")
    monkeypatch.setattr(commands, "run_report", raising(error))
    assert run_main(monkeypatch, capsys, "report", "x.json", "--md", "y.md") == (
        2,
        "tracekit: error: /out/sweep.json: ENOSPC: no space left on device\n",
    )
