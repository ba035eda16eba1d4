"""The words a report writes for the vocabulary's members that a report does not show by value.

A member's value is what a file stores (:mod:`tracekit.results.vocab`); what a reader sees is
written here, so that either can change without the other.
"""

from __future__ import annotations

from typing import Final

from tracekit.results.vocab import PHASE_PREFIX, DataMeasure, PhaseLevel

#: What the DataLoader's cost was measured as.
DATA_MEASURES: Final[dict[DataMeasure, str]] = {
    DataMeasure.GPU_IDLE: "gpu idle during fetch",
    DataMeasure.HOST_FETCH: "host fetch time (CPU-only run)",
}
#: Which annotations the phase breakdown holds.
PHASE_LEVELS: Final[dict[PhaseLevel, str]] = {
    PhaseLevel.TRAINING_THREAD: (
        "outermost user annotations on each rank's training thread (the thread recording "
        "ProfilerStep), inside steps; nested ranges are folded into their outermost parent; "
        "on a rank with tracekit's phase ranges, those alone"
    ),
    PhaseLevel.EVERY_THREAD: "outermost user annotations on every thread (no profiler steps)",
}


def phase_name(name: str | None) -> str:
    """A phase as a reader sees it: tracekit's own ranges without their ``tracekit.phase/``
    prefix (``forward``), any other annotation as recorded (the JSON keeps the name)."""
    return (name or "").removeprefix(PHASE_PREFIX)
