"""The cache of decoded events: reuse, invalidation, bypass, and damage that is no error."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.factories import kineto_event, simple_step, write_kineto
from tracekit.analyzers import run_analysis
from tracekit.readers import load_run, read_file
from tracekit.readers.cache import CACHE_ENV, EventCache, default_cache_dir
from tracekit.readers.identity import BLOCK, SAMPLES

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.model.run import Run


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Kineto files actually decoded (not served from the cache), in order."""
    from tracekit.readers import kineto

    decoded: list[str] = []
    real = kineto.read_kineto

    def counting(path: Any, **options: Any) -> Any:
        decoded.append(os.path.basename(path))
        return real(path, **options)

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


def test_a_file_of_several_ranks_is_cached_as_a_list(shared_traces: Path, tmp_path: Path) -> None:
    export = shared_traces / "nsys" / "nsysai-mfu-2gpu-before.sqlite"
    first = load_run([export], cache_dir=tmp_path)
    cache = EventCache(tmp_path)
    cached = cache.load(export)
    assert cached is not None and [t.rank for t in cached] == [0, 1]
    second = load_run([export], cache_dir=tmp_path)
    assert same_run(first, second) and second.rank_ids == [0, 1]


def test_an_edit_in_the_middle_keeping_size_and_mtime_is_read_again(kineto_dir: Path, tmp_path: Path) -> None:
    """One kernel's duration changed in the middle of a real 9.8 MB trace, the mtime set back."""
    trace = tmp_path / "rank0.json"
    trace.write_bytes(gzip.decompress((kineto_dir / "hta-misc" / "nccl-rank0-world2.json.gz").read_bytes()))
    data = trace.read_bytes()
    middle = len(data) // 2
    assert len(data) > BLOCK * SAMPLES  # sampled, not hashed whole
    kernel = data.index(b'"cat": "kernel"', middle - 20_000)
    dur = data.index(b'"dur": ', kernel) + len(b'"dur": ')
    assert abs(dur - middle) < BLOCK // 2  # inside the block centred on the middle
    old = data[dur : data.index(b",", dur)]
    new = bytes([ord("9") if old[0] != ord("9") else ord("1")]) + old[1:]
    delta_ns = round((float(new) - float(old)) * 1000)

    def compute_ns(run: Run) -> int:
        [row] = [r for r in run_analysis(run).analysis.kernels.by_category if r.category == "compute"]
        return row.total_ns

    first = load_run([trace], cache_dir=tmp_path / "cache")
    assert same_run(load_run([trace], cache_dir=tmp_path / "cache"), first)  # served from the cache
    info = trace.stat()
    with trace.open("r+b") as handle:
        handle.seek(dur)
        handle.write(new)
    os.utime(trace, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (trace.stat().st_size, trace.stat().st_mtime_ns) == (info.st_size, info.st_mtime_ns)
    edited = load_run([trace], cache_dir=tmp_path / "cache")
    kernels = pl.col("kind") == "kernel"
    busy = (pl.col("end_ns") - pl.col("start_ns")).filter(kernels).sum()
    assert edited.events.select(busy).item() - first.events.select(busy).item() == delta_ns
    assert compute_ns(edited) - compute_ns(first) == delta_ns


# ---- damage: every kind is read from the source, never a hang, a traceback or stale numbers ----


def _replace_with(path: Path, kind: str) -> None:
    """Put something that is not a readable entry file at ``path``."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    entry = json.loads(path.read_bytes())
    edit(entry)
    path.write_text(json.dumps(entry))


JSON_DAMAGE: dict[str, Callable[[Path], object]] = {
    **{kind: partial(_replace_with, kind=kind) for kind in ("fifo", "directory", "symlink to /dev/zero", "missing")},
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "garbage": lambda p: p.write_bytes(bytes(range(256)) * 8),
    "a JSON list": lambda p: p.write_text("[1, 2]"),
    "a field of the wrong type": lambda p: _edit_json(p, lambda e: e["traces"][0].update(rank="zero")),
    "a field missing": lambda p: _edit_json(p, lambda e: e["traces"][0].pop("rows")),
    "traces not a list": lambda p: _edit_json(p, lambda e: e.update(traces={"0": 1})),
    "a token that is a path": lambda p: _edit_json(p, lambda e: e.update(token="../../../etc/passwd")),
    "rows that are not the frame's": lambda p: _edit_json(p, lambda e: e["traces"][0].update(rows=1)),
    "another tracekit version": lambda p: _edit_json(p, lambda e: e.update(tracekit="0.0.1")),
}
PARQUET_DAMAGE: dict[str, Callable[[Path], object]] = {
    **{kind: partial(_replace_with, kind=kind) for kind in ("fifo", "directory", "symlink to /dev/zero", "missing")},
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:100]),
    "garbage": lambda p: p.write_bytes(bytes(range(256)) * 8),
    "another schema": lambda p: pl.read_parquet(p).drop("category").write_parquet(p),
    "another dtype": lambda p: pl.read_parquet(p).with_columns(pl.col("start_ns").cast(pl.Float64)).write_parquet(p),
}


@pytest.mark.usefixtures("no_hang")
@pytest.mark.parametrize(
    ("part", "damage"),
    [("json", d) for d in JSON_DAMAGE] + [("parquet", d) for d in PARQUET_DAMAGE],
)
def test_a_damaged_entry_is_read_from_the_source_and_rewritten(
    tmp_path: Path, reads: list[str], part: str, damage: str
) -> None:
    folder, cache = two_ranks(tmp_path / "t"), tmp_path / "cache"
    first = load_run([folder], cache_dir=cache)
    parquet = sorted((cache / "events").glob("*.parquet"))[0]
    entry = (cache / "events" / parquet.name.split(".")[0]).with_suffix(".json")
    (JSON_DAMAGE if part == "json" else PARQUET_DAMAGE)[damage](entry if part == "json" else parquet)
    reads.clear()
    assert same_run(load_run([folder], cache_dir=cache), first)
    assert len(reads) == 1  # the damaged entry's file only
    reads.clear()
    assert same_run(load_run([folder], cache_dir=cache), first)
    assert reads == ([] if (part, damage) != ("json", "directory") else reads)  # rewritten (a folder stays)
    assert not list((cache / "events").glob(".*.tmp"))


def test_a_cache_root_that_is_a_file_is_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    run = load_run([two_ranks(tmp_path / "t")], cache_dir=blocker)
    assert run.rank_ids == [0, 1]
    assert blocker.read_text() == "a file where the cache folder should be"


@pytest.mark.parametrize("how", ["read-only folder", "/proc"])
def test_an_unwritable_cache_root_is_no_error(tmp_path: Path, reads: list[str], how: str) -> None:
    folder = two_ranks(tmp_path / "t")
    if how == "/proc":
        if not Path("/proc/self/fdinfo").is_dir():
            pytest.skip("no /proc")
        root = Path("/proc/self/fdinfo")  # a folder nobody can create anything in, root included
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        root = tmp_path / "read-only"
        root.mkdir(mode=0o555)
    expected = load_run([folder], use_cache=False)
    for _ in range(2):
        assert same_run(load_run([folder], cache_dir=root), expected)
    assert len(reads) == 6  # decoded every time


def test_racing_writers_never_serve_one_version_under_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Process A stores version 2 of a file while process B tries to store version 1 in the middle of it:
    B waits for the entry's lock (at most ``_LOCK_WAIT_S``, short here) and leaves the entry to A."""
    from tracekit.readers import cache as cache_module

    monkeypatch.setattr(cache_module, "_LOCK_WAIT_S", 0.2)

    trace = tmp_path / "rank0.json"
    write_kineto(trace, simple_step(offset=7.0), rank=0)
    old, old_traces = cache_module.FileIdentity.of(trace), read_file(trace)
    write_kineto(trace, simple_step(offset=8.0), rank=0)
    new, new_traces = cache_module.FileIdentity.of(trace), read_file(trace)
    assert old != new and old.size == new.size and old_traces[0].events.height == new_traces[0].events.height
    cache = EventCache(tmp_path / "cache")
    real, interrupted = cache_module.replace_file, []

    def interleaved(target: Path, write: Callable[[Path], object]) -> None:
        real(target, write)
        if target.suffix == ".parquet" and not interrupted:  # B, which read the file before it changed,
            interrupted.append(target)  # would store all of its entry between A's frames and A's metadata
            assert not cache.store(old, old_traces)  # A holds the entry's lock

    monkeypatch.setattr(cache_module, "replace_file", interleaved)
    assert cache.store(new, new_traces)  # A, which read the new version
    loaded = cache.load(trace)
    assert loaded is not None and loaded[0].events.equals(new_traces[0].events)
    monkeypatch.undo()
    run = load_run([trace], cache_dir=tmp_path / "cache")
    assert run.events["start_ns"].min() == 1_000_008_000


def _hammer(folder: str, cache: str, expected: str, rounds: int) -> list[str]:
    """Load ``folder`` ``rounds`` times; what went wrong (each rank's events must be one whole version)."""
    versions = [pl.read_parquet(p) for p in sorted(Path(expected).glob("*.parquet"))]
    problems = []
    for _ in range(rounds):
        try:
            run = load_run([folder], cache_dir=cache, jobs=1)
        except Exception as exc:  # what is reported is the point
            problems.append(repr(exc))
            continue
        if not any(run.events.equals(v) for v in versions):
            problems.append("events of no version: a mixture")
    return problems


@pytest.mark.e2e  # starts processes that race
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_processes_racing_on_one_cache_folder(shared_traces: Path, tmp_path: Path) -> None:
    """Three processes load one two-rank export while it is replaced by another, then while it stays."""
    exports = [shared_traces / "nsys" / f"nsysai-mfu-2gpu-{v}.sqlite" for v in ("before", "after")]
    expected = tmp_path / "expected"
    expected.mkdir()
    for i, export in enumerate(exports):
        load_run([export], use_cache=False).events.write_parquet(expected / f"{i}.parquet")
    folder, cache = tmp_path / "t", tmp_path / "cache"
    folder.mkdir()
    target = folder / "job.sqlite"
    shutil.copyfile(exports[0], target)
    with ProcessPoolExecutor(3, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_hammer, str(folder), str(cache), str(expected), 6) for _ in range(3)]
        flips = 0
        while not all(f.done() for f in futures):
            if flips < 4:  # then the files stay, and the processes share the entries
                flips += 1
                shutil.copyfile(exports[flips % 2], folder / ".next")
                os.replace(folder / ".next", target)
            time.sleep(0.3)
        problems = [p for f in futures for p in f.result()]
    assert problems == []
    final = pl.read_parquet(expected / f"{flips % 2}.parquet")
    assert load_run([target], cache_dir=cache).events.equals(final)  # not a stale version


def test_a_kind_s_columns_of_one_value_are_left_unread_and_held_as_literals_again(tmp_path: Path) -> None:
    """A rank of 70k operators and 70k kernels: the entry records, per kind of 65,536 events or
    more, its columns of one value or none (the operators' device and stream, none; their kind,
    one), which the read leaves unread and holds as literals again: each kind's events equal
    the decoded ones', held in as few bytes."""
    count = 70_000
    events = [kineto_event("user_annotation", "ProfilerStep#1", 1_000_000.0, 4 * count)]
    events += [kineto_event("cpu_op", f"aten::op{i % 7}", 1_000_000.0 + 2 * i, 1) for i in range(count)]
    events += [
        kineto_event("kernel", "gemm", 1_000_001.0 + 2 * i, 1, correlation=i, stream=7, device=0) for i in range(count)
    ]
    path = write_kineto(tmp_path / "rank0.json", events)
    cache = tmp_path / "cache"
    first = load_run([path], cache_dir=cache).by_kind
    (meta,) = (cache / "events").glob("*.json")
    recorded = {(k, c): v for k, c, v in json.loads(meta.read_text())["traces"][0]["literals"]}
    assert recorded[("cpu_op", "device")] is None
    assert recorded[("cpu_op", "kind")] == "cpu_op"
    assert recorded[("kernel", "stream")] == 7
    assert not any(k == "step" for k, _ in recorded)  # a kind of fewer events holds every column
    second = load_run([path], cache_dir=cache).by_kind
    assert list(second.parts) == list(first.parts)
    assert second.literals() == first.literals()
    for kind, part in first.parts.items():
        assert second.parts[kind].equals(part)
        assert second.parts[kind].estimated_size() == part.estimated_size()
