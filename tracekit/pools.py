"""Pools of worker processes that never outlive what started them.

Every process pool of tracekit (the local executor's, the parallel parse, the chunked Kineto
decode) is a :class:`WorkerPool`: spawned processes that each watch their parent and end within
:data:`WATCH_S` of its death (killed with SIGKILL, or by SIGTERM's default action: no ``finally``
runs there), and a pool that, left by an interrupt (Ctrl-C, or SIGTERM turned into one by the
command line), kills its processes instead of waiting for the items they are working on. Before,
a SIGTERM to ``tracekit analyze`` left its workers running for minutes, holding the caller's pipes.

:func:`forked_map` is the other way to use more cores: short forked children that inherit what
they read (the re-timing's what-ifs side by side), each killed if it stalls.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["FORKS", "WATCH_S", "WorkerPool", "forked_map", "interrupted"]

#: How often a worker looks whether its parent is still there (s).
WATCH_S: Final = 0.5
#: Whether :func:`forked_map` forks (Linux's ``os.fork``), else it runs every item here.
FORKS: Final = sys.platform == "linux" and hasattr(os, "fork")

T = TypeVar("T")
R = TypeVar("R")


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


def forked_map(fn: Callable[[T], R], items: list[T], *, patience: float = 4.0, min_wait_s: float = 10.0) -> list[R]:
    """``[fn(item) for item in items]``: the first item here, each other one in a forked child.

    Fork, not spawn: a child inherits what ``fn`` reads (the re-timing's plans: tens of MB)
    without a copy, and sends only its result back, pickled, through a pipe. It runs with the
    cyclic garbage collector off (freeing another library's objects could take a lock a thread
    held at the fork) and leaves with ``os._exit``; ``fn`` must use neither threads nor polars.
    A child that fails, or has not answered by ``patience`` times what the first item took here
    (``min_wait_s`` at least), is killed and its item runs here: the results never depend on a
    child. Without :data:`FORKS`, every item runs here, in turn.
    """
    if len(items) < 2 or not FORKS:
        return [fn(item) for item in items]
    children = [_fork(fn, item) for item in items[1:]]
    clock = time.monotonic()
    out = [fn(items[0])]
    deadline = time.monotonic() + max(min_wait_s, patience * (time.monotonic() - clock))
    for child, item in zip(children, items[1:], strict=True):
        answer = _answer(child, deadline)
        out.append(answer[0] if answer is not None else fn(item))
    return out


def _fork(fn: Callable[[T], R], item: T) -> tuple[int, int] | None:
    """A child computing ``fn(item)``: (its pid, the pipe it answers on), or None when none started."""
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
            view = memoryview(pickle.dumps(fn(item)))
            while view:
                view = view[os.write(write, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _answer(child: tuple[int, int] | None, deadline: float) -> tuple[Any] | None:
    """The child's result (as a 1-tuple), or None: it failed, or is killed at ``deadline``."""
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
                pid = 0
                return (pickle.loads(b"".join(chunks)),) if os.waitstatus_to_exitcode(status) == 0 else None
            chunks.append(chunk)
        return None
    except (OSError, pickle.UnpicklingError, EOFError):
        return None
    finally:
        os.close(read)
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
