"""Counters (memory over time) beside the events: Kineto ``[memory]`` instants, nsys memory tables, cache."""

from __future__ import annotations

import gzip
import json
import time
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.factories import gid, kineto_event, kineto_memory, simple_step, write_kineto, write_nsys
from tests.readers.test_nsys import EPOCH, STRINGS, one_rank_tables
from tracekit.model import COUNTER_SCHEMA
from tracekit.readers import load_run, read_kineto
from tracekit.readers.nsys import read_nsys

if TYPE_CHECKING:
    from pathlib import Path

MIB = 1 << 20
CUDA0, HOST = 0x7F00_0000_0000, 0x5500_0000_0000
T0 = 1_000_000.0  # us: where simple_step() begins


def memory_events() -> list[dict[str, Any]]:
    """CUDA caching-allocator and CPU allocations, written out of time order.

    cuda:0 holds 512 B, then 512 B + 1 MiB, then frees the 512 B: 512 -> 1_049_088 -> 1_048_576,
    all in one reserved 2 MiB segment; cuda:1 takes 3 MiB (4 MiB reserved) at the same
    microsecond as that free; the CPU allocates 64 B and frees them (nothing reserved).
    """
    return [
        kineto_memory(T0 + 30, MIB, allocated=512 + MIB, reserved=2 * MIB, addr=CUDA0 + 512),
        kineto_memory(T0 + 1.5, 512, allocated=512, reserved=2 * MIB, addr=CUDA0),
        kineto_memory(T0 + 2.25, 64, allocated=64, reserved=0, device_type=0, device=-1, addr=HOST),
        kineto_memory(T0 + 60.125, -512, allocated=MIB, reserved=2 * MIB, addr=CUDA0),
        kineto_memory(T0 + 60.125, 3 * MIB, allocated=3 * MIB, reserved=4 * MIB, device=1, addr=CUDA0 + 8 * MIB),
        kineto_memory(T0 + 90, -64, allocated=0, reserved=0, device_type=0, device=-1, addr=HOST),
    ]


EXPECTED = {
    "time_ns": [1_000_001_500, 1_000_002_250, 1_000_030_000, 1_000_060_125, 1_000_060_125, 1_000_090_000],
    "device_type": ["cuda", "cpu", "cuda", "cuda", "cuda", "cpu"],
    "device": [0, None, 0, 0, 1, None],
    "addr": [CUDA0, HOST, CUDA0 + 512, CUDA0, CUDA0 + 8 * MIB, HOST],
    "bytes": [512, 64, MIB, -512, 3 * MIB, -64],
    "total_allocated": [512, 64, 512 + MIB, MIB, 3 * MIB, 0],
    "total_reserved": [2 * MIB, 0, 2 * MIB, 2 * MIB, 4 * MIB, 0],
}


def oom() -> dict[str, Any]:
    return {**kineto_memory(T0 + 95, 8 * MIB, allocated=MIB, reserved=2 * MIB), "name": "[OutOfMemory]"}


def test_kineto_memory_instants_become_counters(tmp_path: Path) -> None:
    trace = read_kineto(write_kineto(tmp_path / "rank0.json", simple_step() + memory_events() + [oom()]))
    counters = trace.counters
    assert counters.schema == pl.Schema(COUNTER_SCHEMA)
    assert (
        counters.drop("rank").with_columns(pl.col("device_type").cast(pl.String)).to_dict(as_series=False) == EXPECTED
    )
    assert counters["rank"].null_count() == counters.height  # load_run assigns it
    # the totals are the allocator's: each is the one before it on its device plus this row's bytes
    steps = counters.with_columns(before=pl.col("total_allocated").shift(1).over("device_type", "device").fill_null(0))
    assert (steps["before"] + steps["bytes"] == steps["total_allocated"]).all()
    # one clock: the kernel 20 us into the step and the 1 MiB block 30 us in, both in ns
    kernel = trace.events.filter(pl.col("name").cast(pl.String) == "sm90_gemm")["start_ns"].item()
    assert EXPECTED["time_ns"][2] - kernel == 10_000
    # [memory] instants leave the events; other instants (out of memory) stay
    names = trace.events["name"].cast(pl.String).to_list()
    assert "[memory]" not in names and trace.events.filter(kind="instant")["name"].to_list() == ["[OutOfMemory]"]
    assert trace.events.height == len(simple_step()) + 1


def test_lenient_decode_and_gzip_give_the_same_counters(tmp_path: Path) -> None:
    typed = read_kineto(write_kineto(tmp_path / "a.json.gz", simple_step() + memory_events())).counters
    odd = simple_step() + memory_events()
    odd[3] = kineto_event("kernel", "sm90_gemm", T0 + 20, 30, correlation="1", stream=7, device=0)  # text: lenient
    odd[-1] = {**odd[-1], "args": {**odd[-1]["args"], "Device Id": "-1"}}
    loose = read_kineto(write_kineto(tmp_path / "b.json", odd)).counters
    assert loose.equals(typed)


def test_a_trace_without_memory_has_an_empty_table(tmp_path: Path) -> None:
    trace = read_kineto(write_kineto(tmp_path / "rank0.json", simple_step()))
    assert trace.counters.height == 0 and trace.counters.schema == pl.Schema(COUNTER_SCHEMA)
    only_memory = read_kineto(write_kineto(tmp_path / "m.json", memory_events()))
    assert only_memory.events.height == 0 and only_memory.counters.height == 6


def test_load_run_gives_each_rank_its_counters(tmp_path: Path) -> None:
    write_kineto(tmp_path / "a.json", simple_step(offset=3.0) + memory_events()[:2], rank=1)
    write_kineto(tmp_path / "b.json", simple_step() + memory_events(), rank=0)
    write_kineto(tmp_path / "c.json", simple_step(), rank=2, world_size=2)
    run = load_run([tmp_path], use_cache=False)
    assert run.counters.schema == pl.Schema(COUNTER_SCHEMA)
    assert run.counters["rank"].to_list() == [0] * 6 + [1, 1]
    assert run.rank_counters(1)["time_ns"].to_list() == [1_000_001_500, 1_000_030_000]  # the first two written
    assert load_run([tmp_path], ranks={1, 2}, use_cache=False).counters["rank"].to_list() == [1, 1]
    assert load_run([tmp_path / "c.json"], use_cache=False).counters.height == 0


def test_cache_keeps_the_counters(tmp_path: Path) -> None:
    folder, cache = tmp_path / "t", tmp_path / "cache"
    folder.mkdir()
    write_kineto(folder / "rank0.json", simple_step() + memory_events(), rank=0)
    write_kineto(folder / "rank1.json", simple_step(), rank=1)
    first = load_run([folder], cache_dir=cache)
    assert len(list((cache / "events").glob("*.counters.parquet"))) == 1  # none for the rank without
    second = load_run([folder], cache_dir=cache)
    assert second.counters.equals(first.counters) and first.counters.height == 6
    assert second.events.equals(first.events)
    time.sleep(0.01)
    write_kineto(folder / "rank0.json", simple_step(), rank=0)  # memory profiling turned off
    third = load_run([folder], cache_dir=cache)
    assert third.counters.height == 0 and not list((cache / "events").glob("*.counters.parquet"))


def test_a_damaged_counters_entry_reads_the_source_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = write_kineto(tmp_path / "rank0.json", simple_step() + memory_events())
    first = load_run([path], cache_dir=cache)
    [entry] = (cache / "events").glob("*.counters.parquet")
    entry.write_bytes(entry.read_bytes()[:50])
    assert load_run([path], cache_dir=cache).counters.equals(first.counters)


def test_parallel_parsing_hands_the_counters_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for r in range(2):
        write_kineto(tmp_path / f"rank{r}.json", simple_step() + memory_events()[r:], rank=r)
    serial = load_run([tmp_path], jobs=1, use_cache=False)
    monkeypatch.setattr("tracekit.readers.parse.PARALLEL_MIN_BYTES", 0)
    spooled = load_run([tmp_path], jobs=2, use_cache=False)  # through a cache of this run only
    cached = load_run([tmp_path], jobs=2, cache_dir=tmp_path / "cache")
    assert serial.counters.height == 11
    assert serial.counters.equals(spooled.counters) and serial.counters.equals(cached.counters)


# ---- Nsight Systems: CUDA_GPU_MEMORY_USAGE_EVENTS ------------------------------------------


def cuda_memory(
    pid: int, start: int, nbytes: int, *, free: bool = False, kind: int = 2, device: int = 0
) -> dict[str, Any]:
    """One row of CUDA_GPU_MEMORY_USAGE_EVENTS (memKind 2: device memory; 1: pinned host memory)."""
    return {
        "start": start,
        "globalPid": gid(pid),
        "deviceId": device,
        "contextId": 1,
        "address": 0x7000 + start,
        "pc": 0,
        "bytes": nbytes,
        "memKind": kind,
        "memoryOperationType": 1 if free else 0,
        "name": None,
        "correlationId": start,
    }


def test_nsys_memory_rows_become_each_ranks_counters(tmp_path: Path) -> None:
    tables = one_rank_tables(pid=100, device=0)
    for name, rows in one_rank_tables(pid=200, device=1).items():
        if name != "TARGET_INFO_SESSION_START_TIME":
            tables[name] = tables[name] + rows
    tables["CUDA_GPU_MEMORY_USAGE_EVENTS"] = [
        cuda_memory(100, 300, 20 * MIB),  # written out of time order
        cuda_memory(100, 100, 2 * MIB),
        cuda_memory(200, 120, 8 * MIB, device=1),
        cuda_memory(100, 150, 4096, kind=1),  # pinned host memory
        cuda_memory(100, 900, 2 * MIB, free=True),
        cuda_memory(200, 950, 8 * MIB, free=True, device=1),
    ]
    path = write_nsys(tmp_path / "job.sqlite", tables, strings=STRINGS)
    first, second = read_nsys(path)
    rows = first.counters.with_columns(pl.col("device_type").cast(pl.String)).rows(named=True)
    assert [(r["time_ns"] - EPOCH, r["device_type"], r["device"], r["bytes"], r["total_reserved"]) for r in rows] == [
        (100, "cuda", 0, 2 * MIB, 2 * MIB),
        (150, "cpu", None, 4096, 4096),
        (300, "cuda", 0, 20 * MIB, 22 * MIB),
        (900, "cuda", 0, -2 * MIB, 20 * MIB),
    ]
    assert first.counters["total_allocated"].null_count() == 4  # invisible to CUDA
    assert second.counters["total_reserved"].to_list() == [8 * MIB, 0]
    assert second.counters["device"].to_list() == [1, 1]
    run = load_run([path], use_cache=False)
    assert run.counters["rank"].to_list() == [0, 0, 0, 0, 1, 1]


def test_nsys_export_without_memory_rows_has_an_empty_table(tmp_path: Path) -> None:
    [trace] = read_nsys(write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS))
    assert trace.counters.height == 0 and trace.counters.schema == pl.Schema(COUNTER_SCHEMA)


# ---- real traces ---------------------------------------------------------------------------


@pytest.mark.real
def test_shared_nsys_exports_without_memory_rows(shared_traces: Path) -> None:
    """The old-schema export has the memory table with no rows; the others have no table."""
    for path in sorted((shared_traces / "nsys").glob("*.sqlite")):
        assert all(t.counters.height == 0 for t in read_nsys(path)), path


def test_torch_profile_memory_capture(tmp_path: Path) -> None:
    """A real capture on this machine: tracekit's Profiler with profile_memory=True (CPU)."""
    torch = pytest.importorskip("torch")
    from tracekit.capture import Profiler

    model = torch.nn.Linear(64, 64)
    data = [torch.randn(16, 64) for _ in range(6)]
    with Profiler(
        out_dir=tmp_path, warmup_steps=0, measured_steps=2, wait=0, warmup=1, active=1, profile_memory=True
    ) as prof:
        for batch in prof.loader(data):
            with prof.phase("forward"):
                loss = model(batch).sum()
            with prof.phase("backward"):
                loss.backward()
            if not prof.step():
                break
    [file] = tmp_path.glob("rank0.pt.trace.json*")
    events = json.loads(gzip.decompress(file.read_bytes()) if file.name.endswith(".gz") else file.read_bytes())
    raw = [e for e in events["traceEvents"] if e.get("name") == "[memory]"]
    run = load_run([tmp_path], use_cache=False)
    counters = run.counters
    assert counters.height == len(raw) > 0
    assert set(counters["device_type"].cast(pl.String)) == {"cpu"} and counters["device"].null_count() == len(raw)
    by_time = sorted(raw, key=lambda e: e["ts"])
    assert counters["total_allocated"].to_list() == [e["args"]["Total Allocated"] for e in by_time]
    assert counters["bytes"].sum() == sum(e["args"]["Bytes"] for e in raw)
    first, last = run.events["start_ns"].min(), run.events["end_ns"].max()
    assert first <= counters["time_ns"].min() and counters["time_ns"].max() <= last  # inside the traced window
