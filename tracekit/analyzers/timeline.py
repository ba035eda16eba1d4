"""The GPU timeline of each rank cut into segments, each flagged compute/collective/memory.

Built once (one sweep over every GPU activity of every rank) and shared by the GPU time
breakdown and the comm/compute overlap, so both measure the same wall-clock unions over all
streams and devices of a rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.model.schema import KINDS
from tracekit.results.vocab import WindowKind

if TYPE_CHECKING:
    from tracekit.analyzers.steps import StepResult
    from tracekit.model.run import Run

LABELS = ("compute", "collective", "memory")
#: Copies that move data between the host and a device, or between devices (not on-device
#: copies and sets, which are device work like kernels): what a transfer-bound run waits on.
TRANSFER_COPY = r"(?i)HtoD|DtoH|PtoP|Host|Pageable|Pinned|Peer"
COLLECTIVE = pl.col("category") == "collective"


def windows(activity: pl.DataFrame, steps: StepResult, window: WindowKind = WindowKind.STEPS) -> pl.DataFrame:
    """The windows measured on each rank: rank, step (null for a whole span), start_ns, end_ns.

    :attr:`~WindowKind.STEPS`: the step windows where a rank has steps, else its GPU span.
    :attr:`~WindowKind.GPU_SPAN`: from the first GPU activity of the rank to its last end, the
    definition HTA uses.
    """
    span = (
        activity.group_by("rank")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .with_columns(step=pl.lit(None, dtype=pl.Int64))
    )
    if window is WindowKind.GPU_SPAN or not steps.has_steps:
        return span.select("rank", "step", "start_ns", "end_ns").sort("rank")
    stepped = steps.steps.select(
        "rank", "step", pl.col("win_start_ns").alias("start_ns"), pl.col("win_end_ns").alias("end_ns")
    )
    stepped = stepped.filter(pl.col("rank").is_in(span["rank"].implode()))
    with_steps = stepped["rank"].unique().implode()
    rest = span.filter(~pl.col("rank").is_in(with_steps)).select("rank", "step", "start_ns", "end_ns")
    return pl.concat([stepped, rest]).sort("rank", "start_ns")


def segments(activity: pl.DataFrame, frames: pl.DataFrame, *, cuts: pl.DataFrame | None = None) -> pl.DataFrame:
    """Elementary segments inside ``frames`` (from :func:`windows`).

    Columns: rank, step, start_ns, end_ns, length_ns, compute, collective, memory, transfer
    (a host<->device or peer copy runs). ``cuts``: ranges (rank, start_ns, end_ns) whose
    boundaries also cut the segments, so that none straddles one (the training thread's
    phases: the ledger says what the device did in each).
    """
    parts = {
        label: activity.filter(pl.col("category") == label).select("rank", "start_ns", "end_ns") for label in LABELS
    }
    names = activity.get_column("name").unique().cast(pl.String).drop_nulls()  # each name tested once
    transfers = names.filter(names.str.contains(TRANSFER_COPY)).implode()
    copies = (pl.col("kind") == "memcpy") & pl.col("name").is_in(transfers)
    parts["transfer"] = activity.filter(copies).select("rank", "start_ns", "end_ns")
    cut = iv.sweep({**parts, **boundaries(cuts), "window": frames.select("rank", "start_ns", "end_ns")}, ["rank"])
    return (
        iv.locate(cut.filter(pl.col("window")), "start_ns", frames, by=["rank"], keep=["step"])
        .with_columns(length_ns=pl.col("end_ns") - pl.col("start_ns"))
        .select("rank", "step", "start_ns", "end_ns", "length_ns", *LABELS, "transfer")
    )


def boundaries(ranges: pl.DataFrame | None) -> dict[str, pl.DataFrame]:
    """Sweep parts that cut a timeline at every start and end of ``ranges`` (rank, start_ns,
    end_ns): the ranges of each rank alternate between two parts, so that one range ending where
    the next begins still leaves a boundary there (a union would merge them)."""
    if ranges is None or ranges.height == 0:
        return {}
    ordered = iv.sort_within(ranges.select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns"), ["rank"], "start_ns")
    odd = (pl.int_range(pl.len()).over("rank") % 2) == 1
    return {"_cut_even": ordered.filter(~odd), "_cut_odd": ordered.filter(odd)}


#: Host ranges of DDP's reducer (``torch::distributed::reducer::mul_out``,
#: ``torch.distributed.ddp.reducer::copy_bucket_to_grad``): gradients copied into and out of
#: the all-reduce's buckets, work that exists only to communicate (none on one rank).
DDP_REDUCER = r"^torch(?:::|\.)distributed(?:::|\.)(?:ddp\.)?reducer::"
#: The name of the host activity rows that are a training thread waiting on a collective.
COLLECTIVE_WAIT = "tracekit.wait/collective"
#: The name of the host activity rows that are operators' time (their union, cut around DDP's
#: reducer ranges).
OPERATORS = "tracekit.host/operators"


def with_peers(run: Run) -> pl.Expr:
    """Whether an event's rank has peers: its trace records no world of one
    (:attr:`~tracekit.model.run.Run.solitary_ranks`)."""
    return ~pl.col("rank").is_in(run.solitary_ranks)


def host_activity(run: Run) -> pl.DataFrame:
    """The host as the device of a CPU-only run: ``rank, kind, name, category, start_ns,
    end_ns, launch_ns`` like GPU activity.

    * operators (any thread) are compute, except inside DDP's reducer ranges;
    * collectives are collectives: the backend's own work (``gloo:all_reduce`` on its worker
      threads, spans that include waiting for peers), the front end's calls
      (``c10d::allreduce_``) and DDP's reducer ranges (:data:`DDP_REDUCER`);
    * the training thread waiting on a collective of its rank is a collective too (see
      :func:`collective_waits`): DDP's reducer blocks the thread at the end of backward
      until the gradient all-reduce is done, and ``work.wait()`` blocks it in the open;
    * but on a rank alone in its world (its trace records a world size of 1) a collective has
      no peer to exchange with or wait for: its operators are the rank's own work (a copy at
      most), compute like any other, and no stretch of the thread is a wait on one.
    """
    columns = ("rank", "kind", "name", pl.col("category").cast(pl.String), "start_ns", "end_ns")
    kind = pl.Enum(list(KINDS))
    peers = with_peers(run)
    reducer = run.select(["cpu_op", "annotation"], *columns, name=DDP_REDUCER, where=peers).with_columns(
        category=pl.lit("collective")
    )
    operators = run.select(
        ["cpu_op"], "rank", "start_ns", "end_ns", where=(pl.col("category") != "collective") | ~peers
    )
    compute = (iv.subtract(operators, reducer, ["rank"]) if reducer.height else iv.union(operators, ["rank"])).select(
        pl.col("rank").cast(pl.Int32),
        pl.lit("cpu_op", dtype=kind).alias("kind"),
        pl.lit(OPERATORS, dtype=pl.Categorical()).alias("name"),
        pl.lit("compute").alias("category"),
        "start_ns",
        "end_ns",
    )
    collective = pl.concat([run.select(["cpu_op", "annotation"], *columns, where=COLLECTIVE & peers), reducer])
    waits = collective_waits(run, collective).select(
        "rank",
        pl.lit("other", dtype=kind).alias("kind"),
        pl.lit(COLLECTIVE_WAIT, dtype=pl.Categorical()).alias("name"),
        pl.lit("collective").alias("category"),
        "start_ns",
        "end_ns",
    )
    return pl.concat([compute, collective, waits]).with_columns(launch_ns=pl.col("start_ns"))


def training_threads(run: Run) -> pl.DataFrame:
    """``rank, pid, tid`` of each rank's training thread: the thread recording the steps, or
    on a rank without steps the thread that records the most operators."""
    stepped = run.select(["step"], "rank", "pid", "tid").unique()
    busiest = (
        run.select(["cpu_op"], "rank", "pid", "tid")
        .group_by("rank", "pid", "tid")
        .len()
        .filter(~pl.col("rank").is_in(stepped["rank"].implode()))
        .sort(["rank", "len", "pid", "tid"], descending=[False, True, False, False])
        .group_by("rank", maintain_order=True)
        .first()
        .drop("len")
    )
    return pl.concat([stepped, busiest]).sort("rank", "pid", "tid")


def collective_waits(run: Run, collectives: pl.DataFrame) -> pl.DataFrame:
    """Where each rank's training thread waits on a collective of its rank: ``rank,
    start_ns, end_ns``.

    A stretch in which the training thread runs no operator is a wait on a collective from
    the moment a collective of its rank is in flight in it (from its start, when one already
    is) to its end: the thread resumes at its next operator, once the collective's
    completion has reached it. In gloo traces the blocked thread records nothing (DDP's
    reducer waits in autograd's final callback, between ``copy_bucket_to_grad`` ranges)
    while the collective runs on gloo's own threads; the stretch after the collective's
    span ends is the thread being woken. Stretches with no collective in flight (Python
    between operators, a data wait) are not waits on one.
    """
    threads = training_threads(run)
    ops = run.select(["cpu_op"], "rank", "pid", "tid", "start_ns", "end_ns").join(
        threads, on=["rank", "pid", "tid"], how="semi"
    )
    gaps = iv.gaps(ops.select("rank", "start_ns", "end_ns"), ["rank"]).with_row_index("gap_id")
    coll = collectives.select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns")
    if gaps.height == 0 or coll.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64})
    cut = iv.sweep({"idle": gaps.select("rank", "start_ns", "end_ns"), "coll": coll}, ["rank"]).filter("idle")
    located = iv.locate(cut, "start_ns", gaps, by=["rank"], keep=["gap_id"])
    # from the first collective in flight in the gap to the gap's end
    in_flight_yet = pl.col("coll").cast(pl.Int8).cum_max().over("gap_id") > 0
    waiting = located.sort("gap_id", "start_ns").filter(in_flight_yet)
    return iv.union(waiting.select("rank", "start_ns", "end_ns"), ["rank"])


def host_collective_waits(run: Run) -> pl.DataFrame:
    """Where each rank's training thread waits on a host collective (gloo, MPI, UCC: a GPU run
    on a CPU backend too): rank, start_ns, end_ns (see :func:`collective_waits`); none on a
    rank alone in its world."""
    collective = run.select(["cpu_op", "annotation"], "rank", "start_ns", "end_ns", where=COLLECTIVE & with_peers(run))
    return collective_waits(run, collective)
