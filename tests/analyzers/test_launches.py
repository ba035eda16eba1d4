"""Kernel launches (a registered section without a field): checked against the raw trace."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import msgspec

from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.results.io import dump_analysis, load_analysis
from tracekit.results.launches import LaunchStats

SAMPLE = Path(__file__).parents[2] / "samples" / "captures" / "cuda-h200-small"


def _nearest(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))]


def test_launch_figures_match_the_raw_events_of_a_real_cuda_trace() -> None:
    analysis = analyze(load_run([SAMPLE]))
    stats = msgspec.convert(analysis.sections["launches"].data, LaunchStats)
    (row,) = stats.per_rank
    events = json.loads(gzip.decompress((SAMPLE / "rank0.pt.trace.json.gz").read_bytes()))["traceEvents"]
    windows = [(s.start_ns, s.end_ns) for s in analysis.steps.per_step]
    calls = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = [
        e for e in events if e.get("cat") == "kernel" and any(a <= round(e["ts"] * 1000) < b for a, b in windows)
    ]
    durations = [round(e["dur"] * 1000) for e in kernels]
    queued = [round((e["ts"] - calls[e["args"]["correlation"]]["ts"]) * 1000) for e in kernels]
    shorter = sum(e["dur"] < calls[e["args"]["correlation"]]["dur"] for e in kernels)
    assert row.kernels == len(kernels) == 120
    assert row.kernels_per_step == len(kernels) / len(windows)
    assert abs(row.median_kernel_ns - statistics.median(durations)) <= 1  # type: ignore[operator]
    assert abs(row.p95_kernel_ns - _nearest(durations, 0.95)) <= 1  # type: ignore[operator]
    assert abs(row.median_queue_ns - statistics.median(queued)) <= 1  # type: ignore[operator]
    assert row.shorter_than_launch == shorter
    assert row.shorter_than_launch_pct == round(100 * shorter / len(kernels), 4)


def test_the_section_renders_in_every_format_and_round_trips(tmp_path: Path) -> None:
    analysis = analyze(load_run([SAMPLE]))
    for fmt in ("terminal", "md", "html"):
        text = renderer(fmt).render(analysis)
        assert "Kernel launches: per rank" in text, fmt
    path = tmp_path / "a.json"
    path.write_text(dump_analysis(analysis))
    loaded = load_analysis(path)
    assert loaded == analysis
    assert msgspec.convert(loaded.sections["launches"].data, LaunchStats).per_rank[0].kernels == 120


def test_a_cpu_only_run_has_no_launch_section() -> None:
    analysis = analyze(
        load_run([Path(__file__).parents[2] / "samples" / "captures" / "healthy" / "rank0.pt.trace.json.gz"])
    )
    assert "launches" not in analysis.sections
