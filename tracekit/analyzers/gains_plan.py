"""The re-timing's input (:mod:`tracekit.analyzers.gains`' reduce): every rank's tasks (device
work matched to its collective kernels, host collectives on their backend's streams) and blocks,
as :class:`~tracekit.analyzers.retime_plan.RankPlan` arrays, from one query over all ranks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import numpy as np
import polars as pl

from tracekit.analyzers.collectives import INSTANCE
from tracekit.analyzers.retime_plan import RankPlan
from tracekit.analyzers.shared import COLLECTIVES

if TYPE_CHECKING:
    from tracekit.analyzers.mapreduce import Reduced

__all__ = [
    "HOST_STREAMS",
    "TASK_KEYS",
    "ByRank",
    "Crossing",
    "GainRun",
    "Tables",
    "crossing",
    "group_plans",
    "plans",
    "rank_frame",
]

#: What identifies a device task: the map keeps one task of each (``gains.gains_map``), and a
#: collective kernel is matched to its task by them.
TASK_KEYS: Final = ("rank", "stream", "start_ns", "end_ns")


class Tables(Protocol):
    """What :func:`plans` reads of the gains' per-rank tables (``gains.GainParts``, gathered)."""

    @property
    def frames(self) -> pl.DataFrame: ...
    @property
    def tasks(self) -> pl.DataFrame: ...
    @property
    def blocks(self) -> pl.DataFrame: ...


@dataclass(frozen=True)
class GainRun:
    """The ranks' plans and what the scenarios are built from."""

    plans: list[RankPlan]
    origin: int
    #: rank -> its tasks' launch_ns, start_ns, end_ns and transfer (in plan order)
    tasks: dict[int, pl.DataFrame]
    has_gpu: bool
    matched: bool


#: Host collectives (gloo, MPI) run on their backend's workers: one stream per process group,
#: numbered down from here (clear of GPU stream ids, and of -1: a GPU activity with none).
HOST_STREAMS: Final = -1000


#: The columns of a table of blocks that has none (:func:`plans` reads these).
_EMPTY_SCHEMA: Final = {
    "rank": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "until": pl.Int64,
    "on_collectives": pl.Boolean,
    "kept": pl.Boolean,
}


def _unless_end(done: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """A rank's tasks' completions, None where each is its end (every device task's: the
    re-timing then reads the ends; a 2 GB rank's 0.7M tasks held a copy of them, 6 MB)."""
    return None if np.array_equal(done, end) else done


def rank_frame(df: pl.DataFrame, rank: int) -> pl.DataFrame:
    return df.filter(pl.col("rank") == rank) if df.height else df


class ByRank:
    """A table cut by rank once (a filter per rank would read the whole table for each: with a
    thousand ranks, the reduce's largest cost)."""

    def __init__(self, df: pl.DataFrame) -> None:
        self.empty = df.clear()
        self.parts: dict[int, pl.DataFrame] = {}
        if df.height == 0:
            return
        ranks = df.get_column("rank")
        if ranks.null_count() == 0 and ranks.is_sorted():
            # in rank order (a plan's tables are): each rank's rows are a slice, no copy (a
            # partition copied every row: 0.8 s for 1,024 ranks of 6 MB)
            values = ranks.to_numpy()
            edges = np.flatnonzero(values[1:] != values[:-1]) + 1
            starts = [0, *edges.tolist()]
            ends = [*edges.tolist(), df.height]
            self.parts = {int(values[a]): df.slice(a, b - a) for a, b in zip(starts, ends, strict=True)}
            return
        self.parts = {int(k[0]): v for k, v in df.partition_by("rank", as_dict=True, maintain_order=True).items()}

    def __getitem__(self, rank: int) -> pl.DataFrame:
        return self.parts.get(rank, self.empty)


@dataclass(frozen=True)
class Crossing:
    """What the plans of any group of ranks need of the whole run: ranks x instances numbers,
    never events. The plans of a group built with it (:func:`group_plans`) are those ranks'
    plans of the whole run (:func:`plans`), wherever the group is built.

    A group's part travels to a worker, so it holds only what the plans read, in the fewest
    bytes: a collective kernel's arrival is its start on its rank's corrected clock
    (``offsets``), and the host collectives are apart (1,024 dense ranks' 2.3M collective
    kernels: from 205 to about 70 MB pickled)."""

    #: the run's origin (its earliest measured window's start, ns): every plan's zero
    origin: int
    has_gpu: bool
    #: whether any collective instance is held by more than one rank
    matched: bool
    #: every rank's collective kernels (rank, stream: -1 for none, start_ns, end_ns, and their
    #: instance: -1 for none), in rank order; with their ``arrival_ns`` where ``offsets`` is empty
    kernels: pl.DataFrame
    #: every rank's host collectives (rank, stream: their process group's, numbered down from
    #: :data:`HOST_STREAMS` on each rank, launch_ns, start_ns, end_ns, instance, arrival_ns, done_ns)
    host: pl.DataFrame
    #: rank -> what its clock's correction takes off a kernel's start to give its arrival (:data:`_SHIFTS`)
    offsets: pl.DataFrame

    def of(self, ranks: set[int]) -> Crossing:
        """What a group of ``ranks`` needs of it."""
        mine = pl.col("rank").is_in(sorted(ranks))
        kernels = self.kernels.filter(mine) if self.kernels.height else self.kernels
        host = self.host.filter(mine) if self.host.height else self.host
        return dataclasses.replace(self, kernels=kernels, host=host, offsets=self.offsets.filter(mine))


#: The columns of :attr:`Crossing.offsets`.
_SHIFTS: Final = {"rank": pl.Int32, "offset_ns": pl.Int64}


def crossing(red: Reduced, frames: pl.DataFrame) -> Crossing | None:
    """The cross-rank inputs of every rank's plan (None when no rank has a measured window):
    ``frames``, the measured windows of every rank (rank, step, start_ns, end_ns)."""
    if frames.height == 0:
        return None
    origin = int(frames["start_ns"].min())  # type: ignore[arg-type]
    coll = red.result(COLLECTIVES).per_rank
    # every instance, matched or held by one rank (then its own: hiding its time still applies)
    instances = red.result(COLLECTIVES).instances.select(INSTANCE, "matched").with_row_index("instance")
    coll = coll.join(instances.drop("matched"), on=INSTANCE, how="left").with_columns(
        pl.col("instance").cast(pl.Int32).fill_null(-1), pl.col("rank").cast(pl.Int32)
    )
    host_rows = coll.filter(pl.col("source") == "host")
    # a host collective completes, for every rank of its instance, when its first span ends
    done = host_rows.filter(pl.col("instance") >= 0).group_by("instance").agg(done_ns=pl.col("end_ns").min())
    host = host_rows.join(done, on="instance", how="left").select(
        "rank",
        stream=(HOST_STREAMS - pl.col("pg").rank("dense").over("rank")).cast(pl.Int64),
        launch_ns="launch_ns",
        start_ns="start_ns",
        end_ns="end_ns",
        instance="instance",
        arrival_ns="arrival_ns",
        done_ns=pl.col("done_ns").fill_null(pl.col("end_ns")),
    )
    kernels = coll.filter(pl.col("source") == "kernel")
    shifts = kernels.group_by("rank").agg(
        offset_ns=(pl.col("start_ns") - pl.col("arrival_ns")).first(),
        one=(pl.col("start_ns") - pl.col("arrival_ns")).n_unique() == 1,
    )
    # a kernel arrives at its start on its rank's corrected clock (clocks.tolerance): one offset
    # a rank, else (a correction of another kind) every kernel's arrival is sent
    alone = shifts.height == 0 or bool(shifts["one"].all())
    arrival = [] if alone else ["arrival_ns"]
    kernels = kernels.select("rank", pl.col("stream").fill_null(-1), "start_ns", "end_ns", "instance", *arrival)
    shifts = shifts if alone else shifts.clear()
    matched = bool(instances["matched"].any()) if instances.height else False
    return Crossing(
        origin=origin,
        has_gpu=red.has_gpu,
        matched=matched,
        kernels=kernels,
        host=host,
        offsets=shifts.select("rank", "offset_ns").cast(_SHIFTS),  # type: ignore[arg-type]
    )


def _matched(tasks: pl.DataFrame, kernels: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``tasks`` in their order with the ``instance`` (-1: none) and ``arrival_ns`` of the
    collective kernel of the same ``keys`` (at most one: ``kernels`` is unique on them, and has
    their row hashes, ``_hash``: :func:`_first_of_keys`). The few tasks whose start is a
    kernel's are joined, not all of them, and on the hash of their keys, then the keys compared:
    a join on the four keys encodes every row's keys (a left join of every task: 2.0 s for
    1,024 ranks of 6 MB; of the few: 0.65 s of 8M tasks' 1.9 s at 1,024 dense ranks)."""
    starts = kernels.get_column("start_ns")
    candidates = tasks.with_row_index("_task").filter(pl.col("start_ns").is_in(starts.implode()))
    candidates = candidates.with_columns(_hash=candidates.select(keys).hash_rows())
    theirs = kernels.select("_hash", "instance", "arrival_ns", *(pl.col(k).alias(f"_{k}") for k in keys))
    found = (
        candidates.join(theirs, on="_hash", how="inner")
        .filter(*(pl.col(k) == pl.col(f"_{k}") for k in keys))
        .select("_task", "instance", "arrival_ns")
    )
    rows = found.get_column("_task")
    instance = pl.Series("instance", np.full(tasks.height, -1, dtype=np.int64)).scatter(
        rows, found.get_column("instance").cast(pl.Int64)
    )
    arrival = found.get_column("arrival_ns")
    arrivals = pl.repeat(None, tasks.height, dtype=arrival.dtype, eager=True).alias("arrival_ns").scatter(rows, arrival)
    return tasks.hstack([instance.cast(kernels.schema["instance"]), arrivals])


def _first_of_keys(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``df.unique(keys, keep="first", maintain_order=True)`` with the hash of each row's keys
    (``_hash``): rows whose hash no other row has are the first of their keys; of the rest (the
    same keys, or a collision), the first of each keys, compared (a unique on the keys encodes
    every row's: 0.44 s of 2.3M collective kernels at 1,024 dense ranks)."""
    hashed = df.with_columns(_hash=df.select(keys).hash_rows())
    shared = hashed.get_column("_hash").is_duplicated()
    if not shared.any():
        return hashed
    first = hashed.filter(shared).select(pl.struct(keys).is_first_distinct()).to_series()
    return hashed.filter((~shared).scatter(shared.arg_true(), first))


def plans(red: Reduced, parts: Tables) -> GainRun | None:
    """Every rank's :class:`RankPlan` from ``parts`` (the gains' per-rank tables, gathered) and
    the collectives matched across ranks; None when no rank has a step or window."""
    cross = crossing(red, parts.frames)
    return None if cross is None else group_plans(cross, parts)


def group_plans(cross: Crossing, parts: Tables) -> GainRun | None:
    """The plans of the ranks of ``parts`` (any group of the run's ranks, with their tables),
    with what they need of the others, ``cross``; None when none of them has a window."""
    frames = parts.frames
    if frames.height == 0:
        return None
    origin = cross.origin
    # every rank's tasks at once (a query per rank would cost a thousand ranks seconds): its
    # device tasks in order, matched to its collective kernels, then its host collectives
    rank = pl.col("rank").cast(pl.Int64)
    host = cross.host.select(
        rank,
        "stream",
        "launch_ns",
        "start_ns",
        "end_ns",
        transfer=pl.lit(False),
        instance=pl.col("instance").cast(pl.Int64),
        arrival_ns="arrival_ns",
        arrival_is_launch=pl.lit(True),
        done_ns="done_ns",
    )
    tasks = host
    if cross.has_gpu and parts.tasks.height:
        keys = list(TASK_KEYS)
        # each task matched to the first collective kernel of its keys (the map kept one task of
        # each), arriving at its start on its rank's corrected clock
        arrival = pl.col("start_ns") - pl.col("offset_ns")
        kernels = (
            cross.kernels.join(cross.offsets, on="rank", how="left", maintain_order="left")
            .select(
                rank,
                "stream",
                "start_ns",
                "end_ns",
                pl.col("instance").cast(pl.Int64),
                arrival_ns=pl.col("arrival_ns") if "arrival_ns" in cross.kernels.columns else arrival,
            )
            .pipe(_first_of_keys, keys)
        )
        device = _matched(parts.tasks.with_columns(rank), kernels, keys).with_columns(
            arrival_is_launch=pl.lit(False), done_ns=pl.col("end_ns")
        )
        tasks = pl.concat([device.select(host.columns), host], how="vertical_relaxed")
    tasks = tasks if tasks["rank"].is_sorted() else tasks.sort("rank", maintain_order=True)
    # a shard with no blocks on any rank has a table of no columns
    blocks = parts.blocks if "rank" in parts.blocks.columns else pl.DataFrame(schema=_EMPTY_SCHEMA)
    blocks = blocks.with_columns(rank).sort("rank", maintain_order=True)
    ranks = sorted(int(r) for r in frames["rank"].unique())
    ends = dict(frames.group_by("rank").agg(pl.col("end_ns").max()).iter_rows())

    def ns(col: pl.Series) -> np.ndarray:
        # in one pass, to the float the cast gave (a cast, then a subtraction: two arrays of
        # each of 8M tasks' times at 1,024 ranks)
        values: np.ndarray = np.subtract(col.to_numpy(), origin, dtype=np.float64)
        return values

    def cut(df: pl.DataFrame) -> dict[str, list[np.ndarray]]:
        """Each column as arrays, one per rank of ``ranks`` (the frame is sorted by rank)."""
        of = df["rank"].to_numpy()
        # each rank's rows exactly (a rank with rows but no window is in no slice)
        first, last = np.searchsorted(of, ranks, side="left"), np.searchsorted(of, ranks, side="right")
        columns = {
            "stream": df["stream"].cast(pl.Int64).to_numpy() if "stream" in df.columns else None,
            "launch": ns(df["launch_ns"]) if "launch_ns" in df.columns else None,
            "start": ns(df["start_ns"]),
            "end": ns(df["end_ns"]),
            "instance": df["instance"].cast(pl.Int64).to_numpy() if "instance" in df.columns else None,
            "arrival": ns(df["arrival_ns"].fill_null(df["start_ns"])) if "arrival_ns" in df.columns else None,
            "arrival_is_launch": df["arrival_is_launch"].to_numpy() if "arrival_is_launch" in df.columns else None,
            "done": ns(df["done_ns"]) if "done_ns" in df.columns else None,
            "until": ns(df["until"]) if "until" in df.columns else None,
            "on_collectives": df["on_collectives"].to_numpy() if "on_collectives" in df.columns else None,
            "kept": df["kept"].to_numpy() if "kept" in df.columns else None,
        }
        return {k: [v[a:b] for a, b in zip(first, last, strict=True)] for k, v in columns.items() if v is not None}

    t, b = cut(tasks), cut(blocks)
    plans = [
        RankPlan(
            rank=r,
            stream=t["stream"][i],
            launch=t["launch"][i],
            start=t["start"][i],
            end=t["end"][i],
            instance=t["instance"][i],
            arrival=t["arrival"][i],
            arrival_is_launch=t["arrival_is_launch"][i],
            block_start=b["start"][i],
            block_end=b["end"][i],
            block_until=b["until"][i],
            block_on_collectives=b["on_collectives"][i],
            block_kept=b["kept"][i],
            window_end=float(ends[r] - origin),
            device_end=cross.has_gpu,
            done=_unless_end(t["done"][i], t["end"][i]),
        )
        for i, r in enumerate(ranks)
    ]
    # what the scenarios read of the tasks (a straggler's launches, the transfers), by rank
    kept = tasks.select("rank", "launch_ns", "start_ns", "end_ns", "transfer")
    by_rank = {r: v for r, v in ByRank(kept).parts.items() if r in ends}
    return GainRun(plans=plans, origin=origin, tasks=by_rank, has_gpu=cross.has_gpu, matched=cross.matched)
