"""From trace paths to one analysis: the options, the executor, the capture summary beside them.

:func:`analyze_paths` maps the ranks where ``AnalyzeOptions(executor=...)`` runs them
(:mod:`tracekit.pipeline.shards`), reduces them here and attaches the ``summary.json`` of
``tracekit capture`` found beside the traces; :func:`write_details` writes the per-instance
tables the typed result leaves out.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.arguments import path_list
from tracekit.atomic import write_atomically
from tracekit.errors import InputError
from tracekit.results.capture import CAPTURE_SCHEMA, as_capture_summary
from tracekit.results.choices import AnalysisChoices
from tracekit.results.ranges import explain_non_finite

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    import polars as pl

    from tracekit.analyzers.analysis import Outcome
    from tracekit.executors import Executor
    from tracekit.results.capture import CaptureSummary

#: The file a capture writes beside its traces (a folder holding one is one run).
SUMMARY: Final = "summary.json"


@dataclass(frozen=True)
class AnalyzeOptions(AnalysisChoices):
    """How traces are read and analyzed (``tracekit analyze``'s options, for both sides of a comparison):
    the user's :class:`~tracekit.results.choices.AnalysisChoices` (``window``, ``steps``,
    ``include_warmup``, ``comm_kernels``) and where and how the ranks are read.

    ``executor``: where the per-rank map runs: ``"local"`` (``jobs`` processes on this
    machine), ``"dask"`` (a Dask cluster at ``scheduler``, else a local cluster of ``jobs``
    workers), or an :class:`~tracekit.executors.Executor` the caller made (and closes).
    ``details``: bring every GPU idle interval and the host's longest blocking calls to this
    process, for :attr:`~tracekit.analyzers.analysis.Outcome.details` (``--details``) and the
    annotated trace; no figure of the report reads them (the longest intervals of each rank, its
    one-time idle by host range and its syncs per step come back either way), so ``False`` does
    not send them from where each rank was analyzed, which a run of many large ranks needs
    (about 17 kB a rank-MB of trace, and up to 5,000 calls a rank).
    """

    ranks: set[int] | None = None
    rank: int | None = None
    jobs: int | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    executor: str | Executor = field(default="local", compare=False)
    scheduler: str | None = None
    progress: Callable[[str, int, int], None] | None = field(default=None, compare=False)
    stage: Callable[[str], None] | None = field(default=None, compare=False)
    details: bool = True


def analyze_paths(paths: Sequence[Path], options: AnalyzeOptions | None = None) -> Outcome:
    """Analyze the traces at ``paths`` (each rank read and analyzed where ``options.executor``
    runs it, the ranks combined here), attach the capture summary beside them and what it tells
    (:func:`~tracekit.analyzers.caveats.with_capture`)."""
    from tracekit.analyzers import run_kind  # noqa: PLC0415  (polars-heavy)
    from tracekit.analyzers.caveats import ranks_over_cores, with_capture  # noqa: PLC0415  (polars-heavy)
    from tracekit.pipeline.mapped import Settings  # noqa: PLC0415
    from tracekit.pipeline.shards import analyze_files  # noqa: PLC0415

    paths = path_list(paths, name="analyze_paths: paths")
    if options is not None and not isinstance(options, AnalyzeOptions):
        raise TypeError(f"analyze_paths: options must be an AnalyzeOptions, not a {type(options).__name__}")

    options = options or AnalyzeOptions()
    started = time.perf_counter()
    settings = Settings(
        **options.chosen(),
        cache_dir=None if options.cache_dir is None else str(Path(options.cache_dir).absolute()),
        use_cache=options.use_cache,
        rank=options.rank,
        ranks=None if options.ranks is None else frozenset(options.ranks),
    )
    capture = capture_summary(paths)
    with _executor(options) as executor:
        outcome = analyze_files(
            paths,
            executor=executor,
            settings=settings,
            progress=options.progress,
            stage=options.stage,
            cores_shared=ranks_over_cores(capture) is not None,
            captured_parallelism=run_kind.from_capture(capture),
            details=options.details,
        )
    analysis = msgspec.structs.replace(
        outcome.analysis,
        capture=capture,
        analysis_seconds=round(time.perf_counter() - started, 4),
    )
    return dataclasses.replace(outcome, analysis=with_capture(analysis))


@contextmanager
def _executor(options: AnalyzeOptions) -> Iterator[Executor]:
    """The executor ``options`` name (closed on exit), or the one it holds (left to its owner)."""
    if not isinstance(options.executor, str):
        yield options.executor
        return
    from tracekit.executors import make_executor  # noqa: PLC0415

    executor = make_executor(options.executor, jobs=options.jobs, scheduler=options.scheduler, single_use=True)
    try:
        yield executor
    finally:
        executor.close()


def capture_summary(paths: Iterable[str | Path]) -> CaptureSummary | None:
    """The ``summary.json`` of ``tracekit capture`` beside the traces, if there is one.

    Looked for in each folder given and beside each file given; a ``summary.json`` that is
    not a tracekit capture summary is ignored (it is context for the report, not input). One
    that says it is, but of a newer major version or malformed, is an :class:`InputError`
    naming it.
    """
    from tracekit.readers.discover import is_regular  # noqa: PLC0415  (readers import polars)

    for raw in paths:
        path = Path(raw)
        folder = path if path.is_dir() else path.parent
        candidate = folder / SUMMARY
        if not is_regular(candidate):  # absent, or a FIFO that would block
            continue
        try:
            text = candidate.read_bytes()
            data = msgspec.json.decode(text)
        except OSError:
            continue
        except msgspec.DecodeError:  # NaN or Infinity in a capture summary: named, not ignored
            if (reason := explain_non_finite(text)) is not None and CAPTURE_SCHEMA.encode() in text:
                raise InputError(reason, path=candidate) from None
            continue
        if isinstance(data, dict) and data.get("schema") == CAPTURE_SCHEMA:
            return as_capture_summary(data, source=str(candidate))
    return None


def write_details(details: dict[str, pl.DataFrame], path: str | Path) -> None:
    """Write the per-instance tables (:attr:`~tracekit.analyzers.analysis.Outcome.details`) as one
    Parquet file, atomically (see :func:`~tracekit.analyzers.analysis.details_frame`)."""
    from tracekit.analyzers.analysis import details_frame  # noqa: PLC0415

    write_atomically(path, details_frame(details).write_parquet)
