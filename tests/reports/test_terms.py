"""Every member a report writes its own words for has words."""

from __future__ import annotations

from tracekit.reports.terms import DATA_MEASURES, PHASE_LEVELS
from tracekit.results.vocab import DataMeasure, PhaseLevel


def test_every_data_measure_and_phase_level_has_words() -> None:
    assert set(DATA_MEASURES) == set(DataMeasure)
    assert set(PHASE_LEVELS) == set(PhaseLevel)
