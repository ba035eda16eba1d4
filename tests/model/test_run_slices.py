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
