"""Where each rank's steps are on the host: found from step markers, else inferred.

Sources, in order of trust (:class:`~tracekit.results.vocab.StepSource`); each rank takes the
first one it has:

1. markers: tracekit's own ``step#N`` (NVTX, tracekit domain), then ``ProfilerStep#N``;
2. ``enumerate(DataLoader)#...__next__`` starts: a step runs from one fetch start to the next;
3. ``Optimizer.step#...`` ends: a step runs from one optimizer step's end to the next;
4. a repeated outermost annotation: the same top-level range name (digits aside, so that
   ``iter 3`` and ``iter 4`` are one name) recurring on one thread; a step runs from one
   start to the next. Operator ranges (``aten::mm`` under ``emit_nvtx``) and communication
   ranges (``nccl:all_reduce``, ``MPI_Recv``) are never anchors, and an anchor's ranges must
   cover at least :data:`MIN_COVERAGE` of their span, so that a short range recurring many
   times per iteration (``FlashAttnFunc``) is not one. Of the names that qualify, the one
   that first starts earliest (``forward`` before ``backward``) anchors the steps.

Inferred steps tile the anchor thread. The edge step that no anchor closes (the last one of
a start-anchored source, the first one of the optimizer source) runs to the thread's last
(from its first) host activity, the profiler's own frames aside; it is flagged ``edge``
(its length is a guess). An inferred
source is trusted only with real repetition: at least :data:`MIN_STEPS` steps (for the explicit
iteration markers, DataLoader fetches and optimizer steps, :data:`MIN_MARKED_STEPS`), and every
*inner* step (neither an edge nor the first complete iteration, which may be warm-up) within
a factor :data:`SIMILAR_FACTOR` of the inner steps' median, and the steps must be a loop over
most of the rank's recording: their complete iterations, and the edge step up to one typical
iteration, cover at least :data:`MIN_LOOP_SHARE` of the rank's host span. Anything else (a
recurring per-layer range, whose period jumps at each backward; a micro-benchmark running one
annotated op a few times in a trace a thousand times longer) falls back to the whole trace.

Inferred steps are numbered by ordinal position from 0; found steps keep the trace's numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.dataloader import FETCH_PATTERN
from tracekit.results.vocab import StepSource

if TYPE_CHECKING:
    from tracekit.model.run import Run

#: The fewest steps an inferred source must give (a first iteration and two more).
MIN_STEPS: Final = 3
#: An explicit iteration marker (a DataLoader fetch, an optimizer step) needs only to recur:
#: two of them bound an iteration (the others' inner steps are still compared when there are).
MIN_MARKED_STEPS: Final = 2
#: Inner inferred steps must all lie within this factor of their median length.
SIMILAR_FACTOR: Final = 2.0
#: An annotation anchor's ranges must cover this share of the time from their first start to
#: their last end.
MIN_COVERAGE: Final = 0.2
#: Inferred steps must be a loop over most of the rank's recorded host activity: their complete
#: iterations (from the first anchor to the last) and the edge step, counted up to one typical
#: iteration, cover at least this share of the time from the rank's first to its last host
#: activity on any thread (the profiler's own frames aside). On the real traces here with
#: their step markers stripped, genuine loops cover 0.58-1.0 of it (the least: a capture whose
#: first iteration records nothing for 44 ms before its first fetch, on a span of 94 ms); a
#: micro-benchmark's three runs of one annotated op, a few ms of seconds, cover under 0.01.
MIN_LOOP_SHARE: Final = 0.5
#: ``Optimizer.step#SGD.step``, as ``torch.optim`` records it.
OPTIMIZER_PATTERN: Final = r"^Optimizer\.step#"
#: Annotation names that are never step anchors: operators and communication.
NOT_ANCHOR: Final = r"(?i)::|^(?:nccl|rccl|gloo|mpi|ucc|record_param_comms)"
#: Host kinds that make up a thread's activity (its first start, its last end); not Python
#: frames, whose outermost (the script's ``main``) span the whole run.
HOST_KINDS: Final = ("cpu_op", "annotation", "runtime", "driver", "step")
#: The profiler's own Python frames (``torch/profiler/profiler.py(235): stop_trace``).
PROFILER_FRAME: Final = r"^torch/(?:profiler/|autograd/profiler\.py)"
#: The marker names of tracekit's own steps (the NVTX ``step#N`` ranges of a capture).
TRACEKIT_STEP: Final = r"^step#\d+$"

THREAD: Final = ["rank", "pid", "tid"]
_GROUP: Final = [*THREAD, "anchor"]


def host_steps(run: Run) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every rank's steps on the host, and how they were found.

    Returns ``(steps, found)``: ``steps`` has rank, step, name, start_ns, end_ns and ``edge``
    (True for an inferred step that no anchor bounds on one side); ``found`` has one row per
    rank: rank, source (a :class:`StepSource` value), anchor (the name the steps were
    inferred from, else null), pid, tid (the thread the steps are on, null for none).
    """
    steps, found = _markers(run)
    for source in (StepSource.DATALOADER, StepSource.OPTIMIZER, StepSource.ANNOTATION):
        missing = sorted(set(run.rank_ids) - set(found["rank"].to_list()))
        if not missing:
            break
        more, how = _inferred(run, source, missing)
        steps, found = pl.concat([steps, more]), pl.concat([found, how])
    rest = pl.DataFrame({"rank": run.rank_ids}, schema={"rank": pl.Int32}).join(found, on="rank", how="anti")
    none = rest.with_columns(
        source=pl.lit(StepSource.NONE.value),
        anchor=pl.lit(None, dtype=pl.String),
        pid=pl.lit(None, dtype=pl.Int64),
        tid=pl.lit(None, dtype=pl.Int64),
    )
    return steps.sort("rank", "start_ns"), pl.concat([found, none]).sort("rank")


def _markers(run: Run) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step ranges the trace records; a rank with tracekit's ``step#N`` uses only those."""
    ours = pl.col("name").str.contains(TRACEKIT_STEP)
    source = pl.when(ours).then(pl.lit(StepSource.TRACEKIT.value)).otherwise(pl.lit(StepSource.PROFILER_STEP.value))
    marks = (
        run.select(["step"], "rank", pl.col("name").cast(pl.String), "start_ns", "end_ns", "pid", "tid")
        .unique(["rank", "start_ns", "name"])
        .filter(ours | ~ours.any().over("rank"))
        .with_columns(source=source)
        .sort("rank", "start_ns")
    )
    steps = marks.select(
        "rank",
        pl.col("name").str.extract(r"#(\d+)").cast(pl.Int64, strict=False).alias("step"),
        "name",
        "start_ns",
        "end_ns",
        edge=pl.lit(False),
    )
    found = (
        marks.group_by("rank", maintain_order=True)
        .agg(pl.col("source", "pid", "tid").first())
        .select("rank", "source", pl.lit(None, dtype=pl.String).alias("anchor"), "pid", "tid")
    )
    return steps, found


def _anchors(run: Run, source: StepSource, ranks: list[int]) -> pl.DataFrame:
    """Outermost anchor ranges per thread: rank, pid, tid, anchor, start_ns, end_ns, at_ns.

    ``anchor`` is the group the ranges repeat in: one per thread for fetches and optimizer
    steps (named after the first), one per name (digits aside) for annotations.
    """
    cols: tuple[str | pl.Expr, ...] = (*THREAD, pl.col("name").cast(pl.String).alias("anchor"), "start_ns", "end_ns")
    where = pl.col("rank").is_in(ranks) & pl.col("pid").is_not_null() & pl.col("tid").is_not_null()
    if source == StepSource.ANNOTATION:
        found = iv.outermost(run.select(["annotation"], *cols, "category", where=where), THREAD)
        found = found.filter(
            pl.col("category") != "collective", ~pl.col("anchor").str.contains(NOT_ANCHOR).fill_null(True)
        ).with_columns(anchor=pl.col("anchor").str.replace_all(r"\d+", "N"))
    else:
        kinds, pattern = (
            (["cpu_op", "annotation", "python"], FETCH_PATTERN)
            if source == StepSource.DATALOADER
            else (["cpu_op", "annotation"], OPTIMIZER_PATTERN)
        )
        found = iv.outermost(run.select(kinds, *cols, where=where, name=pattern), THREAD)
        found = found.with_columns(anchor=pl.col("anchor").first().over(THREAD))
    at = pl.col("end_ns") if source == StepSource.OPTIMIZER else pl.col("start_ns")
    return found.select(*_GROUP, "start_ns", "end_ns", at.alias("at_ns"))


def _inferred(run: Run, source: StepSource, ranks: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Steps of ``ranks`` from one inferred ``source``, on the ranks where it repeats."""
    anchors = _anchors(run, source, ranks)
    host = _host(run, anchors["rank"].unique().to_list())
    extent = host.group_by(THREAD).agg(first_ns=pl.col("start_ns").min(), last_ns=pl.col("end_ns").max())
    span = host.group_by("rank").agg(span_ns=pl.col("end_ns").max() - pl.col("start_ns").min())
    by_start = source != StepSource.OPTIMIZER
    nxt, prev = pl.col("at_ns").shift(-1).over(_GROUP), pl.col("at_ns").shift(1).over(_GROUP)
    tiles = (
        anchors.unique([*_GROUP, "at_ns"])
        .sort([*_GROUP, "at_ns"])
        .join(extent, on=THREAD, how="left")
        .with_columns(
            covered=(pl.col("end_ns") - pl.col("start_ns")).sum().over(_GROUP),
            coverage=(pl.col("end_ns") - pl.col("start_ns")).sum().over(_GROUP)
            / (pl.col("end_ns").max() - pl.col("start_ns").min()).over(_GROUP),
            # the first complete iteration: kept out of the similarity test (it may be warm-up)
            first_full=pl.int_range(pl.len()).over(_GROUP) == (0 if by_start else 1),
        )
        .with_columns(
            start_ns=pl.col("at_ns") if by_start else prev.fill_null(pl.col("first_ns")),
            end_ns=nxt.fill_null(pl.col("last_ns")) if by_start else pl.col("at_ns"),
            edge=(nxt if by_start else prev).is_null(),
        )
        .with_columns(length=pl.col("end_ns") - pl.col("start_ns"))
        .join(span, on="rank", how="left")
    )
    return _best(tiles, source)


def _host(run: Run, ranks: list[int]) -> pl.DataFrame:
    """rank, pid, tid, start_ns, end_ns: the host activity of ``ranks``, the profiler's own aside.

    What starts inside the profiler's own Python frames (``profiler.stop()`` waits for the
    device: tens of ms after the last iteration) is no iteration's.
    """
    where = pl.col("rank").is_in(ranks)
    host = run.select(HOST_KINDS, *THREAD, "start_ns", "end_ns", where=where & pl.col("pid").is_not_null())
    own = run.select(["python"], *THREAD, "start_ns", "end_ns", where=where, name=PROFILER_FRAME)
    if own.height:
        host = host.with_row_index("_row")
        inside = iv.locate(host, "start_ns", iv.union(own, THREAD), by=THREAD, keep=[])
        host = host.join(inside.select("_row"), on="_row", how="anti").drop("_row")
    return host


def _best(tiles: pl.DataFrame, source: StepSource) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per rank the group of tiles that repeats alike (see the module's rules), if any."""
    inner = pl.col("length").filter(~pl.col("edge") & ~pl.col("first_full"))
    # the loop: every complete iteration, and the edge step up to one typical iteration
    typical = pl.col("length").filter(~pl.col("edge")).median()
    looped = pl.when(pl.col("edge")).then(pl.min_horizontal("length", typical)).otherwise("length")
    groups = tiles.group_by(_GROUP).agg(
        n=pl.len(),
        inner=inner.len(),
        low=inner.min() / inner.median(),
        high=inner.max() / inner.median(),
        shortest=pl.col("length").min(),
        covered=pl.col("covered").first(),
        coverage=pl.col("coverage").first(),
        first_ns=pl.col("at_ns").min(),
        loop=looped.sum() / pl.col("span_ns").first(),
    )
    marked = source in (StepSource.DATALOADER, StepSource.OPTIMIZER)
    enough = (pl.col("n") >= MIN_MARKED_STEPS) if marked else ((pl.col("n") >= MIN_STEPS) & (pl.col("inner") >= 1))
    ok = groups.filter(
        enough,
        pl.col("low").fill_null(1.0) >= 1 / SIMILAR_FACTOR,
        pl.col("high").fill_null(1.0) <= SIMILAR_FACTOR,
        pl.col("shortest") > 0,
        pl.col("loop") >= MIN_LOOP_SHARE,
    )
    if source == StepSource.ANNOTATION:  # the earliest of the names that qualify
        ok = ok.filter(pl.col("coverage") >= MIN_COVERAGE)
        ok = ok.sort(["rank", "first_ns", "covered"], descending=[False, False, True])
    else:  # the thread where the anchors take the most time
        ok = ok.sort(["rank", "covered", "pid", "tid"], descending=[False, True, False, False])
    ok = ok.unique("rank", keep="first", maintain_order=True)
    chosen = tiles.join(ok.select(_GROUP), on=_GROUP, how="semi").sort("rank", "start_ns")
    ordinal = pl.int_range(pl.len()).over("rank").cast(pl.Int64)
    steps = chosen.select(
        "rank",
        ordinal.alias("step"),
        (pl.lit("inferred step#") + ordinal.cast(pl.String)).alias("name"),
        "start_ns",
        "end_ns",
        "edge",
    )
    found = ok.select("rank", pl.lit(source.value).alias("source"), "anchor", "pid", "tid")
    return steps, found
