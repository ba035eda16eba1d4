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
median floor over the rank's instances). An estimate beyond ``bound + spread`` is a measured
offset: it is corrected, with that as its uncertainty. An estimate within it is what one clock
also gives (a ring's ranks leave a few microseconds apart, gloo's ranks on one shared-core host
up to many milliseconds), so the ranks are taken to share one clock: nothing is corrected and
no uncertainty is added (the traces do not say which ranks share a host; an offset smaller
than the collectives' floor cannot be told from the order in which ranks leave). Lateness
inside the uncertainty is never named.
"""

from __future__ import annotations

from typing import Final

import polars as pl

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
    }
    return pl.DataFrame(schema=schema)


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
    """rank, ref: the lowest rank linked to it through instances they share."""
    comp = points.select("rank").unique().with_columns(ref=pl.col("rank"))
    for _ in range(comp.height):
        linked = points.join(comp, on="rank").with_columns(pl.col("ref").min().over(keys))
        new = linked.group_by("rank").agg(pl.col("ref").min())
        if new.join(comp, on=["rank", "ref"], how="anti").height == 0:
            break
        comp = new
    return comp


def estimate_clocks(found: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """rank, instances, estimate_ns, offset_ns (corrected: what to subtract from the rank's
    times), uncertainty_ns, corrected: from ``found``'s calls of instances (``keys``) held by
    two ranks or more, with their ``end_ns`` and ``floor_ns``."""
    points = found.filter(pl.col("floor_ns").is_not_null()).select(
        "rank", *keys, pl.col("end_ns").cast(pl.Float64).alias("end"), "floor_ns"
    )
    if points.height == 0:
        return no_clocks()
    offsets, fitted = _polish(points, keys)
    refs = _components(points, keys).join(offsets.rename({"rank": "ref", "o": "o_ref"}), on="ref")
    residual = (pl.col("end") - pl.col("c") - pl.col("o")).abs()
    per_rank = fitted.group_by("rank").agg(
        instances=pl.len(),
        spread=MAD_SIGMA * residual.median(),
        bound=pl.col("floor_ns").median(),
        o=pl.col("o").first(),
    )
    est = (pl.col("o") - pl.col("o_ref")).round(0)
    measured = est.abs() > pl.col("bound") + pl.col("spread")
    return (
        per_rank.join(refs, on="rank")
        .with_columns(estimate=est, corrected=measured)
        .select(
            pl.col("rank").cast(pl.Int32),
            pl.col("instances").cast(pl.UInt32),
            pl.col("estimate").cast(pl.Int64).alias("estimate_ns"),
            pl.when("corrected").then(pl.col("estimate")).otherwise(0).cast(pl.Int64).alias("offset_ns"),
            pl.when("corrected")
            .then(pl.col("bound") + pl.col("spread"))
            .otherwise(0)
            .round(0)
            .cast(pl.Int64)
            .alias("uncertainty_ns"),
            "corrected",
        )
        .sort("rank")
    )


def tolerance(found: pl.DataFrame, clocks: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``found`` with ``tolerance_ns`` per instance: how far two of its ranks' arrivals may be
    off from each other through their clocks (the sum of the two largest uncertainties), and
    its ``arrival_ns`` on the corrected clocks."""
    u = clocks.select(pl.col("rank").cast(found.schema["rank"]), "offset_ns", "uncertainty_ns")
    found = found.join(u, on="rank", how="left", maintain_order="left").with_columns(
        pl.col("offset_ns").fill_null(0), pl.col("uncertainty_ns").fill_null(0)
    )
    per_instance = found.group_by(keys).agg(tolerance_ns=pl.col("uncertainty_ns").top_k(2).sum())
    return (
        found.join(per_instance, on=keys, how="left", maintain_order="left")
        .with_columns(arrival_ns=pl.col("arrival_ns") - pl.col("offset_ns"))
        .drop("uncertainty_ns")
    )
