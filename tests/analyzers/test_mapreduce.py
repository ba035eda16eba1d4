"""The per-rank map and cross-rank reduce: sharding the ranks never changes the result."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path
from typing import get_args, get_type_hints

import polars as pl
import pytest

from benchmarks.many_ranks import synthetic_run
from tests.conftest import analysis_of
from tracekit.analyzers import analysis, registry, run_analysis
from tracekit.analyzers.context import Options, RankContext
from tracekit.analyzers.mapreduce import Entry, RankSummary, Reduced, in_order, map_ranks, reduce_ranks
from tracekit.analyzers.registry import ANALYSES
from tracekit.analyzers.shared import STEPS
from tracekit.analyzers.steps import StepResult
from tracekit.readers import load_run
from tracekit.results.analysis import Analysis


@pytest.mark.parametrize("size", [1, 3, 5])
def test_shards_of_any_size_reduce_to_the_same_analysis(size: int) -> None:
    run = synthetic_run(7, steps=2, kernels=3)
    assert run_analysis(run, shard_ranks=size).analysis == run_analysis(run).analysis


@pytest.mark.e2e  # the largest shared run (DLRM, 8 ranks): shards of any size of a small run stay in the fast lane
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
@pytest.mark.real
def test_shards_of_real_ranks_reduce_to_the_same_analysis(kineto_dir: Path) -> None:
    run = load_run([kineto_dir / "param-dlrm-8rank-v100"])
    whole = analysis_of([kineto_dir / "param-dlrm-8rank-v100"]).analysis
    assert run_analysis(run, shard_ranks=1).analysis == whole
    assert run_analysis(run, shard_ranks=3).analysis == whole


def test_a_gathered_kind_is_held_once() -> None:
    """The shards' tables of a kind gathered are released (held in the gathered copy only), in
    rank order as each shard gave them; the other kinds stay with the shards."""
    from tracekit.analyzers.gains import GainParts
    from tracekit.analyzers.parts import StepParts

    run = synthetic_run(6, steps=2, kernels=3)
    shards = [map_ranks(RankContext(part, Options()), ANALYSES) for part in analysis.shards(run, 3)]
    frames = [s.parts[n].frames for s in shards for n, p in s.parts.items() if type(p) is GainParts]
    reduced = Reduced(shards=shards, options=Options(), run_meta=run.meta)
    gathered = reduced.gather(GainParts)
    assert gathered.frames.equals(pl.concat(frames))
    assert gathered.frames["rank"].unique().to_list() == list(range(6))
    assert not any(type(p) is GainParts for s in shards for p in s.parts.values())
    assert all(any(type(p) is StepParts for p in s.parts.values()) for s in shards)
    assert reduced.gather(GainParts) is gathered


def test_shards_tables_of_other_column_types_gather_in_their_common_type() -> None:
    """A shard whose column is all null (polars' Null type) or of a narrower type than the
    others' is gathered with them in the type that holds both, as when every shard agrees."""
    from tracekit.analyzers.parts import FactParts

    def shard(rank: int, span: pl.DataFrame) -> RankSummary:
        return RankSummary(ranks=(rank,), parts={"facts": FactParts(span=span)})

    def reduced(*spans: pl.DataFrame) -> pl.DataFrame:
        shards = [shard(i, s) for i, s in enumerate(spans)]
        return Reduced(shards=shards, options=Options(), run_meta=synthetic_run(1).meta).gather(FactParts).span

    columns = sorted(FactParts.COLUMNS["span"])
    full = pl.DataFrame({c: [1] for c in columns}, schema=dict.fromkeys(columns, pl.Int64))
    same = reduced(full.with_columns(rank=pl.lit(0, dtype=pl.Int64)), full)
    assert same.schema == full.schema
    assert same["rank"].to_list() == [0, 1]
    null = full.with_columns(pl.lit(None).alias("busy_ns"), rank=pl.lit(0, dtype=pl.Int64))
    narrow = full.with_columns(pl.col("steps").cast(pl.Int32), rank=pl.lit(2, dtype=pl.Int64))
    mixed = reduced(null, full, narrow)
    assert mixed.schema == full.schema
    assert mixed["busy_ns"].to_list() == [None, 1, 1]
    assert mixed["rank"].to_list() == [0, 1, 2]
    assert mixed.n_chunks() == 1


#: Fields of Analysis that no registry entry fills: the schema, the timing, the capture's
#: summary (attached by the orchestration) and the registered sections without a field.
NOT_ENTRIES = {"schema", "schema_version", "analysis_seconds", "capture", "sections"}


def test_every_result_field_has_a_registry_entry() -> None:
    names = {e.name for e in ANALYSES if e.cross_rank is not None}
    assert set(Analysis.__struct_fields__) - NOT_ENTRIES <= names


@pytest.mark.parametrize("entry", [e for e in ANALYSES if e.cross_rank is not None], ids=lambda e: e.name)
def test_every_entry_fills_a_field_of_its_type_or_a_titled_section(entry: Entry) -> None:
    hints = get_type_hints(Analysis)
    if entry.title is None:
        assert entry.name in Analysis.__struct_fields__, f"{entry.name}: no field of Analysis and no title"
        assert entry.result is not None, f"{entry.name}: declare its result type"
        assert entry.result in get_args(hints[entry.name]) or hints[entry.name] is entry.result
    else:
        assert entry.name not in Analysis.__struct_fields__, f"{entry.name}: titled, but Analysis has its field"
        assert entry.result is not None and entry.per_rank is not None


def test_entries_run_after_what_they_require() -> None:
    first = Entry("first", cross_rank=lambda red: 1)
    second = Entry("second", cross_rank=lambda red: red.result("first") + 1, requires=("first",))
    assert [e.name for e in in_order([second, first])] == ["first", "second"]
    with pytest.raises(ValueError, match="not registered"):
        in_order([second])
    loop = Entry("first", requires=("second",))
    with pytest.raises(ValueError, match="requires itself"):
        in_order([second, loop])
    named = Entry("named", cross_rank=lambda red: 0)
    reader = Entry("reader", cross_rank=lambda red: red.result(named) + 1, requires=(named,))
    assert [e.name for e in in_order([reader])] == ["named", "reader"]  # an Entry required runs unlisted
    listed = Entry("named", cross_rank=lambda red: 5)
    assert in_order([reader, listed])[0] is listed  # a listed entry of the same name stands for it


def test_the_registry_order_carries_no_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: every entry names what it reads, so the registry reversed gives the same analysis."""
    run = synthetic_run(3, steps=3, kernels=4)
    before = run_analysis(run).analysis
    monkeypatch.setattr(registry, "ANALYSES", tuple(reversed(registry.ANALYSES)))
    assert run_analysis(run).analysis == before


def test_a_required_result_is_typed_and_shared() -> None:
    run = synthetic_run(2, steps=2, kernels=3)

    def height(red: Reduced) -> int:
        steps: StepResult = red.result(STEPS)  # typed: STEPS is an Entry[StepResult]
        return steps.steps.height

    one = Entry("one", cross_rank=height, requires=(STEPS,))
    two = Entry("two", cross_rank=lambda red: id(red.result(STEPS)), requires=(STEPS,))
    three = Entry("three", cross_rank=lambda red: id(red.result(STEPS)), requires=(STEPS,))
    reduced = reduce_ranks([map_ranks(RankContext(run, Options()), ANALYSES)], Options(), [one, two, three], run.meta)
    assert reduced.result(one) == 4  # 2 ranks x 2 steps
    assert reduced.result("two") == reduced.result("three") == id(reduced.result(STEPS))  # reduced once


def test_a_result_read_before_it_is_reduced_says_which_requirement_is_missing() -> None:
    run = synthetic_run(2, steps=2, kernels=3)
    early = Entry("early", cross_rank=lambda red: red.result("verdict"))
    with pytest.raises(KeyError, match="requires"):
        reduce_ranks([map_ranks(RankContext(run, Options()), [])], Options(), [early], run.meta)


def test_the_map_returns_small_frames_per_rank() -> None:
    run = synthetic_run(4, steps=2, kernels=3)
    summary = map_ranks(RankContext(run, Options()), ANALYSES)
    assert summary.ranks == (0, 1, 2, 3)
    steps = summary.parts["steps"].steps  # type: ignore[attr-defined]
    assert steps.height == 8 and sorted(steps["rank"].unique().to_list()) == [0, 1, 2, 3]


def test_every_cross_rank_part_returns_its_declared_type() -> None:
    reduced = run_analysis(synthetic_run(3, steps=2, kernels=3)).frames
    for entry in ANALYSES:
        if entry.cross_rank is not None and entry.result is not None:
            value = reduced.results[entry.name]
            assert value is None or isinstance(value, entry.result), entry.name


def test_an_entry_reads_only_what_it_requires_even_when_the_order_allows_more() -> None:
    """A read the order happens to allow, undeclared, is an error: the order carries no dependency."""
    run = synthetic_run(2, steps=2, kernels=3)
    first = Entry("first", cross_rank=lambda red: 1)
    sneaky = Entry("sneaky", cross_rank=lambda red: red.result("first") + 1)  # first ran, but is not required
    with pytest.raises(KeyError, match="'first' is read by an entry that does not require it"):
        reduce_ranks([map_ranks(RankContext(run, Options()), [])], Options(), [first, sneaky], run.meta)
    through = Entry(
        "through", cross_rank=lambda red: red.result(first) + 2, requires=(Entry("middle", requires=(first,)),)
    )
    reduced = reduce_ranks([map_ranks(RankContext(run, Options()), [])], Options(), [through], run.meta)
    assert reduced.result(through) == 3 and reduced.result("first") == 1  # required through another; all after


def test_the_core_loads_no_analysis_even_through_what_it_imports() -> None:
    """import-linter's contract counts direct imports; this counts what importing the core loads."""
    config = configparser.ConfigParser()
    config.read(Path(__file__).parents[2] / ".importlinter")
    contract = config["importlinter:contract:core-knows-no-analysis"]
    forbidden = contract["forbidden_modules"].split()
    core = contract["source_modules"].split()
    code = f"import sys; import {', '.join(core)}; print(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert set(core) <= loaded and len(forbidden) > 10
    assert not loaded & set(forbidden)
