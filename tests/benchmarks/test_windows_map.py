"""``benchmarks.windows_map`` maps a rank both ways, each in a process of its own, and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks import windows_map

if TYPE_CHECKING:
    import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "captures" / "healthy" / "rank0.pt.trace.json.gz"


def test_both_ways_are_measured(capsys: pytest.CaptureFixture[str]) -> None:
    windows_map.main([str(SAMPLE), "--events", "500"])
    whole, spilled = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert whole["how"] == "whole"
    assert spilled["how"] == "spilled"
    assert whole["events"] == spilled["events"] > 0
    assert spilled["windows"] > 1  # cut: the rank has more than 500 events
    for found in (whole, spilled):
        assert found["map_peak_mb"] >= found["settled_mb"] > 0
        assert found["map_cpu_s"] > 0
