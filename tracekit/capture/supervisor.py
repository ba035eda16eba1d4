"""A rank's supervisor: the rank's process forks before it imports torch; the parent waits.

The parent writes ``.rank{r}.exit`` when the training process ends: its exit code or
the signal that killed it, and when. So a rank that ends without a Python error (``os._exit``,
a segfault in native code, the kernel's OOM killer) is still named, and the rank that
ended first is known. The parent exits as its child did, so the launcher sees the same status.

It also stops its rank when the ``tracekit`` process that started the run is gone (killed
with SIGKILL, which it cannot handle): no rank outlives the command that launched it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from typing import TYPE_CHECKING, Final, NoReturn

from tracekit.capture import files

if TYPE_CHECKING:
    from pathlib import Path
    from types import FrameType

#: The tracekit process that started the run (set by the launcher).
PARENT_ENV: Final = "TRACEKIT_CAPTURE_PARENT"
#: Seconds between checks that tracekit is still there; then seconds a rank has to stop.
CHECK_EVERY_S: Final = 1.0
STOP_GRACE_S: Final = 5.0
_FORWARDED: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def available() -> bool:
    """Whether ranks can be supervised here (POSIX fork)."""
    return hasattr(os, "fork")


def fork(folder: Path, rank: int) -> None:
    """Fork: return in the child (the rank goes on); the parent supervises it and exits."""
    child = os.fork()
    if child == 0:
        return
    parent_env = os.environ.get(PARENT_ENV, "")
    _supervise(child, folder, rank, parent=int(parent_env) if parent_env.isdigit() else None)


def _supervise(child: int, folder: Path, rank: int, *, parent: int | None) -> NoReturn:
    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    _wait_exited(child, parent)
    _, status = os.waitpid(child, 0)
    ended_ns = time.time_ns()
    code = os.waitstatus_to_exitcode(status)  # negative: killed by that signal
    record = {"rank": rank, "exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None}
    with contextlib.suppress(OSError):
        files.write_json_atomic(folder / files.exit_name(rank), {**record, "time_ns": ended_ns})
    if code < 0:  # end as the child did: killed by the same signal
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 1)


def _wait_exited(child: int, parent: int | None) -> None:
    """Block until ``child`` has exited (not reaped); stop it if ``parent`` goes away."""
    pidfd = os.pidfd_open(child) if hasattr(os, "pidfd_open") else None
    stop_at: float | None = None
    try:
        while True:
            if pidfd is not None:
                if select.select([pidfd], [], [], CHECK_EVERY_S)[0]:
                    return
            elif os.waitid(os.P_PID, child, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
            else:
                time.sleep(0.05)
            if stop_at is None and parent is not None and not alive(parent):
                stop_at = time.monotonic() + STOP_GRACE_S
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGTERM)
            elif stop_at is not None and time.monotonic() > stop_at:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
