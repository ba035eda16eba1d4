"""The registry of analyses: each entry fills one field of :class:`~tracekit.results.analysis.Analysis`.

To add an analysis: write its module (a per-rank function of a ``RankContext`` returning
frames, a cross-rank function of the ``Reduced`` shards returning its typed result, the
result's Struct) and add one line here with its ``title``: the result goes to
``Analysis.sections`` and every report shows it (``tracekit/analyzers/launches.py`` is one).
The sections with a field of ``Analysis`` of their own (``title`` None) have hand-made tables
and charts in :mod:`tracekit.reports.layout`. Cross-rank parts run in this order, except that
an entry runs after the entries it ``requires``.
"""

from __future__ import annotations

from typing import Final

from tracekit.analyzers import launches, ledger, memory, work
from tracekit.analyzers import sections as s
from tracekit.analyzers.mapreduce import Entry

ANALYSES: Final[tuple[Entry, ...]] = (
    Entry("tracekit_version", cross_rank=s.version),
    Entry("facts", s.facts_map),
    Entry("run", cross_rank=s.facts_reduce),
    Entry("steps", s.steps_map, s.steps_reduce),
    Entry("breakdown", s.breakdown_map),
    Entry("gpu_breakdown", cross_rank=s.gpu_breakdown_reduce),
    Entry("host_breakdown", cross_rank=s.host_breakdown_reduce),
    Entry("overlap", s.overlap_map, s.overlap_reduce),
    Entry("kernels", s.kernels_map, s.kernels_reduce),
    Entry("annotations", s.annotations_map, s.annotations_reduce),
    Entry("collectives", s.collectives_map, s.collectives_reduce),
    Entry("stragglers", cross_rank=s.stragglers_reduce),
    Entry("dataloader", s.dataloader_map, s.dataloader_reduce),
    Entry("host_syncs", s.syncs_map, s.syncs_reduce),
    Entry("idle_causes", s.idle_map, s.idle_reduce),
    Entry("memory", memory.memory_map, memory.memory_reduce),
    Entry("ledger", ledger.ledger_map, s.ledger_reduce),
    Entry("verdict", cross_rank=s.verdict_reduce),
    Entry("work", work.work_map, s.work_reduce),
    Entry(
        "launches",
        launches.launches_map,
        launches.launches_reduce,
        result=launches.LaunchStats,
        title="Kernel launches",
    ),
)
