"""Thresholds that both capture and the analyzers apply, defined once.

This module imports nothing, so the capture stage (which never imports polars) and the
analyzers share the same numbers.
"""

from __future__ import annotations

from typing import Final

#: A rank is named a straggler when the waiting its late arrival causes the others is at least
#: this share of the step time. The capture summary compares the slowest rank's lateness (its
#: host time before the step's first collective, minus the median of the other ranks') with
#: this share of the longest per-rank mean step time; the analyzers compare each rank's
#: straggler score (the others' wait it causes per step, as a share of the step) with it, and
#: the verdict requires it of a straggler-bound finding.
STRAGGLER_MIN_SHARE: Final = 0.05

#: Recorded time outside a rank's measured window is reported from this share of the rank's
#: recorded span (its first to its last host or device activity) and this length up, so that a
#: healthy trace's profiler stop after its last step (at most 2.7% of the real traces' spans
#: here) is no news, while the 40-90% of a trace that a window may leave out is.
LEFT_OUT_MIN_SHARE: Final = 0.05
LEFT_OUT_MIN_NS: Final = 1_000_000
