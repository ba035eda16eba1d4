"""benchmarks/worker_tasks.py: the CPU inside the functions a task names, counted where they run."""

from __future__ import annotations

import sys
import time

import pytest

from benchmarks import worker_tasks

CALLS: list[int] = []


def busy(n: int) -> int:
    """A task: some CPU (at least 20 ms of it), and its argument back."""
    start = time.thread_time()
    while time.thread_time() - start < 0.02:
        pass
    CALLS.append(n)
    return n


def test_the_functions_tasks_name_are_timed_once_however_often_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    module, original = sys.modules[__name__], busy  # ``busy`` read after is the module's: the timed one
    monkeypatch.setattr(worker_tasks, "WORKER_TASKS", ((__name__, "busy"),))
    monkeypatch.setattr(module, "busy", original)  # put back as it was after the test
    monkeypatch.setitem(worker_tasks._TASKS_CPU, "s", 0.0)
    assert worker_tasks.time_worker_tasks() and worker_tasks.time_worker_tasks()
    before = worker_tasks.worker_tasks_cpu()
    # looked up by name, as a worker unpickling a task does: the timed function, which gives its result
    assert module.busy(7) == 7 and CALLS[-1] == 7
    spent = worker_tasks.worker_tasks_cpu() - before
    assert 0.02 <= spent < 1.0  # one call counted once, not once per time asked
    assert module.busy.__wrapped__ is original
