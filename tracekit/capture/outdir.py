"""The capture folder: a new capture replaces the previous one only once it has succeeded.

The ranks write into a fresh sibling folder, ``<out_dir>.tracekit-tmp-XXXX`` (same parent,
so renames stay on one file system and are atomic). On success it is renamed to
``out_dir``; the previous capture, if any, is removed only then. Files of the user's in the
previous capture folder (reports written there, notes) are moved into the new one. On
failure the previous capture is left untouched and the failed run's folder (logs, error
files, partial traces) becomes ``<out_dir>.tracekit-failed``, named in the error.

``out_dir`` may be missing, empty, or hold an earlier capture; a folder holding other files
is refused: tracekit never deletes files it did not write.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Final

from tracekit.capture import files
from tracekit.errors import InputError
from tracekit.results.capture import CAPTURE_SCHEMA

TMP_INFIX: Final = ".tracekit-tmp-"
FAILED_SUFFIX: Final = ".tracekit-failed"
_LISTED: Final = 3


def check(out_dir: str | Path) -> Path:
    """``out_dir`` as an absolute path (symbolic links resolved) that a capture may replace.

    Raises :class:`InputError` naming the folder when it is a file, not writable, the current
    folder (or holds it), or holds files that are not a tracekit capture.
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
        _check_replaceable(target)
    return target


def _check_replaceable(target: Path) -> None:
    foreign = sorted(p.name for p in target.iterdir() if not files.is_own_output(p.name))
    capture = is_capture(target)
    if not capture and (target / files.SUMMARY).exists():
        foreign.insert(0, files.SUMMARY)  # a summary.json of something else
    if foreign and not capture:
        listed = ", ".join(foreign[:_LISTED]) + (", ..." if len(foreign) > _LISTED else "")
        raise InputError(
            f"out_dir holds files that are not a tracekit capture ({listed}); tracekit replaces only an "
            "earlier capture and never deletes other files: give a new or empty folder",
            path=target,
        )


def is_capture(folder: Path) -> bool:
    """Whether ``folder`` holds a tracekit capture (its ``summary.json``)."""
    try:
        data = json.loads((folder / files.SUMMARY).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("schema") == CAPTURE_SCHEMA


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


def commit(new: Path, target: Path) -> None:
    """Make the finished capture ``new`` the content of ``target``, replacing a previous capture.

    The user's own files in the previous capture are moved into the new one first; the
    previous capture's folder is removed only once ``new`` is in place.
    """
    if not target.exists():
        new.rename(target)
        return
    extras = [p for p in target.iterdir() if not files.is_own_output(p.name)]
    clash = [p.name for p in extras if (new / p.name).exists()]
    if clash:
        raise InputError(f"the new capture in {new} also has {', '.join(clash)}: {target} left as it was", path=target)
    moved: list[Path] = []
    try:
        for extra in extras:
            extra.rename(new / extra.name)
            moved.append(extra)
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.tracekit-old-", dir=target.parent))
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


def keep_failed(run: Path, target: Path) -> Path:
    """Keep a failed run's folder as ``<target>.tracekit-failed`` (replacing an earlier failed
    run's folder); returns where it is."""
    failed = target.with_name(target.name + FAILED_SUFFIX)
    if failed.is_dir() and all(files.is_own_output(p.name) for p in failed.iterdir()):
        shutil.rmtree(failed, ignore_errors=True)
    try:
        run.rename(failed)
    except OSError:
        return run  # something else has that name: the run keeps its temporary one
    return failed
