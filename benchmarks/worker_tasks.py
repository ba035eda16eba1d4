"""The CPU the workers of a running cluster spend in the reduce's own tasks, apart from Dask's.

``benchmarks.scale_ranks`` measures, for its points apart, all the CPU of the cluster's workers
during the reduce, and, with these, the CPU inside the functions the reduce sends them
(:data:`WORKER_TASKS`). The difference is Dask's own: its event loop, heartbeats, system monitor
and statistical profiler, which run on every worker for as long as the reduce lasts whatever it
asks of them (on 7 workers sharing 2 cores, 0.9 of the 2.9 s of the workers' CPU in the reduce
of 4 ranks of a GB, whose tasks took 2.0). The functions live here, in a module of their own, so
that a task naming them is looked up in this module on the worker, not sent by value (the
benchmark's child runs as ``__main__``, whose functions Dask pickles with a copy of their
globals).
"""

from __future__ import annotations

import functools
import importlib
import time
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

#: What the workers run in the reduce apart (module, function): the groups of ranks made where
#: their tables were kept, their summaries and their rounds (:mod:`tracekit.analyzers.gains_held`),
#: and the rounds of plans held without them (:mod:`tracekit.analyzers.retime_ranks`).
WORKER_TASKS: Final = (
    ("tracekit.analyzers.gains_held", "make_group"),
    ("tracekit.analyzers.gains_held", "group_summary"),
    ("tracekit.analyzers.gains_held", "group_round"),
    ("tracekit.analyzers.retime_ranks", "round_of_group"),
)
#: The CPU seconds of this process's threads inside :data:`WORKER_TASKS`, where
#: :func:`time_worker_tasks` ran (a worker of the cluster apart).
_TASKS_CPU: dict[str, float] = {"s": 0.0}


def time_worker_tasks() -> bool:
    """On a worker (``client.run``): each of :data:`WORKER_TASKS` timed from now on, the thread CPU
    inside it added to :data:`_TASKS_CPU`. A task sent to the worker names its function (module and
    name), which the worker looks up there: the timed one. Timed once, however often asked."""
    for module_name, name in WORKER_TASKS:
        module = importlib.import_module(module_name)
        fn = getattr(module, name)
        if getattr(fn, "_timed", False):
            continue

        @functools.wraps(fn)
        def timed(*args: Any, _fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return _fn(*args, **kwargs)
            finally:
                _TASKS_CPU["s"] += time.thread_time() - start

        timed._timed = True  # type: ignore[attr-defined]
        setattr(module, name, timed)
    return True


def worker_tasks_cpu() -> float:
    """On a worker (``client.run``): the CPU seconds in :data:`WORKER_TASKS` so far."""
    return _TASKS_CPU["s"]
