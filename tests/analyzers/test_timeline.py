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
    """One DDP step on CPU, step [0, 1000) on the training thread, as gloo traces show it.

    forward [10, 100); backward [100, 250); the last gradient's hook [250, 300), in which
    DDP's reducer copies it into the bucket (``mul_out`` [255, 290), an ``aten::mul`` inside)
    and issues the bucket's all-reduce (``c10d::allreduce_`` [290, 298)); gloo runs it on its
    own thread [298, 580); the training thread runs nothing until the reducer copies the
    bucket back [600, 620), 20 ns after the all-reduce ends; Python [620, 650); optimizer
    [650, 900).
    """
    accumulate = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
    return [
        ev("step", "ProfilerStep#1", 0, 1000, rank=rank, tid=TRAIN),
        ev("annotation", "tracekit.phase/forward", 5, 100, rank=rank, tid=TRAIN),
        ev("cpu_op", "aten::addmm", 10, 100, rank=rank, tid=TRAIN),
        ev("annotation", "tracekit.phase/backward", 100, 620, rank=rank, tid=TRAIN),
        ev("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 100, 250, rank=rank, tid=TRAIN),
        ev("cpu_op", accumulate, 250, 300, rank=rank, tid=TRAIN),
        ev("cpu_op", "torch::distributed::reducer::mul_out", 255, 290, rank=rank, tid=TRAIN),
        ev("cpu_op", "aten::mul", 260, 285, rank=rank, tid=TRAIN),
        ev("cpu_op", "c10d::allreduce_", 290, 298, rank=rank, tid=TRAIN),
        ev("annotation", "gloo:all_reduce", 298, 580, rank=rank, tid=GLOO),
        ev("cpu_op", "torch.distributed.ddp.reducer::copy_bucket_to_grad", 600, 620, rank=rank, tid=TRAIN),
        ev("cpu_op", "aten::copy_", 601, 619, rank=rank, tid=TRAIN),
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
    # blocked [300, 600) with the all-reduce in flight, woken 20 ns after it ends: a wait
    assert waits(run) == [(0, 300, 600)]
    # compute: forward 90 + backward 150 + the hook outside the reducer's copy
    # ([250, 255) + [290, 300)) 15 + optimizer 250 = 505; comm: the reducer's copies
    # (35 + 20) and the wait 300 = 355; idle: [0, 10), Python [620, 650), [900, 1000).
    # Before the wait and the reducer counted, comm was 280 (gloo's span outside the
    # hook) and compute 560: the wake-up was idle, the bucket copies compute.
    assert host_breakdown(run) == {"window": 1000, "compute": 505, "comm": 355, "idle": 140}


def test_ddp_reducer_copies_are_communication_with_the_operators_inside() -> None:
    activity = timeline.host_activity(make_run(ddp_step()))
    compute = activity.filter(category="compute").select("start_ns", "end_ns").sort("start_ns").rows()
    assert compute == [(10, 255), (290, 300), (650, 900)]
    reducer = activity.filter(pl.col("name").cast(pl.String).str.contains("reducer::"))
    assert reducer["category"].unique().to_list() == ["collective"]


def test_a_wait_starts_when_a_collective_is_in_flight() -> None:
    # Python [620, 650) during which an all-reduce runs [630, 640): waiting from 630 only
    rows = [*ddp_step(), ev("annotation", "gloo:all_reduce", 630, 640, tid=GLOO)]
    run = make_run(rows)
    assert waits(run) == [(0, 300, 600), (0, 630, 650)]
    assert host_breakdown(run) == {"window": 1000, "compute": 505, "comm": 375, "idle": 120}


def test_another_ranks_collective_is_no_wait() -> None:
    # the all-reduce runs on rank 1 only: it cannot hold rank 0's thread, whose blocked
    # stretch stays idle
    rows = [r for r in ddp_step() if r["name"] != "gloo:all_reduce"]
    rows.append(ev("annotation", "gloo:all_reduce", 298, 580, rank=1, tid=GLOO))
    run = make_run(rows)
    assert waits(run) == []
    assert host_breakdown(run, rank=0) == {"window": 1000, "compute": 505, "comm": 55, "idle": 440}


def test_ranks_are_measured_apart() -> None:
    run = make_run([*ddp_step(0), *ddp_step(1)], world_size=2)
    assert waits(run) == [(0, 300, 600), (1, 300, 600)]
    assert host_breakdown(run) == {"window": 2000, "compute": 1010, "comm": 710, "idle": 280}


def test_one_rank_without_ddp_is_operators_and_idle() -> None:
    ddp = ("gloo:all_reduce", "c10d::allreduce_", "torch::distributed::reducer::mul_out")
    rows = [r for r in ddp_step() if r["name"] not in ddp and "ddp.reducer" not in str(r["name"])]
    run = make_run(rows)
    assert waits(run) == []
    # [10, 300) and [601, 619) and [650, 900) are operators; the rest idle
    assert host_breakdown(run) == {"window": 1000, "compute": 558, "comm": 0, "idle": 442}


def test_training_thread_is_the_step_thread_else_the_busiest() -> None:
    stepped = make_run(ddp_step())
    assert timeline.training_threads(stepped).select("rank", "tid").rows() == [(0, TRAIN)]
    no_steps = [r for r in ddp_step() if r["kind"] != "step"]
    no_steps += [ev("cpu_op", "aten::copy_", 0, 5, tid=GLOO)]  # one op on gloo's thread
    run = make_run(no_steps)
    assert timeline.training_threads(run).select("rank", "tid").rows() == [(0, TRAIN)]
    assert waits(run) == [(0, 300, 600)]


def test_an_operator_on_another_thread_is_still_compute() -> None:
    # a side thread's operator during the wait keeps the host busy: compute wins there
    rows = [*ddp_step(), ev("cpu_op", "aten::copy_", 400, 450, tid=3)]
    run = make_run(rows)
    assert waits(run) == [(0, 300, 600)]
    assert host_breakdown(run) == {"window": 1000, "compute": 555, "comm": 305, "idle": 140}
