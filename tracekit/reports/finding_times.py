"""Where a finding is in the timeline: the time range of each, on the trace's own clock, so that
it can be found in Perfetto or chrome://tracing (and in ``tracekit analyze --annotated-trace``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports.document import Format, Table
from tracekit.reports.left_out_words import WINDOW_NOTE, why

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis

#: What the time ranges are, for the captions.
CLOCK_NOTE: Final = (
    "at: seconds on the trace's own clock (its ts / 1e6; Perfetto: timestamp format 'raw'); "
    "--annotated-trace FILE writes the trace with each finding as a slice there."
)


def at(start_ns: int, end_ns: int) -> str:
    """A time range on the trace's clock: '4460893.246046-4460893.438860 s'."""
    return f"{start_ns / 1e9:.6f}\u2013{end_ns / 1e9:.6f} s"


#: Idle intervals shorter than this are not listed (they read "0.00 ms": issue 46 found 70 rows,
#: mostly back-to-back launches 0.00 ms apart); the JSON keeps every one of the longest.
IDLE_LISTED_NS: Final = 10_000
#: Rows of the longest idle intervals, in every format.
IDLE_ROWS: Final = 20


def idle_longest(a: Analysis, limit: int | None) -> Table:
    """The longest GPU idle intervals of 0.01 ms or more (at most :data:`IDLE_ROWS`), each with its
    cause and where it is."""
    found = a.idle_causes.longest if a.idle_causes is not None else []
    listed = [i for i in found if i.length_ns >= IDLE_LISTED_NS]
    rows = listed[: IDLE_ROWS if limit is None else min(IDLE_ROWS, max(limit, 10))]
    unlisted = len(found) - len(rows)
    note = f" {unlisted} shorter one(s) not listed (the {len(found)} longest are in the JSON)." if unlisted else ""
    return Table(
        "idle_longest",
        "Longest GPU idle intervals",
        ("rank", "step", "cause", "ms", "at"),
        tuple(
            (
                str(i.rank),
                "-" if i.step is None else str(i.step),
                i.cause.value,
                f"{i.length_ns / 1e6:,.2f}",
                at(i.start_ns, i.end_ns),
            )
            for i in rows
        ),
        CLOCK_NOTE + note,
        (True, True, False, True, False),
        "No GPU idle interval of 0.01 ms or more." if found else "No GPU idle interval (no GPU activity).",
        frozenset({Format.HTML, Format.MARKDOWN}),
    )


def left_out(a: Analysis, limit: int | None) -> Table:
    """Each rank's recorded time outside its measured window: how long, why, and where."""
    rows = a.steps.left_out
    ranks = sorted({r.rank for r in rows if r.rank is not None})
    kept = set(ranks if limit is None else ranks[:limit])
    note = "" if len(kept) == len(ranks) else f" {len(kept)} of {len(ranks)} ranks shown; all are in the JSON."
    return Table(
        "left_out",
        "Time left out of the measured window",
        ("rank", "why", "ms", "share of the span", "at"),
        tuple(
            (str(r.rank), why(r, a), f"{r.ns / 1e6:,.2f}", f"{r.share_pct:.1f}%", at(r.start_ns, r.end_ns))
            for r in rows
            if r.rank in kept
        ),
        f"{WINDOW_NOTE} {CLOCK_NOTE}{note}",
        (True, False, True, True, False),
        "Nothing material was left out of the measured window.",
        frozenset({Format.HTML, Format.MARKDOWN}),
    )
