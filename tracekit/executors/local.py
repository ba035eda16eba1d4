"""The local executor: this process, or a pool of processes on this machine (``--jobs``)."""

from __future__ import annotations

import importlib
import os
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from tracekit.pools import WorkerPool
from tracekit.sizes import data_bytes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from tracekit.executors import TaskFailed

T = TypeVar("T")
R = TypeVar("R")


class LocalExecutor:
    """Items run ``jobs`` at a time (default: the number of cores): in this process and in
    ``jobs - 1`` spawned processes, each taking the next item when done with one (this process
    would otherwise wait, holding its imports while a process more holds its own: 80 MB of a
    run's peak). The pool is started on the first map of several items and kept until
    :meth:`close`, or, for an executor of ``single_use`` (one analysis), until its map is done
    (:meth:`rest`). An item whose process died (out of memory, killed) runs again in this
    process, so every item gives its function's own result."""

    name = "local"

    def __init__(self, jobs: int | None = None, *, single_use: bool = False) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.single_use = single_use
        self._pool: WorkerPool | None = None

    @property
    def workers(self) -> int:
        """The processes that run items at once."""
        return self.jobs

    @property
    def elsewhere(self) -> bool:
        """No: the processes share this machine's cores."""
        return False

    def start(self, preload: str | None = None) -> None:
        """Start the pool's processes now, each importing the module ``preload``, so that they
        are ready when the first items come (while this process goes on importing what it needs)."""
        if self.jobs <= 1 or self._pool is not None:
            return
        self._pool = WorkerPool(self.jobs - 1, initializer=_import, initargs=(preload,))
        for _ in range(self.jobs - 1):  # a process is spawned for each item that finds none idle
            self._pool.submit(int)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailed]]:
        """``fn`` over ``items``, each result with its item's index as it completes."""
        if self.jobs <= 1 or len(items) <= 1:
            for i, item in enumerate(items):
                yield i, fn(item)
            return
        others = min(self.jobs, len(items)) - 1  # this process is one of the jobs
        if self._pool is None:
            self._pool = WorkerPool(others)
        shared = _Shared(self._pool, fn, items)
        for _ in range(others):
            threading.Thread(target=shared.feed, name="tracekit-pool-feed", daemon=True).start()
        received = 0
        retry: list[int] = []
        try:
            while received + len(retry) < len(items):
                if shared.results.empty() and (mine := shared.take()) is not None:
                    received += 1
                    yield mine, fn(items[mine])
                    continue
                j, ran, result = shared.results.get()  # a result of the pool's (none left to take: wait)
                if ran:
                    received += 1
                    yield j, result
                else:
                    retry.append(j)
        finally:
            shared.stop.set()
        if retry:
            self.close()  # a pool whose process died takes no more work
            for i in sorted(retry):
                yield i, fn(items[i])

    def hold(self, items: Sequence[T]) -> list[Any]:
        """The items themselves: each map sends its items to the processes anew."""
        return list(items)

    def keep(self, fn: Callable[[T], R], items: Sequence[T]) -> list[Any]:
        """The results themselves (a :class:`TaskFailed` for an item that failed): the
        processes keep nothing from one map to the next."""
        got = dict(self.map(fn, items))
        return [got[i] for i in range(len(items))]

    def places(self, handles: Sequence[Any]) -> list[str | None]:
        """None each: what this executor keeps is here, sent to its processes anew each map."""
        return [None] * len(handles)

    def rest(self) -> None:
        """Stop the pool's processes if this executor is of single use: the map is done, and
        each process keeps what it touched (for 8 ranks x 125 MB, 160 MB each: a third of the
        whole tree's memory while the reduce runs). Another map starts them again."""
        if self.single_use:
            self.close()

    def close(self) -> None:
        """Stop the pool's processes: after their items, or at once when called on an interrupt."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class _Shared:
    """The items of one map, taken one at a time by this process and by a thread per pool
    process (:meth:`feed`), whichever is free first; the pool's results are queued."""

    def __init__(self, pool: WorkerPool, fn: Callable[[T], R], items: Sequence[T]) -> None:
        self.pool, self.fn, self.items = pool, fn, items
        self._next = 0
        self._lock = threading.Lock()
        self.stop = threading.Event()
        #: (index, whether it ran, result): an item not run (its process died) is run again here
        self.results: queue.SimpleQueue[tuple[int, bool, Any]] = queue.SimpleQueue()

    def take(self) -> int | None:
        """The next item not yet taken, if any (None once stopped)."""
        with self._lock:
            if self._next >= len(self.items) or self.stop.is_set():
                return None
            self._next += 1
            return self._next - 1

    def feed(self) -> None:
        """Send the pool one item at a time until none is left; after a failure, none more
        (a broken pool fails every item sent to it)."""
        while (i := self.take()) is not None:
            try:
                result = self.pool.submit(self.fn, self.items[i]).result()
            except BaseException:  # its process died, or the pool was stopped
                self.results.put((i, False, None))
                return
            self.results.put((i, True, result))


def _import(module: str | None) -> None:
    if module is not None:
        importlib.import_module(module)


#: Inputs of this many bytes of JSON or more are read by a pool of processes
#: (:data:`tracekit.readers.parse.PARALLEL_MIN_BYTES`, which a test keeps equal).
POOL_MIN_BYTES: Final = 64 * 1024 * 1024
#: The file names that may hold that much.
_TRACE_SUFFIXES: Final = (".json", ".json.gz", ".sqlite", ".nsys-rep")


def started(paths: Sequence[str | Path], *, jobs: int | None, preload: str) -> LocalExecutor | None:
    """A local executor whose processes start now, importing ``preload``, when ``paths`` (files,
    or folders searched recursively) hold enough to be read by a pool of them (two files or
    more, and :data:`POOL_MIN_BYTES`); else None.

    The command line starts them before importing the analyses, which the processes import
    meanwhile: on a few large traces that is most of the time before the first is read. The
    executor is of single use: its processes stop once the analysis's map is done.
    """
    executor = LocalExecutor(jobs, single_use=True)
    if executor.jobs <= 1 or not _at_least(paths, POOL_MIN_BYTES, files=2):
        return None
    executor.start(preload)
    return executor


def _at_least(paths: Sequence[str | Path], size: int, *, files: int) -> bool:
    """Whether the traces at ``paths`` (by their names) hold ``size`` bytes of JSON or more, in
    ``files`` files or more (a pool reads files, not parts of one)."""
    total = count = 0
    for raw in paths:
        path = Path(raw)
        found = (p for p in path.rglob("*") if p.name.lower().endswith(_TRACE_SUFFIXES)) if path.is_dir() else [path]
        for file in found:
            total += data_bytes(file)
            count += 1
            if total >= size and count >= files:
                return True
    return False
