"""Shared helpers of the independent truth scripts: decode a trace once, cache compact events.

Not tracekit: plain ``json``/``gzip``/``sqlite3`` and interval arithmetic written here, so the
numbers in ``tests/truth/corpus.py`` do not inherit tracekit's bugs. Not run by the test suite.

Event tuple fields (all times integer ns): ``kind, name, pid, tid, start, end, args`` where
``kind`` is one of ``cpu`` (cpu_op / Operator / user_annotation / python_function),
``runtime`` (CUDA/HIP runtime or driver call), ``kernel``, ``memcpy``, ``memset``,
``sync`` (GPU-side ``cuda_sync``), ``gpu_annotation``, ``other``.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

SHARED = Path(os.environ.get("H8_SHARED", "/work/shared/traces"))
SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "captures"
CACHE = Path(os.environ.get("H8_CACHE", "/tmp/h8"))

KIND_OF_CAT = {
    "cpu_op": "cpu",
    "operator": "cpu",
    "user_annotation": "cpu",
    "python_function": "cpu",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_sync": "sync",
    "gpu_user_annotation": "gpu_annotation",
}
KEEP_ARGS = (
    "correlation",
    "External id",
    "external id",
    "stream",
    "device",
    "bytes",
    "Collective name",
    "cuda_sync_kind",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
)

# communication kernels: NCCL/RCCL/MSCCL, DeepEP, NVSHMEM, SymmetricMemory, custom all-reduce,
# TransformerEngine userbuffers
COMM_KERNEL = re.compile(
    r"nccl|rccl|msccl|deep_?ep|nvshmem|multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce"
    r"|cross_device_reduce|custom_?all_?reduce|userbuffers",
    re.IGNORECASE,
)
# host-side collectives of CPU backends
HOST_COMM = re.compile(r"^gloo:|^mpi:|^c10d::|^nccl:|record_param_comms", re.IGNORECASE)


@dataclass
class Trace:
    """One rank's events, sorted by start."""

    path: str
    meta: dict[str, object]
    events: list[tuple] = field(default_factory=list)

    def of(self, *kinds: str) -> list[tuple]:
        return [e for e in self.events if e[0] in kinds]


#: CUDA/HIP runtime calls that block the host until the device is done (synchronous cudaMemcpy by
#: its exact name), shared by every script that counts syncs.
BLOCKING_SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "cudaMemcpy",
        "hipMemcpy",
    }
)


def _ns(x: float) -> int:
    return round(float(x) * 1000)


def load_kineto(path: Path) -> Trace:
    """Decode one Kineto Chrome trace (cached as a pickle under CACHE)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    key = CACHE / (re.sub(r"[^A-Za-z0-9]+", "_", str(path)) + ".pkl")
    if key.exists() and key.stat().st_mtime >= path.stat().st_mtime:
        with key.open("rb") as f:
            return pickle.load(f)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    meta = {k: v for k, v in doc.items() if k in ("distributedInfo", "schemaVersion")}
    events = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        kind = KIND_OF_CAT.get(str(e.get("cat", "")).lower(), "other")
        args = e.get("args") or {}
        start = _ns(e["ts"])
        end = start + _ns(e.get("dur", 0))
        kept = {k: args[k] for k in KEEP_ARGS if k in args}
        events.append((kind, e.get("name", ""), e.get("pid"), e.get("tid"), start, end, kept))
    events.sort(key=lambda t: (t[4], -t[5]))
    trace = Trace(str(path), meta, events)
    with key.open("wb") as f:
        pickle.dump(trace, f)
    return trace


def sqlite_tables(path: Path) -> set[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = {r[0] for r in con.execute("select name from sqlite_master where type in ('table','view')")}
    con.close()
    return names


# ----------------------------------------------------------------- intervals
def union(intervals) -> list[tuple[int, int]]:
    """Sorted disjoint union of (start, end) pairs."""
    out: list[list[int]] = []
    for s, e in sorted((s, e) for s, e in intervals if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(u) -> int:
    return sum(e - s for s, e in u)


def clip(u, lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(s, lo), min(e, hi)) for s, e in u if e > lo and s < hi]


def intersect(a, b) -> list[tuple[int, int]]:
    """Intersection of two disjoint sorted unions."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a, b) -> list[tuple[int, int]]:
    """a minus b (both disjoint sorted unions)."""
    out = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def gaps(u, lo: int, hi: int) -> list[tuple[int, int]]:
    """Idle gaps of a union inside [lo, hi)."""
    return subtract([(lo, hi)], clip(u, lo, hi))


def is_comm_kernel(name: str) -> bool:
    return bool(COMM_KERNEL.search(name))


def gpu_shares(trace_events, windows) -> dict[str, float]:
    """Shares (%) of the summed windows: compute, exposed comm, memory (not under kernels), idle.

    Precedence for overlapping time: compute > communication > copies/sets > idle, so the four
    sum to 100. GPU-side syncs (cuda_sync) are not activity.
    """
    ker = [(e[4], e[5]) for e in trace_events if e[0] == "kernel"]
    comm = union((e[4], e[5]) for e in trace_events if e[0] == "kernel" and is_comm_kernel(e[1]))
    comp = union((e[4], e[5]) for e in trace_events if e[0] == "kernel" and not is_comm_kernel(e[1]))
    mem = union((e[4], e[5]) for e in trace_events if e[0] in ("memcpy", "memset"))
    busy = union(ker + mem)
    total = sum(hi - lo for lo, hi in windows)
    c = sum(length(clip(comp, lo, hi)) for lo, hi in windows)
    x = sum(length(clip(subtract(comm, comp), lo, hi)) for lo, hi in windows)
    m = sum(length(clip(subtract(mem, union(comp + comm)), lo, hi)) for lo, hi in windows)
    b = sum(length(clip(busy, lo, hi)) for lo, hi in windows)
    return {
        "window_ms": total / 1e6,
        "compute_pct": 100 * c / total,
        "comm_exposed_pct": 100 * x / total,
        "memory_pct": 100 * m / total,
        "idle_pct": 100 * (total - b) / total,
    }


def load_nsys(path: Path) -> dict[int, Trace]:  # noqa: PLR0912
    """Decode an nsys SQLite export into one Trace per process (by globalPid order), cached.

    GPU rows take ``pid = deviceId`` and ``tid = streamId``; host rows (runtime calls, NVTX
    ranges) take ``pid = globalPid`` and ``tid = globalTid``. CUPTI synchronization rows are
    kind ``sync``. Times are ns from the session start.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    key = CACHE / (re.sub(r"[^A-Za-z0-9]+", "_", str(path)) + ".pkl")
    if key.exists() and key.stat().st_mtime >= path.stat().st_mtime:
        with key.open("rb") as f:
            return pickle.load(f)
    tables = sqlite_tables(path)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(con.execute("select id, value from StringIds"))
    by_pid: dict[int, list[tuple]] = {}

    def add(gpid: int, row: tuple) -> None:
        by_pid.setdefault(gpid, []).append(row)

    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        for s, e, dev, stream, corr, gpid, nid in con.execute(
            "select start, end, deviceId, streamId, correlationId, globalPid, demangledName "
            "from CUPTI_ACTIVITY_KIND_KERNEL"
        ):
            add(gpid, ("kernel", names.get(nid, str(nid)), dev, stream, s, e, {"correlation": corr}))
    kinds = {
        1: "HtoD",
        2: "DtoH",
        8: "DtoD",
        9: "HtoH",
        10: "PtoP",
    }
    mem = {0: "Pageable", 1: "Pinned", 2: "Device"}
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        for s, e, dev, stream, corr, gpid, nbytes, ck, sk, dk in con.execute(
            "select start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind "
            "from CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            name = f"Memcpy {kinds.get(ck, ck)} ({mem.get(sk, sk)} -> {mem.get(dk, dk)})"
            add(gpid, ("memcpy", name, dev, stream, s, e, {"correlation": corr, "bytes": nbytes}))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        for s, e, dev, stream, corr, gpid, nbytes in con.execute(
            "select start, end, deviceId, streamId, correlationId, globalPid, bytes from CUPTI_ACTIVITY_KIND_MEMSET"
        ):
            add(gpid, ("memset", "Memset", dev, stream, s, e, {"correlation": corr, "bytes": nbytes}))
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
        sync_names = (
            dict(con.execute("select id, label from ENUM_CUPTI_SYNC_TYPE")) if "ENUM_CUPTI_SYNC_TYPE" in tables else {}
        )
        for s, e, dev, stream, corr, gpid, st in con.execute(
            "select start, end, deviceId, streamId, correlationId, globalPid, syncType "
            "from CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        ):
            add(gpid, ("sync", sync_names.get(st, str(st)), dev, stream, s, e, {"correlation": corr}))
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        for s, e, gtid, corr, nid in con.execute(
            "select start, end, globalTid, correlationId, nameId from CUPTI_ACTIVITY_KIND_RUNTIME"
        ):
            gpid = (gtid >> 24) << 24
            add(gpid, ("runtime", names.get(nid, str(nid)), gpid, gtid, s, e, {"correlation": corr}))
    if "NVTX_EVENTS" in tables:
        for s, e, et, text, tid_, gtid, dom in con.execute(
            "select start, end, eventType, text, textId, globalTid, domainId from NVTX_EVENTS"
        ):
            if e is None or gtid is None:
                continue
            name = text if text is not None else names.get(tid_, "")
            gpid = (gtid >> 24) << 24
            add(gpid, ("cpu", name, gpid, gtid, s, e, {"nvtx_type": et, "domain": dom}))
    con.close()
    out = {}
    gpu_pids = sorted(p for p, rows in by_pid.items() if any(r[0] == "kernel" for r in rows))
    for i, gpid in enumerate(gpu_pids):
        rows = sorted(by_pid[gpid], key=lambda t: (t[4], -t[5]))
        out[i] = Trace(f"{path}#pid{gpid}", {"globalPid": gpid}, rows)
    with key.open("wb") as f:
        pickle.dump(out, f)
    return out
