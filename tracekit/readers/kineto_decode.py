"""The typed decoding of Kineto events, and their raw columns.

Decoding is typed: msgspec structs that keep only the fields the analyses use, untracked by
the garbage collector, in a union tagged by the event phase so that flows, metadata and
Chrome counter events (a third of a training trace) decode into empty structs with their
fields skipped. Only instants decode the arguments of ``[memory]`` instants (written with
``profile_memory=True``). When the typed decoder rejects a file (a string where an int
belongs, say), the lenient structs accept any JSON type in any field.

Each field then becomes one column in one C-level pass (``map(attrgetter(...))``), with no
Python loop over events; no per-event object survives :func:`raw_frames`. A kernel's launch
dimensions (``"grid": [x, y, z]``, ``"block": [x, y, z]``) become one column, ``threads``, their
product (:func:`threads`).
"""

from __future__ import annotations

from functools import reduce
from itertools import chain, compress, repeat
from operator import attrgetter, is_not, or_
from typing import TYPE_CHECKING, Any, Final

import msgspec
import numpy as np
import polars as pl

from tracekit.model.schema import THREADS_LIMIT
from tracekit.readers.columns import column

if TYPE_CHECKING:
    from collections.abc import Iterable

#: The name of the instants ``profile_memory=True`` writes: counters, not events.
MEMORY_EVENT: Final = "[memory]"


class Args(msgspec.Struct, gc=False, frozen=True):
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
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None


class InstantArgs(Args, frozen=True):
    """An instant's arguments: those of a ``[memory]`` instant besides the others."""

    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    addr: int | None = msgspec.field(default=None, name="Addr")
    mem_bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")


#: The arguments of an event that has none: one shared instance, so that every event has
#: ``args`` and a column is one C-level ``attrgetter("args.<field>")`` pass over the events.
NO_ARGS: Final = Args()
NO_INSTANT_ARGS: Final = InstantArgs()


# Events are a union tagged by ``ph``: durations ("X") and instants ("i", "I") decode into
# full structs; every other phase of the Chrome trace format (flows, metadata, counters...)
# into an empty struct, its fields skipped unread. A phase outside the format fails the
# typed decode, and the file takes the lenient path below.
class Event(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: Args = NO_ARGS


class Instant(Event, tag="i"):
    args: InstantArgs = NO_INSTANT_ARGS  # only instants pay for the memory fields


class InstantLegacy(Instant, tag="I"):
    pass


#: The types of the events kept, and of the instants among them.
_KEPT_TYPES: Final = frozenset((Event, Instant, InstantLegacy))
_INSTANT_TYPES: Final = frozenset((Instant, InstantLegacy))


#: The phases of the Chrome trace event format that carry nothing tracekit reads.
OTHER_PHASES: Final = "BECbneSTpFstfPONDMVvRc()"
_SKIPPED_EVENTS: Final = tuple(
    msgspec.defstruct(f"_Skipped{i}", [], tag_field="ph", tag=ph, gc=False) for i, ph in enumerate(OTHER_PHASES)
)
ANY_EVENT: Any = reduce(or_, (Event, Instant, InstantLegacy, *_SKIPPED_EVENTS))
Trace: Any = msgspec.defstruct(
    "Trace",
    [
        ("traceEvents", list[ANY_EVENT]),
        ("distributedInfo", dict[str, Any] | None, None),
        ("deviceProperties", list[dict[str, Any]] | None, None),
        ("schemaVersion", Any, None),
        ("host_name", Any, None),
    ],
)


# The lenient variant accepts any JSON type in any field; used only when the typed decoder
# rejects a file (a string where an int belongs, say), and normalized column by column.
class LooseArgs(msgspec.Struct, gc=False, frozen=True):
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
    grid: Any = None
    block: Any = None


NO_LOOSE_ARGS: Final = LooseArgs()


class LooseEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: LooseArgs | None = None


class TraceFields(msgspec.Struct, kw_only=True):
    """What a trace holds besides its events, of any JSON type."""

    distributedInfo: Any = None
    deviceProperties: Any = None
    schemaVersion: Any = None
    host_name: Any = None


class LooseTrace(TraceFields, kw_only=True):
    traceEvents: list[LooseEvent]


DECODER: Final = msgspec.json.Decoder(Trace | list[ANY_EVENT])
#: A chunk of events (``[`` + events + ``]``).
EVENTS_DECODER: Final = msgspec.json.Decoder(list[ANY_EVENT])
LOOSE_DECODER: Final = msgspec.json.Decoder(LooseTrace | list[LooseEvent])
#: A chunk of events that the typed decoder rejects (AMD's ``"bytes": "128"``), decoded alone.
LOOSE_EVENTS_DECODER: Final = msgspec.json.Decoder(list[LooseEvent])


class AnyTrace(TraceFields, kw_only=True):
    traceEvents: list[Any]


#: The last resort: any JSON value as an event, salvaged one by one (:func:`_salvage`).
ANY_DECODER: Final = msgspec.json.Decoder(AnyTrace | list[Any])
KEPT_PHASES: Final = ("X", "i", "I")
_STRING_ARGS: Final = ("coll_name", "pg_name")
#: The arguments of a kernel's launch dimensions, which make the ``threads`` column.
LAUNCH_FIELDS: Final = ("grid", "block")
ARG_FIELDS: Final = tuple(f for f in Args.__struct_fields__ if f not in LAUNCH_FIELDS)
#: The raw columns of an event's own fields, and of its ``args``: name -> dtype.
EVENT_COLUMNS: Final[dict[str, pl.DataType]] = {
    "cat": pl.String(),
    "name": pl.String(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
}
ARG_COLUMNS: Final[dict[str, pl.DataType]] = {f: pl.String() if f in _STRING_ARGS else pl.Int64() for f in ARG_FIELDS}
#: The raw columns of a ``[memory]`` instant's args.
MEMORY_COLUMNS: Final[dict[str, pl.DataType]] = {
    f: pl.Int64() for f in InstantArgs.__struct_fields__ if f not in (*ARG_FIELDS, *LAUNCH_FIELDS)
}


#: The last events of a document (typed) and the fields after them (any JSON type).
TailTrace: Any = msgspec.defstruct("TailTrace", [("traceEvents", list[ANY_EVENT])], bases=(TraceFields,), kw_only=True)
#: The tail of a document read in chunks, behind ``{"traceEvents":[``.
TAIL_DECODER: Final = msgspec.json.Decoder(TailTrace)


class LooseTailTrace(TraceFields, kw_only=True):
    traceEvents: list[LooseEvent]


#: The tail of a document whose last events the typed decoder rejects.
LOOSE_TAIL_DECODER: Final = msgspec.json.Decoder(LooseTailTrace)
#: The head of a document read in chunks, followed by ``]}``.
HEAD_DECODER: Final = msgspec.json.Decoder(AnyTrace)
#: Every phase the typed decoder accepts.
PHASES: Final = (*KEPT_PHASES, *OTHER_PHASES)
#: The columns of :func:`raw_frames`'s events: ``instant``, the events' own fields, their args,
#: and the threads of their launch (:func:`threads`).
RAW_SCHEMA: Final[dict[str, pl.DataType]] = {
    "instant": pl.Boolean(),
    **EVENT_COLUMNS,
    **ARG_COLUMNS,
    "threads": pl.Int64(),
}


def raw_frames(raw: list[Any]) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The raw columns of the durations ('X') and instants ('i', 'I') among decoded events, and
    those of their ``[memory]`` instants (None without any): see :data:`RAW_SCHEMA`.

    Each column is one ``map(attrgetter(field), ...)`` pass, which runs in C, as does
    picking the kept events out of the tagged union (``compress`` over their types).
    """
    if raw and isinstance(raw[0], LooseEvent):
        return _loose_frames(raw)
    events = list(compress(raw, map(_KEPT_TYPES.__contains__, map(type, raw))))
    is_instant = list(map(_INSTANT_TYPES.__contains__, map(type, events)))
    memory = _memory_frame(list(compress(events, is_instant)))
    instant = pl.Series("instant", is_instant, dtype=pl.Boolean)
    return pl.DataFrame([instant, *_columns(events)]), memory


def _columns(events: list[Any], *, loose: bool = False) -> list[pl.Series]:
    """The raw columns of ``events`` (typed or loose structs), in ``EVENT_COLUMNS``, ``ARG_COLUMNS`` order.

    ``loose``: the values may be of any JSON type; a boolean (``"ts": true``) is no value,
    though polars would take it for 1.
    """
    clean = _no_bools if loose else list

    def values(items: list[Any], name: str) -> list[Any]:
        return clean(map(attrgetter(name), items))

    cols = [column(name, values(events, name), dtype) for name, dtype in EVENT_COLUMNS.items()]
    args = list(map(attrgetter("args"), events))  # a pass over the args alone: fewer cache misses
    cols += [column(name, values(args, name), dtype) for name, dtype in ARG_COLUMNS.items()]
    grids, blocks = (list(map(attrgetter(name), args)) for name in LAUNCH_FIELDS)
    cols.append(threads(grids, blocks, loose=loose))
    return cols


#: The integers a dimension may be: those of int64 (msgspec's ``int`` takes up to 2**64 - 1).
_INT64: Final = (-(2**63), 2**63)


def threads(grids: list[Any], blocks: list[Any], *, loose: bool = False) -> pl.Series:
    """The ``threads`` column: each launch's grid and block dimensions multiplied, where both
    are three integers, none negative, and the product is under
    :data:`~tracekit.model.schema.THREADS_LIMIT`; else null (what the native decoder gives too).
    ``loose``: the values may be of any JSON type (the lenient decoder's).

    The product is taken in float64: exact below 2**53, and at or past the limit whatever its
    rounding, so the comparison decides as the exact product would. Polars builds nested
    columns from Python tuples slowly (15 us a launch): the dimensions are flattened into one
    NumPy array instead, one C-level pass.
    """
    product = _dims(grids, loose=loose) * _dims(blocks, loose=loose)
    with np.errstate(invalid="ignore"):  # NaN: no value
        product[~(product < THREADS_LIMIT)] = np.nan
    column: pl.Series = pl.Series("threads", product, dtype=pl.Float64, nan_to_null=True).cast(pl.Int64)
    return column


def _dims(values: list[Any], *, loose: bool) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The product of each launch's three dimensions (NaN where they are not three integers of
    int64, or one is negative)."""
    if loose:
        values = [v if _is_dims(v) else None for v in values]
    try:
        flat = np.fromiter(chain.from_iterable(filter(None, values)), dtype=np.int64)
    except (TypeError, ValueError, OverflowError):  # an integer beyond int64
        values = [v if _is_dims(v) else None for v in values]
        flat = np.fromiter(chain.from_iterable(filter(None, values)), dtype=np.int64)
    out = np.full(len(values), np.nan)
    if flat.size:
        dims = flat.reshape(-1, 3).astype(np.float64)
        there = np.fromiter(map(is_not, values, repeat(None)), dtype=np.bool_, count=len(values))
        out[there] = np.where((dims >= 0).all(axis=1), dims.prod(axis=1), np.nan)
    return out


def _is_dims(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 3  # x, y, z
        and all(type(v) is int and _INT64[0] <= v < _INT64[1] for v in value)
    )


def _memory_frame(instants: list[Any]) -> pl.DataFrame | None:
    """``ts`` and the ``MEMORY_COLUMNS`` of the ``[memory]`` instants among ``instants``; None without any."""
    names = column("name", list(map(attrgetter("name"), instants)), pl.String())
    is_memory = names.eq_missing(MEMORY_EVENT)
    if not is_memory.any():
        return None
    memory = list(compress(instants, is_memory.to_list()))
    args = list(map(attrgetter("args"), memory))
    return pl.DataFrame(
        [
            column("ts", list(map(attrgetter("ts"), memory)), pl.Float64()),
            *(column(name, list(map(attrgetter(name), args)), dtype) for name, dtype in MEMORY_COLUMNS.items()),
        ]
    )


def _loose_frames(raw: list[LooseEvent]) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The same frames from leniently decoded events (a rare path: any JSON type anywhere)."""
    events = [e if e.args is not None else msgspec.structs.replace(e, args=NO_LOOSE_ARGS) for e in raw]
    ph = column("ph", list(map(attrgetter("ph"), events)), pl.String())
    memory = _memory_frame(list(compress(events, ph.is_in(KEPT_PHASES[1:]).fill_null(False).to_list())))
    frame = (
        pl.DataFrame([ph, *_columns(events, loose=True)])
        .filter(pl.col("ph").is_in(KEPT_PHASES))
        .select(pl.col("ph").ne("X").alias("instant"), *EVENT_COLUMNS, *ARG_COLUMNS, "threads")
    )
    return frame, memory


def _no_bools(values: Iterable[Any]) -> list[Any]:
    return [None if isinstance(v, bool) else v for v in values]
