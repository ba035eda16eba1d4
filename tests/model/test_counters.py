"""The counters table and the Run's counters."""

from __future__ import annotations

import dataclasses

import polars as pl

from tests.factories import ev, make_run
from tracekit.model import COUNTER_SCHEMA, DEVICE_TYPES, empty_counters


def test_empty_counters_has_the_schema() -> None:
    frame = empty_counters()
    assert frame.height == 0 and frame.schema == pl.Schema(COUNTER_SCHEMA)
    assert list(COUNTER_SCHEMA)[:2] == ["rank", "time_ns"] and {"cpu", "cuda", "other"} <= set(DEVICE_TYPES)


def test_a_run_without_counters_has_an_empty_table() -> None:
    run = make_run([ev("kernel", "k", 0, 10)])
    assert run.counters.schema == pl.Schema(COUNTER_SCHEMA) and run.counters.height == 0
    assert run.rank_counters(0).height == 0


def test_rank_counters() -> None:
    rows = [
        {"rank": r, "time_ns": t, "device_type": "cuda", "device": 0, "addr": 1, "bytes": b}
        | {"total_allocated": a, "total_reserved": 2 << 20}
        for r, t, b, a in [(0, 5, 512, 512), (0, 9, -512, 0), (1, 7, 64, 64)]
    ]
    counters = pl.DataFrame(rows, schema=COUNTER_SCHEMA)
    run = make_run([ev("kernel", "k", 0, 10), ev("kernel", "k", 0, 10, rank=1)])
    run = dataclasses.replace(run, counters=counters)
    assert run.rank_counters(0)["total_allocated"].to_list() == [512, 0]
    assert run.rank_counters(1)["bytes"].to_list() == [64]
