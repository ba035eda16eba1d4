"""Builders of small synthetic inputs whose answers can be worked out by hand."""

from __future__ import annotations

import gzip
import json
import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.analyzers.annotations import annotation_breakdown
from tracekit.analyzers.collectives import CollectiveResult, match_collectives
from tracekit.analyzers.run_facts import run_warning
from tracekit.analyzers.steps import analyze_steps, gpu_activity
from tracekit.analyzers.stragglers import StragglerResult, find_stragglers
from tracekit.model import SCHEMA, ProcessGroup, RankInfo, Run, classify
from tracekit.reports.input_words import run_warning as warning_words

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path

    from tracekit.model.input_warnings import InputWarning

GPU = {"kernel", "memcpy", "memset", "sync", "gpu_annotation"}


def ev(
    kind: str,
    name: str,
    start: int,
    end: int,
    *,
    rank: int = 0,
    tid: int = 1,
    pid: int = 100,
    stream: int | None = None,
    correlation: int | None = None,
    device: int | None = None,
) -> dict[str, Any]:
    """One event row (times in ns)."""
    gpu = kind in GPU
    return {
        "rank": rank,
        "kind": kind,
        "name": name,
        "start_ns": start,
        "end_ns": end,
        "pid": pid,
        "tid": tid,
        "device": (device if device is not None else 0) if gpu else None,
        "stream": (stream if stream is not None else 7) if gpu else None,
        "correlation": correlation,
    }


def make_run(
    rows: list[dict[str, Any]],
    *,
    world_size: int | None = None,
    process_groups: Mapping[int, tuple[ProcessGroup, ...]] | None = None,
) -> Run:
    """A Run from event rows (missing columns are null); ``process_groups`` per rank."""
    schema = {k: v for k, v in SCHEMA.items() if k != "category"}
    df = (
        pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema)
        if rows
        else pl.DataFrame(schema=schema)
    )
    df = classify(df).select(list(SCHEMA)).sort("rank", "start_ns")
    ranks = sorted(set(df["rank"].to_list())) or [0]
    groups = process_groups or {}
    return Run(
        events=df,
        ranks=tuple(
            RankInfo(rank=r, source=f"rank{r}.json", world_size=world_size, process_groups=groups.get(r, ()))
            for r in ranks
        ),
    )


def nccl_call(
    rank: int,
    start: int,
    end: int,
    *,
    corr: int,
    pg: str | None = None,
    seq: int | None = None,
    coll: str = "allreduce",
    group_size: int | None = None,
    stream: int = 20,
    kernel: str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
) -> list[dict[str, Any]]:
    """One NCCL collective as Kineto records it: the ``record_param_comms`` host op (with the
    process group, name, group size and sequence number), the launch inside it (same
    external id) and the kernel on ``stream`` over [start, end). ``corr`` must be unique per rank.
    """
    comms = {"external_id": corr, "pg_name": pg, "coll_name": coll if pg else None, "group_size": group_size}
    return [
        ev("cpu_op", "record_param_comms", start - 30, start - 5, rank=rank) | comms | {"seq": seq},
        ev("runtime", "cudaLaunchKernel", start - 20, start - 10, rank=rank, correlation=corr) | {"external_id": corr},
        ev("kernel", kernel, start, end, rank=rank, correlation=corr, stream=stream),
    ]


FETCH = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
OPTIMIZER_STEP = "Optimizer.step#SGD.step"


def training_loop(
    lengths: Sequence[int],
    *,
    fetch: int = 0,
    optimizer: bool = False,
    annotation: str | None = None,
    markers: str | None = None,
    first: int = 0,
    rank: int = 0,
    start: int = 0,
) -> list[dict[str, Any]]:
    """A training thread (tid 1) running iterations of ``lengths`` ns back to back.

    Iteration ``i`` over ``[t, t + L)`` holds: a DataLoader fetch ``[t, t + fetch)`` (when
    ``fetch``); a kernel launch ``[t + fetch, t + fetch + 1)`` whose kernel runs
    ``[t + fetch + 1, t + L - 10)``; the ``annotation`` range ``[t + fetch, t + L - 10)``
    (``{i}`` in its name becomes ``first + i``); host work ``[t + L - 10, t + L)``, an
    ``Optimizer.step`` when ``optimizer``; and a step marker ``[t, t + L)`` named
    ``markers.format(first + i)`` when ``markers`` is given. The GPU is idle during each
    fetch (and ``[t, t + fetch + 1)``, ``[t + L - 10, t + L)``).
    """
    rows: list[dict[str, Any]] = []
    t = start
    for i, length in enumerate(lengths):
        n, corr = first + i, rank * 1_000_000 + i + 1
        if fetch:
            rows.append(ev("cpu_op", FETCH, t, t + fetch, rank=rank))
        rows.append(ev("runtime", "cudaLaunchKernel", t + fetch, t + fetch + 1, rank=rank, correlation=corr))
        rows.append(ev("kernel", "sm90_gemm", t + fetch + 1, t + length - 10, rank=rank, correlation=corr))
        if annotation is not None:
            rows.append(ev("annotation", annotation.format(n), t + fetch, t + length - 10, rank=rank))
        rows.append(ev("cpu_op", OPTIMIZER_STEP if optimizer else "aten::add_", t + length - 10, t + length, rank=rank))
        if markers is not None:
            rows.append(ev("step", markers.format(n), t, t + length, rank=rank))
        t += length
    return rows


def kineto_event(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    """One Kineto 'X' event; GPU categories go on pid 0."""
    gpu = cat in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "cuda_sync")
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0 if gpu else 100,
        "tid": args.get("stream", 7) if gpu else 1,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def kineto_memory(
    ts: float, nbytes: int, *, allocated: int, reserved: int, device_type: int = 1, device: int = 0, addr: int = 0
) -> dict[str, Any]:
    """One Kineto ``[memory]`` instant (``profile_memory=True``); device type 0 is the CPU (device -1)."""
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 100,
        "tid": 1,
        "ts": ts,
        "args": {
            "Total Reserved": reserved,
            "Total Allocated": allocated,
            "Bytes": nbytes,
            "Device Id": device,
            "Device Type": device_type,
            "Addr": addr,
            "finished": False,
            "Ev Idx": 1,
        },
    }


def write_kineto(
    path: Path,
    events: list[dict[str, Any]],
    *,
    rank: int | None = 0,
    world_size: int = 2,
    backend: str = "nccl",
    devices: tuple[str, ...] = ("NVIDIA H100",),
    pg_config: list[dict[str, Any]] | None = None,
    device_memory: int | None = None,
) -> Path:
    """Write a small Kineto trace (gzipped when the name ends in .gz); ``pg_config`` lists
    process groups as Kineto's ``distributedInfo`` does; ``device_memory`` is each device's
    ``totalGlobalMem``."""
    props = [{"id": i, "name": n} for i, n in enumerate(devices)]
    if device_memory is not None:
        props = [{**p, "totalGlobalMem": device_memory} for p in props]
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": props}
    if rank is not None:
        doc["distributedInfo"] = {"backend": backend, "rank": rank, "world_size": world_size}
        if pg_config is not None:
            doc["distributedInfo"]["pg_config"] = pg_config
    doc["traceEvents"] = events
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def simple_step(rank: int = 0, offset: float = 0.0) -> list[dict[str, Any]]:
    """One step on one GPU: a 100 us step, a compute kernel and an overlapping NCCL kernel."""
    t = 1_000_000.0 + offset
    return [
        kineto_event("user_annotation", "ProfilerStep#1", t, 100),
        kineto_event("user_annotation", "tracekit.phase/forward", t + 5, 40),
        kineto_event("cuda_runtime", "cudaLaunchKernel", t + 10, 2, correlation=1),
        kineto_event("kernel", "sm90_gemm", t + 20, 30, correlation=1, stream=7, device=0),
        kineto_event("user_annotation", "tracekit.phase/backward", t + 50, 40),
        kineto_event("cuda_runtime", "cudaLaunchKernel", t + 55, 2, correlation=2),
        kineto_event(
            "kernel",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
            t + 40,
            40,
            correlation=2,
            stream=20,
            device=0,
        ),
    ]


#: A hardware/VM prefix like the ones real exports carry above the pid, to check masking.
NSYS_VM = 1 << 48


def gid(pid: int, tid: int = 0) -> int:
    """An nsys serialized global id: ``(pid << 24) | tid`` under a VM prefix."""
    return NSYS_VM | (pid << 24) | tid


def nsys_kernel_rows(count: int, *, pid: int = 5, name_id: int = 1) -> list[dict[str, Any]]:
    """``count`` rows of ``CUPTI_ACTIVITY_KIND_KERNEL``, 1 us each, 2 us apart, named ``name_id``."""
    return [
        {
            "start": 1000 + i * 2000,
            "end": 2000 + i * 2000,
            "deviceId": 0,
            "streamId": 7,
            "globalPid": gid(pid),
            "correlationId": i,
            "demangledName": name_id,
            "shortName": name_id,
        }
        for i in range(count)
    ]


def write_nsys(path: Path, tables: dict[str, list[dict[str, Any]]], *, strings: dict[int, str] | None = None) -> Path:
    """Write a minimal Nsight Systems-like SQLite export.

    ``tables`` maps a table name to its rows (columns: the union of the rows' keys, in order);
    ``strings`` fills ``StringIds``. Only the tables given exist, as in real exports, where a
    table without rows is left out.
    """
    all_tables = dict(tables)
    if strings is not None:
        all_tables["StringIds"] = [{"id": k, "value": v} for k, v in strings.items()]
    with closing(sqlite3.connect(path)) as db, db:
        for name, rows in all_tables.items():
            cols = list(dict.fromkeys(k for r in rows for k in r))
            db.execute(f"CREATE TABLE {name} ({', '.join(cols)})")
            marks = ", ".join("?" for _ in cols)
            db.executemany(f"INSERT INTO {name} VALUES ({marks})", [[r.get(c) for c in cols] for r in rows])
    return path


def said(warnings: Iterable[InputWarning]) -> list[str]:
    """Warnings about the input in the words the reports write."""
    return [warning_words(run_warning(w)) for w in warnings]


def cross_rank(run: Run) -> tuple[CollectiveResult, StragglerResult]:
    """The collectives and stragglers of ``run``, as the reduce finds them."""
    activity = gpu_activity(run)
    steps = analyze_steps(run, activity=activity)
    collectives = match_collectives(run, activity, steps)
    annotations = annotation_breakdown(run, steps, activity)
    span = int(run.events["end_ns"].max() - run.events["start_ns"].min())  # type: ignore[operator]
    return collectives, find_stragglers(collectives, steps, annotations, span_ns=span)
