"""Report files are written atomically: a failure leaves the previous file as it was and no temporary file."""

from __future__ import annotations

import errno
import os
import stat
import threading
from typing import TYPE_CHECKING

import polars as pl
import pytest

from tests.cli.test_cli import tracekit
from tests.factories import ev, make_run, simple_step, write_kineto
from tracekit.analyzers import analyze
from tracekit.atomic import OutputFiles, write_atomically, write_text_atomically
from tracekit.cli.commands import write_reports
from tracekit.errors import InputError
from tracekit.pipeline import write_details
from tracekit.reports import base

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis


def leftovers(folder: Path) -> list[str]:
    """Temporary files left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def small_analysis() -> Analysis:
    return analyze(make_run([ev("step", "ProfilerStep#1", 0, 10_000), ev("annotation", "fwd", 1, 5_000)]))


@pytest.mark.parametrize("existed", [True, False])
def test_a_write_that_fails_halfway_leaves_the_previous_file(tmp_path: Path, existed: bool) -> None:
    target = tmp_path / "report.md"
    if existed:
        target.write_text("previous good report")

    def write_half(temp: Path) -> None:
        temp.write_text("half a rep")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(InputError, match=r"report\.md: cannot write \(ENOSPC: no space left on device\)"):
        write_atomically(target, write_half)
    assert (target.read_text() == "previous good report") if existed else not target.exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("existed", [True, False])
def test_an_unwritable_folder_leaves_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existed: bool
) -> None:
    target = tmp_path / "report.html"
    if existed:
        target.write_text("previous good report")
    real_open = os.open

    def refuse_to_create(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        if flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse_to_create)  # as root, chmod would not stop the write
    with pytest.raises(InputError, match=r"report\.html: cannot write \(Permission denied\)"):
        write_text_atomically(target, "new")
    monkeypatch.undo()
    assert (target.read_text() == "previous good report") if existed else not target.exists()
    assert leftovers(tmp_path) == []


def test_a_rename_that_fails_leaves_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "r.json"
    target.write_text("previous")

    def read_only(src: object, dst: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", read_only)
    with pytest.raises(InputError, match=r"cannot write \(EROFS: read-only file system\)"):
        write_text_atomically(target, "new")
    assert target.read_text() == "previous"
    assert leftovers(tmp_path) == []


def test_an_interrupt_while_writing_leaves_no_temporary_file(tmp_path: Path) -> None:
    def interrupted(temp: Path) -> None:
        temp.write_text("part")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "x.md", interrupted)
    assert list(tmp_path.iterdir()) == []


def test_the_data_is_synced_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append("replace") or real_replace(a, b))
    write_text_atomically(tmp_path / "x.md", "text")
    assert events[:2] == ["fsync", "replace"]
    assert (tmp_path / "x.md").read_text() == "text"


def test_concurrent_writers_never_mix_and_leave_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    texts = [str(i) * 200_000 for i in range(8)]
    threads = [threading.Thread(target=write_text_atomically, args=(target, t)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert target.read_text() in texts  # one whole report, not a mix
    assert leftovers(tmp_path) == []


def test_a_replaced_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path: Path) -> None:
    kept = tmp_path / "kept.md"
    kept.write_text("old")
    kept.chmod(0o640)
    write_text_atomically(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    kept.chmod(0o444)  # read-only: the mode is given after writing
    write_text_atomically(kept, "newer")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o444 and kept.read_text() == "newer"
    old = os.umask(0o022)
    try:
        write_text_atomically(tmp_path / "new.md", "new")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.md").stat().st_mode) == 0o644


def test_a_symbolic_link_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    write_text_atomically(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert leftovers(tmp_path) == []


def test_a_loop_of_symbolic_links_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "a.md").symlink_to(tmp_path / "b.md")
    (tmp_path / "b.md").symlink_to(tmp_path / "a.md")
    with pytest.raises(InputError, match=r"a\.md: cannot write"):
        write_text_atomically(tmp_path / "a.md", "x")
    assert leftovers(tmp_path) == []


def test_a_renderer_that_raises_replaces_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    md, html = tmp_path / "a.md", tmp_path / "a.html"
    md.write_text("previous md")
    html.write_text("previous html")

    class Broken:
        name = "html"

        def render(self, analysis: Analysis) -> str:
            raise RuntimeError("renderer bug")

    monkeypatch.setitem(base.RENDERERS, "html", Broken)
    with pytest.raises(RuntimeError, match="renderer bug"):
        write_reports(small_analysis(), {"md": md, "html": html})
    assert md.read_text() == "previous md" and html.read_text() == "previous html"
    assert leftovers(tmp_path) == []


def test_one_output_that_cannot_be_written_replaces_none(tmp_path: Path) -> None:
    md = tmp_path / "a.md"
    md.write_text("previous md")
    with pytest.raises(InputError, match="missing"):
        write_reports(small_analysis(), {"md": md, "html": tmp_path / "missing" / "a.html"})
    assert md.read_text() == "previous md"
    assert leftovers(tmp_path) == []


def test_outputs_written_together_are_renamed_only_at_the_end(tmp_path: Path) -> None:
    first, second = tmp_path / "1.md", tmp_path / "2.md"
    with OutputFiles() as out:
        out.add_text(first, "one")
        out.add_text(second, "two")
        assert not first.exists() and not second.exists()
        assert len(leftovers(tmp_path)) == 2
    assert first.read_text() == "one" and second.read_text() == "two"
    assert leftovers(tmp_path) == []


def test_details_parquet_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    details = {"idle_intervals": pl.DataFrame({"rank": [0, 1], "length_ns": [5, 7]})}
    path = tmp_path / "details.parquet"
    write_details(details, path)
    assert pl.read_parquet(path)["length_ns"].to_list() == [5, 7]
    before = path.read_bytes()

    def disk_full(self: pl.DataFrame, file: Path, *args: object, **kwargs: object) -> None:
        file.write_bytes(b"PAR1 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", disk_full)
    with pytest.raises(InputError, match=r"details\.parquet: cannot write \(ENOSPC: no space left on device\)"):
        write_details(details, path)
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_analyze_whose_details_cannot_be_written_keeps_every_previous_output(tmp_path: Path) -> None:
    trace = write_kineto(tmp_path / "rank0.json", simple_step())
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.json").write_text("previous json")
    result = tracekit("analyze", trace, "--json", out / "r.json", "--details", out / "missing" / "d.parquet")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "cannot write" in result.stderr
    assert "wrote" not in result.stdout
    assert (out / "r.json").read_text() == "previous json"
    assert sorted(p.name for p in out.iterdir()) == ["r.json"]
    ok = tracekit("analyze", trace, "--json", out / "r.json", "--details", out / "d.parquet")
    assert ok.returncode == 0, ok.stderr
    assert "table" in pl.read_parquet(out / "d.parquet").columns
    assert sorted(p.name for p in out.iterdir()) == ["d.parquet", "r.json"]
