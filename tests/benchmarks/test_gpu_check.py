"""``benchmarks/gpu_check.sh --cpu``: the GPU check's own smoke test, every check on CPU (e2e).

On a GPU machine the same script checks the CUDA paths; here it proves the script itself:
each check runs its tracekit commands and finds what it looks for (gloo, small sizes, the
probe's OOM by a memory budget), and the results come out as the GPU run's do.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.sh"


def test_every_check_passes_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(SCRIPT), "--cpu", "--out", str(out)], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["slug"] == "cpu"
    results = {c["name"]: c for c in report["checks"]}
    assert set(results) == {
        "healthy",
        "memory",
        "small",
        "sync-ab",
        "gloo2-straggler",
        "sweep",
        "data-bound-pinned",
        "doctor",
    }
    for name, check in results.items():
        assert check["passed"] or check["skipped"], (name, check["failures"])
    assert results["sync-ab"]["facts"]["gate_exit"] == 1
    straggler = results["gloo2-straggler"]
    # skipped (with its reason) only where the steps varied by 5x the delay: nothing to name then
    assert straggler["skipped"] or straggler["facts"]["stragglers"][0]["rank"] == 1
    assert "| healthy: " in (out / "gpu_check.md").read_text()
    with tarfile.open(out / "captures.tar.gz") as tar:
        names = tar.getnames()
    assert "cpu-healthy/rank0.pt.trace.json.gz" in names and "cpu-memory/memory_timeline.rank0.raw.json.gz" in names
    assert "cpu-sync-ab/b/rank0.pt.trace.json.gz" in names and "cpu-gloo2-straggler.analysis.json" in names
    assert len(list(out.iterdir())) <= 8  # what the device tool brings back from $OUT
