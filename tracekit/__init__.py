"""tracekit: why is this distributed PyTorch training run slow?

The public entry points of the analysis half are :func:`tracekit.readers.load_run`
(files on disk to a :class:`tracekit.model.Run`),
:func:`tracekit.analyzers.analyze` (a ``Run`` to an :class:`~tracekit.analyzers.Analysis`) and
:func:`tracekit.pipeline.analyze_paths` (files on disk to the analysis, shard by shard, on the
executor its ``AnalyzeOptions(executor=...)`` names: local processes or a Dask cluster).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
