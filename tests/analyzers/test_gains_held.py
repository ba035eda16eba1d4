"""The what-ifs held on a cluster's workers (:mod:`tracekit.analyzers.gains_held`): each group of
ranks' plans and scenarios built where it is held, the client sending tables once and wastes
each round. The analysis is the one the run re-timed here gives, to the bit."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from tracekit.analyzers import gains_held, retime_parallel
from tracekit.executors import TaskFailed
from tracekit.pipeline import AnalyzeOptions, analyze_paths
from tracekit.pipeline import shards as sharding
from tracekit.results.vocab import BoundKind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from tracekit.results.analysis import Analysis

SAMPLES = Path(__file__).parents[2] / "samples" / "captures"


@dataclass
class Kept:
    """What a worker holds (a Dask future's result): the same object from one call to the next;
    ``place``: the worker (None: not known)."""

    value: Any
    place: str | None = None


def _sent(item: Any) -> Any:
    """``item`` as a worker gets it: what it holds as it is, the rest pickled and back."""
    if isinstance(item, Kept):
        return item.value
    if isinstance(item, tuple):
        return tuple(_sent(x) for x in item)
    return pickle.loads(pickle.dumps(item))


@dataclass
class Elsewhere:
    """An executor of many workers on other machines, run in this process: what it holds or
    keeps stays as it is there, every other item and result is pickled as a cluster sends it;
    ``fails``: what its workers fail."""

    fails: str = ""  # "hold", "keep", "map"
    name: str = "elsewhere"
    workers: int = 64
    elsewhere: bool = True
    #: how many workers keep what is kept, in turn (0: where is not known)
    keepers: int = 0
    held: list[list[Any]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    #: every item each function was given by keep
    kept: dict[str, list[Any]] = field(default_factory=dict)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        self.calls.append(getattr(fn, "__name__", "?"))
        for i, item in enumerate(items):
            if self.fails == "map" and fn.__module__ != "tracekit.pipeline.shards":
                yield i, TaskFailed("its worker died")
            else:
                yield i, pickle.loads(pickle.dumps(fn(_sent(item))))

    def keep(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        self.calls.append(getattr(fn, "__name__", "?"))
        if self.fails == "keep" and fn.__module__ != "tracekit.pipeline.shards":
            raise OSError("the workers are gone")
        self.kept.setdefault(getattr(fn, "__name__", "?"), []).extend(items)
        return [
            Kept(fn(_sent(item)), f"worker {i % self.keepers}" if self.keepers else None)
            for i, item in enumerate(items)
        ]

    def places(self, handles: Sequence[Any]) -> list[str | None]:
        return [h.place for h in handles]

    def hold(self, items: Sequence[Any]) -> list[Any]:
        if self.fails == "hold":
            raise OSError("the workers are gone")
        kept = [Kept(pickle.loads(pickle.dumps(x))) for x in items]
        self.held.append([k.value for k in kept])
        return kept

    def rest(self) -> None:
        pass

    def close(self) -> None:
        pass


def _json(a: Analysis) -> bytes:
    return msgspec.json.encode(msgspec.structs.replace(a, analysis_seconds=None))


@pytest.fixture(autouse=True)
def _any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples' what-ifs held however small they are (they re-time in milliseconds)."""
    monkeypatch.setattr(retime_parallel, "MIN_WORK", 0)


@pytest.mark.parametrize("sample", ["straggler", "data_bound", "cuda-h200-gloo2-straggler", "healthy"])
def test_the_what_ifs_held_on_the_workers_give_the_analysis_of_the_run_re_timed_here(
    sample: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = SAMPLES / sample
    here = analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis
    held: list[gains_held.Held | None] = []
    real = gains_held.hold
    monkeypatch.setattr(gains_held, "hold", lambda *a, **k: held.append(real(*a, **k)) or held[-1])
    executor = Elsewhere()
    there = analyze_paths([folder], AnalyzeOptions(executor=executor, use_cache=False)).analysis
    assert held and held[0] is not None, "the what-ifs were not held on the workers"
    assert _json(there) == _json(here)
    # the gains' tables stayed where the shards were mapped, each shard's ranks a group made
    # there: nothing sent back to the workers, whatever the what-ifs asked
    assert executor.calls.count("make_group") == 1 and not executor.held
    assert executor.calls.count("group_summary") == 1 and executor.calls.count("group_round") >= 2
    assert here.verdict is not None and any(g.gain_pct is not None for g in here.verdict.gains)


def test_the_shards_one_worker_keeps_are_one_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rank mapped in its own shard, kept on 3 workers in turn: the shards one worker keeps
    are made one group there (each round one task a worker, not one a shard); the same analysis
    as the run re-timed here."""
    monkeypatch.setattr(sharding, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(sharding, "SHARD_MAX_BYTES", 1)
    folder = SAMPLES / "straggler"
    here = analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis
    executor = Elsewhere(keepers=3)
    there = analyze_paths([folder], AnalyzeOptions(executor=executor, use_cache=False)).analysis
    assert _json(there) == _json(here)
    ranks = len(here.run.ranks)
    assert len(executor.kept["_gains_of"]) == ranks > 2
    made = [[h.place for h in held] for held, _, _ in executor.kept["make_group"]]
    assert made == [[f"worker {w}"] * len(range(w, ranks, 3)) for w in range(3)]


def test_shards_of_unknown_place_are_a_group_each() -> None:
    kept = [((0, 1), "a"), ((2,), "b"), ((3,), "c"), ((4, 5), "d")]
    assert gains_held.on_one_worker(kept, ["w1", None, "w1", None]) == [
        ([0, 1, 3], ("a", "c")),
        ([2], ("b",)),
        ([4, 5], ("d",)),
    ]


@pytest.mark.parametrize("fails", ["keep", "map"])
def test_workers_that_fail_leave_the_what_ifs_to_this_process(fails: str) -> None:
    """Workers that cannot make the groups, or run nothing after the map (the tables they kept
    lost with them): the shards are mapped again here, the same analysis."""
    folder = SAMPLES / "straggler"
    here = analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis
    executor = Elsewhere(fails=fails)
    there = analyze_paths([folder], AnalyzeOptions(executor=executor, use_cache=False)).analysis
    assert _json(there) == _json(here)


def test_tables_gathered_here_are_sent_to_the_workers_once(tmp_path: Path) -> None:
    """A shard the map cache held is read here, its tables whole: its ranks are sent to the
    workers in groups (once), beside those the workers kept."""
    folder = SAMPLES / "straggler"
    here = analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis
    analyze_paths([folder], AnalyzeOptions(cache_dir=tmp_path))  # the map cache filled
    executor = Elsewhere()
    there = analyze_paths([folder], AnalyzeOptions(executor=executor, cache_dir=tmp_path / "x")).analysis
    assert _json(there) == _json(here)
    executor = Elsewhere()
    there = analyze_paths([folder], AnalyzeOptions(executor=executor, cache_dir=tmp_path, use_cache=True)).analysis
    assert _json(there) == _json(here)
    assert "make_group" not in executor.calls
    (groups,) = executor.held
    assert all(isinstance(g, gains_held.Group) for g in groups)
    assert sorted(r for g in groups for r in g.parts.frames["rank"].unique().to_list()) == [
        r.rank for r in here.run.ranks
    ]


def test_a_round_the_workers_cannot_run_is_re_timed_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Held, then lost before the rounds: every set re-timed here, from the same tables."""
    folder = SAMPLES / "straggler"
    here = analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis
    executor = Elsewhere()
    real = executor.map

    def no_rounds(fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        if fn is gains_held.group_round:
            return iter([(i, TaskFailed("lost")) for i in range(len(items))])
        return real(fn, items)

    monkeypatch.setattr(executor, "map", no_rounds)
    there = analyze_paths([folder], AnalyzeOptions(executor=executor, use_cache=False)).analysis
    assert _json(there) == _json(here)


def test_held_gains_are_kept_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo's keys digest each rank's plan and scenarios (built on the workers): a warm run
    reads every gain back without a round."""
    folder = SAMPLES / "straggler"
    options = AnalyzeOptions(executor=Elsewhere(), cache_dir=tmp_path)
    cold = analyze_paths([folder], options).analysis
    executor = Elsewhere()
    warm = analyze_paths([folder], AnalyzeOptions(executor=executor, cache_dir=tmp_path)).analysis
    assert _json(warm) == _json(cold)
    assert "group_round" not in executor.calls


def test_a_key_names_the_wastes_the_run_models_and_each_ranks_digests() -> None:
    facts = gains_held.RunFacts(has_gpu=True, matched=True, ranks=2)

    def held(kinds: frozenset[BoundKind], digests: dict[int, str]) -> gains_held.Held:
        return gains_held.Held(
            spread=None,  # type: ignore[arg-type]
            handles=[],
            instances=[],
            last_old={},
            first_end={},
            kinds=kinds,
            facts=facts,
            digests=digests,
            here=lambda sets: {},
        )

    base = held(frozenset({BoundKind.DATA, BoundKind.GPU_COMPUTE}), {0: "a", 1: "b"})
    key = base.key((BoundKind.DATA,))
    assert key == held(frozenset({BoundKind.DATA, BoundKind.GPU_COMPUTE}), {1: "b", 0: "a"}).key((BoundKind.DATA,))
    assert key != base.key((BoundKind.GPU_COMPUTE,))
    assert key != held(frozenset({BoundKind.DATA, BoundKind.SYNC, BoundKind.GPU_COMPUTE}), {0: "a", 1: "b"}).key(
        (BoundKind.DATA,)
    )
    assert key != held(frozenset({BoundKind.DATA, BoundKind.GPU_COMPUTE}), {0: "a", 1: "c"}).key((BoundKind.DATA,))


def test_one_rank_s_tables_kept_on_a_worker_are_fetched_here() -> None:
    """A single rank gains nothing from re-timing apart: its tables, kept where it was mapped,
    are sent here and the what-ifs re-timed here, the same analysis."""
    folder = SAMPLES / "cuda-h200-small"
    here = analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis
    executor = Elsewhere()
    there = analyze_paths([folder], AnalyzeOptions(executor=executor, use_cache=False)).analysis
    assert len(here.run.ranks) == 1 and "make_group" not in executor.calls and "_itself" in executor.calls
    assert _json(there) == _json(here)
