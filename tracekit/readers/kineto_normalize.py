"""Raw Kineto columns -> the event schema and the counters table, in two steps.

:func:`prepare` does what each event decides alone (its kind, its GPU device and stream,
the schema's dtypes), so that a file read in chunks keeps only the prepared columns of each
chunk; :func:`finish` does what needs every event of the file: the events with impossible
times are dropped (:mod:`tracekit.readers.plausible`, which judges them against the bulk of
the rank), times become int64 nanoseconds relative to the file's first start, and the
events are held by kind in the order of their starts (ties in file order). Each chunk's
prepared columns are split by kind as it comes (:mod:`tracekit.readers.kinds`): the file's
events are never one frame of every column for every event. A file read whole goes through
the same two steps, so both ways give the same events.

Kineto writes float microseconds; they are converted once here, relative to an integer base
to keep nanosecond precision beyond float64's 2**53. Instants named ``[memory]`` become the
rank's counters (:mod:`tracekit.model.counters`), not events.

**Every device the profiler records.** libkineto names the category of each event
(``libkineto/include/ActivityType.h``; PyTorch's ``torch/csrc/profiler/kineto_shim.cpp`` says
which are host and which device events). Besides CUDA's and ROCm's, the runtime and driver
calls of other accelerators are read as calls (``mtia_runtime``, ``xpu_runtime``,
``xpu_driver``, ``privateuse1_runtime``, ``privateuse1_driver``, ``glow_runtime``, ``hpu_op``),
so that their correlation ids link launches to device work; MTIA's on-device events
(``mtia_ccp_events``) are device work, a kernel, copy or set as its name says
(:data:`DEVICE_COPY`, :data:`DEVICE_SET`: HTA reads MTIA's ``dma*`` events as its memory work).
XPU and PrivateUse1 backends write their device work as ``kernel``/``gpu_memcpy``/``gpu_memset``
already. An event of a category Kineto does not name (a vendor's plugin of its own), or an
``hpu_op``, is device work when it lies on a device's track as Kineto writes one: it carries
a device id in its args and its ``pid`` is that device. MTIA's ``mtia_insight`` events are
its device's, but not work tracekit can read: they are counted, and the rank's trace says so
(a ``device_events_unread`` warning naming the device kind), never that device events are
missing.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.by_kind import LITERAL_ROWS
from tracekit.model.classify import category_of
from tracekit.model.counters import COUNTER_SCHEMA, DeviceType, empty_counters
from tracekit.model.input_warnings import InputWarning
from tracekit.model.schema import GPU_ACTIVITY_KINDS, GPU_KINDS, SCHEMA, UNNAMED, all_null
from tracekit.readers.kinds import POS, duration_ns, duration_us, held
from tracekit.readers.kineto_decode import MEMORY_EVENT
from tracekit.readers.plausible import Dropped, screen, screen_counters, screen_parts, short_device_fault

if TYPE_CHECKING:
    from tracekit.model.by_kind import ByKind
    from tracekit.readers.kinds import Pieces

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
    # other accelerators' calls and device work (libkineto's ActivityType names)
    "mtia_runtime": "runtime",
    "glow_runtime": "runtime",
    "hpu_op": "runtime",  # "HPU host side runtime event"; on a device's track, device work
    "xpu_runtime": "runtime",
    "xpu_driver": "driver",
    "privateuse1_runtime": "runtime",
    "privateuse1_driver": "driver",
    "mtia_ccp_events": "kernel",  # a copy or set where its name says so
}
#: Categories whose events are device work of a kind (kernel, copy, set) their name says.
NAMED_WORK_CATEGORIES: Final = ("mtia_ccp_events",)
#: The other categories libkineto names (no work of a device, or no device's): never read as
#: device work, wherever they lie.
KINETO_CATEGORIES: Final = (
    "external_correlation",
    "cpu_instant_event",
    "overhead",
    "mtia_insight",
    "mtia_counters",
    "cuda_event",
    "cuda_profiler_range",
    "collective_comm",
    "xpu_scope_profiler",
    "xpu_sync",
    "gpu_pm_counter",
)
#: Device events of another accelerator that tracekit does not read as work: category -> the
#: device kind the rank's warning names (``mtia_insight``: MTIA Insight's on-device events).
UNREAD_DEVICE_CATEGORIES: Final[dict[str, str]] = {"mtia_insight": "mtia"}
#: Categories tracekit reads as host events but whose events on a device's track are device
#: work (PyTorch counts ``hpu_op`` as the HPU's; libkineto calls it a host runtime event).
_TRACK_CATEGORIES: Final = ("hpu_op",)
#: Device work named as a copy or a set (MTIA: ``dma*``), the rest being kernels.
DEVICE_COPY: Final = r"(?i)memcpy|^dma"
DEVICE_SET: Final = r"(?i)memset"
#: The category of the findings tracks tracekit adds to a trace (``tracekit analyze
#: --annotated-trace``): skipped when read back, so an annotated trace gives the same numbers.
FINDINGS_CATEGORY: Final = "tracekit"
#: Categories that carry no event of interest (the profiler's own span, tracekit's findings).
_SKIPPED_CATEGORIES: Final = ("trace", FINDINGS_CATEGORY)
_STEP_PREFIX: Final = "ProfilerStep#"
#: ``Device Type`` of ``[memory]`` instants: c10::DeviceType -> the counters table's device
#: types ("other" else).
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
#: The schema's columns that :func:`prepare` fills (times, rank and category come later).
_PREPARED: Final = tuple(c for c in SCHEMA if c not in ("rank", "category", "start_ns", "end_ns"))
#: ... of which those that :func:`_events` passes through unchanged (a name of none is named).
_PASSED: Final = frozenset(_PREPARED) - {"name"}


#: What an event's category decides (:func:`category_facts`): columns a raw frame may carry,
#: worked out once per distinct category by a reader that has them (the native decoder).
CATEGORY_FACTS: Final = ("cat_kind", "cat_step", "cat_kept", "cat_device", "cat_unread")
#: ``cat_device``: its events are device work whose name says its kind ...
ALWAYS: Final = "always"
#: ... or are when they lie on a device's track.
ON_TRACK: Final = "on_track"
#: The prepared column holding the category of each device event not read (null elsewhere),
#: counted by :func:`finish` for the rank's warning.
UNREAD: Final = "unread"


def category_facts(cat: pl.Expr) -> dict[str, pl.Expr]:
    """What a Kineto category (``cat``, as the file writes it) decides, element by element:
    the kind of its events but steps and instants, whether a ``ProfilerStep#`` range of it is
    a step, whether its events are kept, whether they are device work (:data:`ALWAYS`,
    :data:`ON_TRACK`, else null) and, for another accelerator's device events that are not
    read, the category (lower case)."""
    lower = cat.str.to_lowercase()
    known = lower.is_in([*CATEGORY_KINDS, *KINETO_CATEGORIES, *_SKIPPED_CATEGORIES])
    return {
        "cat_kind": lower.replace_strict(CATEGORY_KINDS, default="other"),
        "cat_step": lower.is_in(["cpu_op", "operator", "user_annotation"]),
        "cat_kept": lower.is_null() | ~lower.is_in(_SKIPPED_CATEGORIES),
        "cat_device": pl.when(lower.is_in(NAMED_WORK_CATEGORIES))
        .then(pl.lit(ALWAYS))
        .when(~known.fill_null(False) | lower.is_in(_TRACK_CATEGORIES))
        .then(pl.lit(ON_TRACK)),
        "cat_unread": pl.when(lower.is_in(list(UNREAD_DEVICE_CATEGORIES))).then(lower),
    }


#: What an event's name decides (:func:`name_facts`): columns a raw frame may carry, worked out
#: once per distinct name by a reader that has them (the native decoder, whose names are then
#: categorical, not a string per event).
NAME_FACTS: Final = ("name_step", "name_set", "name_copy")


def name_facts(name: pl.Expr) -> dict[str, pl.Expr]:
    """What an event's name (as the file writes it) decides, element by element: whether it
    names a profiler step (``ProfilerStep#``), and, for device work, a set or a copy."""
    return {
        "name_step": name.str.starts_with(_STEP_PREFIX),
        "name_set": name.str.contains(DEVICE_SET),
        "name_copy": name.str.contains(DEVICE_COPY),
    }


def _device_work(facts: dict[str, pl.Expr]) -> pl.Expr:
    """Whether an event is device work by its category (:func:`category_facts`' ``cat_device``):
    always, or where it lies on a device's track as Kineto writes one: a device id in its args,
    and that device as its ``pid``."""
    on_track = pl.col("device").is_not_null() & (pl.col("pid") == pl.col("device"))
    device = facts["cat_device"]
    return ((device == ALWAYS) | ((device == ON_TRACK) & on_track)).fill_null(False)


def _work_kind(facts: dict[str, pl.Expr]) -> pl.Expr:
    """The kind of device work its name says (:func:`name_facts`): a set, a copy, else a kernel."""
    return (
        pl.when(facts["name_set"])
        .then(pl.lit("memset"))
        .when(facts["name_copy"])
        .then(pl.lit("memcpy"))
        .otherwise(pl.lit("kernel"))
    )


#: The longest event name or category read, in bytes: no profiler writes one longer (the longest
#: kernel names are a few KiB); the native decoder refuses the same (``MAX_STRING`` of
#: ``_kineto_columns.c``, which must stay equal to it).
MAX_NAME_BYTES: Final = 16 << 20


def _check_names(raw: pl.DataFrame) -> None:
    """Refuse (:class:`TraceReadError`) events whose name or category is longer than any
    profiler writes: a string of hundreds of MiB would be carried through every report."""
    columns = [c for c in ("name", "cat") if c in raw.columns and raw.schema[c] == pl.String]
    if not columns or raw.height == 0:
        return
    longest = raw.select(pl.max_horizontal(pl.col(c).str.len_bytes().max() for c in columns)).item()
    if longest is not None and longest > MAX_NAME_BYTES:
        raise TraceReadError(
            f"an event holds a string of {longest / 2**20:.0f} MiB; no profiler writes one over "
            f"{MAX_NAME_BYTES >> 20} MiB: not a trace tracekit reads"
        )


def prepare(raw: pl.DataFrame) -> pl.DataFrame:
    """Raw event columns -> what each event decides alone, in the schema's dtypes.

    Keeps ``instant``, ``ts`` and ``dur`` (file units) for :func:`finish` (a duration held in
    whole ns once split by kind, where that is exact: :func:`~tracekit.readers.kinds.duration_us`); ``name`` stays
    null where the file gives none, for the messages about dropped events. The facts of each
    event's category are taken from ``raw`` where it carries them (:data:`CATEGORY_FACTS`),
    else worked out here, event by event.
    """
    _check_names(raw)
    kept, decided, completed, chosen = _preparation(
        given=all(c in raw.columns for c in CATEGORY_FACTS), named=all(c in raw.columns for c in NAME_FACTS)
    )
    # (a column of no value is made a literal a kind at a time: :class:`~tracekit.readers.kinds.Pieces`)
    return raw.lazy().filter(*kept).with_columns(**decided).with_columns(**completed).select(*chosen).collect()


@functools.cache
def _preparation(
    *, given: bool, named: bool
) -> tuple[list[pl.Expr], dict[str, pl.Expr], dict[str, pl.Expr], list[pl.Expr]]:
    """:func:`prepare`'s expressions, built once (a file's every chunk is prepared with them:
    building them took half of a small chunk's preparation): the events kept, then what each
    decides (its kind), then the columns that depend on its kind, then the schema's columns.
    ``given``: whether the raw frame carries its categories' facts; ``named``: its names'."""
    facts = {c: pl.col(c) for c in CATEGORY_FACTS} if given else category_facts(pl.col("cat"))
    facts |= {c: pl.col(c) for c in NAME_FACTS} if named else name_facts(pl.col("name"))
    kind = (
        pl.when(pl.col("instant"))
        .then(pl.lit("instant"))
        .when(facts["name_step"] & facts["cat_step"])
        .then(pl.lit("step"))
        .when(_device_work(facts))
        .then(_work_kind(facts))
        .otherwise(facts["cat_kind"])
    )
    is_gpu = pl.col("kind").is_in(GPU_KINDS)
    kept = [facts["cat_kept"], ~(pl.col("instant") & pl.col("name").eq_missing(MEMORY_EVENT))]
    completed = {
        "device": pl.when(is_gpu).then(pl.coalesce("device", "pid")),
        "stream": pl.when(is_gpu).then(pl.coalesce("stream", "tid")),
        "external_id": pl.coalesce("external_id", "external_id_2021"),
        "threads": pl.when(pl.col("kind") == "kernel").then("threads"),  # a kernel's launch only
    }
    # a value beyond its column's type (a group size of 2**31) is no value, as a wrong type is
    chosen = [
        pl.col("instant"),
        pl.col("ts"),
        pl.col("dur"),
        *(pl.col(c).cast(SCHEMA[c], strict=False) for c in _PREPARED),
        pl.col(UNREAD).cast(pl.String),
    ]
    return kept, {"kind": kind, UNREAD: facts["cat_unread"]}, completed, chosen


def finish(
    pieces: Pieces, memory: list[pl.DataFrame]
) -> tuple[ByKind, pl.DataFrame, Dropped, tuple[InputWarning, ...]]:
    """The events (held by kind) and counters of a file from its prepared chunks (``pieces``,
    split by kind as they were decoded, which this empties) and the raw columns of its
    ``[memory]`` instants (in file order); what was dropped for impossible times; the warnings
    about device events it holds but tracekit does not read (:func:`unread_warnings`)."""
    parts = pieces.taken()
    ones = pieces.ones
    instant = pl.col("instant")
    parts, dropped, window = screen_parts(
        parts,
        start=pl.col("ts"),
        end=pl.when(instant).then(pl.col("ts")).otherwise(pl.col("ts") + duration_us()),
        needs_extent=~instant,
        unit_ns=1000,
        unit="us",
        order=POS,
    )
    if dropped.count and not memory and not any(p.height for p in parts.values()):  # every event gone: say why
        raise TraceReadError(dropped.nothing_left())
    if (fault := dropped.device_fault(sum(parts[k].height for k in GPU_ACTIVITY_KINDS if k in parts))) is not None:
        raise TraceReadError(fault)
    device = [parts[k].select(duration_ns()).to_series() for k in GPU_ACTIVITY_KINDS if k in parts]
    if device and (fault := short_device_fault(pl.concat(device), "us")) is not None:
        raise TraceReadError(fault)
    unread = unread_warnings(*parts.values())
    lows = [int(low) for p in parts.values() if p.height and (low := p.get_column("ts").min()) is not None]  # type: ignore[arg-type]
    base = min(lows, default=0)
    events, places, literal = {}, {}, {}
    for kind in list(parts):
        part = parts.pop(kind)
        places[kind] = part.drop_in_place(POS).to_numpy()
        owned = [part]
        del part  # _events owns the prepared columns now
        events[kind], empty = _events(owned, base)
        # the columns of one value in every piece pass through unchanged: kept literals where
        # ByKind.held would make them so (a small kind's are buffers)
        one = ones.get(kind, {}) if events[kind].height >= LITERAL_ROWS else {}
        literal[kind] = {c: v for c, v in one.items() if c in _PASSED} | dict.fromkeys(empty)
    held_events = held(events, places, pl.Schema(SCHEMA), literal=literal)
    if not memory:
        return held_events, empty_counters(), dropped, unread
    counters, dropped_memory, _ = screen(
        pl.concat(memory, how="vertical", rechunk=True).with_columns(name=pl.lit(MEMORY_EVENT)),
        start=pl.col("ts"),
        end=pl.col("ts"),
        needs_extent=False,
        unit_ns=1000,
        unit="us",
        window=window,
    )
    counters, implausible = screen_counters(_counters(counters, base))
    return held_events, counters, dropped + dropped_memory, (*unread, *implausible)


def unread_warnings(*prepared: pl.DataFrame) -> tuple[InputWarning, ...]:
    """One warning per device kind whose events ``prepared`` (a file's prepared columns, in
    parts) holds but tracekit does not read as work (:data:`UNREAD_DEVICE_CATEGORIES`): the
    kind, its categories and how many events."""
    found = [
        p.get_column(UNREAD).drop_nulls().value_counts(name="n")
        for p in prepared
        if UNREAD in p.columns and p.height and not all_null(p, UNREAD)
    ]
    if not found:
        return ()
    counts = pl.concat(found).group_by(UNREAD).agg(pl.col("n").sum()).sort(UNREAD)
    kinds: dict[str, tuple[list[str], int]] = {}
    for category, n in counts.iter_rows():
        categories, total = kinds.setdefault(UNREAD_DEVICE_CATEGORIES[category], ([], 0))
        kinds[UNREAD_DEVICE_CATEGORIES[category]] = ([*categories, category], total + n)
    return tuple(
        InputWarning(kind="device_events_unread", key=kind, value=", ".join(categories), count=n)
        for kind, (categories, n) in sorted(kinds.items())
    )


def _ns(ts: pl.Expr, base: int) -> pl.Expr:
    """Float us -> int64 ns, exact to the ns: relative to the integer ``base`` (us) first."""
    return ((ts - base) * 1000).round().cast(pl.Int64) + base * 1000


#: The events of a kind :func:`_events` makes at once, at most.
EVENTS_ROWS: Final = 1 << 20


def _events(owned: list[pl.DataFrame], base: int) -> tuple[pl.DataFrame, frozenset[str]]:
    """The prepared columns of a kind's events (the one frame of ``owned``, which this empties)
    -> the event schema (ns times, names, categories), and the columns that are literals of no
    value there."""
    dur = pl.when(pl.col("instant")).then(0).otherwise(duration_ns()).cast(pl.Int64)
    df = owned.pop()
    # a column of no value becomes a literal here, in the one pass over the chunks: an eager
    # replacement would first align (copy) every column of the unaligned chunks
    # (names are left to the query: an event without one is named)
    empty = {c: pl.lit(None, dtype=SCHEMA[c]) for c in _PREPARED if c != "name" and all_null(df, c)}
    # the category in the same query: an eager column added after it would align (copy) every
    # column of the chunks at once (a 2 GB rank's 776 MB frame held twice)
    category = category_of(df.get_column("name"))
    # a kind of many events a slice at a time, each slice let go once made (the times of a 2 GB
    # rank's 5.0M Python frames made at once beside the file's: 80 MB at the read's peak); the
    # columns that pass through unchanged are shared with the events made, not copied
    slices = [df.slice(lo, EVENTS_ROWS) for lo in range(0, df.height, EVENTS_ROWS)] or [df]
    del df
    made = []
    while slices:
        made.append(
            slices.pop(0)
            .lazy()
            .with_columns(start_ns=_ns(pl.col("ts"), base), dur_ns=dur)
            .with_columns(
                end_ns=pl.col("start_ns") + pl.col("dur_ns"),
                name=pl.col("name").fill_null(UNNAMED),
                rank=pl.lit(None, dtype=SCHEMA["rank"]),
                **empty,
            )
            .with_columns(category)
            .select(*SCHEMA)
            .collect()
        )
    events = made[0] if len(made) == 1 else pl.concat(made, how="vertical", rechunk=False)
    return events, frozenset({*empty, "rank"})


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
