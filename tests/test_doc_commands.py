"""Every command block of README.md and docs/ runs as written, or says why it cannot (issue 46:
pages that were not true; "every command of README and docs/ run as written").

``.ci/doc_commands.py`` runs every block in a fresh clone with a new venv; CI runs it beside the
tests. Here: every block either runs there or says, on the line before it, a reason that is one
of the few a block may have (a GPU, Nsight Systems, a cluster, CI itself, a sketch whose model is
the reader's); and the blocks that only read the samples run here too, with this checkout, so a
page that breaks is found in the fast lane.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_commands", ROOT / ".ci" / "doc_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # NamedTuple's class needs its module registered
    spec.loader.exec_module(module)
    return module


DOCS = _script()
#: What may keep a block from running in CI: hardware, a cluster, CI itself, or code that is the reader's.
ALLOWED = re.compile(r"needs a GPU|needs Nsight Systems|cluster|it is CI itself|a sketch|a fragment")
#: A block that only reads the samples with tracekit: it starts no ranks and installs nothing.
_READS_SAMPLES = re.compile(r"samples/captures")
_STARTS_OR_INSTALLS = re.compile(r"pip install|\b(capture|sweep|doctor|dataloader|audit-params)\b|--executor")


def test_every_block_runs_or_says_a_reason_a_block_may_have() -> None:
    every = DOCS.blocks()
    assert len(every) >= 20
    for block in every:
        if block.why_not is not None:
            assert ALLOWED.search(block.why_not), f"{block.name}: {block.why_not!r} is no reason to leave it out of CI"
    run = [b.name for b in every if b.why_not is None]
    assert len(run) >= 12, run
    # the quick start runs as written in the fresh venv
    assert DOCS.blocks()[0].name == "README.md#1" and DOCS.blocks()[0].why_not is None


def test_ci_runs_the_script() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # in the background beside the lint and the tests, its output to a file printed after theirs
    # (after the variables it is given, if any)
    commands = [re.sub(r"^(\w+=\S*\s+)*", "", line.split("#")[0].strip()) for line in ci]
    assert any(c.startswith("python3 .ci/doc_commands.py >") for c in commands)
    assert 'wait "$docs" || status=1' in ci


def test_a_failing_block_fails_the_run(tmp_path: Path) -> None:
    """The script's verdict on one block: bash with -e and pipefail, so a failure mid-block counts."""
    block = DOCS.Block("x.md#1", "true\nfalse | cat\necho after\n", None)
    done = subprocess.run(block.command(), capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode != 0 and "after" not in done.stdout


def _offline() -> list[tuple[str, str, bool]]:
    return [
        (b.name, b.body, b.python)
        for b in DOCS.blocks()
        if b.why_not is None and _READS_SAMPLES.search(b.body) and not _STARTS_OR_INSTALLS.search(b.body)
    ]


def test_the_offline_blocks_are_found() -> None:
    names = {name for name, _, _ in _offline()}
    assert {"docs/compare.md#1", "docs/formats.md#1", "docs/annotated-trace.md#2"} <= names


@pytest.mark.parametrize(("name", "body", "python"), _offline(), ids=[n for n, _, _ in _offline()])
def test_a_block_on_the_samples_runs_as_written(name: str, body: str, python: bool, tmp_path: Path) -> None:
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    shims = tmp_path / ".bin"
    shims.mkdir()
    (shims / "tracekit").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tracekit "$@"\n')
    (shims / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    command = DOCS.Block(name, body, None, python).command()
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"
