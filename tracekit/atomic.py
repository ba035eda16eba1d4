"""Writing output files atomically: a reader sees the old file or the new one, never a part.

Each file is written to a temporary file beside it (a unique name, so concurrent runs do not
collide), flushed to disk, then renamed over the target. A failure at any point (an error
while writing, a full disk, an interrupt) removes the temporary file and leaves the target as
it was: the previous file untouched, or no file where there was none. :class:`OutputFiles`
writes several files together: none is replaced until every one of them has been written. An
output that is a stream (``--json /dev/stdout``, a pipe) is written directly, after the files.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import InputError, os_reason

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["OutputFiles", "write_atomically", "write_text_atomically"]


class _Staged:
    """One file written to its temporary name, waiting to be renamed over its target."""

    def __init__(self, path: Path, write: Callable[[Path], object]) -> None:
        self.path = path
        # write through a symbolic link to the file it names (the link stays)
        try:
            self.target = path.resolve() if path.is_symlink() else path
        except (OSError, RuntimeError):
            raise InputError("cannot write (a loop of symbolic links)", path=path) from None
        self.temp = _reserve(self.target, shown=path)
        try:
            write(self.temp)
            _keep_mode(self.target, self.temp)
            _sync(self.temp)
        except OSError as exc:
            self.discard()
            raise InputError(f"cannot write ({os_reason(exc)})", path=path) from None
        except BaseException:
            self.discard()
            raise

    def commit(self) -> None:
        try:
            os.replace(self.temp, self.target)
        except OSError as exc:
            self.discard()
            raise InputError(f"cannot write ({os_reason(exc)})", path=self.path) from None
        _sync_folder(self.target.parent)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.temp.unlink(missing_ok=True)


class _Streamed:
    """One output that is not a file but a stream (``/dev/stdout``, a pipe, a terminal): nothing
    can be renamed over it, so it is written when the others are committed, once."""

    def __init__(self, path: Path, write: Callable[[Path], object]) -> None:
        self.path = path
        self.write = write

    def commit(self) -> None:
        try:
            self.write(self.path)
        except OSError as exc:
            raise InputError(f"cannot write ({os_reason(exc)})", path=self.path) from None

    def discard(self) -> None:
        """Nothing was written yet."""


def _is_stream(path: Path) -> bool:
    """Whether ``path`` names an existing character device, pipe or socket (``/dev/stdout``)."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _reserve(target: Path, *, shown: Path) -> Path:
    """A new, empty temporary file beside ``target`` (its mode from the umask, as a new file's)."""
    for _ in range(100):
        temp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        except FileExistsError:
            continue
        except OSError as exc:
            raise InputError(f"cannot write ({os_reason(exc)})", path=shown) from None
        os.close(fd)
        return temp
    raise InputError("cannot write (no free temporary name beside it)", path=shown)  # pragma: no cover


def _keep_mode(target: Path, temp: Path) -> None:
    """Give ``temp`` the mode of the file it replaces (after writing: the mode may be read-only)."""
    with contextlib.suppress(OSError):
        os.chmod(temp, stat.S_IMODE(target.stat().st_mode))


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (where the platform and file system allow it)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class OutputFiles:
    """Files written together, atomically: renamed into place only when every one is written.

    ``with OutputFiles() as out: out.add(path, write)`` calls ``write(temporary_path)`` for
    each file; when the block ends without an error, every file is renamed over its target;
    when it raises, no target is touched and no temporary file is left. A file that cannot be
    written is an :class:`~tracekit.errors.InputError` naming it.
    """

    def __init__(self) -> None:
        self._staged: list[_Staged | _Streamed] = []

    def add(self, path: str | Path, write: Callable[[Path], object]) -> None:
        """Write ``path``'s content with ``write`` (to a temporary file, until the block ends)."""
        path = Path(path)
        self._staged.append(_Streamed(path, write) if _is_stream(path) else _Staged(path, write))

    def add_text(self, path: str | Path, text: str) -> None:
        """Write ``text`` (UTF-8) to ``path``."""
        data = text.encode("utf-8")
        self.add(path, lambda temp: temp.write_bytes(data))

    def __enter__(self) -> OutputFiles:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        staged, self._staged = self._staged, []
        if error is not None:
            for s in staged:
                s.discard()
            return
        for i, s in enumerate(staged):
            try:
                s.commit()
            except BaseException:
                for rest in staged[i + 1 :]:
                    rest.discard()
                raise


def write_atomically(path: str | Path, write: Callable[[Path], object]) -> None:
    """Write one file atomically: ``write(temporary_path)``, then rename it over ``path``."""
    with OutputFiles() as out:
        out.add(path, write)


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with OutputFiles() as out:
        out.add_text(path, text)
