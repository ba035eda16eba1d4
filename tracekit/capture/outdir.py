"""The capture folder: a new capture replaces the previous one only once it has succeeded.

The ranks write into a fresh sibling folder, ``<out_dir>.tracekit-tmp-XXXX`` (same parent,
so renames stay on one file system and are atomic). On success it is renamed to
``out_dir``; the previous capture, if any, is removed only then. Files of the user's in the
previous capture folder (reports written there, notes) are moved into the new one. On
failure the previous capture is left untouched and the failed run's folder (logs, error
files, partial traces) becomes ``<out_dir>.tracekit-failed``, named in the error.

``out_dir`` may be missing, empty, or hold an earlier capture; a folder holding other files
is refused: tracekit never deletes files it did not write. The same rules serve other kinds
of output folder (an A/B capture: :mod:`tracekit.capture.ab`), each a :class:`FolderKind`.
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit.capture import files
from tracekit.errors import InputError
from tracekit.locks import is_lock_name
from tracekit.results.capture import CAPTURE_SCHEMA

if TYPE_CHECKING:
    from collections.abc import Callable

TMP_INFIX: Final = ".tracekit-tmp-"
FAILED_SUFFIX: Final = ".tracekit-failed"
_LISTED: Final = 3


def is_capture(folder: Path) -> bool:
    """Whether ``folder`` holds a tracekit capture (its ``summary.json``)."""
    return _has_schema(folder / files.SUMMARY, CAPTURE_SCHEMA)


def _has_schema(path: Path, schema: str) -> bool:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("schema") == schema


@dataclass(frozen=True)
class FolderKind:
    """A kind of output folder: the file that marks one, and the names tracekit writes in it."""

    #: What a folder of this kind is, for errors ("a tracekit capture").
    what: str
    #: The file whose ``schema`` field marks a folder of this kind.
    marker: str
    schema: str
    #: Whether a name in such a folder is tracekit's (any other is the user's, and kept).
    own: Callable[[str], bool]

    def holds(self, folder: Path) -> bool:
        """Whether ``folder`` is a folder of this kind."""
        return _has_schema(folder / self.marker, self.schema)


CAPTURE: Final = FolderKind("a tracekit capture", files.SUMMARY, CAPTURE_SCHEMA, files.is_own_output)


def check(out_dir: str | Path, kind: FolderKind = CAPTURE) -> Path:
    """``out_dir`` as an absolute path (symbolic links resolved) that a capture may replace.

    Raises :class:`InputError` naming the folder when it is a file, not writable, the current
    folder (or holds it), or holds files that are not a folder of ``kind``.
    """
    target = Path(out_dir).expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise InputError("out_dir is an existing file, not a folder", path=target)
    if Path.cwd().resolve().is_relative_to(target):
        raise InputError("out_dir is (or holds) the current folder: run tracekit from elsewhere", path=target)
    parent = next(p for p in target.parents if p.exists())
    if not parent.is_dir():
        raise InputError(f"out_dir cannot be created: {parent} is a file", path=target)
    for folder in (parent, target) if target.exists() else (parent,):
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"out_dir is not writable ({folder} is read-only to this user)", path=target)
    if target.is_dir():
        _check_replaceable(target, kind)
    return target


def _check_replaceable(target: Path, kind: FolderKind) -> None:
    if kind.holds(target):
        return
    foreign = sorted(p.name for p in target.iterdir() if not kind.own(p.name) and not is_lock_name(p.name))
    if (target / kind.marker).exists():
        foreign.insert(0, kind.marker)  # a summary.json of something else
    if foreign:
        listed = ", ".join(foreign[:_LISTED]) + (", ..." if len(foreign) > _LISTED else "")
        raise InputError(
            f"out_dir holds files that are not {kind.what} ({listed}); tracekit replaces only an "
            "earlier one and never deletes other files: give a new or empty folder",
            path=target,
        )


#: The folder a commit moves the previous capture into, until the new one is in place.
OLD_INFIX: Final = ".tracekit-old-"
_STALE: Final = re.compile(r"[0-9a-f]{8}|[a-z0-9_]{8}")


def clear_stale(target: Path) -> list[Path]:
    """Remove the temporary folders of earlier runs into ``target`` that were killed before they
    could clean up (``<out_dir>.tracekit-tmp-XXXX``, ``.<out_dir>.tracekit-old-XXXX``); returns them.

    Call it only while holding ``target``'s lock (:func:`tracekit.locks.folder_lock`): every run
    into ``target`` holds it while its folders exist, so no live run owns one of these.
    """
    removed = []
    for prefix in (f"{target.name}{TMP_INFIX}", f".{target.name}{OLD_INFIX}"):
        for folder in target.parent.glob(glob.escape(prefix) + "*"):
            if _STALE.fullmatch(folder.name[len(prefix) :]) and folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


def staging(target: Path) -> Path:
    """A new empty folder beside ``target`` for the run to write into."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        while True:  # not tempfile.mkdtemp: the folder gets the usual permissions (umask), not 0700
            folder = target.with_name(f"{target.name}{TMP_INFIX}{secrets.token_hex(4)}")
            try:
                folder.mkdir()
            except FileExistsError:
                continue
            return folder
    except OSError as exc:
        raise InputError(f"cannot create the capture folder ({exc.strerror})", path=target) from None


def commit(new: Path, target: Path, kind: FolderKind = CAPTURE) -> None:
    """Make the finished capture ``new`` the content of ``target``, replacing a previous capture.

    The user's own files in the previous capture are moved into the new one first; the
    previous capture's folder is removed only once ``new`` is in place.
    """
    if not target.exists():
        new.rename(target)
        return
    extras = [p for p in target.iterdir() if not kind.own(p.name) and not is_lock_name(p.name)]
    clash = [p.name for p in extras if (new / p.name).exists()]
    if clash:
        raise InputError(f"the new capture in {new} also has {', '.join(clash)}: {target} left as it was", path=target)
    moved: list[Path] = []
    try:
        for extra in extras:
            extra.rename(new / extra.name)
            moved.append(extra)
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}{OLD_INFIX}", dir=target.parent))
        target.rename(old)  # replaces the empty folder just made
    except OSError as exc:
        for extra in moved:
            (new / extra.name).rename(extra)
        raise InputError(
            f"cannot replace the previous capture ({exc.strerror}); the new one is in {new}", path=target
        ) from None
    try:
        new.rename(target)
    except OSError as exc:
        old.rename(target)
        for extra in moved:
            (new / extra.name).rename(extra)
        raise InputError(
            f"cannot replace the previous capture ({exc.strerror}); the new one is in {new}", path=target
        ) from None
    shutil.rmtree(old, ignore_errors=True)


def keep_failed(run: Path, target: Path, kind: FolderKind = CAPTURE) -> Path:
    """Keep a failed run's folder as ``<target>.tracekit-failed`` (replacing an earlier failed
    run's folder); returns where it is."""
    failed = target.with_name(target.name + FAILED_SUFFIX)
    if failed.is_dir() and all(kind.own(p.name) for p in failed.iterdir()):
        shutil.rmtree(failed, ignore_errors=True)
    try:
        run.rename(failed)
    except OSError:
        return run  # something else has that name: the run keeps its temporary one
    return failed
