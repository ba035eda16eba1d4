"""A per-rank part names its tables and their columns; each is an empty frame of its own unless
given, and one given with other columns than declared is refused where it is made."""

from __future__ import annotations

import dataclasses
import re

import polars as pl
import pytest

from tracekit.analyzers import registry
from tracekit.analyzers.parts import TABLE, Parts, PartsError, StepParts, table


class TwoTables(Parts):
    first: pl.DataFrame = TABLE
    second: pl.DataFrame = TABLE


class PerStepAndRank(Parts):
    per_step: pl.DataFrame = table("rank step", "ns")
    per_rank: pl.DataFrame = table("rank ns")


class Inherited(PerStepAndRank):
    """Adds nothing: the parent's tables."""


class More(PerStepAndRank):
    """The parent's tables and one of its own."""

    extra: pl.DataFrame = table("rank")


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
    assert More.names() == ("per_step", "per_rank", "extra")
    assert {PerStepAndRank, Inherited, More, TwoTables} <= set(Parts.kinds())  # subclasses' subclasses too


def test_declared_columns_are_checked_in_any_order() -> None:
    assert {"per_step": {"rank", "step", "ns"}, "per_rank": {"rank", "ns"}} == PerStepAndRank.COLUMNS
    assert {**PerStepAndRank.COLUMNS, "extra": {"rank"}} == More.COLUMNS
    made = Inherited(per_step=pl.DataFrame({"ns": [5], "step": [1], "rank": [0]}))  # any order
    assert made.per_step.columns == ["ns", "step", "rank"] and made.per_rank.is_empty()
    Inherited(per_rank=pl.DataFrame(schema={"rank": pl.Int32, "ns": pl.Int64}))  # no rows, the columns
    with pytest.raises(
        PartsError, match=r"Inherited.per_rank: columns \['ns', 'rank', 'step'\], declared \['ns', 'rank'\]"
    ):
        Inherited(per_rank=pl.DataFrame({"rank": [0], "step": [1], "ns": [5]}))
    with pytest.raises(PartsError, match=re.escape("More.extra")):
        More(extra=pl.DataFrame({"rank": [0], "ns": [1]}))
    TwoTables(first=pl.DataFrame({"anything": [1]}))  # = TABLE: not checked


def test_every_built_in_part_declares_every_table() -> None:
    """The built-in analyses' parts say what each table holds (the new section's seam may leave
    a table unchecked with ``= TABLE``; the built-ins do not)."""
    assert registry.ANALYSES  # read: every built-in analysis, and so its parts, imported
    parts = {kind for kind in Parts.kinds() if kind.__module__.startswith("tracekit.")}
    assert len(parts) >= 15, sorted(k.__name__ for k in parts)
    for kind in parts:
        assert set(kind.COLUMNS) == set(kind.names()), kind.__name__
