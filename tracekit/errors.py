"""The errors a user can cause with bad input.

Every error names the file (or argument) at fault and the reason; the CLI turns each into
one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

#: The distribution tracekit is installed as (``pip install torch-tracekit``: the name ``tracekit``
#: is another project's on PyPI); the command and the import are ``tracekit``.
DISTRIBUTION: Final = "torch-tracekit"


class TracekitError(Exception):
    """Base class of every error caused by input: bad files, bad arguments."""

    exit_code = 2

    def __init__(self, reason: str, *, path: str | Path | None = None) -> None:
        self.reason = reason
        self.path = None if path is None else str(path)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """One line: ``file: reason`` (or just the reason when no file is at fault)."""
        text = " ".join(self.reason.split())
        return f"{self.path}: {text}" if self.path else text


class TraceReadError(TracekitError):
    """A trace file that cannot be read: missing, empty, truncated, not a trace."""


class InputError(TracekitError):
    """Input that is readable but inconsistent: duplicate ranks, mixed jobs, no traces."""


class ExecutorError(TracekitError):
    """The machinery that runs the analysis cannot: an executor's optional dependency missing,
    a cluster that cannot be reached or has no workers."""


class MissingDependency(TracekitError):
    """An optional dependency a command needs is not installed: the message names the command,
    the modules missing and the extra that installs them (``pip install 'torch-tracekit[capture]'``)."""

    def __init__(self, what: str, modules: Sequence[str], extra: str, *, note: str = "") -> None:
        self.modules = tuple(modules)
        super().__init__(f"{what} needs {' and '.join(modules)}: pip install '{DISTRIBUTION}[{extra}]'{note}")


#: Errors of the file system that the user can act on, named by their errno symbol: a full disk,
#: a read-only file system, a quota, a file too large.
_NAMED_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})


def os_reason(exc: OSError) -> str:
    """Why a file operation failed, for a message: ``ENOSPC: no space left on device``.

    The errno symbol leads where the cause is the file system's (disk full, read-only, quota),
    so that a user (and a search engine) recognizes it; otherwise the system's wording alone.
    """
    code = exc.errno
    text = exc.strerror or (os.strerror(code) if code else "") or str(exc) or type(exc).__name__
    if code in _NAMED_ERRNOS:
        return f"{errno.errorcode[code]}: {text[:1].lower()}{text[1:]}"
    return text


def is_disk_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a full disk, an exceeded quota or a read-only file system."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT)
