"""A cache of the per-rank map's results: what mapping a shard of files gave, keyed by the files'
identity, tracekit's version and the options the map depends on.

A warm ``tracekit analyze`` with the same options then reads one small entry per shard instead
of the shard's events, and runs only the cross-rank reduce and the reports. An entry is
``<root>/maps/<stem>.msgpack``, ``<stem>`` a digest of the shard's files and options, so that
runs with other options (``--steps``, ``--window``, ``--ranks``...) keep entries of their own.
What the map depends on, and an entry records and is checked against (:class:`_Key`):

- every file's :class:`~tracekit.readers.identity.FileIdentity` (path, size, times, inode, a
  digest of sampled blocks): a changed file misses;
- tracekit's version, :data:`MAP_CACHE_VERSION` (the entry's layout) and the event cache's
  :data:`~tracekit.readers.cache.CACHE_VERSION` (what the readers give);
- the registry (:func:`analyses_key`): every per-rank entry's name, its ``version`` and a digest
  of its per-rank function's code, so that an analysis added, removed or changed (its code, or
  its version when what it gives changed elsewhere) misses every entry made without it: a
  cache never serves a result that other code computed, and a registered analysis without a
  stored part is a miss, never a section that vanishes;
- the files' paths as given (the claims, and the reports, name them so);
- the options of :class:`~tracekit.pipeline.mapped.Settings` but where the files are cached and
  how many processes decode them (``cache_dir``, ``use_cache``, ``jobs``), and what the client
  decided after a wrong guess (the shard's ``has_gpu`` and ``ranks``).

The file is ``MAGIC``, the CRC-32 of the rest (gzip's check: damage, not tampering, is what a
local cache entry meets), then msgpack: the key, the files' claims and the per-rank parts, each
table an Arrow IPC stream. A shard with an unreadable file is not stored (its reason may not
last). Written as the event cache writes (a temporary file renamed, one writer per entry under
``<stem>.lock``, waited for a bounded time). An entry that is absent,
of another key or of an older layout (:data:`OLD_MAGIC`) is a miss; one that cannot be read or
decoded, whose checksum does not match or whose tables are not what the map gives, is *damaged*:
the shard is mapped again, the entry replaced, and the client warns once (:class:`CacheWarning`):
never wrong numbers, never an error.
"""

from __future__ import annotations

import functools
import hashlib
import io
import types
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import msgspec
import polars as pl

from tracekit import __version__
from tracekit.analyzers import registry
from tracekit.analyzers.mapreduce import Entry, RankSummary, in_order
from tracekit.analyzers.parts import Parts, PartsError
from tracekit.locks import entry_lock
from tracekit.pipeline.mapped import Mapped
from tracekit.readers.cache import CACHE_VERSION, replace_file
from tracekit.readers.claims import FileClaims  # noqa: TC001  (msgspec reads annotations at run time)
from tracekit.readers.compressed import crc32
from tracekit.readers.identity import FileIdentity, mapped_regular
from tracekit.readers.load import event_cache

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.pipeline.mapped import Settings, Shard

__all__ = ["MAP_CACHE_VERSION", "CacheWarning", "MapCache", "analyses_key", "look_up", "through_cache"]

#: Bump whenever what an entry holds, or what the per-rank map gives for the same version, changes
#: (2: tables as Arrow IPC streams, read 9x faster than IPC files; 3: capture_sync; 4: launches
#: per rank; 5: a rank's device tasks once each; 6: steps inferred only from a loop over most of
#: the rank, and the time each rank leaves out of its window; 7: an older capture's own step-end
#: sync found by its place, one-time work of graph recording and the profiler, device_gap; 8: what
#: the advice depends on, run_traits; 9: the registry's entries in the key).
MAP_CACHE_VERSION: Final = 11
#: The first bytes of an entry; a change of the key's or the entry's fields takes a new one, so
#: that an entry of the older layout is a silent miss, not damage that warns.
MAGIC: Final = b"TKMAP\x00\x03\x00"
#: Those of the older layouts: a miss, replaced, not damage. 1: a BLAKE2b digest before the
#: CRC-32 (57 ms for 8 x 125 MB's maps); 2: a key without the registry's analyses.
OLD_MAGIC: Final = (b"TKMAP\x00\x01\x00", b"TKMAP\x00\x02\x00")
_DIGEST: Final = 4
#: The largest entry read (a shard's map results are small: tables per rank and step, not events).
_LIMIT: Final = 1 << 30
_LOCK_WAIT_S: Final = 30.0
#: The settings that do not change what the map gives.
_NOT_KEYED: Final = frozenset({"cache_dir", "use_cache", "jobs"})


class CacheWarning(UserWarning):
    """A cache entry was damaged: what it held was computed again (and the entry replaced)."""


class _Key(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    tracekit: str
    map_version: int
    cache_version: int
    sources: tuple[FileIdentity, ...]
    #: the shard's options and decisions, as canonical JSON
    options: str
    #: the per-rank analyses that made the parts (:func:`analyses_key`)
    analyses: str


#: What an entry's tables are: ``bytes`` when it is written, views of the entry's bytes when it
#: is read (:meth:`MapCache.load`: each table copied once, into polars).
B = TypeVar("B", bytes, memoryview)


class _Part(msgspec.Struct, Generic[B], frozen=True, forbid_unknown_fields=True):
    entry: str
    #: the :class:`~tracekit.analyzers.parts.Parts` subclass, by module and name
    kind: str
    tables: dict[str, B]


class _Entry(msgspec.Struct, Generic[B], frozen=True, forbid_unknown_fields=True):
    key: _Key
    files: tuple[FileClaims, ...]
    #: (path, trace index, rank) of each trace analyzed
    ranks: tuple[tuple[str, int, int], ...]
    has_gpu: bool
    gpu: tuple[tuple[str, int], ...]
    summary_ranks: tuple[int, ...] | None
    parts: tuple[_Part[B], ...]
    counts: B


class Damaged(Exception):
    """An entry that is there but cannot be used as it is."""


class MapCache:
    """The map results' entries under ``<root>/maps``."""

    def __init__(self, root: str | Path) -> None:
        self.folder = Path(root) / "maps"

    def key(self, shard: Shard) -> tuple[str, _Key] | None:
        """The stem and key of ``shard`` now; None when one of its files cannot be identified."""
        try:
            sources = tuple(FileIdentity.of(p) for p in shard.paths)
        except (OSError, ValueError):
            return None
        settings = {k: v for k, v in asdict(shard.settings).items() if k not in _NOT_KEYED}
        settings["ranks"] = None if shard.settings.ranks is None else sorted(shard.settings.ranks)
        decided = None if shard.ranks is None else sorted([p, i, r] for (p, i), r in shard.ranks.items())
        # the paths as given too: the claims and the report name the files as they were spelled
        given = {"paths": list(shard.paths), "settings": settings, "has_gpu": shard.has_gpu, "ranks": decided}
        options = msgspec.json.encode(given).decode()
        key = _Key(__version__, MAP_CACHE_VERSION, CACHE_VERSION, sources, options, analyses_key(registry.ANALYSES))
        named = "\0".join([options, *(s.path for s in sources)]).encode()
        return hashlib.sha1(named, usedforsecurity=False).hexdigest()[:24], key

    def load(self, stem: str, key: _Key) -> Mapped | None:
        """The entry of ``stem`` if it holds ``key``'s results; None when there is none or another
        key's; :class:`Damaged` when it is there but unusable."""
        path = self.folder / f"{stem}.msgpack"
        try:
            with mapped_regular(path, limit=_LIMIT, follow=False) as data:
                return self._read(data, key)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Damaged(f"cannot read it ({exc.strerror or type(exc).__name__})") from None

    @staticmethod
    def _read(data: memoryview, key: _Key) -> Mapped | None:
        """:meth:`load` of an entry's bytes (every view of them let go when it returns)."""
        magic = bytes(data[: len(MAGIC)])
        if magic != MAGIC:
            if magic in OLD_MAGIC:
                return None
            raise Damaged("not a tracekit map cache entry")
        body = data[len(MAGIC) + _DIGEST :]
        if checksum(body) != data[len(MAGIC) : len(MAGIC) + _DIGEST]:
            raise Damaged("its checksum does not match")
        try:
            entry = msgspec.msgpack.decode(body, type=_Entry[memoryview])
        except msgspec.MsgspecError as exc:
            raise Damaged(f"not an entry of this shape ({exc})") from None
        if entry.key != key:
            return None
        if entry.summary_ranks is not None and {p.entry for p in entry.parts} != _per_rank(registry.ANALYSES):
            return None  # an analysis without its part (or a part of none): mapped again, never left out
        return _mapped(entry)

    def store(self, stem: str, key: _Key, mapped: Mapped) -> bool:
        """Write the entry of ``stem``; False when it cannot be written (never an error)."""
        if any(f.error is not None for f in mapped.files):
            return False
        try:
            body = msgspec.msgpack.encode(_entry(key, mapped))
            self.folder.mkdir(parents=True, exist_ok=True)
        except (OSError, pl.exceptions.PolarsError, msgspec.MsgspecError, TypeError):
            return False
        head = MAGIC + checksum(body)
        with entry_lock(self.folder / f"{stem}.lock", wait_s=_LOCK_WAIT_S) as locked:
            if not locked:  # another process is writing it: it is that one's to write
                return False
            try:
                replace_file(self.folder / f"{stem}.msgpack", lambda tmp: _write(tmp, head, body))
            except OSError:
                return False
        return True


def _write(path: Path, *parts: bytes) -> None:
    """``parts`` written one after the other to ``path`` (not joined first: a copy of the entry)."""
    with path.open("wb") as out:
        for part in parts:
            out.write(part)


def _per_rank(entries: Sequence[Entry[Any]]) -> set[str]:
    return {e.name for e in in_order(entries) if e.per_rank is not None}


@functools.cache
def analyses_key(entries: tuple[Entry[Any], ...]) -> str:
    """What the registry's per-rank analyses are: each one's name, version, function and a
    digest of its code (the bytecode and constants of the function and the functions it
    defines, not where the file lies), as canonical JSON."""
    out = []
    for e in in_order(entries):
        if e.per_rank is None:
            continue
        fn = e.per_rank
        code = getattr(fn, "__code__", None)
        digest = hashlib.sha1(usedforsecurity=False)
        if isinstance(code, types.CodeType):
            _digest_code(code, digest)
        named = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
        out.append([e.name, e.version, named, digest.hexdigest()[:16]])
    return msgspec.json.encode(out).decode()


def _digest_code(code: types.CodeType, digest: Any) -> None:
    """Feed ``code``'s bytecode, names and constants (nested functions' too) to ``digest``."""
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _digest_code(const, digest)
        elif isinstance(const, frozenset):  # its order follows string hashing, which varies by process
            digest.update(repr(sorted(map(repr, const))).encode())
        else:
            digest.update(repr(const).encode())


def checksum(body: bytes | memoryview) -> bytes:
    """What an entry records of its ``body``: its CRC-32, little-endian."""
    return crc32(body).to_bytes(_DIGEST, "little")


def _cache_of(settings: Settings) -> MapCache | None:
    """The map cache beside the event cache of ``settings`` (the default folder unless it names one)."""
    events = event_cache(settings.cache_dir, use_cache=settings.use_cache)
    return None if events is None else MapCache(events.root)


def look_up(shard: Shard) -> tuple[Mapped | None, tuple[str, ...]]:
    """What the map cache holds for ``shard`` (None: nothing usable), and what was wrong with its
    entry, if it was damaged (a line for the client to warn with)."""
    cache = _cache_of(shard.settings)
    keyed = None if cache is None else cache.key(shard)
    if cache is None or keyed is None:
        return None, ()
    try:
        return cache.load(*keyed), ()
    except Damaged as exc:
        return None, (f"the map cache entry {cache.folder / keyed[0]}.msgpack was damaged ({exc}): analyzed again",)


def through_cache(shard: Shard, compute: Callable[[Shard], Mapped]) -> Mapped:
    """What mapping ``shard`` gives: the map cache's entry, else ``compute(shard)``, stored in the
    cache. (The client looks every shard up first; a worker looks again, in the cache folder it
    sees: on a Dask worker without ``--cache-dir``, its own node's.)"""
    cache = _cache_of(shard.settings)
    keyed = None if cache is None else cache.key(shard)
    if cache is None or keyed is None:
        return compute(shard)
    found, notes = look_up(shard)
    if found is not None:
        return found
    mapped = compute(shard)
    cache.store(*keyed, mapped)
    return replace(mapped, notes=notes) if notes else mapped


def _ipc(frame: pl.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.write_ipc_stream(out, compression="uncompressed")
    return out.getvalue()


def _frame(data: bytes | memoryview) -> pl.DataFrame:
    try:
        # a stream, not a file: polars reads a file through a lazy scan, ~0.8 ms a table
        return pl.read_ipc_stream(io.BytesIO(data))
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise Damaged(f"a table cannot be read ({type(exc).__name__})") from None


def _kinds() -> dict[str, type[Parts]]:
    """Every :class:`Parts` subclass (the analyzers' modules are imported by their registry)."""
    return {f"{kind.__module__}.{kind.__qualname__}": kind for kind in Parts.kinds()}


def _entry(key: _Key, mapped: Mapped) -> _Entry[bytes]:
    summary = mapped.summary
    parts = () if summary is None else summary.parts.items()
    return _Entry(
        key=key,
        files=mapped.files,
        ranks=tuple((p, i, r) for (p, i), r in mapped.ranks.items()),
        has_gpu=mapped.has_gpu,
        gpu=tuple(sorted(mapped.gpu)),
        summary_ranks=None if summary is None else summary.ranks,
        parts=tuple(
            _Part(name, f"{type(p).__module__}.{type(p).__qualname__}", {k: _ipc(v) for k, v in p.tables().items()})
            for name, p in parts
        ),
        counts=_ipc(mapped.counts),
    )


def _mapped(entry: _Entry[memoryview]) -> Mapped:
    kinds = _kinds()
    parts: dict[str, Parts] = {}
    for part in entry.parts:
        kind = kinds.get(part.kind)
        if kind is None or set(part.tables) != set(kind.names()):
            raise Damaged(f"its part {part.entry!r} is not what the analysis gives")
        try:
            parts[part.entry] = kind(**{k: _frame(v) for k, v in part.tables.items()})
        except PartsError:  # a table of other columns than the part declares: made by other code
            raise Damaged(f"its part {part.entry!r} is not what the analysis gives") from None
    summary = None if entry.summary_ranks is None else RankSummary(ranks=entry.summary_ranks, parts=parts)
    return Mapped(
        files=entry.files,
        ranks={(p, i): r for p, i, r in entry.ranks},
        has_gpu=entry.has_gpu,
        gpu=frozenset(entry.gpu),
        summary=summary,
        counts=_frame(entry.counts),
    )
