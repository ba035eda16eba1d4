"""Collectives matched across ranks: each call, with the same call on the other ranks of its group.

An instance is keyed by (process group, operation, k), k being, best first: the call's
sequence number in its process group (Kineto ``Seq``); its order among the rank's calls of
that operation in that group; with no group recorded, its order on its collective stream
(the rank's collective streams numbered by first use); for host collectives with no group,
its order among the rank's calls of that operation. A kernel's group is that of the
``record_param_comms`` host op that launched it (the launch's external id, else the op
around the launch on its thread), else that of the other kernels of its stream. Groups
that share a name over disjoint ranks (``split_group``) are told apart by their members in
``distributedInfo.pg_config``; a group's size comes from there, else from the op's
arguments, else (the default group, or none recorded) from the world size.

An instance is *matched* when two or more ranks hold it; only then has it a *latency
floor* (the shortest duration over its ranks: the communication itself, since ranks leave
a collective together) and *waits* (the rest of each rank's duration); with one rank,
latency and waiting cannot be separated and both are null. It is *complete* when every
rank of its group is present. A rank's *arrival* is its kernel's start on the GPU, or for
host collectives the ``c10d::`` call that enqueued the gloo/MPI op (a worker thread starts
it later, behind the rank's previous collectives: queueing that is communication, not
lateness); its *lateness* is its arrival minus the earliest arrival,
on the shared clock, independent of durations. The rank that arrives last explains each
other rank's wait up to the gap between their arrivals (``explained_wait_ns``); the rest
(``unexplained_wait_ns``) no arrival explains: the collective's own cost (bandwidth,
contention, ranks that leave at different times).

GPU runs use collective kernels (NCCL/RCCL/MSCCL); a rank without any uses its host-side
collectives: ``gloo:``/``mpi:``/``ucc:`` operations (whose spans include the wait), else
``c10d::`` calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.alignment import align, key_ids, misaligned_frame, renumber, step_shifts, with_members
from tracekit.analyzers.clocks import estimate_clocks, no_clocks, rank_hosts, tolerance
from tracekit.model.taxonomy import kernel_op_expr
from tracekit.results.vocab import CollectiveMatch, MatchKey, StepSource

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.analyzers.steps import StepResult
    from tracekit.model.run import RankInfo, Run

HOST_OP: Final = r"^(?:gloo|nccl|mpi|ucc):([A-Za-z0-9_]+)"
C10D_OP: Final = r"^c10d(?:_functional)?::([A-Za-z0-9_]+?)_?$"
#: The host op that records a collective's arguments (group, name, size, sequence number).
PARAM_COMMS: Final = r"^record_param_comms$"
#: The name PyTorch gives the default (world) process group.
DEFAULT_PG: Final = "0"
#: A rank "arrived last" when its arrival is within this share of the instance's spread ...
LAST_TOLERANCE_SHARE: Final = 0.05
#: ... or within this many ns of the latest arrival.
LAST_TOLERANCE_NS: Final = 20_000
#: The columns that identify an instance.
KEYS: Final = ("pg", "op", "matched_by", "k")
#: The cross-rank part's number of each instance (:func:`_numbered`), in place of :data:`KEYS`.
INSTANCE: Final = "_instance"
#: When a call arrives, on its rank's own clock: a kernel when it starts, a host collective when
#: it is launched. The cross-rank part moves ``arrival_ns`` onto the corrected clocks
#: (:func:`~tracekit.analyzers.clocks.tolerance`); what is compared with the rank's own events
#: (its communication time, say) reads this.
OWN_ARRIVAL: Final = pl.when(pl.col("source") == "kernel").then(pl.col("start_ns")).otherwise(pl.col("launch_ns"))
_ARGS: Final = ("pg_name", "coll_name", "group_size", "seq")


@dataclass(frozen=True)
class CollectiveResult:
    """Matched collective instances, and how far the ranks present allow matching them."""

    #: rank, pg, op, matched_by, k, source ("kernel"/"host"), stream, step, launch_ns,
    #: arrival_ns, start_ns, end_ns, duration_ns, floor_ns, wait_ns, lateness_ns,
    #: explained_wait_ns, unexplained_wait_ns, is_last (the last six null when unmatched;
    #: arrival and lateness on the corrected clocks, lateness null within their uncertainty),
    #: and :data:`INSTANCE`, its instance's number (in ``instances`` too: what joins the two)
    per_rank: pl.DataFrame
    #: pg, op, matched_by, k, step, ranks, expected_ranks, matched, complete, common,
    #: first_start_ns, first_arrival_ns, floor_ns, spread_ns (of arrivals), tolerance_ns,
    #: mean_wait_ns, explained_wait_ns, unexplained_wait_ns (means over its ranks), last_rank
    #: (latest arrival), last_ranks (within tolerance of it); floors, waits and last ranks are
    #: null when unmatched, last ranks also when the spread is within the clocks' tolerance;
    #: :data:`INSTANCE`
    instances: pl.DataFrame
    #: ranks whose traces are present
    ranks_present: int = 0
    #: the job's world size, when the traces record it
    world_size: int | None = None
    match: CollectiveMatch = CollectiveMatch.NONE
    #: each rank's clock offset (:func:`~tracekit.analyzers.clocks.estimate_clocks`)
    clocks: pl.DataFrame = field(default_factory=no_clocks)
    #: the steps whose collectives do not align across ranks (:mod:`~tracekit.analyzers.alignment`)
    misaligned: pl.DataFrame = field(default_factory=misaligned_frame)

    @property
    def has_collectives(self) -> bool:
        """Whether any collective was found."""
        return self.per_rank.height > 0


def _kernel_collectives(activity: pl.DataFrame) -> pl.DataFrame:
    kernels = activity.filter(pl.col("category") == "collective", pl.col("kind") == "kernel")
    # each distinct name's operation found once (patterns tried in turn), not once per launch
    names = kernels.select(pl.col("name").unique())
    ops = names.with_columns(op=kernel_op_expr(pl.col("name").cast(pl.String)))
    return kernels.join(ops, on="name", how="left", maintain_order="left").select(
        "rank",
        "op",
        "launch_ns",
        "start_ns",
        "end_ns",
        pl.lit("kernel").alias("source"),
        "stream",
        "correlation",
    )


def _host_collectives(run: Run, ranks_with_kernels: pl.Series) -> pl.DataFrame:
    host = run.select(
        ["cpu_op", "annotation"],
        "rank",
        pl.col("name").cast(pl.String).alias("n"),
        "start_ns",
        "end_ns",
        *(pl.col(a).cast(pl.String) if a in ("pg_name", "coll_name") else pl.col(a) for a in _ARGS),
        where=(pl.col("category") == "collective") & ~pl.col("rank").is_in(ranks_with_kernels.implode()),
    )
    backend = host.filter(pl.col("n").str.contains(HOST_OP)).with_columns(op=pl.col("n").str.extract(HOST_OP))
    c10d = host.filter(pl.col("n").str.contains(C10D_OP)).with_columns(op=pl.col("n").str.extract(C10D_OP))
    alone = c10d.filter(~pl.col("rank").is_in(backend["rank"].unique().implode()))
    return pl.concat([_host_launches(backend, c10d), alone.with_columns(launch_ns=pl.col("start_ns"))]).select(
        "rank",
        "op",
        "launch_ns",
        "start_ns",
        "end_ns",
        pl.lit("host").alias("source"),
        pl.lit(None, dtype=pl.Int64).alias("stream"),
        pl.lit(None, dtype=pl.Int64).alias("correlation"),
        *_ARGS,
    )


def _host_launches(backend: pl.DataFrame, c10d: pl.DataFrame) -> pl.DataFrame:
    """``backend`` ops with ``launch_ns``: when the rank's own thread asked for each one.

    A backend op (``gloo:all_reduce``) runs on a worker thread once the worker is free, so
    its start includes queueing behind the rank's previous collectives; the ``c10d::`` call
    that enqueued it marks when the rank got there. Workers take calls in order, so the
    k-th backend op of a rank is its k-th ``c10d::`` call, where the counts agree; else the
    op's start stands in.
    """
    order = pl.int_range(pl.len()).over("rank")
    calls = c10d.sort("rank", "start_ns").select("rank", order.alias("i"), pl.col("start_ns").alias("call_ns"))
    ops = backend.sort("rank", "start_ns").with_columns(i=order)
    counts_agree = (pl.len().over("rank") == pl.col("calls")).fill_null(False)
    launch = pl.when(counts_agree).then(pl.min_horizontal("call_ns", "start_ns")).otherwise(pl.col("start_ns"))
    return (
        ops.join(calls.group_by("rank").agg(calls=pl.len()), on="rank", how="left")
        .join(calls, on=["rank", "i"], how="left")
        .with_columns(launch_ns=launch)
        .drop("i", "calls", "call_ns")
    )


def _launch_args(run: Run, kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` with the arguments of the ``record_param_comms`` op that launched each one.

    The op is the one whose external id the launch carries, else the innermost one open on
    the launching thread when the launch was made (older traces number them apart).
    """
    launches = run.select(
        ["runtime", "driver"],
        "rank",
        "correlation",
        "tid",
        "external_id",
        pl.col("start_ns").alias("at_ns"),
        where=pl.col("correlation").is_in(kernels["correlation"].drop_nulls().unique().implode()),
    )
    params = run.select(
        ["cpu_op"],
        "rank",
        "tid",
        "external_id",
        "start_ns",
        "end_ns",
        pl.col("pg_name").cast(pl.String),
        pl.col("coll_name").cast(pl.String),
        "group_size",
        "seq",
        name=PARAM_COMMS,
    )
    by_id = launches.join(params.drop("tid", "start_ns", "end_ns"), on=["rank", "external_id"], how="inner")
    rest = launches.join(by_id, on=["rank", "correlation"], how="anti")
    by_time = iv.locate(rest, "at_ns", params.drop("external_id"), by=["rank", "tid"], keep=list(_ARGS))
    found = pl.concat([by_id.select("rank", "correlation", *_ARGS), by_time.select("rank", "correlation", *_ARGS)])
    found = found.unique(["rank", "correlation"], keep="first", maintain_order=True)
    return kernels.join(found, on=["rank", "correlation"], how="left")


def no_groups() -> pl.DataFrame:
    """The frame of :func:`group_members` for a run that lists no process groups."""
    schema = {"rank": pl.Int32, "pg_name": pl.String, "members": pl.Int64, "label": pl.String}
    return pl.DataFrame(schema=schema)


def group_members(ranks: Sequence[RankInfo]) -> pl.DataFrame:
    """Per rank and group name: the group's size and its label (``name@first member`` where
    groups of one name have different members on different ranks, as ``split_group`` makes).

    A label depends on every rank of the run; a size only on the rank's own metadata."""
    rows = [
        (r.rank, g.name, len(g.ranks), min(g.ranks, default=-1), str(g.ranks)) for r in ranks for g in r.process_groups
    ]
    schema = {"rank": pl.Int32, "pg_name": pl.String, "members": pl.Int64, "first": pl.Int64, "set": pl.String}
    df = pl.DataFrame(rows, schema=schema, orient="row")
    shared = pl.col("set").n_unique().over("pg_name") > 1
    label = pl.when(shared).then(pl.format("{}@{}", "pg_name", "first")).otherwise("pg_name")
    return df.select("rank", "pg_name", "members", label.alias("label"))


def _stream_groups(found: pl.DataFrame) -> pl.DataFrame:
    """Kernels without a group take the group of their stream, when it carries exactly one."""
    one = (
        found.filter(pl.col("pg_name").is_not_null(), pl.col("stream").is_not_null())
        .group_by("rank", "stream")
        .agg(pl.col("pg_name").unique().alias("names"))
        .filter(pl.col("names").list.len() == 1)
        .select("rank", "stream", pl.col("names").list.first().alias("stream_pg"))
    )
    return (
        found.join(one, on=["rank", "stream"], how="left")
        .with_columns(pl.coalesce("pg_name", "stream_pg").alias("pg_name"))
        .drop("stream_pg")
    )


def _grouped(found: pl.DataFrame, groups: pl.DataFrame) -> pl.DataFrame:
    """``found`` with each call's group (a kernel without one takes its stream's:
    :func:`_stream_groups`) and that group's size on its rank (``members``, null when the rank's
    metadata does not list the group)."""
    members = groups.select("rank", "pg_name", "members")
    return _stream_groups(found).join(members, on=["rank", "pg_name"], how="left", maintain_order="left")


def keyed(found: pl.DataFrame) -> pl.DataFrame:
    """``found`` (:func:`collective_calls`) with the instance key of each call (pg, op,
    matched_by, k) and the size of its group, as far as the rank's own metadata tells them
    (:func:`_in_run` completes both), in order of (rank, start).

    A key depends on every call of the rank before it (its order ``k`` in its group, the slot of
    its stream among the rank's, numbered by first use): it is worked out over the rank's calls
    at once. Keying keyed calls again gives the same keys, so a rank's calls keyed a window at a
    time are keyed again once put together (:func:`~tracekit.analyzers.sections.collectives_fold`)."""
    no_group = pl.col("pg_name").is_null() & (pl.col("source") == "kernel")
    first_use = pl.col("start_ns").min().over("rank", "stream")
    slot = pl.when(no_group).then(first_use).rank("dense").over("rank") - 1
    pg = (
        pl.when(pl.col("pg_name").is_not_null())
        .then(pl.col("pg_name"))
        .when(no_group)
        .then(pl.format("stream#{}", slot))
        .otherwise(pl.lit(""))
    )
    how = (
        pl.when(pl.col("pg_name").is_not_null() & pl.col("seq").is_not_null())
        .then(pl.lit(MatchKey.SEQUENCE.value))
        .when(pl.col("pg_name").is_not_null())
        .then(pl.lit(MatchKey.GROUP_ORDER.value))
        .when(no_group)
        .then(pl.lit(MatchKey.STREAM_ORDER.value))
        .otherwise(pl.lit(MatchKey.OP_ORDER.value))
    )
    expected = pl.coalesce("members", pl.col("group_size").cast(pl.Int64))
    found = found.with_columns(pg=pg, matched_by=how, op=pl.coalesce("coll_name", "op"), expected_ranks=expected).sort(
        "rank", "start_ns"
    )
    order = pl.int_range(pl.len()).over("rank", "pg", "op", "matched_by")
    k = pl.when(pl.col("matched_by") == MatchKey.SEQUENCE.value).then(pl.col("seq")).otherwise(order)
    return found.with_columns(k=k)


def _in_run(found: pl.DataFrame, groups: pl.DataFrame, world_size: int | None) -> pl.DataFrame:
    """``found`` keyed within the whole run: a group's label where groups of one name differ
    between ranks (a rank's calls of one name are one group, so its order ``k`` stays), and the
    world size as the size of the default group where nothing else gave one."""
    default = pl.col("pg_name").is_null() | (pl.col("pg_name") == DEFAULT_PG)
    world = pl.when(default).then(pl.lit(world_size, dtype=pl.Int64))
    expected = pl.coalesce("expected_ranks", world)
    # only the labels that differ from their name change a key (a join of every call on a text
    # key, most often to find its own name again: 0.6 s of 2.3M calls at 1,024 ranks)
    labels = groups.filter(pl.col("label") != pl.col("pg_name")).select("rank", "pg_name", "label")
    if labels.height == 0:
        return found.with_columns(expected_ranks=expected)
    return (
        found.join(labels, on=["rank", "pg_name"], how="left", maintain_order="left")
        .with_columns(
            pg=pl.when(pl.col("pg_name").is_not_null()).then(pl.coalesce("label", "pg_name")).otherwise("pg"),
            expected_ranks=expected,
        )
        .drop("label")
    )


_MATCHED: Final = pl.col("rank").n_unique().over(INSTANCE) >= 2


def _numbered(found: pl.DataFrame) -> pl.DataFrame:
    """``found`` with :data:`INSTANCE`: a number per instance (:data:`KEYS`), which the cross-rank
    part groups by instead: of its keys three are text, which every grouping, window and join
    on them encodes row by row again (2.6M calls of 1,024 ranks: about 15 of them). The number
    packs the operation's (:func:`~tracekit.analyzers.alignment.key_ids` of the text keys, in
    the order first met) with ``k`` where both fit (a join on the keys took 0.4 s of 2.3M calls)."""
    text = list(KEYS[:3])
    ids, ops = key_ids(found, text)
    k = found.get_column("k")
    if found.height and k.null_count() == 0 and k.min() >= 0 and k.max() < _K_LIMIT and ops.height < _OPS_LIMIT:  # type: ignore[operator]
        op = ids.replace_strict(ops.get_column("_key"), pl.int_range(ops.height, eager=True), return_dtype=pl.Int64)
        return found.with_columns((op * _K_LIMIT + k.cast(pl.Int64)).alias(INSTANCE))
    keys = list(KEYS)
    numbers = found.select(keys).unique().with_row_index(INSTANCE).with_columns(pl.col(INSTANCE).cast(pl.Int64))
    return found.join(numbers, on=keys, how="left", nulls_equal=True, maintain_order="left")


#: :func:`_numbered` packs an instance's ``k`` under this, its operation's number above it.
_K_LIMIT: Final = 1 << 40
_OPS_LIMIT: Final = 1 << 22


def _floors(found: pl.DataFrame) -> pl.DataFrame:
    """Each instance's latency floor (null when unmatched) and each call's wait (``found``:
    :func:`_numbered`)."""
    floor = pl.when(_MATCHED).then(pl.col("duration_ns").min().over(INSTANCE))
    return found.with_columns(floor_ns=floor).with_columns(wait_ns=pl.col("duration_ns") - pl.col("floor_ns"))


def _measure(found: pl.DataFrame) -> pl.DataFrame:
    """Lateness and the explained part of each wait (null when unmatched), from arrivals on
    the corrected clocks. An instance whose arrivals spread no further than the clocks'
    tolerance has no measurable lateness: no last rank, nothing its lateness explains.

    Whether a call is matched is a column for the while (``_matched``): the expression, a window
    counting each instance's ranks, was computed again in each of the three contexts that read it
    (2.3M calls of 1,024 ranks: 0.8 -> 0.3 s)."""
    found = found.with_columns(
        first_arrival_ns=pl.col("arrival_ns").min().over(INSTANCE),
        last_arrival_ns=pl.col("arrival_ns").max().over(INSTANCE),
        _matched=_MATCHED,
    )
    matched = pl.col("_matched")
    spread = pl.col("last_arrival_ns") - pl.col("first_arrival_ns")
    measurable = matched & ((pl.col("tolerance_ns") == 0) | (spread > pl.col("tolerance_ns")))
    tolerance = pl.max_horizontal(spread * LAST_TOLERANCE_SHARE, pl.lit(LAST_TOLERANCE_NS))
    gap = pl.col("last_arrival_ns") - pl.col("arrival_ns")
    found = found.with_columns(
        lateness_ns=pl.when(measurable).then(pl.col("arrival_ns") - pl.col("first_arrival_ns")),
        is_last=measurable & (spread > LAST_TOLERANCE_NS) & (gap <= tolerance),
    )
    explained = pl.when(measurable).then(pl.min_horizontal("wait_ns", gap).clip(lower_bound=0)).otherwise(0)
    return (
        found.with_columns(explained_wait_ns=pl.when(matched).then(explained))
        .with_columns(unexplained_wait_ns=pl.col("wait_ns") - pl.col("explained_wait_ns"))
        .drop("_matched")
    )


def _instances(found: pl.DataFrame) -> pl.DataFrame:
    keys = list(KEYS)
    last = pl.col("rank").sort_by("arrival_ns", "wait_ns", "rank", descending=[True, False, False]).first()
    out = found.group_by(INSTANCE).agg(
        *(pl.col(k).first() for k in keys),
        step=pl.col("step").min(),
        ranks=pl.col("rank").n_unique(),
        members_present=pl.col("members_present").first(),
        expected_ranks=pl.col("expected_ranks").max(),
        first_start_ns=pl.col("start_ns").min(),
        first_arrival_ns=pl.col("arrival_ns").min(),
        floor_ns=pl.col("floor_ns").first(),
        spread_ns=pl.when(pl.col("rank").n_unique() >= 2).then(pl.col("arrival_ns").max() - pl.col("arrival_ns").min()),
        tolerance_ns=pl.col("tolerance_ns").first(),
        measurable=pl.col("lateness_ns").is_not_null().any(),
        mean_wait_ns=pl.col("wait_ns").mean(),
        explained_wait_ns=pl.col("explained_wait_ns").mean(),
        unexplained_wait_ns=pl.col("unexplained_wait_ns").mean(),
        last_rank=last,
        last_ranks=pl.col("rank").filter(pl.col("is_last")).sort(),
    )
    matched = pl.col("ranks") >= 2
    return (
        out.with_columns(
            matched=matched,
            # more ranks than the group has: groups that share a name were merged, not complete
            complete=matched & (pl.col("ranks") == pl.coalesce("expected_ranks", "ranks")),
            common=pl.col("ranks") == pl.col("members_present"),
            last_rank=pl.when(pl.col("measurable")).then(pl.col("last_rank")),
        )
        .select(
            *keys,
            "step",
            "ranks",
            "expected_ranks",
            "matched",
            "complete",
            "common",
            "first_start_ns",
            "first_arrival_ns",
            "floor_ns",
            "spread_ns",
            "tolerance_ns",
            "mean_wait_ns",
            "explained_wait_ns",
            "unexplained_wait_ns",
            "last_rank",
            "last_ranks",
            INSTANCE,
        )
        .sort("pg", "op", "matched_by", "k")
    )


#: Step sources whose numbers are the trace's own (the same iteration has the same number on
#: every rank): only these align collectives across ranks (inferred steps are ordinals).
MARKED: Final = (StepSource.TRACEKIT.value, StepSource.PROFILER_STEP.value)


def _in_windows(found: pl.DataFrame, frames: pl.DataFrame, name: str) -> pl.DataFrame:
    """``found`` with column ``name``: the step of ``frames`` whose window holds each launch."""
    if frames.height == 0:
        return found.with_columns(pl.lit(None, dtype=pl.Int64).alias(name))
    frames = frames.select(
        "rank",
        pl.col("step").alias(name),
        pl.col("win_start_ns").alias("start_ns"),
        pl.col("win_end_ns").alias("end_ns"),
    )
    found = found.with_row_index("_row")
    located = iv.locate(found.select("_row", "rank", "launch_ns"), "launch_ns", frames, by=["rank"], keep=[name])
    return found.join(located.select("_row", name), on="_row", how="left").drop("_row")


def _located(found: pl.DataFrame, steps: StepResult) -> pl.DataFrame:
    """``found`` with ``step``, the steady-state step whose window holds each call's launch
    (null outside them), and ``window``, the marked step, warm-up included, that holds it (null
    outside every step and on ranks whose steps were inferred: what aligns ranks)."""
    if not steps.has_steps:
        return found.with_columns(step=pl.lit(None, dtype=pl.Int64), window=pl.lit(None, dtype=pl.Int64))
    marked = steps.how_found.filter(pl.col("source").cast(pl.String).is_in(MARKED)).select("rank")
    every = steps.all_steps if "win_start_ns" in steps.all_steps.columns else steps.steps
    every = every.join(marked.with_columns(pl.col("rank").cast(every.schema["rank"])), on="rank", how="semi")
    return _in_windows(_in_windows(found, steps.steps, "step"), every, "window")


def _status(instances: pl.DataFrame, *, ranks_present: int, world_size: int | None) -> CollectiveMatch:
    if instances.height == 0:
        return CollectiveMatch.NONE
    if not instances["matched"].any():
        return CollectiveMatch.SINGLE_RANK
    missing = world_size is not None and ranks_present < world_size
    if missing or instances.filter(pl.col("matched"), ~pl.col("complete")).height:
        return CollectiveMatch.PARTIAL
    return CollectiveMatch.COMPLETE


def match_collectives(run: Run, activity: pl.DataFrame, steps: StepResult) -> CollectiveResult:
    """Match every rank's collectives within their groups; measure floors, waits and arrivals."""
    found = find_collectives(run, activity, steps)
    return match_found(
        found,
        groups=group_members(run.ranks),
        ranks_present=len(run.ranks),
        world_size=run.world_size,
        hosts=rank_hosts(run.ranks),
    )


def collective_calls(run: Run, activity: pl.DataFrame) -> pl.DataFrame:
    """Each rank's collective calls as its events record them, unkeyed: its collective kernels
    (of ``activity``) with the arguments of the ops that launched them, else its host
    collectives with when each was launched; each call with its group and the group's size
    (:func:`_grouped`). One row a call: what :func:`located` keys and places in the steps.

    Each row depends on events that may lie far from the call (the op whose arguments it takes,
    the ``c10d::`` call paired with a backend op, the other kernels of its stream), so a window
    of a rank reads the rank's calls, not its own events' (:class:`~tracekit.analyzers.windows.WindowContext`).
    """
    kernels = _kernel_collectives(activity)
    host = _host_collectives(run, kernels["rank"].unique())
    found = pl.concat([_launch_args(run, kernels), host], how="vertical_relaxed")
    return _grouped(found, group_members(run.ranks))


def located(calls: pl.DataFrame, steps: StepResult) -> pl.DataFrame:
    """``calls`` (:func:`collective_calls`) keyed (:func:`keyed`), with duration, arrival and the
    step that holds each launch (:func:`_located`; ``steps``: the whole rank's, as a launch may lie
    in any of them)."""
    found = keyed(calls).with_columns(duration_ns=pl.col("end_ns") - pl.col("start_ns"), arrival_ns=OWN_ARRIVAL)
    return _located(found, steps)


def find_collectives(run: Run, activity: pl.DataFrame, steps: StepResult) -> pl.DataFrame:
    """The per-rank part: each rank's collectives keyed (pg, op, matched_by, k), with arrival and step.

    Reads only the metadata of the ranks of ``run``, so a shard of one rank gives the same rows
    as the whole run; :func:`match_found` completes the keys that depend on the other ranks.
    """
    return located(collective_calls(run, activity), steps)


def _aligned(keyed: pl.DataFrame, hosts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    """The calls aligned per step (:func:`~tracekit.analyzers.alignment.align`), again after
    renumbering ranks whose step numbers are shifted (:func:`~tracekit.analyzers.alignment.step_shifts`),
    with floors and waits; the steps that do not align; and the clocks of those calls, where
    the estimate made to find the shifts is theirs (no rank renumbered, no host recorded: the
    hosts then change nothing), else None."""
    found, misaligned = align(keyed)
    found = _floors(_numbered(with_members(found)))
    clocks = estimate_clocks(found, [INSTANCE])
    shifts = step_shifts(found, clocks, hosts)
    if shifts.height == 0:
        return found, misaligned, clocks if hosts["host"].drop_nulls().len() == 0 else None
    keyed, dropped = renumber(keyed, shifts)
    found, misaligned = align(keyed)
    found = _floors(_numbered(with_members(found)))
    return found, pl.concat([misaligned, dropped]).sort("step", "pg", "op", nulls_last=True), None


def match_found(
    found: pl.DataFrame,
    *,
    groups: pl.DataFrame,
    ranks_present: int,
    world_size: int | None,
    hosts: pl.DataFrame | None = None,
) -> CollectiveResult:
    """The cross-rank part: floors, waits, lateness and instances of every rank's collectives.

    ``groups``: :func:`group_members` of every rank of the run; ``world_size``: the run's;
    ``hosts``: :func:`~tracekit.analyzers.clocks.rank_hosts` of every rank (which share a clock).
    """
    hosts = rank_hosts(()) if hosts is None else hosts
    found, misaligned, clocks = _aligned(_in_run(found, groups, world_size), hosts)
    if clocks is None:
        clocks = estimate_clocks(found, [INSTANCE], hosts)
    found = _measure(tolerance(found, clocks, [INSTANCE]))
    per_rank = found.select(
        "rank",
        *KEYS,
        "source",
        "stream",
        "step",
        "launch_ns",
        "arrival_ns",
        "start_ns",
        "end_ns",
        "duration_ns",
        "floor_ns",
        "wait_ns",
        "lateness_ns",
        "explained_wait_ns",
        "unexplained_wait_ns",
        "is_last",
        INSTANCE,
    ).sort("rank", "start_ns")
    instances = _instances(found)
    present, world = ranks_present, world_size
    return CollectiveResult(
        per_rank=per_rank,
        instances=instances,
        ranks_present=present,
        world_size=world,
        match=_status(instances, ranks_present=present, world_size=world),
        clocks=clocks,
        misaligned=misaligned,
    )
