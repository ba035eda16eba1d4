"""Agreement with Holistic Trace Analysis where HTA is right, and the case where it is not.

HTA's temporal breakdown and overlap are whole-trace figures per rank: the window runs from
the first to the last GPU row (tracekit's ``window="gpu_span"``), and with several profiler
steps HTA keeps only GPU work launched before the last step starts (or, with
``include_last_profiler_step=True``, before it ends). Each comparison below uses the
matching tracekit window.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.conftest import analysis_of
from tracekit.analyzers import run_analysis
from tracekit.analyzers.mapreduce import Reduced
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.real, pytest.mark.hta]
TOLERANCE_PP = 1.0


@pytest.fixture(scope="module")
def trace_analysis() -> Any:
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("holistictraceanalysis (a dev dependency) is not installed")
        pytest.skip("holistictraceanalysis not installed")
    logging.getLogger("hta").setLevel(logging.ERROR)
    return TraceAnalysis


def hta_numbers(trace_analysis: Any, folder: Path, **options: Any) -> dict[int, dict[str, float]]:
    ta = trace_analysis(trace_dir=str(folder), **options)
    temporal = ta.get_temporal_breakdown(visualize=False)
    overlap = ta.get_comm_comp_overlap(visualize=False)
    out: dict[int, dict[str, float]] = {}
    for row in temporal.to_dict("records"):
        out[int(row["rank"])] = {
            "idle": row["idle_time_pctg"],
            "compute": row["compute_time_pctg"],
            "non_compute": row["non_compute_time_pctg"],
        }
    for row in overlap.to_dict("records"):
        out[int(row["rank"])]["overlap"] = row["comp_comm_overlap_pctg"]
    return out


def tracekit_numbers(result: Reduced, step: int | None = None) -> dict[int, dict[str, float]]:
    b = result.breakdown.per_rank if step is None else result.breakdown.per_step.filter(step=step)
    o = result.overlap.per_rank if step is None else result.overlap.per_step.filter(step=step)
    df = b.join(o.select("rank", "overlap_pct"), on="rank").with_columns(
        non_compute=pl.col("comm_pct") + pl.col("memory_pct")
    )
    return {
        r["rank"]: {
            "idle": r["idle_pct"],
            "compute": r["compute_pct"],
            "non_compute": r["non_compute"],
            "overlap": r["overlap_pct"],
        }
        for r in df.iter_rows(named=True)
    }


def assert_close(ours: dict[int, dict[str, float]], theirs: dict[int, dict[str, float]]) -> None:
    assert sorted(ours) == sorted(theirs)
    for rank, numbers in theirs.items():
        for key, value in numbers.items():
            assert ours[rank][key] == pytest.approx(value, abs=TOLERANCE_PP), (rank, key)


def test_dlrm_8_ranks_agree(trace_analysis: Any, kineto_dir: Path) -> None:
    folder = kineto_dir / "param-dlrm-8rank-v100"  # one step: HTA filters nothing
    ours = tracekit_numbers(run_analysis(load_run([folder]), window="gpu_span").frames)
    assert_close(ours, hta_numbers(trace_analysis, folder))


def test_sampled_2_ranks_agree_over_the_whole_trace(trace_analysis: Any, kineto_dir: Path) -> None:
    folder = kineto_dir / "hta-sampled-2rank"
    ours = tracekit_numbers(run_analysis(load_run([folder]), window="gpu_span").frames)
    assert_close(ours, hta_numbers(trace_analysis, folder, include_last_profiler_step=True))


def test_sampled_2_ranks_agree_on_the_step_hta_keeps(trace_analysis: Any, kineto_dir: Path) -> None:
    # HTA's default drops the last step (#552): its figures are step #551's
    folder = kineto_dir / "hta-sampled-2rank"
    ours = tracekit_numbers(analysis_of([folder]).frames, step=551)
    assert_close(ours, hta_numbers(trace_analysis, folder))


def test_gpu_syncs_are_not_compute_where_hta_counts_them(trace_analysis: Any, kineto_dir: Path, tmp_path: Path) -> None:
    """HTA counts ``cuda_sync`` rows (they carry a stream) as GPU work: "Stream Wait Event"
    as compute, "Context Sync"/"Stream Sync" as non-compute, and stretches its window to
    them. A wait is not work: tracekit counts it as idle."""
    source = kineto_dir / "hta-misc" / "alexnet-a100-cuda-sync.json.gz"
    shutil.copy(source, tmp_path / "rank0.json.gz")
    ta = trace_analysis(trace_dir=str(tmp_path))
    hta = ta.get_temporal_breakdown(visualize=False).iloc[0]
    run = load_run([source])
    ours = run_analysis(run, window="gpu_span").frames.breakdown.per_rank.row(0, named=True)
    syncs = run.events.filter(kind="sync")
    assert syncs.height == 41
    # the compute kernels alone, measured by hand on the events: tracekit's figure
    kernels = run.events.filter(pl.col("category") == "compute")
    assert ours["compute_ns"] == pytest.approx(_union_ns(kernels), abs=0)
    # HTA's compute exceeds it by the Stream Wait Event time it calls compute
    assert hta["compute_time(us)"] * 1000 > ours["compute_ns"]
    # and its window runs to the last sync, past the last kernel/copy
    last_activity = run.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))["end_ns"].max()
    assert syncs["end_ns"].max() > last_activity  # type: ignore[operator]
    assert hta["kernel_time(us)"] * 1000 > ours["window_ns"]


def _union_ns(df: pl.DataFrame) -> int:
    from tracekit.analyzers.intervals import total

    result = total(df)
    assert isinstance(result, int)
    return result
