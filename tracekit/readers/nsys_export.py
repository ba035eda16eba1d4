"""``.nsys-rep`` reports -> SQLite exports in tracekit's cache, through the ``nsys`` CLI.

The export lands in ``nsys/`` of tracekit's cache folder (``$TRACEKIT_CACHE_DIR``, default
``~/.cache/tracekit``; see :mod:`tracekit.readers.cache`). Its name carries a digest of the
report's full path, so that reports of one name in different folders
(``rank0/report.nsys-rep``, ``rank1/report.nsys-rep``) never share an export. Beside it,
``<export>.identity.json`` records the identity of the report it was made from and of the
export itself (:class:`~tracekit.readers.identity.FileIdentity`: size, mtime, ctime, inode,
a digest of sampled content): the export is reused only while both still match and it
opens as SQLite, so a report replaced by another (even an older one) is exported again, and
so is an export that was damaged. ``nsys`` writes to a temporary name in the same folder,
renamed once the export succeeded: an interrupted export leaves nothing under the export's
name. When the cache folder cannot be written, the export goes to a temporary folder,
removed after the read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.errors import TraceReadError
from tracekit.readers.cache import default_cache_dir
from tracekit.readers.identity import FileIdentity, open_regular, read_regular
from tracekit.readers.nsys import SQLITE_MAGIC, read_nsys

if TYPE_CHECKING:
    from tracekit.readers.trace import RankTrace

REP_SUFFIX: Final = ".nsys-rep"
#: Bump when what an export is reused for changes.
EXPORT_VERSION: Final = 1
_RECORD_SUFFIX: Final = ".identity.json"
#: ``nsys export``'s time limit: this many seconds, plus one per this many bytes of the report.
EXPORT_BASE_S: Final = 300.0
EXPORT_BYTES_PER_S: Final = 1 << 20


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``<export>.identity.json`` says: which report the export was made from, and the export."""

    version: int
    report: FileIdentity
    export: FileIdentity


class _FolderError(Exception):
    """The export folder cannot be created or written."""


def read(report: Path, *, cache_root: Path | None = None, jobs: int = 1) -> list[RankTrace]:
    """The registry's reader (:mod:`tracekit.readers.formats`): export ``report`` with ``nsys
    export --type sqlite`` (unless a valid export is cached in ``cache_root``'s ``nsys`` folder, or
    in a scratch folder when that cannot be written), then read the export under the report's name."""
    del jobs  # one process reads an export
    try:
        return read_nsys(_export(report, cached_export(report, cache_root)), shown=report)
    except _FolderError:  # an unwritable cache: export into a folder of this read only
        with tempfile.TemporaryDirectory(prefix="tracekit-nsys-") as scratch:
            return read_nsys(_export(report, cached_export(report, Path(scratch))), shown=report)


def cached_export(report: Path, cache_root: Path | None = None) -> Path:
    """The path of ``report``'s export in the cache (it may not exist yet)."""
    digest = hashlib.sha1(str(report.resolve()).encode(), usedforsecurity=False).hexdigest()[:10]
    folder = (cache_root or default_cache_dir()) / "nsys"
    return folder / f"{report.name.removesuffix(REP_SUFFIX)}.{digest}.sqlite"


def _export(report: Path, out: Path) -> Path:
    """``out``, the export of ``report``: reused when it is valid, else made; a missing ``nsys``
    (saying how to export by hand) or a failed export is a :class:`TraceReadError`."""
    try:
        identity = FileIdentity.of(report)
    except OSError as exc:
        raise TraceReadError(f"cannot read file ({exc.strerror})", path=report) from None
    if _reusable(out, identity):
        return out
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceReadError(
            f"nsys is not installed; export it with `nsys export --type sqlite {report}` and analyze the .sqlite",
            path=report,
        )
    try:
        if out.is_dir():  # cannot be replaced by a file
            raise IsADirectoryError(errno.EISDIR, "a folder has the export's name")
        out.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.stem}.", suffix=".partial.sqlite")
        os.close(handle)
    except OSError as exc:
        raise _FolderError(f"cannot write the cache folder {out.parent} ({exc.strerror})") from None
    partial = Path(name)
    try:
        command = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", name, str(report)]
        done = _run_export(command, report)
        if done.returncode != 0:
            detail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
            raise TraceReadError(f"`nsys export --type sqlite` failed (exit {done.returncode}: {detail})", path=report)
        if not _opens(partial):
            raise TraceReadError("`nsys export --type sqlite` wrote no readable SQLite file", path=report)
        try:
            os.replace(partial, out)
        except OSError as exc:
            raise _FolderError(f"cannot write the cache folder {out.parent} ({exc.strerror})") from None
    finally:
        partial.unlink(missing_ok=True)
    _write_record(out, identity)
    return out


def export_limit_s(report: Path) -> float:
    """How long ``nsys export`` of ``report`` may run: :data:`EXPORT_BASE_S`, plus one second per
    :data:`EXPORT_BYTES_PER_S` of the report."""
    try:
        size = report.stat().st_size
    except OSError:
        size = 0
    return EXPORT_BASE_S + size / EXPORT_BYTES_PER_S


def _run_export(command: list[str], report: Path) -> subprocess.CompletedProcess[str]:
    """Run ``nsys export`` in a session of its own, at most :func:`export_limit_s`; past it, or
    when tracekit is interrupted, its whole process group is killed (no export outlives the read)."""
    limit = export_limit_s(report)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise TraceReadError(
                f"`nsys export --type sqlite` ran past {limit:.0f} s (the limit for a report of this size) "
                "and was stopped",
                path=report,
            ) from None
        except BaseException:
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _record_path(out: Path) -> Path:
    return out.with_name(out.name + _RECORD_SUFFIX)


def _reusable(out: Path, report: FileIdentity) -> bool:
    """Whether ``out`` was exported from ``report`` as it is now, has not changed since, and opens."""
    try:
        record = msgspec.json.decode(read_regular(_record_path(out), limit=1 << 20, follow=False), type=_Record)
        valid = (record.version, record.report, record.export) == (EXPORT_VERSION, report, FileIdentity.of(out))
    except (OSError, msgspec.MsgspecError):
        return False
    return valid and _opens(out)


def _write_record(out: Path, report: FileIdentity) -> None:
    """Record what ``out`` was exported from; without the record it is exported again next time."""
    record = _record_path(out)
    temporary = record.with_name(f".{record.name}.{uuid.uuid4().hex}.tmp")
    try:
        temporary.write_bytes(msgspec.json.encode(_Record(EXPORT_VERSION, report, FileIdentity.of(out))))
        os.replace(temporary, record)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def _opens(path: Path) -> bool:
    """Whether ``path`` is a regular file that opens as an SQLite database and lists its tables."""
    try:
        with open_regular(path, follow=False) as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return False
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)) as db:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (OSError, sqlite3.Error):
        return False
    return True
