"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) into the event schema.

One SQL query per table, names joined to ``StringIds`` in SQL; every other transform is a
polars expression. Tables exist only when they have rows (and columns drift between export
versions), so each query is built from the tables and columns the file has.

* GPU: kernels (demangled name; ``threads``: ``gridX * gridY * gridZ * blockX * blockY *
  blockZ``), memcpy (``Memcpy DtoH (Device -> Pageable)``..., bytes: the Kineto name, with the
  memory kinds where the export records them), memset, synchronization (``Stream Sync``...);
  ``device`` is the CUDA device id, ``stream`` the stream id, ``correlation`` links each to the
  CUDA runtime or driver call that launched it.
* Host: CUDA runtime and driver calls (``cudaLaunchKernel``: the ``_v7000`` suffix is
  dropped), NVTX push/pop and start/end ranges (``annotation``) and marks (``instant``).
* Memory: CUDA allocations and frees (``CUDA_GPU_MEMORY_USAGE_EVENTS``, when recorded) become
  each rank's counters (see :mod:`tracekit.readers.nsys_memory`).
* NVTX ranges in the ``tracekit`` domain are tracekit's phases (``forward`` becomes
  ``tracekit.phase/forward``), ``ProfilerStep#N`` (any domain) and ``step#N`` (tracekit
  domain, name kept) are steps; other ranges keep their text, without the ``, seq = N, op_id = N``
  suffix that ``torch.autograd.profiler.emit_nvtx`` adds, so that they aggregate by name.
* ``pid = (globalTid >> 24) & 0xFFFFFF``, ``tid = globalTid & 0xFFFFFF``; times are ns after
  ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``, so files of one job align.

Each process with GPU work is a rank: several in one file are ranked in the order of their
first GPU (then pid); a lone one takes its rank from the recorded environment, arguments or
file name (see :func:`tracekit.readers.nsys_meta.rank_hint`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.by_kind import ByKind
from tracekit.model.classify import with_category
from tracekit.model.run import RankFound
from tracekit.model.schema import GPU_ACTIVITY_KINDS, GPU_KINDS, SCHEMA, THREADS_LIMIT, UNNAMED
from tracekit.readers.columns import rows_frame
from tracekit.readers.nsys_memory import memory_rows
from tracekit.readers.nsys_meta import Export, ExportMeta, device_memory, device_names, rank_hint, read_meta
from tracekit.readers.plausible import Window, screen, short_device_fault
from tracekit.readers.ranks import is_rank
from tracekit.readers.trace import RankTrace

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
CLOCK: Final = "nsys: ns from session start (+ TARGET_INFO_SESSION_START_TIME)"
CLOCK_UNALIGNED: Final = "nsys: ns from session start (no TARGET_INFO_SESSION_START_TIME: not aligned across files)"
#: The NVTX domain of tracekit's own phase ranges.
TRACEKIT_DOMAIN: Final = "tracekit"
PHASE_PREFIX: Final = "tracekit.phase/"
#: tracekit's own ranges named in full (``tracekit.capture/device_sync``): not a phase.
OWN_PREFIX: Final = "tracekit."

#: NVTX_EVENTS.eventType: push/pop and start/end ranges (NVTX, NVTXt), and marks.
NVTX_RANGE_TYPES: Final = (59, 60, 70, 71)
NVTX_MARK_TYPES: Final = (34, 65)
NVTX_DOMAIN_CREATE: Final = 75
#: CUPTI_ACTIVITY_KIND_RUNTIME.eventClass of CUDA runtime and driver calls; older exports
#: also hold a second copy of each runtime call under another class, which is dropped.
RUNTIME_CLASS, DRIVER_CLASS = 0, 1
#: ENUM_CUDA_MEMCPY_OPER, as Kineto spells directions.
COPY_KINDS: Final = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "HtoD (unified)",
    12: "DtoH (unified)",
    13: "DtoD (unified)",
}
#: ENUM_CUDA_MEM_KIND (``srcKind``, ``dstKind`` of copies), as Kineto spells memory kinds;
#: the same codes in exports that have no such table (checked on a 2.9 export).
MEMORY_KINDS: Final = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
}
#: ENUM_CUPTI_SYNC_TYPE, with Kineto's cuda_sync names.
SYNC_NAMES: Final = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_EMIT_NVTX_SUFFIX: Final = r", (?:seq|op_id|sizes|input_op_ids) = .*$"
_GLOBAL_ID: Final = 1 << 24

#: The columns every query returns, before names and kinds are finished in polars.
_RAW: Final[dict[str, pl.DataType]] = {
    "kind": pl.String(),
    "name": pl.String(),
    "code": pl.Int64(),
    "domain": pl.String(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "gid": pl.Int64(),
    "device": pl.Int64(),
    "stream": pl.Int64(),
    "correlation": pl.Int64(),
    "bytes": pl.Int64(),
    "src_kind": pl.Int64(),
    "dst_kind": pl.Int64(),
    "threads": pl.Int64(),
}


@dataclass(frozen=True)
class _GpuTable:
    kind: str
    table: str
    #: StringIds id columns of the name, best first
    name_ids: tuple[str, ...] = ()
    #: the column of an enum code that names the row (copy direction, sync type)
    code: str | None = None
    bytes: str | None = None
    #: the columns of the source and destination memory kinds (copies)
    kinds: tuple[str, str] | None = None
    #: the columns of the launch's dimensions, whose product is its threads (kernels)
    dims: tuple[str, ...] = ()


_GPU_TABLES: Final = (
    _GpuTable(
        "kernel",
        "CUPTI_ACTIVITY_KIND_KERNEL",
        name_ids=("demangledName", "shortName"),
        dims=("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"),
    ),
    _GpuTable("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY", code="copyKind", bytes="bytes", kinds=("srcKind", "dstKind")),
    _GpuTable("memset", "CUPTI_ACTIVITY_KIND_MEMSET", bytes="bytes"),
    _GpuTable("sync", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", code="syncType"),
)
_RUNTIME: Final = "CUPTI_ACTIVITY_KIND_RUNTIME"


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with the SQLite header."""
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def read(path: Path, *, cache_root: Path | None = None, jobs: int = 1) -> list[RankTrace]:
    """The registry's reader (:mod:`tracekit.readers.formats`): an export, one trace per process."""
    del cache_root, jobs  # nothing to keep on the way; one process reads an export
    return read_nsys(path)


def read_nsys(path: str | Path, *, shown: str | Path | None = None) -> list[RankTrace]:
    """Read an Nsight Systems SQLite export: one :class:`RankTrace` per process with GPU work.

    ``shown`` is the name to report and to take a rank from (the ``.nsys-rep`` a cached
    export came from); it defaults to ``path``. Errors are :class:`TraceReadError`.
    """
    path = Path(path)
    name = str(shown if shown is not None else path)
    _check_file(path, name)
    db = Export(path, shown=name)
    try:
        if not any(t.startswith("CUPTI_ACTIVITY_KIND_") or t == "NVTX_EVENTS" for t in db.tables):
            raise TraceReadError("not an Nsight Systems export (no CUPTI/NVTX tables)", path=name)
        meta = read_meta(db)
        raw = pl.concat([*(_gpu_rows(db, spec) for spec in _GPU_TABLES), _runtime_rows(db), _nvtx_rows(db)])
        memory = memory_rows(db, epoch_ns=meta.epoch_ns or 0)
    finally:
        db.close()
    if raw.height == 0:
        raise TraceReadError(
            "no CUDA or NVTX events in this export (profile with `nsys profile --trace=cuda,nvtx`)", path=name
        )
    raw, dropped, window = screen(
        raw, start=pl.col("start_ns"), end=pl.col("end_ns"), needs_extent=True, unit_ns=1, unit="ns"
    )
    if raw.height == 0:
        raise TraceReadError(dropped.nothing_left(), path=name)
    device = raw.filter(pl.col("kind").is_in(GPU_ACTIVITY_KINDS)).select(pl.col("end_ns") - pl.col("start_ns"))
    if (fault := dropped.device_fault(device.height)) is not None:
        raise TraceReadError(fault, path=name)
    if (fault := short_device_fault(device.to_series(), "ns")) is not None:
        raise TraceReadError(fault, path=name)
    if window is not None:  # memory rows are on the epoch clock already
        epoch = meta.epoch_ns or 0
        memory, dropped_memory, _ = screen(
            memory,
            start=pl.col("time_ns"),
            end=pl.col("time_ns"),
            needs_extent=False,
            unit_ns=1,
            unit="ns",
            window=Window(window.center + epoch, window.bound),
        )
        dropped += dropped_memory
    return [
        dataclasses.replace(t, warnings=meta.problems + dropped.warnings())
        for t in _split_ranks(_normalize(raw, meta.epoch_ns or 0), memory, meta, name)
    ]


def _check_file(path: Path, name: str) -> None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceReadError(f"cannot read file ({exc.strerror})", path=name) from None
    if size == 0:
        raise TraceReadError("empty file", path=name)
    if not is_sqlite(path):
        raise TraceReadError(
            "not a SQLite database; export Nsight Systems reports with `nsys export --type sqlite`", path=name
        )


def _frame(db: Export, sql: str, columns: list[str]) -> pl.DataFrame:
    """The rows of ``sql`` (in ``columns`` order) as a frame with every column of ``_RAW``."""
    df = db.frame(sql, {c: _RAW[c] for c in columns}) if sql else rows_frame([], {c: _RAW[c] for c in columns})
    return df.with_columns(pl.lit(None, dtype=_RAW[c]).alias(c) for c in _RAW if c not in columns).select(list(_RAW))


def _col(cols: frozenset[str], name: str | None) -> str:
    return f"t.{name}" if name is not None and name in cols else "NULL"


def _gpu_rows(db: Export, spec: _GpuTable) -> pl.DataFrame:
    """Kernels, copies, sets or syncs: one query, names joined to StringIds."""
    cols = db.columns(spec.table)
    names = ["name", "code", "start_ns", "end_ns", "gid", "device", "stream", "correlation", "bytes"]
    names += ["src_kind", "dst_kind", "threads"]
    if not cols:
        return _frame(db, "", names)
    present = [c for c in spec.name_ids if c in cols]
    joins = "".join(f" LEFT JOIN {db.strings} s{i} ON s{i}.id = t.{c}" for i, c in enumerate(present))
    name = f"COALESCE({', '.join(f's{i}.value' for i in range(len(present)))}, NULL)" if present else "NULL"
    sql = (
        f"SELECT {name}, {_col(cols, spec.code)}, t.start, t.end, {_col(cols, 'globalPid')}, "
        f"{_col(cols, 'deviceId')}, {_col(cols, 'streamId')}, {_col(cols, 'correlationId')}, "
        f"{_col(cols, spec.bytes)}, {', '.join(_col(cols, k) for k in spec.kinds or (None, None))}, "
        f"{_threads(cols, spec.dims)} FROM {spec.table} t{joins}"
    )
    return _frame(db, sql, names).with_columns(kind=pl.lit(spec.kind))


def _threads(cols: frozenset[str], dims: tuple[str, ...]) -> str:
    """The SQL of a launch's threads, the product of its dimensions (NULL where a column is
    missing, a dimension is not a whole number, or the product is negative or too large)."""
    if not dims or not set(dims) <= cols:
        return "NULL"
    whole = " AND ".join(f"typeof(t.{d}) = 'integer'" for d in dims)
    product = " * ".join(f"t.{d}" for d in dims)  # SQLite turns an overflow into a REAL: out of range
    return f"CASE WHEN {whole} AND ({product}) BETWEEN 0 AND {THREADS_LIMIT - 1} THEN {product} END"


def _runtime_rows(db: Export) -> pl.DataFrame:
    """CUDA runtime and driver calls (kind from eventClass; ``code`` holds it)."""
    cols = db.columns(_RUNTIME)
    names = ["name", "code", "start_ns", "end_ns", "gid", "correlation"]
    if not cols:
        return _frame(db, "", names)
    cls = _col(cols, "eventClass")
    known = f"{cls} IN ({RUNTIME_CLASS}, {DRIVER_CLASS})"
    sql = (
        f"SELECT s.value, {cls}, t.start, t.end, {_col(cols, 'globalTid')}, {_col(cols, 'correlationId')} "
        f"FROM {_RUNTIME} t LEFT JOIN {db.strings} s ON s.id = {_col(cols, 'nameId')} "
        f"WHERE {known} OR NOT EXISTS (SELECT 1 FROM {_RUNTIME} t WHERE {known})"
    )
    kind = pl.when(pl.col("code") == DRIVER_CLASS).then(pl.lit("driver")).otherwise(pl.lit("runtime"))
    return _frame(db, sql, names).with_columns(kind=kind)


def _nvtx_rows(db: Export) -> pl.DataFrame:
    """NVTX ranges and marks with their text (inline or registered) and domain name."""
    cols = db.columns("NVTX_EVENTS")
    names = ["code", "name", "domain", "start_ns", "end_ns", "gid"]
    if not {"start", "eventType"} <= cols:
        return _frame(db, "", names)
    text = f"COALESCE({_col(cols, 'text')}, s.value)"
    domain_id = _col(cols, "domainId")
    sql = (
        f"SELECT t.eventType, {text}, d.name, t.start, {_col(cols, 'end')}, {_col(cols, 'globalTid')} "
        f"FROM NVTX_EVENTS t LEFT JOIN {db.strings} s ON s.id = {_col(cols, 'textId')} "
        f"LEFT JOIN (SELECT {domain_id} AS id, MAX({text}) AS name FROM NVTX_EVENTS t "
        f"LEFT JOIN {db.strings} s ON s.id = {_col(cols, 'textId')} "
        f"WHERE t.eventType = {NVTX_DOMAIN_CREATE} GROUP BY {domain_id}) d ON d.id = {domain_id} "
        f"WHERE t.eventType IN {(*NVTX_RANGE_TYPES, *NVTX_MARK_TYPES)}"
    )
    return _nvtx_kinds(_frame(db, sql, names))


def _nvtx_kinds(df: pl.DataFrame) -> pl.DataFrame:
    """Marks -> instants; steps; tracekit-domain ranges -> phases; others keep their text."""
    mark = pl.col("code").is_in(NVTX_MARK_TYPES)
    ours = (pl.col("domain") == TRACEKIT_DOMAIN).fill_null(False)
    text = pl.col("name").str.replace(_EMIT_NVTX_SUFFIX, "").fill_null("(unnamed NVTX range)")
    step = (
        pl.when(ours)
        .then(text.str.extract(r"^(?:ProfilerStep|step)#(\d+)$"))
        .otherwise(text.str.extract(r"^ProfilerStep#(\d+)$"))
    )
    kind = (
        pl.when(mark)
        .then(pl.lit("instant"))
        .when(step.is_not_null())
        .then(pl.lit("step"))
        .otherwise(pl.lit("annotation"))
    )
    name = (
        pl.when(~mark & step.is_not_null())
        .then(text)  # ProfilerStep#N, or tracekit's step#N: how steps were found tells them apart
        .when(ours & ~text.str.starts_with(OWN_PREFIX))
        .then(pl.lit(PHASE_PREFIX) + text)
        .otherwise(text)
    )
    return (
        df.filter(mark | pl.col("end_ns").is_not_null())  # a range never closed has no extent
        .with_columns(kind=kind, name=name, end_ns=pl.col("end_ns").fill_null(pl.col("start_ns")))
        .select(list(_RAW))
    )


_MEMORY_COLUMNS: Final = ("src_kind", "dst_kind")


def _gpu_name() -> pl.Expr:
    kind, code = pl.col("kind"), pl.col("code")
    src, dst = (pl.col(c).replace_strict(MEMORY_KINDS, default=None, return_dtype=pl.String) for c in _MEMORY_COLUMNS)
    kinds = (pl.lit(" (") + src + pl.lit(" -> ") + dst + pl.lit(")")).fill_null("")
    return (
        pl.when(kind == "memcpy")
        .then(
            pl.lit("Memcpy ")
            + code.replace_strict(COPY_KINDS, default="(unknown kind)", return_dtype=pl.String)
            + kinds
        )
        .when(kind == "memset")
        .then(pl.lit("Memset (Device)"))
        .when(kind == "sync")
        .then(code.replace_strict(SYNC_NAMES, default="Sync", return_dtype=pl.String))
        .when(kind.is_in(["runtime", "driver"]))
        .then(pl.col("name").str.replace(r"_v\d+$", ""))
        .otherwise(pl.col("name"))
        .fill_null(pl.lit(UNNAMED))
    )


def _normalize(raw: pl.DataFrame, epoch_ns: int) -> pl.DataFrame:
    """Raw rows -> the event schema (without ``rank``), sorted by start."""
    gpu = pl.col("kind").is_in(GPU_KINDS)
    out = raw.with_columns(
        name=_gpu_name(),
        start_ns=pl.col("start_ns") + epoch_ns,
        end_ns=pl.max_horizontal("start_ns", "end_ns") + epoch_ns,
        pid=(pl.col("gid") // _GLOBAL_ID) % _GLOBAL_ID,
        tid=pl.when(gpu).then(None).otherwise(pl.col("gid") % _GLOBAL_ID),
        device=pl.when(gpu).then(pl.col("device")),
        stream=pl.when(gpu).then(pl.col("stream")),
        rank=pl.lit(None, dtype=pl.Int32),
    )
    out = out.with_columns(pl.lit(None).alias(c) for c in SCHEMA if c not in out.columns)
    out = with_category(out.select([pl.col(c).cast(t, strict=False) for c, t in SCHEMA.items() if c != "category"]))
    return out.select(list(SCHEMA)).sort("start_ns")


def _split_ranks(events: pl.DataFrame, memory: pl.DataFrame, meta: ExportMeta, name: str) -> list[RankTrace]:
    """One RankTrace per process with GPU work (ordered by first GPU, then pid), with its memory rows."""
    procs = (
        events.filter(pl.col("kind").is_in(GPU_ACTIVITY_KINDS))
        .group_by("pid")
        .agg(first_device=pl.col("device").min(), devices=pl.col("device").unique().sort())
        .sort("first_device", "pid", nulls_last=True)
        .select("pid", "devices")
    )
    if procs.height == 0:  # no GPU work: the process with the most events
        main = events.group_by("pid").len().sort(["len", "pid"], descending=[True, False])["pid"][0]
        procs = pl.DataFrame({"pid": [main], "devices": [[]]}, schema={"pid": pl.Int64, "devices": pl.List(pl.Int32)})
    count = procs.height
    if count > 1:
        ranks: list[tuple[int | None, RankFound]] = [
            (index, RankFound("process_order", processes=count, pid=pid)) for index, pid in enumerate(procs["pid"])
        ]
    else:  # a lone process: what the export or its name says, else load_run decides
        ranks = [rank_hint(meta, name) or (None, RankFound("none"))]
    by_pid = events.partition_by("pid", as_dict=True, maintain_order=True)
    memory_by_pid = memory.partition_by("pid", as_dict=True, maintain_order=True, include_key=False)
    traces = []
    for (pid, devices), (rank, how) in zip(procs.iter_rows(), ranks, strict=True):
        frame = by_pid.get((pid,), events.clear())
        nccl = frame.filter(pl.col("kind") == "kernel", pl.col("category") == "collective").height > 0
        traces.append(
            RankTrace(
                path=name,
                held=ByKind.taken(
                    [frame if frame["start_ns"].is_sorted() else frame.sort("start_ns", maintain_order=True)]
                ),
                counters=memory_by_pid.get((pid,), memory.drop("pid").clear()),
                rank=rank,
                world_size=count if count > 1 else _world_size(meta),
                backend="nccl" if nccl else None,
                devices=device_names(meta, pid, list(devices)),
                device_memory=device_memory(meta, pid, list(devices)),
                schema_version=meta.schema_version,
                rank_source=how,
                clock=CLOCK if meta.epoch_ns is not None else CLOCK_UNALIGNED,
                host=meta.host,
            )
        )
    return traces


def _world_size(meta: ExportMeta) -> int | None:
    value = meta.env.get("WORLD_SIZE", "")
    size = int(value) if value.isdigit() else None
    return size if is_rank(size) and size else None
