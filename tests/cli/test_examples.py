"""The examples in ``examples/`` run as a user runs them: the Python API as a script, the GitHub
Actions workflow's steps as its runner would (install lines checked, not run)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.cli.process import ROOT
from tests.conftest import SAMPLES
from tracekit.results.io import load_analysis

if TYPE_CHECKING:
    from pathlib import Path

EXAMPLES = ROOT / "examples"


@pytest.mark.e2e  # starts a local Dask cluster
def test_the_python_api_example_runs_as_a_script(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    script = EXAMPLES / "python_api.py"
    result = subprocess.run(
        [sys.executable, script, SAMPLES / "captures" / "straggler", SAMPLES / "captures" / "healthy", tmp_path],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,  # not the checkout: the script imports tracekit as installed
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    saved = load_analysis(tmp_path / "report.json")
    assert saved.verdict.primary is not None
    assert result.stdout.splitlines()[0].startswith(str(saved.verdict.primary.bound))
    assert "\n## tracekit comparison: Step time A " in result.stdout  # the Markdown of compare_paths
