"""Categorized memory timelines (torch.profiler's export_memory_timeline, raw form): read, and
their peak and categories checked against an independent reading of the file."""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING

import pytest

from tests.cli.test_cli import tracekit
from tests.factories import simple_step, write_kineto
from tracekit.analyzers import analyze
from tracekit.errors import InputError
from tracekit.model.counters import MEMORY_CATEGORIES
from tracekit.readers import load_run
from tracekit.readers.memory_timeline import read_memory_timeline

if TYPE_CHECKING:
    from pathlib import Path


def independent_peak(rows: list[list[int]]) -> tuple[int, dict[str, int]]:
    """Plain Python: rows in time order (memory from before profiling, time -1, first; ties in
    file order), the running total after each row, its maximum, and each category then."""
    ordered = sorted(enumerate(rows), key=lambda ir: (ir[1][0] != -1, ir[1][0], ir[0]))
    total, best, held, at_best = 0, None, dict.fromkeys(MEMORY_CATEGORIES, 0), {}
    for _, (_, _, nbytes, category) in ordered:
        total += nbytes
        held[MEMORY_CATEGORIES[category]] += nbytes
        if best is None or total > best:
            best, at_best = total, dict(held)
    assert best is not None
    return best, at_best


@pytest.mark.real
def test_the_real_timeline_peak_and_categories_match_an_independent_reading(shared_traces: Path) -> None:
    path = shared_traces / "memory" / "hta-memory-timeline.raw.gz"
    rows = json.loads(gzip.decompress(path.read_bytes()))
    peak, at_peak = independent_peak(rows)
    memory = analyze(load_run([path])).memory
    assert memory is not None
    [found] = memory.peaks
    assert found.rows == len(rows) == 16845
    assert found.peak_bytes == peak
    got = {c.category: c.at_peak_bytes for c in memory.categories}
    assert got == {k: v for k, v in at_peak.items() if k in got}
    assert sum(got.values()) == peak
    top = memory.categories[0]
    assert top.category == "activation" and top.at_peak_pct == pytest.approx(100 * at_peak["activation"] / peak)
    [finding] = memory.findings
    assert finding.category == "activation"


def _timeline(path: Path, rows: list[list[int]]) -> Path:
    path.write_bytes(gzip.compress(json.dumps(rows).encode()))
    return path


def test_times_in_us_and_ns_and_before_profiling(tmp_path: Path) -> None:
    rows = [[-1, 1, 100, 0], [1_000, 2, 50, 4], [1_696_966_047_194_486_198, 4, -50, 4]]
    df = read_memory_timeline(_timeline(tmp_path / "t.raw.json.gz", rows), rank=3)
    assert df["time_ns"].to_list() == [None, 1_000_000, 1_696_966_047_194_486_198]
    assert df["category"].cast(str).to_list() == ["parameter", "activation", "activation"]
    assert df["rank"].to_list() == [3, 3, 3]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{}", "not a raw memory timeline"),
        (b"[[1, 2, 3]]", "not a raw memory timeline"),
        (b"[[1, 9, 3, 0]]", "action 9"),
        (b"[[1, 2, 3, 8]]", "category 8"),
        (b"\x1f\x8b\x08garbage", "damaged gzip"),
    ],
)
def test_a_file_that_is_no_timeline_is_one_line_naming_it(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.raw.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as err:
        read_memory_timeline(path, rank=0)
    assert str(path) in str(err.value)


def test_a_timeline_beside_its_ranks_trace_is_read_with_it(tmp_path: Path) -> None:
    for rank in range(2):
        write_kineto(tmp_path / f"rank{rank}.pt.trace.json.gz", simple_step(rank, offset=rank * 3.0), rank=rank)
    _timeline(tmp_path / "memory_timeline.rank1.raw.json.gz", [[-1, 1, 100, 0], [1, 2, 300, 4], [2, 4, -300, 4]])
    run = load_run([tmp_path])
    assert run.rank_ids == [0, 1]  # the timeline is not read as a trace
    assert set(run.memory_categories["rank"].to_list()) == {1}
    memory = analyze(run).memory
    assert memory is not None
    [peak] = memory.peaks
    assert (peak.rank, peak.peak_bytes) == (1, 400)


def test_a_timeline_of_no_rank_analyzed_is_skipped_and_named(tmp_path: Path) -> None:
    for rank in range(2):
        write_kineto(tmp_path / f"rank{rank}.pt.trace.json.gz", simple_step(rank, offset=rank * 3.0), rank=rank)
    _timeline(tmp_path / "memory_timeline.rank7.raw.json.gz", [[1, 2, 300, 4]])
    run = load_run([tmp_path])
    assert any("memory timeline of no rank analyzed" in s.reason for s in run.skipped)


def test_analyze_reads_a_timeline_given_alone(tmp_path: Path) -> None:
    path = _timeline(
        tmp_path / "memory_timeline.rank2.raw.json.gz", [[-1, 1, 1000, 6], [5, 2, 3000, 4], [6, 4, -3000, 4]]
    )
    out = tmp_path / "a.json"
    result = tracekit("analyze", path, "--json", out)
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["memory"]["peaks"] == [{"rank": 2, "peak_bytes": 4000, "peak_time_ns": 5000, "rows": 3}]
    assert {"kind": "memory_only"}.items() <= doc["run"]["warnings"][0].items()
    assert "memory timelines only: no trace events" in result.stdout


def test_rows_out_of_order_and_frees_never_allocated(tmp_path: Path) -> None:
    """By hand, in time order: activation +400 (t=3), gradient -500 (t=5: freed, never allocated
    in the timeline), activation +1000 (t=10). The gradient's 500 existed before profiling: the
    total runs 500 (before), 900, 400, 1400; the peak is 1400, of which 1400 activation and 0
    gradient; the file's order (10, 5, 3) must not move it."""
    rows = [[10, 2, 1000, 4], [5, 4, -500, 6], [3, 2, 400, 4]]
    path = _timeline(tmp_path / "memory_timeline.rank0.raw.json.gz", rows)
    run = load_run([path])
    memory = analyze(run).memory
    assert memory is not None
    [found] = memory.peaks
    assert found.peak_bytes == 1400
    got = {c.category: c.at_peak_bytes for c in memory.categories}
    assert got.get("activation") == 1400 and got.get("gradient", 0) == 0
    assert all(c.at_peak_bytes >= 0 for c in memory.categories)
    [warned] = [w for w in run.warnings if w.kind == "bad_memory"]
    assert (warned.key, warned.count, warned.path) == ("frees", 1, str(path))


def test_a_value_beyond_64_bits_is_named(tmp_path: Path) -> None:
    path = _timeline(tmp_path / "t.raw.json.gz", [[-1, 1, 1000, 0], [5, 2, 2**70, 1]])
    with pytest.raises(InputError, match=r"a row holds 1180591620717411303424, beyond 64 bits"):
        read_memory_timeline(path, rank=0)


def test_memory_counters_no_allocator_writes_are_left_out_and_said(tmp_path: Path) -> None:
    from tests.factories import kineto_memory

    t = 1_000_010.0
    rows = [
        kineto_memory(t, 100, allocated=-5000, reserved=8000),  # a negative total
        kineto_memory(t + 1, 100, allocated=9000, reserved=1000),  # less reserved than allocated
        kineto_memory(t + 2, 100, allocated=2**70, reserved=2**70),  # beyond 64 bits
        kineto_memory(t + 3, 100, allocated=4000, reserved=8000),
        kineto_memory(t + 4, 100, allocated=100, reserved=0, device_type=0, device=-1),  # the host records no reserve
    ]
    path = write_kineto(tmp_path / "r0.json", simple_step() + rows, rank=0, world_size=1)
    run = load_run([path], use_cache=False)
    [warned] = [w for w in run.warnings if w.kind == "bad_memory"]
    assert warned.count == 3
    memory = analyze(run).memory
    assert memory is not None
    cuda = [r for r in memory.per_device if r.device_type == "cuda"]
    assert [(r.peak_allocated_bytes, r.peak_reserved_bytes, r.gap_at_peak_pct) for r in cuda] == [(4000, 8000, 50.0)]
