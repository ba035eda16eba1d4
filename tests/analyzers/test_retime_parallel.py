"""The what-ifs re-timed side by side in children of their own: the same gains as in turn,
whatever a child does."""

from __future__ import annotations

import functools
import os
import pickle
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.analyzers.test_retime import _scenarios, plan, removal, timelines
from tests.analyzers.test_retime_ranks import _late_twice
from tracekit import pools
from tracekit.analyzers import retime, retime_parallel
from tracekit.analyzers.retime import RankPlan, Scenario
from tracekit.analyzers.retime_ranks import RankAlone

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")
R = TypeVar("R")


@pytest.fixture(autouse=True)
def _children_for_small_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """These timelines are tiny: children are started for them all the same (MIN_WORK), where
    the re-timing is Python's (in C, never: see :func:`test_the_re_timing_in_c_starts_no_child`)."""
    monkeypatch.setattr(retime_parallel, "MIN_WORK", 0)
    monkeypatch.setattr(retime, "NATIVE", False)


def _plans() -> list[RankPlan]:
    # k1 0-50; the host syncs 1-51, fetches 51-71, launches k2 at 71 (72-82)
    return [plan(0, tasks=[(0, 0, 50), (71, 72, 82)], blocks=[(1, 51)])]


def _what_ifs() -> dict[str, Scenario]:
    return {
        "fetch": Scenario(removals={0: removal((51, 71))}),
        "sync": Scenario(no_wait_blocks=True),
        "both": Scenario(removals={0: removal((51, 71))}, no_wait_blocks=True),
        "none": Scenario(),
    }


@settings(max_examples=25, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50), st.integers(2, 4))
def test_side_by_side_as_in_turn(plans: list[RankPlan], at: float, length: float, jobs: int) -> None:
    scenarios = _scenarios(plans, at, length)
    parallel = retime_parallel.simulate_each(plans, scenarios, jobs=jobs)
    assert parallel == retime.simulate_each(plans, scenarios)
    assert list(parallel) == list(scenarios)


def _no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_child(*_: object, **__: object) -> list[object]:
        raise AssertionError("a child was started")

    monkeypatch.setattr(retime_parallel, "apart_map", no_child)


def test_one_job_starts_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_child(monkeypatch)
    assert retime_parallel.simulate_each(_plans(), _what_ifs(), jobs=1) == retime.simulate_each(_plans(), _what_ifs())


def test_little_work_starts_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_child(monkeypatch)
    monkeypatch.setattr(retime_parallel, "MIN_WORK", 2 * 4 + 1)  # one rank's 2 tasks, 4 scenarios
    assert retime_parallel.simulate_each(_plans(), _what_ifs(), jobs=4) == retime.simulate_each(_plans(), _what_ifs())
    monkeypatch.setattr(retime_parallel, "MIN_WORK", 2 * 4)
    with pytest.raises(AssertionError, match="a child was started"):  # at the threshold, children are started
        retime_parallel.simulate_each(_plans(), _what_ifs(), jobs=4)


def test_the_re_timing_in_c_starts_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """In C, a child would work the ranks' shapes out again, which costs more than re-timing
    its scenarios: every scenario is re-timed here."""
    if retime._core is None:
        pytest.skip("the re-timing in C was not built")
    monkeypatch.setattr(retime, "NATIVE", True)
    _no_child(monkeypatch)
    assert retime_parallel.simulate_each(_plans(), _what_ifs(), jobs=4) == retime.simulate_each(_plans(), _what_ifs())


def test_children_re_time_in_processes_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The groups after the first go to other processes, and their gains come back."""
    started: list[int] = []
    start = pools._start

    def watched(fn: Callable[[T], R], item: T) -> object:
        child = start(fn, item)
        assert child is not None
        started.append(child.pid)
        return child

    monkeypatch.setattr(pools, "_start", watched)
    assert retime_parallel.simulate_each(_plans(), _what_ifs(), jobs=3) == retime.simulate_each(_plans(), _what_ifs())
    assert len(started) == 2 and os.getpid() not in started


@pytest.mark.parametrize("child", ["import sys; sys.exit(1)", "import time; time.sleep(600)"], ids=["fails", "hangs"])
def test_a_child_that_fails_or_hangs_leaves_its_scenarios_to_this_process(
    monkeypatch: pytest.MonkeyPatch, child: str
) -> None:
    monkeypatch.setattr(pools, "_CHILD", child)
    monkeypatch.setattr(retime_parallel, "MIN_WAIT_S", 0.5)
    assert retime_parallel.simulate_each(_plans(), _what_ifs(), jobs=3) == retime.simulate_each(_plans(), _what_ifs())
    assert retime_parallel.simulate_each(_plans(), _what_ifs(), jobs=2)["sync"] == {0: pytest.approx(82 - 61)}


def test_groups_are_balanced_heaviest_first() -> None:
    weights = {"compute": 9.0, "comms": 1.0, "launch": 9.0, "sync": 1.0}
    # in turn by position, both heavy what-ifs would share a core: [compute, launch], [comms, sync]
    assert retime_parallel.balanced(list(weights), weights, 2) == [["compute", "comms"], ["launch", "sync"]]
    assert retime_parallel.balanced(["a", "b", "c"], {"a": 1.0, "b": 1.0, "c": 1.0}, 3) == [["a"], ["b"], ["c"]]
    groups = retime_parallel.balanced(list("abcdefg"), {k: float(i) for i, k in enumerate("abcdefg")}, 3)
    assert sorted(k for g in groups for k in g) == list("abcdefg")
    assert max(sum("abcdefg".index(k) for k in g) for g in groups) == 7  # 21 in three groups of 7


def test_a_scenario_that_changes_ranks_weighs_more() -> None:
    assert retime_parallel._weight(Scenario(removals={0: removal((51, 71))})) > retime_parallel._weight(
        Scenario(no_wait_blocks=True)
    )


class _Workers:
    """A spread of ``workers`` that runs its items here: the held ones sent once as to a
    worker and kept, the results sent back."""

    def __init__(self, workers: int = 16, *, fails: str = "") -> None:
        self.workers = workers
        self.fails = fails  # "hold", "call": what the workers fail to do
        self.rounds = 0
        self.held: list[list[Any]] = []  # what each hold sent, as kept there
        #: per round, whether every item's scenarios were ones held there (not sent with it)
        self.scenarios_held: list[bool] = []
        self.holds = 0  # of the ranks (the run's events): scenarios are held once per call besides

    def hold(self, items: list[T]) -> list[T] | None:
        self.holds += all(isinstance(x, list) and isinstance(x[0], RankAlone) for x in items)
        if self.fails == "hold":
            return None
        kept = [pickle.loads(pickle.dumps(x)) for x in items]
        self.held.append(kept)
        return kept

    def __call__(self, fn: Callable[[T], R], items: list[T]) -> list[R] | None:
        self.rounds += 1
        if self.fails == "call":
            return None
        kept = [id(x) for group in self.held for x in group]
        self.scenarios_held.append(all(id(item[1]) in kept for item in items))  # type: ignore[index]
        return [pickle.loads(pickle.dumps(fn(x))) for x in items]


@settings(max_examples=50, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50))
def test_the_ranks_on_the_workers_as_the_whole_run_here(plans: list[RankPlan], at: float, length: float) -> None:
    """Re-timed apart on the workers, or here where they cannot settle it (a cycle)."""
    scenarios = _scenarios(plans, at, length)
    workers = _Workers()
    spread = retime_parallel.simulate_each(plans, scenarios, jobs=2, spread=workers)
    here = retime.simulate_each(plans, scenarios)
    assert spread.keys() == here.keys()
    for key, gains in here.items():
        assert spread[key] == pytest.approx(gains, abs=1e-9)
    assert (workers.rounds > 0) == (len(plans) > 1)


def test_the_ranks_stay_here_without_enough_workers_and_when_the_workers_fail() -> None:
    plans = _late_twice()
    scenarios = {"fetch": Scenario(removals={1: removal((10, 30))}), "none": Scenario()}
    here = retime.simulate_each(plans, scenarios)
    few = _Workers(workers=retime_parallel.ROUNDS * 2)  # no more than ROUNDS times the 2 jobs here
    assert retime_parallel.simulate_each(plans, scenarios, jobs=2, spread=few) == here
    assert few.rounds == 0
    not_held = _Workers(fails="hold")
    assert retime_parallel.simulate_each(plans, scenarios, jobs=2, spread=not_held) == here
    assert not_held.rounds == 0
    not_run = _Workers(fails="call")
    assert retime_parallel.simulate_each(plans, scenarios, jobs=2, spread=not_run) == here
    assert not_run.rounds == 1


def test_a_runs_ranks_are_sent_to_the_workers_once_for_every_what_if() -> None:
    """The verdict's gains, then their explanation: one placement of the ranks serves both
    calls (each sent every rank's events again before), with the gains re-timed here."""
    plans = _late_twice()
    first = {"fetch": Scenario(removals={1: removal((10, 30))})}
    second = {"none": Scenario(), "both": Scenario(removals={1: removal((10, 30))}, no_wait_blocks=True)}
    workers = _Workers()
    placement = functools.cache(functools.partial(retime_parallel.place, plans, workers))
    assert retime_parallel.simulate_each(plans, first, jobs=2, spread=workers, placement=placement) == (
        retime.simulate_each(plans, first)
    )
    rounds = workers.rounds
    assert retime_parallel.simulate_each(plans, second, jobs=2, spread=workers, placement=placement) == (
        retime.simulate_each(plans, second)
    )
    assert workers.holds == 1 and rounds > 0 and workers.rounds > rounds
    # each call's scenarios are sent once, for all of its rounds
    assert len(workers.held) == 3 and all(workers.scenarios_held)
    # ranks the workers could not hold are asked for once too: every call re-times them here
    lost = _Workers(fails="hold")
    once = functools.cache(functools.partial(retime_parallel.place, plans, lost))
    for scenarios in (first, second):
        got = retime_parallel.simulate_each(plans, scenarios, jobs=2, spread=lost, placement=once)
        assert got == retime.simulate_each(plans, scenarios)
    assert lost.holds == 1 and lost.rounds == 0
