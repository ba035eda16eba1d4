"""Pools of worker processes that never outlive what started them.

Every process pool of tracekit (the local executor's, the parallel parse, the chunked Kineto
decode) is a :class:`WorkerPool`: spawned processes that each watch their parent and end within
:data:`WATCH_S` of its death (killed with SIGKILL, or by SIGTERM's default action: no ``finally``
runs there), and a pool that, left by an interrupt (Ctrl-C, or SIGTERM turned into one by the
command line), kills its processes instead of waiting for the items they are working on. Before,
a SIGTERM to ``tracekit analyze`` left its workers running for minutes, holding the caller's pipes.

:func:`apart_map` is the other way to use more cores: short-lived children, fresh interpreters
sent what they work on (the re-timing's what-ifs side by side), each killed if it stalls.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["WATCH_S", "WorkerPool", "apart_map", "interrupted"]

#: How often a worker looks whether its parent is still there (s).
WATCH_S: Final = 0.5

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


def apart_map(fn: Callable[[T], R], items: list[T], *, patience: float = 4.0, min_wait_s: float = 10.0) -> list[R]:
    """``[fn(item) for item in items]``: the first item here, each other one in a child of its own.

    A child is a fresh interpreter (``python -c``, this process's ``sys.path`` as its path), sent
    ``(fn, item)`` pickled on its stdin and answering ``fn(item)`` pickled on its stdout: it
    imports only ``fn``'s module (the re-timing: numpy, no polars, 33 MB and 0.13 s) and holds
    only its item. A forked child, as before, held none of its own but was counted again in
    every page of this process it could read (1,024 ranks x 3 MB: 616 MB resident beside this
    process's 683), copied whatever either process wrote (CPython writes every object it
    touches: its reference count), and could not use threads; nor does a spawned
    :class:`WorkerPool` fit, which imports the caller's ``__main__`` again (a script without a
    ``__main__`` guard would run in it).
    ``fn`` must be a module's function, and ``fn`` and the items must pickle. A child that
    fails, cannot start, or has not answered by ``patience`` times what the first item took
    here (``min_wait_s`` at least), is killed and its item runs here: the results never depend
    on a child.
    """
    if len(items) < 2:
        return [fn(item) for item in items]
    children = [_start(fn, item) for item in items[1:]]
    try:
        clock = time.monotonic()
        out = [fn(items[0])]
        deadline = time.monotonic() + max(min_wait_s, patience * (time.monotonic() - clock))
        for child, item in zip(children, items[1:], strict=True):
            answer = _answer(child, deadline)
            out.append(answer[0] if answer is not None else fn(item))
    finally:
        for child in children:
            if child is not None and child.poll() is None:
                child.kill()
                child.wait()
    return out


#: What a child of :func:`apart_map` runs: its parent's pid as its one argument.
_CHILD: Final = "import sys; from tracekit.pools import _child; _child(int(sys.argv[1]))"


def _start(fn: Callable[[T], R], item: T) -> subprocess.Popen[bytes] | None:
    """A child computing ``fn(item)``, its input being written; None when none could start."""
    try:
        data = pickle.dumps((fn, item), protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    except OSError:
        return None
    threading.Thread(target=_feed, args=(child, data), name="tracekit-child-input", daemon=True).start()
    return child


def _feed(child: subprocess.Popen[bytes], data: bytes) -> None:
    """Write ``data`` to the child's stdin and close it (a child that died reads no more)."""
    assert child.stdin is not None
    with contextlib.suppress(OSError):
        child.stdin.write(data)
    with contextlib.suppress(OSError):
        child.stdin.close()


def _child(parent: int) -> None:
    """A child of :func:`apart_map`: ``(fn, item)`` from stdin, ``fn(item)`` to stdout, ending
    within :data:`WATCH_S` of its parent's death."""
    threading.Thread(target=_watch, args=(parent,), name="tracekit-parent-watch", daemon=True).start()
    fn, item = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(fn(item), protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()


def _answer(child: subprocess.Popen[bytes] | None, deadline: float) -> tuple[Any] | None:
    """The child's result (as a 1-tuple), or None: it failed, or is killed at ``deadline``."""
    if child is None or child.stdout is None:
        return None
    read = child.stdout.fileno()
    chunks: list[bytes] = []
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                break
            chunk = os.read(read, 1 << 20)
            if not chunk:  # the child closed its output: it is done
                return (pickle.loads(b"".join(chunks)),) if child.wait() == 0 else None
            chunks.append(chunk)
        return None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    finally:
        child.stdout.close()
        if child.poll() is None:
            child.kill()
            child.wait()
