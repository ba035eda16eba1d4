"""GPU time breakdown and overlap on hand-built timelines."""

from __future__ import annotations

import pytest

from tests.factories import ev, make_run
from tracekit.analyzers import run_analysis
from tracekit.analyzers.steps import gpu_activity
from tracekit.results.analysis import RunWarning
from tracekit.results.vocab import RunWarningKind


def one_step_run() -> list[dict[str, object]]:
    # step [0,100); compute on two overlapping streams [10,40) + [30,50): union 40, not 50;
    # NCCL [45,80): 5 hidden under compute, 30 exposed; copy [85,90): 5; sync [90,95): idle.
    return [
        ev("step", "ProfilerStep#1", 0, 100),
        ev("runtime", "cudaLaunchKernel", 1, 2, correlation=1),
        ev("runtime", "cudaLaunchKernel", 3, 4, correlation=2),
        ev("runtime", "cudaLaunchKernel", 5, 6, correlation=3),
        ev("runtime", "cudaMemcpyAsync", 7, 8, correlation=4),
        ev("kernel", "gemm_a", 10, 40, stream=7, correlation=1),
        ev("kernel", "gemm_b", 30, 50, stream=8, correlation=2),
        ev("kernel", "ncclDevKernel_AllReduce", 45, 80, stream=20, correlation=3),
        ev("memcpy", "Memcpy HtoD", 85, 90, stream=7, correlation=4),
        ev("sync", "Stream Wait Event", 90, 95, stream=7),
    ]


def test_breakdown_counts_each_instant_once_by_priority() -> None:
    result = run_analysis(make_run(one_step_run())).frames
    row = result.breakdown.per_rank.row(0, named=True)
    assert row["window_ns"] == 100
    assert (row["compute_ns"], row["comm_ns"], row["memory_ns"], row["idle_ns"]) == (40, 30, 5, 25)
    assert row["compute_pct"] + row["comm_pct"] + row["memory_pct"] + row["idle_pct"] == pytest.approx(100)


def test_overlap_is_share_of_collective_time_under_compute() -> None:
    row = run_analysis(make_run(one_step_run())).frames.overlap.per_rank.row(0, named=True)
    assert (row["comm_ns"], row["overlapped_ns"], row["exposed_ns"]) == (35, 5, 30)
    assert row["overlap_pct"] == pytest.approx(100 * 5 / 35)


def test_gpu_span_window_is_first_to_last_gpu_activity() -> None:
    row = run_analysis(make_run(one_step_run()), window="gpu_span").frames.breakdown.per_rank.row(0, named=True)
    # [10, 90): sync is not activity; idle inside = 0 (10..90 all busy but 80..85) -> 5
    assert row["window_ns"] == 80
    assert row["idle_ns"] == 5


def test_step_windows_tile_and_add_up() -> None:
    rows = [
        ev("step", "ProfilerStep#1", 0, 100),
        ev("step", "ProfilerStep#2", 100, 200),
        ev("runtime", "cudaLaunchKernel", 90, 95, correlation=1),  # launched late in step 1 ...
        ev("kernel", "k1", 95, 130, correlation=1),  # ... runs into step 2's host time
        ev("runtime", "cudaLaunchKernel", 150, 151, correlation=2),
        ev("kernel", "k2", 160, 210, correlation=2),  # ends after step 2's host end
    ]
    result = run_analysis(make_run(rows)).frames
    steps = result.steps.steps
    assert steps["win_start_ns"].to_list() == [0, 100]
    assert steps["win_end_ns"].to_list() == [100, 210]
    per_step = result.breakdown.per_step
    assert per_step["window_ns"].to_list() == [100, 110]
    assert per_step["compute_ns"].to_list() == [5, 30 + 50]
    assert result.breakdown.per_rank["window_ns"].item() == 210
    assert result.breakdown.per_rank["compute_ns"].item() == 85


def test_ranks_are_kept_apart() -> None:
    rows = [*one_step_run(), *[{**r, "rank": 1} for r in one_step_run()[:1]]]
    result = run_analysis(make_run(rows)).frames
    assert result.breakdown.per_rank["rank"].to_list() == [0]  # rank 1 has no GPU activity
    assert result.steps.stats["rank"].to_list() == [0, 1]


def test_cpu_only_run_reports_host_side_and_says_no_gpu() -> None:
    rows = [
        ev("step", "ProfilerStep#3", 0, 100),
        ev("annotation", "tracekit.phase/forward", 10, 60),
        ev("cpu_op", "gloo:all_reduce", 60, 90),
    ]
    result = run_analysis(make_run(rows)).frames
    assert not result.facts.has_gpu
    assert result.results["gpu_breakdown"].per_rank == []
    assert result.overlap.per_rank.height == 0
    assert result.kernels.top.height == 0
    assert RunWarning(kind=RunWarningKind.CPU_ONLY) in result.facts.warnings
    assert result.steps.stats["mean_ns"].item() == 100


def test_empty_trace() -> None:
    result = run_analysis(make_run([])).frames
    assert not result.steps.has_steps
    assert result.breakdown.per_rank.height == 0
    assert result.annotations.summary.height == 0
    assert result.facts.span_ns == 0


@pytest.mark.parametrize("base", [1, -5, 1 << 45], ids=["packed-key", "negative-ids", "huge-ids"])
def test_gpu_activity_links_each_kernel_to_its_earliest_launch(base: int) -> None:
    rows = [
        ev("runtime", "cudaLaunchKernel", 10, 12, correlation=base, pid=7),
        ev("kernel", "k1", 20, 30, correlation=base),
        ev("runtime", "cudaLaunchKernel", 40, 41, correlation=base + 1, rank=1),  # same id, other rank
        ev("kernel", "k2", 50, 60, correlation=base + 1, rank=1),
        ev("kernel", "k3", 70, 80, correlation=base + 9),  # never launched: counts where it starts
    ]
    act = gpu_activity(make_run(rows)).sort("start_ns")
    assert act.select("name", "launch_ns", "launch_pid").rows() == [("k1", 10, 7), ("k2", 40, 100), ("k3", 70, None)]
    # an id launched twice on one rank (a replayed or split launch): once, at the earliest
    twice = gpu_activity(make_run([*rows, ev("runtime", "cudaLaunchKernel", 5, 6, correlation=base, pid=8)]))
    assert twice.height == 3
    assert twice.sort("start_ns").select("launch_ns", "launch_pid").row(0) == (5, 8)
