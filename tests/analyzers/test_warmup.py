"""Warm-up steps kept out of the steady state, and the user's step selection."""

from __future__ import annotations

import random
import statistics

import polars as pl
import pytest

from tests.factories import FETCH, ev, make_run, training_loop
from tracekit.analyzers import analyze_steps, gpu_activity, run_analysis, timeline
from tracekit.analyzers.dataloader import dataloader_gaps
from tracekit.analyzers.warmup import median_of_others
from tracekit.errors import InputError
from tracekit.results.vocab import StepSource, WarmupReason

#: A 40x first iteration (cudnn benchmark), then iterations whose fetch costs 27% each.
COLD_START = [40_000, 1000, 1000, 1000, 1000]


def reasons(lengths: list[int]) -> dict[int, str]:
    result = analyze_steps(make_run(training_loop(lengths, markers="ProfilerStep#{}")))
    return dict(result.warmup.select("step", "reason").iter_rows())


def test_a_long_first_iteration_is_warmup_and_kept_out_of_every_figure() -> None:
    run = make_run(training_loop(COLD_START, fetch=270))
    result = run_analysis(run).frames
    steps = result.steps
    assert steps.sources == {0: StepSource.DATALOADER}
    assert steps.warmup.select("step", "reason", "ratio").rows() == [(0, WarmupReason.LONG_FIRST.value, 40.0)]
    assert steps.steps["step"].to_list() == [1, 2, 3, 4]
    assert steps.all_steps.height == 5
    assert steps.how_found.select("found", "steady", "warmup").row(0) == (5, 4, 1)
    # the GPU idles through each 270 ns fetch of a 1000 ns iteration
    assert result.dataloader.per_rank["share_pct"].to_list() == [pytest.approx(27.0)]


def test_with_warmup_included_the_first_iteration_drowns_the_dataloader() -> None:
    run = make_run(training_loop(COLD_START, fetch=270))
    activity = gpu_activity(run)
    steps = analyze_steps(run, activity=activity, include_warmup=True)
    assert steps.steps.height == 5 and steps.warmup.height == 1  # still reported
    frames = timeline.windows(activity, steps)
    share = dataloader_gaps(run, timeline.segments(activity, frames), frames, has_gpu=True).per_rank["share_pct"]
    assert share.to_list() == [pytest.approx(100 * 5 * 270 / 44_000)]  # 3.1%


@pytest.mark.parametrize("first", [1000, 1500])
def test_first_iteration_with_one_time_work_the_others_lack(first: int) -> None:
    init = [ev("runtime", "cudaGetDeviceProperties", 20, 30)]
    rows = training_loop([first, 1000, 1000, 1000], markers="ProfilerStep#{}") + init
    result = analyze_steps(make_run(rows))
    assert result.warmup.select("step", "reason").rows() == [(0, WarmupReason.ONE_TIME.value)]
    # the same call in every step is no sign of one-time work
    every = rows + [ev("runtime", "cudaGetDeviceProperties", t + 20, t + 30) for t in (1500, 2500, 3500)]
    assert analyze_steps(make_run(every)).warmup.height == 0


def test_a_rare_outlier_is_excluded_a_recurring_one_is_not() -> None:
    assert reasons([1000, 1000, 5000, 1000, 1000, 1000]) == {2: WarmupReason.OUTLIER.value}
    assert reasons([1000, 4000] * 3) == {}  # every other step: the steady state
    assert reasons([1000, 1900, 1000, 1000]) == {}  # the first is not long: nothing


def test_no_warmup_without_at_least_three_steps() -> None:
    assert reasons([10_000, 1000]) == {}


def test_an_outlier_needs_enough_steps_to_call_it_rare() -> None:
    # one long step in three (or four) may as well recur every third step: steady state
    assert reasons([1000, 5000, 1000]) == {}
    assert reasons([1000, 1000, 5000, 1000]) == {}
    assert reasons([1000, 1000, 5000, 1000, 1000]) == {2: WarmupReason.OUTLIER.value}


def test_a_long_step_that_waits_for_data_is_the_steady_state() -> None:
    # a prefetching loader feeds most steps and falls behind now and then: the step that
    # waits 4000 ns in the fetch (4x the others' 1000) is the loader's cost, not warm-up
    rows = training_loop([1000, 1000, 1000, 1000, 1000], markers="ProfilerStep#{}")
    t = 5000
    rows += [
        ev("cpu_op", FETCH, t, t + 4000),
        ev("runtime", "cudaLaunchKernel", t + 4000, t + 4001, correlation=99),
        ev("kernel", "sm90_gemm", t + 4001, t + 4990, correlation=99),
        ev("step", "ProfilerStep#5", t, t + 5000),
    ]
    rows += training_loop([1000, 1000], markers="ProfilerStep#{}", first=6, start=10_000)
    result = analyze_steps(make_run(rows))
    assert result.warmup.height == 0 and result.steps.height == 8


@pytest.mark.parametrize("lengths", [[1000, 1000, 1000], [9000]])
def test_the_profilers_stop_step_is_left_out(lengths: list[int]) -> None:
    # the tail between the last profiler step and the profiler's stop: a last step far
    # shorter than the others that launches no GPU work (a ROCm trace: 9.3 ms, then 49 us)
    end = sum(lengths)
    rows = [
        *training_loop(lengths, markers="ProfilerStep#{}"),
        ev("step", f"ProfilerStep#{len(lengths)}", end, end + 50),
        ev("cpu_op", "aten::empty", end + 5, end + 10),
    ]
    result = analyze_steps(make_run(rows))
    assert result.warmup.select("step", "reason").rows() == [(len(lengths), WarmupReason.PROFILER_STOP.value)]
    assert result.steps["step"].to_list() == list(range(len(lengths)))


def test_the_last_fetch_of_a_finished_loop_is_a_partial_iteration() -> None:
    rows = [*training_loop([1000, 1000, 1000, 1000], fetch=100), ev("cpu_op", FETCH, 4000, 4005)]
    result = analyze_steps(make_run(rows))
    assert result.warmup.select("step", "reason").rows() == [(4, WarmupReason.PARTIAL.value)]
    assert result.steps["step"].to_list() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("3-", [3, 4, 5]), ("2-4", [2, 3, 4]), ("1,3,5", [1, 3, 5]), ("-2", [1, 2]), (" 1 , 4- ", [1, 4, 5])],
)
def test_selection_by_the_trace_step_numbers(spec: str, expected: list[int]) -> None:
    run = make_run(training_loop([1000] * 5, markers="ProfilerStep#{}", first=1))
    result = analyze_steps(run, select=spec)
    assert result.steps["step"].to_list() == expected
    assert result.selection == spec
    assert result.all_steps.height == 5


def test_selection_of_inferred_steps_by_position_replaces_the_warmup_rule() -> None:
    run = make_run(training_loop(COLD_START, fetch=270))
    assert analyze_steps(run, select="0-").steps["step"].to_list() == [0, 1, 2, 3, 4]
    assert analyze_steps(run, select="2-3").steps["step"].to_list() == [2, 3]


@pytest.mark.parametrize("spec", ["", "a", "1-2-3", "3:5", "-"])
def test_a_malformed_selection_is_an_input_error(spec: str) -> None:
    run = make_run(training_loop([1000] * 3, markers="ProfilerStep#{}"))
    with pytest.raises(InputError, match="step selection"):
        analyze_steps(run, select=spec)


def test_a_selection_that_leaves_a_rank_without_steps_is_an_input_error() -> None:
    run = make_run(training_loop([1000] * 3, markers="ProfilerStep#{}"))
    with pytest.raises(InputError, match=r"selects no step of rank 0 \(its steps: 0-2\)"):
        analyze_steps(run, select="7-")


def test_median_of_the_others_matches_brute_force() -> None:
    rng = random.Random(7)
    rows = [(g, rng.randint(1, 20)) for g in range(40) for _ in range(rng.randint(1, 9))]
    df = pl.DataFrame(rows, schema={"g": pl.Int64, "x": pl.Int64}, orient="row").with_row_index("i")
    got = df.with_columns(m=median_of_others("x", "g"))
    for g, x, m in got.select("g", "x", "m").iter_rows():
        others = df.filter(pl.col("g") == g)["x"].to_list()
        others.remove(x)
        assert m == (statistics.median(others) if len(others) >= 2 else None)
