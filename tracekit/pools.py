"""Pools of worker processes that never outlive what started them.

Every process pool of tracekit (the local executor's, the parallel parse, the chunked Kineto
decode) is a :class:`WorkerPool`: spawned processes that each watch their parent and end within
:data:`WATCH_S` of its death (killed with SIGKILL, or by SIGTERM's default action: no ``finally``
runs there), and a pool that, left by an interrupt (Ctrl-C, or SIGTERM turned into one by the
command line), kills its processes instead of waiting for the items they are working on. Before,
a SIGTERM to ``tracekit analyze`` left its workers running for minutes, holding the caller's pipes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["WATCH_S", "WorkerPool", "interrupted"]

#: How often a worker looks whether its parent is still there (s).
WATCH_S: Final = 0.5


def interrupted() -> bool:
    """Whether the exception being handled now is an interrupt (not an error): inside a
    ``finally`` or ``except`` block, a :class:`KeyboardInterrupt` or :class:`SystemExit`."""
    exc = sys.exc_info()[1]
    return exc is not None and not isinstance(exc, Exception)


class WorkerPool(ProcessPoolExecutor):
    """A :class:`ProcessPoolExecutor` of spawned processes that end with their parent, and
    are killed (not waited for) when the pool is left by an interrupt."""

    def __init__(
        self, max_workers: int, *, initializer: Callable[..., object] | None = None, initargs: tuple[Any, ...] = ()
    ) -> None:
        super().__init__(
            max_workers=max_workers,
            mp_context=get_context("spawn"),
            initializer=_start_worker,
            initargs=(os.getpid(), initializer, initargs),
        )

    def terminate(self) -> None:
        """Kill the pool's processes now, and drop the items not yet started."""
        processes = dict(getattr(self, "_processes", None) or {})  # CPython's pid -> Process map
        for process in processes.values():
            process.kill()
        self.shutdown(wait=False, cancel_futures=True)
        for process in processes.values():
            process.join(timeout=5)

    def close(self) -> None:
        """Shut the pool down after the items started, dropping the others; at once when called
        while an interrupt is handled (see :func:`interrupted`)."""
        if interrupted():
            self.terminate()
        else:
            self.shutdown(wait=True, cancel_futures=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if exc is not None and not isinstance(exc, Exception):
            self.terminate()
            return False
        return super().__exit__(exc_type, exc, tb)


def _start_worker(parent: int, initializer: Callable[..., object] | None, initargs: tuple[Any, ...]) -> None:
    threading.Thread(target=_watch, args=(parent,), name="tracekit-parent-watch", daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


def _watch(parent: int) -> None:
    """End this worker when ``parent`` is gone (this process was handed to another parent)."""
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    os._exit(1)
