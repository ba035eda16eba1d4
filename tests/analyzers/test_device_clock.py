"""A device clock ahead of the host's is said, and lowers the verdict's confidence.

No device activity can start before the host's call that launched it began; in every shared
trace and sample none does (by more than 1 us). The H200 sample ``cuda-h200-small`` (129 kernels
and copies, each launched by a recorded call; host-bound, confidence high) with some of its
device activities moved earlier, as a device clock ahead of the host's would put them: a fifth
of them, 30 us earlier, lowers the confidence one level; all of them, 200 us earlier, two.
"""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers import analyze
from tracekit.analyzers.caveats import lower
from tracekit.readers import load_run
from tracekit.reports.sentences import title, write_verdict
from tracekit.results.vocab import BoundKind, NoteKind

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis, Finding

pytestmark = pytest.mark.real

SAMPLE = SAMPLES / "captures" / "cuda-h200-small" / "rank0.pt.trace.json.gz"
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")


def _moved(tmp_path: Path, every: int, us: float) -> Analysis:
    """The sample with every ``every``-th device activity ``us`` earlier."""
    doc: dict[str, Any] = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    device = [e for e in doc["traceEvents"] if e.get("cat") in DEVICE]
    for i, e in enumerate(device):
        if i % every == 0:
            e["ts"] -= us
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps(doc))
    return analyze(load_run([path], use_cache=False))


def _clock(a: Analysis) -> Finding | None:
    return next((f for f in a.verdict.secondary if f.note is NoteKind.DEVICE_CLOCK_AHEAD), None)


def test_the_sample_as_recorded_has_no_device_before_its_launch() -> None:
    assert _clock(analyze(load_run([SAMPLE], use_cache=False))) is None


@pytest.mark.parametrize(("every", "us", "early", "levels"), [(5, 30, 25, 1), (1, 200, 129, 2)])
def test_device_work_before_its_launch_is_a_clock_ahead(
    tmp_path: Path, every: int, us: float, early: int, levels: int
) -> None:
    clean = analyze(load_run([SAMPLE], use_cache=False)).verdict.primary
    moved = _moved(tmp_path, every, us)
    note = _clock(moved)
    assert note is not None
    # the activities moved that now start before their launch call: each of this sample's starts 6
    # us or more after its call began; 30 us earlier, all of the fifth moved but one (its 48 us)
    assert note.value == pytest.approx(round(100 * early / 129, 1))
    assert note.values[0] == 0.0 and 0 < note.values[1] <= 1000 * us
    assert moved.verdict.primary.bound is clean.bound
    assert moved.verdict.primary.confidence is lower(clean.confidence, levels)
    assert title(note, moved.verdict).startswith("Rank 0's device clock is ahead of its host's")
    written = write_verdict(moved.verdict)
    [said] = [w for w in written.secondary if w.title.startswith("Rank 0's device clock")]
    assert "a device cannot start work before it is launched" in said.evidence[0]
    assert any("Record the trace again in one process" in r for r in said.recommendations)


def _behind(a: Analysis) -> Finding | None:
    return next((f for f in a.verdict.secondary if f.note is NoteKind.DEVICE_CLOCK_BEHIND), None)


def test_a_device_clock_far_behind_the_host_s_leaves_no_verdict_and_says_why(tmp_path: Path) -> None:
    """Every device activity 50 ms later, as a device clock behind the host's would put them
    (the sample's steps last 4 ms): most of the window is then the GPU waiting behind work the
    trace does not hold (the ledger's unobservable entry, 81.6%), and the rest, 0.8% of kernels,
    was named "GPU-compute-bound" with the advice to make each kernel cheaper. No verdict now,
    the note says how much cannot be judged, and why: each of the sample's 4 device syncs
    returned 49.9 ms before work launched ahead of it ended. The recorded sample holds none of it."""
    late = _moved(tmp_path, 1, -50_000)
    behind = _behind(late)
    assert behind is not None and behind.value == 100.0
    assert behind.values[0] == 0 and behind.values[1] == pytest.approx(49_916_742, abs=1_000)
    assert title(behind, late.verdict).startswith("Rank 0's device clock is behind its host's: at 100.0% of")
    (said,) = [f for f in write_verdict(late.verdict).secondary if f.title.startswith("Rank 0's device clock")]
    assert said.evidence[0].startswith("rank 0: at 100.0% of its cudaDeviceSynchronize calls, a kernel, copy or set")
    assert "at least 49.92 ms behind the host's" in said.evidence[0]
    primary = late.verdict.primary
    assert primary.bound is BoundKind.UNDETERMINED and primary.share_pct is None
    (note,) = [f for f in late.verdict.secondary if f.note is NoteKind.UNOBSERVABLE]
    assert note.value == pytest.approx(81.6, abs=0.1)
    assert title(primary, late.verdict) == "No verdict: most of the time the GPU waits on work this trace does not show"
    (said,) = [f for f in write_verdict(late.verdict).secondary if f.title.startswith("Most of the time")]
    assert said.evidence[0].startswith("81.6% of the measured time the GPU waits behind work this trace does not hold")
    clean = analyze(load_run([SAMPLE], use_cache=False))
    assert clean.verdict.primary.bound is BoundKind.HOST
    assert all(f.note is not NoteKind.UNOBSERVABLE for f in clean.verdict.secondary) and _behind(clean) is None


def test_a_device_clock_a_little_behind_lowers_the_confidence(tmp_path: Path) -> None:
    """Every device activity 300 us later: the steps keep their work, the verdict its bound, and
    each device sync's wait is contradicted: the confidence two levels lower (high -> low)."""
    clean = analyze(load_run([SAMPLE], use_cache=False)).verdict.primary
    late = _moved(tmp_path, 1, -300)
    behind = _behind(late)
    assert behind is not None and behind.value == 100.0
    assert late.verdict.primary.bound is clean.bound
    assert late.verdict.primary.confidence is lower(clean.confidence, 2)
