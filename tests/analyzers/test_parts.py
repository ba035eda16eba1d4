"""A per-rank part names its tables; each is an empty frame of its own unless given."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from tracekit.analyzers.parts import TABLE, Parts, PerStepAndRank, StepParts


class TwoTables(Parts):
    first: pl.DataFrame = TABLE
    second: pl.DataFrame = TABLE


class Inherited(PerStepAndRank):
    """Adds nothing: the parent's tables."""


def test_a_table_not_given_is_a_fresh_empty_frame() -> None:
    one, other = TwoTables(), TwoTables(first=pl.DataFrame({"rank": [0]}))
    assert one.first.is_empty() and one.second.is_empty() and other.second.is_empty()
    assert one.first is not TABLE and one.first is not other.second  # never the class's shared frame
    assert other.first["rank"].to_list() == [0]


def test_parts_are_frozen_keyword_only_dataclasses() -> None:
    parts = TwoTables()
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.first = pl.DataFrame()  # type: ignore[misc]
    with pytest.raises(TypeError):
        TwoTables(pl.DataFrame())  # type: ignore[call-arg]


def test_names_and_tables_in_declared_order_with_inherited_tables() -> None:
    assert TwoTables.names() == ("first", "second")
    assert Inherited.names() == ("per_step", "per_rank") == tuple(Inherited().tables())
    assert StepParts.names()[:2] == ("steps", "stats")
