"""Whether ``tracekit analyze`` is a warm run: the same command over unchanged files, whose per-rank
results the cache holds (:mod:`tracekit.pipeline.map_cache`), so that no worker process is needed.

``tracekit analyze`` starts its pool of processes before it imports the analyses (they import
them meanwhile); on a warm run they would only take CPU from the reduce and the reports. After a
run that used the cache, :func:`record` notes, under ``<cache>/runs/``, the command's paths and
options and each trace file's ``stat`` (path, size, times in ns, inode); :func:`likely_warm`
compares them before anything heavy is imported (the standard library only). It is a hint: a
wrong one costs time, never a number, since every shard is checked against the map cache's own
key (a file's content digest included) and mapped by the pool, started then, when it misses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: The variable naming the cache root (as :data:`tracekit.readers.cache.CACHE_ENV`; a test keeps them equal).
CACHE_ENV: Final = "TRACEKIT_CACHE_DIR"
#: The file names that are traces (as :mod:`tracekit.executors.local` counts them).
SUFFIXES: Final = (".json", ".json.gz", ".sqlite", ".nsys-rep")
#: The largest note read (a few hundred bytes per trace file).
_LIMIT: Final = 64 * 1024 * 1024
#: The options that say where the cache is, not what the run computes.
_NOT_KEYED: Final = frozenset({"cache_dir", "use_cache"})


def cache_root(analysis: Mapping[str, Any]) -> Path | None:
    """The cache root of ``analysis`` (``--cache-dir``, else ``$TRACEKIT_CACHE_DIR``, else
    ``~/.cache/tracekit``), or None under ``--no-cache``."""
    if not analysis.get("use_cache", True):
        return None
    if analysis.get("cache_dir") is not None:
        return Path(analysis["cache_dir"]).absolute()
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tracekit"


def _files(paths: Sequence[Path]) -> list[list[Any]]:
    """Every trace file under ``paths``, with its ``stat``; OSError when one cannot be read."""
    out = []
    for given in paths:
        found = sorted(p for p in given.rglob("*") if p.name.lower().endswith(SUFFIXES)) if given.is_dir() else [given]
        for path in found:
            st = path.stat()
            out.append([str(path.absolute()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return out


def _index(root: Path, paths: Sequence[Path], analysis: Mapping[str, Any]) -> Path:
    options = {k: v for k, v in sorted(analysis.items()) if k not in _NOT_KEYED}
    named = json.dumps({"paths": [str(p.absolute()) for p in paths], "options": options}, default=str)
    return root / "runs" / f"{hashlib.sha1(named.encode(), usedforsecurity=False).hexdigest()[:24]}.json"


def likely_warm(paths: Sequence[Path], analysis: Mapping[str, Any]) -> bool:
    """Whether the last run of this command, over these very files, used the cache."""
    root = cache_root(analysis)
    if root is None:
        return False
    try:
        recorded = json.loads(_read_regular(_index(root, paths, analysis)))
        return bool(recorded) and recorded == _files(paths)
    except (OSError, ValueError, RecursionError):
        return False


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (not a link, a FIFO or a device) of at most
    :data:`_LIMIT` bytes; OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _LIMIT:
            raise OSError(f"{path}: not a regular file of at most {_LIMIT} bytes")
        return os.read(fd, _LIMIT + 1)
    finally:
        os.close(fd)


def record(paths: Sequence[Path], analysis: Mapping[str, Any]) -> None:
    """Note that this command ran over these files with the cache (nothing when it cannot)."""
    root = cache_root(analysis)
    if root is None:
        return
    index = _index(root, paths, analysis)
    tmp = index.with_name(f".{index.name}.{uuid.uuid4().hex}.tmp")
    with contextlib.suppress(OSError):
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(_files(paths)))
        os.replace(tmp, index)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
