"""benchmarks/client_reduce.py: copies of one mapped rank reduce as the ranks they copy."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest

from benchmarks.client_reduce import copies, mapped_rank, tables, timed_reduce
from benchmarks.generate import SOURCES, Spec, generate
from tracekit.analyzers.analysis import reduce_outcome, run_options
from tracekit.analyzers.gains_held import KEPT_TABLES
from tracekit.executors import make_executor
from tracekit.pipeline import AnalyzeOptions, analyze_paths
from tracekit.pipeline.mapped import Settings

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.real


def test_copies_of_one_rank_reduce_as_the_ranks_they_copy(tmp_path: Path) -> None:
    # the generator writes the same events on every rank: 4 ranks analyzed are 4 copies of rank 0
    world = 4
    mapped, made = mapped_rank("dense", 0.2, world, tmp_path)
    assert mapped.summary is not None
    assert made["events_per_rank"] > 0
    summaries, meta = copies(mapped, world)
    assert [s.ranks for s in summaries] == [(r,) for r in range(world)]
    got = reduce_outcome(summaries, run_options(meta, Settings(use_cache=False), has_gpu=True), meta).analysis

    folder = generate(Spec(ranks=world, mb_per_rank=0.2, source=str(SOURCES["dense"])), tmp_path)
    options = AnalyzeOptions(executor=make_executor("local", jobs=1), jobs=1, use_cache=False, details=False)
    want = analyze_paths([folder], options).analysis
    for section in ("steps", "collectives", "ledger", "stragglers", "gpu_breakdown", "overlap", "dataloader"):
        assert msgspec.to_builtins(getattr(got, section)) == msgspec.to_builtins(getattr(want, section)), section
    # what the client gets of the rank: its steps' and collectives' tables, none of the gains' events
    sizes = tables(mapped.summary)
    assert sizes["collectives.found"]["rows"] == got.collectives.count
    assert all(sizes[f"gains.{t}"]["rows"] == 0 for t in KEPT_TABLES)

    timed = timed_reduce(mapped, world)
    assert (timed["ranks"], timed["collective_instances"]) == (world, got.collectives.count)
    assert timed["reduce_cpu_s"] > 0
