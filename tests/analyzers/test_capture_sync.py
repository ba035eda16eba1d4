"""tracekit capture's own step-end sync: a sync of the measurement, not of the training.

The capture waits for the GPU at each step's end (the step's time includes its GPU work). On
the H200 the idle after that wait read as 5.3% sync-bound with the advice to remove per-step
``.item()`` calls, which the training did not make. The capture now wraps the wait in
``tracekit.capture/device_sync``. The real CUDA sample was recorded before that range existed:
there the capture's wait is the last device synchronize of each step, after every one of the
capture's phases (``tracekit.phase/...``) has ended. The same trace is read three ways: as
recorded, with the range added where the capture now writes it (the same answer), and with its
phase ranges renamed, as a program that is not a tracekit capture (then the syncs are the
training's).
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


def _unphased(tmp: Path) -> Path:
    """The sample with tracekit's phase ranges renamed: a program that is no tracekit capture."""
    out = tmp / "unphased"
    shutil.copytree(HEALTHY, out)
    for extra in ("summary.json", "capture_config.json"):
        (out / extra).unlink(missing_ok=True)
    with gzip.open(HEALTHY / "rank0.pt.trace.json.gz", "rt") as f:
        trace = json.load(f)
    for e in trace["traceEvents"]:
        if str(e.get("name", "")).startswith("tracekit.phase/"):
            e["name"] = "user/" + e["name"].removeprefix("tracekit.phase/")
    with gzip.open(out / "rank0.pt.trace.json.gz", "wt") as f:
        json.dump(trace, f)
    return out


def _ledger(a: Analysis) -> dict[LedgerEntry, int]:
    assert a.ledger is not None
    (row,) = a.ledger.per_rank
    return row.ns


def _causes(a: Analysis) -> dict[IdleCause, int]:
    assert a.idle_causes is not None
    return {r.cause: r.idle_ns for r in a.idle_causes.per_rank}


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, Analysis, Analysis, int]:
    tmp = tmp_path_factory.mktemp("capture_sync")
    folder, marked = _marked(tmp)
    plain, ranged, other = (analysis_of([p]).analysis for p in (HEALTHY, folder, _unphased(tmp)))
    return plain, ranged, other, marked


def test_the_capture_s_sync_is_no_sync_of_the_training(readings: tuple[Analysis, Analysis, Analysis, int]) -> None:
    plain, ranged, _, n = readings
    assert n >= 3  # one per traced step (and the last, after the profiler's window)
    for a in (plain, ranged):  # an older capture reads as one with the range
        (row,) = a.host_syncs.per_rank
        assert row.sync_calls == 0 and row.idle_after_ns == 0
        assert a.verdict.evidence.sync_calls_per_step == 0
        assert not a.verdict.evidence.sync_sources
    assert _ledger(plain) == _ledger(ranged)


def test_its_idle_is_the_capture_s_and_bounds_nothing(readings: tuple[Analysis, Analysis, Analysis, int]) -> None:
    plain, _, other, _ = readings
    # the same gaps: every ns a program that is no capture gives its own sync is the capture's here
    assert _ledger(other)[LedgerEntry.HOST_SYNC] > 0
    assert LedgerEntry.HOST_SYNC not in _ledger(plain)
    assert _ledger(plain)[LedgerEntry.CAPTURE_SYNC] == _ledger(other)[LedgerEntry.HOST_SYNC]
    assert _causes(plain)[IdleCause.CAPTURE_SYNC] == _causes(other)[IdleCause.HOST_SYNC]
    assert sum(_ledger(plain).values()) == sum(_ledger(other).values())
    (row,) = other.host_syncs.per_rank
    assert row.sync_calls >= 3 and row.idle_after_ns > 0
    # no sync waste, no sync finding, no sync gain; compute is still the verdict
    costs = {c.bound: c.share_pct for c in plain.verdict.costs}
    assert costs[BoundKind.SYNC] == 0
    named = [f.bound for f in (plain.verdict.primary, *plain.verdict.secondary)]
    assert BoundKind.SYNC not in named
    assert plain.verdict.primary.bound is BoundKind.GPU_COMPUTE
    assert BoundKind.SYNC not in [g.bound for g in plain.verdict.gains]
    # everything else is as it was
    rest = {k: v for k, v in _ledger(other).items() if k is not LedgerEntry.HOST_SYNC}
    assert {k: v for k, v in _ledger(plain).items() if k is not LedgerEntry.CAPTURE_SYNC} == rest
