"""Files that are not what they seem: special files, other encodings, values of other types."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING

import polars as pl
import pytest

from tests.factories import gid, nsys_kernel_rows, said, simple_step, write_kineto, write_nsys
from tracekit.errors import InputError
from tracekit.readers import load_run
from tracekit.readers.kineto import read_kineto

if TYPE_CHECKING:
    from pathlib import Path


def good_rank(folder: Path, rank: int = 0) -> Path:
    folder.mkdir(exist_ok=True)
    return write_kineto(folder / f"rank{rank}.json", simple_step(rank), rank=rank, world_size=2)


@pytest.mark.parametrize("kind", ["fifo", "device", "loop", "dangling"])
def test_special_files_are_skipped_and_named(tmp_path: Path, kind: str) -> None:
    good_rank(tmp_path / "t")
    bad = tmp_path / "t" / "rank1.json"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "device":
        bad.symlink_to("/dev/zero")
    elif kind == "loop":
        bad.symlink_to(bad)
    else:
        bad.symlink_to(tmp_path / "gone.json")
    for given in ([tmp_path / "t"], [tmp_path / "t" / "rank0.json", bad]):
        run = load_run(given, use_cache=False)  # never blocks, never reads forever
        assert run.rank_ids == [0]
        [skip] = run.skipped
        assert skip.path == str(bad)
        expected = {
            "fifo": "pipe or FIFO",
            "device": "a device",
            "loop": "cannot be opened",
            "dangling": "cannot be opened",
        }
        assert expected[kind] in skip.reason
    with pytest.raises(InputError, match=str(bad)):
        load_run([bad], use_cache=False)


def test_a_fifo_named_summary_json_does_not_block(tmp_path: Path) -> None:
    good_rank(tmp_path / "t")
    os.mkfifo(tmp_path / "t" / "summary.json")
    from tracekit.pipeline import capture_summary

    assert capture_summary([tmp_path / "t"]) is None


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_other_unicode_encodings_read_as_the_same_trace(tmp_path: Path, encoding: str) -> None:
    plain = good_rank(tmp_path / "t")
    other = tmp_path / "t" / f"other.{encoding}.json"
    other.write_bytes(plain.read_text(encoding="utf-8").encode(encoding))
    assert read_kineto(other).events.equals(read_kineto(plain).events)


def test_broken_utf16_is_one_line_naming_the_encoding(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.json"
    bad.write_bytes(b"\xff\xfe{\x00\x00\xd8")  # a lone surrogate
    run_error = pytest.raises(InputError, match="not valid UTF-16 text")
    with run_error:
        load_run([bad], use_cache=False)


def test_nsys_values_of_other_types_are_dropped_not_fatal(tmp_path: Path) -> None:
    kernels = nsys_kernel_rows(5)
    path = write_nsys(tmp_path / "r.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": kernels}, strings={1: "sm90_gemm"})
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ('soon', x'00ff', 0, 7, ?, 9, 1, 1)", (gid(5),))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1200, 2200, 'gpu', 7, ?, 10, 1, 1)", (gid(5),))
    run = load_run([path], use_cache=False)
    kernels_read = run.events.filter(pl.col("kind") == "kernel")
    assert kernels_read.height == 6  # the row without a time dropped; a text device id is no device
    assert any("dropped 1 event(s)" in w and "no numeric time" in w for w in said(run.warnings))


@pytest.mark.parametrize("native", [True, False])
def test_an_event_name_longer_than_any_profiler_writes_refuses_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    """A name of 17 MiB (one of hundreds crashed the decoder under a memory limit): the file is
    refused in one line, by the native decoder before it copies the string, or after msgspec's."""
    from tracekit.readers import kineto, kineto_native

    if native and not kineto_native.ENABLED:
        pytest.skip("the native decoder is not built here")
    monkeypatch.setattr(kineto_native, "ENABLED", native)
    monkeypatch.setattr(kineto, "CHUNKED_MIN_BYTES", 1 if native else 2**40)  # native: the chunked reader
    events = simple_step()
    events[3]["name"] = "A" * (17 << 20)
    path = write_kineto(tmp_path / "rank0.json", events)
    with pytest.raises(InputError, match=r"an event holds a string of 17 MiB; no profiler writes one over 16 MiB"):
        load_run([path], use_cache=False)
