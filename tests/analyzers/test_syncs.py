"""Host syncs and blocking copies on hand-built runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import ev, make_run
from tracekit.analyzers import run_analysis
from tracekit.analyzers.syncs import sync_calls
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path


def op(name: str, start: int, end: int, external_id: int, **kw: Any) -> dict[str, Any]:
    return {**ev("cpu_op", name, start, end, **kw), "external_id": external_id}


def call(name: str, start: int, end: int, *, correlation: int, external_id: int | None = None) -> dict[str, Any]:
    return {**ev("runtime", name, start, end, correlation=correlation), "external_id": external_id}


def item_then_pinned_copy() -> list[dict[str, Any]]:
    """``.item()`` at [40, 52]: a pageable DtoH copy call [42, 50] (its copy [45, 47]) and a
    stream sync [50, 51]; later a pinned HtoD copy call [60, 61], which does not block."""
    return [
        ev("step", "ProfilerStep#1", 0, 200),
        ev("runtime", "cudaLaunchKernel", 1, 2, correlation=1),
        ev("kernel", "gemm", 5, 45, correlation=1),
        op("aten::item", 40, 52, 7),
        op("aten::_local_scalar_dense", 41, 52, 8),
        call("cudaMemcpyAsync", 42, 50, correlation=2, external_id=8),
        ev("memcpy", "Memcpy DtoH (Device -> Pageable)", 45, 47, correlation=2),
        call("cudaStreamSynchronize", 50, 51, correlation=3, external_id=8),
        op("aten::to", 58, 62, 9),
        call("cudaMemcpyAsync", 60, 61, correlation=4, external_id=9),
        ev("memcpy", "Memcpy HtoD (Pinned -> Device)", 63, 64, correlation=4),
        ev("runtime", "cudaLaunchKernel", 65, 66, correlation=5),
        ev("kernel", "gemm", 70, 90, correlation=5),
    ]


def test_a_pageable_copy_is_a_blocking_call_named_by_its_operator() -> None:
    calls = sync_calls(make_run(item_then_pinned_copy()))
    rows = [(r["name"], r["kind"], r["op"], r["start_ns"], r["end_ns"]) for r in calls.iter_rows(named=True)]
    assert rows == [
        ("cudaMemcpyAsync", "blocking_copy", "aten::_local_scalar_dense", 42, 50),
        ("cudaStreamSynchronize", "sync", "aten::_local_scalar_dense", 50, 51),
    ]


def test_the_op_is_found_by_time_without_external_ids() -> None:
    rows = [{**r, "external_id": None} for r in item_then_pinned_copy()]
    calls = sync_calls(make_run(rows))
    assert calls["op"].to_list() == ["aten::_local_scalar_dense", "aten::_local_scalar_dense"]


def test_blocking_copies_count_as_syncs_and_idle_after_counts_once() -> None:
    result = run_analysis(make_run(item_then_pinned_copy())).frames.syncs
    row = result.per_rank.row(0, named=True)
    # one .item(): its pageable copy and its stream sync are one point where the host waited
    assert (row["sync_calls"], row["blocking_copies"], row["sync_ops"]) == (1, 1, 1)
    # the copy returns at 50 and the sync at 51; the next GPU work starts at 63 (the pinned
    # copy): [50, 63) once, not [50, 63) + [51, 63)
    assert row["idle_after_ns"] == 13


def test_a_copy_call_without_its_gpu_side_is_not_a_sync() -> None:
    rows = [r for r in item_then_pinned_copy() if r["kind"] != "memcpy"]
    assert sync_calls(make_run(rows))["name"].to_list() == ["cudaStreamSynchronize"]


@pytest.mark.real
def test_pageable_batch_copies_are_blocking_calls(kineto_dir: Path) -> None:
    # the 2021 schema: every step copies its batch from pageable memory (Memcpy HtoD
    # (Pageable -> Device)) through aten::copy_
    calls = sync_calls(load_run([kineto_dir / "tbplugin-resnet50-workers0"]))
    copies = calls.filter(kind="blocking_copy")
    assert copies.height == 12 and set(copies["op"]) == {"aten::copy_"}
    assert set(copies["name"]) == {"cudaMemcpyAsync"}


def test_the_evidence_names_the_operators_that_block() -> None:
    from tracekit.analyzers import analyze

    sources = analyze(make_run(item_then_pinned_copy())).verdict.evidence.sync_sources
    assert [(s.op, s.kind, s.per_step) for s in sources] == [("aten::_local_scalar_dense", "blocking_copy", 1.0)]


def test_a_host_read_recorded_with_no_duration_is_counted_once() -> None:
    """At 1 us resolution ``.item()`` and its ``_local_scalar_dense`` can both last 0 ns: still one
    read (the DLRM trace has 81 such of 456; they used to vanish from the count)."""
    rows = [
        ev("step", "ProfilerStep#1", 0, 200),
        op("aten::item", 40, 40, 7),
        op("aten::_local_scalar_dense", 40, 40, 8),
        op("aten::item", 90, 95, 9),
        op("aten::_local_scalar_dense", 91, 94, 10),
    ]
    syncs = run_analysis(make_run(rows)).analysis.host_syncs
    assert [r.sync_ops for r in syncs.per_step] == [2]


def test_the_evidence_names_the_phase_each_blocking_operator_runs_in() -> None:
    """The sample's sync check (``bool(torch.isinf(maxes).any())`` in forward): its read is in
    the forward phase. The capture's own per-step sync, after every phase (this capture predates
    the range around it), is no source: it is the measurement's."""
    from tests.conftest import SAMPLES, analysis_of

    run = SAMPLES / "captures" / "cuda-h200-sync-ab" / "b" / "run1"
    sources = analysis_of([run]).analysis.verdict.evidence.sync_sources
    assert [(s.op, s.phase) for s in sources] == [("aten::_local_scalar_dense", "tracekit.phase/forward")]


_OPS = st.lists(st.tuples(st.integers(0, 1), st.integers(1, 2), st.integers(0, 40), st.integers(0, 25)), max_size=40)
_CALLS = st.lists(st.tuples(st.integers(0, 1), st.integers(1, 3), st.integers(0, 60), st.integers(0, 10)), max_size=25)


@settings(max_examples=300, deadline=None)
@given(_OPS, _CALLS)
def test_a_call_without_an_id_takes_the_open_operator_that_started_last(ops: list[Any], calls: list[Any]) -> None:
    """Each call: of its thread's operators that started at or before it, the latest (the last in
    the trace's order among equal starts), where it was still open when the call returned;
    calls in any order, threads with no operator, calls before any operator."""
    import polars as pl

    from tracekit.analyzers.syncs import _issuing_op

    run = make_run([ev("cpu_op", f"op{i}", s, s + d, rank=r, tid=t) for i, (r, t, s, d) in enumerate(ops)])
    frame = pl.DataFrame(
        [(r, t, s, s + d, None, "cudaStreamSynchronize") for r, t, s, d in calls],
        schema={
            "rank": pl.Int32,
            "tid": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "external_id": pl.Int64,
            "name": pl.String,
        },
        orient="row",
    )
    order = run.events.filter(pl.col("kind") == "cpu_op").select("rank", "tid", "start_ns", "end_ns", "name").rows()
    expected = []
    for r, t, s, e, _, name in frame.rows():
        before = [o for o in order if o[0] == r and o[1] == t and o[2] <= s]
        latest = max((o[2] for o in before), default=None)
        last = [o for o in before if o[2] == latest][-1] if before else None
        is_open = last is not None and last[3] >= e
        expected.append((r, t, s, e, name, last[4] if is_open else None, last[2] if is_open else None))
    got = _issuing_op(run, frame).select("rank", "tid", "start_ns", "end_ns", "name", "op", "op_start_ns").rows()
    key = lambda row: tuple((x is None, x) for x in row)  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
