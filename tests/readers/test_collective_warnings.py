"""The warning that a distributed GPU run has no communication kernel: where it is a bug
(NCCL kernels not recognized), and where no kernel is expected (a host backend, one rank)."""

from __future__ import annotations

import polars as pl
import pytest

from tests.factories import ev, make_run, said
from tracekit.model.run import RankInfo
from tracekit.readers.load import collective_counts, collective_warnings


def counts(*, gpu: int = 100, coll_kernels: int = 0, coll_host: int = 9) -> pl.DataFrame:
    return pl.DataFrame({"rank": [0], "gpu": [gpu], "coll_kernels": [coll_kernels], "coll_host": [coll_host]})


@pytest.mark.parametrize(
    ("backend", "world_size", "warned"),
    [
        ("nccl", 8, True),  # kernels of a library the taxonomy does not know: communication reads as zero
        (None, 8, True),
        (None, None, True),  # host collectives, world unknown
        ("gloo", 2, False),  # gloo with CUDA tensors: the CPU reduces, the GPU copies (seen on an H200)
        ("mpi", 4, False),
        ("nccl", 1, False),  # a group of one: NCCL's all-reduce is one Memcpy DtoD (seen on an H200)
    ],
)
def test_a_run_without_communication_kernels_is_warned_about_only_where_they_were_due(
    backend: str | None, world_size: int | None, warned: bool
) -> None:
    info = RankInfo(rank=0, source="rank0.json", world_size=world_size, backend=backend)
    out = collective_warnings([info], counts())
    assert bool(out) == warned
    if warned:
        [words] = said(out)
        assert words.startswith("rank 0: distributed run") and "--comm-kernel REGEX" in words


def test_recognized_kernels_or_no_gpu_mean_no_warning() -> None:
    info = RankInfo(rank=0, source="rank0.json", world_size=8, backend="nccl")
    assert collective_warnings([info], counts(coll_kernels=9)) == []
    assert collective_warnings([info], counts(gpu=0)) == []


def test_collective_counts_per_rank() -> None:
    """Worked by hand: GPU activities, collective kernels and host collectives, and the distinct
    step numbers of the step markers only (another event's ``#9`` is not a step)."""
    run = make_run(
        [
            ev("step", "ProfilerStep#3", 0, 10),
            ev("step", "ProfilerStep#4", 10, 20),
            ev("step", "ProfilerStep#4", 20, 30),  # the same step twice: one number
            ev("step", "ProfilerStep", 30, 40),  # no number
            ev("cpu_op", "aten::mm#9", 1, 2),
            ev("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2, 3),
            ev("kernel", "ampere_sgemm_128x64_nn", 3, 4),
            ev("cpu_op", "c10d::allreduce_", 1, 3),
            ev("step", "ProfilerStep#7", 0, 10, rank=1),
            ev("memcpy", "Memcpy HtoD (Pageable -> Device)", 1, 2, rank=1),
        ]
    )
    got = {row["rank"]: row for row in collective_counts(run.by_kind).iter_rows(named=True)}
    assert got[0] == {"rank": 0, "gpu": 2, "coll_kernels": 1, "coll_host": 1, "steps": 2}
    assert got[1] == {"rank": 1, "gpu": 1, "coll_kernels": 0, "coll_host": 0, "steps": 1}
    # a shard of one rank is counted without grouping: the same row, the same types
    alone = run.only([0]).by_kind
    assert collective_counts(alone).equals(collective_counts(run.by_kind).filter(pl.col("rank") == 0))
