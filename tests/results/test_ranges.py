"""Every number of a capture summary range-checked on load: one line naming the file and the field."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import pytest

from tests.cli.test_errors import run_main
from tests.conftest import SAMPLES
from tracekit.errors import InputError
from tracekit.pipeline import capture_summary
from tracekit.results.capture import load_capture_summary

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

SAMPLE = SAMPLES / "captures" / "cuda-h200-small"


def _edited(edit: Callable[[Any], None]) -> bytes:
    data = json.loads((SAMPLE / "summary.json").read_bytes())
    edit(data)
    return json.dumps(data).encode()  # json writes NaN and Infinity as such literals


def _set(*path: str | int, value: Any) -> Callable[[Any], None]:
    def edit(data: Any) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


BAD = {
    "negative peak RSS": (_set("memory", "peak_rss_bytes", value=-5), "memory.peak_rss_bytes is -5: it cannot be"),
    "negative rank peak": (
        _set("per_rank", 0, "memory", "peak_allocated_bytes", value=-1),
        "per_rank[0].memory.peak_allocated_bytes is -1",
    ),
    "negative step time": (_set("step", "mean_ns", value=-3.5), "field step.mean_ns is -3.5: it cannot be negative"),
    "negative count": (_set("measured_steps", value=-2), "field measured_steps is -2"),
    "negative samples/s": (_set("throughput", "global_samples_per_s", value=-1.0), "throughput.global_samples_per_s"),
    "NaN": (_set("throughput", "steps_per_s", value=float("nan")), "throughput.steps_per_s is nan, not a finite"),
    "Infinity": (_set("phases", 0, "mean_ns", value=float("inf")), "field phases[0].mean_ns is inf, not a finite"),
    "-Infinity": (_set("step", "p95_ns", value=float("-inf")), "field step.p95_ns is -inf, not a finite number"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_impossible_number_names_the_file_and_field(name: str) -> None:
    edit, says = BAD[name]
    with pytest.raises(InputError) as raised:
        load_capture_summary(_edited(edit), source="B/summary.json")
    assert raised.value.message.startswith("B/summary.json: field ")
    assert says in raised.value.message


def test_memory_changes_may_be_negative() -> None:
    edit = _set("per_rank", 0, "step_memory_change_bytes", value=-4096.0)
    assert load_capture_summary(_edited(edit), source="s").per_rank[0].step_memory_change_bytes == -4096.0


def test_a_summary_with_nan_beside_traces_is_an_error_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_bytes(_edited(_set("throughput", "steps_per_s", value=float("nan"))))
    with pytest.raises(InputError, match=r"summary\.json: field throughput\.steps_per_s is nan"):
        capture_summary([tmp_path])
    (tmp_path / "summary.json").write_text('{"other": NaN}')  # not a capture summary: still not ours
    assert capture_summary([tmp_path]) is None


def test_a_negative_peak_does_not_pass_the_memory_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    b = tmp_path / "B"
    shutil.copytree(SAMPLE, b)
    edit = _set("per_rank", 0, "memory", "peak_allocated_bytes", value=-5)
    (b / "summary.json").write_bytes(_edited(edit))
    code, err = run_main(monkeypatch, capsys, "compare", str(SAMPLE), str(b), "--fail-if", "memory:+1MiB", "--no-cache")
    assert code == 2
    assert err == (
        f"tracekit: error: {b / 'summary.json'}: field per_rank[0].memory.peak_allocated_bytes is -5: "
        "it cannot be negative\n"
    )
