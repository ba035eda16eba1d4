"""Kernel launches (a registered section without a field): checked against the raw trace."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _calls_frames(ids: list[tuple[int, int | None]], calls: list[tuple[int, int, int]]) -> tuple:
    import polars as pl

    kernels = pl.DataFrame(
        {"rank": [r for r, _ in ids], "correlation": [c for _, c in ids], "start_ns": list(range(len(ids)))},
        schema={"rank": pl.Int32, "correlation": pl.Int64, "start_ns": pl.Int64},
    )
    frame = pl.DataFrame(
        {
            "rank": [r for r, _, _ in calls],
            "correlation": [c for _, c, _ in calls],
            "launch_ns": [1000 - n for *_, n in calls],  # a later call may start earlier
            "launch_pid": list(range(len(calls))),
            "launch_call_ns": [n for *_, n in calls],
        },
        schema={
            "rank": pl.Int32,
            "correlation": pl.Int64,
            "launch_ns": pl.Int64,
            "launch_pid": pl.Int64,
            "launch_call_ns": pl.Int64,
        },
    )
    return kernels, frame


#: ids that pack with the rank (the one-key path) and ids that do not (the pair's)
_PACKING = [0, 1, 2, 7, 2**40 - 1]
_OTHERS = [2**40, 2**45, -1, -(2**40)]


@st.composite
def _launches(draw: st.DrawFn) -> tuple[list, list]:
    ids = st.sampled_from(_PACKING if draw(st.booleans()) else _PACKING + _OTHERS)
    kernels = draw(st.lists(st.tuples(st.integers(0, 3), st.one_of(st.none(), ids)), max_size=12))
    calls = draw(st.lists(st.tuples(st.integers(0, 3), ids, st.integers(0, 100)), max_size=12))
    return kernels, calls


@settings(max_examples=400, deadline=None)
@given(drawn=_launches())
def test_each_kernel_gets_the_first_call_of_its_rank_and_id(drawn: tuple[list, list]) -> None:
    """The launch of each kernel (:func:`steps._link`, which the launches' figures read), on one
    packed key where every id packs and on the pair where one does not: of the calls of the
    kernel's rank and id, the earliest start, and the first call's (in event order) process and
    duration; none where no call has them."""
    import polars as pl

    from tracekit.analyzers.steps import _link

    ids, calls = drawn
    kernels, frame = _calls_frames(ids, calls)
    got = _link(kernels, frame).sort("start_ns")
    first: dict[tuple[int, int], tuple[int, int]] = {}
    earliest: dict[tuple[int, int], int] = {}
    for pid, (r, c, n) in enumerate(calls):
        first.setdefault((r, c), (pid, n))
        earliest[(r, c)] = min(earliest.get((r, c), 1000 - n), 1000 - n)
    keys = [(r, c) if c is not None else None for r, c in ids]
    assert got.get_column("launch_call_ns").to_list() == [first[k][1] if k in first else None for k in keys]
    assert got.get_column("launch_pid").to_list() == [first[k][0] if k in first else None for k in keys]
    assert got.get_column("launch_ns").to_list() == [earliest.get(k) if k is not None else None for k in keys]
    assert got.columns == [*kernels.columns, "launch_ns", "launch_pid", "launch_call_ns"]
    assert got.schema["launch_call_ns"] == pl.Int64
