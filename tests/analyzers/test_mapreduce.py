"""The per-rank map and cross-rank reduce: sharding the ranks never changes the result."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.many_ranks import synthetic_run
from tests.conftest import analysis_of
from tracekit.analyzers import run_analysis
from tracekit.analyzers.context import Options
from tracekit.analyzers.mapreduce import map_ranks
from tracekit.analyzers.registry import ANALYSES
from tracekit.readers import load_run
from tracekit.results.analysis import Analysis


@pytest.mark.parametrize("size", [1, 3, 5])
def test_shards_of_any_size_reduce_to_the_same_analysis(size: int) -> None:
    run = synthetic_run(7, steps=2, kernels=3)
    assert run_analysis(run, shard_ranks=size).analysis == run_analysis(run).analysis


@pytest.mark.real
def test_shards_of_real_ranks_reduce_to_the_same_analysis(kineto_dir: Path) -> None:
    run = load_run([kineto_dir / "param-dlrm-8rank-v100"])
    whole = analysis_of([kineto_dir / "param-dlrm-8rank-v100"]).analysis
    assert run_analysis(run, shard_ranks=1).analysis == whole
    assert run_analysis(run, shard_ranks=3).analysis == whole


def test_every_result_field_has_a_registry_entry() -> None:
    names = {e.name for e in ANALYSES if e.cross_rank is not None}
    required = {f for f in Analysis.__struct_fields__ if f not in ("schema", "schema_version", "analysis_seconds")}
    assert required - {"capture"} <= names


def test_the_map_returns_small_frames_per_rank() -> None:
    run = synthetic_run(4, steps=2, kernels=3)
    summary = map_ranks(run, Options(), ANALYSES)
    assert summary.ranks == (0, 1, 2, 3)
    steps = summary.parts["steps"]["steps"]
    assert steps.height == 8 and sorted(steps["rank"].unique().to_list()) == [0, 1, 2, 3]
