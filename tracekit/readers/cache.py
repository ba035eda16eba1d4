"""A cache of decoded events: Parquet per rank trace, keyed by the identity of its file.

Reading a trace again costs a Parquet read instead of a JSON or SQLite decode. An entry is
``<root>/events/<digest of the resolved path>.json`` (what the reader said about each rank
in the file, the identity of the file it was read from, and a token naming its Parquet
files) beside one ``<stem>.<token>.<i>.parquet`` of events per rank trace, and one
``.counters.parquet`` per rank trace that has counters (memory over time). It is used only
while the file still has that identity (path, size, mtime and ctime in ns, inode, and a
digest of sampled blocks of its content: see :mod:`tracekit.readers.identity`) and was
written by this tracekit version with this :data:`CACHE_VERSION`; a changed file's entry is
replaced by the next read.

Every file is written under a temporary name and renamed, the metadata last, one writer at a
time per entry (its ``<stem>.lock``, waited for at most 30 s), and each entry writes Parquet
files of its own token, so that processes sharing a cache folder never mix
the files of two entries: a reader sees a whole entry, or none (its files removed by a later
writer), and reads the source. A corrupt or unreadable entry (not a regular file, truncated,
of another shape or schema), or a cache folder that cannot be written, is never an error:
the file is read from its source instead.

The root is ``$TRACEKIT_CACHE_DIR``, else ``~/.cache/tracekit`` (see :func:`default_cache_dir`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import msgspec
import polars as pl

from tracekit import __version__
from tracekit.locks import entry_lock
from tracekit.model.by_kind import ROW, ByKind, Literals
from tracekit.model.counters import COUNTER_SCHEMA, empty_counters
from tracekit.model.input_warnings import InputWarning  # noqa: TC001  (msgspec reads annotations at run time)
from tracekit.model.run import ProcessGroup, RankFound  # noqa: TC001
from tracekit.model.schema import SCHEMA, without_null_columns
from tracekit.readers.identity import FileIdentity, open_regular, read_regular
from tracekit.readers.ranks import MAX_RANK
from tracekit.readers.trace import RankTrace

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["CACHE_ENV", "CACHE_VERSION", "EventCache", "FileIdentity", "default_cache_dir"]

#: Bump whenever a reader's output (columns, values, rank metadata) or the entry layout changes.
CACHE_VERSION: Final = 17
#: The environment variable naming the cache root.
CACHE_ENV: Final = "TRACEKIT_CACHE_DIR"
#: The largest entry metadata read (a few hundred bytes per rank trace).
_META_LIMIT: Final = 16 * 1024 * 1024
#: The lock of an entry (``<stem>.lock``): one writer at a time, so that two processes that decode
#: the same file do not both write it. A bounded wait, not a refusal (as a capture's folder lock
#: is): the second process then finds the first's entry and writes nothing; past the wait it
#: leaves the entry to the first (the cache is never worth blocking an analysis for long).
_LOCK: Final = ".lock"
_LOCK_WAIT_S: Final = 30.0
#: What an unusable entry can raise while it is read; each means "read the source instead".
_UNUSABLE: Final = (OSError, ValueError, KeyError, TypeError, msgspec.MsgspecError, pl.exceptions.PolarsError)


def default_cache_dir() -> Path:
    """The cache root: ``$TRACEKIT_CACHE_DIR``, else ``~/.cache/tracekit``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tracekit"


class _Trace(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What an entry records of one rank trace besides its frames."""

    path: str
    rank: Annotated[int, msgspec.Meta(ge=0, le=MAX_RANK)] | None
    world_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_RANK)] | None
    backend: str | None
    schema_version: str | None
    rank_source: RankFound
    clock: str
    devices: tuple[str, ...]
    process_groups: tuple[ProcessGroup, ...]
    warnings: tuple[InputWarning, ...]
    device_memory: tuple[tuple[int, int], ...]
    host: str | None
    rows: Annotated[int, msgspec.Meta(ge=0)]
    counter_rows: Annotated[int, msgspec.Meta(ge=0)]
    #: the events of each kind, in the order the events file holds them (a kind after another)
    kinds: tuple[tuple[str, Annotated[int, msgspec.Meta(ge=1)]], ...] = ()
    #: per kind, its columns of one value or none there, with the value (None: none), which the
    #: events file holds as buffers and a read leaves unread (:meth:`ByKind.literals`)
    literals: tuple[tuple[str, str, int | str | None], ...] = ()


class _Entry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An entry's metadata: who wrote it, from which version of the file, and where its frames are."""

    tracekit: str
    cache_version: int
    source: FileIdentity
    #: names the entry's Parquet files: ``<stem>.<token>.<i>.parquet``
    token: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{16}$")]
    traces: tuple[_Trace, ...]


class EventCache:
    """Per-file cache entries under ``<root>/events``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.folder = self.root / "events"

    def _stem(self, identity: FileIdentity) -> str:
        return hashlib.sha1(identity.path.encode(), usedforsecurity=False).hexdigest()[:24]

    def load(self, path: str | Path) -> list[RankTrace] | None:
        """The cached rank traces of ``path``, or None when there is no usable entry."""
        try:
            identity = FileIdentity.of(path)
            stem = self._stem(identity)
            data = read_regular(self.folder / f"{stem}.json", limit=_META_LIMIT, follow=False)
            entry = msgspec.json.decode(data, type=_Entry)
            if (entry.tracekit, entry.cache_version, entry.source) != (__version__, CACHE_VERSION, identity):
                return None
            return [_read_trace(item, self.folder / f"{stem}.{entry.token}.{i}") for i, item in enumerate(entry.traces)]
        except _UNUSABLE:
            return None

    def store(self, identity: FileIdentity, traces: Sequence[RankTrace]) -> bool:
        """Write the entry of the file read as ``identity``; False when it cannot be written."""
        stem = self._stem(identity)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        before = _stamp(self.folder / f"{stem}.json")
        with entry_lock(self.folder / f"{stem}{_LOCK}", wait_s=_LOCK_WAIT_S) as locked:
            if not locked:  # another process is still writing it: it is that one's to write
                return False
            if _stamp(self.folder / f"{stem}.json") != before and self._current(identity, stem):
                return True  # another process wrote this very entry while this one waited
            return self._write(identity, stem, traces)

    def _current(self, identity: FileIdentity, stem: str) -> bool:
        """Whether the entry of ``stem`` is this tracekit's entry of ``identity``, its files there."""
        try:
            data = read_regular(self.folder / f"{stem}.json", limit=_META_LIMIT, follow=False)
            entry = msgspec.json.decode(data, type=_Entry)
        except _UNUSABLE:
            return False
        return (entry.tracekit, entry.cache_version, entry.source) == (__version__, CACHE_VERSION, identity) and all(
            (self.folder / f"{stem}.{entry.token}.{i}.parquet").is_file() for i in range(len(entry.traces))
        )

    def _write(self, identity: FileIdentity, stem: str, traces: Sequence[RankTrace]) -> bool:
        token = uuid.uuid4().hex[:16]
        try:
            for i, trace in enumerate(traces):
                base = self.folder / f"{stem}.{token}.{i}"
                replace_file(base.with_name(f"{base.name}.parquet"), partial(write_held, trace.held))
                if trace.counters.height:
                    replace_file(
                        base.with_name(f"{base.name}.counters.parquet"), partial(_write_parquet, trace.counters)
                    )
            entry = _Entry(__version__, CACHE_VERSION, identity, token, tuple(_describe(t) for t in traces))
            replace_file(self.folder / f"{stem}.json", partial(_write_bytes, msgspec.json.encode(entry)))
        except (OSError, pl.exceptions.PolarsError):
            self._sweep(stem, token, ours=True)
            return False
        self._sweep(stem, token, ours=False)  # the files of the entry this one replaced
        return True

    def _sweep(self, stem: str, token: str, *, ours: bool) -> None:
        """Remove the Parquet files of ``stem`` that are (``ours``), or are not, of ``token``.

        Files of another process's entry still being written may go too: its entry then
        names missing files, which reads as no entry.
        """
        try:
            found = list(self.folder.glob(f"{stem}.*.parquet"))
        except OSError:
            return
        for path in found:
            if path.name.startswith(f"{stem}.{token}.") == ours:
                with contextlib.suppress(OSError):  # a folder put there stays
                    path.unlink(missing_ok=True)


def _stamp(path: Path) -> tuple[int, int] | None:
    """The inode and modification time of ``path`` (None when it is not there): a rename over it changes them."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _describe(trace: RankTrace) -> _Trace:
    return _Trace(
        path=trace.path,
        rank=trace.rank,
        world_size=trace.world_size,
        backend=trace.backend,
        schema_version=trace.schema_version,
        rank_source=trace.rank_source,
        clock=trace.clock,
        devices=trace.devices,
        process_groups=trace.process_groups,
        host=trace.host,
        warnings=trace.warnings,
        device_memory=trace.device_memory,
        rows=trace.held.height,
        counter_rows=trace.counters.height,
        kinds=tuple((k, p.height) for k, p in trace.held.parts.items()),
        literals=tuple(
            (kind, column, value) for kind, ones in trace.held.literals().items() for column, value in ones.items()
        ),
    )


def _read_trace(item: _Trace, base: Path) -> RankTrace:
    """One rank trace from ``<base>.parquet`` (and ``<base>.counters.parquet`` when it has counters)."""
    events = _read_held(base.with_name(f"{base.name}.parquet"), item)
    counters = (
        _read_frame(base.with_name(f"{base.name}.counters.parquet"), COUNTER_SCHEMA, rows=item.counter_rows)
        if item.counter_rows
        else empty_counters()
    )
    return RankTrace(
        path=item.path,
        held=events,
        rank=item.rank,
        world_size=item.world_size,
        backend=item.backend,
        devices=item.devices,
        schema_version=item.schema_version,
        rank_source=item.rank_source,
        clock=item.clock,
        counters=counters,
        process_groups=item.process_groups,
        host=item.host,
        warnings=item.warnings,
        device_memory=item.device_memory,
    )


def _read_frame(parquet: Path, schema: dict[str, pl.DataType], *, rows: int) -> pl.DataFrame:
    with open_regular(parquet, follow=False) as handle:
        frame = pl.read_parquet(handle)
    if frame.schema != pl.Schema(schema) or frame.height != rows:
        raise ValueError(f"{parquet}: not the schema, or not the rows recorded")
    return without_null_columns(frame)


def _read_held(parquet: Path, item: _Trace) -> ByKind:
    """The events of ``<base>.parquet``, a kind at a time (each kind read alone: the file's
    columns are never all read at once, the nulls of one kind beside another's values), and of
    each kind the columns that are not one value or none there (those made literals again)."""
    schema = pl.Schema([*SCHEMA.items(), (ROW, pl.UInt32())])
    if sum(n for _, n in item.kinds) != item.rows:
        raise ValueError(f"{parquet}: its kinds do not hold the rows recorded")
    literals: Literals = {}
    for kind, column, value in item.literals:
        if column not in SCHEMA or (column == "kind" and value not in (None, kind)):
            raise ValueError(f"{parquet}: not the literals of its kinds")
        literals.setdefault(kind, {})[column] = value
    parts = {}
    with open_regular(parquet, follow=False) as handle:
        scan = pl.scan_parquet(handle)
        if scan.collect_schema() != schema:
            raise ValueError(f"{parquet}: not the schema")
        offset = 0
        for kind, rows in item.kinds:
            read = [c for c in schema if c not in literals.get(kind, {})]
            part = scan.slice(offset, rows).select(read).collect()
            if part.height != rows or (kind and "kind" in read and part.get_column("kind").ne_missing(kind).any()):
                raise ValueError(f"{parquet}: not the rows recorded")
            parts[kind] = part
            offset += rows
    return ByKind.read(parts, item.rows, pl.Schema(SCHEMA), literals)


def write_held(held: ByKind, path: Path) -> None:
    """``held``'s events, a kind after another, each with its place (:data:`ROW`), in one file."""
    if not held.parts:
        pl.DataFrame(schema={**SCHEMA, ROW: pl.UInt32}).write_parquet(path, compression="lz4", statistics=False)
        return
    index = pl.col(ROW).cast(pl.UInt32)
    kinds = [held.lazy(k).with_columns(index) for k in held.kinds()]  # each column in the schema's type
    pl.concat(kinds, how="vertical").sink_parquet(path, compression="lz4", statistics=False)


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    frame.write_parquet(path, compression="lz4", statistics=False)  # zstd: half the size, 1.5x the CPU


def _write_bytes(data: bytes, path: Path) -> None:
    path.write_bytes(data)


def replace_file(target: Path, write: Callable[[Path], object]) -> None:
    """Write through a temporary file and rename it, so that readers never see half a file. The
    rename replaces ``target`` itself, a link included: a cache entry never writes through a
    link to what it points at (``tracekit.atomic.write_text_atomically`` does, for the user's
    outputs; a cache entry that is a link to ``/dev/zero`` must not reach ``/dev/zero``)."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
