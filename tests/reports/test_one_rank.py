"""Figures that need several ranks of a group are never printed as zeros from one rank.

With one rank of a larger world present, nothing is matched across ranks: a collective's
latency floor, the waiting in it and who arrives last are not measurable (issue 29, error 7:
"SendRecv x80 (latency 0.00 ms, mean wait 0.00 ms)").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.factories import ev, make_run, nccl_call
from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.reports.tables import collectives, stragglers
from tracekit.results.vocab import BoundKind, CollectiveMatch

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis

MS = 1_000_000
SEND_RECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
ONE_RANK = "not measurable from one rank"


def rank_3_of_16() -> list[dict[str, Any]]:
    """Rank 3 of a world of 16, alone: 5 steps of 10 ms, each 1 ms of compute, then 16 SendRecv
    of 0.5 ms back to back (80 in all): 8 ms of exposed communication a step."""
    rows: list[dict[str, Any]] = []
    corr = 0
    for step in range(5):
        t = step * 10 * MS
        rows.append(ev("step", f"ProfilerStep#{step}", t, t + 10 * MS, rank=3))
        corr += 1
        rows.append(ev("runtime", "cudaLaunchKernel", t + 10, t + 20, rank=3, correlation=corr))
        rows.append(ev("kernel", "sm90_gemm", t + 100, t + MS, rank=3, stream=7, correlation=corr))
        for i in range(16):
            corr += 1
            start = t + MS + i * MS // 2
            rows += nccl_call(3, start + 100, start + MS // 2, corr=corr, pg="0", coll="send", kernel=SEND_RECV)
    return rows


@pytest.fixture(scope="module")
def alone() -> Analysis:
    return analyze(make_run(rank_3_of_16(), world_size=16))


def test_the_evidence_says_what_cannot_be_measured(alone: Analysis) -> None:
    assert alone.collectives.match is CollectiveMatch.SINGLE_RANK
    assert alone.verdict.primary.bound is BoundKind.COMMS
    (op,) = alone.verdict.evidence.ops
    assert (op.op, op.count, op.floor_ns, op.mean_wait_ns) == ("send", 80, None, None)
    for fmt in ("terminal", "md", "html"):
        text = " ".join(renderer(fmt).render(alone).split())  # lines wrapped anywhere
        assert "latency 0.00 ms" not in text and "mean wait 0.00 ms" not in text, fmt
        assert f"send x80; latency and wait are {ONE_RANK}" in text, fmt


def test_json_says_null_not_zero(alone: Analysis) -> None:
    doc = json.loads(renderer("json").render(alone))
    # the time its calls take the rank is measured on one rank: 80 kernels of 0.4999 ms
    assert doc["verdict"]["evidence"]["ops"] == [
        {"op": "send", "count": 80, "floor_ns": None, "mean_wait_ns": None, "matched": 0, "time_ns": 80 * 499_900}
    ]
    assert all(i["floor_ns"] is None and i["last_rank"] is None for i in doc["collectives"]["instances"])


def test_tables_say_why_they_have_no_figures(alone: Analysis) -> None:
    assert stragglers(alone, None).empty.startswith(f"Who arrives last is {ONE_RANK}")
    table = collectives(alone)
    assert table.title == "Collective instances, each recorded by one rank only"
    assert {r[3:6] for r in table.rows} == {("n/a (one rank)",) * 3}
    assert ONE_RANK in table.caption


def test_a_matched_operation_keeps_its_figures_beside_an_unmatched_one() -> None:
    # ranks 0 and 1 both hold the all-reduce (floor 0.4 ms: rank 1's; rank 0 waits 0.1 ms); only rank 0 has the send
    rows = [
        ev("step", "ProfilerStep#0", 0, 10 * MS, rank=0),
        ev("step", "ProfilerStep#0", 0, 10 * MS, rank=1),
        *nccl_call(0, 1 * MS, 1 * MS + 500_000, corr=1, pg="0", coll="allreduce"),
        *nccl_call(1, 1 * MS + 100_000, 1 * MS + 500_000, corr=1, pg="0", coll="allreduce"),
        *nccl_call(0, 2 * MS, 3 * MS, corr=2, pg="0", coll="send", kernel=SEND_RECV),
    ]
    analysis = analyze(make_run(rows, world_size=2))
    ops = {o.op: o for o in analysis.verdict.evidence.ops}
    assert (ops["allreduce"].floor_ns, ops["allreduce"].mean_wait_ns) == (400_000, 50_000)
    assert (ops["send"].floor_ns, ops["send"].mean_wait_ns) == (None, None)
    # a rank's time in each: the all-reduce 0.5 and 0.4 ms, the send 1 ms on rank 0 and none on rank 1
    assert (ops["allreduce"].time_ns, ops["send"].time_ns) == (450_000, 500_000)


def test_one_rank_of_eight_real(kineto_dir: Path) -> None:
    """TraceLens' MI300 trace: rank 0 of 8, comms-bound on RCCL all-reduce."""
    analysis = analyze(load_run([kineto_dir / "tracelens-mi300-resnet-actckpt" / "rank0.json.gz"]))
    assert analysis.verdict.primary.bound is BoundKind.COMMS
    assert {o.op: (o.floor_ns, o.mean_wait_ns) for o in analysis.verdict.evidence.ops} == {
        "Generic": (None, None),
        "allreduce": (None, None),
        "broadcast": (None, None),
    }
    for fmt in ("terminal", "md", "html"):
        text = " ".join(renderer(fmt).render(analysis).split())
        assert "latency 0.00 ms" not in text and "mean wait 0.00 ms" not in text, fmt
        assert ONE_RANK in text, fmt
