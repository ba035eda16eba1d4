"""Shared fixtures: the real traces in ../shared/traces, and synthetic trace builders."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.analyzers.analysis import Outcome

SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
SAMPLES = Path(__file__).resolve().parents[1] / "samples"

_ANALYSES: dict[tuple[Path, ...], Outcome] = {}


def analysis_of(paths: Sequence[Path]) -> Outcome:
    """``run_analysis(load_run(paths))`` (no cache), once per session for the same paths.

    The real traces and the samples are analyzed by several modules (tests/truth, the ledger,
    the verdict), each checking other numbers of the same outcome: analyzed once, they cost
    their analysis once. An outcome is not to be changed by a test.
    """
    key = tuple(paths)
    if key not in _ANALYSES:
        from tracekit.analyzers import run_analysis
        from tracekit.readers import load_run

        _ANALYSES[key] = run_analysis(load_run(list(paths), use_cache=False))
    return _ANALYSES[key]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tracekit's cache folder for one test (never ~/.cache), also for the commands it runs."""
    folder = tmp_path_factory.mktemp("tracekit-cache")
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """../shared/traces; fails in CI (CI=true) when missing, skips elsewhere."""
    if not SHARED_TRACES.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{SHARED_TRACES} is missing: CI must run with ../shared beside the clone")
        pytest.skip(f"{SHARED_TRACES} not present (real traces live beside the repository)")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def kineto_dir(shared_traces: Path) -> Path:
    """../shared/traces/kineto."""
    return shared_traces / "kineto"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite the golden report files")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether to rewrite golden files instead of comparing (--update-golden)."""
    return bool(request.config.getoption("--update-golden"))
