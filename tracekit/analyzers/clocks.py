"""Each rank's clock offset, estimated from the collectives the ranks share.

Ranks on different hosts timestamp their traces with clocks that may differ by milliseconds. A
rank whose clock reads ahead seems to arrive late at every collective, by the offset. The
collective's *ends* tell the offsets apart from lateness: ranks leave a collective together,
within its latency (a rank cannot finish before the last one's data reached it), whoever
arrived late. So each matched instance's end on each rank is modelled as the instance's own
time plus the rank's offset, and both are fitted robustly by median polish (alternating
medians over instances and over ranks). Offsets are relative to the lowest rank of the ranks
linked through shared instances (rank 0 of the default group).

Two things bound how well an offset is known: the spread of the rank's residuals (``spread``:
1.4826 times their median absolute value, a robust standard deviation) and how far the ends of
one collective may legitimately differ on one clock, up to its latency floor (``bound``: the
median floor over the rank's instances). An offset within ``bound + spread`` cannot be told from
the order in which ranks leave a collective; what is done with it depends on the hosts the
traces record (:attr:`~tracekit.model.run.RankInfo.host`):

* ranks known to be on one host share one clock: they are fitted as one (one offset for the
  host), and against the reference's host nothing is corrected and no uncertainty is added;
* ranks known to be on different hosts (or a rank whose host is not recorded, in a run whose
  recorded hosts differ): an estimate beyond ``bound + spread`` is a measured offset and is
  corrected; within it nothing is corrected; either way ``bound + spread`` is the uncertainty,
  and lateness inside it is never named;
* hosts not recorded (most traces: Kineto records a ``host_name`` only in some builds): an
  estimate beyond ``bound + spread`` is corrected with that as its uncertainty; one within it is
  taken for one shared clock, nothing corrected and no uncertainty added. Counting it as
  uncertainty would be the cautious reading, but the ranks of a run without hosts are most
  often those of one machine (tracekit's own captures, the gloo ranks of one host whose
  collectives end many milliseconds apart): it would hide their real stragglers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.model.run import RankInfo

#: The median absolute deviation times this estimates a standard deviation (normal errors).
MAD_SIGMA: Final = 1.4826
#: Median polish rounds at most (it converges in a few on real traces).
ROUNDS: Final = 20


def no_clocks() -> pl.DataFrame:
    """The frame of :func:`estimate_clocks` for a run with no instance held by two ranks."""
    schema = {
        "rank": pl.Int32,
        "instances": pl.UInt32,
        "estimate_ns": pl.Int64,
        "offset_ns": pl.Int64,
        "uncertainty_ns": pl.Int64,
        "corrected": pl.Boolean,
        "host": pl.String,
        "clock": pl.Int32,
        "ref": pl.Int32,
    }
    return pl.DataFrame(schema=schema)


def rank_hosts(ranks: Sequence[RankInfo]) -> pl.DataFrame:
    """rank, host: the host each trace records (null where it records none)."""
    return pl.DataFrame([(r.rank, r.host) for r in ranks], schema={"rank": pl.Int32, "host": pl.String}, orient="row")


def _clock_ids(points: pl.DataFrame, hosts: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """rank, host, clock (the lowest rank of its host, or itself where no host is recorded) of
    the ranks of ``points``; and whether the hosts recorded differ."""
    ranks = points.select(pl.col("rank").cast(pl.Int32)).unique()
    ranks = ranks.join(hosts.select(pl.col("rank").cast(pl.Int32), "host"), on="rank", how="left")
    clock = pl.when(pl.col("host").is_not_null()).then(pl.col("rank").min().over("host")).otherwise(pl.col("rank"))
    return ranks.with_columns(clock=clock.cast(pl.Int32)), ranks["host"].drop_nulls().n_unique() > 1


def _polish(points: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Offsets per rank (``o``) and the points with their instance's time (``c``)."""
    offsets = points.select("rank").unique().with_columns(o=pl.lit(0.0))
    fitted = points
    for _ in range(ROUNDS):
        fitted = points.join(offsets, on="rank").with_columns(c=(pl.col("end") - pl.col("o")).median().over(keys))
        new = fitted.group_by("rank").agg(o=(pl.col("end") - pl.col("c")).median())
        change = new.join(offsets, on="rank", suffix="_old").select((pl.col("o") - pl.col("o_old")).abs().max()).item()
        offsets = new
        if change is None or change < 1.0:
            break
    fitted = points.join(offsets, on="rank").with_columns(c=(pl.col("end") - pl.col("o")).median().over(keys))
    return offsets, fitted


def _components(points: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """rank, ref: the lowest rank linked to it through instances they share. An instance links
    each of its ranks to its lowest: the lowest label is passed along those links, far fewer
    than the points (2.3M calls of 1,024 ranks: one pass over them, then 1,024 links)."""
    links = points.select("rank", low=pl.col("rank").min().over(keys)).unique()
    comp = links.select("rank").unique().with_columns(ref=pl.col("rank"))
    for _ in range(comp.height):
        ends = comp.rename({"rank": "low", "ref": "low_ref"})
        passed = pl.concat(
            [
                comp,
                links.join(ends, on="low").select("rank", ref="low_ref"),
                links.join(comp, on="rank").select(pl.col("low").alias("rank"), "ref"),
            ]
        )
        new = passed.group_by("rank").agg(pl.col("ref").min())
        if new.join(comp, on=["rank", "ref"], how="anti").height == 0:
            break
        comp = new
    return comp


def estimate_clocks(found: pl.DataFrame, keys: list[str], hosts: pl.DataFrame | None = None) -> pl.DataFrame:
    """rank, instances, estimate_ns, offset_ns (corrected: what to subtract from the rank's
    times), uncertainty_ns, corrected, host, clock (the lowest rank of its clock): from
    ``found``'s calls of instances (``keys``) held by two ranks or more, with their ``end_ns``
    and ``floor_ns``; ``hosts`` (:func:`rank_hosts`) tells which ranks share a clock."""
    points = found.filter(pl.col("floor_ns").is_not_null()).select(
        pl.col("rank").cast(pl.Int32), *keys, pl.col("end_ns").cast(pl.Float64).alias("end"), "floor_ns"
    )
    if points.height == 0:
        return no_clocks()
    ids, hosts_differ = _clock_ids(points, rank_hosts(()) if hosts is None else hosts)
    # one clock per host: its ranks' points fitted together, under the clock's id
    by_clock = points.join(ids.select("rank", "clock"), on="rank").drop("rank").rename({"clock": "rank"})
    offsets, fitted = _polish(by_clock, keys)
    refs = _components(by_clock, keys).join(offsets.rename({"rank": "ref", "o": "o_ref"}), on="ref")
    residual = (pl.col("end") - pl.col("c") - pl.col("o")).abs()
    per_clock = fitted.group_by("rank").agg(
        spread=MAD_SIGMA * residual.median(), bound=pl.col("floor_ns").median(), o=pl.col("o").first()
    )
    per_clock = per_clock.join(refs, on="rank").rename({"rank": "clock"})
    instances = points.group_by("rank").agg(instances=pl.len())
    ref_host = ids.select(pl.col("clock").alias("ref"), pl.col("host").alias("ref_host")).unique("ref")
    table = ids.join(instances, on="rank").join(per_clock, on="clock").join(ref_host, on="ref", how="left")
    est = (pl.col("o") - pl.col("o_ref")).round(0)
    allowed = pl.col("bound") + pl.col("spread")
    same = pl.col("clock") == pl.col("ref")
    unknown = pl.col("host").is_null() | pl.col("ref_host").is_null()
    apart = ~same & (~unknown | pl.lit(hosts_differ))
    measured = ~same & (est.abs() > allowed)
    return (
        table.with_columns(estimate=est, corrected=measured)
        .select(
            "rank",
            pl.col("instances").cast(pl.UInt32),
            pl.col("estimate").cast(pl.Int64).alias("estimate_ns"),
            pl.when("corrected").then(pl.col("estimate")).otherwise(0).cast(pl.Int64).alias("offset_ns"),
            pl.when(pl.col("corrected") | apart)
            .then(allowed)
            .otherwise(0)
            .round(0)
            .cast(pl.Int64)
            .alias("uncertainty_ns"),
            "corrected",
            "host",
            "clock",
            "ref",
        )
        .sort("rank")
    )


def tolerance(found: pl.DataFrame, clocks: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``found`` with ``tolerance_ns`` per instance: how far two of its ranks' arrivals may be
    off from each other through their clocks (the sum of the two largest uncertainties), and
    its ``arrival_ns`` on the corrected clocks."""
    if clocks.filter((pl.col("offset_ns") != 0) | (pl.col("uncertainty_ns") != 0)).height == 0:
        # no clock corrected or uncertain (one host, most runs): every instance's two largest
        # uncertainties sum to zero and no arrival moves (2.3M calls of 1,024 ranks: 0.6 s)
        return found.with_columns(offset_ns=pl.lit(0, dtype=pl.Int64), tolerance_ns=pl.lit(0, dtype=pl.Int64))
    u = clocks.select(pl.col("rank").cast(found.schema["rank"]), "offset_ns", "uncertainty_ns", "clock")
    found = found.join(u, on="rank", how="left", maintain_order="left").with_columns(
        pl.col("offset_ns").fill_null(0),
        pl.col("uncertainty_ns").fill_null(0),
        pl.coalesce("clock", pl.col("rank").cast(pl.Int32)).alias("clock"),
    )
    # ranks of one clock are not off from each other: each clock's uncertainty counts once
    per_clock = found.group_by(*keys, "clock").agg(pl.col("uncertainty_ns").first())
    per_instance = per_clock.group_by(keys).agg(tolerance_ns=pl.col("uncertainty_ns").top_k(2).sum())
    return (
        found.join(per_instance, on=keys, how="left", maintain_order="left")
        .with_columns(arrival_ns=pl.col("arrival_ns") - pl.col("offset_ns"))
        .drop("uncertainty_ns", "clock")
    )
