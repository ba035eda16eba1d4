"""The benchmark's trace generator makes traces that tracekit (and HTA) read as one job.

No timing here: the benchmark itself runs by hand (see benchmarks/README.md).
"""

from __future__ import annotations

import gzip
import re
from typing import TYPE_CHECKING

import polars as pl
import pytest

from benchmarks.generate import DENSE_BUCKETS, SHAPES, Spec, _copy, dense_source, describe, generate
from tracekit.analyzers import run_analysis
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.real


@pytest.fixture
def source(shared_traces: Path) -> str:
    return str(shared_traces / "kineto" / "hta-trace-diff" / "control-rank3-a100.json.gz")


def test_small_multi_rank_traces_read_as_one_job(tmp_path: Path, source: str) -> None:
    spec = Spec(ranks=2, mb_per_rank=0.5, source=source)
    folder = generate(spec, tmp_path)
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["rank0.json.gz", "rank1.json.gz"]
    head = gzip.decompress((folder / "rank1.json.gz").read_bytes()).split(b'"traceEvents"')[0].decode()
    assert re.findall(r'"rank":\s+(\d+)', head) == ["1"]  # HTA finds the rank with this pattern
    run = load_run([folder], use_cache=False)
    assert run.rank_ids == [0, 1] and run.world_size == 2 and run.backend == "nccl"
    assert run.events.filter(rank=0).drop("rank").equals(run.events.filter(rank=1).drop("rank"))
    json_bytes = describe(spec, tmp_path)["json_bytes"]
    assert all(400_000 < b < 1_000_000 for b in json_bytes)
    modified = (folder / "rank0.json.gz").stat().st_mtime_ns
    assert generate(spec, tmp_path) == folder  # reused, not written again
    assert (folder / "rank0.json.gz").stat().st_mtime_ns == modified


def test_copies_follow_in_time_with_unique_ids_and_steps(tmp_path: Path, source: str) -> None:
    folder = generate(Spec(ranks=1, mb_per_rank=40, source=source), tmp_path)  # 1 copy and a part
    events = load_run([folder], use_cache=False).events
    steps = events.filter(kind="step").sort("start_ns")
    names = steps["name"].cast(pl.String).to_list()
    assert len(names) > 6 and len(set(names)) == len(names)
    assert names[:7] == [f"ProfilerStep#{n}" for n in range(1009, 1016)]
    assert (steps["start_ns"].diff().drop_nulls() > 0).all()
    launches = events.filter(pl.col("kind") == "runtime", pl.col("correlation").is_not_null())
    assert launches["correlation"].n_unique() == launches.height
    kernels = events.filter(kind="kernel")
    assert kernels.join(launches, on="correlation", how="anti").height == 0  # every kernel has its launch


@pytest.mark.usefixtures("shared_traces")
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_tiles_into_one_rank_with_distinct_steps_and_ids(tmp_path: Path, shape: str) -> None:
    """Each trace shape the benchmarks tile (``--shape``): two copies and a part, read as one
    rank whose steps follow in time, with every launch's correlation id its own. (The shapes are
    shared traces: without ../shared this skips, or fails in CI, as every shared-trace test.)"""
    source = SHAPES[shape]
    one = len(gzip.decompress(source.read_bytes()) if source.name.endswith(".gz") else source.read_bytes())
    spec = Spec(ranks=1, mb_per_rank=2.5 * one / 1e6, source=str(source))
    assert spec.name.startswith(source.parent.name if shape != "a100" else "control-rank3-a100")
    events = load_run([generate(spec, tmp_path)], use_cache=False).events
    steps = events.filter(kind="step").sort("start_ns")
    names = steps["name"].cast(pl.String).to_list()
    assert len(names) >= 3 and len(set(names)) == len(names)
    assert (steps["start_ns"].diff().drop_nulls() > 0).all()
    launches = events.filter(pl.col("kind") == "runtime", pl.col("correlation").is_not_null())
    assert launches.height and launches["correlation"].n_unique() == launches.height


def test_the_dense_shape_holds_ten_matched_collectives_a_step_in_2_kb(tmp_path: Path) -> None:
    """The ``dense`` shape (scale_ranks' points of many instances): every step's all-reduces
    matched across the ranks, each kernel with its launch, about 560 instances a MB."""
    source = dense_source(tmp_path / "dense" / "rank0.json")
    folder = generate(Spec(ranks=2, mb_per_rank=0.3, source=str(source), world_size=2), tmp_path)
    run = load_run([folder], use_cache=False)
    events = run.events.filter(rank=0)
    steps = events.filter(kind="step")["name"].cast(pl.String).to_list()
    assert len(steps) > 12 and len(set(steps)) == len(steps)
    kernels = events.filter(kind="kernel")
    launches = events.filter(pl.col("kind") == "runtime", pl.col("correlation").is_not_null())
    assert kernels.join(launches, on="correlation", how="anti").height == 0
    collectives = run_analysis(run).analysis.collectives
    assert collectives.match == "complete" and collectives.ranks_present == 2
    # the last copy is cut short: between the whole steps' buckets and one step's more
    assert DENSE_BUCKETS * (len(steps) - 1) <= collectives.count <= DENSE_BUCKETS * len(steps)
    assert 450 < collectives.count / 0.3 < 650


def test_stack_events_ids_are_offset_per_copy() -> None:
    stack = {"ph": "X", "cat": "python_function", "name": "f", "ts": 5, "args": {"Python id": 7, "Python parent id": 3}}
    [copy] = _copy([stack], 2, shift=100, id_offset=1000, step_offset=1)
    assert copy["ts"] == 205 and copy["args"] == {"Python id": 2007, "Python parent id": 2003}
