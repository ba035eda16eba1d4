"""The local executor: this process, or a pool of processes on this machine (``--jobs``)."""

from __future__ import annotations

import importlib
import os
from concurrent.futures import Future, as_completed
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
    """Items run in ``jobs`` spawned processes (default: the number of cores), or in this
    process when ``jobs`` is 1 or there is one item. The pool is started on the first map of
    several items and kept until :meth:`close`, or, for an executor of ``single_use`` (one
    analysis), until its map is done (:meth:`rest`). An item whose process died (out of memory,
    killed) runs again in this process, so every item gives its function's own result."""

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
        self._pool = WorkerPool(self.jobs, initializer=_import, initargs=(preload,))
        for _ in range(self.jobs):  # a process is spawned for each item that finds none idle
            self._pool.submit(int)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailed]]:
        """``fn`` over ``items``, each result with its item's index as it completes."""
        if self.jobs <= 1 or len(items) <= 1:
            for i, item in enumerate(items):
                yield i, fn(item)
            return
        if self._pool is None:
            self._pool = WorkerPool(min(self.jobs, len(items)))
        futures: dict[Future[R], int] = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        retry: list[int] = []
        try:
            for future in as_completed(futures):
                try:
                    result = future.result()
                except Exception:  # its process died (a broken pool fails every item left): run it here
                    retry.append(futures[future])
                    continue
                yield futures[future], result
        finally:
            for future in futures:
                future.cancel()
        if retry:
            self.close()  # a pool whose process died takes no more work
            for i in sorted(retry):
                yield i, fn(items[i])

    def hold(self, items: Sequence[T]) -> list[Any]:
        """The items themselves: each map sends its items to the processes anew."""
        return list(items)

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
