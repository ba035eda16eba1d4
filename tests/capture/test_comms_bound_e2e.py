"""End to end: a gradient-heavy DDP run on 4 gloo ranks, whose backward waits on the
gradient all-reduce: that waiting is communication in the host breakdown, not idle."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import polars as pl
import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers import timeline
from tracekit.analyzers.breakdown import gpu_breakdown
from tracekit.analyzers.steps import analyze_steps, gpu_activity
from tracekit.readers import load_run

if TYPE_CHECKING:
    from tracekit.model.run import Run

pytest.importorskip("torch")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.e2e

RANKS = 4
FEW_STEPS = ["--warmup_steps=1", "--measured_steps=3", "--profiler.warmup=0", "--profiler.active=2"]


@pytest.fixture(scope="module")
def grad_heavy(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``samples/configs/comms_bound.json`` (~21.5M parameters, batch 2) captured once on 4 ranks."""
    out = tmp_path_factory.mktemp("comms_bound")
    config = SAMPLES / "configs" / "comms_bound.json"
    command = ["capture", "--config_path", str(config), "--nproc", str(RANKS), "--out_dir", str(out), *FEW_STEPS]
    result = subprocess.run(
        [sys.executable, "-m", "tracekit", *command], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr + result.stdout
    return load_run([out])


def breakdown(run: Run, frames: pl.DataFrame | None = None) -> pl.DataFrame:
    """Host breakdown per rank over the step windows, or over ``frames``."""
    activity = timeline.host_activity(run)
    if frames is None:
        frames = timeline.windows(activity, analyze_steps(run, activity=gpu_activity(run)))
    return gpu_breakdown(timeline.segments(activity, frames)).per_rank


def test_every_rank_waits_on_the_gradient_all_reduce(grad_heavy: Run) -> None:
    assert grad_heavy.world_size == RANKS and grad_heavy.backend == "gloo"
    waits = timeline.host_activity(grad_heavy).filter(pl.col("name") == timeline.COLLECTIVE_WAIT)
    assert sorted(waits["rank"].unique().to_list()) == list(range(RANKS))


def test_backward_is_compute_or_communication_not_idle(grad_heavy: Run) -> None:
    # inside backward the training thread computes gradients or waits for their all-reduce
    threads = timeline.training_threads(grad_heavy)
    columns = ("rank", "pid", "tid", "start_ns", "end_ns")
    frames = (
        grad_heavy.select(["annotation"], *columns, name=r"^tracekit\.phase/backward$")
        .join(threads, on=["rank", "pid", "tid"], how="semi")
        .select("rank", pl.int_range(pl.len(), dtype=pl.Int64).alias("step"), "start_ns", "end_ns")
    )
    per_rank = breakdown(grad_heavy, frames)
    assert per_rank.height == RANKS
    assert (per_rank["comm_pct"] > 25).all(), per_rank
    # The wait is 55-75% of backward: read as idle, it would outweigh communication. A thread
    # preempted on a loaded machine leaves gaps with nothing recorded, which are idle (under 1%
    # on a quiet machine, 15.6% on one rank in one loaded CI run), so not a fixed few percent
    assert (per_rank["idle_pct"] < per_rank["comm_pct"] / 2).all(), per_rank


def test_the_all_reduce_is_a_large_share_of_every_step(grad_heavy: Run) -> None:
    # 35-56% measured on a 2-core machine under varying load (compute 40-57%)
    per_rank = breakdown(grad_heavy)
    assert (per_rank["comm_pct"] > 20).all(), per_rank


@pytest.mark.xfail(
    strict=False,
    reason="operators slowed by CPU contention (ranks and gloo threads outnumbering cores) "
    "read as compute: the trace has no CPU time to tell running from preempted",
)
def test_communication_is_the_largest_share(grad_heavy: Run) -> None:
    per_rank = breakdown(grad_heavy)
    assert per_rank["comm_ns"].sum() > per_rank["compute_ns"].sum(), per_rank
