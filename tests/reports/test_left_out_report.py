"""Every format says how much recorded time the measured window leaves out, and why."""

from __future__ import annotations

import json

from tests.analyzers.test_left_out import MS, host_first, stepped
from tests.factories import make_run, training_loop
from tracekit.analyzers import analyze
from tracekit.reports import renderer

BEFORE = "the host ran 2.00 s before the first GPU operation"


def test_every_format_says_the_host_ran_2_s_before_the_first_gpu_operation() -> None:
    analysis = analyze(make_run(host_first()))
    terminal = renderer("terminal").render(analysis)
    line = next(x for x in terminal.splitlines() if "left out of the window" in x)
    assert "the host ran 2.00 s (66.7% of the recorded span) before the first GPU operation" in line
    markdown = renderer("md").render(analysis)
    steps = markdown[markdown.index("## Step time per rank") :]
    assert "### Time left out of the measured window" in steps
    assert f"| 0 | {BEFORE} | 2,000.00 | 66.7% |" in steps
    assert BEFORE in renderer("html").render(analysis)
    (row,) = json.loads(renderer("json").render(analysis))["steps"]["left_out"]
    assert (row["reason"], row["ns"], row["start_ns"]) == ("before_first_device_op", 2_000_000_020, 0)


def test_the_run_line_names_each_reason_over_the_ranks() -> None:
    markdown = renderer("md").render(analyze(make_run([*stepped(0), *stepped(1)])))
    line = next(x for x in markdown.splitlines() if x.startswith("| left out of the window |"))
    assert line.split(" | ")[1].split("; ") == [
        "the host ran 1.00 s on average (45.5% of the recorded span, on 2 of 2 ranks) before the first step",
        "600.00 ms on average (27.3% of the recorded span, on 2 of 2 ranks) in 2 warm-up steps over the "
        "ranks, listed under Warm-up steps",
        "200.00 ms on average (9.1% of the recorded span, on 2 of 2 ranks) after the last step (the profiler's "
        "stop and flush, or work after the loop) |",
    ]


def test_a_healthy_trace_says_nothing_of_it() -> None:
    healthy = training_loop([100 * MS] * 5, markers="ProfilerStep#{}")
    for fmt in ("terminal", "md", "html"):
        assert "left out" not in renderer(fmt).render(analyze(make_run(healthy)))
