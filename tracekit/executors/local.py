"""The local executor: this process, or a pool of processes on this machine (``--jobs``)."""

from __future__ import annotations

import os
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from tracekit.executors import TaskFailed

T = TypeVar("T")
R = TypeVar("R")


class LocalExecutor:
    """Items run in ``jobs`` spawned processes (default: the number of cores), or in this
    process when ``jobs`` is 1 or there is one item. The pool is started on the first map of
    several items and kept until :meth:`close`. An item whose process died (out of memory,
    killed) runs again in this process, so every item gives its function's own result."""

    name = "local"

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None

    @property
    def workers(self) -> int:
        """The processes that run items at once."""
        return self.jobs

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailed]]:
        """``fn`` over ``items``, each result with its item's index as it completes."""
        if self.jobs <= 1 or len(items) <= 1:
            for i, item in enumerate(items):
                yield i, fn(item)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(items)), mp_context=get_context("spawn"))
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

    def close(self) -> None:
        """Stop the pool's processes."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
