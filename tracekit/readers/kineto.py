"""Read one Kineto (torch.profiler) Chrome trace, ``.json`` or ``.json.gz``, into columns.

Decoding is typed: msgspec structs that keep only the fields the analyses use, untracked by
the garbage collector, in a union tagged by the event phase so that flows, metadata and
Chrome counter events (a third of a training trace) decode into empty structs with their
fields skipped. Instants named ``[memory]`` (written with ``profile_memory=True``) become
the rank's counters (:mod:`tracekit.model.counters`), not events; only instants decode the
memory arguments.
Each field then becomes one column in one C-level pass (``map(attrgetter(...))``), with
no Python loop over events; no per-event object survives the function. Timestamps become
int64 nanoseconds: Kineto writes float microseconds, so they are converted once here,
relative to an integer base to keep nanosecond precision beyond float64's 2**53.
"""

from __future__ import annotations

from functools import reduce
from itertools import compress, repeat
from operator import attrgetter, or_
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeGuard

import msgspec
import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.classify import category_expr
from tracekit.model.counters import COUNTER_SCHEMA, DeviceType, empty_counters
from tracekit.model.run import ProcessGroup
from tracekit.model.schema import GPU_KINDS, SCHEMA, UNNAMED
from tracekit.readers.columns import column
from tracekit.readers.compressed import read_bytes
from tracekit.readers.plausible import Dropped, screen
from tracekit.readers.ranks import is_rank
from tracekit.readers.trace import RankTrace

if TYPE_CHECKING:
    from collections.abc import Iterable

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
#: The clock of every Kineto trace, as :class:`RankTrace` reports it.
CLOCK: Final = "kineto: host clock, us -> ns"
#: The name of the instants ``profile_memory=True`` writes: counters, not events.
MEMORY_EVENT: Final = "[memory]"
#: Their ``Device Type``: c10::DeviceType -> the counters table's device types ("other" else).
DEVICE_TYPE_CODES: Final = {
    0: "cpu",
    1: "cuda",
    6: "hip",
    12: "xpu",
    13: "mps",
    15: "hpu",
    19: "mtia",
    20: "privateuse1",
}


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


class _InstantArgs(_Args, frozen=True):
    """An instant's arguments: those of a ``[memory]`` instant besides the others."""

    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    addr: int | None = msgspec.field(default=None, name="Addr")
    mem_bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")


#: The arguments of an event that has none: one shared instance, so that every event has
#: ``args`` and a column is one C-level ``attrgetter("args.<field>")`` pass over the events.
_NO_ARGS: Final = _Args()
_NO_INSTANT_ARGS: Final = _InstantArgs()


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
    args: _InstantArgs = _NO_INSTANT_ARGS  # only instants pay for the memory fields


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
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    addr: Any = msgspec.field(default=None, name="Addr")
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
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


class _TraceFields(msgspec.Struct, kw_only=True):
    """What a trace holds besides its events, of any JSON type."""

    distributedInfo: Any = None
    deviceProperties: Any = None
    schemaVersion: Any = None


class _LooseTrace(_TraceFields, kw_only=True):
    traceEvents: list[_LooseEvent]


_DECODER: Final = msgspec.json.Decoder(_Trace | list[_ANY_EVENT])
_LOOSE_DECODER: Final = msgspec.json.Decoder(_LooseTrace | list[_LooseEvent])


class _AnyTrace(_TraceFields, kw_only=True):
    traceEvents: list[Any]


#: The last resort: any JSON value as an event, salvaged one by one (:func:`_salvage`).
_ANY_DECODER: Final = msgspec.json.Decoder(_AnyTrace | list[Any])
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
#: The raw columns of a ``[memory]`` instant's args.
_MEMORY_COLUMNS: Final[dict[str, pl.DataType]] = {
    f: pl.Int64() for f in _InstantArgs.__struct_fields__ if f not in _ARG_FIELDS
}


def read(path: Path, *, cache_root: Path | None = None) -> list[RankTrace]:
    """The registry's reader (:mod:`tracekit.readers.formats`): one Kineto file is one rank."""
    del cache_root  # nothing to keep on the way
    return [read_kineto(path)]


def read_kineto(path: str | Path) -> RankTrace:
    """Decode one Kineto trace file into the event schema (without ``rank``)."""
    path = Path(path)
    data = utf8(read_bytes(path), path)
    notes: tuple[str, ...] = ()
    try:
        trace: Any = _DECODER.decode(data)
    except msgspec.ValidationError:
        trace, notes = _decode_loose(data, path)
    except msgspec.DecodeError as exc:
        raise TraceReadError(_json_problem(exc), path=path) from None
    del data
    if isinstance(trace, list):
        raw_events, info, props, version = trace, {}, [], None
    else:
        raw_events, version = trace.traceEvents, trace.schemaVersion
        info = trace.distributedInfo if isinstance(trace.distributedInfo, dict) else {}
        props = trace.deviceProperties if isinstance(trace.deviceProperties, list) else []
    events, counters, dropped = _to_frames(raw_events)
    del raw_events, trace
    rank, rank_problem = _distributed_int(info, "rank", lowest=0)
    world_size, world_problem = _distributed_int(info, "world_size", lowest=1)
    problems = tuple(p for p in (rank_problem, world_problem) if p)
    return RankTrace(
        path=str(path),
        events=events,
        counters=counters,
        rank=rank,
        world_size=world_size,
        backend=str(info["backend"]) if info.get("backend") else None,
        devices=tuple(dict.fromkeys(str(p["name"]) for p in props if isinstance(p, dict) and p.get("name"))),
        schema_version=None if version is None else str(version),
        clock=CLOCK,
        process_groups=process_groups(info.get("pg_config")),
        warnings=problems + notes + dropped.warnings(),
        device_memory=device_memory(props),
    )


#: Byte-order marks -> the encoding they announce, whose decoder reads the mark (UTF-32 first:
#: its little-endian mark starts like UTF-16's).
_BOMS: Final = (
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xfe\xff", "utf-16"),
    (b"\xff\xfe", "utf-16"),
)


def utf8(data: bytes, path: Path) -> bytes:
    """JSON text as UTF-8: a byte-order mark is dropped, UTF-16 and UTF-32 text re-encoded.

    JSON is UTF-8 (RFC 8259), but editors on Windows save it with a BOM or as UTF-16; such a
    file is still the trace it was. Without a BOM, UTF-16 shows as a NUL byte beside the
    first character.
    """
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), None)
    if encoding is None and len(data) >= 2 and b"\x00" in data[:2]:
        encoding = "utf-16-le" if data[1] == 0 else "utf-16-be"
    if encoding is None:
        return data
    if encoding == "utf-8-sig":
        return data[3:]
    try:
        return data.decode(encoding).encode()
    except UnicodeError:
        raise TraceReadError(f"not valid {encoding.upper()} text (the file starts like one)", path=path) from None


def device_memory(props: list[Any]) -> tuple[tuple[int, int], ...]:
    """(id, ``totalGlobalMem``) of each entry of ``deviceProperties`` that has both as integers
    (a device's capacity, positive); others are left out."""
    out: dict[int, int] = {}
    for p in props:
        if not isinstance(p, dict):
            continue
        device, total = p.get("id"), p.get("totalGlobalMem")
        if _is_count(device) and _is_count(total) and total > 0:
            out.setdefault(device, total)
    return tuple(out.items())


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
        ranks = entry["ranks"]
        if not all(is_rank(r) for r in ranks):
            continue
        desc = entry.get("pg_desc")
        groups.append(
            ProcessGroup(
                name=str(entry["pg_name"]),
                ranks=tuple(ranks),
                description=str(desc) if desc is not None else "",
            )
        )
    return tuple(groups)


def _decode_loose(data: bytes, path: Path) -> tuple[Any, tuple[str, ...]]:
    """The trace decoded leniently (any JSON type in any field), and what had to be left out.

    When even that fails (an entry of ``traceEvents`` that is not an object, ``args`` that
    are not one), every entry is salvaged on its own: such entries are left out and counted,
    such ``args`` are read as none, and the rest of the file is still the trace it was.
    """
    try:
        return _LOOSE_DECODER.decode(data), ()
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise TraceReadError(_json_problem(exc), path=path) from None
    try:
        trace = _ANY_DECODER.decode(data)
    except msgspec.ValidationError:
        raise TraceReadError(
            "not a Kineto trace: a JSON document without a traceEvents list of events", path=path
        ) from None
    except msgspec.DecodeError as exc:  # the lenient decoder stopped at a type before a syntax error
        raise TraceReadError(_json_problem(exc), path=path) from None
    items = trace if isinstance(trace, list) else trace.traceEvents
    events, not_events, bad_args = _salvage(items)
    notes = []
    if not_events:
        notes.append(f"{not_events} entries of traceEvents are not events (not JSON objects); they were left out")
    if bad_args:
        notes.append(f"{bad_args} event(s) have args that are not a JSON object; they were read without their args")
    if isinstance(trace, list):
        return events, tuple(notes)
    loose = _LooseTrace(
        traceEvents=events,
        distributedInfo=trace.distributedInfo,
        deviceProperties=trace.deviceProperties,
        schemaVersion=trace.schemaVersion,
    )
    return loose, tuple(notes)


def _salvage(items: list[Any]) -> tuple[list[_LooseEvent], int, int]:
    """Each entry that is an object as a loose event; the count of the others, and of bad ``args``."""
    events: list[_LooseEvent] = []
    not_events = bad_args = 0
    for item in items:
        if not isinstance(item, dict):
            not_events += 1
            continue
        args = item.get("args")
        entry = item
        if args is not None and not isinstance(args, dict):
            bad_args += 1
            entry = {**item, "args": None}
        try:
            events.append(msgspec.convert(entry, _LooseEvent))
        except msgspec.ValidationError:
            not_events += 1
    return events, not_events, bad_args


def _json_problem(exc: msgspec.DecodeError) -> str:
    text = str(exc)
    if "truncated" in text:
        return "truncated JSON; was the profiler stopped mid-write?"
    return f"not valid JSON ({text})"


def _distributed_int(info: dict[str, Any], key: str, *, lowest: int) -> tuple[int | None, str]:
    """``distributedInfo[key]`` when it is a whole number from ``lowest`` to :data:`MAX_RANK`, and
    else None with a sentence saying why it was not used (empty when the key is absent)."""
    value = info.get(key)
    if value is None:
        return None, ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if is_rank(value) and value >= lowest:
        return value, ""
    shown = repr(value)[:40]
    return None, f"distributedInfo.{key} is {shown}, which is not a {key.replace('_', ' ')}; it was ignored"


def _to_frames(raw: list[Any]) -> tuple[pl.DataFrame, pl.DataFrame, Dropped]:
    """Events and counters from decoded events; keeps durations ('X') and instants ('i', 'I').

    Each column is one ``map(attrgetter(field), ...)`` pass, which runs in C, as does
    picking the kept events out of the tagged union (``compress`` over ``isinstance``).
    """
    if raw and isinstance(raw[0], _LooseEvent):
        return _loose_frames(raw)
    events = list(compress(raw, map(isinstance, raw, repeat(_Event))))
    is_instant = list(map(isinstance, events, repeat(_Instant)))
    memory = _memory_frame(list(compress(events, is_instant)))
    instant = pl.Series("instant", is_instant, dtype=pl.Boolean)
    return _normalize(pl.DataFrame([instant, *_columns(events)]), memory)


def _columns(events: list[Any], *, loose: bool = False) -> list[pl.Series]:
    """The raw columns of ``events`` (typed or loose structs), in ``_EVENT_COLUMNS``, ``_ARG_COLUMNS`` order.

    ``loose``: the values may be of any JSON type; a boolean (``"ts": true``) is no value,
    though polars would take it for 1.
    """
    clean = _no_bools if loose else list

    def values(items: list[Any], name: str) -> list[Any]:
        return clean(map(attrgetter(name), items))

    cols = [column(name, values(events, name), dtype) for name, dtype in _EVENT_COLUMNS.items()]
    args = list(map(attrgetter("args"), events))  # a pass over the args alone: fewer cache misses
    cols += [column(name, values(args, name), dtype) for name, dtype in _ARG_COLUMNS.items()]
    return cols


def _memory_frame(instants: list[Any]) -> pl.DataFrame | None:
    """``ts`` and the ``_MEMORY_COLUMNS`` of the ``[memory]`` instants among ``instants``; None without any."""
    names = column("name", list(map(attrgetter("name"), instants)), pl.String())
    is_memory = names.eq_missing(MEMORY_EVENT)
    if not is_memory.any():
        return None
    memory = list(compress(instants, is_memory.to_list()))
    args = list(map(attrgetter("args"), memory))
    return pl.DataFrame(
        [
            column("ts", list(map(attrgetter("ts"), memory)), pl.Float64()),
            *(column(name, list(map(attrgetter(name), args)), dtype) for name, dtype in _MEMORY_COLUMNS.items()),
        ]
    )


def _loose_frames(raw: list[_LooseEvent]) -> tuple[pl.DataFrame, pl.DataFrame, Dropped]:
    """The same frames from leniently decoded events (a rare path: any JSON type anywhere)."""
    events = [e if e.args is not None else msgspec.structs.replace(e, args=_NO_LOOSE_ARGS) for e in raw]
    ph = column("ph", list(map(attrgetter("ph"), events)), pl.String())
    memory = _memory_frame(list(compress(events, ph.is_in(_KEPT_PHASES[1:]).fill_null(False).to_list())))
    frame = (
        pl.DataFrame([ph, *_columns(events, loose=True)])
        .filter(pl.col("ph").is_in(_KEPT_PHASES))
        .select(pl.col("ph").ne("X").alias("instant"), *_EVENT_COLUMNS, *_ARG_COLUMNS)
    )
    return _normalize(frame, memory)


def _no_bools(values: Iterable[Any]) -> list[Any]:
    return [None if isinstance(v, bool) else v for v in values]


def _ns(ts: pl.Expr, base: int) -> pl.Expr:
    """Float us -> int64 ns, exact to the ns: relative to the integer ``base`` (us) first."""
    return ((ts - base) * 1000).round().cast(pl.Int64) + base * 1000


def _normalize(df: pl.DataFrame, memory: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame, Dropped]:
    """Raw columns -> the event schema (ns times, kinds, GPU device/stream) and the counters.

    The ``[memory]`` instants among ``df`` become the counters (``memory``: their args).
    Events and counters with impossible times are dropped first (:mod:`tracekit.readers.plausible`).
    """
    cat = pl.col("cat").str.to_lowercase()
    df = df.filter(
        cat.is_null() | ~cat.is_in(_SKIPPED_CATEGORIES),
        ~(pl.col("instant") & pl.col("name").eq_missing(MEMORY_EVENT)),
    )
    instant = pl.col("instant")
    df, dropped, window = screen(
        df,
        start=pl.col("ts"),
        end=pl.when(instant).then(pl.col("ts")).otherwise(pl.col("ts") + pl.col("dur")),
        needs_extent=~instant,
        unit_ns=1000,
        unit="us",
    )
    base = int(df["ts"].min() or 0)  # type: ignore[arg-type]
    if memory is None:
        return _events(df, base), empty_counters(), dropped
    memory, dropped_memory, _ = screen(
        memory.with_columns(name=pl.lit(MEMORY_EVENT)),
        start=pl.col("ts"),
        end=pl.col("ts"),
        needs_extent=False,
        unit_ns=1000,
        unit="us",
        window=window,
    )
    return _events(df, base), _counters(memory, base), dropped + dropped_memory


def _events(df: pl.DataFrame, base: int) -> pl.DataFrame:
    """Raw Kineto columns -> the event schema, one query."""
    cat = pl.col("cat").str.to_lowercase()
    kind = (
        pl.when(pl.col("instant"))
        .then(pl.lit("instant"))
        .when(pl.col("name").str.starts_with(_STEP_PREFIX) & cat.is_in(["cpu_op", "operator", "user_annotation"]))
        .then(pl.lit("step"))
        .otherwise(cat.replace_strict(CATEGORY_KINDS, default="other"))
    )
    start = _ns(pl.col("ts"), base)
    dur = pl.when(pl.col("instant")).then(0).otherwise((pl.col("dur") * 1000).round()).cast(pl.Int64)
    is_gpu = pl.col("kind").is_in(GPU_KINDS)
    return (
        df.lazy()
        .with_columns(kind=kind, start_ns=start, dur_ns=dur)
        .with_columns(
            end_ns=pl.col("start_ns") + pl.col("dur_ns"),
            device=pl.when(is_gpu).then(pl.coalesce("device", "pid")),
            stream=pl.when(is_gpu).then(pl.coalesce("stream", "tid")),
            external_id=pl.coalesce("external_id", "external_id_2021"),
            name=pl.col("name").fill_null(UNNAMED),
            rank=pl.lit(None, dtype=pl.Int32),
        )
        # a value beyond its column's type (a group size of 2**31) is no value, as a wrong type is
        .select([pl.col(c).cast(t, strict=False) for c, t in SCHEMA.items() if c != "category"])
        .with_columns(category_expr())
        .select(list(SCHEMA))
        .sort("start_ns")
        .collect()
    )


def _counters(memory: pl.DataFrame, base: int) -> pl.DataFrame:
    """``[memory]`` instants -> the counters table (ns times; a negative device id is the host's)."""
    device_type = pl.col("device_type").replace_strict(DEVICE_TYPE_CODES, default="other", return_dtype=DeviceType)
    return (
        memory.lazy()
        .select(
            rank=pl.lit(None, dtype=pl.Int32),
            time_ns=_ns(pl.col("ts"), base),
            device_type=device_type,
            device=pl.when(pl.col("device_id") >= 0).then(pl.col("device_id")),
            addr=pl.col("addr"),
            bytes=pl.col("mem_bytes"),
            total_allocated=pl.col("total_allocated"),
            total_reserved=pl.col("total_reserved"),
        )
        .select([pl.col(c).cast(t, strict=False) for c, t in COUNTER_SCHEMA.items()])
        .sort("time_ns", maintain_order=True)
        .collect()
    )
