"""What the reports show of an analysis (issue 32): a CPU-only run without its empty GPU sections,
phases without tracekit's prefix (the JSON keeps it), one memory unit in tables and charts, and
trace files named relative to the folder analyzed."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.reports.document import Format
from tracekit.reports.layout import analysis_document, view_for
from tracekit.results.analysis import Analysis, SkippedFile

CAPTURES = Path(__file__).parents[2] / "samples" / "captures"
#: What only a run with GPU activity can fill.
GPU_WORDS = ("GPU time breakdown per rank", "GPU kernels", "GPU idle by cause", "Host syncs per rank")


@pytest.fixture(scope="module")
def cpu_run() -> Analysis:
    """8 gloo ranks on CPU (no GPU activity)."""
    return analyze(load_run([CAPTURES / "straggler"]))


@pytest.fixture(scope="module")
def gpu_run() -> Analysis:
    return analyze(load_run([CAPTURES / "cuda-h200-memory"]))


@pytest.mark.parametrize("fmt", ["terminal", "md", "html"])
def test_a_cpu_run_leaves_its_empty_gpu_sections_out(cpu_run: Analysis, fmt: str) -> None:
    assert not cpu_run.run.has_gpu
    text = renderer(fmt).render(cpu_run)
    assert not [w for w in GPU_WORDS if w in text]
    assert "Top 0" not in text
    assert "Host time breakdown per rank" in text  # the host's breakdown stands in for the GPU's
    keys = [s.key for s in analysis_document(cpu_run, view_for(Format(fmt), cpu_run)).sections]
    assert "kernels" not in keys
    assert "idle" not in keys


def test_a_gpu_run_keeps_its_gpu_sections(gpu_run: Analysis) -> None:
    text = renderer("md").render(gpu_run)
    assert "GPU time breakdown per rank" in text
    assert "GPU kernels over all ranks" in text


@pytest.mark.parametrize("fmt", ["terminal", "md", "html"])
def test_phases_are_shown_without_the_prefix_and_the_json_keeps_it(cpu_run: Analysis, fmt: str) -> None:
    doc = analysis_document(cpu_run, view_for(Format(fmt), cpu_run))
    phases = next(s for s in doc.sections if s.key == "phases")
    shown = [r[0] for r in phases.tables[0].rows] + list(phases.tables[1].columns)
    assert "backward" in shown
    assert not [p for p in shown if p.startswith("tracekit.phase/")]
    if fmt == "html":
        chart = next(c for c in phases.charts if c.key == "phases")
        legend = [t["name"] for t in chart.figure["data"]]  # type: ignore[index, union-attr]
        assert "backward" in legend
        assert not [n for n in legend if str(n).startswith("tracekit.phase/")]
    names = {r["name"] for r in json.loads(renderer("json").render(cpu_run))["annotations"]["summary"]}
    assert "tracekit.phase/backward" in names  # the data is unchanged


def _memory_tables_and_charts(a: Analysis) -> tuple[list[str], list[str]]:
    doc = analysis_document(a, view_for(Format.HTML, a))
    memory = next(s for s in doc.sections if s.key == "memory")
    titles = [t.title for t in memory.tables if t.key in ("memory", "memory_categories")]
    axes = [c.figure["layout"]["yaxis"]["title"]["text"] for c in memory.charts]  # type: ignore[index, call-overload]
    return titles, axes


def test_memory_reads_in_one_unit_in_tables_and_charts(gpu_run: Analysis) -> None:
    titles, axes = _memory_tables_and_charts(gpu_run)
    assert len(titles) == 2
    assert len(axes) == 2
    assert all("(MiB," in t for t in titles)  # a 4 GiB peak: MiB
    assert axes == ["MiB", "MiB"]
    doc = analysis_document(gpu_run, view_for(Format.HTML, gpu_run))
    memory = next(s for s in doc.sections if s.key == "memory")
    peak = next(t for t in memory.tables if t.key == "memory").rows[-1][2]  # cuda:0's peak allocated
    timeline = next(c for c in memory.charts if c.key == "memory_timeline").figure["data"]
    highest = max(max(y for y in t["y"] if y is not None) for t in timeline if "cuda:0 allocated" in t["name"])  # type: ignore[index, operator, union-attr, call-overload]
    assert f"{highest:,.1f}" == peak  # the chart's peak is the table's, in the same unit


def test_large_peaks_read_in_gib_everywhere(gpu_run: Analysis) -> None:
    assert gpu_run.memory is not None
    big = [msgspec.structs.replace(d, peak_reserved_bytes=40 * 2**30) for d in gpu_run.memory.per_device]
    a = msgspec.structs.replace(gpu_run, memory=msgspec.structs.replace(gpu_run.memory, per_device=big))
    titles, axes = _memory_tables_and_charts(a)
    assert all("(GiB," in t for t in titles)
    assert axes == ["GiB", "GiB"]


@pytest.mark.parametrize("fmt", ["terminal", "md", "html"])
def test_trace_files_are_named_relative_to_the_folder_analyzed(cpu_run: Analysis, fmt: str) -> None:
    folder = str((CAPTURES / "straggler").resolve())
    assert cpu_run.run.ranks[0].source.startswith(folder)  # the analysis holds absolute paths
    run = msgspec.structs.replace(cpu_run.run, skipped=[SkippedFile(path=f"{folder}/notes.txt", reason="not a trace")])
    text = renderer(fmt).render(msgspec.structs.replace(cpu_run, run=run))
    assert folder not in text
    assert "notes.txt" in text
    if fmt != "md":  # the Markdown leaves the files table out (the skipped file is in its problems table)
        assert "rank0.pt.trace.json.gz" in text
