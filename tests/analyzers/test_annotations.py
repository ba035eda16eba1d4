"""Annotation (phase) breakdown: nesting, GPU time through correlation, shares."""

from __future__ import annotations

import pytest

from tests.factories import ev, make_run
from tracekit.analyzers import run_analysis
from tracekit.analyzers.annotations import UNANNOTATED
from tracekit.results.vocab import PhaseLevel


def rows() -> list[dict[str, object]]:
    return [
        ev("step", "ProfilerStep#1", 0, 100, tid=1),
        ev("annotation", "forward", 5, 40, tid=1),
        ev("annotation", "inner", 10, 20, tid=1),  # nested: folded into forward
        ev("runtime", "cudaLaunchKernel", 12, 13, tid=1, correlation=1),
        ev("kernel", "k_fwd", 20, 30, correlation=1),
        ev("annotation", "backward", 50, 90, tid=1),
        # backward kernels are launched from autograd's thread, another tid of the process
        ev("runtime", "cudaLaunchKernel", 60, 61, tid=2, correlation=2),
        ev("runtime", "cudaLaunchKernel", 62, 63, tid=2, correlation=3),
        ev("kernel", "k_bwd1", 65, 80, correlation=2, stream=7),
        ev("kernel", "k_bwd2", 70, 85, correlation=3, stream=8),  # overlaps k_bwd1: union 20
        ev("annotation", "other_thread_range", 0, 100, tid=3),  # not on the training thread
    ]


def test_outermost_level_only_and_shares_sum_to_100() -> None:
    result = run_analysis(make_run(rows())).frames
    table = {r["name"]: r for r in result.annotations.per_rank.iter_rows(named=True)}
    assert set(table) == {"forward", "backward", UNANNOTATED}
    assert table["forward"]["cpu_ns"] == 35
    assert table["backward"]["cpu_ns"] == 40
    assert table[UNANNOTATED]["cpu_ns"] == 25
    assert sum(r["cpu_pct"] for r in table.values()) == pytest.approx(100)
    assert result.annotations.level is PhaseLevel.TRAINING_THREAD


def test_gpu_time_follows_launches_from_any_thread_as_a_union() -> None:
    table = {r["name"]: r for r in run_analysis(make_run(rows())).frames.annotations.per_rank.iter_rows(named=True)}
    assert table["forward"]["gpu_ns"] == 10
    assert table["backward"]["gpu_ns"] == 20


def test_per_step_statistics_fill_missing_steps_with_zero() -> None:
    data = [
        ev("step", "ProfilerStep#1", 0, 100),
        ev("annotation", "load", 0, 30),
        ev("step", "ProfilerStep#2", 100, 200),
        ev("annotation", "load", 100, 110),
        ev("step", "ProfilerStep#3", 200, 300),
    ]
    row = run_analysis(make_run(data)).frames.annotations.summary.filter(name="load").row(0, named=True)
    assert row["cpu_ns"] == 40
    assert row["step_mean_ns"] == pytest.approx(40 / 3)
    assert row["step_median_ns"] == 10
    assert row["step_max_ns"] == 30


def test_without_steps_every_thread_counts() -> None:
    data = [ev("annotation", "a", 0, 10, tid=1), ev("annotation", "b", 5, 20, tid=2)]
    result = run_analysis(make_run(data)).frames
    assert sorted(result.annotations.summary["name"].to_list()) == ["a", "b"]
    assert result.annotations.level is PhaseLevel.EVERY_THREAD


def test_tracekit_phases_are_the_rows_whatever_encloses_them() -> None:
    """Lightning runs training_step, zero_grad and backward inside ``optimizer.step(closure)``:
    torch's ``Optimizer.step#AdamW.step`` range encloses tracekit's forward, zero_grad and
    backward, and ends inside its optim_step. tracekit's phases are still the rows; a rank's
    other ranges are not rows (their time is in the phase that holds it, else unannotated)."""
    data = [
        ev("step", "ProfilerStep#1", 0, 100, tid=1, rank=0),
        ev("annotation", "tracekit.phase/dataload_wait", 0, 10, tid=1, rank=0),
        ev("annotation", "Optimizer.step#AdamW.step", 12, 95, tid=1, rank=0),
        ev("annotation", "tracekit.phase/forward", 15, 40, tid=1, rank=0),
        ev("annotation", "DistributedDataParallel.forward", 16, 39, tid=1, rank=0),
        ev("annotation", "tracekit.phase/zero_grad", 40, 45, tid=1, rank=0),
        ev("annotation", "tracekit.phase/backward", 45, 80, tid=1, rank=0),
        ev("annotation", "tracekit.phase/optim_step", 80, 100, tid=1, rank=0),
        # a rank without tracekit's phases keeps its outermost ranges
        ev("step", "ProfilerStep#1", 0, 100, tid=1, rank=1),
        ev("annotation", "Optimizer.step#AdamW.step", 12, 95, tid=1, rank=1),
        ev("annotation", "forward", 15, 40, tid=1, rank=1),
    ]
    per_rank = run_analysis(make_run(data)).frames.annotations.per_rank
    ours = {r["name"]: r["cpu_ns"] for r in per_rank.filter(rank=0).iter_rows(named=True)}
    assert ours == {
        "tracekit.phase/dataload_wait": 10,
        "tracekit.phase/forward": 25,
        "tracekit.phase/zero_grad": 5,
        "tracekit.phase/backward": 35,
        "tracekit.phase/optim_step": 20,
        UNANNOTATED: 5,
    }
    theirs = {r["name"]: r["cpu_ns"] for r in per_rank.filter(rank=1).iter_rows(named=True)}
    assert theirs == {"Optimizer.step#AdamW.step": 83, UNANNOTATED: 17}


def test_unannotated_gpu_time_is_what_was_launched_outside_every_range() -> None:
    """The ``(unannotated)`` row's GPU time: the union of the kernels launched inside the step
    while no top-level range was open (was always 0)."""
    data = [
        *rows(),
        # launched at 42 (between forward and backward), by the training thread: unannotated
        ev("runtime", "cudaLaunchKernel", 42, 43, tid=1, correlation=4),
        ev("kernel", "k_opt1", 44, 48, correlation=4),
        ev("runtime", "cudaLaunchKernel", 92, 93, tid=1, correlation=5),  # after backward
        ev("kernel", "k_opt2", 94, 99, correlation=5, stream=8),
        ev("runtime", "cudaLaunchKernel", 95, 96, tid=1, correlation=6),
        ev("kernel", "k_opt3", 96, 101, correlation=6, stream=9),  # overlaps k_opt2: union 94-101
    ]
    table = {r["name"]: r for r in run_analysis(make_run(data)).frames.annotations.per_rank.iter_rows(named=True)}
    assert table[UNANNOTATED]["gpu_ns"] == 4 + 7
    assert (table["forward"]["gpu_ns"], table["backward"]["gpu_ns"]) == (10, 20)
