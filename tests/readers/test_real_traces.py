"""The reader on the real traces in ../shared/traces/kineto."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl
import pytest

from tracekit.errors import InputError
from tracekit.model.run import RankFound
from tracekit.readers import load_run, read_kineto

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.real


def test_every_shared_kineto_file_reads(kineto_dir: Path) -> None:
    files = sorted(p for p in kineto_dir.rglob("*") if p.name.endswith((".json", ".json.gz")))
    assert len(files) >= 20
    for path in files:
        trace = read_kineto(path)
        assert trace.events.height > 0, path
        assert trace.events["start_ns"].null_count() == 0, path
        assert (trace.events["end_ns"] >= trace.events["start_ns"]).all(), path
        assert trace.counters.height == 0, path  # none was recorded with profile_memory=True


def test_dlrm_8_ranks(kineto_dir: Path) -> None:
    run = load_run([kineto_dir / "param-dlrm-8rank-v100"])
    assert run.rank_ids == list(range(8))
    assert run.world_size == 8
    assert run.backend == "nccl"
    assert run.devices == ["Tesla V100-SXM2-32GB"]
    # each rank's deviceProperties lists the node's 8 devices with their capacity (32 GB V100s)
    assert {r.device_memory for r in run.ranks} == {tuple((d, 34079899648) for d in range(8))}
    assert run.warnings == ()
    coll = run.events.filter(pl.col("kind") == "kernel", pl.col("category") == "collective")
    assert dict(coll.group_by("rank").len().iter_rows()) == dict.fromkeys(range(8), 8)
    steps = run.events.filter(kind="step")
    assert dict(steps.group_by("rank").len().iter_rows()) == dict.fromkeys(range(8), 1)


def test_hta_sampled_2_ranks(kineto_dir: Path) -> None:
    run = load_run([kineto_dir / "hta-sampled-2rank"])
    assert run.rank_ids == [0, 1]
    assert run.world_size == 128
    coll = run.events.filter(pl.col("kind") == "kernel", pl.col("category") == "collective")
    assert dict(coll.group_by("rank").len().iter_rows()) == {0: 10, 1: 10}


def test_folders_mixing_jobs_are_refused(kineto_dir: Path) -> None:
    with pytest.raises(InputError, match="different jobs"):
        load_run([kineto_dir / "hta-trace-diff"])
    with pytest.raises(InputError, match="two files claim rank 0"):
        load_run([kineto_dir / "hta-misc"])


def test_legacy_schema_and_cpu_only(kineto_dir: Path) -> None:
    legacy = load_run([kineto_dir / "tbplugin-resnet50-workers0"])
    assert legacy.ranks[0].rank_source == RankFound("file_name")
    assert legacy.events.filter(kind="step").height == 6
    assert legacy.has_gpu
    cpu = load_run([kineto_dir / "hta-misc" / "cpu-only-gloo-rank34.pt.trace.json.gz"])
    assert cpu.rank_ids == [34] and cpu.backend == "gloo" and not cpu.has_gpu


def test_amd_and_triton_kernels(kineto_dir: Path) -> None:
    amd = load_run([kineto_dir / "hta-misc" / "amd-mi250-rocm.json.gz"])
    assert amd.events.filter(kind="kernel").height == 14
    assert amd.ranks[0].device_memory == tuple((d, 68702699520) for d in range(4))  # ROCm: 4 x 64 GiB
    triton = load_run([kineto_dir / "hta-misc" / "triton-kernel.json.gz"])
    assert triton.events.filter(kind="kernel")["category"].to_list() == ["compute"]
