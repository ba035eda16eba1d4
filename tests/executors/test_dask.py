"""The Dask executor: the same analysis as the local one, and failures as one line, never a hang."""

from __future__ import annotations

import os
import re
import socket
import time
from typing import TYPE_CHECKING, TypeVar

import msgspec
import pytest

from tests.cli.test_cli import tracekit
from tests.conftest import SAMPLES
from tracekit.analyzers import gains_held, retime_parallel
from tracekit.errors import ExecutorError
from tracekit.executors import TaskFailed, make_executor
from tracekit.pipeline import AnalyzeOptions, analyze_paths
from tracekit.pipeline import shards as sharding

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tracekit.executors.dask import DaskExecutor

R = TypeVar("R")

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskExecutor]:
    """A local cluster of two single-threaded worker processes, for the module's tests."""
    from tracekit.executors.dask import DaskExecutor

    executor = DaskExecutor(workers=2)
    yield executor
    executor.close()


def without_time(path: Path) -> bytes:
    """A ``--json`` file with its one measured figure (how long the analysis took) blanked."""
    text = path.read_bytes()
    assert isinstance(msgspec.json.decode(text)["analysis_seconds"], float)
    # Only the key's own value: the same digits may occur inside another figure.
    blanked, count = re.subn(rb'("analysis_seconds": )[-0-9.eE+]+', rb"\1null", text)
    assert count == 1
    return blanked


@pytest.mark.e2e
def test_the_dask_cluster_gives_the_local_analysis(cluster: DaskExecutor) -> None:
    folder = SAMPLES / "captures" / "straggler"
    local = analyze_paths([folder]).analysis
    on_dask = analyze_paths([folder], AnalyzeOptions(executor=cluster)).analysis
    assert msgspec.structs.replace(on_dask, analysis_seconds=None) == msgspec.structs.replace(
        local, analysis_seconds=None
    )
    assert cluster.workers == 2
    assert not cluster.elsewhere  # a local cluster: its workers share this machine's cores


@pytest.mark.e2e
def test_the_ranks_re_timed_on_the_workers_give_the_local_gains(
    cluster: DaskExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The what-ifs held on the workers that mapped the ranks, each group's plans and scenarios
    built there from the tables they kept, and re-timed apart (as on a cluster on other
    machines of more workers than three times the client's cores; here two local ones are made
    to count): the same analysis."""
    folder = SAMPLES / "captures" / "straggler"
    local = analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis
    held: list[object] = []
    monkeypatch.setattr(retime_parallel, "ROUNDS", 0)
    monkeypatch.setattr(retime_parallel, "MIN_WORK", 0)
    monkeypatch.setattr(gains_held, "hold", spy(gains_held.hold, held))
    monkeypatch.setattr(type(cluster), "elsewhere", True)  # as a cluster on other machines
    sent: list[object] = []
    monkeypatch.setattr(type(cluster), "hold", spy(type(cluster).hold, sent))
    kept: list[list[object]] = []
    monkeypatch.setattr(type(cluster), "keep", spy(type(cluster).keep, kept))
    monkeypatch.setattr(sharding, "PARALLEL_MIN_BYTES", 0)  # a shard a rank, as large ranks are
    monkeypatch.setattr(sharding, "SHARD_MAX_BYTES", 1)
    on_dask = analyze_paths([folder], AnalyzeOptions(executor=cluster, use_cache=False)).analysis
    # the gains' tables (and the ledger's communication time) left where they were mapped, the
    # shards each worker kept a group made there, its plans and scenarios built there for the
    # verdict's gains and their explanation: none of them sent back to the workers, or built here
    assert len(held) == 1 and held[0] is not None and not sent and len(kept) == 4
    shards, _, _, groups = kept
    assert len(shards) == len(local.run.ranks) and len(groups) == len(set(cluster.places(shards))) <= 2
    assert msgspec.structs.replace(on_dask, analysis_seconds=None) == msgspec.structs.replace(
        local, analysis_seconds=None
    )


@pytest.mark.e2e
def test_without_details_the_idle_intervals_stay_on_the_workers(
    cluster: DaskExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cluster elsewhere, a rank's every GPU idle interval stays on the worker that mapped
    it, beside the gains' tables: the same analysis as the local one with them."""
    folder = SAMPLES / "captures" / "cuda-h200-gloo2-straggler"
    local = analyze_paths([folder], AnalyzeOptions(use_cache=False))
    monkeypatch.setattr(type(cluster), "elsewhere", True)  # as a cluster on other machines
    on_dask = analyze_paths([folder], AnalyzeOptions(executor=cluster, use_cache=False, details=False))
    assert local.frames.idle.intervals.height > 0 and on_dask.frames.idle.intervals.height == 0
    assert msgspec.structs.replace(on_dask.analysis, analysis_seconds=None) == msgspec.structs.replace(
        local.analysis, analysis_seconds=None
    )


def test_places_name_the_worker_that_keeps_each_result(cluster: DaskExecutor) -> None:
    handles = cluster.keep(abs, [-1, -2, -3, -4])
    places = cluster.places(handles)
    assert set(places) <= set(cluster._client.scheduler_info()["workers"]) and None not in places
    assert cluster.places([]) == []


def test_the_place_of_a_result_not_made_yet_is_not_known(cluster: DaskExecutor) -> None:
    """Waited for a poll's time at most (a cluster whose workers are gone fails where the
    handles are used, with its own time limits, not here)."""
    (slow,) = cluster.keep(time.sleep, [10])
    assert cluster.places([slow]) == [None]
    slow.cancel()


def spy(fn: Callable[..., R], calls: list[R]) -> Callable[..., R]:
    """``fn``, each result kept in ``calls``."""

    def called(*args: object, **kwargs: object) -> R:
        out = fn(*args, **kwargs)
        calls.append(out)
        return out

    return called


@pytest.mark.e2e
def test_a_rank_whose_name_no_profiler_writes_is_skipped_on_the_workers(cluster: DaskExecutor, tmp_path: Path) -> None:
    """A name of 17 MiB (one of hundreds panicked a worker, and the run exited 0 with the panic
    printed): the file is skipped with its reason, the good rank analyzed."""
    import gzip
    import json

    good = SAMPLES / "captures" / "healthy" / "rank0.pt.trace.json.gz"
    (tmp_path / "rank0.pt.trace.json.gz").write_bytes(good.read_bytes())
    doc = json.loads(gzip.decompress(good.read_bytes()))
    doc["distributedInfo"]["rank"] = 1
    next(e for e in doc["traceEvents"] if e.get("ph") == "X")["name"] = "A" * (17 << 20)
    (tmp_path / "rank1.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
    outcome = analyze_paths([tmp_path], AnalyzeOptions(executor=cluster, use_cache=False))
    assert [r.rank for r in outcome.analysis.run.ranks] == [0]
    (skipped,) = outcome.analysis.run.skipped
    assert skipped.path.endswith("rank1.pt.trace.json.gz")
    assert skipped.reason.startswith("an event holds a string of 17 MiB")


@pytest.mark.e2e
def test_items_run_on_the_workers_and_their_errors_come_back(cluster: DaskExecutor) -> None:
    assert dict(cluster.map(abs, [-3, 4, -5])) == {0: 3, 1: 4, 2: 5}
    (failed,) = cluster.map(int, ["x"])
    reason = "failed on a Dask worker (ValueError: invalid literal for int() with base 10: 'x')"
    assert failed == (0, TaskFailed(reason))


def _environ(name: str) -> str | None:
    return os.environ.get(name)


@pytest.mark.e2e
def test_the_workers_heap_is_not_given_back_after_every_free(cluster: DaskExecutor) -> None:
    """Dask starts workers with glibc's trim threshold at 64 KiB (every free gives the heap's top
    back, and the next allocation faults it in again: 7x the system time of reading small
    ranks); tracekit's own cluster starts them without it, and with Dask's other settings."""
    names = ["MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS"]
    assert dict(cluster.map(_environ, names)) == {0: None, 1: "1"}
    from dask import config  # with distributed

    assert "MALLOC_TRIM_THRESHOLD_" in config.get("distributed.nanny.pre-spawn-environ")  # Dask's own, left as it is


@pytest.mark.e2e
def test_cli_json_is_byte_identical_to_the_local_executor(tmp_path: Path) -> None:
    folder = SAMPLES / "captures" / "data_bound"
    # each in a process of its own, as a user runs them: the cluster it starts and stops is the
    # command's, and both print to a pipe
    local = tracekit("analyze", folder, "--json", tmp_path / "local.json", process=True)
    on_dask = tracekit(
        "analyze", folder, "--executor", "dask", "--jobs", "2", "--json", tmp_path / "dask.json", process=True
    )
    assert local.returncode == 0 and on_dask.returncode == 0, local.stderr + on_dask.stderr
    assert without_time(tmp_path / "dask.json") == without_time(tmp_path / "local.json")

    # the short answer, the same but for the line naming the file each wrote
    def said(out: str) -> list[str]:
        return [line for line in out.splitlines() if not line.startswith("wrote ")]

    assert said(on_dask.stdout) == said(local.stdout)


@pytest.mark.e2e
def test_a_single_use_local_cluster_stops_once_its_map_is_done(cluster: DaskExecutor) -> None:
    """An analysis's own cluster stops before the reduce (its workers' memory released); one
    kept for several analyses, or at a scheduler, keeps its workers."""
    from tracekit.executors.dask import DaskExecutor

    cluster.rest()  # not of single use: still there
    assert sorted(r for _, r in cluster.map(abs, [-1, -2])) == [1, 2]
    executor = DaskExecutor(workers=1, single_use=True)
    try:
        assert [r for _, r in executor.map(abs, [-3])] == [3]
        executor.rest()
        assert executor.workers == 1 and not executor.elsewhere  # as they were: the reduce's jobs
        assert list(executor.map(abs, [-4])) == [
            (0, TaskFailed("the Dask executor's local cluster was stopped after its map"))
        ]
    finally:
        executor.close()  # stopped already: nothing to do


def test_without_distributed_the_command_says_what_to_install(tmp_path: Path) -> None:
    folder = SAMPLES / "captures" / "healthy"
    result = tracekit("analyze", folder, "--executor", "dask", env_code="import sys; sys.modules['distributed'] = None")
    assert result.returncode == 2
    install = "pip install 'torch-tracekit[dask]'"
    assert result.stderr.strip() == f"tracekit: error: --executor dask needs distributed: {install}"
    result = tracekit("analyze", folder, "--scheduler", "tcp://127.0.0.1:8786")
    assert result.returncode == 2
    assert result.stderr.strip() == "tracekit: error: --scheduler needs --executor dask"


def test_a_scheduler_that_is_not_there_is_one_line() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from tracekit.executors.dask import DaskExecutor

    started = time.monotonic()
    with pytest.raises(ExecutorError, match=rf"^cannot connect to the Dask scheduler at tcp://127.0.0.1:{port} \("):
        DaskExecutor(f"tcp://127.0.0.1:{port}", connect_timeout=2)
    assert time.monotonic() - started < 30


@pytest.mark.e2e
def test_a_dying_worker_or_a_stuck_task_fails_its_item_and_nothing_hangs() -> None:
    import dask

    from tracekit.executors.dask import DaskExecutor

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        executor = DaskExecutor(workers=1, idle_timeout=3)
    try:
        (died,) = executor.map(os._exit, [1])
        assert died == (0, TaskFailed("every Dask worker that ran it died (KilledWorker)"))
        started = time.monotonic()
        results = dict(executor.map(time.sleep, [60, 60]))
        assert time.monotonic() - started < 30
        assert set(results) == {0, 1}
        assert all(isinstance(r, TaskFailed) and "no result from the Dask" in r.reason for r in results.values())
    finally:
        executor.close()


def test_an_unknown_executor() -> None:
    with pytest.raises(Exception, match="unknown executor 'ray' \\(one of: local, dask\\)"):
        make_executor("ray")
