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
