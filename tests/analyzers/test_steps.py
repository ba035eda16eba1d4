"""Steps found from markers or inferred from repeated structure, and how each rank's were found."""

from __future__ import annotations

import polars as pl
import pytest

from tests.factories import FETCH, OPTIMIZER_STEP, ev, make_run, training_loop
from tracekit.analyzers import analyze_steps, run_analysis
from tracekit.analyzers.step_inference import host_steps
from tracekit.results.vocab import StepSource

STEADY = [1000, 1000, 1000, 1000]


def starts(result_steps: pl.DataFrame) -> list[int]:
    return result_steps["start_ns"].to_list()


def test_markers_keep_the_trace_numbers() -> None:
    result = analyze_steps(make_run(training_loop(STEADY, markers="ProfilerStep#{}", first=5)))
    assert result.steps["step"].to_list() == [5, 6, 7, 8]
    assert result.sources == {0: StepSource.PROFILER_STEP}
    assert result.steps["name"].to_list() == [f"ProfilerStep#{n}" for n in (5, 6, 7, 8)]


def test_tracekit_step_markers_come_first() -> None:
    rows = [*training_loop(STEADY, markers="step#{}"), ev("step", "ProfilerStep#9", 0, 4000)]
    result = analyze_steps(make_run(rows))
    assert result.sources == {0: StepSource.TRACEKIT}
    assert result.steps["name"].to_list() == ["step#0", "step#1", "step#2", "step#3"]


def test_dataloader_fetch_starts_make_steps() -> None:
    # both fetches and optimizer steps repeat: the fetches win
    result = analyze_steps(make_run(training_loop(STEADY, fetch=270, optimizer=True, start=500)))
    assert result.sources == {0: StepSource.DATALOADER}
    assert starts(result.steps) == [500, 1500, 2500, 3500]
    assert result.steps["end_ns"].to_list() == [1500, 2500, 3500, 4500]  # the last: its last host work
    assert result.steps["step"].to_list() == [0, 1, 2, 3]  # ordinal positions
    assert result.steps["gpu_ops"].to_list() == [1, 1, 1, 1]
    row = result.how_found.row(0, named=True)
    assert (row["anchor"], row["pid"], row["tid"], row["found"], row["steady"]) == (FETCH, 100, 1, 4, 4)


def test_same_columns_found_or_inferred() -> None:
    found = analyze_steps(make_run(training_loop(STEADY, fetch=270, markers="ProfilerStep#{}")))
    inferred = analyze_steps(make_run(training_loop(STEADY, fetch=270)))
    assert found.steps.schema == inferred.steps.schema
    assert found.steps.drop("step", "name").equals(inferred.steps.drop("step", "name"))


def test_optimizer_step_ends_make_steps() -> None:
    result = analyze_steps(make_run(training_loop(STEADY, optimizer=True, start=500)))
    assert result.sources == {0: StepSource.OPTIMIZER}
    # the first runs from the thread's first activity to the first optimizer step's end
    assert list(zip(starts(result.steps), result.steps["end_ns"], strict=True)) == [
        (500, 1500),
        (1500, 2500),
        (2500, 3500),
        (3500, 4500),
    ]


def test_repeated_outermost_annotation_digits_aside() -> None:
    result = analyze_steps(make_run(training_loop(STEADY, annotation="iteration {}", start=500)))
    assert result.sources == {0: StepSource.ANNOTATION}
    assert result.how_found["anchor"].to_list() == ["iteration N"]
    assert starts(result.steps) == [500, 1500, 2500, 3500]


def test_the_earliest_repeated_annotation_anchors() -> None:
    rows = training_loop(STEADY)
    for t in range(0, 4000, 1000):  # backward covers more, but forward starts each iteration
        rows += [ev("annotation", "forward", t, t + 300), ev("annotation", "backward", t + 300, t + 990)]
    result = analyze_steps(make_run(rows))
    assert result.how_found["anchor"].to_list() == ["forward"]
    assert starts(result.steps) == [0, 1000, 2000, 3000]


def test_one_iteration_falls_back_to_the_whole_trace() -> None:
    run = make_run(training_loop(STEADY[:1], fetch=270))
    result = run_analysis(run).frames
    assert result.steps.sources == {0: StepSource.NONE}
    assert not result.steps.has_steps
    assert result.dataloader.per_rank["window_ns"].to_list() == [1000 - 271 - 10]  # the GPU span


@pytest.mark.parametrize(
    ("kw", "source"), [({"fetch": 270}, StepSource.DATALOADER), ({"optimizer": True}, StepSource.OPTIMIZER)]
)
def test_two_iterations_marked_by_fetches_or_optimizer_steps_are_steps(
    kw: dict[str, object], source: StepSource
) -> None:
    # an explicit iteration marker needs only to recur: two bound two iterations
    result = analyze_steps(make_run(training_loop(STEADY[:2], **kw)))  # type: ignore[arg-type]
    assert result.sources == {0: source}
    assert result.steps.height == 2


def test_two_repeated_annotations_are_no_steps() -> None:
    # a recurring annotation may be a per-layer range: it needs three iterations alike
    result = analyze_steps(make_run(training_loop(STEADY[:2], annotation="iter {}")))
    assert result.sources == {0: StepSource.NONE}


def irregular(name: str, gaps: list[int], width: int) -> list[dict[str, object]]:
    rows, t = [], 0
    for gap in gaps:
        rows.append(ev("annotation", name, t, t + width))
        rows.append(ev("cpu_op", "aten::add_", t + width, t + gap))
        t += gap
    return rows


@pytest.mark.parametrize(
    ("name", "gaps", "width"),
    [
        ("FlashAttnFunc", [1000, 400, 1000, 400, 1000, 400, 1000], 350),  # period jumps: not alike
        ("layer 3", [100, 100, 100, 700] * 3 + [100], 90),  # per-layer ranges: jumps at backward
        ("tiny", [1000] * 6, 10),  # alike, but covers 1% of its span: many per iteration
        ("aten::to", [1000] * 6, 900),  # an operator (emit_nvtx)
        ("nccl:all_reduce", [1000] * 6, 900),  # communication
        ("MPI_Recv", [1000] * 6, 900),
    ],
)
def test_annotations_that_do_not_make_steps(name: str, gaps: list[int], width: int) -> None:
    steps, found = host_steps(make_run(irregular(name, gaps, width)))
    assert steps.height == 0
    assert found["source"].to_list() == [StepSource.NONE.value]


def test_each_rank_records_how_its_steps_were_found() -> None:
    rows = training_loop(STEADY, markers="ProfilerStep#{}", rank=0)
    rows += training_loop(STEADY, fetch=100, rank=1)
    rows += training_loop(STEADY[:2], rank=2)
    result = analyze_steps(make_run(rows))
    assert result.sources == {0: StepSource.PROFILER_STEP, 1: StepSource.DATALOADER, 2: StepSource.NONE}
    assert result.how_found["found"].to_list() == [4, 4, 0]
    assert result.threads.height == 2


def test_phases_are_broken_down_over_inferred_steps() -> None:
    run = make_run(training_loop(STEADY, fetch=200, annotation="forward"))
    table = {r["name"]: r for r in run_analysis(run).frames.annotations.per_rank.iter_rows(named=True)}
    assert table["forward"]["cpu_ns"] == 4 * (1000 - 200 - 10)
    assert sum(r["cpu_pct"] for r in table.values()) == pytest.approx(100)


MS = 1_000_000


def burst(kind: str, name: str) -> list[dict[str, object]]:
    """A micro-benchmark's trace: 1 s of host setup, the range ``name`` run three times (1 ms
    each, 1 ms apart, one kernel each), then 2 s of kernels the host waits for: host and device
    activity span 3 s."""
    rows = [ev("cpu_op", "aten::copy_", 0, 1000 * MS)]
    for i in range(3):
        t = 1000 * MS + 2 * i * MS
        rows += [
            ev(kind, name, t, t + MS),
            ev("runtime", "cudaLaunchKernel", t + 10, t + 20, correlation=i + 1),
            ev("kernel", "triton_add", t + 100, t + MS - 100, correlation=i + 1),
        ]
    rows += [
        ev("runtime", "cudaLaunchKernel", 1010 * MS, 1010 * MS + 10, correlation=9),
        ev("kernel", "sm90_gemm", 1010 * MS + 100, 3000 * MS, correlation=9),
        ev("runtime", "cudaDeviceSynchronize", 1010 * MS + 20, 3000 * MS),
    ]
    return rows


@pytest.mark.parametrize(("kind", "name"), [("annotation", "my_op"), ("cpu_op", FETCH), ("cpu_op", OPTIMIZER_STEP)])
def test_a_short_burst_of_a_repeated_range_is_no_steps(kind: str, name: str) -> None:
    # 6 ms of a 3 s trace repeat alike: no loop, the whole trace is one window
    result = analyze_steps(make_run(burst(kind, name)))
    assert result.sources == {0: StepSource.NONE}
    assert not result.has_steps


def loop_after_setup(setup: int, lengths: list[int]) -> list[dict[str, object]]:
    """``setup`` ns of host work, then annotated iterations of ``lengths``."""
    return [ev("cpu_op", "aten::copy_", 0, setup), *training_loop(lengths, annotation="iteration {}", start=setup)]


def test_a_loop_covering_most_of_the_trace_gives_steps() -> None:
    # 0.4 s of setup, then 5 iterations of 0.52 s: the loop covers 87% of the host's span
    result = analyze_steps(make_run(loop_after_setup(400 * MS, [520 * MS] * 5)))
    assert result.sources == {0: StepSource.ANNOTATION}
    assert starts(result.all_steps) == [400 * MS + i * 520 * MS for i in range(5)]


def test_a_loop_covering_under_half_of_the_trace_is_no_steps() -> None:
    # 2 s of setup, then 5 iterations of 0.2 s: 1 s of a 3 s span (MIN_LOOP_SHARE is a half)
    result = analyze_steps(make_run(loop_after_setup(2000 * MS, [200 * MS] * 5)))
    assert result.sources == {0: StepSource.NONE}
