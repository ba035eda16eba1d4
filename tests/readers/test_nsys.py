"""The Nsight Systems reader: synthetic exports worked out by hand, then the real ones."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.conftest import analysis_of
from tests.factories import gid, write_nsys
from tracekit.analyzers import run_analysis
from tracekit.errors import InputError, TraceReadError
from tracekit.model.run import RankFound
from tracekit.readers import discover, load_run, read_file
from tracekit.readers.nsys import read_nsys

if TYPE_CHECKING:
    from pathlib import Path

EPOCH = 1_700_000_000_000_000_000
GEMM = "void gemm_kernel<float>(float*)"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
STRINGS = {1: GEMM, 2: "gemm_kernel", 3: NCCL, 4: "ncclDevKernel_AllReduce", 5: "cudaLaunchKernel_v7000", 6: "forward"}


def kernel(
    pid: int, corr: int, start: int, end: int, *, name: int = 1, device: int = 0, stream: int = 7
) -> dict[str, Any]:
    return {
        "start": start,
        "end": end,
        "deviceId": device,
        "streamId": stream,
        "correlationId": corr,
        "globalPid": gid(pid),
        "demangledName": name,
        "shortName": name + 1,
    }


def launch(pid: int, corr: int, start: int, *, event_class: int = 0) -> dict[str, Any]:
    return {
        "start": start,
        "end": start + 10,
        "eventClass": event_class,
        "globalTid": gid(pid, pid),
        "correlationId": corr,
        "nameId": 5,
    }


def nvtx(
    event_type: int, start: int, end: int | None, text: str | None, *, pid: int = 100, domain: int = 0, **kw: Any
) -> dict[str, Any]:
    return {
        "start": start,
        "end": end,
        "eventType": event_type,
        "text": text,
        "globalTid": gid(pid, pid),
        "textId": None,
        "domainId": domain,
        **kw,
    }


def one_rank_tables(pid: int = 100, *, device: int = 0, epoch: int | None = EPOCH) -> dict[str, list[dict[str, Any]]]:
    """One process: a tracekit-domain step with forward/backward phases, a GEMM and an all-reduce."""
    tables: dict[str, list[dict[str, Any]]] = {
        "CUPTI_ACTIVITY_KIND_KERNEL": [
            kernel(pid, 1, 2000, 3000, device=device),
            kernel(pid, 2, 5200, 7000, name=3, device=device, stream=20),
        ],
        # corr 1 twice: the second copy under another event class, as older exports hold it
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            launch(pid, 1, 1250),
            launch(pid, 1, 1251, event_class=67),
            launch(pid, 2, 5100),
        ],
        "CUPTI_ACTIVITY_KIND_MEMCPY": [
            {"start": 500, "end": 600, "deviceId": device, "streamId": 7, "correlationId": 3, "globalPid": gid(pid)}
            | {"bytes": 4096, "copyKind": 1},
            # a copy from pageable memory: ENUM_CUDA_MEM_KIND 0 (Pageable) -> 2 (Device)
            {"start": 600, "end": 700, "deviceId": device, "streamId": 7, "correlationId": 5, "globalPid": gid(pid)}
            | {"bytes": 64, "copyKind": 1, "srcKind": 0, "dstKind": 2},
        ],
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
            {"start": 8000, "end": 8100, "deviceId": device, "streamId": 7, "correlationId": 4, "globalPid": gid(pid)}
            | {"syncType": 3}
        ],
        "NVTX_EVENTS": [
            nvtx(75, 0, None, "tracekit", pid=pid, domain=7),
            nvtx(39, 0, None, "MPI Rank 0", pid=pid),  # a thread name, not a range
            nvtx(59, 1000, 9000, "step#3", pid=pid, domain=7),
            nvtx(59, 1100, 5000, None, pid=pid, domain=7, textId=6),  # registered string "forward"
            nvtx(60, 5000, 8000, "tracekit.phase/backward", pid=pid, domain=7),
            nvtx(59, 1200, 1300, "aten::mm, seq = 4, op_id = 12, sizes = [[2, 2], [2, 2]]", pid=pid),
            nvtx(34, 8500, None, "checkpoint", pid=pid),
            nvtx(59, 8600, None, "never closed", pid=pid),
        ],
    }
    if epoch is not None:
        tables["TARGET_INFO_SESSION_START_TIME"] = [{"utcEpochNs": epoch, "utcTime": "2023-11-14T22:13:20"}]
    return tables


def test_synthetic_export_maps_every_kind(tmp_path: Path) -> None:
    path = write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS)
    [trace] = read_nsys(path)
    ev = trace.events.with_columns(pl.col("name").cast(pl.String), local=pl.col("start_ns") - EPOCH)
    rows = {(r["kind"], r["name"]): r for r in ev.iter_rows(named=True)}
    assert set(rows) == {
        ("kernel", GEMM),
        ("kernel", NCCL),
        ("runtime", "cudaLaunchKernel"),
        ("memcpy", "Memcpy HtoD"),
        ("memcpy", "Memcpy HtoD (Pageable -> Device)"),
        ("sync", "Stream Sync"),
        ("step", "step#3"),
        ("annotation", "tracekit.phase/forward"),
        ("annotation", "tracekit.phase/backward"),
        ("annotation", "aten::mm"),
        ("instant", "checkpoint"),
    }
    assert ev.filter(kind="runtime").height == 2  # the class-67 copy is dropped
    gemm = rows["kernel", GEMM]
    assert (gemm["local"], gemm["end_ns"] - EPOCH, gemm["device"], gemm["stream"]) == (2000, 3000, 0, 7)
    assert (gemm["pid"], gemm["tid"], gemm["category"]) == (100, None, "compute")
    assert rows["kernel", NCCL]["category"] == "collective"
    assert (rows["runtime", "cudaLaunchKernel"]["pid"], rows["runtime", "cudaLaunchKernel"]["tid"]) == (100, 100)
    assert rows["memcpy", "Memcpy HtoD"]["bytes"] == 4096
    assert rows["instant", "checkpoint"]["end_ns"] == rows["instant", "checkpoint"]["start_ns"]
    host = ev.filter(pl.col("kind").is_in(["runtime", "annotation", "step", "instant"]))
    assert host.height == 7 and host["device"].null_count() == host["stream"].null_count() == 7
    assert trace.clock.startswith("nsys: ns from session start")
    assert (trace.rank, trace.world_size, trace.backend) == (None, None, "nccl")


def test_steps_phases_and_gpu_projection_on_nsys_input(tmp_path: Path) -> None:
    write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS)
    result = run_analysis(load_run([tmp_path / "job.sqlite"])).frames
    assert result.steps.steps.select("step", "gpu_ops").rows() == [(3, 2)]
    per_rank = {r["name"]: r for r in result.annotations.per_rank.iter_rows(named=True)}
    assert per_rank["tracekit.phase/forward"]["gpu_ns"] == 1000  # the GEMM launched inside it
    assert per_rank["tracekit.phase/backward"]["gpu_ns"] == 1800  # the all-reduce
    assert "aten::mm" not in per_rank  # nested in forward: folded into it
    assert sum(r["cpu_pct"] for r in per_rank.values()) == pytest.approx(100)


def test_a_kernel_s_threads_are_its_grid_times_its_block(tmp_path: Path) -> None:
    """``threads``: gridX * gridY * gridZ * blockX * blockY * blockZ of each kernel (null where a
    dimension is missing, and for copies)."""
    tables = one_rank_tables()
    first, second = tables["CUPTI_ACTIVITY_KIND_KERNEL"]
    first |= {"gridX": 1, "gridY": 1, "gridZ": 1, "blockX": 1, "blockY": 1, "blockZ": 1}
    second |= {"gridX": 32, "gridY": 2, "gridZ": 1, "blockX": 640, "blockY": 1, "blockZ": 1}
    [trace] = read_nsys(write_nsys(tmp_path / "job.sqlite", tables, strings=STRINGS))
    events = trace.events
    assert events.filter(kind="kernel").sort("start_ns")["threads"].to_list() == [1, 40960]
    assert events.filter(pl.col("kind") != "kernel")["threads"].null_count() == events.height - 2
    for row in tables["CUPTI_ACTIVITY_KIND_KERNEL"]:  # an export without one of the columns: no threads
        del row["blockZ"]
    [trace] = read_nsys(write_nsys(tmp_path / "old.sqlite", tables, strings=STRINGS))
    assert trace.events["threads"].null_count() == trace.events.height


def test_missing_optional_tables_and_columns(tmp_path: Path) -> None:
    tables = {"CUPTI_ACTIVITY_KIND_KERNEL": [{"start": 10, "end": 1030, "deviceId": 0, "streamId": 1}]}
    [trace] = read_nsys(write_nsys(tmp_path / "bare.sqlite", tables))
    row = trace.events.row(0, named=True)
    assert (row["kind"], row["name"], row["start_ns"], row["end_ns"]) == ("kernel", "(unnamed)", 10, 1030)
    assert "not aligned" in trace.clock
    nvtx_only = {"NVTX_EVENTS": [nvtx(59, 5, 9, "load")]}
    [trace] = read_nsys(write_nsys(tmp_path / "nvtx.sqlite", nvtx_only))
    assert trace.events.select("kind", pl.col("name").cast(pl.String)).rows() == [("annotation", "load")]


def test_one_file_with_several_processes_ranks_them_by_gpu(tmp_path: Path) -> None:
    tables = one_rank_tables(pid=200, device=1)
    other = one_rank_tables(pid=300, device=0)
    for name, rows in other.items():
        if name != "TARGET_INFO_SESSION_START_TIME":
            tables[name] = tables[name] + rows
    tables["CUPTI_ACTIVITY_KIND_RUNTIME"].append(launch(50, 99, 10))  # a launcher without GPU work
    tables["TARGET_INFO_GPU"] = [{"id": 0, "name": "GPU A"}, {"id": 1, "name": "GPU B"}]
    tables["TARGET_INFO_CUDA_DEVICE"] = [
        {"gpuId": 0, "cudaId": 0, "pid": 300},
        {"gpuId": 1, "cudaId": 1, "pid": 200},
    ]
    path = write_nsys(tmp_path / "rank5.sqlite", tables, strings=STRINGS)
    traces = read_nsys(path)
    assert [(t.rank, t.events["pid"].unique().to_list(), t.devices) for t in traces] == [
        (0, [300], ("GPU A",)),
        (1, [200], ("GPU B",)),
    ]
    assert [t.rank_source for t in traces] == [
        RankFound("process_order", processes=2, pid=300),
        RankFound("process_order", processes=2, pid=200),
    ]
    assert all(t.world_size == 2 for t in traces)
    run = load_run([path])  # the file name's rank5 does not apply to a file of two ranks
    assert run.rank_ids == [0, 1] and run.world_size == 2 and run.backend == "nccl"
    with pytest.raises(InputError, match="holds 2 processes"):
        load_run([path], rank=4)


@pytest.mark.parametrize(
    ("file_name", "extra", "expected"),
    [
        (
            "rank7.sqlite",
            {"META_DATA_CAPTURE": [{"name": "PROCESS_0:ENVIRONMENT_VARIABLE", "value": 'RANK="3"'}]},
            (3, RankFound("env", key="RANK")),
        ),
        (
            "job.sqlite",
            {
                "META_DATA_CAPTURE": [
                    {"name": f"PROCESS_0:ARGUMENT_{i}", "value": v} for i, v in enumerate(["t.py", "--rank", "5"])
                ]
            },
            (5, RankFound("argument", key="--rank")),
        ),
        ("worker4.sqlite", {}, (4, RankFound("file_name"))),
        (
            "job.sqlite",
            {"TARGET_INFO_SYSTEM_ENV": [{"name": "DeviceEnvironment", "value": "A=1;LOCAL_RANK=2;WORLD_SIZE=8"}]},
            (2, RankFound("env", key="LOCAL_RANK")),
        ),
        ("job.sqlite", {}, (0, RankFound("assumed_zero"))),
    ],
)
def test_rank_of_a_single_process_file(
    tmp_path: Path, file_name: str, extra: dict[str, list[dict[str, Any]]], expected: tuple[int, RankFound]
) -> None:
    path = write_nsys(tmp_path / file_name, one_rank_tables() | extra, strings=STRINGS)
    [info] = load_run([path]).ranks
    assert (info.rank, info.rank_source) == expected
    if "TARGET_INFO_SYSTEM_ENV" in extra:
        assert info.world_size == 8


def test_files_align_on_session_start(tmp_path: Path) -> None:
    for rank in range(2):
        write_nsys(tmp_path / f"rank{rank}.sqlite", one_rank_tables(epoch=EPOCH + rank * 10**9), strings=STRINGS)
    run = load_run([tmp_path])
    starts = run.events.filter(pl.col("name").cast(pl.String) == GEMM).sort("rank")["start_ns"].to_list()
    assert starts == [EPOCH + 2000, EPOCH + 10**9 + 2000]


def test_not_an_export_is_one_line_error_naming_the_file(tmp_path: Path) -> None:
    other = tmp_path / "notes.sqlite"
    with closing(sqlite3.connect(other)) as db, db:
        db.execute("CREATE TABLE notes (body TEXT)")
    cases = [
        (other, "not an Nsight Systems export"),
        (tmp_path / "fake.sqlite", "not a SQLite database"),
        (tmp_path / "empty.sqlite", "empty file"),
    ]
    (tmp_path / "fake.sqlite").write_text('{"traceEvents": []}')
    (tmp_path / "empty.sqlite").write_bytes(b"")
    for path, reason in cases:
        with pytest.raises(TraceReadError, match=reason) as info:
            read_file(path)
        assert info.value.path == str(path) and str(path) in info.value.message
        assert "\n" not in info.value.message


def test_nsys_rep_without_nsys_says_how_to_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "rank0.nsys-rep"
    rep.write_bytes(b"report")
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("tracekit.readers.nsys_export.shutil.which", lambda _: None)
    with pytest.raises(TraceReadError, match="nsys is not installed") as info:
        read_file(rep)
    assert f"nsys export --type sqlite {rep}" in info.value.message and str(rep) in info.value.message


def test_nsys_rep_is_exported_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_nsys(tmp_path / "source.sqlite", one_rank_tables(), strings=STRINGS)
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    fake = bin_dir / "nsys"
    fake.write_text(
        '#!/bin/sh\necho "$@" >> "$NSYS_LOG"\nwhile [ "$1" != "--output" ]; do shift; done\ncp "$NSYS_SOURCE" "$2"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NSYS_LOG", str(log))
    monkeypatch.setenv("NSYS_SOURCE", str(source))
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    rep = tmp_path / "worker3.nsys-rep"
    rep.write_bytes(b"report")
    for _ in range(2):
        [trace] = read_file(rep)
        assert (trace.path, trace.rank, trace.rank_source) == (str(rep), 3, RankFound("file_name"))
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("export --type sqlite")
    time.sleep(0.01)
    rep.touch()  # a newer report is exported again
    read_file(rep)
    assert len(log.read_text().splitlines()) == 2


def test_discover_prefers_an_export_over_its_report(tmp_path: Path) -> None:
    for name in ("a.nsys-rep", "a.sqlite", "b.nsys-rep", "c.json"):
        (tmp_path / name).write_bytes(b"x")
    assert sorted(p.name for p in discover([tmp_path])) == ["a.sqlite", "b.nsys-rep", "c.json"]


# ---- the real exports in ../shared/traces/nsys ---------------------------------------------


@pytest.fixture(scope="session")
def nsys_dir(shared_traces: Path) -> Path:
    """../shared/traces/nsys."""
    return shared_traces / "nsys"


def sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute(query).fetchall()


NCCL_BY_DEVICE = (
    "SELECT k.deviceId, COUNT(*), SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
    "JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE '%nccl%' GROUP BY k.deviceId ORDER BY 1"
)


@pytest.mark.real
def test_mfu_before_matches_direct_sql(nsys_dir: Path) -> None:
    path = nsys_dir / "nsysai-mfu-2gpu-before.sqlite"
    run = load_run([path])
    assert run.rank_ids == [0, 1] and run.world_size == 2 and run.backend == "nccl" and run.warnings == ()
    kernels = run.events.filter(kind="kernel")
    assert kernels.height == sql(path, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] == 4010
    nccl = (
        kernels.filter(pl.col("category") == "collective")
        .group_by("device")
        .agg(pl.len(), (pl.col("end_ns") - pl.col("start_ns")).sum())
        .sort("device")
    )
    assert nccl.rows() == sql(path, NCCL_BY_DEVICE)
    assert nccl["len"].sum() == 66
    assert kernels.filter(pl.col("name").cast(pl.String).str.contains("SendRecv")).height == 66
    ms = nccl["end_ns"].to_list()
    assert ms[0] / 1e6 == pytest.approx(17.2, abs=0.05) and ms[1] / 1e6 == pytest.approx(8.2, abs=0.05)
    # rank r is the process on device r; times are ns after the session start
    assert kernels.group_by("rank").agg(pl.col("device").unique()).sort("rank")["device"].to_list() == [[0], [1]]
    [(epoch,)] = sql(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    [(first,)] = sql(path, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert kernels["start_ns"].min() == epoch + first


@pytest.mark.real
def test_mfu_before_end_to_end_analysis(nsys_dir: Path) -> None:
    path = nsys_dir / "nsysai-mfu-2gpu-before.sqlite"
    result = analysis_of([path]).frames
    breakdown = result.breakdown.per_rank
    assert breakdown["rank"].to_list() == [0, 1]
    for row in breakdown.iter_rows(named=True):
        assert sum(row[f"{p}_pct"] for p in ("compute", "comm", "memory", "idle")) == pytest.approx(100)
        assert row["compute_pct"] > 50 and row["comm_pct"] > 0
    # NCCL kernels share stream 7/15 with compute, so none is hidden; their union is their sum
    overlap = result.overlap.per_rank
    assert overlap["comm_ns"].to_list() == [r[2] for r in sql(path, NCCL_BY_DEVICE)]
    assert overlap["overlap_pct"].to_list() == [0.0, 0.0]
    summary = {r["name"]: r for r in result.annotations.summary.iter_rows(named=True)}
    assert summary["FlashAttnFunc"]["ranks"] == 2 and summary["FlashAttnFunc"]["gpu_ns"] > 0
    assert "AllToAll4D" in summary and any(n.startswith("FSDP::pre_forward") for n in summary)
    assert not any("op_id" in n or n.startswith("nccl") for n in summary)  # NCCL ranges nest in AllToAll4D


@pytest.mark.real
def test_every_shared_export_reads_fast(nsys_dir: Path) -> None:
    files = sorted(nsys_dir.glob("*.sqlite"))
    assert len(files) == 4
    for path in files:
        # the CPU time of this process (its threads too): the work of reading, which other
        # processes on a loaded machine do not lengthen, as they do the wall-clock time
        began = time.process_time()
        traces = read_nsys(path)
        elapsed = time.process_time() - began
        assert elapsed < 1.0, (path, elapsed)
        events = pl.concat([t.events for t in traces])
        assert events.filter(kind="kernel").height == sql(path, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
        assert (events["end_ns"] >= events["start_ns"]).all()
    assert len(read_nsys(nsys_dir / "nsysai-mfu-2gpu-after.sqlite")) == 2
    [mock] = read_nsys(nsys_dir / "nsysai-mock-rtx3080.sqlite")
    assert mock.devices == ("NVIDIA GeForce RTX 3080",) and mock.schema_version == "nsys export 3.24.14"
    assert mock.device_memory == ((0, 10736893952),)  # TARGET_INFO_GPU.totalMemory, 10 GiB


@pytest.mark.real
def test_old_schema_export(nsys_dir: Path) -> None:
    path = nsys_dir / "pipit-saxpy-mpi-a100-oldschema.sqlite"
    [trace] = read_nsys(path)
    assert trace.devices == ("NVIDIA A100-SXM4-40GB",) and trace.schema_version == "nsys export 2.9.1"
    ev = trace.events.with_columns(pl.col("name").cast(pl.String))
    counts = dict(ev.group_by("name").len().iter_rows())
    assert (counts["MPI_Send"], counts["MPI_Recv"], counts["saxpy"]) == (10, 5, 5)
    assert counts["Memcpy HtoD (Pageable -> Device)"] + counts["Memcpy DtoH (Device -> Pageable)"] == 15
    assert ev.filter(kind="memcpy")["bytes"].unique().to_list() == [262144000]
    runtime = sql(path, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 0")[0][0]
    assert ev.filter(kind="runtime").height == runtime  # the duplicate class-67 rows are dropped
    linked = ev.filter(kind="kernel").join(ev.filter(kind="runtime"), on="correlation")
    assert linked.height == 5 and set(linked["name_right"]) == {"cudaLaunchKernel"}
    assert load_run([path]).ranks[0].rank_source == RankFound("assumed_zero")
