"""Analyzing files shard by shard gives what loading the whole run gives, with the same errors."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from tests.conftest import SAMPLES, analysis_of
from tests.factories import kineto_event, kineto_memory, simple_step, write_kineto
from tracekit.analyzers import run_analysis, windows
from tracekit.analyzers.collectives import INSTANCE
from tracekit.analyzers.parts import SyncParts
from tracekit.errors import InputError
from tracekit.executors import TaskFailed
from tracekit.executors.local import LocalExecutor
from tracekit.pipeline import shards as sharding
from tracekit.pipeline.mapped import Settings
from tracekit.pipeline.shards import analyze_files
from tracekit.readers import load_run

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from tracekit.results.analysis import Analysis


@pytest.fixture
def one_file_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file its own shard, however small: what a cluster does with large files."""
    monkeypatch.setattr(sharding, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(sharding, "SHARD_MAX_BYTES", 1)


def sharded(paths: Sequence[Path], executor: Any = None, **settings: Any) -> Analysis:
    outcome = analyze_files(paths, executor=executor or LocalExecutor(jobs=1), settings=Settings(**settings))
    return outcome.analysis


def loaded(paths: Sequence[Path], **options: Any) -> Analysis:
    if not options:  # the samples and the real traces: analyzed once for the session
        return analysis_of(paths).analysis
    load = {k: options.pop(k) for k in ("rank", "ranks") if k in options}
    return run_analysis(load_run(paths, **load), **options).analysis


def cpu_step(offset: float = 0.0) -> list[dict[str, Any]]:
    """A step with host work only (a CPU-only rank)."""
    t = 1_000_000.0 + offset
    return [
        kineto_event("user_annotation", "ProfilerStep#1", t, 100),
        kineto_event("cpu_op", "aten::mm", t + 10, 60),
        kineto_event("cpu_op", "c10d::allreduce_", t + 75, 20),
    ]


def test_shards_of_a_capture_give_the_whole_run_s_analysis(one_file_shards: None) -> None:
    folder = SAMPLES / "captures" / "straggler"
    assert sharding.plan(sorted(folder.glob("rank*.json.gz")), workers=2) == [
        (str(p),) for p in sorted(folder.glob("rank*.json.gz"))
    ]
    assert sharded([folder]) == loaded([folder])
    assert sharded([folder], ranks=frozenset({1, 5})) == loaded([folder], ranks={1, 5})
    assert sharded([folder], window="gpu_span", steps="3-") == loaded([folder], window="gpu_span", steps="3-")


@pytest.mark.parametrize("sample", ["straggler", "cuda-h200-compile", "cuda-h200-gloo2-straggler"])
def test_a_rank_of_many_events_is_analysed_in_windows_from_its_spilled_events(
    one_file_shards: None, monkeypatch: pytest.MonkeyPatch, sample: str
) -> None:
    """Every rank over the threshold (here, any of more than 100 events) is written to a file of
    its own and analysed in windows of its steps (of about 500 events) read from it: the
    analysis is the one of the ranks held whole."""
    folder = SAMPLES / "captures" / sample
    whole = sharded([folder], use_cache=False)  # (no map cache: each rank mapped again below)
    spilled: list[int] = []
    real = sharding.Spilled.written

    def written(held: Any, parquet: Path) -> Any:
        spilled.append(held.height)
        return real(held, parquet)

    monkeypatch.setattr(sharding, "WINDOWED_EVENTS", 100)
    monkeypatch.setattr(sharding.Spilled, "written", written)
    monkeypatch.setattr(sharding, "windows_plan", lambda ctx: windows.plan(ctx, events=500))
    assert sharded([folder], use_cache=False) == whole
    assert len(spilled) == len(list(folder.glob("rank*"))) and min(spilled) > 100


def test_a_rank_whose_events_cannot_be_spilled_is_analysed_held(
    one_file_shards: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No room in the temporary folder for a rank's events, or no temporary folder: it is
    analysed held, whole."""
    folder = SAMPLES / "captures" / "straggler"
    whole = sharded([folder], use_cache=False)

    def full(*_: Any, **__: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sharding, "WINDOWED_EVENTS", 100)
    with monkeypatch.context() as patch:
        patch.setattr(sharding.Spilled, "written", full)
        assert sharded([folder], use_cache=False) == whole
    monkeypatch.setattr(sharding, "tempfile", SimpleNamespace(TemporaryDirectory=full))  # no temporary folder
    assert sharded([folder], use_cache=False) == whole


def test_shards_hold_neighbouring_ranks(tmp_path: Path, one_file_shards: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files are cut into shards in the order of the numbers in their names (rank2 before
    rank10): each shard's ranks follow the previous shard's, so its tables join without a sort."""
    names = [f"rank{r}.json" for r in (0, 1, 10, 11, 2, 3)]  # the order of a sorted listing
    for name in names:
        (tmp_path / name).write_bytes(b" " * 100)
    monkeypatch.setattr(sharding, "SHARD_MAX_BYTES", 250)
    monkeypatch.setattr(sharding, "SHARDS_PER_WORKER", 1)
    shards = sharding.plan([tmp_path / n for n in names], workers=1)
    assert [[Path(p).name for p in s] for s in shards] == [
        ["rank0.json", "rank1.json"],
        ["rank2.json", "rank3.json"],
        ["rank10.json", "rank11.json"],
    ]


def test_gpu_ranks_with_process_groups_and_memory(tmp_path: Path, one_file_shards: None) -> None:
    """Group labels (split_group) and the world size are the run's, not a shard's."""
    for r in range(4):
        pgs = [{"pg_name": "1", "ranks": [0, 1] if r < 2 else [2, 3]}]
        events = [*simple_step(rank=r, offset=r * 2.0), kineto_memory(1_000_030.0, 512, allocated=512, reserved=2048)]
        write_kineto(tmp_path / f"rank{r}.json", events, rank=r, world_size=4, pg_config=pgs, device_memory=1 << 30)
    analysis = sharded([tmp_path])
    assert analysis == loaded([tmp_path])
    assert analysis.memory.per_device and analysis.collectives.count > 0


def test_a_cpu_only_rank_among_gpu_ranks_is_mapped_again_on_the_gpu_timeline(
    tmp_path: Path, one_file_shards: None
) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step(), rank=0)
    write_kineto(tmp_path / "rank1.json", cpu_step(), rank=1)
    assert loaded([tmp_path]).run.has_gpu
    assert sharded([tmp_path]) == loaded([tmp_path])


def test_a_file_without_a_rank_is_rank_0_when_the_other_is_unreadable(tmp_path: Path, one_file_shards: None) -> None:
    write_kineto(tmp_path / "trace.json", simple_step(), rank=None)
    (tmp_path / "broken.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-6])
    analysis = sharded([tmp_path])
    assert analysis == loaded([tmp_path])
    assert analysis.run.ranks[0].rank_source.kind == "assumed_zero"
    assert [s.path.rsplit("/", 1)[-1] for s in analysis.run.skipped] == ["broken.json.gz"]


def test_the_rank_option_and_memory_timelines(tmp_path: Path) -> None:
    trace = write_kineto(tmp_path / "trace.json", simple_step(), rank=None)
    assert sharded([trace], rank=3) == loaded([trace], rank=3)
    with pytest.raises(InputError, match="--rank applies to a single trace file, not 2"):
        sharded([trace, write_kineto(tmp_path / "b.json", simple_step(), rank=None)], rank=3)


@pytest.mark.parametrize("shards", ["one", "per file"])
def test_conflicting_files_give_load_run_s_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: str) -> None:
    if shards == "per file":
        monkeypatch.setattr(sharding, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(sharding, "SHARD_MAX_BYTES", 1)
    write_kineto(tmp_path / "x.json", simple_step(), rank=1)
    write_kineto(tmp_path / "y.json", simple_step(), rank=1)
    with pytest.raises(InputError, match=r"two files claim rank 1: .*x\.json and .*y\.json"):
        sharded([tmp_path])
    write_kineto(tmp_path / "y.json", simple_step(), rank=0, world_size=8)
    with pytest.raises(InputError, match=r"files of different jobs: .*y\.json \(world size 8\)"):
        sharded([tmp_path])
    write_kineto(tmp_path / "y.json", simple_step(offset=3600e6 * 5), rank=0)
    with pytest.raises(InputError, match="hours apart"):
        sharded([tmp_path])
    with pytest.raises(InputError, match="--ranks selects none"):
        sharded([tmp_path / "x.json"], ranks=frozenset({7}))


@dataclass
class FailsOn:
    """An executor whose worker dies on the shards holding ``bad`` in a path (as a cluster's can)."""

    bad: str
    name: str = "flaky"
    runs: int = 0
    workers: int = 1
    elsewhere: bool = False

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        for i, item in enumerate(items):
            self.runs += 1
            paths = getattr(item, "paths", ())  # a shard (or what a kept result stands for)
            yield i, TaskFailed("its worker died") if any(self.bad in p for p in paths) else fn(item)

    def hold(self, items: Sequence[Any]) -> list[Any]:
        return list(items)

    def keep(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return [fn(item) for item in items]

    def places(self, handles: Sequence[Any]) -> list[str | None]:
        return [None] * len(handles)

    def rest(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_shard_the_executor_cannot_run_is_a_skipped_file(tmp_path: Path, one_file_shards: None) -> None:
    for r in range(3):
        write_kineto(tmp_path / f"rank{r}.json", simple_step(offset=r * 2.0), rank=r, world_size=3)
    executor = FailsOn("rank1")
    analysis = sharded([tmp_path], executor=executor)
    assert [r.rank for r in analysis.run.ranks] == [0, 2]
    (skipped,) = analysis.run.skipped
    assert skipped.path.endswith("rank1.json")
    assert skipped.reason == "not analyzed: the flaky executor failed to run it (its worker died)"
    assert executor.runs == 3  # nothing mapped twice
    with pytest.raises(InputError, match=r"rank0\.json: not analyzed: the flaky executor failed"):
        sharded([tmp_path / "rank0.json"], executor=FailsOn("rank0"))


def _count(item: SimpleNamespace) -> int:
    return len(item.paths)


@pytest.mark.parametrize("elsewhere", [False, True])
def test_the_reduce_may_spread_work_only_to_workers_elsewhere(tmp_path: Path, elsewhere: bool) -> None:
    """A local pool's or local cluster's workers share this machine's cores: the re-timing's
    ranks are sent only to a cluster's on other machines."""
    for r in range(2):
        write_kineto(tmp_path / f"rank{r}.json", simple_step(offset=r * 2.0), rank=r, world_size=2)
    executor = FailsOn("none of them", workers=64, elsewhere=elsewhere)
    outcome = analyze_files([tmp_path], executor=executor, settings=Settings(use_cache=False))
    spread = outcome.frames.options.spread
    assert (spread is not None) == elsewhere
    if spread is not None:
        assert spread.workers == 64
        ok, bad = SimpleNamespace(paths=("a", "b")), SimpleNamespace(paths=("none of them",))
        assert spread(_count, [ok, ok]) == [2, 2]
        assert spread(_count, [ok, bad]) is None  # one item failed: none counts


def test_progress_names_every_file_once(tmp_path: Path, one_file_shards: None) -> None:
    for r in range(3):
        write_kineto(tmp_path / f"rank{r}.json", simple_step(offset=r * 2.0), rank=r, world_size=3)
    seen: list[tuple[str, int, int]] = []
    analyze_files(
        [tmp_path],
        executor=LocalExecutor(jobs=1),
        settings=Settings(),
        progress=lambda path, done, total: seen.append((path.rsplit("/", 1)[-1], done, total)),
    )
    assert seen == [("rank0.json", 1, 3), ("rank1.json", 2, 3), ("rank2.json", 3, 3)]


def test_a_process_pool_gives_the_same_analysis(one_file_shards: None) -> None:
    folder = SAMPLES / "captures" / "data_bound"
    with_pool = LocalExecutor(jobs=2)
    try:
        pooled = sharded([folder], executor=with_pool)
    finally:
        with_pool.close()
    assert msgspec.json.encode(pooled) == msgspec.json.encode(loaded([folder]))


@pytest.mark.parametrize("jobs", [1, 2])
def test_without_details_every_idle_interval_stays_where_it_was_mapped(
    tmp_path: Path, one_file_shards: None, jobs: int
) -> None:
    """No figure reads every GPU idle interval, or the host's longest blocking calls (the
    annotated trace's): the same analysis without them (from the map, and from the map cache a
    run with them filled); only the details, which then say so."""
    folder = SAMPLES / "captures" / "cuda-h200-gloo2-straggler"
    executor = LocalExecutor(jobs=jobs)
    settings = Settings(cache_dir=str(tmp_path))
    try:
        fresh = analyze_files([folder], executor=executor, settings=Settings(use_cache=False), details=False)
        whole = analyze_files([folder], executor=executor, settings=settings)
        cached = analyze_files([folder], executor=executor, settings=settings, details=False)
    finally:
        executor.close()
    every = whole.frames.idle.intervals
    assert every.height > 50 and whole.details["idle_intervals"].height == every.height
    # the calls as documented: the instances' numbers that join them in the reduce stay there
    calls = whole.details["collectives_per_rank"]
    assert calls.height and INSTANCE in whole.frames.collectives.per_rank.columns and INSTANCE not in calls.columns
    assert every.select("rank").unique().height == 2
    assert whole.frames.gather(SyncParts).calls.height > 0
    for alone in (fresh, cached):
        assert msgspec.json.encode(alone.analysis) == msgspec.json.encode(whole.analysis)
        assert alone.frames.idle.intervals.height == 0 and not alone.details_kept
        assert alone.frames.gather(SyncParts).calls.height == 0
        assert alone.frames.idle.longest.height < every.height
        with pytest.raises(ValueError, match=r"details=True"):
            _ = alone.details


@pytest.mark.real
@pytest.mark.parametrize(
    "name",
    [
        pytest.param("kineto/param-dlrm-8rank-v100", marks=[pytest.mark.e2e, pytest.mark.concurrent]),
        "nsys/nsysai-mfu-2gpu-after.sqlite",
    ],
)
def test_real_runs_in_one_file_shards_give_the_same_json(shared_traces: Path, name: str, one_file_shards: None) -> None:
    """Rows tied on their figure come out in the same order however the ranks were sharded."""
    path = shared_traces / name
    assert msgspec.json.encode(sharded([path])) == msgspec.json.encode(loaded([path]))


@pytest.mark.parametrize("single_use", [True, False])
def test_a_single_use_pool_stops_once_its_map_is_done(
    tmp_path: Path, one_file_shards: None, monkeypatch: pytest.MonkeyPatch, single_use: bool
) -> None:
    """An executor of one analysis (the command line's) releases its processes before the reduce,
    and the reduce sees no difference; one kept for several analyses keeps them."""
    for r in range(3):
        write_kineto(tmp_path / f"rank{r}.json", simple_step(offset=r * 2.0), rank=r, world_size=3)
    executor = LocalExecutor(jobs=2, single_use=single_use)
    seen: list[bool] = []
    reduce = sharding.reduce_outcome

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(executor._pool is None)
        return reduce(*args, **kwargs)

    monkeypatch.setattr(sharding, "reduce_outcome", watched)
    try:
        analysis = sharded([tmp_path], executor=executor)
        assert seen == [single_use]
        assert [r.rank for r in analysis.run.ranks] == [0, 1, 2]
        assert sorted(r for _, r in executor.map(abs, [-1, -2])) == [1, 2]  # a later map starts them again
    finally:
        executor.close()


@pytest.mark.parametrize(("sample", "fetched"), [("straggler", True), ("healthy", False)])
def test_the_ledgers_communication_time_is_fetched_from_the_workers_for_a_straggler_only(
    sample: str, fetched: bool, one_file_shards: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cluster elsewhere, each rank's communication time (tens of thousands of pieces on a
    rank of a GB) and its ledger entries by phase stay on the worker that mapped it: the ledger
    reads them to carve a named straggler's waits and its slow phase (here the forward), and
    only then fetches them, once a shard (a rank here). The same analysis either way."""
    folder = SAMPLES / "captures" / sample
    local = loaded([folder])
    kinds: list[str] = []
    fetch = sharding.Spread.fetch

    def spied(self: sharding.Spread, kept: list[Any]) -> list[Any]:
        kinds.extend(k.kind.__name__ for k in kept)
        return fetch(self, kept)

    monkeypatch.setattr(sharding.Spread, "fetch", spied)
    apart = sharded([folder], executor=FailsOn("none of them", workers=2, elsewhere=True), use_cache=False)
    assert kinds.count("LedgerParts") == (len(local.run.ranks) if fetched else 0)
    assert bool(local.stragglers.stragglers) == fetched
    assert msgspec.structs.replace(apart, analysis_seconds=None) == msgspec.structs.replace(
        local, analysis_seconds=None
    )
