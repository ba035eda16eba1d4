"""Text handed to other processes through files in memory, not through pipes.

Pickling a chunk of text to a process pool copies it through a pipe several times over, and
cost as much system time as decoding it. Instead each chunk is written to one of a few reused
files in ``/dev/shm`` (a tmpfs: memory, no disk; the system's temporary folder where there is
none or it lacks room), which the decoding process maps read-only and decodes in place.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

T = TypeVar("T")

#: Where the files go when it has room (a tmpfs on Linux).
SHARED_MEMORY: Final = Path("/dev/shm")


class Slots:
    """``count`` reused files, each holding one chunk of text on its way to a process."""

    def __init__(self, count: int, *, chunk_bytes: int) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="tracekit-chunks-", dir=_room_for(count * chunk_bytes)))
        self._free = [self._folder / f"chunk{i}" for i in range(count)]

    def put(self, *parts: bytes | memoryview) -> Path:
        """A free slot, now holding the text of ``parts`` one after another (from its first
        byte; the file may be longer)."""
        path = self._free.pop()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            at = 0
            for part in parts:
                with memoryview(part) as view:
                    done = 0
                    while done < len(view):
                        done += os.pwrite(fd, view[done:], at + done)
                    at += done
        finally:
            os.close(fd)
        return path

    def release(self, path: Path) -> None:
        """``path``'s text has been read: the slot is free again."""
        self._free.append(path)

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)


def read_slot(path: str, size: int, fn: Callable[[mmap.mmap], T]) -> T:
    """``fn`` of the first ``size`` bytes of the slot file ``path``, mapped read-only.

    ``fn`` must not keep a reference into the buffer it is given (decoders copy what they keep).
    """
    with Path(path).open("rb") as handle, _mapped(handle.fileno(), size) as view:
        return fn(view)


#: Map a slot's pages in one call, rather than fault them in one by one (Linux).
_POPULATE: Final = getattr(mmap, "MAP_POPULATE", 0)


def _mapped(fd: int, size: int) -> mmap.mmap:
    """``size`` bytes of the file ``fd``, mapped read-only (and populated where the system can)."""
    return mmap.mmap(fd, size, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ)


def _room_for(size: int) -> str | None:
    """:data:`SHARED_MEMORY` when it has room for ``size`` bytes four times over, else None
    (the system's temporary folder)."""
    try:
        if SHARED_MEMORY.is_dir() and shutil.disk_usage(SHARED_MEMORY).free >= 4 * size:
            return str(SHARED_MEMORY)
    except OSError:
        pass
    return None
