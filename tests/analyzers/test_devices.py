"""Traces of other accelerators end to end: their device work read, or said not to be read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tests.factories import write_kineto
from tests.factories_devices import mtia_steps
from tracekit.analyzers import run_analysis
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.results.vocab import BoundKind, LedgerEntry, MeasuredOn, NoteKind, RunWarningKind

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.analyzers.analysis import Outcome


def analyze(path: Path) -> Outcome:
    return run_analysis(load_run([path], use_cache=False))


def test_an_mtia_trace_gets_a_verdict_on_its_device(tmp_path: Path) -> None:
    # the device computes [150, 950) and copies [50, 150) of each 1000 us step: 80% compute,
    # 10% memory, 10% idle; the DDP all-reduce of a world of one is no communication
    path = write_kineto(tmp_path / "mtia.json", mtia_steps(), world_size=1, devices=("MTIA",))
    outcome = analyze(path)
    a = outcome.analysis
    assert a.run.has_gpu and a.run.devices == ["MTIA"]
    assert a.verdict.measured_on is MeasuredOn.GPU
    assert a.verdict.primary.bound is BoundKind.GPU_COMPUTE
    ledger = dict(outcome.frames.ledger.run.select("entry", "share_pct").rows())
    assert round(ledger[LedgerEntry.COMPUTE.value]) == 80 and round(ledger[LedgerEntry.MEMORY.value]) == 10
    assert LedgerEntry.COMMS.value not in ledger
    assert {w.kind for w in a.run.warnings}.isdisjoint({RunWarningKind.CPU_ONLY, RunWarningKind.DEVICE_EVENTS_UNREAD})


def test_device_events_not_read_are_named_never_missing(tmp_path: Path) -> None:
    path = write_kineto(
        tmp_path / "insight.json", mtia_steps(device_cat="mtia_insight"), world_size=1, devices=("MTIA",)
    )
    outcome = analyze(path)
    a = outcome.analysis
    notes = [a.verdict.primary.note, *(f.note for f in a.verdict.secondary)]
    assert NoteKind.DEVICE_EVENTS_UNREAD in notes and NoteKind.GPU_EVENTS_MISSING not in notes
    assert a.verdict.primary.bound in (None, BoundKind.UNDETERMINED)
    kinds = [w.kind for w in a.run.warnings]
    assert RunWarningKind.DEVICE_EVENTS_UNREAD in kinds and RunWarningKind.CPU_ONLY not in kinds
    said = "20 MTIA device event(s) (mtia_insight) are in this trace, but tracekit does not read them"
    for fmt in ("terminal", "md", "html"):
        assert said in " ".join(renderer(fmt).render(a).split()), fmt
    assert '"device_events_unread"' in renderer("json").render(a)
    # the host's ledger, on a world of one: the backward thread's all-reduce in flight while the
    # training thread sits in a device sync is no wait on a peer
    ledger = outcome.frames.ledger.run
    assert LedgerEntry.COMMS.value not in ledger["entry"].to_list()
    assert ledger.filter(pl.col("entry") == LedgerEntry.COMPUTE.value)["share_pct"].item() > 0
