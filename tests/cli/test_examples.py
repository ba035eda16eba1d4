"""The examples in ``examples/`` run as a user runs them: the Python API as a script, the GitHub
Actions workflow's steps as its runner would (install lines checked, not run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from tests.cli.process import ROOT
from tests.conftest import SAMPLES
from tracekit.results.vocab import BoundKind

if TYPE_CHECKING:
    from pathlib import Path

EXAMPLES = ROOT / "examples"


def python_api(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python3 examples/python_api.py ARGS``, run from ``cwd``."""
    return subprocess.run(
        [sys.executable, EXAMPLES / "python_api.py", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,  # not the checkout: the script imports tracekit as installed
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.e2e  # starts a local Dask cluster
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_the_python_api_example_runs_as_a_script(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    # as docs/python-api.md runs it: bare, on the samples (its analysis saved and loaded inside)
    result = python_api(cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    bound, share = result.stdout.splitlines()[0].split()
    assert bound in {b.value for b in BoundKind} and 0 < float(share) <= 100
    assert "\n## tracekit comparison: Step time A " in result.stdout  # the Markdown of compare_paths


def test_the_python_api_example_as_its_page_runs_it_and_on_a_missing_folder(tmp_path: Path) -> None:
    # docs/python-api.md runs it bare: the samples by default (the usage only for a wrong count)
    result = python_api("only-one", cwd=tmp_path)
    assert result.returncode == 1 and "python examples/python_api.py [TRACES BASELINE [WORK_DIR]]" in result.stderr
    result = python_api(tmp_path / "no-such-run", SAMPLES / "captures" / "healthy", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().startswith("python_api.py: ") and len(result.stderr.strip().splitlines()) == 1
    assert "no-such-run" in result.stderr


WORKFLOW = EXAMPLES / "github-actions" / "tracekit.yml"
#: Where the workflow installs tracekit from; the test installs (dry run) this checkout instead.
REPOSITORY = "git+https://github.com/OWNER/tracekit"
INSTALL, BASE = "Install CPU torch and tracekit", "Check out the base branch beside this one"
PROFILE, COMPARE = "Profile the base and this branch, interleaved", "Compare with the base"
#: What the user's perf/cfg.json changes in the healthy sample's config: 2 gloo ranks, few steps.
SMALLER = {"nproc": 2, "warmup_steps": 1, "measured_steps": 3, "profiler": {"wait": 0, "warmup": 1, "active": 2}}


def workflow_steps() -> dict[str, dict[str, Any]]:
    """The steps of the workflow's job, by name (or by the action they use)."""
    yaml = pytest.importorskip("yaml")
    document = yaml.safe_load(WORKFLOW.read_text())
    (job,) = document["jobs"].values()
    return {step.get("name") or step["uses"]: step for step in job["steps"]}


def bash(script: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``script`` as GitHub Actions runs a ``run:`` step (``shell: bash``)."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
        env=env,
    )


def test_the_workflow_installs_cpu_torch_then_tracekit_and_gates(tmp_path: Path) -> None:
    steps = workflow_steps()
    assert list(steps)[:2] == ["actions/checkout@v4", "actions/setup-python@v5"]
    torch_line, project_line = steps[INSTALL]["run"].strip().splitlines()
    assert "torch==2.13.0" in torch_line and "--index-url https://download.pytorch.org/whl/cpu" in torch_line
    assert f'"torch-tracekit[capture] @ {REPOSITORY}"' in project_line
    assert "--fail-if" in steps[COMPARE]["run"] and "perf/b/run$i" in steps[PROFILE]["run"]
    assert steps["actions/checkout@v4"]["with"]["fetch-depth"] == 0  # the base branch is there to check out
    assert steps["actions/upload-artifact@v4"]["if"] == "always()"
    for step in steps.values():
        if "run" in step:
            syntax = subprocess.run(["bash", "-n", "-c", step["run"]], capture_output=True, text=True, check=False)
            assert syntax.returncode == 0, syntax.stderr


@pytest.mark.e2e  # captures on 2 gloo ranks
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_the_workflow_runs_here(tmp_path: Path) -> None:
    """Each ``run:`` step in order, in a git repository holding perf/cfg.json whose base branch is
    ``origin/main``: the install lines as a dry run (torch is here already; tracekit from this
    checkout, which must be torch-tracekit), the base checked out beside it, the interleaved
    captures and the gated comparison through a ``tracekit`` command that runs this checkout."""
    steps = workflow_steps()
    repo, shims = tmp_path / "repo", tmp_path / "bin"
    (repo / "perf").mkdir(parents=True)
    config = json.loads((SAMPLES / "configs" / "healthy.json").read_text()) | SMALLER
    (repo / "perf" / "cfg.json").write_text(json.dumps(config))
    shims.mkdir()
    (shims / "tracekit").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tracekit "$@"\n')
    (shims / "tracekit").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "GITHUB_WORKSPACE": str(repo),
        "GITHUB_BASE_REF": "main",
    }
    git = "git -c user.name=t -c user.email=t@t"
    made = bash(
        f"git init -q -b pr && {git} add perf && {git} commit -qm base && git update-ref refs/remotes/origin/main HEAD",
        cwd=repo,
        env=env,
    )
    assert made.returncode == 0, made.stderr

    source = tmp_path / "tracekit-source"  # what the project is built from (its build writes beside it)
    shutil.copytree(ROOT / "tracekit", source / "tracekit", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for written in steps[INSTALL]["run"].strip().splitlines():
        line = written.replace("python -m pip install", f'"{sys.executable}" -m pip install --dry-run')
        if REPOSITORY in line:
            line = f"{line.replace(REPOSITORY, source.as_uri())} --no-deps"
        done = bash(line, cwd=repo, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        if "torch-tracekit" in line:
            assert "Would install torch-tracekit-" in done.stdout  # the name the requirement gives is the project's

    # The loop as written, over 3 runs a side instead of the workflow's 8 (the fewest a gate on
    # time accepts): the steps are the same, the test shorter.
    profile = steps[PROFILE]["run"]
    assert "for i in 1 2 3 4 5 6 7 8; do" in profile
    for name, run in ((BASE, steps[BASE]["run"]), (PROFILE, profile.replace("1 2 3 4 5 6 7 8;", "1 2 3;"))):
        done = bash(run, cwd=repo, env=env)
        assert done.returncode == 0, name + ": " + done.stderr[-3000:]
    assert (tmp_path / "base" / "perf" / "cfg.json").is_file()
    for side in ("a", "b"):
        runs = sorted(p.name for p in (repo / "perf" / side).iterdir() if not p.name.startswith("."))
        assert runs == ["run1", "run2", "run3"]  # (a capture leaves its lock file, .run1.tracekit-lock)
    compared = bash(steps[COMPARE]["run"], cwd=repo, env=env)
    # The gate ran and decided (0: no regression, 1: a condition broken), never bad input (2).
    # Whether it is right on unchanged code is a rate, not one run's outcome on a loaded machine:
    # benchmarks/compare_gate.py measures it over 20 A/A pairs beside a CPU hog.
    assert compared.returncode in (0, 1), compared.stdout + compared.stderr
    assert compared.returncode == 0 or "regressed" in compared.stdout + compared.stderr
    assert (repo / "perf" / "compare.md").read_text().startswith("## tracekit comparison")
    assert (repo / "perf" / "compare.html").stat().st_size > 0
