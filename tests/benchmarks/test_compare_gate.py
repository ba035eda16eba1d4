"""The gate benchmark measures the example workflow's own gate, read from the workflow file."""

from __future__ import annotations

from benchmarks.compare_gate import gate_conditions, workflow_repeats
from tracekit.analyzers.compare.gate import parse_gate


def test_the_benchmark_reads_the_example_gate() -> None:
    conditions = gate_conditions()
    assert conditions == ["slower:5%", "cpu:5%", "syncs:+0", "memory:5%"]
    assert [parse_gate(c).key for c in conditions] == ["step", "cpu", "syncs", "peak_memory"]


def test_the_benchmark_captures_as_many_runs_a_side_as_the_workflow() -> None:
    assert workflow_repeats() == 8  # for i in 1 2 3 4 5 6 7 8
