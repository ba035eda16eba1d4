"""Trace files -> their rank traces: through the cache, in parallel processes.

Each file is read from the cache when it holds a valid entry, else decoded (in worker
processes when there is enough to read for workers to pay). A worker writes what it decoded
as Parquet and answers only "done"; once every worker has exited, the parent reads the
Parquet (0.03 s for a 125 MB trace, against 0.16 s to pickle the frame back and forth), so
it never holds decoded ranks while the workers hold theirs. Without a cache the Parquet, and
the SQLite exports of ``.nsys-rep`` reports, go to temporary folders, removed afterwards.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.errors import TracekitError
from tracekit.pools import WorkerPool
from tracekit.readers.cache import EventCache, FileIdentity
from tracekit.readers.compressed import data_bytes
from tracekit.readers.formats import read_file

if TYPE_CHECKING:
    from tracekit.readers.trace import RankTrace

__all__ = ["PARALLEL_MIN_BYTES", "Parsed", "ProgressCallback", "data_bytes", "parse_files"]

#: Below this many bytes to decode in all, parse in this process: starting workers costs more.
PARALLEL_MIN_BYTES: Final = 64 * 1024 * 1024

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


def _parse(path: str, exports: str | None, store: str | None, in_worker: bool, jobs: int = 1) -> Parsed:
    """Read ``path`` (``.nsys-rep`` exports into ``exports``, in ``jobs`` processes where the
    reader splits one file), storing it in the cache at ``store``.

    A worker whose traces are stored answers with ``in_cache`` and no traces.
    """
    try:
        identity = None if store is None else FileIdentity.of(path)  # before reading: what was read
        traces = read_file(path, cache_root=None if exports is None else Path(exports), jobs=jobs)
    except (Exception, RecursionError, MemoryError, pl.exceptions.PanicException) as exc:
        return Parsed(path, (), _reason(exc))  # one file's failure must not lose the other ranks
    if store is not None and identity is not None and EventCache(store).store(identity, traces) and in_worker:
        return Parsed(path, (), None, in_cache=True)
    return Parsed(path, tuple(traces), None)


def _reason(exc: BaseException) -> str:
    """Why a file could not be read, from what reading it raised: the input's problem in its words,
    the machine's limits, or a bug of tracekit's (named as one)."""
    if isinstance(exc, TracekitError):
        return exc.reason
    if isinstance(exc, RecursionError):  # the decoder's depth limit: a trace nests a few levels
        return "its JSON nests deeper than any trace does (arrays or objects thousands deep)"
    if isinstance(exc, MemoryError):
        return "too large to read in this machine's memory (one value or the whole file)"
    if isinstance(exc, pl.exceptions.PanicException) and _exhausted(exc):  # no memory, or no threads
        return f"too large to read within this process's memory or thread limits ({_first_line(exc)})"
    return f"could not be read (tracekit bug, please report it: {type(exc).__name__}: {_first_line(exc)})"


#: What a native panic says when the process ran out of memory or threads (ulimit -v, a cgroup).
_EXHAUSTED: Final = ("Resource temporarily unavailable", "memory allocation", "out of memory", "Cannot allocate")


def _exhausted(exc: BaseException) -> bool:
    """Whether ``exc`` (a panic of polars) is the process's resources running out."""
    text = str(exc)
    return any(marker in text for marker in _EXHAUSTED)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else "no message"


def parse_files(
    paths: Sequence[Path],
    *,
    jobs: int,
    cache: EventCache | None = None,
    cache_root: Path | None = None,
    progress: ProgressCallback | None = None,
) -> list[Parsed]:
    """Read every file of ``paths`` (in their order), from ``cache`` where it is valid.

    ``.nsys-rep`` exports go to the root of ``cache``, else to ``cache_root``, else (no
    cache) to a temporary folder removed before this returns.
    """
    names = [str(p) for p in paths]
    done: dict[str, Parsed] = {}
    reported: set[str] = set()

    def report(path: str) -> None:
        if path not in reported:
            reported.add(path)
            if progress:
                progress(path, len(reported), len(names))

    def finish(result: Parsed) -> None:
        done[result.path] = result
        report(result.path)

    for name in names:
        if cache is not None and (hit := cache.load(name)) is not None:
            finish(Parsed(name, tuple(hit), None))
    todo = sorted((n for n in names if n not in done), key=lambda n: data_bytes(Path(n)), reverse=True)
    with _exports_folder(cache.root if cache is not None else cache_root) as exports:
        workers = min(jobs, len(todo))
        if workers <= 1 or sum(data_bytes(Path(n)) for n in todo) < PARALLEL_MIN_BYTES:
            store = None if cache is None else str(cache.root)
            for name in todo:  # one file at a time, each on every core its reader can use
                finish(_parse(name, exports, store, in_worker=False, jobs=jobs))
        elif cache is not None:
            _parse_in_workers(todo, workers, exports=exports, cache=cache, finish=finish, report=report)
        else:  # the workers hand their frames over through a cache of this run only
            with tempfile.TemporaryDirectory(prefix="tracekit-") as spool:
                _parse_in_workers(todo, workers, exports=exports, cache=EventCache(spool), finish=finish, report=report)
    return [done[n] for n in names]


@contextmanager
def _exports_folder(folder: Path | None) -> Iterator[str]:
    """``folder``, else a temporary folder removed on exit: where ``.nsys-rep`` exports go."""
    if folder is not None:
        yield str(folder)
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-exports-") as scratch:
        yield scratch


def _parse_in_workers(
    names: list[str],
    workers: int,
    *,
    exports: str | None,
    cache: EventCache,
    finish: Callable[[Parsed], None],
    report: Callable[[str], None],
) -> None:
    """Parse in ``workers`` processes; a file whose worker failed is parsed here instead.

    What workers stored in the cache is read once they have all exited, so that this
    process does not hold the decoded ranks while they still hold theirs.
    """
    retry: list[str] = []
    stored: list[str] = []
    with WorkerPool(workers) as pool:
        store = str(cache.root)
        futures: dict[Future[Parsed], str] = {pool.submit(_parse, n, exports, store, True): n for n in names}
        for future in as_completed(futures):
            try:
                result = future.result()
            except Exception:  # a worker that died (out of memory, killed): retry in this process
                retry.append(futures[future])
                continue
            if result.in_cache:
                stored.append(result.path)
                report(result.path)
            else:
                finish(result)
    for name in stored:
        loaded = cache.load(name)
        if loaded is None:  # the file changed meanwhile: read it again
            retry.append(name)
        else:
            finish(Parsed(name, tuple(loaded), None))
    for name in retry:
        finish(_parse(name, exports, None, in_worker=False))
