"""``--timeout`` bounds the user's code that runs in the tracekit process: ``audit-params``' forward and
backward on one batch, and importing the workload's module (an endless ``__getitem__`` ran until
interrupted, issue 33)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from tests.cli.process import run_tracekit

pytest.importorskip("torch")

HANGING = """
import subprocess, sys
from tracekit.capture.workloads import mlp

class Endless:
    def __len__(self):
        return 64

    def __getitem__(self, index):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # tk-deadline-orphan"])
        while True:
            pass


def factory(ctx, **kwargs):
    workload = mlp(ctx, **kwargs)
    workload.dataset = Endless()
    return workload
"""


@pytest.fixture
def hanging(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "hangwl.py").write_text(HANGING)
    (tmp_path / "slowimport.py").write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    return {"PYTHONPATH": str(tmp_path)}


@pytest.mark.e2e  # waits its whole 20 s limit (shorter, and importing torch under load could use it up)
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_audit_params_stops_an_endless_getitem_at_the_timeout(hanging: dict[str, str], tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_tracekit(
        "audit-params", "--workload=hangwl:factory", "--timeout=20", cwd=tmp_path, env=hanging, timeout=120
    )
    assert time.monotonic() - started < 110
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("tracekit: error: audit-params timed out after 20 s (the timeout setting): ")
    assert "still in the dataset's __getitem__ (hangwl.py:" in line
    assert not _processes_with("tk-deadline-orphan")  # the process __getitem__ started was killed


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def test_importing_a_workload_that_never_ends_is_bounded(hanging: dict[str, str], tmp_path: Path) -> None:
    result = run_tracekit(
        "capture",
        "--workload=slowimport:factory",
        "--timeout=3",
        f"--out_dir={tmp_path / 'out'}",
        env=hanging,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert "capture timed out after 3 s (the timeout setting): still in <module> (slowimport.py:3)" in line
