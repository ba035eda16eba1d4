"""``.nsys-rep`` exports: keyed on the report's identity, atomic, re-made when damaged, none kept by --no-cache.

A fake ``nsys`` first on PATH exports a report by copying the real SQLite export whose path
the report holds (so that replacing a report changes what it exports to), and can be told to
fail midway: to write part of the file, then exit with an error or be killed.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from tests.test_pools import gone_within
from tracekit.errors import TraceReadError
from tracekit.readers import load_run, nsys_export, read_file
from tracekit.readers.nsys_export import cached_export

FAKE_NSYS = """#!/bin/sh
echo "$@" >> "$NSYS_LOG"
while [ "$1" != "--output" ]; do shift; done
out="$2"
source="$(cat "$3")"
case "$NSYS_FAIL" in
  exit) head -c 100000 "$source" > "$out"; echo "cannot write: no space left on device" >&2; exit 3 ;;
  kill) head -c 100000 "$source" > "$out"; kill -9 $$ ;;
  interrupt) head -c 100000 "$source" > "$out"; kill -INT $PPID; sleep 10 ;;
  hang) head -c 100000 "$source" > "$out"; sleep 1000 & echo $! > "$NSYS_PID"; wait ;;
esac
cp "$source" "$out"
"""


@dataclass
class Nsys:
    """The fake ``nsys`` and the two real exports its reports name."""

    log: Path
    exports: tuple[Path, Path]

    def calls(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def report(self, path: Path, version: int) -> Path:
        """Write a report of ``version`` (0 or 1) at ``path``; every report has the same size."""
        name = str(self.exports[version])
        path.write_text(name + "\n" * (200 - len(name)))
        return path

    def events(self, version: int) -> pl.DataFrame:
        return load_run([self.exports[version]], use_cache=False).events


@pytest.fixture
def nsys(shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Nsys:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "nsys").write_text(FAKE_NSYS)
    (folder / "nsys").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NSYS_LOG", str(tmp_path / "nsys.log"))
    monkeypatch.delenv("NSYS_FAIL", raising=False)
    exports = tuple(shared_traces / "nsys" / f"nsysai-mfu-2gpu-{v}.sqlite" for v in ("before", "after"))
    return Nsys(tmp_path / "nsys.log", (exports[0], exports[1]))


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder where temporary folders are made."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_report_replaced_by_an_older_one_is_exported_again(nsys: Nsys, tmp_path: Path) -> None:
    rep, cache = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "cache"
    assert load_run([rep], cache_dir=cache).events.equals(nsys.events(0))
    assert load_run([rep], cache_dir=cache).events.equals(nsys.events(0)) and nsys.calls() == 1
    older = rep.stat().st_mtime_ns - 3600 * 10**9
    nsys.report(tmp_path / "new.nsys-rep", 1)
    os.utime(tmp_path / "new.nsys-rep", ns=(older, older))
    os.replace(tmp_path / "new.nsys-rep", rep)
    assert load_run([rep], cache_dir=cache).events.equals(nsys.events(1))
    assert nsys.calls() == 2
    [first, second] = read_file(rep, cache_root=cache)  # the export alone, without the event cache
    assert nsys.calls() == 2 and pl.concat([first.events, second.events]).height == nsys.events(1).height


def test_a_report_edited_in_place_with_its_mtime_set_back_is_exported_again(nsys: Nsys, tmp_path: Path) -> None:
    rep, cache = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "cache"
    load_run([rep], cache_dir=cache)
    info = rep.stat()
    nsys.report(rep, 1)
    os.utime(rep, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (rep.stat().st_size, rep.stat().st_mtime_ns, rep.stat().st_ino) == (
        info.st_size,
        info.st_mtime_ns,
        info.st_ino,
    )
    assert load_run([rep], cache_dir=cache).events.equals(nsys.events(1)) and nsys.calls() == 2


def test_no_cache_exports_to_a_temporary_folder_removed_afterwards(nsys: Nsys, tmp_path: Path, scratch: Path) -> None:
    rep, cache = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "cache"
    load_run([rep], cache_dir=cache)  # an export in the cache, of the report as it was
    kept = {p: p.stat().st_mtime_ns for p in cache.rglob("*")}
    older = rep.stat().st_mtime_ns - 3600 * 10**9
    nsys.report(rep, 1)
    os.utime(rep, ns=(older, older))
    for calls in (2, 3):
        assert load_run([rep], cache_dir=cache, use_cache=False).events.equals(nsys.events(1))
        assert nsys.calls() == calls  # exported every time
        assert list(scratch.iterdir()) == []
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*")} == kept  # neither read nor written


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_an_interrupted_export_leaves_nothing_and_is_done_again(
    nsys: Nsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    rep, cache = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "cache"
    monkeypatch.setenv("NSYS_FAIL", how)
    for _ in range(2):
        with pytest.raises(TraceReadError, match=r"nsys export --type sqlite` failed \(exit") as info:
            read_file(rep, cache_root=cache)
        assert "\n" not in info.value.message and info.value.path == str(rep)
        assert list((cache / "nsys").iterdir()) == []  # no partial export under any name
    monkeypatch.delenv("NSYS_FAIL")
    assert load_run([rep], cache_dir=cache).events.equals(nsys.events(0))
    assert nsys.calls() == 3


def test_tracekit_interrupted_while_exporting_leaves_nothing(
    nsys: Nsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while ``nsys`` writes: the next read exports again (it reused the partial file before)."""
    rep, cache = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "cache"
    monkeypatch.setenv("NSYS_FAIL", "interrupt")
    # Ctrl-C as at a terminal: a test run started in the background (`&` in a script) inherits
    # SIGINT ignored, and Python then keeps ignoring it, as it should
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            read_file(rep, cache_root=cache)
    finally:
        signal.signal(signal.SIGINT, before)
    assert list((cache / "nsys").iterdir()) == []
    monkeypatch.delenv("NSYS_FAIL")
    assert load_run([rep], cache_dir=cache).events.equals(nsys.events(0))
    assert nsys.calls() == 2


def test_a_hanging_export_is_stopped_at_its_limit(nsys: Nsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nsys export`` that never ends: killed (its children too) at the limit, one line, nothing left."""
    rep, cache = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "cache"
    monkeypatch.setenv("NSYS_FAIL", "hang")
    monkeypatch.setenv("NSYS_PID", str(tmp_path / "nsys.pid"))
    monkeypatch.setattr(nsys_export, "EXPORT_BASE_S", 1.0)
    started = time.monotonic()
    with pytest.raises(TraceReadError, match=r"`nsys export --type sqlite` ran past 1 s .* and was stopped") as info:
        read_file(rep, cache_root=cache)
    assert time.monotonic() - started < 60
    assert "\n" not in info.value.message and info.value.path == str(rep)
    assert list((cache / "nsys").iterdir()) == []
    # its child `sleep` went with it: killed with its group (it dies when next scheduled)
    assert gone_within([int((tmp_path / "nsys.pid").read_text())], 10)


def _damage(export: Path, kind: str, *, source: Path) -> None:
    record = export.with_name(export.name + ".identity.json")
    if kind == "partial export of an older tracekit":  # no record, newer than the report
        record.unlink()
        export.write_bytes(source.read_bytes()[:100_000])
    elif kind == "garbage export":
        export.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 400)
    elif kind == "truncated export":
        export.write_bytes(export.read_bytes()[:4096])
    elif kind == "export replaced by a FIFO":
        export.unlink()
        os.mkfifo(export)
    elif kind == "export replaced by a folder":
        export.unlink()
        export.mkdir()
    elif kind == "record garbage":
        record.write_bytes(b"\x00{not json")
    elif kind == "record of the wrong shape":
        record.write_text('{"version": 1, "report": [], "export": null}')
    elif kind == "record a FIFO":
        record.unlink()
        os.mkfifo(record)
    elif kind == "record a link to /dev/zero":
        record.unlink()
        record.symlink_to("/dev/zero")


@pytest.mark.usefixtures("no_hang")
@pytest.mark.parametrize(
    "kind",
    [
        "partial export of an older tracekit",
        "garbage export",
        "truncated export",
        "export replaced by a FIFO",
        "export replaced by a folder",
        "record garbage",
        "record of the wrong shape",
        "record a FIFO",
        "record a link to /dev/zero",
    ],
)
def test_a_damaged_export_is_exported_again(nsys: Nsys, tmp_path: Path, scratch: Path, kind: str) -> None:
    rep, cache = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "cache"
    expected = sum(t.events.height for t in read_file(rep, cache_root=cache))
    export = cached_export(rep, cache)
    _damage(export, kind, source=nsys.exports[0])
    for calls in (2, 2 if kind != "export replaced by a folder" else 3):
        assert sum(t.events.height for t in read_file(rep, cache_root=cache)) == expected
        assert nsys.calls() == calls  # exported again once, then reused (a folder cannot be replaced)
    assert list(scratch.iterdir()) == []


def test_an_unwritable_cache_exports_to_a_temporary_folder(nsys: Nsys, tmp_path: Path, scratch: Path) -> None:
    rep, blocker = nsys.report(tmp_path / "job.nsys-rep", 0), tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    assert load_run([rep], cache_dir=blocker).events.equals(nsys.events(0))
    assert list(scratch.iterdir()) == []
