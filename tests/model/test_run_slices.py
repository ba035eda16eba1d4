"""A run's events selected slice by slice are its selection, in order."""

from __future__ import annotations

import polars as pl
import pytest

from tests.factories import ev, make_run


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 1 << 20])
def test_select_slices_concatenate_to_the_selection(rows: int) -> None:
    events = [ev("cpu_op" if i % 3 else "kernel", f"op{i}", 10 * i, 10 * i + 5 + i % 4) for i in range(10)]
    run = make_run(events)
    cols = ("rank", "tid", "start_ns", "end_ns", "name")
    parts = list(run.select_slices(["cpu_op"], *cols, rows=rows))
    assert len(parts) == -(-10 // rows)
    assert pl.concat(parts).equals(run.select(["cpu_op"], *cols))


def test_select_slices_of_no_events_is_one_empty_frame() -> None:
    run = make_run([])
    parts = list(run.select_slices(["cpu_op"], "start_ns", "name"))
    assert [p.height for p in parts] == [0]
    assert parts[0].columns == ["start_ns", "name"]


def test_select_slices_within_a_stretch_leave_the_others_unread() -> None:
    # ten events 10 ns apart, 5 long but the fourth, which reaches to 95
    events = [ev("cpu_op", f"op{i}", 10 * i, 95 if i == 3 else 10 * i + 5) for i in range(10)]
    run = make_run(events)
    cols = ("start_ns", "end_ns", "name")
    parts = list(run.select_slices(["cpu_op"], *cols, rows=2, within=(62, 75)))
    # rows 0-1 end by 15; 2-3 hold the long event; 4-5 end by 55; 6-7 start by 70; 8-9 from 80
    assert [p["name"].cast(pl.String).to_list() for p in parts] == [["op2", "op3"], ["op6", "op7"]]
    # whatever is read of a stretch is every event that reaches into it, and more
    near = run.select(["cpu_op"], *cols).filter((pl.col("end_ns") > 62) & (pl.col("start_ns") < 75))
    assert near.join(pl.concat(parts), on=list(cols), how="anti").height == 0
    none = list(run.select_slices(["cpu_op"], *cols, rows=2, within=(200, 300)))
    assert [p.height for p in none] == [0] and none[0].columns == list(cols)
