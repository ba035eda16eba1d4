"""Memory counters: peaks per rank and device, worked out by hand, through files and the reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.factories import write_kineto
from tracekit.analyzers import analyze, run_analysis
from tracekit.readers import load_run
from tracekit.reports import renderer

if TYPE_CHECKING:
    from pathlib import Path

MIB = 2**20


def memory_event(ts: float, *, device_type: int, device: int, delta: int, allocated: int, reserved: int) -> dict:
    args = {
        "Device Type": device_type,
        "Device Id": device,
        "Addr": 1000 + int(ts),
        "Bytes": delta,
        "Total Allocated": allocated,
        "Total Reserved": reserved,
    }
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "ts": ts,
        "pid": 1,
        "tid": 1,
        "s": "t",
        "args": args,
    }


def trace(tmp_path: Path, rank: int, peak_mib: int, capacity: int | None = None) -> Path:
    half = peak_mib // 2 * MIB
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
        # cuda:0 grows to the peak, then frees half; the host (device type 0) allocates once
        memory_event(10, device_type=1, device=0, delta=half, allocated=half, reserved=64 * MIB),
        memory_event(20, device_type=1, device=0, delta=half, allocated=2 * half, reserved=128 * MIB),
        memory_event(30, device_type=1, device=0, delta=-half, allocated=half, reserved=128 * MIB),
        memory_event(40, device_type=0, device=-1, delta=3 * MIB, allocated=3 * MIB, reserved=0),
    ]
    return write_kineto(tmp_path / f"rank{rank}.json", events, rank=rank, world_size=2, device_memory=capacity)


def test_peaks_per_rank_and_device(tmp_path: Path) -> None:
    trace(tmp_path, 0, 40)
    trace(tmp_path, 1, 100)
    analysis = analyze(load_run([tmp_path], use_cache=False))
    assert analysis.memory is not None
    cuda = {(r.rank, r.device_type): r for r in analysis.memory.per_device}
    assert cuda[(0, "cuda")].peak_allocated_bytes == 40 * MIB
    assert cuda[(0, "cuda")].final_allocated_bytes == 20 * MIB
    assert cuda[(1, "cuda")].peak_reserved_bytes == 128 * MIB
    assert cuda[(1, "cuda")].samples == 3
    assert cuda[(1, "cpu")].peak_allocated_bytes == 3 * MIB
    assert analysis.memory.peak_rank == 1
    md = renderer("md").render(analysis)
    assert "Memory per rank" in md and "100.0" in md


def test_shards_and_no_counters(tmp_path: Path) -> None:
    trace(tmp_path, 0, 40)
    trace(tmp_path, 1, 100)
    run = load_run([tmp_path], use_cache=False)
    assert run_analysis(run, shard_ranks=1).analysis == run_analysis(run).analysis
    empty = tmp_path / "none"
    empty.mkdir()
    write_kineto(
        empty / "rank0.json", [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]
    )
    bare = analyze(load_run([empty], use_cache=False))
    assert bare.memory is not None and bare.memory.per_device == []
    assert "No memory counters" in renderer("terminal").render(bare)


def _gap_trace(
    tmp_path: Path,
    *,
    reserved_over_allocated: float,
    rank: int = 0,
    peak_mib: int = 1000,
    capacity_mib: int | None = None,
) -> Path:
    """A forward range with allocations up to ``peak_mib`` of allocated memory, reserved at the
    peak ``reserved_over_allocated`` times that, then frees."""
    from tests.factories import kineto_event

    peak = peak_mib * MIB
    reserved = int(peak * reserved_over_allocated)
    events = [
        kineto_event("user_annotation", "ProfilerStep#1", 0, 1000),
        kineto_event("user_annotation", "tracekit.phase/forward", 10, 500),
        kineto_event("cpu_op", "aten::linear", 100, 200),
        memory_event(50, device_type=1, device=0, delta=peak // 2, allocated=peak // 2, reserved=reserved),
        memory_event(150, device_type=1, device=0, delta=peak // 2, allocated=peak, reserved=reserved),
        memory_event(600, device_type=1, device=0, delta=-peak, allocated=0, reserved=reserved),
    ]
    capacity = None if capacity_mib is None else capacity_mib * MIB
    return write_kineto(tmp_path / f"rank{rank}.json", events, rank=rank, device_memory=capacity)


def test_reserved_30_percent_over_allocated_at_the_peak_is_a_fragmentation_finding(tmp_path: Path) -> None:
    from tracekit.results.vocab import MemoryNote

    memory = analyze(load_run([_gap_trace(tmp_path, reserved_over_allocated=1.3)])).memory
    assert memory is not None
    [row] = memory.per_device
    assert row.gap_at_peak_bytes == int(1000 * MIB * 1.3) - 1000 * MIB
    assert row.gap_at_peak_pct == pytest.approx(100 * 0.3 / 1.3, rel=1e-3)  # 23% of reserved
    assert (row.peak_phase, row.peak_op) == ("tracekit.phase/forward", "aten::linear")
    [finding] = memory.findings
    assert finding.note is MemoryNote.FRAGMENTATION and finding.rank == 0


def test_reserved_2_percent_over_allocated_is_no_finding(tmp_path: Path) -> None:
    memory = analyze(load_run([_gap_trace(tmp_path, reserved_over_allocated=1.02)])).memory
    assert memory is not None
    assert memory.per_device[0].gap_at_peak_pct == pytest.approx(100 * 0.02 / 1.02, rel=1e-3)
    assert memory.findings == []


def test_one_rank_peaking_far_above_the_others_is_an_imbalance(tmp_path: Path) -> None:
    from tracekit.results.vocab import MemoryNote

    for rank, peak in enumerate((1000, 1000, 1000, 1500)):
        _gap_trace(tmp_path, reserved_over_allocated=1.02, rank=rank, peak_mib=peak)
    memory = analyze(load_run([tmp_path])).memory
    assert memory is not None
    assert memory.imbalance == pytest.approx(1.5)
    [finding] = memory.findings
    assert (finding.note, finding.rank, finding.value) == (MemoryNote.IMBALANCE, 3, 1.5)


def test_headroom_is_the_capacity_left_at_the_peak_on_the_rank_with_the_least(tmp_path: Path) -> None:
    from tracekit.results.vocab import MemoryNote

    # reserved peaks at 1020 MiB on both ranks; rank 1's device is smaller: 60 MiB (5.6%) left
    _gap_trace(tmp_path, reserved_over_allocated=1.02, rank=0, capacity_mib=4000)
    _gap_trace(tmp_path, reserved_over_allocated=1.02, rank=1, capacity_mib=1080)
    analysis = analyze(load_run([tmp_path], use_cache=False))
    memory = analysis.memory
    assert memory is not None
    rows = {r.rank: r for r in memory.per_device}
    assert rows[0].capacity_bytes == 4000 * MIB and rows[0].headroom_bytes == 4000 * MIB - 1020 * MIB
    assert rows[1].headroom_pct == pytest.approx(100 * 60 / 1080, rel=1e-3)
    [finding] = memory.findings
    assert (finding.note, finding.rank, finding.low) == (MemoryNote.HEADROOM, 1, True)
    assert finding.bytes == 60 * MIB and finding.capacity_bytes == 1080 * MIB
    # beside the time verdict, in every format
    terminal = renderer("terminal").render(analysis)
    assert "memory: Memory at the limit: 5.6% of the device left on rank 1" in terminal
    assert "Memory at the limit" in renderer("md").render(analysis)
    assert "Memory at the limit" in renderer("html").render(analysis)


def test_ample_headroom_is_reported_without_advice(tmp_path: Path) -> None:
    from tracekit.reports.memory_words import write_memory

    memory = analyze(load_run([_gap_trace(tmp_path, reserved_over_allocated=1.02, capacity_mib=4000)])).memory
    assert memory is not None
    [finding] = memory.findings
    assert not finding.low and finding.value == pytest.approx(74.5)
    written = write_memory(finding)
    assert written.good and written.recommendations == ()
    assert written.title == "Memory headroom: 74.5% of the device left on rank 0"


def test_the_host_has_no_capacity_and_no_headroom(tmp_path: Path) -> None:
    path = trace(tmp_path, 0, 40, capacity=1000 * MIB)
    memory = analyze(load_run([path], use_cache=False)).memory
    assert memory is not None
    rows = {r.device_type: r for r in memory.per_device}
    assert rows["cpu"].capacity_bytes is None and rows["cpu"].headroom_pct is None
    assert rows["cuda"].headroom_bytes == 1000 * MIB - 128 * MIB


def test_compare_reports_peak_and_gap_deltas_and_gates_on_the_gap(tmp_path: Path) -> None:
    from tracekit.analyzers.compare import compare, evaluate_gate

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = analyze(load_run([_gap_trace(tmp_path / "a", reserved_over_allocated=1.02)]))
    b = analyze(load_run([_gap_trace(tmp_path / "b", reserved_over_allocated=1.3)]))
    c = compare([a], [b])
    gap = next(m for m in c.measures if m.key == "peak_gap")
    assert gap.a == int(1000 * MIB * 1.02) - 1000 * MIB
    assert gap.b == int(1000 * MIB * 1.3) - 1000 * MIB
    reserved = next(m for m in c.measures if m.key == "peak_reserved")
    assert reserved.delta == int(1000 * MIB * 1.3) - int(1000 * MIB * 1.02)
    assert [g.failed for g in evaluate_gate(c, ["gap:+100MiB", "memory:+0"]).gate] == [True, False]


def test_the_chart_timeline_keeps_every_peak_in_at_most_256_points(tmp_path: Path) -> None:
    from tests.factories import kineto_event

    events = [kineto_event("user_annotation", "ProfilerStep#1", 0, 5000)]
    for i in range(1000):  # 100 and 101 MiB in turn, and the top, 777 MiB, once at sample 777
        allocated = 777 * MIB if i == 777 else (100 + i % 2) * MIB
        delta = MIB
        events.append(
            memory_event(1 + i, device_type=1, device=0, delta=delta, allocated=allocated, reserved=800 * MIB)
        )
    memory = analyze(load_run([write_kineto(tmp_path / "rank0.json", events, rank=0)])).memory
    assert memory is not None
    assert len(memory.timeline) <= 256
    assert (
        max(p.allocated_bytes or 0 for p in memory.timeline) == memory.per_device[0].peak_allocated_bytes == 777 * MIB
    )
    html = renderer("html").render(analyze(load_run([tmp_path / "rank0.json"])))
    assert "Memory over time" in html
