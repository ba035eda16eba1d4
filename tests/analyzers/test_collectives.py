"""Matching collectives across ranks: process groups, sequence numbers, missing ranks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.factories import ev, make_run, nccl_call
from tracekit.analyzers.collectives import INSTANCE, CollectiveResult, _numbered, match_collectives
from tracekit.analyzers.steps import analyze_steps, gpu_activity
from tracekit.model import ProcessGroup
from tracekit.results.vocab import CollectiveMatch, MatchKey

if TYPE_CHECKING:
    from tracekit.model import Run

US = 1000


def collectives(run: Run) -> CollectiveResult:
    activity = gpu_activity(run)
    return match_collectives(run, activity, analyze_steps(run, activity=activity))


def by_instance(result: CollectiveResult) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["pg"], r["k"]): r for r in result.instances.iter_rows(named=True)}


# 4 ranks: TP pairs {0,1} and {2,3} on stream 20, DP pairs {0,2} and {1,3} on stream 21.
# Each rank interleaves its TP and DP collectives in its own order (times in us):
#   rank 0: tp#0 [10,30]   dp#0 [40,70]   tp#1 [80,100]
#   rank 1: tp#0 [20,30]   tp#1 [60,100]  dp#0 [110,130]
#   rank 2: dp#0 [50,70]   tp#0 [75,90]   tp#1 [95,120]
#   rank 3: tp#0 [85,90]   dp#0 [100,130] tp#1 [110,120]
LAYOUT = {
    0: [("tp", 10, 30), ("dp", 40, 70), ("tp", 80, 100)],
    1: [("tp", 20, 30), ("tp", 60, 100), ("dp", 110, 130)],
    2: [("dp", 50, 70), ("tp", 75, 90), ("tp", 95, 120)],
    3: [("tp", 85, 90), ("dp", 100, 130), ("tp", 110, 120)],
}
TP = {0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}
DP = {0: (0, 2), 1: (1, 3), 2: (0, 2), 3: (1, 3)}
# the groups' names when each group has its own (new_group), and their labels when they
# share one per kind (split_group): then pg_config's members tell them apart
DISTINCT = {(0, 1): "tp01", (2, 3): "tp23", (0, 2): "dp02", (1, 3): "dp13"}
SHARED = {(0, 1): "tp@0", (2, 3): "tp@2", (0, 2): "dp@0", (1, 3): "dp@1"}
# (group, k) -> {rank: (floor us, wait us)}, worked out from LAYOUT: ends coincide, so the
# floor is the later arrival's duration and the earlier rank waits for the later one
EXPECTED = {
    ((0, 1), 0): {0: (10, 10), 1: (10, 0)},
    ((0, 1), 1): {0: (20, 0), 1: (20, 20)},
    ((2, 3), 0): {2: (5, 10), 3: (5, 0)},
    ((2, 3), 1): {2: (10, 15), 3: (10, 0)},
    ((0, 2), 0): {0: (20, 10), 2: (20, 0)},
    ((1, 3), 0): {1: (20, 0), 3: (20, 10)},
}


def interleaved(*, shared_names: bool) -> Run:
    rows: list[dict[str, object]] = []
    for rank, calls in LAYOUT.items():
        for i, (kind, start, end) in enumerate(calls):
            members = (TP if kind == "tp" else DP)[rank]
            name = kind if shared_names else DISTINCT[members]
            stream = 20 if kind == "tp" else 21
            rows += nccl_call(rank, start * US, end * US, corr=i + 1, pg=name, group_size=2, stream=stream)
    groups = {r: (ProcessGroup("tp", TP[r]), ProcessGroup("dp", DP[r])) if shared_names else () for r in LAYOUT}
    return make_run(rows, world_size=4, process_groups=groups)


@pytest.mark.parametrize("shared_names", [False, True], ids=["own names", "names shared, pg_config members"])
def test_interleaved_process_groups_match_within_their_group(shared_names: bool) -> None:
    result = collectives(interleaved(shared_names=shared_names))
    labels = SHARED if shared_names else DISTINCT
    inst = by_instance(result)
    assert set(inst) == {(labels[g], k) for g, k in EXPECTED}
    for (group, k), ranks in EXPECTED.items():
        row = inst[labels[group], k]
        assert (row["ranks"], row["expected_ranks"], row["matched"], row["complete"]) == (2, 2, True, True)
        assert row["matched_by"] == MatchKey.GROUP_ORDER
        assert row["op"] == "allreduce"
        per = result.per_rank.filter(pg=labels[group], k=k).sort("rank")
        assert per["rank"].to_list() == sorted(ranks)
        assert per["floor_ns"].to_list() == [ranks[r][0] * US for r in sorted(ranks)]
        assert per["wait_ns"].to_list() == [ranks[r][1] * US for r in sorted(ranks)]
    assert result.match == CollectiveMatch.COMPLETE
    assert (result.ranks_present, result.world_size) == (4, 4)


def test_the_group_of_a_launch_numbered_apart_is_that_of_the_op_around_it() -> None:
    # older traces give the launch an external id of its own: the record_param_comms op
    # open on the launching thread at the launch is the one that launched the kernel
    rows = [*nccl_call(0, 10 * US, 30 * US, corr=1, pg="dp"), *nccl_call(1, 20 * US, 30 * US, corr=1, pg="dp")]
    rows = [r | {"external_id": 999} if r["kind"] == "runtime" else r for r in rows]
    (row,) = collectives(make_run(rows, world_size=2)).instances.iter_rows(named=True)
    assert (row["pg"], row["matched_by"], row["ranks"], row["floor_ns"]) == ("dp", MatchKey.GROUP_ORDER, 2, 10 * US)


def test_shared_group_names_without_members_are_not_complete() -> None:
    # split_group names without pg_config: each "tp" instance holds 4 ranks of a 2-rank group
    run = interleaved(shared_names=True)
    run = make_run(run.events.drop("category").to_dicts(), world_size=4)  # the same events, no pg_config
    inst = collectives(run).instances.filter(pg="tp")
    assert inst["ranks"].to_list() == [4, 4] and not inst["complete"].any()


def test_without_any_group_the_kth_of_each_operation_is_matched() -> None:
    # no record_param_comms: one collective stream per rank, so the k-th kernel of each rank
    rows = [*nccl_call(0, 10 * US, 30 * US, corr=1), *nccl_call(1, 20 * US, 30 * US, corr=1)]
    rows = [r for r in rows if r["name"] != "record_param_comms"]
    result = collectives(make_run(rows, world_size=2))
    (row,) = result.instances.iter_rows(named=True)
    assert (row["pg"], row["op"], row["k"], row["ranks"], row["floor_ns"]) == ("stream#0", "AllReduce", 0, 2, 10 * US)
    assert row["matched_by"] == MatchKey.STREAM_ORDER


def test_sequence_numbers_match_where_a_rank_missed_the_first_collective() -> None:
    # rank 1's trace starts after seq 1: by order, its seq 2 would pair with rank 0's seq 1
    rows = [
        *nccl_call(0, 10 * US, 20 * US, corr=1, pg="0", seq=1),
        *nccl_call(0, 30 * US, 50 * US, corr=2, pg="0", seq=2),
        *nccl_call(0, 60 * US, 90 * US, corr=3, pg="0", seq=3),
        *nccl_call(1, 40 * US, 50 * US, corr=1, pg="0", seq=2),
        *nccl_call(1, 70 * US, 90 * US, corr=2, pg="0", seq=3),
    ]
    result = collectives(make_run(rows, world_size=2))
    inst = by_instance(result)
    assert {k: r["ranks"] for (_, k), r in inst.items()} == {1: 1, 2: 2, 3: 2}
    assert all(r["matched_by"] == MatchKey.SEQUENCE for r in inst.values())
    assert inst["0", 2]["floor_ns"] == 10 * US and inst["0", 3]["floor_ns"] == 20 * US
    assert inst["0", 1]["floor_ns"] is None and not inst["0", 1]["matched"]
    waits = result.per_rank.filter(rank=0).sort("k")["wait_ns"].to_list()
    assert waits == [None, 10 * US, 10 * US]


def test_one_rank_of_sixteen_claims_no_floor_no_wait() -> None:
    rows = [ev("step", "ProfilerStep#1", 0, 1000 * US)]
    rows += nccl_call(0, 100 * US, 290 * US, corr=1, pg="0", group_size=16)
    rows += nccl_call(0, 300 * US, 310 * US, corr=2, pg="0", group_size=16)
    result = collectives(make_run(rows, world_size=16))
    assert result.match == CollectiveMatch.SINGLE_RANK
    assert (result.ranks_present, result.world_size) == (1, 16)
    assert result.instances["ranks"].to_list() == [1, 1]
    assert result.instances["expected_ranks"].to_list() == [16, 16]
    assert not result.instances["matched"].any() and not result.instances["complete"].any()
    for column in ("floor_ns", "mean_wait_ns", "spread_ns", "last_rank"):
        assert result.instances[column].null_count() == 2, column
    for column in ("floor_ns", "wait_ns", "lateness_ns", "explained_wait_ns", "unexplained_wait_ns"):
        assert result.per_rank[column].null_count() == 2, column
    assert not result.per_rank["is_last"].any()
    assert result.per_rank["duration_ns"].to_list() == [190 * US, 10 * US]


def test_missing_ranks_of_a_group_make_a_partial_match() -> None:
    rows = [*nccl_call(0, 10 * US, 30 * US, corr=1, pg="0"), *nccl_call(1, 20 * US, 30 * US, corr=1, pg="0")]
    result = collectives(make_run(rows, world_size=8))  # group "0" unnamed in args: the world
    (row,) = result.instances.iter_rows(named=True)
    assert (row["ranks"], row["expected_ranks"], row["matched"], row["complete"]) == (2, 8, True, False)
    assert row["floor_ns"] == 10 * US
    assert result.match == CollectiveMatch.PARTIAL


def test_arrival_is_the_kernel_start_and_lateness_runs_from_the_earliest() -> None:
    rows = [
        *nccl_call(0, 10 * US, 110 * US, corr=1),
        *nccl_call(1, 50 * US, 110 * US, corr=1),
        *nccl_call(2, 90 * US, 110 * US, corr=1),
    ]
    result = collectives(make_run(rows, world_size=3))
    per = result.per_rank.sort("rank")
    assert per["arrival_ns"].to_list() == [10 * US, 50 * US, 90 * US]
    assert per["launch_ns"].to_list() == [10 * US - 20, 50 * US - 20, 90 * US - 20]
    assert per["lateness_ns"].to_list() == [0, 40 * US, 80 * US]
    # rank 2 arrived last: each wait is explained by it, up to the arrival gap
    assert per["explained_wait_ns"].to_list() == [80 * US, 40 * US, 0]
    assert per["unexplained_wait_ns"].to_list() == [0, 0, 0]
    (row,) = result.instances.iter_rows(named=True)
    assert (row["last_rank"], row["last_ranks"], row["spread_ns"]) == (2, [2], 80 * US)


def test_a_gloo_op_queued_behind_the_previous_collective_is_not_late() -> None:
    # gloo runs a rank's collectives on a worker thread, one after the other: an op starts
    # when the worker is free, so its start includes queueing. The rank arrives when its
    # thread calls c10d (times in us):
    #   rank 0: calls at 0 and 10;  gloo ops [0, 300], [300, 400]
    #   rank 1: calls at 50 and 60; gloo ops [50, 250], [250, 400]
    # #0: floor 200, rank 0 waits 100 of which rank 1's 50 us lateness explains 50.
    # #1: floor 100, rank 1 waits 50 and arrived last itself: rank 0's later start (300, queued
    # behind its #0) is no lateness, so nothing explains that wait.
    rows = []
    for rank, calls, ops in ((0, (0, 10), ((0, 300), (300, 400))), (1, (50, 60), ((50, 250), (250, 400)))):
        rows += [ev("cpu_op", "c10d::allreduce_", t * US, t * US + 500, rank=rank) for t in calls]
        rows += [ev("annotation", "gloo:all_reduce", a * US, b * US, rank=rank, tid=9) for a, b in ops]
    result = collectives(make_run(rows, world_size=2))
    per = result.per_rank.sort("k", "rank")
    assert per["arrival_ns"].to_list() == [0, 50 * US, 10 * US, 60 * US]
    assert per["wait_ns"].to_list() == [100 * US, 0, 0, 50 * US]
    assert per["explained_wait_ns"].to_list() == [50 * US, 0, 0, 0]
    assert per["unexplained_wait_ns"].to_list() == [50 * US, 0, 0, 50 * US]
    assert result.instances.sort("k")["last_rank"].to_list() == [1, 1]


def test_each_instance_is_numbered_once_null_keys_alike() -> None:
    """The cross-rank part groups by one number per instance (pg, op, matched_by, k): calls of
    the same keys share it on every rank, a null key equals a null key, any other key differs."""
    found = pl.DataFrame(
        {
            "rank": [0, 1, 0, 1, 0, 1, 2],
            "pg": ["0", "0", "0", "0", None, None, "0"],
            "op": ["allreduce", "allreduce", None, None, "broadcast", "broadcast", "allreduce"],
            "matched_by": ["sequence"] * 6 + ["group_order"],
            "k": [1, 1, 1, 1, 1, 1, 1],
        }
    )
    numbered = _numbered(found)
    assert numbered.drop(INSTANCE).equals(found)
    ids = numbered[INSTANCE].to_list()
    assert None not in ids
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[4] == ids[5]
    assert len({ids[0], ids[2], ids[4], ids[6]}) == 4
