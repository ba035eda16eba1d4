"""End to end: ``tracekit capture`` on 4 gloo ranks on CPU with memory: phase deltas, saved
tensors, RSS, the memory timeline per rank, and what a CPU run cannot record."""

from __future__ import annotations

import gzip
import json
from statistics import mean
from typing import TYPE_CHECKING

import pytest

from tests.capture.test_capture_e2e import FEW_STEPS, tracekit
from tests.conftest import SAMPLES
from tracekit.results.capture import CAPTURE_SCHEMA_VERSION, CaptureNote, load_capture_summary
from tracekit.results.vocab import CaptureNoteKind

if TYPE_CHECKING:
    from pathlib import Path

pytest.importorskip("torch")
pytest.importorskip("accelerate")

#: Ranks of the capture: every figure checked is per rank, so 4 tell what 8 would, at half the
#: processes on a 2-core machine.
RANKS = 4


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_cpu_capture_records_memory_per_phase_and_the_timeline(tmp_path: Path) -> None:
    out = tmp_path / "memory"
    result = tracekit(
        "capture",
        "--config_path",
        SAMPLES / "configs" / "healthy.json",
        "--nproc",
        str(RANKS),
        "--out_dir",
        out,
        *FEW_STEPS,
        "--memory-timeline",
        "--profiler.profile_memory=true",
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "memory change" in result.stdout and "memory_timeline.rank*.raw.json.gz" in result.stdout
    summary = load_capture_summary((out / "summary.json").read_bytes(), source="summary.json")
    assert summary.schema_version == CAPTURE_SCHEMA_VERSION and summary.config is not None
    assert summary.config["memory_timeline"] is True and summary.config["profiler"]["profile_memory"] is True

    for rank in summary.per_rank:
        # the summary's deltas add up to the change over the step, and that change is the
        # capture's own: memory at the end minus at the start of each measured step of the rank
        record = json.loads((out / f"phases.rank{rank.rank}.json").read_text())
        steps = record["steps"]
        assert len(steps) == 3 == rank.steps
        change = mean(s["memory_end"]["rss_bytes"] - s["memory_start"]["rss_bytes"] for s in steps)
        assert rank.phase_memory_measure == "rss_bytes"
        assert rank.step_memory_change_bytes == pytest.approx(change)
        assert sum(rank.phase_memory_deltas.values()) == pytest.approx(change, abs=1e-6)
        assert set(rank.phase_memory_deltas) == set(rank.phase_means_ns)  # every timed phase, other included
        forward = mean(s["phase_memory"]["forward"]["delta"]["rss_bytes"] for s in steps)
        assert rank.phase_memory_deltas["forward"] == pytest.approx(forward)
        # forward saves activations; the process is resident; no device memory on CPU
        assert rank.saved_tensor_bytes_mean is not None and rank.saved_tensor_bytes_mean > 0
        assert rank.saved_tensor_bytes_max is not None and rank.saved_tensor_bytes_max >= rank.saved_tensor_bytes_mean
        assert rank.memory.rss_bytes is not None and rank.memory.rss_bytes > 0
        assert rank.memory.peak_rss_bytes is not None and rank.memory.peak_rss_bytes >= rank.memory.rss_bytes
        assert rank.memory.peak_allocated_bytes is None and rank.memory.allocated_bytes is None

    memory = summary.memory
    assert memory is not None and memory.device == "cpu" and memory.worst_rank in range(RANKS)
    assert memory.peak_rss_bytes == max(r.memory.peak_rss_bytes or 0 for r in summary.per_rank)
    assert memory.step_memory_change_bytes_mean is not None
    assert sum(p.delta_bytes_mean for p in summary.memory_phases) == pytest.approx(memory.step_memory_change_bytes_mean)
    assert [p.phase for p in summary.memory_phases][-1] == "other"

    timelines = _timelines_written(out, summary.notes)
    assert not list(out.glob("*.pickle"))
    assert any(n.kind is CaptureNoteKind.CPU_MEMORY for n in summary.notes), summary.notes

    # the analysis reads every rank's timeline beside its trace (not as a trace) and finds its peak
    from tracekit.analyzers import analyze
    from tracekit.readers import load_run

    run = load_run([out])
    assert run.skipped == ()
    assert sorted(set(run.memory_categories["rank"].to_list())) == timelines
    analysis = analyze(run)
    assert analysis.memory is not None
    assert [p.rank for p in analysis.memory.peaks] == timelines
    assert all(p.peak_bytes > 0 for p in analysis.memory.peaks)
    assert sorted({r.rank for r in analysis.memory.per_device}) == list(range(RANKS))  # the [memory] counters


def _timelines_written(out: Path, notes: list[CaptureNote]) -> list[int]:
    """The ranks whose timeline was written, each checked whole.

    torch's export_memory_timeline sometimes raises an AssertionError of its own
    (pytorch/pytorch#167838; seen once on one rank of 8 in CI): capture keeps the rank's trace and
    says which timeline is missing and why."""
    missing = {r for r in range(RANKS) if not (out / f"memory_timeline.rank{r}.raw.json.gz").exists()}
    for r in missing:
        assert any(n.kind is CaptureNoteKind.NO_TIMELINE and n.rank == r for n in notes), notes
    assert len(missing) <= 1, notes
    for r in range(RANKS):
        with gzip.open(out / f"rank{r}.pt.trace.json.gz", "rt") as f:  # profile_memory keeps the events
            assert any(e.get("name") == "[memory]" for e in json.load(f)["traceEvents"])
    written = sorted(set(range(RANKS)) - missing)
    for r in written:
        with gzip.open(out / f"memory_timeline.rank{r}.raw.json.gz", "rt") as f:
            rows = json.load(f)
        assert isinstance(rows, list) and rows
        for t, action, size, category in rows:
            assert isinstance(t, int) and isinstance(action, int) and isinstance(size, int)
            assert category is None or isinstance(category, int)
    return written
