"""The what-ifs of one run side by side: :func:`~tracekit.analyzers.retime.simulate_each` on
more than one core.

Each scenario is re-timed on its own; scenarios share nothing but the plans. So forked
children re-time some of them while this process re-times the rest, and each child sends its
gains back through a pipe (a few floats a rank and scenario). Fork, not spawn: a child inherits
the plans (tens of MB) without a copy. A child runs numpy and Python only (no polars, no
threads), with the cyclic garbage collector off (freeing another library's objects could take
a lock some thread held at the fork), and leaves with ``os._exit``.

On one core, for one scenario, or where ``os.fork`` is not Linux's, the scenarios run here in
turn. A child that fails, or has not answered by :data:`PATIENCE` times this process's own
share of the work (at least :data:`MIN_WAIT_S`), is stopped and its scenarios run here: the
result never depends on a child.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import sys
import time
import warnings
from typing import TYPE_CHECKING, Final, TypeVar

from tracekit.analyzers import retime

if TYPE_CHECKING:
    from tracekit.analyzers.retime_plan import RankPlan, Scenario

K = TypeVar("K")

#: A child may take this many times what this process's own scenarios took.
PATIENCE: Final = 4.0
MIN_WAIT_S: Final = 10.0
FORKS: Final = sys.platform == "linux" and hasattr(os, "fork")


def simulate_each(plans: list[RankPlan], scenarios: dict[K, Scenario], *, jobs: int = 1) -> dict[K, dict[int, float]]:
    """:func:`retime.simulate_each` with the scenarios split over ``jobs`` processes."""
    keys = list(scenarios)
    n = min(jobs, len(keys))
    if n < 2 or not FORKS:
        return retime.simulate_each(plans, scenarios)
    groups = [keys[i::n] for i in range(n)]
    children = [(_fork(plans, {k: scenarios[k] for k in group}), group) for group in groups[1:]]
    clock = time.monotonic()
    out: dict[K, dict[int, float]] = retime.simulate_each(plans, {k: scenarios[k] for k in groups[0]})
    deadline = time.monotonic() + max(MIN_WAIT_S, PATIENCE * (time.monotonic() - clock))
    for child, group in children:
        answer: dict[K, dict[int, float]] | None = _answer(child, deadline)
        out.update(answer if answer is not None else retime.simulate_each(plans, {k: scenarios[k] for k in group}))
    return {k: out[k] for k in keys}


def _fork(plans: list[RankPlan], scenarios: dict[K, Scenario]) -> tuple[int, int] | None:
    """A child re-timing ``scenarios``: (its pid, the pipe it answers on), or None when none started."""
    try:
        read, write = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: "multi-threaded, use of fork()"
            pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child
        code = 1
        try:
            gc.disable()
            os.close(read)
            data = pickle.dumps(retime.simulate_each(plans, scenarios))
            view = memoryview(data)
            while view:
                view = view[os.write(write, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _answer(child: tuple[int, int] | None, deadline: float) -> dict[K, dict[int, float]] | None:
    """The child's gains, or None (it failed, or is stopped at ``deadline``)."""
    if child is None:
        return None
    pid, read = child
    chunks: list[bytes] = []
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                break
            chunk = os.read(read, 1 << 20)
            if not chunk:  # the child closed the pipe: it is done
                _, status = os.waitpid(pid, 0)
                if os.waitstatus_to_exitcode(status) != 0:
                    return None
                answer: dict[K, dict[int, float]] = pickle.loads(b"".join(chunks))
                return answer
            chunks.append(chunk)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return None
    except (OSError, pickle.UnpicklingError, EOFError):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return None
    finally:
        os.close(read)
