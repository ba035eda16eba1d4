"""Stragglers: named only when their measured lateness explains the others' waiting."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import cross_rank, ev, make_run, nccl_call
from tracekit.results.vocab import StragglerCause

if TYPE_CHECKING:
    from tracekit.analyzers.stragglers import StragglerResult

US = 1000
STEP = 1000 * US


def per_rank(result: StragglerResult) -> dict[int, dict[str, Any]]:
    return {r["rank"]: r for r in result.per_rank.iter_rows(named=True)}


def test_a_late_arrival_far_below_the_wait_is_no_straggler() -> None:
    # 4 gloo ranks, 3 steps. Each step the ranks enter the all-reduce 10 us apart (rank 3
    # last, 30 us after rank 0) but leave it at different times, 270 us apart:
    #   rank:       0    1    2    3
    #   enters:   100  110  120  130   (us into the step)
    #   leaves:   700  600  500  430
    #   duration: 600  490  380  300   -> floor 300, waits 300 190 80 0
    # Rank 3's lateness explains 30, 20, 10 us of those waits: 20 us per step for the
    # others on average, 2% of a step; the other 270, 170, 70 us are the collective's cost.
    leaves = {0: 700, 1: 600, 2: 500, 3: 430}
    rows: list[dict[str, object]] = []
    for step in range(3):
        t = step * STEP
        for r in range(4):
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=r))
            rows.append(ev("annotation", "gloo:all_reduce", t + (100 + 10 * r) * US, t + leaves[r] * US, rank=r, tid=9))
    collectives, result = cross_rank(make_run(rows, world_size=4))
    per = collectives.per_rank.filter(step=0).sort("rank")
    assert per["wait_ns"].to_list() == [300 * US, 190 * US, 80 * US, 0]
    assert per["lateness_ns"].to_list() == [0, 10 * US, 20 * US, 30 * US]
    assert per["explained_wait_ns"].to_list() == [30 * US, 20 * US, 10 * US, 0]
    assert per["unexplained_wait_ns"].to_list() == [270 * US, 170 * US, 70 * US, 0]
    ranks = per_rank(result)
    assert ranks[3]["times_last"] == 3 and ranks[3]["caused_wait_ns"] == pytest.approx(3 * 20 * US)
    assert ranks[3]["score"] == pytest.approx(0.02)
    assert result.stragglers == ()
    # no straggler named: every wait is the collective's own cost, none the stragglers'
    assert ranks[0]["unexplained_wait_ns"] == 3 * 270 * US
    assert (ranks[0]["straggler_wait_ns"], ranks[0]["comms_wait_ns"]) == (0, 3 * 300 * US)


def late_forward(*, extra_end_us: int = 0, phase: str = "forward") -> list[dict[str, object]]:
    """3 ranks, 4 steps of 1000 us; rank 2's forward (the ``phase``) takes 600 us instead of 200,
    so it enters the all-reduce 400 us after the others; all leave at 700 us, rank 0 at
    700 + ``extra_end_us``."""
    rows: list[dict[str, object]] = []
    for step in range(4):
        t = step * STEP
        for r in range(3):
            forward = (600 if r == 2 else 200) * US
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=r))
            rows.append(ev("annotation", phase, t, t + forward, rank=r))
            end = t + (700 + (extra_end_us if r == 0 else 0)) * US
            rows += nccl_call(r, t + forward, end, corr=step + 1)
    return rows


def test_a_straggler_whose_lateness_explains_the_wait_is_named_with_its_phase() -> None:
    # rank 0 leaves 50 us after the others: floor 100 us (ranks 1, 2), rank 0 waits 450 us,
    # of which rank 2's 400 us lateness explains 400; the other 50 are the collective's cost
    collectives, result = cross_rank(make_run(late_forward(extra_end_us=50), world_size=3))
    first = collectives.per_rank.filter(step=0).sort("rank")
    assert first["wait_ns"].to_list() == [450 * US, 400 * US, 0]
    assert first["explained_wait_ns"].to_list() == [400 * US, 400 * US, 0]
    assert first["unexplained_wait_ns"].to_list() == [50 * US, 0, 0]
    (straggler,) = result.stragglers
    assert (straggler.rank, straggler.times_last, straggler.instances) == (2, 4, 4)
    assert (straggler.steps_last, straggler.steps) == (4, 4)
    assert straggler.caused_wait_ns == 4 * 400 * US  # the others' explained wait, per instance their mean
    assert straggler.score == pytest.approx(0.4)
    assert (straggler.cause, straggler.phase, straggler.cause_excess_ns) == (StragglerCause.PHASE, "forward", 400 * US)
    ranks = per_rank(result)
    assert (ranks[0]["straggler_wait_ns"], ranks[0]["comms_wait_ns"]) == (4 * 400 * US, 4 * 50 * US)
    assert (ranks[1]["straggler_wait_ns"], ranks[1]["comms_wait_ns"]) == (4 * 400 * US, 0)
    assert result.matrix.filter(rank=2)["lateness_ns"].to_list() == [400 * US] * 4


@pytest.mark.parametrize(
    ("phase", "cause"),
    [
        ("tracekit.phase/forward", StragglerCause.PHASE),
        ("DistributedDataParallel.forward", StragglerCause.PHASE),  # "Data" in a name is no data phase
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", StragglerCause.DATA_PHASE),
        ("tracekit.phase/dataload_wait", StragglerCause.DATA_PHASE),
    ],
)
def test_a_data_phase_is_a_cause_of_its_own(phase: str, cause: StragglerCause) -> None:
    # the same lateness as above, in a phase of another name: the cause says which kind of phase
    _, result = cross_rank(make_run(late_forward(extra_end_us=50, phase=phase), world_size=3))
    (straggler,) = result.stragglers
    assert (straggler.rank, straggler.cause, straggler.phase) == (2, cause, phase)


def test_a_late_step_start_is_the_cause_when_no_phase_explains_it() -> None:
    rows: list[dict[str, object]] = []
    for step in range(2):
        t = step * STEP
        for r in range(3):
            late = 300 * US if r == 2 else 0
            rows.append(ev("step", f"ProfilerStep#{step}", t + late, t + STEP, rank=r))
            rows += nccl_call(r, t + late + 100 * US, t + 500 * US, corr=step + 1)
    _, result = cross_rank(make_run(rows, world_size=3))
    (straggler,) = result.stragglers
    assert straggler.rank == 2
    assert (straggler.cause, straggler.phase, straggler.cause_excess_ns) == (StragglerCause.LATE_START, None, 300 * US)


def test_the_waiting_a_straggler_causes_is_counted_in_the_steps_it_is_divided_by() -> None:
    # 2 ranks: a first step of 3000 us (warm-up, left out of the steps measured) where rank 1
    # enters the all-reduce 2000 us late (a one-time stall), then 3 steps of 1000 us where its
    # forward takes 300 us longer than rank 0's. Per measured step rank 1 costs rank 0 300 us,
    # all of it its forward's excess: a straggler. Counting the warm-up's 2000 us in the wait
    # but dividing by the 3 measured steps read 967 us a step (more than the forward explains;
    # in a 2-rank capture of 1 measured step, 298 ms "a step" of 103 ms) and named none.
    rows: list[dict[str, object]] = []
    starts = [0, 3 * STEP, 4 * STEP, 5 * STEP]
    for step, t in enumerate(starts):
        length = 3 * STEP if step == 0 else STEP
        for r in range(2):
            forward = (2200 if step == 0 else 500) * US if r == 1 else 200 * US
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + length, rank=r))
            rows.append(ev("annotation", "tracekit.phase/forward", t, t + forward, rank=r))
            rows += nccl_call(r, t + forward, t + (2300 if step == 0 else 600) * US, corr=step + 1)
    _, result = cross_rank(make_run(rows, world_size=2))
    assert result.matrix.filter(rank=1)["step"].to_list() == [1, 2, 3]
    (straggler,) = result.stragglers
    assert (straggler.rank, straggler.phase) == (1, "tracekit.phase/forward")
    assert straggler.caused_wait_ns == pytest.approx(3 * 300 * US)
    assert straggler.score == pytest.approx(0.3)
    assert straggler.cause_excess_ns == pytest.approx(300 * US)


def test_of_two_ranks_the_late_one_is_compared_with_the_other_not_with_their_median() -> None:
    # 2 ranks, 4 steps: rank 1's forward takes 500 us instead of 200, so it enters the
    # all-reduce 300 us after rank 0, which waits those 300 us. The median of two ranks is
    # their mean (350 us): against it rank 1's forward is only 150 us longer, under half the
    # 300 us it makes rank 0 wait. Against the other rank it is 300 us longer: the cause.
    rows: list[dict[str, object]] = []
    for step in range(4):
        t = step * STEP
        for r in range(2):
            forward = (500 if r == 1 else 200) * US
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=r))
            rows.append(ev("annotation", "forward", t, t + forward, rank=r))
            rows += nccl_call(r, t + forward, t + 600 * US, corr=step + 1)
    _, result = cross_rank(make_run(rows, world_size=2))
    (straggler,) = result.stragglers
    assert (straggler.rank, straggler.times_last, straggler.instances) == (1, 4, 4)
    assert (straggler.cause, straggler.phase, straggler.cause_excess_ns) == (StragglerCause.PHASE, "forward", 300 * US)
    assert straggler.score == pytest.approx(0.3)


def test_of_two_ranks_a_late_start_is_measured_against_the_other_rank() -> None:
    rows: list[dict[str, object]] = []
    for step in range(3):
        t = step * STEP
        for r in range(2):
            late = 300 * US if r == 1 else 0
            rows.append(ev("step", f"ProfilerStep#{step}", t + late, t + STEP, rank=r))
            rows += nccl_call(r, t + late + 100 * US, t + 500 * US, corr=step + 1)
    _, result = cross_rank(make_run(rows, world_size=2))
    (straggler,) = result.stragglers
    assert (straggler.rank, straggler.cause, straggler.cause_excess_ns) == (1, StragglerCause.LATE_START, 300 * US)


def test_lateness_that_nothing_on_the_rank_explains_is_jitter_not_a_straggler() -> None:
    # rank 2 enters every all-reduce 400 us after the others, but its forward is only 100 us
    # longer than theirs (300 vs 200) and its steps start on time: 100 us of phase excess
    # against 400 us of waiting it causes per step (under half): the lateness is not found
    # before the collective on rank 2 (scheduling, not its work), so its waiting is the
    # collective's cost, not a straggler's
    rows: list[dict[str, object]] = []
    for step in range(4):
        t = step * STEP
        for r in range(3):
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=r))
            rows.append(ev("annotation", "forward", t, t + (300 if r == 2 else 200) * US, rank=r))
            rows += nccl_call(r, t + (600 if r == 2 else 200) * US, t + 700 * US, corr=step + 1)
    _, result = cross_rank(make_run(rows, world_size=3))
    assert result.stragglers == ()
    ranks = per_rank(result)
    assert ranks[0]["straggler_wait_ns"] == 0 and ranks[0]["comms_wait_ns"] == 4 * 400 * US


def test_no_straggler_is_named_without_every_rank_of_the_group() -> None:
    # ranks 0 and 1 of a world of 8: rank 1 is late by 400 us, but the others are not here
    rows = [r for r in late_forward() if r["rank"] == 0] + [{**r, "rank": 1} for r in late_forward() if r["rank"] == 2]
    collectives, result = cross_rank(make_run(rows, world_size=8))
    assert collectives.per_rank["wait_ns"].drop_nulls().len() == 8  # matched: floors and waits
    assert not collectives.instances["complete"].any()
    assert result.stragglers == ()
    assert per_rank(result)[1]["times_last"] == 0  # last among 2 of 8 is not last


def test_a_single_rank_has_no_straggler_rows() -> None:
    rows = [ev("step", "ProfilerStep#1", 0, STEP), *nccl_call(0, 10 * US, 110 * US, corr=1)]
    _, result = cross_rank(make_run(rows, world_size=16))
    assert result.per_rank.height == 0 and result.matrix.height == 0 and result.stragglers == ()


def test_waits_for_one_late_rank_at_collectives_in_flight_together_count_once() -> None:
    # 3 gloo ranks, 2 steps, two all-reduces per step launched 50 us apart (DDP's buckets):
    # ranks 0 and 1 enter them at 100 and 150 us; rank 2, whose forward ran 400 us late, at 500
    # and 550 us. Ranks 0 and 1 wait 400 us at each, but from 100 to 500 and from 150 to 550:
    # 450 us of wall time per step, not 800.
    rows: list[dict[str, object]] = []
    for step in range(2):
        t = step * STEP
        for r, enter in ((0, 100), (1, 100), (2, 500)):
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=r))
            rows.append(ev("annotation", "tracekit.phase/forward", t + 10 * US, t + (enter - 10) * US, rank=r))
            for k in range(2):
                start = t + (enter + 50 * k) * US
                rows.append(ev("annotation", "gloo:all_reduce", start, t + (600 + 50 * k) * US, rank=r, tid=9))
    collectives, result = cross_rank(make_run(rows, world_size=3))
    per = collectives.per_rank.filter(step=0, rank=0).sort("arrival_ns")
    assert per["explained_wait_ns"].to_list() == [400 * US, 400 * US]
    ranks = per_rank(result)
    assert ranks[2]["times_last"] == 4
    assert ranks[2]["caused_wait_ns"] == pytest.approx(2 * 450 * US)  # was 2 x 800 us, summed
    (straggler,) = result.stragglers
    assert straggler.rank == 2 and straggler.phase == "tracekit.phase/forward"
    assert straggler.cause_excess_ns == pytest.approx(400 * US)


def test_a_straggler_last_at_one_collective_of_three_per_step_is_named() -> None:
    # 4 gloo ranks, 4 steps of three all-reduces: DDP's gradient bucket, which waits for rank 2's
    # forward (400 us longer than the others'), then two small ones (a loss sync, a metric), which
    # start together and where scheduling noise decides who is last, 10 us late (rank 0 or 1 by
    # turns). Rank 2 is last at 4 of 12 collectives, but its lateness explains 400 of the 420 us
    # the others wait per step: the waiting is systematic and it is the straggler (an 8-rank
    # capture read comms-bound, no straggler, when it was last at 2 of 6 collectives)
    rows: list[dict[str, object]] = []
    for step in range(4):
        t = step * STEP
        noisy = step % 2
        for r in range(4):
            forward = (600 if r == 2 else 200) * US
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=r))
            rows.append(ev("annotation", "tracekit.phase/forward", t, t + forward, rank=r))
            rows.append(ev("annotation", "gloo:all_reduce", t + forward, t + 700 * US, rank=r, tid=9))
            for k in (1, 2):
                start = t + (700 + 100 * k + (10 if r == noisy else 0)) * US
                rows.append(ev("annotation", "gloo:all_reduce", start, t + (750 + 100 * k) * US, rank=r, tid=9))
    _, result = cross_rank(make_run(rows, world_size=4))
    ranks = per_rank(result)
    assert (ranks[2]["times_last"], ranks[2]["complete"]) == (4, 12)
    assert ranks[0]["times_last"] == ranks[1]["times_last"] == 4
    (straggler,) = result.stragglers
    assert (straggler.rank, straggler.phase) == (2, "tracekit.phase/forward")
    assert (straggler.steps_last, straggler.steps) == (4, 4)
    assert straggler.caused_wait_ns == pytest.approx(4 * 400 * US)


def test_one_long_stall_in_one_step_is_no_straggler() -> None:
    # the same three collectives with no late forward, but in step 1 of 4 rank 3 stalls 2000 us
    # before the bucket (a one-off pause): its lateness explains nearly all the run's waiting,
    # yet in one step only, not a rank that holds the others back step after step
    rows: list[dict[str, object]] = []
    for step in range(4):
        t = step * 4 * STEP
        for r in range(4):
            forward = (2200 if (r, step) == (3, 1) else 200) * US
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + 4 * STEP, rank=r))
            rows.append(ev("annotation", "tracekit.phase/forward", t, t + forward, rank=r))
            rows.append(ev("annotation", "gloo:all_reduce", t + forward, t + 2300 * US, rank=r, tid=9))
            for k in (1, 2):
                start = t + (2300 + 100 * k + (10 if r == step % 2 else 0)) * US
                rows.append(ev("annotation", "gloo:all_reduce", start, t + (2350 + 100 * k) * US, rank=r, tid=9))
    _, result = cross_rank(make_run(rows, world_size=4))
    assert per_rank(result)[3]["score"] >= 0.05
    assert result.stragglers == ()


def test_two_ranks_last_by_turns_are_no_straggler() -> None:
    # 2 gloo ranks, 3 steps of three all-reduces each: in every step one rank's forward runs a
    # little longer, rank 0 in steps 0 and 2 (by 150 us), rank 1 in step 1 (by 100 us), and the
    # two small collectives after it start within 10 us of each other, rank 0 last at the first
    # and rank 1 at the second. Rank 0 is last at 5 of 9 collectives and explains the most
    # waiting over the run, but with two ranks one is always last: which one is a coin flip, and
    # the step-by-step difference of the waiting each explains holds zero. No straggler.
    rows: list[dict[str, object]] = []
    late = {0: 0, 1: 1, 2: 0}
    excess = {0: 150, 1: 100, 2: 150}
    for step in range(3):
        t = step * STEP
        for r in range(2):
            forward = (200 + (excess[step] if r == late[step] else 0)) * US
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=r))
            rows.append(ev("annotation", "tracekit.phase/forward", t, t + forward, rank=r))
            rows.append(ev("annotation", "gloo:all_reduce", t + forward, t + 600 * US, rank=r, tid=9))
            for k in (1, 2):
                start = t + (600 + 100 * k + (10 if r == k - 1 else 0)) * US
                rows.append(ev("annotation", "gloo:all_reduce", start, t + (650 + 100 * k) * US, rank=r, tid=9))
    _, result = cross_rank(make_run(rows, world_size=2))
    ranks = per_rank(result)
    assert (ranks[0]["times_last"], ranks[1]["times_last"]) == (5, 4)
    assert result.stragglers == ()


def _consistent_pairwise(joined: Any) -> list[int]:
    """:func:`stragglers._consistent` as it was written first: every rank against every other
    in every step (ranks^2 x steps), the reference of the property test below."""
    import polars as pl

    from tracekit.analyzers.collectives import KEYS
    from tracekit.analyzers.stragglers import CONSISTENT_LEVEL
    from tracekit.analyzers.t_quantiles import t_quantile

    rows = joined.filter(pl.col("complete"), pl.col("rank") != pl.col("last_rank"), pl.col("step").is_not_null())
    ranks = sorted(int(r) for r in joined["rank"].unique())
    steps = sorted(int(x) for x in joined.filter(pl.col("step").is_not_null())["step"].unique())
    if len(steps) < 2:
        return ranks
    by_instance = rows.group_by(*KEYS, "step", "last_rank").agg(w=pl.col("explained_wait_ns").fill_null(0).mean())
    caused = by_instance.group_by("step", "last_rank").agg(pl.col("w").sum())
    table = {(int(s), int(r)): float(w) for s, r, w in caused.select("step", "last_rank", "w").iter_rows()}
    out = []
    for rank in ranks:
        diffs = [
            table.get((s, rank), 0.0) - max((table.get((s, q), 0.0) for q in ranks if q != rank), default=0.0)
            for s in steps
        ]
        n = len(diffs)
        mean = sum(diffs) / n
        sd = (sum((d - mean) ** 2 for d in diffs) / (n - 1)) ** 0.5
        if all(d > 0 for d in diffs) or mean - t_quantile(n - 1, CONSISTENT_LEVEL) * sd / n**0.5 > 0:
            out.append(rank)
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 4), st.integers(0, 3), st.integers(0, 50)),
        min_size=0,
        max_size=60,
    ),
    st.integers(1, 6),
)
def test_the_consistent_ranks_as_every_rank_compared_with_every_other(
    rows: list[tuple[int, int, int, int, int]], ranks: int
) -> None:
    """The most any other rank's lateness explains, per step, from the largest and the second
    largest (ranks x steps): the same ranks as every pair compared, ties and absent ranks too."""
    import polars as pl

    from tracekit.analyzers.collectives import _numbered
    from tracekit.analyzers.stragglers import _consistent

    data = [(r % ranks, last % ranks, step, k, w) for r, last, step, k, w in rows]
    data += [(r, r, 0, 0, 0) for r in range(ranks)]  # every rank present
    joined = pl.DataFrame(
        {
            "rank": [d[0] for d in data],
            "last_rank": [d[1] for d in data],
            "step": [d[2] for d in data],
            "pg": ["0"] * len(data),
            "op": ["all_reduce"] * len(data),
            "matched_by": ["seq"] * len(data),
            "k": [d[3] for d in data],
            "complete": [True] * len(data),
            "explained_wait_ns": [float(d[4]) for d in data],
        }
    )
    joined = _numbered(joined)  # what the collectives' result carries: a number per instance
    assert _consistent(joined) == _consistent_pairwise(joined)
