"""A file's events sorted by start: their columns of no value stay literals (no buffer), and
every other column comes out in the same pieces."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import polars as pl
import pytest

from tracekit.model.counters import empty_counters
from tracekit.readers import kineto_normalize, load
from tracekit.readers.kineto_normalize import by_start
from tracekit.readers.trace import RankTrace

_N = 1000


@pytest.mark.parametrize("shuffled", [True, False])
def test_a_literal_column_is_left_as_it_is_whether_or_not_the_events_are_in_order(shuffled: bool) -> None:
    starts = [(i * 7919) % _N if shuffled else i for i in range(2 * _N)]
    # as a file's events come to it: columns in chunks (one per piece of the file read), and a
    # column no event fills made a literal in the query that makes the rest
    chunks = [
        pl.DataFrame({"start_ns": starts[:_N], "x": range(_N)}),
        pl.DataFrame({"start_ns": starts[_N:], "x": range(_N, 2 * _N)}),
    ]
    frame = pl.concat(chunks, rechunk=False).lazy().with_columns(none=pl.lit(None, dtype=pl.Int64)).collect()
    expected = frame.sort("start_ns", maintain_order=True)
    out = by_start([frame], unordered=frozenset({"none"}))
    # gathered or rechunked, the literal would be a buffer of 2,000 values and their validity
    # (as it would once read as a series: first the sizes, then the values)
    assert out.select("none").estimated_size() < 100
    assert out.select("start_ns").estimated_size() == 8 * 2 * _N
    assert out.equals(expected)


@pytest.mark.parametrize("shuffled", [True, False])
def test_every_column_comes_out_in_the_same_pieces_whatever_its_chunks_were(
    shuffled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kineto_normalize, "SORT_PIECE_ROWS", 300)
    starts = [(i * 7919) % _N if shuffled else i for i in range(_N)]
    # columns chunked apart, as a query over the decoded chunks can leave them: 3 and 5 chunks
    frame = pl.DataFrame(
        [
            pl.concat([pl.Series("start_ns", starts[a : a + 334]) for a in range(0, _N, 334)], rechunk=False),
            pl.concat([pl.Series("x", range(a, min(a + 200, _N))) for a in range(0, _N, 200)], rechunk=False),
        ]
    )
    expected = frame.sort("start_ns", maintain_order=True)
    out = by_start([frame])
    assert out.equals(expected)
    # every column's chunks meet at the same rows (a query over columns chunked apart copies
    # them all into one piece first): gathered in the pieces of the allocator's reuse (300
    # rows), or, in order already, left in the starts' chunks
    rows = [300, 300, 300, 100] if shuffled else [334, 334, 332]
    assert [[len(c) for c in out.get_column(n).get_chunks()] for n in out.columns] == [rows, rows]


def test_no_event() -> None:
    frame = pl.DataFrame(schema={"start_ns": pl.Int64, "x": pl.Int32})
    assert by_start([frame]).equals(frame)


@pytest.mark.parametrize("ranks", [1, 3])
def test_the_run_is_held_by_kind_from_columns_whose_chunks_meet(ranks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # a query over columns chunked apart copies them all into one piece, each time: several
    # ranks' frames, each in its chunks, and their ranks, a piece each, must not reach the
    # queries so; one rank's frame is left in its chunks (one piece would be a copy of it)
    events = pl.concat(
        [pl.DataFrame({"start_ns": [10 * i + j for j in range(5)]}, schema={"start_ns": pl.Int64}) for i in range(4)],
        rechunk=False,
    ).with_columns(end_ns=pl.col("start_ns") + 1)
    trace = cast("RankTrace", SimpleNamespace(events=events, counters=empty_counters()))
    seen: list[pl.DataFrame] = []

    def taken(cls: object, owned: list[pl.DataFrame]) -> pl.DataFrame:
        seen.append(owned.pop())
        return seen[-1]

    monkeypatch.setattr(load.ByKind, "taken", classmethod(taken))
    monkeypatch.setattr(load, "classify_held", lambda held, **_: held)
    load.rank_tables([(r, trace) for r in range(ranks)])
    [frame] = seen
    chunks = {n: [len(c) for c in frame.get_column(n).get_chunks()] for n in ("start_ns", "end_ns", "rank")}
    if ranks == 1:
        assert chunks["start_ns"] == chunks["end_ns"] == [5, 5, 5, 5]
    else:
        assert chunks["start_ns"] == chunks["end_ns"] == chunks["rank"], chunks
