"""Communication found beyond kernel names: user patterns, launching host ops, streams.

Each function takes every rank's events (one frame, ``rank`` column) and the frame of
candidate kernels (``_row``: the kernel's row in the events, ``rank``, ``name``, ``category``,
``correlation``, ``device``, ``stream``, ``start_ns``, ``end_ns``), and answers with the rows of
kernels that are communication. Everything is joins over few rows: communication host ranges
are few, and only streams that carry a collective are looked at.

Each rule needs two pieces of evidence, or one that is itself a communication call:

==========================  ============================================================================
rule                        a compute kernel is communication when
==========================  ============================================================================
launching host op           its launch (the runtime/driver call with its ``correlation``) ran inside a
                            communication host event on the same thread (a ``c10d::`` operator,
                            ``record_param_comms``, ``nccl:``/``gloo:`` ranges, DeepEP's
                            ``Buffer.dispatch`` frames and ranges, ``pplx_kernels::all_to_all_*``: see
                            :mod:`tracekit.model.taxonomy`), or its ``external_id`` is that of a
                            communication operator (Kineto's operator -> runtime link). The host op
                            is a communication call: what it launches is its work.
all-to-all name on a        its function reads as expert-parallel all-to-all (``dispatch*``,
communication stream        ``combine*``, ``*a2a*``, ``*all_to_all*``:
                            :data:`~tracekit.model.taxonomy.EP_HINT_PATTERN`) *and* it runs on a stream
                            mostly used for communication: named collectives take more of its device
                            time than its other kernels. Neither alone: a GEMM ``..._dispatch`` on the
                            main stream, or a plain kernel beside NCCL on a stream, stays compute;
                            vLLM's custom all-reduce runs on the compute stream, which stays one.
dedicated stream            it has no recorded launch (its call fell outside the trace, or came from a
                            thread the profiler did not follow) and runs on a stream where every kernel
                            whose launch is recorded is a collective (and one is). A kernel whose
                            launch is recorded elsewhere than in a communication op is never promoted
                            by its stream.
==========================  ============================================================================

The user's own patterns (``--comm-kernel``) are evidence enough: the user read the names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.errors import InputError
from tracekit.model.taxonomy import HOST_KINDS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TypeAlias

    #: How the functions below read events: the ``columns`` of the events of these ``kinds``
    #: that meet every one of the conditions, in the run's order
    #: (:meth:`~tracekit.model.by_kind.ByKind.select`, or :func:`frame_select` of one frame).
    Select: TypeAlias = Callable[[Sequence[str], Sequence[str | pl.Expr], Sequence[pl.Expr]], pl.DataFrame]

#: Host calls that launch GPU work, linked to it by ``correlation``.
LAUNCH_KINDS: Final = ("runtime", "driver")
_THREAD: Final = ["rank", "pid", "tid"]
_STREAM: Final = ["rank", "device", "stream"]
_LAUNCH: Final = ["rank", "correlation"]


def user_kernel_pattern(patterns: Sequence[str]) -> str | None:
    """The user's kernel patterns as one regular expression, or None when there are none.

    Raises :class:`~tracekit.errors.InputError` (one line) for a pattern polars cannot compile.
    """
    for pattern in patterns:
        try:
            pl.Series([""], dtype=pl.String).str.contains(pattern)
        except pl.exceptions.PolarsError as error:
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            reason = next((line for line in lines if line.startswith("error:")), lines[-1] if lines else "")
            raise InputError(f"--comm-kernel {pattern!r} is not a valid regular expression ({reason})") from None
    return "|".join(f"(?:{p})" for p in patterns) if patterns else None


def frame_select(events: pl.DataFrame) -> Select:
    """:data:`Select` over one frame of every event (``kind`` among its columns)."""

    def select(kinds: Sequence[str], columns: Sequence[str | pl.Expr], conditions: Sequence[pl.Expr]) -> pl.DataFrame:
        return events.lazy().filter(pl.col("kind").is_in(list(kinds)), *conditions).select(*columns).collect()

    return select


#: The columns of a kernel that the functions below read (``_row``: its place in the run).
KERNEL_COLUMNS: Final = ("rank", "name", "category", "correlation", "device", "stream", "start_ns", "end_ns")


def kernels_of(events: pl.DataFrame) -> pl.DataFrame:
    """The kernels of ``events`` with their row numbers (``_row``), for the functions below."""
    return (
        events.lazy()
        .with_row_index("_row")
        .filter(pl.col("kind") == "kernel")
        .select("_row", *KERNEL_COLUMNS)
        .collect()
    )


def _host_spans(comm: pl.DataFrame) -> pl.DataFrame:
    """Communication host events merged per thread into disjoint spans (rank, pid, tid, start, end)."""
    reach = pl.col("end_ns").cum_max().shift(1).over(_THREAD)
    return (
        comm.sort([*_THREAD, "start_ns"])
        .with_columns(new=(pl.col("start_ns") >= reach).fill_null(True))
        .with_columns(span=pl.col("new").cum_sum())
        .group_by([*_THREAD, "span"])
        .agg(pl.col("start_ns").min().alias("span_start_ns"), pl.col("end_ns").max().alias("span_end_ns"))
        .drop("span")
        .sort([*_THREAD, "span_start_ns"])
    )


def _in_time_order(launches: pl.DataFrame) -> pl.DataFrame:
    """``launches`` sorted by start within each thread, as the asof join wants; events in run
    order (rank, start) already are, and are not sorted again."""
    rank, start = pl.col("rank"), pl.col("start_ns")
    in_order = (rank > rank.shift(1)) | ((rank == rank.shift(1)) & (start >= start.shift(1)))
    if launches.select(in_order.fill_null(True).all()).item():
        return launches
    return launches.sort([*_THREAD, "start_ns"])


def launched_in_comm(select: Select, kernels: pl.DataFrame) -> pl.Series:
    """Rows of ``kernels`` launched from inside a communication host event (the events read
    through ``select``).

    Only the launches of these kernels that could be such are read (each query's rows are
    copied): those that start inside a communication span of any thread, then joined by thread,
    and those whose ``external_id`` is a communication operator's, then joined by rank (a 2 GB
    rank's 0.6M launches of kernels read whole, and joined as of a time by thread: 70 MB at the
    peak of its cold read)."""
    collective = pl.col("category") == "collective"
    comm = select(list(HOST_KINDS), [*_THREAD, "start_ns", "end_ns", "external_id"], [collective])
    none = pl.Series("_row", [], dtype=pl.get_index_type())
    if comm.is_empty() or kernels.is_empty():
        return none
    launching = _launching(kernels)
    spans = _host_spans(comm.filter(pl.col("end_ns") > pl.col("start_ns")))
    found = []
    if not spans.is_empty():
        near = select(LAUNCH_KINDS, [*_THREAD, "start_ns", "correlation"], [launching, _in_any(spans)])
        inside = (
            _in_time_order(near)
            .lazy()
            .join_asof(
                spans.lazy(),
                left_on="start_ns",
                right_on="span_start_ns",
                by=_THREAD,
                strategy="backward",
                check_sortedness=False,
            )
            .filter(pl.col("start_ns") < pl.col("span_end_ns"))
            .select(_LAUNCH)
        )
        found.append(inside)
    ids = comm.lazy().filter(pl.col("external_id").is_not_null()).select("rank", "external_id").unique().collect()
    if not ids.is_empty():
        linking = pl.col("external_id").is_in(ids.get_column("external_id").unique().implode())
        links = select(LAUNCH_KINDS, [*_LAUNCH, "external_id"], [launching, linking])
        found.append(links.lazy().join(ids.lazy(), on=["rank", "external_id"], how="semi").select(_LAUNCH))
    if not found:
        return none
    launched = pl.concat(found).unique()
    rows: pl.Series = kernels.lazy().join(launched, on=_LAUNCH, how="semi").select("_row").collect().to_series()
    return rows


def _in_any(spans: pl.DataFrame) -> pl.Expr:
    """Whether an event starts inside one of ``spans`` (:func:`_host_spans`) of any thread and
    rank: one that does not is inside none of its own thread's."""
    anywhere = spans.select(
        *(pl.lit(0).alias(c) for c in _THREAD), start_ns=pl.col("span_start_ns"), end_ns=pl.col("span_end_ns")
    )
    merged = _host_spans(anywhere)  # disjoint, in order of their starts
    start = pl.col("start_ns")
    at = pl.lit(merged.get_column("span_start_ns")).search_sorted(start, side="right").cast(pl.Int64) - 1
    return (at >= 0) & (start < pl.lit(merged.get_column("span_end_ns")).gather(at.clip(0)))


def _launching(kernels: pl.DataFrame) -> pl.Expr:
    """Whether a host call may be the launch of one of ``kernels``: its ``correlation`` is one of
    theirs (of any rank: the joins on rank and correlation that follow decide)."""
    correlations = kernels.get_column("correlation").unique().drop_nulls()
    return pl.col("correlation").is_in(correlations.implode())


def unlaunched_on_comm_streams(select: Select, kernels: pl.DataFrame, *, candidates: pl.DataFrame) -> pl.Series:
    """Rows of ``candidates`` (their ``_row``) with no recorded launch, on streams where every kernel
    of ``kernels`` whose launch is recorded is a collective (and one is); the launches read through
    ``select``."""
    streams = kernels.filter(pl.col("category") == "collective").select(_STREAM).unique()
    if streams.is_empty():
        return pl.Series("_row", [], dtype=pl.get_index_type())
    # the columns read below alone: the kernels on those streams, joined twice, are copied
    on = kernels.select("_row", *_STREAM, "correlation", "category").join(streams, on=_STREAM, how="semi")
    recorded = (
        select(LAUNCH_KINDS, _LAUNCH, [_launching(on)])
        .lazy()
        .join(on.lazy().select(_LAUNCH).unique(), on=_LAUNCH, how="semi")
        .unique()
        .with_columns(launched=pl.lit(True))
    )
    on = (
        on.lazy()
        .join(recorded, on=_LAUNCH, how="left", nulls_equal=False)
        .with_columns(pl.col("launched").fill_null(False))
        .collect()
    )
    dedicated = on.group_by(_STREAM).agg(ok=(~pl.col("launched") | (pl.col("category") == "collective")).all())
    rows: pl.Series = (
        on.filter(~pl.col("launched"), pl.col("_row").is_in(candidates.get_column("_row").implode()))
        .join(dedicated.filter("ok").select(_STREAM), on=_STREAM, how="semi")
        .get_column("_row")
    )
    return rows


def hinted_on_comm_streams(kernels: pl.DataFrame, *, hinted: pl.DataFrame) -> pl.Series:
    """Rows of ``hinted`` (compute kernels whose name reads as expert-parallel all-to-all) on
    streams mostly used for communication: where the collectives of ``kernels`` take more
    device time than the kernels that are neither collectives nor hinted."""
    if hinted.is_empty():
        return pl.Series("_row", [], dtype=pl.get_index_type())
    busy = pl.col("end_ns") - pl.col("start_ns")
    collective = pl.col("category") == "collective"
    hint = pl.col("_row").is_in(hinted.get_column("_row").implode())
    streams = (
        kernels.lazy()
        .join(hinted.lazy().select(_STREAM).unique(), on=_STREAM, how="semi")
        .group_by(_STREAM)
        .agg(comm=busy.filter(collective).sum(), plain=busy.filter(~collective & ~hint).sum())
        .filter(pl.col("comm") > pl.col("plain"))
        .select(_STREAM)
    )
    rows: pl.Series = hinted.lazy().join(streams, on=_STREAM, how="semi").select("_row").collect().to_series()
    return rows
