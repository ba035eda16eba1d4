"""The registry of input formats: deciding a file's format, discovery, messages, help."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING

import polars as pl
import pytest
from click.testing import CliRunner

from tests.factories import ev, make_run, simple_step, write_kineto
from tracekit.cli.main import cli
from tracekit.errors import InputError, TraceReadError
from tracekit.model.by_kind import ByKind
from tracekit.readers import discover, formats, load_run, read_file
from tracekit.readers.formats import FORMATS, InputFormat, format_of
from tracekit.readers.trace import RankTrace

if TYPE_CHECKING:
    from pathlib import Path


def sqlite_file(path: Path) -> Path:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE t (x)")
    return path


def test_registry_holds_kineto_and_nsys() -> None:
    assert [f.name for f in FORMATS] == ["kineto", "nsys", "nsys-rep"]
    assert formats.trace_suffixes() == (".json", ".json.gz", ".sqlite", ".nsys-rep")
    assert formats.FALLBACK.name == "kineto"
    for fmt in FORMATS:
        assert fmt.description and fmt.clock and fmt.suffixes and callable(fmt.read)


@pytest.mark.parametrize(
    ("name", "sqlite", "expected"),
    [
        ("rank0.json", False, "kineto"),
        ("rank0.pt.trace.JSON.GZ", False, "kineto"),
        ("trace.txt", False, "kineto"),  # anything else is Kineto
        ("a.sqlite", False, "nsys"),  # by name, though not SQLite: the nsys reader says so
        ("a.sqlite", True, "nsys"),
        ("export.json", True, "nsys"),  # the content decides before the name
        ("report.nsys-rep", False, "nsys-rep"),
    ],
)
def test_format_of(tmp_path: Path, name: str, sqlite: bool, expected: str) -> None:
    path = tmp_path / name
    if sqlite:
        sqlite_file(path)
    else:
        path.write_bytes(b"{}")
    assert format_of(path).name == expected


def test_export_beside_its_report_is_read_instead(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("a.nsys-rep", "a.sqlite", "b.nsys-rep", "sub/b.sqlite"):
        (tmp_path / name).write_bytes(b"x")
    found = sorted(p.relative_to(tmp_path.resolve()).as_posix() for p in discover([tmp_path]))
    assert found == ["a.sqlite", "b.nsys-rep", "sub/b.sqlite"]  # an export elsewhere hides nothing


def fake_read(path: Path, *, cache_root: Path | None, jobs: int = 1) -> list[RankTrace]:
    """A reader of a made-up format: one rank per file, rank 5, with one event."""
    del cache_root, jobs
    events = make_run([ev("cpu_op", "aten::mm", 0, 10)]).events.with_columns(pl.lit(None, dtype=pl.Int32).alias("rank"))
    return [
        RankTrace(str(path), ByKind.of(events), rank=5, world_size=8, backend=None, devices=(), schema_version=None)
    ]


@pytest.fixture
def one_more_format(monkeypatch: pytest.MonkeyPatch) -> InputFormat:
    """The registry with one more line: a made-up ``.fake`` format."""
    fake = InputFormat("fake", "A made-up format", (".fake",), fake_read, "fake: ns")
    monkeypatch.setattr(formats, "FORMATS", (*FORMATS, fake))
    return fake


@pytest.mark.usefixtures("one_more_format")
def test_one_registry_line_adds_a_format_everywhere(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        InputError, match=r"no trace files \(\*\.json, \*\.json\.gz, \*\.sqlite, \*\.nsys-rep, \*\.fake\)"
    ):
        discover([empty])
    (tmp_path / "t" / "rank5.fake").parent.mkdir()
    (tmp_path / "t" / "rank5.fake").write_bytes(b"x")
    assert [p.name for p in discover([tmp_path / "t"])] == ["rank5.fake"]
    [trace] = read_file(tmp_path / "t" / "rank5.fake")
    assert trace.rank == 5
    run = load_run([tmp_path / "t"], use_cache=False)
    assert run.rank_ids == [5] and run.world_size == 8
    help_text = CliRunner().invoke(cli, ["analyze", "--help"]).output
    assert "*.fake" in help_text and "A made-up format" in help_text


def test_analyze_help_lists_every_format() -> None:
    help_text = " ".join(CliRunner().invoke(cli, ["analyze", "--help"]).output.split())
    for fmt in FORMATS:
        assert ", ".join(f"*{s}" for s in fmt.suffixes) in help_text
        assert fmt.description in help_text
    assert "read as kineto" in help_text


def test_read_file_dispatches_on_content(tmp_path: Path) -> None:
    kineto = write_kineto(tmp_path / "rank0.json", simple_step())
    assert [t.clock for t in read_file(kineto)] == ["kineto: host clock, us -> ns"]
    disguised = sqlite_file(tmp_path / "rank1.json")
    with pytest.raises(TraceReadError, match="not an Nsight Systems export"):
        read_file(disguised)
