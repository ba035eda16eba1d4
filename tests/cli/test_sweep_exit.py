"""A sweep with a failed cell exits 1, with the matrix of every cell (the survivors too) shown and
written: a CI job that sweeps cannot pass while its cells fail."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

import pytest

from tests.cli.process import run_tracekit

if TYPE_CHECKING:
    from pathlib import Path

pytest.importorskip("torch")
pytest.importorskip("accelerate")
#: Cells that fail before any rank starts: --nsys with no Nsight Systems here.
needs_no_nsys = pytest.mark.skipif(shutil.which("nsys") is not None, reason="nsys is installed: --nsys would run")
FEW = ["--nproc=1", "--no-trace", "--warmup_steps=1", "--measured_steps=2"]


def statuses(matrix: Path) -> dict[str, str]:
    return {row["cell"]: row["status"] for row in json.loads(matrix.read_text())["rows"]}


@needs_no_nsys
def test_a_sweep_whose_cells_all_fail_exits_1(tmp_path: Path) -> None:
    out, matrix = tmp_path / "sweep", tmp_path / "matrix.json"
    result = run_tracekit("sweep", "--grid", "batch_size=8,16", "--nsys=true", *FEW, "--out_dir", out, "--json", matrix)
    assert result.returncode == 1, result.stderr
    assert statuses(matrix) == {"batch_size=8": "failed", "batch_size=16": "failed"}
    assert result.stderr.splitlines()[-1] == (
        "tracekit: 2 of 2 sweep cell(s) failed or hung (first: batch_size=8: --nsys needs Nsight Systems: "
        "no `nsys` on PATH)"
    )
    again = run_tracekit("sweep", "--report", out)  # the finished sweep, rendered again, still says so
    assert again.returncode == 1 and "2 of 2 sweep cell(s) failed" in again.stderr


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
@needs_no_nsys
def test_the_survivors_of_a_sweep_with_a_failed_cell_are_reported(tmp_path: Path) -> None:
    out, matrix = tmp_path / "sweep", tmp_path / "matrix.json"
    result = run_tracekit("sweep", "--grid", "nsys=false,true", *FEW, "--out_dir", out, "--json", matrix, "--md", "-")
    assert result.returncode == 1, result.stderr
    assert statuses(matrix) == {"nsys=false": "ok", "nsys=true": "failed"}
    table = [line for line in result.stdout.splitlines() if line.startswith(("| false |", "| true |"))]
    assert [line.rsplit("|", 2)[-2].strip() for line in table] == ["ok, best", "FAILED"]  # the Markdown, on stdout
    assert "| nsys=true | FAILED | --nsys needs Nsight Systems" in result.stdout
    assert "1 of 2 sweep cell(s) failed or hung (first: nsys=true:" in result.stderr
