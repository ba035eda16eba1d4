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

from tracekit.analyzers import gains, launches, ledger, memory, run_facts, run_traits, verdict_section, work
from tracekit.analyzers import sections as s
from tracekit.analyzers.mapreduce import Entry
from tracekit.results import analysis as a

ANALYSES: Final[tuple[Entry, ...]] = (
    Entry("tracekit_version", cross_rank=s.version, result=str),
    Entry("facts", run_facts.facts_map),
    Entry("run", cross_rank=run_facts.facts_reduce, result=a.RunFacts),
    Entry("steps", s.steps_map, s.steps_reduce, result=a.StepsSection),
    Entry("breakdown", s.breakdown_map),
    Entry("gpu_breakdown", cross_rank=s.gpu_breakdown_reduce, result=a.BreakdownSection),
    Entry("host_breakdown", cross_rank=s.host_breakdown_reduce, result=a.BreakdownSection),
    Entry("overlap", s.overlap_map, s.overlap_reduce, result=a.OverlapSection),
    Entry("kernels", s.kernels_map, s.kernels_reduce, result=a.KernelsSection),
    Entry("annotations", s.annotations_map, s.annotations_reduce, result=a.PhasesSection),
    Entry("collectives", s.collectives_map, s.collectives_reduce, result=a.CollectivesSection),
    Entry("stragglers", cross_rank=s.stragglers_reduce, result=a.StragglersSection),
    Entry("dataloader", s.dataloader_map, s.dataloader_reduce, result=a.DataLoaderSection),
    Entry("host_syncs", s.syncs_map, s.syncs_reduce, result=a.SyncsSection),
    Entry("idle_causes", s.idle_map, s.idle_reduce, result=a.IdleSection),
    Entry("memory", memory.memory_map, memory.memory_reduce, result=a.MemorySection),
    Entry("ledger", ledger.ledger_map, s.ledger_reduce, result=a.LedgerSection),
    Entry("gains", gains.gains_map),
    Entry("traits", run_traits.traits_map),
    Entry("verdict", cross_rank=verdict_section.verdict_reduce, result=a.Verdict),
    Entry("work", work.work_map, s.work_reduce, result=a.WorkSection),
    Entry(
        "launches",
        launches.launches_map,
        launches.launches_reduce,
        result=launches.LaunchStats,
        title="Kernel launches",
    ),
)
