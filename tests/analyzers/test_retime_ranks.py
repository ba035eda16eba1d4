"""Each rank re-timed on its own, the ranks meeting at collectives only: the whole run's gains."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers.retime import RankPlan, Scenario, simulate
from tracekit.analyzers.retime_ranks import Lasts, RankAlone, Round, agreed_order, met, recorded, settle_each, solve
from tracekit.analyzers.retime_shape import _NEVER

from .test_retime import _scenarios, plan, removal, timelines


def apart(plans: list[RankPlan], scenarios: dict[str, Scenario]) -> tuple[dict[str, dict[int, float] | None], int]:
    """Each scenario's gains, the ranks re-timed apart in this process, and the rounds it took."""
    last_old, first_end = recorded(plans)
    ranks = [RankAlone(p, last_old, first_end) for p in plans]
    rounds = 0

    def rounds_of(lasts: dict[str, dict[int, float]]) -> dict[str, list[Round]]:
        nonlocal rounds
        rounds += 1
        return {k: [r.round(scenarios[k], last) for r in ranks] for k, last in lasts.items()}

    return settle_each(rounds_of, last_old, scenarios), rounds


@settings(max_examples=500, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50))
def test_apart_as_the_whole_run_at_once(plans: list[RankPlan], at: float, length: float) -> None:
    """Six scenarios a timeline: 3,000 cases a run (18,000 at 3,000 examples, run once by hand:
    none differed, 6% were cycles), each settled apart the whole run's gains, or left to the
    whole run (a cycle)."""
    scenarios = _scenarios(plans, at, length)
    gains, rounds = apart(plans, scenarios)
    for key, scenario in scenarios.items():
        if gains[key] is not None:
            assert gains[key] == pytest.approx(simulate(plans, scenario), abs=1e-9)
    assert rounds <= 4


def _late_twice() -> list[RankPlan]:
    """Rank 1 fetches 10-30 before instance 0 and arrives last at both instances; rank 0's
    kernels follow one another (launched by no one), rank 1's host launches its own."""
    nan = float("nan")
    r0 = plan(0, tasks=[(nan, 0, 10), (nan, 10, 35), (nan, 35, 45), (nan, 45, 70)], instances=[-1, 0, -1, 1])
    r1 = plan(1, tasks=[(0, 0, 10), (30, 30, 35), (35, 35, 45), (65, 65, 70)], instances=[-1, 0, -1, 1])
    return [r0, r1]


def test_a_late_rank_s_fetch_gained_on_both_ranks_through_two_instances_in_two_rounds() -> None:
    """Without the fetch, instance 0's last arrival is 10 (was 30): both ranks leave it at 15,
    run 15-25, and rank 0 reaches instance 1 at 25, rank 1 (launching at 65 - 20) at 45: the
    last arrival 45 (was 65), both end at 50, 20 earlier. Round 1 with the recorded arrivals
    (30, 65) has rank 0 arrive at instance 1 at 45 hanging on instance 0; the client moves it
    with instance 0's last arrival (45 - 20 = 25, below rank 1's 45); round 2 confirms."""
    plans = _late_twice()
    scenario = {"fetch": Scenario(removals={1: removal((10, 30))})}
    gains, rounds = apart(plans, scenario)
    assert gains["fetch"] == {0: pytest.approx(20), 1: pytest.approx(20)}
    assert simulate(plans, scenario["fetch"]) == gains["fetch"]
    assert rounds == 2


def test_the_client_moves_each_arrival_with_its_source() -> None:
    first = [
        Round(0, 0.0, arrivals={0: 10.0, 1: 45.0}, sources={0: -1, 1: 0}, order=[0, 1]),
        Round(1, 0.0, arrivals={0: 10.0, 1: 45.0}, sources={0: -1, 1: -1}, order=[0, 1]),
    ]
    assert solve(first, {0: 30.0, 1: 65.0}, [0, 1]) == {0: 10.0, 1: 45.0}
    # had rank 0 arrived at 60 hanging on instance 0, it would still be the last: 60 - 20
    first[0].arrivals[1] = 60.0
    assert solve(first, {0: 30.0, 1: 65.0}, [0, 1]) == {0: 10.0, 1: 45.0}
    first[0].arrivals[1] = 70.0
    assert solve(first, {0: 30.0, 1: 65.0}, [0, 1]) == {0: 10.0, 1: 50.0}


def test_instances_finished_in_opposite_orders_are_left_to_the_whole_run() -> None:
    assert agreed_order([Round(0, 0.0, order=[0, 1]), Round(1, 0.0, order=[1, 0])]) is None
    assert agreed_order([Round(0, 0.0, order=[0, 2]), Round(1, 0.0, order=[1, 2])]) == [0, 1, 2]
    # two collectives in opposite stream orders on two ranks (the cycle test of test_retime)
    nan = float("nan")
    r0 = plan(0, tasks=[(nan, 0, 5), (nan, 5, 10)], instances=[0, 1])
    r1 = plan(1, tasks=[(nan, 0, 5), (nan, 5, 10)], instances=[1, 0])
    gains, _ = apart([r0, r1], {"none": Scenario()})
    assert gains == {"none": None}


_ARRIVAL = st.one_of(st.floats(-1e3, 1e3), st.sampled_from([float("nan"), float("-inf"), 0.0, 5.0]))


@st.composite
def _listed_rounds(draw: st.DrawFn) -> list[Round]:
    """Rounds as the C core answers them (lists in finishing order): instances shared between
    ranks, sources among them or none, ties, NaN and never (-inf), now and then an instance
    listed twice by one rank."""
    out = []
    for rank in range(draw(st.integers(1, 5))):
        order = draw(st.lists(st.integers(0, 6), max_size=7, unique=not draw(st.booleans()) or rank % 2 == 0))
        own = [draw(_ARRIVAL) for _ in order]
        src = [draw(st.integers(-1, 3)) for _ in order]
        out.append(Round(rank, float(rank), order=order, cycled=draw(st.booleans()), listed=(own, src)))
    return out


@settings(max_examples=1000, deadline=None)
@given(_listed_rounds())
def test_rounds_the_core_lists_merge_as_the_same_rounds_given_as_dicts(rounds: list[Round]) -> None:
    """:func:`met` of the core's lists (merged in arrays) is :func:`met` of the same rounds as
    dicts (the loop): per instance and source the latest arrival, NaN and never not counted,
    an instance listed twice the later of its two."""
    as_dicts = []
    for r in rounds:
        assert r.listed is not None
        d = Round(r.rank, r.gained, order=list(r.order), cycled=r.cycled)
        for i, s, a in r.pairs():
            d.arrivals[i], d.sources[i] = a, s
        as_dicts.append(d)
    assert met(rounds) == met(as_dicts)
    # and what a loop over the pairs keeps, merged in any grouping: the groups' merges merged
    assert met(rounds).by_instance() == _latest_by_loop(rounds)
    halves = [met(rounds[: len(rounds) // 2]), met(rounds[len(rounds) // 2 :])]
    assert met(halves).by_instance() == _latest_by_loop(rounds)
    assert met(halves).gained == {r.rank: r.gained for r in rounds}


def _latest_by_loop(rounds: list[Round]) -> dict[int, dict[int, float]]:
    """Per instance and source the latest arrival, one pair at a time (a rank's pairs as
    :meth:`Round.pairs` gives them), NaN and never not counted: what :func:`met` merges in arrays."""
    out: dict[int, dict[int, float]] = {}
    for r in rounds:
        for i, s, a in r.pairs():
            by = out.setdefault(i, {})
            if a > by.get(s, _NEVER):
                by[s] = a
    return out


@settings(max_examples=200, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50), st.floats(0, 50))
def test_a_rank_re_timed_again_under_a_scenario_is_re_timed_as_the_first_time(
    plans: list[RankPlan], at: float, length: float, other: float
) -> None:
    """Each rank keeps what a scenario's removed host time comes to (``_removal_kept``) for
    its next rounds: re-timed under another removal in between, then under the first again,
    each round is what a rank never re-timed before gives."""
    last_old, first_end = recorded(plans)
    first = _scenarios(plans, at, length)["all"]
    second = _scenarios(plans, at + other, length + other)["removed"]
    for p in plans:
        rank = RankAlone(p, last_old, first_end)
        rounds = [rank.round(s, last_old) for s in (first, second, first, second)]
        assert rounds[0] == rounds[2] == RankAlone(p, last_old, first_end).round(first, last_old)
        assert rounds[1] == rounds[3] == RankAlone(p, last_old, first_end).round(second, last_old)


@given(
    st.dictionaries(st.integers(-5, 40), st.floats(allow_nan=False, allow_infinity=False), max_size=20),
    st.lists(st.integers(-8, 45), max_size=30),
)
@settings(max_examples=300, deadline=None)
def test_the_last_arrivals_looked_up_at_once_are_those_looked_up_one_by_one(
    given_lasts: dict[int, float], ids: list[int]
) -> None:
    lasts = Lasts(given_lasts)
    at = np.array(ids, dtype=np.int64)
    expected = [given_lasts.get(i, _NEVER) for i in ids]
    assert lasts.at(at).tolist() == expected
    assert lasts.at(at).tolist() == expected  # the sorted arrays, made once, read again


def test_a_rank_holds_each_instance_s_tasks_in_order() -> None:
    """:attr:`RankAlone.members`, worked out of arrays: each instance -> its tasks, in order."""
    p = plan(0, tasks=[(0, 0, 10), (0, 10, 20), (0, 20, 30), (0, 30, 40)], instances=[2, -1, 0, 2])
    alone = RankAlone(p, {0: 0.0, 2: 0.0}, {0: 0.0, 2: 0.0})
    assert alone.members == {0: [2], 2: [0, 3]}
