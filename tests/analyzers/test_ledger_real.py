"""On every shared trace and every sample: the ledger sums to 100%, and the verdict, the time
breakdown and the idle causes are the ledger's own numbers (they cannot disagree in one report)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SAMPLES, analysis_of
from tracekit.analyzers.parts import LedgerParts
from tracekit.analyzers.verdict import bound_of
from tracekit.results.vocab import BoundKind, LedgerEntry, MeasuredOn

pytestmark = pytest.mark.real

#: Every trace (or set of rank traces of one job) of ../shared/traces, and every sample capture.
SHARED = (
    "kineto/param-dlrm-8rank-v100",
    "kineto/hta-sampled-2rank",
    "kineto/hta-trace-diff/control-rank3-a100.json.gz",
    "kineto/hta-trace-diff/test-rank1-v100.json.gz",
    *(
        f"kineto/hta-misc/{n}"
        for n in (
            "alexnet-a100-cuda-sync.json.gz",
            "amd-mi250-rocm.json.gz",
            "cpu-only-gloo-rank34.pt.trace.json.gz",
            "cpu-ops-only-rank0.json.gz",
            "cuda-event-sync-multistream.json.gz",
            "cuda-event-sync.json.gz",
            "nccl-rank0-world2.json.gz",
            "no-distributed-info.json.gz",
            "ns-resolution-rank0.pt.trace.json.gz",
            "triton-kernel.json.gz",
        )
    ),
    "kineto/tracelens-mi300-resnet-actckpt",
    "kineto/tbplugin-resnet50-workers0",
    "kineto/tbplugin-resnet50-workers4",
    "kineto/tracelens-vllm-graph-replay/decode-full.json.gz",
    "kineto/tracelens-vllm-graph-replay/prefilldecode-piecewise.json.gz",
    "kineto/hta-critical-path/simple-add.json.gz",
    *(
        f"nsys/{n}.sqlite"
        for n in (
            "nsysai-mfu-2gpu-before",
            "nsysai-mfu-2gpu-after",
            "nsysai-mock-rtx3080",
            "pipit-saxpy-mpi-a100-oldschema",
        )
    ),
)
CAPTURES = sorted(p.name for p in (SAMPLES / "captures").iterdir() if p.is_dir() and p.name != "cuda-h200-sweep")
#: idle causes -> the ledger entry they are counted in
_COMMS_CAUSES = ("peer", "blocking_collective")


def _paths(name: str, request: pytest.FixtureRequest) -> list[Path]:
    if name.startswith("captures/"):
        folder = SAMPLES / name
        if (folder / "doctor.json").exists():  # a doctor's folder: its baseline capture
            return [folder / "baseline"]
        runs = sorted(folder.glob("*/run1")) if (folder / "ab.json").exists() else []
        return runs[:1] or [folder]
    return [request.getfixturevalue("shared_traces") / name]


@pytest.mark.parametrize("name", [*SHARED, *(f"captures/{c}" for c in CAPTURES)])
def test_the_ledger_is_every_number_of_the_verdict(name: str, request: pytest.FixtureRequest) -> None:
    frames = analysis_of(_paths(name, request)).frames
    led, verdict = frames.ledger, frames.verdict
    if led.per_step.height == 0:
        assert verdict.primary.bound is BoundKind.UNDETERMINED
        return
    # each rank's and each step's entries sum to its window (100% +- 0.1)
    windows = frames.gather(LedgerParts).frames.select(
        pl.col("rank").cast(pl.Int32), "step", window=pl.col("end_ns") - pl.col("start_ns")
    )
    steps = led.per_step.group_by("rank", "step").agg(pl.col("ns").sum())
    joined = steps.join(windows, on=["rank", "step"], nulls_equal=True)
    assert joined.height == steps.height
    assert ((joined["ns"] - joined["window"]).abs() <= 0.001 * joined["window"]).all()
    assert sum(s.share_pct for s in frames.results["ledger"].run) == pytest.approx(100, abs=0.1)
    # the verdict's share is the sum of the run's ledger entries for its bound
    measured_on = MeasuredOn.GPU if frames.has_gpu else MeasuredOn.HOST
    by_bound: dict[BoundKind, float] = {}
    for entry, share in led.run.select("entry", "share_pct").iter_rows():
        if (bound := bound_of(entry, measured_on)) is not None:
            by_bound[bound] = by_bound.get(bound, 0.0) + share
    for finding in (verdict.primary, *verdict.secondary):
        if finding.bound is not None and finding.bound not in (BoundKind.MIXED, BoundKind.UNDETERMINED):
            assert finding.share_pct == pytest.approx(by_bound.get(finding.bound, 0.0), abs=1e-3)
    if not frames.has_gpu:
        return
    # the GPU breakdown and the idle causes are the ledger's entries, rank by rank
    per_rank = {(r, e): ns for r, e, ns in led.per_rank.select("rank", "entry", "ns").iter_rows()}
    for row in frames.breakdown.per_rank.iter_rows(named=True):
        r = row["rank"]
        moved = _own_excess(frames, r)  # on a straggler, its extra time in its slow phase
        assert 0 <= row["compute_ns"] - per_rank.get((r, LedgerEntry.COMPUTE.value), 0) <= moved
        assert per_rank.get((r, LedgerEntry.TRANSFER.value), 0) == row["transfer_ns"]
        idle = frames.idle.per_rank.filter(pl.col("rank") == r) if frames.idle is not None else None
        if idle is None:
            continue
        causes = {str(c): ns for c, ns in idle.select("cause", "idle_ns").iter_rows()}
        waiting = sum(causes.get(c, 0) for c in _COMMS_CAUSES)
        comm_side = sum(per_rank.get((r, e), 0) for e in ("comms", "straggler"))
        assert comm_side >= row["comm_ns"]  # exposed collectives, and waits for peers
        assert comm_side <= row["comm_ns"] + waiting + row["window_ns"] * 0.001 + moved
        for cause, entry in (("data", "data"), ("launch", "launch"), ("dependency", "dependency")):
            assert per_rank.get((r, entry), 0) <= causes.get(cause, 0)  # a straggler's excess only takes from it


def _own_excess(frames: object, rank: int) -> int:
    """What the straggler ``rank`` moved into ``straggler`` from its own slow phase."""
    named = [s for s in frames.stragglers.stragglers if s.rank == rank]  # type: ignore[attr-defined]
    steps = frames.steps.steps.filter(pl.col("rank") == rank).height  # type: ignore[attr-defined]
    return round(sum(s.cause_excess_ns for s in named) * max(1, steps))
