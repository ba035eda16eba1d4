"""The runs a path names, and the commands over several runs: ``tracekit compare`` and ``sweep``.

For a comparison, each side's path becomes its runs (a saved analysis, a capture folder, a
folder of repeated captures, trace files), each analyzed by :func:`~tracekit.pipeline.analyze.analyze_paths`
unless it is a saved analysis; a sweep folder's traced cells are analyzed for their verdicts.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

from tracekit.arguments import path_list, text_list
from tracekit.errors import InputError
from tracekit.pipeline.analyze import SUMMARY, AnalyzeOptions, analyze_paths
from tracekit.results.analysis import SCHEMA
from tracekit.sniff import HEAD_BYTES, schema_in

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from tracekit.analyzers.compare import Noise
    from tracekit.results.analysis import Analysis
    from tracekit.results.compare import Comparison
    from tracekit.results.sweep import SweepMatrix


def _schema_of(path: Path) -> str | None:
    """The ``schema`` a tracekit JSON file declares at its start, if it is one."""
    if path.suffix.lower() != ".json":
        return None
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from None
    return schema_in(head)


def run_folders(path: Path) -> list[Path]:
    """The runs a path names: itself, or, for a folder of repeated captures, each capture folder.

    A folder is one run when it holds a capture summary or trace files of its own; a folder
    whose only contents are capture folders (``out_dir/a/run1``, ``run2`` of ``--repeats``)
    is one run per capture folder, in name order.
    """
    if not path.is_dir() or (path / SUMMARY).is_file():
        return [path]
    from tracekit.readers.discover import is_trace_name  # noqa: PLC0415
    from tracekit.readers.own_outputs import own_output  # noqa: PLC0415  (polars: the readers' package)

    if any(is_trace_name(p) and p.is_file() and own_output(p) is None for p in path.iterdir()):
        return [path]
    captures = sorted(p for p in path.iterdir() if p.is_dir() and (p / SUMMARY).is_file())
    if captures:
        _check_repeats(path, captures)
    return captures or [path]


#: Config fields that differ between repeats of one run (each capture's own folder).
_OWN_FIELDS: Final = frozenset({"out_dir"})
#: A capture that failed leaves its folder under this suffix: not a run, and not pooled.
_FAILED_SUFFIX: Final = ".tracekit-failed"


def _check_repeats(path: Path, captures: Sequence[Path]) -> None:
    """Refuse a folder of repeats holding a run that is empty or no capture, or runs of different configs."""
    from tracekit.results.capture import load_capture_summary  # noqa: PLC0415

    for sub in sorted(p for p in path.iterdir() if p.is_dir() and p not in captures):
        if not sub.name.startswith(".") and not sub.name.endswith(_FAILED_SUFFIX):
            what = "an empty run" if not any(sub.iterdir()) else f"a run with no {SUMMARY}"
            names = ", ".join(p.name for p in captures)
            raise InputError(f"{what} beside the repeats {names}: not a capture, nothing to pool", path=sub)
    configs = {}
    for capture in captures:
        summary = capture / SUMMARY
        config = load_capture_summary(summary.read_bytes(), source=str(summary)).config or {}
        configs[capture.name] = {k: v for k, v in config.items() if k not in _OWN_FIELDS}
    first, *others = configs
    for other in others:
        keys = sorted(
            k for k in configs[first].keys() | configs[other].keys() if configs[first].get(k) != configs[other].get(k)
        )
        if keys:
            fields = ", ".join(f"{k} ({configs[first].get(k)!r} vs {configs[other].get(k)!r})" for k in keys[:4])
            more = f" and {len(keys) - 4} more" if len(keys) > 4 else ""
            raise InputError(
                f"runs {first} and {other} are captures of different configs: {fields}{more}: not repeats", path=path
            )


def analysis_only(options: AnalyzeOptions | None) -> AnalyzeOptions:
    """``options`` (or the defaults) for an analysis of which only the typed result is read: no
    details (every GPU idle interval stays where its rank was analyzed)."""
    return dataclasses.replace(options or AnalyzeOptions(), details=False)


def load_side(path: Path, options: AnalyzeOptions | None = None) -> list[Analysis]:
    """The analyses of one side of a comparison: a saved analysis (``analyze --json``), a
    capture folder or trace files (analyzed now), or a folder of repeated captures (each one)."""
    from tracekit.results.io import load_analysis  # noqa: PLC0415

    if not path.exists():
        raise InputError("no such file or folder", path=path)
    if path.is_file():
        schema = _schema_of(path)
        if schema == SCHEMA:
            return [load_analysis(path)]
        if schema is not None and schema.startswith("tracekit."):
            raise InputError(
                f"a {schema} file, not an analysis: compare saved analyses (tracekit analyze --json), "
                "capture folders or traces",
                path=path,
            )
    alone = analysis_only(options)
    return [analyze_paths([folder], alone).analysis for folder in run_folders(path)]


def _runs(path: Path) -> int:
    """How many runs :func:`load_side` reads at ``path``, without reading them."""
    return 1 if path.is_file() else len(run_folders(path)) if path.exists() else 1


def ab_folders(path: Path) -> tuple[Path, Path] | None:
    """``out_dir/a`` and ``out_dir/b`` of an A/B capture, when ``path`` is one."""
    a, b = path / "a", path / "b"
    return (a, b) if path.is_dir() and a.is_dir() and b.is_dir() else None


def pair(runs: Sequence[Path]) -> tuple[Path, Path]:
    """A and B from the command line: two runs, or one A/B capture folder holding a/ and b/."""
    if len(runs) == 1:
        found = ab_folders(runs[0])
        if found is None:
            raise InputError("give two runs (A B), or one A/B capture folder holding a/ and b/", path=runs[0])
        return found
    if len(runs) != 2:
        raise InputError(f"give two runs to compare (A B), not {len(runs)}")
    return runs[0], runs[1]


def compare_paths(
    a: Sequence[Path],
    b: Sequence[Path],
    *,
    options: AnalyzeOptions | None = None,
    noise: Noise | None = None,
    fail_if: Sequence[str] = (),
) -> Comparison:
    """Compare the runs at ``b`` against the baseline at ``a`` (each: paths of one side's runs)."""
    a = path_list(a, name="compare_paths: a")
    b = path_list(b, name="compare_paths: b")
    fail_if = text_list(fail_if, name="compare_paths: fail_if")
    from tracekit.analyzers.compare import compare, evaluate_gate, parse_gate  # noqa: PLC0415
    from tracekit.analyzers.compare.gate import check_runs  # noqa: PLC0415

    for spec in fail_if:  # a bad condition fails before any trace is read
        parse_gate(spec)
    check_runs(fail_if, sum(_runs(p) for p in a), sum(_runs(p) for p in b))
    runs_a = [x for p in a for x in load_side(p, options)]
    runs_b = [x for p in b for x in load_side(p, options)]
    comparison = compare(runs_a, runs_b, sources=([str(p) for p in a], [str(p) for p in b]), noise=noise)
    return evaluate_gate(comparison, fail_if) if fail_if else comparison


def sweep_matrix(
    path: Path, *, headroom_pct: float | None = None, options: AnalyzeOptions | None = None
) -> SweepMatrix:
    """The matrix of the sweep folder ``path`` (``tracekit sweep``), each traced cell's first
    capture that ran analyzed for its verdict."""
    from tracekit.analyzers.sweep import HEADROOM_PCT, build_matrix  # noqa: PLC0415
    from tracekit.results.sweep import load_sweep  # noqa: PLC0415

    record = path / "sweep.json"
    if not record.is_file():
        raise InputError("not a sweep folder (no sweep.json)", path=path)
    sweep = load_sweep(record.read_bytes(), source=str(record))
    verdicts = {}
    alone = analysis_only(options)
    for name in sweep.cells:
        run = next((r for r in sweep.runs if r.cell == name and not r.probe and r.status == "ok" and r.traced), None)
        if run is not None:
            verdicts[name] = analyze_paths([path / run.folder], alone).analysis.verdict.primary
    return build_matrix(
        sweep,
        source=str(path),
        headroom_pct=HEADROOM_PCT if headroom_pct is None else headroom_pct,
        verdicts=verdicts,
    )
