"""tracekit capture's own step-end sync: a sync of the measurement, not of the training.

The capture waits for the GPU at each step's end (the step's time includes its GPU work). On
the H200 the idle after that wait read as 5.3% sync-bound with the advice to remove per-step
``.item()`` calls, which the training did not make. The capture now wraps the wait in
``tracekit.capture/device_sync``; the real CUDA sample (recorded before that range existed)
gets the range here, where the capture now writes it, and the same trace is read both ways.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, analysis_of
from tracekit.results.analysis import Analysis
from tracekit.results.vocab import CAPTURE_SYNC_RANGE, BoundKind, IdleCause, LedgerEntry

HEALTHY = SAMPLES / "captures" / "cuda-h200-healthy"


def _marked(tmp: Path) -> tuple[Path, int]:
    """The sample with the capture's range around each device sync outside every phase."""
    out = tmp / "marked"
    shutil.copytree(HEALTHY, out)
    with gzip.open(HEALTHY / "rank0.pt.trace.json.gz", "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    phases = [e for e in events if e.get("ph") == "X" and str(e.get("name")).startswith("tracekit.phase/")]
    marked = 0
    for e in list(events):
        if e.get("ph") != "X" or e.get("name") != "cudaDeviceSynchronize":
            continue
        start, end = e["ts"], e["ts"] + e["dur"]
        if any(p["tid"] == e["tid"] and p["ts"] <= start and p["ts"] + p["dur"] >= end for p in phases):
            continue
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": CAPTURE_SYNC_RANGE,
                "pid": e["pid"],
                "tid": e["tid"],
                "ts": start - 1,
                "dur": e["dur"] + 2,
            }
        )
        marked += 1
    with gzip.open(out / "rank0.pt.trace.json.gz", "wt") as f:
        json.dump(trace, f)
    return out, marked


def _ledger(a: Analysis) -> dict[LedgerEntry, int]:
    assert a.ledger is not None
    (row,) = a.ledger.per_rank
    return row.ns


def _causes(a: Analysis) -> dict[IdleCause, int]:
    assert a.idle_causes is not None
    return {r.cause: r.idle_ns for r in a.idle_causes.per_rank}


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, Analysis, int]:
    folder, marked = _marked(tmp_path_factory.mktemp("capture_sync"))
    return analysis_of([HEALTHY]).analysis, analysis_of([folder]).analysis, marked


def test_the_capture_s_sync_is_no_sync_of_the_training(both: tuple[Analysis, Analysis, int]) -> None:
    plain, marked, n = both
    assert n >= 3  # one per traced step (and the last, after the profiler's window)
    (before,) = plain.host_syncs.per_rank
    (after,) = marked.host_syncs.per_rank
    assert before.sync_calls >= 3 and before.idle_after_ns > 0
    assert after.sync_calls == 0 and after.idle_after_ns == 0
    assert marked.verdict.evidence.sync_calls_per_step == 0
    assert not marked.verdict.evidence.sync_sources


def test_its_idle_is_the_capture_s_and_bounds_nothing(both: tuple[Analysis, Analysis, int]) -> None:
    plain, marked, _ = both
    # the same gaps, relabelled: every ns the plain reading gave the sync is the capture's now
    assert _ledger(plain)[LedgerEntry.HOST_SYNC] > 0
    assert LedgerEntry.HOST_SYNC not in _ledger(marked)
    assert _ledger(marked)[LedgerEntry.CAPTURE_SYNC] == _ledger(plain)[LedgerEntry.HOST_SYNC]
    assert _causes(marked)[IdleCause.CAPTURE_SYNC] == _causes(plain)[IdleCause.HOST_SYNC]
    assert sum(_ledger(marked).values()) == sum(_ledger(plain).values())
    # no sync waste, no sync finding, no sync gain; compute is still the verdict
    costs = {c.bound: c.share_pct for c in marked.verdict.costs}
    assert costs[BoundKind.SYNC] == 0
    named = [f.bound for f in (marked.verdict.primary, *marked.verdict.secondary)]
    assert BoundKind.SYNC not in named
    assert marked.verdict.primary.bound is BoundKind.GPU_COMPUTE
    assert BoundKind.SYNC not in [g.bound for g in marked.verdict.gains]
    # everything else is as it was
    rest = {k: v for k, v in _ledger(plain).items() if k is not LedgerEntry.HOST_SYNC}
    assert {k: v for k, v in _ledger(marked).items() if k is not LedgerEntry.CAPTURE_SYNC} == rest
