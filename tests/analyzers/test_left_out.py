"""Time left out of the measured window: how long, where, and why, per rank and over the run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import ev, make_run, training_loop
from tracekit.analyzers import run_analysis
from tracekit.results.rows import LeftOut
from tracekit.results.vocab import LeftOutReason, WindowKind

MS = 1_000_000


def host_first(rank: int = 0, *, setup: int = 2000 * MS, kernels: int = 10) -> list[dict[str, Any]]:
    """No step markers: the host works ``setup`` ns (loading, building) before it launches its
    first kernel, then ``kernels`` kernels of 100 ms back to back (1 s), waited for."""
    rows = [ev("cpu_op", "aten::randn", 0, setup, rank=rank)]
    for i in range(kernels):
        t = setup + i * 100 * MS
        rows += [
            ev("runtime", "cudaLaunchKernel", t, t + 10, rank=rank, correlation=i + 1),
            ev("kernel", "sm90_gemm", t + 20, t + 100 * MS, rank=rank, correlation=i + 1),
        ]
    end = setup + kernels * 100 * MS
    return [*rows, ev("runtime", "cudaDeviceSynchronize", setup + 20, end + 50, rank=rank)]


def left_out(rows: list[dict[str, Any]], **options: Any) -> tuple[list[LeftOut], list[LeftOut]]:
    steps = run_analysis(make_run(rows), **options).analysis.steps
    return steps.left_out, steps.left_out_run


def test_host_time_before_the_first_gpu_operation() -> None:
    # no steps: the window is the GPU span, 1 s; the 2 s of host setup before it are left out
    per_rank, run = left_out(host_first())
    assert per_rank == [
        LeftOut(
            rank=0,
            reason=LeftOutReason.BEFORE_FIRST_DEVICE_OP,
            ns=2000 * MS + 20,
            start_ns=0,
            end_ns=2000 * MS + 20,
            share_pct=pytest.approx(100 * (2000 * MS + 20) / (3000 * MS + 50)),
        )
    ]  # the 50 ns after the last kernel are not material
    assert [(r.rank, r.reason, r.ns, r.ranks) for r in run] == [
        (None, LeftOutReason.BEFORE_FIRST_DEVICE_OP, 2000 * MS + 20, 1)
    ]


def test_nothing_material_is_left_out_of_a_healthy_loop() -> None:
    rows = training_loop([100 * MS] * 5, markers="ProfilerStep#{}", start=MS // 2)
    rows.append(ev("cpu_op", "aten::zeros", 0, MS // 2))  # 0.5 ms before the first step
    assert left_out(rows) == ([], [])


def stepped(rank: int = 0) -> list[dict[str, Any]]:
    """1 s of host work before the first ProfilerStep, a first step of 600 ms (warm-up: 6x the
    others), four of 100 ms, then 200 ms of host work after the last (the profiler's stop)."""
    rows = [ev("cpu_op", "aten::randn", 0, 1000 * MS, rank=rank)]
    rows += training_loop([600 * MS] + [100 * MS] * 4, markers="ProfilerStep#{}", start=1000 * MS, rank=rank)
    return [*rows, ev("cpu_op", "aten::empty", 2000 * MS, 2200 * MS, rank=rank)]


def test_before_the_first_step_warmup_and_after_the_last() -> None:
    per_rank, _ = left_out(stepped())
    span = 2200 * MS
    assert [(r.reason, r.ns, r.start_ns, r.end_ns, r.steps) for r in per_rank] == [
        (LeftOutReason.BEFORE_FIRST_STEP, 1000 * MS, 0, 1000 * MS, 0),
        (LeftOutReason.WARMUP, 600 * MS, 1000 * MS, 1600 * MS, 1),
        (LeftOutReason.AFTER_LAST_STEP, 200 * MS, 2000 * MS, span, 0),
    ]
    assert [round(r.share_pct, 2) for r in per_rank] == [45.45, 27.27, 9.09]


def test_steps_left_out_by_a_selection() -> None:
    per_rank, _ = left_out(stepped(), steps="0-2")
    assert [(r.reason, r.ns, r.steps) for r in per_rank if r.reason is LeftOutReason.UNSELECTED] == [
        (LeftOutReason.UNSELECTED, 200 * MS, 2)
    ]


def test_the_gpu_span_window_leaves_out_the_host_around_it() -> None:
    # --window gpu_span measures from the first kernel to the last: warm-up is measured there
    per_rank, _ = left_out(stepped(), window=WindowKind.GPU_SPAN)
    assert [r.reason for r in per_rank] == [LeftOutReason.BEFORE_FIRST_DEVICE_OP, LeftOutReason.AFTER_LAST_DEVICE_OP]


def test_the_run_sums_up_the_ranks_where_a_reason_is_material() -> None:
    per_rank, run = left_out([*host_first(0), *host_first(1, setup=1000 * MS), *host_first(2, setup=MS // 2)])
    assert [r.rank for r in per_rank] == [0, 1]  # rank 2's half millisecond is not material
    assert [(r.rank, r.reason, r.ns, r.ranks, r.start_ns) for r in run] == [
        (None, LeftOutReason.BEFORE_FIRST_DEVICE_OP, 1500 * MS + 20, 2, 0)
    ]
