"""Inferred steps on real traces: strip the ``ProfilerStep#N`` ranges and find them again.

Tolerances, from what the host does between a profiler step's start and the anchor:

* a DataLoader fetch starts 40-56 us after its ``ProfilerStep`` (the profiler's own step
  bookkeeping runs first): 100 us, under 0.1% of these 108-168 ms steps;
* an ``Optimizer.step`` ends 12-91 us before its ``ProfilerStep`` does: 150 us;
* ``## forward ##`` starts 0.3-2.2 ms after its step (after ``## load_batch ##`` and the
  sparse data distribution): 3 ms, under 4% of these 75-166 ms steps.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import polars as pl
import pytest

from tracekit.analyzers import analyze_steps, run_analysis
from tracekit.analyzers.mapreduce import Reduced
from tracekit.readers import load_run
from tracekit.results.vocab import StepSource

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.model import Run

pytestmark = pytest.mark.real
US, MS = 1_000, 1_000_000


def strip(run: Run, names: str | None = None) -> Run:
    """``run`` without its step markers (and without events whose name matches ``names``)."""
    events = run.events.filter(pl.col("kind") != "step")
    if names is not None:
        events = events.filter(~pl.col("name").cast(pl.String).str.contains(names))
    return dataclasses.replace(run, events=events)


def markers(run: Run) -> pl.DataFrame:
    return run.events.filter(kind="step").sort("start_ns")


def last_host_end(run: Run, step: dict[str, int]) -> int:
    """The end of the last operator or runtime call inside ``step`` on its thread."""
    inside = run.events.filter(
        pl.col("kind").is_in(["cpu_op", "runtime"]),
        pl.col("tid") == step["tid"],
        pl.col("start_ns") >= step["start_ns"],
        pl.col("end_ns") <= step["end_ns"],
    )
    return int(inside["end_ns"].max())  # type: ignore[arg-type]


def fetch_share(analysis: Reduced) -> list[float]:
    per_step = analysis.dataloader.per_step
    return (100 * per_step["fetch_ns"] / per_step["window_ns"]).to_list()


@pytest.mark.parametrize(
    ("folder", "fetch_low", "fetch_high"),
    [("tbplugin-resnet50-workers0", 26.0, 40.0), ("tbplugin-resnet50-workers4", 0.0, 3.0)],
)
def test_dataloader_steps_line_up_with_profiler_steps(
    kineto_dir: Path, folder: str, fetch_low: float, fetch_high: float
) -> None:
    run = load_run([kineto_dir / folder])
    found, inferred = run_analysis(run).frames, run_analysis(strip(run)).frames
    assert inferred.steps.sources == {0: StepSource.DATALOADER}
    assert inferred.steps.warmup.height == 0
    steps, truth = inferred.steps.steps, markers(run)
    assert steps.height == truth.height == 6
    lead = (steps["start_ns"] - truth["start_ns"]).to_list()
    assert all(0 <= d <= 100 * US for d in lead), lead
    # the last one ends at the last host work of the iteration (the profiler's step may run on)
    assert steps["end_ns"][-1] == last_host_end(run, truth.row(-1, named=True))
    # the DataLoader share of the steady state is unchanged
    assert all(fetch_low <= s <= fetch_high for s in fetch_share(inferred)), fetch_share(inferred)
    share = inferred.dataloader.per_rank["share_pct"][0]
    assert share == pytest.approx(found.dataloader.per_rank["share_pct"][0], abs=0.1)
    assert inferred.verdict.primary.bound == found.verdict.primary.bound


@pytest.mark.parametrize("path", ["hta-misc/nccl-rank0-world2.json.gz", "tracelens-mi300-resnet-actckpt/rank0.json.gz"])
def test_optimizer_steps_line_up_with_profiler_steps(kineto_dir: Path, path: str) -> None:
    run = load_run([kineto_dir / path])
    result = analyze_steps(strip(run))
    assert result.sources == {0: StepSource.OPTIMIZER}
    steps, truth = result.all_steps, markers(run)
    assert steps.height == truth.height == 3
    early = (truth["end_ns"] - steps["end_ns"]).to_list()
    assert all(0 <= d <= 150 * US for d in early), early
    assert result.warmup.height == 0


@pytest.mark.parametrize(
    "path", ["hta-trace-diff/control-rank3-a100.json.gz", "hta-trace-diff/test-rank1-v100.json.gz"]
)
def test_annotation_steps_line_up_with_profiler_steps(kineto_dir: Path, path: str) -> None:
    run = load_run([kineto_dir / path])
    bare = strip(run, names=r"(?i)dataloader|^Optimizer\.")
    found, inferred = run_analysis(run).frames, run_analysis(bare).frames
    assert inferred.steps.sources == {found.steps.steps["rank"][0]: StepSource.ANNOTATION}
    assert inferred.steps.how_found["anchor"].to_list() == ["## forward ##"]
    steps, truth = inferred.steps.steps, markers(run)
    assert steps.height == truth.height == 6
    lead = (steps["start_ns"] - truth["start_ns"]).to_list()
    assert all(0 <= d <= 3 * MS for d in lead), lead
    assert inferred.verdict.primary.bound == found.verdict.primary.bound


@pytest.mark.parametrize(
    "path",
    [
        "nsys/nsysai-mfu-2gpu-before.sqlite",  # emit_nvtx operators, FlashAttnFunc recurring per layer
        "nsys/nsysai-mfu-2gpu-after.sqlite",
        "nsys/pipit-saxpy-mpi-a100-oldschema.sqlite",  # MPI_Recv ranges
        "kineto/hta-misc/cpu-only-gloo-rank34.pt.trace.json.gz",  # gloo:all_reduce ranges
        "kineto/hta-sampled-2rank/sampled_rank-1.json.gz",  # nccl:all_reduce ranges
    ],
)
def test_no_steps_from_structure_that_is_not_iterations(shared_traces: Path, path: str) -> None:
    result = analyze_steps(strip(load_run([shared_traces / path])))
    assert set(result.sources.values()) == {StepSource.NONE}
    assert not result.has_steps


@pytest.mark.parametrize(
    "path",
    [
        "tracelens-mi300-resnet-actckpt/rank0.json.gz",  # the GPU runs 50 ms behind the host
        "hta-misc/ns-resolution-rank0.pt.trace.json.gz",  # a short first step
        "hta-trace-diff/test-rank1-v100.json.gz",  # steps of 82 to 166 ms
    ],
)
def test_no_warmup_in_steady_real_runs(kineto_dir: Path, path: str) -> None:
    result = analyze_steps(load_run([kineto_dir / path]))
    assert result.sources == dict.fromkeys(result.sources, StepSource.PROFILER_STEP)
    assert result.warmup.height == 0
    assert result.steps.height == result.all_steps.height
