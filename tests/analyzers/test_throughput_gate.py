"""The throughput gate compares samples/s when the two captures' steps hold different numbers of samples."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

from tests.cli.test_errors import run_main
from tests.conftest import SAMPLES

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

SAMPLE = SAMPLES / "captures" / "cuda-h200-small"


def _half_batch(tmp_path: Path) -> Path:
    """The same traces (the same step times) recorded as steps of half as many samples."""
    b = tmp_path / "B"
    shutil.copytree(SAMPLE, b)
    data = json.loads((b / "summary.json").read_bytes())
    data["throughput"]["samples_per_step_per_rank"] //= 2
    data["config"]["batch_size"] //= 2
    (b / "summary.json").write_text(json.dumps(data))
    return b


def test_half_the_samples_per_step_at_the_same_step_time_fails_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    b = _half_batch(tmp_path)
    code, err = run_main(
        monkeypatch, capsys, "compare", str(SAMPLE), str(b), "--fail-if", "throughput:2%", "--no-cache"
    )
    assert code == 1, err
    assert "FAIL throughput:2%" in err
    assert "-50.00%" in err and "samples/s" in err


def test_the_same_samples_per_step_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_main(
        monkeypatch, capsys, "compare", str(SAMPLE), str(SAMPLE), "--fail-if", "throughput:2%", "--no-cache"
    )
    assert code == 0, err
