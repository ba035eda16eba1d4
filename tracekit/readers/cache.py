"""A cache of decoded events: Parquet per rank trace, keyed by the identity of its file.

Reading a trace again costs a Parquet read instead of a JSON or SQLite decode. An entry is
``<root>/events/<digest of the resolved path>.json`` (what the reader said about each rank
in the file, and the file identity it was read from) beside one ``.parquet`` of events per
rank trace, and one ``.counters.parquet`` per rank trace that has counters (memory over time).
It is used only while the file still has that identity (size, mtime in ns, inode, and a
digest of its first and last 64 KiB, since mtimes tick only every few ms) and was written
by this tracekit version with this :data:`CACHE_VERSION`; a changed file's entry is replaced
by the next read. A corrupt or unreadable entry, or a cache folder that cannot be
written, is never an error: the file is read from its source instead.

The root is ``$TRACEKIT_CACHE_DIR``, else ``~/.cache/tracekit`` (see :func:`default_cache_dir`).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from tracekit import __version__
from tracekit.model.counters import COUNTER_SCHEMA, empty_counters
from tracekit.model.run import ProcessGroup
from tracekit.model.schema import SCHEMA
from tracekit.readers.trace import RankTrace

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: Bump whenever a reader's output (columns, values, rank metadata) changes for the same file.
CACHE_VERSION: Final = 5
#: The environment variable naming the cache root.
CACHE_ENV: Final = "TRACEKIT_CACHE_DIR"
_ENDS: Final = 64 * 1024
_METADATA: Final = ("path", "rank", "world_size", "backend", "schema_version", "rank_source", "clock")
#: What an unusable entry can raise while it is read; each means "read the source instead".
_UNUSABLE: Final = (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError)


def default_cache_dir() -> Path:
    """The cache root: ``$TRACEKIT_CACHE_DIR``, else ``~/.cache/tracekit``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tracekit"


@dataclass(frozen=True)
class FileIdentity:
    """What makes a cached read of a file valid: where it is and which version of it."""

    path: str
    size: int
    mtime_ns: int
    inode: int
    #: of the first and last 64 KiB (a gzip file ends with the CRC-32 of its content)
    ends: str

    @classmethod
    def of(cls, path: str | Path) -> FileIdentity:
        """The identity of ``path`` now; raises :class:`OSError` when it cannot be read."""
        resolved = Path(path).resolve()
        with resolved.open("rb") as handle:
            info = os.fstat(handle.fileno())
            digest = hashlib.sha1(handle.read(_ENDS), usedforsecurity=False)
            if info.st_size > _ENDS:
                handle.seek(max(_ENDS, info.st_size - _ENDS))
                digest.update(handle.read(_ENDS))
        return cls(str(resolved), info.st_size, info.st_mtime_ns, info.st_ino, digest.hexdigest())


class EventCache:
    """Per-file cache entries under ``<root>/events``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.folder = self.root / "events"

    def _stem(self, identity: FileIdentity) -> str:
        return hashlib.sha1(identity.path.encode(), usedforsecurity=False).hexdigest()[:24]

    @staticmethod
    def _key(identity: FileIdentity) -> dict[str, Any]:
        return {"tracekit": __version__, "cache_version": CACHE_VERSION, **asdict(identity)}

    def load(self, path: str | Path) -> list[RankTrace] | None:
        """The cached rank traces of ``path``, or None when there is no usable entry."""
        try:
            identity = FileIdentity.of(path)
            stem = self._stem(identity)
            meta = json.loads((self.folder / f"{stem}.json").read_bytes())
            if meta.get("key") != self._key(identity):
                return None
            return [self._read_trace(item, self.folder / f"{stem}.{i}") for i, item in enumerate(meta["traces"])]
        except _UNUSABLE:
            return None

    @staticmethod
    def _read_trace(item: dict[str, Any], base: Path) -> RankTrace:
        """One rank trace from ``<base>.parquet`` (and ``<base>.counters.parquet`` when it has counters)."""
        events = _read_frame(base.with_name(f"{base.name}.parquet"), SCHEMA, rows=item["rows"])
        counters = (
            _read_frame(base.with_name(f"{base.name}.counters.parquet"), COUNTER_SCHEMA, rows=item["counter_rows"])
            if item["counter_rows"]
            else empty_counters()
        )
        groups = tuple(
            ProcessGroup(name=g["name"], ranks=tuple(g["ranks"]), description=g["description"])
            for g in item.get("process_groups", ())
        )
        meta = {k: item[k] for k in _METADATA}
        return RankTrace(
            events=events,
            counters=counters,
            devices=tuple(item["devices"]),
            process_groups=groups,
            warnings=tuple(str(w) for w in item["warnings"]),
            **meta,
        )

    def store(self, identity: FileIdentity, traces: Sequence[RankTrace]) -> bool:
        """Write the entry of the file read as ``identity``; False when it cannot be written."""
        stem = self._stem(identity)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for i, trace in enumerate(traces):
                _replace(self.folder / f"{stem}.{i}.parquet", partial(_write_parquet, trace.events))
                counters = self.folder / f"{stem}.{i}.counters.parquet"
                if trace.counters.height:
                    _replace(counters, partial(_write_parquet, trace.counters))
                else:
                    counters.unlink(missing_ok=True)  # what an earlier version of the file had
            items = [
                {
                    **{k: getattr(t, k) for k in _METADATA},
                    "devices": list(t.devices),
                    "process_groups": [asdict(g) for g in t.process_groups],
                    "warnings": list(t.warnings),
                    "rows": t.events.height,
                    "counter_rows": t.counters.height,
                }
                for t in traces
            ]
            text = json.dumps({"key": self._key(identity), "traces": items}, indent=1)
            _replace(self.folder / f"{stem}.json", partial(Path.write_text, data=text, encoding="utf-8"))
        except (OSError, pl.exceptions.PolarsError):
            return False
        return True


def _read_frame(parquet: Path, schema: dict[str, pl.DataType], *, rows: int) -> pl.DataFrame:
    frame = pl.read_parquet(parquet)
    if frame.schema != pl.Schema(schema) or frame.height != rows:
        raise ValueError(f"{parquet}: not the schema, or not the rows recorded")
    return frame


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    frame.write_parquet(path, compression="lz4", statistics=False)  # zstd: half the size, 1.5x the CPU


def _replace(target: Path, write: Callable[[Path], object]) -> None:
    """Write through a temporary file and rename it, so that readers never see half a file."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
