"""Read one Kineto (torch.profiler) Chrome trace, ``.json`` or ``.json.gz``, into columns.

Decoding is typed: msgspec structs that keep only the fields the analyses use, untracked by
the garbage collector, in a union tagged by the event phase so that flows, metadata and
counters (a third of a training trace) decode into empty structs with their fields skipped.
Each field then becomes one column in one C-level pass (``map(attrgetter(...))``), with
no Python loop over events; no per-event object survives the function. Timestamps become
int64 nanoseconds: Kineto writes float microseconds, so they are converted once here,
relative to an integer base to keep nanosecond precision beyond float64's 2**53.
"""

from __future__ import annotations

import importlib
import zlib
from functools import reduce
from itertools import compress, repeat
from operator import attrgetter, or_
from pathlib import Path
from typing import Any, Final

import msgspec
import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.classify import category_expr
from tracekit.model.run import ProcessGroup
from tracekit.model.schema import GPU_KINDS, SCHEMA
from tracekit.readers.trace import RankTrace

#: Kineto category (lower-cased) -> event kind, for today's names and the 2021 ones.
CATEGORY_KINDS: Final[dict[str, str]] = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "annotation",
    "python_function": "python",
    "python": "python",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_sync": "sync",
    "gpu_user_annotation": "gpu_annotation",
}
#: Categories that carry no event of interest (the profiler's own span).
_SKIPPED_CATEGORIES: Final = ("trace",)
_STEP_PREFIX: Final = "ProfilerStep#"


def _inflate_module() -> Any:
    """ISA-L's zlib (``isal``, a dependency: inflates twice as fast), else zlib: one API."""
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:
        return zlib


_INFLATE: Final = _inflate_module()
#: What inflating corrupt or truncated gzip data raises.
GZIP_ERRORS: Final[tuple[type[BaseException], ...]] = (EOFError, OSError, zlib.error, _INFLATE.error)
#: What building a column of one dtype from values of other JSON types raises.
_MIXED: Final = (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError)
#: Integer columns that Kineto writes as text in some rows (``"pid": "Spans"``).
_OFTEN_TEXT: Final = ("pid", "tid")
#: The integer in a text id such as "stream 7".
_INT_IN_TEXT: Final = r"(-?\d+)\s*$"


class _Args(msgspec.Struct, gc=False, frozen=True):
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    correlation: int | None = None
    device: int | None = None
    stream: int | None = None
    bytes: int | None = None
    coll_name: str | None = msgspec.field(default=None, name="Collective name")
    msg_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    pg_name: str | None = msgspec.field(default=None, name="Process Group Name")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    seq: int | None = msgspec.field(default=None, name="Seq")


#: The arguments of an event that has none: one shared instance, so that every event has
#: ``args`` and a column is one C-level ``attrgetter("args.<field>")`` pass over the events.
_NO_ARGS: Final = _Args()


# Events are a union tagged by ``ph``: durations ("X") and instants ("i", "I") decode into
# full structs; every other phase of the Chrome trace format (flows, metadata, counters...)
# into an empty struct, its fields skipped unread. A phase outside the format fails the
# typed decode, and the file takes the lenient path below.
class _Event(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: _Args = _NO_ARGS


class _Instant(_Event, tag="i"):
    pass


class _InstantLegacy(_Instant, tag="I"):
    pass


#: The phases of the Chrome trace event format that carry nothing tracekit reads.
_OTHER_PHASES: Final = "BECbneSTpFstfPONDMVvRc()"
_SKIPPED_EVENTS: Final = tuple(
    msgspec.defstruct(f"_Skipped{i}", [], tag_field="ph", tag=ph, gc=False) for i, ph in enumerate(_OTHER_PHASES)
)
_ANY_EVENT: Any = reduce(or_, (_Event, _Instant, _InstantLegacy, *_SKIPPED_EVENTS))
_Trace: Any = msgspec.defstruct(
    "_Trace",
    [
        ("traceEvents", list[_ANY_EVENT]),
        ("distributedInfo", dict[str, Any] | None, None),
        ("deviceProperties", list[dict[str, Any]] | None, None),
        ("schemaVersion", Any, None),
    ],
)


# The lenient variant accepts any JSON type in any field; used only when the typed decoder
# rejects a file (a string where an int belongs, say), and normalized column by column.
class _LooseArgs(msgspec.Struct, gc=False, frozen=True):
    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_2021: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    coll_name: Any = msgspec.field(default=None, name="Collective name")
    msg_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    group_size: Any = msgspec.field(default=None, name="Group size")
    seq: Any = msgspec.field(default=None, name="Seq")


_NO_LOOSE_ARGS: Final = _LooseArgs()


class _LooseEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: _LooseArgs | None = None


class _LooseTrace(msgspec.Struct):
    traceEvents: list[_LooseEvent]
    distributedInfo: Any = None
    deviceProperties: Any = None
    schemaVersion: Any = None


_DECODER: Final = msgspec.json.Decoder(_Trace | list[_ANY_EVENT])
_LOOSE_DECODER: Final = msgspec.json.Decoder(_LooseTrace | list[_LooseEvent])
_KEPT_PHASES: Final = ("X", "i", "I")
_STRING_ARGS: Final = ("coll_name", "pg_name")
_ARG_FIELDS: Final = tuple(_Args.__struct_fields__)
#: The raw columns of an event's own fields, and of its ``args``: name -> dtype.
_EVENT_COLUMNS: Final[dict[str, pl.DataType]] = {
    "cat": pl.String(),
    "name": pl.String(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
}
_ARG_COLUMNS: Final[dict[str, pl.DataType]] = {f: pl.String() if f in _STRING_ARGS else pl.Int64() for f in _ARG_FIELDS}


def read_bytes(path: Path) -> bytes:
    """The decompressed bytes of ``path``; errors name the file and the reason."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceReadError(f"cannot read file ({exc.strerror})", path=path) from None
    if not data:
        raise TraceReadError("empty file", path=path)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gunzip(data)
        except GZIP_ERRORS as exc:
            raise TraceReadError(
                f"truncated or corrupt gzip ({exc}); was the profiler stopped mid-write?",
                path=path,
            ) from None
        if not data.strip():
            raise TraceReadError("empty file (after gunzip)", path=path)
    return data


def gunzip(data: bytes) -> bytes:
    """Decompress gzip ``data``, every member of it, checking each member's CRC.

    One pass per member, which checks the CRC as it inflates (``gzip.decompress`` computes
    it in a second pass over the output), with ISA-L when it is installed (``isal``: twice
    as fast as zlib). Raises one of :data:`GZIP_ERRORS` for corrupt or truncated input.
    """
    parts = []
    while data:
        inflater = _INFLATE.decompressobj(wbits=31)
        parts.append(inflater.decompress(data))
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        data = inflater.unused_data.lstrip(b"\x00")  # members may be followed by zero padding
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_kineto(path: str | Path) -> RankTrace:
    """Decode one Kineto trace file into the event schema (without ``rank``)."""
    path = Path(path)
    data = read_bytes(path)
    try:
        trace: Any = _DECODER.decode(data)
    except msgspec.ValidationError:
        trace = _decode_loose(data, path)
    except msgspec.DecodeError as exc:
        raise TraceReadError(_json_problem(exc), path=path) from None
    del data
    if isinstance(trace, list):
        raw_events, info, props, version = trace, {}, [], None
    else:
        raw_events, version = trace.traceEvents, trace.schemaVersion
        info = trace.distributedInfo if isinstance(trace.distributedInfo, dict) else {}
        props = trace.deviceProperties if isinstance(trace.deviceProperties, list) else []
    events = _to_frame(raw_events)
    del raw_events, trace
    return RankTrace(
        path=str(path),
        events=events,
        rank=_as_int(info.get("rank")),
        world_size=_as_int(info.get("world_size")),
        backend=str(info["backend"]) if info.get("backend") else None,
        devices=tuple(dict.fromkeys(str(p["name"]) for p in props if isinstance(p, dict) and p.get("name"))),
        schema_version=None if version is None else str(version),
        process_groups=process_groups(info.get("pg_config")),
    )


def process_groups(config: Any) -> tuple[ProcessGroup, ...]:
    """The groups of ``distributedInfo.pg_config`` (a list of ``{pg_name, ranks, pg_desc}``).

    Entries without a name or with ranks that are not integers are left out.
    """
    if not isinstance(config, list):
        return ()
    groups = []
    for entry in config:
        if not isinstance(entry, dict) or entry.get("pg_name") is None or not isinstance(entry.get("ranks"), list):
            continue
        ranks = [_as_int(r) for r in entry["ranks"]]
        if any(r is None for r in ranks):
            continue
        desc = entry.get("pg_desc")
        groups.append(
            ProcessGroup(
                name=str(entry["pg_name"]),
                ranks=tuple(r for r in ranks if r is not None),
                description=str(desc) if desc is not None else "",
            )
        )
    return tuple(groups)


def _decode_loose(data: bytes, path: Path) -> Any:
    try:
        return _LOOSE_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceReadError(
            f"not a Kineto trace: a JSON document without a traceEvents list ({exc})", path=path
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceReadError(_json_problem(exc), path=path) from None


def _json_problem(exc: msgspec.DecodeError) -> str:
    text = str(exc)
    if "truncated" in text:
        return "truncated JSON; was the profiler stopped mid-write?"
    return f"not valid JSON ({text})"


def _as_int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _column(name: str, values: list[Any], dtype: pl.DataType) -> pl.Series:
    """A column of ``dtype`` from decoded values; mixed JSON types take a tolerant path."""
    if name not in _OFTEN_TEXT:
        try:
            return pl.Series(name, values, dtype=dtype, strict=True)
        except _MIXED:
            pass
    if dtype.is_integer():
        try:
            ints: pl.Series = _ints_and_text(name, values).cast(dtype, strict=False)
            return ints
        except _MIXED:
            pass
    series = pl.Series(name, values, strict=False)
    if dtype.is_integer() and series.dtype == pl.String:
        series = series.str.extract(_INT_IN_TEXT)
    out: pl.Series = series.cast(dtype, strict=False)
    return out


def _ints_and_text(name: str, values: list[Any]) -> pl.Series:
    """Integers that some rows write as text (``"pid": "Spans"``, ``"tid": "stream 7"``).

    The text values (found by one C-level ``map(isinstance, ...)`` pass) are taken out of
    ``values`` and parsed on their own (their last run of digits, else null), so that the
    rest still builds on the fast path.
    """
    at = pl.Series(list(map(isinstance, values, repeat(str))), dtype=pl.Boolean).arg_true().to_list()
    text = pl.Series([values[i] for i in at], dtype=pl.String)
    for i in at:
        values[i] = None
    ints = pl.Series(name, values, dtype=pl.Int64, strict=True)
    return ints.scatter(at, text.str.extract(_INT_IN_TEXT).cast(pl.Int64, strict=False)) if at else ints


def _to_frame(raw: list[Any]) -> pl.DataFrame:
    """Columns from decoded events; keeps durations ('X') and instants ('i', 'I').

    Each column is one ``map(attrgetter(field), ...)`` pass, which runs in C, as does
    picking the kept events out of the tagged union (``compress`` over ``isinstance``).
    """
    if raw and isinstance(raw[0], _LooseEvent):
        return _loose_frame(raw)
    events = list(compress(raw, map(isinstance, raw, repeat(_Event))))
    instant = pl.Series("instant", list(map(isinstance, events, repeat(_Instant))), dtype=pl.Boolean)
    return _normalize(pl.DataFrame([instant, *_columns(events)]))


def _columns(events: list[Any]) -> list[pl.Series]:
    """The raw columns of ``events`` (typed or loose structs), in ``_EVENT_COLUMNS``, ``_ARG_COLUMNS`` order."""
    cols = [_column(name, list(map(attrgetter(name), events)), dtype) for name, dtype in _EVENT_COLUMNS.items()]
    args = list(map(attrgetter("args"), events))  # a pass over the args alone: fewer cache misses
    cols += [_column(name, list(map(attrgetter(name), args)), dtype) for name, dtype in _ARG_COLUMNS.items()]
    return cols


def _loose_frame(raw: list[_LooseEvent]) -> pl.DataFrame:
    """The same columns from leniently decoded events (a rare path: any JSON type anywhere)."""
    events = [e if e.args is not None else msgspec.structs.replace(e, args=_NO_LOOSE_ARGS) for e in raw]
    ph = _column("ph", list(map(attrgetter("ph"), events)), pl.String())
    return _normalize(
        pl.DataFrame([ph, *_columns(events)])
        .filter(pl.col("ph").is_in(_KEPT_PHASES))
        .select(pl.col("ph").ne("X").alias("instant"), *_EVENT_COLUMNS, *_ARG_COLUMNS)
    )


def _normalize(df: pl.DataFrame) -> pl.DataFrame:
    """Raw Kineto columns -> the event schema (ns times, kinds, GPU device/stream), one query."""
    base = int(df["ts"].min() or 0)  # type: ignore[arg-type]
    cat = pl.col("cat").str.to_lowercase()
    kind = (
        pl.when(pl.col("instant"))
        .then(pl.lit("instant"))
        .when(pl.col("name").str.starts_with(_STEP_PREFIX) & cat.is_in(["cpu_op", "operator", "user_annotation"]))
        .then(pl.lit("step"))
        .otherwise(cat.replace_strict(CATEGORY_KINDS, default="other"))
    )
    start = ((pl.col("ts") - base) * 1000).round().cast(pl.Int64) + base * 1000
    dur = (pl.col("dur").fill_null(0).clip(lower_bound=0) * 1000).round().cast(pl.Int64)
    is_gpu = pl.col("kind").is_in(GPU_KINDS)
    return (
        df.lazy()
        .filter(pl.col("ts").is_not_null(), cat.is_null() | ~cat.is_in(_SKIPPED_CATEGORIES))
        .with_columns(kind=kind, start_ns=start, dur_ns=dur)
        .with_columns(
            end_ns=pl.col("start_ns") + pl.col("dur_ns"),
            device=pl.when(is_gpu).then(pl.coalesce("device", "pid")),
            stream=pl.when(is_gpu).then(pl.coalesce("stream", "tid")),
            external_id=pl.coalesce("external_id", "external_id_2021"),
            rank=pl.lit(None, dtype=pl.Int32),
        )
        .select([pl.col(c).cast(t) for c, t in SCHEMA.items() if c != "category"])
        .with_columns(category_expr())
        .select(list(SCHEMA))
        .sort("start_ns")
        .collect()
    )
