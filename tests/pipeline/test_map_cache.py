"""The cache of the per-rank map's results: a warm run maps nothing and gives the same analysis; a
changed file, another option or another version misses; a damaged entry is mapped again, with a
warning, never read as numbers."""

from __future__ import annotations

import dataclasses
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import polars as pl
import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers import registry
from tracekit.analyzers.mapreduce import Entry
from tracekit.analyzers.parts import Parts, table
from tracekit.pipeline import AnalyzeOptions, analyze_paths, map_cache, shards
from tracekit.pipeline.map_cache import MAGIC, CacheWarning
from tracekit.reports import renderer

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Reduced

STRAGGLER = SAMPLES / "captures" / "straggler"


class Runs:
    """``analyze_paths`` over one folder with one cache, counting the shards it maps."""

    def __init__(self, folder: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder, self.cache, self.mapped = folder, cache, 0
        real = shards._map_files

        def counted(shard: Any) -> Any:
            self.mapped += 1
            return real(shard)

        monkeypatch.setattr(shards, "_map_files", counted)

    def __call__(self, **options: Any) -> tuple[bytes, int]:
        """The analysis as JSON (its timing zeroed) and how many shards were mapped."""
        self.mapped = 0
        analysis = analyze_paths([self.folder], AnalyzeOptions(jobs=1, cache_dir=self.cache, **options)).analysis
        return msgspec.json.encode(msgspec.structs.replace(analysis, analysis_seconds=0.0)), self.mapped

    def entries(self) -> list[Path]:
        return sorted((self.cache / "maps").glob("*.msgpack"))


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runs:
    folder = tmp_path / "run"
    shutil.copytree(STRAGGLER, folder)
    return Runs(folder, tmp_path / "cache", monkeypatch)


def _decoded(path: Path) -> map_cache._Entry[bytes]:
    return msgspec.msgpack.decode(path.read_bytes()[len(MAGIC) + map_cache._DIGEST :], type=map_cache._Entry[bytes])


def test_a_warm_run_maps_nothing_and_gives_the_same_analysis(runs: Runs) -> None:
    cold, mapped = runs()
    assert mapped >= 1
    for path in runs.entries():
        entry = _decoded(path)
        assert entry.key.map_version == map_cache.MAP_CACHE_VERSION
        assert entry.key.tracekit == map_cache.__version__
        assert entry.key.analyses == map_cache.analyses_key(registry.ANALYSES)
    warm, mapped = runs()
    assert (warm, mapped) == (cold, 0)


@pytest.mark.parametrize(
    "options",
    [
        {"steps": "3-"},
        {"window": "gpu_span"},
        {"ranks": {0, 1, 2}},
        {"include_warmup": True},
        {"comm_kernels": ("gloo",)},
        {"rank": None, "ranks": {7}},
    ],
    ids=",".join,
)
def test_another_option_misses_and_keeps_an_entry_of_its_own(runs: Runs, options: dict[str, Any]) -> None:
    plain, _ = runs()
    other, mapped = runs(**options)
    assert mapped >= 1, "another option value must map again"
    uncached = analyze_paths([runs.folder], AnalyzeOptions(jobs=1, use_cache=False, **options)).analysis
    assert other == msgspec.json.encode(msgspec.structs.replace(uncached, analysis_seconds=0.0))
    assert runs(**options) == (other, 0)
    assert runs() == (plain, 0)


def test_a_changed_file_misses(runs: Runs) -> None:
    before, _ = runs()
    trace = runs.folder / "rank3.pt.trace.json.gz"
    later = trace.stat().st_mtime_ns + 5_000_000_000
    os.utime(trace, ns=(later, later))
    after, mapped = runs()
    assert mapped >= 1
    assert after == before  # the same content: the same numbers
    assert runs()[1] == 0


def test_a_file_of_other_content_misses(runs: Runs) -> None:
    runs()
    shutil.copy(SAMPLES / "captures" / "healthy" / "rank3.pt.trace.json.gz", runs.folder / "rank3.pt.trace.json.gz")
    changed, mapped = runs()
    assert mapped >= 1
    uncached = analyze_paths([runs.folder], AnalyzeOptions(jobs=1, use_cache=False)).analysis
    assert changed == msgspec.json.encode(msgspec.structs.replace(uncached, analysis_seconds=0.0))


@pytest.mark.parametrize("what", ["__version__", "MAP_CACHE_VERSION", "CACHE_VERSION"])
def test_another_version_misses(runs: Runs, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    plain, _ = runs()
    monkeypatch.setattr(map_cache, what, "9.9.9" if what == "__version__" else 999)
    assert runs() == (plain, 1)
    assert runs() == (plain, 0)


class StepCountParts(Parts):
    per_rank: pl.DataFrame = table("rank steps")


class StepCounts(msgspec.Struct, frozen=True, kw_only=True):
    """A section a plugin adds: measured steps over all ranks."""

    rank_steps: int


def _step_counts_map(ctx: RankContext) -> StepCountParts:
    return StepCountParts(per_rank=ctx.frames.group_by("rank").agg(steps=pl.len()))


def _step_counts_reduce(red: Reduced) -> StepCounts:
    return StepCounts(rank_steps=int(red.gather(StepCountParts).per_rank["steps"].sum()))


ADDED = Entry("step_counts", _step_counts_map, _step_counts_reduce, result=StepCounts, title="Step counts")


def test_a_section_added_after_a_warm_run_is_there_warm(runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: a section added as the docs say (its module, one registry line) appeared cold and
    vanished from a warm run's Markdown until the cache's version was bumped by hand."""
    runs()
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES, ADDED))
    for expected_mapped in (1, 0):  # the entries made without it miss; the new ones hold its part
        options = AnalyzeOptions(jobs=1, cache_dir=runs.cache)
        runs.mapped = 0
        analysis = analyze_paths([runs.folder], options).analysis
        assert runs.mapped == expected_mapped
        assert analysis.sections["step_counts"].data == {"rank_steps": sum(s.count for s in analysis.steps.per_rank)}
        for fmt in ("terminal", "md", "html"):  # every format, cold and warm
            assert "Step counts" in renderer(fmt).render(analysis), fmt
        assert renderer("md").render(analysis).count("Step counts") == 1
        saved = msgspec.json.decode(renderer("json").render(analysis))
        assert saved["sections"]["step_counts"]["data"] == analysis.sections["step_counts"].data
    # a new version of the entry (what it gives changed where its code does not show) misses too
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES[:-1], dataclasses.replace(ADDED, version=2)))
    _, mapped = runs()
    assert mapped == 1


def test_a_changed_per_rank_function_changes_the_key() -> None:
    def other(ctx: RankContext) -> StepCountParts:
        return StepCountParts(per_rank=ctx.frames.group_by("rank").agg(steps=pl.len() + 1))

    plain = map_cache.analyses_key((ADDED,))
    assert map_cache.analyses_key((dataclasses.replace(ADDED, per_rank=other),)) != plain
    assert map_cache.analyses_key((dataclasses.replace(ADDED, version=2),)) != plain
    assert map_cache.analyses_key((ADDED,)) == plain


def test_the_same_files_by_another_path_are_named_as_given(runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    runs()
    monkeypatch.chdir(runs.folder.parent)
    (runs.folder.parent / "link").symlink_to(runs.folder.name)
    relative = [Path("link")]  # the same files, by a link: their identity (resolved) is the same
    analysis = analyze_paths(relative, AnalyzeOptions(jobs=1, cache_dir=runs.cache)).analysis
    uncached = analyze_paths(relative, AnalyzeOptions(jobs=1, use_cache=False)).analysis
    # (the event cache names a file as it was first read: by its target, here)
    assert [Path(r.source).resolve() for r in analysis.run.ranks] == [
        Path(r.source).resolve() for r in uncached.run.ranks
    ]
    assert (analysis.verdict, analysis.steps, analysis.ledger) == (uncached.verdict, uncached.steps, uncached.ledger)


def test_no_cache_writes_no_entry(runs: Runs) -> None:
    runs(use_cache=False)
    assert not (runs.cache / "maps").exists()


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # inside a table: read as it is, it would be another number
    path.write_bytes(bytes(data))


def _foreign_kind(path: Path) -> None:
    """A well-formed entry (its checksum right) naming a kind of parts that no analysis gives."""
    data = path.read_bytes()
    body = data[len(MAGIC) + map_cache._DIGEST :]
    entry = msgspec.msgpack.decode(body, type=map_cache._Entry[bytes])
    parts = tuple(msgspec.structs.replace(p, kind="os.system") for p in entry.parts)
    body = msgspec.msgpack.encode(msgspec.structs.replace(entry, parts=parts))
    path.write_bytes(MAGIC + map_cache.checksum(body) + body)


def _to_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "garbage": lambda p: p.write_bytes(b"\x00garbage{["),
    "bit-flipped": _flip,
    "foreign-kind": _foreign_kind,
    "is-folder": _to_dir,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_mapped_again_with_a_warning(runs: Runs, damage: str) -> None:
    clean, _ = runs()
    for entry in runs.entries():
        DAMAGE[damage](entry)
    if damage == "is-folder":  # a folder in its place cannot be replaced: analyzed again each time
        with pytest.warns(CacheWarning, match="damaged"):
            assert runs() == (clean, 1)
        return
    with pytest.warns(CacheWarning, match=r"map cache entry .* was damaged"):
        assert runs() == (clean, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runs() == (clean, 0)  # replaced by the run that found it damaged


def test_an_entry_of_the_older_layout_is_a_silent_miss_and_replaced(runs: Runs) -> None:
    """An entry an older tracekit wrote (its BLAKE2b digest, the older magic) is no damage."""
    clean, _ = runs()
    for entry in runs.entries():
        body = entry.read_bytes()[len(MAGIC) + map_cache._DIGEST :]
        entry.write_bytes(map_cache.OLD_MAGIC[0] + map_cache.hashlib.blake2b(body, digest_size=16).digest() + body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runs() == (clean, 1)  # mapped again, without a warning
        assert runs() == (clean, 0)  # and replaced
    assert all(e.read_bytes().startswith(MAGIC) for e in runs.entries())


def test_an_entry_whose_key_lacks_the_analyses_is_a_silent_miss(runs: Runs) -> None:
    """An entry of the layout before the registry joined the key (magic 2, no ``analyses``):
    every upgrading user has them, and they are no damage to warn about."""
    clean, _ = runs()
    for entry in runs.entries():
        doc = msgspec.msgpack.decode(entry.read_bytes()[len(MAGIC) + map_cache._DIGEST :])
        del doc["key"]["analyses"]
        body = msgspec.msgpack.encode(doc)
        entry.write_bytes(map_cache.OLD_MAGIC[1] + map_cache.checksum(body) + body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runs() == (clean, 1)  # mapped again, without a warning
        assert runs() == (clean, 0)  # and replaced


def test_the_checksum_is_the_crc32_of_the_body() -> None:
    assert map_cache.checksum(b"123456789") == (0xCBF43926).to_bytes(4, "little")  # CRC-32's check value


def test_a_shard_with_an_unreadable_file_is_not_stored(runs: Runs) -> None:
    (runs.folder / "rank8.pt.trace.json.gz").write_bytes(b"not gzip")
    runs()
    assert not runs.entries()
    assert runs()[1] == 1


def test_a_part_of_other_columns_is_mapped_again_with_a_warning(runs: Runs) -> None:
    """An entry whose table has other columns than its part declares (made by other code, the
    checksum intact) is damaged: mapped again and said once, never an internal error."""
    plain, _ = runs()
    for path in runs.entries():
        entry = _decoded(path)
        other = map_cache._ipc(pl.DataFrame({"rank": [0], "other": [1]}))
        parts = tuple(
            msgspec.structs.replace(p, tables={**p.tables, "stats": other}) if "stats" in p.tables else p
            for p in entry.parts
        )
        body = msgspec.msgpack.encode(msgspec.structs.replace(entry, parts=parts))
        path.write_bytes(MAGIC + map_cache.checksum(body) + body)
    with pytest.warns(CacheWarning, match="is not what the analysis gives"):
        again, mapped = runs()
    assert (again, mapped) == (plain, 1)
