"""Capture summaries with impossible numbers beside a good trace: one line naming the file and the field.

``summary.json`` beside the traces is read by analyze (and compare) for the capture's own
figures; a negative peak RSS would pass a memory gate, a NaN would be dropped without a word.
Each case writes the healthy capture's rank-3 trace and its summary with one number broken.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tests.conftest import SAMPLES
from tests.robustness import builders as b
from tests.robustness.harness import Case

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.robustness.sources import Source

_SUMMARY = SAMPLES / "captures" / "cuda-h200-small" / "summary.json"


def _summary(*path: str | int, value: Any) -> Callable[[Path, Source], Path]:
    def build(folder: Path, src: Source) -> Path:
        b.pristine(folder, src)
        data = json.loads(_SUMMARY.read_bytes())
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        (folder / "summary.json").write_text(json.dumps(data))  # NaN and Infinity as JSON literals
        return folder

    return build


def _case(name: str, *path: str | int, value: Any) -> Case:
    return Case(name, _summary(*path, value=value), ("error",), source="capture", family="", marker="summary.json")


CASES: list[Case] = [
    _case("summary-negative-peak-rss", "memory", "peak_rss_bytes", value=-1),
    _case("summary-negative-rank-peak", "per_rank", 0, "memory", "peak_allocated_bytes", value=-5),
    _case("summary-negative-step-time", "step", "mean_ns", value=-1.0),
    _case("summary-negative-measured-steps", "measured_steps", value=-3),
    _case("summary-nan-steps-per-s", "throughput", "steps_per_s", value=float("nan")),
    _case("summary-infinity-phase", "phases", 0, "mean_ns", value=float("inf")),
    _case("summary-minus-infinity-samples", "throughput", "global_samples_per_s", value=float("-inf")),
]

GROUPS: dict[str, list[Case]] = {"Capture summaries out of range": CASES}
