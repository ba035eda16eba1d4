"""The clocks' components (``clocks._components``): each rank's reference is the lowest rank
linked to it through shared instances, passed along each instance's links to its lowest rank;
held to the label passing over every point it replaced, on random instances, and by hand."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tracekit.analyzers.clocks import _components


def _reference(points: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    comp = points.select("rank").unique().with_columns(ref=pl.col("rank"))
    for _ in range(comp.height):
        linked = points.join(comp, on="rank").with_columns(pl.col("ref").min().over(keys))
        new = linked.group_by("rank").agg(pl.col("ref").min())
        if new.join(comp, on=["rank", "ref"], how="anti").height == 0:
            break
        comp = new
    return comp


def _points(pairs: list[tuple[int, int]]) -> pl.DataFrame:
    return pl.DataFrame(pairs, schema={"rank": pl.Int32, "i": pl.Int64}, orient="row")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 12)), min_size=1, max_size=40))
def test_the_lowest_linked_rank_as_every_point_passed_it(pairs: list[tuple[int, int]]) -> None:
    points = _points(pairs)
    assert_frame_equal(_components(points, ["i"]).sort("rank"), _reference(points, ["i"]).sort("rank"))


def test_a_chain_of_instances_links_its_ends() -> None:
    # 5-4 share instance 0, 4-3 instance 1, 3-1 instance 2; 2 and 6 share instance 3 only
    points = _points([(5, 0), (4, 0), (4, 1), (3, 1), (3, 2), (1, 2), (6, 3), (2, 3), (7, 4)])
    got = dict(_components(points, ["i"]).sort("rank").iter_rows())
    assert got == {1: 1, 3: 1, 4: 1, 5: 1, 2: 2, 6: 2, 7: 7}
