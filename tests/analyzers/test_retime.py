"""The re-timing model on timelines small enough to work out by hand."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers import retime
from tracekit.analyzers.retime import RankPlan, Removal, Scenario, simulate, simulate_each

NAN = float("nan")


def plan(
    rank: int = 0,
    *,
    tasks: list[tuple[float, float, float]],  # (launch, start, end) on stream 0 unless streams given
    streams: list[int] | None = None,
    instances: list[int] | None = None,
    arrivals: list[float] | None = None,
    blocks: list[tuple[float, float]] = (),  # type: ignore[assignment]
    window_end: float | None = None,
    device_end: bool = True,
) -> RankPlan:
    launch, start, end = (np.array([t[i] for t in tasks], dtype=float) for i in range(3))
    n = len(tasks)
    inst = np.array(instances if instances is not None else [-1] * n, dtype=np.int64)
    return RankPlan(
        rank=rank,
        stream=np.array(streams if streams is not None else [0] * n, dtype=np.int64),
        launch=launch,
        start=start,
        end=end,
        instance=inst,
        arrival=np.array(arrivals if arrivals is not None else list(start), dtype=float),
        arrival_is_launch=np.zeros(n, dtype=bool),
        block_start=np.array([b[0] for b in blocks], dtype=float),
        block_end=np.array([b[1] for b in blocks], dtype=float),
        window_end=float(window_end if window_end is not None else (end.max() if n else 0.0)),
        device_end=device_end,
    )


def removal(*intervals: tuple[float, float], rate: float = 1.0) -> Removal:
    return Removal(
        start=np.array([a for a, _ in intervals], dtype=float),
        end=np.array([b for _, b in intervals], dtype=float),
        rate=np.full(len(intervals), rate),
    )


def test_a_data_wait_with_the_gpu_idle_is_gained_whole() -> None:
    # k1 runs 0-10; the host fetches a batch 10-30, then launches k2 at 30 (it runs 31-41)
    p = plan(tasks=[(0, 0, 10), (30, 31, 41)])
    assert simulate([p], Scenario(removals={0: removal((10, 30))})) == {0: pytest.approx(20)}


def test_a_data_wait_hidden_behind_a_busy_gpu_gains_nothing() -> None:
    # k1 runs 0-40; the fetch (5-25) happens while it runs; k2, launched at 25, waits for k1
    p = plan(tasks=[(0, 0, 40), (25, 40, 50)])
    assert simulate([p], Scenario(removals={0: removal((5, 25))})) == {0: pytest.approx(0)}


def test_partly_hidden_work_gains_the_exposed_part() -> None:
    # k1 runs 0-20; fetch 5-35: 15 of its 30 ns are exposed; k2 launched at 35 runs 36-46
    p = plan(tasks=[(0, 0, 20), (35, 36, 46)])
    # without the fetch k2 is launched at 5, waits for k1 (20), then its measured 1 ns delay
    assert simulate([p], Scenario(removals={0: removal((5, 35))})) == {0: pytest.approx(46 - 31)}


def test_a_late_rank_holds_the_others_at_the_collective_and_removing_its_delay_frees_both() -> None:
    # rank 0 arrives at 10, rank 1 (fetching 10-30) at 30; both leave at 35
    r0 = plan(0, tasks=[(0, 0, 10), (10, 10, 35)], instances=[-1, 0])
    r1 = plan(1, tasks=[(0, 0, 10), (30, 30, 35)], instances=[-1, 0])
    gains = simulate([r0, r1], Scenario(removals={1: removal((10, 30))}))
    assert gains == {0: pytest.approx(20), 1: pytest.approx(20)}
    # the early rank's own removal frees nothing: it still waits for the last
    assert simulate([r0, r1], Scenario(removals={0: removal((5, 10))})) == {0: pytest.approx(0), 1: pytest.approx(0)}


def test_hiding_communication_removes_its_tail_but_not_the_wait() -> None:
    r0 = plan(0, tasks=[(0, 0, 10), (10, 10, 35)], instances=[-1, 0])
    r1 = plan(1, tasks=[(0, 0, 10), (30, 30, 35)], instances=[-1, 0])
    gains = simulate([r0, r1], Scenario(hide_collectives=True))
    assert gains == {0: pytest.approx(5), 1: pytest.approx(5)}  # the 5 ns after the last arrival


def test_a_sync_that_no_longer_waits_lets_the_host_run_ahead() -> None:
    # k1 0-50; the host syncs 1-51 (waiting for k1), fetches 51-71, launches k2 at 71 (72-82)
    p = plan(tasks=[(0, 0, 50), (71, 72, 82)], blocks=[(1, 51)])
    assert simulate([p], Scenario(removals={0: removal((51, 71))})) == {0: pytest.approx(20)}
    # no wait: the fetch (now 1-21) overlaps k1; k2 launched at 21 waits for k1, then its 1 ns
    assert simulate([p], Scenario(no_wait_blocks=True)) == {0: pytest.approx(82 - 61)}


def test_a_blocking_copy_that_the_device_ends_just_after_the_call_is_still_awaited() -> None:
    # a pageable cudaMemcpyAsync (the host's block, 0-7,700 us) launches its copy at 0 (300-7,705
    # us on the device): the device records its end 5 us after the call returns (the two clocks
    # as the trace aligns them; 2.5-4.8 us on an H200). The host then launches k2 at 7,710 (it
    # runs 7,715-7,725). With the copy gone (a pinned, non_blocking one), the copy ends where it
    # starts (300) and the call returns then, less the 5 us it returned before the copy's end
    # (295): the host runs 7,405 us sooner, k2 is launched at 305 and runs 310-320
    us = 1_000.0
    p = plan(tasks=[(0, 300 * us, 7_705 * us), (7_710 * us, 7_715 * us, 7_725 * us)], blocks=[(0, 7_700 * us)])
    gone = np.array([0.0, NAN])
    assert simulate([p], Scenario(durations={0: gone})) == {0: pytest.approx(7_405 * us)}


def test_a_kept_block_waits_when_the_training_s_syncs_no_longer_do() -> None:
    # the same, the sync being tracekit capture's own step-end sync: removing the training's
    # syncs leaves it waiting, so nothing is gained; a fetch removed still gains its time
    p = dataclasses.replace(plan(tasks=[(0, 0, 50), (71, 72, 82)], blocks=[(1, 51)]), block_kept=np.array([True]))
    assert simulate([p], Scenario(no_wait_blocks=True)) == {0: pytest.approx(0)}
    assert simulate([p], Scenario(removals={0: removal((51, 71))})) == {0: pytest.approx(20)}


def test_a_slower_task_shortened_gains_as_much_on_a_gpu_bound_stream() -> None:
    p = plan(tasks=[(0, 0, 10), (1, 10, 30), (2, 30, 40)])
    shorter = np.array([NAN, 5.0, NAN])
    assert simulate([p], Scenario(durations={0: shorter})) == {0: pytest.approx(15)}


def test_a_cpu_run_ends_with_its_host() -> None:
    # host-only: the training thread waits 20-40 for a collective enqueued at 15 (gloo runs it 15-38)
    p = plan(tasks=[(15, 15, 38)], blocks=[(20, 40)], window_end=60, device_end=False)
    assert simulate([p], Scenario(removals={0: removal((0, 10))})) == {0: pytest.approx(10)}
    assert simulate([p], Scenario(removals={0: removal((45, 55))})) == {0: pytest.approx(10)}
    # a half-rate removal takes half
    assert simulate([p], Scenario(removals={0: removal((45, 55), rate=0.5)})) == {0: pytest.approx(5)}


@st.composite
def timelines(draw: st.DrawFn) -> list[RankPlan]:
    ranks = draw(st.integers(1, 3))
    n_coll = draw(st.integers(0, 3))
    plans = []
    for rank in range(ranks):
        tasks, streams, instances = [], [], []
        t = 0.0
        host = 0.0
        for c in range(n_coll + draw(st.integers(1, 6))):
            host += draw(st.floats(0, 20))
            stream = draw(st.integers(0, 1))
            start = max(host, t) + draw(st.floats(0, 5))
            end = start + draw(st.floats(0, 30))
            tasks.append((host if draw(st.booleans()) else NAN, start, end))
            streams.append(stream)
            instances.append(c if c < n_coll else -1)
            t = end if stream == 0 else t
        blocks = []
        for _ in range(draw(st.integers(0, 3))):
            b0 = draw(st.floats(0, 100))
            blocks.append((b0, b0 + draw(st.floats(0, 50))))
        plans.append(
            plan(rank, tasks=tasks, streams=streams, instances=instances, blocks=blocks, device_end=draw(st.booleans()))
        )
    return plans


@settings(max_examples=150, deadline=None)
@given(timelines())
def test_with_nothing_removed_every_rank_ends_when_it_did(plans: list[RankPlan]) -> None:
    assert all(abs(g) < 1e-6 for g in simulate(plans, Scenario()).values())


@pytest.mark.parametrize("device_end", [True, False])
def test_a_task_launched_as_a_wait_of_no_length_ends_is_not_awaited_by_it(device_end: bool) -> None:
    """Found by the property above: a sync of no length at 14.5 and a task launched at 14.5 on
    another stream. The sync awaited the task, whose launch (at the sync's end: after it) waited
    for the sync: endless recursion. A sync awaits what was launched strictly before it."""
    tasks = [(NAN, 18.3, 29.0), (14.5, 29.0, 29.0), (NAN, 30.9, 35.1)]
    one = plan(tasks=tasks, streams=[0, 1, 0], instances=[0, -1, -1], blocks=[(14.5, 14.5)], device_end=device_end)
    assert simulate([one], Scenario()) == {0: pytest.approx(0.0, abs=1e-6)}


@settings(max_examples=150, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50))
def test_removing_time_never_makes_a_rank_later(plans: list[RankPlan], at: float, length: float) -> None:
    gains = simulate(plans, Scenario(removals={p.rank: removal((at, at + length)) for p in plans}))
    assert all(g >= -1e-6 for g in gains.values())
    if _one_clock(plans):  # never more than was removed (the same stretch of time on every rank)
        assert all(g <= length + 1e-6 for g in gains.values())


def _one_clock(plans: list[RankPlan]) -> bool:
    """Whether every collective ends after its instance's last arrival, as on one clock. Where one
    ends before (clocks that disagree), its end is still moved by as much as the last arrival
    moves, which it may not have waited for: a rank can then gain from another rank's removal and
    from its own over the same stretch (found by the properties at 3,000 examples)."""
    last: dict[int, float] = {}
    for p in plans:
        for i, a in zip(p.instance.tolist(), p.arrival.tolist(), strict=True):
            if i >= 0:
                last[i] = max(last.get(i, a), a)
    return all(e >= last[i] for p in plans for i, e in zip(p.instance.tolist(), p.end.tolist(), strict=True) if i >= 0)


def _gloo(rank: int, *, enqueued: float, span_end: float, wait: tuple[float, float], done: float | None) -> RankPlan:
    """A CPU rank whose training thread waits (``wait``) on one gloo all-reduce (instance 0) it
    enqueued at ``enqueued``; the backend thread records the span's end at ``span_end`` (times in ms)."""
    ms = 1e6
    return RankPlan(
        rank=rank,
        stream=np.array([-1001]),
        launch=np.array([enqueued * ms]),
        start=np.array([enqueued * ms]),
        end=np.array([span_end * ms]),
        instance=np.array([0]),
        arrival=np.array([enqueued * ms]),
        arrival_is_launch=np.array([True]),
        block_start=np.array([wait[0] * ms]),
        block_end=np.array([wait[1] * ms]),
        block_until=np.array([wait[1] * ms]),
        block_on_collectives=np.array([True]),
        window_end=70 * ms,
        device_end=False,
        done=None if done is None else np.array([done * ms]),
    )


def test_a_wait_goes_on_when_the_collective_completes_though_its_span_is_recorded_later() -> None:
    """Rank 1 fetches 0-40, then enqueues at 55; the all-reduce completes at 59.5 (rank 1's span
    ends there) and rank 0's thread goes on at 60, but rank 0's backend thread, descheduled on a
    busy CPU, records its span's end at 63. Without the fetch both ranks go on 40 earlier: the
    wait on rank 0 ended with the completion, not with its own late record."""
    late = _gloo(0, enqueued=15, span_end=63, wait=(20, 60), done=59.5)
    last = _gloo(1, enqueued=55, span_end=59.5, wait=(56, 60), done=59.5)
    gone = Scenario(removals={1: removal((0, 40e6))})
    assert simulate([late, last], gone) == {0: pytest.approx(40e6), 1: pytest.approx(40e6)}
    assert simulate([late, last], Scenario()) == {0: pytest.approx(0), 1: pytest.approx(0)}
    # read from its own late record, rank 0's wait would look unrelated to the collective: kept whole
    unseen = _gloo(0, enqueued=15, span_end=63, wait=(20, 60), done=None)
    assert simulate([unseen, last], gone)[0] == pytest.approx(0, abs=1)


@pytest.mark.parametrize("native", [False, True])
def test_a_completion_read_before_its_own_launch_does_not_release_it(native: bool) -> None:
    """Found by the property tests of the core in C: rank 0 enqueues its all-reduce at 30, inside
    its wait on collectives (20-60), and the completion, read as the earliest end of the
    instance's spans on any rank's clock, is 25, before the enqueue. The host at 30 looked
    released by that completion, so the enqueue waited on the collective it enqueues: endless
    recursion. A completion releases the host only after its launch."""
    if native and retime._core is None:
        pytest.skip("the re-timing in C was not built")
    skewed = _gloo(0, enqueued=30, span_end=40, wait=(20, 60), done=25)
    other = _gloo(1, enqueued=35, span_end=40, wait=(36, 60), done=25)
    was = retime.NATIVE
    retime.NATIVE = native
    try:
        assert simulate([skewed, other], Scenario()) == {0: pytest.approx(0), 1: pytest.approx(0)}
        fetch = simulate([skewed, other], Scenario(removals={1: removal((0, 10e6))}))
    finally:
        retime.NATIVE = was
    # rank 1 enqueues 10 earlier, at 25: the last arrival is rank 0's, at 30, 5 earlier
    assert fetch == {0: pytest.approx(5e6), 1: pytest.approx(5e6)}


def _scenarios(plans: list[RankPlan], at: float, length: float) -> dict[str, Scenario]:
    removed = {p.rank: removal((at, at + length), rate=0.5) for p in plans}
    shorter = {p.rank: np.where(np.arange(p.start.size) % 2 == 0, 0.0, np.nan) for p in plans}
    return {
        "none": Scenario(),
        "removed": Scenario(removals=removed),
        "no wait": Scenario(no_wait_blocks=True),
        "hidden": Scenario(hide_collectives=True),
        "shorter": Scenario(durations=shorter),
        "all": Scenario(removals=removed, durations=shorter, no_wait_blocks=True, hide_collectives=True),
    }


@settings(max_examples=100, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50))
def test_one_at_a_time_and_as_arrays_give_the_same_times(plans: list[RankPlan], at: float, length: float) -> None:
    """The re-timing does a few tasks or times at once in Python floats and more as NumPy arrays
    (``_FEW``): the same sums in the same order, so the same times to the last bit."""
    scenarios = _scenarios(plans, at, length)
    few, native = retime._FEW, retime.NATIVE
    retime.NATIVE = False  # Python's paths (the core in C is held to them: test_retime_core.py)
    try:
        retime._FEW = 0  # every run of tasks as arrays
        arrays = {k: simulate(plans, s) for k, s in scenarios.items()}
        retime._FEW = 1_000_000  # every one one at a time
        python = {k: simulate(plans, s) for k, s in scenarios.items()}
    finally:
        retime._FEW, retime.NATIVE = few, native
    assert python == arrays


@settings(max_examples=100, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50))
def test_scenarios_re_timed_together_as_each_alone(plans: list[RankPlan], at: float, length: float) -> None:
    """:func:`simulate_each` works out each rank's shape once and reuses it: the same gains as
    each scenario re-timed alone, whatever the order."""
    scenarios = _scenarios(plans, at, length)
    alone = {k: simulate(plans, s) for k, s in scenarios.items()}
    assert simulate_each(plans, scenarios) == alone
    assert simulate_each(plans, dict(reversed(scenarios.items()))) == alone
    # one run's calls in turn (the verdict's gains, then their explanation), the shapes kept
    # from one call to the next: the same gains, each rank's shape worked out once
    shapes = retime.Shapes()
    keys = list(scenarios)
    first = simulate_each(plans, {k: scenarios[k] for k in keys[::2]}, shapes=shapes)
    kept = shapes.last
    assert kept is not None
    held = {rank: r.streams for rank, r in kept.ranks.items()}
    # each scenario's state let go once it is re-timed: the shape alone is kept for the next
    for r in kept.ranks.values():
        assert not set(retime.SCENARIO_STATE) & set(vars(r)) and not r._removals_kept
    second = simulate_each(plans, {k: scenarios[k] for k in keys[1::2]}, shapes=shapes)
    assert {**first, **second} == alone
    assert shapes.last is not None and all(r.streams is held[rank] for rank, r in shapes.last.ranks.items())
    assert pickle.loads(pickle.dumps(shapes)).last is None  # a child works its own out


@pytest.mark.parametrize("device_end", [True, False])
def test_a_block_awaiting_work_launched_in_it_is_not_its_own_dependency(device_end: bool) -> None:
    """Found by the properties once timelines had several blocks: two overlapping syncs merge
    into one wait, [10, 60], that awaits what was launched by the later one's start (20),
    among it a task of no length launched at 15, inside the wait, ending as it was launched.
    The host at 15 looked resumed (past the awaited work's end), so the task's launch waited
    for the wait that waits for it: endless recursion. Work a block awaits was launched before
    the block let the host go."""
    one = plan(tasks=[(15, 15, 15)], blocks=[(10, 50), (20, 60)], window_end=60, device_end=device_end)
    assert simulate([one], Scenario()) == {0: pytest.approx(0.0, abs=1e-6)}
    # removed host time before the wait moves the launch and the wait alike
    assert simulate([one], Scenario(removals={0: removal((0, 5))}))[0] >= 0.0


def test_a_collective_re_timed_in_a_cycle_still_holds_its_instance_back() -> None:
    """Found by the identity property: two collectives whose order differs between the ranks'
    streams (rank 0 runs instance 2 then 1 on one stream, rank 1 runs 1 then 2) form a cycle.
    Re-timing instance 1 reaches instance 2, which reaches rank 1's part of instance 1 and
    re-times it alone; instance 1 then left rank 1's arrival out of its last arrival, so rank 0's
    part ended a unit early and, with nothing removed, rank 0 gained a unit. A member re-timed
    alone still arrives, and the others wait for it."""
    never = np.nan
    rank0 = RankPlan(
        rank=0,
        stream=np.array([0, 1, 1, 0]),
        launch=np.array([never, 0.0, never, never]),
        start=np.array([0.0, 1.0, 0.0, 0.0]),
        end=np.array([0.0, 2.0, 2.0, 0.0]),
        instance=np.array([0, 1, 2, -1]),
        arrival=np.array([0.0, 1.0, 0.0, 0.0]),
        arrival_is_launch=np.zeros(4, dtype=bool),
        block_start=np.array([0.0]),
        block_end=np.array([3.0]),
        window_end=2.0,
        device_end=False,
    )
    rank1 = RankPlan(
        rank=1,
        stream=np.array([0, 0, 0]),
        launch=np.full(3, never),
        start=np.array([0.0, 2.0, 2.0]),
        end=np.array([0.0, 2.0, 2.0]),
        instance=np.array([0, 1, 2]),
        arrival=np.array([0.0, 2.0, 2.0]),
        arrival_is_launch=np.zeros(3, dtype=bool),
        block_start=np.empty(0),
        block_end=np.empty(0),
        window_end=2.0,
        device_end=False,
    )
    assert simulate([rank0, rank1], Scenario()) == {0: pytest.approx(0.0, abs=1e-6), 1: pytest.approx(0.0, abs=1e-6)}


@settings(max_examples=300, deadline=None)
@given(timelines())
def test_the_meetings_worked_out_at_once_are_the_loops(plans: list[RankPlan]) -> None:
    """What the core reads of the instances, from every plan's arrays at once, is what the
    Python loops over each rank's instances give (their members, last arrivals, first ends)."""
    at_once = retime.Simulation(plans, Scenario())
    looped = retime.Simulation(plans, Scenario())
    assert looped.members is not None  # worked out in Python first: the meetings then read them
    for a, b in zip(at_once._meetings(), looped._meetings(), strict=True):
        assert a.dtype == b.dtype
        assert a.tobytes() == b.tobytes()
