"""Trace files -> their rank traces: through the cache, in parallel processes.

Each file is read from the cache when it holds a valid entry, else decoded (in worker
processes when there is enough to read for workers to pay). A worker writes what it decoded
into the cache and answers only "done": the parent then reads the Parquet, which costs less
than pickling the frames back. Without a cache, workers return the frames themselves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit.errors import TracekitError
from tracekit.readers.cache import EventCache, FileIdentity
from tracekit.readers.kineto import read_kineto
from tracekit.readers.nsys import is_sqlite, read_nsys
from tracekit.readers.nsys_export import REP_SUFFIX, export_sqlite

if TYPE_CHECKING:
    from tracekit.readers.trace import RankTrace

#: Below this many bytes to decode in all, parse in this process: starting workers costs more.
PARALLEL_MIN_BYTES: Final = 64 * 1024 * 1024
_GZIP_MAGIC: Final = b"\x1f\x8b"

#: Called after each file with (file, files done, files in all).
ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Parsed:
    """What reading one file gave: its rank traces, or why it could not be read."""

    path: str
    traces: tuple[RankTrace, ...]
    error: str | None
    #: A worker stored the traces in the cache, for the parent to read from there.
    in_cache: bool = False


def read_file(path: str | Path, *, cache_root: Path | None = None) -> list[RankTrace]:
    """Read one trace file of any supported format into its ranks.

    ``.nsys-rep`` reports are exported to SQLite first (needs ``nsys`` on PATH; the export
    goes to ``cache_root``, default the cache folder); SQLite files (and anything named
    ``.sqlite``) are Nsight Systems exports; the rest is Kineto.
    """
    path = Path(path)
    if path.name.endswith(REP_SUFFIX):
        return read_nsys(export_sqlite(path, cache_root=cache_root), shown=path)
    if path.suffix == ".sqlite" or is_sqlite(path):
        return read_nsys(path)
    return [read_kineto(path)]


def _parse(path: str, cache_root: str | None, store: bool, in_worker: bool) -> Parsed:
    root = None if cache_root is None else Path(cache_root)
    try:
        identity = FileIdentity.of(path) if store else None  # before reading: what was read
        traces = read_file(path, cache_root=root)
    except TracekitError as exc:
        return Parsed(path, (), exc.reason)
    except Exception as exc:  # a reader bug must not lose the other ranks
        return Parsed(path, (), f"could not be read ({type(exc).__name__}: {exc})")
    if root is not None and identity is not None and EventCache(root).store(identity, traces) and in_worker:
        return Parsed(path, (), None, in_cache=True)
    return Parsed(path, tuple(traces), None)


def data_bytes(path: Path) -> int:
    """About how many bytes decoding ``path`` reads: a gzip file's uncompressed size."""
    try:
        size = path.stat().st_size
        if size < 18:
            return size
        with path.open("rb") as handle:
            if handle.read(2) != _GZIP_MAGIC:
                return size
            handle.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(handle.read(4), "little"))  # ISIZE: the size mod 2**32
    except OSError:
        return 0


def parse_files(
    paths: Sequence[Path],
    *,
    jobs: int,
    cache: EventCache | None = None,
    cache_root: Path | None = None,
    progress: ProgressCallback | None = None,
) -> list[Parsed]:
    """Read every file of ``paths`` (in their order), from ``cache`` where it is valid.

    ``cache_root`` is where ``.nsys-rep`` exports go when there is no ``cache`` (default:
    the cache folder).
    """
    names = [str(p) for p in paths]
    done: dict[str, Parsed] = {}

    def finish(result: Parsed) -> None:
        done[result.path] = result
        if progress:
            progress(result.path, len(done), len(names))

    for name in names:
        if cache is not None and (hit := cache.load(name)) is not None:
            finish(Parsed(name, tuple(hit), None))
    todo = sorted((n for n in names if n not in done), key=lambda n: data_bytes(Path(n)), reverse=True)
    folder = cache.root if cache is not None else cache_root
    root = None if folder is None else str(folder)
    if jobs <= 1 or len(todo) <= 1 or sum(data_bytes(Path(n)) for n in todo) < PARALLEL_MIN_BYTES:
        for name in todo:
            finish(_parse(name, root, cache is not None, in_worker=False))
    else:
        _parse_in_workers(todo, min(jobs, len(todo)), root, cache, finish)
    return [done[n] for n in names]


def _parse_in_workers(
    names: list[str], workers: int, root: str | None, cache: EventCache | None, finish: Callable[[Parsed], None]
) -> None:
    """Parse in ``workers`` processes; a file whose worker failed is parsed here instead."""
    retry: list[str] = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures: dict[Future[Parsed], str] = {pool.submit(_parse, n, root, cache is not None, True): n for n in names}
        for future in as_completed(futures):
            try:
                result = future.result()
            except Exception:  # a worker that died (out of memory, killed): retry in this process
                retry.append(futures[future])
                continue
            loaded = cache.load(result.path) if result.in_cache and cache is not None else None
            if result.in_cache and loaded is None:  # the file changed meanwhile: read it again
                retry.append(result.path)
                continue
            finish(result if loaded is None else Parsed(result.path, tuple(loaded), None))
    for name in retry:
        finish(_parse(name, root, cache is not None, in_worker=False))
