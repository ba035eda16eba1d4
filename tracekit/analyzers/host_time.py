"""The launching threads' time by cause, over whole windows: what the gains remove.

The idle model (:mod:`tracekit.analyzers.host_causes`) names the host's cause of each GPU idle
gap; :func:`host_time` classifies the same way every instant of the launching threads inside the
measured windows, so that a what-if (:mod:`tracekit.analyzers.gains`) removes exactly the host
time the idle model blames on a cause.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.host_causes import (
    LAUNCH_CALLS,
    ORDER,
    PROCESS_CAUSES,
    SPAN,
    per_thread,
    process_ranges,
    thread_events,
)
from tracekit.results.vocab import IdleCause

if TYPE_CHECKING:
    from tracekit.model.run import Run

__all__ = ["host_time"]


def host_time(
    run: Run,
    windows: pl.DataFrame,
    *,
    fetch: pl.DataFrame,
    syncs: pl.DataFrame,
    calls: pl.DataFrame,
    frames: pl.DataFrame | None = None,
    process: dict[IdleCause, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """The launching threads' time inside ``windows`` (rank, start_ns, end_ns) by the categories
    above, as the idle model would name it: rank, cause (an :class:`IdleCause` value), start_ns,
    end_ns, disjoint. Each thread's instants go to the first category covering them; a rank's
    instant is a category's only where every launching thread with a category there agrees (the
    training thread inside backward is in a user range while autograd's thread dispatches: that
    instant is dispatch, not the training thread's own work). What a what-if removes
    (:mod:`tracekit.analyzers.gains`): the host time the idle model blames on that cause."""
    empty = pl.DataFrame(schema={"rank": pl.Int32, "cause": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64})
    names = run.names.filter(run.names.str.contains(LAUNCH_CALLS))
    launching = calls.filter(pl.col("name").is_in(names.implode())).select(pl.col("rank").cast(pl.Int32), "tid")
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
    events = thread_events(run, spans.select("idle_id", "rank", "thread", *SPAN), threads, calls)
    covers = {c.value: per_thread(process[c], threads) for c in PROCESS_CAUSES}
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
        return empty
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
