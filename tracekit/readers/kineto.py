"""Read one Kineto (torch.profiler) Chrome trace, ``.json`` or ``.json.gz``, into columns.

Decoding is typed (msgspec structs that keep only the fields the analyses use, with the
garbage collector off for them), then each field becomes one column; no per-event dict
survives the function. Timestamps become int64 nanoseconds: Kineto writes float
microseconds, so they are converted once here, relative to an integer base to keep
nanosecond precision beyond float64's 2**53.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any, Final

import msgspec
import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.classify import category_expr
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


class _Args(msgspec.Struct, gc=False):
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


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: _Args | None = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]
    distributedInfo: dict[str, Any] | None = None
    deviceProperties: list[dict[str, Any]] | None = None
    schemaVersion: Any = None


# The lenient variant accepts any JSON type in any field; used only when the typed decoder
# rejects a file (a string where an int belongs, say), and normalized column by column.
class _LooseArgs(msgspec.Struct, gc=False):
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


_DECODER: Final = msgspec.json.Decoder(_Trace | list[_Event])
_LOOSE_DECODER: Final = msgspec.json.Decoder(_LooseTrace | list[_LooseEvent])
_ARG_FIELDS: Final = (
    "external_id",
    "external_id_2021",
    "correlation",
    "device",
    "stream",
    "bytes",
    "coll_name",
    "msg_nelems",
    "pg_name",
    "group_size",
)


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
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceReadError(
                f"truncated or corrupt gzip ({exc}); was the profiler stopped mid-write?",
                path=path,
            ) from None
        if not data.strip():
            raise TraceReadError("empty file (after gunzip)", path=path)
    return data


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
    )


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


def _column(values: list[Any], dtype: pl.DataType) -> pl.Series:
    """A column of ``dtype`` from decoded values, tolerating mixed JSON types."""
    series = pl.Series(values, strict=False)
    if dtype.is_integer() and series.dtype == pl.String:
        series = series.str.extract(r"(-?\d+)\s*$")
    out: pl.Series = series.cast(dtype, strict=False)
    return out


def _to_frame(raw: list[Any]) -> pl.DataFrame:
    """Columns from decoded events; keeps durations ('X') and instants ('i', 'I')."""
    keep = [e for e in raw if e.ph in ("X", "i", "I") and e.ts is not None]
    args = [e.args for e in keep]
    cols: dict[str, pl.Series] = {
        "ph": _column([e.ph for e in keep], pl.String()),
        "cat": _column([e.cat for e in keep], pl.String()),
        "name": _column([e.name for e in keep], pl.String()),
        "pid": _column([e.pid for e in keep], pl.Int64()),
        "tid": _column([e.tid for e in keep], pl.Int64()),
        "ts": _column([e.ts for e in keep], pl.Float64()),
        "dur": _column([e.dur for e in keep], pl.Float64()),
    }
    for fname in _ARG_FIELDS:
        dtype = pl.String() if fname in ("coll_name", "pg_name") else pl.Int64()
        cols[fname] = _column([None if a is None else getattr(a, fname) for a in args], dtype)
    del keep, args
    return _normalize(pl.DataFrame(cols))


def _normalize(df: pl.DataFrame) -> pl.DataFrame:
    """Raw Kineto columns -> the event schema (ns times, kinds, GPU device/stream)."""
    base = int(df["ts"].min() or 0)  # type: ignore[arg-type]
    cat = pl.col("cat").str.to_lowercase()
    kind = (
        pl.when(pl.col("ph") != "X")
        .then(pl.lit("instant"))
        .when(pl.col("name").str.starts_with(_STEP_PREFIX) & cat.is_in(["cpu_op", "operator", "user_annotation"]))
        .then(pl.lit("step"))
        .otherwise(cat.replace_strict(CATEGORY_KINDS, default="other"))
    )
    start = ((pl.col("ts") - base) * 1000).round().cast(pl.Int64) + base * 1000
    dur = (pl.col("dur").fill_null(0).clip(lower_bound=0) * 1000).round().cast(pl.Int64)
    is_gpu = pl.col("kind").is_in(GPU_KINDS)
    out = (
        df.filter(cat.is_null() | ~cat.is_in(_SKIPPED_CATEGORIES))
        .with_columns(kind=kind, start_ns=start, dur_ns=dur)
        .with_columns(
            end_ns=pl.col("start_ns") + pl.col("dur_ns"),
            device=pl.when(is_gpu).then(pl.coalesce("device", "pid")),
            stream=pl.when(is_gpu).then(pl.coalesce("stream", "tid")),
            external_id=pl.coalesce("external_id", "external_id_2021"),
            rank=pl.lit(None, dtype=pl.Int32),
        )
    )
    out = out.select([pl.col(c).cast(t) for c, t in SCHEMA.items() if c != "category"]).with_columns(category_expr())
    return out.select(list(SCHEMA)).sort("start_ns")
