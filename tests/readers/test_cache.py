"""The cache of decoded events: reuse, invalidation, bypass, and damage that is no error."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.factories import simple_step, write_kineto
from tracekit.readers import load_run
from tracekit.readers.cache import CACHE_ENV, EventCache, FileIdentity, default_cache_dir

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.model.run import Run


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Kineto files actually decoded (not served from the cache), in order."""
    from tracekit.readers import kineto

    decoded: list[str] = []
    real = kineto.read_kineto

    def counting(path: Any) -> Any:
        decoded.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(kineto, "read_kineto", counting)
    return decoded


def two_ranks(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for r in range(2):
        write_kineto(folder / f"rank{r}.json", simple_step(offset=r * 3.0), rank=r)
    return folder


def same_run(a: Run, b: Run) -> bool:
    return a.events.equals(b.events) and a.ranks == b.ranks and a.skipped == b.skipped and a.warnings == b.warnings


def test_second_load_comes_from_the_cache_and_equals_the_first(tmp_path: Path, reads: list[str]) -> None:
    folder, cache = two_ranks(tmp_path / "t"), tmp_path / "cache"
    first = load_run([folder], cache_dir=cache)
    assert sorted(reads) == ["rank0.json", "rank1.json"]
    second = load_run([folder], cache_dir=cache)
    assert len(reads) == 2  # nothing decoded again
    assert same_run(first, second)
    assert second.events.schema == first.events.schema
    assert len(list((cache / "events").glob("*.parquet"))) == 2


def test_a_changed_file_invalidates_its_entry_only(tmp_path: Path, reads: list[str]) -> None:
    folder, cache = two_ranks(tmp_path / "t"), tmp_path / "cache"
    load_run([folder], cache_dir=cache)
    reads.clear()
    stat = (folder / "rank1.json").stat()
    os.utime(folder / "rank1.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # touched
    load_run([folder], cache_dir=cache)
    assert reads == ["rank1.json"]
    # new content of the same size, the mtime set back: the digest of the file's ends tells
    reads.clear()
    stat = (folder / "rank0.json").stat()
    write_kineto(folder / "rank0.json", simple_step(offset=7.0), rank=0)
    os.utime(folder / "rank0.json", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (folder / "rank0.json").stat().st_size == stat.st_size
    run = load_run([folder], cache_dir=cache)
    assert reads == ["rank0.json"]
    assert run.events.filter(rank=0)["start_ns"].min() == 1_000_007_000
    assert len(list((cache / "events").glob("*.json"))) == 2  # replaced, not added


def test_no_cache_bypasses_it(tmp_path: Path, reads: list[str]) -> None:
    folder, cache = two_ranks(tmp_path / "t"), tmp_path / "cache"
    load_run([folder], use_cache=False, cache_dir=cache)
    assert not cache.exists()
    load_run([folder], cache_dir=cache)
    reads.clear()
    load_run([folder], use_cache=False, cache_dir=cache)
    assert len(reads) == 2


def test_default_cache_dir_is_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env-cache"))
    assert default_cache_dir() == tmp_path / "env-cache"
    load_run([two_ranks(tmp_path / "t")])
    assert len(list((tmp_path / "env-cache" / "events").glob("*.parquet"))) == 2
    monkeypatch.delenv(CACHE_ENV)
    assert default_cache_dir().parts[-2:] == (".cache", "tracekit")


@pytest.mark.parametrize("damage", ["parquet", "json", "schema"])
def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path: Path, reads: list[str], damage: str) -> None:
    folder, cache = two_ranks(tmp_path / "t"), tmp_path / "cache"
    first = load_run([folder], cache_dir=cache)
    parquet = sorted((cache / "events").glob("*.parquet"))[0]
    if damage == "parquet":
        parquet.write_bytes(parquet.read_bytes()[:100])
    elif damage == "json":
        parquet.with_suffix("").with_suffix(".json").write_text("{not json")
    else:
        pl.read_parquet(parquet).drop("category").write_parquet(parquet)
    reads.clear()
    assert same_run(load_run([folder], cache_dir=cache), first)
    assert len(reads) == 1
    reads.clear()
    load_run([folder], cache_dir=cache)
    assert reads == []  # rewritten


def test_an_unwritable_cache_is_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    run = load_run([two_ranks(tmp_path / "t")], cache_dir=blocker)
    assert run.rank_ids == [0, 1]


def test_a_file_of_several_ranks_is_cached_as_a_list(shared_traces: Path, tmp_path: Path) -> None:
    export = shared_traces / "nsys" / "nsysai-mfu-2gpu-before.sqlite"
    first = load_run([export], cache_dir=tmp_path)
    cache = EventCache(tmp_path)
    cached = cache.load(export)
    assert cached is not None and [t.rank for t in cached] == [0, 1]
    second = load_run([export], cache_dir=tmp_path)
    assert same_run(first, second) and second.rank_ids == [0, 1]


def test_identity_changes_with_content(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b"a" * 200_000)
    before = FileIdentity.of(path)
    with path.open("r+b") as handle:
        handle.seek(199_000)
        handle.write(b"b")
    os.utime(path, ns=(before.mtime_ns, before.mtime_ns))
    after = FileIdentity.of(path)
    assert (after.size, after.mtime_ns, after.inode) == (before.size, before.mtime_ns, before.inode)
    assert after != before
