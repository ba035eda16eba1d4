"""One writer per folder: a lock (the ``filelock`` library) beside each folder tracekit writes.

``capture``, ``sweep``, ``doctor`` and the DataLoader probe each hold the lock of their output
folder while they run:
a second run into the same folder (under any spelling of its path: the lock is named from the
resolved path) is refused at once, with one line naming the holder (its pid, host and command,
which the holder writes into a sidecar file beside the lock). The lock is ``.<name>.tracekit-lock``
beside the folder, not inside it, because a capture replaces its folder as a whole. The (empty)
lock file stays; the sidecar is removed on release. A :class:`~tracekit.capture.Profiler` that
tracekit did not launch (the integrations, a loop of the user's) holds the lock of its rank's
part of its ``out_dir`` (``.<name>.rank<r>.tracekit-lock``): the ranks of one job write one folder
together, a second job writing there is refused rank by rank. The kernel releases the lock of a process
that died, so a crashed run never blocks the next one.

The cache of decoded traces (:mod:`tracekit.readers.cache`) uses :func:`entry_lock`: a bounded
wait, not a refusal, because two analyses of the same trace are normal and the second one can
use what the first wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from filelock import FileLock, Timeout

from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["LOCK_SUFFIX", "entry_lock", "folder_lock", "is_lock_name", "lock_path"]

#: The end of a lock's file name (its sidecar adds ``.holder``).
LOCK_SUFFIX: Final = ".tracekit-lock"
_HOLDER: Final = ".holder"
#: The longest command line a refusal quotes.
_COMMAND_CHARS: Final = 200


def is_lock_name(name: str) -> bool:
    """Whether ``name`` (a file in a folder) is one of tracekit's locks or their sidecars."""
    return name.startswith(".") and (name.endswith(LOCK_SUFFIX) or name.endswith(LOCK_SUFFIX + _HOLDER))


def lock_path(folder: Path, part: str | None = None) -> Path:
    """The lock of ``folder``: ``.<name>.tracekit-lock`` beside it, named from its resolved path
    (``part``: the lock of that part of it, ``.<name>.<part>.tracekit-lock``)."""
    target = folder.expanduser().resolve()
    return target.with_name(f".{target.name}{'' if part is None else '.' + part}{LOCK_SUFFIX}")


def _holder_text() -> str:
    command = " ".join(sys.argv) if sys.argv and sys.argv[0] else sys.executable
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": time.time()})


def _describe_holder(sidecar: Path) -> str:
    """Who holds a lock, from its sidecar (or that it does not say)."""
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        pid, host, command = int(data["pid"]), str(data["host"]), str(data["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (it did not record which)"
    if len(command) > _COMMAND_CHARS:
        command = command[: _COMMAND_CHARS - 1] + "…"
    return f"pid {pid} on {host} ({command})"


@contextlib.contextmanager
def folder_lock(folder: str | Path, *, flag: str = "out_dir", part: str | None = None) -> Iterator[None]:
    """Hold the lock of ``folder`` (of its ``part``, see :func:`lock_path`) while the block runs;
    refuse at once (:class:`InputError` naming the folder and the holder) when another process
    holds it."""
    target = Path(folder).expanduser().resolve()
    path = lock_path(target, part)
    sidecar = path.with_name(path.name + _HOLDER)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(path, timeout=0, thread_local=False)
        lock.acquire()
    except Timeout:
        raise InputError(
            f"{flag} is in use by another tracekit run, {_describe_holder(sidecar)}: wait for it to end, "
            f"or give another {flag}",
            path=target,
        ) from None
    except OSError as exc:
        what = "a folder is where it goes" if path.is_dir() else (exc.strerror or str(exc))
        raise InputError(f"cannot take the lock of {flag} {target} ({what})", path=path) from None
    try:
        with contextlib.suppress(OSError):  # the sidecar only names the holder in a refusal
            sidecar.write_text(_holder_text(), encoding="utf-8")
        yield
    finally:
        with contextlib.suppress(OSError):
            sidecar.unlink(missing_ok=True)
        lock.release()


@contextlib.contextmanager
def entry_lock(path: Path, *, wait_s: float) -> Iterator[bool]:
    """Hold the lock file ``path`` while the block runs, waiting at most ``wait_s`` for it;
    yields False (and holds nothing) when it could not be taken in time or at all."""
    try:
        lock = FileLock(path, timeout=wait_s, thread_local=False)
        lock.acquire()
    except (Timeout, OSError):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
