"""The processes of one capture: find them, stop them, and leave none behind.

The launcher starts in its own session (its own process group), so a Ctrl-C at the terminal
reaches only ``tracekit``, which then stops the run itself. accelerate's launcher (torchrun's
agent) starts every rank in a session of its own, so the process group alone does not reach the
ranks: every process of a run carries ``TRACEKIT_CAPTURE_RUN=<id>`` in its environment, inherited by the launcher,
the ranks and their DataLoader workers, and is found by it (``/proc`` on Linux, else psutil
when installed).

A process that leaves both (``setsid`` with an empty environment, a daemon's double fork) is
found by the process tree: while the ranks run, ``tracekit`` is a child subreaper (Linux), so a
descendant orphaned on the way becomes its child instead of init's; :class:`Orphans` finds those
and the launcher's descendants, and :func:`stop` ends them with the rest.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
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
#: prctl's option that makes a process the reaper of its orphaned descendants (linux/prctl.h).
_PR_SET_CHILD_SUBREAPER: Final = 36


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


class Orphans:
    """While inside, this process adopts the orphaned descendants of what it starts (Linux's
    child subreaper); :meth:`of` lists the processes of a launch found by the process tree."""

    def __init__(self) -> None:
        self._before: set[int] = set()
        self._adopting = False

    def __enter__(self) -> Orphans:
        self._before = set(_children().get(os.getpid(), []))
        self._adopting = _subreaper(True)
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in set(_children().get(os.getpid(), [])) - self._before:  # reap the adopted that ended
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        if self._adopting:
            _subreaper(False)

    def of(self, launcher: int) -> list[int]:
        """The live descendants of ``launcher``, and those adopted by this process since it began."""
        tree = _children()
        roots = [launcher, *(set(tree.get(os.getpid(), [])) - self._before - {launcher})]
        found, todo = [], roots
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += tree.get(pid, [])
        return [pid for pid in found if pid != launcher and _alive(pid)]


def _children() -> dict[int, list[int]]:
    """Parent pid -> its children's pids, from ``/proc`` (empty elsewhere)."""
    tree: dict[int, list[int]] = {}
    if not _PROC.is_dir():
        return tree
    for path in _PROC.iterdir():
        if path.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((path / "stat").read_bytes().rsplit(b")", 1)[-1].split()[1])
                tree.setdefault(ppid, []).append(int(path.name))
    return tree


def _alive(pid: int) -> bool:
    try:
        return (_PROC / str(pid) / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _subreaper(on: bool) -> bool:
    """Make this process a child subreaper (or stop); whether it could (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def stop(proc: subprocess.Popen[bytes], run_id: str, orphans: Orphans | None = None) -> bool:
    """Stop the launcher ``proc`` (its process group), every process of the run, and those
    ``orphans`` finds by the process tree: SIGTERM, then SIGKILL for those still there. Returns
    whether anything had to be stopped."""
    if _gone(proc, run_id, orphans, 0.0):
        return False
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        _signal_all(proc, run_id, orphans, sig)
        if _gone(proc, run_id, orphans, grace):
            break
    return True


def _signal_all(proc: subprocess.Popen[bytes], run_id: str, orphans: Orphans | None, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group outlives its leader while members remain
    for pid in {*find(run_id), *(orphans.of(proc.pid) if orphans is not None else ())}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _gone(proc: subprocess.Popen[bytes], run_id: str, orphans: Orphans | None, grace: float) -> bool:
    deadline = time.monotonic() + grace
    while True:
        if proc.poll() is not None and not find(run_id) and not (orphans is not None and orphans.of(proc.pid)):
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
