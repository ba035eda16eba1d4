"""Orchestration: from paths on disk to typed results; what ``tracekit analyze``, ``compare`` and
``sweep`` run.

The one place that joins the readers, the analyzers and the executors (DESIGN.md's layer table):

- :mod:`~tracekit.pipeline.analyze`: trace paths to one analysis (:func:`analyze_paths`), with
  the capture summary found beside them attached, and the per-instance tables written
  (:func:`write_details`);
- :mod:`~tracekit.pipeline.annotated_trace`: the traces with the findings added as tracks
  (:func:`write_annotated_trace`, for Perfetto and chrome://tracing);
- :mod:`~tracekit.pipeline.shards`: the map of shards of files where an executor runs it (local
  processes, Dask workers), and the cross-rank reduce;
- :mod:`~tracekit.pipeline.mapped`: what the map takes and gives (settings, shards, results);
- :mod:`~tracekit.pipeline.map_cache`: the map's results cached, so that a warm run only reduces;
- :mod:`~tracekit.pipeline.runs`: the runs a path names, and the commands over several runs
  (:func:`compare_paths`, :func:`sweep_matrix`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.lazy import lazy_exports

if TYPE_CHECKING:
    from tracekit.pipeline.analyze import AnalyzeOptions, analyze_paths, capture_summary, write_details
    from tracekit.pipeline.annotated_trace import write_annotated_trace
    from tracekit.pipeline.runs import ab_folders, compare_paths, load_side, pair, run_folders, sweep_matrix

#: Each name, and its module: imported when first used (PEP 562), so that a command imports
#: what it runs (``tracekit compare`` of saved analyses reads no trace: no reader is imported).
_LAZY = {
    **dict.fromkeys(("AnalyzeOptions", "analyze_paths", "capture_summary", "write_details"), "analyze"),
    "write_annotated_trace": "annotated_trace",
    **dict.fromkeys(("ab_folders", "compare_paths", "load_side", "pair", "run_folders", "sweep_matrix"), "runs"),
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "AnalyzeOptions",
    "ab_folders",
    "analyze_paths",
    "capture_summary",
    "compare_paths",
    "load_side",
    "pair",
    "run_folders",
    "sweep_matrix",
    "write_annotated_trace",
    "write_details",
]
