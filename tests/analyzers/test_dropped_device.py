"""A verdict weighs the device activities its reader dropped for times that cannot be right.

The H200 sample ``cuda-h200-small`` (120 kernels and 9 copies; host-bound, confidence high)
with some of its kernels given a negative duration: the reader drops them with a warning, and
the device's timeline then misses that work. One kernel of 129 activities changes nothing; a
third of the kernels (40 of 129, 31%: more than the 15% at which a waste bounds the run) lowers the
verdict's confidence one level and says why; with half of them or more the file is not read
(alone, one line naming it; beside a good rank, skipped and named).
"""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers import analyze
from tracekit.analyzers.caveats import lower
from tracekit.errors import InputError
from tracekit.readers import load_run
from tracekit.reports.sentences import title, write_verdict
from tracekit.results.vocab import BoundKind, NoteKind

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis

pytestmark = pytest.mark.real

SAMPLE = SAMPLES / "captures" / "cuda-h200-small" / "rank0.pt.trace.json.gz"


def _with_kernels_broken(tmp_path: Path, every: int, *, limit: int | None = None) -> Analysis:
    """The sample with every ``every``-th kernel (at most ``limit`` of them) lasting -5 us."""
    doc: dict[str, Any] = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    broken = 0
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for i, e in enumerate(kernels):
        if i % every == 0 and (limit is None or broken < limit):
            e["dur"] = -5
            broken += 1
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps(doc))
    run = load_run([path], use_cache=False)
    assert [w.device for w in run.warnings if w.kind == "dropped_events"] == [broken]
    return analyze(run)


def _notes(a: Analysis) -> dict[NoteKind, Any]:
    return {f.note: f for f in a.verdict.secondary if f.note is not None}


def test_one_kernel_dropped_leaves_the_verdict_as_it_was(tmp_path: Path) -> None:
    clean = analyze(load_run([SAMPLE], use_cache=False)).verdict.primary
    one = _with_kernels_broken(tmp_path, 1, limit=1)
    assert NoteKind.SOME_DEVICE_EVENTS_DROPPED not in _notes(one)
    assert (one.verdict.primary.bound, one.verdict.primary.confidence) == (clean.bound, clean.confidence)


def test_a_third_of_the_kernels_dropped_lowers_the_confidence_and_says_why(tmp_path: Path) -> None:
    clean = analyze(load_run([SAMPLE], use_cache=False)).verdict.primary
    third = _with_kernels_broken(tmp_path, 3)
    note = _notes(third)[NoteKind.SOME_DEVICE_EVENTS_DROPPED]
    # 40 kernels dropped; kept: 80 kernels and 9 copies
    assert note.value == pytest.approx(round(100 * 40 / 129, 1)) and note.values == [0.0]
    assert third.verdict.primary.bound is not BoundKind.UNDETERMINED
    assert third.verdict.primary.confidence is lower(clean.confidence)
    assert title(note, third.verdict).startswith("31.0% of a file's device activities have times that cannot be")
    assert any(
        "the file of rank 0: 31.0% of its device activities" in line
        for f in write_verdict(third.verdict).secondary
        for line in f.evidence
    )


def test_a_file_that_lost_most_of_its_device_activities_is_not_read(tmp_path: Path) -> None:
    doc: dict[str, Any] = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = -5
    bad = tmp_path / "rank0.pt.trace.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InputError) as alone:
        load_run([bad], use_cache=False)
    said = str(alone.value)
    assert said.startswith(f"{bad}: 120 of its 129 device activities (kernels, copies, sets) have times that cannot")
    assert "120 with a negative duration" in said and "\n" not in said
    # beside a good rank of the same run: skipped and named, the good one analysed
    (tmp_path / "good").mkdir()
    good = tmp_path / "good" / "rank1.pt.trace.json"
    doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": 1}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = 5
    good.write_text(json.dumps(doc))
    run = load_run([bad, good], use_cache=False)
    assert [r.rank for r in run.meta.ranks] == [1]
    assert [s.path for s in run.meta.skipped] == [str(bad)]
