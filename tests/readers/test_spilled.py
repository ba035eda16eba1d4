"""A rank's events read from a Parquet file as asked (:class:`Spilled`) answer as the events
held do (:class:`ByKind`): every selection, slice, window, count and name, on random frames of
one rank (long events, instants, null times), the index's blocks a few rows each."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tests.analyzers.test_windows import _plain
from tests.model.test_by_kind import _KINDS, ordered_frames
from tracekit.analyzers import windows
from tracekit.analyzers.context import Options, RankContext
from tracekit.analyzers.mapreduce import map_ranks
from tracekit.analyzers.registry import ANALYSES
from tracekit.model.by_kind import ByKind
from tracekit.model.run import Run
from tracekit.readers import load_run, spilled
from tracekit.readers.spilled import Spilled

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "captures"
_COLUMNS = ("kind", "start_ns", "end_ns", pl.col("name").cast(pl.String))


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(frame.columns, nulls_last=True)


@settings(max_examples=200, deadline=None)
@given(
    ordered_frames(),
    st.lists(st.sampled_from(_KINDS[:3]), max_size=3),
    st.tuples(st.integers(-5, 70), st.integers(0, 30)),
    st.sampled_from([1, 3, 8]),
    st.sampled_from([0, 1 << 16]),
)
def test_a_spilled_rank_answers_as_the_held_one(
    frame: pl.DataFrame, kinds: list[str], stretch: tuple[int, int], block: int, literal: int
) -> None:
    lo, width = stretch
    held = ByKind.of(frame, literal_rows=literal)
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as folder:
        patch.setattr(spilled, "BLOCK", block)
        read = Spilled.written(held, Path(folder) / "events.parquet")
        hi = lo + width
        assert read.kinds() == held.kinds()
        assert read.height == held.height
        assert read.frame().equals(held.frame())
        assert read.select(kinds, _COLUMNS).equals(held.select(kinds, _COLUMNS))
        condition = [pl.col("start_ns") > lo]
        assert read.select(kinds, _COLUMNS, condition).equals(held.select(kinds, _COLUMNS, condition))
        assert read.within(lo, hi).frame().equals(held.within(lo, hi).frame())
        assert read.names().sort().equals(held.names().sort())
        assert _sorted(read.unordered(_COLUMNS, kinds).collect()).equals(
            _sorted(held.unordered(_COLUMNS, kinds).collect())
        )
        # every slice as the held one's; within a stretch, the events of those read that reach in
        mine = list(read.slices(kinds, _COLUMNS, 3, None))
        theirs = list(held.slices(kinds, _COLUMNS, 3, None))
        assert len(mine) == len(theirs)
        assert all(a.equals(b) for a, b in zip(mine, theirs, strict=True))
        near = (pl.col("end_ns") > lo) & (pl.col("start_ns") < hi)
        got = pl.concat(p.filter(near) for p in read.slices(kinds, _COLUMNS, 3, (lo, hi)))
        assert got.equals(pl.concat(p.filter(near) for p in held.slices(kinds, _COLUMNS, 3, (lo, hi))))
        timed = not frame.get_column("start_ns").null_count() and not frame.get_column("end_ns").null_count()
        times = np.array([lo, hi, -1, 100], dtype=np.int64)
        for kind in [*_KINDS[:3], "memcpy"]:
            assert read.rows_of(kind) == held.rows_of(kind)
            if held.rows_of(kind) and timed:
                assert read.starting_before(kind, times).tolist() == held.starting_before(kind, times).tolist()
                first = max(lo, 0)
                assert read.part_slice(kind, first, width).equals(held.part_slice(kind, first, width))


@pytest.mark.parametrize("sample", ["healthy", "cuda-h200-compile"])
def test_a_rank_analysed_in_windows_from_its_spilled_events_is_the_held_rank_s(tmp_path: Path, sample: str) -> None:
    """The map of a rank whose events are read from a file as asked, cut at every frame, gives
    the held rank's parts, table for table."""
    run = load_run([next((SAMPLES / sample).glob("rank0*"))], use_cache=False)
    options = Options(has_gpu=run.has_gpu)
    whole = map_ranks(RankContext(run, options), ANALYSES)
    read = Run(
        by_kind=Spilled.written(run.by_kind, tmp_path / "events.parquet"),
        ranks=run.ranks,
        counters=run.counters,
        memory_categories=run.memory_categories,
    )
    ctx = RankContext(read, options)
    folded = windows.map_windows(ctx, ANALYSES, windows.plan(RankContext(read, options), events=1))
    for entry in windows.folding(ANALYSES):
        mine, theirs = whole.parts[entry.name], folded.parts[entry.name]
        for table in mine.names():
            assert_frame_equal(_plain(getattr(theirs, table)), _plain(getattr(mine, table)), check_dtypes=True)
