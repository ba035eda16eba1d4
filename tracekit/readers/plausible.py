"""Events whose times cannot be right are dropped, counted and named, never used.

One event with an impossible time poisons a rank: a ``ProfilerStep`` lasting 10^15 us
stretches the step window over decades and every share on that rank falls to zero. Every
reader screens its raw rows through :func:`screen` before normalizing them. An event is
dropped when:

- its start is missing or not a finite number (``"ts": null``, ``"ts": true``);
- it needs an extent and has none (a complete event without ``dur``, a GPU row without end);
- it ends before it starts (a negative ``dur``);
- it starts or ends far outside the time range of the rest of its rank.

"Far" is measured against the bulk of the rank, robustly, so that the outliers themselves
cannot stretch the yardstick: the median start ``m`` and the median absolute deviation of
the starts ``d``. An event must lie within ``m ± max(40 d, 10 minutes)``. For events spread
evenly over a recording of length ``S``, ``d = S / 4``: the bound is ten recordings' length
on either side, and never less than :data:`FAR_NS` (the same ten minutes beyond which two
files are not one job, :mod:`tracekit.readers.load`). Real traces stay well inside it (the
largest overshoot among the real traces in the test corpus is a 13 s ``ProfilerStep`` in a
0.36 s recording); a clock or encoding fault lands years away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypedDict

import numpy as np
import polars as pl

from tracekit.model.input_warnings import DroppedEvent, InputWarning
from tracekit.model.schema import GPU_ACTIVITY_KINDS

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from tracekit.model.input_warnings import DropReasonName

#: Two events further apart than this are not one recording (ns).
FAR_NS: Final = 10 * 60 * 1_000_000_000
#: How many median absolute deviations of the starts an event may lie from their median.
SPREAD_FACTOR: Final = 40
#: The window's starts are read this many rows of a frame at a time (:func:`_window`).
WINDOW_ROWS: Final = 1 << 20

#: The reasons an event is dropped, in the order they are tested.
NO_TIME: Final[DropReasonName] = "no_time"
NO_EXTENT: Final[DropReasonName] = "no_extent"
NEGATIVE: Final[DropReasonName] = "negative"
FAR: Final[DropReasonName] = "far"
#: Each reason in the words of an error (the reports write their own from the warning).
_REASONS: Final[dict[DropReasonName, str]] = {
    NO_TIME: "no numeric time",
    NO_EXTENT: "no duration",
    NEGATIVE: "a negative duration",
    FAR: "a time far outside the rest of the rank",
}


@dataclass(frozen=True)
class Dropped:
    """What :func:`screen` dropped from one file's rows: counts by reason and one example."""

    count: int = 0
    reasons: dict[DropReasonName, int] = field(default_factory=dict)
    example: DroppedEvent | None = None
    #: how many of them were device activities (kernels, copies, sets)
    device: int = 0

    def __add__(self, other: Dropped) -> Dropped:
        reasons = dict(self.reasons)
        for reason, n in other.reasons.items():
            reasons[reason] = reasons.get(reason, 0) + n
        return Dropped(self.count + other.count, reasons, self.example or other.example, self.device + other.device)

    def warnings(self) -> tuple[InputWarning, ...]:
        """The run's warning about these drops (the file is named by the caller), if any."""
        if not self.count:
            return ()
        reasons = tuple(self.reasons.items())
        return (
            InputWarning(
                kind="dropped_events", count=self.count, reasons=reasons, example=self.example, device=self.device
            ),
        )

    def device_fault(self, kept: int) -> str | None:
        """Why the file is not read where these drops are most of its device activities
        (:data:`MOST_DEVICE_DROPPED`; ``kept``: the device activities left), else None."""
        if not self.device or self.device < MOST_DEVICE_DROPPED * (self.device + kept):
            return None
        return (
            f"{self.device} of its {self.device + kept} device activities (kernels, copies, sets) have times "
            f"that cannot be right, too many to measure its device by: {self._said()}"
        )

    def message(self) -> str:
        """These drops in the words of an error (a file none of whose events can be used; the
        reports write a warning's words from its figures)."""
        return f"dropped {self._said()}; the analysis does not use them"

    def nothing_left(self) -> str:
        """Why a file is not analysed whose every event with a duration was dropped."""
        return f"no event with a usable time: {self._said()}"

    @classmethod
    def of(cls, warning: InputWarning) -> Dropped:
        """The drops a ``dropped_events`` warning reports."""
        return cls(warning.count or 0, dict(warning.reasons), warning.example, warning.device)

    def _said(self) -> str:
        by_reason = ", ".join(f"{n} with {_REASONS[reason]}" for reason, n in self.reasons.items())
        example = "" if self.example is None else f", e.g. {_said(self.example)}"
        return f"{self.count} event(s) whose times cannot be right ({by_reason}){example}"


#: A file whose screen drops at least this share of its device activities (kernels, copies,
#: sets) is not read (:meth:`Dropped.device_fault`): what is left is a minority of its device's
#: work, whose every share would be a guess; among other ranks it is skipped and named, as a
#: broken file is, and the verdict weighs a smaller share (``some-device-events-dropped``).
MOST_DEVICE_DROPPED: Final = 0.5

#: No device activity a GPU's tracer records lasts less (ns): the shortest in the shared traces
#: last 639 ns (an MI300's), 704 ns (an Nsight export's) and 1 us (Kineto's older traces, in whole
#: microseconds, where 3% of the activities round to zero). A file at least half of whose device
#: activities are shorter (:data:`MOST_DEVICE_DROPPED`, :func:`short_device_fault`) recorded no
#: durations, or wrote them in another unit than its own: durations in ms read as us make every
#: kernel 1,000 times too short, and the device idle nearly all the time.
SHORTEST_DEVICE_NS: Final = 100


def short_device_fault(durations_ns: pl.Series, unit: str) -> str | None:
    """Why a file is not read whose device activities (their ``durations_ns``, kept by the
    screen) last under :data:`SHORTEST_DEVICE_NS` at least half of them, else None. ``unit``:
    the file's unit of time, as its messages name it."""
    total = durations_ns.len()
    short = int((durations_ns < SHORTEST_DEVICE_NS).sum())
    if not total or short < MOST_DEVICE_DROPPED * total:
        return None
    zero = int((durations_ns == 0).sum())
    median = float(np.median(durations_ns.to_numpy()))
    how = "every one of them zero" if zero == total else f"the median {median:.3g} ns"
    return (
        f"{short} of its {total} device activities (kernels, copies, sets) last under {SHORTEST_DEVICE_NS} ns "
        f"({how}), shorter than any a GPU records (a microsecond or so at the least): its durations are "
        f"missing or not in {unit}, too wrong to measure its device by"
    )


#: Beyond this many ns from the epoch no clock a trace uses can reach (int64 ns: 292 years).
MAX_NS: Final = 2**62


@dataclass(frozen=True)
class Window:
    """The plausible times of a rank, in the file's unit: ``center ± bound``."""

    center: float
    bound: float


class Rules(TypedDict):
    """How :func:`screen` reads a table's times (see there)."""

    start: pl.Expr
    end: pl.Expr
    needs_extent: pl.Expr | bool
    unit_ns: float
    unit: str


def screen(
    df: pl.DataFrame, *, window: Window | None = None, **rules: Unpack[Rules]
) -> tuple[pl.DataFrame, Dropped, Window | None]:
    """``df`` without its implausible rows, what was dropped, and the window it was judged by.

    ``start`` and ``end`` are numeric expressions in the file's own unit (``unit_ns``
    nanoseconds each, called ``unit`` in messages); ``end`` is null where the row has no
    extent, which is an error only where ``needs_extent`` holds. ``window``: judge by this
    one (another table of the same rank, such as its memory counters) instead of the
    rows' own. ``df`` needs a ``name`` column (for the example) unless it has no rows.
    """
    kept, dropped, window = screen_parts({"": df}, window=window, **rules)
    return kept[""], dropped, window


def screen_parts(
    parts: dict[str, pl.DataFrame],
    *,
    start: pl.Expr,
    end: pl.Expr,
    needs_extent: pl.Expr | bool,
    unit_ns: float,
    unit: str,
    window: Window | None = None,
    order: str | None = None,
) -> tuple[dict[str, pl.DataFrame], Dropped, Window | None]:
    """:func:`screen` of the rows of one file held in ``parts`` (its events a kind at a time,
    say), judged together: one window for all, the drops counted over all, the example the
    first dropped in the file's order (``order``: the column of each row's place in it; None:
    one part, in that order)."""
    if not any(p.height for p in parts.values()):
        return parts, Dropped(), window
    limit = MAX_NS / unit_ns
    start_f, end_f = start.cast(pl.Float64), end.cast(pl.Float64)
    no_time = start_f.is_null() | ~start_f.is_finite() | (start_f.abs() > limit)
    extent = pl.lit(needs_extent) if isinstance(needs_extent, bool) else needs_extent.fill_null(True)
    no_extent = extent & (end_f.is_null() | ~end_f.is_finite())
    negative = (end_f < start_f).fill_null(False)
    beyond = (end_f.abs() > limit).fill_null(False)
    # flags only: the times are read from each part again where needed, never held as columns
    # beside it (two columns of floats on millions of events)
    flags = {
        k: df.lazy()
        .select(
            no_time=no_time,
            no_extent=~no_time & no_extent,
            negative=~no_time & ~no_extent & negative,
            beyond=~no_time & ~no_extent & ~negative & beyond,
        )
        .with_columns(ok=~pl.any_horizontal("no_time", "no_extent", "negative", "beyond"))
        .collect(engine="streaming")  # in batches: no column of floats at once
        for k, df in parts.items()
    }
    end_f = pl.coalesce(end_f, start_f)
    if window is None:
        window = _window([(df, start_f, flags[k]["ok"]) for k, df in parts.items()], unit_ns)
    keeps = {}
    for k, df in parts.items():
        ok = flags[k]["ok"]
        if window is None:  # nothing has a usable time
            far = ok & False
        else:
            c, b = window.center, window.bound
            outside = ((start_f - c).abs() > b) | ((end_f - c).abs() > b)
            far = ok & df.lazy().select(outside.alias("far")).collect(engine="streaming").to_series()
        keeps[k] = (ok & ~(far | flags[k]["beyond"]), far | flags[k]["beyond"])
    if all(keep.all() for keep, _ in keeps.values()):
        return parts, Dropped(), window
    counts = {
        NO_TIME: sum(f["no_time"].sum() for f in flags.values()),
        NO_EXTENT: sum(f["no_extent"].sum() for f in flags.values()),
        NEGATIVE: sum(f["negative"].sum() for f in flags.values()),
        FAR: sum(far.sum() for _, far in keeps.values()),
    }
    # the first dropped row in the file's order
    firsts = [(k, int((~keep).arg_true()[0])) for k, (keep, _) in keeps.items() if not keep.all()]
    if order is not None:
        firsts.sort(key=lambda kr: parts[kr[0]].get_column(order)[kr[1]])
    k, row = firsts[0]
    df = parts[k]
    start_value, end_value = df.slice(row, 1).select(start_f.alias("start"), end_f.alias("end")).row(0)
    dropped = Dropped(
        count=sum(int((~keep).sum()) for keep, _ in keeps.values()),
        reasons={r: int(v) for r, v in counts.items() if v},
        example=_example(df, flags[k], row, start_value, end_value, unit=unit),
        device=sum(_device_rows(k, parts[k], ~keep) for k, (keep, _) in keeps.items()),
    )
    return {k: df.filter(keeps[k][0]) for k, df in parts.items()}, dropped, window


def _device_rows(key: str, df: pl.DataFrame, dropped: pl.Series) -> int:
    """How many of the rows of ``df`` that ``dropped`` marks are device activities (kernels,
    copies, sets): each of a part of one such kind (``key``: a file's events a kind at a time),
    else those whose ``kind`` column says so."""
    if key in GPU_ACTIVITY_KINDS:
        return int(dropped.sum())
    if "kind" not in df.columns or not dropped.any():
        return 0
    return int(df.get_column("kind").filter(dropped).is_in(GPU_ACTIVITY_KINDS).sum())


def _window(
    starts: list[tuple[pl.DataFrame, pl.Expr, pl.Series | None]], unit_ns: float, *, rows: int = WINDOW_ROWS
) -> Window | None:
    """The median of the starts (each frame's ``start`` where its ``ok`` holds; None: every
    row), and how far from it an event may lie (see the module's docstring): the starts held
    once, as an array each median partitions in place (a median in a query sorts a copy, and a
    query of the distances holds them beside the starts: four arrays of a float per event at
    once, 230 MB on a rank of 7M events); the frames' starts are copied into it ``rows`` at a
    time (a frame's at once, then one of them all, were 86 MB on a 2 GB rank of 5.4M events, the
    peak of its screen; a frame's whole, its 2.9M operators' starts beside the array of all, its
    screen's peak still, 504 MB where the read's plateau after is 492)."""
    if len(starts) == 1 and starts[0][0].height <= rows:
        df, start, ok = starts[0]
        values = df.select(start if ok is None else start.filter(pl.lit(ok))).to_series().to_numpy(writable=True)
    else:  # copied into one array as they are read (room for all the rows)
        values = np.empty(sum(df.height for df, _, _ in starts), dtype=np.float64)
        at = 0
        for df, start, ok in starts:
            for offset in range(0, df.height, rows):
                kept = start if ok is None else start.filter(pl.lit(ok.slice(offset, rows)))
                found = df.slice(offset, rows).select(kept).to_series().to_numpy()
                values[at : at + found.size] = found
                at += found.size
                del found
        values = values[:at]
    if values.size == 0:
        return None
    center = _median(values)
    np.subtract(values, center, out=values)
    spread = _median(np.abs(values, out=values))
    return Window(center, max(SPREAD_FACTOR * spread, FAR_NS / unit_ns))


def _median(values: np.ndarray) -> float:
    """The median of ``values`` (reordered in place), as polars finds it: the middle value, or
    the lower of the two middle ones plus half their difference."""
    middle = (values.size - 1) // 2
    if values.size % 2:
        values.partition(middle)
        return float(values[middle])
    values.partition([middle, middle + 1])
    low, high = float(values[middle]), float(values[middle + 1])
    return low + (high - low) * 0.5


def _example(df: pl.DataFrame, flags: pl.DataFrame, row: int, start: float, end: float, *, unit: str) -> DroppedEvent:
    """The dropped event at ``row`` (``start`` and ``end``: its times in ``unit``)."""
    name = df["name"][row] if "name" in df.columns else None
    shown = None if name is None else _short(str(name))
    if flags["no_time"][row]:
        return DroppedEvent(name=shown, reason=NO_TIME, unit=unit)
    if flags["no_extent"][row]:
        return DroppedEvent(name=shown, reason=NO_EXTENT, unit=unit, start=start)
    reason: DropReasonName = NEGATIVE if flags["negative"][row] else FAR
    return DroppedEvent(name=shown, reason=reason, unit=unit, start=start, duration=end - start)


def _said(e: DroppedEvent) -> str:
    """An example of a dropped event in the words of an error."""
    label = "an unnamed event" if e.name is None else repr(e.name)
    if e.reason == NO_TIME:
        return f"{label} with no usable start time"
    if e.duration is None:
        return f"{label} at {_num(e.start or 0.0)} {e.unit} without a duration"
    return f"{label} at {_num(e.start or 0.0)} {e.unit} lasting {_num(e.duration)} {e.unit}"


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) < 1e18 else f"{value:.3g}"


def _short(text: str, limit: int = 60) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def screen_counters(counters: pl.DataFrame) -> tuple[pl.DataFrame, tuple[InputWarning, ...]]:
    """``counters`` (:data:`~tracekit.model.counters.COUNTER_SCHEMA`) without the rows whose totals
    cannot be an allocator's: a negative total allocated or reserved, a total beyond 64 bits (null
    once read), or less reserved than allocated where reserved is recorded (non-zero: the host's
    rows record none); a warning counting them (``bad_memory``)."""
    if counters.height == 0:
        return counters, ()
    allocated, reserved = pl.col("total_allocated"), pl.col("total_reserved")
    bad = (
        allocated.is_null()
        | reserved.is_null()
        | (allocated < 0)
        | (reserved < 0)
        | ((reserved > 0) & (reserved < allocated))
    )
    flags = counters.select(bad.alias("bad")).get_column("bad")
    count = int(flags.sum())
    if not count:
        return counters, ()
    return counters.filter(~flags), (InputWarning(kind="bad_memory", count=count),)
