"""Every shell block of README.md and docs/ runs as written, or says why not (issue 46: pages that
were not true; "every command of README and docs/ run as written").

A block runs with bash in a fresh folder holding ``samples/`` (the repository's), with ``tracekit``
on the PATH running this checkout; it must exit 0. A block that cannot run here says so on the line
before it, ``<!-- not run: REASON -->`` (a GPU, Nsight Systems, a cluster, a capture of many ranks
that an e2e test runs in its own form), and that reason is checked to be there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"(?:^<!-- not run: (?P<why>[^>]+?) -->\n)?^```(?:bash|sh)\n(?P<body>.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str, str | None]]:
    """Each shell block: its page and number, its text, and why it is not run (None: it runs)."""
    found = []
    for page in PAGES:
        for n, m in enumerate(_BLOCK.finditer(page.read_text()), 1):
            found.append((f"{page.relative_to(ROOT)}#{n}", m.group("body"), m.group("why")))
    return found


def test_every_block_is_run_or_says_why_not() -> None:
    every = blocks()
    assert len(every) >= 12
    run = [name for name, _, why in every if why is None]
    assert len(run) >= 2, run  # the pages' commands on the samples
    assert all(len(why) > 10 for _, _, why in every if why is not None)


@pytest.mark.parametrize(("name", "body"), [(n, b) for n, b, why in blocks() if why is None])
def test_the_block_runs_as_written(name: str, body: str, tmp_path: Path) -> None:
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    shims = tmp_path / ".bin"
    shims.mkdir()
    (shims / "tracekit").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tracekit "$@"\n')
    (shims / "tracekit").chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", body],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"
