"""The processes of one capture: find them, stop them, and leave none behind.

The launcher starts in its own session (its own process group), so a Ctrl-C at the terminal
reaches only ``tracekit``, which then stops the run itself. torchrun starts every rank in a
session of its own too, so the process group alone does not reach the ranks: every process
of a run carries ``TRACEKIT_CAPTURE_RUN=<id>`` in its environment, inherited by the launcher,
the ranks and their DataLoader workers, and is found by it (``/proc`` on Linux, else psutil
when installed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator
    from types import FrameType

#: The environment variable that marks every process of one run.
RUN_ENV: Final = "TRACEKIT_CAPTURE_RUN"
#: Seconds the processes get to end after SIGTERM, then after SIGKILL.
TERM_GRACE_S: Final = 5.0
KILL_GRACE_S: Final = 5.0
_PROC: Final = Path("/proc")


class Interrupted(KeyboardInterrupt):
    """``tracekit`` received SIGTERM or SIGHUP while it waited for the ranks."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def find(run_id: str) -> list[int]:
    """The live processes whose environment holds ``TRACEKIT_CAPTURE_RUN=run_id``."""
    return find_by_env(RUN_ENV, run_id)


def find_by_env(name: str, value: str) -> list[int]:
    """The live processes (not this one) whose environment holds ``name=value``."""
    entry = f"{name}={value}".encode()
    me = os.getpid()
    if _PROC.is_dir():
        found = []
        for path in _PROC.iterdir():
            if not path.name.isdigit() or int(path.name) == me:
                continue
            try:
                environ = (path / "environ").read_bytes()  # empty for a zombie
            except OSError:
                continue
            if entry in environ.split(b"\0"):
                found.append(int(path.name))
        return found
    return _find_with_psutil(name, value)


def _find_with_psutil(name: str, value: str) -> list[int]:
    try:
        import psutil  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return []
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(name) == value:
                found.append(int(proc.pid))
    return found


def stop(proc: subprocess.Popen[bytes], run_id: str) -> bool:
    """Stop the launcher ``proc`` (its process group) and every process of the run: SIGTERM,
    then SIGKILL for those still there. Returns whether anything had to be stopped."""
    if proc.poll() is not None and not find(run_id):
        return False
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        _signal_all(proc, run_id, sig)
        if _gone(proc, run_id, grace):
            break
    return True


def _signal_all(proc: subprocess.Popen[bytes], run_id: str, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group outlives its leader while members remain
    for pid in find(run_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _gone(proc: subprocess.Popen[bytes], run_id: str, grace: float) -> bool:
    deadline = time.monotonic() + grace
    while True:
        if proc.poll() is not None and not find(run_id):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Interrupted` (a KeyboardInterrupt, as
    SIGINT does), so ``tracekit`` stops its ranks before it ends. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupted(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, raise_interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        _restore(previous)


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """While inside, SIGINT, SIGTERM and SIGHUP are ignored: cleaning up is not cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    try:
        yield
    finally:
        _restore(previous)


def _restore(previous: dict[signal.Signals, signal._HANDLER]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)
