"""The throughput gate compares samples/s when the two captures' steps hold different numbers of samples."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

from tests.conftest import SAMPLES
from tracekit.analyzers.compare import compare, evaluate_gate
from tracekit.pipeline.analyze import AnalyzeOptions, analyze_paths
from tracekit.reports.compare_text import gate_line

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis

SAMPLE = SAMPLES / "captures" / "cuda-h200-small"


def _analysis(folder: Path) -> Analysis:
    return analyze_paths([folder], AnalyzeOptions(use_cache=False)).analysis


def _half_batch(tmp_path: Path) -> Analysis:
    """The same traces (the same step times) recorded as steps of half as many samples."""
    b = tmp_path / "B"
    shutil.copytree(SAMPLE, b)
    data = json.loads((b / "summary.json").read_bytes())
    data["throughput"]["samples_per_step_per_rank"] //= 2
    data["config"]["batch_size"] //= 2
    (b / "summary.json").write_text(json.dumps(data))
    return _analysis(b)


def test_half_the_samples_per_step_at_the_same_step_time_fails_the_gate(tmp_path: Path) -> None:
    # three runs a side, as a gate on a time needs (the CLI refuses fewer: tests/cli/test_compare_cli.py)
    a, b = _analysis(SAMPLE), _half_batch(tmp_path)
    [g] = evaluate_gate(compare([a] * 3, [b] * 3), ["throughput:2%"]).gate
    assert g.failed
    line = gate_line(g)
    assert line.startswith("FAIL throughput:2%")
    assert "-50.00%" in line and "samples/s" in line


def test_the_same_samples_per_step_passes() -> None:
    a = _analysis(SAMPLE)
    [g] = evaluate_gate(compare([a] * 3, [a] * 3), ["throughput:2%"]).gate
    assert not g.failed
