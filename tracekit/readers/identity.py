"""Which version of a file this is (:class:`FileIdentity`), and opening only regular files.

What tracekit keeps on the way (decoded events, a ``.nsys-rep``'s SQLite export) is reused
only while its source still has the identity it was made from. The identity is the
resolved path, size, mtime and ctime (in ns), inode, and the CRC-32 of sampled blocks of the
content: the whole file up to about 1 MiB, else 17 blocks of 64 KiB at evenly spaced
offsets (the first and the last, which end a gzip file with the CRC-32 of its content, and
one centred on the middle). A CRC-32 sees every edit of up to 32 consecutive bits, and ISA-L
computes it at several GB/s: a cryptographic digest (BLAKE2b: 1.4 ms for a file's 1 MiB here)
took 0.37 s of the 1.62 s of CPU of a warm analysis of 256 ranks in one process, for nothing a
checksum does not see (the identity tells a file from its edits, not from a forgery). The ctime cannot be set back by a
user, so an in-place edit is seen even where the mtime was restored; the digest sees it where
the ctime did not tick (timestamps advance only every few ms). Identifying a 2 GB file reads 1
MiB of it.

Files tracekit made itself are opened with :func:`open_regular`: a FIFO, a folder or a
device where one was expected is an :class:`OSError`, never a read that blocks or does not end.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final

from tracekit.readers.compressed import crc32

if TYPE_CHECKING:
    from collections.abc import Iterator

#: The size of one sampled block.
BLOCK: Final = 64 * 1024
#: Blocks sampled from a larger file; odd, so that one is centred on the middle byte.
SAMPLES: Final = 17


def sample_offsets(size: int) -> list[int]:
    """Where the sampled blocks of a file of ``size`` bytes start ([0]: the whole file is read)."""
    if size <= BLOCK * SAMPLES:
        return [0]
    last = size - BLOCK
    return [i * last // (SAMPLES - 1) for i in range(SAMPLES)]


@dataclass(frozen=True)
class FileIdentity:
    """Which version of a file was read: where it is and what distinguishes it from its edits."""

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    #: the CRC-32 of the sampled blocks, in hex (see :func:`sample_offsets`)
    digest: str

    @classmethod
    def of(cls, path: str | Path) -> FileIdentity:
        """The identity of ``path`` now; :class:`OSError` when it cannot be read or is not a regular file."""
        resolved = Path(path).resolve()
        fd = open_fd(resolved)
        try:
            info = os.fstat(fd)
            digest = 0
            offsets = sample_offsets(info.st_size)
            if offsets == [0]:
                while chunk := os.read(fd, 1 << 20):
                    digest = crc32(chunk, digest)
            else:
                for offset in offsets:
                    digest = crc32(os.pread(fd, BLOCK, offset), digest)
        finally:
            os.close(fd)
        return cls(str(resolved), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, f"{digest:08x}")


def open_fd(path: str | Path, *, follow: bool = True) -> int:
    """A read-only descriptor of ``path``, which must be a regular file (else :class:`OSError`).

    Checked before opening (a device is never opened) and after (what was opened is what was
    checked); opened non-blocking, so that a FIFO put there meanwhile cannot block.
    ``follow=False`` refuses a symbolic link.
    """
    before = os.stat(path, follow_symlinks=follow)
    if not stat.S_ISREG(before.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def open_regular(path: str | Path, *, follow: bool = True) -> BinaryIO:
    """``path`` opened for reading in binary mode, if it is a regular file (see :func:`open_fd`)."""
    return os.fdopen(open_fd(path, follow=follow), "rb")


def read_regular(path: str | Path, *, limit: int, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path``; :class:`OSError` when it is not one or is over ``limit``."""
    with open_regular(path, follow=follow) as handle:
        if os.fstat(handle.fileno()).st_size > limit:
            raise OSError(errno.EFBIG, f"over {limit} bytes", str(path))
        return handle.read(limit)


@contextmanager
def mapped_regular(path: str | Path, *, limit: int, follow: bool = True) -> Iterator[memoryview]:
    """The bytes of the regular file ``path`` as a read-only view while the block runs: mapped
    into memory, not copied (:class:`OSError` as :func:`read_regular`; read where the file
    system cannot map it). Copy what is kept: a slice of the view still held when the block
    ends (by a result, or an error's traceback) keeps the file mapped until it goes.

    A map cache entry of 54 MB read into a buffer, its tables then copied out as ``bytes`` and
    again into polars, faulted fresh pages in for each copy and gave them back after: 1,024
    dense ranks' 32 entries took 1.66M page faults and 4.1 s of system time to load. Mapped,
    the tables are copied once, from the page cache.
    """
    fd = open_fd(path, follow=follow)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise OSError(errno.EFBIG, f"over {limit} bytes", str(path))
        try:
            mapping: mmap.mmap | bytes = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else b""
        except (OSError, ValueError):  # a file system that does not map files: read it
            with os.fdopen(os.dup(fd), "rb") as handle:
                mapping = handle.read(limit)
    finally:
        os.close(fd)
    view = memoryview(mapping)
    try:
        yield view
    finally:
        view.release()
        if isinstance(mapping, mmap.mmap):
            with suppress(BufferError):  # a view of it still held (by an error's traceback): unmapped when it goes
                mapping.close()
