"""SIGTERM and SIGHUP end a command as Ctrl-C does: by an exception, so that ``finally`` blocks run.

Their default action ends the process at once: no ``finally`` runs, and a pool of worker
processes was left behind (for minutes, holding the caller's pipes). Raised as
:class:`Terminated` (a :class:`KeyboardInterrupt`), the pools are killed on the way out
(:class:`tracekit.pools.WorkerPool`) and the command exits with 128 + the signal.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType

_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The command received SIGTERM or SIGHUP."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def termination_raises() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only; a signal
    ignored when this began, as ``nohup`` ignores SIGHUP, stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, _frame: FrameType | None) -> None:
        raise Terminated(signum)

    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
