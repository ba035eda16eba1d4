"""The launching threads read in pieces of time on large ranks: their time by cause
(:mod:`tracekit.analyzers.host_time`) the same, cause by cause, as the window whole; each idle
gap's cause and host range (:func:`tracekit.analyzers.host_causes.late_causes`) the same as
the gaps read at once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SAMPLES
from tracekit.analyzers import host_causes as hc
from tracekit.analyzers import host_time as ht
from tracekit.analyzers import intervals as iv
from tracekit.analyzers.context import Options, RankContext
from tracekit.readers import load_run

if TYPE_CHECKING:
    from tracekit.model.run import Run


def _run(trace: str, request: pytest.FixtureRequest) -> Run:
    """The run of ``trace``: ``shared:<path under ../shared/traces>`` or ``samples:<capture>``."""
    root, _, name = trace.partition(":")
    base: Path = request.getfixturevalue("shared_traces") if root == "shared" else SAMPLES / "captures"
    return load_run([base / name], use_cache=False)


def _host_time(ctx: RankContext) -> pl.DataFrame:
    """:func:`host_time` over each rank's measured window, as the gains ask for it."""
    frames = ctx.frames.select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns")
    window = frames.group_by("rank").agg(pl.col("start_ns").min(), pl.col("end_ns").max()).sort("rank")
    return ht.host_time(
        ctx.run,
        window,
        fetch=ctx.fetch,
        syncs=ctx.syncs.calls,
        calls=ctx.calls,
        frames=ctx.frames,
        process=ctx.host_ranges,
    )


@pytest.mark.parametrize(
    "trace",
    [
        "shared:kineto/hta-trace-diff/control-rank3-a100.json.gz",
        "samples:cuda-h200-gloo2-straggler",  # two ranks in one shard: the pieces cut both
    ],
)
def test_the_time_classified_in_pieces_is_the_whole_windows(
    trace: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(trace, request)
    whole = _host_time(RankContext(run, Options(has_gpu=True)))
    pieces: list[int] = []
    real = ht._pieces

    def counted(spans: pl.DataFrame, bounds: list[int]) -> list[pl.DataFrame]:
        out = real(spans, bounds)
        pieces.append(len(out))
        return out

    monkeypatch.setattr(ht, "_pieces", counted)
    monkeypatch.setattr(hc, "PIECE_EVENTS", run.events.height // 7 + 1)
    cut = _host_time(RankContext(run, Options(has_gpu=True)))
    assert pieces and pieces[0] >= 6
    assert whole.height > 0 and set(whole["cause"]) == set(cut["cause"])
    # the pieces cut the time where they meet; the removals join it again (their unions)
    keys = ["rank", "cause"]
    order = [*keys, "start_ns"]
    assert iv.union(cut, keys).sort(order).equals(iv.union(whole, keys).sort(order))
    assert cut.height >= whole.height


def test_a_rank_of_fewer_events_is_read_whole() -> None:
    calls = pl.DataFrame({"start_ns": [10, 20, 30]})
    assert hc.cuts(calls, hc.PIECE_EVENTS) == []
    assert hc.cuts(calls, hc.PIECE_EVENTS + 1) == [20]
    spans = pl.DataFrame({"idle_id": [0], "rank": [0], "thread": [0], "start_ns": [0], "end_ns": [100]})
    (one,) = ht._pieces(spans, [])
    assert one.select("start_ns", "end_ns", "whole_start", "whole_end").row(0) == (0, 100, 0, 100)
    two = ht._pieces(spans, [20])
    assert [p.select("start_ns", "end_ns").row(0) for p in two] == [(0, 20), (20, 100)]
    assert all(p.select("whole_start", "whole_end").row(0) == (0, 100) for p in two)


@pytest.mark.parametrize(
    "trace",
    [
        "shared:kineto/hta-trace-diff/control-rank3-a100.json.gz",
        "shared:kineto/param-dlrm-8rank-v100/worker0_step_12.1694128201545.pt.trace.json",
        "samples:cuda-h200-gloo2-straggler",
    ],
)
def test_each_gap_read_in_pieces_gets_what_the_gaps_read_at_once_give_it(
    trace: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(trace, request)
    whole = RankContext(run, Options(has_gpu=True)).idle.intervals
    windows: list[tuple[int, int] | None] = []
    real = hc.thread_events

    def seen(*args: pl.DataFrame | Run, within: tuple[int, int] | None = None) -> object:
        windows.append(within)
        return real(*args, within=within)  # type: ignore[arg-type]

    monkeypatch.setattr(hc, "thread_events", seen)
    monkeypatch.setattr(hc, "PIECE_EVENTS", run.events.height // 7 + 1)
    cut = RankContext(run, Options(has_gpu=True)).idle.intervals
    assert len(windows) >= 5 and None not in windows
    assert whole.height > 0 and whole["host_range"].is_not_null().any()
    assert cut.equals(whole)


def test_the_outermost_range_is_the_first_to_start_among_those_holding_the_point() -> None:
    ranges = pl.DataFrame(
        {
            "thread": [0, 0, 0, 0, 1, 1],
            "start_ns": [0, 10, 200, 200, 0, 10],
            "end_ns": [11, 100, 250, 300, 100, 20],
            "name": ["sibling", "later", "short", "long", "outer", "inner"],
        }
    ).with_columns(pl.col("name").cast(pl.Categorical))
    points = pl.DataFrame(
        {"idle_id": [0, 1, 2, 3, 4, 5], "thread": [0, 0, 0, 0, 1, 0], "t": [50, 5, 260, 220, 15, 150]}
    )
    found = hc._range_at(points, ranges).sort("idle_id")["host_range"].cast(pl.String).to_list()
    # a sibling that overlaps a range's start (rounded clocks) hides nothing of it
    assert found == ["later", "sibling", "long", "long", "outer", None]


_TIDS = st.sampled_from([0, 1, 5, 4_000_000, -3, 2**30, 2**62, -(2**62) - 5, 2**63 - 1])


@settings(max_examples=300, deadline=None)
@given(
    threads=st.lists(st.tuples(st.integers(0, 3), _TIDS), unique=True, max_size=5),
    rows=st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), _TIDS)), max_size=15),
)
def test_rows_get_their_thread_as_the_join_on_the_pair_gives(threads: list, rows: list) -> None:
    """``on_thread`` through an array of the packed keys where the threads' tids span little,
    a join on that key where they span more, else on the pair: the rows of a thread, each with
    its number, in their order, whatever the tids (negative, far apart, null)."""
    from tracekit.analyzers.host_causes import on_thread

    known = pl.DataFrame(threads, schema={"rank": pl.Int32, "tid": pl.Int64}, orient="row").with_row_index("thread")
    df = pl.DataFrame(rows, schema={"rank": pl.Int32, "tid": pl.Int64}, orient="row").with_row_index("row")
    got = on_thread(df, known)
    expected = df.join(known, on=["rank", "tid"]).drop("rank", "tid")
    assert got.columns == expected.columns
    assert got.get_column("row").is_sorted()  # in the rows' own order
    assert got.equals(expected.sort("row"))


@settings(max_examples=200, deadline=None)
@given(
    ranges=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 50), st.integers(0, 9)), max_size=12),
    threads=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), unique=True, max_size=8),
)
def test_ranges_are_repeated_for_each_thread_of_their_rank(ranges: list, threads: list) -> None:
    """``per_thread`` (a gather in NumPy): each range once for each thread of its rank, as the
    join on the rank gives: each range in order, its rank's threads in their order."""
    frame = {"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}
    df = pl.DataFrame([(r, s, s + n) for r, s, n in ranges], schema=frame, orient="row")
    known = pl.DataFrame(threads, schema={"rank": pl.Int32, "tid": pl.Int64}, orient="row").with_row_index("thread")
    got = hc.per_thread(df, known)
    expected = [(t, s, e) for r, s, e in df.iter_rows() for t, tr, _ in known.iter_rows() if tr == r]
    assert got.columns == ["thread", "start_ns", "end_ns"]
    assert got.schema["thread"] == known.schema["thread"]
    assert list(got.iter_rows()) == expected
