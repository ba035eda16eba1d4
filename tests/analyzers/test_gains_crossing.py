"""What the plans need of the whole run (``gains_plan.Crossing``), sent to each worker in the
fewest bytes: a collective kernel's arrival is its start on its rank's corrected clock, one
offset a rank, else its own arrival is sent. The plans' arrivals are the collectives' own."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pytest

from tracekit.analyzers import gains as g
from tracekit.analyzers.gains_plan import crossing, group_plans
from tracekit.analyzers.shared import COLLECTIVES

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.analyzers.mapreduce import Reduced

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def reduced(shared_traces: Path) -> tuple[Reduced, Any]:
    """The reduce of 8 NCCL ranks of one job (V100s) and the gains' tables, as the verdict
    builds its plans from them."""
    from tracekit.analyzers import run_analysis
    from tracekit.readers import load_run

    seen: list[tuple[Reduced, Any]] = []
    real = g.plans  # type: ignore[attr-defined]

    def spy(red: Reduced, parts: Any) -> Any:
        seen.append((red, parts))
        return real(red, parts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(g, "plans", spy)
        run_analysis(load_run([shared_traces / "kineto" / "param-dlrm-8rank-v100"], use_cache=False))
    return seen[0]


def _shifted(red: Reduced, by: pl.Expr) -> Reduced:
    """``red`` with every collective kernel's arrival moved by ``by`` (ns, taken off)."""
    result = red.result(COLLECTIVES)
    kernel = pl.col("source") == "kernel"
    per_rank = result.per_rank.with_columns(
        arrival_ns=pl.when(kernel).then(pl.col("arrival_ns") - by).otherwise(pl.col("arrival_ns"))
    )
    return dataclasses.replace(
        red, results={**red.results, COLLECTIVES.name: dataclasses.replace(result, per_rank=per_rank)}
    )


def _arrivals(red: Reduced, parts: Any) -> dict[tuple[int, float, float], float]:
    """Each plan's collective kernels' arrivals, by rank, start and end (ns from the origin)."""
    run = group_plans(crossing(red, parts.frames), parts)  # type: ignore[arg-type]
    assert run is not None
    out = {}
    for p in run.plans:
        for i in np.flatnonzero((p.instance >= 0) & ~p.arrival_is_launch).tolist():
            out[(p.rank, float(p.start[i]), float(p.end[i]))] = float(p.arrival[i])
    return out


def _expected(red: Reduced, parts: Any) -> dict[tuple[int, float, float], float]:
    """The same, from the collectives' per-rank rows themselves."""
    origin = np.float64(parts.frames["start_ns"].min())

    def ns(t: int) -> float:
        return float(np.float64(t) - origin)  # as the plans have it: the cast, then the subtraction

    rows = red.result(COLLECTIVES).per_rank.filter(pl.col("source") == "kernel")
    return {
        (int(r), ns(s), ns(e)): ns(a)
        for r, s, e, a in rows.select("rank", "start_ns", "end_ns", "arrival_ns").iter_rows()
    }


@pytest.mark.parametrize("how", ["recorded", "one offset a rank", "each its own"])
def test_the_plans_arrivals_are_the_collectives_own(reduced: tuple[Reduced, Any], how: str) -> None:
    red, parts = reduced
    if how == "one offset a rank":
        red = _shifted(red, pl.col("rank").cast(pl.Int64) * 1_000 + 7)
    elif how == "each its own":
        red = _shifted(red, pl.int_range(pl.len()) % 3)
    cross = crossing(red, parts.frames)
    assert cross is not None
    assert ("arrival_ns" in cross.kernels.columns) == (how == "each its own")
    if how == "one offset a rank":
        assert dict(cross.offsets.iter_rows()) == {r: r * 1_000 + 7 for r in range(8)}
    got = _arrivals(red, parts)
    expected = _expected(red, parts)
    assert got  # the capture's all-reduces, matched to their tasks
    assert all(expected[k] == a for k, a in got.items())


def test_a_group_gets_its_own_ranks(reduced: tuple[Reduced, Any]) -> None:
    red, parts = reduced
    cross = crossing(red, parts.frames)
    assert cross is not None
    mine = cross.of({1, 5})
    assert set(mine.kernels["rank"].unique()) == {1, 5} and set(mine.offsets["rank"]) == {1, 5}
    assert mine.host.height == 0 or set(mine.host["rank"].unique()) <= {1, 5}
