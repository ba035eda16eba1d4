"""Shared fixtures: the real traces in ../shared/traces, and synthetic trace builders."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from tests.truth.corpus import Case
    from tracekit.analyzers.analysis import Outcome

#: Under pytest-xdist each worker is one of as many busy processes as there are cores, and
#: polars' pool of a thread a core in each of them spins against the others: one corpus run
#: made 780k involuntary context switches in 13 s, with a third of its CPU time in the kernel
#: (POLARS_MAX_THREADS=1: 430, and 40% less kernel time). Each worker gets its share of the
#: cores (before polars starts its pool; the commands the tests run inherit it).
if os.environ.get("PYTEST_XDIST_WORKER") and "POLARS_MAX_THREADS" not in os.environ:
    _WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    os.environ["POLARS_MAX_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))


def requires(module: str, reason: str) -> None:
    """At a test module's top: skip the module where ``module`` is not installed, without importing
    it, for modules whose tests import it only in the processes they start (``importorskip``
    would import lightning, 4 s of CPU, and transformers, 1 s, in each xdist worker and in the
    controller, only to collect)."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(reason, allow_module_level=True)


SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
SAMPLES = Path(__file__).resolve().parents[1] / "samples"

_ANALYSES: dict[tuple[Path, ...], Outcome] = {}


#: Under pytest-xdist, a folder the workers share for the outcomes of :func:`analysis_of` (made
#: by the controller for the session, see :func:`pytest_configure`).
SHARED_OUTCOMES = "TRACEKIT_TEST_OUTCOMES"


def analysis_of(paths: Sequence[Path]) -> Outcome:
    """``run_analysis(load_run(paths))`` (no cache), once per session for the same paths.

    The real traces and the samples are analyzed by several modules (tests/truth, the ledger,
    the verdict), each checking other numbers of the same outcome: analyzed once, they cost
    their analysis once. Under pytest-xdist once in all: a worker that needs an outcome another
    has pickled reads it (their tests are shared among the workers, so each worker analyzed
    nearly all 56, 57 s of CPU). An outcome is not to be changed by a test.
    """
    key = tuple(paths)
    if key not in _ANALYSES:
        shared = os.environ.get(SHARED_OUTCOMES)
        saved = Path(shared, hashlib.sha256(repr(key).encode()).hexdigest()) if shared else None
        if saved is not None and saved.is_file():
            _ANALYSES[key] = pickle.loads(saved.read_bytes())
        else:
            from tracekit.analyzers import run_analysis
            from tracekit.readers import load_run

            _ANALYSES[key] = run_analysis(load_run(list(paths), use_cache=False))
            if saved is not None:  # whole or not at all: another worker may be reading
                partial = saved.with_name(f"{saved.name}.{os.getpid()}")
                partial.write_bytes(pickle.dumps(_ANALYSES[key], protocol=pickle.HIGHEST_PROTOCOL))
                partial.replace(saved)
    return _ANALYSES[key]


def pytest_configure(config: pytest.Config) -> None:
    """The controller of xdist's workers makes the folder of shared outcomes (they inherit its
    environment); a run without workers keeps its outcomes in memory."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    folder = tempfile.mkdtemp(prefix="tracekit-test-outcomes-")
    os.environ[SHARED_OUTCOMES] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


#: What a launcher sets for its ranks: a test that leaves one in this process's environment makes
#: every later launch see a rank already made (Lightning then starts no second process and waits
#: for it in ``init_process_group``: the hang of the Lightning e2e test after the runner's tests).
LAUNCHER_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "ACCELERATE_BYPASS_DEVICE_MAP",
)


#: The xdist group of every e2e test.
E2E_GROUP = "e2e"
_BEFORE = pytest.StashKey[dict[str, str | None]]()


def _launcher_environment() -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in LAUNCHER_VARIABLES}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_BEFORE] = _launcher_environment()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """After every fixture is finalized (``monkeypatch`` has undone its changes): fail the test
    that changed a launcher variable of this process's environment, and put it back."""
    result = yield
    before, after = item.stash.get(_BEFORE, {}), _launcher_environment()
    if before and after != before:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        changed = sorted(k for k in LAUNCHER_VARIABLES if after[k] != before[k])
        pytest.fail(f"the test left launcher variables in the environment: {', '.join(changed)}")
    return result


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The e2e tests start processes of their own (gloo ranks, a Dask cluster, a browser): under
    pytest-xdist (``-n auto --dist loadgroup``, the default) those whose outcome depends on
    timing (a verdict or an interval read from captured step times, a tight bound on how long a
    command takes) or on what else runs (a browser's layout, a scan for stray processes) run one
    at a time on one worker, while the other workers take the rest of the suite. Those marked
    ``concurrent`` as well (the robustness corpus's 500 runs of one command; captures checked for
    what they record, not for how fast; failures, timeouts, integrations, readers) are shared
    among the workers like any other test: in one queue behind the timed captures they made the
    longest worker's share, and CI's wall time, minutes longer than the rest (on 2 cores the
    one-at-a-time group held about 20 of the tests' 20.4 minutes; with these shared, the tests took
    18.6 minutes, the group about 10 of them: both cores are busy now, and less work is what
    shortens CI further)."""
    for item in items:
        if item.get_closest_marker("e2e") is not None and item.get_closest_marker("concurrent") is None:
            item.add_marker(pytest.mark.xdist_group(E2E_GROUP))


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


def case_paths(case: Case, request: pytest.FixtureRequest) -> list[Path]:
    """The paths of a truth-corpus case (``tests.truth.corpus.Case``): the shared traces through
    their fixture (which fails in CI when ../shared is missing), the samples from the repository."""
    base = request.getfixturevalue("shared_traces") if case.root == "shared" else SAMPLES / "captures"
    return [base / p for p in case.paths]
