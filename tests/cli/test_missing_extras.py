"""Without the ``capture`` extra (torch, accelerate), every command that captures says in one line
what to install, exit code 2, before anything starts; ``analyze`` needs none of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.cli.process import run_tracekit
from tests.conftest import SAMPLES

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

#: A ``sitecustomize`` that makes the modules named in $BLOCKED unimportable, here and in every
#: process started from here (the launcher, the ranks), as where they are not installed.
BLOCKER = """
import os, sys

BLOCKED = set(os.environ["BLOCKED"].split(","))


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""

COMMANDS = {
    "capture": ["capture"],
    "capture --ab": ["capture", "--ab", "", "batch_size=8"],
    "sweep": ["sweep", "--grid", "batch_size=8,16"],
    "dataloader": ["dataloader", "--batches", "2"],
    "audit-params": ["audit-params"],
    "doctor": ["doctor"],
}


def without(tmp_path: Path, blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m tracekit ARGS`` where the modules ``blocked`` (comma-separated) are missing."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    return run_tracekit(*args, env={"PYTHONPATH": str(site), "BLOCKED": blocked}, timeout=120)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_capture_command_without_torch_names_the_extra(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    config = SAMPLES / "configs" / "healthy.json"
    args = [*COMMANDS[name], "--config_path", str(config), f"--out_dir={out}"]
    result = without(tmp_path, "torch,accelerate,nvtx", *args)
    command = name.split(maxsplit=1)[0]
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"tracekit: error: tracekit {command} needs torch and accelerate: pip install 'torch-tracekit[capture]' "
        "(install torch first: torch==2.13.0, or the build for your CUDA from pytorch.org)"
    ]
    assert not out.exists()  # nothing started


def test_only_what_is_missing_is_named(tmp_path: Path) -> None:
    result = without(tmp_path, "accelerate", "capture", f"--out_dir={tmp_path / 'out'}")
    assert result.returncode == 2
    expected = "tracekit: error: tracekit capture needs accelerate: pip install 'torch-tracekit[capture]'"
    assert result.stderr.strip() == expected


def test_analyze_needs_no_torch(tmp_path: Path) -> None:
    result = without(tmp_path, "torch,accelerate,nvtx", "analyze", str(SAMPLES / "captures" / "healthy"), "--no-cache")
    assert result.returncode == 0, result.stderr
    assert "Verdict" in result.stdout or "verdict" in result.stdout.lower()
