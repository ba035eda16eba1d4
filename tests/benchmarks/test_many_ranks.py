"""The synthetic many-rank run of benchmarks/many_ranks.py is what it says."""

from __future__ import annotations

from benchmarks.many_ranks import measure, synthetic_run
from tracekit.analyzers import analyze


def test_synthetic_ranks_have_steps_kernels_and_a_last_rank() -> None:
    analysis = analyze(synthetic_run(16, steps=3, kernels=4))
    assert [s.count for s in analysis.steps.per_rank] == [3] * 16
    assert {i.ranks for i in analysis.collectives.instances} == {16}
    assert {i.last_rank for i in analysis.collectives.instances} == {15}  # the latest start arrives last


def test_measure_reports_the_targets() -> None:
    result = measure(32)
    assert result["ranks"] == 32
    assert set(result["targets"]) == {"terminal_over_analyze", "terminal_over_analyze_max", "json_mb_max"}  # type: ignore[arg-type]
