"""The gate benchmark measures the example workflow's own gate, read from the workflow file."""

from __future__ import annotations

from benchmarks.compare_gate import gate_conditions
from tracekit.analyzers.compare.gate import parse_gate


def test_the_benchmark_reads_the_example_gate() -> None:
    conditions = gate_conditions()
    assert conditions == ["slower:5%", "cpu:5%", "syncs:+0", "memory:5%"]
    assert [parse_gate(c).key for c in conditions] == ["step", "cpu", "syncs", "peak_memory"]
