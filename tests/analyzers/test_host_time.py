"""The launching threads' time by cause (:mod:`tracekit.analyzers.host_time`), classified in
pieces of the window on large ranks: the same time, cause by cause, as the window whole."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers import host_time as ht
from tracekit.analyzers import intervals as iv
from tracekit.analyzers.context import Options, RankContext
from tracekit.readers import load_run


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
    root, _, name = trace.partition(":")
    base: Path = request.getfixturevalue("shared_traces") if root == "shared" else SAMPLES / "captures"
    run = load_run([base / name], use_cache=False)
    whole = _host_time(RankContext(run, Options(has_gpu=True)))
    pieces: list[int] = []
    real = ht._pieces
    monkeypatch.setattr(ht, "_pieces", lambda *a: pieces.append(len(out := real(*a))) or out)
    monkeypatch.setattr(ht, "PIECE_EVENTS", run.events.height // 7 + 1)
    cut = _host_time(RankContext(run, Options(has_gpu=True)))
    assert pieces and pieces[0] >= 6
    assert whole.height > 0 and set(whole["cause"]) == set(cut["cause"])
    # the pieces cut the time where they meet; the removals join it again (their unions)
    keys = ["rank", "cause"]
    order = [*keys, "start_ns"]
    assert iv.union(cut, keys).sort(order).equals(iv.union(whole, keys).sort(order))
    assert cut.height >= whole.height


def test_a_rank_of_fewer_events_is_classified_whole() -> None:
    spans = pl.DataFrame({"idle_id": [0], "rank": [0], "thread": [0], "start_ns": [0], "end_ns": [100]})
    calls = pl.DataFrame({"start_ns": [10, 20, 30]})
    (one,) = ht._pieces(spans, calls, ht.PIECE_EVENTS)
    assert one.select("start_ns", "end_ns", "whole_start", "whole_end").row(0) == (0, 100, 0, 100)
    two = ht._pieces(spans, calls, ht.PIECE_EVENTS + 1)
    assert [p.select("start_ns", "end_ns").row(0) for p in two] == [(0, 20), (20, 100)]
    assert all(p.select("whole_start", "whole_end").row(0) == (0, 100) for p in two)
