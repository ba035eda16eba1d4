"""Communication beyond names on the real traces: it finds the NCCL kernels, and nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl
import pytest

from tracekit.model import classify
from tracekit.model.by_kind import ROW
from tracekit.model.comm_evidence import KERNEL_COLUMNS, frame_select, kernels_of, launched_in_comm
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.real


@pytest.mark.parametrize(
    ("folder", "launched"),
    [
        ("kineto/param-dlrm-8rank-v100", 64),  # 5 all-to-all + 3 all-reduce on each of 8 ranks
        ("kineto/hta-misc/nccl-rank0-world2.json.gz", 21),
        ("nsys/nsysai-mfu-2gpu-before.sqlite", 64),  # c10d:: NVTX ranges (emit_nvtx)
    ],
)
def test_launching_host_op_finds_exactly_the_nccl_kernels(shared_traces: Path, folder: str, launched: int) -> None:
    run = load_run([shared_traces / folder], use_cache=False)
    kernels = kernels_of(run.events)
    rows = launched_in_comm(frame_select(run.events), kernels)
    found = kernels.filter(pl.col("_row").is_in(rows.implode()))
    assert found.height == launched
    # read a kind at a time (as the run is classified), the same kernels
    part = run.by_kind.parts["kernel"].select(ROW, *KERNEL_COLUMNS)
    assert launched_in_comm(run.by_kind.select, part).sort().to_list() == rows.sort().to_list()
    assert found["name"].cast(pl.String).str.contains("^nccl").all()
    # classify_held (inside load_run) changed nothing that names had not already decided
    assert run.events["category"].equals(classify(run.events)["category"])
