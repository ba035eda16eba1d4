"""The built-in analyses: each entry fills one field of :class:`~tracekit.results.analysis.Analysis`.

They use the seam a new analysis uses (:mod:`tracekit.analyzers.registry` says how to add one):
each names in ``requires`` the entries it reads (the intermediates of
:mod:`tracekit.analyzers.shared`, or another section), and the reduce runs those first, so the
order of this list carries no dependency. The sections with a field of ``Analysis`` of their own
(``title`` None) have hand-made tables and charts in :mod:`tracekit.reports.layout`.
"""

from __future__ import annotations

from typing import Any, Final

from tracekit.analyzers import gains, launches, ledger, memory, run_facts, run_traits, verdict_section, work
from tracekit.analyzers import sections as s
from tracekit.analyzers import shared as i
from tracekit.analyzers.mapreduce import Entry
from tracekit.results import analysis as a
from tracekit.results.launches import LaunchStats

#: What the verdict reads (through the gains, the evidence and the advice).
_VERDICT_READS: Final = (
    i.STEPS,
    i.LEDGER,
    i.SYNCS,
    i.OVERLAP,
    i.DATALOADER,
    i.COLLECTIVES,
    i.STRAGGLERS,
    i.KERNELS,
    i.IDLE,
)

ANALYSES: Final[tuple[Entry[Any], ...]] = (
    Entry("tracekit_version", cross_rank=s.version, result=str),
    Entry("facts", run_facts.facts_map, fold=run_facts.facts_fold),
    Entry("run", cross_rank=run_facts.facts_reduce, requires=(i.SPAN,), result=a.RunFacts),
    Entry("steps", s.steps_map, s.steps_reduce, requires=(i.STEPS,), result=a.StepsSection, fold=s.steps_fold),
    Entry("breakdown", s.breakdown_map, fold=s.breakdown_fold),
    Entry("gpu_breakdown", cross_rank=s.gpu_breakdown_reduce, requires=(i.MEASURED,), result=a.BreakdownSection),
    Entry("host_breakdown", cross_rank=s.host_breakdown_reduce, requires=(i.MEASURED,), result=a.BreakdownSection),
    Entry(
        "overlap", s.overlap_map, s.overlap_reduce, requires=(i.OVERLAP,), result=a.OverlapSection, fold=s.overlap_fold
    ),
    Entry(
        "kernels", s.kernels_map, s.kernels_reduce, requires=(i.KERNELS,), result=a.KernelsSection, fold=s.kernels_fold
    ),
    Entry(
        "annotations",
        s.annotations_map,
        s.annotations_reduce,
        requires=(i.ANNOTATIONS,),
        result=a.PhasesSection,
        fold=s.annotations_fold,
    ),
    Entry(
        "collectives",
        s.collectives_map,
        s.collectives_reduce,
        requires=(i.COLLECTIVES,),
        result=a.CollectivesSection,
        fold=s.collectives_fold,
    ),
    Entry("stragglers", cross_rank=s.stragglers_reduce, requires=(i.STRAGGLERS,), result=a.StragglersSection),
    Entry(
        "dataloader",
        s.dataloader_map,
        s.dataloader_reduce,
        requires=(i.DATALOADER,),
        result=a.DataLoaderSection,
        fold=s.dataloader_fold,
        version=2,  # 2: the DataLoader's own part of the fetch (loader_ns)
    ),
    Entry("host_syncs", s.syncs_map, s.syncs_reduce, requires=(i.SYNCS,), result=a.SyncsSection, fold=s.syncs_fold),
    Entry(
        "idle_causes",
        s.idle_map,
        s.idle_reduce,
        requires=(i.IDLE,),
        result=a.IdleSection,
        version=2,
        fold=s.idle_fold,
    ),
    Entry("memory", memory.memory_map, memory.memory_reduce, result=a.MemorySection, fold=memory.memory_fold),
    Entry(
        "ledger",
        ledger.ledger_map,
        s.ledger_reduce,
        requires=(i.LEDGER,),
        result=a.LedgerSection,
        fold=ledger.ledger_fold,
    ),
    Entry("gains", gains.gains_map, fold=gains.gains_fold),
    Entry("traits", run_traits.traits_map, fold=run_traits.traits_fold),
    Entry("verdict", cross_rank=verdict_section.verdict_reduce, requires=_VERDICT_READS, result=a.Verdict),
    Entry(
        "work", work.work_map, s.work_reduce, requires=(i.MEASURED, i.STEPS), result=a.WorkSection, fold=work.work_fold
    ),
    Entry(
        "launches",
        launches.launches_map,
        launches.launches_reduce,
        result=LaunchStats,
        title="Kernel launches",
        fold=launches.launches_fold,
    ),
)
