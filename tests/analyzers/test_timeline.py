"""The host timeline of CPU-only runs: operators, gloo collectives, and the training thread
waiting on a collective, on hand-built gloo timelines."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tests.factories import ev, make_run
from tracekit.analyzers import timeline
from tracekit.analyzers.breakdown import gpu_breakdown
from tracekit.analyzers.steps import analyze_steps, gpu_activity

if TYPE_CHECKING:
    from tracekit.model.run import Run

TRAIN, GLOO = 1, 2  # the training thread and a gloo worker thread


def ddp_step(rank: int = 0) -> list[dict[str, object]]:
    """One DDP step on CPU, step [0, 1000) on the training thread.

    compute [10, 300) (forward, then backward, during which the bucket's all-reduce starts
    at 250 on gloo's thread); ``c10d::allreduce_`` [300, 310) issues the last bucket; the
    thread then runs nothing until DDP's reducer copies the bucket back [600, 620), 20 ns
    after ``gloo:all_reduce`` [250, 580) ends; Python [620, 650); optimizer [650, 900).
    """
    return [
        ev("step", "ProfilerStep#1", 0, 1000, rank=rank, tid=TRAIN),
        ev("annotation", "tracekit.phase/forward", 5, 100, rank=rank, tid=TRAIN),
        ev("cpu_op", "aten::addmm", 10, 100, rank=rank, tid=TRAIN),
        ev("annotation", "tracekit.phase/backward", 100, 620, rank=rank, tid=TRAIN),
        ev("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 100, 300, rank=rank, tid=TRAIN),
        ev("cpu_op", "c10d::allreduce_", 300, 310, rank=rank, tid=TRAIN),
        ev("annotation", "gloo:all_reduce", 250, 580, rank=rank, tid=GLOO),
        ev("cpu_op", "torch.distributed.ddp.reducer::copy_bucket_to_grad", 600, 620, rank=rank, tid=TRAIN),
        ev("cpu_op", "aten::add_", 650, 900, rank=rank, tid=TRAIN),
    ]


def host_breakdown(run: Run, rank: int | None = None) -> dict[str, int]:
    """The host breakdown of a CPU-only run, of one rank or summed over ranks, in ns."""
    activity = timeline.host_activity(run)
    steps = analyze_steps(run, activity=gpu_activity(run))
    frames = timeline.windows(activity, steps)
    per_rank = gpu_breakdown(timeline.segments(activity, frames)).per_rank
    if rank is not None:
        per_rank = per_rank.filter(rank=rank)
    return {p: int(per_rank[f"{p}_ns"].sum()) for p in ("window", "compute", "comm", "idle")}


def waits(run: Run) -> list[tuple[int, int, int]]:
    rows = timeline.host_activity(run).filter(pl.col("name") == timeline.COLLECTIVE_WAIT)
    return sorted(rows.select("rank", "start_ns", "end_ns").iter_rows())


def test_training_thread_blocked_on_an_all_reduce_is_communication() -> None:
    run = make_run(ddp_step())
    # blocked [310, 600) with the all-reduce in flight, woken 20 ns after it ends: a wait
    assert waits(run) == [(0, 310, 600)]
    # compute: [10, 300) (the all-reduce under backward's compute is hidden) + [600, 620)
    # + [650, 900) = 560; comm: c10d::allreduce_ and the wait [300, 600) = 300; idle:
    # before the first op [0, 10), Python [620, 650), after the optimizer [900, 1000)
    assert host_breakdown(run) == {"window": 1000, "compute": 560, "comm": 300, "idle": 140}


def test_without_the_wait_the_wakeup_was_idle() -> None:
    # the same step with the gloo span alone (what the host timeline counted before): the
    # 20 ns between the all-reduce's end and the reducer's copy were idle
    activity = timeline.host_activity(make_run(ddp_step()))
    assert activity.filter(pl.col("name") != timeline.COLLECTIVE_WAIT).filter(category="collective").height == 1
    gloo_only = activity.filter(pl.col("name") != timeline.COLLECTIVE_WAIT)
    run = make_run(ddp_step())
    frames = timeline.windows(gloo_only, analyze_steps(run, activity=gpu_activity(run)))
    row = gpu_breakdown(timeline.segments(gloo_only, frames)).per_rank.row(0, named=True)
    assert (row["compute_ns"], row["comm_ns"], row["idle_ns"]) == (560, 280, 160)


def test_a_wait_starts_when_a_collective_is_in_flight() -> None:
    # Python [620, 650) during which an all-reduce runs [630, 640): waiting from 630 only
    rows = [*ddp_step(), ev("annotation", "gloo:all_reduce", 630, 640, tid=GLOO)]
    run = make_run(rows)
    assert waits(run) == [(0, 310, 600), (0, 630, 650)]
    assert host_breakdown(run) == {"window": 1000, "compute": 560, "comm": 320, "idle": 120}


def test_another_ranks_collective_is_no_wait() -> None:
    # the all-reduce runs on rank 1 only: it cannot hold rank 0's thread, whose blocked
    # stretch stays idle (``c10d::allreduce_`` only issues the collective: not its work)
    rows = [r for r in ddp_step() if r["name"] != "gloo:all_reduce"]
    rows.append(ev("annotation", "gloo:all_reduce", 250, 580, rank=1, tid=GLOO))
    run = make_run(rows)
    assert waits(run) == []
    assert host_breakdown(run, rank=0) == {"window": 1000, "compute": 560, "comm": 0, "idle": 440}


def test_ranks_are_measured_apart() -> None:
    run = make_run([*ddp_step(0), *ddp_step(1)], world_size=2)
    assert waits(run) == [(0, 310, 600), (1, 310, 600)]
    assert host_breakdown(run) == {"window": 2000, "compute": 1120, "comm": 600, "idle": 280}


def test_one_rank_without_collectives_is_unchanged() -> None:
    rows = [r for r in ddp_step() if r["name"] not in ("gloo:all_reduce", "c10d::allreduce_")]
    run = make_run(rows)
    assert waits(run) == []
    assert host_breakdown(run) == {"window": 1000, "compute": 560, "comm": 0, "idle": 440}


def test_training_thread_is_the_step_thread_else_the_busiest() -> None:
    stepped = make_run(ddp_step())
    assert timeline.training_threads(stepped).select("rank", "tid").rows() == [(0, TRAIN)]
    no_steps = [r for r in ddp_step() if r["kind"] != "step"]
    no_steps += [ev("cpu_op", "aten::copy_", 0, 5, tid=GLOO)]  # one op on gloo's thread
    run = make_run(no_steps)
    assert timeline.training_threads(run).select("rank", "tid").rows() == [(0, TRAIN)]
    assert waits(run) == [(0, 310, 600)]


def test_an_operator_on_another_thread_is_still_compute() -> None:
    # a side thread's operator during the wait keeps the host busy: compute wins there
    rows = [*ddp_step(), ev("cpu_op", "aten::copy_", 400, 450, tid=3)]
    run = make_run(rows)
    assert waits(run) == [(0, 310, 600)]
    assert host_breakdown(run) == {"window": 1000, "compute": 610, "comm": 250, "idle": 140}
