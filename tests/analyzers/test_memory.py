"""Memory counters: peaks per rank and device, worked out by hand, through files and the reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def trace(tmp_path: Path, rank: int, peak_mib: int) -> Path:
    half = peak_mib // 2 * MIB
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
        # cuda:0 grows to the peak, then frees half; the host (device type 0) allocates once
        memory_event(10, device_type=1, device=0, delta=half, allocated=half, reserved=64 * MIB),
        memory_event(20, device_type=1, device=0, delta=half, allocated=2 * half, reserved=128 * MIB),
        memory_event(30, device_type=1, device=0, delta=-half, allocated=half, reserved=128 * MIB),
        memory_event(40, device_type=0, device=-1, delta=3 * MIB, allocated=3 * MIB, reserved=0),
    ]
    return write_kineto(tmp_path / f"rank{rank}.json", events, rank=rank, world_size=2)


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
