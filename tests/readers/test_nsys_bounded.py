"""The Nsight Systems reader never runs a query without bound: views and virtual tables in place of
the event tables are refused, and every statement stops at its time limit (issue 33)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from typing import TYPE_CHECKING

import pytest

from tests.factories import write_nsys
from tests.readers.test_nsys import STRINGS, one_rank_tables
from tracekit.errors import TraceReadError
from tracekit.readers import nsys_meta
from tracekit.readers.nsys import read_nsys

if TYPE_CHECKING:
    from pathlib import Path

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
#: A view that never ends: each row makes the next (SQLite runs it until it is stopped).
RECURSIVE = (
    f"CREATE VIEW {KERNEL} AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT i AS start, i + 1 AS end, 0 AS deviceId, 7 AS streamId, i AS correlationId, 0 AS globalPid, "
    "1 AS demangledName, 2 AS shortName FROM n"
)


def export_with(tmp_path: Path, *statements: str) -> Path:
    """The one-rank export of test_nsys with its kernel table replaced by ``statements``."""
    path = write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(f"DROP TABLE {KERNEL}")
        for sql in statements:
            db.execute(sql)
    return path


def test_a_recursive_view_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = export_with(tmp_path, RECURSIVE)
    with pytest.raises(TraceReadError, match=rf"{KERNEL} is a view, not a table: refused") as caught:
        read_nsys(path)
    assert str(path) in caught.value.message


def test_a_cartesian_view_is_refused(tmp_path: Path) -> None:
    path = export_with(
        tmp_path,
        "CREATE TABLE k0 (start, end, deviceId, streamId, correlationId, globalPid, demangledName, shortName)",
        f"CREATE VIEW {KERNEL} AS SELECT a.* FROM k0 a, k0 b, k0 c, k0 d, k0 e, k0 f",
    )
    with pytest.raises(TraceReadError, match="is a view"):
        read_nsys(path)


def test_a_view_of_the_strings_is_refused(tmp_path: Path) -> None:
    path = write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("ALTER TABLE StringIds RENAME TO s0")
        db.execute("CREATE VIEW StringIds AS SELECT * FROM s0")
    with pytest.raises(TraceReadError, match="StringIds is a view"):
        read_nsys(path)


def test_a_virtual_table_is_refused(tmp_path: Path) -> None:
    try:
        path = export_with(tmp_path, f"CREATE VIRTUAL TABLE {KERNEL} USING fts5(start, end)")
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no fts5 module to build a virtual table with")
    with pytest.raises(TraceReadError, match=rf"{KERNEL} is a virtual table, not a table"):
        read_nsys(path)


def test_a_view_tracekit_does_not_read_is_left_alone(tmp_path: Path) -> None:
    path = write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(RECURSIVE.replace(KERNEL, "SOME_USER_VIEW"))
    [trace] = read_nsys(path)
    assert trace.events.height > 0


def test_a_statement_past_its_limit_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress handler's bound, on a plain table whose join is slow: stopped, one line naming the file."""
    path = write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS)
    monkeypatch.setattr(nsys_meta, "LIMIT_BASE_S", 0.2)
    export = nsys_meta.Export(path, shown=str(path))
    try:
        with pytest.raises(TraceReadError, match=r"a query ran past 0 s .* and was stopped") as caught:
            export.query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n")
    finally:
        export.close()
    assert str(path) in caught.value.message


def test_analyze_of_a_recursive_view_ends_with_one_line(tmp_path: Path) -> None:
    """Through the CLI, in a subprocess bounded by the test: exit 2, one line, no traceback."""
    path = export_with(tmp_path, RECURSIVE)
    done = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "is a view, not a table" in lines[0]
    assert "job.sqlite" in lines[0]
