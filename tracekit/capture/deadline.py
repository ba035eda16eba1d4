"""A time limit on the user's code that runs in the ``tracekit`` process itself.

``audit-params`` runs the workload's forward and backward in this process, and every command
imports the workload's module here before its ranks start. :func:`deadline` bounds them by the
config's ``timeout``: past it, the code is stopped (SIGALRM raises in the main thread), every
process it started is killed, and the error says where it was, e.g. "still in the dataset's
__getitem__ (data.py:12)". Code stuck in native code that never returns to Python is out of its
reach.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit.capture.ranks import CaptureError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType

__all__ = ["UserCodeTimeout", "deadline", "where"]

_LIBRARY: Final = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python")
_OWN: Final = Path(__file__).resolve().parents[1]


class UserCodeTimeout(CaptureError):
    """The user's code ran past the command's timeout and was stopped."""


def where(frame: FrameType | None) -> str:
    """Where ``frame``'s stack is, in the user's words: the innermost function of the user's own
    files (not tracekit's, the standard library's or an installed package's)."""
    while frame is not None:
        path = frame.f_code.co_filename
        own = Path(path).resolve().is_relative_to(_OWN)
        if not own and not any(part in path for part in _LIBRARY) and not path.startswith("<"):
            name = frame.f_code.co_name
            what = "the dataset's __getitem__" if name == "__getitem__" else name
            return f"in {what} ({Path(path).name}:{frame.f_lineno})"
        frame = frame.f_back
    return "in tracekit or a library it called, not in the workload's own files"


@contextlib.contextmanager
def deadline(command: str, seconds: float | None) -> Iterator[None]:
    """Stop what runs inside after ``seconds`` (None: no limit) with a :class:`UserCodeTimeout`
    naming ``command``, the limit and where the code was; its child processes are killed."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(_signum: int, frame: FrameType | None) -> None:
        _kill_children()
        raise UserCodeTimeout(
            f"{command} timed out after {seconds:g} s (the timeout setting): still {where(frame)}; stopped"
        )

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _kill_children() -> None:
    """SIGKILL every descendant of this process (the user's code may have started some)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        with contextlib.suppress(OSError, ValueError, IndexError):
            if entry.name.isdigit():
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
