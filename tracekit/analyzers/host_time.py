"""The launching threads' time by cause, over whole windows: what the gains remove.

The idle model (:mod:`tracekit.analyzers.host_causes`) names the host's cause of each GPU idle
gap; :func:`host_time` classifies the same way every instant of the launching threads inside the
measured windows, so that a what-if (:mod:`tracekit.analyzers.gains`) removes exactly the host
time the idle model blames on a cause.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.host_causes import (
    DISPATCH_GAP_NS,
    ORDER,
    PROCESS_CAUSES,
    SPAN,
    Reads,
    cuts,
    launch_calls,
    per_thread,
    process_ranges,
    thread_events,
)
from tracekit.results.vocab import IdleCause

if TYPE_CHECKING:
    from tracekit.model.run import Run

__all__ = ["host_time"]

_OUT: Final = {"rank": pl.Int32, "cause": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}


def host_time(
    run: Run,
    windows: pl.DataFrame,
    *,
    fetch: pl.DataFrame,
    syncs: pl.DataFrame,
    calls: pl.DataFrame,
    frames: pl.DataFrame | None = None,
    process: dict[IdleCause, pl.DataFrame] | None = None,
    launches: pl.DataFrame | None = None,
    bounds: list[int] | None = None,
    within: tuple[int, int] | None = None,
) -> pl.DataFrame:
    """The launching threads' time inside ``windows`` (rank, start_ns, end_ns) by the categories
    above, as the idle model would name it: rank, cause (an :class:`IdleCause` value), start_ns,
    end_ns, disjoint. Each thread's instants go to the first category covering them; a rank's
    instant is a category's only where every launching thread with a category there agrees (the
    training thread inside backward is in a user range while autograd's thread dispatches: that
    instant is dispatch, not the training thread's own work). What a what-if removes
    (:mod:`tracekit.analyzers.gains`): the host time the idle model blames on that cause.
    ``launches``: :func:`~tracekit.analyzers.host_causes.launch_calls` of ``calls``, when
    already found. ``bounds``: where the time is cut in pieces (by default
    :func:`~tracekit.analyzers.host_causes.cuts` of the calls); ``within``: the time of the
    pieces only inside this stretch [lo, hi) (a window's, each span whole around it: its
    instants classified as the whole span's are)."""
    empty = pl.DataFrame(schema=_OUT)
    if launches is None:
        launches = launch_calls(run, calls)
    launching = launches.select(pl.col("rank").cast(pl.Int32), "tid")
    threads = launching.unique().sort("rank", "tid").with_row_index("thread")
    if threads.height == 0 or windows.height == 0:
        return empty
    spans = (
        windows.select(pl.col("rank").cast(pl.Int32), *SPAN)
        .join(threads, on="rank")
        .sort("rank", "start_ns")
        .with_row_index("idle_id")
    )
    if process is None:
        process = process_ranges(run, fetch=fetch, syncs=syncs, calls=calls, frames=frames)
    every = {c.value: per_thread(process[c], threads) for c in PROCESS_CAUSES}
    if bounds is None:
        bounds = cuts(calls, run.height)
    pieces = _pieces(spans.select("idle_id", "rank", "thread", *SPAN), bounds)
    if within is not None:
        pieces = [p for p in (_clipped(piece, *within) for piece in pieces) if p.height]
    reads = Reads.of(calls, launches, threads)
    found = [f for piece in pieces if (f := _classified(run, piece, threads, reads, every)).height]
    return pl.concat(found).sort("rank", "start_ns") if found else empty


def _pieces(spans: pl.DataFrame, bounds: list[int]) -> list[pl.DataFrame]:
    """``spans`` cut in time at ``bounds`` (:func:`~tracekit.analyzers.host_causes.cuts`: pieces
    of about :data:`~tracekit.analyzers.host_causes.PIECE_EVENTS` events each), or whole; each
    with its span whole (``whole_start``, ``whole_end``)."""
    spans = spans.with_columns(whole_start="start_ns", whole_end="end_ns")
    if not bounds:
        return [spans]
    edges = list(zip([None, *bounds], [*bounds, None], strict=True))
    out = []
    for lo, hi in edges:
        piece = spans.with_columns(
            start_ns=pl.col("start_ns") if lo is None else pl.max_horizontal("start_ns", pl.lit(lo)),
            end_ns=pl.col("end_ns") if hi is None else pl.min_horizontal("end_ns", pl.lit(hi)),
        ).filter(pl.col("end_ns") > pl.col("start_ns"))
        if piece.height:
            out.append(piece)
    return out


def _clipped(piece: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """The time of ``piece`` (:func:`_pieces`) inside [lo, hi), its spans whole."""
    return piece.with_columns(
        start_ns=pl.max_horizontal("start_ns", pl.lit(lo)), end_ns=pl.min_horizontal("end_ns", pl.lit(hi))
    ).filter(pl.col("end_ns") > pl.col("start_ns"))


def _classified(
    run: Run, spans: pl.DataFrame, threads: pl.DataFrame, reads: Reads, every: dict[str, pl.DataFrame]
) -> pl.DataFrame:
    """:func:`host_time` inside a piece of the spans (:func:`_pieces`: one a rank and thread);
    ``every``: the process-wide categories on each thread, whole.

    What is found inside a piece is what the whole spans give there: each event's category is
    its own, and the pauses between a thread's events are shorter than ``DISPATCH_GAP_NS``, so
    the events read that far around the piece (inside its whole span) find every pause that
    reaches into it; the time is then cut where the pieces meet, which the removals' unions
    join again (:func:`tracekit.analyzers.gains_scenarios.built`)."""
    lo, hi = spans.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
    around = spans.select(
        "idle_id",
        "rank",
        "thread",
        start_ns=pl.max_horizontal(pl.col("start_ns") - DISPATCH_GAP_NS, "whole_start"),
        end_ns=pl.min_horizontal(pl.col("end_ns") + DISPATCH_GAP_NS, "whole_end"),
    )
    # every event read overlaps ``around``, inside the stretch: its other slices are left unread
    events = thread_events(run, around, threads, reads, within=(lo - DISPATCH_GAP_NS, hi + DISPATCH_GAP_NS))
    near = (pl.col("end_ns") > lo) & (pl.col("start_ns") < hi)
    covers = {c: f.filter(near) for c, f in every.items()}
    covers |= {
        "cpu_work": events.cpu_work,
        IdleCause.LAUNCH.value: events.dispatch,
        IdleCause.HOST_WORK.value: events.recorded,
        "_window": spans.select("thread", *SPAN),
    }
    # coverage is all that counts: unions first (a stack of Python frames is one range, not 20)
    cut = iv.sweep({k: iv.union(v, ["thread"]) for k, v in covers.items()}, ["thread"]).filter("_window")
    labels = [k for k in covers if k != "_window"]
    cause = pl.coalesce([pl.when(pl.col(k)).then(pl.lit(k)) for k in labels]).replace(
        "cpu_work", IdleCause.HOST_WORK.value
    )
    classified = (
        cut.with_columns(cause=cause)
        .filter(pl.col("cause").is_not_null())
        .join(threads.select("thread", "rank"), on="thread")
    )
    if classified.height == 0:
        return pl.DataFrame(schema=_OUT)
    causes = [c.value for c in ORDER if c.value in set(classified["cause"].unique())]
    by_cause = {c: classified.filter(pl.col("cause") == c).select("rank", *SPAN) for c in causes}
    agreed = iv.sweep({c: iv.union(f, ["rank"]) for c, f in by_cause.items()}, ["rank"])
    alone = pl.sum_horizontal([pl.col(c).cast(pl.Int8) for c in causes]) == 1
    named = pl.coalesce([pl.when(pl.col(c)).then(pl.lit(c)) for c in causes])
    return (
        agreed.filter(alone)
        .select(pl.col("rank").cast(pl.Int32), cause=named, start_ns="start_ns", end_ns="end_ns")
        .sort("rank", "start_ns")
    )
